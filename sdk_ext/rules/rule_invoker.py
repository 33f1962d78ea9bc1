"""invoke_rule: walk the global steps and evaluate a rule at each one (smdebug's semantics).

* Steps ``start_step, start_step+1, ...`` up to ``end_step`` (exclusive), waiting while the
  training job has not written the next step yet.
* A step that was not saved, or a tensor missing at a step, is skipped (StepUnavailable,
  TensorUnavailable, TensorUnavailableForStep are swallowed). Damaged data is not missing data:
  :class:`~sdk_ext.exceptions.DamagedDataError` (a file cut short or deleted, a checksum that does
  not match, an index file that cannot be read) propagates with the step it stopped, so a rule
  never passes over a step it could not read (the evaluator ends it in Error naming the file).
* When training has ended and the next step is beyond the last one saved, :class:`NoMoreData`
  propagates: the caller treats it as the normal end.
* A firing raises :class:`RuleEvaluationConditionMet` when ``raise_eval_cond``; otherwise the walk goes
  on (and stops if the exception says ``end_of_rule``).
* A profiler rule (its step is only a counter of time windows) ends the walk with
  :class:`~sdk_ext.exceptions.NoMoreProfilerData` once the job's data is all seen: a normal return.

* With a time limit (``time_limit``, the evaluator's RuleParameter ``invoke_timeout_secs``), the
  rule's code at one step may run that long; then :class:`~sdk_ext.rules.time_limit.InvocationTimeout`
  propagates (a rule overriding ``invoke`` has its whole ``invoke`` timed, except its waits for data:
  :func:`~sdk_ext.rules.time_limit.untimed`; one with ``times_itself`` times its own evaluation).

The only differences from smdebug are speed: the wait polls every ``poll_interval`` seconds (smdebug:
2 s), and a run of unsaved steps is crossed in one jump to the next saved step instead of one failed
lookup per integer (same outcome: smdebug's rule sees none of them), unless the rule overrides
``invoke`` and may count steps itself.
"""

from __future__ import annotations

import logging

from sdk_ext.exceptions import (
    DamagedDataError,
    NoMoreProfilerData,
    RuleEvaluationConditionMet,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)
from sdk_ext.rules.rule import Rule
from sdk_ext.rules.time_limit import invocation_limit
from sdk_ext.rules.trial_api import next_known_step

logger = logging.getLogger(__name__)


def invoke_rule(
    rule_obj: Rule | None = None,
    start_step: int | None = 0,
    end_step: int | None = None,
    raise_eval_cond: bool = False,
    *,
    rule: Rule | None = None,
    poll_interval: float | None = None,
    time_limit: float | None = None,
) -> None:
    """Evaluate ``rule_obj`` at every global step from ``start_step`` to ``end_step`` (exclusive).

    Args:
        rule_obj: the rule (smdebug's parameter name; ``rule=`` is accepted as well).
        start_step: first global step (None means 0).
        end_step: stop before this step; None runs until training ends.
        raise_eval_cond: re-raise the first RuleEvaluationConditionMet instead of going on.
        poll_interval: seconds between checks while waiting for a step (default: the rule's
            ``poll_interval``).
        time_limit: seconds the rule's code may run at one step (default: the rule's ``time_limit``,
            None unless set: no limit).

    Raises:
        RuleEvaluationConditionMet: the rule fired and ``raise_eval_cond`` is True.
        NoMoreData: training ended before ``end_step`` (always, when ``end_step`` is None).
        TypeError: no rule, or two different ones, given.
        InvocationTimeout: the rule's code at one step ran past ``time_limit``.
        DamagedDataError: data of a step the rule was asked to judge is damaged (its ``step`` says which).
    """
    if rule_obj is None or (rule is not None and rule is not rule_obj):
        if rule_obj is not None or rule is None:
            raise TypeError("invoke_rule() takes one rule: invoke_rule(rule) or invoke_rule(rule=rule)")
        rule_obj = rule
    if poll_interval is not None:
        rule_obj.poll_interval = poll_interval
    if time_limit is not None:
        rule_obj.time_limit = time_limit or None
    step = start_step or 0
    can_jump = not rule_obj.overrides_invoke
    # a profiler rule times its own evaluation, not its wait for the next window of data
    timed_inside = can_jump or bool(getattr(rule_obj, "times_itself", False))
    logger.info("rule %s: evaluation starts at step %d", rule_obj.rule_name, step)
    while end_step is None or step < end_step:
        try:
            if timed_inside:
                rule_obj.invoke(step)  # Rule.invoke times the rule's code itself (not the wait for the step)
            else:
                with invocation_limit(rule_obj.time_limit, rule=rule_obj.rule_name, step=step):
                    rule_obj.invoke(step)
        except StepUnavailable as err:
            logger.debug("%s", err)
            if can_jump:
                following = next_known_step(rule_obj.base_trial, step)
                if following is not None and following > step + 1:
                    step = following if end_step is None else min(following, end_step)
                    continue
        except (TensorUnavailableForStep, TensorUnavailable) as err:
            logger.debug("%s", err)
        except DamagedDataError as err:
            if err.step is None:
                err.step = step
            logger.error("rule %s cannot judge step %d: %s", rule_obj.rule_name, step, err)
            raise
        except RuleEvaluationConditionMet as err:
            if raise_eval_cond:
                raise
            logger.info("%s", err)
            if err.end_of_rule:
                break
        except NoMoreProfilerData as err:  # a profiler rule has seen all of the job's data: the normal end
            logger.info("%s", err)
            break
        step += 1
    logger.info("rule %s: evaluation ended before step %d", rule_obj.rule_name, step)


__all__ = ["invoke_rule"]
