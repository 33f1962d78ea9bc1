"""attach() on plain boto3: what botocore actually sends, captured at ``before-send`` (no network)."""

from __future__ import annotations

import re
from typing import Any

import boto3
import pytest

from sdk_ext.debugger import (
    DebuggerConfigError,
    DebuggerHookConfig,
    Rule,
    TensorBoardOutputConfig,
    attach,
    rule_configs,
)
from tests.unit.debugger.botocapture import BotoCapture

OUTPUT = "s3://sagemaker-eu-west-1-123456789012/"
CREATED = {"TrainingJobArn": "arn:aws:sagemaker:eu-west-1:123456789012:training-job/x"}


def v2_style_request(name: str) -> dict[str, Any]:
    """The CreateTrainingJob request a v2 Estimator (without Debugger arguments) would have sent."""
    return {
        "AlgorithmSpecification": {"TrainingInputMode": "File",
                                   "TrainingImage": "123456789012.dkr.ecr.eu-west-1.amazonaws.com/my-training:1"},
        "OutputDataConfig": {"S3OutputPath": OUTPUT},
        "TrainingJobName": name,
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
        "ResourceConfig": {"VolumeSizeInGB": 30, "InstanceCount": 1, "InstanceType": "ml.m5.xlarge"},
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
        "InputDataConfig": [{"DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://my-bucket/train",
                                                             "S3DataDistributionType": "FullyReplicated"}},
                             "ChannelName": "training"}],
    }


@pytest.fixture
def session() -> tuple[boto3.Session, BotoCapture]:
    boto_session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing",
                                 region_name="eu-west-1")
    capture = BotoCapture({"CreateTrainingJob": CREATED}).install(boto_session.events)
    return boto_session, capture


def test_raw_boto3_call_gets_the_v2_estimators_debugger_keys(session: tuple[boto3.Session, BotoCapture]) -> None:
    boto_session, capture = session
    attachment = attach(boto_session, rules=[Rule.sagemaker(rule_configs.vanishing_gradient())],
                        tensorboard_output_config=TensorBoardOutputConfig("s3://tb/logs"))
    client = boto_session.client("sagemaker")
    client.create_training_job(**v2_style_request("raw-job"))

    [sent] = capture.bodies("CreateTrainingJob")
    assert sent == {**v2_style_request("raw-job"),
                    "DebugRuleConfigurations": [{
                        "RuleConfigurationName": "VanishingGradient",
                        "RuleEvaluatorImage": "929884845733.dkr.ecr.eu-west-1.amazonaws.com/sagemaker-debugger-rules:latest",
                        "RuleParameters": {"rule_to_invoke": "VanishingGradient"}}],
                    "DebugHookConfig": {"S3OutputPath": OUTPUT, "CollectionConfigurations": [
                        {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "500"}}]},
                    "TensorBoardOutputConfig": {"S3OutputPath": "s3://tb/logs"},
                    "ProfilerConfig": {"S3OutputPath": OUTPUT, "DisableProfiler": False}}
    assert attachment.applied == ["raw-job"]


def test_region_comes_from_the_sending_client() -> None:
    boto_session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1")
    capture = BotoCapture({"CreateTrainingJob": CREATED}).install(boto_session.events)
    attach(boto_session, rules=[Rule.sagemaker(rule_configs.overfit())])
    boto_session.client("sagemaker", region_name="cn-north-1").create_training_job(**v2_style_request("cn-job"))
    [sent] = capture.bodies("CreateTrainingJob")
    assert sent["DebugRuleConfigurations"][0]["RuleEvaluatorImage"] == (
        "618459771430.dkr.ecr.cn-north-1.amazonaws.com.cn/sagemaker-debugger-rules:latest")


@pytest.mark.parametrize("job_filter", [r"exp-\d+", re.compile(r"exp-\d+"), lambda name: name.startswith("exp-")])
def test_job_name_filter_configures_only_matching_jobs(session: tuple[boto3.Session, BotoCapture],
                                                       job_filter: Any) -> None:
    boto_session, capture = session
    attachment = attach(boto_session, rules=[Rule.sagemaker(rule_configs.overfit())], job_name_filter=job_filter)
    client = boto_session.client("sagemaker")
    for name in ("exp-1", "other-job", "exp-22"):
        client.create_training_job(**v2_style_request(name))

    sent = {body["TrainingJobName"]: body for body in capture.bodies("CreateTrainingJob")}
    assert sent["other-job"] == v2_style_request("other-job")
    for name in ("exp-1", "exp-22"):
        assert sent[name]["DebugRuleConfigurations"][0]["RuleConfigurationName"] == "Overfit"
    assert attachment.applied == ["exp-1", "exp-22"]


