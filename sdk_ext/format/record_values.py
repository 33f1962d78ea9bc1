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

import google_crc32c
import numpy as np

from sdk_ext.exceptions import CorruptRecordError
from sdk_ext.format.events import CODE_TO_DTYPE, decode_tensor_value
from sdk_ext.format.records import FOOTER_SIZE, HEADER_SIZE, MAGIC_FOOTER, OVERHEAD, masked_crc32c

Buffer = bytes | bytearray | memoryview
_HEADER = struct.Struct("<QI")
_FOOTER = struct.Struct("<I")
_MAGIC_BYTES = _FOOTER.pack(MAGIC_FOOTER)
_MASK_DELTA = 0xA282EAD8
_crc32c = google_crc32c.value


class _Fallback(Exception):
    """The payload uses something the fast walk leaves to protobuf."""


def _varint(buf: Buffer, i: int) -> tuple[int, int]:
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


def _skip(buf: Buffer, i: int, wire: int) -> int:
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


def _value_start(buf: Buffer, i: int) -> int:
    """Where the first Summary.Value's fields start, for smdebug's field order; -1 otherwise."""
    if buf[i] == 0x09:  # wall_time
        i += 9
    if buf[i] == 0x10:  # step
        i += 1
        while buf[i] & 0x80:
            i += 1
        i += 1
    if buf[i] != 0x2A:  # summary
        return -1
    i += 1
    while buf[i] & 0x80:
        i += 1
    if buf[i + 1] != 0x0A:  # its first value
        return -1
    i += 2
    while buf[i] & 0x80:
        i += 1
    return i + 1


def _find_tensor(buf: Buffer, i: int, end: int) -> tuple[int, int, int]:
    """``(value start or -1, tensor start, tensor end)`` of the first Summary.Value in the Event at ``buf[i:end]``."""
    v = _value_start(buf, i)
    if v >= 0 and buf[v] == 0x0A:  # the tag, then the tensor
        n = buf[v + 1]
        if n < 0x80 and buf[v + 2 + n] == 0x42:
            return (v, *_span(buf, v + 3 + n))
    return (-1, *_walk_to_tensor(buf, i, end))


def _span(buf: Buffer, i: int) -> tuple[int, int]:
    n = buf[i]
    if n < 0x80:
        return i + 1, i + 1 + n
    n, i = _varint(buf, i)
    return i, i + n


def _walk_to_tensor(buf: Buffer, i: int, end: int) -> tuple[int, int]:
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


def _field(buf: Buffer, i: int, end: int, key: int) -> tuple[int, int] | None:
    """Where the first length-delimited field with ``key`` (its key byte) in the message at ``buf[i:end]``
    holds its bytes, as ``(start, end)``; None if the message has no such field."""
    while i < end:
        found = buf[i]
        if found == key:
            n, i = _varint(buf, i + 1)
            return i, min(end, i + n)
        i = _skip(buf, i + 1, found & 7) if found < 0x80 else _skip(buf, _varint(buf, i)[1], found & 7)
    return None


def _tag_of(buf: Buffer, i: int, end: int) -> bytes | None:
    """The tag (field 1) of the first Summary.Value of the Event at ``buf[i:end]``; None if there is none."""
    try:
        summary = _field(buf, i, end, 0x2A)  # Event: field 5 is the summary
        if summary is None:
            return None
        value = _field(buf, *summary, 0x0A)  # Summary: field 1 is a value
        if value is None:
            return None
        tag = _field(buf, *value, 0x0A)  # Summary.Value: field 1 is the tag
        return b"" if tag is None else bytes(buf[tag[0] : tag[1]])  # proto3 leaves an empty tag out
    except (_Fallback, IndexError):
        return None


def _check_tag(buf: Buffer, start: int, end: int, tag: str, name: str, offset: int) -> None:
    """Raise CorruptRecordError unless the record's tensor is ``tag`` (the name its index entry gives).

    A payload this walk cannot follow is left to the decoder, which says what is wrong with it.
    """
    found = _tag_of(buf, start, end)
    if found is not None and found != tag.encode():
        shown = found.decode(errors="replace")
        raise CorruptRecordError(
            name, offset, f"the index says this record holds {tag!r} but it holds {shown!r}; the index file is damaged"
        )


