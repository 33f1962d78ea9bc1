"""A local training job's state, as SageMaker's DescribeTrainingJob shows it.

One :class:`LocalJob` per job. The supervisor (runner.py) moves it through SageMaker's states and
the client (client.py) reads it; every method is thread-safe (``_lock`` guards every field below
it). Each change calls ``on_change`` with the new DescribeTrainingJob view while the lock is held,
so listeners see changes in the order they happened; a listener must only enqueue (events.py).

States (TrainingJobStatus / SecondaryStatus), as on SageMaker::

    InProgress/Starting -> InProgress/Training -> Completed/Completed
                                               -> Failed/Failed          (the entry point failed)
                        -> Stopping/Stopping   -> Stopped/Stopped         (StopTrainingJob)
                                               -> Stopped/MaxRuntimeExceeded
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from sdk_ext.exceptions import SdkExtError

IN_PROGRESS, COMPLETED, FAILED, STOPPING, STOPPED = "InProgress", "Completed", "Failed", "Stopping", "Stopped"
TERMINAL_JOB_STATUSES = frozenset({COMPLETED, FAILED, STOPPED})
TERMINAL_RULE_STATUSES = frozenset({"NoIssuesFound", "IssuesFound", "Error", "Stopped"})
RULE_STATUSES = frozenset({"InProgress", *TERMINAL_RULE_STATUSES, "Stopping"})
MAX_DETAILS = 1024  # SageMaker's StatusDetails and FailureReason limit

# Request keys DescribeTrainingJob echoes back unchanged.
_ECHOED = (
    "HyperParameters", "AlgorithmSpecification", "RoleArn", "InputDataConfig", "OutputDataConfig",
    "ResourceConfig", "VpcConfig", "StoppingCondition", "EnableNetworkIsolation",
    "EnableInterContainerTrafficEncryption", "EnableManagedSpotTraining", "CheckpointConfig",
    "DebugHookConfig", "DebugRuleConfigurations", "TensorBoardOutputConfig", "ProfilerConfig",
    "ProfilerRuleConfigurations", "Environment", "RetryStrategy", "ExperimentConfig",
)  # fmt: skip
_MESSAGES = {
    "Starting": "Preparing the local job directory",
    "Training": "Training in progress.",
    "Completed": "Training job completed",
    "Stopping": "Stopping the training job",
    "Stopped": "Training job stopped",
    "MaxRuntimeExceeded": "Training job stopped: it ran longer than StoppingCondition.MaxRuntimeInSeconds",
    "Failed": "Training job failed",
}


def profiling_status(profiler_config: Mapping[str, Any]) -> str:
    """DescribeTrainingJob's ProfilingStatus for a ProfilerConfig: Enabled unless DisableProfiler."""
    disabled = profiler_config.get("DisableProfiler")
    return "Disabled" if disabled is True or str(disabled).lower() == "true" else "Enabled"


