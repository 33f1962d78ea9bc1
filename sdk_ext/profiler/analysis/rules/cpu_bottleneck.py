"""CPUBottleneck: the GPU waits while the CPU is saturated (see bottleneck.py for the algorithm).

A bottleneck snapshot: some GPU below ``gpu_threshold`` percent utilization while some CPU core is above
``cpu_threshold`` percent. Fires once more than ``patience`` snapshots were seen and more than ``threshold``
percent of them were bottlenecks.
"""

from __future__ import annotations

from typing import Any

from sdk_ext.profiler.analysis.rules.base import DEFAULT_SCAN_INTERVAL_US
from sdk_ext.profiler.analysis.rules.bottleneck import BottleneckRule
from sdk_ext.profiler.analysis.rules.windows import CPU_UTILIZATION


class CPUBottleneck(BottleneckRule):
    """See the module docstring. Parameters as in smdebug-rulesconfig (strings or numbers)."""

    busy_dimension = CPU_UTILIZATION
    busy_parameter = "cpu_threshold"
    busy_label = "CPUs"

    def __init__(self, base_trial: Any, threshold: object = 50, gpu_threshold: object = 10,
                 cpu_threshold: object = 90, patience: object = 1000,
                 scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US, *, action_str: str = "") -> None:
        super().__init__(base_trial, threshold=threshold, gpu_threshold=gpu_threshold, busy_threshold=cpu_threshold,
                         patience=patience, scan_interval_us=scan_interval_us, action_str=action_str)
        self.cpu_threshold = self.busy_threshold
        self.set_parameters_text(threshold=self.threshold, cpu_threshold=self.cpu_threshold,
                                 gpu_threshold=self.gpu_threshold, patience=self.patience)

    def busy_text(self) -> str:
        return f"a CPU core was above cpu_threshold {self.cpu_threshold:g}%"


__all__ = ["CPUBottleneck"]
