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

What travels, and how. A member contributes its piece once to each writer of its group (through
shared memory: once for all of them). When the
tensor's plan needs only reductions (min, max, mean, sum, prod, std, variance, l1, l2 of a
floating-point tensor), each member contributes 9 partial statistics per variant (plain, abs)
instead, and the writer merges them (Chan's pairwise update for the variance); a shape-only plan
moves nothing. A step that saves no sharded tensor moves nothing. Two transports:

- *Shared memory* (``transport="auto"``, the default), for a group whose ranks all run on one host
  (checked at its first collection by mapping one file, :mod:`sdk_ext.pytorch.arena`): each member copies its pieces
  straight into their places in the whole tensors, in a slot of shared memory, and sends each writer
  one presence byte per tensor through a named pipe; the writers write the whole tensors from the
  slot. One copy per piece, none on the writer's side (a writer that alone writes a tensor writes its
  own contiguous piece from where it lies, without copying it), nothing through gloo: when every shard
  group of the job shares memory, the hook's gloo group is closed at the first collection.
- *gloo* (between hosts, or ``SDK_EXT_GATHER_TRANSPORT=gloo``): point-to-point sends on a gloo group of
  the hook's own, never through the job's NCCL communicator. Pieces over 64 KiB are sent as they are
  and land in place: a piece that is one contiguous range of the whole tensor (FSDP1's flat ranges,
  FSDP2's row shards) is received straight into it, any other into a buffer first; smaller pieces
  travel together in one message per pair of ranks (a copy each way, fewer messages).

A GPU piece is copied to the host (straight into the slot with shared memory).

Memory. Tensors go in rounds of at most ``GatherConfig.buffer_bytes`` (256 MiB,
``SDK_EXT_GATHER_BUFFER_BYTES``) of logical tensors, or one tensor when it is larger. With gloo, a
writer holds the round's whole tensors (plus buffers for pieces that are not contiguous, at most as
much again); a member holds nothing more (host copies of GPU pieces). With shared memory, each group
on a host has one arena of two slots, each the size of the largest round the group's tensors can make
(``min(buffer_bytes, all of them)``, or the largest tensor), reserved in ``/dev/shm`` at the first
collection; no rank allocates anything per step. Where ``/dev/shm`` cannot hold it, the group uses gloo.
The weights collected at the start of a step complete when its backward ends (with gloo their
transfers overlap with forward and backward, which leave the shards unchanged); gradients complete at once.

Agreement. Which tensors are collected, in which order and rounds, follows from the save policy
(the same on every rank: same configuration, same step) and from the layouts the ranks exchange
once, when the model is registered (:meth:`ShardGather.setup`: the group is created and one
``all_gather_object`` runs on it, on every rank, at the point of the script where every rank
registers its model; no step has started). Where groups may share memory, two more run at the first
collection of sharded tensors (every rank reaches it with the same items), so a configuration that
saves none reserves no shared memory. Every receive and
send, and every wait for a slot, waits at most ``GatherConfig.timeout`` seconds
(``SDK_EXT_GATHER_TIMEOUT``, default 120): if a rank stops taking part (its hook failed), the
others' wait ends with :class:`GatherError`, which disables their hooks; training goes on.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

import numpy as np
import torch

from sdk_ext.exceptions import SdkExtError
from sdk_ext.hooks.output import Reductions
from sdk_ext.hooks.policy import TensorPlan
from sdk_ext.pytorch import arena as shm
from sdk_ext.pytorch.arena import Arena
from sdk_ext.pytorch.partial_stats import MERGEABLE, NSTATS, merge_stats, partial_stats, stat_value
from sdk_ext.pytorch.wrappers import Region, ShardedSource

logger = logging.getLogger(__name__)



class GatherError(SdkExtError):
    """Collecting a sharded tensor failed: a rank did not send or receive in time, or a layout is unusable."""


_BUFFER_BYTES = 256 << 20
_TIMEOUT = 120.0


_TRANSPORTS = ("auto", "gloo")


@dataclass(frozen=True, slots=True)
class GatherConfig:
    """Bounds of a collection, and how pieces travel (see the module doc): ``transport`` "auto" shares
    memory between the ranks of a host where it can, "gloo" sends every piece through the gloo group."""

    buffer_bytes: int = _BUFFER_BYTES
    timeout: float = _TIMEOUT
    transport: str = "auto"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> GatherConfig:
        env = os.environ if env is None else env
        try:
            buffer_bytes = int(env.get("SDK_EXT_GATHER_BUFFER_BYTES", _BUFFER_BYTES))
            timeout = float(env.get("SDK_EXT_GATHER_TIMEOUT", _TIMEOUT))
        except ValueError as err:
            raise GatherError(f"SDK_EXT_GATHER_BUFFER_BYTES / SDK_EXT_GATHER_TIMEOUT must be numbers: {err}") from err
        transport = env.get("SDK_EXT_GATHER_TRANSPORT", "auto").strip().lower() or "auto"
        if transport not in _TRANSPORTS:
            raise GatherError(f"SDK_EXT_GATHER_TRANSPORT={transport!r}: use one of {', '.join(_TRANSPORTS)} "
                              "(auto: shared memory between the ranks of one host, gloo otherwise)")
        return cls(buffer_bytes, timeout, transport)


