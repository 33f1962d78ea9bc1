"""Opening a finished trial on remote storage without one request per index file (docs/FORMAT.md#consolidated-index, smdebug #99).

The storage here is the project's in-memory one seen as remote (no ``read_into``, so the reader treats
it as it treats S3) and counting every request; tests/functional/trials/test_trials_on_s3.py does the
same over HTTP against moto. Every test compares what the trial answers with what the same trial
answers when every index file is read at open, the way smdebug reads them.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from sdk_ext.exceptions import IndexReaderException
from sdk_ext.format.consolidated import CONSOLIDATED_DIR, consolidated_key
from sdk_ext.format.index import IndexFile, encode_index, parse_index
from sdk_ext.format.paths import event_key, index_key
from sdk_ext.hooks import TrialWriter
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import Capabilities, InMemoryStorage, ObjectInfo, ReadRequest, Writes
from sdk_ext.trials import Trial, TrialOptions, create_trial

Buffer = bytes | bytearray | memoryview


class Remote:
    """``inner`` as a remote store: no ``read_into``; every request recorded as (kind, key or prefix)."""

    def __init__(self, inner: InMemoryStorage) -> None:
        self.inner = inner
        self.requests: list[tuple[str, str]] = []

    @property
    def uri(self) -> str:
        return "remote://trial"

    def list_objects(self, prefix: str, *, start_after: str = "") -> Iterator[ObjectInfo]:
        self.requests.append(("LIST", prefix))
        return self.inner.list_objects(prefix, start_after=start_after)

    def list(self, prefix: str, *, start_after: str = "") -> Iterator[str]:
        return (o.key for o in self.list_objects(prefix, start_after=start_after))

    def read(self, key: str, *, start: int = 0, length: int | None = None) -> bytes:
        self.requests.append(("GET", key))
        return self.inner.read(key, start=start, length=length)

    def read_many(self, requests: Sequence[ReadRequest]) -> builtins.list[bytes]:
        return [self.read(r.key, start=r.start, length=r.length) for r in requests]

    def exists(self, key: str) -> bool:
        self.requests.append(("LIST", key))
        return self.inner.exists(key)

    def write(self, key: str, data: Buffer | Iterable[Buffer]) -> None:
        self.inner.write(key, data)

    def open_write(self, key: str) -> Any:
        return self.inner.open_write(key)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def info(self, key: str) -> ObjectInfo | None:
        self.requests.append(("LIST", key))
        return self.inner.info(key)

    def capabilities(self) -> Capabilities:
        """A remote's: listings with sizes, no direct reads (declared, as every Storage must)."""
        return Capabilities(Writes.SPOOLED, listings=self)

    def gets(self, prefix: str) -> builtins.list[str]:
        return [k for kind, k in self.requests if kind == "GET" and k.startswith(prefix)]


def write_job(storage: InMemoryStorage, steps: int, workers: int = 1, *, finished: bool = True) -> None:
    """A job's trial as sdk_ext's writer leaves it: TRAIN steps with an EVAL step every 10, two tensors,
    one of them ("early") only in the first 5 steps; with ``finished``, closed writers and the end marker."""
    for rank in range(workers):
        w = TrialWriter(storage, worker=f"worker_{rank}", background=False)
        train = evaluate = 0
        for step in range(steps):
            mode = ModeKeys.EVAL if step % 10 == 9 else ModeKeys.TRAIN
            mode_step = evaluate if mode is ModeKeys.EVAL else train
            w.open_step(step, mode, mode_step)
            w.write_tensor("w", np.full(4, step * 10 + rank, np.float32))
            if step < 5:
                w.write_tensor("early", np.array([step], np.int64))
            w.close_step()
            evaluate, train = (evaluate + 1, train) if mode is ModeKeys.EVAL else (evaluate, train + 1)
        w.write_collections(_collections(workers))
        if finished:
            w.write_end_marker()
            w.close()


def _collections(workers: int) -> Any:
    from sdk_ext.format import CollectionsFile, CollectionSpec

    return CollectionsFile({"weights": CollectionSpec("weights", include_regex=("w",))}, num_workers=workers)


