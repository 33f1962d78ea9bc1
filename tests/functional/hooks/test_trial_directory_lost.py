"""The trial directory deleted mid-training, or the disk full when the collections file is written.

The hook says once what was lost, writes the collections file again so the steps saved afterwards can be
read, and never leaves a trial the reader takes for "nothing was saved" while index files exist. The disk
is a real tmpfs that fills (mounted here as root; skipped where mounting is impossible), the directory a
real one removed with ``rm -rf``'s equivalent while the hook writes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from sdk_ext.format.paths import collections_key
from sdk_ext.hooks import Hook, SaveConfig
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import LocalStorage
from sdk_ext.trials import create_trial
from tests.trial_builder import TrialBuilder

PAGE = 4096


def save_steps(hook: Hook, steps: range, before_step: dict[int, object] | None = None) -> None:
    for step in steps:
        action = (before_step or {}).get(step)
        if action is not None:
            action()  # type: ignore[operator]
        with hook.step():
            hook.save_tensor("loss", np.float32(step), collections_to_write="losses")


def remove_tree(root: Path) -> None:
    """rm -rf while the hook's thread may be creating the next step's files in it."""
    while root.exists():
        shutil.rmtree(root, ignore_errors=True)


def test_a_deleted_trial_directory_gets_its_collections_file_back_and_a_warning(tmp_path: Path, caplog) -> None:
    root = tmp_path / "trial"
    hook = Hook(root, save_config=SaveConfig(save_interval=1), include_collections=["losses"])
    with caplog.at_level(logging.WARNING, logger="sdk_ext"):
        save_steps(hook, range(30), {15: lambda: remove_tree(root)})
        hook.close()
    assert hook.failure is None  # training and the hook went on
    warned = [r.getMessage() for r in caplog.records if "lost files while training" in r.getMessage()]
    assert len(warned) == 1 and str(root) in warned[0]  # once, naming the trial
    assert (root / collections_key("worker_0")).is_file()
    trial = create_trial(str(root), timeout=0)
    steps = trial.steps()
    assert steps and steps[-1] == 29 and steps[0] >= 15  # what was saved after the deletion reads back
    assert {s: v.item() for s, v in trial.tensor("loss").values().items()} == {s: float(s) for s in steps}


def test_a_trial_that_lost_its_collections_file_opens_from_its_index_files(tmp_path: Path, caplog) -> None:
    builder = TrialBuilder(LocalStorage(tmp_path))  # no collections file at all
    for step in range(15):
        builder.step(step, mode=ModeKeys.TRAIN, mode_step=step, tensors={"loss": np.array([step], np.float32)})
    builder.end()
    with caplog.at_level(logging.WARNING, logger="sdk_ext"):
        trial = create_trial(str(tmp_path), timeout=0)
    assert trial.steps() == list(range(15))
    assert trial.tensor("loss").value(14).tolist() == [14.0]
    assert any("collections file was lost" in r.getMessage() for r in caplog.records)


@contextlib.contextmanager
def tmpfs(where: Path, size: int) -> Iterator[Path]:
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, text=True, check=False, timeout=30)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}): not root?")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False, timeout=30)


def test_a_disk_full_when_the_collections_file_is_written_is_logged_and_the_trial_opens(tmp_path: Path,
                                                                                       caplog) -> None:
    with tmpfs(tmp_path / "disk", 64 * PAGE) as disk:
        root = disk / "trial"
        hook = Hook(root, save_config=SaveConfig(save_interval=1), include_collections=["losses"])
        stat = os.statvfs(disk)
        # room for step 0's event file and index file (a page each), none for the collections file after them
        (disk / "filler").write_bytes(b"x" * (stat.f_bavail * stat.f_frsize - 2 * PAGE))
        with caplog.at_level(logging.WARNING, logger="sdk_ext"):
            save_steps(hook, range(5))
            hook.close()
        messages = [r.getMessage() for r in caplog.records]
        assert any("could not write the collections file" in m and str(root) in m and "No space left" in m
                   for m in messages), messages  # said at once, on the training thread, naming the trial
        assert (root / "index/000000000/000000000000_worker_0.json").is_file()
        trial = create_trial(str(root), timeout=0)  # not "nothing was saved"
        assert trial.steps() == [0]
        assert trial.tensor("loss").value(0).item() == 0.0
        assert not list(root.rglob("*.tmp"))  # the failed step's temporary files were removed


def test_the_collections_file_is_written_once_the_disk_has_room_again(tmp_path: Path, caplog) -> None:
    with tmpfs(tmp_path / "disk", 64 * PAGE) as disk:
        root = disk / "trial"
        hook = Hook(root, save_config=SaveConfig(save_interval=1), include_collections=["losses"])
        stat = os.statvfs(disk)
        filler = disk / "filler"
        filler.write_bytes(b"x" * (stat.f_bavail * stat.f_frsize - 2 * PAGE))
        with caplog.at_level(logging.WARNING, logger="sdk_ext"):
            save_steps(hook, range(1))
            assert not (root / collections_key("worker_0")).exists()
            filler.unlink()  # the user makes room
            save_steps(hook, range(1, 4))
            hook.close()
        assert hook.failure is None
        assert (root / collections_key("worker_0")).is_file()
        assert any("is written now" in r.getMessage() for r in caplog.records)
        assert create_trial(str(root), timeout=0).steps() == [0, 1, 2, 3]
