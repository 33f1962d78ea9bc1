"""Event payloads: one tensor per ``Event``, encoded byte for byte as smdebug encodes it.

Wire layout of one payload (proto3; fields in number order; zero scalars and empty strings omitted)::

    Event         09 <f64 wall_time> [10 <varint step>] 2a <len> Summary
    Summary       0a <len> Value
    Value         [0a <len> tag] 42 <len> TensorProto 4a <len> SummaryMetadata
    TensorProto   [08 <varint dtype>] 12 <len> TensorShapeProto [22 <len> raw bytes] (42 <len> string)*
    Shape         (12 <len> Dim)*           Dim: [08 <varint size>] 12 <len> "{tag}_{size}"
    Metadata      0a <len> {0a 09 "mode_step" 12 <len> str(mode_step)}
                  0a <len> {0a 04 "mode"      12 <len> str(mode number)}

Example (fixture e, step 1, worker_0, ``loss`` = float32 0-d)::

    09 00 00 10 40 fc 54 d9 41  10 01  2a 31 0a 2f 0a 04 "loss" 42 0a 08 01 12 00 22 04 8c 2e ba 3d
    4a 1b 0a 0e 0a 09 "mode_step" 12 01 "1" 0a 09 0a 04 "mode" 12 01 "1"

The encoder is hand-written (a tensor's bytes are passed through as a view, never copied); the
decoder uses the generated protobuf module, so fields in any order and unknown fields are accepted.
Raw tensor bytes are C-order little-endian.
"""

from __future__ import annotations

import math
import struct
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sdk_ext.exceptions import CorruptRecordError, UnsupportedDtypeError
from sdk_ext.format import event_pb2
from sdk_ext.format.dtypes import (
    BFLOAT16,
    CODE_TO_DTYPE,
    DT_BFLOAT16,
    DT_BOOL,
    DT_COMPLEX64,
    DT_COMPLEX128,
    DT_DOUBLE,
    DT_FLOAT,
    DT_HALF,
    DT_INT8,
    DT_INT16,
    DT_INT32,
    DT_INT64,
    DT_STRING,
    DT_UINT8,
    DT_UINT16,
    DT_UINT32,
    DT_UINT64,
    DTYPE_TO_CODE,
    dtype_code,
    to_numpy,
)
from sdk_ext.format.records import OVERHEAD, record_footer, record_header
from sdk_ext.modes import ModeKeys

_FOOTER = record_footer(None)  # the constant footer of every events/ record
_MODE_NAMES = {m.value: m for m in ModeKeys}
_F64 = struct.Struct("<d")
_LITTLE = sys.byteorder == "little"


#: dtype -> DataType number, filled as dtypes are met (dtype.name is slow to compute).
_DTYPE_CODES: dict[np.dtype[Any], int] = {}


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64 on the wire: two's complement, 10 bytes
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _ld(key: int, payload: bytes) -> bytes:
    """A length-delimited field: key byte, varint length, payload."""
    return bytes((key,)) + _varint(len(payload)) + payload


def _shape_bytes(tag: str, shape: Sequence[int]) -> bytes:
    parts = []
    for size in shape:
        dim = (b"\x08" + _varint(size) if size else b"") + _ld(0x12, f"{tag}_{size}".encode())
        parts.append(_ld(0x12, dim))
    return b"".join(parts)


def _metadata_bytes(mode: ModeKeys, mode_step: int) -> bytes:
    step_plugin = _ld(0x0A, b"mode_step") + _ld(0x12, str(mode_step).encode())
    mode_plugin = _ld(0x0A, b"mode") + _ld(0x12, str(mode.value).encode())
    return _ld(0x0A, step_plugin) + _ld(0x0A, mode_plugin)


def _string_elements(array: np.ndarray[Any, Any]) -> list[bytes]:
    out = []
    for item in array.reshape(-1).tolist():
        if isinstance(item, bytes):
            out.append(item)
        elif isinstance(item, str):
            out.append(item.encode("utf-8"))
        else:
            raise UnsupportedDtypeError(
                f"cannot save an object array holding {type(item).__name__}: only str/bytes objects are "
                "storable; convert the array to a numeric dtype"
            )
    return out


def _raw_view(array: np.ndarray[Any, Any]) -> bytes | memoryview:
    """C-order little-endian bytes of ``array``, as a view when the array already is that."""
    if array.size == 0:
        return b""
    if array.dtype.byteorder == ">" or (array.dtype.byteorder == "=" and not _LITTLE):
        array = array.astype(array.dtype.newbyteorder("<"))
    array = np.ascontiguousarray(array)
    if array.dtype.name == "bfloat16":
        array = array.view(np.uint16)  # memoryview cannot export ml_dtypes' format code
    return array.data.cast("B")


