"""One side of the hook_save_path benchmark, run in its own process against one source tree's sdk_ext
(PYTHONPATH). Prints one JSON document on the last stdout line.

Usage: python _hook_save_path_worker.py --out DIR [--steps N]

It reads one line per round from stdin and answers each with one JSON line (the round's CPU and wall
time per step, per model), so that a driver can alternate rounds between two processes (two source trees)
that then meet the same load; an empty line ends it.

The PyTorch hook's own work per save-all step, without the training's compute around it: the hook
callbacks torch would call, called directly (the model's forward pre-hook, which closes the last step,
opens this one and saves weights and biases; then the gradient saver for each parameter with a fixed
gradient), on hook_overhead's MLP and CNN (weights, biases, gradients every step). What is timed is the
calling thread's CPU time (``time.thread_time``), so another process on the core moves it far less than
it moves a training step; the wall time is reported too (it includes waiting for the writer's thread).
"""

import argparse
import json
import os
import sys
import time

import torch
from _hook_worker import MODELS  # hook_overhead's MLP and CNN (this script's directory is on sys.path)


def setup(kind, out):
    from sdk_ext.pytorch import Hook, SaveConfig

    torch.manual_seed(0)
    model = MODELS[kind]()
    hook = Hook(out, save_config=SaveConfig(save_interval=1), include_collections=["weights", "biases", "gradients"])
    hook.register_module(model)
    # the hook's callbacks, as torch calls them (its internals: this measures them alone)
    grads = [("gradient/" + name, torch.randn_like(p)) for name, p in hook._params]
    forward_pre, save_gradient = hook._forward_pre, hook._save_gradient

    def step():
        forward_pre(model, None)
        for name, grad in grads:
            save_gradient(name, grad)

    for _ in range(30):  # warm-up: first files, caches
        step()
    return hook, step


def timed(step, steps):
    c0, w0 = time.thread_time(), time.perf_counter()
    for _ in range(steps):
        step()
    return {"cpu": (time.thread_time() - c0) / steps, "wall": (time.perf_counter() - w0) / steps}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=150)
    args = p.parse_args()
    torch.set_num_threads(1)
    setups = {kind: setup(kind, os.path.join(args.out, kind)) for kind in MODELS}
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            break
        print(json.dumps({kind: timed(step, args.steps) for kind, (_, step) in setups.items()}), flush=True)
    for hook, _ in setups.values():
        hook.close()


if __name__ == "__main__":
    main()
