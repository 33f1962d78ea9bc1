"""``value(step, worker=w)`` asked of every worker at a step, step after step (as a rule comparing workers
reads), is served from windows read ahead across workers, with the results and errors of reading
strictly one value per call (sdk_ext.trials.read.reader)."""

from __future__ import annotations

import numpy as np
import pytest

from sdk_ext.exceptions import CorruptRecordError, SdkExtError
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import InMemoryStorage
from sdk_ext.trials import Trial, TrialOptions, create_trial
from tests.trial_builder import TrialBuilder
from tests.unit.trials.test_bulk_values import one_at_a_time, same

TRAIN = ModeKeys.TRAIN
WORKERS = [f"worker_{w}" for w in range(5)]
STEPS = list(range(0, 300, 3))
NAMES = ("w", "loss", "ids", "mask")


def value_of(name: str, step: int, worker: int) -> np.ndarray:
    if name == "w":
        return np.arange(6, dtype=np.float32).reshape(2, 3) * step + worker
    if name == "loss":
        return np.array(1.0 / (step + 1) + worker)
    if name == "ids":  # a shape that changes along the steps and between workers
        return np.arange((step + worker) % 5 + 1, dtype=np.int64)
    return np.array([step % 2 == 0, worker % 2 == 0])


def write_trial(storage: InMemoryStorage, *, skip: frozenset[tuple[int, str, str]] = frozenset(),
                checksums: bool = False) -> None:
    builder = TrialBuilder(storage, checksums=checksums)
    builder.collections(WORKERS)
    for step in STEPS:
        for w, worker in enumerate(WORKERS):
            tensors = {n: value_of(n, step, w) for n in NAMES if (step, worker, n) not in skip}
            builder.step(step, worker, mode=TRAIN, mode_step=step, tensors=tensors)
    builder.end()


def every_worker_at_each_step(trial: Trial, names: tuple[str, ...] = NAMES, workers: list[str] = WORKERS,
                              mode: ModeKeys = ModeKeys.GLOBAL) -> dict[tuple[int, str, str], object]:
    """``{(step, name, worker): value, or the error's type and text}`` in a rule's order."""
    tensors = [trial.tensor(n) for n in names]
    seen: dict[tuple[int, str, str], object] = {}
    for step in trial.steps(mode=mode):
        for tensor in tensors:
            for worker in workers:
                try:
                    seen[(step, tensor.name, worker)] = tensor.value(step, mode=mode, worker=worker)
                except SdkExtError as err:
                    seen[(step, tensor.name, worker)] = (type(err).__name__, str(err))
    return seen


def assert_same(got: dict[tuple[int, str, str], object], expected: dict[tuple[int, str, str], object]) -> None:
    assert list(got) == list(expected)
    for key, value in expected.items():
        if isinstance(value, np.ndarray):
            assert isinstance(got[key], np.ndarray) and same(got[key], value), key  # type: ignore[arg-type]
        else:
            assert got[key] == value, key


@pytest.mark.parametrize("mode", [ModeKeys.GLOBAL, TRAIN])
def test_every_worker_at_each_step_gives_what_one_value_per_call_gives(mode: ModeKeys) -> None:
    storage = InMemoryStorage()
    write_trial(storage)
    fast, slow = create_trial(storage, timeout=0), one_at_a_time(storage)
    got, expected = every_worker_at_each_step(fast, mode=mode), every_worker_at_each_step(slow, mode=mode)
    assert_same(got, expected)
    assert len(got) == len(STEPS) * len(NAMES) * len(WORKERS)
    # all but a few values per tensor came out of batches (the walk's first steps are read alone)
    assert fast._reads.reader.batched > 0.8 * len(got)
    assert slow._reads.reader.batched == 0


def test_one_tensor_across_workers_then_the_next_and_a_subset_of_workers() -> None:
    storage = InMemoryStorage()
    write_trial(storage)
    fast, slow = create_trial(storage, timeout=0), one_at_a_time(storage)
    for names, workers in ((("w",), WORKERS), (("loss", "ids"), WORKERS[1:3]), (("mask",), WORKERS[::-1])):
        assert_same(every_worker_at_each_step(fast, names, workers), every_worker_at_each_step(slow, names, workers))
    assert fast._reads.reader.batched > 0


def test_values_read_ahead_are_writable_and_each_handed_out_once() -> None:
    storage = InMemoryStorage()
    write_trial(storage)
    trial = create_trial(storage, timeout=0)
    tensor = trial.tensor("w")
    first = {(s, w): tensor.value(s, worker=w) for s in STEPS[:40] for w in WORKERS}
    assert trial._reads.reader.batched > 0
    for value in first.values():
        assert value.flags.writeable
        value += 1000
    for (s, w), value in first.items():
        assert value.tolist() == (value_of("w", s, int(w[-1])) + 1000).tolist()
    again = tensor.value(STEPS[10], worker="worker_3")  # a fresh array, not one handed out (and changed) before
    assert again.tolist() == value_of("w", STEPS[10], 3).tolist()