#: Per (tag, dtype, shape) of a numeric tensor: the Value bytes before the raw data, and the data's
#: length. They do not change from step to step, so each is built once (bounded: cleared when full).
_VALUE_HEADS: dict[tuple[str, np.dtype[Any], tuple[int, ...]], tuple[bytes, int]] = {}
#: Per (mode, mode_step): the encoded SummaryMetadata field (every tensor of a step shares it).
_METADATA: dict[tuple[ModeKeys, int], bytes] = {}
_CACHE_LIMIT = 4096
#: Per (Value head, bytes after it): the Event's summary field up to the raw data (``2a <len> 0a <len>`` and the
#: Value head), the same from step to step.
_SUMMARY_HEADS: dict[tuple[bytes, int], bytes] = {}
#: Per global step: the Event's step field (every tensor of a step shares it).
_STEP_FIELDS: dict[int, bytes] = {}
#: dtypes whose arrays are written as they are (numeric, little-endian, not bfloat16)
_AS_IS: dict[np.dtype[Any], bool] = {}


def _value_head(tag: str, array: np.ndarray[Any, Any], code: int) -> tuple[bytes, int]:
    """``[0a tag] 42 <len> TensorProto-head`` of a numeric tensor, and the length of its raw data."""
    key = (tag, array.dtype, array.shape)
    found = _VALUE_HEADS.get(key)
    if found is None:
        content_len = array.size * array.dtype.itemsize
        head = b"\x08" + _varint(code) + _ld(0x12, _shape_bytes(tag, array.shape))
        if content_len:
            head += b"\x22" + _varint(content_len)
        tag_bytes = tag.encode("utf-8")
        value_head = (_ld(0x0A, tag_bytes) if tag_bytes else b"") + b"\x42" + _varint(len(head) + content_len) + head
        if len(_VALUE_HEADS) >= _CACHE_LIMIT:
            _VALUE_HEADS.clear()
        found = _VALUE_HEADS[key] = (value_head, content_len)
    return found


def _metadata_field(mode: ModeKeys, mode_step: int) -> bytes:
    key = (mode, mode_step)
    found = _METADATA.get(key)
    if found is None:
        if len(_METADATA) >= _CACHE_LIMIT:
            _METADATA.clear()
        found = _METADATA[key] = _ld(0x4A, _metadata_bytes(mode, mode_step))
    return found


def _content(array: np.ndarray[Any, Any]) -> bytes | memoryview:
    """The raw bytes of a numeric tensor: a view of the array when it already is C-order little-endian."""
    as_is = _AS_IS.get(array.dtype)
    if as_is is None:
        dtype = array.dtype
        as_is = not (dtype.byteorder == ">" or (dtype.byteorder == "=" and not _LITTLE)) and dtype.name != "bfloat16"
        _AS_IS[dtype] = as_is
    if as_is and array.flags.c_contiguous and array.size:
        return array.data.cast("B")
    return _raw_view(array)


def _event_pieces(
    tag: str, array: np.ndarray[Any, Any], step: int, wall_time: float, mode: ModeKeys, mode_step: int | None
) -> tuple[bytes, bytes | memoryview, bytes, int]:
    """The payload of one tensor Event as ``(head, content, rest, payload length)``: ``content`` is the
    tensor's bytes (a view of the array; ``b""`` for strings and empty tensors), ``head`` and ``rest``
    the encoded fields before and after it."""
    code = _DTYPE_CODES.get(array.dtype)
    if code is None:
        code = _DTYPE_CODES[array.dtype] = dtype_code(array)
    meta = _metadata_field(mode, step if mode_step is None else mode_step)
    if code:
        value_head, content_len = _value_head(tag, array, code)
        content: bytes | memoryview = _content(array) if content_len else b""
        rest = meta
    else:  # strings: string_val entries after the shape
        tag_bytes = tag.encode("utf-8")
        head = _ld(0x12, _shape_bytes(tag, array.shape))
        tail = b"".join(_ld(0x42, s) for s in _string_elements(array))
        content, content_len = b"", 0
        value_head = (_ld(0x0A, tag_bytes) if tag_bytes else b"") + b"\x42" + _varint(len(head) + len(tail)) + head
        rest = tail + meta
    key = (value_head, content_len + len(rest))
    summary = _SUMMARY_HEADS.get(key)
    if summary is None:
        value_len = len(value_head) + key[1]
        summary_head = b"\x0a" + _varint(value_len)
        summary = b"\x2a" + _varint(len(summary_head) + value_len) + summary_head + value_head
        if len(_SUMMARY_HEADS) >= _CACHE_LIMIT:
            _SUMMARY_HEADS.clear()
        _SUMMARY_HEADS[key] = summary
    step_field = _STEP_FIELDS.get(step)
    if step_field is None:
        if len(_STEP_FIELDS) >= _CACHE_LIMIT:
            _STEP_FIELDS.clear()
        step_field = _STEP_FIELDS[step] = b"\x10" + _varint(step) if step else b""
    if wall_time != 0.0 or math.copysign(1.0, wall_time) < 0:
        event_head = b"\x09" + _F64.pack(wall_time) + step_field + summary
    else:
        event_head = step_field + summary
    return event_head, content, rest, len(event_head) + key[1]


