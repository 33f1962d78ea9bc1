"""Run a rule over a trial to the end: the step it first fires at, or None."""

from __future__ import annotations

from sdk_ext.exceptions import NoMoreData, RuleEvaluationConditionMet
from sdk_ext.rules import Rule, invoke_rule


def first_firing(rule: Rule, start_step: int = 0, end_step: int | None = None) -> int | None:
    try:
        invoke_rule(rule, start_step, end_step, raise_eval_cond=True, poll_interval=0.001)
    except RuleEvaluationConditionMet as fired:
        return fired.step
    except NoMoreData:
        pass
    return None
