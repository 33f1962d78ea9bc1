"""The XGBoost rules judged on trials written by sdk_ext.xgboost.Hook from real xgboost training (binary,
multiclass softprob and softmax, regression), and on smdebug's own XGBoost trials (x1, x2): each fires,
stays quiet, or says why it cannot run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sdk_ext.exceptions import (
    InsufficientInformationForRuleInvocation,
    NoMoreData,
    RuleEvaluationConditionMet,
)
from sdk_ext.rules import BUILTIN_RULES, invoke_rule
from sdk_ext.rules.factory import build_rule
from sdk_ext.trials import create_trial
from tests.conftest import REPO, SMDEBUG_FIXTURES
from tests.functional.xgboost.jobs import overfit_job, train_job

EVALUATE = str(REPO / "rules" / "evaluate.py")


def judge(rule_name: str, trial_dir: Path, **params: Any) -> tuple[int | None, Any]:
    """(step it fired at or None, the rule)."""
    rule = build_rule(BUILTIN_RULES[rule_name], create_trial(str(trial_dir)), {k: str(v) for k, v in params.items()})
    try:
        invoke_rule(rule, raise_eval_cond=True, poll_interval=0.01)
    except RuleEvaluationConditionMet as fired:
        return fired.step, rule
    except NoMoreData:
        return None, rule
    raise AssertionError("NoMoreData expected at the end of the trial")


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("xgb-jobs")
    made = {}
    for kind in ("regression", "binary", "softprob", "softmax"):
        hook, *_ = train_job(root / kind, kind, rounds=12, max_depth=3)
        assert hook.failure is None
        made[kind] = root / kind
    overfit_job(root / "overfit", overfit=True, include=["feature_importance"])
    overfit_job(root / "healthy", overfit=False, rounds=20, include=["labels", "predictions"])
    return made | {"overfit": root / "overfit", "healthy": root / "healthy"}


def test_tree_depth_fires_on_trees_deeper_than_the_limit(jobs: dict[str, Path]) -> None:
    for kind in ("regression", "softprob", "softmax", "binary"):
        step, rule = judge("TreeDepth", jobs[kind], depth=2)
        assert step == 0 and "depth 3" in rule.issue, kind
        assert judge("TreeDepth", jobs[kind], depth=3)[0] is None, kind


def test_tree_depth_on_smdebugs_multiclass_trial() -> None:
    assert judge("TreeDepth", SMDEBUG_FIXTURES / "x2_xgboost_multiclass" / "out", depth=1)[0] == 0
    assert judge("TreeDepth", SMDEBUG_FIXTURES / "x2_xgboost_multiclass" / "out", depth=2)[0] is None


def test_feature_importance_overweight_counts_unused_features(jobs: dict[str, Path]) -> None:
    # 5 features, one never used: the top 4 hold all the importance, which only counting the unused one shows
    step, rule = judge("FeatureImportanceOverweight", jobs["regression"], nfeatures=4, threshold=0.99)
    assert step is not None and "of 5 features" in rule.issue
    # smdebug's x1 never saved its unused feature (flags): only two features are known, so the top two hold
    # everything by construction and the rule has nothing to say
    assert judge("FeatureImportanceOverweight", SMDEBUG_FIXTURES / "x1_xgboost_regression" / "out",
                 nfeatures=2)[0] is None
    # x2 left f2 out at step 0 only: counted as 0 there, so 3 features are judged from step 0 on
    step, rule = judge("FeatureImportanceOverweight", SMDEBUG_FIXTURES / "x2_xgboost_multiclass" / "out",
                       nfeatures=2, threshold=0.5)
    assert step == 0 and "of 3 features" in rule.issue


@pytest.mark.parametrize("kind", ["binary", "softprob", "softmax"])
def test_class_imbalance_and_confusion_run_on_classification_jobs(jobs: dict[str, Path], kind: str) -> None:
    step, _ = judge("ClassImbalance", jobs[kind], samples=50)  # balanced classes, a model that learned them
    assert step is None, kind
    step, rule = judge("ClassImbalance", jobs[kind], samples=50, threshold_misprediction=0.01)
    assert step is not None and "mispredicted" in rule.issue, kind  # predictions read as classes, no error
    step, _ = judge("Confusion", jobs[kind], min_diag=0.5, max_off_diag=0.5)
    assert step is None, kind
    step, rule = judge("Confusion", jobs[kind], min_diag=1.0, max_off_diag=0.0)
    assert step is not None and "predicted as class" in rule.issue, kind


def test_class_imbalance_fires_on_imbalanced_labels(tmp_path: Path) -> None:
    hook = overfit_job(tmp_path / "t", overfit=False, kind="binary", rounds=3, include=["labels", "predictions"])
    assert hook.failure is None
    labels = np.asarray(create_trial(str(tmp_path / "t")).tensor("labels").value(0))
    ratio = max(np.mean(labels), 1 - np.mean(labels)) / min(np.mean(labels), 1 - np.mean(labels))
    step, rule = judge("ClassImbalance", tmp_path / "t", samples=100, threshold_imbalance=ratio * 0.9)
    assert step == 0 and "ratio" in rule.issue
    assert judge("ClassImbalance", tmp_path / "t", samples=100, threshold_imbalance=ratio * 1.1)[0] is None


@pytest.mark.parametrize("rule_name", ["ClassImbalance", "Confusion"])
def test_a_regression_job_is_not_a_classification_job(jobs: dict[str, Path], rule_name: str) -> None:
    with pytest.raises(InsufficientInformationForRuleInvocation, match="not a classification job: the objective"):
        judge(rule_name, jobs["regression"])
    # without hyperparameters (smdebug's x1 has them; a trial may not), fractional labels say it
    with pytest.raises(InsufficientInformationForRuleInvocation, match="not a classification job"):
        judge(rule_name, jobs["healthy"])


def test_loss_not_decreasing_on_losses(jobs: dict[str, Path], tmp_path: Path) -> None:
    assert judge("LossNotDecreasing", jobs["healthy"])[0] is None
    step, rule = judge("LossNotDecreasing", jobs["overfit"], num_steps=5)
    assert step is not None and "validation-rmse" in rule.issue  # train keeps falling; validation does not
    hook = overfit_job(tmp_path / "auc", overfit=False, kind="binary", rounds=3, eval_metric=["auc", "aucpr"])
    assert hook.failure is None
    with pytest.raises(InsufficientInformationForRuleInvocation, match="no loss"):
        judge("LossNotDecreasing", tmp_path / "auc")  # auc grows; smdebug's rule would have judged it as a loss


def test_overfit_pairs_train_and_validation_metrics(jobs: dict[str, Path], tmp_path: Path) -> None:
    step, rule = judge("Overfit", jobs["overfit"])
    assert step == 0 and "'validation-rmse'" in rule.issue and "'train-rmse'" in rule.issue
    assert judge("Overfit", jobs["overfit"], start_step=5, patience=3)[0] == 7
    assert judge("Overfit", jobs["healthy"])[0] is None
    overfit_job(tmp_path / "v", overfit=True, rounds=3, evals_names=("validation",))
    with pytest.raises(InsufficientInformationForRuleInvocation, match="no training/validation pair"):
        judge("Overfit", tmp_path / "v")


def test_overtraining_watches_validation_with_its_own_patience(jobs: dict[str, Path]) -> None:
    step, rule = judge("Overtraining", jobs["overfit"], patience_train=100, patience_validation=5)
    assert step is not None and "validation-rmse" in rule.issue and "EVAL" in rule.issue
    assert judge("Overtraining", jobs["healthy"])[0] is None


def test_smdebugs_trials_leave_overfit_no_longer_inert() -> None:
    step, rule = judge("Overfit", SMDEBUG_FIXTURES / "x2_xgboost_multiclass" / "out", ratio_threshold=0)
    assert step is not None and "validation-" in rule.issue


def test_evaluator_statuses_say_why(jobs: dict[str, Path], tmp_path: Path) -> None:
    def status(rule: str, trial: Path) -> tuple[int, dict[str, Any]]:
        out = tmp_path / rule
        proc = subprocess.run([sys.executable, EVALUATE, "--trial-dir", str(trial), "--output-dir", str(out),
                               "--rule-configuration-name", rule, "--poll-interval", "0.01",
                               "--param", f"rule_to_invoke={rule}"], capture_output=True, text=True, timeout=120,
                              check=False)
        return proc.returncode, json.loads((out / "status.json").read_text())

    code, confusion = status("Confusion", jobs["regression"])
    assert code == 2 and confusion["RuleEvaluationStatus"] == "Error"
    assert "not a classification job: the objective is 'reg:squarederror'" in confusion["StatusDetails"]
    code, overfit = status("Overfit", jobs["overfit"])
    assert code == 3 and overfit["RuleEvaluationStatus"] == "IssuesFound" and "validation-rmse" in overfit[
        "StatusDetails"]
