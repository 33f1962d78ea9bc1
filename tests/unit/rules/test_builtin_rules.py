"""Each built-in rule's decisions on the test vectors of docs/RULES.md#built-in-tensor-rules (in-memory trials).

The same rules run against real trials on disk in tests/functional/rules/.
"""

from __future__ import annotations

import numpy as np
import pytest

from sdk_ext.exceptions import ConfigError, InsufficientInformationForRuleInvocation
from sdk_ext.modes import ModeKeys
from sdk_ext.rules import (
    AllZero,
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
    TensorVariance,
    TreeDepth,
    UnchangedTensor,
    VanishingGradient,
    WeightUpdateRatio,
)
from tests.unit.rules.fake_trial import FakeTrial
from tests.unit.rules.helpers import first_firing

GRADS = {"gradients": ["^gradient"]}
rng = np.random.default_rng(7)


def test_vanishing_gradient_vectors():
    t = FakeTrial(GRADS, ended=True).add(5, {"gradient/g0": np.full(4, 1e-9), "gradient/g1": np.full(4, 0.5)})
    rule = VanishingGradient(t)
    assert first_firing(rule) == 5
    assert "gradient/g0" in rule.issue and "1e-09" in rule.issue
    quiet = FakeTrial(GRADS, ended=True).add(5, {"gradient/g0": np.full(4, 0.01)})
    assert first_firing(VanishingGradient(quiet)) is None
    sparse = FakeTrial(GRADS, ended=True).add(0, {"gradient/g": np.full(3, 0.1)}).add(500, {"gradient/g": [1e-8]})
    assert first_firing(VanishingGradient(sparse), end_step=501) == 500
    # reductions only (no raw value saved): the stored abs mean is used
    red = FakeTrial(GRADS, ended=True).add_reduction(3, "gradient/g", "mean", 1e-9, abs=True)
    assert first_firing(VanishingGradient(red, threshold="0.0000001")) == 3


def test_exploding_tensor_vectors():
    t = FakeTrial({"gradients": ["foo"]}, ended=True)
    for s, v in ((0, [np.nan]), (1, [1.0]), (2, [np.nan])):
        t.add(s, {f"foo_{i}": v for i in range(3)})
    assert first_firing(ExplodingTensor(t, collection_names="gradients,weights"), 0, 3) == 0
    assert first_firing(ExplodingTensor(t, collection_names="gradients,weights"), 1, 3) == 2
    inf = FakeTrial(ended=True).add(0, {"x": [1.0, np.inf]})
    assert first_firing(ExplodingTensor(inf)) == 0
    assert first_firing(ExplodingTensor(inf, only_nan="True")) is None
    assert first_firing(ExplodingTensor(FakeTrial(ended=True).add(0, {"x": [np.nan]}), only_nan="True")) == 0
    assert first_firing(ExplodingTensor(FakeTrial(ended=True).add(0, {"i": np.arange(4)}))) is None


def test_similar_across_runs_vectors():
    base = FakeTrial(ended=True).add(0, {"w": [1.0, 2.0]}).add(1, {"w": [1.0, 2.0]})
    same = FakeTrial(ended=True).add(0, {"w": [1.0, 2.0]}).add(1, {"w": [1.0, 2.0]})
    other = FakeTrial(ended=True).add(0, {"w": [1.0, 2.0]}).add(1, {"w": [1.1, 2.0]})
    assert first_firing(SimilarAcrossRuns(base, [same])) is None
    rule = SimilarAcrossRuns(base, [other])
    assert first_firing(rule) == 1 and "max |difference| 0.1" in rule.issue
    shaped = FakeTrial(ended=True).add(0, {"w": [1.0, 2.0, 3.0]})
    assert first_firing(SimilarAcrossRuns(base, [shaped])) == 0
    missing = FakeTrial(ended=True).add(0, {"v": [5.0]})
    assert first_firing(SimilarAcrossRuns(base, [missing])) is None
    with pytest.raises(InsufficientInformationForRuleInvocation):
        SimilarAcrossRuns(base)


