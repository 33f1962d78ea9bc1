"""Overfit: the validation loss has moved too far above the training loss.

docs/RULES.md#overfit. Needs one scalar loss saved in TRAIN and in EVAL mode (``tensor_regex``, else the
``losses`` collection, else tensors named like "loss"). Readings chosen where SageMaker documents no exact formula:

* The training reference is the mean of the TRAIN values saved since the previous EVAL phase (the
  losses the model had just before it was validated). An EVAL phase is a run of consecutive EVAL
  steps; within it the validation value is the running mean of the phase's EVAL values so far.
* At each EVAL step (global step >= ``start_step``):
  ``ratio = (mean_eval - mean_train) / |mean_train|`` (|mean_train| taken as 1 when it is 0). A
  ratio above ``ratio_threshold`` counts one strike; a ratio at or below resets the count. Fires
  when ``patience`` consecutive EVAL steps strike.
* A trial saved only in GLOBAL mode (XGBoost: step = boosting round) pairs ``train-<metric>`` with
  ``<validation set>-<metric>`` (:mod:`~sdk_ext.rules.builtin.metric_pairs`) at each step and takes the
  same ratio, one strike count per pair. GLOBAL losses without such a pair, or metrics without any
  loss, make the rule stop with InsufficientInformationForRuleInvocation saying why (smdebug's data
  left the rule inert, silently).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sdk_ext.exceptions import InsufficientInformationForRuleInvocation
from sdk_ext.modes import ModeKeys
from sdk_ext.rules.builtin.base import BuiltinRule, as_scalar, fmt
from sdk_ext.rules.builtin.metric_pairs import has_any_loss, metric_pairs, no_loss_reason, no_pair_reason


def overfit_ratio(train_mean: float, eval_mean: float) -> float:
    """``(eval_mean - train_mean) / |train_mean|`` (denominator 1 when train_mean is 0)."""
    scale = abs(train_mean) if train_mean != 0 else 1.0
    return (eval_mean - train_mean) / scale


@dataclass
class _State:
    train: list[float] = field(default_factory=list)  # TRAIN values since the last EVAL phase
    train_mean: float | None = None  # the reference of the current/last EVAL phase
    in_eval: bool = False
    eval_sum: float = 0.0
    eval_count: int = 0
    strikes: int = 0


class Overfit(BuiltinRule):
    """Fires when validation loss exceeds training loss by more than ``ratio_threshold`` for ``patience`` steps."""

    judges_on_selection = False  # a loss is judged at an EVAL step that follows TRAIN steps

    def __init__(
        self,
        base_trial: Any,
        tensor_regex: str | list[str] | None = None,
        start_step: int | str = 0,
        patience: int | str = 1,
        ratio_threshold: float | str = 0.1,
        *,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        self.tensor_regex = self.params.regexes("tensor_regex", tensor_regex)
        self.start_step = self.params.integer("start_step", start_step, ge=0)
        self.patience = self.params.integer("patience", patience, ge=1)
        self.ratio_threshold = self.params.number("ratio_threshold", ratio_threshold)
        self.params.done()
        self._state: dict[str, _State] = {}
        self._pair_strikes: dict[str, int] = {}

    def needs_to_judge(self) -> str:
        after = f" from step start_step={self.start_step} on" if self.start_step else ""
        return (f"a scalar loss saved in TRAIN mode and then in EVAL mode{after} (hook.set_mode(ModeKeys.EVAL) "
                "around validation), or, without modes (XGBoost), a train-<metric> with a validation metric")

    def invoke_at_step(self, step: int) -> bool:
        mode, mode_step = self.mode_of(step)
        if mode == ModeKeys.GLOBAL:
            return self._global_step(step)
        if mode not in (ModeKeys.TRAIN, ModeKeys.EVAL):
            return False
        for name in self.loss_tensors(step, self.tensor_regex):
            value = as_scalar(self.value(name, step))
            if value is None:
                continue
            st = self._state.setdefault(name, _State())
            if mode == ModeKeys.TRAIN:
                st.in_eval = False
                st.train.append(value)
                continue
            if not st.in_eval:  # a new EVAL phase: its reference is the training since the last one
                st.in_eval, st.eval_sum, st.eval_count = True, 0.0, 0
                if st.train:
                    st.train_mean = sum(st.train) / len(st.train)
                    st.train = []
            st.eval_sum += value
            st.eval_count += 1
            if st.train_mean is None or step < self.start_step:
                continue
            eval_mean = st.eval_sum / st.eval_count
            self.judged([name])
            ratio = overfit_ratio(st.train_mean, eval_mean)
            st.strikes = st.strikes + 1 if ratio > self.ratio_threshold else 0
            if st.strikes >= self.patience:
                return self.found_issue(
                    f"tensor {name!r} (EVAL step {mode_step}): mean validation loss {fmt(eval_mean)} is "
                    f"{fmt(ratio * 100)}% above mean training loss {fmt(st.train_mean)} "
                    f"(ratio_threshold {fmt(self.ratio_threshold)}, {st.strikes} step(s) in a row)"
                )
        return False

    def _global_step(self, step: int) -> bool:
        if has_train_or_eval_mode(self.base_trial):
            return False  # a trial with modes is judged on its TRAIN and EVAL steps
        names = self.loss_tensors(step, self.tensor_regex)
        if not names:
            metrics = self.collection_tensors("metrics", step)
            if metrics and not self.tensor_regex and not has_any_loss(self.base_trial):
                raise InsufficientInformationForRuleInvocation(self.rule_name, no_loss_reason(step, metrics))
            return False
        pairs = metric_pairs(names)
        if not pairs:
            raise InsufficientInformationForRuleInvocation(self.rule_name, no_pair_reason(names))
        if step < self.start_step:
            return False
        for pair in pairs:
            train, valid = as_scalar(self.value(pair.train, step)), as_scalar(self.value(pair.validation, step))
            if train is None or valid is None:
                continue
            ratio = overfit_ratio(train, valid)
            self.judged([pair.train, pair.validation])
            strikes = self._pair_strikes.get(pair.validation, 0) + 1 if ratio > self.ratio_threshold else 0
            self._pair_strikes[pair.validation] = strikes
            if strikes >= self.patience:
                return self.found_issue(
                    f"{pair.validation!r} {fmt(valid)} is {fmt(ratio * 100)}% above {pair.train!r} {fmt(train)} at "
                    f"step {step} (ratio_threshold {fmt(self.ratio_threshold)}, {strikes} step(s) in a row)"
                )
        return False


def has_train_or_eval_mode(trial: Any) -> bool:
    """Whether the trial has TRAIN or EVAL steps (so far)."""
    try:
        modes = trial.modes()
    except Exception:  # noqa: BLE001 - a trial that cannot say: judge as GLOBAL-only
        return False
    return any(ModeKeys.parse(m) in (ModeKeys.TRAIN, ModeKeys.EVAL) for m in modes)
