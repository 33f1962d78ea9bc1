"""apply_debugger behaviours beyond the oracle's cases."""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

import pytest

from sdk_ext.debugger import (
    DebuggerConfigError,
    Profiler,
    ProfilerConfig,
    ProfilerRule,
    Rule,
    apply_debugger,
    rule_configs,
)

OUTPUT = "s3://b/out/"
NOW = datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=timezone.utc)


def _request(**extra: Any) -> dict[str, Any]:
    return {"TrainingJobName": "j", "OutputDataConfig": {"S3OutputPath": OUTPUT},
            "ResourceConfig": {"InstanceCount": 1, "InstanceType": "ml.g5.xlarge", "VolumeSizeInGB": 30}, **extra}


def test_profiler_params_add_the_detailed_profiler_job_unless_rules_is_an_empty_list() -> None:
    config = ProfilerConfig(profile_params=Profiler(cpu_profiling_duration=60))
    out = apply_debugger(_request(), profiler_config=config, region="us-east-1", now=lambda: NOW)
    assert out["ProfilerRuleConfigurations"] == [{
        "RuleConfigurationName": "DetailedProfilerProcessingJobConfig-2024-01-02-03-04-05-006",
        "RuleEvaluatorImage": "503895931360.dkr.ecr.us-east-1.amazonaws.com/detailed-profiler-processing:latest",
        "InstanceType": "ml.m5.4xlarge", "VolumeSizeInGB": 128,
        "RuleParameters": {"rule_to_invoke": "DetailedProfilerProcessing"}}]
    assert out["ProfilerConfig"]["ProfilingParameters"] == {"CPUProfilingDuration": "60", "SMPFileRotationSecs": "600"}
    assert "ProfilerRuleConfigurations" not in apply_debugger(_request(), profiler_config=config, rules=[],
                                                              region="us-east-1")


def test_debugger_hook_true_means_the_default_hook() -> None:
    out = apply_debugger(_request(), debugger_hook_config=True, region="us-west-2")
    assert out["DebugHookConfig"] == {"S3OutputPath": OUTPUT, "CollectionConfigurations": []}


@pytest.mark.parametrize("region, instance, reason", [
    ("us-gov-east-1", "ml.g5.xlarge", "region 'us-gov-east-1' does not support the profiler"),
    ("us-west-2", "ml.trn1.2xlarge", "Trainium"),
])
def test_profiler_settings_where_the_profiler_is_off_are_errors(region: str, instance: str, reason: str) -> None:
    request = _request(ResourceConfig={"InstanceCount": 1, "InstanceType": instance, "VolumeSizeInGB": 30})
    with pytest.raises(DebuggerConfigError) as info:
        apply_debugger(request, profiler_config=ProfilerConfig(system_monitor_interval_millis=500),
                       rules=[ProfilerRule.sagemaker(rule_configs.CPUBottleneck())], region=region)
    assert len(info.value.problems) == 2
    assert all(reason in p for p in info.value.problems)
    out = apply_debugger(request, debugger_hook_config=False, region=region)
    assert out["ProfilerConfig"] == {"DisableProfiler": True}


def test_trainium_in_an_instance_group_turns_the_profiler_off() -> None:
    request = _request(ResourceConfig={"InstanceGroups": [
        {"InstanceGroupName": "a", "InstanceType": "ml.c5.xlarge", "InstanceCount": 1},
        {"InstanceGroupName": "b", "InstanceType": "ml.trn1.32xlarge", "InstanceCount": 2}], "VolumeSizeInGB": 30})
    assert apply_debugger(request, region="us-west-2")["ProfilerConfig"] == {"DisableProfiler": True}


