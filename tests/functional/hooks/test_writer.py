import logging
from pathlib import Path

import numpy as np
import pytest

from sdk_ext.exceptions import StorageError
from sdk_ext.format.consolidated import CONSOLIDATED_DIR, consolidated_key, parse_consolidated
from sdk_ext.format.events import decode_tensor_value
from sdk_ext.format.index import parse_index
from sdk_ext.format.paths import index_key
from sdk_ext.format.records import read_record
from sdk_ext.hooks import TrialWriter
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import InMemoryStorage, LocalStorage
from sdk_ext.storage.spool import SpoolConfig, UploadSpool


def files(root: Path) -> list[str]:
    """The trial's files in smdebug's layout (the consolidated index, sdk_ext's addition, has tests below)."""
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.relative_to(root).parts[0] != CONSOLIDATED_DIR
    )


@pytest.mark.parametrize("background", [True, False])
def test_step_files_appear_complete_and_index_points_at_records(tmp_path: Path, background: bool) -> None:
    w = TrialWriter(LocalStorage(tmp_path), worker="worker_3", background=background)
    w.open_step(1234, ModeKeys.EVAL, 7)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    w.write_tensor("a", a)
    w.write_tensor("b", np.array(["x", "yz"]))
    assert w.close_step()
    w.flush()
    assert files(tmp_path) == [
        "events/000000001234/000000001234_worker_3.tfevents",
        "index/000000001/000000001234_worker_3.json",
    ]
    index = parse_index((tmp_path / files(tmp_path)[1]).read_bytes())
    assert (index.mode, index.mode_step) == (ModeKeys.EVAL, 7)
    data = (tmp_path / index.event_file).read_bytes()  # type: ignore[operator]
    got = decode_tensor_value(read_record(data, index.tensors[0].start, expect_length=index.tensors[0].length))
    assert np.array_equal(got, a) and got.dtype == np.float32
    w.close()


def test_caller_may_change_the_array_once_write_returns(tmp_path: Path) -> None:
    w = TrialWriter(LocalStorage(tmp_path))
    big = np.ones(1 << 16, dtype=np.float32)  # large enough to be passed through as a view
    w.open_step(0, ModeKeys.TRAIN, 0)
    w.write_tensor("big", big)
    big[:] = 7  # e.g. the optimizer updating a parameter in place
    w.close()
    index = parse_index((tmp_path / "index/000000000/000000000000_worker_0.json").read_bytes())
    data = (tmp_path / index.event_file).read_bytes()  # type: ignore[operator]
    assert (decode_tensor_value(read_record(data, 0)) == 1).all()


@pytest.mark.parametrize("elements", [10, 3000, 1 << 16])  # one joined write; three writes; a combined CRC
def test_a_tensor_written_from_parts_is_the_same_file_as_written_whole(tmp_path: Path, elements: int) -> None:
    # a sharded tensor's writer passes its own piece where it lies and the others' from shared memory
    whole = np.arange(elements, dtype=np.float32) * 0.5
    stale = np.full_like(whole, np.nan)  # what the array the writer is handed holds where this rank's piece goes
    cut = elements // 3
    stale[cut:] = whole[cut:]
    for name, kwargs in (("whole", {}), ("parts", {"content": [whole[:cut].data.cast("B"), stale[cut:].data.cast("B")]})):
        w = TrialWriter(LocalStorage(tmp_path / name))
        w.open_step(0, ModeKeys.TRAIN, 0)
        w.write_tensor("t", stale if kwargs else whole, wall_time=1.0, **kwargs)  # type: ignore[arg-type]
        w.write_tensor("after", np.ones(3, dtype=np.float64), wall_time=1.0)
        w.close()
    for rel in ("events/000000000000/000000000000_worker_0.tfevents", "index/000000000/000000000000_worker_0.json"):
        assert (tmp_path / "parts" / rel).read_bytes() == (tmp_path / "whole" / rel).read_bytes(), rel  # CRCs too


def test_parts_that_do_not_make_up_the_tensor_are_refused(tmp_path: Path) -> None:
    w = TrialWriter(LocalStorage(tmp_path))
    w.open_step(0, ModeKeys.TRAIN, 0)
    with pytest.raises(ValueError, match=r"tensor 't': its parts hold 8 bytes, its dtype and shape 16"):
        w.write_tensor("t", np.zeros(4, dtype=np.float32), content=[b"\0" * 8])
    w.close()


