"""action_json parsing and the StopTraining / SNS actions (botocore Stubber, no network)."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from sdk_ext.exceptions import ConfigError
from sdk_ext.rules.actions import Actions, Notify, StopTraining, parse_actions


def test_parses_the_sdk_escaped_list():
    escaped = ('[{\\"name\\": \\"StopTraining\\", \\"training_job_prefix\\": \\"My-Job\\"}, '
               '{\\"name\\": \\"Email\\", \\"endpoint\\": \\"Me@Example.com\\"}, {\\"name\\": \\"SMS\\", '
               '\\"endpoint\\": \\"+15555550100\\"}]')
    assert parse_actions(escaped) == [StopTraining("My-Job"), Notify("email", "Me@Example.com"),
                                      Notify("sms", "+15555550100")]


def test_single_object_empty_and_unknown_actions():
    assert parse_actions('{"name": "stoptraining", "training_job_prefix": "j"}') == [StopTraining("j")]
    assert parse_actions("") == [] and parse_actions(None) == []
    assert parse_actions('[{"name": "dance"}, {"name": "sms"}, 3]') == []  # skipped, logged


def test_invalid_json_names_the_value():
    with pytest.raises(ConfigError, match="action_json='not json'"):
        parse_actions("not json")


def _sagemaker_stub(job_names):
    client = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)
    stub.add_response(
        "list_training_jobs",
        {"TrainingJobSummaries": [
            {"TrainingJobName": n, "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:1:training-job/{n}",
             "CreationTime": "2024-01-01T00:00:00Z", "TrainingJobStatus": "InProgress"} for n in job_names]},
        {"NameContains": "job-a", "StatusEquals": "InProgress", "SortBy": "CreationTime", "SortOrder": "Descending"},
    )
    return client, stub


def test_stop_training_stops_the_one_matching_job():
    client, stub = _sagemaker_stub(["job-a-1"])
    stub.add_response("stop_training_job", {}, {"TrainingJobName": "job-a-1"})
    with stub:
        Actions('{"name": "StopTraining", "training_job_prefix": "job-a"}', "R",
                client_factory=lambda service: client).invoke("fired")
    stub.assert_no_pending_responses()


def test_stop_training_does_nothing_when_two_jobs_match():
    client, stub = _sagemaker_stub(["job-a-1", "job-a-2"])
    with stub:  # a stop_training_job call would fail: none is stubbed
        Actions('{"name": "StopTraining", "training_job_prefix": "job-a"}', "R",
                client_factory=lambda service: client).invoke("fired")
    stub.assert_no_pending_responses()


def test_a_failing_action_is_logged_not_raised(caplog):
    client, stub = _sagemaker_stub(["job-a-1"])
    stub.add_client_error("stop_training_job", "ValidationException", "not in progress")
    with stub:
        Actions('{"name": "StopTraining", "training_job_prefix": "job-a"}', "R",
                client_factory=lambda service: client).invoke("fired")
    assert "action" in caplog.text and "failed" in caplog.text


def test_email_subscribes_once_and_publishes():
    client = boto3.client("sns", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    topic = "arn:aws:sns:us-east-1:1:SMDebugRules"
    stub = Stubber(client)
    stub.add_response("create_topic", {"TopicArn": topic}, {"Name": "SMDebugRules"})
    stub.add_response("list_subscriptions_by_topic", {"Subscriptions": []}, {"TopicArn": topic})
    stub.add_response("subscribe", {"SubscriptionArn": topic + ":1"}, {
        "TopicArn": topic, "Protocol": "email", "Endpoint": "me@example.com",
        "Attributes": {"FilterPolicy": '{"email": ["me@example.com"]}'}})
    stub.add_response("publish", {"MessageId": "m"}, {
        "TopicArn": topic, "Subject": "SMDebugRule:VanishingGradient fired",
        "Message": "SMDebugRule:VanishingGradient fired. at step 5",
        "MessageAttributes": {"email": {"DataType": "String", "StringValue": "me@example.com"}}})
    with stub:
        Actions('{"name": "email", "endpoint": "me@example.com"}', "VanishingGradient",
                client_factory=lambda service: client).invoke("at step 5")
    stub.assert_no_pending_responses()
