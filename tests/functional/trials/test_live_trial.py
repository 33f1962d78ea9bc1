"""A trial read while its job still writes: refresh, completeness across workers, end of training.

The crash (d1) and uneven-workers (d2) scenarios of shared/fixtures/smdebug/README.md are built
here with the format code, on local disk, and every wait runs on a fake clock.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pytest

from sdk_ext.exceptions import InvalidWorker, NoMoreData, StepNotYetAvailable, StepUnavailable
from sdk_ext.format.paths import CLAIM_FILE
from sdk_ext.modes import ModeKeys, StepState
from sdk_ext.storage import LocalStorage, ReadRequest
from sdk_ext.trials import TrialOptions, create_trial
from tests.trial_builder import FakeClock, TrialBuilder

TRAIN = ModeKeys.TRAIN


class CountingStorage(LocalStorage):
    """LocalStorage that records which keys were read and how listings were asked for."""

    def __init__(self, root: object) -> None:
        super().__init__(root)  # type: ignore[arg-type]
        self.reads: list[str] = []
        self.listings: list[tuple[str, str]] = []

    def list(self, prefix: str, *, start_after: str = "") -> Iterator[str]:
        self.listings.append((prefix, start_after))
        return super().list(prefix, start_after=start_after)

    def read(self, key: str, *, start: int = 0, length: int | None = None) -> bytes:
        self.reads.append(key)
        return super().read(key, start=start, length=length)

    def read_many(self, requests: Sequence[ReadRequest]) -> list[bytes]:
        return [self.read(r.key, start=r.start, length=r.length) for r in requests]


def value(step: int, worker: str = "worker_0") -> np.ndarray:
    return np.full((2, 2), step + (0.5 if worker == "worker_1" else 0.0), dtype=np.float32)


def write(b: TrialBuilder, step: int, worker: str = "worker_0") -> None:
    b.step(step, worker, mode=TRAIN, mode_step=step, tensors={"w": value(step, worker)})


def open_trial(storage: LocalStorage, clock: FakeClock, **options: float) -> object:
    return create_trial(storage, options=TrialOptions(clock=clock, **options), timeout=0)


def test_crashed_job_without_end_marker(tmp_path):
    """d1: killed in step 5: claim.smd and .tmp files left, no training_job_end.ts."""
    storage, clock = LocalStorage(tmp_path), FakeClock()
    b = TrialBuilder(storage)
    b.collections()
    for step in range(5):
        write(b, step)
    (tmp_path / CLAIM_FILE).write_bytes(b"")
    half = b.encode_step(5, mode=TRAIN, tensors={"w": value(5)})
    for key, data in ((half.event_key, half.event[: len(half.event) // 2]), (half.index_key, b"")):
        (tmp_path / key).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / (key + ".tmp")).write_bytes(data)
    trial = open_trial(storage, clock)
    assert trial.steps() == [0, 1, 2, 3, 4] and not trial.loaded_all_steps
    assert trial.has_passed_step(5) is StepState.NOT_YET_AVAILABLE
    with pytest.raises(StepNotYetAvailable):
        trial.tensor("w").value(5)
    with pytest.raises(StepNotYetAvailable):
        trial.wait_for_steps([5], timeout=3)
    assert clock.slept == pytest.approx(3)
    assert np.array_equal(trial.tensor("w").value(4), value(4))
    b.end()  # the job is declared over: step 5 will never come
    assert trial.has_passed_step(5) is StepState.UNAVAILABLE and trial.loaded_all_steps
    with pytest.raises(StepUnavailable):
        trial.tensor("w").value(5)
    with pytest.raises(NoMoreData):
        trial.wait_for_steps([5])


def test_uneven_workers_complete_steps_and_refresh(tmp_path):
    """d2: worker_1 lags (0-3 while worker_0 wrote 0-5); then it catches up; then the job ends."""
    storage, clock = CountingStorage(tmp_path), FakeClock()
    b = TrialBuilder(storage)
    b.collections(["worker_0", "worker_1"])
    for step in range(6):
        write(b, step)
    for step in range(4):
        write(b, step, "worker_1")
    trial = open_trial(storage, clock)
    w = trial.tensor("w")
    assert trial.steps() == [0, 1, 2, 3] and trial.steps(TRAIN) == [0, 1, 2, 3]
    assert trial.steps(show_incomplete_steps=True) == [0, 1, 2, 3, 4, 5]
    assert w.steps() == [0, 1, 2, 3] and w.steps(TRAIN, show_incomplete_steps=True) == [0, 1, 2, 3, 4, 5]
    assert trial.last_complete_step == 3
    assert trial.has_passed_step(3) is StepState.AVAILABLE
    assert trial.has_passed_step(4) is StepState.NOT_YET_AVAILABLE
    assert np.array_equal(w.value(5), value(5))  # an incomplete step still serves what exists
    assert w.workers(5) == ["worker_0"] and w.workers(2) == ["worker_0", "worker_1"]
    assert np.array_equal(w.value(2, worker="worker_1"), value(2, "worker_1"))
    with pytest.raises(InvalidWorker):
        w.value(5, worker="worker_1")
    # worker_1 catches up on step 4 while a rule waits for it
    clock.on_sleep(lambda: write(b, 4, "worker_1"))
    trial.wait_for_steps([4])
    assert clock.sleeps == [1.0]
    assert trial.steps() == [0, 1, 2, 3, 4] and w.steps() == [0, 1, 2, 3, 4]
    # refresh is incremental: nothing at or before the last complete step is listed or read again
    reads = len(storage.reads)
    write(b, 5, "worker_1")
    assert trial.steps() == [0, 1, 2, 3, 4, 5]
    index_reads = [k for k in storage.reads[reads:] if k.startswith("index/")]
    assert index_reads == ["index/000000000/000000000005_worker_1.json"]
    assert storage.listings[-1] == ("index/", "index/000000000/000000000004_worker_1.json")
    b.end()
    assert trial.steps() == [0, 1, 2, 3, 4, 5] and trial.loaded_all_steps
    listings = len(storage.listings)
    trial.steps(), trial.tensor_names(), w.steps()
    assert len(storage.listings) == listings  # an ended trial never lists again
    assert clock.sleeps == [1.0]  # wait_for_steps' poll; no end-of-training delay: both workers wrote step 5


def test_end_marker_with_several_workers_waits_once_for_the_others_last_steps(tmp_path):
    storage, clock = LocalStorage(tmp_path), FakeClock()
    b = TrialBuilder(storage)
    b.collections(["worker_0", "worker_1"])
    for worker in ("worker_0", "worker_1"):
        write(b, 0, worker)
    write(b, 1)
    b.end()  # worker_0 finished and wrote the marker; worker_1 is still closing step 1
    clock.on_sleep(lambda: write(b, 1, "worker_1"))
    trial = open_trial(storage, clock, training_end_delay=2.0)
    assert clock.sleeps == [2.0]
    assert trial.loaded_all_steps and trial.steps() == [0, 1]
    assert trial.tensor("w").workers(1) == ["worker_0", "worker_1"]


def test_end_marker_with_a_worker_that_never_arrives_gives_up_after_the_delay(tmp_path):
    storage, clock = LocalStorage(tmp_path), FakeClock()
    b = TrialBuilder(storage)
    b.collections(["worker_0", "worker_1"])
    write(b, 0)
    b.end()
    trial = open_trial(storage, clock, training_end_delay=1.5)
    assert clock.sleeps == [1.5]
    assert trial.loaded_all_steps and trial.steps() == [0] and trial.has_passed_step(0) is StepState.AVAILABLE


def test_new_tensors_modes_and_steps_appear_on_refresh(tmp_path):
    storage, clock = LocalStorage(tmp_path), FakeClock()
    b = TrialBuilder(storage)
    b.collections()
    write(b, 0)
    trial = open_trial(storage, clock)
    assert trial.tensor_names() == ["w"] and trial.modes() == [TRAIN]
    b.step(1, mode=ModeKeys.EVAL, mode_step=0, tensors={"acc": np.array([0.9])})
    assert trial.has_tensor("acc")
    assert trial.tensor_names(mode=ModeKeys.EVAL) == ["acc"]
    assert trial.modes() == [TRAIN, ModeKeys.EVAL]
    assert trial.tensor("acc").value(0, mode=ModeKeys.EVAL).tolist() == [0.9]
    assert trial.global_step(ModeKeys.EVAL, 0) == 1


def test_steps_waiting_beyond_the_window_are_given_up(tmp_path):
    storage, clock = LocalStorage(tmp_path), FakeClock()
    b = TrialBuilder(storage)
    b.collections(["worker_0", "worker_1"])
    for step in range(7):
        write(b, step)  # worker_1 never writes anything
    trial = open_trial(storage, clock, incomplete_step_window=4)
    # 7 incomplete steps > window 4: the oldest half of the window (2 steps) is given up until 4 or fewer wait
    assert trial.steps() == [0, 1, 2, 3]
    assert trial.steps(show_incomplete_steps=True) == list(range(7))


def test_a_finished_trial_of_several_workers_opens_without_the_end_delay(tmp_path):
    storage, clock = LocalStorage(tmp_path), FakeClock()
    b = TrialBuilder(storage)
    b.collections(["worker_0", "worker_1"])
    for step in range(3):
        for worker in ("worker_0", "worker_1"):
            write(b, step, worker)
    b.end()
    trial = open_trial(storage, clock)
    assert clock.sleeps == []  # every worker wrote the last step: nobody is still closing
    assert trial.loaded_all_steps and trial.steps() == [0, 1, 2]


def test_create_trial_honours_smdebugs_end_delay_variable(tmp_path, monkeypatch):
    storage = LocalStorage(tmp_path)
    b = TrialBuilder(storage)
    b.collections(["worker_0", "worker_1"])
    write(b, 0)  # worker_1 never wrote step 0: the delay applies
    b.end()
    monkeypatch.setenv("SMDEBUG_TRAINING_END_DELAY_REFRESH", "0")
    trial = create_trial(storage, timeout=0)
    assert trial.loaded_all_steps and trial.options.training_end_delay == 0
    monkeypatch.setenv("SMDEBUG_TRAINING_END_DELAY_REFRESH", "0.25")
    assert create_trial(storage, timeout=0).options.training_end_delay == 0.25
    explicit = TrialOptions(training_end_delay=0.5, clock=FakeClock())  # explicit options win
    assert create_trial(storage, options=explicit, timeout=0).options.training_end_delay == 0.5
