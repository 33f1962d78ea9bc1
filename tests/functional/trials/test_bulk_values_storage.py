"""``Tensor.values()`` on real storage: local files (read straight into one buffer) and S3 on moto (one batch)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sdk_ext.exceptions import CorruptRecordError
from sdk_ext.hooks import Hook, SaveConfig
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import LocalStorage
from sdk_ext.trials import create_trial
from tests.trial_builder import TrialBuilder

STEPS = 40


def write_job(out: Any) -> None:
    hook = Hook(out, save_config=SaveConfig(save_interval=1))
    for step in range(STEPS):
        hook.set_mode(ModeKeys.EVAL if step % 5 == 4 else ModeKeys.TRAIN)
        with hook.step():
            hook.save_tensor("fc/weight", np.full((4, 3), step, np.float32), collections_to_write="weights")
            hook.save_tensor("fc/bias", np.arange(3, dtype=np.float64) + step, collections_to_write="weights")
            hook.save_scalar("loss", 1.0 / (step + 1))
    hook.close()


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def test_values_from_a_hook_written_job_on_disk_equal_step_by_step_reads(tmp_path: Path) -> None:
    write_job(tmp_path / "job")
    fast, slow = create_trial(str(tmp_path / "job")), create_trial(str(tmp_path / "job"))
    assert fast.tensor_names() == ["fc/bias", "fc/weight", "scalar/loss"]
    for name in fast.tensor_names():
        for mode in (ModeKeys.GLOBAL, ModeKeys.TRAIN, ModeKeys.EVAL):
            got = fast.tensor(name).values(mode=mode)
            tensor = slow.tensor(name)
            assert list(got) == tensor.steps(mode=mode)
            assert all(same(v, tensor.value(s, mode=mode)) for s, v in got.items())
    assert fast._reads.reader.batched > 0
    assert fast._reads.reader.requests == STEPS  # every event file read once, for all tensors and modes


def test_a_corrupt_record_on_disk_raises_naming_file_and_offset(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    builder = TrialBuilder(storage)
    builder.collections()
    for step in range(30):
        builder.step(step, tensors={"a": np.ones(4) * step, "b": np.zeros(4) + step})
    key = "events/000000000017/000000000017_worker_0.tfevents"
    start = len(builder.encode_step(17, tensors={"a": np.ones(4)}).event)  # record "b" of step 17
    path = tmp_path / key
    data = bytearray(path.read_bytes())
    data[start + 9] ^= 0x01  # the CRC of its length
    path.write_bytes(bytes(data))
    trial = create_trial(str(tmp_path), timeout=0)
    with pytest.raises(CorruptRecordError, match=rf"^{key}: corrupt record at byte offset {start}: length checksum"):
        trial.tensor("b").values()
    assert [v.tolist() for v in trial.tensor("a").values().values()] == [[s] * 4 for s in range(30)]


def gets(s3: Any) -> int:
    return s3.proxy.count("GET") - s3.proxy.count("GET", query_has="list-type=2")


def test_values_on_s3_fetch_each_event_file_once_for_every_tensor(s3: Any, tmp_path: Path) -> None:
    write_job(s3.uri("job"))
    write_job(tmp_path / "job")
    remote, local = create_trial(s3.uri("job")), create_trial(str(tmp_path / "job"))
    s3.proxy.clear()
    for name in local.tensor_names():
        ours, theirs = remote.tensor(name).values(), local.tensor(name).values()
        assert list(ours) == list(theirs) == list(range(STEPS))
        assert all(same(ours[s], theirs[s]) for s in ours)
    assert gets(s3) == STEPS  # the event files, fetched in the first values() call only
    assert remote._reads.reader.batched == local._reads.reader.batched > 0
