"""The auto-stop function trusts SageMaker, not the event, with faults injected.

Real boto3 clients under botocore's Stubber (every call checked against the API model; a call that was
not queued fails), the captured event from tests/fixtures/events, and a property test over random
event/describe pairs with an in-memory SageMaker.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from auto_stop import Action, AutoStopConfig, ConfigError, process_event
from botocore.exceptions import ClientError, EndpointConnectionError
from botocore.stub import Stubber
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.sagemaker_events import JOB, captured_event, describe_response, event_with

TOPIC = "arn:aws:sns:us-east-1:123456789012:debugger-auto-stop"
ARN = f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{JOB}"
TAG = "sdk-ext:auto-stop"


def _client(service: str) -> Any:
    return boto3.client(
        service, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )


@pytest.fixture
def sagemaker() -> Iterator[tuple[Any, Stubber]]:
    client = _client("sagemaker")
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def _describe(stub: Stubber, describe: dict[str, Any]) -> None:
    stub.add_response("describe_training_job", describe, {"TrainingJobName": JOB})


def _run(client: Any, event: dict[str, Any], config: AutoStopConfig | None = None, sns: Any = None) -> dict[str, Any]:
    return process_event(event, sagemaker=client, sns=sns, config=config, sleep=lambda _: None)


# --- 1. DescribeTrainingJob must show the event's rule with IssuesFound ----------------------------


def _without(describe: dict[str, Any], key: str) -> dict[str, Any]:
    describe.pop(key)
    return describe


@pytest.mark.parametrize(
    ("describe", "why"),
    [
        (_without(describe_response(captured_event()), "DebugRuleEvaluationStatuses"), "VanishingGradient (not listed)"),
        (describe_response(event_with(debug={"VanishingGradient": "NoIssuesFound"})), "VanishingGradient (NoIssuesFound)"),
        (describe_response(event_with(debug={"VanishingGradient": "InProgress"})), "VanishingGradient (InProgress)"),
        (describe_response(event_with(debug={"VanishingGradient": "Error"})), "VanishingGradient (Error)"),
    ],
    ids=["no-debugger-rules", "no-issues-found", "still-evaluating", "error"],
)
def test_a_rule_that_describe_does_not_show_with_issues_found_stops_nothing(sagemaker, caplog, describe, why):
    client, stub = sagemaker
    _describe(stub, describe)  # no stop queued: Stubber fails the test if StopTrainingJob is called
    with caplog.at_level(logging.INFO, logger="auto_stop"):
        result = _run(client, captured_event())
    assert result["action"] == Action.UNCONFIRMED.value and result["stopped"] is False
    assert result["reason"] == (f"the event says VanishingGradient reported IssuesFound; DescribeTrainingJob "
                                f"does not confirm IssuesFound: {why}")
    (record,) = [r for r in caplog.records if r.name == "auto_stop"]
    assert record.levelno == logging.WARNING and json.loads(record.getMessage()) == result


def test_issues_found_in_the_other_status_list_does_not_confirm(sagemaker):
    """The event's Debugger rule shows up with IssuesFound only among the profiler rules: not the same rule."""
    client, stub = sagemaker
    describe = describe_response(event_with(debug={"VanishingGradient": "InProgress"}))
    describe["ProfilerRuleEvaluationStatuses"].append(
        {"RuleConfigurationName": "VanishingGradient", "RuleEvaluationStatus": "IssuesFound"})
    _describe(stub, describe)
    assert _run(client, captured_event(), AutoStopConfig(profiler_rules_can_stop=True))["action"] == "unconfirmed"


def test_only_the_confirmed_rules_are_stopped_for_and_reported(sagemaker):
    client, stub = sagemaker
    event = event_with(debug={"LossNotDecreasing": "IssuesFound"})  # two rules fire in the event
    _describe(stub, describe_response(event_with(debug={"LossNotDecreasing": "InProgress"})))
    stub.add_response("stop_training_job", {}, {"TrainingJobName": JOB})
    result = _run(client, event)
    assert result["action"] == "stopped" and result["rules"] == ["VanishingGradient"]
    assert result["reason"] == "stopped: VanishingGradient reported IssuesFound"


def test_the_notification_carries_describes_details_for_the_confirmed_rule_only(sagemaker):
    client, stub = sagemaker
    describe = describe_response(event_with(debug={"LossNotDecreasing": "InProgress"}))
    describe["DebugRuleEvaluationStatuses"][0]["StatusDetails"] = "RuleEvaluationConditionMet: at step 700"
    _describe(stub, describe)
    stub.add_response("stop_training_job", {}, {"TrainingJobName": JOB})

    class Sns:
        messages: list[dict[str, Any]] = []

        def publish(self, *, TopicArn: str, Subject: str, Message: str) -> object:
            self.messages.append(json.loads(Message))
            return {"MessageId": "m"}

    sns = Sns()
    _run(client, event_with(debug={"LossNotDecreasing": "IssuesFound"}), AutoStopConfig(topic_arn=TOPIC), sns=sns)
    (message,) = sns.messages
    assert [(r["name"], r["status"], r["details"]) for r in message["rules"]] == [
        ("VanishingGradient", "IssuesFound", "RuleEvaluationConditionMet: at step 700")]


