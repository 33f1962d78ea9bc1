"""The synthesized AutoStop stacks: pattern, least privilege, retries, dead-letter queue, logs, topic."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match

from tests.infra.conftest import SCOPED, Synthesized
from tests.sagemaker_events import captured_pattern

ALLOWED_ACTIONS = {
    "kms:Decrypt",  # only for a topic under a customer key: see test_topic_under_a_customer_key...
    "kms:GenerateDataKey*",
    "sagemaker:DescribeTrainingJob",
    "sagemaker:StopTrainingJob",
    "logs:CreateLogStream",
    "logs:PutLogEvents",
    "sqs:SendMessage",
    "sns:Publish",
}


def _resources(synthesized: Synthesized, name: str, type_: str) -> dict[str, Any]:
    found: dict[str, Any] = synthesized.templates[name].find_resources(type_)
    return found


def _only(synthesized: Synthesized, name: str, type_: str) -> tuple[str, dict[str, Any]]:
    found = _resources(synthesized, name, type_)
    assert len(found) == 1, f"{name}: expected one {type_}, found {sorted(found)}"
    ((logical_id, resource),) = found.items()
    return logical_id, resource["Properties"]


def _arn_text(value: Any) -> str:
    """An Fn::Join ARN as text, each reference written as <Ref>."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        return "".join(_arn_text(part) for part in value["Fn::Join"][1])
    if "Ref" in value:
        return f"<{value['Ref']}>"
    return str(value)


def _statements(synthesized: Synthesized, name: str) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = []
    for policy in _resources(synthesized, name, "AWS::IAM::Policy").values():
        statements += policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def test_default_pattern_is_exactly_the_documented_one(synthesized):
    _, rule = _only(synthesized, "default", "AWS::Events::Rule")
    assert rule["EventPattern"] == captured_pattern()
    assert synthesized.default.auto_stop.event_pattern == captured_pattern()


def test_scoped_pattern_adds_prefix_rule_names_and_profiler_statuses(synthesized):
    status = {"RuleConfigurationName": list(SCOPED["rule_names"]), "RuleEvaluationStatus": ["IssuesFound"]}
    synthesized.templates["scoped"].has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": ["aws.sagemaker"],
                "detail-type": ["SageMaker Training Job State Change"],
                "detail": {
                    "TrainingJobStatus": ["InProgress"],
                    "TrainingJobName": [{"prefix": "mnist-"}],
                    "$or": [
                        {"DebugRuleEvaluationStatuses": status},
                        {"ProfilerRuleEvaluationStatuses": status},
                    ],
                },
            }
        },
    )


def test_function_runs_the_handler_on_python_3_13_with_json_logs(synthesized):
    synthesized.templates["default"].has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Runtime": "python3.13",
            "Handler": "auto_stop.handler",
            "LoggingConfig": {
                "LogFormat": "JSON",
                "ApplicationLogLevel": "INFO",
                "LogGroup": Match.any_value(),
            },
            "Environment": {
                "Variables": {
                    "AUTO_STOP_RULE_NAMES": "",
                    "AUTO_STOP_JOB_PREFIX": "",
                    "AUTO_STOP_PROFILER_RULES": "false",
                    "AUTO_STOP_DRY_RUN": "false",
                }
            },
        },
    )


def test_context_values_reach_the_function_environment(synthesized):
    _, function = _only(synthesized, "scoped", "AWS::Lambda::Function")
    env = function["Environment"]["Variables"]
    assert env["AUTO_STOP_RULE_NAMES"] == "VanishingGradient,LowGPUUtilization"
    assert env["AUTO_STOP_JOB_PREFIX"] == "mnist-"
    assert (env["AUTO_STOP_PROFILER_RULES"], env["AUTO_STOP_DRY_RUN"]) == ("true", "true")
    topic_id, _ = _only(synthesized, "scoped", "AWS::SNS::Topic")
    assert env["AUTO_STOP_TOPIC_ARN"] == {"Ref": topic_id}


def test_asset_ships_only_the_handler_modules(synthesized):
    _, function = _only(synthesized, "default", "AWS::Lambda::Function")
    asset = synthesized.outdir / ("asset." + function["Code"]["S3Key"].removesuffix(".zip"))
    assert sorted(p.name for p in asset.iterdir()) == ["auto_stop.py", "auto_stop_policy.py"]


@pytest.mark.parametrize(
    ("name", "patterns"),
    [("default", ["*"]), ("scoped", ["mnist-*"]), ("custom", ["Team-A-*", "team-a-*"])],
)
def test_role_may_only_describe_and_stop_training_jobs_under_the_prefix(synthesized, name, patterns):
    (sagemaker,) = [s for s in _statements(synthesized, name) if "sagemaker" in str(s["Action"])]
    assert sorted(sagemaker["Action"]) == ["sagemaker:DescribeTrainingJob", "sagemaker:StopTrainingJob"]
    assert sagemaker["Effect"] == "Allow"
    resources = sagemaker["Resource"] if isinstance(sagemaker["Resource"], list) else [sagemaker["Resource"]]
    arn = "arn:<AWS::Partition>:sagemaker:<AWS::Region>:<AWS::AccountId>:training-job/"
    assert [_arn_text(r) for r in resources] == [arn + p for p in patterns]


@pytest.mark.parametrize("name", ["default", "scoped", "custom"])
def test_role_has_nothing_else_no_wildcards_no_managed_policies(synthesized, name):
    for statement in _statements(synthesized, name):
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert set(actions) <= ALLOWED_ACTIONS, statement
        resources = (
            statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        )
        assert "*" not in resources, statement
    _, role = _only(synthesized, name, "AWS::IAM::Role")
    assert "ManagedPolicyArns" not in role
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}}
    ]


