"""Code written for ``sagemaker.debugger`` (SDK v2 2.257.x) runs with the prefix changed.

Every import below is a v2 import with ``sagemaker.debugger`` replaced by ``sdk_ext.debugger``.
"""

from __future__ import annotations

import importlib
import re
import warnings
from typing import Any

import pytest

from sdk_ext.debugger import DEBUGGER_FLAG, Rule, apply_debugger, framework_name, get_rule_container_image_uri
from sdk_ext.debugger.debugger import CollectionConfig, ProfilerRule, rule_configs
from sdk_ext.debugger.framework_profile import FrameworkProfile
from sdk_ext.debugger.metrics_config import (
    DataloaderProfilingConfig,
    DetailedProfilingConfig,
    HorovodProfilingConfig,
    PythonProfilingConfig,
    SMDataParallelProfilingConfig,
    StepRange,
    TimeRange,
)
from sdk_ext.debugger.profiler_config import Profiler, ProfilerConfig
from sdk_ext.debugger.profiler_constants import (
    DETAILED_PROFILING_START_STEP_DEFAULT,
    PROFILING_NUM_STEPS_DEFAULT,
    PYTHON_PROFILING_NUM_STEPS_DEFAULT,
)
from sdk_ext.debugger.update import update_profiler_request
from sdk_ext.debugger.utils import ErrorMessages, PythonProfiler, cProfileTimer

# Public names of sagemaker 2.257.6's sagemaker.debugger package and submodules (read from the installed SDK;
# names it merely imports from elsewhere - typing, attr, sagemaker.utils - are left out).
V2_NAMES = {
    "": "CollectionConfig DEBUGGER_FLAG DebuggerHookConfig framework_name get_default_profiler_processing_job "
        "get_rule_container_image_uri ProfilerRule Rule RuleBase rule_configs TensorBoardOutputConfig FrameworkProfile "
        "Profiler DataloaderProfilingConfig DetailedProfilingConfig SMDataParallelProfilingConfig "
        "HorovodProfilingConfig PythonProfilingConfig ProfilerConfig PythonProfiler cProfileTimer profiler_constants "
        "debugger utils metrics_config framework_profile profiler profiler_config",
    "debugger": "rule_configs DETAIL_PROF_PROCESSING_DEFAULT_INSTANCE_TYPE DETAIL_PROF_PROCESSING_DEFAULT_VOLUME_SIZE "
                "framework_name detailed_framework_name DEBUGGER_FLAG DetailedProfilerProcessingJobConfig "
                "get_rule_container_image_uri get_default_profiler_processing_job RuleBase Rule ProfilerRule "
                "DebuggerHookConfig TensorBoardOutputConfig CollectionConfig",
    "framework_profile": "DetailedProfilingConfig DataloaderProfilingConfig SMDataParallelProfilingConfig "
                         "HorovodProfilingConfig PythonProfilingConfig BASE_FOLDER_DEFAULT CLOSE_FILE_INTERVAL_DEFAULT "
                         "FILE_OPEN_FAIL_THRESHOLD_DEFAULT MAX_FILE_SIZE_DEFAULT ErrorMessages ALL_METRIC_CONFIGS "
                         "FrameworkProfile",
    "metrics_config": "DATALOADER_PROFILING_CONFIG_NAME DATALOADER_PROFILING_START_STEP_DEFAULT "
                      "DETAILED_PROFILING_CONFIG_NAME DETAILED_PROFILING_START_STEP_DEFAULT "
                      "SMDATAPARALLEL_PROFILING_CONFIG_NAME SMDATAPARALLEL_PROFILING_START_STEP_DEFAULT "
                      "HOROVOD_PROFILING_CONFIG_NAME HOROVOD_PROFILING_START_STEP_DEFAULT PROFILING_NUM_STEPS_DEFAULT "
                      "PYTHON_PROFILING_CONFIG_NAME PYTHON_PROFILING_NUM_STEPS_DEFAULT PYTHON_PROFILING_START_STEP_DEFAULT "
                      "START_STEP_DEFAULT convert_json_config_to_string cProfileTimer is_valid_regex is_valid_unix_time "
                      "ErrorMessages PythonProfiler StepRange TimeRange MetricsConfigBase DetailedProfilingConfig "
                      "DataloaderProfilingConfig PythonProfilingConfig HorovodProfilingConfig "
                      "SMDataParallelProfilingConfig",
    "profiler": "FILE_ROTATION_INTERVAL_DEFAULT CPU_PROFILING_DURATION DETAIL_PROF_PROCESSING_DEFAULT_INSTANCE_TYPE "
                "DETAIL_PROF_PROCESSING_DEFAULT_VOLUME_SIZE Profiler",
    "profiler_config": "FrameworkProfile Profiler logger ProfilerConfig",
    "profiler_constants": "BASE_FOLDER_DEFAULT MAX_FILE_SIZE_DEFAULT CLOSE_FILE_INTERVAL_DEFAULT "
                          "FILE_OPEN_FAIL_THRESHOLD_DEFAULT DETAILED_PROFILING_CONFIG_NAME DATALOADER_PROFILING_CONFIG_NAME "
                          "PYTHON_PROFILING_CONFIG_NAME HOROVOD_PROFILING_CONFIG_NAME SMDATAPARALLEL_PROFILING_CONFIG_NAME "
                          "DETAILED_PROFILING_START_STEP_DEFAULT DATALOADER_PROFILING_START_STEP_DEFAULT "
                          "PYTHON_PROFILING_START_STEP_DEFAULT HOROVOD_PROFILING_START_STEP_DEFAULT "
                          "SMDATAPARALLEL_PROFILING_START_STEP_DEFAULT PROFILING_NUM_STEPS_DEFAULT START_STEP_DEFAULT "
                          "PYTHON_PROFILING_NUM_STEPS_DEFAULT CPU_PROFILING_DURATION FILE_ROTATION_INTERVAL_DEFAULT "
                          "DETAIL_PROF_PROCESSING_DEFAULT_INSTANCE_TYPE DETAIL_PROF_PROCESSING_DEFAULT_VOLUME_SIZE",
    "utils": "convert_json_config_to_string is_valid_unix_time is_valid_regex ErrorMessages PythonProfiler cProfileTimer",
}

