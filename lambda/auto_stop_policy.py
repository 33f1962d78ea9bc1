"""The pure half of the auto-stop function: configuration, event parsing and the stop decision.

No AWS calls here (see auto_stop.py for those). Shipped next to auto_stop.py in the Lambda asset.

Environment read by ``AutoStopConfig.from_env`` (all optional):
    AUTO_STOP_RULE_NAMES      comma-separated rule configuration names that may stop a job (default: any)
    AUTO_STOP_JOB_PREFIX      only jobs whose name starts with this (default: every job)
    AUTO_STOP_OPT_IN_TAG      only jobs tagged with this key and the value "true" (default: no tag needed)
    AUTO_STOP_PROFILER_RULES  "true" lets profiler rules stop jobs too (default: false)
    AUTO_STOP_DRY_RUN         "true": decide, log and notify, but never call StopTrainingJob (default: false)
    AUTO_STOP_TOPIC_ARN       SNS topic told about every stop (or would-be stop in a dry run)
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DETAIL_TYPE = "SageMaker Training Job State Change"
SOURCE = "aws.sagemaker"
ISSUES_FOUND = "IssuesFound"
IN_PROGRESS = "InProgress"
JOB_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")  # SageMaker's TrainingJobName pattern
JOB_NAME_PREFIX = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9-]{0,62}")
# SageMaker's tag key pattern (letters, digits, spaces and _.:/=+-@; 1-128), without the reserved aws: prefix
TAG_KEY = re.compile(r"(?!aws:)[\w .:/=+\-@]{1,128}")
OPT_IN_VALUE = "true"  # the value of the opt-in tag that lets the function stop a job
_TRUE, _FALSE = frozenset({"1", "true", "yes", "on"}), frozenset({"", "0", "false", "no", "off"})


class BadEventError(ValueError):
    """The event is not a well-formed training-job state change; ``field`` names where."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(
            f"bad event: {field}: {problem}; expected an EventBridge '{DETAIL_TYPE}' event from '{SOURCE}'"
        )
        self.field = field


class ConfigError(ValueError):
    """The function's environment is invalid; the message lists every problem."""


class RuleKind(str, enum.Enum):
    """Which status list of the event a rule comes from."""

    DEBUGGER = "DebugRuleEvaluationStatuses"
    PROFILER = "ProfilerRuleEvaluationStatuses"


@dataclass(frozen=True, slots=True, kw_only=True)
class AutoStopConfig:
    """What may stop a job. Defaults: any Debugger rule, any job, no profiler rules, no dry run.

    The deployment (infra/) always sets a job name prefix or an opt-in tag; the defaults suit
    sdk_ext.local, whose jobs are all the user's own.
    """

    rule_names: frozenset[str] | None = None  # None: every rule name
    job_name_prefix: str = ""
    opt_in_tag: str | None = None  # a job must carry this tag with the value "true" (checked with ListTags)
    profiler_rules_can_stop: bool = False
    dry_run: bool = False
    topic_arn: str | None = None
    max_attempts: int = 5  # per AWS call while throttled, then raise
    base_delay: float = 0.5  # seconds before the 2nd attempt; doubles each time, jittered
    max_delay: float = 8.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> AutoStopConfig:
        """Read the AUTO_STOP_* variables (see the module docstring); ``environ`` defaults to os.environ.

        Raises:
            ConfigError: listing every invalid variable.
        """
        env = os.environ if environ is None else environ
        problems: list[str] = []

        def flag(name: str) -> bool:
            value = env.get(name, "").strip().lower()
            if value not in _TRUE | _FALSE:
                problems.append(f"{name}={env[name]!r}: expected true or false")
            return value in _TRUE

        names = frozenset(n.strip() for n in env.get("AUTO_STOP_RULE_NAMES", "").split(",") if n.strip())
        prefix = env.get("AUTO_STOP_JOB_PREFIX", "").strip()
        if prefix and not JOB_NAME_PREFIX.fullmatch(prefix):
            problems.append(
                f"AUTO_STOP_JOB_PREFIX={prefix!r}: a job name prefix is 1-63 of [a-zA-Z0-9-], starting alphanumeric"
            )
        opt_in = env.get("AUTO_STOP_OPT_IN_TAG", "").strip() or None
        if opt_in is not None and not TAG_KEY.fullmatch(opt_in):
            problems.append(
                f"AUTO_STOP_OPT_IN_TAG={opt_in!r}: a tag key is 1-128 letters, digits, spaces or _.:/=+-@, "
                "not starting with aws:"
            )
        topic = env.get("AUTO_STOP_TOPIC_ARN", "").strip() or None
        if topic is not None and not topic.startswith("arn:"):
            problems.append(f"AUTO_STOP_TOPIC_ARN={topic!r}: expected an SNS topic ARN (arn:aws:sns:...)")
        profiler, dry_run = flag("AUTO_STOP_PROFILER_RULES"), flag("AUTO_STOP_DRY_RUN")
        if problems:
            raise ConfigError("invalid auto-stop configuration: " + "; ".join(problems))
        return cls(
            rule_names=names or None,
            job_name_prefix=prefix,
            opt_in_tag=opt_in,
            profiler_rules_can_stop=profiler,
            dry_run=dry_run,
            topic_arn=topic,
        )


