"""BatchSize: CPU, GPU and GPU memory all low: the batch could be larger (or the instance smaller).

Per node, the total CPU utilization at each sample time is the sum over its cores divided by the number of
cores seen. Once a node has more than ``window`` and more than ``patience`` such totals: if p95 of the last
``window`` is below ``cpu_threshold_p95``, each of its GPUs with more than ``window`` samples whose p95
utilization and p95 memory use (last ``window`` samples) are below ``gpu_threshold_p95`` and
``gpu_memory_threshold_p95`` is a violation. The rule fires from the first one on.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sdk_ext.profiler.analysis.rules.base import DEFAULT_SCAN_INTERVAL_US, ProfilerRule
from sdk_ext.profiler.analysis.rules.series import FloatArray, History, box_stats, group_sum, quantile
from sdk_ext.profiler.analysis.rules.windows import (
    CPU_UTILIZATION,
    GPU_MEMORY,
    GPU_UTILIZATION,
    FrameworkWindow,
    SystemWindow,
)


def total_cpu(timestamps: FloatArray, values: FloatArray, cores: int) -> FloatArray:
    """A node's total CPU utilization per sample time: the sum over its core records at each distinct
    timestamp, divided by ``cores`` (in timestamp order)."""
    _, sums = group_sum(timestamps, values)
    result: FloatArray = sums / max(cores, 1)
    return result


class BatchSize(ProfilerRule):
    """See the module docstring. Parameters as in smdebug-rulesconfig (strings or numbers)."""

    needs = "GPUUtilization and GPUMemoryUtilization metrics besides the CPU's (without a GPU the rule " \
            "does not apply)"

    def __init__(self, base_trial: Any, cpu_threshold_p95: object = 70, gpu_threshold_p95: object = 70,
                 gpu_memory_threshold_p95: object = 70, patience: object = 1000, window: object = 500,
                 scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US, *, action_str: str = "") -> None:
        super().__init__(base_trial, scan_interval_us=scan_interval_us, action_str=action_str)
        p = self.params
        self.cpu_threshold_p95 = p.number("cpu_threshold_p95", cpu_threshold_p95)
        self.gpu_threshold_p95 = p.number("gpu_threshold_p95", gpu_threshold_p95)
        self.gpu_memory_threshold_p95 = p.number("gpu_memory_threshold_p95", gpu_memory_threshold_p95)
        self.patience = p.integer("patience", patience, ge=0)
        self.window = p.integer("window", window, gt=0)
        p.done()
        self.core_ids: set[str] = set()
        self.cpu_utilization: dict[str, History] = {}
        self.gpu_utilization: dict[str, dict[str, History]] = {}
        self.gpu_memory: dict[str, dict[str, History]] = {}
        self.set_parameters_text(cpu_threshold_p95=self.cpu_threshold_p95, gpu_threshold_p95=self.gpu_threshold_p95,
                                 gpu_memory_threshold_p95=self.gpu_memory_threshold_p95, patience=self.patience,
                                 window=self.window)

    def evaluate(self, system: SystemWindow, framework: FrameworkWindow, start_us: int, end_us: int) -> bool:
        for dimension, store in ((GPU_UTILIZATION, self.gpu_utilization), (GPU_MEMORY, self.gpu_memory)):
            for key, samples in system.of(dimension):
                store.setdefault(key.node, {}).setdefault(key.name, History()).extend(samples.values)
        cpu = list(system.of(CPU_UTILIZATION))
        self.core_ids.update(key.name for key, _ in cpu)
        by_node: dict[str, list[Any]] = {}
        for key, samples in cpu:
            by_node.setdefault(key.node, []).append(samples)
        for node, parts in by_node.items():
            timestamps = np.concatenate([s.timestamps for s in parts])
            values = np.concatenate([s.values for s in parts])
            self.cpu_utilization.setdefault(node, History()).extend(total_cpu(timestamps, values, len(self.core_ids)))
        self.found_data = bool(self.gpu_utilization and self.gpu_memory and self.cpu_utilization)
        for node, history in self.cpu_utilization.items():
            totals = history.values
            self.report["Datapoints"] = len(totals)
            if not (len(totals) > self.window and len(totals) > self.patience):
                continue
            cpu_p95 = quantile(totals[-self.window:], 0.95)
            if cpu_p95 >= self.cpu_threshold_p95:
                continue
            for gpu, gpu_history in self.gpu_utilization.get(node, {}).items():
                memory_history = self.gpu_memory.get(node, {}).get(gpu)
                if len(gpu_history) <= self.window or memory_history is None or not len(memory_history):
                    continue
                gpu_values, memory = gpu_history.values, memory_history.values
                gpu_p95 = quantile(gpu_values[-self.window:], 0.95)
                memory_p95 = quantile(memory[-self.window:], 0.95)
                if gpu_p95 < self.gpu_threshold_p95 and memory_p95 < self.gpu_memory_threshold_p95:
                    details = self.report["Details"].setdefault(node, {})
                    details["cpu"] = box_stats(totals)
                    details[gpu] = box_stats(gpu_values)
                    details[f"{gpu}_memory"] = box_stats(memory)
                    self.report["Details"]["last_timestamp"] = start_us
                    self.violation(f"{gpu} on {node} is underused: p95 utilization {gpu_p95:.1f}% (below "
                                   f"{self.gpu_threshold_p95:g}%), p95 memory {memory_p95:.1f}% (below "
                                   f"{self.gpu_memory_threshold_p95:g}%), and the node's p95 CPU "
                                   f"{cpu_p95:.1f}% (below {self.cpu_threshold_p95:g}%): the batch size "
                                   "could grow")
        return self.triggered


__all__ = ["BatchSize", "total_cpu"]
