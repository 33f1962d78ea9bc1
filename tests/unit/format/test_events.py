import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sdk_ext.exceptions import UnsupportedDtypeError
from sdk_ext.format import event_pb2
from sdk_ext.format.events import (
    BFLOAT16,
    decode_tensor_event,
    decode_tensor_value,
    encode_tensor_event,
    to_numpy,
)
from sdk_ext.modes import ModeKeys

NUMERIC = [
    "float16", "float32", "float64", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64", "bool", "complex64", "complex128",
]


def _reference_payload(tag, arr, step, wall_time, mode, mode_step):
    """The same event built with the generated protobuf classes (upb serializer)."""
    from sdk_ext.format.events import dtype_code

    ev = event_pb2.Event(wall_time=wall_time, step=step)
    v = ev.summary.value.add()
    v.tag = tag
    t = v.tensor
    t.dtype = dtype_code(arr)
    t.tensor_shape.SetInParent()
    for size in arr.shape:
        d = t.tensor_shape.dim.add()
        d.size = size
        d.name = f"{tag}_{size}"
    if arr.dtype.kind in "US":
        t.string_val.extend(x.encode() if isinstance(x, str) else x for x in arr.reshape(-1).tolist())
    else:
        t.tensor_content = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
    for name, content in (("mode_step", str(mode_step)), ("mode", str(mode.value))):
        p = v.metadata.plugin_data.add()
        p.plugin_name = name
        p.content = content
    return ev.SerializeToString()


arrays = st.sampled_from(NUMERIC).flatmap(
    lambda dt: hnp.arrays(np.dtype(dt), hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5))
)


@settings(max_examples=300)
@given(
    arrays,
    st.text(min_size=1, max_size=40),
    st.integers(0, 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(list(ModeKeys)),
    st.integers(0, 10**9),
)
def test_encoder_matches_protobuf_and_round_trips(arr, tag, step, wall_time, mode, mode_step):
    payload = encode_tensor_event(tag, arr, step=step, wall_time=wall_time, mode=mode, mode_step=mode_step)
    assert payload == _reference_payload(tag, arr, step, wall_time, mode, mode_step)
    ev = decode_tensor_event(payload)
    assert ev.tag == tag and ev.step == step and ev.mode is mode and ev.mode_step == mode_step
    assert ev.value.dtype == arr.dtype and ev.value.shape == arr.shape
    assert ev.value.tobytes() == arr.tobytes()  # bit for bit, NaN payloads included
    assert ev.value.flags.writeable


@given(
    st.integers(1, 6).flatmap(
        lambda n: hnp.arrays(
            np.dtype(f"<U{n}"),
            hnp.array_shapes(min_dims=1, max_dims=3, max_side=4),
            # lone surrogates are not UTF-8 (no writer can store them); numpy drops trailing NULs
            elements=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=n),
        )
    )
)
def test_string_tensors_round_trip(arr):
    payload = encode_tensor_event("names", arr, step=1, wall_time=1.0)
    assert payload == _reference_payload("names", arr, 1, 1.0, ModeKeys.GLOBAL, 1)
    out = decode_tensor_value(payload)
    assert out.shape == arr.shape and out.tolist() == arr.tolist()


def test_big_endian_input_is_stored_little_endian():
    arr = np.arange(5, dtype=">i4")
    out = decode_tensor_value(encode_tensor_event("x", arr, step=0, wall_time=0.0))
    assert out.dtype == np.dtype("int32") and out.tolist() == [0, 1, 2, 3, 4]


def test_scalars_become_shape_one_and_0d_arrays_stay_0d():
    assert to_numpy(3.5).shape == (1,)
    assert to_numpy(np.float32(2)).shape == (1,)
    assert to_numpy(np.array(2.0)).shape == ()
    assert to_numpy([1, 2]).shape == (2,)


def test_unsupported_dtype_names_the_dtype_and_the_fix():
    with pytest.raises(UnsupportedDtypeError, match="datetime64.*astype"):
        encode_tensor_event("t", np.array(["2020-01-01"], dtype="datetime64[D]"), step=0, wall_time=0.0)


@pytest.mark.skipif(BFLOAT16 is None, reason="ml_dtypes not installed")
def test_bfloat16_round_trips_when_available():
    arr = np.array([1.5, -2.0, 3.0], dtype=BFLOAT16)
    out = decode_tensor_value(encode_tensor_event("b", arr, step=0, wall_time=0.0))
    assert out.dtype == BFLOAT16 and out.astype(np.float32).tolist() == [1.5, -2.0, 3.0]


def test_fixture_record_bytes_match_format_example():
    # docs/FORMAT.md#event-payload: fixture e, step 1, worker_0, tensor "loss"
    expected = bytes.fromhex(
        "09000010" "40fc54d941" "1001" "2a31" "0a2f" "0a046c6f7373" "420a" "0801" "1200" "22048c2eba3d"
        "4a1b" "0a0e0a096d6f64655f73746570120131" "0a090a046d6f6465120131"
    )
    value = np.frombuffer(bytes.fromhex("8c2eba3d"), dtype="<f4").reshape(())
    got = encode_tensor_event("loss", value, step=1, wall_time=1700000000.25, mode=ModeKeys.TRAIN, mode_step=1)
    assert got == expected


def test_one_tag_saved_with_other_shapes_dtypes_and_layouts_encodes_each_as_it_is():
    """The encoder reuses per-tag layouts between steps; a tag whose value changes shape, dtype, byte
    order or memory layout must still be encoded from the value at hand."""
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    values = [base, base, base.T, base[:, ::2], base.astype(">f4"), base.astype(np.float64), base.reshape(12),
              np.float32(3).reshape(()), base[:0], np.array(["a", "bc"])]
    for step, arr in enumerate(values * 2):
        for mode_step in (step, step + 1000):
            payload = encode_tensor_event("w", arr, step=step, wall_time=1.5, mode=ModeKeys.TRAIN, mode_step=mode_step)
            assert payload == _reference_payload("w", arr, step, 1.5, ModeKeys.TRAIN, mode_step)


@settings(max_examples=150)
@given(
    st.one_of(arrays, hnp.arrays(np.dtype("<U3"), hnp.array_shapes(min_dims=1, max_dims=2, max_side=3),
                                 elements=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                                                  max_size=3))),
    st.text(min_size=1, max_size=20),
    st.integers(0, 2**40),
    st.sampled_from(list(ModeKeys)),
)
def test_the_writers_three_record_pieces_are_the_framed_event(arr, tag, step, mode):
    """What the trial writer writes (prefix, tensor bytes, suffix) is the record smdebug frames: header,
    the same payload as encode_tensor_event, its constant footer; the tensor bytes a view of the array."""
    from sdk_ext.format.events import encode_tensor_record_pieces
    from sdk_ext.format.records import encode_record

    prefix, content, suffix, length = encode_tensor_record_pieces(tag, arr, step=step, wall_time=1.5, mode=mode,
                                                                  mode_step=step + 1)
    payload = encode_tensor_event(tag, arr, step=step, wall_time=1.5, mode=mode, mode_step=step + 1)
    assert prefix + bytes(content) + suffix == encode_record(payload)
    assert length == len(payload) + 16
    if arr.dtype.kind not in "US" and arr.size and arr.flags.c_contiguous and arr.dtype.byteorder != ">":
        assert isinstance(content, memoryview) and np.shares_memory(np.frombuffer(content, np.uint8), arr)
