"""PoorWeightInitialization: signs of a bad initialisation in the first ``steps`` steps.

docs/RULES.md#poorweightinitialization. Three checks, each at every global step below ``steps`` (later steps are ignored:
the rule judges initialisation only). Readings chosen where SageMaker documents no exact formula:

1. Variance of the activation inputs across layers (tensors matching ``activation_inputs_regex``,
   whose default matches PyTorch's ``relu_input_0`` and the Keras hook's ``dense/relu_input``, and
   the inputs of modules/layers identified as ReLUs by value, e.g. ``body.1_input_0`` of an
   ``nn.Sequential``, see :mod:`sdk_ext.rules.builtin.activations`; at least two of them at the step): fires when ``max(var) / min(var) > threshold``; a layer whose
   input has variance 0 makes the ratio infinite (a dead layer is a bad initialisation).
2. Spread of each gradient of the ``gradients`` collection: ``p95 - p5`` below
   ``distribution_range`` fires. Gradients with fewer than 2 elements (a scalar bias) have no spread
   and are skipped.
3. Loss convergence: a loss (``losses`` collection, else names containing "loss") that has not set
   a new lowest value for ``patience`` consecutive saved TRAIN steps (steps of a job without modes)
   fires (early-stopping test with delta 0, as Overtraining). Validation losses are not judged: the
   batches of one validation pass are scored by one model, so they need not decrease, and mixed into
   the training series they made a healthy job that validates early fire.

A check that never had what it needs (e.g. the activation check on a model that calls
``F.relu``, which no hook sees) is named in a ``CheckedPartly`` status instead of passing silently
(:meth:`~sdk_ext.rules.builtin.base.BuiltinRule.part_coverage_note`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from sdk_ext.modes import ModeKeys
from sdk_ext.rules.builtin.activations import ActivationFinder, activations_at
from sdk_ext.rules.builtin.base import BuiltinRule, as_scalar, fmt, is_numeric
from sdk_ext.rules.builtin.overtraining import Plateau


def variance_ratio(variances: Sequence[float]) -> float:
    """``max / min`` of layer variances; inf when the smallest is 0 and the largest is not; 1 when all are 0."""
    hi, lo = max(variances), min(variances)
    if lo <= 0:
        return math.inf if hi > 0 else 1.0
    return hi / lo


def spread(gradient: np.ndarray) -> float:
    """``p95 - p5`` of the gradient's values."""
    p5, p95 = np.percentile(np.asarray(gradient, dtype=np.float64).ravel(), [5, 95])
    return float(p95 - p5)


class PoorWeightInitialization(BuiltinRule):
    """Fires on uneven activation-input variances, too narrow gradients, or a loss not improving early on."""

    def __init__(
        self,
        base_trial: Any,
        activation_inputs_regex: str | list[str] = ".*relu_input",
        threshold: float | str = 10.0,
        distribution_range: float | str = 0.001,
        patience: int | str = 5,
        steps: int | str = 10,
        *,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        p = self.params
        self.activation_inputs_regex = p.regexes("activation_inputs_regex", activation_inputs_regex)
        self.threshold = p.number("threshold", threshold, gt=1)
        self.distribution_range = p.number("distribution_range", distribution_range, ge=0)
        self.patience = p.integer("patience", patience, ge=1)
        self.steps = p.integer("steps", steps, ge=1)
        p.done()
        self._loss: dict[tuple[str, ModeKeys], Plateau] = {}
        self._finder = ActivationFinder()
        regex = ", ".join(repr(r) for r in self.activation_inputs_regex)
        self.parts = {
            "activation inputs": f"two or more tensors matching activation_inputs_regex {regex}, or inputs of "
                                 "ReLU modules (save the input of each activation module; a functional relu "
                                 "is not a module and is never saved), at the same step",
            "gradients": "tensors of the gradients collection with 2 or more elements",
            "losses": "a scalar loss (the losses collection, or a tensor named like 'loss') saved at TRAIN steps "
                      "(or steps of a job without modes)",
        }

    def invoke_at_step(self, step: int) -> bool:
        if step >= self.steps:
            return False
        return self._variances(step) or self._gradients(step) or self._losses(step)

    def _variances(self, step: int) -> bool:
        variances: dict[str, float] = {}
        names = set(self.select(step, regex=self.activation_inputs_regex, all_if_empty=False))
        names.update(inp for _, inp, _ in activations_at(self, self._finder, step, ["relu"]))
        for name in sorted(names):
            var = self.reduction(name, step, "variance")
            if var is not None and math.isfinite(var):
                variances[name] = var
        if len(variances) < 2:
            return False
        self.checked_part("activation inputs", variances)
        ratio = variance_ratio(list(variances.values()))
        if ratio > self.threshold:
            hi = max(variances, key=variances.__getitem__)
            lo = min(variances, key=variances.__getitem__)
            return self.found_issue(
                f"activation inputs: variance of {hi!r} ({fmt(variances[hi])}) is {fmt(ratio)} times that of "
                f"{lo!r} ({fmt(variances[lo])}), above threshold {fmt(self.threshold)}"
            )
        return False

    def _gradients(self, step: int) -> bool:
        for name in self.collection_tensors("gradients", step):
            value = self.value(name, step)
            if value is None or not is_numeric(value) or value.size < 2:
                continue
            self.checked_part("gradients", [name])
            r = spread(value)
            if r < self.distribution_range:
                return self.found_issue(
                    f"tensor {name!r}: gradient spread p95-p5 = {fmt(r)} is below distribution_range "
                    f"{fmt(self.distribution_range)}"
                )
        return False

    def _losses(self, step: int) -> bool:
        mode = self.mode_of(step)[0]
        if mode not in (ModeKeys.TRAIN, ModeKeys.GLOBAL):
            return False  # validation and prediction losses say nothing about convergence
        for name in self.loss_tensors(step):
            value = as_scalar(self.value(name, step))
            if value is None:
                continue
            self.checked_part("losses", [name])
            plateau = self._loss.setdefault((name, mode), Plateau())
            if plateau.add(value, 0.0) >= self.patience:
                return self.found_issue(
                    f"tensor {name!r}: loss has not decreased below {fmt(plateau.best)} for {plateau.wait} "
                    f"saved steps (patience {self.patience}) within the first {self.steps} steps"
                )
        return False
