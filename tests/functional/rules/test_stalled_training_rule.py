"""StalledTrainingRule on a trial written by sdk_ext.hooks.Hook while the rule watches it.

The rule's clock is injected: every time the rule sleeps, 10 "seconds" pass and the fake job
writes (or not) its next step, so the tests are exact and instant.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sdk_ext.exceptions import NoMoreData, RuleEvaluationConditionMet
from sdk_ext.rules import StalledTrainingRule, invoke_rule
from sdk_ext.trials import create_trial
from tests.functional.rules.trial_writer import TrialWriter


class FakeTime:
    def __init__(self, on_sleep: Callable[[], None] = lambda: None) -> None:
        self.now, self.on_sleep = 0.0, on_sleep

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += 10.0
        self.on_sleep()


def evaluate(rule: StalledTrainingRule) -> int | None:
    try:
        invoke_rule(rule, raise_eval_cond=True)
    except RuleEvaluationConditionMet as fired:
        return fired.step
    except NoMoreData:
        return None
    raise AssertionError("expected a firing or NoMoreData")


def test_fires_when_the_job_writes_nothing_for_longer_than_threshold(tmp_path):
    writer = TrialWriter(tmp_path)
    for s in range(3):
        writer.step(s, {"loss": np.float32(1.0)})
    writer.close(end=False)
    t = FakeTime()
    rule = StalledTrainingRule(create_trial(str(tmp_path)), threshold="60", clock=t.clock, sleep=t.sleep)
    assert evaluate(rule) == 2  # the last step written
    assert 60 < t.now <= 80
    assert "no new step for 70 s (threshold 60 s); last step written: 2" in rule.issue


def test_quiet_while_steps_keep_arriving_then_ends_with_training(tmp_path):
    writer = TrialWriter(tmp_path)
    writer.step(0, {"loss": np.float32(1.0)})
    writer.close(end=False)
    produced = [0]

    def job() -> None:  # one new step per 10 s, for 200 s, then training ends
        if produced[0] < 20:
            produced[0] += 1
            writer.step(produced[0], {"loss": np.float32(1.0)})
        else:
            writer.close(end=True)

    t = FakeTime(job)
    rule = StalledTrainingRule(create_trial(str(tmp_path)), threshold="60", clock=t.clock, sleep=t.sleep)
    assert evaluate(rule) is None
    assert t.now > 60 * 3  # it watched well past the threshold


def test_a_finished_job_with_no_new_data_is_not_stalled(tmp_path):
    writer = TrialWriter(tmp_path)
    writer.step(0, {"loss": np.float32(1.0)})
    writer.close(end=True)
    t = FakeTime()
    rule = StalledTrainingRule(create_trial(str(tmp_path)), threshold="1", clock=t.clock, sleep=t.sleep)
    assert evaluate(rule) is None
