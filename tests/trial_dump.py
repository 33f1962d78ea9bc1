"""Dump a trial two ways for comparisons: with real smdebug (in its venv) and with sdk_ext's format decoders.

Both return the same shape::

    {"tensor_names": [...], "workers": [...], "modes": [...], "steps": {"GLOBAL": [...], "TRAIN": [...]},
     "mode_of_step": {"<step>": [mode, mode_step]},
     "tensors": {name: {"<step>": {worker: {"value": {"dtype", "shape", "b64"|"list"} | {"error"},
                                              "reductions": {"mean" | "abs_max" ...: value}}}}}}
"""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from sdk_ext.format.events import decode_tensor_value
from sdk_ext.format.index import parse_index
from sdk_ext.format.paths import parse_index_key, parse_reduction_name
from sdk_ext.format.records import read_record
from sdk_ext.storage import open_storage

SMDEBUG_SCRIPT = Path(__file__).resolve().parent / "compat" / "smdebug_read_trial.py"


def value_json(arr: np.ndarray[Any, Any]) -> dict[str, Any]:
    text = arr.dtype.kind in "USO"
    return {
        "dtype": str(arr.dtype),
        "shape": list(arr.shape),
        "b64": None if text else base64.b64encode(arr.tobytes()).decode(),
        "list": arr.tolist() if text else None,
    }


def decode_value_json(v: dict[str, Any]) -> np.ndarray[Any, Any]:
    if v.get("b64") is None:
        return np.array(v["list"])
    return np.frombuffer(base64.b64decode(v["b64"]), dtype=v["dtype"]).reshape(v["shape"]).copy()


def dump_with_smdebug(python: Path | str, trial: Path | str, tmp: Path, timeout: float = 120) -> dict[str, Any]:
    out = tmp / f"smdebug-dump-{Path(trial).name}.json"
    proc = subprocess.run(
        [str(python), str(SMDEBUG_SCRIPT), str(trial), str(out)], check=False, capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        raise AssertionError(f"smdebug failed to read {trial}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(out.read_text())


def dump_with_format(trial: Path | str) -> dict[str, Any]:
    """What the trial holds (a directory or s3://), decoded with sdk_ext.format (a value next to a shape
    entry stays readable)."""
    storage = open_storage(trial)
    tensors: dict[str, dict[str, dict[str, Any]]] = {}
    steps: dict[str, set[int]] = {"GLOBAL": set()}
    mode_of_step: dict[str, list[Any]] = {}
    workers: set[str] = set()
    for key in storage.list("index/"):
        parsed = parse_index_key(key)
        if parsed is None:
            continue
        step, worker = parsed
        workers.add(worker)
        index = parse_index(storage.read(key), key=key)
        steps["GLOBAL"].add(step)
        if index.mode.name != "GLOBAL":
            steps.setdefault(index.mode.name, set()).add(index.mode_step)
        mode_of_step[str(step)] = [index.mode.name, index.mode_step]
        data = storage.read(index.event_file) if index.event_file else b""
        for entry in index.tensors:
            payload = read_record(data, entry.start, name=key, expect_length=entry.length)
            value = decode_tensor_value(payload)
            red = parse_reduction_name(entry.name)
            base = red[0] if red else entry.name
            rec = tensors.setdefault(base, {}).setdefault(str(step), {}).setdefault(
                worker, {"value": {"error": "TensorUnavailableForStep"}, "reductions": {}}
            )
            if red:
                rec["reductions"][("abs_" if red[2] else "") + red[1]] = value_json(value)
            else:
                rec["value"] = value_json(value)
    return {
        "tensor_names": sorted(tensors),
        "workers": sorted(workers),
        "modes": sorted(m for m in steps if m != "GLOBAL"),
        "steps": {m: sorted(s) for m, s in steps.items()},
        "mode_of_step": mode_of_step,
        "tensors": tensors,
    }


def dump_with_trials(trial_path: Path | str) -> dict[str, Any]:
    """What sdk_ext's own reader (``sdk_ext.trials.create_trial``) returns, in the same shape."""
    from sdk_ext.exceptions import TensorUnavailableForStep
    from sdk_ext.trials import TrialOptions, create_trial

    trial = create_trial(str(trial_path), options=TrialOptions(collections_timeout=0, training_end_delay=0,
                                                              event_file_timeout=0))
    out: dict[str, Any] = {
        "tensor_names": sorted(trial.tensor_names()),
        "workers": sorted(trial.workers()),
        "modes": sorted(m.name for m in trial.modes()),
        "steps": {"GLOBAL": trial.steps()},
        "mode_of_step": {},
        "loaded_all_steps": trial.loaded_all_steps,
        "tensors": {},
    }
    for mode in trial.modes():
        out["steps"][mode.name] = trial.steps(mode=mode)
    for step in trial.steps():
        mode, mode_step = trial.mode_modestep(step)
        out["mode_of_step"][str(step)] = [mode.name if mode else None, mode_step]
    for name in trial.tensor_names():
        t = trial.tensor(name)
        entry: dict[str, Any] = {}
        for step in t.steps():
            per_worker = {}
            for worker in t.workers(step):
                rec: dict[str, Any] = {}
                try:
                    rec["value"] = value_json(t.value(step, worker=worker))
                except TensorUnavailableForStep:
                    rec["value"] = {"error": "TensorUnavailableForStep"}
                rec["reductions"] = {
                    ("abs_" if is_abs else "") + op: value_json(v)
                    for (op, is_abs), v in t.reduction_values(step, worker=worker).items()
                }
                per_worker[worker] = rec
            entry[str(step)] = per_worker
        out["tensors"][name] = entry
    return out
