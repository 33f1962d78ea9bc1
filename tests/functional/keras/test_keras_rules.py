"""The activation rules on trials written by real model.fit runs (torch and TensorFlow backends): DeadRelu,
SaturatedActivation and PoorWeightInitialization find the Keras hook's activation tensors with their default
parameters, fire on a broken model and stay quiet on a healthy one. Parameters as SageMaker gives them: none,
or strings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sdk_ext.exceptions import NoMoreData, RuleEvaluationConditionMet
from sdk_ext.rules import DeadRelu, PoorWeightInitialization, SaturatedActivation, invoke_rule
from sdk_ext.rules.factory import build_rule
from sdk_ext.trials import create_trial

BACKENDS = ["torch", "tensorflow"]


def judge(rule_cls: type, trial_dir: Path, params: dict[str, str] | None = None) -> tuple[int | None, Any]:
    rule = build_rule(rule_cls, create_trial(str(trial_dir)), params or {})
    try:
        invoke_rule(rule, raise_eval_cond=True, poll_interval=0.01)
    except RuleEvaluationConditionMet as fired:
        return fired.step, rule
    except NoMoreData:
        return None, rule
    raise AssertionError("invoke_rule returned without end_step: NoMoreData expected at the end of training")


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_dead_relu_fires_on_a_dense_relu_layer_that_never_activates(run_scenario, backend: str) -> None:
    trial, result = run_scenario(backend, "rules:graph:dead")
    assert result["failure"] == "None"
    step, rule = judge(DeadRelu, trial)
    assert step == 0
    assert "relu_output" in rule.issue and "100% of its units are dead" in rule.issue


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_dead_relu_finds_relu_layers_by_value_when_no_name_matches(run_scenario, backend: str) -> None:
    """A regex that matches nothing: the ReLU layer is still judged, found by its values (re_lu/inputs < 0,
    re_lu/outputs = max(inputs, 0))."""
    trial, _ = run_scenario(backend, "rules:graph:dead")
    step, rule = judge(DeadRelu, trial, {"tensor_regex": "^no-such-tensor$"})
    assert step == 0 and "'re_lu/outputs'" in rule.issue


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_saturated_activation_fires_on_tanh_inputs_in_the_flat_tails(run_scenario, backend: str) -> None:
    trial, _ = run_scenario(backend, "rules:graph:saturated")
    step, rule = judge(SaturatedActivation, trial)
    assert step == 0
    assert "dense_2/tanh_input" in rule.issue and "tanh units are saturated" in rule.issue


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_poor_weight_initialization_fires_on_uneven_activation_input_variances(run_scenario, backend: str) -> None:
    trial, _ = run_scenario(backend, "rules:graph:dead")  # the relu layer after the dead one gets all zeros
    step, rule = judge(PoorWeightInitialization, trial)
    assert step == 0
    assert "activation inputs: variance of" in rule.issue


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("rule_cls", [DeadRelu, SaturatedActivation, PoorWeightInitialization])
def test_activation_rules_stay_quiet_on_a_healthy_model(run_scenario, backend: str, rule_cls: type) -> None:
    trial, result = run_scenario(backend, "rules:graph:healthy")
    assert result["failure"] == "None"
    step, rule = judge(rule_cls, trial)
    assert step is None, rule.issue
    names = set(create_trial(str(trial)).tensor_names())
    # the rules had something to judge: the hook saved what their default patterns ask for
    assert {"re_lu/relu_input", "re_lu/relu_output", "dense_1/relu_input", "dense_1/relu_output",
            "dense_2/tanh_input", "activation/sigmoid_input"} <= names
