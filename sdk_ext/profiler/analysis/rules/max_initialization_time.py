"""MaxInitializationTime: training has not reached its first step after ``threshold`` minutes.

The rule tracks the first and last timestamps of the profiler data (system metrics and framework events)
and the step events of the timeline (names containing ``Step:ModeKeys``). It fires when the data spans more
than ``threshold`` minutes and no step has been seen yet. (The 2020 code measured up to the start of the
window being evaluated, one scan interval late; here the span is measured to the latest data seen.)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sdk_ext.profiler.analysis.rules.base import DEFAULT_SCAN_INTERVAL_US, ProfilerRule
from sdk_ext.profiler.analysis.rules.windows import FrameworkWindow, SystemWindow

STEP_MARK = "Step:ModeKeys"


def step_rows(window: FrameworkWindow, mode: str | None = None) -> list[int]:
    """Indices of the step events (``Step:ModeKeys.<MODE>``), only those of ``mode`` when given."""
    wanted = f"{STEP_MARK}.{mode}" if mode else STEP_MARK
    return [i for i, name in enumerate(window.name) if wanted in name]


class MaxInitializationTime(ProfilerRule):
    """See the module docstring. Parameters as in smdebug-rulesconfig (strings or numbers)."""

    needs = "profiler data"
    uses_framework = True

    def __init__(self, base_trial: Any, threshold: object = 20,
                 scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US, *, action_str: str = "") -> None:
        super().__init__(base_trial, scan_interval_us=scan_interval_us, action_str=action_str)
        self.threshold = self.params.number("threshold", threshold, gt=0)
        self.params.done()
        self.start_us = math.inf
        self.end_us = -math.inf
        self.system_start = math.inf
        self.system_end = 0.0
        self.report["Details"]["step_num"] = {}
        self.set_parameters_text(threshold=self.threshold)

    def evaluate(self, system: SystemWindow, framework: FrameworkWindow, start_us: int, end_us: int) -> bool:
        timestamps = system.timestamps()
        if timestamps.size:
            self.system_start = min(self.system_start, float(timestamps[0]))
            self.system_end = max(self.system_end, float(timestamps[-1]))
            self.report["Details"]["job_start"] = self.system_start
            self.report["Details"]["job_end"] = self.system_end
            self.start_us = min(self.start_us, float(timestamps[0]) * 1e6)
            self.end_us = max(self.end_us, float(timestamps[-1]) * 1e6)
        if len(framework):
            self.start_us = min(self.start_us, float(framework.start_us.min()))
            self.end_us = max(self.end_us, float(np.max(framework.end_us)))
        self.found_data |= math.isfinite(self.start_us)
        steps = self.report["Details"]["step_num"]
        for i in step_rows(framework):
            self.report["Datapoints"] += 1
            if "first" not in steps:
                steps["first"] = float(framework.start_us[i])
            else:
                steps["last"] = float(framework.start_us[i])
        if steps or self.triggered or not math.isfinite(self.start_us):
            return self.triggered
        waited = (self.end_us - self.start_us) / 60e6
        if waited > self.threshold:
            self.violation(f"no training step after {waited:.1f} minutes of profiler data (threshold "
                           f"{self.threshold:g} minutes): initialization takes too long, or the job records no "
                           "step timeline")
        return self.triggered


__all__ = ["STEP_MARK", "MaxInitializationTime", "step_rows"]
