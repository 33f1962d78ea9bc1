"""WeightUpdateRatio: weight updates too large or too small relative to the weights.

At each TRAIN step (each step of a trial without modes), for every tensor of the ``weights``
collection: compare with the previous TRAIN step ``p`` that saved it (with ``num_steps``: the latest
such ``p`` with ``step - num_steps <= p < step``, counted in TRAIN steps, SageMaker's
``train.save_interval``); no such step, skip. EVAL and PREDICT steps are neither judged nor
compared with: weights do not change while a model is validated, so a ratio across them says nothing
about training (comparing with the previous saved step of any mode gave 0 and fired on every healthy
job that validates). The ratio is sdk_ext's reading of SageMaker's "ratio of updates to weights"::

    ratio = ||w_step - w_p||_2 / (||w_p||_2 + epsilon)

the relative L2 update size (cs231n's "update/weight ratio", healthy around 1e-3). It is invariant to
how many elements the layer has, which a mean-based ratio is not when a few weights move.
Fires when ``ratio > large_threshold`` or ``ratio < small_threshold`` (a frozen weight gives 0 and
fires). Weights whose shape changed are skipped.
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np

from sdk_ext.modes import ModeKeys
from sdk_ext.rules.builtin.base import BuiltinRule, fmt


def update_ratio(previous: np.ndarray, current: np.ndarray, epsilon: float) -> float:
    """``||current - previous||₂ / (||previous||₂ + epsilon)`` in float64."""
    previous = np.asarray(previous, dtype=np.float64)
    current = np.asarray(current, dtype=np.float64)
    return float(np.linalg.norm((current - previous).ravel()) / (np.linalg.norm(previous.ravel()) + epsilon))


def previous_step(steps: list[int], step: int, num_steps: int | None) -> int | None:
    """The latest saved step before ``step`` (and, with ``num_steps``, not before ``step - num_steps``)."""
    i = bisect.bisect_left(steps, step)
    if i == 0:
        return None
    p = steps[i - 1]
    if num_steps is not None and p < step - num_steps:
        return None
    return p


class WeightUpdateRatio(BuiltinRule):
    """Fires when the relative update of a weight is above ``large_threshold`` or below ``small_threshold``."""

    judges_on_selection = False  # a weight is judged once it has a previous TRAIN step

    def __init__(
        self,
        base_trial: Any,
        num_steps: int | str | None = None,
        large_threshold: float | str = 10.0,
        small_threshold: float | str = 1e-8,
        epsilon: float | str = 1e-9,
        *,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        self.num_steps = self.params.maybe_integer("num_steps", num_steps, ge=1)
        self.large_threshold = self.params.number("large_threshold", large_threshold, ge=0)
        self.small_threshold = self.params.number("small_threshold", small_threshold, ge=0)
        self.epsilon = self.params.number("epsilon", epsilon, gt=0)
        self.params.require(
            self.small_threshold < self.large_threshold,
            f"parameter small_threshold={small_threshold!r} must be below large_threshold={large_threshold!r}",
        )
        self.params.done()

    def needs_to_judge(self) -> str:
        within = f", at most num_steps={self.num_steps} TRAIN steps apart" if self.num_steps is not None else ""
        return (f"each weight saved at two TRAIN steps (steps of a job without modes){within}; save the "
                "weights collection more often (its save_interval) than the job has training steps")

    def invoke_at_step(self, step: int) -> bool:
        mode, mode_step = self.mode_of(step)
        if mode not in (ModeKeys.TRAIN, ModeKeys.GLOBAL):
            return False  # weights do not change outside training
        for name in self.collection_tensors("weights", step):
            p = previous_step(self.tensor_steps(name, mode=mode), mode_step, self.num_steps)
            if p is None:
                continue
            current, previous = self.value(name, mode_step, mode=mode), self.value(name, p, mode=mode)
            if current is None or previous is None or current.shape != previous.shape:
                continue
            self.judged([name])
            ratio = update_ratio(previous, current, self.epsilon)
            since = f"{mode.name} step {p}" if mode is ModeKeys.TRAIN else f"step {p}"
            if ratio > self.large_threshold:
                return self.found_issue(f"tensor {name!r}: update/weight ratio {fmt(ratio)} since {since} "
                                        f"is above large_threshold {fmt(self.large_threshold)}")
            if ratio < self.small_threshold:
                return self.found_issue(f"tensor {name!r}: update/weight ratio {fmt(ratio)} since {since} "
                                        f"is below small_threshold {fmt(self.small_threshold)}")
        return False
