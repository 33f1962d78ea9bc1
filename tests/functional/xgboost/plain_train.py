"""A training script with no hook code (the zero-change tests run it): ``plain_train.py {train|sklearn|own-hook} ROUNDS``."""

import sys

import numpy as np
import xgboost as xgb

kind, rounds = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
x = rng.normal(size=(200, 3)).astype(np.float32)
y = (x[:, 0] + rng.normal(scale=0.5, size=200) > 0).astype(np.float32)
params = {"objective": "binary:logistic", "max_depth": 2, "eval_metric": ["logloss", "auc"], "nthread": 1}
if kind == "sklearn":
    model = xgb.XGBClassifier(n_estimators=rounds, max_depth=2, n_jobs=1)
    model.fit(x[:150], y[:150], eval_set=[(x[:150], y[:150]), (x[150:], y[150:])], verbose=False)
else:
    callbacks = []
    if kind == "own-hook":  # the script asks for the hook itself too: it must get the same one
        from sdk_ext.xgboost import Hook

        callbacks.append(Hook.create_from_json_file())
    dtrain, dvalid = xgb.DMatrix(x[:150], label=y[:150]), xgb.DMatrix(x[150:], label=y[150:])
    xgb.train(params, dtrain, rounds, evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=callbacks,
              verbose_eval=False)
print("done")
