"""The value of one tensor record, decoded straight from the bytes of an event file.

A reader that wants only the array of a record does not need a protobuf message: it needs the
dtype, the dimensions and where ``tensor_content`` lies. This module walks the wire format for
exactly those fields (see :mod:`sdk_ext.format.events` for the layout) and hands the raw bytes to
numpy, so a value costs one copy of its bytes and no per-field Python objects. Anything it does not
expect (string tensors, the typed ``*_val`` fields, bfloat16, empty tensors, wire types it does not
walk) goes to the protobuf decoder, so the result is always the same as
:func:`sdk_ext.format.events.decode_tensor_value`.

Record checks are those of :func:`sdk_ext.format.records.read_record`: the length CRC, the footer
(smdebug's constant or the real payload CRC), and the length the index states.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np

from sdk_ext.exceptions import CorruptRecordError
from sdk_ext.format.events import CODE_TO_DTYPE, decode_tensor_value
from sdk_ext.format.records import FOOTER_SIZE, HEADER_SIZE, MAGIC_FOOTER, OVERHEAD, masked_crc32c

_HEADER = struct.Struct("<QI")
_FOOTER = struct.Struct("<I")


class _Fallback(Exception):
    """The payload uses something the fast walk leaves to protobuf."""


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7
        if shift > 63:
            raise _Fallback


def _skip(buf: bytes, i: int, wire: int) -> int:
    if wire == 0:
        return _varint(buf, i)[1]
    if wire == 2:
        n, i = _varint(buf, i)
        return i + n
    if wire == 1:
        return i + 8
    if wire == 5:
        return i + 4
    raise _Fallback  # groups: never written by smdebug


def _find_tensor(buf: bytes, i: int, end: int) -> tuple[int, int]:
    """Span of the first Summary.Value's TensorProto inside the Event at ``buf[i:end]``."""
    # smdebug's layout first (wall_time, step, summary, its one value, tag, tensor); anything else walks.
    start = i
    if buf[i] == 0x09:
        i += 9
    if buf[i] == 0x10:
        i += 1
        while buf[i] & 0x80:
            i += 1
        i += 1
    if buf[i] == 0x2A:
        i += 1
        while buf[i] & 0x80:  # summary length
            i += 1
        if buf[i + 1] == 0x0A:
            i += 2
            while buf[i] & 0x80:  # value length
                i += 1
            if buf[i + 1] == 0x0A:  # the tag
                n = buf[i + 2]
                if n < 0x80 and buf[i + 3 + n] == 0x42:
                    return _span(buf, i + 4 + n)
    return _walk_to_tensor(buf, start, end)


def _span(buf: bytes, i: int) -> tuple[int, int]:
    n = buf[i]
    if n < 0x80:
        return i + 1, i + 1 + n
    n, i = _varint(buf, i)
    return i, i + n


def _walk_to_tensor(buf: bytes, i: int, end: int) -> tuple[int, int]:
    summary = value = -1
    value_end = 0
    while i < end:  # Event
        key = buf[i]
        i += 1
        if key == 0x2A:  # summary
            n, i = _varint(buf, i)
            summary, end = i, i + n
            break
        i = _skip(buf, i, key & 7) if key < 0x80 else _skip(buf, _varint(buf, i - 1)[1], key & 7)
    if summary < 0:
        raise _Fallback
    i = summary
    while i < end:  # Summary: the first value (field 1)
        key = buf[i]
        i += 1
        if key == 0x0A:
            n, i = _varint(buf, i)
            value, value_end = i, i + n
            break
        i = _skip(buf, i, key & 7) if key < 0x80 else _skip(buf, _varint(buf, i - 1)[1], key & 7)
    if value < 0:
        raise _Fallback
    i = value
    while i < value_end:  # Summary.Value: field 8 is the tensor
        key = buf[i]
        i += 1
        if key == 0x42:
            n, i = _varint(buf, i)
            return i, i + n
        i = _skip(buf, i, key & 7) if key < 0x80 else _skip(buf, _varint(buf, i - 1)[1], key & 7)
    raise _Fallback


