"""The synthesized AutoStop stacks: pattern, least privilege, retries, dead-letter queue, logs, topic."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match

from tests.infra.conftest import OPT_IN_TAG, SCOPED, Synthesized
from tests.sagemaker_events import captured_pattern

ALLOWED_ACTIONS = {
    "kms:Decrypt",  # the topic's customer-managed key only: see test_topic_under_a_customer_key...
    "kms:GenerateDataKey*",
    "sagemaker:DescribeTrainingJob",
    "sagemaker:ListTags",  # with an opt-in tag only
    "sagemaker:StopTrainingJob",
    "logs:CreateLogStream",
    "logs:PutLogEvents",
    "sqs:SendMessage",
    "sqs:GetQueueAttributes",  # with SendMessage, on the dead-letter queue only (the on-failure destination)
    "sqs:GetQueueUrl",
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
                    "AUTO_STOP_OPT_IN_TAG": "sdk-ext:auto-stop",
                    "AUTO_STOP_PROFILER_RULES": "false",
                    "AUTO_STOP_TOPIC_ARN": Match.any_value(),
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
    ("name", "patterns", "tag"),
    [("default", ["*"], OPT_IN_TAG), ("scoped", ["mnist-*"], None), ("custom", ["Team-A-*", "team-a-*"], None)],
)
def test_role_may_only_describe_and_stop_training_jobs_in_scope(synthesized, name, patterns, tag):
    sagemaker = {s["Sid"]: s for s in _statements(synthesized, name) if "sagemaker" in str(s["Action"])}
    assert set(sagemaker) == {"DescribeTrainingJobs", "StopTrainingJobs"}
    describe, stop = sagemaker["DescribeTrainingJobs"], sagemaker["StopTrainingJobs"]
    reads = ["sagemaker:DescribeTrainingJob", "sagemaker:ListTags"] if tag else "sagemaker:DescribeTrainingJob"
    assert describe["Action"] == reads and "Condition" not in describe
    assert stop["Action"] == "sagemaker:StopTrainingJob"
    # the opt-in tag: StopTrainingJob only on jobs tagged <tag>=true (aws:ResourceTag, supported by the
    # training-job resource type of StopTrainingJob)
    assert stop.get("Condition") == ({"StringEquals": {f"aws:ResourceTag/{tag}": "true"}} if tag else None)
    arn = "arn:<AWS::Partition>:sagemaker:<AWS::Region>:<AWS::AccountId>:training-job/"
    for statement in (describe, stop):
        assert statement["Effect"] == "Allow"
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        assert [_arn_text(r) for r in resources] == [arn + p for p in patterns]


def test_the_function_learns_its_scope_from_its_environment(synthesized):
    for name, prefix, tag in (("default", "", OPT_IN_TAG), ("scoped", "mnist-", ""), ("custom", "Team-A-", "")):
        _, function = _only(synthesized, name, "AWS::Lambda::Function")
        variables = function["Environment"]["Variables"]
        assert (variables["AUTO_STOP_JOB_PREFIX"], variables["AUTO_STOP_OPT_IN_TAG"]) == (prefix, tag)


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
    # an on-failure destination (its record holds the error with the event), not a function DLQ
    template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig",
        {"DestinationConfig": {"OnFailure": {"Destination": {"Fn::GetAtt": [queue, "Arn"]}}}},
    )
    _, function = _only(synthesized, "default", "AWS::Lambda::Function")
    assert "DeadLetterConfig" not in function


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


def test_every_stack_has_a_topic_under_a_customer_managed_key_that_cloudwatch_may_use(synthesized):
    """Alarms cannot publish to a topic under the AWS-managed alias/aws/sns key (its policy cannot be changed)."""
    for name in ("default", "scoped", "custom"):
        key, key_props = _only(synthesized, name, "AWS::KMS::Key")
        _, topic = _only(synthesized, name, "AWS::SNS::Topic")
        assert topic["KmsMasterKeyId"] == {"Fn::GetAtt": [key, "Arn"]}
        assert key_props["EnableKeyRotation"] is True
        (cloudwatch,) = [s for s in key_props["KeyPolicy"]["Statement"]
                         if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}]
        assert sorted(cloudwatch["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey*"]
        assert cloudwatch["Effect"] == "Allow" and cloudwatch["Resource"] == "*"  # "*" in a key policy: this key


def test_only_this_accounts_alarms_may_publish_to_the_topic(synthesized):
    _, policy = _only(synthesized, "default", "AWS::SNS::TopicPolicy")
    topic, _ = _only(synthesized, "default", "AWS::SNS::Topic")
    (alarms,) = [s for s in policy["PolicyDocument"]["Statement"] if s.get("Sid") == "AllowThisAccountsAlarms"]
    assert alarms["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert alarms["Action"] == "sns:Publish" and alarms["Resource"] == {"Ref": topic}
    assert _arn_text(alarms["Condition"]["ArnLike"]["aws:SourceArn"]) == (
        "arn:<AWS::Partition>:cloudwatch:<AWS::Region>:<AWS::AccountId>:alarm:*")
    assert alarms["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}


@pytest.mark.parametrize("name", ["default", "scoped", "custom"])
def test_alarms_on_function_errors_and_dead_letter_depth_notify_the_topic(synthesized, name):
    alarms = {p["MetricName"]: p for _, p in ((k, v["Properties"]) for k, v in
                                               _resources(synthesized, name, "AWS::CloudWatch::Alarm").items())}
    assert set(alarms) == {"Errors", "ApproximateNumberOfMessagesVisible"}
    function, _ = _only(synthesized, name, "AWS::Lambda::Function")
    queue, _ = _only(synthesized, name, "AWS::SQS::Queue")
    topic, _ = _only(synthesized, name, "AWS::SNS::Topic")
    errors, depth = alarms["Errors"], alarms["ApproximateNumberOfMessagesVisible"]
    assert (errors["Namespace"], errors["Statistic"], errors["Period"]) == ("AWS/Lambda", "Sum", 60)
    assert errors["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": function}}]
    assert (depth["Namespace"], depth["Statistic"], depth["Period"]) == ("AWS/SQS", "Maximum", 300)
    assert depth["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue, "QueueName"]}}]
    for alarm in (errors, depth):
        assert alarm["Threshold"] == 1 and alarm["EvaluationPeriods"] == 1
        assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
        assert alarm["TreatMissingData"] == "notBreaching"
        assert alarm["AlarmActions"] == [{"Ref": topic}] and alarm["OKActions"] == [{"Ref": topic}]
        assert len(alarm["AlarmDescription"]) > 80


def test_topic_is_encrypted_requires_tls_and_mails_the_subscriber(synthesized):
    template = synthesized.templates["scoped"]
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
    for name in ("default", "scoped"):
        assert set(synthesized.raw[name]["Outputs"]) == {
            "FunctionName",
            "RuleName",
            "DeadLetterQueueUrl",
            "LogGroupName",
            "TopicArn",
            "ErrorsAlarmName",
            "DeadLetterAlarmName",
        }


def test_construct_exposes_what_it_creates(synthesized):
    auto_stop = synthesized.scoped.auto_stop
    assert auto_stop.function.runtime.name == "python3.13"
    assert auto_stop.role is not None and auto_stop.log_group is not None and auto_stop.rule is not None
    assert auto_stop.dead_letter_queue is not None and auto_stop.topic is not None
    assert auto_stop.topic_key is not None
    assert auto_stop.errors_alarm is not None and auto_stop.dead_letter_alarm is not None


def test_topic_under_a_customer_key_lets_the_function_use_that_key_only(synthesized):
    key, _ = _only(synthesized, "custom", "AWS::KMS::Key")
    _, topic = _only(synthesized, "custom", "AWS::SNS::Topic")
    assert topic["KmsMasterKeyId"] == {"Fn::GetAtt": [key, "Arn"]}
    (kms_statement,) = [s for s in _statements(synthesized, "custom") if "kms:" in str(s["Action"])]
    assert kms_statement["Resource"] == {"Fn::GetAtt": [key, "Arn"]}
    assert sorted(kms_statement["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey*"]
    assert synthesized.custom.topic is not None
