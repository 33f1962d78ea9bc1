"""``sagemaker.debugger.debugger``'s names: rules, hook and TensorBoard configs, and their constants.

The classes are defined in :mod:`sdk_ext.debugger.rules`, :mod:`~sdk_ext.debugger.hook_config` and
:mod:`~sdk_ext.debugger.collection`; this module gathers them under v2's module path, so
``from sagemaker.debugger.debugger import Rule`` ports by changing the prefix.
"""

from __future__ import annotations

import smdebug_rulesconfig as rule_configs

from sdk_ext.debugger.collection import CollectionConfig
from sdk_ext.debugger.hook_config import DebuggerHookConfig, TensorBoardOutputConfig
from sdk_ext.debugger.images import get_rule_container_image_uri
from sdk_ext.debugger.profiler_constants import (
    DETAIL_PROF_PROCESSING_DEFAULT_INSTANCE_TYPE,
    DETAIL_PROF_PROCESSING_DEFAULT_VOLUME_SIZE,
)
from sdk_ext.debugger.rules import (
    DetailedProfilerProcessingJobConfig,
    ProfilerRule,
    Rule,
    RuleBase,
    get_default_profiler_processing_job,
)

framework_name = "debugger"  # image-config name of the rule-evaluator image
detailed_framework_name = "detailed-profiler"  # image-config name of the detailed-profiler processing image
DEBUGGER_FLAG = "USE_SMDEBUG"  # SageMaker's environment flag name (v2 exports it; nothing sets it)

__all__ = [
    "DEBUGGER_FLAG",
    "DETAIL_PROF_PROCESSING_DEFAULT_INSTANCE_TYPE",
    "DETAIL_PROF_PROCESSING_DEFAULT_VOLUME_SIZE",
    "CollectionConfig",
    "DebuggerHookConfig",
    "DetailedProfilerProcessingJobConfig",
    "ProfilerRule",
    "Rule",
    "RuleBase",
    "TensorBoardOutputConfig",
    "detailed_framework_name",
    "framework_name",
    "get_default_profiler_processing_job",
    "get_rule_container_image_uri",
    "rule_configs",
]
