"""Sharded tensors put together on the rank that writes them, at save time (FSDP1, FSDP2, DTensor).

Why at save time: the trial then holds the logical tensor under the name the user wrote, the same
files a single-process or DDP job writes, so every reader (sdk_ext's, real smdebug 1.0.34,
SageMaker's rule containers) and every reduction sees the whole tensor. Writing shards with their
offsets would cost no communication but need a reader that assembles them, which smdebug is not.

Who writes what. Each sharded tensor has *shard groups* (:class:`~sdk_ext.pytorch.wrappers.ShardedSource`):
the ranks that together hold one copy; plain FSDP has one, HSDP one per replica. With
``include_workers="one"`` rank 0 writes the logical tensor of its own copy, from the pieces the
other members of its group send it (the members of other groups send nothing). With ``"all"``
every rank writes the logical tensor of its own copy, as every DDP worker writes its weights: the
members of a group send their pieces to each other. So under HSDP each replica's copy is in the
trial (the workers of a replica hold the same values), and a drifting replica can be seen.

What travels. A member sends its piece, once, to each writer of its group, over point-to-point
sends on a gloo group of the hook's own (CPU tensors: a GPU piece is copied to the host first),
never through the job's NCCL communicator. When the tensor's plan needs only reductions (min, max,
mean, sum, prod, std, variance, l1, l2 of a floating-point tensor), each member sends 9 partial
statistics per variant (plain, abs) instead, and the writer merges them (Chan's pairwise update
for the variance); a shape-only plan sends nothing. So on a saved step a rank receives less than
the bytes of the tensors it writes, and sends its own pieces once per writer; a step that saves no
sharded tensor moves nothing.

Memory. Tensors go in rounds of at most ``GatherConfig.buffer_bytes`` (256 MiB,
``SDK_EXT_GATHER_BUFFER_BYTES``) of logical tensors, or one tensor when it is larger: per round a
writer holds the received pieces and the assembled tensors (twice the round's bytes at most), and
every member holds host copies of its own pieces of the round.

Agreement. Which tensors are collected, in which order and rounds, follows from the save policy
(the same on every rank: same configuration, same step) and from the layouts the ranks exchange
once, when the model is registered (:meth:`ShardGather.setup`: the group is created and one
``all_gather_object`` runs on it, on every rank, at the point of the script where every rank
registers its model; no step has started). Every receive and send waits at most ``GatherConfig.timeout`` seconds
(``SDK_EXT_GATHER_TIMEOUT``, default 120): if a rank stops taking part (its hook failed), the
others' wait ends with :class:`GatherError`, which disables their hooks; training goes on.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np
import torch

from sdk_ext.exceptions import SdkExtError
from sdk_ext.hooks.output import Reductions
from sdk_ext.hooks.policy import TensorPlan
from sdk_ext.pytorch.wrappers import Region, ShardedSource

logger = logging.getLogger(__name__)

_ALIGN = 16  # every piece starts at a multiple of this in a message, so it can be viewed as its dtype
_MERGEABLE = frozenset({"min", "max", "mean", "sum", "prod", "std", "variance", "l1", "l2"})
# partial statistics of a piece, in this order
_N, _MIN, _MAX, _SUM, _PROD, _MEAN, _M2, _SUMSQ, _SUMABS = range(9)
_NSTATS = 9


class GatherError(SdkExtError):
    """Collecting a sharded tensor failed: a rank did not send or receive in time, or a layout is unusable."""


_BUFFER_BYTES = 256 << 20
_TIMEOUT = 120.0


@dataclass(frozen=True, slots=True)
class GatherConfig:
    """Bounds of a collection (see the module doc)."""

    buffer_bytes: int = _BUFFER_BYTES
    timeout: float = _TIMEOUT

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> GatherConfig:
        env = os.environ if env is None else env
        try:
            return cls(int(env.get("SDK_EXT_GATHER_BUFFER_BYTES", _BUFFER_BYTES)),
                       float(env.get("SDK_EXT_GATHER_TIMEOUT", _TIMEOUT)))
        except ValueError as err:
            raise GatherError(f"SDK_EXT_GATHER_BUFFER_BYTES / SDK_EXT_GATHER_TIMEOUT must be numbers: {err}") from err


@dataclass(frozen=True, slots=True)
class Item:
    """One tensor to collect now: its trial name, its parameter (layout key), what to write, and how
    to read this rank's piece (None when this rank has no value, e.g. no gradient)."""

    name: str
    key: str
    plan: TensorPlan
    piece: Callable[[], torch.Tensor | None]


#: Called on the owner with (item, the whole tensor on the host or None, reductions, logical shape).
Writer = Callable[[Item, "torch.Tensor | None", Reductions, tuple[int, ...]], None]


