"""Nothing there, not there yet, half there, damaged: the trial waits a bounded time or says where."""

from __future__ import annotations

import logging
import time

import numpy as np
import pytest

from sdk_ext.exceptions import (
    CorruptRecordError,
    IndexReaderException,
    MissingCollectionFiles,
    MissingEventFileError,
    TensorUnavailableForStep,
)
from sdk_ext.storage import LocalStorage
from sdk_ext.trials import TrialOptions, create_trial
from tests.trial_builder import FakeClock, TrialBuilder


def options(clock: FakeClock, **kw: float) -> TrialOptions:
    return TrialOptions(clock=clock, **kw)


def test_empty_path_raises_missing_collection_files_after_the_timeout(tmp_path):
    clock = FakeClock()
    with pytest.raises(MissingCollectionFiles, match=rf"{tmp_path}.*after 5 s.*longer timeout"):
        create_trial(tmp_path, options=options(clock, collections_timeout=5, poll_interval=1))
    assert clock.sleeps == [1, 1, 1, 1, 1]


def test_missing_directory_with_the_real_clock_returns_promptly(tmp_path):
    started = time.monotonic()
    with pytest.raises(MissingCollectionFiles):
        create_trial(str(tmp_path / "no" / "such" / "job"), timeout=0.2, options=TrialOptions(poll_interval=0.05))
    assert time.monotonic() - started < 5


def test_end_marker_without_collections_raises_at_once(tmp_path):
    TrialBuilder(LocalStorage(tmp_path)).end()
    clock = FakeClock()
    with pytest.raises(MissingCollectionFiles, match="training has ended"):
        create_trial(tmp_path, options=options(clock, collections_timeout=60))
    assert clock.sleeps == []


def test_collections_written_during_the_wait_are_picked_up(tmp_path):
    b = TrialBuilder(LocalStorage(tmp_path))
    clock = FakeClock()
    clock.on_sleep(lambda: None, lambda: (b.collections(), b.step(0, tensors={"x": np.ones(3)})))
    trial = create_trial(tmp_path, options=options(clock, collections_timeout=60, poll_interval=2))
    assert clock.sleeps == [2, 2] and trial.steps() == [0]


def test_missing_worker_collections_file_is_waited_for_then_tolerated(tmp_path):
    b = TrialBuilder(LocalStorage(tmp_path))
    b.collections(["worker_0"], num_workers=2)
    clock = FakeClock()
    trial = create_trial(tmp_path, options=options(clock, collections_timeout=3))
    assert trial.workers() == ["worker_0"] and trial.num_workers == 2 and clock.slept == pytest.approx(3)
    b.collections(["worker_1"], num_workers=2)
    assert trial.workers() == ["worker_0", "worker_1"]
    b.end()
    with pytest.raises(MissingCollectionFiles, match="only 1 of the 3 workers"):
        b2 = TrialBuilder(LocalStorage(tmp_path / "other"))
        b2.collections(["worker_0"], num_workers=3)
        b2.end()
        create_trial(tmp_path / "other", options=options(FakeClock(), collections_timeout=3))


def test_event_file_not_there_yet_is_waited_for(tmp_path):
    storage = LocalStorage(tmp_path)
    b = TrialBuilder(storage)
    b.collections()
    written = b.step(0, tensors={"x": np.arange(3.0)}, write_event=False)  # S3 may show the index first
    clock = FakeClock()
    trial = create_trial(tmp_path, options=options(clock, poll_interval=1, event_file_timeout=10))
    clock.on_sleep(lambda: None, lambda: storage.write(written.event_key, written.event))
    assert trial.tensor("x").value(0).tolist() == [0.0, 1.0, 2.0]
    assert clock.sleeps == [1, 1]


def test_event_file_that_never_comes_is_unavailable_after_the_timeout_and_damage_at_the_end(tmp_path):
    """A live smdebug trial (no checksums: its writer may upload an index before its event file) waits
    for the file, then says "not available"; once training has ended the file will never come: damage."""
    b = TrialBuilder(LocalStorage(tmp_path))
    b.collections()
    b.step(0, tensors={"x": np.arange(3.0)}, write_event=False)
    clock = FakeClock()
    trial = create_trial(tmp_path, options=options(clock, poll_interval=1, event_file_timeout=4))
    with pytest.raises(TensorUnavailableForStep) as err:
        trial.tensor("x").value(0)
    assert "events/000000000000/000000000000_worker_0.tfevents" in str(err.value.__cause__)
    assert clock.slept == pytest.approx(4)
    with pytest.raises(TensorUnavailableForStep, match="step 0"):
        trial.tensor("x").values()  # the batch waits once too
    assert clock.slept == pytest.approx(8)
    b.end()
    ended = create_trial(tmp_path, options=options(FakeClock(), event_file_timeout=4))
    with pytest.raises(MissingEventFileError, match="000000000000_worker_0.tfevents: .*missing.*training has ended"):
        ended.tensor("x").value(0)