REQUEST: dict[str, Any] = {"TrainingJobName": "j", "OutputDataConfig": {"S3OutputPath": "s3://b/out"},
                           "ResourceConfig": {"InstanceCount": 1, "InstanceType": "ml.p3.2xlarge", "VolumeSizeInGB": 30}}


# --- 11. v2's module paths and every public name ----------------------------------------------------------


@pytest.mark.parametrize("module", sorted(V2_NAMES))
def test_every_public_name_of_v2_exists_at_the_same_path(module: str) -> None:
    path = "sdk_ext.debugger" + (f".{module}" if module else "")
    found = importlib.import_module(path)
    missing = [name for name in V2_NAMES[module].split() if not hasattr(found, name)]
    assert not missing, f"{path} lacks {missing}"


def test_v2_constants_have_v2_values() -> None:
    assert DEBUGGER_FLAG == "USE_SMDEBUG" and framework_name == "debugger"
    from sdk_ext.debugger.debugger import detailed_framework_name
    from sdk_ext.debugger.profiler_constants import (
        CPU_PROFILING_DURATION,
        DETAIL_PROF_PROCESSING_DEFAULT_VOLUME_SIZE,
    )

    assert detailed_framework_name == "detailed-profiler"
    assert (CPU_PROFILING_DURATION, DETAIL_PROF_PROCESSING_DEFAULT_VOLUME_SIZE) == (3600, 128)
    assert get_rule_container_image_uri("DetailedProfilerProcessingJobConfig", "us-west-2").endswith(
        "detailed-profiler-processing:latest")


# --- 10. StepRange, TimeRange and .range ------------------------------------------------------------------