@dataclass(frozen=True, slots=True)
class Item:
    """One tensor to collect now: its trial name, its parameter (layout key), what to write, and how
    to read this rank's piece (None when this rank has no value, e.g. no gradient)."""

    name: str
    key: str
    plan: TensorPlan
    piece: Callable[[], torch.Tensor | None]


class Writer(Protocol):
    """Called on a writing rank with (item, the whole tensor on the host or None, reductions, logical
    shape); with ``parts``, the whole tensor's bytes lie in those buffers, in order (this rank's own
    piece is not in ``full``): write them as they are, and nothing computed from ``full``."""

    def __call__(self, item: Item, full: torch.Tensor | None, reductions: Reductions, shape: tuple[int, ...],
                 /, parts: Sequence[memoryview] | None = None) -> None: ...


@dataclass(slots=True)
class _Task:
    item: Item
    source: ShardedSource
    receivers: tuple[int, ...]  # ranks that write it
    members: tuple[int, ...]  # ranks with a non-empty piece, ascending
    mode: str  # "raw", "stats" or "shape"
    variants: tuple[bool, ...] = ()  # abs flags needing statistics (mode "stats")
    regions: dict[int, Region] = field(default_factory=dict)

    @property
    def whole_bytes(self) -> int:
        """The bytes of the whole (logical) tensor."""
        return math.prod(self.source.shape) * self.source.dtype.itemsize

    def payload_bytes(self, rank: int) -> int:
        if self.mode == "raw":
            return self.regions[rank].numel * self.source.dtype.itemsize
        if self.mode == "stats":
            return NSTATS * 8 * len(self.variants)
        return 0


@dataclass(slots=True)
class _Round:
    """One round of transfers in flight, and what is needed to finish it."""

    tasks: list[_Task]
    write: Writer
    works: list[tuple[str, Any]] = field(default_factory=list)
    buffers: list[torch.Tensor] = field(default_factory=list)  # what transfers read or fill, alive until they end
    # peer -> (its header, [(task index, task, where its piece lands, whether that is the whole tensor)])
    inbox: dict[int, tuple[torch.Tensor, list[tuple[int, _Task, torch.Tensor, bool]]]] = field(default_factory=dict)
    own: dict[int, Any] = field(default_factory=dict)  # task index -> this rank's part (see _finish)
    absent: set[int] = field(default_factory=set)  # tasks this rank has no value for
    # a round through shared memory: its arena, sequence number and each task's place in the slot
    arena: Arena | None = None
    seq: int = 0
    plan: _SharedPlan | None = None

    def post(self, work: Any, buffer: torch.Tensor, what: str) -> None:
        self.works.append((what, work))
        self.buffers.append(buffer)


@dataclass(slots=True)
class _SharedPlan:
    """What one round through shared memory does on this rank, worked out once per kind of collection
    (the same tensors with the same plans: usually every saved step)."""

    offsets: list[int]  # each task's place in the slot, then the bytes the round takes
    mine: list[tuple[int, _Task, Region]]  # the tasks this rank holds a piece of
    outgoing: list[tuple[int, list[int]]]  # (writer, the tasks whose presence this rank tells it)
    incoming: list[tuple[int, list[int]]]  # (member, the tasks whose presence it tells this rank)
    # tasks this rank alone writes, whose whole tensor it writes with its own piece read where it lies
    # (not copied into the slot first): task -> (first byte, bytes) of the piece in the whole tensor
    direct: dict[int, tuple[int, int]] = field(default_factory=dict)
    views: dict[tuple[int, int], torch.Tensor] = field(default_factory=dict)  # (slot, task) -> whole tensor
    edges: dict[tuple[int, int], tuple[tuple[memoryview, ...], tuple[memoryview, ...]]] = field(
        default_factory=dict)  # (slot, task) -> see around()

    def whole(self, slot: torch.Tensor, parity: int, i: int, task: _Task) -> torch.Tensor:
        view = self.views.get((parity, i))
        if view is None:
            view = self.views[(parity, i)] = _slot_tensor(slot, self.offsets[i], task)
        return view

    def around(self, slot: torch.Tensor, parity: int, i: int,
               task: _Task) -> tuple[tuple[memoryview, ...], tuple[memoryview, ...]]:
        """The bytes of task ``i``'s whole tensor in the slot before and after this rank's own piece
        (see ``direct``), each as zero or one buffer."""
        spans = self.edges.get((parity, i))
        if spans is None:
            start, length = self.direct[i]
            at, end = self.offsets[i], self.offsets[i] + task.whole_bytes
            before, after = slot[at : at + start].numpy(), slot[at + start + length : end].numpy()
            spans = self.edges[(parity, i)] = ((before.data,) if before.nbytes else (),
                                              (after.data,) if after.nbytes else ())
        return spans

    def place(self, slot: torch.Tensor, parity: int, i: int, task: _Task, region: Region) -> torch.Tensor:
        """Where this rank's piece of task ``i`` goes in the slot: a view shaped as the piece's region
        (a flat range for a flat region)."""
        view = self.views.get((parity, -1 - i))
        if view is None:
            whole = self.whole(slot, parity, i, task)
            if region.flat:
                view = whole.view(-1)[region.offsets[0] : region.offsets[0] + region.sizes[0]]
            else:
                view = whole[tuple(slice(o, o + n) for o, n in zip(region.offsets, region.sizes))]
            self.views[(parity, -1 - i)] = view
        return view