@dataclass(slots=True)
class _Task:
    item: Item
    source: ShardedSource
    receivers: tuple[int, ...]  # ranks that write it
    members: tuple[int, ...]  # ranks with a non-empty piece, ascending
    mode: str  # "raw", "stats" or "shape"
    variants: tuple[bool, ...] = ()  # abs flags needing statistics (mode "stats")
    regions: dict[int, Region] = field(default_factory=dict)

    def payload_bytes(self, rank: int) -> int:
        if self.mode == "raw":
            return self.regions[rank].numel * self.source.dtype.itemsize
        if self.mode == "stats":
            return _NSTATS * 8 * len(self.variants)
        return 0


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


class ShardGather:
    """Collects sharded parameters' weights and gradients onto their owners (see the module doc).

    Args:
        sources: every sharded parameter of the model, by key (the same keys on every rank).
        rank, world_size: this process in the default group.
        include_all: ``include_workers == "all"``.
        need_array: whether a plan needs the whole value (raw value, TensorBoard) rather than reductions.
        config: bounds; default :meth:`GatherConfig.from_env` at the first collection.
    """

    def __init__(self, sources: Mapping[str, ShardedSource], *, rank: int, world_size: int, include_all: bool,
                 need_array: Callable[[TensorPlan], bool], config: GatherConfig | None = None) -> None:
        self.sources = dict(sources)
        self.rank, self.world_size, self.include_all = rank, world_size, include_all
        self._need_array = need_array
        self._config = config
        self._group: Any = None
        self._layouts: dict[str, list[tuple[Region | None, tuple[int, ...]]]] | None = None
        self._skipped: set[str] = set()  # keys whose layout cannot be collected (warned once)

    # --- setup -----------------------------------------------------------------------------------

    def setup(self) -> None:
        """Create the hook's gloo group and exchange the layouts (collectives: every rank calls this at
        the same point, when the model is registered)."""
        self._ensure_layouts()

    def _ensure_layouts(self) -> dict[str, list[tuple[Region | None, tuple[int, ...]]]]:
        if self._layouts is not None:
            return self._layouts
        if self._config is None:
            self._config = GatherConfig.from_env()
        mine = {key: (s.region, s.group) for key, s in self.sources.items()}
        if self.world_size == 1:
            everyone: list[Any] = [mine]
        else:
            import torch.distributed as dist

            self._group = dist.new_group(backend="gloo", timeout=timedelta(seconds=self._config.timeout))
            everyone = [None] * self.world_size
            dist.all_gather_object(everyone, mine, group=self._group)
        layouts: dict[str, list[tuple[Region | None, tuple[int, ...]]]] = {}
        for key in self.sources:
            layouts[key] = [ranks.get(key, (None, ())) for ranks in everyone]
        self._layouts = layouts
        return layouts

    # --- one collection --------------------------------------------------------------------------

    def collect(self, items: Sequence[Item], write: Writer) -> None:
        """Collect ``items`` (the same list, in the same order, on every rank that holds them) and
        call ``write`` on each writing rank for each tensor it writes.

        Raises:
            GatherError: a transfer did not complete within the timeout.
        """
        if not items:
            return
        layouts = self._ensure_layouts()
        by_group: dict[tuple[int, ...], list[_Task]] = {}
        for item in items:
            task = self._task(item, layouts)
            if task is not None:
                by_group.setdefault(task.source.group, []).append(task)
        for group in sorted(by_group):  # one global order, so ranks in several groups never wait in a cycle
            for chunk in self._rounds(by_group[group]):
                self._exchange(chunk, write)

    def _task(self, item: Item, layouts: Mapping[str, list[tuple[Region | None, tuple[int, ...]]]]) -> _Task | None:
        source = self.sources.get(item.key)
        if source is None or item.key in self._skipped:
            return None
        group = source.group
        if not group or self.rank not in group:
            return None
        if self.include_all:
            receivers = group
        elif group[0] == 0:
            receivers = (0,)
        else:
            return None  # include_workers="one": only rank 0 writes, and it is not in this copy's group
        regions = {r: region for r in group if (region := layouts[item.key][r][0]) is not None}
        numel = math.prod(source.shape)
        if sum(r.numel for r in regions.values()) != numel or any(layouts[item.key][r][1] != group for r in regions):
            self._skipped.add(item.key)
            if self.rank == group[0]:
                logger.warning("sharded tensor %r not saved: the pieces its shard group %s holds do not make up "
                               "its shape %s (an unsupported layout)", item.name, group, source.shape)
            return None
        plan = item.plan
        if numel == 0:
            mode = "shape"
        elif (self._need_array(plan) or not source.dtype.is_floating_point
              or any(op not in _MERGEABLE for op, _ in plan.ops)):
            mode = "raw"
        elif plan.ops:
            mode = "stats"
        else:
            mode = "shape"
        variants = tuple(sorted({is_abs for _, is_abs in plan.ops})) if mode == "stats" else ()
        return _Task(item, source, receivers, tuple(sorted(regions)), mode, variants, regions)

    def _rounds(self, tasks: list[_Task]) -> list[list[_Task]]:
        """Split one group's tasks into rounds of at most ``buffer_bytes`` of logical tensors."""
        assert self._config is not None
        rounds: list[list[_Task]] = [[]]
        size = 0
        for task in tasks:
            nbytes = math.prod(task.source.shape) * task.source.dtype.itemsize if task.mode == "raw" else 0
            if rounds[-1] and size + nbytes > self._config.buffer_bytes:
                rounds.append([])
                size = 0
            rounds[-1].append(task)
            size += nbytes
        return rounds

    @staticmethod
    def _carried(tasks: Sequence[_Task], sender: int, receiver: int) -> list[_Task]:
        """The tasks of a round whose data goes from ``sender`` to ``receiver``, in order."""
        return [t for t in tasks if t.mode != "shape" and sender in t.members and receiver in t.receivers
                and sender != receiver]

    def _exchange(self, tasks: Sequence[_Task], write: Writer) -> None:
        """One round: send this rank's pieces to each receiver, receive from each member, then write."""
        import torch.distributed as dist

        me = self.rank
        works: list[tuple[str, Any]] = []
        inbox: dict[int, tuple[torch.Tensor, list[_Task]]] = {}
        peers = sorted({r for t in tasks for r in (*t.members, *t.receivers)} - {me})
        local: dict[int, torch.Tensor | np.ndarray[Any, Any] | None] = {}  # task index -> this rank's payload
        index = {id(t): i for i, t in enumerate(tasks)}
        for peer in peers:
            outgoing = self._carried(tasks, me, peer)
            if outgoing:
                message = self._pack(outgoing, local, index)
                works.append((f"sending to rank {peer}", dist.isend(message, dst=peer, group=self._group)))
            incoming = self._carried(tasks, peer, me)
            if incoming:
                buffer = torch.empty(self._message_size(incoming, peer), dtype=torch.uint8)
                inbox[peer] = (buffer, incoming)
                works.append((f"receiving from rank {peer}", dist.irecv(buffer, src=peer, group=self._group)))
        for what, work in works:
            self._wait(work, what)
        if me not in {r for t in tasks for r in t.receivers}:
            return
        received: dict[tuple[int, int], torch.Tensor | np.ndarray[Any, Any] | None] = {}
        for peer, (buffer, incoming) in inbox.items():
            pos = _aligned(len(incoming))
            for i, task in enumerate(incoming):
                nbytes = task.payload_bytes(peer)
                raw = buffer[pos : pos + nbytes]
                received[(index[id(task)], peer)] = _from_bytes(raw, task) if buffer[i] else None
                pos += _aligned(nbytes)
        for i, task in enumerate(tasks):
            if me not in task.receivers:
                continue
            pieces: dict[int, Any] = {}
            for member in task.members if task.mode != "shape" else ():
                if member == me:
                    if i not in local:
                        local[i] = self._local_payload(task)
                    pieces[member] = local[i]
                else:
                    pieces[member] = received[(i, member)]
            if any(p is None for p in pieces.values()):
                continue  # some rank has no value (no gradient): nothing to write
            self._finish(task, pieces, write)

    def _pack(self, tasks: Sequence[_Task], local: dict[int, Any], index: Mapping[int, int]) -> torch.Tensor:
        """One message: a presence byte per task (aligned), then each payload at an aligned offset."""
        message = torch.zeros(self._message_size(tasks, self.rank), dtype=torch.uint8)
        pos = _aligned(len(tasks))
        for i, task in enumerate(tasks):
            key = index[id(task)]
            if key not in local:
                local[key] = self._local_payload(task)
            payload = local[key]
            nbytes = task.payload_bytes(self.rank)
            if payload is not None:
                message[i] = 1
                message[pos : pos + nbytes] = _as_bytes(payload)
            pos += _aligned(nbytes)
        return message

    @staticmethod
    def _message_size(tasks: Sequence[_Task], sender: int) -> int:
        return _aligned(len(tasks)) + sum(_aligned(t.payload_bytes(sender)) for t in tasks)

    def _local_payload(self, task: _Task) -> torch.Tensor | np.ndarray[Any, Any] | None:
        """This rank's contribution to ``task``: its piece (raw) or its partial statistics; None if it has none."""
        piece = task.item.piece()
        if piece is None:
            return None
        region = task.regions[self.rank]
        if piece.numel() != region.numel:
            logger.warning("sharded tensor %r: this rank's piece has %d elements, its layout says %d; not saved",
                           task.item.name, piece.numel(), region.numel)
            return None
        if task.mode == "stats":
            return np.concatenate([partial_stats(piece, abs_=a) for a in task.variants])
        return piece.detach().reshape(-1).cpu()

    def _finish(self, task: _Task, pieces: Mapping[int, Any], write: Writer) -> None:
        shape = task.source.shape
        if task.mode == "raw":
            full = torch.empty(shape, dtype=task.source.dtype)
            for member, piece in pieces.items():
                task.regions[member].place(full, piece)
            write(task.item, full, {}, shape)
        elif task.mode == "stats":
            stats = np.stack([np.asarray(p, dtype=np.float64) for p in pieces.values()])
            out_dtype = np.float64 if task.source.dtype.itemsize > 4 else np.float32
            reductions: Reductions = {}
            for i, variant in enumerate(task.variants):
                merged = merge_stats(stats[:, i * _NSTATS : (i + 1) * _NSTATS])
                for op, is_abs in task.item.plan.ops:
                    if is_abs == variant:
                        reductions[(op, is_abs)] = np.array([stat_value(merged, op)], dtype=out_dtype)
            write(task.item, None, reductions, shape)
        else:
            write(task.item, None, {}, shape)

    def _wait(self, work: Any, what: str) -> None:
        assert self._config is not None
        try:
            done = work.wait(timeout=timedelta(seconds=self._config.timeout))
        except RuntimeError as err:
            raise GatherError(f"collecting sharded tensors: {what} failed: {err}") from err
        if done is False:
            raise GatherError(f"collecting sharded tensors: {what} did not complete in {self._config.timeout} s "
                              "(did that rank's hook stop?)")


