"""Whether a step has passed, and waiting for steps: ``Trial.has_passed_step`` and ``Trial.wait_for_steps``.

A step is AVAILABLE once complete (every worker wrote it, a later step is complete, or training
ended), UNAVAILABLE once it can never come (a later step is complete without it, or training ended
without it), and NOT_YET_AVAILABLE otherwise (smdebug's StepState).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import TYPE_CHECKING

from sdk_ext.exceptions import NoMoreData, StepNotYetAvailable, StepUnavailable
from sdk_ext.modes import ModeKeys, StepState
from sdk_ext.trials.index.trial_index import TrialIndex
from sdk_ext.trials.options import poll

if TYPE_CHECKING:
    from sdk_ext.trials.trial import Trial


def step_state(trial: Trial, index: TrialIndex, step: int, mode: ModeKeys) -> StepState:
    """AVAILABLE (complete), NOT_YET_AVAILABLE (may still come) or UNAVAILABLE (never will); ``index``
    is the trial's (what it has read; ``trial.steps`` refreshes it first).

    Raises:
        IndexReaderException: an index file of ``step`` is damaged: the step was written but cannot
            be read, which is neither "available" nor "skipped".
    """
    all_steps = trial.steps(mode=mode, show_incomplete_steps=True)
    damage = index.damage_at(step, mode)
    if damage is not None:
        raise damage
    at = bisect.bisect_left(all_steps, step)
    if at < len(all_steps):
        found = all_steps[at]
        global_step = index.global_of(found, mode)
        assert global_step is not None
        if found > step:  # step was skipped, or may still come from a lagging worker
            return StepState.UNAVAILABLE if index.last_complete_step >= global_step else StepState.NOT_YET_AVAILABLE
        if trial.loaded_all_steps or index.is_complete(global_step):
            return StepState.AVAILABLE
        return StepState.NOT_YET_AVAILABLE
    return StepState.UNAVAILABLE if trial.loaded_all_steps else StepState.NOT_YET_AVAILABLE


def wait_for_steps(trial: Trial, required_steps: Iterable[int], mode: ModeKeys, *, timeout: float | None) -> None:
    """Block until every step in ``required_steps`` is available (see ``Trial.wait_for_steps``)."""
    opts = trial.options
    deadline = None if timeout is None else opts.clock.now() + timeout
    previous, trial.dynamic_refresh = trial.dynamic_refresh, True
    try:
        for step in required_steps:

            def attempt(step: int = step) -> bool | None:
                state = trial.has_passed_step(step, mode)
                if state is StepState.AVAILABLE:
                    return True
                if state is StepState.UNAVAILABLE:
                    if not trial.loaded_all_steps:
                        raise StepUnavailable(step, mode)
                    known = trial.steps(mode=mode, show_incomplete_steps=True)
                    last = known[-1] if known else -1
                    if mode is ModeKeys.GLOBAL:  # a damaged step later on is not "no more data"
                        last = max([last, *trial.damaged_steps()])
                    if step < last:
                        raise StepUnavailable(step, mode)
                    raise NoMoreData(step, mode, last)
                return None

            left = None if deadline is None else max(0.0, deadline - opts.clock.now())
            if poll(attempt, timeout=left, interval=opts.poll_interval, clock=opts.clock,
                    what=f"step {step} of mode {mode.name}") is None:
                raise StepNotYetAvailable(step, mode)
    finally:
        trial.dynamic_refresh = previous


__all__ = ["step_state", "wait_for_steps"]
