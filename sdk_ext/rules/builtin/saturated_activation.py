"""SaturatedActivation: too many tanh/sigmoid units whose inputs sit in the flat tails.

docs/RULES.md#saturatedactivation. Each tensor matching ``collection_names`` ∪ ``tensor_regex`` is the *input* of a
tanh or sigmoid. Readings chosen where SageMaker documents no exact formula: the function is taken from the
tensor name (containing "tanh" or "sigmoid", any case; a name with neither is skipped, since its
limits are unknown); a value is active when ``min < x < max`` for that function; units as in
:mod:`sdk_ext.rules.builtin.units`. A unit is saturated when less than ``threshold_inactivity``
percent of its values are active; the rule fires when more than ``threshold_layer`` percent of a
layer's units are saturated. The default pattern matches PyTorch's ``tanh_input_0`` and the Keras
hook's ``dense_1/tanh_input``; besides, every module or layer saved with its output whose output is
``tanh`` or ``sigmoid`` of its input is judged on that input (an ``nn.Tanh`` inside an
``nn.Sequential``: ``body.3_input_0``; a Keras ``Activation("sigmoid")``: ``activation/inputs``),
see :mod:`sdk_ext.rules.builtin.activations`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sdk_ext.rules.builtin.activations import ActivationFinder, activations_at
from sdk_ext.rules.builtin.base import BuiltinRule, fmt, is_numeric
from sdk_ext.rules.builtin.units import inactive_unit_percent


def saturated_unit_percent(inputs: np.ndarray, low: float, high: float, threshold_inactivity: float) -> float:
    """Percentage of units whose inputs fall inside ``(low, high)`` in less than ``threshold_inactivity`` %."""
    x = np.asarray(inputs)
    return inactive_unit_percent((x > low) & (x < high), threshold_inactivity)


def activation_kind(name: str) -> str | None:
    lowered = name.lower()
    if "tanh" in lowered:
        return "tanh"
    if "sigmoid" in lowered:
        return "sigmoid"
    return None


class SaturatedActivation(BuiltinRule):
    """Fires when more than ``threshold_layer`` % of a tanh/sigmoid layer's units are saturated."""

    def __init__(
        self,
        base_trial: Any,
        collection_names: str | list[str] | None = None,
        tensor_regex: str | list[str] = ".*tanh_input|.*sigmoid_input",
        threshold_tanh_min: float | str = -9.4999,
        threshold_tanh_max: float | str = 9.4999,
        threshold_sigmoid_min: float | str = -23,
        threshold_sigmoid_max: float | str = 16.99999,
        threshold_inactivity: float | str = 1.0,
        threshold_layer: float | str = 50.0,
        *,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        p = self.params
        self.collection_names = p.strings("collection_names", collection_names)
        self.tensor_regex = p.regexes("tensor_regex", tensor_regex)
        self.limits = {
            "tanh": (p.number("threshold_tanh_min", threshold_tanh_min),
                     p.number("threshold_tanh_max", threshold_tanh_max)),
            "sigmoid": (p.number("threshold_sigmoid_min", threshold_sigmoid_min),
                        p.number("threshold_sigmoid_max", threshold_sigmoid_max)),
        }
        for kind, (low, high) in self.limits.items():
            p.require(low < high, f"parameters threshold_{kind}_min={low!r} and threshold_{kind}_max={high!r}: "
                                  "min must be below max")
        self.threshold_inactivity = p.number("threshold_inactivity", threshold_inactivity, ge=0, le=100)
        self.threshold_layer = p.number("threshold_layer", threshold_layer, ge=0, le=100)
        p.done()
        self.require_selection(self.collection_names, self.tensor_regex)
        self._finder = ActivationFinder()

    def invoke_at_step(self, step: int) -> bool:
        kinds: dict[str, str | None] = {
            name: activation_kind(name)
            for name in self.select(step, collections=self.collection_names, regex=self.tensor_regex,
                                    all_if_empty=False)
        }
        for found, inp, _ in activations_at(self, self._finder, step, ["tanh", "sigmoid"]):
            kinds[inp] = found
        for name, kind in sorted(kinds.items()):
            value = self.value(name, step)
            if kind is None or value is None or not is_numeric(value) or value.ndim == 0:
                continue
            low, high = self.limits[kind]
            saturated = saturated_unit_percent(value, low, high, self.threshold_inactivity)
            if saturated > self.threshold_layer:
                return self.found_issue(
                    f"tensor {name!r}: {fmt(saturated)}% of its {kind} units are saturated (inputs outside "
                    f"({fmt(low)}, {fmt(high)}) in more than {fmt(100 - self.threshold_inactivity)}% of values; "
                    f"threshold_layer {fmt(self.threshold_layer)}%)"
                )
        return False
