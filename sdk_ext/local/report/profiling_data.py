"""What the profiling part of a report shows, read from a job's profiler output and its profiler rules.

* utilization over time, per host: the CPU (mean over its cores), the I/O wait (mean over cores), the
  memory in use, and each GPU's utilization and memory, in percent, against seconds since the first sample;
* step durations, per host/process and phase (``Step:ModeKeys.TRAIN``...), with the outliers StepOutlier
  counts (longer than mean + 3 standard deviations, or the job's StepOutlier ``stddev``) marked;
* facts: hosts, cores and GPUs, when sampling started and ended, how long until the first step;
* each profiler rule's verdict: its status in DescribeTrainingJob (ProfilerRuleEvaluationStatuses) and
  its report (``profiler-reports/<Rule>.json``); for ProfilerReport, one verdict per sub-rule.

The data is read window by window (ProfilerTrial), so memory holds the per-sample aggregates, not the
records. Series longer than ``max_points`` are averaged over equal time buckets; steps are sampled evenly,
keeping every outlier.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sdk_ext.exceptions import SdkExtError
from sdk_ext.format.profiler_paths import PROFILER_OUTPUT_DIR, RULE_REPORTS_DIR
from sdk_ext.format.profiler_records import decode_rule_report
from sdk_ext.profiler.analysis.rules.profiler_report import SUMMARY_FILE
from sdk_ext.profiler.analysis.rules.series import FloatArray, group_sum
from sdk_ext.profiler.analysis.rules.step_outlier import outlier_mask
from sdk_ext.profiler.analysis.rules.windows import (
    CPU_UTILIZATION,
    GPU_MEMORY,
    GPU_UTILIZATION,
    IO_WAIT,
    MEMORY_USED,
    SystemWindow,
)
from sdk_ext.profiler.profiler_trial import ProfilerTrial, profiler_root
from sdk_ext.rules.status import CHECKED_NOTHING
from sdk_ext.storage import open_storage

logger = logging.getLogger(__name__)

WINDOW_US = 600 * 1_000_000  # read ten minutes of data at a time
DEFAULT_STDDEV = 3.0


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a chart: ``values[i]`` at ``x[i]`` (seconds since the first sample, or step numbers)."""

    name: str
    x: Sequence[float]
    values: Sequence[float]


@dataclass(frozen=True, slots=True)
class Steps:
    """The steps of one host/process and phase."""

    node: str
    phase: str
    count: int
    stats: Mapping[str, float]  # mean, p50, p95, max, min (seconds)
    limit: float  # the outlier limit (seconds)
    outliers: Sequence[int]  # step numbers
    line: Line  # duration (ms) per step number, sampled
    outlier_line: Line  # the outliers' durations (ms)


@dataclass(frozen=True, slots=True)
class ProfilerVerdict:
    """A profiler rule's outcome: ``status`` from DescribeTrainingJob (or what its report says), ``details``
    in words, ``report`` its profiler-reports JSON (or None); ``parent``: ProfilerReport for its sub-rules."""

    rule: str
    status: str
    details: str
    report: Mapping[str, Any] | None = None
    parent: str | None = None


@dataclass
class ProfileData:
    """Everything the profiling part shows (see the module docstring)."""

    path: str
    hosts: dict[str, dict[str, int]] = field(default_factory=dict)  # host -> {"cores": n, "gpus": n}
    start_s: float | None = None
    end_s: float | None = None
    interval_ms: float | None = None
    records: int = 0
    utilization: dict[str, list[Line]] = field(default_factory=dict)  # host -> lines (percent)
    usage: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)  # host -> metric -> p50/p95/max
    steps: list[Steps] = field(default_factory=list)
    first_step_s: float | None = None
    verdicts: list[ProfilerVerdict] = field(default_factory=list)

    @property
    def has_data(self) -> bool:
        return self.start_s is not None

    @property
    def initialization_s(self) -> float | None:
        if self.first_step_s is None or self.start_s is None:
            return None
        return max(self.first_step_s - self.start_s, 0.0)