def snapshot(trial: Trial) -> dict[str, Any]:
    """Everything a user can ask, through the public API."""
    out: dict[str, Any] = {
        "steps": {m.name: trial.steps(mode=m) for m in (*trial.modes(), ModeKeys.GLOBAL)},
        "names": trial.tensor_names(),
        "workers": trial.workers(),
        "mode_of": {s: trial.mode_modestep(s) for s in trial.steps()},
        "values": {},
    }
    for name in trial.tensor_names():
        tensor = trial.tensor(name)
        for step in tensor.steps():
            for worker in tensor.workers(step):
                out["values"][(name, step, worker)] = tensor.value(step, worker=worker).tolist()
    return out


def eager(storage: InMemoryStorage) -> dict[str, Any]:
    """The trial read the way smdebug reads it: every index file at open, no consolidated index."""
    copy = InMemoryStorage({k: storage.read(k) for k in storage.list("") if not k.startswith(CONSOLIDATED_DIR)})
    return snapshot(create_trial(copy, options=TrialOptions(lazy_index_files=0)))


# --- the consolidated index -------------------------------------------------------------------------------


def test_a_finished_trial_opens_with_one_get_per_worker_for_its_index() -> None:
    storage = InMemoryStorage()
    write_job(storage, 300, workers=2)
    remote = Remote(storage)
    trial = create_trial(remote)
    assert remote.gets("index/") == []
    assert sorted(remote.gets(CONSOLIDATED_DIR)) == [consolidated_key("worker_0"), consolidated_key("worker_1")]
    assert trial.steps() == list(range(300)) and trial.loaded_all_steps
    assert len(remote.requests) <= 7  # collections list + get, marker, index listing, consolidated list + 2 gets
    assert snapshot(trial) == eager(storage)
    assert remote.gets("index/") == []  # answering every query needed no index file either


def test_entries_the_listing_does_not_confirm_are_read_from_their_index_files() -> None:
    storage = InMemoryStorage()
    write_job(storage, 100)
    # an index file rewritten since (another size): its own bytes count; one deleted: its step is gone
    rewritten = index_key(40, "worker_0")
    old = parse_index(storage.read(rewritten))
    storage.write(rewritten, encode_index(IndexFile(old.mode, 1036, old.event_file, old.tensors, old.shapes)))
    storage.delete(index_key(41, "worker_0"))
    remote = Remote(storage)
    trial = create_trial(remote)
    assert remote.gets("index/") == [rewritten]
    assert trial.mode_modestep(40) == (ModeKeys.TRAIN, 1036)  # the index file's word, not the consolidated one's
    assert 41 not in trial.steps()
    assert snapshot(trial) == eager(storage)


def test_a_damaged_consolidated_index_is_skipped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    storage = InMemoryStorage()
    write_job(storage, 50)
    key = consolidated_key("worker_0")
    data = storage.read(key)
    storage.write(key, data[:100] + bytes([data[100] ^ 0xFF]) + data[101:])
    remote = Remote(storage)
    with caplog.at_level(logging.WARNING, logger="sdk_ext"):
        trial = create_trial(remote)
    assert len(remote.gets("index/")) == 50
    assert any("CRC32C" in r.getMessage() and key in r.getMessage() for r in caplog.records)
    assert snapshot(trial) == eager(storage)


def test_a_small_refresh_reads_its_index_files_without_looking_for_a_consolidated_index() -> None:
    storage = InMemoryStorage()
    write_job(storage, 5)
    remote = Remote(storage)
    create_trial(remote)
    assert not [k for kind, k in remote.requests if k.startswith(CONSOLIDATED_DIR)]
    assert len(remote.gets("index/")) == 5


# --- index files read on demand (random access) ----------------------------------------------------------


def lazy_options(**changes: Any) -> TrialOptions:
    return TrialOptions(**{"lazy_index_files": 16, "collections_timeout": 0, **changes})


def without_consolidated(steps: int, workers: int = 1) -> InMemoryStorage:
    """A finished trial as smdebug's writer leaves it (no consolidated index)."""
    storage = InMemoryStorage()
    write_job(storage, steps, workers)
    for w in range(workers):
        storage.delete(consolidated_key(f"worker_{w}"))
    return storage


