"""A small transformer-like model trained data-parallel with torch.distributed (gloo on CPU by default).

One process per rank, as torchrun starts them (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT`` in the environment)::

    torchrun --nproc-per-node 2 examples/fsdp_train/train.py --wrap fsdp2 --out-dir /tmp/fsdp-trial

``--wrap``: ``fsdp2`` (``fully_shard`` on each block and the model: DTensor parameters), ``hsdp``
(FSDP2 on a 2-D mesh, ``--replicas`` copies each sharded over the other ranks), ``fsdp1`` /
``fsdp1-orig`` (``FullyShardedDataParallel``, ``use_orig_params`` False / True), ``ddp`` or ``none``.
``--compile`` runs ``torch.compile`` on the wrapped model, ``--checkpoint wrapper|function`` adds
activation checkpointing to the blocks (``checkpoint_wrapper``, or ``torch.utils.checkpoint``
inside the block).

The Debugger hook: from the job's ``debughookconfig.json`` when there is one (a SageMaker or
``sdk-ext run`` job: ``Hook.create_from_json_file()``), else from ``--out-dir`` and the options
below, else none. Each rank reads its own batches (``--seed``, the rank and the step pick them).
For tests and examples of things going wrong: ``--perturb-rank R --perturb-step S`` nudges rank R's
weights after its update at step S (its replica drifts from the others), ``--nan-rank R --nan-step
S`` gives rank R NaN inputs from step S on.

Reusable pieces: :func:`build_model`, :func:`wrap`, :func:`train` (a test may run several
configurations in one process group).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

IN_DIM, DIM, HEADS, CLASSES, SEQ, BATCH = 12, 16, 2, 31, 8, 4  # 31 classes: the head shards unevenly


class Block(nn.Module):
    """Pre-norm attention and MLP, as in a transformer layer."""

    def __init__(self, checkpoint_inside: bool = False) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(DIM)
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)
        self.norm2 = nn.LayerNorm(DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 2 * DIM), nn.GELU(), nn.Linear(2 * DIM, DIM))
        self.checkpoint_inside = checkpoint_inside

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, DIM)
        x = x + self.proj(attn)
        return x + self.mlp(self.norm2(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.checkpoint_inside and torch.is_grad_enabled():
            from torch.utils.checkpoint import checkpoint

            out: torch.Tensor = checkpoint(self._forward, x, use_reentrant=False)
            return out
        return self._forward(x)


class TinyTransformer(nn.Module):
    def __init__(self, blocks: int = 2, checkpoint_inside: bool = False) -> None:
        super().__init__()
        self.embed = nn.Linear(IN_DIM, DIM)
        self.blocks = nn.ModuleList(Block(checkpoint_inside) for _ in range(blocks))
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        out: torch.Tensor = self.head(self.norm(h).reshape(-1, DIM))  # (BATCH * SEQ, CLASSES)
        return out


def build_model(seed: int = 0, *, checkpoint: str = "none") -> TinyTransformer:
    """The same initial weights on every rank (``seed``)."""
    torch.manual_seed(seed)
    model = TinyTransformer(checkpoint_inside=checkpoint == "function")
    if checkpoint == "wrapper":
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing

        apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, Block))
    return model


def wrap(model: nn.Module, how: str, *, replicas: int = 2) -> nn.Module:
    """``model`` under ``how`` (see the module doc); the process group must exist for all but ``none``."""
    if how == "none":
        return model
    if how == "ddp":
        return nn.parallel.DistributedDataParallel(model)
    if how in ("fsdp2", "hsdp"):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        world = dist.get_world_size()
        if how == "hsdp":
            mesh = init_device_mesh("cpu", (replicas, world // replicas), mesh_dim_names=("replicate", "shard"))
        else:
            mesh = init_device_mesh("cpu", (world,))
        for block in model.blocks:  # type: ignore[union-attr]
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
        return model
    if how in ("fsdp1", "fsdp1-orig"):
        from torch.distributed.fsdp import FullyShardedDataParallel
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy

        return FullyShardedDataParallel(model, auto_wrap_policy=ModuleWrapPolicy({Block}),
                                        use_orig_params=how == "fsdp1-orig", device_id=torch.device("cpu"))
    raise ValueError(f"--wrap {how!r}: one of none, ddp, fsdp2, hsdp, fsdp1, fsdp1-orig")


def batch(step: int, rank: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank``'s batch at ``step``: inputs (BATCH, SEQ, IN_DIM) and one class per position, flattened."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step * 1009 + rank)
    return torch.randn(BATCH, SEQ, IN_DIM, generator=g), torch.randint(0, CLASSES, (BATCH * SEQ,), generator=g)


@dataclass
class Options:
    wrap: str = "fsdp2"
    steps: int = 5
    lr: float = 0.1
    seed: int = 0
    compile: bool = False
    compile_backend: str = "inductor"
    checkpoint: str = "none"
    replicas: int = 2
    perturb_rank: int = -1
    perturb_step: int = -1
    nan_rank: int = -1
    nan_step: int = -1


def train(options: Options, hook: Any = None) -> list[float]:
    """Train ``options.steps`` steps; the hook (if any) is registered here. Returns this rank's losses."""
    rank = dist.get_rank() if dist.is_initialized() else 0
    model = wrap(build_model(options.seed, checkpoint=options.checkpoint), options.wrap, replicas=options.replicas)
    if options.compile:
        model = torch.compile(model, backend=options.compile_backend)  # type: ignore[assignment]
    loss_fn = nn.CrossEntropyLoss()
    if hook is not None:
        hook.register_module(model)
        hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=options.lr)
    losses = []
    for step in range(options.steps):
        x, y = batch(step, rank, options.seed)
        if rank == options.nan_rank and step >= options.nan_step >= 0:
            x = torch.full_like(x, float("nan"))
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if rank == options.perturb_rank and step == options.perturb_step:
            with torch.no_grad():
                first = next(iter(model.parameters()))
                local = first.to_local() if hasattr(first, "to_local") else first
                local.add_(0.01)
        losses.append(loss.item())
    return losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = Options()
    parser.add_argument("--wrap", default=defaults.wrap, choices=["none", "ddp", "fsdp2", "hsdp", "fsdp1", "fsdp1-orig"])
    parser.add_argument("--steps", type=int, default=defaults.steps)
    parser.add_argument("--lr", type=float, default=defaults.lr)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--compile-backend", default=defaults.compile_backend)
    parser.add_argument("--checkpoint", default="none", choices=["none", "wrapper", "function"])
    parser.add_argument("--replicas", type=int, default=defaults.replicas, help="hsdp: number of replicas")
    parser.add_argument("--perturb-rank", type=int, default=-1)
    parser.add_argument("--perturb-step", type=int, default=-1)
    parser.add_argument("--nan-rank", type=int, default=-1)
    parser.add_argument("--nan-step", type=int, default=-1)
    parser.add_argument("--out-dir", help="save tensors here (without a job's debughookconfig.json)")
    parser.add_argument("--save-interval", type=int, default=1)
    parser.add_argument("--include-workers", default="one", choices=["one", "all"])
    parser.add_argument("--collections", default="weights,biases,gradients,losses")
    args = parser.parse_args()
    options = Options(**{k: getattr(args, k) for k in Options.__dataclass_fields__})

    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        dist.init_process_group("gloo")
    hook = None
    if os.path.isfile(os.environ.get("SMDEBUG_CONFIG_FILE_PATH", "/opt/ml/input/config/debughookconfig.json")):
        from sdk_ext.pytorch import Hook

        hook = Hook.create_from_json_file()
    elif args.out_dir:
        from sdk_ext.pytorch import Hook, SaveConfig

        hook = Hook(args.out_dir, save_config=SaveConfig(save_interval=args.save_interval),
                    include_collections=args.collections.split(","), include_workers=args.include_workers)
    losses = train(options, hook)
    if hook is not None:
        hook.close()
    if not distributed or dist.get_rank() == 0:
        print(f"losses: {' '.join(f'{v:.4f}' for v in losses)}")
    if distributed:
        dist.barrier()  # every rank done before gloo/NCCL is torn down
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