def bucket_mean(x: FloatArray, values: FloatArray, max_points: int) -> tuple[FloatArray, FloatArray]:
    """At most ``max_points`` points: the means of ``values`` over equal spans of ``x`` (empty spans left out)."""
    if x.size <= max_points:
        return x, values
    edges = np.linspace(x[0], x[-1], max_points + 1)
    which = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, max_points - 1)
    counts = np.bincount(which, minlength=max_points)
    kept = counts > 0
    mean_x = np.bincount(which, weights=x, minlength=max_points)[kept] / counts[kept]
    mean_v = np.bincount(which, weights=values, minlength=max_points)[kept] / counts[kept]
    return mean_x, mean_v


class _Accumulator:
    """Per-sample aggregates of the system metrics, window after window."""

    def __init__(self) -> None:
        self.series: dict[tuple[str, str], list[tuple[FloatArray, FloatArray]]] = {}
        self.cores: dict[str, set[str]] = {}
        self.gpus: dict[str, set[str]] = {}

    def add(self, window: SystemWindow) -> None:
        for label, dimension in (("CPU", CPU_UTILIZATION), ("I/O wait", IO_WAIT)):
            per_node: dict[str, list[Any]] = {}
            for key, samples in window.of(dimension):
                per_node.setdefault(key.node, []).append(samples)
                if dimension == CPU_UTILIZATION:
                    self.cores.setdefault(key.node, set()).add(key.name)
            for node, parts in per_node.items():
                ts = np.concatenate([p.timestamps for p in parts])
                times, sums = group_sum(ts, np.concatenate([p.values for p in parts]))
                _, counts = group_sum(ts, np.ones(ts.size))
                self._append(node, label, times, sums / counts)
        for key, samples in window.named(MEMORY_USED):
            self._append(key.node, "memory", samples.timestamps, samples.values)
        for dimension, suffix in ((GPU_UTILIZATION, ""), (GPU_MEMORY, " memory")):
            for key, samples in window.of(dimension):
                self.gpus.setdefault(key.node, set()).add(key.name)
                self._append(key.node, f"{key.name}{suffix}", samples.timestamps, samples.values)

    def _append(self, node: str, label: str, times: FloatArray, values: FloatArray) -> None:
        self.series.setdefault((node, label), []).append((times, values))

    def joined(self) -> dict[tuple[str, str], tuple[FloatArray, FloatArray]]:
        out = {}
        for key, parts in self.series.items():
            times = np.concatenate([p[0] for p in parts])
            order = np.argsort(times, kind="stable")
            out[key] = (times[order], np.concatenate([p[1] for p in parts])[order])
        return out


def _order(label: str) -> tuple[int, str]:
    rank = {"CPU": 0, "I/O wait": 1, "memory": 2}
    return (rank.get(label, 3), label)


def collect_profile(path: str, *, job: Mapping[str, Any] | None = None, job_dir: Path | None = None,
                    reports_dir: Path | None = None, max_points: int = 400) -> ProfileData:
    """Read the profiler output at ``path`` (a job directory, its profiler-output/, or an s3:// prefix).

    ``job``/``job_dir``: the job's DescribeTrainingJob (job.json) and directory, for the rules' verdicts;
    ``reports_dir``: a ``profiler-reports/`` directory to take verdicts from instead (ProfilerReport's page).

    Raises:
        StorageError: the profiler output cannot be listed or read.
    """
    root = profiler_root(path)
    data = ProfileData(path=root)
    trial = ProfilerTrial(open_storage(root), signal_expired=lambda: True)  # read what is there, no waiting
    accumulator = _Accumulator()
    steps: dict[tuple[str, str], list[tuple[int, float, float]]] = {}
    if trial.wait_for_first_data():
        start = trial.first_timestamp
        end_of_data = trial.last_timestamp()
        while start <= end_of_data:
            window = trial.system_window(start, start + WINDOW_US)
            accumulator.add(window)
            framework = trial.framework_window(start, start + WINDOW_US)
            for i, name in enumerate(framework.name):
                if "Step:ModeKeys" in name:
                    steps.setdefault((framework.node[i], name), []).append(
                        (framework.step[i], float(framework.start_us[i]), float(framework.end_us[i])))
            start += WINDOW_US
        data.records = trial.records
    stddev = _stddev(job)
    _fill_system(data, accumulator, max_points)
    _fill_steps(data, steps, stddev, max_points)
    data.verdicts = verdicts(job, job_dir, reports_dir)
    return data