def test_weight_update_ratio_vectors():
    w = {"weights": ["weight"]}
    small = FakeTrial(w, ended=True).add(0, {"fc.weight": np.ones(10)}).add(1, {"fc.weight": np.ones(10) + 1e-3})
    assert first_firing(WeightUpdateRatio(small)) is None
    frozen = FakeTrial(w, ended=True).add(0, {"fc.weight": np.ones(10)}).add(1, {"fc.weight": np.ones(10)})
    assert first_firing(WeightUpdateRatio(frozen)) == 1
    big = FakeTrial(w, ended=True).add(0, {"fc.weight": np.ones(10)}).add(1, {"fc.weight": 100 * np.ones(10)})
    assert first_firing(WeightUpdateRatio(big)) == 1
    single = FakeTrial(w, ended=True).add(0, {"fc.weight": np.ones(10)})
    assert first_firing(WeightUpdateRatio(single)) is None
    gap = FakeTrial(w, ended=True).add(0, {"fc.weight": np.ones(10)}).add(10, {"fc.weight": np.ones(10)})
    assert first_firing(WeightUpdateRatio(gap, num_steps="5")) is None  # step 0 is too far back
    assert first_firing(WeightUpdateRatio(gap, num_steps="10")) == 10


def test_all_zero_vectors():
    t = FakeTrial(ended=True).add(0, {"a": np.zeros(5)})
    assert first_firing(AllZero(t, tensor_regex="a")) == 0
    part = FakeTrial(ended=True).add(0, {"a": [0, 0, 0, 1]})
    assert first_firing(AllZero(part, tensor_regex="a", threshold="75")) == 0
    assert first_firing(AllZero(part, tensor_regex="a", threshold="100")) is None
    with pytest.raises(InsufficientInformationForRuleInvocation):
        AllZero(part)


def test_unchanged_tensor_vectors_from_the_2019_tests():
    t = FakeTrial(ended=True)
    for s in (0, 1, 2):
        t.add(s, {f"foo_{i}": np.ones((10, 3, 2)) for i in range(3)})
    t.add(5, {f"boo_{i}": np.ones((10, 3, 2)) for i in range(3)})
    assert first_firing(UnchangedTensor(t, tensor_regex=".*"), 0, 2) is None
    assert first_firing(UnchangedTensor(t, tensor_regex=".*"), 0, 3) == 2
    assert first_firing(UnchangedTensor(t, tensor_regex=".*"), 2, 3) == 2
    assert first_firing(UnchangedTensor(t, tensor_regex=".*"), 3, 6) is None
    moving = FakeTrial(ended=True).add(0, {"x": [1.0]}).add(1, {"x": [1.0]}).add(2, {"x": [1.1]})
    assert first_firing(UnchangedTensor(moving)) is None


def _losses(values, every=4, mode=ModeKeys.GLOBAL):
    t = FakeTrial({"losses": ["loss"]}, ended=True)
    for i, v in enumerate(values):
        t.add(i * every, {"loss": np.float32(v)}, mode=mode, mode_step=i * every)
    return t


def test_loss_not_decreasing_vectors():
    assert first_firing(LossNotDecreasing(_losses([1.0, 0.9, 0.8, 0.7, 0.6, 0.5]))) is None
    assert first_firing(LossNotDecreasing(_losses([1.0, 1.0, 1.0, 1.0]))) == 12
    assert first_firing(LossNotDecreasing(_losses([1.0, 1.0, 1.0, 1.03]))) is None  # small rise tolerated
    rule = LossNotDecreasing(_losses([1.0, 1.0, 1.0, 1.2]))
    assert first_firing(rule) == 12 and "increased by 20%" in rule.issue
    # the 2019 vector: losses at 0,4,8,12,16; step 12 compares with step 0 (0.30 vs 0.3)
    assert first_firing(LossNotDecreasing(_losses([0.3, 0.33, 0.31, 0.30, 0.28]))) == 12


