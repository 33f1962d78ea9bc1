"""Where sdk_ext.debugger differs from SageMaker SDK 2.257.7 on purpose, one test per difference.

Each test names the SDK behaviour it fixes (README.md#debugger-for-a-training-job-sagemaker-sdk-v3-v2-or-boto3); everything else matches the SDK's
payloads (tests/compat/test_sdk_oracle.py).
"""

from __future__ import annotations

import copy
import json
import logging
import subprocess
import sys
import textwrap

import pytest

from sdk_ext.debugger import (
    CollectionConfig,
    DebuggerConfigError,
    DebuggerHookConfig,
    ProfilerConfig,
    ProfilerRule,
    Rule,
    apply_debugger,
    debugger_artifacts_path,
    rule_configs,
    tensorboard_artifacts_path,
)

OUTPUT = "s3://sagemaker-us-west-2-123456789012/"


def _request(**extra: object) -> dict[str, object]:
    return {"TrainingJobName": "job-1", "OutputDataConfig": {"S3OutputPath": OUTPUT},
            "ResourceConfig": {"InstanceCount": 1, "InstanceType": "ml.p3.2xlarge", "VolumeSizeInGB": 30}, **extra}


def test_collection_order_is_first_seen_not_hash_seed_dependent(repo_env: dict[str, str]) -> None:
    """SDK: rule and hook collections are merged through a set, so their order changes with PYTHONHASHSEED."""
    script = textwrap.dedent("""
        import json
        from sdk_ext.debugger import *
        rules = [Rule.sagemaker(rule_configs.create_xgboost_report()),
                 Rule.sagemaker(rule_configs.feature_importance_overweight()),
                 Rule.sagemaker(rule_configs.vanishing_gradient())]
        hook = DebuggerHookConfig(collection_configs=[CollectionConfig("weights"), CollectionConfig("biases", {})])
        request = {"TrainingJobName": "j", "OutputDataConfig": {"S3OutputPath": "s3://b/"}}
        out = apply_debugger(request, rules=rules, debugger_hook_config=hook, region="us-west-2")
        print(json.dumps([c["CollectionName"] for c in out["DebugHookConfig"]["CollectionConfigurations"]]))
    """)
    orders = set()
    for seed in ("0", "1", "12345"):
        env = {**repo_env, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
        orders.add(done.stdout.strip())
    assert len(orders) == 1
    assert json.loads(orders.pop()) == ["metrics", "feature_importance", "hyperparameters", "predictions",
                                        "labels", "feature_importance", "gradients", "weights", "biases"]


def test_user_objects_are_never_mutated() -> None:
    """SDK: fit() fills hook.s3_output_path, turns hook.collection_configs into a set, writes the regional
    image, instance settings and action_json into each Rule and str()s ProfilerRule parameters in place."""
    hook = DebuggerHookConfig(collection_configs=[CollectionConfig("weights")])
    rule = Rule.sagemaker(rule_configs.loss_not_decreasing(), rule_parameters={"action_json": "[]"},
                          actions=rule_configs.ActionList(rule_configs.StopTraining()))
    profiler_rule = ProfilerRule.sagemaker(rule_configs.CPUBottleneck(threshold=20))
    profiler = ProfilerConfig(system_monitor_interval_millis=500)
    request = _request()
    before = [copy.deepcopy(vars(hook)), repr(rule), dict(rule.rule_parameters), rule.actions.serialize(),
              repr(profiler_rule), repr(profiler), copy.deepcopy(request)]

    out = apply_debugger(request, debugger_hook_config=hook, rules=[rule, profiler_rule], profiler_config=profiler,
                         region="us-west-2")

    assert out["DebugHookConfig"]["S3OutputPath"] == OUTPUT
    assert "job-1" in out["DebugRuleConfigurations"][0]["RuleParameters"]["action_json"]
    assert out["ProfilerRuleConfigurations"][0]["RuleParameters"]["threshold"] == "20"
    after = [vars(hook), repr(rule), dict(rule.rule_parameters), rule.actions.serialize(), repr(profiler_rule),
             repr(profiler), request]
    assert after == before
    assert hook.s3_output_path is None and isinstance(hook.collection_configs, list)
    assert rule.image_uri == "DEFAULT_RULE_EVALUATOR_IMAGE"
    assert profiler_rule.rule_parameters["threshold"] == 20


def test_rule_reused_in_another_region_gets_that_regions_image() -> None:
    """SDK: the first fit() writes its region's image into the Rule; a later job in another region is sent
    the first region's image (verified: a us-west-2 image sent for an eu-west-1 job)."""
    rule = Rule.sagemaker(rule_configs.vanishing_gradient())
    west = apply_debugger(_request(), rules=[rule], region="us-west-2")
    ireland = apply_debugger(_request(), rules=[rule], region="eu-west-1")
    assert west["DebugRuleConfigurations"][0]["RuleEvaluatorImage"].startswith("895741380848.dkr.ecr.us-west-2.")
    assert ireland["DebugRuleConfigurations"][0]["RuleEvaluatorImage"] == (
        "929884845733.dkr.ecr.eu-west-1.amazonaws.com/sagemaker-debugger-rules:latest")


def test_debugger_artifacts_path_is_none_when_hook_is_disabled() -> None:
    """SDK: latest_job_debugger_artifacts_path() raised AttributeError ('bool' object has no attribute
    's3_output_path') for debugger_hook_config=False."""
    out = apply_debugger(_request(), debugger_hook_config=False, region="us-west-2")
    assert "DebugHookConfig" not in out
    assert debugger_artifacts_path(out) is None


def test_tensorboard_artifacts_path_is_none_without_tensorboard_config() -> None:
    """SDK: latest_job_tensorboard_artifacts_path() checked the hook instead of the TensorBoard config and
    raised AttributeError ('NoneType' object has no attribute 's3_output_path')."""
    out = apply_debugger(_request(), region="us-west-2")
    assert tensorboard_artifacts_path(out) is None
    assert debugger_artifacts_path(out) == f"{OUTPUT}job-1/debug-output"


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow", "mxnet"])
def test_checkpointed_single_instance_framework_job_keeps_its_hook(framework: str) -> None:
    """SDK: PyTorch/TensorFlow set distribution={} and the hook was dropped when distribution was not None,
    so any checkpointed job lost Debugger silently, even on one instance."""
    request = _request(CheckpointConfig={"S3Uri": "s3://b/ckpt", "LocalPath": "/opt/ml/checkpoints"})
    out = apply_debugger(request, rules=[Rule.sagemaker(rule_configs.loss_not_decreasing())], region="us-west-2",
                         framework=framework)
    assert out["DebugHookConfig"]["S3OutputPath"] == OUTPUT
    assert out["DebugHookConfig"]["CollectionConfigurations"] == [
        {"CollectionName": "losses", "CollectionParameters": {"save_interval": "500"}}]


def test_checkpointed_distributed_job_drops_the_hook_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    """The SDK's rule for distributed jobs stays (the hook cannot checkpoint there), but it is logged."""
    request = _request(CheckpointConfig={"S3Uri": "s3://b/ckpt", "LocalPath": "/opt/ml/checkpoints"},
                       ResourceConfig={"InstanceCount": 2, "InstanceType": "ml.p3.2xlarge", "VolumeSizeInGB": 30})
    with caplog.at_level(logging.WARNING, logger="sdk_ext.debugger.apply"):
        out = apply_debugger(request, rules=[Rule.sagemaker(rule_configs.loss_not_decreasing())],
                             region="us-west-2", framework="pytorch")
    assert "DebugHookConfig" not in out
    assert out["DebugRuleConfigurations"][0]["RuleConfigurationName"] == "LossNotDecreasing"
    assert "hook is turned off" in caplog.text


def test_non_string_debugger_rule_parameter_is_rejected_before_sending() -> None:
    """SDK: passed non-string debugger rule parameters through; boto's validation then failed the call."""
    with pytest.raises(DebuggerConfigError) as info:
        Rule.sagemaker(rule_configs.vanishing_gradient(), rule_parameters={"threshold": 0.0001})
    assert "rule_parameters['threshold'] must be a string" in str(info.value)
    assert "'0.0001'" in str(info.value)


def test_email_only_action_is_prepared() -> None:
    """SDK: prepare_actions() called update_training_job_prefix_if_not_specified on a lone Email/SMS
    action, which has no such method (AttributeError at fit)."""
    rule = Rule.sagemaker(rule_configs.overfit(), actions=rule_configs.Email("abc@example.com"))
    out = apply_debugger(_request(), rules=[rule], region="us-west-2")
    assert out["DebugRuleConfigurations"][0]["RuleParameters"]["action_json"] == (
        '{\\"endpoint\\": \\"abc@example.com\\", \\"name\\": \\"email\\"}')


def test_every_problem_is_reported_at_once_as_one_error_type() -> None:
    """SDK: stopped at the first failed check and raised ValueError, RuntimeError, TypeError or (vanishing
    under python -O) AssertionError depending on the check. sdk_ext lists all problems in one
    DebuggerConfigError, which is an instance of each of those types so ported except clauses still work."""
    with pytest.raises(DebuggerConfigError) as info:
        Rule.custom(name="", image_uri="img", instance_type="ml.m5.xlarge", volume_size_in_gb=-1,
                    source="s3://b/r.py", s3_output_path="/local/out", actions="stop")
    err = info.value
    assert len(err.problems) == 5, err.problems
    for builtin in (ValueError, TypeError, RuntimeError, AssertionError):
        assert isinstance(err, builtin)