def test_metrics_configs_expose_their_range() -> None:
    detailed = DetailedProfilingConfig()
    assert isinstance(detailed.range, StepRange)
    assert (detailed.range.start_step, detailed.range.num_steps) == (DETAILED_PROFILING_START_STEP_DEFAULT,
                                                                     PROFILING_NUM_STEPS_DEFAULT)
    python = PythonProfilingConfig(profile_default_steps=True)
    assert python.range.num_steps == PYTHON_PROFILING_NUM_STEPS_DEFAULT and python.cprofile_timer is cProfileTimer.DEFAULT
    timed = DataloaderProfilingConfig(start_unix_time=1_700_000_000, duration=30)
    assert isinstance(timed.range, TimeRange)
    assert timed.range.to_json() == {"StartTimeInSecSinceEpoch": 1_700_000_000, "Duration": 30}
    assert timed.to_json_string() == '{"StartTimeInSecSinceEpoch": 1700000000, "Duration": 30, "MetricsRegex": ".*", }'


def test_step_and_time_ranges_fill_in_as_v2() -> None:
    assert StepRange(None, 4).to_json() == {"StartStep": 0, "NumSteps": 4}
    assert StepRange(3, None).to_json() == {"StartStep": 3, "NumSteps": 1}
    assert TimeRange(None, 12.5).to_json() == {"Duration": 12.5}
    assert HorovodProfilingConfig(start_step=2).range.to_json() == {"StartStep": 2, "NumSteps": 1}


# --- 12. v2's error text, then what, where and how to fix ------------------------------------------------


@pytest.mark.parametrize("make, message", [
    (lambda: FrameworkProfile(local_path=10), ErrorMessages.INVALID_LOCAL_PATH),
    (lambda: FrameworkProfile(file_max_size=100.5), ErrorMessages.INVALID_FILE_MAX_SIZE),
    (lambda: FrameworkProfile(file_close_interval=-1), ErrorMessages.INVALID_FILE_CLOSE_INTERVAL),
    (lambda: FrameworkProfile(file_open_fail_threshold=2.3), ErrorMessages.INVALID_FILE_OPEN_FAIL_THRESHOLD),
    (lambda: FrameworkProfile(start_step=6.8), ErrorMessages.INVALID_START_STEP),
    (lambda: FrameworkProfile(num_steps=0), ErrorMessages.INVALID_NUM_STEPS),
    (lambda: FrameworkProfile(start_unix_time=99999999999999), ErrorMessages.INVALID_START_UNIX_TIME),
    (lambda: FrameworkProfile(duration=0), ErrorMessages.INVALID_DURATION),
    (lambda: FrameworkProfile(start_step=5, duration=20), ErrorMessages.FOUND_BOTH_STEP_AND_TIME_FIELDS),
    (lambda: DataloaderProfilingConfig(metrics_regex="*"), ErrorMessages.INVALID_METRICS_REGEX),
    (lambda: SMDataParallelProfilingConfig(profile_default_steps="yes"), ErrorMessages.INVALID_PROFILE_DEFAULT_STEPS),
    (lambda: PythonProfilingConfig(python_profiler="bad", profile_default_steps=True),
     ErrorMessages.INVALID_PYTHON_PROFILER),
    (lambda: PythonProfilingConfig(cprofile_timer="bad"), ErrorMessages.INVALID_CPROFILE_TIMER),
])
def test_profiling_errors_match_v2s_message_and_say_what_was_given(make: Any, message: ErrorMessages) -> None:
    with pytest.raises(AssertionError, match=message.value) as info:  # v2 asserted; the same except clause works
        make()
    assert "Got " in str(info.value)