def test_the_value_at_the_last_step_reads_one_index_file_not_all() -> None:
    storage = without_consolidated(500)
    remote = Remote(storage)
    trial = create_trial(remote, options=lazy_options())
    assert remote.gets("index/") == []
    steps = trial.steps()
    assert steps == list(range(500))
    assert remote.gets("index/") == []
    value = trial.tensor("w").value(steps[-1])
    assert value.tolist() == [4990.0] * 4
    assert remote.gets("index/") == [index_key(499, "worker_0")]
    assert remote.gets("events/") == [event_key(499, "worker_0")]
    assert trial.mode_modestep(499) == (ModeKeys.EVAL, 49)
    assert trial.tensor("w").value(250).tolist() == [2500.0] * 4  # a second step: its file alone
    assert remote.gets("index/") == [index_key(499, "worker_0"), index_key(250, "worker_0")]
    trial.tensor("w").value(100)  # a third: that is a scan, so everything is read in one batch
    assert len(remote.gets("index/")) == 500


def test_queries_over_the_whole_index_read_every_pending_file_once() -> None:
    storage = without_consolidated(300)
    remote = Remote(storage)
    trial = create_trial(remote, options=lazy_options())
    assert trial.tensor_names() == ["early", "w"]  # "early" is only in steps 0-4
    assert len(remote.gets("index/")) == 300
    assert snapshot(trial) == eager(storage)
    assert len(remote.gets("index/")) == 300


@pytest.mark.parametrize(
    "query",
    [
        lambda t: t.tensor("early").value(3),  # not in the last step: has_tensor reads everything
        lambda t: t.steps(mode=ModeKeys.EVAL),
        lambda t: t.modes(),
        lambda t: t.tensor("w").steps(),
        lambda t: t.tensor("w").values(),
        lambda t: t.global_step(ModeKeys.EVAL, 3),
        lambda t: t.tensor("w").value(5, mode=ModeKeys.EVAL),
        lambda t: t.tensor_names(collection="weights"),
    ],
)
def test_every_query_answers_as_an_eager_trial_would(query) -> None:  # type: ignore[no-untyped-def]
    storage = without_consolidated(200)
    lazy = create_trial(Remote(storage), options=lazy_options())
    reference = create_trial(Remote(storage), options=lazy_options(lazy_index_files=0))
    got, expected = query(lazy), query(reference)
    if isinstance(got, dict):
        assert {k: v.tolist() for k, v in got.items()} == {k: v.tolist() for k, v in expected.items()}
    elif isinstance(got, np.ndarray):
        assert got.tolist() == expected.tolist()
    else:
        assert got == expected
    assert snapshot(lazy) == snapshot(reference)


def test_a_damaged_pending_index_file_is_named_when_its_step_is_read() -> None:
    storage = without_consolidated(100)
    storage.write(index_key(99, "worker_0"), b"{not json")
    remote = Remote(storage)
    trial = create_trial(remote, options=lazy_options())
    assert trial.steps()[-1] == 99  # listed, not read yet
    with pytest.raises(IndexReaderException, match="000000000099_worker_0.json"):
        trial.tensor("w").value(99)
    assert trial.tensor_names() == ["early", "w"]
    assert trial.steps()[-1] == 98  # read now: a step whose index cannot be read is not a step


def test_several_workers_no_end_of_training_wait_and_worker_values_on_demand() -> None:
    storage = without_consolidated(100, workers=4)
    remote = Remote(storage)
    slept: list[float] = []
    from sdk_ext.trials.options import Clock

    trial = create_trial(remote, options=lazy_options(clock=Clock(sleep=slept.append)))
    assert slept == []  # every worker wrote the last step listed: the trial is finished, no 1 s wait
    assert trial.workers() == ["worker_0", "worker_1", "worker_2", "worker_3"]
    assert trial.tensor("w").value(99, worker="worker_2").tolist() == [992.0] * 4
    assert sorted(remote.gets("index/")) == sorted(index_key(99, f"worker_{w}") for w in range(4))
    assert trial.tensor("w").workers(99) == ["worker_0", "worker_1", "worker_2", "worker_3"]


def test_a_live_trial_and_a_local_one_read_every_index_file_at_open(tmp_path: Any) -> None:
    live = InMemoryStorage()
    write_job(live, 100, finished=False)
    remote = Remote(live)
    create_trial(remote, options=lazy_options())
    assert len(remote.gets("index/")) == 100  # steps may still come: completeness needs every file
    local = InMemoryStorage()
    write_job(local, 100)
    local.delete(consolidated_key("worker_0"))
    trial = create_trial(local, options=lazy_options())  # read_into: local memory, reads cost nothing
    assert trial._index.pending == {}  # noqa: SLF001 - what the test is about
