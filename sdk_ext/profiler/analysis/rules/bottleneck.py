"""What CPUBottleneck and IOBottleneck share: system snapshots where the GPU idles while something else is busy.

The monitor samples every metric at (nearly) the same instant; records less than ``SNAPSHOT_WINDOW_S``
(20 ms) from the snapshot's first record belong to that snapshot. A snapshot is a bottleneck when some
GPU's utilization in it is below ``gpu_threshold`` while some record of the rule's other metric (a CPU
core's utilization, or the I/O wait) is above its threshold. Once more than ``patience`` snapshots have
been seen, the rule fires when bottlenecks make up more than ``threshold`` percent of them. On firing, the
framework events running at the bottlenecks of the window are added to the report (``ratio``, ``CPU``,
``GPU``, ``phase``...: see framework_metrics.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from sdk_ext.profiler.analysis.rules.base import DEFAULT_SCAN_INTERVAL_US, ProfilerRule
from sdk_ext.profiler.analysis.rules.framework_metrics import FrameworkTotals, spanning
from sdk_ext.profiler.analysis.rules.series import FloatArray
from sdk_ext.profiler.analysis.rules.windows import GPU_UTILIZATION, FrameworkWindow, SystemWindow

SNAPSHOT_WINDOW_S = 0.02
BoolArray = npt.NDArray[np.bool_]


def snapshot_times(timestamps: FloatArray, *, window_s: float = SNAPSHOT_WINDOW_S,
                   current: float = 0.0) -> tuple[FloatArray, int, float]:
    """Group sorted record timestamps into snapshots.

    A record more than ``window_s`` from the current snapshot's time starts a new snapshot at its own time.
    ``current`` is the snapshot still open from the previous window.

    Returns:
        (each record's snapshot time, the number of snapshots started, the snapshot open at the end).
    """
    n = timestamps.size
    starts: list[int] = []
    cur = current
    i = 0
    while i < n:
        if abs(cur - timestamps[i]) > window_s:
            cur = float(timestamps[i])
            starts.append(i)
        following = int(np.searchsorted(timestamps, cur + window_s, side="right"))
        i = following if following > i else i + 1
    if not starts:
        return np.full(n, current), 0, current
    first = np.asarray(starts, dtype=np.intp)
    which = np.searchsorted(first, np.arange(n), side="right") - 1
    times = np.where(which >= 0, timestamps[first[np.maximum(which, 0)]], current)
    return times, len(starts), cur


def bottleneck_counts(snapshots: FloatArray, low_gpu: BoolArray, busy: BoolArray
                      ) -> tuple[FloatArray, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Per snapshot time: how many low-GPU records and how many busy records it holds.

    Returns:
        (snapshot times, low-GPU counts, busy counts), one entry per distinct snapshot.
    """
    if snapshots.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return np.zeros(0), empty, empty
    times, which = np.unique(snapshots, return_inverse=True)
    which = which.reshape(-1)
    low = np.bincount(which, weights=low_gpu.astype(np.float64), minlength=times.size).astype(np.int64)
    high = np.bincount(which, weights=busy.astype(np.float64), minlength=times.size).astype(np.int64)
    return times, low, high


class BottleneckRule(ProfilerRule):
    """The shared algorithm; subclasses name the busy metric (:attr:`busy_dimension`) and its parameter."""

    busy_dimension = ""
    busy_parameter = ""
    busy_label = ""  # what the report's per-bottleneck count of busy records is called ("CPUs")
    uses_framework = True

    def __init__(self, base_trial: Any, *, threshold: object, gpu_threshold: object, busy_threshold: object,
                 patience: object, scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US,
                 action_str: str = "") -> None:
        super().__init__(base_trial, scan_interval_us=scan_interval_us, action_str=action_str)
        p = self.params
        self.threshold = p.number("threshold", threshold)
        self.gpu_threshold = p.number("gpu_threshold", gpu_threshold)
        self.busy_threshold = p.number(self.busy_parameter, busy_threshold)
        self.patience = p.integer("patience", patience, ge=0)
        p.done()
        self.timestamp = 0.0  # the snapshot open at the end of the last window
        self.datapoints = 0
        self.low_gpu = 0
        self.bottlenecks: dict[float, tuple[int, int]] = {}
        self.totals = FrameworkTotals()
        self.seen_gpu = self.seen_busy = False

    @property
    def needs(self) -> str:  # type: ignore[override]
        missing = [d for d, seen in ((GPU_UTILIZATION, self.seen_gpu), (self.busy_dimension, self.seen_busy))
                   if not seen]
        return " and ".join(missing) + " metrics" + (
            " (without a GPU there is nothing a CPU or I/O bottleneck could starve)"
            if not self.seen_gpu else "")

    def evaluate(self, system: SystemWindow, framework: FrameworkWindow, start_us: int, end_us: int) -> bool:
        if len(self.bottlenecks) > 1_000_000:
            self.bottlenecks = {}
        series = list(system.series.items())
        if not series:
            return self._decide(np.zeros(0), framework)
        ts = np.concatenate([s.timestamps for _, s in series])
        values = np.concatenate([s.values for _, s in series])
        kind = np.concatenate([np.full(len(s), 1 if k.dimension == GPU_UTILIZATION else
                                       2 if k.dimension == self.busy_dimension else 0, dtype=np.int8)
                               for k, s in series])
        order = np.argsort(ts, kind="stable")
        ts, values, kind = ts[order], values[order], kind[order]
        self.seen_gpu |= bool((kind == 1).any())
        self.seen_busy |= bool((kind == 2).any())
        self.found_data = self.seen_gpu and self.seen_busy
        snapshots, started, self.timestamp = snapshot_times(ts, current=self.timestamp)
        self.datapoints += started
        low_gpu = (kind == 1) & (values < self.gpu_threshold)
        busy = (kind == 2) & (values > self.busy_threshold)
        times, low, high = bottleneck_counts(snapshots, low_gpu, busy)
        self.low_gpu += int((low > 0).sum())
        new = (low > 0) & (high > 0)
        for t, g, c in zip(times[new], low[new], high[new]):
            self.bottlenecks[float(t)] = (int(g), int(c))
        return self._decide(times[new], framework)

    def _decide(self, window_bottlenecks: FloatArray, framework: FrameworkWindow) -> bool:
        report = self.report
        report["Violations"] = len(self.bottlenecks)
        report["Datapoints"] = self.datapoints
        report["Details"]["low_gpu_utilization"] = self.low_gpu
        report["Details"]["bottlenecks"] = {t: {"GPUs": g, self.busy_label: c}
                                            for t, (g, c) in self.bottlenecks.items()}
        share = 100.0 * len(self.bottlenecks) / self.datapoints if self.datapoints else 0.0
        if self.datapoints > self.patience and share > self.threshold:
            report["RuleTriggered"] += 1
            for t in window_bottlenecks:
                self.totals.add(framework, spanning(framework, float(t) * 1e6))
            report["Details"].update(self.totals.details())
            self.finding = (f"{len(self.bottlenecks)} of {self.datapoints} system snapshots ({share:.0f}%, above "
                            f"threshold {self.threshold:g}%) had a GPU below {self.gpu_threshold:g}% utilization "
                            f"while {self.busy_text()}")
        return self.triggered

    def busy_text(self) -> str:
        raise NotImplementedError


__all__ = ["SNAPSHOT_WINDOW_S", "BottleneckRule", "bottleneck_counts", "snapshot_times"]