def test_a_worker_that_did_not_save_the_tensor_at_a_step_fails_that_value_only_with_the_same_error() -> None:
    skip = frozenset({(STEPS[7], "worker_2", "loss"), (STEPS[50], "worker_0", "loss"), (STEPS[51], "worker_4", "w")})
    storage = InMemoryStorage()
    write_trial(storage, skip=skip)
    got = every_worker_at_each_step(create_trial(storage, timeout=0))
    expected = every_worker_at_each_step(one_at_a_time(storage))
    assert_same(got, expected)
    assert all(isinstance(got[(s, n, w)], tuple) and got[(s, n, w)][0] == "InvalidWorker"  # type: ignore[index]
               for s, w, n in skip)


@pytest.mark.parametrize("checksums", [False, True])
def test_a_damaged_record_fails_its_own_value_only_with_the_same_error(checksums: bool) -> None:
    storage = InMemoryStorage()
    write_trial(storage, checksums=checksums)
    bad_step, bad_worker = STEPS[33], "worker_3"
    sf = one_at_a_time(storage).tensor("w")._step_file(bad_step, ModeKeys.GLOBAL, bad_worker)
    start = sf.raw["w"][0]
    data = bytearray(storage.read(sf.event_key))
    data[start + 2] ^= 0x40  # the record's length: the record no longer reads as one
    storage.write(sf.event_key, bytes(data))
    got = every_worker_at_each_step(create_trial(storage, timeout=0))
    expected = every_worker_at_each_step(one_at_a_time(storage))
    assert_same(got, expected)
    error = got[(bad_step, "w", bad_worker)]
    assert isinstance(error, tuple) and error[0] == CorruptRecordError.__name__ and sf.event_key in error[1]
    assert isinstance(got[(bad_step, "w", "worker_2")], np.ndarray)
    assert isinstance(got[(STEPS[34], "w", bad_worker)], np.ndarray)


def test_read_ahead_bytes_bounds_the_windows_and_zero_turns_them_off() -> None:
    storage = InMemoryStorage()
    write_trial(storage)
    budget = 6000
    trial = create_trial(storage, options=TrialOptions(read_ahead_bytes=budget), timeout=0)
    tensors = [trial.tensor(n) for n in NAMES]
    reads = trial._reads
    most = 0
    for step in STEPS:
        for tensor in tensors:
            for worker in WORKERS:
                tensor.value(step, worker=worker)
                held = sum(len(walk.values) for walk in reads.across.values())
                most = max(most, held)
                # the windows' records, newest excepted (a step of every worker is the least a window holds)
                newest = list(reads.across.values())[-1] if reads.across else None
                assert reads._across_bytes - (newest.nbytes if newest else 0) <= budget
    assert 0 < most and reads.reader.batched > 0
    off = create_trial(storage, options=TrialOptions(read_ahead_bytes=0), timeout=0)
    every_worker_at_each_step(off)
    assert off._reads.reader.batched == 0 and not off._reads.across


def test_new_step_files_drop_the_windows() -> None:
    storage = InMemoryStorage()
    builder = TrialBuilder(storage)
    builder.collections(WORKERS[:2])
    first, later = STEPS[:40], STEPS[40:]
    for step in first:
        for w, worker in enumerate(WORKERS[:2]):
            builder.step(step, worker, tensors={"w": value_of("w", step, w)})
    trial = create_trial(storage, options=TrialOptions(poll_interval=0.01), timeout=0)
    tensor = trial.tensor("w")
    got = {(s, w): tensor.value(s, worker=w) for s in first[:10] for w in WORKERS[:2]}
    assert trial._reads.across  # a window waits
    for step in later:
        for w, worker in enumerate(WORKERS[:2]):
            builder.step(step, worker, tensors={"w": value_of("w", step, w)})
    builder.end()
    trial.steps()  # a refresh: new step files
    assert not trial._reads.across
    got.update({(s, w): tensor.value(s, worker=w) for s in STEPS[10:] for w in WORKERS[:2]})
    assert all(v.tolist() == value_of("w", s, int(w[-1])).tolist() for (s, w), v in got.items())


def test_one_worker_after_another_each_tensors_walk_starts_with_a_window_once_the_last_walk_ended() -> None:
    storage = InMemoryStorage()
    write_trial(storage)
    fast, slow = create_trial(storage, timeout=0), one_at_a_time(storage)
    got, expected = {}, {}
    names = ("w", "loss", "mask")  # one layout each (a changing shape adds values decoded alone)
    for trial, out in ((fast, got), (slow, expected)):
        for worker in WORKERS:
            for name in names:
                tensor = trial.tensor(name)
                for step in tensor.steps():
                    out[(worker, name, step)] = tensor.value(step, worker=worker)
    assert list(got) == list(expected) and all(same(got[k], v) for k, v in expected.items())
    # a walk that follows another through the same steps (another tensor's or worker's) starts with a window
    # at once: only the very first value, and a tensor's first window's first (to learn its layout), are alone
    assert fast._reads.reader.batched >= len(got) - 1 - len(names)
    # and with a shape that changes, the values still equal one-at-a-time reads
    for trial, out in ((fast, got), (slow, expected)):
        for worker in WORKERS[:2]:
            tensor = trial.tensor("ids")
            for step in tensor.steps():
                out[(worker, "ids", step)] = tensor.value(step, worker=worker)
    assert list(got) == list(expected) and all(same(got[k], v) for k, v in expected.items())