def encode_tensor_event_parts(
    tag: str,
    value: np.ndarray[Any, Any],
    *,
    step: int,
    wall_time: float,
    mode: ModeKeys = ModeKeys.GLOBAL,
    mode_step: int | None = None,
) -> list[bytes | memoryview]:
    """The payload of one tensor Event as buffers to write back to back (the tensor's bytes as a view).

    Args:
        tag: the tensor name.
        value: an array (see :func:`to_numpy`).
        step: the global step.
        wall_time: seconds since the epoch.
        mode: the mode the step was taken in.
        mode_step: the step within ``mode``; defaults to ``step``.
    """
    head, content, rest, _ = _event_pieces(tag, value, step, wall_time, mode, mode_step)
    return [head, content, rest] if content else [head, rest]


def encode_tensor_record_pieces(
    tag: str,
    value: np.ndarray[Any, Any],
    *,
    step: int,
    wall_time: float,
    mode: ModeKeys = ModeKeys.GLOBAL,
    mode_step: int | None = None,
) -> tuple[bytes, bytes | memoryview, bytes, int]:
    """A whole events/ record as three buffers to write back to back, and its total length:
    ``(prefix, content, suffix, length)``. ``content`` is the tensor's bytes (a view of the array, or
    ``b""``); ``prefix`` (record header and the fields before the bytes) and ``suffix`` (the fields
    after them and the constant footer) are small. The writer's fast path (three writes, and three
    CRC calls at most, per record)."""
    head, content, rest, payload_len = _event_pieces(tag, value, step, wall_time, mode, mode_step)
    return record_header(payload_len) + head, content, rest + _FOOTER, payload_len + OVERHEAD


def encode_tensor_record_parts(
    tag: str,
    value: np.ndarray[Any, Any],
    *,
    step: int,
    wall_time: float,
    mode: ModeKeys = ModeKeys.GLOBAL,
    mode_step: int | None = None,
) -> tuple[list[bytes | memoryview], int]:
    """A whole events/ record (header, payload, constant footer) as buffers, and its total length."""
    prefix, content, suffix, length = encode_tensor_record_pieces(
        tag, value, step=step, wall_time=wall_time, mode=mode, mode_step=mode_step)
    return ([prefix, content, suffix] if content else [prefix, suffix]), length


def encode_tensor_event(
    tag: str,
    value: np.ndarray[Any, Any],
    *,
    step: int,
    wall_time: float,
    mode: ModeKeys = ModeKeys.GLOBAL,
    mode_step: int | None = None,
) -> bytes:
    """The payload of one tensor Event as bytes (see :func:`encode_tensor_event_parts`)."""
    parts = encode_tensor_event_parts(tag, value, step=step, wall_time=wall_time, mode=mode, mode_step=mode_step)
    return b"".join(parts)


@dataclass(frozen=True, slots=True)
class TensorEvent:
    """A decoded tensor record."""

    tag: str
    value: np.ndarray[Any, Any]
    step: int
    wall_time: float
    mode: ModeKeys | None  # None when the record carries no mode metadata
    mode_step: int | None


def _decode_tensor(proto: Any, *, name: str, offset: int) -> np.ndarray[Any, Any]:
    dims = [d.size for d in proto.tensor_shape.dim]
    code = proto.dtype
    if code == DT_STRING or (code == 0 and (proto.string_val or not proto.tensor_content)):
        items = [b.decode("utf-8", errors="surrogateescape") for b in proto.string_val]
        arr = np.array(items) if items else np.array([], dtype=str)
        return arr.reshape(dims) if dims or arr.size == 1 else arr
    if code == DT_BFLOAT16:
        raw = np.frombuffer(proto.tensor_content, dtype="<u2")
        if BFLOAT16 is not None:
            widened: np.ndarray[Any, Any] = raw.view(BFLOAT16).reshape(dims).copy()
            return widened
        # Without ml_dtypes, widen exactly: a bfloat16 is the top half of a float32.
        return (raw.astype(np.uint32) << 16).view(np.float32).reshape(dims)
    dtype = CODE_TO_DTYPE.get(code)
    if dtype is None:
        raise CorruptRecordError(name, offset, f"unknown tensor dtype code {code}")
    content = proto.tensor_content
    if content:
        count = len(content) // dtype.itemsize
        expected = math.prod(dims)
        if count * dtype.itemsize != len(content) or count != expected:
            raise CorruptRecordError(
                name, offset, f"tensor content is {len(content)} bytes, shape {dims} of {dtype} needs "
                f"{expected * dtype.itemsize}"
            )
        arr = np.frombuffer(content, dtype=dtype)
    else:
        # Writers other than smdebug may use the typed repeated fields instead of raw bytes.
        arr = _decode_typed_values(proto, code, dtype)
        if arr.size == 1 and math.prod(dims) > 1:
            arr = np.full(math.prod(dims), arr[0], dtype=dtype)  # TF's "splat" form
        elif arr.size != math.prod(dims):
            raise CorruptRecordError(name, offset, f"tensor has {arr.size} values for shape {dims}")
    arr = arr.reshape(dims)
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    else:
        arr = arr.copy()  # own, writable memory (frombuffer over bytes is read-only)
    return arr