def test_tensorflow_parameter_server_drops_hook_and_debugger_rules(caplog: pytest.LogCaptureFixture) -> None:
    request = _request(HyperParameters={"sagemaker_parameter_server_enabled": "true"})
    with caplog.at_level(logging.WARNING):
        out = apply_debugger(request, rules=[Rule.sagemaker(rule_configs.overfit()),
                                             ProfilerRule.sagemaker(rule_configs.ProfilerReport())],
                             region="us-west-2", framework="tensorflow")
    assert "DebugHookConfig" not in out and "DebugRuleConfigurations" not in out
    assert out["ProfilerRuleConfigurations"][0]["RuleConfigurationName"] == "ProfilerReport"
    assert "parameter-server" in caplog.text
    assert "DebugHookConfig" in apply_debugger(request, region="us-west-2", framework="pytorch")


def test_rules_already_in_the_request_are_kept_and_new_ones_appended() -> None:
    existing = {"RuleConfigurationName": "Mine", "RuleEvaluatorImage": "img:1", "InstanceType": "ml.m5.xlarge",
                "VolumeSizeInGB": 10}
    request = _request(DebugRuleConfigurations=[existing], ProfilerRuleConfigurations=[dict(existing, RuleConfigurationName="P")])
    out = apply_debugger(request, rules=[Rule.sagemaker(rule_configs.overfit()),
                                         ProfilerRule.sagemaker(rule_configs.BatchSize())], region="us-west-2")
    assert [r["RuleConfigurationName"] for r in out["DebugRuleConfigurations"]] == ["Mine", "Overfit"]
    assert [r["RuleConfigurationName"] for r in out["ProfilerRuleConfigurations"]] == ["P", "BatchSize"]
    assert apply_debugger(request, region="us-west-2")["DebugRuleConfigurations"] == [existing]


def test_arguments_replace_keys_already_in_the_request() -> None:
    request = _request(DebugHookConfig={"S3OutputPath": "s3://old/"}, ProfilerConfig={"DisableProfiler": True})
    out = apply_debugger(request, debugger_hook_config=False, profiler_config=ProfilerConfig(), region="us-west-2")
    assert "DebugHookConfig" not in out
    assert out["ProfilerConfig"] == {"S3OutputPath": OUTPUT, "DisableProfiler": False}


def test_actions_need_the_job_name() -> None:
    request = _request()
    del request["TrainingJobName"]
    rule = Rule.sagemaker(rule_configs.overfit(), actions=rule_configs.StopTraining())
    with pytest.raises(DebuggerConfigError, match="rule 'Overfit' has actions, which need the request's TrainingJobName"):
        apply_debugger(request, rules=[rule], region="us-west-2")


def test_stop_training_with_a_prefix_keeps_it() -> None:
    rule = Rule.sagemaker(rule_configs.overfit(), actions=rule_configs.StopTraining("exp-"))
    out = apply_debugger(_request(), rules=[rule], region="us-west-2")
    assert out["DebugRuleConfigurations"][0]["RuleParameters"]["action_json"] == (
        '{\\"training_job_prefix\\": \\"exp-\\", \\"name\\": \\"stoptraining\\"}')


def test_xgboost_only_rules_warn_outside_xgboost(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        apply_debugger(_request(), rules=[Rule.sagemaker(rule_configs.tree_depth())], region="us-west-2",
                       framework="pytorch")
    assert "TreeDepth is meant for XGBoost" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        apply_debugger(_request(), rules=[Rule.sagemaker(rule_configs.tree_depth())], region="us-west-2",
                       framework="xgboost")
    assert "XGBoost" not in caplog.text


def test_il_central_1_gets_a_hook_but_no_built_in_rules() -> None:
    out = apply_debugger(_request(), region="il-central-1")
    assert out["DebugHookConfig"]["S3OutputPath"] == OUTPUT
    with pytest.raises(DebuggerConfigError, match="Unsupported region: il-central-1. No sagemaker-debugger-rules rule-evaluator image .* 'il-central-1'"):
        apply_debugger(_request(), rules=[Rule.sagemaker(rule_configs.overfit())], region="il-central-1")
    custom = Rule.custom("Mine", "img:1", "ml.m5.xlarge", 10)
    assert apply_debugger(_request(), rules=[custom], region="il-central-1")["DebugRuleConfigurations"][0][
        "RuleEvaluatorImage"] == "img:1"
