"""Artifact paths, rule statuses and wait_for_rules, from DescribeTrainingJob (botocore Stubber)."""

from __future__ import annotations

import io
from datetime import datetime, timezone
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from sdk_ext.debugger import (
    RuleWaitTimeout,
    debugger_artifacts_path,
    profiler_artifacts_path,
    rule_statuses,
    tensorboard_artifacts_path,
    wait_for_rules,
)
from tests.unit.debugger.botocapture import describe_response

JOB = "debug-job"
ARN = "arn:aws:sagemaker:us-west-2:123456789012:processing-job/"


def _status(name: str, status: str) -> dict[str, Any]:
    return {"RuleConfigurationName": name, "RuleEvaluationJobArn": ARN + name.lower(),
            "RuleEvaluationStatus": status,
            "LastModifiedTime": datetime(2024, 1, 1, tzinfo=timezone.utc)}


def _describe(debug: list[tuple[str, str]] = (), profiler: list[tuple[str, str]] = (), **extra: Any) -> dict[str, Any]:
    response = describe_response(JOB, **extra)
    if debug:
        response["DebugRuleConfigurations"] = [{"RuleConfigurationName": n, "RuleEvaluatorImage": "img"}
                                               for n, _ in debug]
        response["DebugRuleEvaluationStatuses"] = [_status(n, s) for n, s in debug]
    if profiler:
        response["ProfilerRuleConfigurations"] = [{"RuleConfigurationName": n, "RuleEvaluatorImage": "img"}
                                                  for n, _ in profiler]
        response["ProfilerRuleEvaluationStatuses"] = [_status(n, s) for n, s in profiler]
    return response


@pytest.fixture
def sagemaker() -> Any:
    return boto3.client("sagemaker", region_name="us-west-2", aws_access_key_id="testing",
                        aws_secret_access_key="testing")


