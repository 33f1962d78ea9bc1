"""NLPSequenceRatio: too many of some token (padding, UNK, EOS) in the input sequences.

docs/RULES.md#nlpsequenceratio. At each step, for each tensor matching ``tensor_regex`` (token ids) and each pair
``(token_values[i], token_thresholds_percent[i])``: fires when more than that percentage of the
tensor's elements equal that token. Reading chosen where SageMaker documents no exact formula: judged per
step (the batch saved at that step), since the point is to catch a bad bucketing or vocabulary as
soon as a batch shows it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sdk_ext.rules.builtin.base import BuiltinRule, fmt, is_numeric


def token_percent(tokens: np.ndarray, token: int) -> float:
    tokens = np.asarray(tokens)
    if tokens.size == 0:
        return 0.0
    return 100.0 * float(np.count_nonzero(tokens == token)) / tokens.size


class NLPSequenceRatio(BuiltinRule):
    """Fires when a token makes up more than its threshold percentage of an input sequence tensor."""

    def __init__(
        self,
        base_trial: Any,
        tensor_regex: str | list[str] = ".*embedding0_input_0",
        token_values: str | list[int] = "0",
        token_thresholds_percent: str | list[float] = "50",
        *,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        p = self.params
        self.tensor_regex = p.regexes("tensor_regex", tensor_regex)
        self.token_values = p.integers("token_values", token_values)
        self.token_thresholds_percent = p.numbers("token_thresholds_percent", token_thresholds_percent)
        p.require(bool(self.tensor_regex), f"parameter tensor_regex={tensor_regex!r}: must not be empty")
        p.require(
            len(self.token_values) == len(self.token_thresholds_percent) or not self.token_values
            or not self.token_thresholds_percent,
            f"parameters token_values={token_values!r} and token_thresholds_percent={token_thresholds_percent!r} "
            "must have the same number of entries (one threshold per token)",
        )
        p.done()

    def invoke_at_step(self, step: int) -> bool:
        for name in self.select(step, regex=self.tensor_regex, all_if_empty=False):
            tokens = self.value(name, step)
            if tokens is None or not is_numeric(tokens):
                continue
            for token, limit in zip(self.token_values, self.token_thresholds_percent):
                pct = token_percent(tokens, token)
                if pct > limit:
                    return self.found_issue(
                        f"tensor {name!r}: token {token} makes up {fmt(pct)}% of {tokens.size} elements "
                        f"(threshold {fmt(limit)}%)"
                    )
        return False
