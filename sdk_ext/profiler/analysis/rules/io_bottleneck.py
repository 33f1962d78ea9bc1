"""IOBottleneck: the GPU waits while the CPUs wait for I/O (see bottleneck.py for the algorithm).

A bottleneck snapshot: some GPU below ``gpu_threshold`` percent utilization while some core's I/O wait
(I/OWaitPercentage) is above ``io_threshold`` percent. Fires once more than ``patience`` snapshots were seen
and more than ``threshold`` percent of them were bottlenecks.
"""

from __future__ import annotations

from typing import Any

from sdk_ext.profiler.analysis.rules.base import DEFAULT_SCAN_INTERVAL_US
from sdk_ext.profiler.analysis.rules.bottleneck import BottleneckRule
from sdk_ext.profiler.analysis.rules.windows import IO_WAIT


class IOBottleneck(BottleneckRule):
    """See the module docstring. Parameters as in smdebug-rulesconfig (strings or numbers)."""

    busy_dimension = IO_WAIT
    busy_parameter = "io_threshold"
    busy_label = "CPUs"  # the original report's key for the count of busy records

    def __init__(self, base_trial: Any, threshold: object = 50, gpu_threshold: object = 10,
                 io_threshold: object = 50, patience: object = 1000,
                 scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US, *, action_str: str = "") -> None:
        super().__init__(base_trial, threshold=threshold, gpu_threshold=gpu_threshold, busy_threshold=io_threshold,
                         patience=patience, scan_interval_us=scan_interval_us, action_str=action_str)
        self.io_threshold = self.busy_threshold
        self.set_parameters_text(threshold=self.threshold, io_threshold=self.io_threshold,
                                 gpu_threshold=self.gpu_threshold, patience=self.patience)

    def busy_text(self) -> str:
        return f"the I/O wait was above io_threshold {self.io_threshold:g}%"


__all__ = ["IOBottleneck"]
