"""One process of the XGBoost hook benchmark (run by xgboost_overhead.py): times boosting rounds under each
hook config, alternating configs block by block, and prints one JSON line.

    python _xgboost_worker.py --impl sdk_ext|smdebug --blocks 3 --rounds 40

Imports only xgboost, numpy and the hook under test (smdebug's runs in its own venv).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import xgboost as xgb

ROWS, FEATURES = 10_000, 50
PARAMS = {"objective": "reg:squarederror", "max_depth": 6, "eta": 0.1, "tree_method": "hist", "nthread": 1,
          "eval_metric": ["rmse", "mae"], "seed": 0}
SHAP = ["average_shap", "mean_abs_shap", "full_shap"]
NOT_SHAP = ["hyperparameters", "metrics", "losses", "predictions", "labels", "feature_importance", "trees"]


def data() -> tuple[xgb.DMatrix, xgb.DMatrix]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(ROWS + 2000, FEATURES)).astype(np.float32)
    y = x[:, :5].sum(axis=1) + rng.normal(scale=0.5, size=ROWS + 2000)
    return xgb.DMatrix(x[:ROWS], label=y[:ROWS]), xgb.DMatrix(x[ROWS:], label=y[ROWS:])


#: config -> (collections, save interval); "default" is the hook's own default (metrics every 10 rounds)
CONFIGS: dict[str, tuple[list[str], int]] = {
    "metrics_every_round": ([], 1),
    "all_but_shap_every_round": (NOT_SHAP, 1),
    "shap_every_10": (SHAP, 10),
}


def make_hook(impl: str, config: str, out: Path, dtrain: xgb.DMatrix, dvalid: xgb.DMatrix) -> Any:
    if impl == "sdk_ext":
        from sdk_ext.xgboost import Hook, SaveConfig
    else:
        from smdebug.xgboost import Hook, SaveConfig
    if config == "default":
        return Hook(out_dir=str(out))
    collections, interval = CONFIGS[config]
    if impl == "smdebug":  # its names: no mean_abs_shap, losses come with metrics; its full_shap writes the
        # whole (rows, features + 1) matrix once per feature (50 x 2 MB a round, pure-Python protobuf): left out
        collections = [c for c in collections if c not in ("mean_abs_shap", "losses", "full_shap")]
    return Hook(out_dir=str(out), save_config=SaveConfig(save_interval=interval), include_collections=collections,
                hyperparameters=PARAMS, train_data=dtrain, validation_data=dvalid)


INSIDE: dict[str, list[float]] = {}  # config -> CPU seconds spent inside the hook's after_iteration, per block
INSIDE_WALL: dict[str, list[float]] = {}  # the same in wall time (file writes wait for the disk)


def timed(hook: Any, config: str) -> Any:
    """Count the time of the hook's ``after_iteration`` (its per-round cost, without the noise of training)."""
    inner = hook.after_iteration
    spent, wall = INSIDE.setdefault(config, []), INSIDE_WALL.setdefault(config, [])
    spent.append(0.0)
    wall.append(0.0)

    def after_iteration(*args: Any, **kwargs: Any) -> Any:
        start, start_wall = time.process_time(), time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[-1] += time.process_time() - start
            wall[-1] += time.perf_counter() - start_wall

    hook.after_iteration = after_iteration
    return hook


def block(impl: str, config: str, rounds: int, tmp: Path, dtrain: xgb.DMatrix, dvalid: xgb.DMatrix) -> float:
    """CPU seconds of this process (every thread) for one training of ``rounds`` rounds, hook construction and
    close included. CPU time, not wall time: the machine is shared and xgboost runs on one thread."""
    out = tmp / f"{config}-{time.monotonic_ns()}"
    start = time.process_time()
    callbacks = [] if config in ("none", "control") else [timed(make_hook(impl, config, out, dtrain, dvalid), config)]
    xgb.train(PARAMS, dtrain, rounds, evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=callbacks,
              verbose_eval=False)
    for hook in callbacks:
        if hasattr(hook, "close"):
            hook.close()
    elapsed = time.process_time() - start
    shutil.rmtree(out, ignore_errors=True)
    return elapsed


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--impl", choices=["sdk_ext", "smdebug"], required=True)
    p.add_argument("--blocks", type=int, default=3)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--configs", default="default," + ",".join(CONFIGS))
    args = p.parse_args()
    dtrain, dvalid = data()
    configs = ["none", "control", *args.configs.split(",")]
    times: dict[str, list[float]] = {c: [] for c in configs}
    with tempfile.TemporaryDirectory(prefix="xgb-bench-") as tmp:
        block(args.impl, "none", 3, Path(tmp), dtrain, dvalid)  # warm-up
        for _ in range(args.blocks):
            for config in configs:
                times[config].append(block(args.impl, config, args.rounds, Path(tmp), dtrain, dvalid))
    # what SHAP must cost at least: pred_contribs on train_data at the rounds shap_every_10 saves
    booster = xgb.train(PARAMS, dtrain, args.rounds, verbose_eval=False)
    start = time.process_time()
    for r in range(0, args.rounds, 10):
        booster[: r + 1].predict(dtrain, pred_contribs=True)
    contribs = time.process_time() - start
    result = {c: {"median_round_s": statistics.median(v) / args.rounds, "blocks": v,
                  "inside_round_s": statistics.median(INSIDE[c]) / args.rounds if c in INSIDE else 0.0,
                  "inside_wall_round_s": statistics.median(INSIDE_WALL[c]) / args.rounds if c in INSIDE else 0.0}
              for c, v in times.items()}
    print(json.dumps({"impl": args.impl, "rounds": args.rounds, "blocks": args.blocks, "configs": result,
                      "pred_contribs_s_per_training": contribs}))


if __name__ == "__main__":
    main()