def _as_bytes(payload: torch.Tensor | np.ndarray[Any, Any]) -> torch.Tensor:
    if isinstance(payload, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(payload, dtype=np.float64).view(np.uint8))
    return payload.contiguous().view(torch.uint8).reshape(-1)


def _from_bytes(raw: torch.Tensor, task: _Task) -> torch.Tensor | np.ndarray[Any, Any]:
    if task.mode == "stats":
        return raw.numpy().view(np.float64)
    return raw.view(task.source.dtype)


# --- partial statistics ---------------------------------------------------------------------------


def partial_stats(piece: torch.Tensor, *, abs_: bool) -> np.ndarray[Any, Any]:
    """The 9 statistics of one piece (count, min, max, sum, prod, mean, M2, sum of squares, sum of |x|),
    in float64, from which :func:`merge_stats` gives every mergeable reduction of the whole tensor."""
    with torch.no_grad():
        x = piece.detach().reshape(-1).to(torch.float64)
        if abs_:
            x = x.abs()
        n = x.numel()
        if n == 0:
            return np.array([0, np.inf, -np.inf, 0, 1, 0, 0, 0, 0], dtype=np.float64)
        mean = x.mean()
        values = torch.stack([
            torch.tensor(float(n), dtype=torch.float64, device=x.device), x.min(), x.max(), x.sum(), x.prod(), mean,
            ((x - mean) ** 2).sum(), (x * x).sum(), x.abs().sum(),
        ])
        return values.cpu().numpy()


