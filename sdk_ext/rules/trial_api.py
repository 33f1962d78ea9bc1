"""What rules need from a trial, and the waiting/refresh helpers built on it.

Rules talk to trials only through smdebug's public trial API (docs/FORMAT.md#reader-semantics), written down
here as Protocols, so a rule runs on :func:`sdk_ext.trials.create_trial`'s trials and on any other
object with the same methods. :func:`wait_for_step` is smdebug's ``Trial.wait_for_steps`` for one
step, with a poll interval the caller chooses (smdebug sleeps a fixed 2 s), so the evaluator can
notice a new step within a fraction of a second.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from sdk_ext.exceptions import NoMoreData, StepUnavailable
from sdk_ext.modes import ModeKeys, StepState
from sdk_ext.rules.time_limit import untimed


@runtime_checkable
class TensorLike(Protocol):
    """The tensor methods rules call (smdebug's ``Tensor``)."""

    def steps(self, mode: ModeKeys = ..., show_incomplete_steps: bool = ...) -> list[int]: ...

    def value(self, step_num: int, mode: ModeKeys = ..., worker: str | None = ...) -> np.ndarray: ...

    def reduction_value(
        self, step_num: int, reduction_name: str, mode: ModeKeys = ..., worker: str | None = ...,
        abs: bool = ...,
    ) -> Any: ...

    def prev_steps(self, step: int, n: int, mode: ModeKeys = ...) -> list[int]: ...


@runtime_checkable
class TrialLike(Protocol):
    """The trial methods rules and the invoker call (smdebug's ``Trial``)."""

    def tensor_names(self, *args: Any, **kwargs: Any) -> list[str]: ...

    def tensor(self, tname: str) -> Any: ...

    def has_tensor(self, tname: str) -> bool: ...

    def steps(self, mode: ModeKeys = ..., show_incomplete_steps: bool = ...) -> list[int]: ...

    def has_passed_step(self, step: int, mode: ModeKeys = ...) -> StepState: ...

    def wait_for_steps(self, required_steps: Sequence[int], mode: ModeKeys = ...) -> None: ...

    def collections(self) -> Any: ...


def wait_for_step(
    trial: Any,
    step: int,
    *,
    mode: ModeKeys = ModeKeys.GLOBAL,
    poll_interval: float = 0.2,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Block until ``step`` is complete in ``trial``, polling every ``poll_interval`` seconds.

    Same outcomes as smdebug's ``Trial.wait_for_steps([step])``. The sleeps between checks are
    :func:`~sdk_ext.rules.time_limit.untimed`: waiting never counts against a rule's time limit.

    Raises:
        StepUnavailable: the step was not saved and never will be (a later step is complete).
        NoMoreData: training has ended and ``step`` lies beyond the last saved step.
    """
    while True:
        state = trial.has_passed_step(step, mode)
        if state == StepState.AVAILABLE:
            return
        if state == StepState.UNAVAILABLE:
            known = trial.steps(mode=mode, show_incomplete_steps=True)
            last = max([known[-1] if known else -1, *_damaged(trial, mode)])
            if step < last:
                raise StepUnavailable(step, mode)
            raise NoMoreData(step, mode, last)
        with untimed():
            sleep(poll_interval)


def _damaged(trial: Any, mode: ModeKeys) -> list[int]:
    """The global steps whose index files are damaged (sdk_ext's trials say; others know none)."""
    damaged = getattr(trial, "damaged_steps", None)
    return list(damaged()) if damaged is not None and mode is ModeKeys.GLOBAL else []


def next_known_step(trial: Any, after: int, *, mode: ModeKeys = ModeKeys.GLOBAL) -> int | None:
    """The smallest step of ``trial`` (complete or not, or damaged: never jumped over) greater than
    ``after``, or None."""
    known = [*trial.steps(mode=mode, show_incomplete_steps=True), *_damaged(trial, mode)]
    later = [s for s in known if s > after]
    return min(later) if later else None


@contextlib.contextmanager
def no_refresh(trials: Iterable[Any]) -> Iterator[None]:
    """Freeze the trials' view of the data (smdebug's ``no_refresh``); the previous setting comes back after."""
    frozen = [(t, getattr(t, "dynamic_refresh", True)) for t in trials]
    for trial, _ in frozen:
        with contextlib.suppress(AttributeError):
            trial.dynamic_refresh = False
    try:
        yield
    finally:
        for trial, before in frozen:
            with contextlib.suppress(AttributeError):
                trial.dynamic_refresh = before


__all__ = ["TensorLike", "TrialLike", "next_known_step", "no_refresh", "wait_for_step"]
