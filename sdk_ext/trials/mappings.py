"""The step and worker tables smdebug's trials expose, which published custom rules and analyses read.

A rule written for SageMaker may look up a global step's mode directly::

    mode, mode_step = self.base_trial._global_to_mode[step]
    if mode == modes.EVAL: ...

These are read-only live views of the trial's index, with smdebug's shapes:

* ``_global_to_mode``: global step -> ``(mode, mode step)``;
* ``_mode_to_global``: mode -> {mode step -> global step} (modes other than GLOBAL, as smdebug);
* ``workers_for_global_step``: global step -> the set of workers that wrote it;
* ``global_step_to_tensors_map``: global step -> the set of tensor names saved at it;
* ``mode_to_tensors_map``: mode -> the set of tensor names saved in it;
* ``worker_set``: the workers that wrote a collections file.

Consistency with refreshing: a view shows what the trial has read so far, and grows when the trial
reads more (any query that refreshes: ``steps()``, ``tensor_names()``, the rule invoker before each
step). Looking at a view reads the index files a finished trial left to read on demand, so it never
misses a step the listing showed. Changing a view raises TypeError (smdebug's were its internal
dicts; writing into them corrupted the trial's answers).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from sdk_ext.modes import ModeKeys

if TYPE_CHECKING:
    from sdk_ext.trials.index.trial_index import TrialIndex


class _ModeTable(Mapping[ModeKeys, Mapping[int, int]]):
    """mode -> read-only {mode step: global step}."""

    def __init__(self, table: dict[ModeKeys, dict[int, int]]) -> None:
        self._table = table

    def __getitem__(self, mode: ModeKeys) -> Mapping[int, int]:
        return MappingProxyType(self._table[mode])

    def __iter__(self) -> Iterator[ModeKeys]:
        return iter(list(self._table))

    def __len__(self) -> int:
        return len(self._table)


class _ModeNames(Mapping[ModeKeys, frozenset[str]]):
    """mode -> the tensor names saved in it."""

    def __init__(self, table: dict[ModeKeys, set[str]]) -> None:
        self._table = table

    def __getitem__(self, mode: ModeKeys) -> frozenset[str]:
        return frozenset(self._table[mode])

    def __iter__(self) -> Iterator[ModeKeys]:
        return iter(list(self._table))

    def __len__(self) -> int:
        return len(self._table)


class _PerStep(Mapping[int, frozenset[str]]):
    """global step -> a set derived from its step files (workers, or tensor names)."""

    def __init__(self, index: TrialIndex, *, names: bool) -> None:
        self._index = index
        self._names = names

    def __getitem__(self, step: int) -> frozenset[str]:
        files = self._index.by_step[step]
        if self._names:
            return frozenset().union(*(f.names for f in files))
        return frozenset(f.worker for f in files)

    def __iter__(self) -> Iterator[int]:
        return iter(list(self._index.steps))

    def __len__(self) -> int:
        return len(self._index.by_step)


class TrialMappings:
    """smdebug's trial tables as read-only views; mixed into :class:`~sdk_ext.trials.trial.Trial`."""

    _index: TrialIndex
    _workers: set[str]

    def _maybe_load(self) -> None:
        raise NotImplementedError

    def _current_index(self) -> TrialIndex:
        self._maybe_load()
        if self._index.pending:
            self._index.load()
        return self._index

    @property
    def _global_to_mode(self) -> Mapping[int, tuple[ModeKeys, int]]:
        """global step -> ``(mode, mode step)`` (read-only)."""
        return MappingProxyType(self._current_index().global_to_mode)

    @property
    def _mode_to_global(self) -> Mapping[ModeKeys, Mapping[int, int]]:
        """mode -> {mode step: global step}, for the modes seen other than GLOBAL (read-only)."""
        return _ModeTable(self._current_index().mode_to_global)

    @property
    def workers_for_global_step(self) -> Mapping[int, frozenset[str]]:
        """global step -> the workers that wrote it (read-only)."""
        return _PerStep(self._current_index(), names=False)

    @property
    def global_step_to_tensors_map(self) -> Mapping[int, frozenset[str]]:
        """global step -> the names of the tensors saved at it (read-only)."""
        return _PerStep(self._current_index(), names=True)

    @property
    def mode_to_tensors_map(self) -> Mapping[ModeKeys, frozenset[str]]:
        """mode -> the names of the tensors saved in it, for the modes seen other than GLOBAL (read-only)."""
        return _ModeNames(self._current_index().mode_names)

    @property
    def worker_set(self) -> frozenset[str]:
        """The workers that wrote a collections file."""
        self._maybe_load()
        return frozenset(self._workers)


__all__ = ["TrialMappings"]
