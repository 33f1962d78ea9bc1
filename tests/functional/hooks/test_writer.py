from pathlib import Path

import numpy as np
import pytest

from sdk_ext.exceptions import StorageError
from sdk_ext.format.events import decode_tensor_value
from sdk_ext.format.index import parse_index
from sdk_ext.format.records import read_record
from sdk_ext.hooks import TrialWriter
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import LocalStorage
from sdk_ext.storage.base import Buffer


def files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


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
    def write(self, key: str, data: object) -> None:  # type: ignore[override]
        if key.startswith("index/"):
            raise StorageError(f"{key}: disk full")
        super().write(key, data)  # type: ignore[arg-type]


def test_background_write_errors_surface_on_flush_and_no_index_is_left(tmp_path: Path) -> None:
    w = TrialWriter(FailingIndexStorage(tmp_path))
    w.open_step(0, ModeKeys.TRAIN, 0)
    w.write_tensor("x", np.zeros(3))
    w.close_step()
    with pytest.raises(StorageError, match="disk full"):
        w.flush()
    assert not any(name.startswith("index/") for name in files(tmp_path))
    w.close()


def test_writes_of_one_object_are_never_interleaved(tmp_path: Path) -> None:
    seen: list[str] = []

    class Recording(LocalStorage):
        def write(self, key: str, data: Buffer) -> None:  # type: ignore[override]
            seen.append(key)
            super().write(key, data)

    w = TrialWriter(Recording(tmp_path))
    for step in range(3):
        w.open_step(step, ModeKeys.TRAIN, step)
        w.write_tensor("x", np.zeros(2))
        w.close_step()
    w.write_end_marker()
    w.close()
    assert seen == [f"index/000000000/{s:012d}_worker_0.json" for s in range(3)] + ["training_job_end.ts"]
