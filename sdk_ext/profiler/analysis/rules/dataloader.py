"""Dataloader: too few or too many PyTorch dataloader processes for the node's cores.

The cores are the distinct CPUUtilization series of the first window that has any. Dataloader events of the
timeline (phases ``DataLoaderWorker`` and ``DataLoaderIter``) are bucketed per second of their start; the
number of distinct worker pids (their ``pid`` argument) in each second is one sample. Once more than
``patience`` samples were taken, a median below ``min_threshold`` percent of the cores, or above
``max_threshold`` percent, is a violation (once per window); the rule fires from the first one on.
Without CPU metrics there is nothing to compare with, and the rule judges nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sdk_ext.profiler.analysis.rules.base import DEFAULT_SCAN_INTERVAL_US, ProfilerRule
from sdk_ext.profiler.analysis.rules.series import FloatArray, histogram, quantile
from sdk_ext.profiler.analysis.rules.windows import CPU_UTILIZATION, FrameworkWindow, SystemWindow

WORKER, ITERATOR, INITIALIZE = "DataLoaderWorker", "DataLoaderIter", "DataLoaderIterInitialize"
MAX_SAMPLES = 1000  # the per-second counts start over past this many (as in the 2020 code)


def workers_per_second(start_us: FloatArray, pids: list[int]) -> list[int]:
    """For each second (of the events' starts) with a dataloader event: how many distinct worker pids ran
    in it (events without a pid count no worker)."""
    seconds: dict[int, set[int]] = {}
    for start, pid in zip(start_us, pids):
        workers = seconds.setdefault(int(start // 1_000_000), set())
        if pid >= 0:
            workers.add(pid)
    return [len(w) for _, w in sorted(seconds.items())]


class Dataloader(ProfilerRule):
    """See the module docstring. Parameters as in smdebug-rulesconfig, plus the 2020 class's ``patience``."""

    needs = "PyTorch dataloader events (DataLoaderWorker, DataLoaderIter) with CPU metrics"
    uses_framework = True

    def __init__(self, base_trial: Any, min_threshold: object = 70, max_threshold: object = 200,
                 patience: object = 10, scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US, *,
                 action_str: str = "") -> None:
        super().__init__(base_trial, scan_interval_us=scan_interval_us, action_str=action_str)
        p = self.params
        self.min_threshold = p.number("min_threshold", min_threshold, ge=0)
        self.max_threshold = p.number("max_threshold", max_threshold, ge=0)
        self.patience = p.integer("patience", patience, ge=0)
        p.done()
        self.cpus: set[str] = set()
        self.parallel_dataloaders: list[int] = []
        self.dataloading_time: list[float] = []
        self.pin_memory: Any = None
        self.num_workers: Any = None
        self.prefetch: bool | None = False
        self.set_parameters_text(min_threshold=self.min_threshold, max_threshold=self.max_threshold)

    def evaluate(self, system: SystemWindow, framework: FrameworkWindow, start_us: int, end_us: int) -> bool:
        if not self.cpus:
            self.cpus = {key.name for key, _ in system.of(CPU_UTILIZATION)}
        rows = []
        for i, phase in enumerate(framework.phase):
            if phase == INITIALIZE:
                self.pin_memory = framework.args[i].get("pin_memory", self.pin_memory)
                self.num_workers = framework.args[i].get("num_workers", self.num_workers)
            if phase in (WORKER, ITERATOR):
                rows.append(i)
                self.prefetch = None
            if "Prefetch" in framework.name[i]:
                self.prefetch = True
        if len(self.parallel_dataloaders) > MAX_SAMPLES:
            self.parallel_dataloaders = []
        if not rows:
            return self.triggered
        self.report["Datapoints"] += len(rows)
        self.dataloading_time += [float(framework.end_us[i] - framework.start_us[i]) / 1e6 for i in rows]
        self.parallel_dataloaders += workers_per_second(framework.start_us[rows], [framework.pid[i] for i in rows])
        median = int(np.median(self.parallel_dataloaders))
        cores = len(self.cpus)
        self.found_data |= cores > 0
        if cores and len(self.parallel_dataloaders) > self.patience:
            if median < cores * self.min_threshold / 100:
                self.report["Violations"] += 1
                self.finding = (f"only {median} dataloader processes ran in parallel (median per second) for {cores} "
                                f"cores, below min_threshold {self.min_threshold:g}% of them: raise num_workers")
            elif median > cores * self.max_threshold / 100:
                self.report["Violations"] += 1
                self.finding = (f"{median} dataloader processes ran in parallel (median per second) for {cores} "
                                f"cores, above max_threshold {self.max_threshold:g}% of them: lower num_workers")
        details = self.report["Details"]
        for key, value in (("pin_memory", self.pin_memory), ("num_workers", self.num_workers),
                           ("prefetch", self.prefetch)):
            if value is not None:
                details[key] = value
        details["cores"] = cores
        details["dataloaders"] = median
        times = np.asarray(self.dataloading_time)
        details["dataloading_time"] = {"p25": quantile(times, 0.25), "p50": quantile(times, 0.5),
                                       "p95": quantile(times, 0.95), **histogram(times)}
        if self.report["Violations"] > 0:
            self.report["RuleTriggered"] = 1
        return self.triggered


__all__ = ["INITIALIZE", "ITERATOR", "WORKER", "Dataloader", "workers_per_second"]
