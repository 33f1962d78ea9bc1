"""GPUMemoryIncrease: a sudden jump of a GPU's memory use.

For each GPU of each node, at every GPUMemoryUtilization sample once there are more than ``window + 1``:
the mean of the last ``window`` samples minus the mean of the ``window - 1`` samples before the last two
(smdebug's two overlapping windows). Above ``increase`` (percentage points) with more than ``patience``
samples seen, that sample is a violation; the rule fires from the first one on. The windows overlap in all
but two samples, so the rule sees jumps, not slow leaks (a jump of J points raises the difference by about
2·J/window).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from sdk_ext.profiler.analysis.rules.base import DEFAULT_SCAN_INTERVAL_US, ProfilerRule
from sdk_ext.profiler.analysis.rules.series import FloatArray, History, box_stats, quantile
from sdk_ext.profiler.analysis.rules.windows import GPU_MEMORY, FrameworkWindow, SystemWindow


def moving_average_increase(values: FloatArray, window: int, *, since: int = 0
                            ) -> tuple[npt.NDArray[np.int64], FloatArray]:
    """The rule's difference of moving averages after each sample.

    Args:
        values: a GPU's samples so far.
        window: the moving average's length.
        since: only for the sample counts above this one (the samples seen before were evaluated already).

    Returns:
        (sample counts n, the difference after the n-th sample), for n > max(since, window + 1).
    """
    first = max(since, window + 1) + 1
    last = values.size
    if last < first:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    counts = np.arange(first, last + 1, dtype=np.int64)
    base = first - window - 1  # the first index any of these sums reads
    sums = np.concatenate([[0.0], np.cumsum(values[base:last])])

    def total(lo: npt.NDArray[np.int64], hi: npt.NDArray[np.int64]) -> FloatArray:
        result: FloatArray = sums[hi - base] - sums[lo - base]
        return result

    recent = total(counts - window, counts) / window
    if window == 1:  # smdebug's earlier window is empty then: never a violation
        return counts, np.full(counts.size, np.nan)
    earlier = total(counts - window - 1, counts - 2) / (window - 1)
    return counts, recent - earlier


class GPUMemoryIncrease(ProfilerRule):
    """See the module docstring. Parameters as in smdebug-rulesconfig (strings or numbers)."""

    needs = "GPUMemoryUtilization metrics (the job's hosts have no GPU, or the monitor could not read it)"

    def __init__(self, base_trial: Any, increase: object = 5, patience: object = 1000, window: object = 10,
                 scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US, *, action_str: str = "") -> None:
        super().__init__(base_trial, scan_interval_us=scan_interval_us, action_str=action_str)
        p = self.params
        self.increase = p.number("increase", increase)
        self.patience = p.integer("patience", patience, ge=0)
        self.window = p.integer("window", window, gt=0)
        p.done()
        self.values: dict[str, dict[str, History]] = {}
        self.set_parameters_text(increase=self.increase, patience=self.patience, window=self.window)

    def evaluate(self, system: SystemWindow, framework: FrameworkWindow, start_us: int, end_us: int) -> bool:
        for key, samples in system.of(GPU_MEMORY):
            self.found_data = True
            history = self.values.setdefault(key.node, {}).setdefault(key.name, History())
            before = len(history)
            history.extend(samples.values)
            since = before if len(history) >= before else 0  # the history started over: evaluate it all
            values = history.values
            self.report["Datapoints"] = len(values)
            counts, diffs = moving_average_increase(values, self.window, since=since)
            with np.errstate(invalid="ignore"):
                bad = (diffs > self.increase) & (counts > self.patience)
            if not bad.any():
                continue
            n = int(counts[bad][-1])
            self.report["Violations"] += int(bad.sum()) - 1  # violation() below counts the last one
            self.report["RuleTriggered"] += int(bad.sum()) - 1
            upto = values[:n]
            self.report["Details"].setdefault(key.node, {})[key.name] = {
                "increase": float(diffs[bad][-1]), "gpu_max": float(upto.max()), "p05": quantile(upto, 0.05),
                **box_stats(upto)}
            self.report["Details"]["last_timestamp"] = start_us
            self.violation(f"the memory use of {key.name} on {key.node} jumped: its moving average over "
                           f"{self.window} samples rose by {float(diffs[bad][-1]):.1f} points (above increase "
                           f"{self.increase:g}) to {float(upto[-1]):.1f}% at sample {n}")
        return self.triggered


__all__ = ["GPUMemoryIncrease", "moving_average_increase"]
