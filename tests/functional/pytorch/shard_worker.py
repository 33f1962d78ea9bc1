"""One rank of a multi-process job that trains several configurations of examples/fsdp_train in turn.

Usage (the environment holds RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, as torchrun sets them):
    python shard_worker.py SPEC.json

SPEC: {"out": ROOT, "variants": [{"name": ..., "options": {Options fields}, "hook": {Hook keywords}}]}
(``save_interval`` for the SaveConfig, ``reduction_config`` as ReductionConfig keywords).
Each variant's trial goes to ROOT/<name>; its losses to ROOT/<name>.losses.<rank>.json. One process
group serves every variant, so the torch import and the rendezvous are paid once.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "fsdp_train"))

import train as example  # noqa: E402

from sdk_ext.pytorch import Hook, ReductionConfig, SaveConfig  # noqa: E402


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    root = Path(spec["out"])
    for variant in spec["variants"]:
        kwargs = dict(variant.get("hook", {}))
        kwargs["save_config"] = SaveConfig(save_interval=kwargs.pop("save_interval", 1))
        if "reduction_config" in kwargs:
            kwargs["reduction_config"] = ReductionConfig(**kwargs["reduction_config"])
        hook = Hook(str(root / variant["name"]), **kwargs) if variant.get("hook") is not None else None
        losses = example.train(example.Options(**variant.get("options", {})), hook)
        if hook is not None:
            hook.close()
            if hook.failure is not None:
                raise SystemExit(f"rank {rank}, variant {variant['name']}: the hook failed: {hook.failure!r}")
        (root / f"{variant['name']}.losses.{rank}.json").write_text(json.dumps(losses))
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
