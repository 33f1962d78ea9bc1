"""lambda/auto_stop.py against botocore's Stubber: real boto3 clients, no network.

Stubber checks every call's parameters against the SageMaker/SNS API model and fails on any call that
was not queued, so "nothing is called" is asserted by queueing nothing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import auto_stop
import boto3
import pytest
from auto_stop import Action, AutoStopConfig, BadEventError, ConfigError, process_event
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from tests.sagemaker_events import (
    JOB,
    captured_event,
    describe_response,
    event_with,
    no_issues_event,
    profiler_only_event,
)

TOPIC = "arn:aws:sns:us-east-1:123456789012:debugger-auto-stop"
JOB_PARAMS = {"TrainingJobName": JOB}
STOPPED_MESSAGE = "The request was rejected because the training job is in status {}."


def _client(service: str) -> Any:
    return boto3.client(
        service, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )


@dataclass
class Aws:
    """Stubbed SageMaker and SNS clients and a recording sleep."""

    sagemaker: Any
    sns: Any
    sm: Stubber
    sn: Stubber
    sleeps: list[float] = field(default_factory=list)

    def run(self, event: Any, config: AutoStopConfig | None = None) -> dict[str, Any]:
        return process_event(
            event, sagemaker=self.sagemaker, sns=self.sns, config=config, sleep=self.sleeps.append
        )

    def describe(self, status: str = "InProgress", event: dict[str, Any] | None = None) -> None:
        response = describe_response(event or captured_event(), status=status)
        self.sm.add_response("describe_training_job", response, JOB_PARAMS)

    def stop(self) -> None:
        self.sm.add_response("stop_training_job", {}, JOB_PARAMS)

    def error(self, operation: str, code: str, message: str = "", stubber: Stubber | None = None) -> None:
        params = JOB_PARAMS if stubber is None else None
        (stubber or self.sm).add_client_error(
            operation,
            service_error_code=code,
            service_message=message,
            http_status_code=400,
            expected_params=params,
        )


@pytest.fixture
def aws() -> Iterator[Aws]:
    sagemaker, sns = _client("sagemaker"), _client("sns")
    with Stubber(sagemaker) as sm, Stubber(sns) as sn:
        yield Aws(sagemaker, sns, sm, sn)
        sm.assert_no_pending_responses()
        sn.assert_no_pending_responses()


def _decision_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [
        json.loads(r.getMessage())
        for r in caplog.records
        if r.name == "auto_stop" and r.getMessage().startswith("{")
    ]


def test_stops_job_when_debugger_rule_reports_issues_and_job_still_in_progress(aws, caplog):
    aws.describe("InProgress")
    aws.stop()
    with caplog.at_level(logging.INFO, logger="auto_stop"):
        result = aws.run(captured_event())
    assert result["action"] == Action.STOPPED.value and result["stopped"] is True
    assert result["job"] == JOB and result["rules"] == ["VanishingGradient"]
    assert "VanishingGradient reported IssuesFound" in result["reason"]
    assert _decision_lines(caplog) == [result]  # exactly one JSON line, the same as the result


def test_log_line_is_single_line_json_with_job_rules_action_reason(aws, caplog):
    aws.describe()
    aws.stop()
    with caplog.at_level(logging.INFO, logger="auto_stop"):
        aws.run(captured_event())
    (record,) = [r for r in caplog.records if r.name == "auto_stop"]
    assert "\n" not in record.getMessage()
    line = json.loads(record.getMessage())
    assert {"job", "rules", "action", "reason"} <= line.keys()
    assert record.auto_stop == line  # the same fields as a structured attribute for Lambda's JSON logs


@pytest.mark.parametrize("status", ["Stopping", "Stopped", "Completed", "Failed"])
def test_does_not_stop_when_describe_says_job_no_longer_in_progress(aws, status):
    aws.describe(status)  # no stop queued: calling StopTrainingJob would fail the test
    result = aws.run(captured_event())
    assert result["action"] == Action.NOT_RUNNING.value and result["stopped"] is False
    assert f"DescribeTrainingJob says the job is {status}" in result["reason"]


@pytest.mark.parametrize("status", ["Stopping", "Stopped", "Completed"])
def test_stopping_a_job_that_is_already_stopping_is_success(aws, status):
    aws.describe("InProgress")  # the job ended between describe and stop
    aws.error("stop_training_job", "ValidationException", STOPPED_MESSAGE.format(status))
    result = aws.run(captured_event())
    assert result["action"] == Action.NOT_RUNNING.value and result["stopped"] is False
    assert f"in status {status}" in result["reason"]


def test_duplicate_event_stops_once_then_is_a_no_op(aws):
    aws.describe("InProgress")
    aws.stop()
    aws.describe("Stopping")
    first, second = aws.run(captured_event()), aws.run(captured_event())
    assert (first["action"], second["action"]) == ("stopped", "not_running")


def test_job_not_found_is_a_no_op(aws):
    aws.error("describe_training_job", "ValidationException", "Requested resource not found.")
    assert aws.run(captured_event())["action"] == Action.NOT_RUNNING.value


def test_other_validation_error_from_stop_is_raised(aws, caplog):
    aws.describe("InProgress")
    aws.error("stop_training_job", "ValidationException", "1 validation error detected")
    with (
        caplog.at_level(logging.INFO, logger="auto_stop"),
        pytest.raises(ClientError, match="validation error"),
    ):
        aws.run(captured_event())
    (line,) = _decision_lines(caplog)
    assert (
        line["action"] == Action.FAILED.value
        and "StopTrainingJob failed: ValidationException" in line["reason"]
    )


@pytest.mark.parametrize("operation", ["describe_training_job", "stop_training_job"])
def test_access_denied_is_raised_so_lambda_retries(aws, operation):
    if operation == "stop_training_job":
        aws.describe("InProgress")
    aws.error(operation, "AccessDeniedException", "not authorized to perform: sagemaker:StopTrainingJob")
    with pytest.raises(ClientError, match="AccessDenied"):
        aws.run(captured_event())


def test_throttling_is_retried_with_growing_backoff_then_succeeds(aws):
    config = AutoStopConfig(max_attempts=5, base_delay=1.0, max_delay=3.0)
    for _ in range(3):
        aws.error("describe_training_job", "ThrottlingException", "Rate exceeded")
    aws.describe("InProgress")
    aws.error("stop_training_job", "ThrottlingException", "Rate exceeded")
    aws.stop()
    result = aws.run(captured_event(), config)
    assert result["action"] == Action.STOPPED.value
    assert len(aws.sleeps) == 4
    # full delays 1, 2, 3 (capped) for describe and 1 for stop, each jittered to [50 %, 100 %]
    for slept, full in zip(aws.sleeps, [1.0, 2.0, 3.0, 1.0]):
        assert full / 2 <= slept <= full


def test_persistent_throttling_is_raised_after_max_attempts(aws, caplog):
    config = AutoStopConfig(max_attempts=3)
    for _ in range(3):
        aws.error("describe_training_job", "ThrottlingException", "Rate exceeded")
    with caplog.at_level(logging.INFO, logger="auto_stop"), pytest.raises(ClientError, match="Throttling"):
        aws.run(captured_event(), config)
    assert len(aws.sleeps) == 2
    assert _decision_lines(caplog)[-1]["action"] == Action.FAILED.value


def _drop(path: str) -> dict[str, Any]:
    event = captured_event()
    *parents, last = path.split(".")
    target: Any = event
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    del target[int(last) if last.isdigit() else last]
    return event


@pytest.mark.parametrize(
    ("event", "field"),
    [
        (_drop("source"), "source"),
        (_drop("detail-type"), "detail-type"),
        (_drop("detail"), "detail"),
        (_drop("detail.TrainingJobName"), "detail.TrainingJobName"),
        (_drop("detail.TrainingJobStatus"), "detail.TrainingJobStatus"),
        (
            _drop("detail.DebugRuleEvaluationStatuses.0.RuleEvaluationStatus"),
            "detail.DebugRuleEvaluationStatuses[0].RuleEvaluationStatus",
        ),
        (
            _drop("detail.DebugRuleEvaluationStatuses.0.RuleConfigurationName"),
            "detail.DebugRuleEvaluationStatuses[0].RuleConfigurationName",
        ),
        (
            _drop("detail.ProfilerRuleEvaluationStatuses.0.RuleEvaluationStatus"),
            "detail.ProfilerRuleEvaluationStatuses[0].RuleEvaluationStatus",
        ),
        ({**captured_event(), "detail-type": "EC2 Instance State-change Notification"}, "detail-type"),
        ({**captured_event(), "detail": "not an object"}, "detail"),
        (event_with(job_name="bad_name!"), "detail.TrainingJobName"),
        ([captured_event()], "event"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_malformed_event_is_rejected_naming_the_field_and_nothing_is_called(aws, caplog, event, field):
    with caplog.at_level(logging.INFO, logger="auto_stop"), pytest.raises(BadEventError) as info:
        aws.run(event)  # nothing queued on the stubbers: any AWS call would fail differently
    assert info.value.field == field
    assert field in str(info.value)
    (line,) = _decision_lines(caplog)
    assert line["action"] == Action.REJECTED.value and line["stopped"] is False


def test_statuses_that_are_not_a_list_are_rejected(aws):
    event = captured_event()
    event["detail"]["DebugRuleEvaluationStatuses"] = {"RuleEvaluationStatus": "IssuesFound"}
    with pytest.raises(BadEventError, match=r"detail\.DebugRuleEvaluationStatuses: expected a list"):
        aws.run(event)


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        (no_issues_event(), "no rule reports IssuesFound"),
        (event_with(job_status="Stopping"), "the event says the job is Stopping"),
        (profiler_only_event(), "profiler rules may not stop jobs"),
        (
            {k: v for k, v in captured_event().items() if k != "detail"}
            | {"detail": {"TrainingJobName": JOB, "TrainingJobStatus": "InProgress"}},
            "no rule reports IssuesFound",
        ),
    ],
    ids=["no-issues", "job-stopping", "profiler-only", "no-debugger"],
)
def test_events_that_do_not_call_for_a_stop_make_no_aws_call(aws, event, reason):
    result = aws.run(event)
    assert result["action"] == Action.IGNORED.value and result["stopped"] is False
    assert reason in result["reason"]


def test_profiler_rule_stops_the_job_when_allowed(aws):
    aws.describe(event=profiler_only_event())
    aws.stop()
    result = aws.run(profiler_only_event(), AutoStopConfig(profiler_rules_can_stop=True))
    assert result["action"] == Action.STOPPED.value and result["rules"] == ["ProfilerReport"]


@pytest.mark.parametrize(("prefix", "stops"), [("mnist-", True), ("resnet-", False), ("", True)])
def test_job_name_prefix_filter(aws, prefix, stops):
    if stops:
        aws.describe()
        aws.stop()
    result = aws.run(captured_event(), AutoStopConfig(job_name_prefix=prefix))
    assert result["stopped"] is stops
    if not stops:
        assert result["reason"] == "job name does not start with prefix 'resnet-'"


@pytest.mark.parametrize(
    ("names", "stops"),
    [({"VanishingGradient"}, True), ({"LossNotDecreasing", "ExplodingTensor"}, False), (None, True)],
)
def test_rule_name_allow_list(aws, names, stops):
    if stops:
        aws.describe()
        aws.stop()
    result = aws.run(captured_event(), AutoStopConfig(rule_names=frozenset(names) if names else None))
    assert result["stopped"] is stops
    if not stops:
        assert "VanishingGradient (not in the allowed rule names)" in result["reason"]


def test_only_allowed_rules_are_reported_when_several_fire(aws):
    event = event_with(debug={"LossNotDecreasing": "IssuesFound"})
    aws.describe(event=event)
    aws.stop()
    result = aws.run(event, AutoStopConfig(rule_names=frozenset({"LossNotDecreasing"})))
    assert result["rules"] == ["LossNotDecreasing"]


def test_dry_run_describes_and_notifies_but_never_stops(aws):
    aws.describe("InProgress")  # no stop queued
    aws.sn.add_response("publish", {"MessageId": "m-1"})
    result = aws.run(captured_event(), AutoStopConfig(dry_run=True, topic_arn=TOPIC))
    assert result["action"] == Action.DRY_RUN.value and result["stopped"] is False
    assert result["dry_run"] is True and result["notified"] is True


def test_stop_is_published_to_the_topic(aws):
    aws.describe()
    aws.stop()
    expected = {
        "TopicArn": TOPIC,
        "Subject": f"Debugger auto-stop stopped {JOB}",
        "Message": _AnyJsonFor(JOB),
    }
    aws.sn.add_response("publish", {"MessageId": "m-1"}, expected)
    result = aws.run(captured_event(), AutoStopConfig(topic_arn=TOPIC))
    assert result["notified"] is True


def test_failed_notification_does_not_undo_or_fail_the_stop(aws, caplog):
    aws.describe()
    aws.stop()
    aws.error("publish", "AuthorizationError", "not allowed to publish", stubber=aws.sn)
    with caplog.at_level(logging.INFO, logger="auto_stop"):
        result = aws.run(captured_event(), AutoStopConfig(topic_arn=TOPIC))
    assert result["stopped"] is True and result["notified"] is False
    assert any("could not notify" in r.getMessage() for r in caplog.records)


def test_no_notification_when_nothing_was_stopped(aws):
    aws.describe("Stopped")  # no publish queued
    assert aws.run(captured_event(), AutoStopConfig(topic_arn=TOPIC))["notified"] is False


class _AnyJsonFor:
    """Matches a JSON message about ``job`` with its firing rule's status details (for expected_params)."""

    def __init__(self, job: str) -> None:
        self.job = job

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, str):
            return False
        message = json.loads(other)
        rule = message["rules"][0]
        return (
            message["job"] == self.job
            and message["action"] == "stopped"
            and rule["name"] == "VanishingGradient"
            and rule["details"].startswith("RuleEvaluationConditionMet")
        )

    __hash__ = None  # type: ignore[assignment]


