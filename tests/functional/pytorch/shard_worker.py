"""One rank of a multi-process job that trains several configurations of examples/fsdp_train in turn.

Usage (the environment holds RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, as torchrun sets them):
    python shard_worker.py SPEC.json

SPEC: {"out": ROOT, "variants": [VARIANT, ...]}, VARIANT:
    name      the trial goes to ROOT/<name>, this rank's losses to ROOT/<name>.losses.<rank>.json
    options   examples/fsdp_train Options fields (wrap, steps, compile, checkpoint, perturb_rank, ...)
    hook      Hook keywords (``save_interval`` for the SaveConfig, ``reduction_config`` as ReductionConfig
              keywords); absent: no hook
    env       environment variables set for this variant (SDK_EXT_GATHER_TIMEOUT, ...)
    cannot_attach  this rank cannot map the shared memory its group's leader made (as on another host)
    trace     record each point-to-point send of the hook (step, peer, bytes) in ROOT/<name>.trace.<rank>.json,
              and each header sent through shared memory's pipes in ROOT/<name>.told.<rank>.json
    fail      {"rank": R, "step": S}: rank R's writes fail from step S on (a full disk), which disables its hook
    dtensor   instead of training: one step of a module whose parameters are DTensors built from known
              values with these placements on a 1-D mesh of every rank ("Shard(1)", "Replicate()", ...)
One process group serves every variant, so the torch import and the rendezvous are paid once. A hook
that failed ends the job with an error unless the variant has "fail"; then each rank's failure goes to
ROOT/<name>.failure.<rank>.json.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "fsdp_train"))

import train as example  # noqa: E402

from sdk_ext.pytorch import Hook, ReductionConfig, SaveConfig, arena  # noqa: E402
from tests.functional.pytorch.launch import leave_past_last_barrier  # noqa: E402


def make_hook(root: Path, variant: dict[str, Any], rank: int) -> Hook | None:
    if variant.get("hook") is None:
        return None
    kwargs = dict(variant["hook"])
    kwargs["save_config"] = SaveConfig(save_interval=kwargs.pop("save_interval", 1))
    if "reduction_config" in kwargs:
        kwargs["reduction_config"] = ReductionConfig(**kwargs["reduction_config"])
    hook = Hook(str(root / variant["name"]), **kwargs)
    fail = variant.get("fail")
    if fail is not None and fail["rank"] == rank:
        write = hook._write

        def failing_write(*args: Any, **kw: Any) -> None:
            if hook.global_step >= fail["step"]:
                raise OSError(28, "No space left on device (test)")
            write(*args, **kw)

        hook._write = failing_write  # type: ignore[method-assign]
    return hook


def dtensor_step(hook: Hook, placements: list[str]) -> list[float]:
    """Parameters distributed from arange tensors (placements by name); one step saves them."""
    import torch
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    kinds = {"Shard(0)": Shard(0), "Shard(1)": Shard(1), "Replicate()": Replicate()}

    class Distributed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            for i, placement in enumerate(placements):
                full = torch.arange(35.0).reshape(5, 7) + 100 * i
                self.register_parameter(f"p{i}", nn.Parameter(distribute_tensor(full, mesh, [kinds[placement]])))

        def forward(self, x: Any) -> Any:
            return x

    module = Distributed()
    hook.register_module(module)
    module(torch.ones(1))
    return []


def traced(hook: Hook, log: list[list[int]]) -> Any:
    """Wrap dist.isend to record (hook step, peer, bytes) of every send."""
    isend = dist.isend

    def isend_traced(tensor: Any, dst: int | None = None, *args: Any, **kwargs: Any) -> Any:
        log.append([hook.global_step, int(dst if dst is not None else -1), tensor.numel() * tensor.element_size()])
        return isend(tensor, dst, *args, **kwargs)

    return isend_traced


def told_traced(hook: Hook, log: list[list[int]]) -> Any:
    """Wrap Arena.tell (a member's presence bytes to a writer, through shared memory's pipe) to record
    (hook step, writer, bytes)."""
    tell = arena.Arena.tell

    def tell_traced(self: arena.Arena, writer: int, header: bytes) -> None:
        log.append([hook.global_step, writer, len(header)])
        tell(self, writer, header)

    return tell_traced


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    root = Path(spec["out"])
    for variant in spec["variants"]:
        saved_env = {k: os.environ.get(k) for k in variant.get("env", {})}
        os.environ.update(variant.get("env", {}))
        attach = arena.attach
        if variant.get("cannot_attach") == rank:  # as if this rank ran on another host
            arena.attach = lambda path, slot_bytes: None
        hook = make_hook(root, variant, rank)
        log: list[list[int]] = []
        original_isend, original_tell = dist.isend, arena.Arena.tell
        told: list[list[int]] = []
        if variant.get("trace") and hook is not None:
            dist.isend = traced(hook, log)
            arena.Arena.tell = told_traced(hook, told)  # type: ignore[method-assign]
        try:
            if "dtensor" in variant and hook is not None:
                losses = dtensor_step(hook, variant["dtensor"])
            else:
                losses = example.train(example.Options(**variant.get("options", {})), hook)
        finally:
            dist.isend = original_isend
            arena.Arena.tell = original_tell  # type: ignore[method-assign]
            arena.attach = attach
            for key, value in saved_env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        name = variant["name"]
        if hook is not None:
            hook.close()
            if variant.get("fail") is not None:
                failure = None if hook.failure is None else f"{type(hook.failure).__name__}: {hook.failure}"
                (root / f"{name}.failure.{rank}.json").write_text(json.dumps(failure))
            elif hook.failure is not None:
                raise SystemExit(f"rank {rank}, variant {name}: the hook failed: {hook.failure!r}")
        if variant.get("trace"):
            (root / f"{name}.trace.{rank}.json").write_text(json.dumps(log))
            (root / f"{name}.told.{rank}.json").write_text(json.dumps(told))
        if hook is not None and hook._gather is not None:  # which groups shared memory (the rest: gloo)
            (root / f"{name}.shared.{rank}.json").write_text(json.dumps(hook._gather.shared_groups))
            (root / f"{name}.gloo.{rank}.json").write_text(json.dumps(hook._gather._group is not None))
        (root / f"{name}.losses.{rank}.json").write_text(json.dumps(losses))
        dist.barrier()
    leave_past_last_barrier()


if __name__ == "__main__":
    main()
