"""An XGBoost training script that overfits on purpose, with no debugger code in it.

Few noisy rows, many features of which most are noise, deep trees and no regularisation: the training
loss keeps falling while the validation loss stops falling and then rises. Run it as a local SageMaker
job with the Overfit rule (demo.py does):

    sdk-ext run examples/xgboost_overfit/train.py --zero-change --rule Overfit ... --report

``--zero-change`` runs it through ``python -m sdk_ext.xgboost.run``: ``xgb.train`` gets the hook from the
job's debughookconfig.json, with the training set named ``train`` and the validation set ``validation``,
so the rules can tell the two apart.
"""

from __future__ import annotations

import argparse

import numpy as np
import xgboost as xgb


def make_data(rows: int, features: int, noise: float, seed: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """A target that depends on 3 features (the rest is noise), plus label noise."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, features)).astype(np.float32)
    y = 2 * x[:, 0] + np.sin(3 * x[:, 1]) + x[:, 2] * x[:, 0] + rng.normal(scale=noise, size=rows)
    names = ["income", "age", "tenure"] + [f"noise_{i}" for i in range(features - 3)]
    return x, y.astype(np.float32), names


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=300)
    p.add_argument("--rows", type=int, default=3000)
    p.add_argument("--features", type=int, default=30)
    p.add_argument("--noise", type=float, default=1.5)
    p.add_argument("--max-depth", type=int, default=8)
    p.add_argument("--eta", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    x, y, names = make_data(args.rows, args.features, args.noise, args.seed)
    split = args.rows * 2 // 3
    dtrain = xgb.DMatrix(x[:split], label=y[:split], feature_names=names)
    dvalid = xgb.DMatrix(x[split:], label=y[split:], feature_names=names)
    params = {"objective": "reg:squarederror", "eval_metric": ["rmse", "mae"], "max_depth": args.max_depth,
              "eta": args.eta, "min_child_weight": 0, "lambda": 0, "subsample": 1.0, "seed": args.seed,
              "nthread": 1}
    booster = xgb.train(params, dtrain, args.rounds, evals=[(dtrain, "train"), (dvalid, "validation")],
                        verbose_eval=25)
    print(f"trained {booster.num_boosted_rounds()} rounds")


if __name__ == "__main__":
    main()