@pytest.mark.parametrize("whole_file_bytes", [1 << 20, 0], ids=["whole-file", "ranged"])
def test_truncated_last_record_is_not_data_until_complete(tmp_path, whole_file_bytes):
    """The index already lists the last record, the writer is still appending it."""
    storage = LocalStorage(tmp_path)
    b = TrialBuilder(storage)
    b.collections()
    tensors = {"a": np.arange(4, dtype=np.int16), "b": np.full((2, 3), 7, np.uint64)}
    written = b.step(0, tensors=tensors)
    storage.write(written.event_key, written.event[:-5])
    clock = FakeClock()
    trial = create_trial(tmp_path, options=options(clock, poll_interval=1, whole_file_bytes=whole_file_bytes))
    assert np.array_equal(trial.tensor("a").value(0), tensors["a"])  # complete records read at once
    assert clock.sleeps == []
    clock.on_sleep(lambda: storage.write(written.event_key, written.event))
    got = trial.tensor("b").value(0)
    assert got.dtype == np.uint64 and np.array_equal(got, tensors["b"]) and clock.sleeps == [1]
    assert np.array_equal(trial.tensor("a").value(0), tensors["a"])


@pytest.mark.parametrize("whole_file_bytes", [1 << 20, 0], ids=["whole-file", "ranged"])
def test_corrupt_record_names_the_file_and_byte_offset(tmp_path, whole_file_bytes):
    storage = LocalStorage(tmp_path)
    b = TrialBuilder(storage)
    b.collections()
    written = b.step(3, tensors={"a": np.ones(5), "b": np.zeros(5)})
    start = len(b.encode_step(3, tensors={"a": np.ones(5)}).event)  # where record "b" begins
    damaged = bytearray(written.event)
    damaged[start + 2] ^= 0x40  # its length header
    storage.write(written.event_key, bytes(damaged))
    trial = create_trial(tmp_path, options=TrialOptions(whole_file_bytes=whole_file_bytes), timeout=0)
    assert trial.tensor("a").value(3).tolist() == [1.0] * 5
    with pytest.raises(CorruptRecordError, match=rf"events/000000000003/000000000003_worker_0.tfevents: corrupt record at byte offset {start}: length checksum") as err:
        trial.tensor("b").value(3)
    assert err.value.offset == start


def test_a_corrupt_index_file_makes_only_its_step_unreadable_naming_it(tmp_path, caplog):
    storage = LocalStorage(tmp_path)
    b = TrialBuilder(storage)
    b.collections()
    written = b.step(0, tensors={"a": np.ones(2)})
    b.step(1, tensors={"a": np.ones(2) * 2})
    b.end()
    storage.write(written.index_key, written.index[:-10])
    with caplog.at_level(logging.WARNING):
        trial = create_trial(tmp_path, timeout=0)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "index/000000000/000000000000_worker_0.json" in warnings[0].getMessage()
    assert trial.steps() == [1] and trial.tensor("a").value(1).tolist() == [2.0, 2.0]
    with pytest.raises(IndexReaderException, match="index/000000000/000000000000_worker_0.json: not valid JSON"):
        trial.tensor("a").value(0)


@pytest.mark.parametrize("storage_kind", ["local", "memory"])
def test_large_values_are_writable_and_independent_between_reads(tmp_path, storage_kind):
    """Records of 64 KiB and more are read straight into the array's memory (read_into)."""
    from sdk_ext.storage import InMemoryStorage

    storage = LocalStorage(tmp_path) if storage_kind == "local" else InMemoryStorage()
    b = TrialBuilder(storage)
    b.collections()
    big = np.arange(256 * 300, dtype=np.float64).reshape(256, 300)  # 600 KiB
    for step in range(3):
        b.step(step, tensors={"big": big + step, "small": np.ones(3)})
    trial = create_trial(storage, options=TrialOptions(whole_file_bytes=1 << 10), timeout=0)
    first = trial.tensor("big").value(1)
    assert first.flags.writeable and np.array_equal(first, big + 1)
    first[:] = -1
    assert np.array_equal(trial.tensor("big").value(1), big + 1)
    values = trial.tensor("big").values()
    assert all(np.array_equal(v, big + s) and v.flags.writeable for s, v in values.items())


def test_missing_event_file_is_given_up_at_once_when_its_worker_wrote_later_steps(tmp_path):
    """As smdebug, a file skipped by its worker will never come, so there is nothing to wait for; unlike
    smdebug that is damage (MissingEventFileError naming the file), not "not available"."""
    b = TrialBuilder(LocalStorage(tmp_path))
    b.collections()
    b.step(0, tensors={"x": np.arange(3.0)}, write_event=False)
    b.step(1, tensors={"x": np.arange(3.0)})
    clock = FakeClock()
    trial = create_trial(tmp_path, options=options(clock, event_file_timeout=60))
    with pytest.raises(MissingEventFileError) as err:
        trial.tensor("x").value(0)
    assert "later steps" in str(err.value) and "000000000000_worker_0.tfevents" in str(err.value)
    assert clock.sleeps == []
    assert trial.tensor("x").value(1).tolist() == [0.0, 1.0, 2.0]
