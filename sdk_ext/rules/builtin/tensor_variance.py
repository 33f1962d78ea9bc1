"""TensorVariance: a tensor whose variance is above ``max_threshold`` or below ``min_threshold``.

docs/RULES.md#tensorvariance. ``collection_names`` or ``tensor_regex`` must be given. The variance is the
``variance`` reduction (stored, or computed from the value: ``np.var``). Reading chosen where SageMaker
documents no exact formula: with neither threshold set the rule could never fire, so that is a
parameter error rather than a rule that silently reports NoIssuesFound.
"""

from __future__ import annotations

from typing import Any

from sdk_ext.rules.builtin.base import BuiltinRule, fmt


def variance_problem(variance: float, *, max_threshold: float | None, min_threshold: float | None) -> str | None:
    if max_threshold is not None and variance > max_threshold:
        return f"variance {fmt(variance)} is above max_threshold {fmt(max_threshold)}"
    if min_threshold is not None and variance < min_threshold:
        return f"variance {fmt(variance)} is below min_threshold {fmt(min_threshold)}"
    return None


class TensorVariance(BuiltinRule):
    """Fires when a selected tensor's variance leaves ``[min_threshold, max_threshold]``."""

    def __init__(
        self,
        base_trial: Any,
        collection_names: str | list[str] | None = None,
        tensor_regex: str | list[str] | None = None,
        max_threshold: float | str | None = None,
        min_threshold: float | str | None = None,
        *,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        self.collection_names = self.params.strings("collection_names", collection_names)
        self.tensor_regex = self.params.regexes("tensor_regex", tensor_regex)
        self.max_threshold = self.params.maybe_number("max_threshold", max_threshold, ge=0)
        self.min_threshold = self.params.maybe_number("min_threshold", min_threshold, ge=0)
        self.params.require(
            self.max_threshold is not None or self.min_threshold is not None,
            "parameters max_threshold=None and min_threshold=None: set at least one, e.g. max_threshold='10'",
        )
        if self.max_threshold is not None and self.min_threshold is not None:
            self.params.require(
                self.min_threshold <= self.max_threshold,
                f"parameter min_threshold={min_threshold!r} must not exceed max_threshold={max_threshold!r}",
            )
        self.params.done()
        self.require_selection(self.collection_names, self.tensor_regex)

    def invoke_at_step(self, step: int) -> bool:
        for name in self.select(step, collections=self.collection_names, regex=self.tensor_regex):
            var = self.reduction(name, step, "variance")
            if var is None:
                continue
            why = variance_problem(var, max_threshold=self.max_threshold, min_threshold=self.min_threshold)
            if why is not None:
                return self.found_issue(f"tensor {name!r}: {why}")
        return False
