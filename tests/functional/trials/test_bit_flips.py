"""Every flipped bit named: 200 single-bit flips in event files, 120 in index files.

A trial written by sdk_ext's hook carries checksums in its index files (sdk_ext.format.checksums). After
one flipped bit anywhere in one file, every answer the reader gives is either exactly the undamaged one,
or a DamagedDataError naming the damaged file; never a wrong value, step, mode step or tensor name.
Reads go through each path: one value at a time (whole files through the cache), ``values()`` (batched),
byte ranges (files larger than ``whole_file_bytes``), and slabs (a trial larger than the file cache).
"""

from __future__ import annotations

import logging
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sdk_ext.exceptions import DamagedDataError
from sdk_ext.hooks import Hook, ReductionConfig, SaveConfig
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import InMemoryStorage
from sdk_ext.trials import TrialOptions, create_trial

READS = {
    "whole files": TrialOptions(collections_timeout=0),
    "byte ranges": TrialOptions(collections_timeout=0, whole_file_bytes=0),
    "slabs": TrialOptions(collections_timeout=0, file_cache_bytes=2000),
}


def write(out: Path) -> None:
    hook = Hook(out, save_config=SaveConfig(save_interval=1), include_collections=["weights", "default", "losses"],
                include_regex=["counts", "mask"],
                reduction_config=ReductionConfig(reductions=["mean"], norms=["l2"], save_raw_tensor=True))
    rng = np.random.default_rng(5)
    for mode, steps in ((ModeKeys.TRAIN, 4), (ModeKeys.EVAL, 2)):
        hook.set_mode(mode)
        for i in range(steps):
            with hook.step():
                hook.save_tensor("dense/weight", rng.normal(size=(4, 5)).astype(np.float32), collections_to_write="weights")
                hook.save_tensor("counts", np.arange(i, i + 6, dtype=np.int64))
                hook.save_tensor("mask", np.array([True, False, i % 2 == 0]))
                hook.save_tensor("loss", np.float32(1.0 / (i + 1)), collections_to_write="losses")
    hook.close()
    assert hook.failure is None
    shutil.rmtree(out / "consolidated")  # index files are read as they are on disk (the copy is tested apart)


def answers(trial: Any, damaged_file: str | None) -> dict[str, Any]:
    """Everything the reader says about the trial; a DamagedDataError must name ``damaged_file``."""
    errors = 0

    def named(err: DamagedDataError) -> str:
        nonlocal errors
        assert damaged_file is not None and damaged_file in str(err), (damaged_file, str(err))
        errors += 1
        return "damaged"

    out: dict[str, Any] = {"names": sorted(trial.tensor_names())}
    steps = trial.steps()
    damaged = trial.damaged_steps()
    out["steps"] = sorted(steps + damaged)
    for step in damaged:
        with pytest.raises(DamagedDataError) as err:
            trial.has_passed_step(step)
        named(err.value)
    out["modes"] = {s: trial.mode_modestep(s) for s in steps}
    values = {}
    for name in out["names"]:
        tensor = trial.tensor(name)
        for step in tensor.steps():
            try:
                values[(name, step)] = tensor.value(step)
            except DamagedDataError as err:
                values[(name, step)] = named(err)
            try:
                values[(name, step, "reductions")] = tensor.reduction_values(step)
            except DamagedDataError as err:
                values[(name, step, "reductions")] = named(err)
        try:
            values[(name, "values()")] = tensor.values()
        except DamagedDataError as err:
            values[(name, "values()")] = named(err)
    out["values"] = values
    out["errors"] = errors
    return out


