"""Where one tensor's records lie over many steps, worked out once for every tensor read at those steps.

``Tensor.values()`` needs, for each step, the step file holding the tensor (``worker=None``: the
first worker, in worker order, whose index lists it) and the record's place in that step's event
file. Looking that up step by step costs a few dict lookups of Python per value, for every tensor.
But the step files at a set of steps are the same for every tensor, and step files share their
name sets and (when index files repeat) their record tables (:mod:`sdk_ext.trials.index.step_files`).
So a :class:`StepPlan` groups the steps by the name sets of their candidate files once; for a given
tensor, each group then takes one set lookup to pick the holder, and each distinct record table
one dict lookup, whatever the number of steps. Whatever the plan does not cover (a step without a
file, a worker that did not save the tensor, a step file without the raw value, an index without
an event file) makes :meth:`StepPlan.locate` return None, and the caller takes the step-by-step
path, which raises the precise error.

A plan is worked out in blocks of ``BLOCK`` consecutive positions, each when a read first needs one
of them: the value read-ahead (:mod:`sdk_ext.trials.read.reader`) reads a tensor's steps a window at a
time through the one plan of its whole step list, which every tensor walking the same steps shares,
so a window costs the blocks it covers (once for all tensors), not a plan of its own per tensor.

A plan *across workers* (``across=(w0, w1, ...)``) has a position for every worker at every step,
worker after worker within a step (position ``k * len(across) + j`` is ``across[j]`` at ``steps[k]``):
the order in which a rule comparing workers asks for values, which the read-ahead across workers
decodes in one batch.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sdk_ext.modes import ModeKeys
from sdk_ext.trials.index.step_files import Location, StepFile
from sdk_ext.trials.index.trial_index import TrialIndex

Ints = np.ndarray[Any, np.dtype[np.int64]]
_Table = tuple[dict[str, Location], Ints, Ints, int]

#: steps per block of a plan (worked out together, when a read first needs one of them)
BLOCK = 1024


@dataclass(slots=True)
class _Group:
    """Steps of one block whose candidate files have the same name sets (slot ``j``: the j-th
    candidate, in worker order)."""

    names: list[frozenset[str]]
    positions: list[int] = field(default_factory=list)  # into the plan's steps, increasing
    slots: list[list[int]] = field(default_factory=list)  # per slot: file numbers, one per position
    # per slot, once asked: [(record table, positions, file numbers, first position if the positions
    # are a run of consecutive ones else -1)], one entry per distinct table
    tables: dict[int, list[_Table] | None] = field(default_factory=dict)


class StepPlan:
    """The candidate step files at ``steps`` (of ``mode``, from ``worker`` if given, or from each worker of
    ``across`` in turn), grouped.

    The plan reads ``index`` as it is when a block is first needed: use it only while the index's
    ``generation`` is the one it was made at (:class:`~sdk_ext.trials.read.reader.Reads` keys plans by it).

    Attributes:
        files: the candidate step files of the blocks worked out so far, numbered as ``locate``
            reports them (in the order the blocks were worked out).
        chunk, base, size: where each file is in the value reader's file cache (chunk number,
            offset in the chunk, file size; chunk -1 when not known), valid while the cache's
            epoch is ``epoch`` (see :mod:`sdk_ext.trials.read.many_steps`); at least as long as ``files``.
    """

    def __init__(
        self,
        index: TrialIndex,
        steps: Sequence[int],
        mode: ModeKeys,
        worker: str | None,
        *,
        across: Sequence[str] | None = None,
    ) -> None:
        self.steps = list(steps)
        #: the workers of a plan across workers (each step has a position per worker, in this order), else None
        self.across = tuple(across) if across is not None else None
        self.width = len(self.across) if self.across is not None else 1  # positions per step
        self.positions = len(self.steps) * self.width
        self.trial_bytes = index.event_bytes  # the trial's event files, when the plan was made
        self.files: list[StepFile] = []
        self._index, self._mode, self._worker = index, mode, worker
        self._blocks: list[list[_Group] | None] = [None] * -(-self.positions // BLOCK)
        self._holes: list[int] = []  # positions of steps without a candidate file, sorted
        self._holed: set[int] = set()  # blocks with such a step
        self._keys: list[str | None] | None = None  # every file's event key, once every block is worked out
        self.epoch = -1
        self.chunk: Ints = np.full(0, -1, np.int64)
        self.base: Ints = np.zeros(0, np.int64)
        self.size: Ints = np.zeros(0, np.int64)

    def event_keys(self) -> list[str | None]:
        """The event file key of every candidate file of every step (works out every block first)."""
        if self._keys is None:
            for b, groups in enumerate(self._blocks):
                if groups is None:
                    self._build(b)
            self._keys = [f.event_key for f in self.files]
        return self._keys

    def locate(self, name: str, lo: int = 0, hi: int | None = None) -> tuple[Ints, Ints, Ints] | None:
        """``(file numbers, record starts, record lengths)`` of ``name``'s raw value at each of the
        positions ``lo:hi`` (the steps ``steps[lo:hi]``, or across workers: see the class doc), or None if
        some of them needs the step-by-step path."""
        n = self.positions
        hi = n if hi is None else min(hi, n)
        if hi <= lo:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
        first, last = lo // BLOCK, (hi - 1) // BLOCK
        blocks = []
        for b in range(first, last + 1):
            groups = self._blocks[b]
            blocks.append(self._build(b) if groups is None else groups)
        holes = self._holes
        at = bisect.bisect_left(holes, lo)
        if at < len(holes) and holes[at] < hi:
            return None
        count = hi - lo
        single = None  # the tables of the block's only group, when the slice lies in one block with one group
        if first == last and len(blocks[0]) == 1 and first not in self._holed:
            single = self._tables(blocks[0][0], name)
            if single is None:
                return None
            if len(single) == 1:  # and one record table (the common case)
                table, _, numbers, _ = single[0]
                loc = table.get(name)
                if loc is None:
                    return None
                at = first * BLOCK
                return numbers[lo - at : hi - at], np.full(count, loc[0], np.int64), np.full(count, loc[1], np.int64)
        files = np.empty(count, np.int64)
        starts = np.empty(count, np.int64)
        lengths = np.empty(count, np.int64)
        for b, groups in enumerate(blocks, first):
            inside = lo <= b * BLOCK and min((b + 1) * BLOCK, n) <= hi  # every step of the block is wanted
            for group in groups:
                if not inside and (group.positions[-1] < lo or group.positions[0] >= hi):
                    continue
                found = single if single is not None else self._tables(group, name)
                if found is None:
                    if not inside:  # a group around the slice may have none of its positions inside it
                        first_in = bisect.bisect_left(group.positions, lo)
                        if first_in == len(group.positions) or group.positions[first_in] >= hi:
                            continue
                    return None
                for table, positions, numbers, run in found:
                    if inside:  # every step of the table is wanted
                        where: slice | Ints = slice(run - lo, run - lo + len(numbers)) if run >= 0 else positions - lo
                    else:
                        size = len(numbers)
                        if run >= 0:  # the table's positions are run, run + 1, ... (the common case): a slice
                            i0 = lo - run if lo > run else 0
                            i1 = hi - run if hi - run < size else size
                            if i0 >= i1:
                                continue
                            where = slice(run + i0 - lo, run + i1 - lo)
                        else:
                            i0, i1 = int(positions.searchsorted(lo)), int(positions.searchsorted(hi))
                            if i0 == i1:
                                continue
                            where = positions[i0:i1] - lo
                        if i1 - i0 < size:
                            numbers = numbers[i0:i1]
                    loc = table.get(name)
                    if loc is None:
                        return None
                    files[where] = numbers
                    starts[where] = loc[0]
                    lengths[where] = loc[1]
        return files, starts, lengths

    def _build(self, b: int) -> list[_Group]:
        """Work out block ``b``: its positions' candidate files, numbered from ``len(files)`` on, grouped."""
        index, mode = self._index, self._mode
        by_step = index.by_step
        steps, files, across, width = self.steps, self.files, self.across, self.width
        groups: dict[Any, _Group] = {}
        for position in range(b * BLOCK, min((b + 1) * BLOCK, self.positions)):
            step = steps[position // width] if across is not None else steps[position]
            worker = across[position % width] if across is not None else self._worker
            candidates: list[StepFile]
            if worker is not None:  # one worker's file, found in O(1) (not by scanning the step's W files)
                one = self._file_of(step, mode, worker)
                candidates = [] if one is None else [one]
            elif mode is ModeKeys.GLOBAL:
                candidates = by_step.get(step) or []
            else:
                found = index.files_at(step, mode)
                candidates = found[1] if found else []
            if not candidates:
                bisect.insort(self._holes, position)
                self._holed.add(b)
                continue
            signature = id(candidates[0].names) if len(candidates) == 1 else tuple(id(f.names) for f in candidates)
            group = groups.get(signature)
            if group is None:
                group = groups[signature] = _Group([f.names for f in candidates])
                group.slots = [[] for _ in candidates]
            group.positions.append(position)
            for slot, f in zip(group.slots, candidates):
                slot.append(len(files))
                files.append(f)
        have = len(self.chunk)
        if len(files) > have:  # room for the new files' cache places (unknown yet)
            grow = max(len(files), 2 * have) - have
            self.chunk = np.concatenate([self.chunk, np.full(grow, -1, np.int64)])
            self.base = np.concatenate([self.base, np.zeros(grow, np.int64)])
            self.size = np.concatenate([self.size, np.zeros(grow, np.int64)])
        built = self._blocks[b] = list(groups.values())
        return built

    def _file_of(self, step: int, mode: ModeKeys, worker: str) -> StepFile | None:
        """``worker``'s step file at ``step`` of ``mode`` (a global step for GLOBAL), or None."""
        index = self._index
        if mode is ModeKeys.GLOBAL:
            return index.file_of(step, worker)
        global_step = index.global_of(step, mode)
        if global_step is None:
            return None
        found = index.file_of(global_step, worker)
        # files_at's test: a worker's file of that global step may belong to another mode step
        return found if found is not None and found.mode is mode and found.mode_step == step else None

    def _tables(self, group: _Group, name: str) -> list[_Table] | None:
        """The record tables of the slot holding ``name`` in ``group``, or None (no slot does, or no event file)."""
        for slot, names in enumerate(group.names):
            if name in names:
                break
        else:
            return None
        if slot not in group.tables:
            by_table: dict[int, tuple[dict[str, Location], list[int], list[int]]] = {}
            usable = True
            for position, number in zip(group.positions, group.slots[slot]):
                f = self.files[number]
                if f.event_key is None:
                    usable = False
                    break
                entry = by_table.get(id(f.raw))
                if entry is None:
                    entry = by_table[id(f.raw)] = (f.raw, [], [])
                entry[1].append(position)
                entry[2].append(number)
            group.tables[slot] = (
                [
                    (t, np.array(p, np.int64), np.array(m, np.int64), p[0] if p[-1] - p[0] == len(p) - 1 else -1)
                    for t, p, m in by_table.values()
                ]
                if usable
                else None
            )
        return group.tables[slot]


__all__ = ["BLOCK", "StepPlan"]
