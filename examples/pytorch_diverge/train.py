"""A small PyTorch regression that trains well, then goes wrong on purpose.

Full-batch gradient descent on synthetic data (no download), with a short validation pass (two
batches of held-out data, no gradients) after every ``--eval-every`` training steps. The training and
validation losses fall steadily until training step ``--diverge-at``, where the learning rate jumps to
``--bad-lr``; the weights blow up and within a few steps the loss and gradients are inf, then NaN.
``--step-time`` paces the training steps like a real model.

The Debugger hook is created the SageMaker way, from the job's debughookconfig.json (its path in
``SMDEBUG_CONFIG_FILE_PATH``): ``sdk_ext.pytorch.Hook.create_from_json_file()``, and told which phase
runs with ``hook.set_mode(ModeKeys.TRAIN / ModeKeys.EVAL)``; each forward pass of the model is a step
(global steps count both phases, each mode counts its own). Without that file the script trains without
a hook. Run it as a local job::

    sdk-ext run examples/pytorch_diverge/train.py --rule ExplodingTensor --collection weights \\
        --collection gradients --collection losses --save-interval 1 --report
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000, help="training steps")
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--diverge-at", type=int, default=40, help="training step of the learning-rate jump (-1: never)")
    parser.add_argument("--bad-lr", type=float, default=1e4)
    parser.add_argument("--eval-every", type=int, default=5, help="a validation pass after every N training steps")
    parser.add_argument("--step-time", type=float, default=0.02, help="seconds each training step takes at least")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    true_w = torch.randn(16, 1)
    x = torch.randn(256, 16)
    y = x @ true_w + 0.1 * torch.randn(256, 1)
    x_val = torch.randn(128, 16)
    y_val = x_val @ true_w + 0.1 * torch.randn(128, 1)
    val_batches = list(zip(x_val.split(64), y_val.split(64)))
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)

    hook = None
    if os.path.isfile(os.environ.get("SMDEBUG_CONFIG_FILE_PATH", "/opt/ml/input/config/debughookconfig.json")):
        from sdk_ext.pytorch import Hook

        hook = Hook.create_from_json_file()
        hook.register_module(model)
        hook.register_loss(loss_fn)

    def set_mode(mode: str) -> None:
        if hook is not None:
            from sdk_ext.pytorch import ModeKeys

            hook.set_mode(ModeKeys[mode])

    finite = True
    for step in range(args.steps):
        started = time.monotonic()
        if step == args.diverge_at:
            print(f"step {step}: learning rate jumps from {args.lr} to {args.bad_lr}", flush=True)
            for group in optimizer.param_groups:
                group["lr"] = args.bad_lr
        set_mode("TRAIN")
        model.train()
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        if step % 10 == 0 or finite != bool(torch.isfinite(loss)):
            print(f"step {step}: loss {loss.item():.6g}", flush=True)
            finite = bool(torch.isfinite(loss))
        if args.eval_every > 0 and (step + 1) % args.eval_every == 0:
            set_mode("EVAL")
            model.eval()
            with torch.no_grad():
                val_loss = sum(loss_fn(model(xb), yb).item() for xb, yb in val_batches) / len(val_batches)
            if (step + 1) % (2 * args.eval_every) == 0:
                print(f"step {step}: validation loss {val_loss:.6g}", flush=True)
        time.sleep(max(0.0, args.step_time - (time.monotonic() - started)))
    if hook is not None:
        hook.close()
    print("training finished", flush=True)


if __name__ == "__main__":
    main()
