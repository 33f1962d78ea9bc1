"""LocalJob's state machine and the state-change events it produces (checked against the captured event)."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from sdk_ext.local.jobs.events import state_change_event
from sdk_ext.local.jobs.state import JobStateError, LocalJob
from tests.infra.eventpattern import matches
from tests.sagemaker_events import captured_event, captured_pattern

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=timezone.utc)


def _clock() -> Any:
    ticks = itertools.count()
    return lambda: T0 + timedelta(seconds=next(ticks))


def _job(seen: list[dict[str, Any]] | None = None) -> LocalJob:
    request = {"TrainingJobName": "mnist-1", "HyperParameters": {"lr": "0.1"},
               "DebugRuleConfigurations": [{"RuleConfigurationName": "VanishingGradient"}],
               "ProfilerRuleConfigurations": [{"RuleConfigurationName": "ProfilerReport"}],
               "ProfilerConfig": {"S3OutputPath": "s3://b/p"}, "Tags": [{"Key": "k", "Value": "v"}]}
    return LocalJob(request, arn="arn:aws:sagemaker:local:000000000000:training-job/mnist-1",
                    rule_arns={"VanishingGradient": "arn:...:processing-job/vg"},
                    profiler_rule_errors={"ProfilerReport": ("arn:...:processing-job/pr", "not run")}, now=_clock(),
                    on_change=None if seen is None else seen.append)


def test_stopped_job_goes_through_sagemakers_states_and_reports_each_change() -> None:
    seen: list[dict[str, Any]] = []
    job = _job(seen)
    assert job.describe()["TrainingJobStatus"] == "InProgress"
    assert job.describe()["SecondaryStatus"] == "Starting"
    assert job.training_started()
    job.update_rule("VanishingGradient", status="IssuesFound", details="... at step 5 ...", step=5)
    job.request_stop()
    assert job.training_ended() == "Stopped"
    assert [(d["TrainingJobStatus"], d["SecondaryStatus"]) for d in seen] == [
        ("InProgress", "Training"), ("InProgress", "Training"), ("Stopping", "Stopping"), ("Stopped", "Stopped")]
    assert [d["DebugRuleEvaluationStatuses"][0]["RuleEvaluationStatus"] for d in seen] == \
        ["InProgress", "IssuesFound", "IssuesFound", "IssuesFound"]
    final = job.describe()
    transitions = final["SecondaryStatusTransitions"]
    assert [t["Status"] for t in transitions] == ["Starting", "Training", "Stopping", "Stopped"]
    assert all(t["StartTime"] <= t["EndTime"] for t in transitions)
    assert final["TrainingEndTime"] > final["TrainingStartTime"] > final["CreationTime"]
    assert "Tags" not in final  # not part of DescribeTrainingJob
    assert final["ProfilerRuleEvaluationStatuses"][0]["RuleEvaluationStatus"] == "Error"
    assert final["ProfilingStatus"] == "Enabled"  # the request enables it (no DisableProfiler)


def test_stop_of_a_job_that_is_not_running_is_rejected_like_sagemaker() -> None:
    job = _job()
    job.training_started()
    assert job.training_ended(failure_reason="AlgorithmError: boom") == "Failed"
    with pytest.raises(JobStateError, match=r"^The request was rejected because the training job is in status "
                       r"Failed\.$"):
        job.request_stop()
    assert job.describe()["FailureReason"] == "AlgorithmError: boom"
    assert job.training_ended() == "Failed"  # idempotent


def test_a_final_rule_status_never_changes() -> None:
    job = _job()
    assert job.update_rule("VanishingGradient", status="NoIssuesFound", details="done")
    assert not job.update_rule("VanishingGradient", status="IssuesFound", details="late", step=9)
    assert job.rules()["VanishingGradient"].status == "NoIssuesFound"
    assert not job.update_rule("VanishingGradient", status="NoIssuesFound", details="done")


def test_long_failure_reason_and_details_are_cut_to_sagemakers_limit() -> None:
    job = _job()
    job.update_rule("VanishingGradient", status="Error", details="x" * 5000)
    assert len(job.describe()["DebugRuleEvaluationStatuses"][0]["StatusDetails"]) == 1024
    job.training_ended(failure_reason="y" * 5000)
    assert len(job.describe()["FailureReason"]) == 1024


def test_event_has_the_captured_events_shape_and_matches_the_deployed_pattern() -> None:
    seen: list[dict[str, Any]] = []
    job = _job(seen)
    job.training_started()
    job.update_rule("VanishingGradient", status="IssuesFound",
                    details="RuleEvaluationConditionMet: Evaluation of the rule VanishingGradient at step 5 ...")
    event = state_change_event(seen[-1], region="local", account="000000000000")
    captured = captured_event()
    assert set(event) == set(captured)
    assert event["detail-type"] == captured["detail-type"] and event["source"] == captured["source"]
    assert event["resources"] == [job.arn]
    assert set(event["detail"]) <= set(captured["detail"]) | {"TrainingTimeInSeconds", "BillableTimeInSeconds"}
    for key in ("TrainingJobName", "TrainingJobStatus", "SecondaryStatus", "DebugRuleEvaluationStatuses",
                "CreationTime", "LastModifiedTime", "SecondaryStatusTransitions"):
        assert key in event["detail"]
    assert event["detail"]["CreationTime"] == int(T0.timestamp() * 1000)  # epoch milliseconds, as EventBridge
    assert isinstance(event["detail"]["DebugRuleEvaluationStatuses"][0]["LastModifiedTime"], int)
    assert matches(captured_pattern(), event)
    # the same job once stopping no longer matches: our own stop does not trigger another
    job.request_stop()
    assert not matches(captured_pattern(), state_change_event(seen[-1], region="local", account="0"))


def test_auto_stop_handler_accepts_the_local_event() -> None:
    import auto_stop

    seen: list[dict[str, Any]] = []
    job = _job(seen)
    job.training_started()
    job.update_rule("VanishingGradient", status="IssuesFound", details="at step 5")

    class Client:
        def __init__(self) -> None:
            self.stopped: list[str] = []

        def describe_training_job(self, *, TrainingJobName: str) -> dict[str, Any]:
            return job.describe()

        def stop_training_job(self, *, TrainingJobName: str) -> None:
            self.stopped.append(TrainingJobName)

    client = Client()
    result = auto_stop.process_event(state_change_event(seen[-1], region="local", account="0"), sagemaker=client)
    assert result["action"] == "stopped" and client.stopped == ["mnist-1"]