#: dtypes stored as they are (no conversion on the way to the file: bfloat16 becomes float32)
_AS_IS = frozenset({torch.float16, torch.float32, torch.float64, torch.int8, torch.int16, torch.int32, torch.int64,
                    torch.uint8, torch.bool})

_PLACED = object()  # a piece received straight into the whole tensor
_INLINE = 64 << 10  # pieces up to this size travel inside their header message; larger ones on their own
_ALIGN = 16  # pieces start at multiples of this in a header message, so they can be viewed as their dtype


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _header_size(tasks: Sequence[_Task], sender: int) -> int:
    """A presence byte per task, then the small pieces (aligned)."""
    return _aligned(len(tasks)) + sum(_aligned(n) for t in tasks if (n := t.payload_bytes(sender)) <= _INLINE)


def _contiguous_range(task: _Task, member: int) -> tuple[int, int] | None:
    """``(first element, count)`` of ``member``'s piece in the row-major whole tensor, when the piece
    is one contiguous range there (FSDP1's flat ranges, row blocks of Shard(0)); None otherwise."""
    region, shape = task.regions[member], task.source.shape
    if region.flat:
        return region.offsets[0], region.sizes[0]
    # contiguous in row-major order: every dimension after the first split one is whole, and
    # every dimension before it has size 1
    split = next((d for d, (o, n) in enumerate(zip(region.offsets, region.sizes)) if n != shape[d]), len(shape))
    if any(region.sizes[d] != shape[d] for d in range(split + 1, len(shape))):
        return None
    if any(region.sizes[d] != 1 for d in range(split)):
        return None
    return sum(o * math.prod(shape[d + 1 :]) for d, o in enumerate(region.offsets)), region.numel