def _walk_tensor(buf: bytes, i: int, end: int) -> tuple[int, list[int], int, int]:
    """``(dtype code, dims, content start, content end)`` of the TensorProto at ``buf[i:end]``."""
    code = 0
    dims: list[int] = []
    start = -1
    stop = 0
    while i < end:
        key = buf[i]
        if key == 0x08:
            code = buf[i + 1]
            if code < 0x80:
                i += 2
            else:
                code, i = _varint(buf, i + 1)
        elif key == 0x12:  # tensor_shape: repeated Dim (12 <len> [08 <size>] 12 <len> name)
            n = buf[i + 1]
            if n < 0x80:
                i += 2
            else:
                n, i = _varint(buf, i + 1)
            shape_end = i + n
            while i < shape_end:
                if buf[i] != 0x12:
                    raise _Fallback  # unknown_rank or something new
                n = buf[i + 1]
                if n < 0x80:
                    i += 2
                else:
                    n, i = _varint(buf, i + 1)
                dim_end = i + n
                size = 0
                while i < dim_end:
                    k = buf[i]
                    if k == 0x08:
                        size, i = _varint(buf, i + 1)
                    elif k == 0x12:  # the dim's name
                        n, i = _varint(buf, i + 1)
                        i += n
                    else:
                        raise _Fallback
                if size >= 1 << 63:
                    raise _Fallback  # negative (unknown) size
                dims.append(size)
        elif key == 0x22:  # tensor_content
            n, i = _varint(buf, i + 1)
            start = i
            stop = i = i + n
        else:
            raise _Fallback  # string_val, typed values, version_number...
    if start < 0:
        raise _Fallback
    return code, dims, start, stop


def decode_payload_value(buf: bytes, start: int, end: int, *, name: str = "<buffer>", offset: int = 0) -> np.ndarray[Any, Any]:
    """The array held by the Event payload ``buf[start:end]`` (writable, native byte order).

    Args:
        buf: bytes holding the payload.
        start, end: the payload's span in ``buf``.
        name, offset: file name and byte offset of the record, for error messages.

    Raises:
        CorruptRecordError: the payload is no tensor event or its content disagrees with its shape.
    """
    try:
        t_start, t_end = _find_tensor(buf, start, end)
        code, dims, c_start, c_end = _walk_tensor(buf, t_start, t_end)
        dtype = CODE_TO_DTYPE.get(code)
        if dtype is None or t_end > end:
            raise _Fallback
    except (_Fallback, IndexError):
        return decode_tensor_value(memoryview(buf)[start:end], name=name, offset=offset)
    count = math.prod(dims)
    nbytes = c_end - c_start
    if count * dtype.itemsize != nbytes or c_end > t_end:
        raise CorruptRecordError(
            name, offset, f"tensor content is {nbytes} bytes, shape {dims} of {dtype} needs {count * dtype.itemsize}"
        )
    # one copy into memory the array owns (writable, like smdebug's values)
    arr: np.ndarray[Any, Any] = np.ndarray(dims, dtype, bytearray(memoryview(buf)[c_start:c_end]))
    if not dtype.isnative:
        return arr.astype(dtype.newbyteorder("="))
    return arr


def decode_record_value(
    buf: bytes, offset: int, length: int, *, name: str = "<buffer>", base: int = 0
) -> np.ndarray[Any, Any]:
    """Check the record of ``length`` bytes at ``buf[offset:]`` and decode its tensor.

    Args:
        buf: bytes holding the record (a whole event file, or just the record).
        offset: where the record starts in ``buf``.
        length: the whole record's length, as the index file states it.
        name: the event file's name, for error messages.
        base: the file offset of ``buf[0]`` (non-zero when ``buf`` is a ranged read), for error messages.

    Raises:
        CorruptRecordError: names the file and the record's byte offset in it.
    """
    where = base + offset
    end = offset + length
    if offset < 0 or length < OVERHEAD or end > len(buf):
        raise CorruptRecordError(
            name, where, f"record of {length} bytes is truncated: only {max(0, len(buf) - offset)} bytes present"
        )
    payload_len, length_crc = _HEADER.unpack_from(buf, offset)
    if masked_crc32c(buf[offset : offset + 8]) != length_crc:
        raise CorruptRecordError(name, where, "length checksum mismatch (the record header is damaged)")
    if payload_len + OVERHEAD != length:
        raise CorruptRecordError(name, where, f"record is {payload_len + OVERHEAD} bytes but the index says {length}")
    p_start = offset + HEADER_SIZE
    p_end = end - FOOTER_SIZE
    (footer,) = _FOOTER.unpack_from(buf, p_end)
    if footer != MAGIC_FOOTER and footer != masked_crc32c(buf[p_start:p_end]):
        raise CorruptRecordError(
            name, where, "payload checksum mismatch (footer is neither the payload CRC nor smdebug's constant)"
        )
    return decode_payload_value(buf, p_start, p_end, name=name, offset=where)


__all__ = ["decode_payload_value", "decode_record_value"]
