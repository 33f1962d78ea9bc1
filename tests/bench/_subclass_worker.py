"""One side of the hook-subclass benchmark, run in its own process: ``--impl sdk_ext`` or ``--impl smdebug``
(smdebug 1.0.34 with torch). Prints one JSON document on the last stdout line.

A small CNN (2 conv + BatchNorm + 1 linear, batch 32, 28x28) trained with SGD under four configs timed in
alternating blocks: ``none`` (no hook); ``control`` (a second hookless model: the noise floor); ``quiet`` (a class-activation-map style subclass whose ``forward_hook``
override runs after every module's forward, at a step that saves nothing); ``saved`` (the same subclass, every
step saved: each module's inputs and outputs through ``_write_inputs``/``_write_outputs``, and a
``backward_hook`` on each output, so their gradients too).
"""

import argparse
import json
import os
import statistics
import time

import torch
from torch import nn


def subclass(impl):
    if impl == "sdk_ext":
        import sdk_ext.pytorch as smd
    else:
        import smdebug.pytorch as smd

    class SaliencyHook(smd.Hook):
        def forward_hook(self, module, inputs, outputs):
            name = module._module_name
            self._write_inputs(name, inputs)
            if outputs.requires_grad:
                outputs.register_hook(self.backward_hook(name + "_output"))
            self._write_outputs(name, outputs)
            self.last_saved_step = self.step

    return smd, SaliencyHook


def model():
    return nn.Sequential(nn.Conv2d(1, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 5 * 5, 10))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--impl", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps-per-block", type=int, default=20)
    parser.add_argument("--blocks", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(1)
    smd, hook_class = subclass(args.impl)
    g = torch.Generator().manual_seed(0)
    data = [(torch.randn(32, 1, 28, 28, generator=g), torch.randint(0, 10, (32,), generator=g))
            for _ in range(args.steps_per_block)]
    setups = {}
    for config in ("none", "control", "quiet", "saved"):  # control: a second hookless model (the noise floor)
        torch.manual_seed(0)
        net, loss_fn = model(), nn.CrossEntropyLoss()
        hook = None
        if config in ("quiet", "saved"):
            save = smd.SaveConfig(save_interval=1) if config == "saved" else smd.SaveConfig(start_step=10**9)
            hook = hook_class(os.path.join(args.out, config), save_config=save, include_collections=["custom"])
            hook.get_collection("custom").include(["_input_", "_output"])
            hook.register_module(net)
            hook.register_loss(loss_fn)
        setups[config] = (net, loss_fn, torch.optim.SGD(net.parameters(), lr=0.01), hook)

    def run_block(config):
        net, loss_fn, opt, _ = setups[config]
        start = time.perf_counter()
        for x, y in data:
            opt.zero_grad()
            loss_fn(net(x), y).backward()
            opt.step()
        return (time.perf_counter() - start) / len(data)

    for config in setups:
        run_block(config)
    times = {c: [] for c in setups}
    ratios = {c: [] for c in setups}
    order = list(setups)
    for b in range(args.blocks):
        this = {}
        for config in order[b % 4:] + order[: b % 4]:
            this[config] = run_block(config)
            times[config].append(this[config])
        for config in setups:
            ratios[config].append(this[config] / this["none"])
    for _, _, _, hook in setups.values():
        if hook is not None:
            hook.close() if args.impl == "sdk_ext" else hook._cleanup()
    saved = os.path.join(args.out, "saved")
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(saved) for f in fs)
    steps = args.steps_per_block * (args.blocks + 1)
    print(json.dumps({c: {"ms": statistics.median(times[c]) * 1e3, "ratio": statistics.median(ratios[c])}
                      for c in setups} | {"saved_bytes_per_step": size / steps}))


if __name__ == "__main__":
    main()
