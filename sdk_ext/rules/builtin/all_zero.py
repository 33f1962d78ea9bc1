"""AllZero: a tensor whose values are (almost) all zero.

docs/RULES.md#allzero. ``collection_names`` or ``tensor_regex`` must be given (InsufficientInformation
otherwise, as SageMaker's documentation reads "users must specify"). Fires when ``100 * #zeros / size >= threshold``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sdk_ext.rules.builtin.base import BuiltinRule, fmt, is_numeric


def zero_percent(value: np.ndarray) -> float:
    """Percentage of elements equal to zero (0 for an empty tensor)."""
    value = np.asarray(value)
    if value.size == 0:
        return 0.0
    return 100.0 * float(np.count_nonzero(value == 0)) / value.size


class AllZero(BuiltinRule):
    """Fires when at least ``threshold`` percent of a selected tensor's values are zero."""

    def __init__(
        self,
        base_trial: Any,
        collection_names: str | list[str] | None = None,
        tensor_regex: str | list[str] | None = None,
        threshold: float | str = 100,
        *,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        self.collection_names = self.params.strings("collection_names", collection_names)
        self.tensor_regex = self.params.regexes("tensor_regex", tensor_regex)
        self.threshold = self.params.number("threshold", threshold, gt=0, le=100)
        self.params.done()
        self.require_selection(self.collection_names, self.tensor_regex)

    def invoke_at_step(self, step: int) -> bool:
        for name in self.select(step, collections=self.collection_names, regex=self.tensor_regex):
            value = self.value(name, step)
            if value is None or not is_numeric(value):
                continue
            pct = zero_percent(value)
            if pct >= self.threshold:
                return self.found_issue(
                    f"tensor {name!r}: {fmt(pct)}% of its {value.size} values are zero "
                    f"(threshold {fmt(self.threshold)}%)"
                )
        return False
