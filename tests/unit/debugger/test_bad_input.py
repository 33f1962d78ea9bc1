"""Bad input is a clear error (what, where, how to fix) before anything is uploaded or sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest

from sdk_ext.debugger import (
    CollectionConfig,
    DebuggerConfigError,
    DebuggerHookConfig,
    ProfilerConfig,
    ProfilerRule,
    Rule,
    TensorBoardOutputConfig,
    apply_debugger,
    attach,
    rule_configs,
)
from tests.unit.debugger.botocapture import BotoCapture

REQUEST = {
    "TrainingJobName": "job-1",
    "AlgorithmSpecification": {"TrainingImage": "123456789012.dkr.ecr.us-west-2.amazonaws.com/t:1",
                               "TrainingInputMode": "File"},
    "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
    "OutputDataConfig": {"S3OutputPath": "s3://my-bucket/output"},
    "ResourceConfig": {"InstanceCount": 1, "InstanceType": "ml.m5.xlarge", "VolumeSizeInGB": 30},
    "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
}


class RecordingUploader:
    def __init__(self) -> None:
        self.uploads: list[str] = []

    def upload(self, local_path: str, *, rule_name: str, default_prefix: str | None) -> str:
        self.uploads.append(local_path)
        return f"s3://uploaded/{rule_name}.py"


def _client(region: str) -> tuple[Any, BotoCapture]:
    client = boto3.client("sagemaker", region_name=region, aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    capture = BotoCapture({"CreateTrainingJob": {"TrainingJobArn": "arn:aws:sagemaker:::training-job/job-1"}})
    return client, capture.install(client.meta.events)


def test_a_rule_that_is_not_a_rule_fails_the_call_before_it_is_sent() -> None:
    client, capture = _client("us-west-2")
    attach(client, rules=[Rule.sagemaker(rule_configs.overfit()), rule_configs.vanishing_gradient()])
    with pytest.raises(DebuggerConfigError) as info:
        client.create_training_job(**REQUEST)
    message = str(info.value)
    assert "rules[1] is a dict" in message and "Rule.sagemaker(rule_configs.vanishing_gradient())" in message
    assert capture.calls == []


def test_a_non_string_rule_parameter_is_an_error_naming_the_parameter() -> None:
    with pytest.raises(DebuggerConfigError) as info:
        Rule.sagemaker(rule_configs.loss_not_decreasing(), rule_parameters={"num_steps": 10, "mode": "TRAIN"})
    assert str(info.value) == ("invalid Rule.sagemaker: rule_parameters['num_steps'] must be a string, got int 10; "
                               "SageMaker accepts only string parameters, write it as '10'")
    with pytest.raises(DebuggerConfigError, match=r"rule_parameters\['threshold'\] must be a string"):
        Rule.custom("Mine", "img:1", "ml.m5.xlarge", 30, rule_parameters={"threshold": 1.5})


@pytest.mark.parametrize("base_config, expected", [
    ({"DebugRuleConfiguration": {"RuleConfigurationName": "VanishingGradients"}}, "unknown built-in rule 'VanishingGradients'"),
    (rule_configs.vanishing_gradient, "call it: rule_configs.vanishing_gradient()"),
    ("VanishingGradient", "is not a built-in rule"),
    (rule_configs.CPUBottleneck(), "is a profiler rule; use ProfilerRule.sagemaker"),
])
def test_an_unknown_built_in_rule_is_an_error_listing_the_known_ones(base_config: Any, expected: str) -> None:
    with pytest.raises(DebuggerConfigError) as info:
        Rule.sagemaker(base_config)
    assert expected in str(info.value)
    if "unknown" in expected:
        assert "VanishingGradient, WeightUpdateRatio" in str(info.value)
        assert "Rule.custom" in str(info.value)


def test_an_uncalled_profiler_rule_class_is_an_error() -> None:
    with pytest.raises(DebuggerConfigError, match=r"write rule_configs.ProfilerReport\(\)"):
        ProfilerRule.sagemaker(rule_configs.ProfilerReport)


def test_a_hook_config_in_an_unsupported_region_fails_the_call_before_it_is_sent() -> None:
    client, capture = _client("ap-southeast-3")
    attach(client, debugger_hook_config=DebuggerHookConfig(s3_output_path="s3://b/debug"))
    with pytest.raises(DebuggerConfigError) as info:
        client.create_training_job(**REQUEST)
    assert "Region 'ap-southeast-3' does not support SageMaker Debugger" in str(info.value)
    assert "debugger_hook_config=False" in str(info.value)
    assert capture.calls == []


def test_without_a_hook_config_an_unsupported_region_just_runs_without_debugger() -> None:
    client, capture = _client("ap-southeast-3")
    attach(client)
    client.create_training_job(**REQUEST)
    [sent] = capture.bodies("CreateTrainingJob")
    assert "DebugHookConfig" not in sent and sent["ProfilerConfig"] == {"DisableProfiler": True}


@pytest.mark.parametrize("build, where", [
    (lambda: DebuggerHookConfig(s3_output_path="my-bucket/debug"), "DebuggerHookConfig: s3_output_path"),
    (lambda: TensorBoardOutputConfig("/opt/ml/tb"), "TensorBoardOutputConfig: s3_output_path"),
    (lambda: ProfilerConfig(s3_output_path="https://my-bucket.s3.amazonaws.com/p"), "ProfilerConfig: s3_output_path"),
    (lambda: Rule.sagemaker(rule_configs.overfit(), s3_output_path="s3:/b/x"), "Rule.sagemaker: s3_output_path"),
    (lambda: Rule.sagemaker(rule_configs.similar_across_runs(), other_trials_s3_input_paths=["b/t"]),
     "Rule.sagemaker: other_trials_s3_input_paths[0]"),
])
def test_an_s3_path_that_is_not_s3_is_an_error_where_it_is_given(build: Any, where: str) -> None:
    with pytest.raises(DebuggerConfigError) as info:
        build()
    message = str(info.value)
    assert message.startswith(f"invalid {where.split(':')[0]}: {where.split(': ')[1]} must be an S3 URI")
    assert "'s3://bucket/prefix'" in message


def test_a_non_s3_job_output_path_is_an_error_when_debugger_defaults_from_it() -> None:
    request = {**REQUEST, "OutputDataConfig": {"S3OutputPath": "file:///tmp/out"}}
    with pytest.raises(DebuggerConfigError) as info:
        apply_debugger(request, region="us-west-2")
    assert "OutputDataConfig.S3OutputPath" in str(info.value) and "'file:///tmp/out'" in str(info.value)
    # Given explicitly, no default is needed.
    out = apply_debugger(request, region="us-west-2", debugger_hook_config=DebuggerHookConfig("s3://b/d"),
                         disable_profiler=True)
    assert out["DebugHookConfig"]["S3OutputPath"] == "s3://b/d"


def test_nothing_is_uploaded_when_the_configuration_has_problems(tmp_path: Path) -> None:
    source = tmp_path / "my_rule.py"
    source.write_text("class MyRule: pass\n")
    uploader = RecordingUploader()
    rules = [Rule.custom("Mine", "img:1", "ml.m5.xlarge", 30, source=str(source), rule_to_invoke="MyRule"),
             Rule.sagemaker(rule_configs.overfit())]
    with pytest.raises(DebuggerConfigError) as info:
        apply_debugger(REQUEST, rules=rules, region="ap-southeast-3", uploader=uploader)
    assert uploader.uploads == []
    assert "No sagemaker-debugger-rules rule-evaluator image is published in region 'ap-southeast-3'" in str(info.value)
    out = apply_debugger(REQUEST, rules=rules, region="us-west-2", uploader=uploader)
    assert uploader.uploads == [str(source)]
    assert out["DebugRuleConfigurations"][0]["RuleParameters"]["source_s3_uri"] == "s3://uploaded/Mine.py"


def test_a_missing_local_rule_source_is_an_error(tmp_path: Path) -> None:
    rule = Rule.custom("Mine", "img:1", "ml.m5.xlarge", 30, source=str(tmp_path / "nope.py"), rule_to_invoke="R")
    with pytest.raises(DebuggerConfigError, match="source file .*nope.py' does not exist"):
        apply_debugger(REQUEST, rules=[rule], region="us-west-2", uploader=RecordingUploader())


@pytest.mark.parametrize("kwargs, expected", [
    ({"rules": Rule.sagemaker(rule_configs.overfit())}, "rules must be a list"),
    ({"debugger_hook_config": {"S3OutputPath": "s3://b"}}, "debugger_hook_config must be a DebuggerHookConfig"),
    ({"profiler_config": {"DisableProfiler": True}}, "profiler_config must be a ProfilerConfig"),
    ({"disable_profiler": "yes"}, "disable_profiler must be True or False"),
    ({"region": ""}, "region must be an AWS region name"),
])
def test_wrong_argument_types_are_errors(kwargs: dict[str, Any], expected: str) -> None:
    with pytest.raises(DebuggerConfigError, match=expected):
        apply_debugger(REQUEST, **{"region": "us-west-2", **kwargs})


def test_collection_config_checks_its_arguments() -> None:
    with pytest.raises(DebuggerConfigError) as info:
        CollectionConfig("", ["include_regex"])  # type: ignore[arg-type]
    assert len(info.value.problems) == 2
    with pytest.raises(DebuggerConfigError, match=r"collection_configs\[1\] must be a CollectionConfig"):
        DebuggerHookConfig(collection_configs=[CollectionConfig("weights"), "losses"])  # type: ignore[list-item]