def _walk_tensor(buf: Buffer, i: int, end: int) -> tuple[int, list[int], int, int]:
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


Layout = tuple[bytes, np.dtype[Any], tuple[int, ...], int]  # bytes before the content, dtype, shape, content size


def _array(
    buf: Buffer, shape: Any, dtype: np.dtype[Any], start: int, nbytes: int, view: bool
) -> np.ndarray[Any, Any]:
    """A writable array of the content: a view of ``buf`` if allowed and writable, else one copy."""
    arr: np.ndarray[Any, Any]
    if view and (isinstance(buf, bytearray) or (isinstance(buf, memoryview) and not buf.readonly)):
        arr = np.ndarray(shape, dtype, buf, start)
    else:
        arr = np.ndarray(shape, dtype, bytearray(memoryview(buf)[start : start + nbytes]))
    return arr


def _walk(
    buf: Buffer, start: int, end: int, name: str, offset: int, view: bool = False, tag: str | None = None
) -> tuple[np.ndarray[Any, Any], Layout | None]:
    """Decode by walking the wire format; also return the record's layout when it is smdebug's.

    With ``tag``, the record must hold that tensor (the layout learned includes the tag's bytes, so
    records matched against it later hold that tensor too).
    """
    if tag is not None:
        _check_tag(buf, start, end, tag, name, offset)
    try:
        v_start, t_start, t_end = _find_tensor(buf, start, end)
        code, dims, c_start, c_end = _walk_tensor(buf, t_start, t_end)
        dtype = CODE_TO_DTYPE.get(code)
        if dtype is None or t_end > end:
            raise _Fallback
    except (_Fallback, IndexError):
        return decode_tensor_value(memoryview(buf)[start:end], name=name, offset=offset), None
    count = math.prod(dims)
    nbytes = c_end - c_start
    if count * dtype.itemsize != nbytes or c_end > t_end:
        raise CorruptRecordError(
            name, offset, f"tensor content is {nbytes} bytes, shape {dims} of {dtype} needs {count * dtype.itemsize}"
        )
    arr: np.ndarray[Any, Any] = _array(buf, dims, dtype, c_start, nbytes, view)
    if not dtype.isnative:
        return arr.astype(dtype.newbyteorder("=")), None
    # the content must close the tensor, so that matching the bytes before it proves the same structure
    layout = (bytes(buf[v_start:c_start]), dtype, tuple(dims), nbytes) if v_start >= 0 and c_end == t_end else None
    return arr, layout


def decode_payload_value(buf: Buffer, start: int, end: int, *, name: str = "<buffer>", offset: int = 0) -> np.ndarray[Any, Any]:
    """The array held by the Event payload ``buf[start:end]`` (writable, native byte order).

    Args:
        buf: Buffer holding the payload.
        start, end: the payload's span in ``buf``.
        name, offset: file name and byte offset of the record, for error messages.

    Raises:
        CorruptRecordError: the payload is no tensor event or its content disagrees with its shape.
    """
    return _walk(buf, start, end, name, offset)[0]


