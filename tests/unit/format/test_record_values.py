"""The fast record decoder gives exactly what the protobuf decoder gives, and checks records as strictly."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sdk_ext.exceptions import CorruptRecordError
from sdk_ext.format import event_pb2
from sdk_ext.format.events import decode_tensor_value, encode_tensor_event, encode_tensor_record_parts
from sdk_ext.format.record_values import RecordDecoder, decode_payload_value, decode_record_value
from sdk_ext.format.records import encode_record
from sdk_ext.modes import ModeKeys

NUMERIC = [
    "float16", "float32", "float64", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64", "bool", "complex64", "complex128",
]


def record(tag: str, value: np.ndarray, **kw: object) -> bytes:
    parts, length = encode_tensor_record_parts(
        tag, value, step=kw.get("step", 3), wall_time=kw.get("wall_time", 1.7e9),  # type: ignore[arg-type]
        mode=kw.get("mode", ModeKeys.TRAIN), mode_step=kw.get("mode_step", 3),  # type: ignore[arg-type]
    )
    data = b"".join(bytes(p) for p in parts)
    assert len(data) == length
    return data


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@settings(max_examples=300, deadline=None)
@given(
    arr=st.sampled_from(NUMERIC).flatmap(
        lambda dt: hnp.arrays(np.dtype(dt), hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5))
    ),
    tag=st.text(st.characters(blacklist_categories=("Cs",)), max_size=200),  # tags are UTF-8: no lone surrogates
    step=st.integers(0, 2**62),
    mode_step=st.integers(0, 2**40),
    wall_time=st.floats(allow_nan=False),
    mode=st.sampled_from(list(ModeKeys)),
)
def test_any_dtype_and_shape_decodes_bit_for_bit(arr, tag, step, mode_step, wall_time, mode):
    data = record(tag, arr, step=step, mode_step=mode_step, wall_time=wall_time, mode=mode)
    ours = decode_record_value(data, 0, len(data), name="f")
    assert same(ours, arr)
    assert same(ours, decode_tensor_value(data[12:-4]))
    decoder = RecordDecoder()
    reversed_arr = np.ascontiguousarray(arr.reshape(-1)[::-1]).reshape(arr.shape)  # same layout, other content
    other = record(tag, reversed_arr, step=step + 1, mode_step=mode_step + 7)
    for blob in (data, other, data):  # the second and third use the layout learned from the first
        assert same(decoder.decode(blob, 0, len(blob), key=tag), decode_tensor_value(blob[12:-4]))
    if ours.size:
        ours.reshape(-1)[0] = ours.reshape(-1)[-1]  # writable, owns its memory


@given(
    st.integers(1, 5).flatmap(
        lambda n: hnp.arrays(
            np.dtype(f"<U{n}"),
            hnp.array_shapes(min_dims=1, max_dims=2, max_side=4),
            # lone surrogates are not UTF-8 (no writer can store them); numpy drops trailing NULs
            elements=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=n),
        )
    )
)
def test_string_tensors_take_the_protobuf_path_with_the_same_result(arr):
    data = record("names", arr)
    assert decode_record_value(data, 0, len(data)).tolist() == arr.tolist()


def test_records_back_to_back_decode_at_their_offsets():
    values = [np.arange(6, dtype=np.int16).reshape(2, 3), np.float64(2.5) * np.ones(()), np.array([True, False])]
    blob = b"".join(record(f"t{i}", v) for i, v in enumerate(values))
    offset = 0
    for v in values:
        length = len(record("t0", v))
        assert same(decode_record_value(blob, offset, length, name="f"), v)
        offset += length


def test_payload_in_other_field_order_or_typed_values_falls_back_to_protobuf():
    event = event_pb2.Event()
    value = event.summary.value.add()
    value.tensor.dtype = 1
    value.tensor.tensor_shape.dim.add().size = 3
    value.tensor.float_val.extend([1.0, 2.0, 3.0])
    value.tag = "typed"
    event.step = 7
    payload = event.SerializeToString()
    got = decode_payload_value(payload, 0, len(payload))
    assert same(got, np.array([1, 2, 3], dtype=np.float32))


def test_corrupt_header_names_file_and_file_offset():
    data = bytearray(record("x", np.ones(4, np.float32)))
    data[3] ^= 0xFF
    with pytest.raises(CorruptRecordError, match=r"events/f\.tfevents: corrupt record at byte offset 1000: length checksum"):
        decode_record_value(bytes(data), 0, len(data), name="events/f.tfevents", base=1000)


def test_corrupt_footer_and_payload_are_detected():
    data = bytearray(record("x", np.ones(4, np.float32)))
    data[-1] ^= 0x01
    with pytest.raises(CorruptRecordError, match="payload checksum"):
        decode_record_value(bytes(data), 0, len(data))
    real = encode_record(encode_tensor_event("x", np.ones(4, np.float32), step=1, wall_time=0.0), checksum=True)
    assert same(decode_record_value(real, 0, len(real)), np.ones(4, np.float32))
    broken = bytearray(real)
    broken[20] ^= 0x10
    with pytest.raises(CorruptRecordError, match="payload checksum"):
        decode_record_value(bytes(broken), 0, len(broken))


def test_length_disagreeing_with_the_index_or_truncated_record_is_an_error():
    data = record("x", np.ones(4, np.float32))
    with pytest.raises(CorruptRecordError, match="index says"):
        decode_record_value(data + b"\0", 0, len(data) + 1)
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode_record_value(data[:-3], 0, len(data), name="f")


def test_content_length_disagreeing_with_shape_is_an_error():
    event = event_pb2.Event()
    value = event.summary.value.add()
    value.tag = "x"
    value.tensor.dtype = 1
    value.tensor.tensor_shape.dim.add().size = 3
    value.tensor.tensor_content = b"\0" * 8
    payload = event.SerializeToString()
    with pytest.raises(CorruptRecordError, match="shape"):
        decode_payload_value(payload, 0, len(payload), name="f", offset=5)


def test_fields_in_unusual_order_are_walked_generically():
    def ld(key: int, body: bytes) -> bytes:
        assert len(body) < 128
        return bytes((key, len(body))) + body

    tensor = event_pb2.TensorProto(dtype=3, tensor_content=np.array([5, -6], "<i4").tobytes())
    tensor.tensor_shape.dim.add(size=2, name="x_2")
    value = ld(0x42, tensor.SerializeToString()) + ld(0x0A, b"x")  # tensor before tag
    payload = ld(0x2A, ld(0x0A, value)) + b"\x09" + np.float64(1.5).tobytes() + b"\x10\x05"  # summary first
    assert event_pb2.Event.FromString(payload).summary.value[0].tag == "x"
    assert same(decode_payload_value(payload, 0, len(payload)), np.array([5, -6], np.int32))


def test_layout_memo_falls_back_when_the_same_name_changes_shape_dtype_or_tag():
    decoder = RecordDecoder()
    values = [
        np.ones((2, 3), np.float32), np.ones((3, 2), np.float32), np.ones((3, 2), np.float64),
        np.arange(6, dtype=np.int64), np.ones((3, 2), np.float32),
    ]
    for step, v in enumerate(values):
        data = record("w", v, step=step * 1000, mode_step=step)
        assert same(decoder.decode(data, 0, len(data), key="w"), v)
    renamed = record("w2", values[0])  # an index entry of "w" pointing at another tensor's record
    with pytest.raises(CorruptRecordError, match="the index says this record holds 'w' but it holds 'w2'"):
        decoder.decode(renamed, 0, len(renamed), key="w")
    assert same(decoder.decode(renamed, 0, len(renamed), key="w2"), values[0])
    assert same(decoder.decode(renamed, 0, len(renamed)), values[0])  # no key: no tensor to check against