class FakeClock:
    """Time advances only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_paths_from_a_describe_response() -> None:
    desc = _describe(DebugHookConfig={"S3OutputPath": "s3://b/dbg/"},
                     TensorBoardOutputConfig={"S3OutputPath": "s3://b/tb"},
                     ProfilerConfig={"S3OutputPath": "s3://b/prof", "DisableProfiler": False})
    assert debugger_artifacts_path(desc) == f"s3://b/dbg/{JOB}/debug-output"
    assert tensorboard_artifacts_path(desc) == f"s3://b/tb/{JOB}/tensorboard-output"
    assert profiler_artifacts_path(desc) == f"s3://b/prof/{JOB}/profiler-output"


def test_missing_outputs_are_none() -> None:
    desc = _describe(ProfilerConfig={"S3OutputPath": "s3://b/prof", "DisableProfiler": True})
    assert debugger_artifacts_path(desc) is None
    assert tensorboard_artifacts_path(desc) is None
    assert profiler_artifacts_path(desc) is None


def test_paths_and_statuses_from_a_job_name_and_client(sagemaker: Any) -> None:
    desc = _describe(debug=[("LossNotDecreasing", "IssuesFound")], profiler=[("ProfilerReport", "InProgress")],
                     DebugHookConfig={"S3OutputPath": "s3://b/dbg"})
    with Stubber(sagemaker) as stub:
        for _ in range(2):
            stub.add_response("describe_training_job", desc, {"TrainingJobName": JOB})
        assert debugger_artifacts_path(JOB, sagemaker) == f"s3://b/dbg/{JOB}/debug-output"
        statuses = rule_statuses(JOB, sagemaker)
    assert [(s["RuleConfigurationName"], s["RuleEvaluationStatus"]) for s in statuses] == [
        ("LossNotDecreasing", "IssuesFound"), ("ProfilerReport", "InProgress")]


def test_rule_statuses_does_not_change_the_response() -> None:
    desc = _describe(debug=[("Overfit", "InProgress")], profiler=[("ProfilerReport", "InProgress")])
    statuses = rule_statuses(desc)
    statuses[0]["RuleEvaluationStatus"] = "changed"
    assert len(desc["DebugRuleEvaluationStatuses"]) == 1
    assert desc["DebugRuleEvaluationStatuses"][0]["RuleEvaluationStatus"] == "InProgress"


def test_a_job_name_without_a_client_is_an_error() -> None:
    with pytest.raises(TypeError, match="pass a SageMaker client"):
        debugger_artifacts_path(JOB)


def test_wait_for_rules_prints_each_change_like_fit_logs_rules(sagemaker: Any) -> None:
    sequence = [
        _describe(debug=[("VanishingGradient", "InProgress"), ("Overfit", "InProgress")]),
        _describe(debug=[("VanishingGradient", "InProgress"), ("Overfit", "InProgress")]),
        _describe(debug=[("VanishingGradient", "IssuesFound"), ("Overfit", "InProgress")],
                  profiler=[("ProfilerReport", "InProgress")]),
        _describe(debug=[("VanishingGradient", "IssuesFound"), ("Overfit", "NoIssuesFound")],
                  profiler=[("ProfilerReport", "NoIssuesFound")]),
    ]
    out, clock = io.StringIO(), FakeClock()
    with Stubber(sagemaker) as stub:
        for response in sequence:
            stub.add_response("describe_training_job", response, {"TrainingJobName": JOB})
        final = wait_for_rules(JOB, sagemaker, poll=30, writer=out, clock=clock, sleep=clock.sleep)
        stub.assert_no_pending_responses()
    assert out.getvalue().splitlines() == [
        "VanishingGradient: InProgress", "Overfit: InProgress",
        "VanishingGradient: IssuesFound", "Overfit: InProgress",
        "ProfilerReport: InProgress",
        "VanishingGradient: IssuesFound", "Overfit: NoIssuesFound",
        "ProfilerReport: NoIssuesFound",
    ]
    assert clock.sleeps == [30, 30, 30]
    assert [s["RuleEvaluationStatus"] for s in final] == ["IssuesFound", "NoIssuesFound", "NoIssuesFound"]


def test_wait_for_rules_waits_until_configured_rules_are_listed(sagemaker: Any) -> None:
    listed_late = _describe(debug=[("Overfit", "NoIssuesFound")])
    not_yet = dict(listed_late)
    del not_yet["DebugRuleEvaluationStatuses"]
    out, clock = io.StringIO(), FakeClock()
    with Stubber(sagemaker) as stub:
        stub.add_response("describe_training_job", not_yet, {"TrainingJobName": JOB})
        stub.add_response("describe_training_job", listed_late, {"TrainingJobName": JOB})
        final = wait_for_rules(_describe(), sagemaker, poll=5, writer=out, clock=clock, sleep=clock.sleep)
    assert out.getvalue() == "Overfit: NoIssuesFound\n"
    assert [s["RuleConfigurationName"] for s in final] == ["Overfit"]


def test_wait_for_rules_returns_at_once_for_a_job_without_rules(sagemaker: Any) -> None:
    out = io.StringIO()
    with Stubber(sagemaker) as stub:
        stub.add_response("describe_training_job", _describe(), {"TrainingJobName": JOB})
        assert wait_for_rules(JOB, sagemaker, writer=out, sleep=pytest.fail) == []
    assert out.getvalue() == ""


def test_wait_for_rules_times_out_naming_the_running_rules(sagemaker: Any) -> None:
    running = _describe(debug=[("Overfit", "InProgress"), ("AllZero", "NoIssuesFound")])
    clock = FakeClock()
    with Stubber(sagemaker) as stub:
        for _ in range(4):
            stub.add_response("describe_training_job", running, {"TrainingJobName": JOB})
        with pytest.raises(RuleWaitTimeout, match=r"rules \['Overfit'\] still running after 25 s"):
            wait_for_rules(JOB, sagemaker, poll=10, timeout=25, writer=io.StringIO(), clock=clock,
                           sleep=clock.sleep)
    assert clock.sleeps == [10, 10, 10]


def test_wait_for_rules_writes_to_stdout_by_default(sagemaker: Any, capsys: pytest.CaptureFixture[str]) -> None:
    with Stubber(sagemaker) as stub:
        stub.add_response("describe_training_job", _describe(debug=[("Overfit", "Error")]), {"TrainingJobName": JOB})
        wait_for_rules(JOB, sagemaker)
    assert capsys.readouterr().out == "Overfit: Error\n"
