"""Where one tensor's records lie over many steps, worked out once for every tensor read at those steps.

``Tensor.values()`` needs, for each step, the step file holding the tensor (``worker=None``: the
first worker, in worker order, whose index lists it) and the record's place in that step's event
file. Looking that up step by step costs a few dict lookups of Python per value, for every tensor.
But the step files at a set of steps are the same for every tensor, and step files share their
name sets and (when index files repeat) their record tables (:mod:`sdk_ext.trials.step_files`).
So a :class:`StepPlan` groups the steps by the name sets of their candidate files once; for a given
tensor, each group then takes one set lookup to pick the holder, and each distinct record table
one dict lookup, whatever the number of steps. Whatever the plan does not cover (a step without a
file, a worker that did not save the tensor, a step file without the raw value, an index without
an event file) makes :meth:`StepPlan.locate` return None, and the caller takes the step-by-step
path, which raises the precise error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sdk_ext.modes import ModeKeys
from sdk_ext.trials.index_cache import TrialIndex
from sdk_ext.trials.step_files import Location, StepFile

Ints = np.ndarray[Any, np.dtype[np.int64]]


@dataclass(slots=True)
class _Group:
    """Steps whose candidate files have the same name sets (slot ``j``: the j-th candidate, in worker order)."""

    names: list[frozenset[str]]
    positions: list[int] = field(default_factory=list)  # into the plan's steps
    slots: list[list[int]] = field(default_factory=list)  # per slot: file numbers, one per position
    # per slot, once asked: [(record table, positions, file numbers)], one entry per distinct table
    tables: dict[int, list[tuple[dict[str, Location], Ints, Ints]] | None] = field(default_factory=dict)


class StepPlan:
    """The candidate step files at ``steps`` (of ``mode``, from ``worker`` if given), grouped.

    Attributes:
        files: every candidate step file, numbered as ``locate`` reports them.
        chunk, base, size: where each file is in the value reader's file cache (chunk number,
            offset in the chunk, file size; chunk -1 when not known), valid while the cache's
            epoch is ``epoch`` (see :mod:`sdk_ext.trials.bulk`).
    """

    def __init__(self, index: TrialIndex, steps: Sequence[int], mode: ModeKeys, worker: str | None) -> None:
        self.steps = list(steps)
        self.trial_bytes = index.event_bytes  # the trial's event files, when the plan was made
        self.files: list[StepFile] = []
        self.complete = True  # False: some step has no candidate file (the caller takes the slow path)
        numbers: dict[int, int] = {}  # id(step file) -> its number
        groups: dict[tuple[int, ...], _Group] = {}
        by_step = index.by_step
        for position, step in enumerate(self.steps):
            if mode is ModeKeys.GLOBAL:
                candidates = by_step.get(step) or []
            else:
                found = index.files_at(step, mode)
                candidates = found[1] if found else []
            if worker is not None:
                candidates = [f for f in candidates if f.worker == worker]
            if not candidates:
                self.complete = False
                break
            signature = tuple(id(f.names) for f in candidates)
            group = groups.get(signature)
            if group is None:
                group = groups[signature] = _Group([f.names for f in candidates])
                group.slots = [[] for _ in candidates]
            group.positions.append(position)
            for slot, f in zip(group.slots, candidates):
                number = numbers.get(id(f))
                if number is None:
                    number = numbers[id(f)] = len(self.files)
                    self.files.append(f)
                slot.append(number)
        self._groups = list(groups.values())
        self.epoch = -1
        self.chunk: Ints = np.full(len(self.files), -1, np.int64)
        self.base: Ints = np.zeros(len(self.files), np.int64)
        self.size: Ints = np.zeros(len(self.files), np.int64)

    def locate(self, name: str) -> tuple[Ints, Ints, Ints] | None:
        """``(file numbers, record starts, record lengths)`` of ``name``'s raw value at each step, or
        None if some step needs the step-by-step path."""
        if not self.complete:
            return None
        n = len(self.steps)
        if len(self._groups) == 1:
            found = self._tables(self._groups[0], name)
            if found is not None and len(found) == 1:  # one record table for every step
                table, _, numbers = found[0]
                loc = table.get(name)
                if loc is None:
                    return None
                return numbers, np.full(n, loc[0], np.int64), np.full(n, loc[1], np.int64)
        files = np.empty(n, np.int64)
        starts = np.empty(n, np.int64)
        lengths = np.empty(n, np.int64)
        for group in self._groups:
            found = self._tables(group, name)
            if found is None:
                return None
            for table, positions, numbers in found:
                loc = table.get(name)
                if loc is None:
                    return None
                files[positions] = numbers
                starts[positions] = loc[0]
                lengths[positions] = loc[1]
        return files, starts, lengths

    def _tables(self, group: _Group, name: str) -> list[tuple[dict[str, Location], Ints, Ints]] | None:
        """The record tables of the slot holding ``name`` in ``group``, or None (no slot does, or no event file)."""
        slot = next((j for j, names in enumerate(group.names) if name in names), None)
        if slot is None:
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
                [(t, np.array(p, np.int64), np.array(m, np.int64)) for t, p, m in by_table.values()] if usable else None
            )
        return group.tables[slot]


__all__ = ["StepPlan"]
