"""A trial larger than the file cache: one tensor over all steps costs the ranges of its records."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sdk_ext.exceptions import CorruptRecordError
from sdk_ext.storage import InMemoryStorage, LocalStorage
from sdk_ext.trials import TrialOptions, create_trial
from tests.trial_builder import TrialBuilder

STEPS, TENSORS = 20, 40
NAMES = [f"t{k:02d}" for k in range(TENSORS)]
OPTIONS = TrialOptions(file_cache_bytes=4 << 20, read_ahead_bytes=0)  # the trial is ~6.5 MB


def value(step: int, k: int) -> np.ndarray:
    return np.arange(2000, dtype=np.float32) + step * 1000 + k


def build(storage: LocalStorage | InMemoryStorage) -> None:
    b = TrialBuilder(storage)
    b.collections()
    for step in range(STEPS):
        b.step(step, tensors={n: value(step, k) for k, n in enumerate(NAMES)})
    b.end()


@pytest.fixture(params=["local", "memory"])
def storage(request, tmp_path: Path) -> LocalStorage | InMemoryStorage:
    store = LocalStorage(tmp_path) if request.param == "local" else InMemoryStorage()
    build(store)
    return store


def test_every_tensor_reads_back_exactly_from_slabs_and_no_file_is_read_whole(storage):
    trial = create_trial(storage, options=OPTIONS, timeout=0)
    reader = trial._reads.reader
    for k, name in enumerate(NAMES):
        got = trial.tensor(name).values()
        assert sorted(got) == list(range(STEPS))
        assert all(np.array_equal(v, value(s, k)) for s, v in got.items())
        got[0][:] = -1  # values are independent arrays, not views of a slab
    assert trial.tensor(NAMES[0]).value(0).tolist() == value(0, 0).tolist()
    slabs = reader.slabs
    assert 0 < slabs.filled < TENSORS  # a slab serves several tensors
    assert len(reader.cache) <= 1  # no event file kept whole (the one value() read above)


def test_a_value_walk_reads_ahead_through_slabs_too(storage):
    trial = create_trial(storage, options=OPTIONS.with_changes(read_ahead_bytes=1 << 20), timeout=0)
    for k, name in enumerate(NAMES[:5]):
        tensor = trial.tensor(name)
        assert all(np.array_equal(tensor.value(s), value(s, k)) for s in tensor.steps())
    assert trial._reads.reader.batched > 0 and trial._reads.reader.slabs.filled > 0


def test_a_damaged_record_raises_as_step_by_step_does(tmp_path):
    storage = LocalStorage(tmp_path)
    build(storage)
    key = "events/000000000007/000000000007_worker_0.tfevents"
    damaged = bytearray(storage.read(key))
    trial = create_trial(storage, options=OPTIONS, timeout=0)
    start = trial._index.by_step[7][0].raw[NAMES[3]][0]
    damaged[start] ^= 0xFF  # the length header of t03's record at step 7
    storage.write(key, bytes(damaged))
    trial = create_trial(storage, options=OPTIONS, timeout=0)
    with pytest.raises(CorruptRecordError, match=rf"{key}: corrupt record at byte offset {start}: length checksum"):
        trial.tensor(NAMES[3]).values()
    assert len(trial.tensor(NAMES[4]).values()) == STEPS


@pytest.mark.parametrize("slab", [True, False], ids=["slabs", "records one by one"])
def test_files_past_the_map_limit_are_read_range_by_range(tmp_path, monkeypatch, slab):
    from sdk_ext.trials.read import byte_ranges as slabs

    monkeypatch.setattr(slabs, "MAPS", 3)
    if not slab:
        monkeypatch.setattr(slabs, "MIN_WINDOW", 1 << 30)  # no window is wide enough: one by one
    storage = LocalStorage(tmp_path)
    build(storage)
    trial = create_trial(storage, options=OPTIONS, timeout=0)
    for k, name in enumerate(NAMES[:6]):
        got = trial.tensor(name).values()
        assert all(np.array_equal(v, value(s, k)) for s, v in got.items()) and len(got) == STEPS
    assert len(trial._reads.reader.slabs._maps) == 3
