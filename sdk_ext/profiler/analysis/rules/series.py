"""Numbers the profiler rules share: growing histories and the statistics their reports show.

Pure functions over numpy arrays (no I/O, no rule state), so each can be tested on its own.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: A history longer than this starts over (smdebug's rules reset at a million datapoints too): memory
#: stays bounded on a job that runs for weeks.
MAX_DATAPOINTS = 1_000_000


def as_floats(values: Any) -> FloatArray:
    """``values`` as a one-dimensional float64 array (a copy only when needed)."""
    return np.asarray(values, dtype=np.float64).reshape(-1)


class History:
    """Values appended window after window, kept in one array (grown by doubling).

    Past ``limit`` values the history starts over with the values being appended, so its memory is
    bounded.
    """

    __slots__ = ("_data", "_size", "limit")

    def __init__(self, limit: int = MAX_DATAPOINTS) -> None:
        self._data: FloatArray = np.zeros(64)
        self._size = 0
        self.limit = limit

    def __len__(self) -> int:
        return self._size

    @property
    def values(self) -> FloatArray:
        """The values so far (a read-only view; appending may replace it)."""
        view = self._data[: self._size]
        view.flags.writeable = False
        return view

    def extend(self, values: Any) -> None:
        new = as_floats(values)
        if self._size + new.size > self.limit:
            self._size = 0
            new = new[-self.limit:]
        needed = self._size + new.size
        if needed > self._data.size:
            grown = np.zeros(max(needed, 2 * self._data.size))
            grown[: self._size] = self._data[: self._size]
            self._data = grown
        self._data[self._size: needed] = new
        self._size = needed


def quantile(values: FloatArray, q: float) -> float:
    """numpy's linear-interpolation quantile (as smdebug's rules computed it), as a float."""
    return float(np.quantile(values, q))


def box_stats(values: FloatArray) -> dict[str, float]:
    """The box plot of ``values``: quartiles, p95, and whiskers at 1.5 IQR clipped to the data's range."""
    p25, p50, p75, p95 = (float(x) for x in np.quantile(values, [0.25, 0.5, 0.75, 0.95]))
    iqr = p75 - p25
    return {"p25": p25, "p50": p50, "p75": p75, "p95": p95,
            "upper": min(p75 + 1.5 * iqr, float(np.max(values))),
            "lower": max(p25 - 1.5 * iqr, float(np.min(values)))}


def percentiles(values: FloatArray, *, divisor: float = 1.0) -> dict[str, float]:
    """max, p99, p95, p50 and min of ``values / divisor``, negatives shown as 0, rounded to 2 decimals
    (OverallSystemUsage's table)."""
    stats = np.quantile(values, [1.0, 0.99, 0.95, 0.5, 0.0]) / (divisor or 1.0)
    return {k: round(max(float(v), 0.0), 2) for k, v in zip(("max", "p99", "p95", "p50", "min"), stats)}


def group_sum(timestamps: FloatArray, values: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Sum the values that share a timestamp: (sorted unique timestamps, sums)."""
    if timestamps.size == 0:
        return np.zeros(0), np.zeros(0)
    unique, inverse = np.unique(timestamps, return_inverse=True)
    sums = np.bincount(inverse.reshape(-1), weights=values, minlength=unique.size)
    return unique, np.asarray(sums, dtype=np.float64)


def histogram(values: FloatArray, *, bins: int = 100) -> dict[str, list[float]]:
    """``{"probs": counts, "binedges": edges}`` as lists (the reports' histograms)."""
    counts, edges = np.histogram(values, bins=bins)
    return {"probs": [int(c) for c in counts], "binedges": [float(e) for e in edges]}


__all__ = ["MAX_DATAPOINTS", "FloatArray", "History", "as_floats", "box_stats", "group_sum", "histogram",
           "percentiles", "quantile"]
