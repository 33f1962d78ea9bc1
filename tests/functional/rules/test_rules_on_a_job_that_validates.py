"""Built-in rules on a healthy PyTorch job that validates: training steps with a validation pass between
them, every step saved by sdk_ext's PyTorch hook in its mode, then ``sdk-ext rules`` over the trial, as
a user runs it.

Weights cannot change while the model is validated, so a rule that compared a step with the previous
saved step of any mode saw no update across two validation steps (or from a validation step to the
next training step) and fired on this healthy job. WeightUpdateRatio did (update ratio 0 < 1e-8), and
PoorWeightInitialization judged the losses of a validation pass as if they were a training series.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

import sdk_ext.pytorch as smd
from sdk_ext.exceptions import NoMoreData, RuleEvaluationConditionMet
from sdk_ext.modes import ModeKeys
from sdk_ext.rules import PoorWeightInitialization, SimilarAcrossRuns, invoke_rule
from sdk_ext.rules.rule import Rule
from sdk_ext.rules.status import checked_nothing
from sdk_ext.trials import create_trial
from tests.functional.rules.trial_writer import write_trial


def write_validating_job(out: Path, *, lr: float = 0.05, train_steps: int = 8) -> None:
    """A small regression trained with SGD; after every second training step, a validation pass of two
    batches (no gradients). Weights, gradients and losses saved at every step of every mode."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    loss_fn = nn.MSELoss()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    hook = smd.Hook(out, save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights", "gradients", "losses"])
    hook.register_module(model)
    hook.register_loss(loss_fn)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(32, 8, generator=g), torch.randn(32, 1, generator=g)
    val = [(torch.randn(16, 8, generator=g), torch.randn(16, 1, generator=g)) for _ in range(2)]
    for step in range(train_steps):
        hook.set_mode(ModeKeys.TRAIN)
        model.train()
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
        if step % 2 == 1:
            hook.set_mode(ModeKeys.EVAL)
            model.eval()
            with torch.no_grad():
                for xb, yb in val:
                    loss_fn(model(xb), yb)
    hook.close()


