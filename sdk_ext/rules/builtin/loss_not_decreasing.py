"""LossNotDecreasing: the loss has stopped going down (or has gone up too much).

docs/RULES.md#lossnotdecreasing. Tensors: the ``losses`` collection (when ``use_losses_collection`` and it exists)
∪ ``collection_names`` ∪ ``tensor_regex``. Only one-element values count. When these select
nothing, nothing is judged: the rule never falls back to every tensor (smdebug's rule did, and then
compared weights or accuracies as if they were losses). A trial with metrics but no loss at all
(XGBoost with only ``auc``-like metrics, which grow as the model improves) stops the rule with
InsufficientInformationForRuleInvocation saying so.

Schedule (AWS docs): per tensor, a check happens at a saved step ``s`` at least ``num_steps`` after
the previous check; it compares ``loss[s]`` with the newest saved ``loss[b]``, ``b <= s - num_steps``.

Readings chosen where SageMaker documents no exact formula:

* Decision, with ``change = (loss[s] - loss[b]) / |loss[b]| * 100`` (``|loss[b]|`` taken as 1 when
  it is 0): if the loss went down, fire when it went down by less than ``diff_percent`` percent
  (a plateau or too slow a decrease); if it went up, fire when it went up by more than
  ``increase_threshold_percent`` percent. Both documented parameters keep their documented
  meaning, and minibatch noise (a small rise between two saved steps) does not fire, while a stuck
  loss and a diverging loss do. (The 2019 unit tests fit "fire when loss[s] >= loss[b] * (1 +
  diff_percent/100)", which lets a plateau pass whenever diff_percent > 0.)
* ``mode``: when given, only that mode's steps are looked at; when not, each mode (TRAIN, EVAL,
  PREDICT, GLOBAL) is checked on its own, so a training loss is never compared with a validation
  loss and both are watched.
"""

from __future__ import annotations

import bisect
from typing import Any

from sdk_ext.exceptions import InsufficientInformationForRuleInvocation
from sdk_ext.modes import ModeKeys
from sdk_ext.rules.builtin.base import BuiltinRule, as_scalar, fmt
from sdk_ext.rules.builtin.metric_pairs import has_any_loss, no_loss_reason


def loss_verdict(previous: float, current: float, *, diff_percent: float,
                 increase_threshold_percent: float) -> str | None:
    """Why ``current`` (compared with ``previous``) is a problem, or None if it is fine."""
    scale = abs(previous) if previous != 0 else 1.0
    change = (current - previous) / scale * 100.0
    if change <= 0:
        if -change < diff_percent:
            how = f"decreased by only {fmt(-change)}%" if change < 0 else "did not decrease"
            return f"{how} (diff_percent {fmt(diff_percent)})"
        return None
    if change > increase_threshold_percent:
        return f"increased by {fmt(change)}% (increase_threshold_percent {fmt(increase_threshold_percent)})"
    return None


def baseline_step(steps: list[int], step: int, num_steps: int) -> int | None:
    """The newest saved step ``<= step - num_steps``, or None."""
    i = bisect.bisect_right(steps, step - num_steps)
    return steps[i - 1] if i else None


class LossNotDecreasing(BuiltinRule):
    """Fires when a loss decreased by less than ``diff_percent`` % over ``num_steps`` steps, or rose too much."""

    judges_on_selection = False  # a loss is judged once it has a baseline num_steps back

    def __init__(
        self,
        base_trial: Any,
        collection_names: str | list[str] | None = None,
        tensor_regex: str | list[str] | None = None,
        use_losses_collection: bool | str = True,
        num_steps: int | str = 10,
        diff_percent: float | str = 0.1,
        increase_threshold_percent: float | str = 5,
        mode: str | ModeKeys | None = None,
        *,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        self.collection_names = self.params.strings("collection_names", collection_names)
        self.tensor_regex = self.params.regexes("tensor_regex", tensor_regex)
        self.use_losses_collection = self.params.flag("use_losses_collection", use_losses_collection)
        self.num_steps = self.params.integer("num_steps", num_steps, ge=1)
        self.diff_percent = self.params.number("diff_percent", diff_percent, ge=0, le=100)
        self.increase_threshold_percent = self.params.number(
            "increase_threshold_percent", increase_threshold_percent, ge=0)
        self.mode = self.params.mode("mode", mode)
        self.params.done()
        self._next_check: dict[tuple[str, ModeKeys], int] = {}

    def needs_to_judge(self) -> str:
        mode = f" (mode {self.mode.name})" if self.mode is not None else ""
        return (f"a scalar loss saved at two steps of the same mode{mode} at least num_steps={self.num_steps} "
                "steps apart: train for longer than num_steps saved steps, or lower num_steps")

    def _tensors(self, step: int) -> list[str]:
        collections = list(self.collection_names)
        if self.use_losses_collection:
            collections.append("losses")
        names = self.select(step, collections=collections, regex=self.tensor_regex, all_if_empty=False)
        if not names and not self.tensor_regex and not self.collection_names:
            metrics = self.collection_tensors("metrics", step)
            if metrics and not has_any_loss(self.base_trial):
                raise InsufficientInformationForRuleInvocation(self.rule_name, no_loss_reason(step, metrics))
        return names

    def invoke_at_step(self, step: int) -> bool:
        mode, mode_step = self.mode_of(step)
        if self.mode is not None and mode != self.mode:
            return False
        for name in self._tensors(step):
            key = (name, mode)
            due = self._next_check.get(key)
            if due is not None and mode_step < due:
                continue
            b = baseline_step(self.tensor_steps(name, mode=mode), mode_step, self.num_steps)
            if b is None:
                continue
            current = as_scalar(self.value(name, mode_step, mode=mode))
            previous = as_scalar(self.value(name, b, mode=mode))
            if current is None or previous is None:
                continue
            self._next_check[key] = mode_step + self.num_steps
            self.judged([name])
            why = loss_verdict(previous, current, diff_percent=self.diff_percent,
                               increase_threshold_percent=self.increase_threshold_percent)
            if why is not None:
                return self.found_issue(
                    f"tensor {name!r} ({mode.name} step {mode_step}): loss {fmt(current)} vs {fmt(previous)} "
                    f"at {mode.name} step {b}: {why}"
                )
        return False
