"""Activations found by value: the ReLU/Tanh/Sigmoid modules of an nn.Sequential (names without the
function in them, as sdk_ext.pytorch.Hook writes them) and Keras layers, for DeadRelu, SaturatedActivation
and PoorWeightInitialization."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from sdk_ext.exceptions import NoMoreData, RuleEvaluationConditionMet
from sdk_ext.pytorch import Hook
from sdk_ext.rules import DeadRelu, PoorWeightInitialization, SaturatedActivation, invoke_rule
from sdk_ext.rules.builtin.activations import ActivationFinder, identify, module_pairs
from sdk_ext.trials import create_trial


def test_module_pairs_of_pytorch_and_keras_names() -> None:
    names = ["body.1_input_0", "body.1_output_0", "body.2_output_0", "re_lu/inputs", "re_lu/outputs",
             "dense/outputs", "Net_fc1.weight", "concat/inputs_1", "concat/outputs_1"]
    assert module_pairs(names) == [("body.1_input_0", "body.1_output_0"), ("concat/inputs_1", "concat/outputs_1"),
                                   ("re_lu/inputs", "re_lu/outputs")]


def test_identify_by_the_function_applied() -> None:
    x = np.linspace(-30, 30, 60, dtype=np.float32).reshape(6, 10)
    assert identify(x, np.maximum(x, 0)) == "relu"
    assert identify(x, np.tanh(x)) == "tanh"
    assert identify(x, (1 / (1 + np.exp(-x.astype(np.float64)))).astype(np.float32)) == "sigmoid"
    assert identify(x, x) is None and identify(x, 2 * x) is None and identify(x, x[:3]) is None
    assert identify(np.abs(x), np.abs(x)) == "?"  # a ReLU with no negative input: the identity too


def sequential_trial(tmp_path: Path, *, bias: float, scale: float) -> Path:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 4), nn.Sigmoid())
    with torch.no_grad():
        model[0].bias.fill_(bias)
        model[2].weight.mul_(scale)
    out = tmp_path / "trial"
    hook = Hook(out, save_config=1, include_regex=[r"_(input|output)_0$"])
    hook.register_module(model)
    for _ in range(3):
        model(torch.randn(32, 6) * 2)
    hook.close()
    assert hook.failure is None
    return out


def judge(rule) -> int | None:
    try:
        invoke_rule(rule, raise_eval_cond=True, poll_interval=0.01)
    except RuleEvaluationConditionMet as fired:
        return fired.step
    except NoMoreData:
        return None
    raise AssertionError("NoMoreData expected")


@pytest.mark.parametrize(("bias", "scale", "fires"), [(-100.0, 1.0, True), (0.1, 1.0, False)])
def test_dead_relu_judges_the_relu_module_of_a_sequential(tmp_path: Path, bias: float, scale: float,
                                                          fires: bool) -> None:
    trial = create_trial(str(sequential_trial(tmp_path, bias=bias, scale=scale)))
    assert not trial.tensor_names(regex=".*relu_output")  # no name says "relu": found by value
    rule = DeadRelu(trial)
    assert (judge(rule) == 0) is fires
    if fires:
        assert "'1_output_0'" in rule.issue


@pytest.mark.parametrize(("scale", "fires"), [(5000.0, True), (1.0, False)])
def test_saturated_activation_judges_the_tanh_module_of_a_sequential(tmp_path: Path, scale: float,
                                                                     fires: bool) -> None:
    trial = create_trial(str(sequential_trial(tmp_path, bias=0.1, scale=scale)))
    rule = SaturatedActivation(trial)
    assert (judge(rule) == 0) is fires
    if fires:
        assert "'3_input_0'" in rule.issue and "tanh" in rule.issue


def test_poor_weight_initialization_uses_relu_module_inputs(tmp_path: Path) -> None:
    # one ReLU module only: the variance check needs two activation inputs, so it stays quiet...
    trial = create_trial(str(sequential_trial(tmp_path, bias=0.1, scale=1.0)))
    rule = PoorWeightInitialization(trial, distribution_range="0", patience="100")
    assert judge(rule) is None
    assert ActivationFinder().find(trial.tensor_names(step=0), lambda n: trial.tensor(n).value(0)) == [
        ("relu", "1_input_0", "1_output_0"), ("tanh", "3_input_0", "3_output_0"),
        ("sigmoid", "5_input_0", "5_output_0")]