def run_rules(trial: Path, out: Path, env: dict[str, str], *rules: str) -> dict[str, dict[str, object]]:
    args = [a for r in rules for a in ("--rule", r)]
    result = subprocess.run([sys.executable, "-m", "sdk_ext.cli", "rules", str(trial), *args, "--output-dir",
                             str(out), "--json"], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode in (0, 3), result.stderr[-3000:]
    rows = json.loads(result.stdout.strip().splitlines()[-1])
    return {str(row["RuleConfigurationName"]): row for row in rows}


def test_weight_update_ratio_stays_quiet_on_a_healthy_job_that_validates(tmp_path: Path,
                                                                         repo_env: dict[str, str]) -> None:
    trial = tmp_path / "trial"
    write_validating_job(trial)
    t = create_trial(str(trial))
    assert t.steps(mode=ModeKeys.EVAL) and t.steps(mode=ModeKeys.TRAIN)  # the job did validate
    weight = t.tensor(t.tensor_names(collection="weights")[0])
    first_evals = t.steps(mode=ModeKeys.EVAL)[:2]
    assert np.array_equal(weight.value(first_evals[0], mode=ModeKeys.EVAL),
                          weight.value(first_evals[1], mode=ModeKeys.EVAL))  # what used to fire

    rows = run_rules(trial, tmp_path / "rules", repo_env, "WeightUpdateRatio", "UnchangedTensor")
    for name in ("WeightUpdateRatio", "UnchangedTensor"):
        status = rows[name]
        assert status["RuleEvaluationStatus"] == "NoIssuesFound", status
        assert not checked_nothing(str(status["StatusDetails"])), status  # it judged the weights


def test_weight_update_ratio_still_fires_when_training_updates_nothing(tmp_path: Path,
                                                                       repo_env: dict[str, str]) -> None:
    trial = tmp_path / "trial"
    write_validating_job(trial, lr=0.0)  # the optimizer steps, but nothing moves
    rows = run_rules(trial, tmp_path / "rules", repo_env, "WeightUpdateRatio")
    status = rows["WeightUpdateRatio"]
    assert status["RuleEvaluationStatus"] == "IssuesFound", status
    assert status["Step"] == 1  # the second training step: the first one has nothing to compare with
    assert "update/weight ratio 0 since TRAIN step 0 is below small_threshold 1e-08" in str(status["StatusDetails"])


def first_firing(rule: Rule) -> int | None:
    try:
        invoke_rule(rule, raise_eval_cond=True, poll_interval=0.01)
    except RuleEvaluationConditionMet as fired:
        return fired.step
    except NoMoreData:
        return None
    raise AssertionError("NoMoreData expected at the end of training")


def validation_first(train: list[float]) -> list[tuple[int, dict[str, np.float32], str]]:
    """A validation pass of six batches before training (as Lightning's sanity check), then training."""
    evals = [1.0, 1.2, 1.1, 1.3, 1.05, 1.15]  # one model, six batches: no trend, and none below the first
    steps = [(s, {"loss": np.float32(v)}, "EVAL") for s, v in enumerate(evals)]
    return steps + [(len(evals) + i, {"loss": np.float32(v)}, "TRAIN") for i, v in enumerate(train)]


def test_poor_weight_initialization_does_not_judge_a_validation_pass_as_convergence(tmp_path: Path) -> None:
    trial = write_trial(tmp_path / "ok", validation_first([2.0, 1.8, 1.6, 1.5]))
    rule = PoorWeightInitialization(create_trial(str(trial)))
    assert first_firing(rule) is None
    assert rule.checked_parts.get("losses") == {"loss"}  # the training losses were judged


def test_poor_weight_initialization_still_fires_on_training_losses_that_do_not_decrease(tmp_path: Path) -> None:
    trial = write_trial(tmp_path / "flat", validation_first([]) + [
        (6 + i, {"loss": np.float32(v)}, "TRAIN") for i, v in enumerate([2.0, 2.1, 2.0, 2.2, 2.05, 2.3])])
    rule = PoorWeightInitialization(create_trial(str(trial)), steps="20")
    assert first_firing(rule) == 11  # the fifth training loss in a row not below 2.0
    assert rule.issue is not None and "loss has not decreased below 2 for 5 saved steps" in rule.issue


def run_with_validation_at(first_eval: int) -> list[tuple[int, dict[str, np.float32], str]]:
    """Four training steps (losses 1.0, 0.9, 0.8, 0.7) and one validation pass of two batches (0.95, 0.85)
    after training step ``first_eval``: the same run, validated at a different point."""
    train, evals = iter([1.0, 0.9, 0.8, 0.7]), iter([0.95, 0.85])
    modes = ["TRAIN"] * (first_eval + 1) + ["EVAL", "EVAL"] + ["TRAIN"] * (3 - first_eval)
    return [(s, {"loss": np.float32(next(train if m == "TRAIN" else evals))}, m) for s, m in enumerate(modes)]


def test_similar_across_runs_compares_training_with_training(tmp_path: Path) -> None:
    base = create_trial(str(write_trial(tmp_path / "base", run_with_validation_at(0))))
    other = create_trial(str(write_trial(tmp_path / "other", run_with_validation_at(1))))
    rule = SimilarAcrossRuns(base, [other])
    assert first_firing(rule) is None  # global step 1 is EVAL in one run and TRAIN in the other: not compared
    assert rule.coverage_note() is None

    changed = create_trial(str(write_trial(tmp_path / "changed", [
        (s, {"loss": np.float32(v * 1.5 if m == "TRAIN" and s == 4 else v)}, m)
        for s, v, m in ((s, float(d["loss"]), m) for s, d, m in run_with_validation_at(1))])))
    rule = SimilarAcrossRuns(base, [changed])
    assert first_firing(rule) == 4  # TRAIN step 2 of both runs: earlier steps of each mode agree
    assert rule.issue is not None and "tensor 'loss' differs from the other trial" in rule.issue
