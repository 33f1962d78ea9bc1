"""Small real XGBoost trainings for the hook and rule tests (deterministic, a second or less each)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import xgboost as xgb

from sdk_ext.hooks import SaveConfig
from sdk_ext.xgboost import Hook

ALL_COLLECTIONS = ["hyperparameters", "metrics", "losses", "predictions", "labels", "feature_importance",
                   "average_shap", "mean_abs_shap", "full_shap", "trees"]
FEATURES = ["age", "bmi", "flags", "zip code", "größe"]  # names ending in a/s/i, a blank, unicode


def data(kind: str, n: int = 120, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Features (``flags`` is constant: never split on) and labels for ``kind``."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, len(FEATURES))).astype(np.float32)
    x[:, 2] = 1.0
    signal = x[:, 0] * 2 + x[:, 1] - x[:, 3] * 0.5 + rng.normal(scale=0.3, size=n)
    if kind == "regression":
        y = signal
    elif kind == "binary":
        y = (signal > 0).astype(np.float32)
    else:
        y = np.digitize(signal, np.quantile(signal, [1 / 3, 2 / 3])).astype(np.float32)
    return x, y


PARAMS: dict[str, dict[str, Any]] = {
    "regression": {"objective": "reg:squarederror", "eval_metric": ["rmse", "mae"]},
    "binary": {"objective": "binary:logistic", "eval_metric": ["logloss", "error", "auc", "aucpr", "error@0.7"]},
    "softprob": {"objective": "multi:softprob", "num_class": 3, "eval_metric": ["mlogloss", "merror"]},
    "softmax": {"objective": "multi:softmax", "num_class": 3, "eval_metric": ["mlogloss", "merror"]},
}


def train_job(out: Path, kind: str, *, rounds: int = 12, max_depth: int = 3, valid_name: str = "validation",
              include: list[str] | None = None, save_interval: int = 1, extra: dict[str, Any] | None = None,
              **hook_kwargs: Any) -> tuple[Hook, xgb.Booster, dict[str, Any], xgb.DMatrix, xgb.DMatrix]:
    """Train ``kind`` with the hook writing ``out``; returns (hook, booster, evals_result, dtrain, dvalid)."""
    x, y = data(kind)
    dtrain = xgb.DMatrix(x[:90], label=y[:90], feature_names=FEATURES)
    dvalid = xgb.DMatrix(x[90:], label=y[90:], feature_names=FEATURES)
    params = {**PARAMS[kind], "max_depth": max_depth, "eta": 0.3, "seed": 1, "nthread": 1, **(extra or {})}
    hook = Hook(out, save_config=SaveConfig(save_interval=save_interval),
                include_collections=ALL_COLLECTIONS if include is None else include,
                hyperparameters=params, train_data=dtrain, validation_data=dvalid, **hook_kwargs)
    result: dict[str, Any] = {}
    booster = xgb.train(params, dtrain, rounds, evals=[(dtrain, "train"), (dvalid, valid_name)], callbacks=[hook],
                        evals_result=result, verbose_eval=False)
    hook.close()
    return hook, booster, result, dtrain, dvalid


def overfit_job(out: Path, *, overfit: bool, rounds: int = 30, evals_names: tuple[str, ...] = ("train", "validation"),
                kind: str = "regression", eval_metric: Any = None, include: list[str] | None = None) -> Hook:
    """A job that overfits on purpose (few noisy rows, deep trees, no regularisation) or a healthy one."""
    rng = np.random.default_rng(7)
    n = 60 if overfit else 4000
    x = rng.normal(size=(n + 400, 4)).astype(np.float32)
    noise = rng.normal(scale=2.0 if overfit else 0.1, size=n + 400)
    y = x[:, 0] + noise if kind == "regression" else ((x[:, 0] + noise) > 0).astype(np.float32)
    dtrain, dvalid = xgb.DMatrix(x[:n], label=y[:n]), xgb.DMatrix(x[n:], label=y[n:])
    params = {"objective": PARAMS[kind]["objective"], "max_depth": 8 if overfit else 1, "eta": 0.5 if overfit else 0.1,
              "min_child_weight": 0, "lambda": 0, "seed": 1, "nthread": 1}
    if eval_metric is not None:
        params["eval_metric"] = eval_metric
    hook = Hook(out, save_config=SaveConfig(save_interval=1), include_collections=include or [],
                hyperparameters=params, train_data=dtrain, validation_data=dvalid)
    sets = {"train": dtrain, "validation": dvalid}
    xgb.train(params, dtrain, rounds, evals=[(sets[name], name) for name in evals_names], callbacks=[hook],
              verbose_eval=False)
    hook.close()
    return hook
