"""Where a job's Debugger data is, and how its rules are doing, from DescribeTrainingJob.

Every function takes ``job``: a DescribeTrainingJob response, or a job name plus a SageMaker
``client`` to describe it with. They work for any job, including ones created through
:func:`~sdk_ext.debugger.attach` or by another tool. A path is None when the job has no such
output (unlike the SDK, which raised AttributeError for a disabled hook or a missing TensorBoard
configuration).

Paths: ``<S3OutputPath>/<job name>/debug-output`` (tensors), ``.../tensorboard-output`` and
``.../profiler-output``, joined like ``os.path.join`` (no doubled slash after a trailing one).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from sdk_ext.exceptions import SdkExtError

Job = Mapping[str, Any] | str

TERMINAL_RULE_STATUSES = frozenset({"NoIssuesFound", "IssuesFound", "Error", "Stopped"})
_STATUS_KEYS = ("DebugRuleEvaluationStatuses", "ProfilerRuleEvaluationStatuses")
_CONFIG_KEYS = ("DebugRuleConfigurations", "ProfilerRuleConfigurations")


class RuleWaitTimeout(SdkExtError, TimeoutError):
    """Rules were still running when wait_for_rules' timeout ran out."""


class _Writer(Protocol):
    def write(self, text: str, /) -> Any: ...


def describe(job: Job, client: Any = None) -> Mapping[str, Any]:
    """The DescribeTrainingJob response for ``job`` (returned as is if it already is one).

    Raises:
        TypeError: a job name was given without a client, or ``job`` is neither.
    """
    if isinstance(job, Mapping):
        return job
    if isinstance(job, str):
        if client is None:
            raise TypeError(f"job {job!r} is a name: pass a SageMaker client too, e.g. boto3.client('sagemaker')")
        response: Mapping[str, Any] = client.describe_training_job(TrainingJobName=job)
        return response
    raise TypeError(f"job must be a DescribeTrainingJob response or a job name, got {type(job).__name__}")


def _join(base: str, job_name: str, leaf: str) -> str:
    return f"{base}{'' if base.endswith('/') else '/'}{job_name}/{leaf}"


def _path(desc: Mapping[str, Any], key: str, leaf: str) -> str | None:
    config = desc.get(key) or {}
    base = config.get("S3OutputPath")
    if not base:
        return None
    return _join(base, desc["TrainingJobName"], leaf)


def debugger_artifacts_path(job: Job, client: Any = None) -> str | None:
    """S3 URI of the tensors the hook saved, or None if the job has no Debugger hook."""
    return _path(describe(job, client), "DebugHookConfig", "debug-output")


def tensorboard_artifacts_path(job: Job, client: Any = None) -> str | None:
    """S3 URI of the TensorBoard output, or None if the job has no TensorBoardOutputConfig."""
    return _path(describe(job, client), "TensorBoardOutputConfig", "tensorboard-output")


def profiler_artifacts_path(job: Job, client: Any = None) -> str | None:
    """S3 URI of the profiler output, or None if profiling is off for the job."""
    desc = describe(job, client)
    config = desc.get("ProfilerConfig") or {}
    if config.get("DisableProfiler") or desc.get("ProfilingStatus") == "Disabled":
        return None
    return _path(desc, "ProfilerConfig", "profiler-output")


def rule_statuses(job: Job, client: Any = None) -> list[dict[str, Any]]:
    """Debugger rule statuses, then profiler rule statuses (new dicts; the response is not changed).

    Each is ``{"RuleConfigurationName", "RuleEvaluationJobArn", "RuleEvaluationStatus",
    "StatusDetails"?, "LastModifiedTime"?}``.
    """
    desc = describe(job, client)
    return [dict(status) for key in _STATUS_KEYS for status in desc.get(key) or []]


def wait_for_rules(job: Job, client: Any, poll: float = 10.0, *, timeout: float | None = None,
                   writer: _Writer | None = None, clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], Any] = time.sleep) -> list[dict[str, Any]]:
    """Poll the job until every rule has finished, printing statuses as they change.

    Like the SDK's ``fit(logs="Rules")``: whenever a debugger (or profiler) rule's status changes,
    writes one ``"<RuleConfigurationName>: <RuleEvaluationStatus>"`` line per rule of that kind.

    Args:
        job: A job name or a DescribeTrainingJob response (its ``TrainingJobName`` is polled).
        client: A SageMaker client.
        poll: Seconds between DescribeTrainingJob calls.
        timeout: Give up after this many seconds.
        writer: Where the lines go; ``sys.stdout`` by default.
        clock: Monotonic seconds (injectable for tests).
        sleep: Sleeps between polls (injectable for tests).

    Returns:
        The final statuses, as :func:`rule_statuses` gives them ([] for a job without rules).

    Raises:
        RuleWaitTimeout: ``timeout`` ran out first; the message lists the rules still running.
    """
    name = job if isinstance(job, str) else describe(job)["TrainingJobName"]
    out = writer if writer is not None else sys.stdout
    deadline = None if timeout is None else clock() + timeout
    printed: dict[str, list[tuple[str, str]]] = {}
    while True:
        desc = client.describe_training_job(TrainingJobName=name)
        for key in _STATUS_KEYS:
            snapshot = [(s["RuleConfigurationName"], s["RuleEvaluationStatus"]) for s in desc.get(key) or []]
            if snapshot and snapshot != printed.get(key):
                for rule, status in snapshot:
                    out.write(f"{rule}: {status}\n")
                printed[key] = snapshot
        statuses = rule_statuses(desc)
        configured = sum(len(desc.get(key) or []) for key in _CONFIG_KEYS)
        running = [s["RuleConfigurationName"] for s in statuses
                   if s["RuleEvaluationStatus"] not in TERMINAL_RULE_STATUSES]
        if not running and len(statuses) >= configured:
            return statuses
        if deadline is not None and clock() >= deadline:
            raise RuleWaitTimeout(f"job {name!r}: rules {running or 'not yet listed'} still running after "
                                  f"{timeout} s; call wait_for_rules again to keep waiting")
        sleep(poll)