def _check_record(buf: Buffer, offset: int, length: int, name: str, base: int) -> int:
    """Check framing and checksums of the record at ``buf[offset:offset+length]``; return its payload end."""
    end = offset + length
    if offset < 0 or length < OVERHEAD or end > len(buf):
        raise CorruptRecordError(
            name, base + offset,
            f"record of {length} bytes is truncated: only {max(0, len(buf) - offset)} bytes present",
        )
    payload_len, length_crc = _HEADER.unpack_from(buf, offset)
    crc = _crc32c(bytes(buf[offset : offset + 8]))
    if (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF != length_crc:
        raise CorruptRecordError(name, base + offset, "length checksum mismatch (the record header is damaged)")
    if payload_len + OVERHEAD != length:
        raise CorruptRecordError(
            name, base + offset, f"record is {payload_len + OVERHEAD} bytes but the index says {length}"
        )
    p_end = end - FOOTER_SIZE
    if buf[p_end:end] != _MAGIC_BYTES and _FOOTER.unpack_from(buf, p_end)[0] != masked_crc32c(
        buf[offset + HEADER_SIZE : p_end]
    ):
        raise CorruptRecordError(
            name, base + offset, "payload checksum mismatch (footer is neither the payload CRC nor smdebug's constant)"
        )
    return p_end


def decode_record_value(
    buf: Buffer, offset: int, length: int, *, name: str = "<buffer>", base: int = 0
) -> np.ndarray[Any, Any]:
    """Check the record of ``length`` bytes at ``buf[offset:]`` and decode its tensor.

    Args:
        buf: Buffer holding the record (a whole event file, or just the record).
        offset: where the record starts in ``buf``.
        length: the whole record's length, as the index file states it.
        name: the event file's name, for error messages.
        base: the file offset of ``buf[0]`` (non-zero when ``buf`` is a ranged read), for error messages.

    Raises:
        CorruptRecordError: names the file and the record's byte offset in it.
    """
    p_end = _check_record(buf, offset, length, name, base)
    return _walk(buf, offset + HEADER_SIZE, p_end, name, base + offset)[0]


class RecordDecoder:
    """:func:`decode_record_value` that remembers each tensor's layout.

    The records of one tensor differ from step to step only in wall time, step and mode step (and
    the content): the bytes from its tag to its content are the same. Given the tensor name as
    ``key``, the decoder checks those bytes in one comparison instead of walking the fields; any
    difference falls back to the walk, which learns the new layout. Record headers already checked
    (length and its CRC: the same few values recur) are remembered too. Checks and errors are those
    of :func:`decode_record_value`.
    """

    _MAX_HEADERS = 1 << 16

    def __init__(self) -> None:
        self._layouts: dict[str, Layout] = {}
        self._headers: dict[bytes, int] = {}  # 12 header bytes known good -> payload length

    def layout(self, key: str) -> Layout | None:
        """The layout last seen for the tensor ``key``, if it is smdebug's (see :mod:`sdk_ext.format.record_batch`)."""
        return self._layouts.get(key)

    def decode(
        self,
        buf: Buffer,
        offset: int,
        length: int,
        *,
        name: str = "<buffer>",
        base: int = 0,
        key: str | None = None,
        view: bool = False,
    ) -> np.ndarray[Any, Any]:
        """Like :func:`decode_record_value`; ``key`` names the tensor (its layout is remembered), and
        the record must hold it (its tag is ``key``: an index entry pointing at another tensor's
        record raises CorruptRecordError rather than returning that tensor's values).

        ``view=True`` with writable memory (a ``bytearray``, or a writable ``memoryview``) returns an
        array over ``buf`` itself (no copy; it keeps ``buf`` alive): for a buffer read just for this record.
        """
        end = offset + length
        p_end = end - FOOTER_SIZE
        header = buf[offset : offset + HEADER_SIZE]
        if type(header) is not bytes:
            header = bytes(header)
        payload_len = self._headers.get(header)
        if payload_len is None or payload_len + OVERHEAD != length or buf[p_end:end] != _MAGIC_BYTES or offset < 0:
            p_end = _check_record(buf, offset, length, name, base)
            if len(self._headers) < self._MAX_HEADERS:
                self._headers[bytes(header)] = length - OVERHEAD
        p_start = offset + HEADER_SIZE
        layout = None if key is None else self._layouts.get(key)
        if layout is not None:  # (inlined: this is the hot path of every value read)
            prefix, dtype, shape, nbytes = layout
            i = p_start
            try:  # smdebug's field order: wall_time, step, summary, its first value, then the layout's bytes
                if buf[i] == 0x09:
                    i += 9
                if buf[i] == 0x10:
                    i += 1
                    while buf[i] & 0x80:
                        i += 1
                    i += 1
                if buf[i] == 0x2A:
                    i += 1
                    while buf[i] & 0x80:
                        i += 1
                    if buf[i + 1] == 0x0A:
                        i += 2
                        while buf[i] & 0x80:
                            i += 1
                        i += 1
                        c_start = i + len(prefix)
                        if buf[i:c_start] == prefix and c_start + nbytes <= p_end:
                            return _array(buf, shape, dtype, c_start, nbytes, view)
            except IndexError:  # a damaged payload (events/ footers carry no payload CRC): walk it
                pass
        value, learned = _walk(buf, p_start, p_end, name, base + offset, view, key)
        if key is not None and learned is not None:
            self._layouts[key] = learned
        return value


__all__ = ["Layout", "RecordDecoder", "decode_payload_value", "decode_record_value"]