def same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and a.shape == b.shape and a.tobytes() == b.tobytes())
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def check_flips(tmp_path: Path, pattern: str, count: int, seed: int) -> tuple[int, int]:
    """Flip ``count`` random bits, one at a time, in files matching ``pattern``; returns (flips that gave
    a named error, flips answered exactly)."""
    root = tmp_path / "trial"
    write(root)
    expected = {how: answers(create_trial(str(root), options=opts), None) for how, opts in READS.items()}
    for got in expected.values():
        assert got["errors"] == 0 and len(got["steps"]) == 6
    files = sorted(p for p in root.glob(pattern) if p.is_file())
    sizes = [p.stat().st_size for p in files]
    rng = random.Random(seed)
    named = exact = 0
    logging.getLogger("sdk_ext").setLevel(logging.ERROR)  # each damaged index file warns once at open
    try:
        for k in range(count):
            at = rng.randrange(sum(sizes) * 8)
            which = 0
            while at >= sizes[which] * 8:
                at -= sizes[which] * 8
                which += 1
            path = files[which]
            original = path.read_bytes()
            damaged = bytearray(original)
            damaged[at // 8] ^= 1 << (at % 8)
            path.write_bytes(bytes(damaged))
            how = list(READS)[k % len(READS)]
            try:
                got = answers(create_trial(str(root), options=READS[how]), str(path.relative_to(root)))
            except DamagedDataError as err:  # refused at open: must name the file too
                assert str(path.relative_to(root)) in str(err)
                got = None
            finally:
                path.write_bytes(original)
            if got is None or got["errors"]:
                named += 1
                if got is None:
                    continue
                for key in ("names", "steps"):
                    assert got[key] == expected[how][key], (path, at, key)
                # a step whose index file is damaged is left out (and raises, named, when asked for)
                assert got["modes"] == {s: m for s, m in expected[how]["modes"].items() if s in got["modes"]}
                for key, value in got["values"].items():
                    assert (isinstance(value, str) and value == "damaged") or same(value, expected[how]["values"][key]), (
                        path, at, key)
            else:
                exact += 1
                assert same(got["values"], expected[how]["values"]), (path, at)
                for key in ("names", "steps", "modes"):
                    assert got[key] == expected[how][key], (path, at, key)
    finally:
        logging.getLogger("sdk_ext").setLevel(logging.NOTSET)
    return named, exact


def test_200_flipped_bits_in_event_files_are_each_exact_or_named(tmp_path: Path) -> None:
    named, exact = check_flips(tmp_path, "events/*/*.tfevents", 200, seed=26)
    assert named + exact == 200
    assert exact == 0  # a record's every byte is covered: its header CRC, its checksum, the constant footer


def test_120_flipped_bits_in_index_files_are_each_exact_or_named(tmp_path: Path) -> None:
    named, exact = check_flips(tmp_path, "index/*/*.json", 120, seed=3)
    assert named + exact == 120
    assert exact == 0  # the checksum covers every byte; a damaged key name is an unknown meta key


def test_a_flipped_bit_in_the_consolidated_index_is_read_around(tmp_path: Path, caplog) -> None:
    """The consolidated index has its own CRC: a damaged one is set aside with a warning, the index files are read."""
    root = tmp_path / "trial"
    hook = Hook(root, save_config=SaveConfig(save_interval=1), include_collections=["losses"])
    for i in range(20):  # enough index files for the reader to fetch the consolidated index
        with hook.step():
            hook.save_tensor("loss", np.float32(i), collections_to_write="losses")
    hook.close()
    summary = next((root / "consolidated").iterdir())
    data = bytearray(summary.read_bytes())
    data[len(data) // 2] ^= 0x10
    summary.write_bytes(bytes(data))
    storage = InMemoryStorage()  # listings with sizes, as S3's: the reader uses the consolidated index
    for path in root.rglob("*"):
        if path.is_file():
            storage.write(str(path.relative_to(root)), path.read_bytes())
    with caplog.at_level(logging.WARNING, logger="sdk_ext"):
        trial = create_trial(storage, timeout=0)
        assert {s: v.item() for s, v in trial.tensor("loss").values().items()} == {i: float(i) for i in range(20)}
    assert any("consolidated" in r.getMessage() for r in caplog.records)
