"""Rule base class and invoke_rule: smdebug's semantics (docs/RULES.md#invoke-and-invoke_rule)."""

from __future__ import annotations

import pytest

from sdk_ext.exceptions import NoMoreData, RuleEvaluationConditionMet, TensorUnavailableForStep
from sdk_ext.rules import Rule, invoke_rule
from tests.unit.rules.fake_trial import FakeTrial


class Recorder(Rule):
    """Remembers every step it was asked about; fires at the steps in ``fire_at``."""

    def __init__(self, base_trial, fire_at=(), other_trials=None):
        super().__init__(base_trial, other_trials=other_trials)
        self.seen: list[int] = []
        self.refresh_seen: list[bool] = []
        self.fire_at = set(fire_at)

    def invoke_at_step(self, step):
        self.seen.append(step)
        self.refresh_seen.append(self.base_trial.dynamic_refresh)
        if step in self.fire_at:
            return self.found_issue(f"step {step} is on the list")
        return False


def trial_with(steps, *, ended=True) -> FakeTrial:
    t = FakeTrial(ended=ended)
    for s in steps:
        t.add(s, {"w": [float(s)]})
    return t


def test_invoke_rule_sees_saved_steps_then_raises_no_more_data_at_the_end():
    rule = Recorder(trial_with([0, 2, 4]))
    with pytest.raises(NoMoreData) as err:
        invoke_rule(rule)
    assert rule.seen == [0, 2, 4]
    assert err.value.step == 5 and err.value.last_step == 4


def test_end_step_is_exclusive_and_start_step_skips_earlier_steps():
    rule = Recorder(trial_with([0, 1, 2, 3, 4]))
    invoke_rule(rule, start_step=1, end_step=3)
    assert rule.seen == [1, 2]


def test_raise_eval_cond_stops_at_the_first_firing_with_the_reason():
    rule = Recorder(trial_with([0, 1, 2, 3]), fire_at={1, 3})
    with pytest.raises(RuleEvaluationConditionMet) as err:
        invoke_rule(rule, raise_eval_cond=True)
    assert err.value.step == 1 and rule.seen == [0, 1]
    assert str(err.value) == ("Evaluation of the rule Recorder at step 1 resulted in the condition being met: "
                              "step 1 is on the list")
    assert rule.issue == "step 1 is on the list"


def test_without_raise_eval_cond_the_walk_goes_on_after_a_firing():
    rule = Recorder(trial_with([0, 1, 2, 3]), fire_at={1, 3})
    with pytest.raises(NoMoreData):
        invoke_rule(rule)
    assert rule.seen == [0, 1, 2, 3]


def test_end_of_rule_breaks_the_walk():
    class Once(Rule):
        def invoke(self, step):
            raise RuleEvaluationConditionMet(self.rule_name, step, end_of_rule=True)

        def invoke_at_step(self, step):
            return False

    invoke_rule(Once(trial_with([0])), end_step=10)  # returns instead of walking to 10


def test_missing_tensor_at_a_step_is_skipped():
    class NeedsFoo(Rule):
        def __init__(self, t):
            super().__init__(t)
            self.ok: list[int] = []

        def invoke_at_step(self, step):
            self.base_trial.tensor("w").value(step)
            if step == 1:
                raise TensorUnavailableForStep("foo", step)
            self.ok.append(step)
            return False

    rule = NeedsFoo(trial_with([0, 1, 2]))
    with pytest.raises(NoMoreData):
        invoke_rule(rule)
    assert rule.ok == [0, 2]


def test_waits_for_steps_the_job_is_still_writing():
    trial = trial_with([0], ended=False)
    trial.pending = [lambda: trial.add(1, {"w": [1.0]}), lambda: None, lambda: trial.add(2, {"w": [2.0]}),
                     lambda: trial.end()]
    rule = Recorder(trial)
    with pytest.raises(NoMoreData):
        invoke_rule(rule, poll_interval=0.001)
    assert rule.seen == [0, 1, 2]
    assert trial.polls >= 3  # it really waited


