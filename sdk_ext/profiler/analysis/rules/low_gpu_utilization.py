"""LowGPUUtilization: a GPU that is mostly idle, or swings between busy and idle.

For each GPU of each node, after each window, once more than ``patience`` GPUUtilization samples have
been seen: over the last ``window`` samples, p95 below ``threshold_p95`` is under-utilization; p95 above
it with p5 below ``threshold_p5`` is fluctuation. Either is a violation (one per GPU per window), and the
rule fires from the first one on.
"""

from __future__ import annotations

from typing import Any

from sdk_ext.profiler.analysis.rules.base import DEFAULT_SCAN_INTERVAL_US, ProfilerRule
from sdk_ext.profiler.analysis.rules.series import FloatArray, History, box_stats, quantile
from sdk_ext.profiler.analysis.rules.windows import GPU_UTILIZATION, FrameworkWindow, SystemWindow

UNDERUTILIZED, FLUCTUATING = "underutilized", "fluctuating"


def gpu_verdict(recent: FloatArray, *, threshold_p95: float, threshold_p5: float) -> str | None:
    """``"underutilized"``, ``"fluctuating"`` or None, for a GPU's most recent utilization samples."""
    p95 = quantile(recent, 0.95)
    if p95 < threshold_p95:
        return UNDERUTILIZED
    if p95 > threshold_p95 and quantile(recent, 0.05) < threshold_p5:
        return FLUCTUATING
    return None


class LowGPUUtilization(ProfilerRule):
    """See the module docstring. Parameters as in smdebug-rulesconfig (strings or numbers)."""

    needs = "GPUUtilization metrics (the job's hosts have no GPU, or the monitor could not read it)"

    def __init__(self, base_trial: Any, threshold_p95: object = 70, threshold_p5: object = 10,
                 window: object = 500, patience: object = 1000,
                 scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US, *, action_str: str = "") -> None:
        super().__init__(base_trial, scan_interval_us=scan_interval_us, action_str=action_str)
        p = self.params
        self.threshold_p95 = p.number("threshold_p95", threshold_p95)
        self.threshold_p5 = p.number("threshold_p5", threshold_p5)
        self.window = p.integer("window", window, gt=0)
        self.patience = p.integer("patience", patience, ge=0)
        p.done()
        self.values: dict[str, dict[str, History]] = {}
        self.set_parameters_text(threshold_p95=self.threshold_p95, threshold_p5=self.threshold_p5,
                                 window=self.window, patience=self.patience)

    def evaluate(self, system: SystemWindow, framework: FrameworkWindow, start_us: int, end_us: int) -> bool:
        for key, samples in system.of(GPU_UTILIZATION):
            self.values.setdefault(key.node, {}).setdefault(key.name, History()).extend(samples.values)
            self.found_data = True
        for node, gpus in self.values.items():
            for gpu, history in gpus.items():
                values = history.values
                self.report["Datapoints"] = max(int(self.report["Datapoints"]), len(values))
                if len(values) <= self.patience:
                    continue
                recent = values[-self.window:]
                verdict = gpu_verdict(recent, threshold_p95=self.threshold_p95, threshold_p5=self.threshold_p5)
                if verdict is None:
                    continue
                p95, p5 = quantile(recent, 0.95), quantile(recent, 0.05)
                self.report["Details"].setdefault(node, {})[gpu] = {
                    "gpu_max": float(values.max()), "gpu_95": p95, "gpu_5": p5, **box_stats(values)}
                self.report["Details"]["last_timestamp"] = start_us
                if verdict == UNDERUTILIZED:
                    what = (f"{gpu} on {node} is underutilized: p95 of its last {recent.size} utilization samples "
                            f"is {p95:.1f}%, below threshold_p95 {self.threshold_p95:g}%")
                else:
                    what = (f"{gpu} on {node} fluctuates: p95 of its last {recent.size} utilization samples is "
                            f"{p95:.1f}% but p5 is {p5:.1f}%, below threshold_p5 {self.threshold_p5:g}%")
                self.violation(what)
        return self.triggered


__all__ = ["FLUCTUATING", "UNDERUTILIZED", "LowGPUUtilization", "gpu_verdict"]