# --- handler(event, context): configuration from the environment, cached clients ------------------


@pytest.fixture
def handler_env(monkeypatch, aws):
    for name in (
        "AUTO_STOP_RULE_NAMES",
        "AUTO_STOP_JOB_PREFIX",
        "AUTO_STOP_PROFILER_RULES",
        "AUTO_STOP_DRY_RUN",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AUTO_STOP_TOPIC_ARN", raising=False)
    monkeypatch.setattr(auto_stop, "_client", {"sagemaker": aws.sagemaker, "sns": aws.sns}.__getitem__)
    return monkeypatch


def test_handler_reads_configuration_from_environment(aws, handler_env):
    handler_env.setenv("AUTO_STOP_DRY_RUN", "true")
    handler_env.setenv("AUTO_STOP_TOPIC_ARN", TOPIC)
    aws.describe()
    aws.sn.add_response("publish", {"MessageId": "m-1"})
    result = auto_stop.handler(captured_event(), object())
    assert result["action"] == Action.DRY_RUN.value and result["notified"] is True


def test_handler_stops_with_default_configuration(aws, handler_env):
    aws.describe()
    aws.stop()
    assert auto_stop.handler(captured_event(), None)["stopped"] is True


def test_handler_applies_prefix_and_rule_names_from_environment(aws, handler_env):
    handler_env.setenv("AUTO_STOP_JOB_PREFIX", "mnist-")
    handler_env.setenv("AUTO_STOP_RULE_NAMES", " LossNotDecreasing , ExplodingTensor ")
    result = auto_stop.handler(captured_event(), None)
    assert result["action"] == Action.IGNORED.value


def test_handler_rejects_invalid_environment_listing_every_problem(aws, handler_env):
    handler_env.setenv("AUTO_STOP_DRY_RUN", "maybe")
    handler_env.setenv("AUTO_STOP_JOB_PREFIX", "prod_*")
    with pytest.raises(ConfigError) as info:
        auto_stop.handler(captured_event(), None)
    assert "AUTO_STOP_DRY_RUN='maybe'" in str(info.value) and "AUTO_STOP_JOB_PREFIX='prod_*'" in str(
        info.value
    )


def test_boto3_clients_are_created_once_per_service():
    auto_stop._client.cache_clear()
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
            assert auto_stop._client("sagemaker") is auto_stop._client("sagemaker")
            assert auto_stop._client("sagemaker").meta.service_model.service_name == "sagemaker"
    finally:
        auto_stop._client.cache_clear()
