"""ProfilerReport: every profiler rule over the same windows, their reports, and one verdict at the end.

Its parameters are ``scan_interval_us`` and ``<Rule>_<parameter>`` overrides of the sub-rules' parameters
(``CPUBottleneck_threshold="90"``, ``LowGPUUtilization_threshold_p95="50"``: split at the first underscore,
the rule name matched without regard to case), as smdebug-rulesconfig's ``ProfilerReport(**params)`` sends
them; newer rulesconfig versions send them inside ``custom_rule_parameters`` (a JSON object, or the Python
``str()`` of a dict, as the SageMaker SDK writes it) with ``opt_out_telemetry``, which is accepted and
ignored. An unknown rule or parameter is a ConfigError that lists the valid ones.

Each window is read once and handed to every sub-rule; after each window every sub-rule's report is
written to ``<output>/profiler-reports/<Rule>.json``, and ``<output>/profiler-rules-summary.json`` (sdk_ext's
addition, outside ``profiler-reports/`` whose every file the original notebook reads as a rule's report) says
for each sub-rule whether it fired, what it found, and why it judged nothing when its data was missing. ProfilerReport never stops early: once the job's
data has all been seen it raises RuleEvaluationConditionMet (``end_of_rule``) if any sub-rule fired, else
NoMoreProfilerData. A sub-rule that raises is logged and recorded in the report; the others go on.
"""

from __future__ import annotations

import ast
import inspect
import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sdk_ext.exceptions import ConfigError, NoMoreProfilerData, RuleEvaluationConditionMet
from sdk_ext.profiler.analysis.rules.base import (
    DEFAULT_SCAN_INTERVAL_US,
    ProfilerRule,
    write_json,
    write_report,
)
from sdk_ext.profiler.analysis.rules.batch_size import BatchSize
from sdk_ext.profiler.analysis.rules.cpu_bottleneck import CPUBottleneck
from sdk_ext.profiler.analysis.rules.dataloader import Dataloader
from sdk_ext.profiler.analysis.rules.gpu_memory_increase import GPUMemoryIncrease
from sdk_ext.profiler.analysis.rules.io_bottleneck import IOBottleneck
from sdk_ext.profiler.analysis.rules.load_balancing import LoadBalancing
from sdk_ext.profiler.analysis.rules.low_gpu_utilization import LowGPUUtilization
from sdk_ext.profiler.analysis.rules.max_initialization_time import MaxInitializationTime
from sdk_ext.profiler.analysis.rules.overall_framework_metrics import OverallFrameworkMetrics
from sdk_ext.profiler.analysis.rules.overall_system_usage import OverallSystemUsage
from sdk_ext.profiler.analysis.rules.step_outlier import StepOutlier
from sdk_ext.profiler.analysis.rules.windows import FrameworkWindow, SystemWindow
from sdk_ext.rules.time_limit import invocation_limit

logger = logging.getLogger(__name__)

#: The sub-rules, in the order the original ran them.
SUB_RULES: tuple[type[ProfilerRule], ...] = (
    CPUBottleneck, IOBottleneck, LowGPUUtilization, StepOutlier, GPUMemoryIncrease, BatchSize,
    MaxInitializationTime, LoadBalancing, OverallSystemUsage, Dataloader, OverallFrameworkMetrics,
)
IGNORED = ("opt_out_telemetry",)
SUMMARY_FILE = "profiler-rules-summary.json"  # rulesconfig >= 1.0.2 sends it; nothing here reports telemetry


def rule_parameters(cls: type) -> list[str]:
    """The parameters a profiler rule takes (its positional-or-keyword constructor parameters)."""
    return [p.name for p in list(inspect.signature(cls).parameters.values())[1:]
            if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]


def _as_dict(value: object) -> dict[str, Any] | None:
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    if isinstance(value, str) and value.strip():
        for parse in (json.loads, ast.literal_eval):
            try:
                parsed = parse(value)
            except (ValueError, SyntaxError):
                continue
            if isinstance(parsed, Mapping):
                return {str(k): v for k, v in parsed.items()}
    return None


def split_overrides(parameters: Mapping[str, object]) -> dict[str, dict[str, object]]:
    """``<Rule>_<param>`` keys by sub-rule name: ``{"CPUBottleneck": {"threshold": "90"}}``.

    Raises:
        ConfigError: naming each key whose rule or parameter does not exist, with the valid ones.
    """
    flat: dict[str, object] = {}
    problems: list[str] = []
    for key, value in parameters.items():
        if key in IGNORED:
            continue
        if key == "custom_rule_parameters":
            nested = _as_dict(value)
            if nested is None:
                problems.append(f"custom_rule_parameters={value!r}: expected a JSON object of "
                                "<Rule>_<parameter> keys, e.g. '{\"CPUBottleneck_threshold\": 90}'")
            else:
                flat.update(nested)
            continue
        flat[key] = value
    by_name = {cls.__name__.lower(): cls for cls in SUB_RULES}
    overrides: dict[str, dict[str, object]] = {}
    for key, value in flat.items():
        rule, sep, parameter = key.partition("_")
        cls = by_name.get(rule.lower())
        if not sep or cls is None:
            problems.append(f"{key}: expected <Rule>_<parameter> with a rule among "
                            f"{', '.join(c.__name__ for c in SUB_RULES)}")
            continue
        accepted = rule_parameters(cls)
        if parameter.lower() not in accepted:
            problems.append(f"{key}: {cls.__name__} has no parameter {parameter!r}; it takes "
                            f"{', '.join(accepted)}")
            continue
        overrides.setdefault(cls.__name__, {})[parameter.lower()] = value
    if problems:
        raise ConfigError(problems, where="parameters of rule ProfilerReport")
    return overrides