def test_an_open_step_leaves_only_temporary_files(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    w = TrialWriter(storage)
    w.open_step(0, ModeKeys.TRAIN, 0)
    w.write_tensor("x", np.zeros(3))
    w.flush()
    # what a crash at this point leaves: no file a reader would take for data
    assert all(name.endswith(".tmp") for name in files(tmp_path))
    assert list(storage.list("")) == []
    w.abort_step()
    assert files(tmp_path) == []


def test_shape_only_step_has_an_index_without_event_file(tmp_path: Path) -> None:
    w = TrialWriter(LocalStorage(tmp_path))
    w.open_step(5, ModeKeys.TRAIN, 5)
    w.write_shape("t", (7, 5))
    w.close()
    assert files(tmp_path) == ["index/000000000/000000000005_worker_0.json"]
    index = parse_index((tmp_path / files(tmp_path)[0]).read_bytes())
    assert index.event_file is None and index.shapes[0].shape == (7, 5)


def test_empty_step_writes_nothing(tmp_path: Path) -> None:
    w = TrialWriter(LocalStorage(tmp_path))
    w.open_step(0, ModeKeys.TRAIN, 0)
    assert not w.close_step()
    w.close()
    assert files(tmp_path) == []


class FailingIndexStorage(LocalStorage):
    """Index files cannot be committed (the disk filled up)."""

    def open_write(self, key: str):  # type: ignore[no-untyped-def]
        writer = super().open_write(key)
        if key.startswith("index/"):
            def fail() -> None:
                raise StorageError(f"{key}: disk full")
            writer.commit = fail  # type: ignore[method-assign]
        return writer

    def write(self, key: str, data: object) -> None:  # type: ignore[override]
        if key.startswith("index/"):
            raise StorageError(f"{key}: disk full")
        super().write(key, data)  # type: ignore[arg-type]


@pytest.mark.parametrize("lag", [0, 2])
def test_commit_errors_surface_and_no_index_is_left(tmp_path: Path, lag: int) -> None:
    w = TrialWriter(FailingIndexStorage(tmp_path), lag=lag)
    w.open_step(0, ModeKeys.TRAIN, 0)
    w.write_tensor("x", np.zeros(3))
    with pytest.raises(StorageError, match="disk full"):
        w.close_step()  # lag 0: committed (or not) before close_step returns
        w.flush()  # lag > 0: the background commit's error surfaces here
    assert not any(name.startswith("index/") and name.endswith(".json") for name in files(tmp_path))
    w.close()


def test_files_are_created_ahead_and_a_wrong_guess_leaves_nothing(tmp_path: Path) -> None:
    w = TrialWriter(LocalStorage(tmp_path))
    for step in (0, 1):  # saved back to back: step 2's event file is created ahead
        w.open_step(step, ModeKeys.TRAIN, step)
        w.write_tensor("x", np.zeros(3))
        w.close_step()
    w.open_step(7, ModeKeys.TRAIN, 7)  # the guess was wrong
    w.write_tensor("x", np.zeros(3))
    w.close()
    assert files(tmp_path) == [
        "events/000000000000/000000000000_worker_0.tfevents",
        "events/000000000001/000000000001_worker_0.tfevents",
        "events/000000000007/000000000007_worker_0.tfevents",
        "index/000000000/000000000000_worker_0.json",
        "index/000000000/000000000001_worker_0.json",
        "index/000000000/000000000007_worker_0.json",
    ]
    assert sorted(p.name for p in (tmp_path / "events").iterdir()) == ["000000000000", "000000000001", "000000000007"]


def test_each_index_is_committed_after_its_event_file_and_the_end_marker_last(tmp_path: Path) -> None:
    committed: list[str] = []

    class Recording(LocalStorage):
        def open_write(self, key: str):  # type: ignore[no-untyped-def]
            writer = super().open_write(key)
            commit = writer.commit

            def recorded() -> None:
                commit()
                committed.append(key)

            writer.commit = recorded  # type: ignore[method-assign]
            return writer

    w = TrialWriter(Recording(tmp_path))
    for step in range(3):
        w.open_step(step, ModeKeys.TRAIN, step)
        w.write_tensor("x", np.zeros(2))
        w.close_step()
    w.write_end_marker()
    w.close()
    expected = []
    for s in range(3):
        expected += [f"events/{s:012d}/{s:012d}_worker_0.tfevents", f"index/000000000/{s:012d}_worker_0.json"]
    assert committed == expected + ["consolidated/worker_0_index.sdkidx", "training_job_end.ts"]


# --- the consolidated index (sdk_ext's addition: one object per worker holding its index files) --------------


def consolidated_documents(storage: LocalStorage | InMemoryStorage, worker: str = "worker_0") -> dict[str, bytes]:
    """``{index key: document}`` as the worker's consolidated index holds them."""
    doc = parse_consolidated(storage.read(consolidated_key(worker)))
    assert doc.worker == worker
    return {index_key(step, worker): head + tail for step, head, tail in doc.entries}


def index_files(storage: LocalStorage | InMemoryStorage) -> dict[str, bytes]:
    return {k: storage.read(k) for k in storage.list("index/")}


def save_steps(w: TrialWriter, steps: range, modes: tuple[ModeKeys, ...] = (ModeKeys.TRAIN,)) -> None:
    for step in steps:
        mode = modes[step % len(modes)]
        w.open_step(step, mode, step)
        w.write_tensor("x", np.full(3, step, np.float32))
        if mode is ModeKeys.EVAL:
            w.write_shape("y", (2, step + 1))  # the tail changes from step to step
        w.close_step()


@pytest.mark.parametrize("lag", [0, 3])
def test_close_writes_a_consolidated_index_of_every_committed_index_file(tmp_path: Path, lag: int) -> None:
    storage = LocalStorage(tmp_path)
    w = TrialWriter(storage, worker="worker_2", lag=lag)
    save_steps(w, range(0, 2500, 7), modes=(ModeKeys.TRAIN, ModeKeys.EVAL))  # two index buckets of 1000 steps
    assert not storage.exists(consolidated_key("worker_2"))  # written at close, not before
    w.write_end_marker()
    w.close()
    assert consolidated_documents(storage, "worker_2") == index_files(storage)
    assert len(index_files(storage)) == len(range(0, 2500, 7))


def test_a_writer_through_the_upload_spool_uploads_it_after_its_steps_and_before_the_marker(tmp_path: Path) -> None:
    remote = InMemoryStorage()
    order: list[str] = []
    write = remote.write

    def recording(key: str, data: object) -> None:
        order.append(key)
        write(key, data)  # type: ignore[arg-type]

    remote.write = recording  # type: ignore[method-assign]
    spool = UploadSpool(remote, config=SpoolConfig(directory=str(tmp_path / "spool")), name="worker_0")
    w = TrialWriter(remote, spool=spool, background=False)
    save_steps(w, range(20))
    w.write_end_marker()
    w.close()
    assert consolidated_documents(remote) == index_files(remote)
    assert order[-2:] == [consolidated_key("worker_0"), "training_job_end.ts"]
    assert max(order.index(k) for k in index_files(remote)) < order.index(consolidated_key("worker_0"))


def test_without_close_only_a_temporary_file_is_left_which_no_listing_shows(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    w = TrialWriter(storage)
    save_steps(w, range(5))
    w.flush()  # the process dies here: close never runs
    left = [p for p in (tmp_path / CONSOLIDATED_DIR).iterdir()]
    assert len(left) == 1 and left[0].name.endswith(".tmp")
    assert list(storage.list(CONSOLIDATED_DIR + "/")) == [] and not storage.exists(consolidated_key("worker_0"))
    w.close()
    assert consolidated_documents(storage) == index_files(storage)


def test_a_failing_consolidated_index_costs_no_step(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    class NoConsolidated(LocalStorage):
        def open_write(self, key: str):  # type: ignore[no-untyped-def]
            if key.startswith(CONSOLIDATED_DIR):
                raise StorageError(f"{key}: permission denied")
            return super().open_write(key)

    caplog.set_level(logging.INFO, logger="sdk_ext")
    storage = NoConsolidated(tmp_path)
    w = TrialWriter(storage)
    save_steps(w, range(4))
    w.write_end_marker()
    w.close()
    assert len(index_files(storage)) == 4 and storage.exists("training_job_end.ts")
    assert not (tmp_path / CONSOLIDATED_DIR).exists()
    assert any("no consolidated index for worker_0" in r.getMessage() for r in caplog.records)


def test_a_step_whose_index_failed_is_not_in_it(tmp_path: Path) -> None:
    storage = FailingIndexStorage(tmp_path)
    w = TrialWriter(storage)
    w.open_step(0, ModeKeys.TRAIN, 0)
    w.write_tensor("x", np.zeros(3))
    with pytest.raises(StorageError):
        w.close_step()
    w.close()
    assert not storage.exists(consolidated_key("worker_0"))  # no committed index file: nothing to consolidate


def test_consolidate_false_writes_only_smdebugs_files(tmp_path: Path) -> None:
    w = TrialWriter(LocalStorage(tmp_path), consolidate=False)
    save_steps(w, range(3))
    w.close()
    assert not (tmp_path / CONSOLIDATED_DIR).exists()


def test_the_index_holds_the_crc_of_the_whole_event_file_and_each_record_of_any_size(tmp_path: Path) -> None:
    """Small records, records over 4 KiB (written in parts) and records past the size where the file's CRC is
    combined from the record's: the file CRC in the index is the CRC of the bytes on disk."""
    from sdk_ext.format import checksums
    from sdk_ext.hooks.writer import COMBINE_FROM

    w = TrialWriter(LocalStorage(tmp_path))
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(n).astype(np.float32) for n in (3, 2000, COMBINE_FROM // 4 + 11, 7, COMBINE_FROM)]
    w.open_step(0, ModeKeys.TRAIN, 0)
    for i, a in enumerate(arrays):
        w.write_tensor(f"t{i}", a)
    assert w.close_step()
    w.close()
    raw = (tmp_path / index_key(0, "worker_0")).read_bytes()
    span = checksums.locate(raw)
    assert span is not None
    checks = checksums.verify(raw, span, key="index")
    index = parse_index(raw)
    data = (tmp_path / index.event_file).read_bytes()  # type: ignore[operator]
    assert checks.file == checksums.crc32c(data)
    records = [int(checks.records[i * 8:(i + 1) * 8], 16) for i in range(checks.count)]
    assert records == [checksums.crc32c(data[e.start:e.start + e.length]) for e in index.tensors]
