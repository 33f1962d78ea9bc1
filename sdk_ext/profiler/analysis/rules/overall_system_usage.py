"""OverallSystemUsage: how busy each node was, for the report; it never fires.

Per node and per sample time, the sum over a metric's series (every core's CPUUtilization, every GPU's
GPUUtilization, ...) is one value; the report gives max, p99, p95, p50 and min of those values divided by the
number of series (cores or GPUs seen), under ``Details[<metric>][<node>]`` for CPU, GPU, CPU memory
(MemoryUsedPercent), GPU memory, I/O (I/OWaitPercentage) and Network (the ``Algorithm`` dimension, bytes
per second).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from sdk_ext.profiler.analysis.rules.base import DEFAULT_SCAN_INTERVAL_US, ProfilerRule
from sdk_ext.profiler.analysis.rules.series import History, group_sum, percentiles
from sdk_ext.profiler.analysis.rules.windows import (
    CPU_UTILIZATION,
    GPU_MEMORY,
    GPU_UTILIZATION,
    IO_WAIT,
    MEMORY_USED,
    NETWORK,
    FrameworkWindow,
    Samples,
    SeriesKey,
    SystemWindow,
)

#: Report key -> (how the series are found, what the per-node sum is divided by).
METRICS = {
    "Network": ("dimension", NETWORK, "one"),
    "GPU": ("dimension", GPU_UTILIZATION, "gpus"),
    "CPU": ("dimension", CPU_UTILIZATION, "cores"),
    "CPU memory": ("name", MEMORY_USED, "one"),
    "GPU memory": ("dimension", GPU_MEMORY, "gpus"),
    "I/O": ("dimension", IO_WAIT, "cores"),
}


class OverallSystemUsage(ProfilerRule):
    """See the module docstring."""

    needs = "system metrics"

    def __init__(self, base_trial: Any, scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US, *,
                 action_str: str = "") -> None:
        super().__init__(base_trial, scan_interval_us=scan_interval_us, action_str=action_str)
        self.params.done()
        self.totals: dict[str, dict[str, History]] = {metric: {} for metric in METRICS}
        self.gpu_ids: set[str] = set()
        self.core_ids: set[str] = set()
        self.report["RuleParameters"] = ""

    def evaluate(self, system: SystemWindow, framework: FrameworkWindow, start_us: int, end_us: int) -> bool:
        self.found_data |= len(system) > 0
        self.gpu_ids.update(key.name for key, _ in system.of(GPU_UTILIZATION))
        self.core_ids.update(key.name for key, _ in system.of(CPU_UTILIZATION))
        divisors = {"one": 1, "gpus": len(self.gpu_ids), "cores": len(self.core_ids)}
        for metric, (by, label, _) in METRICS.items():
            per_node: dict[str, list[Samples]] = {}
            for key, samples in _select(system, by, label):
                per_node.setdefault(key.node, []).append(samples)
            for node, parts in per_node.items():
                _, sums = group_sum(np.concatenate([s.timestamps for s in parts]),
                                    np.concatenate([s.values for s in parts]))
                self.totals[metric].setdefault(node, History()).extend(sums)
        cpu = self.totals["CPU"]
        if cpu:
            self.report["Datapoints"] = len(next(iter(cpu.values())))
        for metric, (_, _, divisor) in METRICS.items():
            self.report["Details"][metric] = {
                node: percentiles(history.values, divisor=divisors[divisor])
                for node, history in self.totals[metric].items() if len(history)}
        return False


def _select(system: SystemWindow, by: str, label: str) -> Iterator[tuple[SeriesKey, Samples]]:
    return system.of(label) if by == "dimension" else system.named(label)


__all__ = ["METRICS", "OverallSystemUsage"]
