"""What every profiler rule shares: scan windows over the profiler data, parameters, the report dict.

A profiler rule is a :class:`~sdk_ext.rules.Rule` (so ``invoke_rule`` and the rule evaluator run it like a
tensor rule) whose ``step`` is only a counter: each :meth:`ProfilerRule.invoke` looks at the next
``scan_interval_us`` of data, ``[last_timestamp, last_timestamp + scan_interval_us)`` in microseconds
since the epoch, starting at the trial's ``first_timestamp``. It waits until the data source has data
past the window's end (or the job has ended), evaluates the window with :meth:`invoke_for_timerange`,
writes its report to ``<trial output_dir>/profiler-reports/<Rule>.json`` when the trial has an output
directory, and raises :class:`~sdk_ext.exceptions.RuleEvaluationConditionMet` when it fired. Once the
job has ended and the next window starts past the data, the data source raises
:class:`~sdk_ext.exceptions.NoMoreProfilerData`: the normal end.

The data source (``base_trial``) is anything with smdebug's ``ProfilerTrial`` interface
(:class:`ProfilerData`); :class:`~sdk_ext.profiler.analysis.rules.trial.ProfilerTrial` is sdk_ext's.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np

from sdk_ext.exceptions import RuleEvaluationConditionMet
from sdk_ext.format.profiler_records import RuleReport, encode_rule_report
from sdk_ext.profiler.analysis.rules.windows import FrameworkWindow, SystemWindow
from sdk_ext.rules.builtin.base import BuiltinRule
from sdk_ext.rules.time_limit import invocation_limit

_W = TypeVar("_W", SystemWindow, FrameworkWindow)

logger = logging.getLogger(__name__)

DEFAULT_SCAN_INTERVAL_US = 60 * 1000 * 1000
REPORTS_DIR = "profiler-reports"


@runtime_checkable
class ProfilerData(Protocol):
    """What a profiler rule reads (smdebug's ``ProfilerTrial``). Times in microseconds since the epoch.

    ``wait_for_data(end, start)`` returns once data up to ``end`` is there or the job has ended, and raises
    NoMoreProfilerData when the job has ended and ``start`` lies past its data. A source may also offer
    ``system_window(start, end)`` / ``framework_window(start, end)`` returning the columnar windows directly.
    """

    @property
    def first_timestamp(self) -> int: ...

    def wait_for_data(self, end_time: int, start_time: int) -> None: ...

    def get_system_metrics(self, start_time: int, end_time: int) -> Iterable[Any]: ...

    def get_framework_metrics(self, start_time: int, end_time: int) -> Iterable[Any]: ...


def format_parameter(value: object) -> str:
    """A parameter as the report's ``RuleParameters`` shows it (``70``, not ``70.0``)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class ProfilerRule(BuiltinRule):
    """Base of the profiler rules (see the module docstring).

    Subclasses parse their parameters through ``self.params`` (ending with ``self.params.done()``), set
    ``self.report["RuleParameters"]`` with :meth:`set_parameters_text`, and implement :meth:`evaluate`.
    They name the data they need in :attr:`needs` (for the note of a rule that found none of it).

    Attributes:
        last_timestamp: where the next window starts (µs); None until the first invocation.
        found_data: whether any window held the data the rule needs.
        times_itself: tells invoke_rule that the time limit covers the evaluation, not the wait for data.
    """

    selects_tensors = False
    times_itself = True
    #: What the rule reads, as a user would look for it ("GPUUtilization system metrics").
    needs = "profiler data"
    uses_system = True
    uses_framework = False

    def __init__(self, base_trial: Any, *, scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US,
                 action_str: str = "") -> None:
        super().__init__(base_trial, None, action_str)
        self.scan_interval_us = self.params.integer("scan_interval_us", scan_interval_us, gt=0)
        self.last_timestamp: int | None = None
        self.found_data = False
        self.windows = 0
        self.finding: str | None = None  # what the latest violation was, for RuleEvaluationConditionMet
        self.report_dir: Path | None = _reports_dir(base_trial)

    # --- parameters and report -----------------------------------------------------------------------

    def set_parameters_text(self, **values: object) -> None:
        self.report["RuleParameters"] = "\n".join(f"{k}:{format_parameter(v)}" for k, v in values.items())

    def violation(self, message: str) -> None:
        """Count one violation and remember it as the rule's finding."""
        self.report["Violations"] += 1
        self.report["RuleTriggered"] += 1
        self.finding = message

    @property
    def triggered(self) -> bool:
        return int(self.report["RuleTriggered"]) > 0

    def coverage_note(self) -> str | None:
        if self.found_data or self.triggered:
            return None
        return f"the profiler data holds no {self.needs}, so the rule had nothing to judge"

    def save_report(self) -> Path | None:
        """Write ``<report_dir>/<Rule>.json`` (atomically); None when the rule has no report directory."""
        if self.report_dir is None:
            return None
        return write_report(self.report_dir, self.rule_name, self.report)

    # --- evaluation ----------------------------------------------------------------------------------

    def invoke_at_step(self, step: int) -> bool:
        return False  # profiler rules evaluate time windows (invoke), not steps

    def invoke(self, step: int) -> None:
        """Evaluate the next window (``step`` only counts invocations); see the module docstring.

        Raises:
            RuleEvaluationConditionMet: the rule has fired (in this window or before).
            NoMoreProfilerData: the job has ended and the window starts past its data.
        """
        if self.last_timestamp is None:
            self.last_timestamp = int(self.base_trial.first_timestamp)
        start = self.last_timestamp
        end = start + self.scan_interval_us
        self.base_trial.wait_for_data(end, start)
        self.issue = None
        with invocation_limit(self.time_limit, rule=self.rule_name, step=step):
            fired = self.invoke_for_timerange(start, end)
        self.last_timestamp = end
        self.save_report()
        if fired:
            self.issue = self.finding
            condition = RuleEvaluationConditionMet(self.rule_name, step, message=self.issue or "")
            if not self.defer_actions:
                self.run_actions(str(condition))
            raise condition

    def invoke_for_timerange(self, timestamp_start: int, timestamp_end: int, sys_events: Any = None,
                             framework_events: Any = None) -> bool:
        """Evaluate ``[timestamp_start, timestamp_end)`` (µs); True when the rule has fired so far.

        ``sys_events`` / ``framework_events``: the window's data when the caller has it already (a
        :class:`SystemWindow` / :class:`FrameworkWindow`, or smdebug-style event lists); else it is read
        from the trial.
        """
        system, framework = SystemWindow(), FrameworkWindow()
        if self.uses_system:
            system = self.system_window(timestamp_start, timestamp_end, sys_events)
        elif sys_events is None:
            self._drain("system_window", timestamp_start, timestamp_end)
        if self.uses_framework:
            framework = self.framework_window(timestamp_start, timestamp_end, framework_events)
        elif framework_events is None:
            self._drain("framework_window", timestamp_start, timestamp_end)
        self.windows += 1
        return self.evaluate(system, framework, timestamp_start, timestamp_end)

    def evaluate(self, system: SystemWindow, framework: FrameworkWindow, start_us: int, end_us: int) -> bool:
        """Take in one window; True when the rule has fired so far (RuleTriggered > 0)."""
        raise NotImplementedError

    def _drain(self, method: str, start: int, end: int) -> None:
        """Take the window the rule ignores from a source that hands each record out once and then frees it
        (ProfilerTrial), so that its memory stays bounded."""
        reader = getattr(self.base_trial, method, None)
        if callable(reader):
            reader(start, end)

    def system_window(self, start: int, end: int, given: Any = None) -> SystemWindow:
        return self._window(SystemWindow, "system_window", "get_system_metrics", start, end, given)

    def framework_window(self, start: int, end: int, given: Any = None) -> FrameworkWindow:
        return self._window(FrameworkWindow, "framework_window", "get_framework_metrics", start, end, given)

    def _window(self, kind: type[_W], columns: str, events: str, start: int, end: int, given: Any) -> _W:
        """``given`` as a window of ``kind`` (it may already be one, or events); else the trial's window of
        ``[start, end]``, as columns where it reads them (``columns``), else built from its ``events`` call."""
        if isinstance(given, kind):
            return given
        if given is not None:
            return kind.from_events(given)
        reader = getattr(self.base_trial, columns, None)
        if callable(reader):
            window: _W = reader(start, end)
            return window
        return kind.from_events(getattr(self.base_trial, events)(start, end))


def _reports_dir(trial: Any) -> Path | None:
    output = getattr(trial, "output_dir", None)
    return Path(output) / REPORTS_DIR if output else None


def json_ready(value: Any) -> Any:
    """A copy of ``value`` that ``json.dumps`` writes as strict JSON: numpy numbers as Python numbers,
    NaN and infinities as null, keys as strings, tuples and arrays as lists."""
    if isinstance(value, Mapping):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, np.ndarray):
        return [json_ready(v) for v in value.tolist()]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        return number if math.isfinite(number) else None
    return value


def write_json(path: Path, value: Any) -> Path:
    """Atomically replace ``path`` with ``value`` as strict JSON (see :func:`json_ready`)."""
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(json.dumps(json_ready(value), allow_nan=False, indent=1).encode("utf-8"))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def write_report(directory: Path, rule_name: str, report: Mapping[str, Any]) -> Path:
    """Atomically replace ``<directory>/<rule_name>.json`` with ``report`` (a reader never sees half of it).

    ``report`` has the keys of smdebug's report dict (RuleTriggered, Violations, Details, Datapoints,
    RuleParameters); numpy numbers become JSON numbers and NaN becomes null.
    """
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{rule_name}.json"
    ready = json_ready(report)
    data = encode_rule_report(RuleReport(ready["RuleTriggered"], ready["Violations"], ready["Details"],
                                         ready["Datapoints"], ready["RuleParameters"]))
    fd, tmp = tempfile.mkstemp(prefix=f".{rule_name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return target


__all__ = ["DEFAULT_SCAN_INTERVAL_US", "REPORTS_DIR", "ProfilerData", "ProfilerRule", "format_parameter",
           "json_ready", "write_json", "write_report"]
