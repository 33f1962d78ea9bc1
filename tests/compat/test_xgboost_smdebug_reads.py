"""Real smdebug 1.0.34 reads trials written by sdk_ext.xgboost.Hook: same names, steps, values (strings
included) and collection members; sdk_ext's reader agrees. (The other direction, smdebug's own XGBoost
trials x1/x2 read by sdk_ext, is tests/compat/test_trial_fixtures.py.)"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.functional.xgboost.jobs import train_job
from tests.trial_dump import dump_with_format, dump_with_smdebug, dump_with_trials

COLLECTIONS_SCRIPT = """
import json, os, sys
os.environ.setdefault("SMDEBUG_TRAINING_END_DELAY_REFRESH", "0")
from smdebug.trials import create_trial
t = create_trial(sys.argv[1])
names = ["metrics", "losses", "hyperparameters", "predictions", "labels", "feature_importance", "average_shap",
         "mean_abs_shap", "full_shap", "trees"]
json.dump({n: sorted(t.tensor_names(collection=n)) for n in names}, open(sys.argv[2], "w"))
"""


@pytest.fixture(scope="module", params=["regression", "softprob"])
def xgboost_trial(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    trial = tmp_path_factory.mktemp("xgb") / "trial"
    hook, *_ = train_job(trial, request.param, rounds=4, save_interval=1)
    assert hook.failure is None
    return trial


@pytest.mark.smdebug
def test_smdebug_reads_an_xgboost_hook_trial(xgboost_trial: Path, smdebug_python: Path, tmp_path: Path) -> None:
    theirs = dump_with_smdebug(smdebug_python, xgboost_trial, tmp_path)
    ours = dump_with_format(xgboost_trial)
    assert theirs["modes"] == [] and theirs["steps"] == ours["steps"] == {"GLOBAL": [0, 1, 2, 3]}
    assert theirs["tensor_names"] == ours["tensor_names"]
    assert {"full_shap/bmi", "full_shap/zip code", "feature_importance/weight/flags", "trees/Feature",
            "hyperparameters/objective", "hyperparameters/eval_metric", "predictions", "labels"} <= set(
        theirs["tensor_names"])
    assert theirs["tensors"] == ours["tensors"]  # values bit for bit, string tensors by value
    assert theirs["loaded_all_steps"] is True


@pytest.mark.smdebug
def test_smdebug_sees_the_same_collection_members(xgboost_trial: Path, smdebug_python: Path, tmp_path: Path) -> None:
    out = tmp_path / "collections.json"
    proc = subprocess.run([str(smdebug_python), "-c", COLLECTIONS_SCRIPT, str(xgboost_trial), str(out)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    theirs = json.loads(out.read_text())
    from sdk_ext.trials import create_trial

    mine = create_trial(str(xgboost_trial))
    for name, members in theirs.items():
        assert members == sorted(mine.tensor_names(collection=name)), name
    assert theirs["losses"] and not any(m.endswith(("-auc", "-aucpr")) for m in theirs["losses"])
    assert "feature_importance/gain/flags" in theirs["feature_importance"]  # an unused feature, reported as 0
    assert {"full_shap/bmi", "full_shap/größe", "full_shap/zip code"} <= set(theirs["full_shap"])


def test_the_projects_reader_reads_an_xgboost_hook_trial(xgboost_trial: Path) -> None:
    mine, ours = dump_with_trials(xgboost_trial), dump_with_format(xgboost_trial)
    for key in ("tensor_names", "workers", "modes", "steps", "mode_of_step", "tensors"):
        assert mine[key] == ours[key], key


def test_smdebugs_own_xgboost_trials_read_with_the_defects_sdk_ext_does_not_repeat() -> None:
    """x1/x2 (real smdebug) read by sdk_ext as written (test_trial_fixtures.py checks every value against
    expected.json); here, the defects README names, each one seen in the data."""
    import numpy as np

    from sdk_ext.trials import create_trial
    from tests.conftest import SMDEBUG_FIXTURES

    x1 = create_trial(str(SMDEBUG_FIXTURES / "x1_xgboost_regression" / "out"))
    full = np.asarray(x1.tensor("full_shap/age").value(5))
    assert full.shape == (16, 4)  # the whole matrix, not age's column
    signed_mean = float(np.asarray(x1.tensor("average_shap/age").value(5))[0])
    assert signed_mean == pytest.approx(float(full[:, 0].mean()), rel=1e-5)  # signed, not absolute
    assert not x1.tensor_names(regex=["shap/bmi", "shap/flags", "/flags$"])  # dropped by `[^/bias]`; flags unused
    x2 = create_trial(str(SMDEBUG_FIXTURES / "x2_xgboost_multiclass" / "out"))
    for step in (0, 4, 9):  # one tree, tree #step, instead of the 3 trees the round added
        assert set(np.asarray(x2.tensor("trees/Tree").value(step)).tolist()) == {step}
    assert "feature_importance/gain/f2" in x2.tensor_names() and 0 not in x2.tensor("feature_importance/gain/f2").steps()
