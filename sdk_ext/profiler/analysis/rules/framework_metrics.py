"""Where the framework's time went: the breakdown OverallFrameworkMetrics reports, and that CPUBottleneck,
IOBottleneck and StepOutlier attach to their findings (what ran during the bottlenecks or slow steps).

Each event's duration is added to one bucket, by its phase (the Chrome-trace process it belongs to):
a phase containing "cpu" -> CPU operators, "gpu" -> GPU kernels, "Step" -> training phases (TRAIN,
EVAL), ``Forward-SubModuleInternal`` / ``Backward-SubModuleInternal`` -> the forward and backward pass
(PyTorch), any other phase of a framework file -> "general" (dataloader, NCCL...), and events of no file
type -> Horovod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from sdk_ext.profiler.analysis.rules.windows import FrameworkWindow

FORWARD, BACKWARD = "Forward-SubModuleInternal", "Backward-SubModuleInternal"
#: Operators under this share (percent) of their kind's time are left out of the CPU/GPU tables.
SMALL_SHARE = 2.0


def _add(bucket: dict[str, float], key: str, value: float) -> None:
    bucket[key] = bucket.get(key, 0.0) + value


def shares(totals: Mapping[str, float]) -> dict[str, float]:
    """Each total as a percentage of their sum (empty when the sum is 0)."""
    whole = sum(totals.values())
    return {k: 100.0 * v / whole for k, v in totals.items()} if whole > 0 else {}


def main_operators(by_phase: Mapping[str, Mapping[str, float]], *, threshold: float = SMALL_SHARE
                   ) -> tuple[dict[str, float], dict[str, float]]:
    """Operators summed over phases, keeping those above ``threshold`` percent: (share among the kept,
    total µs)."""
    operators: dict[str, float] = {}
    for names in by_phase.values():
        for name, us in names.items():
            _add(operators, name, us)
    share = shares(operators)
    kept = {k: v for k, v in operators.items() if share.get(k, 0.0) > threshold}
    return shares(kept), kept


@dataclass
class FrameworkTotals:
    """Time (µs) per bucket, summed over the events added so far."""

    cpu: dict[str, dict[str, float]] = field(default_factory=dict)
    gpu: dict[str, dict[str, float]] = field(default_factory=dict)
    steps: dict[str, float] = field(default_factory=dict)
    forward: dict[str, float] = field(default_factory=dict)
    backward: dict[str, float] = field(default_factory=dict)
    general: dict[str, float] = field(default_factory=dict)
    horovod: dict[str, float] = field(default_factory=dict)

    def add(self, window: FrameworkWindow, rows: Iterable[int] | None = None) -> None:
        """Add the events of ``window`` (only those at the indices ``rows`` when given)."""
        duration = window.duration_us
        for i in range(len(window)) if rows is None else rows:
            phase, name, us = window.phase[i], window.name[i], float(duration[i])
            lower = phase.lower()
            if "cpu" in lower:
                _add(self.cpu.setdefault(phase, {}), name, us)
            elif "gpu" in lower:
                _add(self.gpu.setdefault(phase, {}), name, us)
            elif "Step" in phase:
                _add(self.steps, phase, us)
            elif phase == FORWARD:
                _add(self.forward, name, us)
            elif phase == BACKWARD:
                _add(self.backward, name, us)
            elif window.file_type[i]:
                _add(self.general, phase, us)
            else:
                _add(self.horovod, name, us)

    def details(self) -> dict[str, Any]:
        """The report's framework keys: ``ratio`` (CPU vs GPU phases), ``CPU``/``CPU_total``,
        ``GPU``/``GPU_total``, ``phase`` (TRAIN/EVAL/...), ``general``, ``forward_backward``, ``horovod``."""
        out: dict[str, Any] = {}
        phase_totals = {p: sum(v.values()) for p, v in {**self.cpu, **self.gpu}.items()}
        out["ratio"] = shares(phase_totals)
        for label, by_phase in (("CPU", self.cpu), ("GPU", self.gpu)):
            if by_phase:
                share, total = main_operators(by_phase)
                out[label], out[f"{label}_total"] = share, total
        out["phase"] = shares(self.steps)
        out["phase_time"] = dict(self.steps)
        if self.general:
            out["general"] = shares(self.general)
        if self.forward and self.backward:
            out["forward_backward"] = shares({"Forward pass": sum(self.forward.values()),
                                              "Backward pass": sum(self.backward.values())})
        if self.horovod:
            whole = sum(self.horovod.values())
            out["horovod"] = shares({k: v for k, v in self.horovod.items() if v > 0 and v / whole > 0.02})
        return out


def spanning(window: FrameworkWindow, instant_us: float) -> npt.NDArray[np.intp]:
    """Indices of the events running at ``instant_us`` (started before it, ended after it)."""
    return np.flatnonzero((window.start_us < instant_us) & (window.end_us > instant_us))


def overlapping(window: FrameworkWindow, begin_us: float, end_us: float) -> npt.NDArray[np.intp]:
    """Indices of the events that overlap ``[begin_us, end_us]``."""
    return np.flatnonzero((window.end_us >= begin_us) & (window.start_us <= end_us))


__all__ = ["BACKWARD", "FORWARD", "SMALL_SHARE", "FrameworkTotals", "main_operators", "overlapping", "shares",
           "spanning"]
