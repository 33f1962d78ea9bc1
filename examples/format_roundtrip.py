"""Smallest end-to-end run: write a trial with the format code, read it back through create_trial.

Run: python examples/format_roundtrip.py [OUT_DIR]

Writes 12 steps (TRAIN steps every 2, an EVAL pass, stored reductions, a shape entry, two workers)
the way a Debugger hook lays them out, then opens the directory as smdebug users do
(``create_trial``) and prints what a notebook would look at.
"""

from __future__ import annotations

import sys
import tempfile
import time

import numpy as np

from sdk_ext.format import (
    CollectionsFile,
    CollectionSpec,
    IndexFile,
    ReductionSpec,
    ShapeEntry,
    TensorEntry,
    encode_collections,
    encode_index,
    encode_tensor_record_parts,
)
from sdk_ext.format.paths import END_OF_JOB, collections_key, event_key, index_key, reduction_tensor_name
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import LocalStorage
from sdk_ext.trials import create_trial

WORKERS = ("worker_0", "worker_1")


def write_step(storage: LocalStorage, step: int, worker: str, mode: ModeKeys, mode_step: int,
               tensors: dict[str, np.ndarray]) -> None:
    """One step of one worker: its event file, then its index (the order a hook commits them)."""
    parts: list[bytes | memoryview] = []
    entries, offset = [], 0
    for name, value in tensors.items():
        record, length = encode_tensor_record_parts(
            name, value, step=step, wall_time=time.time(), mode=mode, mode_step=mode_step
        )
        parts += record
        entries.append(TensorEntry(name, offset, length))
        offset += length
    storage.write(event_key(step, worker), parts)
    shapes = (ShapeEntry("fc.weight", "fc.weight", (4, 3)),) if "fc.weight" in tensors else ()
    storage.write(index_key(step, worker), encode_index(IndexFile(mode, mode_step, event_key(step, worker),
                                                                  tuple(entries), shapes)))


def write_trial(storage: LocalStorage) -> None:
    rng = np.random.default_rng(0)
    collections = CollectionsFile(
        {
            "weights": CollectionSpec("weights", include_regex=("weight",),
                                      reduction=ReductionSpec(("l2_norm",), save_raw_tensor=True, save_shape=True)),
            "losses": CollectionSpec("losses", include_regex=("loss",)),
        },
        num_workers=len(WORKERS),
    )
    for worker in WORKERS:
        storage.write(collections_key(worker), encode_collections(collections))
    weight = rng.normal(size=(4, 3)).astype(np.float32)
    train_step = eval_step = 0
    for step in range(12):
        mode = ModeKeys.EVAL if step in (6, 7) else ModeKeys.TRAIN
        mode_step = eval_step if mode is ModeKeys.EVAL else train_step
        if mode is ModeKeys.TRAIN and step % 2 == 0:
            weight -= 0.05 * rng.normal(size=weight.shape).astype(np.float32)
        for rank, worker in enumerate(WORKERS):
            loss = np.array(1.0 / (step + 1) + 0.01 * rank, dtype=np.float32)  # 0-d, as PyTorch losses are
            tensors = {"CrossEntropyLoss_output_0": loss}
            if mode is ModeKeys.TRAIN and step % 2 == 0:
                tensors["fc.weight"] = weight
                tensors[reduction_tensor_name("fc.weight", "l2")] = np.array([np.linalg.norm(weight.ravel())])
            write_step(storage, step, worker, mode, mode_step, tensors)
        if mode is ModeKeys.EVAL:
            eval_step += 1
        else:
            train_step += 1
    storage.write(END_OF_JOB, b"")


def main(argv: list[str]) -> int:
    out = argv[1] if len(argv) > 1 else tempfile.mkdtemp(prefix="sdk-ext-demo-")
    storage = LocalStorage(out)
    write_trial(storage)

    started = time.perf_counter()
    trial = create_trial(out)
    print(f"trial {trial.name!r} at {trial.path}: workers {trial.workers()}, ended: {trial.loaded_all_steps}")
    print(f"  steps: {trial.steps()}  TRAIN: {trial.steps(ModeKeys.TRAIN)}  EVAL: {trial.steps(ModeKeys.EVAL)}")
    print(f"  tensors: {trial.tensor_names()}  (collection 'weights': {trial.tensor_names(collection='weights')})")
    loss = trial.tensor("CrossEntropyLoss_output_0")
    for step in loss.steps(ModeKeys.EVAL):
        values = {w: float(loss.value(step, mode=ModeKeys.EVAL, worker=w)) for w in loss.workers(step, ModeKeys.EVAL)}
        print(f"  EVAL step {step} (global {trial.global_step(ModeKeys.EVAL, step)}): loss per worker {values}")
    weight = trial.tensor("fc.weight")
    for step in weight.steps():
        stored = weight.reduction_value(step, "l2")
        computed = weight.reduction_value(step, "mean", abs=True)
        print(f"  fc.weight @ {step}: shape {weight.shape(step)}, stored l2 {float(stored[0]):.4f}, "
              f"computed abs mean {float(computed):.4f}")
    count = sum(len(trial.tensor(n).values()) for n in trial.tensor_names())
    print(f"read {count} values in {time.perf_counter() - started:.3f} s; trial written and read back at {storage.uri}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
