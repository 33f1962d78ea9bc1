"""An XGBoost hook built from SageMaker's debughookconfig.json saves what the configuration names, as
smdebug's XGBoost hook does: the named collections at their own intervals plus ``metrics`` (smdebug's one
default collection), and nothing else. A notebook loop over ``trial.steps()`` then finds every configured
tensor at every step (it used to meet rounds 10 and 20 holding only ``losses``). The loss-like metrics are
listed under ``losses`` as well, at the steps ``metrics`` saves them (smdebug left ``losses`` empty, and the
loss rules with nothing to judge)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xgboost as xgb

from sdk_ext.trials import create_trial
from sdk_ext.xgboost import Hook
from tests.trial_dump import dump_with_smdebug


def config(tmp_path: Path, collections: dict[str, dict[str, str]], hook_parameters: dict[str, str] | None = None
           ) -> Path:
    doc = {"S3OutputPath": "s3://bucket/prefix", "LocalPath": str(tmp_path / "tensors"),
           "HookParameters": hook_parameters or {},
           "CollectionConfigurations": [{"CollectionName": name, "CollectionParameters": params}
                                        for name, params in collections.items()]}
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps(doc))
    return path


def train(hook: Hook, rounds: int = 22, eval_metric: str = "rmse") -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 4))
    y = x[:, 0] * 2 + rng.normal(scale=0.2, size=60)
    dtrain, dvalid = xgb.DMatrix(x[:45], label=y[:45]), xgb.DMatrix(x[45:], label=y[45:])
    hook.validation_data = dvalid
    xgb.train({"objective": "reg:squarederror", "eval_metric": eval_metric, "nthread": 1}, dtrain, rounds,
              evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[hook], verbose_eval=False)
    hook.close()


def test_every_step_of_a_config_naming_metrics_predictions_and_labels_holds_them(tmp_path: Path) -> None:
    every_3 = {"save_interval": "3"}
    path = config(tmp_path, {"metrics": every_3, "predictions": every_3, "labels": every_3})
    train(Hook.create_from_json_file(str(path)))
    trial = create_trial(str(tmp_path / "tensors"))
    assert trial.steps() == list(range(0, 22, 3))
    for step in trial.steps():  # the notebook loop: no TensorUnavailableForStep
        labels = trial.tensor("labels").value(step)
        predictions = trial.tensor("predictions").value(step)
        assert labels.shape == predictions.shape == (15,)
        assert trial.tensor("validation-rmse").value(step).shape == (1,)
    # the loss-like metrics are listed under losses too (for the loss rules), with no step of their own
    assert set(trial.tensor_names(collection="losses")) == {"train-rmse", "validation-rmse"}
    assert trial.tensor("train-rmse").steps() == list(range(0, 22, 3))


def test_metrics_are_always_saved_at_the_hook_interval_and_losses_only_when_named(tmp_path: Path) -> None:
    """smdebug's test_hook_from_json_config_for_losses, as a user meets it: a config naming only ``losses``
    (every round) still gets ``metrics`` (at the default 10 rounds); an increasing metric is never a loss."""
    path = config(tmp_path, {"losses": {"save_interval": "1"}})
    train(Hook.create_from_json_file(str(path)), rounds=12)
    trial = create_trial(str(tmp_path / "tensors"))
    assert trial.steps() == list(range(12))
    assert trial.tensor("train-rmse").steps() == list(range(12))
    assert set(trial.tensor_names(collection="losses")) == {"train-rmse", "validation-rmse"}
    assert set(trial.tensor_names(collection="metrics")) == {"train-rmse", "validation-rmse"}

    auc = tmp_path / "auc"
    auc.mkdir()
    path = config(auc, {"losses": {"save_interval": "1"}})
    rng = np.random.default_rng(1)
    x = rng.normal(size=(40, 3))
    d = xgb.DMatrix(x, label=(x[:, 0] > 0).astype(float))
    hook = Hook.create_from_json_file(str(path))
    xgb.train({"objective": "binary:logistic", "eval_metric": "auc", "nthread": 1}, d, 12, evals=[(d, "train")],
              callbacks=[hook], verbose_eval=False)
    hook.close()
    trial = create_trial(str(auc / "tensors"))
    assert trial.tensor_names(collection="losses") == []
    assert trial.tensor_names(collection="metrics") == ["train-auc"]
    assert trial.steps() == [0, 10]  # metrics at the hook's default interval; losses named, but auc is no loss


def test_a_hook_without_configured_collections_saves_metrics_every_ten_rounds(tmp_path: Path) -> None:
    path = config(tmp_path, {})
    train(Hook.create_from_json_file(str(path)))
    trial = create_trial(str(tmp_path / "tensors"))
    assert trial.steps() == [0, 10, 20]
    assert trial.tensor_names() == ["train-rmse", "validation-rmse"]


@pytest.mark.smdebug
def test_smdebug_reads_the_configured_steps(tmp_path: Path, smdebug_python: Path) -> None:
    every_3 = {"save_interval": "3"}
    path = config(tmp_path, {"metrics": every_3, "predictions": every_3, "labels": every_3})
    train(Hook.create_from_json_file(str(path)))
    theirs = dump_with_smdebug(smdebug_python, tmp_path / "tensors", tmp_path)
    assert theirs["steps"] == {"GLOBAL": list(range(0, 22, 3))}
    for name in ("labels", "predictions", "train-rmse", "validation-rmse"):
        assert sorted(int(s) for s in theirs["tensors"][name]) == list(range(0, 22, 3)), name