def _fill_system(data: ProfileData, accumulator: _Accumulator, max_points: int) -> None:
    joined = accumulator.joined()
    if not joined:
        return
    data.start_s = min(float(t[0]) for t, _ in joined.values() if t.size)
    data.end_s = max(float(t[-1]) for t, _ in joined.values() if t.size)
    cpu = [t for (node, label), (t, _) in joined.items() if label == "CPU" and t.size > 1]
    if cpu:
        data.interval_ms = round(float(np.median(np.diff(cpu[0]))) * 1000, 1)
    for node in sorted({n for n, _ in joined}):
        data.hosts[node] = {"cores": len(accumulator.cores.get(node, ())), "gpus": len(accumulator.gpus.get(node, ()))}
        lines, usage = [], {}
        for (n, label), (times, values) in sorted(joined.items(), key=lambda kv: _order(kv[0][1])):
            if n != node or not times.size:
                continue
            usage[label] = {"p50": float(np.quantile(values, 0.5)), "p95": float(np.quantile(values, 0.95)),
                            "max": float(values.max())}
            x, v = bucket_mean(times - data.start_s, values, max_points)
            lines.append(Line(label, x.tolist(), v.tolist()))
        data.utilization[node] = lines
        data.usage[node] = usage


def _fill_steps(data: ProfileData, steps: Mapping[tuple[str, str], list[tuple[int, float, float]]],
                stddev: float, max_points: int) -> None:
    for (node, phase), rows in sorted(steps.items()):
        rows = sorted(rows, key=lambda r: r[1])
        numbers = np.array([r[0] for r in rows], dtype=np.int64)
        durations = np.array([(r[2] - r[1]) / 1e6 for r in rows])
        first = rows[0][1] / 1e6
        data.first_step_s = first if data.first_step_s is None else min(data.first_step_s, first)
        mask, limit = outlier_mask(durations, stddev)
        data.start_s = first if data.start_s is None else min(data.start_s, first)
        keep = np.flatnonzero(mask)
        index = np.unique(np.concatenate([np.linspace(0, len(rows) - 1, min(len(rows), max_points)).astype(int),
                                          keep]))
        data.steps.append(Steps(
            node=node, phase=phase, count=len(rows),
            stats={"mean": float(durations.mean()), "p50": float(np.quantile(durations, 0.5)),
                   "p95": float(np.quantile(durations, 0.95)), "max": float(durations.max()),
                   "min": float(durations.min())},
            limit=limit, outliers=numbers[mask].tolist(),
            line=Line(f"{phase.split('.')[-1]} steps ({node})", numbers[index].astype(float).tolist(),
                      (durations[index] * 1000).tolist()),
            outlier_line=Line(f"outliers: longer than mean + {stddev:g} standard deviations",
                              numbers[mask].astype(float).tolist(), (durations[mask] * 1000).tolist())))


def _stddev(job: Mapping[str, Any] | None) -> float:
    """StepOutlier's ``stddev`` when the job configured one (its own rule, or ProfilerReport's override)."""
    for rule in (job or {}).get("ProfilerRuleConfigurations") or []:
        params = rule.get("RuleParameters") or {}
        candidates = [params.get("StepOutlier_stddev")]
        if params.get("rule_to_invoke") == "StepOutlier":
            candidates.append(params.get("stddev"))
        for value in candidates:
            try:
                if value is not None and math.isfinite(float(value)):
                    return float(value)
            except ValueError:
                continue
    return DEFAULT_STDDEV


def read_reports(directory: Path) -> dict[str, dict[str, Any]]:
    """The rule reports in a ``profiler-reports/`` directory, by rule name (unreadable ones left out)."""
    out: dict[str, dict[str, Any]] = {}
    for file in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            report = decode_rule_report(file.read_bytes(), name=str(file))
        except (OSError, SdkExtError) as err:
            logger.warning("rule report %s not read: %s", file, err)
            continue
        out[file.stem] = {"RuleTriggered": report.rule_triggered, "Violations": report.violations,
                          "Details": dict(report.details), "Datapoints": report.datapoints,
                          "RuleParameters": report.rule_parameters}
    return out


def _report_dir(job: Mapping[str, Any] | None, job_dir: Path | None, name: str) -> Path | None:
    local = ((job or {}).get("SdkExtLocal") or {}).get("ProfilerRules") or {}
    out = (local.get(name) or {}).get("OutputDir")
    if out:
        return Path(out) / PROFILER_OUTPUT_DIR / RULE_REPORTS_DIR
    return job_dir / "rules" / name / PROFILER_OUTPUT_DIR / RULE_REPORTS_DIR if job_dir is not None else None