def test_loss_not_decreasing_checks_each_mode_on_its_own():
    t = FakeTrial({"losses": ["loss"]}, ended=True)
    for i in range(6):  # TRAIN falls steadily, EVAL (interleaved) is flat
        t.add(2 * i * 5, {"loss": 1.0 - 0.1 * i}, mode=ModeKeys.TRAIN, mode_step=i * 5)
        t.add(2 * i * 5 + 1, {"loss": 2.0}, mode=ModeKeys.EVAL, mode_step=i * 5)
    assert first_firing(LossNotDecreasing(t, mode="TRAIN")) is None
    assert first_firing(LossNotDecreasing(t, mode="EVAL")) == 21
    assert first_firing(LossNotDecreasing(t)) == 21


def _train_eval(train, evals, patience_split=None):
    t = FakeTrial({"losses": ["loss"]}, ended=True)
    step = 0
    for phase_train, phase_eval in zip(train, evals):
        for v in phase_train:
            t.add(step, {"loss": v}, mode=ModeKeys.TRAIN)
            step += 1
        for v in phase_eval:
            t.add(step, {"loss": v}, mode=ModeKeys.EVAL)
            step += 1
    return t


def test_overfit_vectors():
    assert first_firing(Overfit(_train_eval([[1.0] * 5], [[1.05, 1.05]]))) is None
    assert first_firing(Overfit(_train_eval([[1.0] * 5], [[1.2]]))) == 5
    # patience 2: one bad eval step then a good one never strikes twice
    assert first_firing(Overfit(_train_eval([[1.0] * 5, [1.0] * 5], [[1.3, 0.8], [1.0]]), patience="2")) is None
    assert first_firing(Overfit(_train_eval([[1.0] * 5], [[1.3, 1.3]]), patience="2")) == 6


def test_overtraining_vectors():
    falling = _train_eval([[1.0 - 0.1 * i for i in range(8)]], [[]])
    assert first_firing(Overtraining(falling)) is None
    flat = _train_eval([[1.0] + [0.999] * 5], [[]])
    assert first_firing(Overtraining(flat)) == 5
    eval_flat = _train_eval([[1.0, 0.5]], [[0.7] * 11])
    assert first_firing(Overtraining(eval_flat)) == 12  # 10 non-improving EVAL values after the first


def test_tensor_variance_vectors():
    def one(v):
        return FakeTrial(ended=True).add(0, {"w": v})

    assert first_firing(TensorVariance(one(rng.normal(0, 1, 1000)), tensor_regex="w", max_threshold="10",
                                       min_threshold="1e-5")) is None
    assert first_firing(TensorVariance(one(rng.normal(0, 10, 1000)), tensor_regex="w", max_threshold="10")) == 0
    assert first_firing(TensorVariance(one(np.full(10, 3.0)), tensor_regex="w", min_threshold="1e-5")) == 0
    with pytest.raises(ConfigError, match="max_threshold=None and min_threshold=None"):
        TensorVariance(one([1.0]), tensor_regex="w")


def test_dead_relu_vectors():
    def one(v):
        return FakeTrial(ended=True).add(0, {"layer_relu_output": v})

    assert first_firing(DeadRelu(one(np.zeros((32, 10))))) == 0
    assert first_firing(DeadRelu(one(np.abs(rng.normal(size=(32, 10))) + 0.1))) is None
    six_dead = np.abs(rng.normal(size=(32, 10))) + 0.1
    six_dead[:, :6] = -1
    assert first_firing(DeadRelu(one(six_dead))) == 0
    four_dead = six_dead.copy()
    four_dead[:, 4:6] = 1
    assert first_firing(DeadRelu(one(four_dead))) is None


def test_saturated_activation_vectors():
    assert first_firing(SaturatedActivation(FakeTrial(ended=True).add(0, {"l_tanh_input": np.full((32, 10), 20.0)}))) == 0
    assert first_firing(SaturatedActivation(FakeTrial(ended=True).add(
        0, {"l_tanh_input": rng.normal(size=(32, 10))}))) is None
    assert first_firing(SaturatedActivation(FakeTrial(ended=True).add(
        0, {"l_sigmoid_input": np.full((32, 10), -30.0)}))) == 0
    # -20 saturates a tanh but not a sigmoid
    assert first_firing(SaturatedActivation(FakeTrial(ended=True).add(
        0, {"l_sigmoid_input": np.full((32, 10), -20.0)}))) is None


