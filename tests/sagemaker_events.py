"""Training-job state-change events for the auto-stop tests, all built from the captured one.

The captured event (tests/fixtures/events/sample_event_issues_found.json) has the job InProgress,
VanishingGradient at IssuesFound, LossNotDecreasing and the ProfilerReport profiler rule InProgress.
Every builder returns a fresh deep copy, so a test can change it freely.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from functools import cache
from typing import Any

from tests.conftest import FIXTURES

EVENTS = FIXTURES / "events"
JOB = "mnist-vg-2026-11-20-12-00-00-000"


@cache
def _captured() -> dict[str, Any]:
    path = EVENTS / "sample_event_issues_found.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"captured event not found at {path}; it is part of the repository (tests/fixtures/events)"
        )
    event: dict[str, Any] = json.loads(path.read_text())
    return event


def captured_event() -> dict[str, Any]:
    """The captured event, unchanged: VanishingGradient reports IssuesFound on an InProgress job."""
    return copy.deepcopy(_captured())


def captured_pattern() -> dict[str, Any]:
    """The event pattern the CDK stack's rule uses (tests/fixtures/events/event_pattern.json)."""
    pattern: dict[str, Any] = json.loads((EVENTS / "event_pattern.json").read_text())
    return pattern


def event_with(
    *,
    job_status: str | None = None,
    job_name: str | None = None,
    debug: dict[str, str] | None = None,
    profiler: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The captured event with the job status, job name, and rule statuses changed.

    ``debug``/``profiler`` map rule configuration name -> RuleEvaluationStatus for rules already in the
    captured event; a name not in it is appended as a new rule entry.
    """
    event = captured_event()
    detail = event["detail"]
    if job_name is not None:
        arn = detail["TrainingJobArn"].rsplit("/", 1)[0] + "/" + job_name
        detail["TrainingJobName"], detail["TrainingJobArn"], event["resources"] = job_name, arn, [arn]
    if job_status is not None:
        detail["TrainingJobStatus"] = job_status
        detail["SecondaryStatus"] = {"InProgress": "Training"}.get(job_status, job_status)
    for key, changes in (
        ("DebugRuleEvaluationStatuses", debug),
        ("ProfilerRuleEvaluationStatuses", profiler),
    ):
        for name, status in (changes or {}).items():
            entries = detail[key]
            entry = next((e for e in entries if e["RuleConfigurationName"] == name), None)
            if entry is None:
                entry = {
                    "RuleConfigurationName": name,
                    "RuleEvaluationJobArn": entries[0]["RuleEvaluationJobArn"],
                }
                entries.append(entry)
            entry["RuleEvaluationStatus"] = status
            if status != "IssuesFound":
                entry.pop("StatusDetails", None)
    return event


def no_issues_event() -> dict[str, Any]:
    """Every Debugger rule still evaluating or finished without issues."""
    return event_with(debug={"VanishingGradient": "NoIssuesFound"})


def profiler_only_event() -> dict[str, Any]:
    """Only the profiler rule reports IssuesFound."""
    return event_with(debug={"VanishingGradient": "InProgress"}, profiler={"ProfilerReport": "IssuesFound"})


def describe_response(event: dict[str, Any], *, status: str = "InProgress") -> dict[str, Any]:
    """A DescribeTrainingJob response for the event's job (what SageMaker returns: the event's detail,
    minus event-only fields, timestamps as datetimes) with ``TrainingJobStatus`` = ``status``."""
    detail = copy.deepcopy(event["detail"])
    detail.pop("Tags", None)  # not part of DescribeTrainingJob

    def when(ms: Any) -> dt.datetime:
        return dt.datetime.fromtimestamp(float(ms) / 1000, tz=dt.timezone.utc)

    for key in ("CreationTime", "TrainingStartTime", "TrainingEndTime", "LastModifiedTime"):
        if key in detail:
            detail[key] = when(detail[key])
    for transition in detail.get("SecondaryStatusTransitions", []):
        for key in ("StartTime", "EndTime"):
            if key in transition:
                transition[key] = when(transition[key])
    for key in ("DebugRuleEvaluationStatuses", "ProfilerRuleEvaluationStatuses"):
        for entry in detail.get(key, []):
            if "LastModifiedTime" in entry:
                entry["LastModifiedTime"] = when(entry["LastModifiedTime"])
    detail["ModelArtifacts"] = {"S3ModelArtifacts": ""}
    detail["TrainingJobStatus"] = status
    detail["SecondaryStatus"] = {"InProgress": "Training"}.get(status, status)
    return detail