class ProfilerReport(ProfilerRule):
    """See the module docstring.

    Attributes:
        rules: the sub-rules, with their overrides applied.
        on_report: called with the report directory after each window's reports are written (the HTML
            report is drawn there); None for no callback.
    """

    needs = "profiler data"
    uses_framework = True

    def __init__(self, base_trial: Any, scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US, *,
                 action_str: str = "", **rule_parameters: object) -> None:
        super().__init__(base_trial, scan_interval_us=scan_interval_us, action_str=action_str)
        self.params.done()
        overrides = split_overrides(rule_parameters)
        problems: list[str] = []
        self.rules: list[ProfilerRule] = []
        for cls in SUB_RULES:
            make: Any = cls  # each takes its own keyword parameters
            try:
                rule: ProfilerRule = make(base_trial, **overrides.get(cls.__name__, {}))
            except ConfigError as err:
                problems += [f"{cls.__name__}_{p.removeprefix('parameter ')}" for p in err.problems]
                continue
            rule.report_dir = None  # ProfilerReport writes the sub-rules' reports itself
            self.rules.append(rule)
        if problems:
            raise ConfigError(problems, where="parameters of rule ProfilerReport")
        self.overrides = overrides
        self.rule_condition_met = False
        self.on_report: Callable[[Path], None] | None = None
        self.report["RuleParameters"] = "\n".join(
            f"{rule}_{k}:{v}" for rule, params in overrides.items() for k, v in params.items())
        self.report["Details"] = {"rules": {}, "errors": {}}

    def coverage_note(self) -> str | None:
        return None if any(r.found_data for r in self.rules) or self.triggered else \
            "the profiler data holds nothing any profiler rule reads, so no rule had anything to judge"

    def fired_rules(self) -> list[ProfilerRule]:
        return [r for r in self.rules if r.triggered]

    def invoke(self, step: int) -> None:
        """Evaluate the next window with every sub-rule; at the end of the data, the verdict.

        Raises:
            RuleEvaluationConditionMet: (``end_of_rule``) the data has ended and some sub-rule fired.
            NoMoreProfilerData: the data has ended and no sub-rule fired.
        """
        if self.last_timestamp is None:
            self.last_timestamp = int(self.base_trial.first_timestamp)
        start, end = self.last_timestamp, self.last_timestamp + self.scan_interval_us
        try:
            self.base_trial.wait_for_data(end, start)
        except NoMoreProfilerData:
            self.save_report()
            if self.rule_condition_met:
                self.issue = self.finding
                raise RuleEvaluationConditionMet(self.rule_name, step, end_of_rule=True,
                                                 message=self.issue or "") from None
            raise
        with invocation_limit(self.time_limit, rule=self.rule_name, step=step):
            self.rule_condition_met |= self.invoke_for_timerange(start, end)
        self.last_timestamp = end
        self.save_report()

    def evaluate(self, system: SystemWindow, framework: FrameworkWindow, start_us: int, end_us: int) -> bool:
        for rule in self.rules:
            try:
                rule.invoke_for_timerange(start_us, end_us, system, framework)
            except Exception as err:  # noqa: BLE001 - one failing analysis must not cost the others
                logger.exception("ProfilerReport: rule %s failed on [%d, %d)", rule.rule_name, start_us, end_us)
                self.report["Details"]["errors"][rule.rule_name] = f"{type(err).__name__}: {err}"
        fired = self.fired_rules()
        self.report["Details"]["rules"] = {r.rule_name: int(r.report["RuleTriggered"]) for r in self.rules}
        self.report["RuleTriggered"] = len(fired)
        self.report["Violations"] = sum(int(r.report["Violations"]) for r in fired)
        self.report["Datapoints"] = max((int(r.report["Datapoints"]) for r in self.rules), default=0)
        if fired:
            self.finding = "; ".join(f"{r.rule_name}: {r.finding}" if r.finding else r.rule_name for r in fired)
        return bool(fired)

    def summary(self) -> dict[str, Any]:
        """Per sub-rule: RuleTriggered, Violations, its finding, and its note when it judged nothing."""
        return {"rules": {r.rule_name: {"RuleTriggered": int(r.report["RuleTriggered"]),
                                        "Violations": int(r.report["Violations"]), "finding": r.finding,
                                        "checked_nothing": r.coverage_note()} for r in self.rules},
                "errors": dict(self.report["Details"]["errors"])}

    def save_report(self) -> Path | None:
        """Write every sub-rule's report (not ProfilerReport's own: the directory holds the rules' reports)."""
        if self.report_dir is None:
            return None
        for rule in self.rules:
            write_report(self.report_dir, rule.rule_name, rule.report)
        write_json(self.report_dir.parent / SUMMARY_FILE, self.summary())
        if self.on_report is not None:
            try:
                self.on_report(self.report_dir)
            except Exception:  # noqa: BLE001 - a failed drawing must not end the analysis
                logger.exception("ProfilerReport: drawing the HTML report failed")
        return self.report_dir


__all__ = ["IGNORED", "SUB_RULES", "SUMMARY_FILE", "ProfilerReport", "rule_parameters", "split_overrides"]