@dataclass(frozen=True, slots=True)
class RuleStatus:
    """One entry of DebugRuleEvaluationStatuses or ProfilerRuleEvaluationStatuses."""

    name: str
    status: str
    kind: RuleKind
    details: str = ""  # StatusDetails, e.g. "RuleEvaluationConditionMet: ... at step 500 ..."


@dataclass(frozen=True, slots=True)
class TrainingJobChange:
    """The parts of a training-job state-change event the decision needs."""

    job_name: str
    job_status: str
    rules: tuple[RuleStatus, ...]
    event_id: str | None = None

    @classmethod
    def from_event(cls, event: object) -> TrainingJobChange:
        """Validate and extract.

        Raises:
            BadEventError: naming the first missing or ill-typed field, e.g. ``detail.TrainingJobName``.
        """
        if not isinstance(event, Mapping):
            raise BadEventError("event", f"expected a JSON object, got {type(event).__name__}")
        for name, expected in (("source", SOURCE), ("detail-type", DETAIL_TYPE)):
            if name not in event:
                raise BadEventError(name, "missing")
            if event[name] != expected:
                raise BadEventError(name, f"expected {expected!r}, got {event[name]!r}")
        detail = event.get("detail")
        if not isinstance(detail, Mapping):
            raise BadEventError("detail", "missing" if detail is None else "expected an object")
        job_name = _string(detail, "TrainingJobName", "detail")
        if not JOB_NAME.fullmatch(job_name):
            raise BadEventError("detail.TrainingJobName", f"{job_name!r} is not a training job name")
        job_status = _string(detail, "TrainingJobStatus", "detail")
        rules: list[RuleStatus] = []
        for kind in RuleKind:
            entries = detail.get(kind.value)
            if entries is None:  # a job without rules of this kind
                continue
            if not isinstance(entries, list):
                raise BadEventError(f"detail.{kind.value}", "expected a list")
            for i, entry in enumerate(entries):
                where = f"detail.{kind.value}[{i}]"
                if not isinstance(entry, Mapping):
                    raise BadEventError(where, "expected an object")
                details = entry.get("StatusDetails")
                name = _string(entry, "RuleConfigurationName", where)
                status = _string(entry, "RuleEvaluationStatus", where)
                rules.append(
                    RuleStatus(name, status, kind, details.strip() if isinstance(details, str) else "")
                )
        event_id = event.get("id")
        return cls(job_name, job_status, tuple(rules), event_id if isinstance(event_id, str) else None)


