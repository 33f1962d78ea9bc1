"""What a NoIssuesFound status says about what the rule judged, through rules/evaluate.py as a local job runs it.

A plain NoIssuesFound is a pass: the rule judged tensors and found nothing. ``CheckedNothing:`` leads it
when the rule judged no tensor, either because it matched none or because it found tensors but never had
what its condition needs (a previous training step, enough samples, the other run's tensor).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sdk_ext.rules.status import CHECKED_NOTHING
from tests.functional.rules.test_evaluate import evaluate
from tests.functional.rules.trial_writer import write_trial


def test_confusion_that_found_labels_and_predictions_by_name_reports_a_pass(  # type: ignore[no-untyped-def]
    tmp_path: Path, repo_env
) -> None:
    # saved in the default collection: the rule finds them by its parameters labels/predictions only
    steps = [(s, {"labels": np.arange(10) % 3, "predictions": np.arange(10) % 3}) for s in range(2)]
    trial = write_trial(tmp_path / "trial", steps, collections={"labels": "default", "predictions": "default"})
    out = tmp_path / "out"
    code, status, stderr = evaluate(["--trial-dir", str(trial), "--rule-name", "Confusion", "--output-dir", str(out)],
                                    repo_env)
    assert code == 0, stderr
    assert status["RuleEvaluationStatus"] == "NoIssuesFound"
    assert status["StatusDetails"] == "Training ended; last saved step: 1"  # no CheckedNothing: it judged them


def test_weight_update_ratio_with_weights_saved_once_says_it_judged_nothing(  # type: ignore[no-untyped-def]
    tmp_path: Path, repo_env
) -> None:
    # the SDK saves weights every 500 steps: a job of fewer steps has them at step 0 only
    trial = write_trial(tmp_path / "trial", [(0, {"fc1.weight": np.ones(8)}), (1, {"loss": np.float32(0.5)})])
    out = tmp_path / "out"
    code, status, stderr = evaluate(["--trial-dir", str(trial), "--rule-name", "WeightUpdateRatio",
                                     "--output-dir", str(out)], repo_env)
    assert code == 0, stderr
    assert status["RuleEvaluationStatus"] == "NoIssuesFound"
    details = status["StatusDetails"]
    assert details.startswith(f"{CHECKED_NOTHING} the rule found 'fc1.weight' but could judge none of them: it "
                              "needs each weight saved at two TRAIN steps")
    assert details.endswith("Training ended; last saved step: 1")
