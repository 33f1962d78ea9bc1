"""A sharded tensor written from parts (its writer's own piece where it lies, the rest from shared memory):
the hook offers parts only for plans TrialOutput accepts them for, whatever the TensorBoard settings."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from sdk_ext.format.collection_file import CollectionsFile
from sdk_ext.hooks.output import TrialOutput
from sdk_ext.hooks.policy import TensorPlan
from sdk_ext.modes import ModeKeys
from sdk_ext.pytorch import Hook
from sdk_ext.storage import LocalStorage


@pytest.mark.parametrize(("tensorboard", "histogram", "scalar", "ops"),
                         list(itertools.product([False, True], [False, True], [False, True], [(), (("max", False),)])))
def test_parts_are_offered_only_where_they_are_accepted(tmp_path: Path, tensorboard: bool, histogram: bool,
                                                        scalar: bool, ops: tuple[tuple[str, bool], ...]) -> None:
    plan = TensorPlan(raw=True, shape=False, ops=ops, histogram=histogram, scalar=scalar, collections=("weights",))
    hook = Hook(str(tmp_path / "hook"), export_tensorboard=tensorboard)
    out = TrialOutput(LocalStorage(tmp_path / "out"), worker="worker_0", collections=lambda: CollectionsFile([], {}),
                      clock=lambda: 1.0, tensorboard_dir=str(tmp_path / "tb") if tensorboard else None)
    out.open_step(0, ModeKeys.TRAIN, 0)
    whole = np.arange(8, dtype=np.float32)
    parts = [whole[:3].data.cast("B"), whole[3:].data.cast("B")]
    if hook._bytes_only(plan):
        out.write("w", plan, np.zeros_like(whole), {}, content=parts)  # accepted: the record holds the parts
        assert out.writer.bytes_written > 0
    else:
        with pytest.raises(ValueError, match="its bytes come in parts"):
            out.write("w", plan, np.zeros_like(whole), {}, content=parts)
    hook.close()
