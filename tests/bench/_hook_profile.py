"""A CNN training loop with the save-all hook, to profile the hook's write path (not a benchmark).

    python -m tests.bench._hook_profile --steps 1500 [--impl sdk_ext|smdebug] [--dir /tmp] [--no-hook]
    strace -f -c python -m tests.bench._hook_profile --steps 1500   # minus a --steps 500 run: per-step calls

The model, data and hook config are hook_overhead's CNN "save_all" (weights, biases, gradients every
step, one torch thread). Prints ms/step of the timed steps; the trial goes to a new directory under
``--dir`` and is removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--impl", choices=["sdk_ext", "smdebug"], default="sdk_ext")
    p.add_argument("--dir", default=tempfile.gettempdir(), help="where the trial is written")
    p.add_argument("--no-hook", action="store_true", help="the same loop without a hook")
    args = p.parse_args()

    import torch
    from torch import nn

    if args.impl == "sdk_ext":
        from sdk_ext.pytorch import Hook, SaveConfig
    else:
        from smdebug.pytorch import Hook, SaveConfig  # type: ignore[no-redef]
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 5 * 5, 10))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    root = tempfile.mkdtemp(prefix="sdk-ext-hook-profile-", dir=args.dir)
    hook = None
    if not args.no_hook:
        hook = Hook(os.path.join(root, "trial"), save_config=SaveConfig(save_interval=1),
                    include_collections=["weights", "biases", "gradients"])
        hook.register_module(model)
        hook.register_loss(loss_fn)
    g = torch.Generator().manual_seed(0)
    data = [(torch.randn(32, 1, 28, 28, generator=g), torch.randint(0, 10, (32,), generator=g)) for _ in range(25)]

    def run(n: int) -> float:
        start = time.perf_counter()
        for i in range(n):
            x, y = data[i % len(data)]
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        return (time.perf_counter() - start) / n

    try:
        run(25)  # warm-up
        print(f"{args.impl} {'no hook' if hook is None else 'save-all'} on {args.dir}: {run(args.steps) * 1e3:.3f} ms/step")
        if hook is not None:
            hook.close() if args.impl == "sdk_ext" else hook._cleanup()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
