"""The upload spool against a remote that fails at random: order kept, nothing lost, nothing half-visible."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import numpy as np
import pytest

from sdk_ext.exceptions import StorageAccessDenied, StorageError
from sdk_ext.hooks.writer import TrialWriter
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import InMemoryStorage
from sdk_ext.storage.base import Buffer
from sdk_ext.storage.spool import SpoolConfig, UploadSpool
from sdk_ext.trials import create_trial


class FlakyRemote(InMemoryStorage):
    """Fails a share of writes with a transient StorageError; records the order of successful ones."""

    def __init__(self, *, failure_rate: float, seed: int, delay: float = 0.0) -> None:
        super().__init__()
        self.delay = delay
        self.failure_rate = failure_rate
        self.rng = random.Random(seed)
        self.order: list[str] = []
        self.failures = 0
        self.denied = threading.Event()

    def write(self, key: str, data: Buffer) -> None:  # type: ignore[override]
        if self.denied.is_set():
            raise StorageAccessDenied(f"writing {key}: access denied")
        if self.delay:
            threading.Event().wait(self.delay)  # a slow store
        if self.rng.random() < self.failure_rate:
            self.failures += 1
            raise StorageError(f"writing {key}: network failure")
        super().write(key, data)
        self.order.append(key)


def config(tmp_path: Path, **kw: object) -> SpoolConfig:
    return SpoolConfig(directory=str(tmp_path / "spool"), base_delay=0.0, max_delay=0.001, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(5))
def test_files_reach_the_remote_in_commit_order_despite_failures(tmp_path: Path, seed: int) -> None:
    remote = FlakyRemote(failure_rate=0.5, seed=seed)
    spool = UploadSpool(remote, config=config(tmp_path), name="worker_0")
    writer = TrialWriter(remote, background=False, spool=spool, clock=lambda: 0.0)
    for step in range(40):
        writer.open_step(step, ModeKeys.TRAIN, step)
        writer.write_tensor("w", np.full(3, step, dtype=np.int64))
        writer.close_step()
        if step == 0:
            writer.write_collections(_collections())
    writer.write_end_marker()
    writer.close()

    assert remote.failures > 10  # the remote really failed, often
    order = remote.order
    assert order[-1] == "training_job_end.ts"
    index_keys = [k for k in order if k.startswith("index/")]
    assert index_keys == sorted(index_keys) and len(index_keys) == 40  # key order: readers list with StartAfter
    for step in range(40):
        event = f"events/{step:012d}/{step:012d}_worker_0.tfevents"
        assert order.index(event) < order.index(f"index/000000000/{step:012d}_worker_0.json")
    trial = create_trial(remote)
    assert trial.steps() == list(range(40))
    assert [int(trial.tensor("w").value(s)[0]) for s in range(40)] == list(range(40))
    assert not list((tmp_path / "spool").rglob("*.*"))  # local copies removed once uploaded


def test_a_store_slower_than_training_slows_it_down_and_loses_nothing(tmp_path: Path) -> None:
    remote = FlakyRemote(failure_rate=0.0, seed=1, delay=0.01)
    spool = UploadSpool(remote, config=config(tmp_path, max_bytes=300), name="worker_0")
    writer = TrialWriter(remote, background=False, spool=spool, clock=lambda: 0.0)
    for step in range(30):
        writer.open_step(step, ModeKeys.TRAIN, step)
        writer.write_tensor("w", np.full(3, step, dtype=np.int64))
        writer.close_step()
    peak = spool.peak_bytes
    writer.close()  # adds the consolidated index: metadata, which the spool never refuses for space
    assert spool.dropped_steps == [] and writer.dropped_steps == 0
    assert peak <= 300 + 200  # bounded: one step over the limit at most (taken when the spool is empty)
    assert len([k for k in remote.order if k.startswith("index/")]) == 30


def test_a_rewritten_collections_file_uploads_its_newest_content(tmp_path: Path) -> None:
    remote = FlakyRemote(failure_rate=0.3, seed=7)
    spool = UploadSpool(remote, config=config(tmp_path))
    for version in range(20):
        spool.write("collections/000000000/worker_0_collections.json", b"v%d" % version)
    assert spool.close()
    assert remote.read("collections/000000000/worker_0_collections.json") == b"v19"


def test_a_permanent_failure_stops_uploading_and_names_the_spool(tmp_path: Path) -> None:
    remote = FlakyRemote(failure_rate=0.0, seed=0)
    remote.denied.set()
    spool = UploadSpool(remote, config=config(tmp_path))
    spool.write("index/000000000/000000000000_worker_0.json", b"{}")
    assert not spool.drain(timeout=5)  # returns (False) as soon as uploading stopped, not after 5 s
    with pytest.raises(StorageAccessDenied) as err:
        spool.write("index/000000000/000000000001_worker_0.json", b"{}")
    assert "saving stopped" in str(err.value) and spool.directory in str(err.value)
    with pytest.raises(StorageAccessDenied):
        spool.close()
    assert (Path(spool.directory) / "index/000000000/000000000000_worker_0.json").exists()  # kept, not lost


def test_env_configuration_and_defaults(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    env = {"SDK_EXT_SPOOL_DIR": "/data/spool", "SDK_EXT_SPOOL_MAX_BYTES": "1000", "SDK_EXT_SPOOL_DRAIN_TIMEOUT": "x"}
    cfg = SpoolConfig.from_env(env)
    assert (cfg.directory, cfg.max_bytes, cfg.drain_timeout) == ("/data/spool", 1000, SpoolConfig().drain_timeout)
    assert "SDK_EXT_SPOOL_DRAIN_TIMEOUT='x' is not a number" in caplog.text


def _collections():  # type: ignore[no-untyped-def]
    from sdk_ext.hooks.collections import CollectionManager

    return CollectionManager.with_builtins({}).to_file(num_workers=1, default_save=None, default_reduction=None)  # type: ignore[arg-type]
