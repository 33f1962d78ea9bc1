"""Real smdebug 1.0.34 reads a trial written by the framework-free hook: same names, steps, modes, values."""

from pathlib import Path

import numpy as np
import pytest

from sdk_ext.hooks import Hook, ReductionConfig, SaveConfig, SaveConfigMode
from sdk_ext.modes import ModeKeys
from tests.trial_dump import dump_with_format, dump_with_smdebug, dump_with_trials


def write_trial(out: Path) -> None:
    hook = Hook(
        out,
        save_config=SaveConfig({ModeKeys.TRAIN: SaveConfigMode(save_interval=2), ModeKeys.EVAL: SaveConfigMode(save_interval=1)}),
        include_collections=["weights", "default"],
        reduction_config=ReductionConfig(reductions=["mean", "max"], abs_norms=["l2"], save_raw_tensor=True),
    )
    rng = np.random.default_rng(3)
    hook.set_mode(ModeKeys.TRAIN)
    for i in range(5):
        with hook.step():
            hook.save_tensor("dense/weight", rng.normal(size=(3, 4)).astype(np.float32), collections_to_write="weights")
            hook.save_tensor("loss", np.float32(1.0 / (i + 1)), collections_to_write="losses")
            hook.save_tensor("ints", np.arange(i, i + 4, dtype=np.int64).reshape(2, 2))
            hook.save_tensor("half", np.array([0.5, -2.0], dtype=np.float16))
            hook.save_tensor("mask", np.array([True, False, i % 2 == 0]))
            hook.save_tensor("bytes", np.array([1, 255, i], dtype=np.uint8))
            hook.save_tensor("words", np.array(["alpha", f"step{i}"]))
            hook.save_scalar("lr", 0.1 / (i + 1))
    hook.set_mode(ModeKeys.EVAL)
    for i in range(2):
        with hook.step():
            hook.save_tensor("loss", np.float64(2.0 + i), collections_to_write="losses")
            hook.save_tensor("i32", np.array([[-7, 8]], dtype=np.int32))
    hook.close()
    assert hook.failure is None


@pytest.mark.smdebug
def test_smdebug_reads_what_the_framework_free_hook_wrote(tmp_path: Path, smdebug_python: Path) -> None:
    trial = tmp_path / "trial"
    write_trial(trial)
    assert (trial / "consolidated" / "worker_0_index.sdkidx").is_file()  # sdk_ext's addition; smdebug ignores it
    indexes = sorted((trial / "index").rglob("*.json"))
    assert indexes and all(b'"sdk_ext_crc32c": "' in p.read_bytes() for p in indexes)  # and the checksums too
    theirs = dump_with_smdebug(smdebug_python, trial, tmp_path)
    ours = dump_with_format(trial)
    assert theirs["tensor_names"] == ours["tensor_names"] == sorted(
        ["dense/weight", "loss", "ints", "half", "mask", "bytes", "words", "scalar/lr", "i32"])
    assert theirs["workers"] == ["worker_0"]
    assert theirs["modes"] == ["EVAL", "TRAIN"]
    # every TRAIN step holds its save_scalar("lr") value; the collections save at steps 0, 2, 4
    assert theirs["steps"] == ours["steps"] == {"GLOBAL": [0, 1, 2, 3, 4, 5, 6], "TRAIN": [0, 1, 2, 3, 4], "EVAL": [0, 1]}
    assert sorted(theirs["tensors"]["scalar/lr"]) == ["0", "1", "2", "3", "4"]
    assert sorted(theirs["tensors"]["dense/weight"]) == ["0", "2", "4"]
    assert theirs["mode_of_step"] == ours["mode_of_step"]
    assert theirs["loaded_all_steps"] is True
    assert theirs["tensors"] == ours["tensors"]  # every value and stored reduction, bit for bit
    assert set(theirs["tensors"]["dense/weight"]["0"]["worker_0"]["reductions"]) == {"mean", "max", "abs_l2"}


def test_the_projects_reader_reads_what_the_framework_free_hook_wrote(tmp_path: Path) -> None:
    trial = tmp_path / "trial"
    write_trial(trial)
    mine = dump_with_trials(trial)
    ours = dump_with_format(trial)
    assert mine["loaded_all_steps"] is True
    for key in ("tensor_names", "workers", "modes", "steps", "mode_of_step", "tensors"):
        assert mine[key] == ours[key], key
