"""TrialWriter in a local root creates the next step's files ahead; unused ones leave nothing behind."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from sdk_ext.hooks.writer import TrialWriter
from sdk_ext.modes import ModeKeys
from sdk_ext.storage.local import LocalStorage


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _step_dirs(root: Path) -> list[str]:
    return sorted(os.listdir(root / "events"))


def test_files_made_ahead_for_a_step_that_never_comes_are_removed_with_their_directory(tmp_path: Path) -> None:
    writer = TrialWriter(LocalStorage(tmp_path), background=True)
    for step in (0, 1):  # back to back: step 2's files are made while step 1 runs
        writer.open_step(step, ModeKeys.TRAIN, step)
        writer.write_tensor("w", np.arange(3, dtype=np.float32))
        writer.close_step()
    writer.close()
    assert _step_dirs(tmp_path) == ["000000000000", "000000000001"]
    assert not [f for f in _files(tmp_path) if "tmp" in f]


def test_a_step_that_saves_nothing_leaves_no_event_file_or_directory(tmp_path: Path) -> None:
    writer = TrialWriter(LocalStorage(tmp_path), background=True)
    for step in (0, 1):
        writer.open_step(step, ModeKeys.TRAIN, step)
        writer.write_tensor("w", np.arange(3, dtype=np.float32))
        writer.close_step()
    writer.open_step(2, ModeKeys.TRAIN, 2)  # its files were made ahead
    assert writer.close_step() is False
    writer.close()
    assert _step_dirs(tmp_path) == ["000000000000", "000000000001"]
    assert not [f for f in _files(tmp_path) if "tmp" in f or "000000000002" in f]
