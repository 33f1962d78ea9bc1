"""StalledTrainingRule: the training job has written nothing new for ``threshold`` seconds.

docs/RULES.md#stalledtrainingrule. Time-driven, not value-driven, so it replaces ``invoke``. Readings chosen where SageMaker
documents no exact formula:

* Progress is any new step in the trial (written by any worker; a step still incomplete counts).
  The clock starts when the rule is created (a job that never writes anything stalls too).
* ``invoke(step)`` returns as soon as the trial holds a step ``>= step`` (no re-listing while it
  already knows one); otherwise it polls every ``poll_interval`` seconds until new data arrives
  (``now`` becomes the last progress), training ends (:class:`NoMoreData`, a normal end), or
  ``now - last_progress > threshold``: then it fires, at the last step written (or 0).
* Its waits between polls are :func:`~sdk_ext.rules.time_limit.untimed`: under the evaluator, a
  ``threshold`` above ``invoke_timeout_secs`` (1800 s against 300 s by default) still fires; only
  the rule's own work between two polls is held to the limit.
* ``stop_training_on_fire`` adds a StopTraining action for ``training_job_name_prefix`` (required
  then); like SageMaker's, it stops the job only if exactly one InProgress job starts with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sdk_ext.exceptions import NoMoreData, RuleEvaluationConditionMet
from sdk_ext.modes import StepState
from sdk_ext.rules.actions import StopTraining
from sdk_ext.rules.builtin.base import BuiltinRule, fmt
from sdk_ext.rules.time_limit import untimed


class StalledTrainingRule(BuiltinRule):
    """Fires when no new step has been written for more than ``threshold`` seconds."""

    selects_tensors = False  # it judges the time between steps, not tensors

    def __init__(
        self,
        base_trial: Any,
        threshold: float | str = 1800,
        stop_training_on_fire: bool | str = False,
        training_job_name_prefix: str | None = None,
        *,
        action_str: str = "",
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        p = self.params
        self.threshold = p.number("threshold", threshold, gt=0)
        self.stop_training_on_fire = p.flag("stop_training_on_fire", stop_training_on_fire)
        self.training_job_name_prefix = p.maybe_text("training_job_name_prefix", training_job_name_prefix)
        p.require(
            not self.stop_training_on_fire or bool(self.training_job_name_prefix),
            f"parameter training_job_name_prefix={training_job_name_prefix!r}: stop_training_on_fire=True needs "
            "the name (or a unique prefix) of the training job to stop",
        )
        p.done()
        if self.stop_training_on_fire and self.training_job_name_prefix:
            self._actions.actions.append(StopTraining(self.training_job_name_prefix))
        self.clock, self.sleep = clock, sleep
        self.last_progress = clock()
        self._seen: tuple[int, int] = (0, -1)  # (number of steps known, last step known)

    def invoke_at_step(self, step: int) -> bool:  # pragma: no cover - invoke() is the entry point
        return False

    def invoke(self, step: int) -> None:
        if step <= self._seen[1]:
            return
        while True:
            known = self.base_trial.steps(show_incomplete_steps=True)
            seen = (len(known), known[-1] if known else -1)
            if seen != self._seen:
                self._seen, self.last_progress = seen, self.clock()
                if seen[1] >= step:
                    return
            if self.base_trial.has_passed_step(seen[1] + 1) == StepState.UNAVAILABLE:
                raise NoMoreData(step, last_step=seen[1])  # training has ended
            idle = self.clock() - self.last_progress
            if idle > self.threshold:
                self.issue = (f"no new step for {fmt(idle)} s (threshold {fmt(self.threshold)} s); last step "
                              f"written: {seen[1] if seen[1] >= 0 else 'none'}")
                condition = RuleEvaluationConditionMet(self.rule_name, max(seen[1], 0), message=self.issue)
                if not self.defer_actions:
                    self.run_actions(str(condition))
                raise condition
            with untimed():  # waiting for the job: never a stuck rule (the threshold may exceed the time limit)
                self.sleep(self.poll_interval)