# --- 2. the opt-in tag -----------------------------------------------------------------------------


def _tags(stub: Stubber, tags: list[dict[str, str]], token: str | None = None, next_token: str | None = None) -> None:
    params = {"ResourceArn": ARN, **({"NextToken": token} if token else {})}
    stub.add_response("list_tags", {"Tags": tags, **({"NextToken": next_token} if next_token else {})}, params)


@pytest.mark.parametrize(
    ("tags", "stops"),
    [
        ([{"Key": TAG, "Value": "true"}], True),
        ([{"Key": "team", "Value": "a"}, {"Key": TAG, "Value": "true"}], True),
        ([], False),
        ([{"Key": TAG, "Value": "false"}], False),
        ([{"Key": TAG, "Value": "True"}], False),  # the IAM condition compares exactly, so does the function
        ([{"Key": TAG.upper(), "Value": "true"}], False),
    ],
)
def test_with_an_opt_in_tag_only_tagged_jobs_are_stopped(sagemaker, tags, stops):
    client, stub = sagemaker
    _describe(stub, describe_response(captured_event()))
    _tags(stub, tags)
    if stops:
        stub.add_response("stop_training_job", {}, {"TrainingJobName": JOB})
    result = _run(client, captured_event(), AutoStopConfig(opt_in_tag=TAG))
    assert result["stopped"] is stops
    if not stops:
        assert result["action"] == "ignored"
        assert result["reason"].endswith(f"the job has not opted in (no tag {TAG}=true)")


def test_the_opt_in_tag_is_found_on_a_later_page(sagemaker):
    client, stub = sagemaker
    _describe(stub, describe_response(captured_event()))
    _tags(stub, [{"Key": "a", "Value": "1"}], next_token="page-2")
    _tags(stub, [{"Key": TAG, "Value": "true"}], token="page-2")
    stub.add_response("stop_training_job", {}, {"TrainingJobName": JOB})
    assert _run(client, captured_event(), AutoStopConfig(opt_in_tag=TAG))["stopped"] is True


def test_tags_are_read_only_after_describe_confirms(sagemaker):
    client, stub = sagemaker
    _describe(stub, describe_response(event_with(debug={"VanishingGradient": "NoIssuesFound"})))  # no list_tags
    assert _run(client, captured_event(), AutoStopConfig(opt_in_tag=TAG))["action"] == "unconfirmed"


def test_list_tags_denied_is_raised_so_lambda_retries(sagemaker):
    client, stub = sagemaker
    _describe(stub, describe_response(captured_event()))
    stub.add_client_error("list_tags", service_error_code="AccessDeniedException", service_message="denied",
                          http_status_code=400)
    with pytest.raises(ClientError, match="AccessDenied"):
        _run(client, captured_event(), AutoStopConfig(opt_in_tag=TAG))


def test_the_environment_names_the_opt_in_tag():
    assert AutoStopConfig.from_env({"AUTO_STOP_OPT_IN_TAG": f" {TAG} "}).opt_in_tag == TAG
    assert AutoStopConfig.from_env({}).opt_in_tag is None
    with pytest.raises(ConfigError, match=r"AUTO_STOP_OPT_IN_TAG='aws:reserved'"):
        AutoStopConfig.from_env({"AUTO_STOP_OPT_IN_TAG": "aws:reserved"})


# --- 3. a failed notification after a successful stop ----------------------------------------------


class _FailingSns:
    def __init__(self, error: Exception) -> None:
        self.error, self.calls = error, 0

    def publish(self, **kwargs: Any) -> object:
        self.calls += 1
        raise self.error


@pytest.mark.parametrize(
    "error",
    [
        EndpointConnectionError(endpoint_url="https://sns.us-east-1.amazonaws.com/"),
        ClientError({"Error": {"Code": "KMSAccessDenied", "Message": "no"}}, "Publish"),
        ClientError({"Error": {"Code": "Throttling", "Message": "slow down"}}, "Publish"),
        RuntimeError("anything else"),
    ],
    ids=["connection", "kms-denied", "throttled-throughout", "unexpected"],
)
def test_a_failed_notification_after_the_stop_is_logged_and_the_invocation_succeeds(sagemaker, caplog, error):
    client, stub = sagemaker
    _describe(stub, describe_response(captured_event()))
    stub.add_response("stop_training_job", {}, {"TrainingJobName": JOB})  # exactly once: never retried
    sns = _FailingSns(error)
    with caplog.at_level(logging.INFO, logger="auto_stop"):
        result = _run(client, captured_event(), AutoStopConfig(topic_arn=TOPIC), sns=sns)
    assert result["action"] == "stopped" and result["stopped"] is True and result["notified"] is False
    assert any(r.levelno == logging.ERROR and "could not notify" in r.getMessage() and JOB in r.getMessage()
               for r in caplog.records)
    assert sns.calls == (5 if "Throttling" in str(error) else 1)


