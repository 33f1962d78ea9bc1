"""Config objects: equality and hashing as the SDK's, rule_configs, the image table, update requests."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest
import smdebug_rulesconfig

import sdk_ext.debugger as dbg
from sdk_ext.debugger import (
    CollectionConfig,
    DebuggerConfigError,
    ProfilerRule,
    Rule,
    disable_profiling_request,
    enable_default_profiling_request,
    get_default_profiler_processing_job,
    get_rule_container_image_uri,
    rule_configs,
    update_profiler_request,
)
from sdk_ext.debugger.images import DEBUGGER_UNSUPPORTED_REGIONS
from tests.conftest import FIXTURES

IMAGE_TABLE = FIXTURES / "sdk" / "rule_image_accounts.md"


def test_collection_configs_compare_and_hash_by_name_and_parameters() -> None:
    a, b = CollectionConfig("weights", {"save_interval": "5"}), CollectionConfig("weights", {"save_interval": "5"})
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != CollectionConfig("weights", {"save_interval": "6"})
    none, empty = CollectionConfig("weights"), CollectionConfig("weights", {})
    assert none != empty and hash(none) == hash(empty) and len({none, empty}) == 2
    with pytest.raises(TypeError, match="CollectionConfig is only comparable with other CollectionConfig objects"):
        _ = a == "weights"


def test_collection_config_keeps_its_own_copy_of_parameters() -> None:
    params = {"save_interval": "5"}
    config = CollectionConfig("weights", params)
    params["save_interval"] = "6"
    assert config._to_request_dict() == {"CollectionName": "weights", "CollectionParameters": {"save_interval": "5"}}


def test_rules_compare_by_value_and_are_unhashable() -> None:
    one = Rule.sagemaker(rule_configs.overfit(), rule_parameters={"patience_train": "5"})
    assert one == Rule.sagemaker(rule_configs.overfit(), rule_parameters={"patience_train": "5"})
    assert one != Rule.sagemaker(rule_configs.overfit())
    # Like the SDK (attrs): collections and actions are not part of equality.
    assert one == Rule.sagemaker(rule_configs.overfit(), rule_parameters={"patience_train": "5"},
                                 collections_to_save=[CollectionConfig("x")])
    custom = Rule.custom("Mine", "img:1", "ml.m5.xlarge", 30)
    assert custom == Rule.custom("Mine", "img:1", "ml.m5.xlarge", 30)
    assert ProfilerRule.custom("Mine", "img:1", "ml.m5.xlarge", 30) != custom  # other class, never equal
    with pytest.raises(TypeError):
        hash(one)


def test_prepare_actions_serializes_actions_into_the_rule_and_leaves_the_actions_alone() -> None:
    actions = rule_configs.ActionList(rule_configs.StopTraining(), rule_configs.SMS("+15555550100"))
    rule = Rule.sagemaker(rule_configs.overfit(), actions=actions)
    assert rule.prepare_actions("job-7") is rule  # in place, as a v2 Estimator calls it (and ignores the result)
    assert rule.rule_parameters["action_json"] == (
        '[{\\"name\\": \\"stoptraining\\", \\"training_job_prefix\\": \\"job-7\\"}, '
        '{\\"endpoint\\": \\"+15555550100\\", \\"name\\": \\"sms\\"}]')
    # the user's actions keep no job prefix, so reusing them for another job stops that job, not job-7
    assert actions.serialize().count("training_job_prefix") == 0
    other = Rule.sagemaker(rule_configs.overfit(), actions=actions).prepare_actions("job-8")
    assert "job-8" in other.rule_parameters["action_json"] and "job-7" not in other.rule_parameters["action_json"]


def test_rule_configs_is_smdebug_rulesconfig() -> None:
    assert rule_configs is smdebug_rulesconfig
    assert dbg.rule_configs.StopTraining is smdebug_rulesconfig.StopTraining


def test_every_public_name_is_exported() -> None:
    for name in ("CollectionConfig", "DebuggerHookConfig", "TensorBoardOutputConfig", "Rule", "ProfilerRule",
                 "ProfilerConfig", "Profiler", "rule_configs", "apply_debugger", "attach", "debugger_artifacts_path",
                 "tensorboard_artifacts_path", "rule_statuses", "wait_for_rules"):
        assert name in dbg.__all__ and hasattr(dbg, name)


def _sdk_md_image_table() -> dict[str, tuple[str, str]]:
    """Region -> (debugger-rules account, detailed-profiler account), SDK 2.257.7's table (tests/fixtures/sdk)."""
    rows = re.findall(r"^\| ([a-z]{2}(?:-[a-z]+)+-\d) \| (\d{12}|—) \| (\d{12}|—) \|$",
                      IMAGE_TABLE.read_text(), re.MULTILINE)
    return {region: (rules, profiler) for region, rules, profiler in rows}


