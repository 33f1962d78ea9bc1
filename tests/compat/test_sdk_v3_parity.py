"""Differential check against the SDK's own classes, beyond the oracle's cases.

SageMaker SDK v3 still ships v2's Debugger classes, unused, as ``sagemaker.core.debugger`` (the same
code as 2.257.7 apart from imports). Every configuration below is built with
both libraries and must give the same request dicts, or fail in both (sdk_ext's error being an
instance of the SDK's exception type). Configurations where sdk_ext rejects on purpose what the SDK
let through (non-string debugger rule parameters, non-S3 paths) are not generated here; they have
their own tests in tests/unit/debugger.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
import smdebug_rulesconfig as rule_configs
from smdebug_rulesconfig.profiler_rules import rules as profiler_rules

import sdk_ext.debugger as ours

sdk = pytest.importorskip("sagemaker.core.debugger", reason="needs the sagemaker extra (SageMaker SDK v3)")

DEBUGGER_RULES = ["all_zero", "check_input_images", "class_imbalance", "confusion", "create_xgboost_report",
                  "dead_relu", "exploding_tensor", "feature_importance_overweight", "loss_not_decreasing",
                  "nlp_sequence_ratio", "overfit", "overtraining", "poor_weight_initialization",
                  "saturated_activation", "similar_across_runs", "stalled_training_rule", "tensor_variance",
                  "tree_depth", "unchanged_tensor", "vanishing_gradient", "weight_update_ratio"]
PROFILER_RULES = ["BatchSize", "CPUBottleneck", "Dataloader", "GPUMemoryIncrease", "IOBottleneck", "LoadBalancing",
                  "LowGPUUtilization", "MaxInitializationTime", "OverallSystemUsage", "StepOutlier", "ProfilerReport"]
REGIONS = ["af-south-1", "ap-east-1", "ap-northeast-1", "ap-northeast-2", "ap-northeast-3", "ap-south-1",
           "ap-south-2", "ap-southeast-1", "ap-southeast-2", "ap-southeast-3", "ap-southeast-4", "ca-central-1",
           "cn-north-1", "cn-northwest-1", "eu-central-1", "eu-central-2", "eu-north-1", "eu-south-1", "eu-south-2",
           "eu-west-1", "eu-west-2", "eu-west-3", "il-central-1", "me-central-1", "me-south-1", "sa-east-1",
           "us-east-1", "us-east-2", "us-gov-east-1", "us-gov-west-1", "us-iso-east-1", "us-west-1", "us-west-2"]

Build = Callable[[Any], Any]


def _actions() -> list[Any]:
    return [None, rule_configs.StopTraining(), rule_configs.StopTraining("exp-1"),
            rule_configs.ActionList(rule_configs.StopTraining(), rule_configs.Email("abc@example.com"),
                                    rule_configs.SMS("+15555550100"))]


def _rule_cases() -> list[tuple[str, Build]]:
    cases: list[tuple[str, Build]] = []
    for fn in DEBUGGER_RULES:
        cases.append((f"Rule.sagemaker.{fn}", lambda lib, fn=fn: lib.Rule.sagemaker(getattr(rule_configs, fn)())))
    for i, actions in enumerate(_actions()):
        cases.append((f"Rule.sagemaker.full.{i}", lambda lib, actions=actions: lib.Rule.sagemaker(
            rule_configs.loss_not_decreasing(), name="MyLoss", container_local_output_path="/opt/ml/rule",
            s3_output_path="s3://b/rule", other_trials_s3_input_paths=["s3://b/a", "s3://b/c"],
            rule_parameters={"num_steps": "10", "action_json": "[]"},
            collections_to_save=[lib.CollectionConfig("losses", {"save_interval": "1"})], actions=actions)))
    for volume, source in itertools.product([0, 25], [None, "s3://b/r.py"]):
        cases.append((f"Rule.custom.{volume}.{source}", lambda lib, volume=volume, source=source: lib.Rule.custom(
            "Mine", "img:1", "ml.m5.xlarge", volume, source=source, rule_to_invoke="Mine" if source else None,
            other_trials_s3_input_paths=["s3://b/t"], rule_parameters={"a": "1"},
            collections_to_save=[lib.CollectionConfig("x")], actions=rule_configs.StopTraining())))
    cases.append(("Rule.custom.xor", lambda lib: lib.Rule.custom("X", "img", "ml.m5.xlarge", 1, source="s3://b/r")))
    cases.append(("Rule.sagemaker.rule_to_invoke", lambda lib: lib.Rule.sagemaker(
        rule_configs.overfit(), rule_parameters={"rule_to_invoke": "Other"})))
    cases.append(("Rule.sagemaker.bad_actions", lambda lib: lib.Rule.sagemaker(rule_configs.overfit(), actions=[1])))
    for cls in PROFILER_RULES:
        cases.append((f"ProfilerRule.sagemaker.{cls}", lambda lib, cls=cls: lib.ProfilerRule.sagemaker(
            getattr(rule_configs, cls, None)() if hasattr(rule_configs, cls) else getattr(profiler_rules, cls)())))
    cases.append(("ProfilerRule.sagemaker.kwargs", lambda lib: lib.ProfilerRule.sagemaker(
        rule_configs.ProfilerReport(CPUBottleneck_threshold=5, stepoutlier_mode="EVAL"), name="Report",
        s3_output_path="s3://b/p", instance_type="ml.m5.xlarge", volume_size_in_gb=3)))
    cases.append(("ProfilerRule.sagemaker.step_outlier", lambda lib: lib.ProfilerRule.sagemaker(
        rule_configs.StepOutlier(stddev=2, mode="TRAIN", n_outliers=3))))
    cases.append(("ProfilerRule.custom", lambda lib: lib.ProfilerRule.custom(
        "P", "img:2", "ml.m5.large", 7, source="s3://b/p.py", rule_to_invoke="P", rule_parameters={"x": 1.5, "y": None})))
    return cases


def _rule_view(rule: Any) -> dict[str, Any]:
    view = {f: getattr(rule, f) for f in ("name", "image_uri", "instance_type", "container_local_output_path",
                                           "s3_output_path", "volume_size_in_gb")}
    view["parameters_before"] = dict(rule.rule_parameters)
    if hasattr(rule, "collection_configs"):
        view["collections"] = [c._to_request_dict() for c in rule.collection_configs]
        view["request"] = copy.deepcopy(rule.to_debugger_rule_config_dict())  # the SDK's shares its dicts
        rule.prepare_actions("job-1")  # the SDK changes the rule in place; sdk_ext returns the prepared copy
        prepared = rule if rule.__class__.__module__.startswith("sagemaker") else rule.prepare_actions("job-1")
        view["prepared"] = prepared.to_debugger_rule_config_dict()
    else:
        view["request"] = rule.to_profiler_rule_config_dict()
    return view


def _profiling_cases() -> list[tuple[str, Build]]:
    cases: list[tuple[str, Build]] = []
    names = ["DetailedProfilingConfig", "DataloaderProfilingConfig", "PythonProfilingConfig",
             "HorovodProfilingConfig", "SMDataParallelProfilingConfig"]
    ranges: list[dict[str, Any]] = [{}, {"start_step": 3}, {"num_steps": 4}, {"start_step": 2, "num_steps": 6},
                                    {"start_unix_time": 1700000000}, {"duration": 12.5},
                                    {"start_unix_time": 1700000000, "duration": 60}, {"profile_default_steps": True},
                                    {"start_step": 1, "profile_default_steps": True}, {"start_step": -1},
                                    {"num_steps": 0}, {"start_step": 1, "duration": 3}, {"start_unix_time": 1.5},
                                    {"duration": 0}, {"profile_default_steps": "yes"}]
    for name, kwargs in itertools.product(names, ranges):
        cases.append((f"{name}.{kwargs}", lambda lib, name=name, kwargs=kwargs: getattr(lib, name)(**kwargs)))
    for profiler, timer in itertools.product(["CPROFILE", "PYINSTRUMENT"], ["TOTAL_TIME", "CPU_TIME", "OFF_CPU_TIME"]):
        cases.append((f"Python.{profiler}.{timer}", lambda lib, p=profiler, t=timer: lib.PythonProfilingConfig(
            start_step=4, python_profiler=lib.PythonProfiler[p], cprofile_timer=lib.cProfileTimer[t])))
    cases.append(("Python.bad_profiler", lambda lib: lib.PythonProfilingConfig(python_profiler="cprofile")))
    cases.append(("Dataloader.regex", lambda lib: lib.DataloaderProfilingConfig(metrics_regex="Data.*")))
    cases.append(("Dataloader.bad_regex", lambda lib: lib.DataloaderProfilingConfig(metrics_regex="(")))
    frameworks: list[dict[str, Any]] = [{}, {"start_step": 4}, {"start_step": 1, "num_steps": 2},
                                        {"start_unix_time": 1700000000, "duration": 5}, {"file_max_size": 5,
                                        "file_close_interval": 2.5, "file_open_fail_threshold": 3,
                                        "local_path": "/x"}, {"file_max_size": 0}, {"file_close_interval": -1},
                                        {"local_path": 3}, {"file_open_fail_threshold": 0}, {"start_step": -2}]
    for i, kwargs in enumerate(frameworks):
        cases.append((f"FrameworkProfile.{i}", lambda lib, kwargs=kwargs: lib.FrameworkProfile(**kwargs)))
    cases.append(("FrameworkProfile.configs", lambda lib: lib.FrameworkProfile(
        horovod_profiling_config=lib.HorovodProfilingConfig(start_step=3),
        smdataparallel_profiling_config=lib.SMDataParallelProfilingConfig(duration=9))))
    for s3, interval, disable, params in itertools.product([None, "s3://b/p"], [None, 500], [False, True],
                                                          [None, "profiler", "framework"]):
        def build(lib: Any, s3: Any = s3, interval: Any = interval, disable: Any = disable, params: Any = params) -> Any:
            extra = {"profile_params": lib.Profiler(cpu_profiling_duration=10)} if params == "profiler" else (
                {"framework_profile_params": lib.FrameworkProfile(start_step=2)} if params == "framework" else {})
            return lib.ProfilerConfig(s3_output_path=s3, system_monitor_interval_millis=interval,
                                      disable_profiler=disable, **extra)
        cases.append((f"ProfilerConfig.{s3}.{interval}.{disable}.{params}", build))
    cases.append(("ProfilerConfig.both", lambda lib: lib.ProfilerConfig(profile_params=lib.Profiler(),
                                                                        framework_profile_params=lib.FrameworkProfile())))
    cases.append(("ProfilerConfig.bad_profile_params", lambda lib: lib.ProfilerConfig(profile_params={})))
    cases.append(("Profiler", lambda lib: lib.Profiler(cpu_profiling_duration=5, file_rotation_interval="7")))
    return cases


def _view(obj: Any) -> Any:
    if isinstance(obj, (str, dict)):
        return obj
    if hasattr(obj, "rule_parameters"):
        return _rule_view(obj)
    if hasattr(obj, "to_json_string"):
        return (obj.name, obj.to_json_string())
    if hasattr(obj, "_to_request_dict"):
        return obj._to_request_dict()
    return dict(obj.profiling_parameters)


def _hook_cases() -> list[tuple[str, Build]]:
    return [
        ("Collection.none", lambda lib: lib.CollectionConfig("a")),
        ("Collection.params", lambda lib: lib.CollectionConfig("a", {"x": 1, "y": "2"})),
        ("Hook.empty", lambda lib: lib.DebuggerHookConfig()),
        ("Hook.full", lambda lib: lib.DebuggerHookConfig("s3://b/h", "/opt/x", {"a": 1}, [lib.CollectionConfig("c", {})])),
        ("TensorBoard", lambda lib: lib.TensorBoardOutputConfig("s3://b/tb", "/opt/tb")),
    ] + [(f"image.{region}.{name}", lambda lib, region=region, name=name: lib.get_rule_container_image_uri(name, region))
         for region in REGIONS for name in ("Overfit", "DetailedProfilerProcessingJobConfig-1")]


def _run(build: Build, lib: Any) -> tuple[str, Any]:
    try:
        return "ok", _view(build(lib))
    except Exception as err:  # noqa: BLE001 - both libraries' failures are compared below
        return "error", err


SDK_LIB = SimpleNamespace(**{name: getattr(sdk, name) for name in dir(sdk) if not name.startswith("_")})
CASES = _rule_cases() + _profiling_cases() + _hook_cases()


@pytest.mark.parametrize("build", [b for _, b in CASES], ids=[n for n, _ in CASES])
def test_same_result_as_the_sdk(build: Build) -> None:
    sdk_outcome, sdk_value = _run(build, SDK_LIB)
    our_outcome, our_value = _run(build, ours)
    if sdk_outcome == "error":
        assert our_outcome == "error", f"the SDK raised {sdk_value!r}, sdk_ext gave {our_value!r}"
        assert isinstance(our_value, type(sdk_value)), f"SDK {type(sdk_value).__name__}, ours {our_value!r}"
    else:
        assert our_outcome == "ok", f"sdk_ext raised {our_value!r}"
        assert our_value == sdk_value
