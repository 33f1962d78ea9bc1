"""DeadRelu: too many ReLU units that (almost) never activate.

docs/RULES.md#deadrelu. Each tensor matching ``tensor_regex`` is the output of one ReLU layer. A unit
(axis 1; see :mod:`sdk_ext.rules.builtin.units` for the reading chosen) is dead when fewer than
``threshold_inactivity`` percent of its values are > 0; the rule fires when more than
``threshold_layer`` percent of a layer's units are dead. Besides the tensors ``tensor_regex`` names
(the default matches PyTorch's ``relu_output_0`` and the Keras hook's ``dense/relu_output``,
``re_lu/relu_output``), the rule judges every module or layer saved with its input whose output
is ``max(input, 0)``: an ``nn.ReLU`` inside an ``nn.Sequential`` (``body.1_output_0``), a Keras
``ReLU``/``Activation("relu")`` layer (``re_lu/outputs``), see :mod:`sdk_ext.rules.builtin.activations`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sdk_ext.rules.builtin.activations import ActivationFinder, activations_at
from sdk_ext.rules.builtin.base import BuiltinRule, fmt, is_numeric
from sdk_ext.rules.builtin.units import inactive_unit_percent


def dead_unit_percent(activations: np.ndarray, threshold_inactivity: float) -> float:
    """Percentage of units of a ReLU output active (> 0) in less than ``threshold_inactivity`` % of values."""
    return inactive_unit_percent(np.asarray(activations) > 0, threshold_inactivity)


class DeadRelu(BuiltinRule):
    """Fires when more than ``threshold_layer`` % of a ReLU layer's units are dead."""

    def __init__(
        self,
        base_trial: Any,
        tensor_regex: str | list[str] = ".*relu_output",
        threshold_inactivity: float | str = 1.0,
        threshold_layer: float | str = 50.0,
        *,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        self.tensor_regex = self.params.regexes("tensor_regex", tensor_regex)
        self.threshold_inactivity = self.params.number("threshold_inactivity", threshold_inactivity, ge=0, le=100)
        self.threshold_layer = self.params.number("threshold_layer", threshold_layer, ge=0, le=100)
        self.params.require(bool(self.tensor_regex), f"parameter tensor_regex={tensor_regex!r}: must not be empty")
        self.params.done()
        self._finder = ActivationFinder()

    def invoke_at_step(self, step: int) -> bool:
        names = set(self.select(step, regex=self.tensor_regex, all_if_empty=False))
        names.update(out for _, _, out in activations_at(self, self._finder, step, ["relu"]))
        for name in sorted(names):
            value = self.value(name, step)
            if value is None or not is_numeric(value) or value.ndim == 0:
                continue
            dead = dead_unit_percent(value, self.threshold_inactivity)
            if dead > self.threshold_layer:
                return self.found_issue(
                    f"tensor {name!r}: {fmt(dead)}% of its units are dead (active in less than "
                    f"{fmt(self.threshold_inactivity)}% of values; threshold_layer {fmt(self.threshold_layer)}%)"
                )
        return False
