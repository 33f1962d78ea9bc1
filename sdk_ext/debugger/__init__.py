"""SageMaker Debugger configuration for training jobs, for SageMaker SDK v3, v2 and plain boto3.

The names and signatures of ``sagemaker.debugger`` (v2), so porting is changing the import prefix,
plus :func:`apply_debugger` (a CreateTrainingJob request in, the request with Debugger configured
out), :func:`attach` (do that for every job a boto3 session or client sends: the way to use
Debugger with v3's ModelTrainer) and helpers that read a job's Debugger state back.

This package only builds requests; it imports nothing of the training-container side.
"""

import smdebug_rulesconfig as rule_configs

from sdk_ext.debugger import (  # v2's submodule paths: sagemaker.debugger.<module> ports by prefix
    debugger,
    framework_profile,
    metrics_config,
    profiler,
    profiler_config,
    profiler_constants,
    utils,
)
from sdk_ext.debugger.apply import DEBUGGER_KEYS, apply_debugger
from sdk_ext.debugger.artifacts import (
    RuleWaitTimeout,
    debugger_artifacts_path,
    profiler_artifacts_path,
    rule_statuses,
    tensorboard_artifacts_path,
    wait_for_rules,
)
from sdk_ext.debugger.attach import Attachment, attach
from sdk_ext.debugger.collection import CollectionConfig
from sdk_ext.debugger.debugger import DEBUGGER_FLAG, framework_name
from sdk_ext.debugger.errors import DebuggerConfigError
from sdk_ext.debugger.framework_profile import (
    DataloaderProfilingConfig,
    DetailedProfilingConfig,
    FrameworkProfile,
    HorovodProfilingConfig,
    PythonProfiler,
    PythonProfilingConfig,
    SMDataParallelProfilingConfig,
    cProfileTimer,
)
from sdk_ext.debugger.hook_config import DebuggerHookConfig, TensorBoardOutputConfig
from sdk_ext.debugger.images import get_rule_container_image_uri
from sdk_ext.debugger.profiler import Profiler, ProfilerConfig
from sdk_ext.debugger.rules import (
    DEFAULT_RULE_EVALUATOR_IMAGE,
    ProfilerRule,
    Rule,
    RuleBase,
    get_default_profiler_processing_job,
)
from sdk_ext.debugger.sdk_ext_rules import SdkExtRuleImageWarning, replica_divergence
from sdk_ext.debugger.sources import RuleSourceUploader, S3RuleSourceUploader
from sdk_ext.debugger.update import (
    disable_profiling_request,
    enable_default_profiling_request,
    update_profiler_request,
)

__all__ = [
    "DEBUGGER_FLAG",
    "DEBUGGER_KEYS",
    "DEFAULT_RULE_EVALUATOR_IMAGE",
    "Attachment",
    "CollectionConfig",
    "DataloaderProfilingConfig",
    "DebuggerConfigError",
    "DebuggerHookConfig",
    "DetailedProfilingConfig",
    "FrameworkProfile",
    "HorovodProfilingConfig",
    "Profiler",
    "ProfilerConfig",
    "ProfilerRule",
    "PythonProfiler",
    "PythonProfilingConfig",
    "Rule",
    "RuleBase",
    "SdkExtRuleImageWarning",
    "RuleSourceUploader",
    "RuleWaitTimeout",
    "S3RuleSourceUploader",
    "SMDataParallelProfilingConfig",
    "TensorBoardOutputConfig",
    "apply_debugger",
    "attach",
    "cProfileTimer",
    "debugger",
    "debugger_artifacts_path",
    "disable_profiling_request",
    "enable_default_profiling_request",
    "framework_name",
    "framework_profile",
    "get_default_profiler_processing_job",
    "get_rule_container_image_uri",
    "metrics_config",
    "profiler",
    "profiler_artifacts_path",
    "profiler_config",
    "profiler_constants",
    "replica_divergence",
    "rule_configs",
    "rule_statuses",
    "tensorboard_artifacts_path",
    "update_profiler_request",
    "utils",
    "wait_for_rules",
]
