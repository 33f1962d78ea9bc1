"""One timed read of a local trial, in a fresh process; prints one JSON line. Run by trial_read.py.

    python _trial_read_worker.py READER TRIAL_DIR

READER: ``sdk_ext`` (value() per step; several workers: one worker's steps, then the next worker's),
``sdk_ext_step_workers`` / ``smdebug_step_workers`` (every worker's value at a step, step after step),
``sdk_ext_values`` (Tensor.values() per tensor),
``smdebug`` (smdebug 1.0.34, value() per step; run with the smdebug venv's interpreter), or
``raw`` (list the trial, open and read every index and event file; no decoding).
Imports happen before the clock starts; everything after ``create_trial`` is timed.
This file imports neither sdk_ext nor smdebug at module level so either venv can run it.
"""

from __future__ import annotations

import json
import os
import sys
import time


def read_with(create_trial, trial_dir: str, *, batched: bool = False) -> dict[str, float]:
    started = time.perf_counter()
    trial = create_trial(trial_dir)
    opened = time.perf_counter()
    names = trial.tensor_names()
    workers = sorted(trial.workers())
    listed = time.perf_counter()
    values = nbytes = 0
    for worker in workers if len(workers) > 1 else [None]:  # several workers: every worker's values
        for name in names:
            tensor = trial.tensor(name)
            if batched:
                got = tensor.values(worker=worker)
                values += len(got)
                nbytes += sum(v.nbytes for v in got.values())
            else:
                for step in tensor.steps():
                    nbytes += tensor.value(step, worker=worker).nbytes
                    values += 1
    done = time.perf_counter()
    return {
        "total_s": done - started, "open_s": opened - started, "tensor_names_s": listed - opened,
        "values_s": done - listed, "values": values, "bytes": nbytes,
    }


def read_step_workers(create_trial, trial_dir: str) -> dict[str, float]:
    """Every worker's value at a step, step after step (as a rule comparing workers reads)."""
    started = time.perf_counter()
    trial = create_trial(trial_dir)
    opened = time.perf_counter()
    names = trial.tensor_names()
    workers = sorted(trial.workers())
    listed = time.perf_counter()
    values = nbytes = 0
    tensors = [trial.tensor(name) for name in names]
    for step in trial.steps():
        for tensor in tensors:
            for worker in workers:
                nbytes += tensor.value(step, worker=worker).nbytes
                values += 1
    done = time.perf_counter()
    return {
        "total_s": done - started, "open_s": opened - started, "tensor_names_s": listed - opened,
        "values_s": done - listed, "values": values, "bytes": nbytes,
    }


def read_raw(trial_dir: str) -> dict[str, float]:
    started = time.perf_counter()
    files = nbytes = 0
    for sub in ("collections", "index", "events"):
        for root, _, names in os.walk(os.path.join(trial_dir, sub)):
            for name in sorted(names):
                with open(os.path.join(root, name), "rb") as f:
                    nbytes += len(f.read())
                files += 1
    done = time.perf_counter()
    return {"total_s": done - started, "files": files, "bytes": nbytes}


def main(argv: list[str]) -> None:
    reader, trial_dir = argv[1], argv[2]
    if reader == "raw":
        result = read_raw(trial_dir)
    elif reader.startswith("smdebug"):
        import logging

        from smdebug.trials import create_trial as smdebug_create_trial

        logging.getLogger("smdebug").setLevel(logging.WARNING)
        if reader == "smdebug_step_workers":
            result = read_step_workers(smdebug_create_trial, trial_dir)
        else:
            result = read_with(smdebug_create_trial, trial_dir)
    else:
        from sdk_ext.trials import create_trial

        if reader == "sdk_ext_step_workers":
            result = read_step_workers(create_trial, trial_dir)
        else:
            result = read_with(create_trial, trial_dir, batched=reader == "sdk_ext_values")
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv)
