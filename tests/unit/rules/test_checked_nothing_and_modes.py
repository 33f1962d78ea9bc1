"""A rule that matched no tensor says so; UnchangedTensor does not mistake validation steps for a stall."""

from __future__ import annotations

import numpy as np

from sdk_ext.modes import ModeKeys
from sdk_ext.rules.builtin import (
    Confusion,
    DeadRelu,
    ExplodingTensor,
    StalledTrainingRule,
    UnchangedTensor,
    WeightUpdateRatio,
)
from sdk_ext.rules.status import CHECKED_NOTHING, checked_nothing, no_issues_details, reason
from tests.unit.rules.fake_trial import FakeTrial
from tests.unit.rules.helpers import first_firing

# what sdk_ext's PyTorch hook saves for nn.Sequential(nn.Linear, nn.ReLU, nn.Linear): no "relu_output" names
SEQUENTIAL = {"Sequential_0.weight": np.ones((4, 4)), "Sequential_1_output_0": np.ones(4),
              "gradient/Sequential_0.weight": np.ones((4, 4))}


def test_dead_relu_on_names_it_does_not_match_says_it_checked_nothing() -> None:
    trial = FakeTrial(ended=True)
    for step in range(3):
        trial.add(step, SEQUENTIAL)
    rule = DeadRelu(trial, tensor_regex=".*relu_output")
    assert first_firing(rule) is None
    note = rule.coverage_note()
    assert note is not None and "matched no tensor (tensor_regex '.*relu_output')" in note
    assert "Sequential_0.weight" in note  # what the trial does have
    details = no_issues_details("Training ended; last saved step: 2", note)
    assert details.startswith(CHECKED_NOTHING) and checked_nothing(details)
    assert details.endswith("Training ended; last saved step: 2")


def test_a_rule_that_looked_at_tensors_has_no_coverage_note() -> None:
    trial = FakeTrial({"gradients": ["^gradient"]}, ended=True).add(0, SEQUENTIAL).add(1, SEQUENTIAL)
    rule = ExplodingTensor(trial, collection_names="gradients")
    assert first_firing(rule) is None
    assert rule.coverage_note() is None
    assert not checked_nothing(no_issues_details("Training ended; last saved step: 1", None))


def test_stalled_training_judges_time_not_tensors() -> None:
    rule = StalledTrainingRule(FakeTrial(ended=True).add(0, SEQUENTIAL))
    assert rule.coverage_note() is None


def _validating(train_values: list[float]) -> FakeTrial:
    """TRAIN steps with the given weight values; after every second one, two EVAL steps (same weight)."""
    trial, step, eval_step = FakeTrial({"weights": ["weight$"]}, ended=True), 0, 0
    for i, w in enumerate(train_values):
        trial.add(step, {"fc.weight": np.full(3, w)}, mode=ModeKeys.TRAIN, mode_step=i)
        step += 1
        if i % 2 == 1:
            for _ in range(2):
                trial.add(step, {"fc.weight": np.full(3, w)}, mode=ModeKeys.EVAL, mode_step=eval_step)
                step, eval_step = step + 1, eval_step + 1
    return trial


def test_unchanged_tensor_ignores_validation_steps_where_weights_cannot_change() -> None:
    # the demo's shape: weights change every TRAIN step; steps 2-3 and 6-7 are EVAL with the weights of step 1, 5
    healthy = _validating([1.0, 1.1, 1.2, 1.3, 1.4, 1.5])
    assert first_firing(UnchangedTensor(healthy)) is None


def test_unchanged_tensor_still_fires_on_training_steps_that_change_nothing() -> None:
    stuck = _validating([1.0, 1.0, 1.0, 1.0])
    rule = UnchangedTensor(stuck)
    step = first_firing(rule)
    assert step == 4  # the third TRAIN step (global 0, 1, 4): the EVAL steps 2, 3 are not in the window
    assert rule.issue is not None and "TRAIN steps [0, 1, 4]" in rule.issue


def test_weight_update_ratio_compares_a_training_step_with_the_previous_training_step() -> None:
    # EVAL steps hold the weights of the training step before them: across them the update is 0
    assert first_firing(WeightUpdateRatio(_validating([1.0, 1.1, 1.2, 1.3, 1.4, 1.5]))) is None
    frozen = WeightUpdateRatio(_validating([1.0, 1.1, 1.1, 1.3]))
    assert first_firing(frozen) == 4  # TRAIN step 2 (global 4, after two EVAL steps) did not move
    assert frozen.issue is not None and "ratio 0 since TRAIN step 1 is below small_threshold" in frozen.issue


def test_weight_update_ratio_num_steps_counts_training_steps() -> None:
    # saved every TRAIN step with EVAL steps between: TRAIN steps 1 and 2 are 1 TRAIN step apart, 3 global steps
    rule = WeightUpdateRatio(_validating([1.0, 1.1, 1.1, 1.3]), num_steps="1")
    assert first_firing(rule) == 4


def test_confusion_found_by_its_tensor_names_is_not_checked_nothing() -> None:
    trial = FakeTrial(ended=True)  # no labels/predictions collections: found only by the names
    for step in range(2):
        trial.add(step, {"labels": np.arange(4), "predictions": np.arange(4)})
    rule = Confusion(trial)
    assert first_firing(rule) is None
    assert rule.coverage_note() is None and rule.checked == {"labels", "predictions"}


def test_summary_reason_drops_the_standard_prefix_and_keeps_the_whole_reason() -> None:
    why = "tensor 'gradient/fc.weight': mean absolute value 1e-09 is below threshold 1e-07 " * 4
    details = ("RuleEvaluationConditionMet: Evaluation of the rule VanishingGradient at step 12 resulted in the "
               f"condition being met: {why}\n")
    assert reason(details) == " ".join(why.split())
    assert reason("ClientError: No debugging data was saved") == "No debugging data was saved"
    crashed = "InternalError: RuntimeError: boom\nTraceback (most recent call last):\n  File \"x.py\", line 1\n"
    assert reason(crashed) == "RuntimeError: boom"
