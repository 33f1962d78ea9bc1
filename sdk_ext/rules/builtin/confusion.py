"""Confusion: the confusion matrix of labels vs predictions is far from diagonal.

docs/RULES.md#confusion. Tensors: an explicit ``labels``/``predictions`` tensor name if the trial has it,
else the first tensor of ``labels_collection``/``predictions_collection``. Readings chosen where SageMaker
documents no exact formula:

* One matrix per step (the batch saved at that step), ``M[label][prediction] += 1``.
* Predictions one axis longer than the labels (``(batch, classes)`` scores) are reduced with argmax;
  other values are rounded to integer classes.
* Column-normalised: for every predicted class ``i`` with samples, fires when
  ``M[i][i] / colsum_i < min_diag`` or some ``M[j][i] / colsum_i > max_off_diag`` (j != i). (The
  AWS formula divides by the trace, which would fire on a perfect classifier.)
* ``category_no`` unset: ``max(labels, predictions) + 1``. A class id outside ``[0, category_no)``
  is an error naming it.
* A regression job (``hyperparameters/objective`` ``reg:...``, or labels with fractional values) stops
  the rule with InsufficientInformationForRuleInvocation: "not a classification job".
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from sdk_ext.rules.builtin.base import BuiltinRule, fmt
from sdk_ext.rules.builtin.class_imbalance import require_classification, to_classes


def confusion_matrix(labels: np.ndarray, predictions: np.ndarray, category_no: int) -> np.ndarray:
    """``M[label][prediction]`` counts for integer class arrays of equal size."""
    matrix = np.zeros((category_no, category_no), dtype=np.int64)
    np.add.at(matrix, (labels.ravel(), predictions.ravel()), 1)
    return matrix


def confusion_problem(matrix: np.ndarray, *, min_diag: float, max_off_diag: float) -> str | None:
    """The first column (predicted class) breaking the diagonal / off-diagonal limits, described; or None."""
    for i in range(matrix.shape[0]):
        col = matrix[:, i]
        total = int(col.sum())
        if total == 0:
            continue
        if col[i] / total < min_diag:
            return (f"of {total} samples predicted as class {i}, only {fmt(col[i] / total * 100)}% are class {i} "
                    f"(min_diag {fmt(min_diag)})")
        for j in range(matrix.shape[0]):
            if j != i and col[j] / total > max_off_diag:
                return (f"of {total} samples predicted as class {i}, {fmt(col[j] / total * 100)}% are class {j} "
                        f"(max_off_diag {fmt(max_off_diag)})")
    return None


class Confusion(BuiltinRule):
    """Fires when the per-step confusion matrix has a weak diagonal or a strong off-diagonal entry."""

    judges_on_selection = False  # a pair is judged, found by name or through a collection

    def __init__(
        self,
        base_trial: Any,
        category_no: int | str | None = None,
        labels: str | None = None,
        predictions: str | None = None,
        labels_collection: str = "labels",
        predictions_collection: str = "predictions",
        min_diag: float | str = 0.9,
        max_off_diag: float | str = 0.1,
        *,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        p = self.params
        self.category_no = p.maybe_integer("category_no", category_no, ge=1)
        self.labels = p.maybe_text("labels", labels) or "labels"
        self.predictions = p.maybe_text("predictions", predictions) or "predictions"
        self.labels_collection = p.maybe_text("labels_collection", labels_collection)
        self.predictions_collection = p.maybe_text("predictions_collection", predictions_collection)
        self.min_diag = p.number("min_diag", min_diag, ge=0, le=1)
        self.max_off_diag = p.number("max_off_diag", max_off_diag, ge=0, le=1)
        p.done()

    def needs_to_judge(self) -> str:
        return (f"labels and predictions with values at the same step (tensors {self.labels!r} and "
                f"{self.predictions!r}, or the collections {self.labels_collection!r} and "
                f"{self.predictions_collection!r})")

    def _pick(self, name: str, collection: str | None, step: int) -> str | None:
        if self.base_trial.has_tensor(name):
            self.select(step, regex=["^" + re.escape(name) + "$"], all_if_empty=False)  # found by name
            return name
        if collection:
            names = self.collection_tensors(collection, step)
            if names:
                return names[0]
        return None

    def invoke_at_step(self, step: int) -> bool:
        label_name = self._pick(self.labels, self.labels_collection, step)
        prediction_name = self._pick(self.predictions, self.predictions_collection, step)
        if label_name is None or prediction_name is None:
            return False
        labels_raw, predictions_raw = self.value(label_name, step), self.value(prediction_name, step)
        if labels_raw is None or predictions_raw is None:
            return False
        require_classification(self, labels_raw, label_name, step)
        labels = to_classes(labels_raw, argmax=False)
        predictions = to_classes(predictions_raw, argmax=predictions_raw.ndim == labels_raw.ndim + 1)
        if labels.size != predictions.size:
            raise ValueError(
                f"{self.rule_name}: labels {label_name!r} (shape {labels_raw.shape}) and predictions "
                f"{prediction_name!r} (shape {predictions_raw.shape}) hold different numbers of samples"
            )
        if labels.size == 0:
            return False
        n = self.category_no or int(max(labels.max(), predictions.max())) + 1
        bad = [int(v) for v in np.concatenate([labels, predictions]) if not 0 <= v < n]
        if bad:
            raise ValueError(f"{self.rule_name}: class id {bad[0]} at step {step} is outside [0, {n}) "
                             f"(category_no={self.category_no}); set category_no to the number of classes")
        why = confusion_problem(confusion_matrix(labels, predictions, n), min_diag=self.min_diag,
                                max_off_diag=self.max_off_diag)
        self.judged([label_name, prediction_name])
        if why is not None:
            return self.found_issue(f"labels {label_name!r} vs predictions {prediction_name!r}: {why}")
        return False