def test_image_table_matches_the_reference() -> None:
    table = _sdk_md_image_table()
    assert len(table) == 25
    for region, (rules_account, profiler_account) in table.items():
        domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
        for name, account, repo in (("VanishingGradient", rules_account, "sagemaker-debugger-rules"),
                                    ("DetailedProfilerProcessingJobConfig-x", profiler_account,
                                     "detailed-profiler-processing")):
            if account == "—":
                with pytest.raises(DebuggerConfigError, match=f"region '{region}'"):
                    get_rule_container_image_uri(name, region)
            else:
                assert get_rule_container_image_uri(name, region) == f"{account}.dkr.ecr.{region}.{domain}/{repo}:latest"
    for region in DEBUGGER_UNSUPPORTED_REGIONS:
        with pytest.raises(DebuggerConfigError):
            get_rule_container_image_uri("Overfit", region)


def test_default_profiler_processing_job_is_named_with_a_utc_timestamp() -> None:
    moment = datetime(2024, 3, 5, 7, 8, 9, 123456, tzinfo=timezone.utc)
    job = get_default_profiler_processing_job(now=lambda: moment)
    assert job.name == "DetailedProfilerProcessingJobConfig-2024-03-05-07-08-09-123"
    assert (job.instance_type, job.volume_size_in_gb) == ("ml.m5.4xlarge", 128)
    assert job.rule_parameters == {"rule_to_invoke": "DetailedProfilerProcessing"}


def test_update_requests() -> None:
    job = {"TrainingJobName": "j", "TrainingJobArn": "arn:aws:sagemaker:eu-west-1:123456789012:training-job/j",
           "OutputDataConfig": {"S3OutputPath": "s3://b/out"}, "ProfilingStatus": "Disabled"}
    assert enable_default_profiling_request(job) == {
        "TrainingJobName": "j", "ProfilerConfig": {"S3OutputPath": "s3://b/out", "DisableProfiler": False}}
    with pytest.raises(DebuggerConfigError, match="already disabled"):
        disable_profiling_request(job)
    enabled = {**job, "ProfilingStatus": "Enabled"}
    assert disable_profiling_request(enabled) == {"TrainingJobName": "j", "ProfilerConfig": {"DisableProfiler": True}}
    with pytest.raises(DebuggerConfigError, match="already enabled"):
        enable_default_profiling_request(enabled)
    request = update_profiler_request(enabled, rules=[ProfilerRule.sagemaker(rule_configs.LowGPUUtilization())],
                                      disable_framework_metrics=True)
    assert request["ProfilerRuleConfigurations"][0]["RuleEvaluatorImage"].startswith("929884845733.dkr.ecr.eu-west-1.")
    assert request["ProfilerConfig"] == {"DisableProfiler": False, "ProfilingParameters": {}}
    with pytest.raises(DebuggerConfigError) as info:
        update_profiler_request(enabled, rules=[Rule.sagemaker(rule_configs.overfit())],
                                framework_profile_params=dbg.FrameworkProfile(), disable_framework_metrics=True)
    assert len(info.value.problems) == 2
    with pytest.raises(DebuggerConfigError, match="(?i)nothing to update"):
        update_profiler_request(enabled)
    with pytest.raises(DebuggerConfigError, match="does not support"):
        enable_default_profiling_request(job, region="ap-southeast-3")
