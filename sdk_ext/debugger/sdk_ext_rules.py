"""Base configs of sdk_ext's own built-in rules, shaped like ``rule_configs.<rule>()``.

    from sdk_ext.debugger import Rule, replica_divergence
    Rule.sagemaker(replica_divergence(), rule_parameters={"rtol": "1e-4"})

The payload is a built-in rule's (``RuleParameters`` with ``rule_to_invoke``, strings only)::

    {"RuleConfigurationName": "ReplicaDivergence",
     "RuleEvaluatorImage": "<image>",
     "RuleParameters": {"rule_to_invoke": "ReplicaDivergence", "collection_names": "weights,biases",
                        "rtol": "1e-05", "atol": "1e-08"}}

SageMaker's rule image (``sagemaker-debugger-rules``) does not have these rules: sdk_ext's evaluator
runs them, locally (``sdk-ext run``, ``sdk_ext.local``) or on SageMaker from the image that
``rules/Dockerfile`` builds, pushed to your ECR: ``replica_divergence(image_uri="<account>.dkr.ecr.
<region>.amazonaws.com/<repository>:<tag>")``. Without ``image_uri``, ``apply_debugger`` fills in
SageMaker's image as for every built-in and warns (:class:`SdkExtRuleImageWarning`) that the rule
would end in Error there.

The rule compares the workers' copies, so the hook must save from every worker: set
``hook_parameters={"include_workers": "all"}`` in the DebuggerHookConfig (``sdk-ext run --rule
ReplicaDivergence`` does it unless ``--hook-param include_workers=...`` says otherwise).
"""

from __future__ import annotations

from typing import Any

REPLICA_DIVERGENCE = "ReplicaDivergence"
#: The names of sdk_ext's own built-in rules.
SDK_EXT_RULE_NAMES = (REPLICA_DIVERGENCE,)


class SdkExtRuleImageWarning(UserWarning):
    """An sdk_ext rule was given SageMaker's rule image, which does not have it."""


def replica_divergence(*, image_uri: str | None = None) -> dict[str, Any]:
    """ReplicaDivergence: data-parallel replicas whose weights should be identical drift apart.

    Args:
        image_uri: sdk_ext's rule-evaluator image in your ECR, for a job on SageMaker.
    """
    rule: dict[str, Any] = {"RuleConfigurationName": REPLICA_DIVERGENCE}
    if image_uri is not None:
        rule["RuleEvaluatorImage"] = image_uri
    rule["RuleParameters"] = {"rule_to_invoke": REPLICA_DIVERGENCE, "collection_names": "weights,biases",
                              "rtol": "1e-05", "atol": "1e-08"}
    return {"DebugRuleConfiguration": rule,
            "CollectionConfigurations": [{"CollectionName": "weights"}, {"CollectionName": "biases"}]}


__all__ = ["REPLICA_DIVERGENCE", "SDK_EXT_RULE_NAMES", "SdkExtRuleImageWarning", "replica_divergence"]