def merge_stats(parts: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Statistics of the union of pieces (one row of :func:`partial_stats` each)."""
    parts = parts[parts[:, _N] > 0]
    out = np.zeros(_NSTATS, dtype=np.float64)
    n = parts[:, _N].sum()
    out[_N] = n
    out[_MIN], out[_MAX] = parts[:, _MIN].min(), parts[:, _MAX].max()
    out[_SUM], out[_PROD] = parts[:, _SUM].sum(), np.prod(parts[:, _PROD])
    mean = out[_SUM] / n
    out[_MEAN] = mean
    out[_M2] = (parts[:, _M2] + parts[:, _N] * (parts[:, _MEAN] - mean) ** 2).sum()
    out[_SUMSQ], out[_SUMABS] = parts[:, _SUMSQ].sum(), parts[:, _SUMABS].sum()
    return out


def stat_value(stats: np.ndarray[Any, Any], op: str) -> float:
    """One reduction from merged statistics (population std/variance, as :mod:`sdk_ext.format.reductions`)."""
    n = stats[_N]
    value: float
    if op == "min":
        value = stats[_MIN]
    elif op == "max":
        value = stats[_MAX]
    elif op == "mean":
        value = stats[_MEAN]
    elif op == "sum":
        value = stats[_SUM]
    elif op == "prod":
        value = stats[_PROD]
    elif op == "variance":
        value = stats[_M2] / n
    elif op == "std":
        value = math.sqrt(stats[_M2] / n)
    elif op == "l1":
        value = stats[_SUMABS]
    elif op == "l2":
        value = math.sqrt(stats[_SUMSQ])
    else:
        raise ValueError(f"reduction {op!r} cannot be merged from pieces")
    return float(value)


__all__ = ["GatherConfig", "GatherError", "Item", "ShardGather", "merge_stats", "partial_stats", "stat_value"]
