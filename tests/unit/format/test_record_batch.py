"""The batch decoder matches exactly the records the one-at-a-time decoder reads fast, to the same values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sdk_ext.exceptions import CorruptRecordError
from sdk_ext.format.events import encode_tensor_event, encode_tensor_record_parts
from sdk_ext.format.record_batch import gather_contents, match_layout
from sdk_ext.format.record_values import Layout, RecordDecoder, decode_record_value
from sdk_ext.format.records import encode_record
from sdk_ext.modes import ModeKeys

NUMERIC = [
    "float16", "float32", "float64", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64", "bool", "complex64", "complex128",
]
#: steps where the step's varint gets one byte longer, and their neighbours
VARINT_EDGES = [0, 1, 127, 128, 129, 16383, 16384, 16385, 2**21 - 1, 2**21, 2**35]


def record(tag: str, value: np.ndarray, *, step: int, mode_step: int, wall_time: float = 1.7e9,
           real_crc: bool = False) -> bytes:
    if real_crc:  # TensorBoard's framing: the footer is the payload's CRC, not smdebug's constant
        payload = encode_tensor_event(tag, value, step=step, wall_time=wall_time, mode=ModeKeys.TRAIN,
                                      mode_step=mode_step)
        return encode_record(payload, checksum=True)
    parts, length = encode_tensor_record_parts(tag, value, step=step, wall_time=wall_time, mode=ModeKeys.TRAIN,
                                               mode_step=mode_step)
    data = b"".join(bytes(p) for p in parts)
    assert len(data) == length
    return data


def layout_of(data: bytes, tag: str) -> Layout | None:
    decoder = RecordDecoder()
    decoder.decode(data, 0, len(data), key=tag)
    return decoder.layout(tag)


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def batch(records: list[bytes], *, tail: bytes = b"\0" * 200) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The records back to back (then ``tail``), with their starts and lengths."""
    lengths = np.array([len(r) for r in records], np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    return np.frombuffer(b"".join(records) + tail, np.uint8), starts, lengths


def check(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, layout: Layout) -> np.ndarray:
    """Run the batch decoder; every record it matched must decode alone to the same value. Returns matched."""
    matched, content = match_layout(buf, starts, lengths, layout)
    values = gather_contents(buf, content, layout)
    data = buf.tobytes()
    for k, at in enumerate(matched.tolist()):
        alone = decode_record_value(data, int(starts[at]), int(lengths[at]), name="f")
        assert same(values[k, ...], alone), at
    return matched


arrays = st.sampled_from(NUMERIC).flatmap(
    lambda dt: hnp.arrays(np.dtype(dt), hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4))
)


@settings(max_examples=150, deadline=None)
@given(
    first=arrays,
    other=arrays,
    tag=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40),
    steps=st.lists(st.one_of(st.sampled_from(VARINT_EDGES), st.integers(0, 2**40)), min_size=1, max_size=12),
    mode_steps=st.lists(st.integers(0, 10**12), min_size=12, max_size=12),
    wall_times=st.lists(st.sampled_from([0.0, 1.5, 1.7e9]), min_size=12, max_size=12),
    real_crc=st.lists(st.booleans(), min_size=12, max_size=12),
    other_at=st.sets(st.integers(0, 11)),
)
def test_matches_exactly_the_records_with_the_layout_and_smdebug_footer(
    first: np.ndarray, other: np.ndarray, tag: str, steps: list[int], mode_steps: list[int],
    wall_times: list[float], real_crc: list[bool], other_at: set[int],
) -> None:
    records, expected = [], []
    for k, step in enumerate(steps):
        value = other if k in other_at else first
        records.append(record(tag, value, step=step, mode_step=mode_steps[k], wall_time=wall_times[k],
                              real_crc=real_crc[k]))
    seed = record(tag, first, step=5, mode_step=5)
    layout = layout_of(seed, tag)
    if layout is None:  # e.g. a tag of 128 bytes or more: never batched
        return
    for k, data in enumerate(records):
        expected.append(not real_crc[k] and layout_of(data, tag) == layout)
    buf, starts, lengths = batch(records)
    matched = check(buf, starts, lengths, layout)
    assert matched.tolist() == [k for k, e in enumerate(expected) if e]


@settings(max_examples=200, deadline=None)
@given(
    value=arrays,
    steps=st.lists(st.sampled_from(VARINT_EDGES), min_size=3, max_size=6),
    victim=st.integers(0, 5),
    where=st.floats(0, 1, exclude_max=True),
    flip=st.integers(1, 255),
)
def test_a_damaged_byte_is_never_matched_unless_the_record_still_decodes_to_the_same_value(
    value: np.ndarray, steps: list[int], victim: int, where: float, flip: int
) -> None:
    records = [bytearray(record("w", value, step=s, mode_step=s)) for s in steps]
    damaged = records[victim % len(records)]
    damaged[int(where * len(damaged))] ^= flip
    layout = layout_of(bytes(records[(victim + 1) % len(records)]), "w")
    assert layout is not None
    buf, starts, lengths = batch([bytes(r) for r in records])
    matched = check(buf, starts, lengths, layout)  # raises inside if a matched record fails alone
    at = victim % len(records)
    try:
        decode_record_value(bytes(damaged), 0, len(damaged), name="f")
    except CorruptRecordError:
        assert at not in matched.tolist()
    assert set(range(len(records))) - {at} <= set(matched.tolist())


def test_values_are_writable_and_independent_of_each_other_and_of_the_buffer() -> None:
    records = [record("w", np.full((2, 3), s, np.float32), step=s, mode_step=s) for s in range(5)]
    buf, starts, lengths = batch(records)
    before = buf.tobytes()
    layout = layout_of(records[0], "w")
    assert layout is not None
    matched, content = match_layout(buf, starts, lengths, layout)
    assert matched.tolist() == [0, 1, 2, 3, 4]
    values = list(gather_contents(buf, content, layout))
    values[1][...] = -1
    assert [float(v[0, 0]) for v in values] == [0, -1, 2, 3, 4]
    assert buf.tobytes() == before


@pytest.mark.parametrize("value", [np.float32(1.5) * np.ones(()), np.arange(3, dtype=np.int64)])
def test_a_record_at_the_very_end_of_the_buffer_is_left_to_the_one_at_a_time_decoder(value: Any) -> None:
    records = [record("loss", value, step=s, mode_step=s) for s in range(3)]
    layout = layout_of(records[0], "loss")
    assert layout is not None
    buf, starts, lengths = batch(records, tail=b"")
    matched = check(buf, starts, lengths, layout)
    assert matched.tolist() == [0, 1]  # the last is too close to the end for the walk's reads: never out of bounds


def test_no_records_and_short_lengths_are_not_matched() -> None:
    layout = layout_of(record("w", np.ones(2, np.float32), step=1, mode_step=1), "w")
    assert layout is not None
    buf = np.zeros(1000, np.uint8)
    empty = np.empty(0, np.int64)
    assert match_layout(buf, empty, empty, layout)[0].size == 0
    matched, _ = match_layout(buf, np.array([0, 10], np.int64), np.array([4, 15], np.int64), layout)
    assert matched.size == 0
