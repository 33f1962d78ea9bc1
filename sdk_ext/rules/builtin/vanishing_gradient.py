"""VanishingGradient: a gradient whose mean absolute value has fallen below ``threshold``.

docs/RULES.md#vanishinggradient. At each step, every tensor of the ``gradients`` collection with data at that step:
``mean(|g|)`` (the stored ``abs_mean`` reduction when only reductions were saved) below ``threshold``
fires. All gradients are checked; the first offender is reported.
"""

from __future__ import annotations

from typing import Any

from sdk_ext.rules.builtin.base import BuiltinRule, fmt


def is_vanishing(mean_abs_value: float, threshold: float) -> bool:
    return mean_abs_value < threshold


class VanishingGradient(BuiltinRule):
    """Fires when ``mean(|g|) < threshold`` for any tensor of the ``gradients`` collection."""

    def __init__(self, base_trial: Any, threshold: float | str = 1e-7, *, action_str: str = "") -> None:
        super().__init__(base_trial, action_str=action_str)
        self.threshold = self.params.number("threshold", threshold, gt=0)
        self.params.done()

    def invoke_at_step(self, step: int) -> bool:
        for name in self.collection_tensors("gradients", step):
            m = self.reduction(name, step, "mean", abs=True)
            if m is not None and is_vanishing(m, self.threshold):
                return self.found_issue(
                    f"tensor {name!r}: mean absolute gradient {fmt(m)} is below threshold {fmt(self.threshold)}"
                )
        return False