def _string(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if value is None:
        raise BadEventError(f"{where}.{key}", "missing")
    if not isinstance(value, str) or not value:
        raise BadEventError(f"{where}.{key}", f"expected a non-empty string, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether the event calls for a stop (DescribeTrainingJob is asked afterwards), the rules, and why."""

    stop: bool
    rules: tuple[RuleStatus, ...]
    reason: str


def decide(change: TrainingJobChange, config: AutoStopConfig) -> Decision:
    """Does this event call for stopping its job? Pure.

    A rule whose evaluation found issues has ended, so its IssuesFound in an event stays true; what goes
    stale is the job status, which the caller re-reads with DescribeTrainingJob before stopping.
    """
    if not change.job_name.startswith(config.job_name_prefix):
        return Decision(False, (), f"job name does not start with prefix {config.job_name_prefix!r}")
    firing = tuple(r for r in change.rules if r.status == ISSUES_FOUND)
    if not firing:
        return Decision(False, (), "no rule reports IssuesFound")
    allowed = tuple(r for r in firing if _may_stop(r, config))
    if not allowed:
        why = ", ".join(
            f"{r.name} (profiler rules may not stop jobs)"
            if r.kind is RuleKind.PROFILER and not config.profiler_rules_can_stop
            else f"{r.name} (not in the allowed rule names)"
            for r in firing
        )
        return Decision(False, firing, f"IssuesFound only from rules that may not stop jobs: {why}")
    names = ", ".join(r.name for r in allowed)
    if change.job_status != IN_PROGRESS:
        return Decision(
            False, allowed, f"{names} reported IssuesFound; the event says the job is {change.job_status}"
        )
    return Decision(True, allowed, f"{names} reported IssuesFound")


def confirm(decision: Decision, job: Mapping[str, Any]) -> tuple[tuple[RuleStatus, ...], str]:
    """Which of the decision's rules ``DescribeTrainingJob`` (``job``) also shows with IssuesFound. Pure.

    The event only says what was true when it was sent, and anyone allowed to invoke the function can
    send one: a job is stopped only for a rule that SageMaker itself reports, now, as IssuesFound in the
    same status list (Debugger or profiler). Returns the confirmed rules (their describe entries) and, when
    none is confirmed, why not.
    """
    described = {(r.kind, r.name): r for r in rules_of(job)}
    confirmed, missing = [], []
    for rule in decision.rules:
        now = described.get((rule.kind, rule.name))
        if now is not None and now.status == ISSUES_FOUND:
            confirmed.append(now)
        else:
            missing.append(f"{rule.name} ({'not listed' if now is None else now.status})")
    if confirmed:
        return tuple(confirmed), ""
    return (), f"DescribeTrainingJob does not confirm IssuesFound: {', '.join(missing)}"


def rules_of(job: Mapping[str, Any]) -> tuple[RuleStatus, ...]:
    """The rule statuses of a DescribeTrainingJob response; entries without a name or status are skipped."""
    rules = []
    for kind in RuleKind:
        entries = job.get(kind.value)
        if not isinstance(entries, list):
            continue
        for entry in entries:
            if not isinstance(entry, Mapping):
                continue
            name, status = entry.get("RuleConfigurationName"), entry.get("RuleEvaluationStatus")
            if isinstance(name, str) and isinstance(status, str):
                details = entry.get("StatusDetails")
                rules.append(RuleStatus(name, status, kind, details.strip() if isinstance(details, str) else ""))
    return tuple(rules)


def opted_in(tags: object, key: str) -> bool:
    """Whether a ListTags ``Tags`` list holds ``key`` with the value "true" (exactly, as the IAM condition)."""
    return isinstance(tags, list) and any(
        isinstance(t, Mapping) and t.get("Key") == key and t.get("Value") == OPT_IN_VALUE for t in tags
    )


def _may_stop(rule: RuleStatus, config: AutoStopConfig) -> bool:
    if rule.kind is RuleKind.PROFILER and not config.profiler_rules_can_stop:
        return False
    return config.rule_names is None or rule.name in config.rule_names