def merge_profiler_config(current: Mapping[str, Any] | None, update: Mapping[str, Any]) -> dict[str, Any]:
    """The ProfilerConfig after UpdateTrainingJob's ``update``: each field given replaces the job's
    (``ProfilingParameters: {}`` turns framework profiling off, ``DisableProfiler`` turns profiling off or on)."""
    merged = copy.deepcopy(dict(current or {}))
    for key, value in update.items():
        merged[key] = copy.deepcopy(value)
    return merged


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def truncate(text: str, limit: int = MAX_DETAILS) -> str:
    """``text`` cut to ``limit`` characters (SageMaker's limit for StatusDetails and FailureReason)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


class JobStateError(SdkExtError, RuntimeError):
    """An operation the job's current state does not allow; ``status`` is that state. (A RuntimeError too,
    as it always was; the local client answers it as SageMaker's ValidationException.)"""

    def __init__(self, message: str, *, status: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class RuleState:
    """One ``DebugRuleEvaluationStatus``, plus the step the rule fired at (from its status.json)."""

    name: str
    job_arn: str
    status: str
    modified: datetime
    details: str | None = None
    step: int | None = None

    def to_describe(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "RuleConfigurationName": self.name,
            "RuleEvaluationJobArn": self.job_arn,
            "RuleEvaluationStatus": self.status,
        }
        if self.details:
            entry["StatusDetails"] = truncate(self.details)
        entry["LastModifiedTime"] = self.modified
        return entry


class LocalJob:
    """DescribeTrainingJob-shaped state of one local job.

    Args:
        request: the CreateTrainingJob request (kept as a deep copy).
        arn: the job's ARN.
        rule_arns: RuleConfigurationName -> RuleEvaluationJobArn, for every DebugRuleConfiguration.
        profiler_rule_arns: the same for the ProfilerRuleConfigurations the job evaluates (InProgress at first).
        profiler_rule_errors: ProfilerRuleConfiguration name -> (ARN, why it is not evaluated locally), reported
            as Error from the start (e.g. DetailedProfilerProcessing, SageMaker's own post-processing).
        now: the clock for every timestamp (timezone-aware UTC).
        on_change: called with each new DescribeTrainingJob view, under the lock; must only enqueue.
    """

    def __init__(
        self,
        request: Mapping[str, Any],
        *,
        arn: str,
        rule_arns: Mapping[str, str],
        profiler_rule_arns: Mapping[str, str] | None = None,
        profiler_rule_errors: Mapping[str, tuple[str, str]] | None = None,
        now: Callable[[], datetime] = utc_now,
        on_change: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.name: str = request["TrainingJobName"]
        self.arn = arn
        self._request = copy.deepcopy(dict(request))
        self._now = now
        self._on_change = on_change
        self._lock = threading.RLock()
        created = now()
        self._status = IN_PROGRESS
        self._secondary = "Starting"
        self._failure: str | None = None
        self._created = self._modified = created
        self._started: datetime | None = None
        self._ended: datetime | None = None
        self._transitions: list[dict[str, Any]] = [
            {"Status": "Starting", "StartTime": created, "StatusMessage": _MESSAGES["Starting"]}
        ]
        self._rules = {n: RuleState(n, a, "InProgress", created) for n, a in rule_arns.items()}
        self._profiler_rules = {n: RuleState(n, a, "InProgress", created)
                                for n, a in (profiler_rule_arns or {}).items()}
        for n, (a, why) in (profiler_rule_errors or {}).items():
            self._profiler_rules[n] = RuleState(n, a, "Error", created, details=f"ClientError: {why}")
        self._stop_requested = False
        self._done = threading.Event()

    # --- reading -------------------------------------------------------------------------------------

    @property
    def status(self) -> str:
        with self._lock:
            return self._status

    @property
    def stop_requested(self) -> bool:
        with self._lock:
            return self._stop_requested

    @property
    def done(self) -> threading.Event:
        """Set once the job and its rule evaluations have all ended."""
        return self._done

    def rules(self) -> dict[str, RuleState]:
        """The DebugRuleConfigurations' evaluations."""
        with self._lock:
            return dict(self._rules)

    def profiler_rules(self) -> dict[str, RuleState]:
        """The ProfilerRuleConfigurations' evaluations."""
        with self._lock:
            return dict(self._profiler_rules)

    def describe(self) -> dict[str, Any]:
        """A DescribeTrainingJob response (a new dict; timestamps are timezone-aware datetimes)."""
        with self._lock:
            return self._describe()

    def _describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"TrainingJobName": self.name, "TrainingJobArn": self.arn}
        d["ModelArtifacts"] = {"S3ModelArtifacts": ""}
        d["TrainingJobStatus"] = self._status
        d["SecondaryStatus"] = self._secondary
        if self._failure is not None:
            d["FailureReason"] = self._failure
        for key in _ECHOED:
            if key in self._request:
                d[key] = copy.deepcopy(self._request[key])
        d["CreationTime"] = self._created
        if self._started is not None:
            d["TrainingStartTime"] = self._started
        if self._ended is not None:
            d["TrainingEndTime"] = self._ended
            d["TrainingTimeInSeconds"] = d["BillableTimeInSeconds"] = max(
                1, round((self._ended - (self._started or self._created)).total_seconds()))
        d["LastModifiedTime"] = self._modified
        d["SecondaryStatusTransitions"] = [dict(t) for t in self._transitions]
        if self._rules:
            d["DebugRuleEvaluationStatuses"] = [r.to_describe() for r in self._rules.values()]
        if self._profiler_rules:
            d["ProfilerRuleEvaluationStatuses"] = [r.to_describe() for r in self._profiler_rules.values()]
        if "ProfilerConfig" in self._request:
            d["ProfilingStatus"] = profiling_status(self._request["ProfilerConfig"])
        return d

    def update_profiler(self, profiler_config: Mapping[str, Any] | None,
                        profiler_rules: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """UpdateTrainingJob's ProfilerConfig (merged into the job's, as SageMaker does) and new
        ProfilerRuleConfigurations (reported as the job's others are). Returns the job's new ProfilerConfig.

        Raises:
            JobStateError: the job is not InProgress.
        """
        with self._lock:
            if self._status != IN_PROGRESS:
                raise JobStateError(
                    f"The request was rejected because the training job is in status {self._status}.",
                    status=self._status)
            merged = merge_profiler_config(self._request.get("ProfilerConfig"), profiler_config or {})
            self._request["ProfilerConfig"] = merged
            for rule in profiler_rules or []:
                self._request.setdefault("ProfilerRuleConfigurations", []).append(copy.deepcopy(rule))
            self._changed()
            return copy.deepcopy(merged)

    # --- changing ------------------------------------------------------------------------------------

    def _changed(self) -> None:
        self._modified = self._now()
        if self._on_change is not None:
            self._on_change(self._describe())

    def _transition(self, secondary: str, message: str | None = None, now: datetime | None = None) -> None:
        now = now or self._now()
        if self._transitions and "EndTime" not in self._transitions[-1]:
            self._transitions[-1]["EndTime"] = now
        self._transitions.append({"Status": secondary, "StartTime": now,
                                  "StatusMessage": message or _MESSAGES.get(secondary, secondary)})
        self._secondary = secondary

    def training_started(self) -> bool:
        """Starting -> Training. False (and no change) if the job was stopped before it started."""
        with self._lock:
            if self._status != IN_PROGRESS:
                return False
            self._started = self._now()
            self._transition("Training")
            self._changed()
            return True

    def request_stop(self, *, secondary: str = STOPPING) -> None:
        """InProgress -> Stopping (``secondary`` may be ``MaxRuntimeExceeded``).

        Raises:
            JobStateError: the job is not InProgress (SageMaker's "The request was rejected because
                the training job is in status Stopped." answer).
        """
        with self._lock:
            if self._status != IN_PROGRESS:
                raise JobStateError(
                    f"The request was rejected because the training job is in status {self._status}.",
                    status=self._status)
            self._stop_requested = True
            self._status = STOPPING
            self._transition(secondary)
            self._changed()

    def training_ended(self, *, failure_reason: str | None = None) -> str:
        """The entry point ended: Completed, Failed (with ``failure_reason``) or, after a stop, Stopped.

        Returns:
            The terminal TrainingJobStatus.
        """
        with self._lock:
            if self._status in TERMINAL_JOB_STATUSES:
                return self._status
            if self._status == STOPPING:
                final = STOPPED
                secondary = "MaxRuntimeExceeded" if self._secondary == "MaxRuntimeExceeded" else STOPPED
                message = None if secondary == STOPPED else _MESSAGES["MaxRuntimeExceeded"]
            elif failure_reason is not None:
                final, secondary = FAILED, FAILED
                self._failure = truncate(failure_reason)
                message = truncate(f"Training job failed. Reason: {failure_reason}", 512)
            else:
                final, secondary, message = COMPLETED, COMPLETED, None
            self._status = final
            self._ended = self._now()
            if self._secondary != secondary:
                self._transition(secondary, message, self._ended)
            self._transitions[-1].setdefault("EndTime", self._ended)
            self._changed()
            return final

    def add_profiler_rule(self, name: str, arn: str) -> None:
        """A ProfilerRuleConfiguration added by UpdateTrainingJob: its evaluation starts (InProgress)."""
        with self._lock:
            if name not in self._profiler_rules:
                self._profiler_rules[name] = RuleState(name, arn, "InProgress", self._now())
                self._changed()

    def update_rule(self, name: str, *, status: str, details: str | None, step: int | None = None,
                    modified: datetime | None = None, profiler: bool = False) -> bool:
        """Set a rule's evaluation status (``profiler``: a ProfilerRuleConfiguration's). Returns False (no
        event) when nothing changed.

        A terminal rule status is final: later updates are ignored (SageMaker shows one outcome).
        """
        with self._lock:
            rules = self._profiler_rules if profiler else self._rules
            old = rules[name]
            if old.status in TERMINAL_RULE_STATUSES:
                return False
            if status not in RULE_STATUSES:
                status, details = "Error", f"InternalError: unknown rule status {status!r}; {details or ''}"
            new = replace(old, status=status, details=details, step=step, modified=modified or self._now())
            if (new.status, new.details, new.step) == (old.status, old.details, old.step):
                return False
            rules[name] = new
            self._changed()
            return True

    def mark_done(self) -> None:
        self._done.set()
