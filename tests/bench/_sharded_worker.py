"""One rank of the sharded-save benchmark (tests/bench/sharded_overhead.py); started as torchrun would.

Usage: python _sharded_worker.py OUT_DIR LAYERS WIDTH STEPS BLOCKS

For each wrapper (DDP, FSDP2 with ``fully_shard`` on every layer and the model) it builds three copies of
the same MLP (LAYERS x Linear(WIDTH, WIDTH) + ReLU, batch 32): no hook, a hook with the default
configuration (losses every 500 steps), a hook saving everything every step (``save_all``;
include_workers "one"). Blocks of STEPS training steps (SGD) run for each copy in turn, BLOCKS times,
every rank starting each block together; rank 0 prints the seconds per step of each block as JSON
(wall time of rank 0; CPU time of all ranks together: ``cpu_<config>``; CPU time inside the hook, its
callbacks and the threads it started, of all ranks together: ``hook_<config>``),
and the seconds per step spent inside the hook's step-start callback in the default configuration
(on its quiet steps that callback is all the hook runs).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from sdk_ext.pytorch import Hook, SaveConfig

HOOK_CPU: dict[int, float] = {}  # id(hook) -> CPU seconds spent inside its callbacks (this process)
_DEPTH = [0]


def _cpu_timed(method: Any) -> Any:
    """``method`` (one of the hook's callbacks), adding the CPU time of its outermost calls to HOOK_CPU."""

    def timed(self: Hook, *args: Any, **kwargs: Any) -> Any:
        if _DEPTH[0]:
            return method(self, *args, **kwargs)
        _DEPTH[0] += 1
        start = time.thread_time()
        try:
            return method(self, *args, **kwargs)
        finally:
            _DEPTH[0] -= 1
            HOOK_CPU[id(self)] = HOOK_CPU.get(id(self), 0.0) + time.thread_time() - start

    return timed


for _name in dir(Hook):  # every callback torch or the training loop calls (the guarded methods)
    _attr = getattr(Hook, _name)
    if callable(_attr) and getattr(_attr, "__wrapped__", None) is not None and _attr.__code__.co_name == "wrapper":
        setattr(Hook, _name, _cpu_timed(_attr))
ORIGINAL_FORWARD_PRE = Hook._forward_pre


def thread_cpu(tid: int) -> float:
    """CPU seconds of thread ``tid`` of this process (0 once it has ended): Linux's per-thread CPU clock."""
    try:
        return time.clock_gettime(((~tid) << 3) | 6)
    except OSError:
        return 0.0


def build(layers: int, width: int, how: str) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(layers) for m in (nn.Linear(width, width), nn.ReLU())])
    if how == "ddp":
        return nn.parallel.DistributedDataParallel(model)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def timed_forward_pre(spent: list[float]) -> Any:
    """Hook._forward_pre, timing every call into ``spent``."""
    original = Hook._forward_pre

    def forward_pre(self: Hook, module: nn.Module, inputs: Any) -> None:
        start = time.perf_counter()
        original(self, module, inputs)
        spent.append(time.perf_counter() - start)

    return forward_pre


def main() -> None:
    out, layers, width, steps, blocks = sys.argv[1], *map(int, sys.argv[2:6])
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    g = torch.Generator().manual_seed(rank)
    x, y = torch.randn(32, width, generator=g), torch.randn(32, width, generator=g)
    loss_fn = nn.MSELoss()
    spent: list[float] = []
    configs = [("ddp", "none"), ("ddp", "default"), ("ddp", "save_all"),
               ("fsdp2", "none"), ("fsdp2", "default"), ("fsdp2", "save_all"), ("fsdp2", "save_all_gloo")]
    runs: dict[tuple[str, str], Any] = {}
    threads: dict[tuple[str, str], set[int]] = {}  # the threads each hook started (its gloo group's, its writer's)
    for how, config in configs:
        model = build(layers, width, how)
        hook = None
        existing = set(map(int, os.listdir("/proc/self/task")))
        if config != "none":
            kwargs = {"save_all": True, "save_config": SaveConfig(save_interval=1)} if config != "default" else {}
            if config == "default":
                Hook._forward_pre = timed_forward_pre(spent)  # type: ignore[method-assign]
            if config == "save_all_gloo":  # every piece through the gloo group, as between hosts
                os.environ["SDK_EXT_GATHER_TRANSPORT"] = "gloo"
            hook = Hook(str(Path(out) / f"{how}-{config}"), **kwargs)
            hook.register_module(model)  # registers the (possibly timed) _forward_pre; sets up the gather
            hook.register_loss(loss_fn)
            Hook._forward_pre = ORIGINAL_FORWARD_PRE  # type: ignore[method-assign]
            os.environ.pop("SDK_EXT_GATHER_TRANSPORT", None)
        threads[(how, config)] = set(map(int, os.listdir("/proc/self/task"))) - existing
        runs[(how, config)] = (model, torch.optim.SGD(model.parameters(), lr=1e-3), hook)

    def block(key: tuple[str, str], n: int) -> tuple[float, float, float]:
        """Wall seconds, this process's CPU seconds (its threads, gloo's included) and the CPU seconds
        of the hook (its callbacks and its threads) per step."""
        model, opt, hook = runs[key]
        dist.barrier()
        own = HOOK_CPU.get(id(hook), 0.0) + sum(thread_cpu(t) for t in threads[key])
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(n):
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        wall, used = time.perf_counter() - start, time.process_time() - cpu
        own = HOOK_CPU.get(id(hook), 0.0) + sum(thread_cpu(t) for t in threads[key]) - own
        return wall / n, used / n, own / n

    for key in configs:  # warm up (the first saved step, lazy init)
        block(key, 2)
    spent_default = {how: 0.0 for how, _ in configs}
    calls_default = {how: 0 for how, _ in configs}
    times: dict[tuple[str, str], list[float]] = {key: [] for key in configs}
    cpu: dict[tuple[str, str], list[float]] = {key: [] for key in configs}
    in_hook: dict[tuple[str, str], list[float]] = {key: [] for key in configs}
    for b in range(blocks):
        # every configuration of both wrappers in each block, in a rotating order: the machine's slow
        # phases (seconds long) then fall on every configuration alike, and a block's differences pair up
        order = configs[b % len(configs):] + configs[: b % len(configs)]
        for key in order:
            before = len(spent)
            wall, used, own = block(key, steps)
            in_hook[key].append(own)
            if key[1] == "default":
                spent_default[key[0]] += sum(spent[before:])
                calls_default[key[0]] += len(spent) - before
            times[key].append(wall)
            cpu[key].append(used)
    for _, _, hook in runs.values():
        if hook is not None:
            hook.close()
            assert hook.failure is None, hook.failure
    everyone: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, ({f"{h}/{c}": v for (h, c), v in cpu.items()},
                                      {f"{h}/{c}": v for (h, c), v in in_hook.items()}))
    result: dict[str, dict[str, list[float]]] = {"ddp": {}, "fsdp2": {}}
    for (how, config), wall_times in times.items():
        result[how][config] = wall_times
        # CPU seconds per step of the whole job: every rank's, block by block
        result[how][f"cpu_{config}"] = [sum(r[0][f"{how}/{config}"][b] for r in everyone) for b in range(blocks)]
        # CPU seconds per step inside the hook (callbacks and threads) of the whole job
        result[how][f"hook_{config}"] = [sum(r[1][f"{how}/{config}"][b] for r in everyone) for b in range(blocks)]
    for how in result:
        result[how]["hook_in_default"] = [spent_default[how] / max(calls_default[how], 1)]
    if rank == 0:
        print(json.dumps(result))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
