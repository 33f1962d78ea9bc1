"""One rank of the sharded-save benchmark (tests/bench/sharded_overhead.py); started as torchrun would.

Usage: python _sharded_worker.py OUT_DIR LAYERS WIDTH STEPS BLOCKS

For each wrapper (DDP, FSDP2 with ``fully_shard`` on every layer and the model) it builds three copies of
the same MLP (LAYERS x Linear(WIDTH, WIDTH) + ReLU, batch 32): no hook, a hook with the default
configuration (losses every 500 steps), a hook saving everything every step (``save_all``;
include_workers "one"). Blocks of STEPS training steps (SGD) run for each copy in turn, BLOCKS times,
every rank starting each block together; rank 0 prints the seconds per step of each block as JSON
(wall time of rank 0, and CPU time of all ranks together: ``cpu_<config>``),
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

ORIGINAL_FORWARD_PRE = Hook._forward_pre


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
    result: dict[str, dict[str, list[float]]] = {}
    spent: list[float] = []
    for how in ("ddp", "fsdp2"):
        runs = {}
        for config in ("none", "default", "save_all"):
            model = build(layers, width, how)
            hook = None
            if config != "none":
                kwargs = {"save_all": True, "save_config": SaveConfig(save_interval=1)} if config == "save_all" else {}
                if config == "default":
                    Hook._forward_pre = timed_forward_pre(spent)  # type: ignore[method-assign]
                hook = Hook(str(Path(out) / f"{how}-{config}"), **kwargs)  # type: ignore[arg-type]
                hook.register_module(model)  # registers the (possibly timed) _forward_pre
                hook.register_loss(loss_fn)
                Hook._forward_pre = ORIGINAL_FORWARD_PRE  # type: ignore[method-assign]
            runs[config] = (model, torch.optim.SGD(model.parameters(), lr=1e-3), hook)

        def block(config: str, n: int, runs: dict[str, Any] = runs) -> tuple[float, float]:
            """Wall seconds and this process's CPU seconds per step (its threads, gloo's included)."""
            model, opt, _ = runs[config]
            dist.barrier()
            start, cpu = time.perf_counter(), time.process_time()
            for _ in range(n):
                opt.zero_grad()
                loss_fn(model(x), y).backward()
                opt.step()
            return (time.perf_counter() - start) / n, (time.process_time() - cpu) / n

        for config in runs:  # warm up (the first saved step, lazy init)
            block(config, 2)
        spent.clear()
        times: dict[str, list[float]] = {c: [] for c in runs}
        cpu: dict[str, list[float]] = {c: [] for c in runs}
        for b in range(blocks):
            order = list(runs)[b % 3:] + list(runs)[: b % 3]  # rotate, so drift does not favour one config
            for config in order:
                wall, used = block(config, steps)
                times[config].append(wall)
                cpu[config].append(used)
        for _, _, hook in runs.values():
            if hook is not None:
                hook.close()
                assert hook.failure is None, hook.failure
        everyone: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, cpu)
        result[how] = times
        for config in runs:  # CPU seconds per step of the whole job: every rank's, block by block
            result[how][f"cpu_{config}"] = [sum(r[config][b] for r in everyone) for b in range(blocks)]
        result[how]["hook_in_default"] = [sum(spent) / max(len(spent), 1)]
    if rank == 0:
        print(json.dumps(result))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
