"""SageMaker SDK v3's ModelTrainer has no Debugger options; attach() gives its jobs Debugger.

The request is captured where botocore sends it (``before-send``), answered locally, and every
socket connection is refused: no network, no credentials.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest

from sdk_ext.debugger import CollectionConfig, DebuggerHookConfig, ProfilerRule, Rule, attach, rule_configs
from tests.unit.debugger.botocapture import BotoCapture, describe_response, no_network

REGION = "us-west-2"
RULES_IMAGE = "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest"


def _train_with_model_trainer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *,
                              with_debugger: bool) -> tuple[BotoCapture, Any]:
    monkeypatch.setenv("SAGEMAKER_VALIDATE_ROLE", "false")  # else ModelTrainer asks IAM about the role
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))  # no SDK defaults file from this machine
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(tmp_path))
    with no_network(monkeypatch):
        from sagemaker.core.helper.session_helper import Session
        from sagemaker.core.telemetry import telemetry_logging
        from sagemaker.core.training.configs import Compute
        from sagemaker.train import ModelTrainer

        # The SDK reports usage from a background thread that may outlive the socket guard.
        monkeypatch.setattr(telemetry_logging, "_send_telemetry_request", lambda *args, **kwargs: None)

        boto_session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing",
                                     region_name=REGION)
        capture = BotoCapture({
            "CreateTrainingJob": lambda body: {"TrainingJobArn": describe_response(body["TrainingJobName"])[
                "TrainingJobArn"]},
            "DescribeTrainingJob": lambda body: describe_response(body["TrainingJobName"]),
        }, buckets=("my-bucket",)).install(boto_session.events)
        attachment = None
        if with_debugger:
            attachment = attach(
                boto_session,
                rules=[Rule.sagemaker(rule_configs.loss_not_decreasing()),
                       ProfilerRule.sagemaker(rule_configs.ProfilerReport())],
                debugger_hook_config=DebuggerHookConfig(
                    hook_parameters={"save_interval": "10"},
                    collection_configs=[CollectionConfig("weights", {"save_interval": "10"})]),
            )
        session = Session(boto_session=boto_session, default_bucket="my-bucket")
        trainer = ModelTrainer(
            training_image="123456789012.dkr.ecr.us-west-2.amazonaws.com/my-training:latest",
            role="arn:aws:iam::123456789012:role/SageMakerRole", sagemaker_session=session,
            compute=Compute(instance_type="ml.m5.xlarge", instance_count=1), base_job_name="mt-debugger",
        )
        trainer.train(wait=False, logs=False)
    return capture, attachment


def test_model_trainer_alone_sends_no_debugger_configuration(monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    capture, _ = _train_with_model_trainer(monkeypatch, tmp_path, with_debugger=False)
    [sent] = capture.bodies("CreateTrainingJob")
    assert not {"DebugHookConfig", "DebugRuleConfigurations", "ProfilerRuleConfigurations"} & set(sent)


def test_attached_session_gives_model_trainer_job_hook_and_rules(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    capture, attachment = _train_with_model_trainer(monkeypatch, tmp_path, with_debugger=True)

    [sent] = capture.bodies("CreateTrainingJob")
    output = sent["OutputDataConfig"]["S3OutputPath"]
    assert output.startswith("s3://my-bucket/mt-debugger")
    assert sent["DebugHookConfig"] == {
        "S3OutputPath": output,
        "HookParameters": {"save_interval": "10"},
        "CollectionConfigurations": [
            {"CollectionName": "losses", "CollectionParameters": {"save_interval": "500"}},
            {"CollectionName": "weights", "CollectionParameters": {"save_interval": "10"}},
        ],
    }
    assert sent["DebugRuleConfigurations"] == [{
        "RuleConfigurationName": "LossNotDecreasing", "RuleEvaluatorImage": RULES_IMAGE,
        "RuleParameters": {"rule_to_invoke": "LossNotDecreasing"},
    }]
    assert sent["ProfilerRuleConfigurations"] == [{
        "RuleConfigurationName": "ProfilerReport", "RuleEvaluatorImage": RULES_IMAGE,
        "RuleParameters": {"rule_to_invoke": "ProfilerReport"},
    }]
    assert sent["ProfilerConfig"] == {"S3OutputPath": output, "DisableProfiler": False}
    # ModelTrainer's own settings go through untouched.
    assert sent["AlgorithmSpecification"]["TrainingImage"].endswith("/my-training:latest")
    assert sent["ResourceConfig"]["InstanceType"] == "ml.m5.xlarge"
    assert attachment.applied == [sent["TrainingJobName"]]
