"""The XGBoost hook's pure parts: metric names and kinds, importance, SHAP columns, tree tables, hyperparameters,
and the rules' train/validation pairing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sdk_ext.rules.builtin.metric_pairs import metric_pairs, validation_names
from sdk_ext.xgboost import model

xgb = pytest.importorskip("xgboost")


@pytest.mark.parametrize("metric", ["auc", "aucpr", "map", "map@5", "ndcg@3-", "pre@2", "map-",
                                    "interval-regression-accuracy", "AUC"])
def test_metrics_that_grow_are_not_losses(metric: str) -> None:
    assert model.is_increasing_metric(metric)


@pytest.mark.parametrize("metric", ["rmse", "logloss", "mlogloss", "error", "error@0.7", "merror", "mae", "mape",
                                    "poisson-nloglik", "aft-nloglik", "my_custom"])
def test_losses_and_unknown_metrics_are_losses(metric: str) -> None:
    assert not model.is_increasing_metric(metric)


def test_metric_values_take_the_latest_of_every_set() -> None:
    log = {"valid_0": {"error@0.7": [0.5, 0.25]}, "my/set": {"map@5": [0.1]}, "empty": {"rmse": []}}
    assert model.metric_values(log) == [("valid_0-error@0.7", "error@0.7", 0.25), ("my/set-map@5", "map@5", 0.1)]
    cv = {"test": {"logloss": [(0.6, 0.01), (0.5, 0.02)]}}
    assert model.metric_values(cv) == [("test-logloss-mean", "logloss", 0.5), ("test-logloss-std", "logloss", 0.02)]


def test_importance_counts_every_feature() -> None:
    shares = model.normalized_importance({"b": 3.0, "a": 1.0}, ["a", "b", "unused"])
    assert shares == {"a": 0.25, "b": 0.75, "unused": 0.0}
    assert model.normalized_importance({}, ["a"]) == {"a": 0.0}  # no split yet
    assert model.normalized_importance({"a": [1.0, 1.0], "b": [2.0, 0.0]}, ["a", "b"]) == {"a": 0.5, "b": 0.5}


def test_shap_columns_drop_the_bias_and_keep_classes() -> None:
    contribs = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)  # rows, classes, 3 features + bias
    cols = model.shap_columns(contribs, ["x", "y", "z"])
    assert list(cols) == ["x", "y", "z"]
    np.testing.assert_array_equal(cols["y"], contribs[:, :, 1])
    column = np.array([-1.0, 3.0], dtype=np.float32)
    assert model.average_shap(column).tolist() == [1.0] and model.mean_abs_shap(column).tolist() == [2.0]
    assert model.average_shap(column).dtype == np.float32


def test_hyperparameters_are_saved_faithfully_or_not_at_all() -> None:
    assert model.hyperparameter_array(0.3).tolist() == [0.3]
    assert model.hyperparameter_array(3).dtype == np.int64
    assert model.hyperparameter_array("reg:squarederror").tolist() == ["reg:squarederror"]
    assert model.hyperparameter_array(["rmse", "mae"]).tolist() == ["rmse", "mae"]
    assert json.loads(model.hyperparameter_array({"b": 1, "a": [2]})[0]) == {"a": [2], "b": 1}
    for bad in (None, object(), [], [None], [[1], [2, 3]]):
        assert model.hyperparameter_array(bad) is None, bad


def test_tree_table_matches_trees_to_dataframe_with_categorical_splits() -> None:
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"c c": pd.Categorical(rng.choice(["a", "b", "c", "d"], 200)), "n": rng.normal(size=200)})
    label = frame["c c"].isin(["a", "c"]).astype(float) + frame.n * 0.1
    booster = xgb.train({"tree_method": "hist", "max_depth": 2, "max_cat_to_onehot": 1},
                        xgb.DMatrix(frame, label=label, enable_categorical=True), 2)
    table = model.tree_table(booster[1:2].get_dump(dump_format="json", with_stats=True), first_tree=1)
    expected = booster.trees_to_dataframe()
    expected = expected[expected.Tree == 1].reset_index(drop=True)
    assert table["ID"].tolist() == expected.ID.tolist() and table["Feature"].tolist() == expected.Feature.tolist()
    assert table["Category"].tolist() == [",".join(c) if isinstance(c, list) else "nan" for c in expected.Category]
    np.testing.assert_allclose(table["Gain"], expected.Gain, rtol=1e-6)
    assert table["Depth"].tolist()[0] == 0 and table["Depth"].max() == 2


def test_rules_pair_train_with_each_validation_set() -> None:
    names = ["train-rmse", "validation-rmse", "eval-rmse", "train-poisson-nloglik", "valid-poisson-nloglik",
             "validation-mae", "train-ndcg@3-", "test-ndcg@3-"]
    pairs = {(p.train, p.validation) for p in metric_pairs(names)}
    assert pairs == {("train-rmse", "eval-rmse"), ("train-rmse", "validation-rmse"),
                     ("train-poisson-nloglik", "valid-poisson-nloglik"), ("train-ndcg@3-", "test-ndcg@3-")}
    assert validation_names(["validation-mae", "other-mae"]) == set()  # no training counterpart