def test_a_run_of_unsaved_steps_is_crossed_in_one_jump():
    trial = trial_with([0, 500, 1000])
    calls: list[int] = []

    class Counting(Recorder):
        def invoke(self, step):  # counts calls, then does what Rule.invoke does
            calls.append(step)
            Rule.invoke(self, step)

    plain = Recorder(trial)
    with pytest.raises(NoMoreData):
        invoke_rule(plain)
    assert plain.seen == [0, 500, 1000]
    assert trial.polls == 0
    overriding = Counting(trial)  # overrides invoke: walks every step, as smdebug does
    with pytest.raises(NoMoreData):
        invoke_rule(overriding)
    assert overriding.seen == [0, 500, 1000] and len(calls) == 1002


def test_the_trial_view_is_frozen_during_invoke_at_step_and_restored_after():
    trial = trial_with([0, 1])
    rule = Recorder(trial)
    with pytest.raises(NoMoreData):
        invoke_rule(rule)
    assert rule.refresh_seen == [False, False]
    assert trial.dynamic_refresh is True


def _plain(base, other):
    class R(Rule):
        def invoke_at_step(self, step):
            return False

    return R


@pytest.mark.parametrize(
    "call, expect_other, expect_action",
    [
        (lambda R, b, o: R(b), [], ""),
        (lambda R, b, o: R(b, other_trials=[o]), ["o"], ""),
        (lambda R, b, o: R(b, [o]), ["o"], ""),  # smdebug < 1.0.4 positional order
        (lambda R, b, o: R(b, '{"name": "sms", "endpoint": "+1"}'), [], '{"name": "sms", "endpoint": "+1"}'),
        (lambda R, b, o: R(b, "", [o]), ["o"], ""),  # smdebug >= 1.0.4: (base, action_str, other_trials)
        (lambda R, b, o: R(b, None, [o]), ["o"], ""),
        (lambda R, b, o: R(b, action_str="", other_trials=[o]), ["o"], ""),
        (lambda R, b, o: R(b, other_trials=o), ["o"], ""),  # a single trial
    ],
)
def test_every_smdebug_constructor_form_is_accepted(call, expect_other, expect_action):
    base, other = FakeTrial(), FakeTrial()
    rule = call(_plain(base, other), base, other)
    assert rule.base_trial is base
    assert ["o" for t in rule.other_trials if t is other] == expect_other
    assert rule.trials[0] is base and len(rule.trials) == 1 + len(expect_other)
    assert rule.action_str == expect_action


def test_required_tensors_are_fetched_before_invoke_at_step():
    class Prev(Rule):
        def __init__(self, t):
            super().__init__(t)
            self.got: dict[int, list[float]] = {}

        def set_required_tensors(self, step):
            self.req_tensors.add("w", steps=[step - 1] if step else [step])

        def invoke_at_step(self, step):
            tensors = self.req_tensors.get()
            self.got[step] = [float(t.value(s)[0]) for t in tensors for s in self.req_tensors.get_tensor_steps("w")]
            return False

    rule = Prev(trial_with([0, 1, 2]))
    with pytest.raises(NoMoreData):
        invoke_rule(rule)
    assert rule.got == {0: [0.0], 1: [0.0], 2: [1.0]}


def test_actions_run_on_firing_unless_deferred():
    ran: list[str] = []
    rule = Recorder(trial_with([0]), fire_at={0})
    rule._actions.invoke = lambda message="": ran.append(message)  # type: ignore[method-assign]
    rule._actions.actions = ["x"]  # type: ignore[list-item]
    with pytest.raises(RuleEvaluationConditionMet):
        rule.invoke(0)
    assert len(ran) == 1 and "step 0" in ran[0]
    rule.defer_actions = True
    with pytest.raises(RuleEvaluationConditionMet):
        rule.invoke(0)
    assert len(ran) == 1
    rule.run_actions("later")
    assert ran[-1] == "later"