def test_poor_weight_initialization_vectors():
    def trial(std_a, std_b, grads, losses):
        t = FakeTrial({"gradients": ["^gradient"], "losses": ["loss"]}, ended=True)
        for s, loss in enumerate(losses):
            t.add(s, {"a_relu_input": rng.normal(0, std_a, (16, 8)), "b_relu_input": rng.normal(0, std_b, (16, 8)),
                      "gradient/w": grads(), "loss": loss})
        return t

    falling = [1.0 - 0.05 * i for i in range(12)]
    assert first_firing(PoorWeightInitialization(trial(1.0, 100.0, lambda: rng.normal(0, 0.1, 100), falling))) == 0
    assert first_firing(PoorWeightInitialization(trial(1.0, 1.5, lambda: rng.normal(0, 0.1, 100), falling))) is None
    assert first_firing(PoorWeightInitialization(trial(1.0, 1.5, lambda: np.full(100, 1e-6), falling))) == 0
    stuck = [1.0] * 12
    rule = PoorWeightInitialization(trial(1.0, 1.5, lambda: rng.normal(0, 0.1, 100), stuck))
    assert first_firing(rule) == 5 and "loss" in rule.issue


def test_class_imbalance_vectors():
    t = FakeTrial(ended=True).add(3, {"labels_0": np.r_[np.zeros(990), np.ones(10)]})
    rule = ClassImbalance(t, labels_regex="labels_0", predictions_regex="labels_0")
    assert first_firing(rule) == 3 and "ratio 99" in rule.issue

    def balanced(wrong_class=None, n=500):
        labels = np.arange(n) % 10
        preds = labels.copy()
        if wrong_class is not None:
            preds[labels == wrong_class] = (wrong_class + 1) % 10
        return FakeTrial(ended=True).add(0, {"labels": labels, "predictions": preds})

    assert first_firing(ClassImbalance(balanced())) is None
    assert first_firing(ClassImbalance(balanced(wrong_class=3))) == 0
    few = FakeTrial(ended=True).add(0, {"labels": np.r_[np.zeros(99), 1], "predictions": np.r_[np.zeros(99), 1]})
    assert first_firing(ClassImbalance(few)) is None  # fewer than `samples`
    scores = np.eye(10)[np.arange(500) % 10]  # per-class scores (multi:softprob): argmax taken by itself
    assert first_firing(ClassImbalance(FakeTrial(ended=True).add(0, {"labels": np.arange(500) % 10,
                                                                      "predictions": scores}))) is None
    with pytest.raises(ValueError, match="different numbers of samples"):
        first_firing(ClassImbalance(FakeTrial(ended=True).add(0, {"labels": np.arange(500) % 10,
                                                                   "predictions": np.arange(400) % 10})))
    assert first_firing(ClassImbalance(FakeTrial(ended=True).add(0, {"labels": np.arange(500) % 10,
                                                                      "predictions": scores}), argmax="True")) is None


def test_confusion_vectors_from_the_2019_tests():
    y = rng.integers(0, 10, 100)
    same = FakeTrial({"labels": ["^labels$"], "predictions": ["^predictions$"]}, ended=True).add(
        0, {"labels": y, "predictions": y})
    assert first_firing(Confusion(same)) is None
    y2 = np.arange(10)
    y_hat = y2.copy()
    y_hat[4] = 7
    t = FakeTrial(ended=True).add(0, {"foo": y2, "bar": y_hat})
    rule = Confusion(t, 10, "foo", "bar")
    assert first_firing(rule) == 0 and "class 7" in rule.issue
    assert first_firing(Confusion(t, 10, "foo", "bar", min_diag="0.0", max_off_diag="0.01")) == 0
    plain = FakeTrial(ended=True).add(0, {"labels": y2, "predictions": y2})
    assert first_firing(Confusion(plain)) is None
    with pytest.raises(ValueError, match="outside"):
        first_firing(Confusion(FakeTrial(ended=True).add(0, {"labels": [0, 12], "predictions": [0, 1]}), "10"))