def test_regex_filter_must_match_the_whole_name(session: tuple[boto3.Session, BotoCapture]) -> None:
    boto_session, capture = session
    attach(boto_session, job_name_filter="exp")
    boto_session.client("sagemaker").create_training_job(**v2_style_request("exp-1"))
    assert "DebugHookConfig" not in capture.bodies("CreateTrainingJob")[0]


def test_attach_to_a_client_and_detach(session: tuple[boto3.Session, BotoCapture]) -> None:
    boto_session, capture = session
    client = boto_session.client("sagemaker")
    with attach(client, debugger_hook_config=DebuggerHookConfig(hook_parameters={"save_interval": "5"})):
        client.create_training_job(**v2_style_request("with"))
    client.create_training_job(**v2_style_request("without"))
    first, second = capture.bodies("CreateTrainingJob")
    assert first["DebugHookConfig"]["HookParameters"] == {"save_interval": "5"}
    assert second == v2_style_request("without")


def test_v2_estimator_request_with_default_debugger_keys_gets_rules_merged(
        session: tuple[boto3.Session, BotoCapture]) -> None:
    """A v2 Estimator already sends a default hook and profiler config; attached rules merge into them."""
    boto_session, capture = session
    attach(boto_session, rules=[Rule.sagemaker(rule_configs.loss_not_decreasing())])
    request = {**v2_style_request("v2-job"),
               "DebugHookConfig": {"S3OutputPath": "s3://v2/debug", "CollectionConfigurations": [
                   {"CollectionName": "weights"}]},
               "ProfilerConfig": {"DisableProfiler": True}}
    boto_session.client("sagemaker").create_training_job(**request)
    [sent] = capture.bodies("CreateTrainingJob")
    assert sent["DebugHookConfig"] == {"S3OutputPath": "s3://v2/debug", "CollectionConfigurations": [
        {"CollectionName": "losses", "CollectionParameters": {"save_interval": "500"}},
        {"CollectionName": "weights"}]}
    assert sent["ProfilerConfig"] == {"DisableProfiler": True}
    assert [r["RuleConfigurationName"] for r in sent["DebugRuleConfigurations"]] == ["LossNotDecreasing"]


def test_attaching_the_same_rules_twice_is_an_error_not_a_duplicate(
        session: tuple[boto3.Session, BotoCapture]) -> None:
    boto_session, capture = session
    rules = [Rule.sagemaker(rule_configs.overfit())]
    attach(boto_session, rules=rules)
    attach(boto_session, rules=rules)
    with pytest.raises(DebuggerConfigError, match=r"already has rules named \['Overfit'\]"):
        boto_session.client("sagemaker").create_training_job(**v2_style_request("twice"))
    assert capture.calls == []


def test_attach_checks_its_arguments_and_target_immediately() -> None:
    with pytest.raises(DebuggerConfigError, match="rules must be a list"):
        attach(boto3.Session(region_name="us-west-2"), rules=Rule.sagemaker(rule_configs.overfit()))
    s3 = boto3.client("s3", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    with pytest.raises(DebuggerConfigError, match="needs a SageMaker client, got a 's3' client"):
        attach(s3)
    with pytest.raises(DebuggerConfigError, match="cannot attach to int"):
        attach(3)


def test_other_operations_are_untouched(session: tuple[boto3.Session, BotoCapture]) -> None:
    boto_session, capture = session
    capture.responses["DescribeTrainingJob"] = {"TrainingJobName": "x"}
    attach(boto_session, rules=[Rule.sagemaker(rule_configs.overfit())])
    boto_session.client("sagemaker").describe_training_job(TrainingJobName="x")
    assert capture.calls == [("DescribeTrainingJob", {"TrainingJobName": "x"})]
