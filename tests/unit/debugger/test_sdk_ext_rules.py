"""sdk_ext's own built-in rules (ReplicaDivergence) configured like SageMaker's: payload, image, CLI."""

from __future__ import annotations

import inspect
import json
import warnings
from pathlib import Path

import pytest

from sdk_ext.debugger import (
    DebuggerConfigError,
    Rule,
    SdkExtRuleImageWarning,
    apply_debugger,
    replica_divergence,
    rule_configs,
)
from sdk_ext.rules import get_builtin_rule
from sdk_ext.rules.builtin import ReplicaDivergence

REQUEST = {"TrainingJobName": "job-1", "OutputDataConfig": {"S3OutputPath": "s3://bucket/out"},
           "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"}}


def test_payload_is_a_builtin_rules_with_string_parameters() -> None:
    rule = Rule.sagemaker(replica_divergence(), rule_parameters={"rtol": "1e-4"})
    assert rule.to_debugger_rule_config_dict() == {
        "RuleConfigurationName": "ReplicaDivergence",
        "RuleEvaluatorImage": "DEFAULT_RULE_EVALUATOR_IMAGE",
        "RuleParameters": {"rule_to_invoke": "ReplicaDivergence", "collection_names": "weights,biases",
                           "rtol": "1e-4", "atol": "1e-08"},
    }
    assert [c.name for c in rule.collection_configs] == ["weights", "biases"]
    # every default parameter is one the evaluator's class takes
    cls = get_builtin_rule(rule.rule_parameters["rule_to_invoke"])
    assert cls is ReplicaDivergence
    taken = set(inspect.signature(cls).parameters)
    assert set(rule.rule_parameters) - {"rule_to_invoke"} <= taken


def test_rule_configs_stays_smdebug_rulesconfig() -> None:
    assert not hasattr(rule_configs, "replica_divergence")


def test_apply_warns_that_sagemakers_image_lacks_it() -> None:
    with pytest.warns(SdkExtRuleImageWarning, match=r"SageMaker's rule image does not have it.*rules/Dockerfile"
                                                     r".*replica_divergence\(image_uri=...\)"):
        request = apply_debugger(REQUEST, rules=[Rule.sagemaker(replica_divergence())], region="us-west-2")
    (config,) = request["DebugRuleConfigurations"]
    assert config["RuleEvaluatorImage"].endswith("/sagemaker-debugger-rules:latest")


def test_an_image_of_sdk_exts_evaluator_is_sent_as_given() -> None:
    image = "123456789012.dkr.ecr.us-west-2.amazonaws.com/sdk-ext-rules:0.1"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        request = apply_debugger(REQUEST, rules=[Rule.sagemaker(replica_divergence(image_uri=image))],
                                 region="us-west-2")
    assert request["DebugRuleConfigurations"][0]["RuleEvaluatorImage"] == image
    assert request["DebugRuleConfigurations"][0]["RuleParameters"]["rule_to_invoke"] == "ReplicaDivergence"


def test_rule_to_invoke_cannot_be_overridden() -> None:
    with pytest.raises(DebuggerConfigError, match="rule_to_invoke"):
        Rule.sagemaker(replica_divergence(), rule_parameters={"rule_to_invoke": "X"})


def test_cli_rule_option_builds_it_and_saves_every_worker(tmp_path: Path) -> None:
    from sdk_ext.local.request.from_options import build_request

    script = tmp_path / "train.py"
    script.write_text("")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no image warning for a local job
        request = build_request(script=script, base=None, job_name="rd", rules=["replica_divergence"],
                                rule_params=["ReplicaDivergence:rtol=1e-3"])
    (config,) = request["DebugRuleConfigurations"]
    assert config["RuleParameters"]["rule_to_invoke"] == "ReplicaDivergence"
    assert config["RuleParameters"]["rtol"] == "1e-3"
    assert request["DebugHookConfig"]["HookParameters"]["include_workers"] == "all"
    chosen = build_request(script=script, base=None, job_name="rd", rules=["ReplicaDivergence"],
                           hook_params=["include_workers=one"])
    assert chosen["DebugHookConfig"]["HookParameters"]["include_workers"] == "one"
    json.dumps(request)  # a request.json as any other


def test_cli_lists_it_among_the_rules(tmp_path: Path) -> None:
    from sdk_ext.exceptions import ConfigError
    from sdk_ext.local.request.from_options import builtin_rule

    with pytest.raises(ConfigError, match="ReplicaDivergence"):
        builtin_rule("ReplicaDivergnce")