def test_check_input_images_vectors():
    def trial(make, steps):
        t = FakeTrial(ended=True)
        for s in range(steps):
            t.add(s, {"net_input_0": make((64, 3, 8, 8))})
        return t

    regex = ".*input_0"
    assert first_firing(CheckInputImages(trial(lambda s: rng.uniform(0, 1, s), 8), regex=regex)) == 7
    assert first_firing(CheckInputImages(trial(lambda s: rng.normal(0, 1, s), 8), regex=regex)) is None
    assert first_firing(CheckInputImages(trial(lambda s: rng.uniform(0, 1, s), 2), regex=regex)) is None
    nhwc = FakeTrial(ended=True).add(0, {"net_input_0": rng.uniform(0, 1, (600, 4, 4, 3))})
    assert first_firing(CheckInputImages(nhwc, regex=regex, channel="3")) == 0
    with pytest.raises(ValueError, match="channel"):
        first_firing(CheckInputImages(FakeTrial(ended=True).add(0, {"net_input_0": np.ones((4, 2))}),
                                      regex=regex, channel="3"))


def test_nlp_sequence_ratio_vectors():
    def one(v):
        return FakeTrial(ended=True).add(0, {"embedding0_input_0": v})

    assert first_firing(NLPSequenceRatio(one([[5, 0, 0, 0], [7, 8, 0, 0]]))) == 0
    assert first_firing(NLPSequenceRatio(one([[5, 6, 7, 0]]))) is None
    tokens = np.r_[np.full(20, 3), np.full(80, 9)]
    rule = NLPSequenceRatio(one(tokens), token_values="3,0", token_thresholds_percent="10,90")
    assert first_firing(rule) == 0 and "token 3" in rule.issue


def test_feature_importance_overweight_vectors():
    def trial(weights):
        return FakeTrial(ended=True).add(0, {f"feature_importance/weight/f{i}": w for i, w in enumerate(weights)})

    assert first_firing(FeatureImportanceOverweight(trial([0.5, 0.2, 0.15] + [0.15 / 7] * 7))) == 0
    assert first_firing(FeatureImportanceOverweight(trial([0.1] * 10))) is None
    assert first_firing(FeatureImportanceOverweight(trial([0.9, 0.05, 0.05]))) is None  # 3 features: meaningless


def test_tree_depth_vectors():
    def one(nodes):
        return FakeTrial(ended=True).add(0, {"trees/Node": nodes})

    assert first_firing(TreeDepth(one(np.arange(31)))) is None
    assert first_firing(TreeDepth(one(np.arange(63)))) == 0
    assert first_firing(TreeDepth(one([0]))) is None
    assert first_firing(TreeDepth(one(np.arange(63)), depth="5")) is None


def test_stalled_rule_with_stop_training_skips_the_stop_when_two_jobs_match():
    import boto3
    from botocore.stub import Stubber

    from sdk_ext.exceptions import RuleEvaluationConditionMet
    from sdk_ext.rules import StalledTrainingRule

    now = [0.0]
    trial = FakeTrial().add(0, {"loss": 1.0})
    rule = StalledTrainingRule(trial, threshold="60", stop_training_on_fire="True", training_job_name_prefix="job",
                               clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + 10))
    client = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)
    summaries = [{"TrainingJobName": n, "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:1:training-job/{n}",
                  "CreationTime": "2024-01-01T00:00:00Z", "TrainingJobStatus": "InProgress"} for n in ("job-1", "job-2")]
    stub.add_response("list_training_jobs", {"TrainingJobSummaries": summaries})
    rule._actions._client_factory = lambda service: client
    with stub, pytest.raises(RuleEvaluationConditionMet):
        rule.invoke(0)
        rule.invoke(1)
    stub.assert_no_pending_responses()  # listed, and no StopTrainingJob (none stubbed: it would have failed)
    with pytest.raises(ConfigError, match="training_job_name_prefix=None"):
        StalledTrainingRule(trial, stop_training_on_fire="True")
