"""sdk_ext.xgboost.Hook on real xgboost training: smdebug's names and collections, none of its defects."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import xgboost as xgb

from sdk_ext.exceptions import ConfigError
from sdk_ext.hooks import SaveConfig
from sdk_ext.trials import create_trial
from sdk_ext.xgboost import Hook
from sdk_ext.xgboost.model import IMPORTANCE_TYPES
from tests.functional.xgboost.jobs import FEATURES, data, train_job


def value(trial, name: str, step: int) -> np.ndarray:
    return np.asarray(trial.tensor(name).value(step))


def test_regression_round_by_round(tmp_path: Path) -> None:
    hook, booster, result, dtrain, dvalid = train_job(tmp_path / "t", "regression", rounds=6)
    assert hook.failure is None
    trial = create_trial(str(tmp_path / "t"))
    assert trial.steps() == list(range(6))
    assert trial.modes() == [] or list(trial.modes()) == []  # GLOBAL only, as smdebug
    names = set(trial.tensor_names())
    for step in range(6):
        for data_name in ("train", "validation"):
            for metric in ("rmse", "mae"):
                saved = value(trial, f"{data_name}-{metric}", step)
                assert saved.dtype == np.float64 and saved.shape == (1,)
                assert saved[0] == pytest.approx(result[data_name][metric][step])
    assert set(trial.tensor_names(collection="losses")) == {"train-rmse", "train-mae", "validation-rmse",
                                                           "validation-mae"}
    # every feature, whatever its name ends with, and the unused one with importance 0
    for kind in IMPORTANCE_TYPES:
        shares = [value(trial, f"feature_importance/{kind}/{f}", 5)[0] for f in FEATURES]
        assert sum(shares) == pytest.approx(1.0)
    assert value(trial, "feature_importance/weight/flags", 5)[0] == 0.0
    gains = booster.get_score(importance_type="gain")
    assert value(trial, "feature_importance/gain/age", 5)[0] == pytest.approx(gains["age"] / sum(gains.values()))
    # SHAP: the feature's own column; average_shap is smdebug's signed mean; mean_abs_shap the absolute one
    contribs = booster.predict(dtrain, pred_contribs=True)
    for i, f in enumerate(FEATURES):
        column = value(trial, f"full_shap/{f}", 5)
        np.testing.assert_array_equal(column, contribs[:, i])
        assert value(trial, f"average_shap/{f}", 5)[0] == pytest.approx(contribs[:, i].mean(), abs=1e-6)
        assert value(trial, f"mean_abs_shap/{f}", 5)[0] == pytest.approx(np.abs(contribs[:, i]).mean(), abs=1e-6)
    assert not any(n.endswith("/bias") for n in names)  # the expected value is not a feature
    np.testing.assert_array_equal(value(trial, "predictions", 5), booster.predict(dvalid))
    np.testing.assert_array_equal(value(trial, "labels", 0), dvalid.get_label())
    assert value(trial, "hyperparameters/objective", 0).tolist() == ["reg:squarederror"]
    assert value(trial, "hyperparameters/eval_metric", 0).tolist() == ["rmse", "mae"]
    assert value(trial, "hyperparameters/max_depth", 0).tolist() == [3]


def test_trees_are_every_tree_the_round_added(tmp_path: Path) -> None:
    pandas = pytest.importorskip("pandas")
    assert pandas
    _, booster, *_ = train_job(tmp_path / "t", "softprob", rounds=4, extra={"num_parallel_tree": 2},
                               include=["trees"])
    trial = create_trial(str(tmp_path / "t"))
    frame = booster.trees_to_dataframe()
    per_round = 3 * 2  # num_class x num_parallel_tree
    for step in range(4):
        trees = value(trial, "trees/Tree", step)
        assert sorted(set(trees.tolist())) == list(range(step * per_round, (step + 1) * per_round))
        expected = frame[frame.Tree.isin(set(trees.tolist()))].reset_index(drop=True)
        np.testing.assert_array_equal(trees, expected.Tree.to_numpy())
        np.testing.assert_array_equal(value(trial, "trees/Node", step), expected.Node.to_numpy())
        assert value(trial, "trees/ID", step).tolist() == expected.ID.tolist()
        assert value(trial, "trees/Feature", step).tolist() == expected.Feature.tolist()
        assert value(trial, "trees/Yes", step).tolist() == [str(v) for v in expected.Yes.tolist()]
        np.testing.assert_allclose(value(trial, "trees/Split", step), expected.Split.to_numpy(), rtol=1e-6)
        np.testing.assert_allclose(value(trial, "trees/Gain", step), expected.Gain.to_numpy(), rtol=1e-6)
        np.testing.assert_allclose(value(trial, "trees/Cover", step), expected.Cover.to_numpy(), rtol=1e-6)
        depth = value(trial, "trees/Depth", step)
        assert depth.max() <= 3 and depth[value(trial, "trees/Node", step) == 0].tolist() == [0] * per_round


def test_multiclass_shap_columns_and_predictions(tmp_path: Path) -> None:
    _, booster, _, dtrain, dvalid = train_job(tmp_path / "t", "softprob", rounds=3)
    trial = create_trial(str(tmp_path / "t"))
    contribs = booster.predict(dtrain, pred_contribs=True)  # (rows, classes, features + 1)
    np.testing.assert_array_equal(value(trial, "full_shap/bmi", 2), contribs[:, :, 1])
    np.testing.assert_array_equal(value(trial, "predictions", 2), booster.predict(dvalid))
    assert value(trial, "predictions", 2).shape == (30, 3)
    assert value(trial, "average_shap/bmi", 2)[0] == pytest.approx(contribs[:, :, 1].mean(), abs=1e-6)


def test_metric_names_of_any_set_and_increasing_metrics_are_not_losses(tmp_path: Path) -> None:
    train_job(tmp_path / "t", "binary", rounds=2, valid_name="valid_0", include=["losses"])
    trial = create_trial(str(tmp_path / "t"))
    metrics = set(trial.tensor_names(collection="metrics"))
    assert {"valid_0-logloss", "valid_0-error", "valid_0-auc", "valid_0-aucpr", "valid_0-error@0.7",
            "train-aucpr"} <= metrics
    losses = set(trial.tensor_names(collection="losses"))
    assert {"valid_0-logloss", "valid_0-error", "valid_0-error@0.7", "train-logloss"} <= losses
    assert not any(n.endswith(("-auc", "-aucpr")) for n in losses)


def test_ranking_metrics_with_at_are_metrics_not_losses(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    x, rel = rng.normal(size=(60, 3)), rng.integers(0, 2, 60)
    d = xgb.DMatrix(x, label=rel)
    d.set_group([10] * 6)
    hook = Hook(tmp_path / "t", save_config=SaveConfig(save_interval=1), include_collections=["losses"])
    xgb.train({"objective": "rank:ndcg", "eval_metric": ["map@5", "ndcg@3", "pre@2"]}, d, 2, evals=[(d, "eval")],
              callbacks=[hook], verbose_eval=False)
    hook.close()
    trial = create_trial(str(tmp_path / "t"))
    assert {"eval-map@5", "eval-ndcg@3", "eval-pre@2"} <= set(trial.tensor_names(collection="metrics"))
    assert trial.tensor_names(collection="losses") == []


def test_default_is_metrics_every_ten_rounds(tmp_path: Path) -> None:
    x, y = data("regression")
    d = xgb.DMatrix(x, label=y)
    hook = Hook(tmp_path / "t")
    xgb.train({"objective": "reg:squarederror"}, d, 25, evals=[(d, "train")], callbacks=[hook], verbose_eval=False)
    hook.close()
    trial = create_trial(str(tmp_path / "t"))
    assert trial.steps() == [0, 10, 20]
    assert trial.tensor_names() == ["train-rmse"]
    assert trial.tensor_names(collection="losses") == ["train-rmse"]  # listed with metrics, no steps of its own


def test_sklearn_estimators_take_the_hook_as_a_callback(tmp_path: Path) -> None:
    pytest.importorskip("sklearn")
    x, y = data("softprob")
    hook = Hook(tmp_path / "c", save_config=SaveConfig(save_interval=1),
                include_collections=["feature_importance", "predictions", "labels"], validation_data=(x[90:], y[90:]))
    model = xgb.XGBClassifier(n_estimators=4, max_depth=2, callbacks=[hook])
    model.fit(x[:90], y[:90], eval_set=[(x[:90], y[:90]), (x[90:], y[90:])], verbose=False)
    hook.close()
    assert hook.failure is None
    trial = create_trial(str(tmp_path / "c"))
    assert trial.steps() == [0, 1, 2, 3]
    assert {"validation_0-mlogloss", "validation_1-mlogloss", "predictions", "labels",
            "feature_importance/gain/f4"} <= set(trial.tensor_names())
    np.testing.assert_allclose(value(trial, "predictions", 3), model.predict_proba(x[90:]), rtol=1e-6)

    hook = Hook(tmp_path / "r", save_config=SaveConfig(save_interval=2))
    xgb.XGBRegressor(n_estimators=5, callbacks=[hook]).fit(x, y, eval_set=[(x, y)], verbose=False)
    hook.close()
    assert create_trial(str(tmp_path / "r")).steps() == [0, 2, 4]


def test_bad_input_is_saved_faithfully_or_skipped_with_one_warning(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    x, y = data("regression")
    names = ["a b", "ünï", "x/y", "bias", "s"]
    dtrain = xgb.DMatrix(x, label=y, feature_names=names)
    unlabeled = xgb.DMatrix(x[:10], feature_names=names)
    hyper = {"eta": 0.3, "flag": True, "none": None, "obj": object(), "nested": {"a": [1, 2]}, "mixed": [1, "two"],
             "empty": [], "tuple": (1, 2)}
    hook = Hook(tmp_path / "t", save_config=SaveConfig(save_interval=1), save_all=True, hyperparameters=hyper,
                train_data=dtrain, validation_data=unlabeled)
    with caplog.at_level(logging.WARNING, logger="sdk_ext"):
        xgb.train({"objective": "reg:squarederror", "max_depth": 2}, dtrain, 4,
                  evals=[(dtrain, "my/train")], callbacks=[hook], verbose_eval=False)
    hook.close()
    assert hook.failure is None
    trial = create_trial(str(tmp_path / "t"))
    tensor_names = set(trial.tensor_names())
    assert {"my/train-rmse", "full_shap/a b", "full_shap/ünï", "full_shap/x/y", "full_shap/bias",
            "feature_importance/weight/s", "predictions"} <= tensor_names
    assert "labels" not in tensor_names
    assert value(trial, "hyperparameters/flag", 0).tolist() == [True]
    assert json.loads(value(trial, "hyperparameters/nested", 0)[0]) == {"a": [1, 2]}
    assert value(trial, "hyperparameters/mixed", 0).tolist() == ["1", "two"]
    assert value(trial, "hyperparameters/tuple", 0).tolist() == [1, 2]
    assert not {"hyperparameters/none", "hyperparameters/obj", "hyperparameters/empty"} & tensor_names
    warnings = [r.getMessage() for r in caplog.records]
    for word in ("'none'", "'obj'", "'empty'", "no labels"):
        assert sum(word in w for w in warnings) == 1, (word, warnings)


def test_a_failure_inside_a_round_disables_the_hook_not_training(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    x, y = data("regression")
    dtrain = xgb.DMatrix(x, label=y, feature_names=FEATURES)
    wrong = xgb.DMatrix(x, label=y, feature_names=[f"other{i}" for i in range(len(FEATURES))])  # predict() raises
    hook = Hook(tmp_path / "t", save_config=SaveConfig(save_interval=1), include_collections=["predictions"],
                validation_data=wrong)
    with caplog.at_level(logging.ERROR, logger="sdk_ext"):
        booster = xgb.train({"objective": "reg:squarederror"}, dtrain, 5, evals=[(dtrain, "train")],
                            callbacks=[hook], verbose_eval=False)
    assert booster.num_boosted_rounds() == 5
    assert hook.disabled and isinstance(hook.failure, ValueError)
    assert sum("hook is disabled" in r.getMessage() for r in caplog.records) == 1
    hook.close()


def test_a_second_training_with_the_same_hook_goes_on_after_the_first(tmp_path: Path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    x, y = data("regression")
    d = xgb.DMatrix(x, label=y)
    hook = Hook(tmp_path / "t", save_config=SaveConfig(save_interval=1))
    for _ in range(2):
        xgb.train({"objective": "reg:squarederror"}, d, 3, evals=[(d, "train")], callbacks=[hook],
                  verbose_eval=False)
    hook.close()
    assert create_trial(str(tmp_path / "t")).steps() == list(range(6))
    assert hook.failure is None


def test_bad_data_arguments_raise_config_error_before_training(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="validation_data"):
        Hook(tmp_path / "a", validation_data="not data")
    with pytest.raises(ConfigError, match="content type"):
        Hook(tmp_path / "b", train_data=(str(tmp_path), "parquet"))
    csv = tmp_path / "train.csv"
    csv.write_text("1,0.5,2\n0,0.1,3\n")
    hook = Hook(tmp_path / "c", train_data=(str(csv), "text/csv"))
    assert hook.train_data.num_row() == 2 and hook.train_data.get_label().tolist() == [1, 0]
    hook.close()


def test_create_from_json_file_keeps_smdebugs_xgboost_default_interval(tmp_path: Path) -> None:
    config = tmp_path / "debughookconfig.json"
    config.write_text(json.dumps({"LocalPath": str(tmp_path / "t"), "CollectionConfigurations": [
        {"CollectionName": "feature_importance"}, {"CollectionName": "trees", "CollectionParameters": {
            "save_interval": "5"}}]}))
    hook = Hook.create_from_json_file(str(config))
    assert Hook.create_from_json_file(str(config)) is hook
    x, y = data("regression")
    d = xgb.DMatrix(x, label=y)
    xgb.train({"objective": "reg:squarederror"}, d, 12, evals=[(d, "train")], callbacks=[hook], verbose_eval=False)
    hook.close()
    trial = create_trial(str(tmp_path / "t"))
    assert trial.tensor("train-rmse").steps() == [0, 10]
    assert trial.tensor("trees/Node").steps() == [0, 5, 10]
    assert trial.tensor("feature_importance/gain/f0").steps() == [0, 10]


def test_cross_validation_saves_the_folds_mean_and_std(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    x, y = data("binary")
    hook = Hook(tmp_path / "t", save_config=SaveConfig(save_interval=1), include_collections=["feature_importance"])
    with caplog.at_level(logging.WARNING, logger="sdk_ext"):
        result = xgb.cv({"objective": "binary:logistic", "eval_metric": "logloss"}, xgb.DMatrix(x, label=y), 3,
                        nfold=3, callbacks=[hook])
    hook.close()
    assert hook.failure is None
    trial = create_trial(str(tmp_path / "t"))
    assert trial.steps() == [0, 1, 2]
    assert value(trial, "test-logloss-mean", 2)[0] == pytest.approx(result["test-logloss-mean"].iloc[2])
    assert value(trial, "train-logloss-std", 1)[0] == pytest.approx(result["train-logloss-std"].iloc[1])
    assert sum("only metrics are saved" in r.getMessage() for r in caplog.records) == 1


def test_shap_on_the_training_data_of_an_sklearn_fit(tmp_path: Path) -> None:
    pytest.importorskip("sklearn")
    x, y = data("binary")
    hook = Hook(tmp_path / "t", save_config=SaveConfig(save_interval=1), include_collections=["mean_abs_shap"],
                train_data=(x, y))
    model = xgb.XGBClassifier(n_estimators=3, callbacks=[hook]).fit(x, y, eval_set=[(x, y)], verbose=False)
    hook.close()
    assert hook.failure is None
    contribs = model.get_booster().predict(xgb.DMatrix(x), pred_contribs=True)
    trial = create_trial(str(tmp_path / "t"))
    assert value(trial, "mean_abs_shap/f0", 2)[0] == pytest.approx(np.abs(contribs[:, 0]).mean(), rel=1e-5)


def test_constructor_is_smdebugs() -> None:
    import inspect

    import sdk_ext.xgboost as smd

    params = list(inspect.signature(Hook).parameters)
    assert params[:13] == ["out_dir", "export_tensorboard", "tensorboard_dir", "dry_run", "reduction_config",
                           "save_config", "include_regex", "include_collections", "save_all", "include_workers",
                           "hyperparameters", "train_data", "validation_data"]
    hook = Hook("/unused", dry_run=True)
    assert isinstance(hook, xgb.callback.TrainingCallback)
    assert smd.get_hook() is hook  # the hook just made is the process's hook
    hook.close()
    assert smd.get_hook() is None
    assert smd.modes.GLOBAL is smd.ModeKeys.GLOBAL and callable(Hook.create_from_json_file)
