"""LoadBalancing: GPUs of one node that carry different workloads.

Per GPU, a histogram of its utilization samples (2-point bins from 0 to 100). After each window, for every
pair of GPUs on the same node that both have more than ``patience`` samples, the Jensen-Shannon distance
between their histograms (natural logarithm; 0 for equal shapes, at most sqrt(ln 2) = 0.83) above
``threshold`` is a violation. The rule fires from the first one on.

Two deliberate differences from the 2020 code: every pair is compared (its inner loop sat outside the
outer one, so it compared the last GPU with itself and never fired), and the last bin includes 100%
(``np.arange(0, 100, 2)`` as bin edges dropped every sample above 98%, so a fully busy GPU had an empty
histogram).
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np
import numpy.typing as npt

from sdk_ext.profiler.analysis.rules.base import DEFAULT_SCAN_INTERVAL_US, ProfilerRule
from sdk_ext.profiler.analysis.rules.series import FloatArray, History
from sdk_ext.profiler.analysis.rules.windows import GPU_UTILIZATION, FrameworkWindow, SystemWindow

BIN_EDGES = np.arange(0, 102, 2, dtype=np.float64)  # 50 bins; the last is [98, 100]


def utilization_histogram(values: FloatArray) -> npt.NDArray[np.int64]:
    counts, _ = np.histogram(np.clip(values, 0.0, 100.0), bins=BIN_EDGES)
    return counts.astype(np.int64)


def _kl(p: FloatArray, q: FloatArray) -> float:
    mask = p > 0
    return float(np.sum(p[mask] * np.log(p[mask] / q[mask])))


def js_distance(h1: npt.ArrayLike, h2: npt.ArrayLike) -> float:
    """Jensen-Shannon distance between two histograms (each normalized first; natural logarithm).

    NaN when either histogram is empty.
    """
    a, b = np.asarray(h1, dtype=np.float64), np.asarray(h2, dtype=np.float64)
    if a.sum() <= 0 or b.sum() <= 0:
        return float("nan")
    p, q = a / a.sum(), b / b.sum()
    m = (p + q) / 2
    return float(np.sqrt(max((_kl(p, m) + _kl(q, m)) / 2, 0.0)))


class LoadBalancing(ProfilerRule):
    """See the module docstring. Parameters as in smdebug-rulesconfig (strings or numbers)."""

    needs = "GPUUtilization metrics of two or more GPUs on one node"

    def __init__(self, base_trial: Any, threshold: object = 0.5, patience: object = 1000,
                 scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US, *, action_str: str = "") -> None:
        super().__init__(base_trial, scan_interval_us=scan_interval_us, action_str=action_str)
        p = self.params
        self.threshold = p.number("threshold", threshold)
        self.patience = p.integer("patience", patience, ge=0)
        p.done()
        self.gpus: dict[str, dict[str, History]] = {}
        self.set_parameters_text(threshold=self.threshold, patience=self.patience)

    def evaluate(self, system: SystemWindow, framework: FrameworkWindow, start_us: int, end_us: int) -> bool:
        for key, samples in system.of(GPU_UTILIZATION):
            history = self.gpus.setdefault(key.node, {}).setdefault(key.name, History())
            history.extend(samples.values)
            self.report["Datapoints"] = len(history)
        for node, gpus in self.gpus.items():
            self.found_data |= len(gpus) > 1
            histograms = {gpu: utilization_histogram(h.values) for gpu, h in gpus.items()}
            details = self.report["Details"].setdefault(node, {})
            details["workloads"] = {gpu: h.tolist() for gpu, h in histograms.items()}
            for gpu1, gpu2 in combinations(sorted(gpus), 2):
                if len(gpus[gpu1]) <= self.patience or len(gpus[gpu2]) <= self.patience:
                    continue
                distance = js_distance(histograms[gpu1], histograms[gpu2])
                if distance > self.threshold:
                    details.setdefault("distances", {}).setdefault(gpu1, {})[gpu2] = distance
                    self.violation(f"{gpu1} and {gpu2} on {node} carry different workloads: the distance between "
                                   f"their utilization histograms is {distance:.2f}, above threshold "
                                   f"{self.threshold:g}")
        return self.triggered


__all__ = ["BIN_EDGES", "LoadBalancing", "js_distance", "utilization_histogram"]
