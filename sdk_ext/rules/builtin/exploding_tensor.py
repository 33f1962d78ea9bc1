"""ExplodingTensor: a tensor holding NaN (or, unless ``only_nan``, an infinity).

RULES.md §3.2. Selection: ``collection_names`` ∪ ``tensor_regex``, every tensor when both are
empty. Non-numeric tensors are ignored.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sdk_ext.rules.builtin.base import BuiltinRule, is_numeric


def count_bad(value: np.ndarray, *, only_nan: bool) -> tuple[int, int]:
    """``(number of NaN, number of ±inf)`` in ``value``; infinities count 0 when ``only_nan``."""
    value = np.asarray(value)
    if value.dtype.kind not in "fc":  # integers and booleans hold neither
        return 0, 0
    nan = int(np.count_nonzero(np.isnan(value)))
    inf = 0 if only_nan else int(np.count_nonzero(np.isinf(value)))
    return nan, inf


class ExplodingTensor(BuiltinRule):
    """Fires when a selected tensor holds NaN or ±inf (only NaN when ``only_nan``)."""

    def __init__(
        self,
        base_trial: Any,
        collection_names: str | list[str] | None = None,
        tensor_regex: str | list[str] | None = None,
        only_nan: bool | str = False,
        *,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        self.collection_names = self.params.strings("collection_names", collection_names)
        self.tensor_regex = self.params.regexes("tensor_regex", tensor_regex)
        self.only_nan = self.params.flag("only_nan", only_nan)
        self.params.done()

    def invoke_at_step(self, step: int) -> bool:
        for name in self.select(step, collections=self.collection_names, regex=self.tensor_regex):
            value = self.value(name, step)
            if value is None or not is_numeric(value):
                continue
            nan, inf = count_bad(value, only_nan=self.only_nan)
            if nan or inf:
                return self.found_issue(
                    f"tensor {name!r} has {nan} NaN and {inf} infinite values out of {value.size}"
                )
        return False
