"""A small PyTorch regression that trains well, then goes wrong on purpose.

Full-batch gradient descent on synthetic data (no download): the loss falls steadily until step
``--diverge-at``, where the learning rate jumps to ``--bad-lr``; the weights blow up and within a few
steps the loss and gradients are inf, then NaN. ``--step-time`` paces the steps like a real model.

The Debugger hook is created the SageMaker way, from the job's debughookconfig.json (its path in
``SMDEBUG_CONFIG_FILE_PATH``): ``sdk_ext.pytorch.Hook.create_from_json_file()``. Without that file the
script trains without a hook. Run it as a local job::

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
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--diverge-at", type=int, default=40, help="step of the learning-rate jump (-1: never)")
    parser.add_argument("--bad-lr", type=float, default=1e4)
    parser.add_argument("--step-time", type=float, default=0.02, help="seconds each step takes at least")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    x = torch.randn(256, 16)
    y = x @ torch.randn(16, 1) + 0.1 * torch.randn(256, 1)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)

    hook = None
    if os.path.isfile(os.environ.get("SMDEBUG_CONFIG_FILE_PATH", "/opt/ml/input/config/debughookconfig.json")):
        from sdk_ext.pytorch import Hook

        hook = Hook.create_from_json_file()
        hook.register_module(model)
        hook.register_loss(loss_fn)

    finite = True
    for step in range(args.steps):
        started = time.monotonic()
        if step == args.diverge_at:
            print(f"step {step}: learning rate jumps from {args.lr} to {args.bad_lr}", flush=True)
            for group in optimizer.param_groups:
                group["lr"] = args.bad_lr
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        if step % 10 == 0 or finite != bool(torch.isfinite(loss)):
            print(f"step {step}: loss {loss.item():.6g}", flush=True)
            finite = bool(torch.isfinite(loss))
        time.sleep(max(0.0, args.step_time - (time.monotonic() - started)))
    if hook is not None:
        hook.close()
    print("training finished", flush=True)


if __name__ == "__main__":
    main()
