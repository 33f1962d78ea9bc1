"""Run with the smdebug venv's interpreter: dump what real smdebug 1.0.34 reads from a trial, as JSON.

Usage: python smdebug_read_trial.py TRIAL_DIR OUT_JSON  (smdebug logs to stdout, so the result goes to a file)

Imports nothing from sdk_ext: this runs in smdebug's own venv (numpy 2.2.6, protobuf 3.20.3).
"""

import base64
import json
import os
import sys

os.environ.setdefault("SMDEBUG_TRAINING_END_DELAY_REFRESH", "0")

from smdebug.trials import create_trial


def _value(arr):
    return {
        "dtype": str(arr.dtype),
        "shape": list(arr.shape),
        "b64": base64.b64encode(arr.tobytes()).decode() if arr.dtype.kind not in "USO" else None,
        "list": arr.tolist() if arr.dtype.kind in "USO" else None,
    }


def main(path):
    trial = create_trial(path)
    out = {
        "tensor_names": sorted(trial.tensor_names()),
        "workers": sorted(trial.workers()),
        "modes": sorted(m.name for m in trial.modes()),
        "steps": {"GLOBAL": trial.steps()},
        "mode_of_step": {},
        "loaded_all_steps": None,
        "tensors": {},
    }
    for mode in trial.modes():
        out["steps"][mode.name] = trial.steps(mode=mode)
    for step in trial.steps():
        mode, mode_step = trial.mode_modestep(step)
        out["mode_of_step"][str(step)] = [mode.name, mode_step]
    for name in trial.tensor_names():
        t = trial.tensor(name)
        entry = {}
        for step in t.steps():
            per_worker = {}
            for worker in t.workers(step):
                rec = {}
                try:
                    rec["value"] = _value(t.value(step, worker=worker))
                except Exception as err:  # noqa: BLE001 - a tensor with only reductions or a shape
                    rec["value"] = {"error": type(err).__name__}
                reds = {}
                for (op, is_abs), v in t.reduction_values(step, worker=worker).items():
                    reds[("abs_" if is_abs else "") + op] = _value(v)
                rec["reductions"] = reds
                per_worker[worker] = rec
            entry[str(step)] = per_worker
        out["tensors"][name] = entry
    out["loaded_all_steps"] = trial.loaded_all_steps
    return out


if __name__ == "__main__":
    result = main(sys.argv[1])
    with open(sys.argv[2], "w") as f:
        json.dump(result, f)
