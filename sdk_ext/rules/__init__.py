"""Rules: judge a trial step by step. smdebug's interface (``Rule``, ``invoke_rule``) and the
SageMaker built-in tensor rules by their SageMaker names.

    from sdk_ext.rules import Rule, invoke_rule           # was: from smdebug.rules import ...
    from sdk_ext.rules import VanishingGradient
    from sdk_ext.trials import create_trial

    invoke_rule(VanishingGradient(create_trial(path), threshold="1e-6"), raise_eval_cond=True)

``rules/evaluate.py`` (the rule container's entry point) runs one rule live against a training job.
"""

from sdk_ext.rules.builtin import (
    BUILTIN_RULES,
    AllZero,
    BuiltinRule,
    CheckInputImages,
    ClassImbalance,
    Confusion,
    DeadRelu,
    ExplodingTensor,
    FeatureImportanceOverweight,
    LossNotDecreasing,
    NLPSequenceRatio,
    Overfit,
    Overtraining,
    PoorWeightInitialization,
    SaturatedActivation,
    SimilarAcrossRuns,
    StalledTrainingRule,
    TensorVariance,
    TreeDepth,
    UnchangedTensor,
    VanishingGradient,
    WeightUpdateRatio,
    get_builtin_rule,
)
from sdk_ext.rules.req_tensors import RequiredTensors
from sdk_ext.rules.rule import Rule
from sdk_ext.rules.rule_invoker import invoke_rule

__all__ = [
    "BUILTIN_RULES",
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
    "RequiredTensors",
    "Rule",
    "SaturatedActivation",
    "SimilarAcrossRuns",
    "StalledTrainingRule",
    "TensorVariance",
    "TreeDepth",
    "UnchangedTensor",
    "VanishingGradient",
    "WeightUpdateRatio",
    "get_builtin_rule",
    "invoke_rule",
]
