"""How a trial reads values for its tensors: one at a time, a batch, or one tensor over many steps.

:class:`Reads` sits between :class:`~sdk_ext.trials.Tensor` (which finds step files and records)
and :class:`~sdk_ext.trials.values.ValueReader` (which fetches and decodes): it keeps the optional
value cache (``create_trial(cache=True)``), starts read-ahead on the one-at-a-time path, keeps the
step plans of the many-steps path (:mod:`sdk_ext.trials.bulk`), and turns an event file that never
came into smdebug's TensorUnavailableForStep.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sdk_ext.exceptions import TensorUnavailableForStep
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import Storage
from sdk_ext.trials.bulk import read_values
from sdk_ext.trials.index_cache import TrialIndex
from sdk_ext.trials.options import TrialOptions
from sdk_ext.trials.plan import StepPlan
from sdk_ext.trials.step_files import Location, StepFile
from sdk_ext.trials.values import EventFileUnavailable, ValueReader

#: fewer steps than this are read step by step (a plan and array operations cost more than they save)
BULK_MIN = 16
#: step plans kept (one per distinct set of steps read with ``Tensor.values``), oldest out
_PLANS = 4

Array = np.ndarray[Any, Any]


class Reads:
    """The value reads of one trial; ``cache=True`` keeps every value read (smdebug's ``cache``)."""

    def __init__(
        self,
        storage: Storage,
        options: TrialOptions,
        index: TrialIndex,
        *,
        training_ended: Callable[[], bool],
        cache: bool = False,
    ) -> None:
        self.reader = ValueReader(storage, options, training_ended=training_ended)
        self._index = index
        self._memo: dict[tuple[str, int], Array] | None = {} if cache else None
        self._plans: dict[tuple[Any, ...], StepPlan] = {}  # oldest first

    def read(self, sf: StepFile, loc: Location, name: str, step: int, mode: ModeKeys) -> Array:
        """The value of the record ``loc`` of ``sf`` (``name`` at ``step`` of ``mode``, for errors)."""
        memo = self._memo
        if memo is None:  # the common case: the event file is in the file cache
            entry = self.reader.cache.get(sf.event_key)  # type: ignore[arg-type]
            if entry is not None:
                return self.reader.decode_cached(entry, sf.event_key, loc[0], loc[1], name)  # type: ignore[arg-type]
        else:
            hit = memo.get((sf.key, loc[0]))
            if hit is not None:
                return hit
        if sf.event_key is None:
            raise TensorUnavailableForStep(name, step, mode)
        self.reader.read_ahead(self._index, sf)
        try:
            value = self.reader.read(sf.event_key, loc[0], loc[1], sf.event_size, name)
        except EventFileUnavailable as err:
            raise TensorUnavailableForStep(name, step, mode) from err
        if memo is not None:
            memo[(sf.key, loc[0])] = value
        return value

    def read_many(
        self, located: Sequence[tuple[StepFile, Location]], name: str, steps: Sequence[int], mode: ModeKeys
    ) -> list[Array]:
        """The values of several records, their storage requests in one batch."""
        if self._memo is not None or any(sf.event_key is None for sf, _ in located):
            return [self.read(sf, loc, name, step, mode) for (sf, loc), step in zip(located, steps)]
        try:
            return self.reader.read_many(
                [(sf.event_key, s, n, sf.event_size, name) for sf, (s, n) in located]  # type: ignore[misc]
            )
        except EventFileUnavailable as err:  # already waited for: say which step, do not wait again
            step = next((st for (sf, _), st in zip(located, steps) if sf.event_key == err.key), steps[0])
            raise TensorUnavailableForStep(name, step, mode) from err

    def read_steps(self, name: str, steps: Sequence[int], mode: ModeKeys, worker: str | None) -> list[Array] | None:
        """The raw values of ``name`` at ``steps``, many per call; None where the step-by-step path is needed."""
        if self._memo is not None or len(steps) < BULK_MIN:
            return None
        index = self._index
        key = (index.generation, mode, worker, tuple(steps))
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = StepPlan(index, steps, mode, worker)
            while len(self._plans) > _PLANS:
                del self._plans[next(iter(self._plans))]
        try:
            return read_values(self.reader, plan, name)
        except EventFileUnavailable as err:  # already waited for: say which step, do not wait again
            located = plan.locate(name)
            numbers = [] if located is None else located[0].tolist()
            step = next((s for s, k in zip(steps, numbers) if plan.files[k].event_key == err.key), steps[0])
            raise TensorUnavailableForStep(name, step, mode) from err


__all__ = ["BULK_MIN", "Reads"]
