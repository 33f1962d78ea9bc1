"""FeatureImportanceOverweight (XGBoost): a few features carry almost all the importance.

docs/RULES.md#featureimportanceoverweight. At each step, ``vals`` are the (scalar) values of every tensor matching
``tensor_regex`` (the XGBoost hook saves one per feature, e.g. ``feature_importance/weight/f3``).
Fires when the top ``nfeatures`` hold more than ``threshold`` of the total. Reading chosen where
SageMaker's documentation is silent: with ``nfeatures`` or fewer features the share is 1 by construction, so the
step is skipped instead of firing on every model with few features.

Unused features count: a feature the trial holds importance for at some step but not at this one
(smdebug's hook left out features ``get_score`` did not list) counts with importance 0 at this step,
so the share is taken over every feature, as sdk_ext's hook saves it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sdk_ext.rules.builtin.base import BuiltinRule, as_scalar, fmt


def top_share(values: Sequence[float], nfeatures: int) -> float | None:
    """Share of the total held by the ``nfeatures`` largest values; None if it means nothing."""
    if len(values) <= nfeatures:
        return None
    total = float(sum(values))
    if total <= 0:
        return None
    return float(sum(sorted(values, reverse=True)[:nfeatures])) / total


class FeatureImportanceOverweight(BuiltinRule):
    """Fires when the ``nfeatures`` most important features hold more than ``threshold`` of the importance."""

    judges_on_selection = False  # judged only with more than nfeatures features

    def __init__(
        self,
        base_trial: Any,
        threshold: float | str = 0.8,
        nfeatures: int | str = 3,
        tensor_regex: str | list[str] = ".*feature_importance/weight",
        *,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        p = self.params
        self.threshold = p.number("threshold", threshold, gt=0, le=1)
        self.nfeatures = p.integer("nfeatures", nfeatures, ge=1)
        self.tensor_regex = p.regexes("tensor_regex", tensor_regex)
        p.require(bool(self.tensor_regex), f"parameter tensor_regex={tensor_regex!r}: must not be empty")
        p.done()

    def needs_to_judge(self) -> str:
        return (f"more than nfeatures={self.nfeatures} features with a positive total importance (with "
                f"{self.nfeatures} or fewer, the top {self.nfeatures} hold all of it by construction)")

    def invoke_at_step(self, step: int) -> bool:
        values: dict[str, float] = {}
        for name in self.select(step, regex=self.tensor_regex, all_if_empty=False):
            v = as_scalar(self.value(name, step))
            if v is not None:
                values[name] = v
        if not values:
            return False
        for name in self.base_trial.tensor_names(regex=self.tensor_regex):  # features unused at this step
            values.setdefault(name, 0.0)
        share = top_share(list(values.values()), self.nfeatures)
        if share is not None:
            self.judged(values)
        if share is not None and share > self.threshold:
            top = sorted(values, key=values.__getitem__, reverse=True)[: self.nfeatures]
            return self.found_issue(
                f"the top {self.nfeatures} of {len(values)} features {top} hold {fmt(share * 100)}% of the "
                f"importance (threshold {fmt(self.threshold)})"
            )
        return False
