"""OverallFrameworkMetrics: where the framework's time went, for the report; it never fires.

Every framework event goes into :class:`~sdk_ext.profiler.analysis.rules.framework_metrics.FrameworkTotals`;
the report holds its breakdown (CPU vs GPU phases, the main CPU operators and GPU kernels, TRAIN/EVAL
phases, forward/backward, dataloader and other annotated phases, Horovod). ``phase`` also has an
``others`` entry: the time between the first step's start and the last step's end not spent in steps.
"""

from __future__ import annotations

import math
from typing import Any

from sdk_ext.profiler.analysis.rules.base import DEFAULT_SCAN_INTERVAL_US, ProfilerRule
from sdk_ext.profiler.analysis.rules.framework_metrics import FrameworkTotals, shares
from sdk_ext.profiler.analysis.rules.max_initialization_time import step_rows
from sdk_ext.profiler.analysis.rules.windows import FrameworkWindow, SystemWindow


class OverallFrameworkMetrics(ProfilerRule):
    """See the module docstring."""

    needs = "framework events (the timeline the hooks write when profiling is on)"
    uses_system = False
    uses_framework = True

    def __init__(self, base_trial: Any, scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US, *,
                 action_str: str = "") -> None:
        super().__init__(base_trial, scan_interval_us=scan_interval_us, action_str=action_str)
        self.params.done()
        self.totals = FrameworkTotals()
        self.first_step = math.inf
        self.last_step_end = -math.inf
        self.report["RuleParameters"] = ""

    def evaluate(self, system: SystemWindow, framework: FrameworkWindow, start_us: int, end_us: int) -> bool:
        self.found_data |= len(framework) > 0
        self.totals.add(framework)
        steps = step_rows(framework)
        if steps:
            self.first_step = min(self.first_step, float(framework.start_us[steps].min()))
            self.last_step_end = max(self.last_step_end, float(framework.end_us[steps].max()))
        self.report["Datapoints"] += len(framework)
        details = self.totals.details()
        if math.isfinite(self.first_step) and self.totals.steps:
            in_steps = sum(self.totals.steps.values())
            others = max(self.last_step_end - self.first_step - in_steps, 0.0)
            details["phase_time"]["others"] = others
            details["phase"] = shares(details["phase_time"])
        self.report["Details"] = details
        return False


__all__ = ["OverallFrameworkMetrics"]
