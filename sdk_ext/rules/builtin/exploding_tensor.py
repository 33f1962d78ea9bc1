"""ExplodingTensor: a tensor holding NaN (or, unless ``only_nan``, an infinity).

docs/RULES.md#explodingtensor. Selection: ``collection_names`` ∪ ``tensor_regex``, every tensor when both are
empty. Non-numeric tensors are ignored. In a trial of several workers (``include_workers="all"``) every
worker's value is checked, and the message names the worker: first one whose tensor went bad on some
workers only (where it started: one rank's loss), then how many more values are bad and where.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sdk_ext.rules.builtin.base import MISSING, BuiltinRule, is_numeric


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
        workers_of = getattr(self.base_trial, "workers", None)  # a stand-in trial may have no workers()
        several = callable(workers_of) and len(workers_of()) > 1
        hits: list[tuple[float, str, str | None, int, int, int]] = []  # (share of workers bad, name, worker, ...)
        for name in self.select(step, collections=self.collection_names, regex=self.tensor_regex):
            workers: list[str | None] = list(self._workers(name, step)) if several else [None]
            bad = []
            for worker in workers:
                value = self._value(name, step, worker)
                if value is None or not is_numeric(value):
                    continue
                nan, inf = count_bad(value, only_nan=self.only_nan)
                if nan or inf:
                    bad.append((worker, nan, inf, value.size))
            if bad and not several:
                worker, nan, inf, size = bad[0]
                return self.found_issue(f"tensor {name!r} has {nan} NaN and {inf} infinite values out of {size}")
            hits += [(len(bad) / len(workers), name, *b) for b in bad]
        if not hits:
            return False
        # Every worker reads every worker's tensors: a value gone bad on some workers only (one rank's loss)
        # points at where it started, before collectives carried it to the rest (gradients, weights).
        share, name, worker, nan, inf, size = min(hits, key=lambda h: h[0])
        others = sorted({str(h[2]) for h in hits if (h[1], h[2]) != (name, worker)}, key=lambda w: (len(w), w))
        more = len({(h[1], h[2]) for h in hits}) - 1
        also = (f"; {more} more tensor values hold NaN or infinity, on "
                f"{', '.join(others)}") if more else ""
        where = f"{worker} only" if share < 1 else f"{worker} (and every other worker)"
        return self.found_issue(f"tensor {name!r} of {where} has {nan} NaN and {inf} infinite values out of "
                                f"{size}{also}")

    def _workers(self, name: str, step: int) -> list[str]:
        try:
            return sorted(self.base_trial.tensor(name).workers(step))
        except MISSING:
            return []

    def _value(self, name: str, step: int, worker: str | None) -> np.ndarray | None:
        if worker is None:
            value: np.ndarray | None = self.value(name, step)
            return value
        try:
            return np.asarray(self.base_trial.tensor(name).value(step, worker=worker))
        except MISSING:
            return None
