"""``value()`` walking one tensor step after step is served from read-ahead windows, with the results
and errors of reading strictly one value per call (sdk_ext.trials.read.reader)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from sdk_ext.exceptions import CorruptRecordError, SdkExtError
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import InMemoryStorage
from sdk_ext.trials import Trial, TrialOptions, create_trial
from sdk_ext.trials.read import step_plan as plan_module
from sdk_ext.trials.read.reader import AHEAD_FIRST, BULK_MIN
from tests.trial_builder import TrialBuilder
from tests.unit.trials.test_bulk_values import one_at_a_time, same

TRAIN = ModeKeys.TRAIN
#: more steps than the first two windows hold, so a walk crosses several windows
STEPS = list(range(0, 2 * (AHEAD_FIRST + 4 * AHEAD_FIRST), 2))


def write_trial(storage: InMemoryStorage, steps: list[int] = STEPS, *, end: bool = True) -> TrialBuilder:
    builder = TrialBuilder(storage)
    builder.collections()
    for step in steps:
        add_step(builder, step)
    if end:
        builder.end()
    return builder


def add_step(builder: TrialBuilder, step: int) -> None:
    tensors = {
        "w": np.arange(6, dtype=np.float32).reshape(2, 3) * step,
        "loss": np.array(1.0 / (step + 1)),
        "ids": np.arange(step % 5 + 1, dtype=np.int64),  # a shape that changes along the steps
        "mask": np.array([step % 2 == 0, True]),
    }
    builder.step(step, mode=TRAIN, mode_step=step, tensors=tensors)


def walk(trial: Trial, name: str) -> dict[int, np.ndarray]:
    tensor = trial.tensor(name)
    return {step: tensor.value(step) for step in tensor.steps()}


@pytest.mark.parametrize("name", ["w", "loss", "ids", "mask"])
def test_a_walk_over_one_tensor_gives_what_one_value_per_call_gives(name: str) -> None:
    storage = InMemoryStorage()
    write_trial(storage)
    fast, slow = create_trial(storage, timeout=0), one_at_a_time(storage)
    got, expected = walk(fast, name), walk(slow, name)
    assert list(got) == STEPS == list(expected)
    assert all(same(got[s], expected[s]) for s in STEPS)
    assert fast._reads.reader.batched > len(STEPS) // 2  # most values came from windows
    assert slow._reads.reader.batched == 0


def test_walks_over_every_tensor_in_turn_are_all_served_ahead() -> None:
    storage = InMemoryStorage()
    write_trial(storage)
    fast, slow = create_trial(storage, timeout=0), one_at_a_time(storage)
    for name in ("w", "loss", "mask"):
        got, expected = walk(fast, name), walk(slow, name)
        assert all(same(got[s], expected[s]) for s in STEPS)
    # the first two values of each walk are read alone; later walks start with a window of the whole rest
    assert fast._reads.reader.batched >= 3 * (len(STEPS) - 2) - 2 * 3


def test_values_from_a_window_are_writable_and_each_handed_out_once() -> None:
    storage = InMemoryStorage()
    write_trial(storage)
    trial = create_trial(storage, timeout=0)
    tensor = trial.tensor("w")
    values = walk(trial, "w")
    for value in values.values():
        assert value.flags.writeable
        value += 1
    assert all(v.tolist() == (np.arange(6).reshape(2, 3) * s + 1).tolist() for s, v in values.items())
    again = tensor.value(STEPS[10])  # read again: a fresh array, not one handed out (and changed) before
    assert again.tolist() == (np.arange(6).reshape(2, 3) * STEPS[10]).tolist()
    assert again is not values[STEPS[10]]


def test_a_step_major_loop_reads_one_value_per_call() -> None:
    storage = InMemoryStorage()
    write_trial(storage)
    trial = create_trial(storage, timeout=0)
    for step in trial.steps():
        for name in ("w", "loss"):
            trial.tensor(name).value(step)
    assert trial._reads.reader.batched == 0
    assert trial._reads.ahead == {}


def test_read_ahead_bytes_bounds_the_window_and_zero_turns_it_off() -> None:
    storage = InMemoryStorage()
    write_trial(storage)
    trial = create_trial(storage, options=TrialOptions(read_ahead_bytes=3000), timeout=0)
    tensor = trial.tensor("w")
    record = tensor._step_file(STEPS[1], ModeKeys.GLOBAL, None).raw["w"][1]
    most = 0
    for step in tensor.steps():
        tensor.value(step)
        most = max(most, len(trial._reads.ahead) + 1)
    assert 1 < most <= max(3000 // record, 16)
    off = create_trial(storage, options=TrialOptions(read_ahead_bytes=0), timeout=0)
    walk(off, "w")
    assert off._reads.reader.batched == 0


def corrupt_record(storage: InMemoryStorage, step: int, name: str) -> tuple[str, int]:
    """Flip a bit in the length of ``name``'s record at ``step`` (its checksum no longer matches);
    returns (event file key, record offset)."""
    trial = one_at_a_time(storage)
    sf = trial.tensor(name)._step_file(step, ModeKeys.GLOBAL, None)
    start = sf.raw[name][0]
    data = bytearray(storage.read(sf.event_key))
    data[start + 2] ^= 0x40
    storage.write(sf.event_key, bytes(data))
    return sf.event_key, start


def test_a_damaged_record_inside_a_window_fails_its_own_step_only_with_the_same_error() -> None:
    storage = InMemoryStorage()
    write_trial(storage)
    bad = STEPS[40]
    key, offset = corrupt_record(storage, bad, "w")
    fast, slow = create_trial(storage, timeout=0), one_at_a_time(storage)
    for trial in (fast, slow):
        tensor = trial.tensor("w")
        for step in tensor.steps():
            if step == bad:
                with pytest.raises(CorruptRecordError) as err:
                    tensor.value(step)
                assert (err.value.name, err.value.offset) == (key, offset)
            else:
                assert tensor.value(step).tolist() == (np.arange(6).reshape(2, 3) * step).tolist()


def test_an_event_file_missing_inside_a_window_fails_its_own_step_only_without_waiting() -> None:
    storage = InMemoryStorage()
    write_trial(storage)
    gone = STEPS[30]
    storage.delete(f"events/{gone:012d}/{gone:012d}_worker_0.tfevents")
    options = TrialOptions(event_file_timeout=0, poll_interval=0.01)
    outcomes = []
    for trial in (create_trial(storage, options=options, timeout=0), one_at_a_time(storage, options)):
        tensor = trial.tensor("loss")
        seen = {}
        for step in tensor.steps():
            try:
                seen[step] = float(tensor.value(step))
            except SdkExtError as err:
                seen[step] = type(err).__name__
        outcomes.append(seen)
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][gone] == "MissingEventFileError"  # damage (training has ended), never "not available"
    assert outcomes[0][STEPS[31]] == 1.0 / (STEPS[31] + 1)


def test_a_walk_while_the_job_writes_sees_the_new_steps() -> None:
    storage = InMemoryStorage()
    first = STEPS[: len(STEPS) // 2]
    builder = write_trial(storage, first, end=False)
    trial = create_trial(storage, options=TrialOptions(poll_interval=0.01), timeout=0)
    tensor = trial.tensor("loss")
    got = {s: float(tensor.value(s)) for s in first}
    for step in STEPS[len(first) :]:
        add_step(builder, step)
    builder.end()
    got.update({s: float(tensor.value(s)) for s in STEPS[len(first) :]})
    assert got == {s: 1.0 / (s + 1) for s in STEPS}
    assert tensor.steps() == STEPS


def test_a_refresh_that_brings_an_earlier_worker_drops_the_window() -> None:
    # worker=None reads the first worker (in name order) that saved the tensor at the step: once worker_0's
    # files arrive, the steps read ahead from worker_1 must come from worker_0, as one value per call does
    def scenario(read_ahead_bytes: int) -> tuple[list[float], int]:
        storage = InMemoryStorage()
        builder = TrialBuilder(storage)
        builder.collections(["worker_0", "worker_1"])
        for step in STEPS:
            builder.step(step, "worker_1", mode=TRAIN, mode_step=step, tensors={"w": np.full(2, step + 0.5)})
        options = TrialOptions(poll_interval=0.01, training_end_delay=0, read_ahead_bytes=read_ahead_bytes)
        trial = create_trial(storage, options=options, timeout=0)
        tensor = trial.tensor("w")
        steps = tensor.steps(show_incomplete_steps=True)
        got = [float(tensor.value(s)[0]) for s in steps[:4]]
        waiting = len(trial._reads.ahead)
        for step in STEPS:
            builder.step(step, "worker_0", mode=TRAIN, mode_step=step, tensors={"w": np.full(2, float(step))})
        builder.end()
        trial.steps()  # a refresh: worker_0's step files arrive
        return got + [float(tensor.value(s)[0]) for s in steps[4:]], waiting

    (fast, waiting), (slow, _) = scenario(1 << 20), scenario(0)
    assert waiting > 10  # a window from worker_1 was waiting when worker_0's files came
    assert fast == slow == [s + 0.5 for s in STEPS[:4]] + [float(s) for s in STEPS[4:]]


def test_sampling_every_nth_step_reads_only_the_files_of_those_steps() -> None:
    class Counting(InMemoryStorage):
        read_into = None  # as on S3: files come through read/read_many, counted here

        def __init__(self) -> None:
            super().__init__()
            self.files: list[str] = []

        def read(self, key, *, start=0, length=None):  # type: ignore[no-untyped-def]
            if key.startswith("events/"):
                self.files.append(key)
            return super().read(key, start=start, length=length)

        def read_many(self, requests):  # type: ignore[no-untyped-def]
            return [self.read(r.key, start=r.start, length=r.length) for r in requests]

    storage = Counting()
    write_trial(storage)
    trial = create_trial(storage, timeout=0)
    sampled = STEPS[::10]
    for name in ("w", "loss"):
        tensor = trial.tensor(name)
        assert [float(tensor.value(s).ravel()[-1]) for s in sampled] == [
            float((5 * s) if name == "w" else 1.0 / (s + 1)) for s in sampled
        ]
    assert trial._reads.reader.batched == 0
    assert sorted(set(storage.files)) == sorted(f"events/{s:012d}/{s:012d}_worker_0.tfevents" for s in sampled)


@pytest.mark.parametrize("mode", [ModeKeys.TRAIN, ModeKeys.EVAL, "TRAIN", ModeKeys.GLOBAL])
def test_a_walk_through_the_steps_of_one_mode_is_read_ahead_too(mode: ModeKeys | str) -> None:
    storage = InMemoryStorage()
    builder = TrialBuilder(storage)
    builder.collections()
    counts = {ModeKeys.TRAIN: 0, ModeKeys.EVAL: 0}
    for step in range(400):
        m = ModeKeys.EVAL if step % 5 == 4 else ModeKeys.TRAIN  # a validation step after every 4 training steps
        builder.step(step, mode=m, mode_step=counts[m], tensors={"loss": np.array(step * 0.25 + (m is ModeKeys.EVAL))})
        counts[m] += 1
    builder.end()
    fast, slow = create_trial(storage, timeout=0), one_at_a_time(storage)
    results = []
    for trial in (fast, slow):
        tensor = trial.tensor("loss")
        results.append([float(tensor.value(s, mode=mode)) for s in tensor.steps(mode=mode)])
    assert results[0] == results[1]
    assert len(results[0]) == {"TRAIN": 320, ModeKeys.TRAIN: 320, ModeKeys.EVAL: 80, ModeKeys.GLOBAL: 400}[mode]
    # all but the first two, one seed per window and a tail shorter than a batch
    assert fast._reads.reader.batched >= len(results[0]) - 2 - 3 - BULK_MIN
    assert slow._reads.reader.batched == 0


def test_a_walk_over_one_workers_values_is_read_ahead_and_gives_that_workers_values() -> None:
    storage = InMemoryStorage()
    builder = TrialBuilder(storage)
    builder.collections(["worker_0", "worker_1", "worker_2"])
    for step in range(300):
        for w in range(3):
            if w == 2 and step % 7 == 3:
                continue  # worker_2 skips some steps: its walks have holes
            builder.step(step, f"worker_{w}", tensors={"x": np.array([step * 10.0 + w])})
    builder.end()
    fast, slow = create_trial(storage, timeout=0), one_at_a_time(storage)
    for worker in ("worker_1", "worker_0", "worker_2"):
        results = []
        for trial in (fast, slow):
            tensor = trial.tensor("x")
            got = []
            for s in tensor.steps():
                try:
                    got.append(float(tensor.value(s, worker=worker)[0]))
                except SdkExtError as err:
                    got.append(type(err).__name__)
            results.append(got)
        assert results[0] == results[1]
        w = int(worker[-1])
        assert results[0][:3] == [w, 10.0 + w, 20.0 + w]
    assert fast._reads.reader.batched >= 2 * (300 - 2 - 3 - BULK_MIN)  # worker_0 and worker_1 walks
    assert slow._reads.reader.batched == 0


@pytest.mark.parametrize("block", [1, 5, 16])
def test_walks_across_plan_blocks_give_each_value_once_and_what_one_value_per_call_gives(
    monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    monkeypatch.setattr(plan_module, "BLOCK", block)  # windows then span many blocks of the walk's plan
    storage = InMemoryStorage()
    write_trial(storage)
    fast, slow = create_trial(storage, timeout=0), one_at_a_time(storage)
    for name in ("w", "ids", "loss", "mask"):  # "ids" changes shape along the steps
        tensor = fast.tensor(name)
        got = {}
        for step in tensor.steps():
            waiting = fast._reads.ahead
            got[step] = tensor.value(step)
            assert step not in fast._reads.ahead  # handed out once: gone from the window
            if step in waiting:
                assert same(got[step], waiting[step])
        expected = walk(slow, name)
        assert list(got) == STEPS
        assert all(same(got[s], expected[s]) for s in STEPS), name
    assert fast._reads.reader.batched >= 4 * (len(STEPS) - 2) - 4 * 3


def test_walks_starting_anywhere_work_out_the_blocks_they_reach_and_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plan_module, "BLOCK", 16)
    storage = InMemoryStorage()
    write_trial(storage)
    fast, slow = create_trial(storage, timeout=0), one_at_a_time(storage)
    for part in (STEPS[100:], STEPS[37:90], STEPS):  # later blocks first, then earlier ones, then all
        for name in ("w", "loss"):
            tensors = fast.tensor(name), slow.tensor(name)
            got = [tensors[0].value(s) for s in part]
            assert all(same(g, tensors[1].value(s)) for g, s in zip(got, part)), (name, part[0])
    assert fast._reads.reader.batched > len(STEPS)


def test_the_walks_of_every_tensor_and_values_share_one_plan_worked_out_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plan_module, "BLOCK", 16)
    built: list[int] = []
    build = plan_module.StepPlan._build

    def counting(self: plan_module.StepPlan, b: int) -> Any:
        built.append(b)
        return build(self, b)

    monkeypatch.setattr(plan_module.StepPlan, "_build", counting)
    storage = InMemoryStorage()
    write_trial(storage)
    trial = create_trial(storage, timeout=0)
    for name in ("w", "loss", "ids", "mask"):
        walk(trial, name)
        assert len(trial.tensor(name).values()) == len(STEPS)
    assert sorted(built) == list(range(-(-len(STEPS) // 16)))  # each block once, for every walk and values()


def test_walks_through_mode_and_worker_steps_across_plan_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plan_module, "BLOCK", 7)
    storage = InMemoryStorage()
    builder = TrialBuilder(storage)
    builder.collections(["worker_0", "worker_1"])
    counts = {ModeKeys.TRAIN: 0, ModeKeys.EVAL: 0}
    for step in range(200):
        m = ModeKeys.EVAL if step % 5 == 4 else ModeKeys.TRAIN
        for w in range(2):
            if w == 1 and step == 150:
                continue  # worker_1 skips a step: only the window over it is read one value per call
            builder.step(step, f"worker_{w}", mode=m, mode_step=counts[m], tensors={"x": np.array([step * 10.0 + w])})
        counts[m] += 1
    builder.end()
    fast, slow = create_trial(storage, timeout=0), one_at_a_time(storage)
    for mode in (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL):
        for worker in (None, "worker_1", "worker_0"):
            results = []
            for trial in (fast, slow):
                tensor = trial.tensor("x")
                got: list[float | str] = []
                for s in tensor.steps(mode=mode):
                    try:
                        got.append(float(tensor.value(s, mode=mode, worker=worker)[0]))
                    except SdkExtError as err:
                        got.append(type(err).__name__)
                results.append(got)
            assert results[0] == results[1], (mode, worker)
    assert fast._reads.reader.batched > 3 * 200
    assert slow._reads.reader.batched == 0
