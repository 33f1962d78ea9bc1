"""ClassImbalance: some classes are much rarer than others, or mostly mispredicted.

docs/RULES.md#classimbalance. Labels and predictions are the first tensor (by name) matching ``labels_regex`` and
``predictions_regex`` at the step. Readings chosen where SageMaker documents no exact formula:

* Counts accumulate over every step evaluated (a running tally, not one batch), and nothing is
  judged before ``samples`` labels have been seen.
* Predictions: with ``argmax`` the class is ``argmax`` over the last axis (``(batch, classes)``
  scores); otherwise the values are rounded to the nearest integer class.
* Fires when ``max(count) / min(count)`` over the classes seen exceeds ``threshold_imbalance``, or
  when a class is mispredicted (prediction != label, counted per true class) in more than
  ``threshold_misprediction`` of its samples.
* Predictions one axis longer than the labels (per-class scores, e.g. XGBoost ``multi:softprob``) are
  reduced with argmax whatever ``argmax`` says; other labels and predictions of different sizes are
  an error naming both tensors and shapes.
* A regression job (``hyperparameters/objective`` ``reg:...``, or labels with fractional values) stops
  the rule with InsufficientInformationForRuleInvocation: "not a classification job" (Confusion too).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from sdk_ext.exceptions import InsufficientInformationForRuleInvocation
from sdk_ext.rules.builtin.base import MISSING, BuiltinRule, fmt

#: XGBoost objectives that are not classification.
_NOT_CLASSIFICATION = ("reg:", "count:", "survival:", "rank:")


def to_classes(values: np.ndarray, *, argmax: bool) -> np.ndarray:
    """Integer class ids from labels or predictions (argmax over the last axis, or rounding)."""
    values = np.asarray(values)
    if argmax and values.ndim >= 1:
        return np.asarray(np.argmax(values, axis=-1), dtype=np.int64).ravel()
    return np.rint(values.astype(np.float64)).ravel().astype(np.int64)


def not_classification_reason(labels: np.ndarray, objective: str | None) -> str | None:
    """Why labels (and the job's objective, if known) are not those of a classification job, or None."""
    if objective and objective.strip().lower().startswith(_NOT_CLASSIFICATION):
        return f"the objective is {objective!r}"
    values = np.asarray(labels)
    if values.dtype.kind == "f":
        finite = values[np.isfinite(values)]
        fractional = finite[finite != np.round(finite)]
        if fractional.size:
            return f"the labels hold fractional values (e.g. {fmt(float(fractional[0]))})"
    return None


def job_objective(trial: Any, step: int) -> str | None:
    """The ``hyperparameters/objective`` the XGBoost hook saved, if the trial has it."""
    name = "hyperparameters/objective"
    try:
        if not trial.has_tensor(name):
            return None
        tensor = trial.tensor(name)
        steps = tensor.steps()
        value = np.asarray(tensor.value(step if step in steps else steps[0]))
    except (*MISSING, IndexError, ValueError):
        return None
    return str(value.ravel()[0]) if value.size else None


def require_classification(rule: BuiltinRule, labels: np.ndarray, label_name: str, step: int) -> None:
    """Raise InsufficientInformationForRuleInvocation when the job is not a classification job."""
    why = not_classification_reason(labels, job_objective(rule.base_trial, step))
    if why is not None:
        raise InsufficientInformationForRuleInvocation(
            rule.rule_name, f"not a classification job: {why} (labels {label_name!r}, step {step}); this rule "
            "compares class labels with predicted classes")


def imbalance(counts: Counter[int]) -> tuple[float, int, int]:
    """``(max/min ratio, most frequent class, least frequent class)`` over the classes seen."""
    most = max(counts, key=lambda c: (counts[c], -c))
    least = min(counts, key=lambda c: (counts[c], c))
    return counts[most] / counts[least], most, least


class ClassImbalance(BuiltinRule):
    """Fires on a class count ratio above ``threshold_imbalance`` or a class mispredicted too often."""

    judges_on_selection = False  # nothing is judged before ``samples`` labels were seen

    def __init__(
        self,
        base_trial: Any,
        threshold_imbalance: float | str = 10,
        threshold_misprediction: float | str = 0.7,
        samples: int | str = 500,
        argmax: bool | str = False,
        labels_regex: str = ".*labels",
        predictions_regex: str = ".*predictions",
        *,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        p = self.params
        self.threshold_imbalance = p.number("threshold_imbalance", threshold_imbalance, ge=1)
        self.threshold_misprediction = p.number("threshold_misprediction", threshold_misprediction, ge=0, le=1)
        self.samples = p.integer("samples", samples, ge=1)
        self.argmax = p.flag("argmax", argmax)
        self.labels_regex = p.regexes("labels_regex", labels_regex)
        self.predictions_regex = p.regexes("predictions_regex", predictions_regex)
        p.require(bool(self.labels_regex), f"parameter labels_regex={labels_regex!r}: must not be empty")
        p.require(bool(self.predictions_regex),
                  f"parameter predictions_regex={predictions_regex!r}: must not be empty")
        p.done()
        self.counts: Counter[int] = Counter()
        self.wrong: Counter[int] = Counter()

    def needs_to_judge(self) -> str:
        return (f"at least samples={self.samples} labels saved with predictions (it saw "
                f"{sum(self.counts.values())}): save them more often, or lower samples")

    def invoke_at_step(self, step: int) -> bool:
        label_names = self.select(step, regex=self.labels_regex, all_if_empty=False)
        prediction_names = self.select(step, regex=self.predictions_regex, all_if_empty=False)
        if not label_names or not prediction_names:
            return False
        labels_raw = self.value(label_names[0], step)
        predictions_raw = self.value(prediction_names[0], step)
        if labels_raw is None or predictions_raw is None:
            return False
        require_classification(self, labels_raw, label_names[0], step)
        labels = to_classes(labels_raw, argmax=False)
        per_class_scores = predictions_raw.ndim == labels_raw.ndim + 1
        predictions = to_classes(predictions_raw, argmax=self.argmax or per_class_scores)
        if labels.size != predictions.size:
            raise ValueError(
                f"{self.rule_name}: labels {label_names[0]!r} (shape {labels_raw.shape}) and predictions "
                f"{prediction_names[0]!r} (shape {predictions_raw.shape}) hold different numbers of samples; "
                "set argmax='True' if predictions are per-class scores"
            )
        self.counts.update(labels.tolist())
        self.wrong.update(labels[labels != predictions].tolist())
        seen = sum(self.counts.values())
        if seen < self.samples or not self.counts:
            return False
        self.judged([label_names[0], prediction_names[0]])
        ratio, most, least = imbalance(self.counts)
        if ratio > self.threshold_imbalance:
            return self.found_issue(
                f"labels {label_names[0]!r}: class {most} has {self.counts[most]} samples and class {least} "
                f"{self.counts[least]} (ratio {fmt(ratio)} > threshold_imbalance {fmt(self.threshold_imbalance)}; "
                f"{seen} samples so far)"
            )
        for cls in sorted(self.counts):
            rate = self.wrong[cls] / self.counts[cls]
            if rate > self.threshold_misprediction:
                return self.found_issue(
                    f"predictions {prediction_names[0]!r}: class {cls} is mispredicted in {fmt(rate * 100)}% of "
                    f"its {self.counts[cls]} samples (threshold_misprediction {fmt(self.threshold_misprediction)})"
                )
        return False
