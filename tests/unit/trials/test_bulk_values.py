"""``Tensor.values()`` reads many values per call and gives exactly what reading step by step gives."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdk_ext.exceptions import CorruptRecordError, SdkExtError
from sdk_ext.format.records import masked_crc32c
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import InMemoryStorage, Storage
from sdk_ext.trials import Trial, TrialOptions, create_trial
from sdk_ext.trials.read.reader import BULK_MIN
from tests.trial_builder import TrialBuilder

TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL
DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
          "uint64", "bool", "complex64", "complex128"]
#: steps around the lengths where the step's varint (127/128, 16383/16384) or the mode step's digits grow
EDGES = [0, 1, 9, 10, 99, 100, 126, 127, 128, 129, 999, 1000, 16382, 16383, 16384, 16385]


def value_of(dtype: str, shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 100).astype(dtype)


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def one_at_a_time(storage: Storage, options: TrialOptions | None = None) -> Trial:
    """A trial that reads strictly one value per ``value()`` call (no read-ahead): the reference."""
    return create_trial(storage, options=(options or TrialOptions()).with_changes(read_ahead_bytes=0), timeout=0)


def outcome(call: Any) -> tuple[str, Any]:
    try:
        return "ok", call()
    except SdkExtError as err:
        return "error", (type(err), str(err))


def assert_values_match_step_by_step(fast: Trial, slow: Trial, name: str, mode: ModeKeys, worker: str | None) -> int:
    """values() on ``fast`` equals value() per step on ``slow`` (or both raise the same); returns values compared."""
    got = outcome(lambda: fast.tensor(name).values(mode=mode, worker=worker))
    tensor = slow.tensor(name)
    expected = outcome(lambda: {s: tensor.value(s, mode=mode, worker=worker) for s in tensor.steps(mode=mode)})
    assert got[0] == expected[0], (name, mode, worker, got, expected)
    if got[0] == "error":
        assert got[1] == expected[1]
        return 0
    assert list(got[1]) == list(expected[1])
    for step, value in got[1].items():
        assert same(value, expected[1][step]), (name, mode, worker, step)
        assert value.flags.writeable
    return len(got[1])


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_values_are_bit_identical_to_reading_step_by_step(data: st.DataObject) -> None:
    workers = [f"worker_{i}" for i in range(data.draw(st.integers(1, 3), label="workers"))]
    steps = sorted(data.draw(st.sets(st.one_of(st.sampled_from(EDGES), st.integers(0, 20000)),
                                     min_size=BULK_MIN, max_size=BULK_MIN + 14), label="steps"))
    tensors = {}
    for k in range(data.draw(st.integers(1, 3), label="tensors")):
        dtype = data.draw(st.sampled_from(DTYPES))
        shapes = data.draw(st.lists(st.lists(st.integers(1, 4), max_size=3).map(tuple), min_size=1, max_size=3))
        tensors[f"layer_{k}/weight"] = (dtype, shapes)
    absent = data.draw(st.sets(st.tuples(st.integers(0, len(steps) - 1), st.sampled_from(workers),
                                         st.sampled_from(sorted(tensors))), max_size=6), label="absent")
    storage = InMemoryStorage()
    builder = TrialBuilder(storage)
    builder.collections(workers)
    mode_steps = {TRAIN: 0, EVAL: 0}
    for k, step in enumerate(steps):
        mode = EVAL if k % 4 == 3 else TRAIN
        for w, worker in enumerate(workers):
            saved = {}
            for name, (dtype, shapes) in tensors.items():
                if (k, worker, name) not in absent:
                    shape = shapes[k * len(shapes) // len(steps)]  # the shape changes along the steps
                    saved[name] = value_of(dtype, shape, step * 100 + w * 10 + len(saved))
            builder.step(step, worker, mode=mode, mode_step=mode_steps[mode], tensors=saved)
        mode_steps[mode] += 1
    builder.end()
    options = TrialOptions(training_end_delay=0)
    fast, slow = create_trial(storage, options=options, timeout=0), one_at_a_time(storage, options)
    for name in tensors:
        for mode in (GLOBAL, TRAIN, EVAL):
            for worker in [None, *workers]:
                assert_values_match_step_by_step(fast, slow, name, mode, worker)
    if len(workers) == 1 and not absent:
        assert fast._reads.reader.batched > 0  # the batch path ran


def trial_of(storage: Storage, steps: list[int], tensors: dict[str, Any]) -> None:
    builder = TrialBuilder(storage)
    builder.collections()
    for step in steps:
        builder.step(step, mode=TRAIN, mode_step=step, tensors={n: f(step) for n, f in tensors.items()})
    builder.end()


def test_steps_across_varint_and_digit_boundaries_are_read_in_one_batch() -> None:
    storage = InMemoryStorage()
    steps = [*range(5, 15), *range(95, 105), *range(120, 136), *range(16378, 16390)]
    trial_of(storage, steps, {"w": lambda s: np.full((2, 3), s, np.float32), "loss": lambda s: np.full((), s, np.float64)})
    fast, slow = create_trial(storage, timeout=0), one_at_a_time(storage)
    for name in ("w", "loss"):
        assert assert_values_match_step_by_step(fast, slow, name, GLOBAL, None) == len(steps)
    assert fast._reads.reader.batched == 2 * (len(steps) - 1)  # all but the first of each tensor
    values = fast.tensor("loss").values()
    assert all(v.shape == () and v.item() == s for s, v in values.items())  # 0-d arrays, not numpy scalars


def test_values_are_writable_and_independent_of_each_other_and_of_later_reads() -> None:
    storage = InMemoryStorage()
    trial_of(storage, list(range(40)), {"w": lambda s: np.full(4, s, np.int32)})
    trial = create_trial(storage, timeout=0)
    values = trial.tensor("w").values()
    for step, value in values.items():
        value += 1000
        assert value.tolist() == [step + 1000] * 4
    assert all(v.tolist() == [s + 1000] * 4 for s, v in values.items())  # each changed once, by its own +=
    again = trial.tensor("w").values()
    assert all(v.tolist() == [s] * 4 for s, v in again.items())
    assert trial.tensor("w").value(7).tolist() == [7] * 4


def rewrite_with_real_crc_footers(storage: InMemoryStorage, key: str) -> None:
    """Replace smdebug's constant footers by the payload CRCs (TensorBoard's framing) in one event file."""
    data = bytearray(storage.read(key))
    at = 0
    while at < len(data):
        n = int.from_bytes(data[at : at + 8], "little")
        end = at + 12 + n
        data[end : end + 4] = masked_crc32c(bytes(data[at + 12 : end])).to_bytes(4, "little")
        at = end + 4
    storage.write(key, bytes(data))


def test_real_crc_footers_and_a_changed_shape_fall_back_record_by_record() -> None:
    storage = InMemoryStorage()
    trial_of(storage, list(range(30)), {"w": lambda s: np.full((3,) if s % 10 else (1, 3), s, np.float32)})
    for step in (4, 17):
        rewrite_with_real_crc_footers(storage, f"events/{step:012d}/{step:012d}_worker_0.tfevents")
    fast, slow = create_trial(storage, timeout=0), one_at_a_time(storage)
    assert assert_values_match_step_by_step(fast, slow, "w", GLOBAL, None) == 30
    assert fast._reads.reader.batched == 30 - 2 - 2  # all but the CRC footers and the first of each shape


@pytest.mark.parametrize("where", ["header", "footer"])
def test_a_corrupt_record_in_the_middle_raises_naming_file_and_offset(where: str) -> None:
    storage = InMemoryStorage()
    trial_of(storage, list(range(40)), {"a": lambda s: np.ones(5) * s, "b": lambda s: np.zeros(5) + s})
    builder = TrialBuilder(storage)
    key = "events/000000000020/000000000020_worker_0.tfevents"
    start = len(builder.encode_step(20, mode=TRAIN, mode_step=20, tensors={"a": np.ones(5)}).event)  # record "b"
    data = bytearray(storage.read(key))
    length = len(data) - start
    data[start + 2 if where == "header" else start + length - 1] ^= 0x40
    storage.write(key, bytes(data))
    trial = create_trial(storage, timeout=0)
    reason = "length checksum" if where == "header" else "payload checksum"
    with pytest.raises(CorruptRecordError, match=rf"^{key}: corrupt record at byte offset {start}: {reason}") as err:
        trial.tensor("b").values()
    assert (err.value.name, err.value.offset) == (key, start)
    assert len(trial.tensor("a").values()) == 40  # the other tensor's records are fine
    with pytest.raises(CorruptRecordError, match=str(err.value).replace("(", r"\(").replace(")", r"\)")):
        create_trial(storage, timeout=0).tensor("b").value(20)  # the same error as step by step


def test_when_files_cannot_be_read_whole_values_are_read_step_by_step() -> None:
    storage = InMemoryStorage()
    trial_of(storage, list(range(30)), {"w": lambda s: np.arange(10.0) + s, "v": lambda s: np.ones(3) * s})
    fast, slow = create_trial(storage, options=TrialOptions(whole_file_bytes=100), timeout=0), one_at_a_time(storage)
    assert assert_values_match_step_by_step(fast, slow, "w", GLOBAL, None) == 30
    assert fast._reads.reader.batched == 0


def test_a_trial_larger_than_the_file_cache_reads_just_the_records_of_the_tensor() -> None:
    storage = InMemoryStorage()
    trial_of(storage, list(range(30)), {"w": lambda s: np.arange(10.0) + s, "v": lambda s: np.ones(3) * s})
    fast = create_trial(storage, options=TrialOptions(file_cache_bytes=2000), timeout=0)
    slow = one_at_a_time(storage)
    assert assert_values_match_step_by_step(fast, slow, "w", GLOBAL, None) == 30
    assert assert_values_match_step_by_step(fast, slow, "v", GLOBAL, None) == 30
    reader = fast._reads.reader
    assert reader.batched == 2 * 29 and len(reader.cache) == 0  # ranges of records, no whole file kept


def test_a_trial_with_a_value_cache_reads_step_by_step_and_keeps_the_values() -> None:
    storage = InMemoryStorage()
    trial_of(storage, list(range(20)), {"w": lambda s: np.arange(3) + s})
    trial = create_trial(storage, timeout=0, cache=True)
    values = trial.tensor("w").values()
    assert trial._reads.reader.batched == 0
    assert trial.tensor("w").value(5) is values[5]  # smdebug's cache hands out the cached array


def test_strings_bfloat16_and_a_shape_changing_at_every_step_are_read_one_at_a_time_with_the_same_result() -> None:
    import ml_dtypes

    storage = InMemoryStorage()
    trial_of(storage, list(range(24)), {
        "names": lambda s: np.array([f"token{s}", "x" * (s % 3)]),
        "half": lambda s: (np.arange(4) * s).astype(ml_dtypes.bfloat16),
        "growing": lambda s: np.arange(s + 1, dtype=np.int16),  # a new layout every step: more than _MAX_ROUNDS
    })
    fast, slow = create_trial(storage, timeout=0), one_at_a_time(storage)
    for name in ("names", "half", "growing"):
        assert assert_values_match_step_by_step(fast, slow, name, GLOBAL, None) == 24
    assert fast._reads.reader.batched == 0
