"""A script that calls xgb.train or an sklearn estimator's fit with no hook code gets the hook from
SageMaker's debughookconfig.json: through ``python -m sdk_ext.xgboost.run``, the ``.pth`` line, and
``sdk-ext run --zero-change``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sdk_ext.local.jobs.frameworks import launcher
from sdk_ext.trials import create_trial

SCRIPT = Path(__file__).with_name("plain_train.py")
PTH_LINE = "import sdk_ext.xgboost.zero_change as z; z.install()"  # what the .pth file holds


def config(tmp_path: Path, collections: list[str], **hook_params: str) -> Path:
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps({
        "S3OutputPath": "s3://bucket/prefix", "LocalPath": str(tmp_path / "tensors"), "HookParameters": hook_params,
        "CollectionConfigurations": [{"CollectionName": c} for c in collections]}))
    return path


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "done" in proc.stdout
    return proc


@pytest.fixture
def env(repo_env: dict[str, str]) -> dict[str, str]:
    env = dict(repo_env)
    env.pop("TRAINING_JOB_NAME", None)
    return env


def test_run_module_gives_xgb_train_a_hook_from_the_config(tmp_path: Path, env: dict[str, str]) -> None:
    env["SMDEBUG_CONFIG_FILE_PATH"] = str(config(tmp_path, ["hyperparameters", "predictions", "labels",
                                                            "average_shap"], save_interval="5"))
    proc = run(["-m", "sdk_ext.xgboost.run", str(SCRIPT), "train", "12"], env)
    assert "hook will be created from" in proc.stderr
    out = tmp_path / "tensors"
    assert (out / "training_job_end.ts").exists()  # closed at exit
    trial = create_trial(str(out))
    assert trial.steps() == [0, 5, 10]
    names = set(trial.tensor_names())
    assert {"train-logloss", "validation-auc", "hyperparameters/objective", "predictions", "labels",
            "average_shap/f0"} <= names
    assert np.asarray(trial.tensor("hyperparameters/eval_metric").value(0)).tolist() == ["logloss", "auc"]
    assert np.asarray(trial.tensor("labels").value(0)).shape == (50,)  # the validation set, not the training set


def test_pth_line_patches_xgboost_when_the_script_imports_it(tmp_path: Path, env: dict[str, str]) -> None:
    env["SMDEBUG_CONFIG_FILE_PATH"] = str(config(tmp_path, ["feature_importance"], save_interval="1"))
    site_dir = tmp_path / "site-packages"
    site_dir.mkdir()
    (site_dir / "sdk_ext_xgboost_hook.pth").write_text(PTH_LINE + "\n")
    # site.addsitedir runs the .pth file the way interpreter start-up runs those of site-packages
    code = (f"import site, sys; site.addsitedir({str(site_dir)!r})\n"
            "assert 'xgboost' not in sys.modules, 'the .pth line imported xgboost'\n"
            f"import runpy; sys.argv = [{str(SCRIPT)!r}, 'train', '3']; runpy.run_path(sys.argv[0], run_name='__main__')")
    run(["-c", code], env)
    trial = create_trial(str(tmp_path / "tensors"))
    assert trial.steps() == [0, 1, 2]
    assert "feature_importance/weight/f2" in trial.tensor_names()


def test_sklearn_fit_gets_the_hook_too(tmp_path: Path, env: dict[str, str]) -> None:
    pytest.importorskip("sklearn")
    env["SMDEBUG_CONFIG_FILE_PATH"] = str(config(tmp_path, ["predictions", "hyperparameters", "average_shap"],
                                                 save_interval="2"))
    run(["-m", "sdk_ext.xgboost.run", str(SCRIPT), "sklearn", "5"], env)
    trial = create_trial(str(tmp_path / "tensors"))
    assert trial.steps() == [0, 2, 4]
    names = set(trial.tensor_names())
    # the estimator's eval_set: validation_0 is the training data itself, so predictions are on validation_1
    assert {"validation_0-logloss", "validation_1-logloss", "predictions", "hyperparameters/max_depth",
            "average_shap/f0"} <= names  # SHAP on the estimator's own training data
    assert np.asarray(trial.tensor("predictions").value(0)).shape == (50,)


def test_a_script_with_its_own_hook_shares_it(tmp_path: Path, env: dict[str, str]) -> None:
    env["SMDEBUG_CONFIG_FILE_PATH"] = str(config(tmp_path, [], save_interval="1"))
    proc = run(["-m", "sdk_ext.xgboost.run", str(SCRIPT), "own-hook", "3"], env)
    assert "second sdk_ext hook" not in proc.stderr
    trial = create_trial(str(tmp_path / "tensors"))
    assert trial.steps() == [0, 1, 2] and "train-logloss" in trial.tensor_names()


def test_without_a_config_the_script_runs_as_is(tmp_path: Path, env: dict[str, str]) -> None:
    env["SMDEBUG_CONFIG_FILE_PATH"] = str(tmp_path / "missing.json")
    proc = run(["-m", "sdk_ext.xgboost.run", str(SCRIPT), "train", "2"], env)
    assert "sdk_ext" not in proc.stderr


def test_a_bad_config_is_reported_and_training_goes_on(tmp_path: Path, env: dict[str, str]) -> None:
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps({"LocalPath": str(tmp_path / "t"), "HookParameters": {"save_interval": "0"}}))
    env["SMDEBUG_CONFIG_FILE_PATH"] = str(path)
    proc = run(["-m", "sdk_ext.xgboost.run", str(SCRIPT), "train", "2"], env)
    assert "not saving debugging data" in proc.stderr and "save_interval must be a positive integer" in proc.stderr
    assert not (tmp_path / "t").exists()


def test_sdk_ext_run_picks_the_xgboost_launcher(tmp_path: Path) -> None:
    assert launcher(SCRIPT, True) == "sdk_ext.xgboost.run"
    both = tmp_path / "both.py"
    both.write_text("import torch\nfrom xgboost import XGBClassifier\n")
    assert launcher(both, True) == "sdk_ext.pytorch.run"
    assert launcher(Path(__file__).parents[1] / "pytorch" / "plain_train.py", True) == "sdk_ext.pytorch.run"
