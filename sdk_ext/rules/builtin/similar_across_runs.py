"""SimilarAcrossRuns: the same tensor differs between this trial and another one at the same step.

docs/RULES.md#similaracrossruns. ``other_trials`` is required (SageMaker: RuleParameters ``other_trial_0``...); the
first one is compared. Readings chosen where SageMaker documents no exact formula:

* "the same step" is the same mode and mode step (a TRAIN step with the other run's TRAIN step of
  the same number; a trial without modes: the same global step), so runs that validate at different
  points still compare training with training;
* a tensor or step the other trial does not have is skipped (nothing to compare), never a firing; a
  rule that could compare nothing says so (``CheckedNothing``) rather than passing;
* "different" means a different shape, or ``not np.allclose(base, other)`` with numpy's default
  tolerances (rtol 1e-5, atol 1e-8) and NaNs in the same places counted as equal: runs that are
  meant to be reproducible agree to far better than that, and a float32 rounding difference does
  not fire.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sdk_ext.exceptions import InsufficientInformationForRuleInvocation
from sdk_ext.rules.builtin.base import MISSING, BuiltinRule, fmt


def difference(base: np.ndarray, other: np.ndarray) -> str | None:
    """Why ``base`` and ``other`` differ, or None if they are the same (shape, then allclose)."""
    base, other = np.asarray(base), np.asarray(other)
    if base.shape != other.shape:
        return f"shape {base.shape} vs {other.shape}"
    if base.dtype.kind not in "biufc" or other.dtype.kind not in "biufc":
        return None if np.array_equal(base, other) else "values differ"
    if np.allclose(base, other, equal_nan=True):
        return None
    with np.errstate(invalid="ignore"):
        diff = np.abs(base.astype(np.complex128) - other.astype(np.complex128))
    return f"max |difference| {fmt(float(np.nanmax(diff)))}" if diff.size else "values differ"


class SimilarAcrossRuns(BuiltinRule):
    """Fires when a selected tensor differs from the same tensor, same step, of ``other_trials[0]``."""

    judges_on_selection = False  # judged only where the other trial has it too

    def __init__(
        self,
        base_trial: Any,
        other_trials: Sequence[Any] | Any = None,
        collection_names: str | list[str] | None = None,
        tensor_regex: str | list[str] | None = None,
        *,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, other_trials, action_str)
        if not self.other_trials:
            raise InsufficientInformationForRuleInvocation(
                self.rule_name, "it needs another trial to compare with (RuleParameter other_trial_0)"
            )
        self.collection_names = self.params.strings("collection_names", collection_names)
        self.tensor_regex = self.params.regexes("tensor_regex", tensor_regex)
        self.params.done()

    def needs_to_judge(self) -> str:
        return ("the same tensor saved by the other trial at the same step (same mode and mode step): the "
                "other trial has none of them there; compare runs that save the same tensors at the same steps")

    def invoke_at_step(self, step: int) -> bool:
        other = self.other_trials[0]
        mode, mode_step = self.mode_of(step)
        for name in self.select(step, collections=self.collection_names, regex=self.tensor_regex):
            if not _has(other, name):
                continue
            base_value = self.value(name, step)
            other_value = self.value(name, mode_step, trial=other, mode=mode)
            if base_value is None or other_value is None:
                continue
            self.judged([name])
            why = difference(base_value, other_value)
            if why is not None:
                return self.found_issue(f"tensor {name!r} differs from the other trial: {why}")
        return False


def _has(trial: Any, name: str) -> bool:
    try:
        return bool(trial.has_tensor(name))
    except MISSING:
        return False