@pytest.mark.parametrize("make, exc, v2_text, ours", [
    (lambda: ProfilerConfig(framework_profile_params=FrameworkProfile(), profile_params=Profiler()), ValueError,
     "Profiler will not work when Framework Profiler is ON", "keep one"),
    (lambda: ProfilerConfig(profile_params={"CPUProfilingDuration": "60"}), AssertionError,
     "profile_params must be of type Profiler if specified.", "pass Profiler(...)"),
    (lambda: ProfilerConfig(framework_profile_params="default"), AssertionError,
     "framework_profile_params must be of type FrameworkProfile if specified.", "pass FrameworkProfile(...)"),
    (lambda: Rule.custom("r", "img", "ml.m5.xlarge", 30, source="s3://b/r.py"), ValueError,
     "If you provide a source, you must also provide a rule to invoke (and vice versa).", "rule_to_invoke is not"),
    (lambda: Rule.sagemaker(rule_configs.overfit(), rule_parameters={"rule_to_invoke": "X"}), RuntimeError,
     "You cannot provide a 'rule_to_invoke' for SageMaker rules.", "Rule.custom(source=..."),
    (lambda: Rule.sagemaker(rule_configs.overfit(), actions="stop"), RuntimeError,
     "`actions` must be of type `Action` or `ActionList`!", "rule_configs.StopTraining()"),
    (lambda: CollectionConfig("w") == "w", TypeError,
     "CollectionConfig is only comparable with other CollectionConfig objects.", "compare the .name"),
    (lambda: apply_debugger(REQUEST, rules=[rule_configs.overfit()], region="us-west-2"), RuntimeError,
     "Rules list can only contain sagemaker.debugger.Rule and sagemaker.debugger.ProfilerRule", "rules[0] is a dict"),
    (lambda: apply_debugger(REQUEST, disable_profiler=True, rules=[ProfilerRule.sagemaker(rule_configs.CPUBottleneck())],
                            region="us-west-2"), RuntimeError,
     "ProfilerRule cannot be set when disable_profiler is True.", "remove them"),
    (lambda: apply_debugger(REQUEST, rules=[Rule.sagemaker(rule_configs.overfit())], region="il-central-1"),
     ValueError, "Unsupported region: il-central-1.", "Supported region(s): af-south-1"),
    (lambda: update_profiler_request({"TrainingJobName": "j"}, region="us-west-2"), ValueError,
     "Please provide profiler config or profiler rule to be updated.", "give rules"),
])
def test_sdk_errors_start_with_v2s_text_then_say_how_to_fix(make: Any, exc: type[Exception], v2_text: str,
                                                             ours: str) -> None:
    with pytest.raises(exc, match=re.escape(v2_text)) as info:
        make()
    assert ours in str(info.value)


# --- 13. framework profiling on PyTorch >= 2.0 / TensorFlow >= 2.12 is deprecated -------------------------


def test_framework_profile_gives_v2s_deprecation_warning() -> None:
    with pytest.warns(DeprecationWarning, match="Framework profiling will be deprecated from tensorflow 2.12 and "
                                                "pytorch 2.0"):
        ProfilerConfig(framework_profile_params=FrameworkProfile())


def _framework_warnings(**kwargs: Any) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config = ProfilerConfig(framework_profile_params=FrameworkProfile())
        apply_debugger(REQUEST | kwargs.pop("request", {}), profiler_config=config, region="us-west-2", **kwargs)
    return [str(w.message) for w in caught
            if issubclass(w.category, DeprecationWarning) and "Framework profiling is deprecated" in str(w.message)]


@pytest.mark.parametrize("framework, version, warned", [
    ("pytorch", "1.13.1", False), ("pytorch", "2.0", True), ("pytorch", "2.3.0", True),
    ("tensorflow", "2.11.0", False), ("tensorflow", "2.12", True), ("mxnet", "1.9.0", False),
])
def test_framework_profiling_on_new_frameworks_warns_as_v2(framework: str, version: str, warned: bool) -> None:
    found = _framework_warnings(framework=framework, framework_version=version)
    assert bool(found) is warned
    if warned:
        assert f"from {framework} version {version}" in found[0] and "No framework metrics will be collected" in found[0]


def test_framework_version_is_read_from_the_training_image_tag() -> None:
    image = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1.0-gpu-py310"
    found = _framework_warnings(framework="pytorch", request={"AlgorithmSpecification": {"TrainingImage": image}})
    assert found and "pytorch version 2.1.0" in found[0]
    old = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:1.13.1-gpu-py39"
    assert not _framework_warnings(framework="pytorch", request={"AlgorithmSpecification": {"TrainingImage": old}})


def test_python_profiler_enum_round_trips() -> None:
    config = PythonProfilingConfig(start_step=1, num_steps=2, python_profiler=PythonProfiler.PYINSTRUMENT)
    assert config.cprofile_timer is None
    assert config.to_json_string() == '{"StartStep": 1, "NumSteps": 2, "ProfilerName": "pyinstrument", }'
