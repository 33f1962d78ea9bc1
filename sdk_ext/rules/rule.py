"""The Rule base class: smdebug's interface, so a custom rule runs after swapping one import.

A rule looks at the trial one global step at a time::

    from sdk_ext.rules import Rule            # was: from smdebug.rules.rule import Rule

    class GradientTooLarge(Rule):
        def __init__(self, base_trial, threshold="10.0"):
            super().__init__(base_trial)
            self.threshold = float(threshold)

        def invoke_at_step(self, step):
            for name in self.base_trial.tensor_names(collection="gradients"):
                if self.base_trial.tensor(name).reduction_value(step, "mean", abs=True) > self.threshold:
                    return self.found_issue(f"tensor {name!r}: mean |g| above {self.threshold}")
            return False

``invoke(step)`` waits for the step, freezes the trial's view, fetches what ``set_required_tensors``
declared, calls ``invoke_at_step`` and, if it returns True, runs the actions and raises
:class:`~sdk_ext.exceptions.RuleEvaluationConditionMet`. :meth:`Rule.found_issue` (sdk_ext's
addition) records *which tensor and why*; it ends up in the exception and in the rule status.

Every constructor form of smdebug's base class is accepted: ``Rule(trial)``,
``Rule(trial, other_trials=[t2])`` (before 1.0.4), ``Rule(trial, action_str)`` and
``Rule(trial, action_str, other_trials)`` (1.0.4 and later).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from sdk_ext.exceptions import RuleEvaluationConditionMet
from sdk_ext.rules.actions import Actions
from sdk_ext.rules.req_tensors import RequiredTensors
from sdk_ext.rules.time_limit import invocation_limit
from sdk_ext.rules.trial_api import no_refresh, wait_for_step

logger = logging.getLogger(__name__)

#: Seconds between checks while a rule waits for the training job to write the next step.
DEFAULT_POLL_INTERVAL = 0.2


def _as_trial_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]  # a single trial


class Rule(ABC):
    """Base class of every rule. Subclasses implement :meth:`invoke_at_step`.

    Attributes:
        base_trial: the trial under evaluation; ``other_trials`` the others (maybe empty), and
            ``trials`` both together.
        rule_name: the class name (used in messages and statuses).
        req_tensors: :class:`RequiredTensors` filled by :meth:`set_required_tensors`.
        issue: what the last firing found (set through :meth:`found_issue`), or None.
        poll_interval: seconds between checks while waiting for a step.
        defer_actions: when True, :meth:`invoke` does not run the actions; the caller runs
            :meth:`run_actions` itself (the evaluator does, after it has written the status).
        time_limit: seconds the rule's own code may run at one step, or None for no limit (the
            evaluator sets RuleParameter ``invoke_timeout_secs``; see :mod:`sdk_ext.rules.time_limit`).
    """

    def __init__(
        self,
        base_trial: Any,
        other_trials: Sequence[Any] | str | None = None,
        action_str: str | Sequence[Any] | None = "",
    ) -> None:
        if isinstance(other_trials, str) or (other_trials is None and action_str is not None
                                             and not isinstance(action_str, str)):
            # smdebug >= 1.0.4 order: Rule(base_trial, action_str, other_trials)
            other_trials, action_str = action_str, other_trials
            if isinstance(other_trials, str):
                other_trials = None
        self.base_trial = base_trial
        self.other_trials: list[Any] = _as_trial_list(other_trials)
        self.trials: list[Any] = [base_trial, *self.other_trials]
        self.rule_name: str = type(self).__name__
        self.logger = logging.getLogger(f"{type(self).__module__}.{self.rule_name}")
        self.req_tensors = RequiredTensors(base_trial, self.other_trials)
        self.action_str = action_str if isinstance(action_str, str) else ""
        self._actions = Actions(self.action_str, self.rule_name)
        self.report: dict[str, Any] = {
            "RuleTriggered": 0, "Violations": 0, "Details": {}, "Datapoints": 0, "RuleParameters": "",
        }
        self.issue: str | None = None
        self.poll_interval: float = DEFAULT_POLL_INTERVAL
        self.defer_actions: bool = False
        self.time_limit: float | None = None

    def set_required_tensors(self, step: int) -> None:
        """Declare, through ``self.req_tensors.add(...)``, tensors to fetch before ``invoke_at_step``."""

    @abstractmethod
    def invoke_at_step(self, step: int) -> bool:
        """Look at global step ``step``; True means the rule's condition is met (an issue)."""

    def found_issue(self, message: str) -> bool:
        """Record what was found (which tensor, which value, which limit) and return True."""
        self.issue = message
        return True

    def invoke(self, step: int) -> None:
        """Evaluate the rule at global ``step``.

        Raises:
            RuleEvaluationConditionMet: the rule fired at ``step`` (after the actions ran).
            StepUnavailable, TensorUnavailable, TensorUnavailableForStep: nothing to evaluate here.
            NoMoreData: training has ended and ``step`` is beyond the last saved step.
            InvocationTimeout: the rule's code at ``step`` ran past :attr:`time_limit`.
        """
        wait_for_step(self.base_trial, step, poll_interval=self.poll_interval)
        self.issue = None
        with invocation_limit(self.time_limit, rule=self.rule_name, step=step), no_refresh(self.trials):
            self.req_tensors.clear()
            self.set_required_tensors(step)
            self.req_tensors.fetch()
            fired = self.invoke_at_step(step)
        if fired:
            condition = RuleEvaluationConditionMet(self.rule_name, step, message=self.issue or "")
            if not self.defer_actions:
                self.run_actions(str(condition))
            raise condition

    def run_actions(self, message: str = "") -> None:
        """Run the rule's actions (StopTraining, SMS, Email); failures are logged, never raised."""
        if self._actions:
            self._actions.invoke(message)

    @property
    def overrides_invoke(self) -> bool:
        """True if this rule replaces :meth:`invoke` (then its step argument may be just a counter)."""
        return type(self).invoke is not Rule.invoke


__all__ = ["DEFAULT_POLL_INTERVAL", "Rule"]