def _in_place(task: _Task, member: int, full: Any) -> torch.Tensor | None:
    """Where ``member``'s piece lands in the whole tensor ``full`` as bytes, when it is one contiguous
    range there; None otherwise."""
    if task.mode != "raw" or not isinstance(full, torch.Tensor):
        return None
    found = _contiguous_range(task, member)
    if found is None:
        return None
    start, length = found
    return full.view(-1)[start : start + length].view(torch.uint8)


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
                 need_array: Callable[[TensorPlan], bool], config: GatherConfig | None = None,
                 bytes_only: Callable[[TensorPlan], bool] | None = None) -> None:
        self.sources = dict(sources)
        self.rank, self.world_size, self.include_all = rank, world_size, include_all
        self._need_array = need_array
        self._bytes_only = bytes_only or (lambda plan: False)
        self._config = config
        self._group: Any = None
        self._layouts: dict[str, list[tuple[Region | None, tuple[int, ...]]]] | None = None
        self._skipped: set[str] = set()  # keys whose layout cannot be collected (warned once)
        self._pending: _Round | None = None  # the last round of the last collection, in flight
        self._arenas: dict[tuple[int, ...], Arena] = {}  # shard group -> its shared memory (same host)
        self._shm_pending: tuple[list[tuple[int, ...]], str] | None = None  # (groups, token) until then
        # (name, key, id(plan)) of a collection's items -> its rounds (the tasks keep the plans alive)
        self._compiled: dict[tuple[tuple[str, str, int], ...], list[tuple[list[_Task], _SharedPlan | None]]] = {}
        # id of a list of items a caller passes again and again -> (that list, kept alive, and its rounds)
        self._last_lists: dict[int, tuple[Sequence[Item], list[tuple[list[_Task], _SharedPlan | None]]]] = {}

    @property
    def shared_groups(self) -> list[tuple[int, ...]]:
        """The shard groups of this rank whose pieces travel through shared memory (the others: gloo)."""
        return sorted(self._arenas)

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
            everyone: list[Any] = [(mine, "", self._config.transport)]
        else:
            import torch.distributed as dist

            self._group = dist.new_group(backend="gloo", timeout=timedelta(seconds=self._config.timeout))
            everyone = [None] * self.world_size
            dist.all_gather_object(everyone, (mine, secrets.token_hex(8), self._config.transport), group=self._group)
        layouts: dict[str, list[tuple[Region | None, tuple[int, ...]]]] = {}
        for key in self.sources:
            layouts[key] = [ranks[0].get(key, (None, ())) for ranks in everyone]
        self._layouts = layouts
        if self.world_size > 1 and all(transport == "auto" for _, _, transport in everyone):
            groups = {group for ranks in everyone for _, group in ranks[0].values() if len(group) > 1}
            if groups:  # set up at the first collection: a configuration that saves none reserves nothing
                self._shm_pending = (sorted(groups), everyone[0][1])
        return layouts

    def _share_memory(self, groups: list[tuple[int, ...]], token: str) -> None:
        """Map an arena for each shard group of this rank whose ranks can all map it (see arena.py).

        Collectives (two ``all_gather_object`` on the hook's group, every rank, at the first collection,
        which every rank reaches with the same items: the save policy is the same everywhere): the leader of
        each group (its lowest rank) makes the file, each writer of the group a named pipe from each other
        member (presence bytes), and each rank one from each other writer (wake-ups); then every member
        maps the file and opens the other ends; then the files are unlinked,
        and a group shares memory only if every one of its ranks has everything."""
        import torch.distributed as dist

        assert self._config is not None
        me = self.rank
        # a group nobody writes (another replica's, with include_workers="one") collects nothing
        slots = {group: self._slot_bytes(group) for group in groups if me in group and self._writers(group)}
        paths = {group: shm.arena_path(token, group[0]) for group in slots}
        writers = {group: self._writers(group) for group in slots}
        mapped: dict[tuple[int, ...], Any] = {}
        readers: dict[tuple[int, ...], dict[int, int]] = {}  # presence bytes, member -> this writer
        senders: dict[tuple[int, ...], dict[int, int]] = {}
        wakes: dict[tuple[int, ...], dict[int, int]] = {}  # wake-ups, writer -> this rank
        wakers: dict[tuple[int, ...], dict[int, int]] = {}
        made: list[str] = []
        for group, size in slots.items():
            if not os.path.isdir(shm.SHM_DIR):
                continue
            if group[0] == me and (region := shm.create(paths[group], size)) is not None:
                mapped[group] = region
                made.append(paths[group])
            if me in writers[group]:
                readers[group] = {}
                for member in group:
                    path = shm.pipe_path(token, group[0], member, me)
                    if member != me and (fd := shm.open_reader(path)) is not None:
                        readers[group][member] = fd
                        made.append(path)
            wakes[group] = {}
            for writer in writers[group]:
                path = shm.pipe_path(token, group[0], writer, me, "wake")
                if writer != me and (fd := shm.open_reader(path)) is not None:
                    wakes[group][writer] = fd
                    made.append(path)
        made_by: list[Any] = [None] * self.world_size
        dist.all_gather_object(made_by, sorted(mapped), group=self._group)
        made_groups = {tuple(g) for leader in made_by for g in leader}
        for group, size in slots.items():
            if group not in made_groups:
                continue
            if group[0] != me and (attached := shm.attach(paths[group], size)) is not None:
                mapped[group] = attached
            senders[group] = {}
            for writer in writers[group]:
                if writer != me and (fd := shm.open_sender(shm.pipe_path(token, group[0], me, writer))) is not None:
                    senders[group][writer] = fd
            wakers[group] = {}
            for member in group if me in writers[group] else ():
                path = shm.pipe_path(token, group[0], me, member, "wake")
                if member != me and (fd := shm.open_sender(path)) is not None:
                    wakers[group][member] = fd
        others = {g: len([w for w in writers[g] if w != me]) for g in slots}
        ready = sorted(g for g in mapped
                       if len(senders.get(g, {})) == others[g] and len(wakes.get(g, {})) == others[g]
                       and len(readers.get(g, {})) == len(wakers.get(g, {})) == (len(g) - 1 if me in writers[g] else 0))
        have: list[Any] = [None] * self.world_size
        dist.all_gather_object(have, ready, group=self._group)
        for path in made:
            shm.unlink(path)
        for group in slots:
            pipes = [fd for fds in (senders, readers, wakers, wakes) for fd in fds.get(group, {}).values()]
            region = mapped.get(group)
            if region is not None and all(group in {tuple(g) for g in have[r]} for r in group):
                arena = self._arenas[group] = Arena(region, slots[group], group)
                arena.own_pipes(senders.get(group, {}), readers.get(group, {}), wakers.get(group, {}),
                                wakes.get(group, {}))
                continue
            if region is not None:
                region.close()
            for fd in pipes:
                os.close(fd)
        if self._arenas:
            logger.debug("sharded tensors: ranks of one host share memory for groups %s", sorted(self._arenas))
        shared = [{tuple(g) for g in ready_of} for ready_of in have]
        if all(all(group in shared[r] for r in group) for group in groups if self._writers(group)):
            # every piece of the job travels through shared memory from now on: the gloo group would
            # only keep its threads and connections (its loop thread alone wakes for about 0.1 ms of
            # CPU per step and rank). Every rank decides this from the same lists, at the same point.
            group, self._group = self._group, None
            try:
                dist.destroy_process_group(group)
            except Exception as err:  # noqa: BLE001 - the group is unused either way
                logger.debug("sharded tensors: the hook's gloo group was not destroyed (%s)", err)

    def _gloo(self) -> Any:
        """The hook's gloo group, for a round that sends or receives through it."""
        if self._group is None:  # closed when every shard group shared memory: no round should get here
            raise GatherError("collecting sharded tensors: a round needs the hook's gloo group, which was closed "
                              "because every shard group shares memory (please report this)")
        return self._group

    def _writers(self, group: tuple[int, ...]) -> tuple[int, ...]:
        """The ranks that write the tensors of ``group`` (see the module doc: who writes what)."""
        if self.include_all:
            return group
        return (0,) if group[0] == 0 else ()

    def _slot_bytes(self, group: tuple[int, ...]) -> int:
        """The size of one slot of ``group``'s arena (from the shapes every rank of it knows)."""
        assert self._config is not None
        sizes = [math.prod(s.shape) * s.dtype.itemsize for s in self.sources.values() if s.group == group]
        stats = len(sizes) * (_aligned(len(group) * NSTATS * 8 * 2) + _ALIGN)  # + each tensor's alignment
        return shm.slot_bytes_for(sum(sizes), max(sizes, default=0), stats, self._config.buffer_bytes)

    # --- one collection --------------------------------------------------------------------------

    def collect(self, items: Sequence[Item], write: Writer, *, defer: bool = False) -> None:
        """Collect ``items`` (the same list, in the same order, on every rank that holds them) and
        have ``write`` called on each writing rank for each tensor it writes.

        Pieces are sent as they are, without a copy: they must not change until the collection
        completes. With ``defer`` (the caller knows they will not change before it calls
        :meth:`finish`), the last round is only started here and completes in :meth:`finish`, so that
        its transfers overlap with training. A new collection finishes the previous one first. The
        same list may be passed again (its plan is then reused without a look at the items): it must
        not change in between; a different collection is a different list.

        Raises:
            GatherError: a transfer did not complete within the timeout.
        """
        self.finish()
        if not items:
            return
        if self._shm_pending is not None:  # the first collection: every rank is here, with these items
            groups, token = self._shm_pending
            self._shm_pending = None
            self._share_memory(groups, token)
        last = self._last_lists.get(id(items))
        if last is not None and last[0] is items:  # the caller's same list (it does not change them)
            rounds = last[1]
        else:
            signature = tuple((item.name, item.key, id(item.plan)) for item in items)
            compiled = self._compiled.get(signature)
            if compiled is None:
                compiled = self._compile(items)
                if len(self._compiled) >= 64:  # kinds of collections seen: a handful in practice
                    self._compiled.clear()
                self._compiled[signature] = compiled
            rounds = compiled
            if len(self._last_lists) >= 8:
                self._last_lists.clear()
            self._last_lists[id(items)] = (items, rounds)
        for i, (chunk, shared) in enumerate(rounds):
            if shared is not None:
                pending = self._start_shared(chunk, write, self._arenas[chunk[0].source.group], shared)
            else:
                pending = self._start(chunk, write)
            if defer and i + 1 == len(rounds):
                self._pending = pending
            else:
                self._complete(pending)

    def _compile(self, items: Sequence[Item]) -> list[tuple[list[_Task], _SharedPlan | None]]:
        """The rounds of a collection of ``items``, each with its shared-memory plan where it has one."""
        layouts = self._ensure_layouts()
        by_group: dict[tuple[int, ...], list[_Task]] = {}
        for item in items:
            task = self._task(item, layouts)
            if task is not None:
                by_group.setdefault(task.source.group, []).append(task)
        # one global order of rounds, so ranks in several groups never wait in a cycle
        rounds = [chunk for group in sorted(by_group) for chunk in self._rounds(by_group[group])]
        compiled: list[tuple[list[_Task], _SharedPlan | None]] = []
        for chunk in rounds:
            arena = self._arenas.get(chunk[0].source.group)
            offsets = _slot_offsets(chunk) if arena is not None else None
            shared = None
            if arena is not None and offsets is not None and offsets[-1] <= arena.slot_bytes:
                me, index = self.rank, {id(t): i for i, t in enumerate(chunk)}
                writers = chunk[0].receivers
                members = sorted({m for t in chunk for m in t.members} - {me})
                shared = _SharedPlan(
                    offsets,
                    [(i, t, t.regions[me]) for i, t in enumerate(chunk) if t.mode != "shape" and me in t.members],
                    [(w, [index[id(t)] for t in out]) for w in writers if w != me
                     if (out := self._carried(chunk, me, w))],
                    [(m, [index[id(t)] for t in inc]) for m in (members if me in writers else [])
                     if (inc := self._carried(chunk, m, me))],
                )
                for i, t in enumerate(chunk):
                    if (t.mode == "raw" and t.receivers == (me,) and me in t.members and t.source.dtype in _AS_IS
                            and self._bytes_only(t.item.plan) and (found := _contiguous_range(t, me)) is not None):
                        size = t.source.dtype.itemsize
                        shared.direct[i] = (found[0] * size, found[1] * size)
            compiled.append((chunk, shared))
        return compiled

    def finish(self) -> None:
        """Complete the transfers :meth:`collect` left running, and write what they bring.

        Raises:
            GatherError: a transfer did not complete within the timeout.
        """
        pending, self._pending = self._pending, None
        if pending is not None:
            self._complete(pending)

    def _task(self, item: Item, layouts: Mapping[str, list[tuple[Region | None, tuple[int, ...]]]]) -> _Task | None:
        source = self.sources.get(item.key)
        if source is None or item.key in self._skipped:
            return None
        group = source.group
        if not group or self.rank not in group:
            return None
        receivers = self._writers(group)
        if not receivers:
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
              or any(op not in MERGEABLE for op, _ in plan.ops)):
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
            nbytes = task.whole_bytes if task.mode == "raw" else 0
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

    def _start(self, tasks: Sequence[_Task], write: Writer) -> _Round:
        """Post one round. To each writer: a header message (one presence byte per tensor it gets from
        this rank, then the pieces of up to 64 KiB, copied in), then each larger piece as it is (no copy:
        the caller keeps the pieces unchanged until the round completes). From each member: the header,
        then each larger piece straight into its place in the whole tensor when the piece is contiguous
        there (else into a buffer). This rank's own piece of each tensor it writes is placed now."""
        import torch.distributed as dist

        me = self.rank
        current = _Round(list(tasks), write)
        local: dict[int, torch.Tensor | np.ndarray[Any, Any] | None] = {}  # task index -> this rank's payload
        index = {id(t): i for i, t in enumerate(tasks)}

        def mine(task: _Task) -> Any:
            i = index[id(task)]
            if i not in local:
                local[i] = self._local_payload(task)
            return local[i]

        for i, task in enumerate(tasks):  # the whole tensors this rank writes, its own piece in place
            if me not in task.receivers or task.mode == "shape":
                continue
            payload = mine(task) if me in task.members else None
            if me in task.members and payload is None:
                current.absent.add(i)
            elif task.mode == "raw":
                full = torch.empty(task.source.shape, dtype=task.source.dtype)
                if isinstance(payload, torch.Tensor):
                    task.regions[me].place(full, payload)
                current.own[i] = full
            else:
                current.own[i] = payload
        for peer in sorted({r for t in tasks for r in (*t.members, *t.receivers)} - {me}):
            outgoing = self._carried(tasks, me, peer)
            if outgoing:
                payloads = [mine(t) for t in outgoing]
                header = torch.empty(_header_size(outgoing, me), dtype=torch.uint8)  # gaps are never read
                pos = _aligned(len(outgoing))
                for j, (task, payload) in enumerate(zip(outgoing, payloads)):
                    header[j] = 0 if payload is None else 1
                    nbytes = task.payload_bytes(me)
                    if nbytes <= _INLINE:  # small: inside the header message (one message, not many)
                        if payload is not None:
                            header[pos : pos + nbytes] = _as_bytes(payload)
                        pos += _aligned(nbytes)
                current.post(dist.isend(header, dst=peer, group=self._gloo()), header, f"sending to rank {peer}")
                for task, payload in zip(outgoing, payloads):
                    if task.payload_bytes(me) > _INLINE:
                        data = _as_bytes(payload) if payload is not None else torch.zeros(task.payload_bytes(me),
                                                                                           dtype=torch.uint8)
                        current.post(dist.isend(data, dst=peer, group=self._gloo()), data, f"sending to rank {peer}")
            incoming = self._carried(tasks, peer, me)
            if incoming:
                header = torch.empty(_header_size(incoming, peer), dtype=torch.uint8)
                current.post(dist.irecv(header, src=peer, group=self._gloo()), header, f"receiving from rank {peer}")
                slots: list[tuple[int, _Task, torch.Tensor, bool]] = []
                pos = _aligned(len(incoming))
                for task in incoming:
                    i, nbytes = index[id(task)], task.payload_bytes(peer)
                    if nbytes <= _INLINE:
                        slots.append((i, task, header[pos : pos + nbytes], False))
                        pos += _aligned(nbytes)
                        continue
                    target = _in_place(task, peer, current.own.get(i))
                    slot = target if target is not None else torch.empty(nbytes, dtype=torch.uint8)
                    current.post(dist.irecv(slot, src=peer, group=self._gloo()), slot, f"receiving from rank {peer}")
                    slots.append((i, task, slot, target is not None))
                current.inbox[peer] = (header, slots)
        return current

    def _start_shared(self, tasks: Sequence[_Task], write: Writer, arena: Arena, plan: _SharedPlan) -> _Round:
        """Post one round through shared memory (see arena.py): this rank puts each of its pieces (or
        its partial statistics) in its place in the round's slot, then sends each writer, through the
        group's named pipe to it, one presence byte per tensor (read in :meth:`_complete_shared`)."""
        assert self._config is not None
        me = self.rank
        seq = arena.next_seq()
        current = _Round(list(tasks), write, arena=arena, seq=seq, plan=plan)
        writers = tasks[0].receivers
        if not arena.wait_free(seq, writers, self._config.timeout):
            raise GatherError(f"collecting sharded tensors: a writer of ranks {writers} did not finish writing "
                              f"within {self._config.timeout} s (did its hook stop?)")
        slot, parity = arena.slot(seq), seq % 2
        present = bytearray(len(tasks))  # task index -> 1 when this rank has its piece
        own, direct = current.own, plan.direct
        with torch.no_grad():  # one context for the round: the pieces are read, never differentiated
            for i, task, region in plan.mine:
                piece = task.item.piece()
                if piece is None or piece.numel() != region.numel:
                    if piece is not None:
                        logger.warning("sharded tensor %r: this rank's piece has %d elements, its layout says %d; "
                                       "not saved", task.item.name, piece.numel(), region.numel)
                    current.absent.add(i)
                    continue
                present[i] = 1
                if (i in direct and piece.dtype == task.source.dtype and piece.is_cpu
                        and piece.is_contiguous()):
                    own[i] = piece.detach().view(-1)  # written from where it is (see _complete_shared)
                elif task.mode == "raw":  # any dtype; a GPU piece straight from the device
                    target = plan.place(slot, parity, i, task, region)
                    target.copy_(piece if piece.shape == target.shape else piece.reshape(target.shape))
                else:
                    stats = np.concatenate([partial_stats(piece, abs_=a) for a in task.variants])
                    nbytes = task.payload_bytes(me)
                    at = plan.offsets[i] + task.members.index(me) * nbytes
                    slot[at : at + nbytes] = _as_bytes(stats)
        for peer, indices in plan.outgoing:
            try:
                arena.tell(peer, bytes(present[i] for i in indices))
            except shm.PeerLeft as err:
                raise GatherError(f"collecting sharded tensors: {err}") from err
        return current

    def _complete_shared(self, current: _Round) -> None:
        """Finish a round through shared memory: read every member's presence bytes from its pipe (then
        its pieces are in the slot), write each whole tensor from there, then release the slot."""
        arena, plan = current.arena, current.plan
        assert arena is not None and plan is not None
        me, tasks = self.rank, current.tasks
        if me not in tasks[0].receivers:
            return
        missing: set[int] = set(current.absent)
        assert self._config is not None
        for peer, indices in plan.incoming:
            try:
                header = arena.hear(peer, len(indices), self._config.timeout)
            except shm.PeerLeft as err:
                raise GatherError(f"collecting sharded tensors: {err}") from err
            missing.update(i for i, present in zip(indices, header) if not present)
        slot, parity = arena.slot(current.seq), current.seq % 2
        try:
            for i, task in enumerate(tasks):
                if task.mode == "shape":
                    current.write(task.item, None, {}, task.source.shape)
                elif i in missing:
                    continue  # some rank has no value (no gradient): nothing to write
                elif task.mode == "raw" and i in current.own:
                    before, after = plan.around(slot, parity, i, task)
                    own: np.ndarray[Any, Any] = current.own[i].view(torch.uint8).numpy()
                    spans = [*before, own.data, *after]
                    current.write(task.item, plan.whole(slot, parity, i, task), {}, task.source.shape, parts=spans)
                elif task.mode == "raw":
                    current.write(task.item, plan.whole(slot, parity, i, task), {}, task.source.shape)
                else:
                    nbytes = task.payload_bytes(me)
                    at = plan.offsets[i]
                    raw = slot[at : at + nbytes * len(task.members)].numpy().view(np.float64)
                    parts = {m: raw[j * nbytes // 8 : (j + 1) * nbytes // 8] for j, m in enumerate(task.members)}
                    self._finish(task, parts.pop(me, None), parts, current.write)
        finally:
            arena.consumed(current.seq, me)

    def _complete(self, current: _Round) -> None:
        """Wait for a round's transfers, then put each tensor together and write it."""
        for what, work in current.works:
            self._wait(work, what)
        if current.arena is not None:
            self._complete_shared(current)
            return
        me, tasks = self.rank, current.tasks
        received: dict[tuple[int, int], Any] = {}
        for peer, (header, slots) in current.inbox.items():
            for (i, task, slot, placed), present in zip(slots, header[: len(slots)].tolist()):
                if not present:
                    received[(i, peer)] = None
                else:
                    received[(i, peer)] = _PLACED if placed else _from_bytes(slot, task)
        for i, task in enumerate(tasks):
            if me not in task.receivers:
                continue
            if task.mode == "shape":
                current.write(task.item, None, {}, task.source.shape)
                continue
            others = {m: received[(i, m)] for m in task.members if m != me}
            if i in current.absent or any(p is None for p in others.values()):
                continue  # some rank has no value (no gradient): nothing to write
            self._finish(task, current.own.get(i), {m: p for m, p in others.items() if p is not _PLACED},
                         current.write)

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
        if piece.dtype != task.source.dtype:  # a gradient kept in another dtype than its parameter's
            piece = piece.to(task.source.dtype)
        return piece.detach().reshape(-1).cpu()

    def _finish(self, task: _Task, own: Any, others: Mapping[int, Any], write: Writer) -> None:
        """Write one tensor: ``own`` is this rank's part (the tensor with its own piece placed, or its
        statistics; None when it holds no piece), ``others`` the members' pieces."""
        shape = task.source.shape
        if task.mode == "raw":
            full = own if own is not None else torch.empty(shape, dtype=task.source.dtype)
            for member, piece in others.items():
                task.regions[member].place(full, piece)
            write(task.item, full, {}, shape)
            return
        parts = ([] if own is None else [own]) + list(others.values())
        stats = np.stack([np.asarray(p, dtype=np.float64) for p in parts])
        out_dtype = np.float64 if task.source.dtype.itemsize > 4 else np.float32
        reductions: Reductions = {}
        for i, variant in enumerate(task.variants):
            merged = merge_stats(stats[:, i * NSTATS : (i + 1) * NSTATS])
            for op, is_abs in task.item.plan.ops:
                if is_abs == variant:
                    reductions[(op, is_abs)] = np.array([stat_value(merged, op)], dtype=out_dtype)
        write(task.item, None, reductions, shape)

    def _wait(self, work: Any, what: str) -> None:
        assert self._config is not None
        try:
            done = work.wait(timeout=timedelta(seconds=self._config.timeout))
        except RuntimeError as err:
            raise GatherError(f"collecting sharded tensors: {what} failed: {err}") from err
        if done is False:
            raise GatherError(f"collecting sharded tensors: {what} did not complete in {self._config.timeout} s "
                              "(did that rank's hook stop?)")


def _slot_offsets(tasks: Sequence[_Task]) -> list[int] | None:
    """Where each task of a round lies in its slot (raw: the whole tensor; statistics: each member's,
    in member order), then the bytes the round takes; None if no task needs the slot."""
    offsets, at = [], 0
    for task in tasks:
        offsets.append(at)
        if task.mode == "raw":
            at += _aligned(task.whole_bytes)
        elif task.mode == "stats":
            at += _aligned(len(task.members) * NSTATS * 8 * len(task.variants))
    return offsets + [at] if at else None


def _slot_tensor(slot: torch.Tensor, offset: int, task: _Task) -> torch.Tensor:
    """The whole tensor of a raw task, as a view of its place in the slot."""
    return slot[offset : offset + task.whole_bytes].view(task.source.dtype).view(task.source.shape)


def _as_bytes(payload: torch.Tensor | np.ndarray[Any, Any]) -> torch.Tensor:
    """The payload's bytes, as a view when it is contiguous (no copy)."""
    if isinstance(payload, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(payload, dtype=np.float64).view(np.uint8))
    return payload.contiguous().view(-1).view(torch.uint8)


def _from_bytes(raw: torch.Tensor, task: _Task) -> torch.Tensor | np.ndarray[Any, Any]:
    if task.mode == "stats":
        return raw.numpy().view(np.float64)
    return raw.view(task.source.dtype)


__all__ = ["GatherConfig", "GatherError", "Item", "ShardGather"]
