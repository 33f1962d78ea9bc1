"""One side of the hook benchmark, run in its own process: ``--impl sdk_ext`` (dev venv) or ``--impl smdebug``
(smdebug 1.0.34's venv with torch 2.13.0). Prints one JSON document on the last stdout line.

Usage: python _hook_worker.py --impl IMPL --out DIR [--steps-per-block N --blocks N --threads N]

Step time: a small MLP and a small CNN trained on CPU with SGD, three configs side by side, timed in
alternating blocks (none / default / save-all, rotating which goes first) so drift hits all alike:
``none`` = no hook; ``default`` = a hook with the default config (losses every 500 steps);
``save_all`` = weights, biases and gradients every step. Result per config: the median per-step
time over blocks, and the median over rounds of the ratio to ``none`` in the same round. Write throughput: ``write`` saves 8 float32 tensors of 1 MiB per step for 40 steps
(sdk_ext: Hook.save_tensor; smdebug: its FileWriter, which has no framework-free hook), timed up to
close(); the driver compares it with a raw write of the same files.
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
from torch import nn

MODELS = {
    "mlp": lambda: nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                                 nn.Linear(64, 10)),
    "cnn": lambda: nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3), nn.ReLU(),
                                 nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 5 * 5, 10)),
}
BATCH = {"mlp": 64, "cnn": 32}


def make_hook(impl, config, out):
    if config in ("none", "control"):  # control: a second hookless model, to show the noise floor
        return None
    if impl == "sdk_ext":
        from sdk_ext.pytorch import Hook, SaveConfig
    else:
        from smdebug.pytorch import Hook, SaveConfig
    if config == "default":
        return Hook(out)
    return Hook(out, save_config=SaveConfig(save_interval=1), include_collections=["weights", "biases", "gradients"])


def step_times(impl, kind, out, steps_per_block, blocks):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    data = [(torch.randn(BATCH[kind], 1, 28, 28, generator=g), torch.randint(0, 10, (BATCH[kind],), generator=g))
            for _ in range(steps_per_block)]
    setups = {}
    for config in ("none", "control", "default", "save_all"):
        torch.manual_seed(0)
        model, loss_fn = MODELS[kind](), nn.CrossEntropyLoss()
        hook = make_hook(impl, config, os.path.join(out, f"{kind}-{config}"))
        if hook is not None:
            hook.register_module(model)
            hook.register_loss(loss_fn)
        setups[config] = (model, loss_fn, torch.optim.SGD(model.parameters(), lr=0.01), hook)

    def run_block(config):
        model, loss_fn, opt, _ = setups[config]
        start = time.perf_counter()
        for x, y in data:
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        return (time.perf_counter() - start) / len(data)

    for config in setups:  # warm-up: first calls, allocator, files of step 0
        run_block(config)
    times = {c: [] for c in setups}
    order = list(setups)
    for b in range(blocks):
        for config in order[b % 4:] + order[: b % 4]:
            times[config].append(run_block(config))
    for _, _, _, hook in setups.values():
        if hook is not None:
            hook.close() if impl == "sdk_ext" else hook._cleanup()
    saved = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(os.path.join(out, f"{kind}-save_all"))
                for f in fs)
    steps_saved = (blocks + 1) * steps_per_block
    result = {c: statistics.median(v) for c, v in times.items()}
    # paired: each round ran the three configs back to back, so a ratio within a round cancels drift
    for config in ("control", "default", "save_all"):
        result[f"{config}_ratio"] = statistics.median(t / n for t, n in zip(times[config], times["none"]))
    result["save_all_bytes_per_step"] = saved / steps_saved
    return result


def raw_write(trial, dest):
    """The same files written plainly (open/write/close, same directories): the I/O floor."""
    files = []
    for root, _, names in os.walk(trial):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                files.append((os.path.relpath(path, trial), f.read()))
    start = time.perf_counter()
    for rel, data in files:
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(data)
    return time.perf_counter() - start, sum(len(d) for _, d in files)


def write_throughput(impl, out, repeats=3):
    """Best of ``repeats`` for the hook (or FileWriter) and for a raw write of the files it produced,
    alternating, with the page cache's dirty pages flushed (os.sync) before each timed write."""
    best, best_raw, file_bytes = float("inf"), float("inf"), 0
    for r in range(repeats):
        os.sync()
        best = min(best, timed_write(impl, os.path.join(out, f"hook{r}")))
        if impl == "sdk_ext":
            os.sync()
            seconds, file_bytes = raw_write(os.path.join(out, "hook0"), os.path.join(out, f"raw{r}"))
            best_raw = min(best_raw, seconds)
    result = {"seconds": best, "tensor_bytes": 40 * 8 * (1 << 20)}
    if impl == "sdk_ext":
        result |= {"raw_seconds": best_raw, "file_bytes": file_bytes}
    return result


def timed_write(impl, out, steps=40, tensors=8, size=1 << 18):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(size).astype(np.float32) for _ in range(tensors)]
    start = time.perf_counter()
    if impl == "sdk_ext":
        from sdk_ext.hooks import Hook, SaveConfig

        hook = Hook(out, save_config=SaveConfig(save_interval=1))
        for _ in range(steps):
            with hook.step():
                for i, a in enumerate(arrays):
                    hook.save_tensor(f"layer{i}/weight", a)
        hook.close()
    else:
        from smdebug.core.modes import ModeKeys
        from smdebug.core.writer import FileWriter

        for step in range(steps):
            writer = FileWriter(trial_dir=out, step=step, worker="worker_0", mode=ModeKeys.GLOBAL)
            for i, a in enumerate(arrays):
                writer.write_tensor(tdata=a, tname=f"layer{i}/weight", mode=ModeKeys.GLOBAL, mode_step=step)
            writer.close()
    return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--impl", choices=["sdk_ext", "smdebug"], required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--steps-per-block", type=int, default=25)
    p.add_argument("--blocks", type=int, default=12)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    result = {"impl": args.impl, "torch": torch.__version__, "numpy": np.__version__}
    for kind in ("mlp", "cnn"):
        result[kind] = step_times(args.impl, kind, args.out, args.steps_per_block, args.blocks)
    result["write"] = write_throughput(args.impl, os.path.join(args.out, "write"))
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())