def _decode_typed_values(proto: Any, code: int, dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    if code in (DT_FLOAT,):
        return np.array(proto.float_val, dtype=dtype)
    if code == DT_DOUBLE:
        return np.array(proto.double_val, dtype=dtype)
    if code in (DT_INT32, DT_INT16, DT_INT8, DT_UINT8, DT_UINT16):
        return np.array(proto.int_val, dtype=dtype)
    if code in (DT_INT64, DT_UINT32, DT_UINT64):
        return np.array(proto.int64_val, dtype=dtype)
    if code == DT_BOOL:
        return np.array(proto.bool_val, dtype=dtype)
    if code == DT_HALF:
        return np.array(proto.half_val, dtype=np.uint16).view(np.float16)
    if code == DT_COMPLEX64:
        pairs = np.array(proto.scomplex_val, dtype=np.float32)
        return pairs.view(np.complex64)
    if code == DT_COMPLEX128:
        pairs = np.array(proto.dcomplex_val, dtype=np.float64)
        return pairs.view(np.complex128)
    return np.array([], dtype=dtype)


def _parse_event(payload: bytes | memoryview, name: str, offset: int) -> Any:
    event = event_pb2.Event()
    try:
        event.ParseFromString(bytes(payload) if isinstance(payload, memoryview) else payload)
    except Exception as err:  # protobuf raises its own DecodeError
        raise CorruptRecordError(name, offset, f"payload is not an Event message ({err})") from err
    if not event.HasField("summary") or len(event.summary.value) == 0:
        raise CorruptRecordError(name, offset, "event holds no summary value")
    return event


def decode_tensor_value(payload: bytes | memoryview, *, name: str = "<buffer>", offset: int = 0) -> np.ndarray[Any, Any]:
    """The tensor stored in one event payload, as a writable array (dtype as written).

    Raises:
        CorruptRecordError: the payload is not a tensor event (names ``name`` and ``offset``).
    """
    event = _parse_event(payload, name, offset)
    value = event.summary.value[0]
    if value.WhichOneof("value") != "tensor":
        raise CorruptRecordError(name, offset, f"summary value {value.tag!r} holds no tensor")
    return _decode_tensor(value.tensor, name=name, offset=offset)


def decode_tensor_event(payload: bytes | memoryview, *, name: str = "<buffer>", offset: int = 0) -> TensorEvent:
    """Decode a whole tensor event: tag, value, step, wall time and the record-level mode metadata."""
    event = _parse_event(payload, name, offset)
    value = event.summary.value[0]
    if value.WhichOneof("value") != "tensor":
        raise CorruptRecordError(name, offset, f"summary value {value.tag!r} holds no tensor")
    mode: ModeKeys | None = None
    mode_step: int | None = None
    for plugin in value.metadata.plugin_data:
        try:
            if plugin.plugin_name == "mode":
                mode = _MODE_NAMES.get(int(plugin.content))
            elif plugin.plugin_name == "mode_step":
                mode_step = int(plugin.content)
        except ValueError as err:
            raise CorruptRecordError(name, offset, f"bad {plugin.plugin_name} metadata {plugin.content!r}") from err
    return TensorEvent(
        tag=value.tag,
        value=_decode_tensor(value.tensor, name=name, offset=offset),
        step=int(event.step),
        wall_time=float(event.wall_time),
        mode=mode,
        mode_step=mode_step,
    )


__all__ = [
    "BFLOAT16",
    "CODE_TO_DTYPE",
    "DTYPE_TO_CODE",
    "TensorEvent",
    "decode_tensor_event",
    "decode_tensor_value",
    "dtype_code",
    "encode_tensor_event",
    "encode_tensor_event_parts",
    "encode_tensor_record_parts",
    "encode_tensor_record_pieces",
    "to_numpy",
]
