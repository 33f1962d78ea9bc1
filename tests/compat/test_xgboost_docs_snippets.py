"""smdebug's XGBoost documentation (docs/xgboost.md, "Use the Debugger hook"), as a user runs its snippets
with the import prefix changed: the hook from SageMaker's config with ``train_data``, ``validation_data`` and
``hyperparameters`` set by assignment afterwards, or the hook from the constructor; DMatrix from libsvm files.

Changes the snippets need beyond the prefix (none of them sdk_ext's): XGBoost 2+ wants the text format in the
URI (``"train.libsvm?format=libsvm"``); the first snippet passes its evaluation list as ``evals_result=`` (a
dict XGBoost fills) where ``evals=`` is meant, and names ``dvalid`` where it defined ``dtest``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xgboost as xgb

from sdk_ext.exceptions import ConfigError
from sdk_ext.trials import create_trial
from sdk_ext.xgboost import Hook


def libsvm(path: Path, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(40, 3))
    y = (x[:, 0] + x[:, 1] > 0).astype(int)
    path.write_text("".join(f"{label} " + " ".join(f"{j}:{v:.4f}" for j, v in enumerate(row)) + "\n"
                            for label, row in zip(y, x)))
    return path


PARAMS = {"objective": "binary:logistic", "max_depth": 2, "eta": 0.3, "nthread": 1}


def test_hook_from_the_config_with_data_and_hyperparameters_assigned(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "debughookconfig.json"
    config.write_text(json.dumps({
        "LocalPath": str(tmp_path / "tensors"), "HookParameters": {"save_interval": "2"},
        "CollectionConfigurations": [{"CollectionName": c} for c in
                                     ("hyperparameters", "predictions", "labels", "average_shap")]}))
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(config))
    train_file, test_file = libsvm(tmp_path / "train.libsvm", 0), libsvm(tmp_path / "test.libsvm", 1)

    dtrain = xgb.DMatrix(f"{train_file}?format=libsvm")
    dtest = xgb.DMatrix(f"{test_file}?format=libsvm")
    hook = Hook.create_from_json_file()
    hook.train_data = dtrain  # required
    hook.validation_data = dtest  # optional
    hook.hyperparameters = PARAMS  # optional
    xgb.train(PARAMS, dtrain, 5, callbacks=[hook], evals=[(dtrain, "train"), (dtest, "validation")],
              verbose_eval=False)
    hook.close()

    trial = create_trial(str(tmp_path / "tensors"))
    assert trial.steps() == [0, 2, 4]
    assert trial.tensor("hyperparameters/objective").value(0).tolist() == ["binary:logistic"]
    assert trial.tensor("hyperparameters/max_depth").value(4).tolist() == [2]
    np.testing.assert_array_equal(trial.tensor("labels").value(2), dtest.get_label())
    assert trial.tensor("predictions").value(4).shape == (40,)
    assert {f"average_shap/f{i}" for i in range(3)} <= set(trial.tensor_names(collection="average_shap"))
    assert {"train-logloss", "validation-logloss"} <= set(trial.tensor_names(collection="metrics"))


def test_hook_from_the_constructor_takes_a_file_and_its_format(tmp_path: Path) -> None:
    train_file = libsvm(tmp_path / "train.libsvm", 0)
    valid_file = libsvm(tmp_path / "validation.libsvm", 2)
    dtrain = xgb.DMatrix(f"{train_file}?format=libsvm")
    hook = Hook(out_dir=str(tmp_path / "tensors"),  # required
                train_data=dtrain,  # required
                validation_data=(str(valid_file), "libsvm"),  # optional; smdebug's (file path, content type)
                hyperparameters=PARAMS,  # optional
                include_collections=["labels", "hyperparameters"])
    xgb.train(PARAMS, dtrain, 3, callbacks=[hook], verbose_eval=False)
    hook.close()
    trial = create_trial(str(tmp_path / "tensors"))
    assert trial.tensor("labels").value(0).shape == (40,)
    assert trial.tensor("hyperparameters/eta").value(0).tolist() == [0.3]


def test_assigning_data_of_no_accepted_form_is_refused_where_it_is_assigned(tmp_path: Path) -> None:
    hook = Hook(out_dir=str(tmp_path / "tensors"))
    with pytest.raises(ConfigError, match="train_data"):
        hook.train_data = [1, 2, 3]
    hook.hyperparameters = None
    assert hook.hyperparameters is None
    hook.close()
