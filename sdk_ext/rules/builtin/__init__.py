"""The built-in tensor rules, one per module, by their SageMaker names (docs/RULES.md#built-in-tensor-rules).

Each rule's arithmetic is a pure function in its module (tested on its own); the class only
fetches values and decides. Parameters arrive as strings (SageMaker's RuleParameters) or as
Python values; a bad one raises a ConfigError naming the parameter and the value.
"""

from __future__ import annotations

import inspect

from sdk_ext.exceptions import ConfigError
from sdk_ext.rules.builtin.all_zero import AllZero
from sdk_ext.rules.builtin.base import BuiltinRule
from sdk_ext.rules.builtin.check_input_images import CheckInputImages
from sdk_ext.rules.builtin.class_imbalance import ClassImbalance
from sdk_ext.rules.builtin.confusion import Confusion
from sdk_ext.rules.builtin.dead_relu import DeadRelu
from sdk_ext.rules.builtin.exploding_tensor import ExplodingTensor
from sdk_ext.rules.builtin.feature_importance_overweight import FeatureImportanceOverweight
from sdk_ext.rules.builtin.loss_not_decreasing import LossNotDecreasing
from sdk_ext.rules.builtin.nlp_sequence_ratio import NLPSequenceRatio
from sdk_ext.rules.builtin.overfit import Overfit
from sdk_ext.rules.builtin.overtraining import Overtraining
from sdk_ext.rules.builtin.poor_weight_initialization import PoorWeightInitialization
from sdk_ext.rules.builtin.replica_divergence import ReplicaDivergence
from sdk_ext.rules.builtin.saturated_activation import SaturatedActivation
from sdk_ext.rules.builtin.similar_across_runs import SimilarAcrossRuns
from sdk_ext.rules.builtin.stalled_training_rule import StalledTrainingRule
from sdk_ext.rules.builtin.tensor_variance import TensorVariance
from sdk_ext.rules.builtin.tree_depth import TreeDepth
from sdk_ext.rules.builtin.unchanged_tensor import UnchangedTensor
from sdk_ext.rules.builtin.vanishing_gradient import VanishingGradient
from sdk_ext.rules.builtin.weight_update_ratio import WeightUpdateRatio

#: Rules of sdk_ext's own, run like the built-ins; SageMaker's rule image does not have them.
SDK_EXT_RULES: dict[str, type[BuiltinRule]] = {cls.__name__: cls for cls in (ReplicaDivergence,)}

#: SageMaker name -> class (SageMaker's built-in tensor rules, then sdk_ext's own).
BUILTIN_RULES: dict[str, type[BuiltinRule]] = {
    **{
        cls.__name__: cls
        for cls in (
            VanishingGradient, ExplodingTensor, SimilarAcrossRuns, WeightUpdateRatio, AllZero, UnchangedTensor,
            LossNotDecreasing, Overfit, Overtraining, TensorVariance, DeadRelu, SaturatedActivation,
            PoorWeightInitialization, ClassImbalance, Confusion, CheckInputImages, NLPSequenceRatio,
            StalledTrainingRule, FeatureImportanceOverweight, TreeDepth,
        )
    },
    **SDK_EXT_RULES,
}

#: SageMaker's profiler rules: they judge a job's profiler output, not a trial's tensors, and live in
#: sdk_ext.profiler.analysis.rules (the rule evaluator runs them by these names).
PROFILER_RULE_NAMES = (
    "LowGPUUtilization", "CPUBottleneck", "IOBottleneck", "GPUMemoryIncrease", "BatchSize", "LoadBalancing",
    "OverallSystemUsage", "StepOutlier", "MaxInitializationTime", "Dataloader", "OverallFrameworkMetrics",
    "ProfilerReport",
)

#: Rules SageMaker ships that this package does not evaluate (report builders and post-processing).
UNSUPPORTED_RULES = frozenset({"CreateXgboostReport", "DetailedProfilerProcessing"})

_NOT_PARAMETERS = {"base_trial", "other_trials"}


def get_builtin_rule(name: str) -> type[BuiltinRule]:
    """The built-in rule class named ``name`` (SageMaker's spelling; case and blanks ignored).

    Raises:
        ConfigError: no such built-in rule; the message lists the valid names.
    """
    wanted = name.strip().lower()
    for known, cls in BUILTIN_RULES.items():
        if known.lower() == wanted:
            return cls
    if any(wanted == n.lower() for n in PROFILER_RULE_NAMES):
        raise ConfigError(f"rule_to_invoke={name!r} is a profiler rule: it judges a job's profiler output, not a "
                          "trial's tensors (sdk_ext.profiler.analysis.rules; the rule evaluator runs it over the "
                          "profiler output); tensor rules: " + ", ".join(BUILTIN_RULES), where="rule")
    if any(wanted == n.lower() for n in UNSUPPORTED_RULES):
        raise ConfigError(f"rule_to_invoke={name!r} is a SageMaker report or post-processing job, which this "
                          "evaluator does not run; tensor rules: " + ", ".join(BUILTIN_RULES), where="rule")
    raise ConfigError(f"rule_to_invoke={name!r} is not a built-in rule; use one of: " + ", ".join(BUILTIN_RULES),
                      where="rule")


def rule_parameter_names(cls: type) -> list[str]:
    """The RuleParameters a rule class takes: its positional-or-keyword constructor parameters
    after ``base_trial`` (``other_trials`` excluded; keyword-only ones such as ``action_str`` are not
    RuleParameters)."""
    params = inspect.signature(cls).parameters.values()
    return [p.name for p in params
            if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and p.name not in _NOT_PARAMETERS]


__all__ = [
    "BUILTIN_RULES",
    "PROFILER_RULE_NAMES",
    "SDK_EXT_RULES",
    "UNSUPPORTED_RULES",
    "AllZero",
    "BuiltinRule",
    "CheckInputImages",
    "ClassImbalance",
    "Confusion",
    "DeadRelu",
    "ExplodingTensor",
    "FeatureImportanceOverweight",
    "LossNotDecreasing",
    "NLPSequenceRatio",
    "Overfit",
    "Overtraining",
    "PoorWeightInitialization",
    "ReplicaDivergence",
    "SaturatedActivation",
    "SimilarAcrossRuns",
    "StalledTrainingRule",
    "TensorVariance",
    "TreeDepth",
    "UnchangedTensor",
    "VanishingGradient",
    "WeightUpdateRatio",
    "get_builtin_rule",
    "rule_parameter_names",
]