def test_role_writes_only_its_own_log_group_sends_to_its_queue_publishes_to_its_topic(synthesized):
    log_group, _ = _only(synthesized, "scoped", "AWS::Logs::LogGroup")
    queue, _ = _only(synthesized, "scoped", "AWS::SQS::Queue")
    topic, _ = _only(synthesized, "scoped", "AWS::SNS::Topic")
    by_action = {
        action: statement["Resource"]
        for statement in _statements(synthesized, "scoped")
        for action in (
            statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        )
    }
    assert by_action["logs:PutLogEvents"] == {"Fn::GetAtt": [log_group, "Arn"]}
    assert by_action["sqs:SendMessage"] == {"Fn::GetAtt": [queue, "Arn"]}
    assert by_action["sns:Publish"] == {"Ref": topic}


def test_target_has_retry_policy_and_dead_letter_queue(synthesized):
    queue, _ = _only(synthesized, "default", "AWS::SQS::Queue")
    function, _ = _only(synthesized, "default", "AWS::Lambda::Function")
    synthesized.templates["default"].has_resource_properties(
        "AWS::Events::Rule",
        {
            "State": "ENABLED",
            "Targets": [
                {
                    "Arn": {"Fn::GetAtt": [function, "Arn"]},
                    "Id": Match.any_value(),
                    "RetryPolicy": {"MaximumRetryAttempts": 4, "MaximumEventAgeInSeconds": 7200},
                    "DeadLetterConfig": {"Arn": {"Fn::GetAtt": [queue, "Arn"]}},
                }
            ],
        },
    )


def test_failed_invocations_are_retried_then_dead_lettered(synthesized):
    queue, _ = _only(synthesized, "default", "AWS::SQS::Queue")
    template = synthesized.templates["default"]
    template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig", {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 3600}
    )
    template.has_resource_properties(
        "AWS::Lambda::Function", {"DeadLetterConfig": {"TargetArn": {"Fn::GetAtt": [queue, "Arn"]}}}
    )


def test_dead_letter_queue_is_encrypted_keeps_messages_and_requires_tls(synthesized):
    queue, props = _only(synthesized, "default", "AWS::SQS::Queue")
    assert props == {"MessageRetentionPeriod": 14 * 24 * 3600, "SqsManagedSseEnabled": True}
    synthesized.templates["default"].has_resource_properties(
        "AWS::SQS::QueuePolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
                        ),
                        Match.object_like(
                            {"Action": "sqs:SendMessage", "Principal": {"Service": "events.amazonaws.com"}}
                        ),
                    ]
                )
            },
            "Queues": [{"Ref": queue}],
        },
    )


def test_explicit_log_group_with_retention_is_the_functions(synthesized):
    log_group, props = _only(synthesized, "default", "AWS::Logs::LogGroup")
    assert props["RetentionInDays"] == 90
    synthesized.templates["default"].has_resource_properties(
        "AWS::Lambda::Function", {"LoggingConfig": Match.object_like({"LogGroup": {"Ref": log_group}})}
    )


def test_only_events_from_the_rule_may_invoke_the_function(synthesized):
    rule, _ = _only(synthesized, "default", "AWS::Events::Rule")
    _, permission = _only(synthesized, "default", "AWS::Lambda::Permission")
    assert permission["Principal"] == "events.amazonaws.com"
    assert permission["Action"] == "lambda:InvokeFunction"
    assert permission["SourceArn"] == {"Fn::GetAtt": [rule, "Arn"]}


def test_no_topic_unless_asked(synthesized):
    synthesized.templates["default"].resource_count_is("AWS::SNS::Topic", 0)
    assert synthesized.default.auto_stop.topic is None
    assert "TopicArn" not in synthesized.raw["default"]["Outputs"]


def test_topic_is_encrypted_requires_tls_and_mails_the_subscriber(synthesized):
    template = synthesized.templates["scoped"]
    _, topic = _only(synthesized, "scoped", "AWS::SNS::Topic")
    assert _arn_text(topic["KmsMasterKeyId"]).endswith(":alias/aws/sns")
    template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "ml-team@example.com"}
    )
    template.has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
                        )
                    ]
                )
            }
        },
    )


def test_outputs_name_what_was_created(synthesized):
    assert set(synthesized.raw["default"]["Outputs"]) == {
        "FunctionName",
        "RuleName",
        "DeadLetterQueueUrl",
        "LogGroupName",
    }
    assert "TopicArn" in synthesized.raw["scoped"]["Outputs"]


def test_construct_exposes_what_it_creates(synthesized):
    auto_stop = synthesized.scoped.auto_stop
    assert auto_stop.function.runtime.name == "python3.13"
    assert auto_stop.role is not None and auto_stop.log_group is not None and auto_stop.rule is not None
    assert auto_stop.dead_letter_queue is not None and auto_stop.topic is not None


def test_topic_under_a_customer_key_lets_the_function_use_that_key_only(synthesized):
    key, _ = _only(synthesized, "custom", "AWS::KMS::Key")
    _, topic = _only(synthesized, "custom", "AWS::SNS::Topic")
    assert topic["KmsMasterKeyId"] == {"Fn::GetAtt": [key, "Arn"]}
    (kms_statement,) = [s for s in _statements(synthesized, "custom") if "kms:" in str(s["Action"])]
    assert kms_statement["Resource"] == {"Fn::GetAtt": [key, "Arn"]}
    assert sorted(kms_statement["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey*"]
    assert synthesized.custom.topic is not None