def _findings(details: str) -> dict[str, str]:
    """``Rule: finding; Rule2: finding2`` (ProfilerReport's StatusDetails) by rule name."""
    text = details.split("resulted in the condition being met:", 1)[-1]
    out = {}
    for part in text.split("; "):
        name, sep, finding = part.strip().partition(": ")
        if sep and name.isidentifier():
            out[name] = finding.strip()
    return out


def _report_words(report: Mapping[str, Any]) -> str:
    return (f"{report.get('Violations', 0)} violations over {report.get('Datapoints', 0)} datapoints"
            if report.get("RuleTriggered") else f"no issue over {report.get('Datapoints', 0)} datapoints")


def _summary(reports_dir: Path) -> dict[str, Any]:
    """ProfilerReport's profiler-rules-summary.json beside ``reports_dir`` (empty when absent or unreadable)."""
    try:
        loaded = json.loads((reports_dir.parent / SUMMARY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    rules = loaded.get("rules") if isinstance(loaded, dict) else None
    return rules if isinstance(rules, dict) else {}


def _sub_verdicts(reports_dir: Path, parent: str, findings: Mapping[str, str]) -> list[ProfilerVerdict]:
    """One verdict per sub-rule report of ProfilerReport: fired (with its finding), quiet, or judged nothing."""
    summary = _summary(reports_dir)
    out = []
    for sub, report in read_reports(reports_dir).items():
        said = summary.get(sub) or {}
        if report["RuleTriggered"]:
            out.append(ProfilerVerdict(sub, "IssuesFound", said.get("finding") or findings.get(sub)
                                       or _report_words(report), report, parent))
        elif said.get("checked_nothing"):
            out.append(ProfilerVerdict(sub, "NoIssuesFound", f"{CHECKED_NOTHING} {said['checked_nothing']}", report,
                                       parent))
        else:
            out.append(ProfilerVerdict(sub, "NoIssuesFound", _report_words(report), report, parent))
    return out


def verdicts(job: Mapping[str, Any] | None, job_dir: Path | None, reports_dir: Path | None) -> list[ProfilerVerdict]:
    """Each profiler rule's verdict (see the module docstring)."""
    out: list[ProfilerVerdict] = []
    if reports_dir is not None:
        return _sub_verdicts(reports_dir, "ProfilerReport", {})
    for status in (job or {}).get("ProfilerRuleEvaluationStatuses") or []:
        name = status.get("RuleConfigurationName", "")
        details = status.get("StatusDetails") or ""
        directory = _report_dir(job, job_dir, name)
        reports = read_reports(directory) if directory is not None else {}
        rule = _rule_to_invoke(job, name)
        out.append(ProfilerVerdict(name, status.get("RuleEvaluationStatus", ""), details, reports.get(rule)))
        if rule == "ProfilerReport" and directory is not None:
            out += _sub_verdicts(directory, name, _findings(details))
    return out


def _rule_to_invoke(job: Mapping[str, Any] | None, name: str) -> str:
    for rule in (job or {}).get("ProfilerRuleConfigurations") or []:
        if rule.get("RuleConfigurationName") == name:
            return str((rule.get("RuleParameters") or {}).get("rule_to_invoke") or name)
    return name


def profile_json(data: ProfileData) -> dict[str, Any]:
    """The summary as JSON (``sdk-ext profile --json``): no chart points."""
    return {
        "path": data.path, "hosts": data.hosts, "start": data.start_s, "end": data.end_s,
        "interval_ms": data.interval_ms, "records": data.records, "usage": data.usage,
        "initialization_seconds": data.initialization_s,
        "steps": [{"node": s.node, "phase": s.phase, "count": s.count, "seconds": dict(s.stats),
                   "outlier_limit_seconds": s.limit, "outliers": list(s.outliers)} for s in data.steps],
        "rules": [{"rule": v.rule, "status": v.status, "details": v.details, "part_of": v.parent}
                  for v in data.verdicts],
    }


__all__ = ["Line", "ProfileData", "ProfilerVerdict", "Steps", "bucket_mean", "collect_profile", "profile_json",
           "read_reports", "verdicts"]
