"""Overtraining: training or validation loss has stopped improving (early-stopping logic).

docs/RULES.md#overtraining. Losses: the ``losses`` collection, else tensors named like "loss"; one-element
values; GLOBAL-mode steps count as training, except a GLOBAL validation metric of a
``train-<metric>`` / ``<set>-<metric>`` pair (XGBoost, :mod:`~sdk_ext.rules.builtin.metric_pairs`), which
counts as validation (``patience_validation``). Metrics saved without any loss (auc only, say) stop
the rule with InsufficientInformationForRuleInvocation saying so. Readings chosen where SageMaker documents no exact formula:

* Per tensor and mode, the best loss so far; a value below ``best - delta`` is an improvement
  (``delta`` absolute, like Keras' ``min_delta``) and resets the wait; any other value adds one.
* Fires when the TRAIN wait reaches ``patience_train`` **or** the EVAL wait reaches
  ``patience_validation``: either one alone means the model is no longer learning from more
  training, which is what the rule is for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sdk_ext.exceptions import InsufficientInformationForRuleInvocation
from sdk_ext.modes import ModeKeys
from sdk_ext.rules.builtin.base import BuiltinRule, as_scalar, fmt
from sdk_ext.rules.builtin.metric_pairs import has_any_loss, no_loss_reason, validation_names


@dataclass
class Plateau:
    """Early-stopping bookkeeping for one series of losses."""

    best: float = math.inf
    wait: int = 0

    def add(self, loss: float, delta: float) -> int:
        """Record ``loss``; return how many values in a row have not improved on the best."""
        if loss < self.best - delta:
            self.best, self.wait = loss, 0
        else:
            self.wait += 1
        return self.wait


class Overtraining(BuiltinRule):
    """Fires when a loss has not improved by ``delta`` for ``patience_train`` (TRAIN) or
    ``patience_validation`` (EVAL) saved steps. A job that saved no validation (or no training) loss
    gets a ``CheckedPartly`` status naming the check that could not run."""

    parts = {
        "training loss": "a scalar loss saved in TRAIN mode (or a GLOBAL training metric such as train-rmse)",
        "validation loss": "a scalar loss saved in EVAL mode (hook.set_mode(ModeKeys.EVAL) around validation), "
                           "or a GLOBAL validation metric paired with a train- one",
    }

    def __init__(
        self,
        base_trial: Any,
        patience_train: int | str = 5,
        patience_validation: int | str = 10,
        delta: float | str = 0.01,
        *,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        self.patience_train = self.params.integer("patience_train", patience_train, ge=1)
        self.patience_validation = self.params.integer("patience_validation", patience_validation, ge=1)
        self.delta = self.params.number("delta", delta, ge=0)
        self.params.done()
        self._plateaus: dict[tuple[str, ModeKeys], Plateau] = {}

    def invoke_at_step(self, step: int) -> bool:
        step_mode, mode_step = self.mode_of(step)
        if step_mode not in (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL):
            return False
        names = self.loss_tensors(step)
        if not names:
            metrics = self.collection_tensors("metrics", step)
            if metrics and not has_any_loss(self.base_trial):
                raise InsufficientInformationForRuleInvocation(self.rule_name, no_loss_reason(step, metrics))
            return False
        validation = validation_names(names) if step_mode == ModeKeys.GLOBAL else set()
        for name in names:
            value = as_scalar(self.value(name, step))
            if value is None:
                continue
            mode = step_mode
            if mode == ModeKeys.GLOBAL:
                mode = ModeKeys.EVAL if name in validation else ModeKeys.TRAIN
            patience = self.patience_train if mode == ModeKeys.TRAIN else self.patience_validation
            label = "patience_train" if mode == ModeKeys.TRAIN else "patience_validation"
            self.checked_part("training loss" if mode == ModeKeys.TRAIN else "validation loss", [name])
            plateau = self._plateaus.setdefault((name, mode), Plateau())
            if plateau.add(value, self.delta) >= patience:
                return self.found_issue(
                    f"tensor {name!r} ({mode.name} step {mode_step}): no improvement by delta {fmt(self.delta)} "
                    f"on the best loss {fmt(plateau.best)} for {plateau.wait} saved steps ({label} {patience})"
                )
        return False
