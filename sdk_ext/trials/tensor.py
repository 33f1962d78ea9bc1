"""One saved tensor of a trial: its steps, values, shapes and reductions (smdebug's Tensor API).

Steps are global steps with ``mode=ModeKeys.GLOBAL`` (the default) and mode steps otherwise. With
several workers, ``worker=None`` picks the lexicographically first worker that saved the tensor at
that step. Errors are smdebug's: TensorUnavailableForStep (the step exists but holds no such value),
StepUnavailable (the step was never saved and never will be), StepNotYetAvailable (not written
yet), NoMoreData (training ended before that step), InvalidWorker.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from sdk_ext.exceptions import (
    InvalidWorker,
    NoMoreData,
    ShapeUnavailableForStep,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailableForStep,
)
from sdk_ext.format.paths import reduction_tensor_name
from sdk_ext.format.reductions import normalize_op, reduce
from sdk_ext.modes import ModeKeys, StepState
from sdk_ext.trials.display import TensorDisplay
from sdk_ext.trials.index.trial_index import ReductionKey, StepFile, TrialIndex
from sdk_ext.trials.read.reader import Reads

if TYPE_CHECKING:
    from sdk_ext.trials.trial import Trial

_GLOBAL = ModeKeys.GLOBAL


def _mode(mode: ModeKeys | str | int) -> ModeKeys:
    return mode if isinstance(mode, ModeKeys) else ModeKeys.parse(mode)


class Tensor(TensorDisplay):
    """A tensor of a :class:`~sdk_ext.trials.Trial`; get one with ``trial.tensor(name)``."""

    __slots__ = ("_index", "_reads", "_refresh", "_steps", "_steps_key", "_trial", "name")

    def __init__(
        self, name: str, trial: Trial, *, index: TrialIndex, reads: Reads, refresh: Callable[[], None]
    ) -> None:
        """``index`` and ``reads`` are the trial's; ``refresh`` reads new index files when the trial's
        refresh policy allows it (Trial passes these; users get tensors from ``trial.tensor``)."""
        self.name = name
        self._trial = trial
        self._index = index
        self._reads = reads
        self._refresh = refresh
        self._steps_key: tuple[int, bool, int] | None = None
        self._steps: dict[ModeKeys, tuple[list[int], list[int]]] = {}  # mode -> (steps, global steps)

    @property
    def trial(self) -> Trial:
        return self._trial

    def __repr__(self) -> str:
        return f"<Tensor {self.name!r} of trial {self._trial.name!r}>"

    # --- steps -------------------------------------------------------------------------------------

    def _all_steps(self, mode: ModeKeys) -> tuple[list[int], list[int]]:
        """``(steps, global steps)`` where this tensor has any entry, sorted by step (never modify them)."""
        index = self._index
        index.load()  # a tensor's steps need every index file
        key = (index.generation, self._trial.loaded_all_steps, index.last_complete_step)
        if key != self._steps_key:
            self._steps_key, self._steps = key, {}
        found = self._steps.get(mode)
        if found is None:
            found = self._steps[mode] = index.tensor_steps(self.name, mode)
        return found

    def steps(self, mode: ModeKeys = _GLOBAL, show_incomplete_steps: bool = False) -> list[int]:
        """Steps at which this tensor was saved; only complete steps unless ``show_incomplete_steps``.

        A step is complete once every worker wrote it, a later step was written by every worker, or
        training ended. (smdebug compared a list with an int here, so its answer depended on the
        trial-wide last complete step alone, compared with the *mode* step.)
        """
        self._refresh()
        steps, global_steps = self._all_steps(_mode(mode))
        if show_incomplete_steps or self._trial.loaded_all_steps:
            return list(steps)
        complete = self._index.is_complete
        return [s for s, g in zip(steps, global_steps) if complete(g)]

    def prev_steps(self, step: int, n: int | None = None, mode: ModeKeys = _GLOBAL) -> list[int]:
        """The (complete) steps up to and including ``step``; only the last ``n`` if given."""
        steps = self.steps(mode=mode)
        before = steps[: bisect.bisect_right(steps, step)]
        return before[-n:] if n else before

    # --- locating one step ---------------------------------------------------------------------------

    def _holders(self, step: int, mode: ModeKeys) -> list[StepFile]:
        if mode is _GLOBAL:
            self._index.ensure(step)
        else:
            self._index.load()
        found = self._index.files_at(step, mode)
        if found is None:
            return []
        name = self.name
        return [f for f in found[1] if name in f.names]

    def _step_file(self, step: int, mode: ModeKeys, worker: str | None) -> StepFile:
        """The step file holding this tensor at ``step``, refreshing once on a miss."""
        if mode is _GLOBAL and worker is None:  # the common case, without building a list
            self._index.ensure(step)
            files = self._index.by_step.get(step)
            if files is not None:
                name = self.name
                for f in files:
                    if name in f.names:
                        return f
        holders = self._holders(step, mode)
        if not holders:
            self._refresh()
            holders = self._holders(step, mode)
            if not holders:
                self._raise_missing(step, mode)
        if worker is None:
            return holders[0]
        for f in holders:
            if f.worker == worker:
                return f
        raise InvalidWorker(worker, [f.worker for f in holders])

    def _raise_missing(self, step: int, mode: ModeKeys) -> None:
        damage = self._index.damage_at(step, mode)
        if damage is not None:  # an index file of this step is corrupt: say which
            raise damage
        trial = self._trial
        state = trial.has_passed_step(step, mode)
        if state is StepState.AVAILABLE:
            raise TensorUnavailableForStep(self.name, step, mode)
        if state is StepState.UNAVAILABLE:
            raise StepUnavailable(step, mode)
        if trial.loaded_all_steps:
            steps = trial.steps(mode=mode)
            raise NoMoreData(step, mode, steps[-1] if steps else -1)
        raise StepNotYetAvailable(step, mode)

    # --- values ------------------------------------------------------------------------------------------

    def value(self, step_num: int, mode: ModeKeys = _GLOBAL, worker: str | None = None) -> np.ndarray[Any, Any]:
        """The saved array at ``step_num`` (dtype and shape as written)."""
        if mode.__class__ is not ModeKeys:
            mode = _mode(mode)
        name = self.name
        reads = self._reads
        if reads.ahead_name == name and reads.ahead_mode is mode and reads.ahead_worker == worker:
            value = reads.ahead_values.pop(step_num, None)  # read ahead (sdk_ext.trials.read.reader)
            if value is not None:
                return value
        if worker is not None and reads.across:  # read ahead across workers (the same)
            walk = reads.across.get(name)
            if walk is not None and walk.mode is mode:
                value = walk.values.pop((step_num, worker), None)
                if value is not None:
                    return value
        sf = None
        if mode is _GLOBAL:  # the common cases, inlined from _step_file
            if worker is None:
                files = self._index.by_step.get(step_num)
                if files is not None:
                    for f in files:
                        if name in f.names:
                            sf = f
                            break
            else:  # one worker of several (a rule comparing workers asks each at a step): no scan
                held = self._index.file_of(step_num, worker)
                if held is not None and name in held.names:
                    sf = held
        if sf is None:
            sf = self._step_file(step_num, mode, worker)
        loc = sf.raw.get(name)
        if loc is None:
            raise TensorUnavailableForStep(name, step_num, mode, has_reductions=name in sf.reductions)
        same = reads.last_name == name and reads.last_mode is mode
        previous = reads.last_step if same and reads.last_worker == worker else None
        # where the last walk (this mode; another tensor or worker) was: its end starts this one
        ended = reads.last_step if reads.last_mode is mode else None
        # another worker's value of this tensor at this step came just before: a walk across workers
        started = same and reads.last_step == step_num and reads.last_worker not in (None, worker)
        reads.last_name, reads.last_mode, reads.last_worker, reads.last_step = name, mode, worker, step_num
        if previous is not None and previous < step_num:
            value = reads.read_ahead(name, sf, loc, step_num, previous, mode, self._all_steps(mode)[0], worker)
            if value is not None:
                return value
        elif (
            previous is None
            and reads.walk_steps is not None
            and ended is not None
            and ended == reads.walk_steps[-1]
            and step_num == reads.walk_steps[0]
            and reads.walk_steps is self._all_steps(mode)[0]
        ):  # a walk through these steps (another tensor's, or worker's) ended: this one starts
            value = reads.read_ahead(name, sf, loc, step_num, None, mode, reads.walk_steps, worker)
            if value is not None:
                return value
        elif worker is not None and (started or name in reads.across):
            value = reads.read_across(name, sf, loc, step_num, mode, worker, started,
                                      lambda: self._all_steps(mode)[0])
            if value is not None:
                return value
        return reads.read(sf, loc, name, step_num, mode)

    def values(self, mode: ModeKeys = _GLOBAL, worker: str | None = None) -> dict[int, np.ndarray[Any, Any]]:
        """``{step: value}`` over the complete steps: the way to read a tensor at every step.

        Many values per call (:mod:`sdk_ext.trials.read.many_steps`): the event files are fetched in one batch
        and the records that share a wire layout are checked and copied together, so a value costs
        a fraction of a ``value()`` call. Each value is a row of a new array (one per layout):
        writable, and changing it changes no other value and no later read.

        Raises:
            IndexReaderException: an index file of the trial is damaged, so a step of this tensor may
                be missing from the answer (never a silent gap).
        """
        mode = _mode(mode)
        steps = self.steps(mode=mode)
        damaged = self._index.damaged
        if damaged:
            damage = self._index.damage_at(min(damaged), ModeKeys.GLOBAL)
            if damage is not None:
                raise damage
        got = self._reads.read_steps(self.name, steps, mode, worker)
        if got is not None:
            return dict(zip(steps, got))
        located = []
        for step in steps:
            sf = self._step_file(step, mode, worker)
            loc = sf.raw.get(self.name)
            if loc is None:
                raise TensorUnavailableForStep(self.name, step, mode, has_reductions=self.name in sf.reductions)
            located.append((sf, loc))
        return dict(zip(steps, self._reads.read_many(located, self.name, steps, mode)))

    def shape(self, step_num: int, mode: ModeKeys = _GLOBAL, worker: str | None = None) -> tuple[int, ...]:
        """The shape saved at ``step_num``: the shape entry if there is one, else the value's."""
        mode = _mode(mode)
        sf = self._step_file(step_num, mode, worker)
        shape = sf.shapes.get(self.name)
        if shape is not None:
            return shape
        loc = sf.raw.get(self.name)
        if loc is None:
            raise ShapeUnavailableForStep(self.name, step_num, mode)
        return tuple(self._reads.read(sf, loc, self.name, step_num, mode).shape)

    def workers(self, step_num: int, mode: ModeKeys = _GLOBAL) -> list[str]:
        """The workers that saved this tensor at ``step_num``, sorted."""
        mode = _mode(mode)
        holders = self._holders(step_num, mode)
        if not holders:
            self._refresh()
            holders = self._holders(step_num, mode)
        if not holders:
            raise TensorUnavailableForStep(self.name, step_num, mode)
        return [f.worker for f in holders]

    # --- reductions --------------------------------------------------------------------------------------

    def reduction_value(
        self,
        step_num: int,
        reduction_name: str,
        mode: ModeKeys = _GLOBAL,
        worker: str | None = None,
        abs: bool = False,
    ) -> Any:
        """A reduction at ``step_num``: the stored one, else computed from the raw value (numpy).

        ``reduction_name`` is one of ``min max mean std variance sum prod l1 l2``; ``abs=True`` asks
        for the reduction of the absolute values.
        """
        mode = _mode(mode)
        op = normalize_op(reduction_name)
        sf = self._step_file(step_num, mode, worker)
        stored = sf.reductions.get(self.name)
        loc = None if stored is None else stored.get((op, bool(abs)))
        if loc is not None:  # the record's tag is the reduction's own name
            return self._reads.read(sf, loc, reduction_tensor_name(self.name, op, abs=bool(abs)), step_num, mode)
        raw = sf.raw.get(self.name)
        if raw is None:
            raise TensorUnavailableForStep(self.name, step_num, mode, has_reductions=bool(stored))
        return reduce(self._reads.read(sf, raw, self.name, step_num, mode), op, abs=bool(abs))[0]

    def reduction_values(
        self, step_num: int, mode: ModeKeys = _GLOBAL, worker: str | None = None
    ) -> dict[ReductionKey, np.ndarray[Any, Any]]:
        """Every reduction stored at ``step_num``, as ``{(op, abs): value}`` (computed ones are not listed)."""
        mode = _mode(mode)
        sf = self._step_file(step_num, mode, worker)
        stored = sf.reductions.get(self.name) or {}
        keys = list(stored)
        arrays = self._reads.read_many(
            [(sf, stored[k]) for k in keys],
            [reduction_tensor_name(self.name, op, abs=a) for op, a in keys],
            [step_num] * len(keys),
            mode,
        )
        return dict(zip(keys, arrays))


__all__ = ["Tensor"]
