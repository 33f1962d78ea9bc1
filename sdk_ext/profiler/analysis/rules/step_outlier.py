"""StepOutlier: steps that take far longer than the others.

Step durations come from the timeline's step events (``Step:ModeKeys.TRAIN``, ``...EVAL``), kept per node
and per event name. After each window, every such group with more than ``MIN_STEPS`` (100) steps is
judged: steps longer than mean + ``stddev`` x standard deviation are outliers, and more than
``n_outliers`` of them is a violation. The rule fires from the first one on.

``mode`` (TRAIN, EVAL, PREDICT, GLOBAL; also "ModeKeys.TRAIN" or "Step:ModeKeys.TRAIN") keeps only that
mode's steps. (The 2020 code tested ``"Step:ModeKeys" in name or name == mode``, so ``mode`` never
narrowed anything.)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from sdk_ext.profiler.analysis.rules.base import DEFAULT_SCAN_INTERVAL_US, ProfilerRule
from sdk_ext.profiler.analysis.rules.framework_metrics import FrameworkTotals, overlapping
from sdk_ext.profiler.analysis.rules.max_initialization_time import step_rows
from sdk_ext.profiler.analysis.rules.series import FloatArray, History, histogram, quantile
from sdk_ext.profiler.analysis.rules.windows import FrameworkWindow, SystemWindow

MIN_STEPS = 100


def outlier_mask(durations: FloatArray, stddev: float) -> tuple[npt.NDArray[np.bool_], float]:
    """Which durations exceed mean + ``stddev`` x standard deviation (population), and that limit."""
    limit = float(np.mean(durations) + stddev * np.std(durations))
    return durations > limit, limit


def step_details(durations: FloatArray, steps: npt.NDArray[np.int64], stddev: float, phase: str
                 ) -> dict[str, Any]:
    """The report's statistics of one group of steps: stats, outliers and a histogram of the normal ones."""
    outliers, limit = outlier_mask(durations, stddev)
    return {
        "step_stats": {"mean": float(np.mean(durations)), "max": float(np.max(durations)),
                       "p99": quantile(durations, 0.99), "p95": quantile(durations, 0.95),
                       "p50": quantile(durations, 0.5), "min": float(np.min(durations))},
        "number_of_outliers": int(outliers.sum()),
        "phase": phase,
        "stddev": round(float(np.std(durations)), 2),
        "limit": limit,
        **histogram(durations[durations < limit] if (durations < limit).any() else durations),
        "step_numbers": [int(s) for s in steps[outliers]],
    }


class StepOutlier(ProfilerRule):
    """See the module docstring. Parameters as in smdebug-rulesconfig (strings or numbers)."""

    needs = "step events (Step:ModeKeys.*) in the framework timeline (the hook records them when profiling is on)"
    uses_system = False
    uses_framework = True

    def __init__(self, base_trial: Any, stddev: object = 3, mode: object = None, n_outliers: object = 10,
                 scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US, *, action_str: str = "") -> None:
        super().__init__(base_trial, scan_interval_us=scan_interval_us, action_str=action_str)
        p = self.params
        self.stddev = p.number("stddev", stddev, ge=0)
        parsed = p.mode("mode", mode)
        self.mode = parsed.name if parsed is not None else None
        self.n_outliers = p.integer("n_outliers", n_outliers, ge=0)
        p.done()
        self.durations: dict[tuple[str, str], History] = {}
        self.step_numbers: dict[tuple[str, str], list[int]] = {}
        self.totals = FrameworkTotals()
        self.report["Details"] = {"step_details": {}}
        self.report["RuleParameters"] = (f"threshold:{self.stddev:g}\nmode:{self.mode}\nn_outliers:"
                                         f"{self.n_outliers}\nstddev:{self.stddev:g}")

    def evaluate(self, system: SystemWindow, framework: FrameworkWindow, start_us: int, end_us: int) -> bool:
        intervals: dict[tuple[str, int], tuple[float, float]] = {}
        rows = step_rows(framework, self.mode)
        for i in rows:
            key = (framework.node[i], framework.name[i])
            self.durations.setdefault(key, History()).extend(
                [(framework.end_us[i] - framework.start_us[i]) / 1e6])
            self.step_numbers.setdefault(key, []).append(framework.step[i])
            intervals.setdefault((framework.node[i], framework.step[i]),
                                 (float(framework.start_us[i]), float(framework.end_us[i])))
        self.report["Datapoints"] += len(rows)
        self.found_data |= bool(rows)
        chosen: dict[str, tuple[int, dict[str, Any]]] = {}
        for (node, name), history in self.durations.items():
            durations = history.values
            if len(durations) <= MIN_STEPS:
                continue
            numbers = np.asarray(self.step_numbers[(node, name)][-len(durations):], dtype=np.int64)
            details = step_details(durations, numbers, self.stddev, name)
            self.report["Details"].setdefault("phases", {}).setdefault(node, {})[name] = details
            n = details["number_of_outliers"]
            rank = (int(n > self.n_outliers), len(durations))
            if node not in chosen or rank > (int(chosen[node][1]["number_of_outliers"] > self.n_outliers),
                                             chosen[node][0]):
                chosen[node] = (len(durations), details)
            if n > self.n_outliers:
                self.report["Violations"] += n - 1  # violation() counts the last one
                self.violation(f"{n} of {len(durations)} {name.split('.')[-1]} steps on {node} took longer than "
                               f"mean + {self.stddev:g} x stddev = {details['limit']:.4g} s (at most "
                               f"n_outliers={self.n_outliers} allowed; slowest "
                               f"{details['step_stats']['max']:.4g} s, median {details['step_stats']['p50']:.4g} "
                               f"s); outlier steps: {_some(details['step_numbers'])}")
                for step in details["step_numbers"]:
                    if (node, step) in intervals:
                        begin, end = intervals[(node, step)]
                        self.totals.add(framework, overlapping(framework, begin, end))
                self.report["Details"].update(self.totals.details())
        for node, (_, details) in chosen.items():
            self.report["Details"]["step_details"][node] = details
        return self.triggered


def _some(steps: list[int], limit: int = 10) -> str:
    shown = ", ".join(str(s) for s in steps[:limit])
    return shown + (f" ... ({len(steps)} in all)" if len(steps) > limit else "")


__all__ = ["MIN_STEPS", "StepOutlier", "outlier_mask", "step_details"]
