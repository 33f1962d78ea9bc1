"""Every built-in rule on trials written by sdk_ext.hooks.Hook and read by sdk_ext.trials.create_trial:
it fires at the right step, stays quiet on healthy data, and stays quiet (ending normally) when the
trial holds none of the tensors it looks at. Parameters are given as SageMaker gives them: strings.

StalledTrainingRule is time-driven; its three cases are in test_stalled_training_rule.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sdk_ext.exceptions import NoMoreData, RuleEvaluationConditionMet
from sdk_ext.rules import BUILTIN_RULES, invoke_rule
from sdk_ext.rules.factory import build_rule
from sdk_ext.trials import create_trial
from tests.functional.rules.trial_writer import write_trial

rng = np.random.default_rng(11)
Steps = list[tuple[Any, ...]]


@dataclass
class Case:
    params: dict[str, str]
    fires: Callable[[], Steps]
    fires_at: int
    quiet: Callable[[], Steps]
    nodata: Callable[[], Steps]
    other: Callable[[], Steps] | None = None  # SimilarAcrossRuns: the other trial of each case
    other_quiet: Callable[[], Steps] | None = None
    other_nodata: Callable[[], Steps] | None = None
    nodata_params: dict[str, str] = field(default_factory=dict)


def unrelated() -> Steps:
    return [(s, {"unrelated/act": rng.normal(size=4)}) for s in range(3)]


def losses(values: list[float], every: int = 4) -> Steps:
    return [(i * every, {"loss": np.float32(v)}) for i, v in enumerate(values)]


def train_eval(train: list[float], evals: list[float]) -> Steps:
    steps: Steps = [(i, {"loss": np.float32(v)}, "TRAIN") for i, v in enumerate(train)]
    return steps + [(len(train) + i, {"loss": np.float32(v)}, "EVAL") for i, v in enumerate(evals)]


def weights(deltas: list[float]) -> Steps:
    w, out = np.ones(20), []
    for s, d in enumerate(deltas):
        w = w + d
        out.append((s, {"fc1.weight": w.copy()}))
    return out


def labels_steps(make: Callable[[int], tuple[np.ndarray, np.ndarray]], n: int = 2) -> Steps:
    out = []
    for s in range(n):
        y, p = make(s)
        out.append((s, {"labels": y, "predictions": p}))
    return out


def confusion_step(s: int) -> tuple[np.ndarray, np.ndarray]:
    y = np.arange(10)
    p = y.copy()
    if s == 1:
        p[4] = 7
    return y, p


CASES: dict[str, Case] = {
    "VanishingGradient": Case(
        {"threshold": "0.0000001"},
        lambda: [(0, {"gradient/fc1.weight": np.full(8, 0.5)}),
                 (4, {"gradient/fc1.weight": np.full(8, 1e-9), "gradient/fc2.weight": np.full(8, 0.5)})], 4,
        lambda: [(0, {"gradient/fc1.weight": np.full(8, 0.01)}), (4, {"gradient/fc1.weight": np.full(8, 0.01)})],
        unrelated),
    "ExplodingTensor": Case(
        {},
        lambda: [(0, {"gradient/w": np.ones(4)}), (2, {"gradient/w": np.array([1.0, np.inf])})], 2,
        lambda: [(0, {"gradient/w": np.ones(4)}), (2, {"gradient/w": np.ones(4)})],
        lambda: [(0, {"act": np.array([np.nan])})], nodata_params={"collection_names": "gradients"}),
    "SimilarAcrossRuns": Case(
        {},
        lambda: [(0, {"w": np.ones(3)}), (1, {"w": np.ones(3)})], 1,
        lambda: [(0, {"w": np.ones(3)}), (1, {"w": np.ones(3)})],
        lambda: [(0, {"w": np.ones(3)}), (1, {"w": np.ones(3)})],
        other=lambda: [(0, {"w": np.ones(3)}), (1, {"w": np.ones(3) + 0.1})],
        other_quiet=lambda: [(0, {"w": np.ones(3)}), (1, {"w": np.ones(3)})],
        other_nodata=lambda: [(0, {"v": np.ones(3)}), (1, {"v": np.zeros(3)})]),
    "WeightUpdateRatio": Case(
        {}, lambda: weights([0, 1e-3, 1e-3, 0.0]), 3, lambda: weights([0, 1e-3, 1e-3, 1e-3]), unrelated),
    "AllZero": Case(
        {"tensor_regex": "relu"},
        lambda: [(0, {"relu1_output_0": rng.uniform(0.1, 1, 8)}), (2, {"relu1_output_0": np.zeros(8)})], 2,
        lambda: [(0, {"relu1_output_0": rng.uniform(0.1, 1, 8)}), (2, {"relu1_output_0": rng.uniform(0.1, 1, 8)})],
        lambda: [(0, {"other": np.zeros(8)})]),
    "UnchangedTensor": Case(
        {"tensor_regex": "weight", "num_steps": "3"},
        lambda: weights([0, 0.1, 0.0, 0.0]), 3, lambda: weights([0, 0.1, 0.1, 0.1]),
        lambda: [(s, {"bias": np.ones(3)}) for s in range(4)]),
    "LossNotDecreasing": Case(
        {"num_steps": "10"}, lambda: losses([1.0, 0.9, 1.0, 1.0, 1.0]), 12,
        lambda: losses([1.0 * 0.9 ** i for i in range(6)]),
        lambda: [(s, {"act": rng.normal(size=4)}) for s in range(0, 40, 4)]),
    "Overfit": Case(
        {}, lambda: train_eval([1.0] * 5, [1.2]), 5, lambda: train_eval([1.0] * 5, [1.02, 1.03]), unrelated),
    "Overtraining": Case(
        {"patience_train": "3"}, lambda: train_eval([1.0, 0.999, 0.999, 0.999], []), 3,
        lambda: train_eval([1.0, 0.9, 0.8, 0.7, 0.6], []), unrelated),
    "TensorVariance": Case(
        {"tensor_regex": "weight", "max_threshold": "10"},
        lambda: [(0, {"fc1.weight": rng.normal(0, 1, 500)}), (1, {"fc1.weight": rng.normal(0, 10, 500)})], 1,
        lambda: [(0, {"fc1.weight": rng.normal(0, 1, 500)}), (1, {"fc1.weight": rng.normal(0, 1, 500)})],
        lambda: [(0, {"bias": rng.normal(0, 10, 500)})]),
    "DeadRelu": Case(
        {}, lambda: [(0, {"layer1_relu_output": rng.uniform(0.1, 1, (16, 8))}),
                     (1, {"layer1_relu_output": np.zeros((16, 8))})], 1,
        lambda: [(0, {"layer1_relu_output": rng.uniform(0.1, 1, (16, 8))})],
        lambda: [(0, {"layer1_output": np.zeros((16, 8))})]),
    "SaturatedActivation": Case(
        {}, lambda: [(0, {"fc_tanh_input": rng.normal(size=(16, 8))}), (1, {"fc_tanh_input": np.full((16, 8), 20.0)})],
        1, lambda: [(0, {"fc_tanh_input": rng.normal(size=(16, 8))})],
        lambda: [(0, {"fc_input": np.full((16, 8), 20.0)})]),
    "PoorWeightInitialization": Case(
        {}, lambda: [(0, {"a_relu_input": rng.normal(0, 1, (16, 8)), "b_relu_input": rng.normal(0, 100, (16, 8))})], 0,
        lambda: [(s, {"a_relu_input": rng.normal(0, 1, (16, 8)), "b_relu_input": rng.normal(0, 1.5, (16, 8)),
                      "gradient/w": rng.normal(0, 0.1, 100), "loss": np.float32(1.0 - 0.1 * s)}) for s in range(4)],
        unrelated),
    "ClassImbalance": Case(
        {"samples": "100"},
        lambda: labels_steps(lambda s: (np.r_[np.zeros(59), 1], np.r_[np.zeros(59), 1])), 1,
        lambda: labels_steps(lambda s: (np.arange(60) % 3, np.arange(60) % 3)), unrelated),
    "Confusion": Case(
        {}, lambda: labels_steps(confusion_step), 1, lambda: labels_steps(lambda s: (np.arange(10), np.arange(10))),
        unrelated),
    "CheckInputImages": Case(
        {"regex": "input_image", "threshold_samples": "100"},
        lambda: [(s, {"input_image": rng.uniform(0, 1, (64, 3, 4, 4))}) for s in range(2)], 1,
        lambda: [(s, {"input_image": rng.normal(0, 1, (64, 3, 4, 4))}) for s in range(2)], unrelated),
    "NLPSequenceRatio": Case(
        {"tensor_regex": "embedding_input"},
        lambda: [(0, {"embedding_input": np.array([[5, 6, 7, 0]])}),
                 (1, {"embedding_input": np.array([[5, 0, 0, 0], [7, 8, 0, 0]])})], 1,
        lambda: [(0, {"embedding_input": np.array([[5, 6, 7, 0]])})],
        lambda: [(0, {"tokens": np.zeros((2, 4), dtype=np.int64)})]),
    "FeatureImportanceOverweight": Case(
        {},
        lambda: [(0, {f"feature_importance/weight/f{i}": np.float32(0.1) for i in range(10)}),
                 (1, {f"feature_importance/weight/f{i}": np.float32(w) for i, w in
                      enumerate([0.5, 0.2, 0.15] + [0.15 / 7] * 7)})], 1,
        lambda: [(0, {f"feature_importance/weight/f{i}": np.float32(0.1) for i in range(10)})],
        lambda: [(0, {f"feature_importance/gain/f{i}": np.float32(0.9 if i == 0 else 0.01) for i in range(10)})]),
    "TreeDepth": Case(
        {}, lambda: [(0, {"trees/Node": np.arange(15)}), (1, {"trees/Node": np.arange(63)})], 1,
        lambda: [(0, {"trees/Node": np.arange(31)})], unrelated),
}
# ReplicaDivergence compares workers: its trials have several (tests/functional/rules/test_replica_divergence.py)
VALUE_RULES = sorted(set(BUILTIN_RULES) - {"StalledTrainingRule", "ReplicaDivergence"})


def test_every_value_rule_has_a_case():
    assert sorted(CASES) == VALUE_RULES


def run(name: str, tmp: Path, steps: Steps, params: dict[str, str], other: Steps | None) -> tuple[int | None, Any]:
    trial = create_trial(str(write_trial(tmp / "base", steps)))
    others = [create_trial(str(write_trial(tmp / "other", other)))] if other is not None else []
    rule = build_rule(BUILTIN_RULES[name], trial, params, other_trials=others)
    try:
        invoke_rule(rule, raise_eval_cond=True, poll_interval=0.01)
    except RuleEvaluationConditionMet as fired:
        return fired.step, rule
    except NoMoreData:
        return None, rule
    raise AssertionError("invoke_rule returned without end_step: NoMoreData expected at the end of training")


@pytest.mark.parametrize("name", VALUE_RULES)
def test_fires_at_the_offending_step(name, tmp_path):
    case = CASES[name]
    step, rule = run(name, tmp_path, case.fires(), case.params, case.other() if case.other else None)
    assert step == case.fires_at
    assert rule.issue  # which tensor and why


@pytest.mark.parametrize("name", VALUE_RULES)
def test_stays_quiet_on_healthy_data(name, tmp_path):
    case = CASES[name]
    step, rule = run(name, tmp_path, case.quiet(), case.params, case.other_quiet() if case.other_quiet else None)
    assert step is None
    assert rule.coverage_note() is None  # it judged tensors: its NoIssuesFound is a pass, not CheckedNothing


@pytest.mark.parametrize("name", VALUE_RULES)
def test_ends_quietly_when_the_trial_has_none_of_its_tensors(name, tmp_path):
    case = CASES[name]
    params = {**case.params, **case.nodata_params}
    step, rule = run(name, tmp_path, case.nodata(), params, case.other_nodata() if case.other_nodata else None)
    assert step is None
    assert rule.coverage_note() is not None  # NoIssuesFound led by CheckedNothing: not a pass


@dataclass
class TooLittle:
    """Data a rule selects but cannot judge (it needs more than one step's value), and what it says it needs."""

    params: dict[str, str]
    steps: Callable[[], Steps]
    needs: str
    other: Callable[[], Steps] | None = None


TOO_LITTLE: dict[str, TooLittle] = {
    "WeightUpdateRatio": TooLittle({}, lambda: weights([0]), "each weight saved at two TRAIN steps"),
    "UnchangedTensor": TooLittle({"tensor_regex": "weight"}, lambda: weights([0, 0]), "saved at num_steps=3 steps"),
    "LossNotDecreasing": TooLittle({"num_steps": "10"}, lambda: losses([1.0, 1.0]), "at least num_steps=10 steps"),
    "Overfit": TooLittle({}, lambda: train_eval([1.0] * 4, []), "saved in TRAIN mode and then in EVAL mode"),
    "ClassImbalance": TooLittle({"samples": "100"}, lambda: labels_steps(lambda s: (np.arange(10) % 2,) * 2),
                                "at least samples=100 labels saved with predictions (it saw 20)"),
    "Confusion": TooLittle({}, lambda: [(s, {"labels": np.arange(10)}) for s in range(2)],
                           "labels and predictions with values at the same step"),
    "CheckInputImages": TooLittle({"regex": "input_image", "threshold_samples": "100"},
                                  lambda: [(0, {"input_image": rng.uniform(0, 1, (64, 3, 4, 4))})],
                                  "threshold_samples=100 images of one tensor (it saw at most 64)"),
    "FeatureImportanceOverweight": TooLittle(
        {}, lambda: [(0, {f"feature_importance/weight/f{i}": np.float32(0.9 if i == 0 else 0.05) for i in range(3)})],
        "more than nfeatures=3 features"),
    "SimilarAcrossRuns": TooLittle({}, lambda: [(0, {"w": np.ones(3)})],
                                   "the same tensor saved by the other trial at the same step",
                                   other=lambda: [(0, {"v": np.ones(3)}), (1, {"w": np.ones(3)})]),
}


def test_rules_that_judge_across_steps_have_a_too_little_data_case():
    assert sorted(TOO_LITTLE) == sorted(n for n in VALUE_RULES if not BUILTIN_RULES[n].judges_on_selection)


@pytest.mark.parametrize("name", sorted(TOO_LITTLE))
def test_a_rule_that_found_tensors_but_could_judge_none_says_so(name, tmp_path):
    case = TOO_LITTLE[name]
    step, rule = run(name, tmp_path, case.steps(), case.params, case.other() if case.other else None)
    assert step is None
    note = rule.coverage_note()
    assert note is not None and note.startswith("the rule found '")  # not a pass: it judged nothing
    assert case.needs in note