# --- 4. ValidationException means "not running" only with SageMaker's exact messages ---------------


@pytest.mark.parametrize("status", ["Stopping", "Stopped", "Completed", "Failed", "Deleting"])
def test_sagemakers_exact_not_running_message_is_success(sagemaker, status):
    client, stub = sagemaker
    _describe(stub, describe_response(captured_event()))
    stub.add_client_error("stop_training_job", service_error_code="ValidationException",
                          service_message=f"The request was rejected because the training job is in status {status}.",
                          http_status_code=400)
    assert _run(client, captured_event())["action"] == "not_running"


@pytest.mark.parametrize(
    "message",
    [
        "The request was rejected because the training job is in status Stopped. Also: role not found",
        "Training job status: Stopped is not valid for this role",
        "1 validation error detected: Value at 'trainingJobName' failed to satisfy constraint",
        "Requested resource not found in the trust policy of role X",
        "Role arn:aws:iam::123456789012:role/x does not exist",
        "Could not find the KMS key",
        "",
    ],
)
def test_any_other_validation_exception_from_stop_is_raised(sagemaker, caplog, message):
    client, stub = sagemaker
    _describe(stub, describe_response(captured_event()))
    stub.add_client_error("stop_training_job", service_error_code="ValidationException", service_message=message,
                          http_status_code=400)
    with caplog.at_level(logging.INFO, logger="auto_stop"), pytest.raises(ClientError):
        _run(client, captured_event())
    (line,) = [json.loads(r.getMessage()) for r in caplog.records if r.name == "auto_stop"]
    assert line["action"] == "failed" and line["reason"].startswith("StopTrainingJob failed: ValidationException")


@pytest.mark.parametrize(("message", "gone"), [("Requested resource not found.", True),
                                               ("Requested resource not found for role x.", False),
                                               ("Could not find training job 'x'", False)])
def test_describe_treats_only_the_exact_not_found_message_as_gone(sagemaker, message, gone):
    client, stub = sagemaker
    stub.add_client_error("describe_training_job", service_error_code="ValidationException",
                          service_message=message, http_status_code=400)
    if gone:
        assert _run(client, captured_event())["action"] == "not_running"
    else:
        with pytest.raises(ClientError):
            _run(client, captured_event())


# --- 5. the property, over random events and describes ---------------------------------------------

STATUSES = ["InProgress", "NoIssuesFound", "IssuesFound", "Error", "Stopping", "Stopped"]
RULES = ["VanishingGradient", "LossNotDecreasing", "ExplodingTensor"]
rule_statuses = st.dictionaries(st.sampled_from(RULES), st.sampled_from(STATUSES), max_size=3)


class _SageMaker:
    def __init__(self, describe: dict[str, Any]) -> None:
        self.describe, self.stopped = describe, 0

    def describe_training_job(self, *, TrainingJobName: str) -> dict[str, Any]:
        return self.describe

    def stop_training_job(self, *, TrainingJobName: str) -> None:
        self.stopped += 1


def _with_statuses(statuses: dict[str, str], job_status: str) -> dict[str, Any]:
    event = event_with(job_status=job_status, debug={"VanishingGradient": "InProgress"})
    event["detail"]["DebugRuleEvaluationStatuses"] = [
        {"RuleConfigurationName": n, "RuleEvaluationStatus": s} for n, s in statuses.items()]
    return event


@settings(max_examples=300, deadline=None)
@given(event_rules=rule_statuses, described_rules=rule_statuses,
       event_job=st.sampled_from(["InProgress", "Stopping"]), described_job=st.sampled_from(["InProgress", "Stopped"]),
       allowed=st.none() | st.frozensets(st.sampled_from(RULES), min_size=1))
def test_a_job_is_stopped_exactly_when_sagemaker_confirms_an_allowed_rule(event_rules, described_rules, event_job,
                                                                           described_job, allowed):
    sagemaker = _SageMaker(describe_response(_with_statuses(described_rules, "InProgress"), status=described_job))
    process_event(_with_statuses(event_rules, event_job), sagemaker=sagemaker,
                  config=AutoStopConfig(rule_names=allowed), sleep=lambda _: None)
    should = event_job == described_job == "InProgress" and any(
        event_rules.get(r) == described_rules.get(r) == "IssuesFound" for r in RULES if allowed is None or r in allowed)
    assert sagemaker.stopped == int(should)

