"""TFRecord framing, as smdebug writes it.

A record, little-endian, records written back to back with no file header::

    offset  size  field
    0       8     u64  n = payload length
    8       4     u32  masked_crc32c(bytes 0..8)
    12      n     payload (a serialized Event)
    12+n    4     u32  footer

The footer of records in ``events/`` files is the constant ``masked_crc32c(b"0x12345678")``
(0x062DC0B3, bytes ``b3 c0 2d 06``): smdebug never checksums the payload there and its reader
*requires* that constant. TensorBoard files carry the real ``masked_crc32c(payload)``. Readers here
accept both; anything else in the footer is corruption.

``masked_crc32c(x) = ((c >> 15 | c << 17) + 0xA282EAD8) & 0xFFFFFFFF`` with ``c = crc32c(x)``
(CRC-32C/Castagnoli, the masking TensorFlow uses so that CRCs of CRCs stay well distributed).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import google_crc32c

from sdk_ext.exceptions import CorruptRecordError

_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
_HEADER = struct.Struct("<QI")

HEADER_SIZE = 12  # u64 length + u32 masked crc of it
FOOTER_SIZE = 4
OVERHEAD = HEADER_SIZE + FOOTER_SIZE
#: Refuse lengths above this when scanning: a corrupt length must not make us allocate 2**63 bytes.
MAX_PAYLOAD = 1 << 40
_MASK_DELTA = 0xA282EAD8

Buffer = bytes | bytearray | memoryview


def crc32c(data: Buffer) -> int:
    """CRC-32C (Castagnoli) of ``data``; ``crc32c(b"123456789") == 0xE3069283``."""
    # the C extension takes only read-only bytes
    return int(google_crc32c.value(data if isinstance(data, bytes) else bytes(data)))


def masked_crc32c(data: Buffer) -> int:
    """TensorFlow's masked CRC-32C of ``data``."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


#: Footer of every record in smdebug ``events/`` files.
MAGIC_FOOTER = masked_crc32c(b"0x12345678")
_MAGIC_FOOTER_BYTES = _U32.pack(MAGIC_FOOTER)


#: record headers by payload length (a writer meets the same lengths step after step); bounded
_HEADERS: dict[int, bytes] = {}
_HEADERS_LIMIT = 4096


def record_header(payload_length: int) -> bytes:
    """The 12 bytes that precede a payload of ``payload_length`` bytes."""
    found = _HEADERS.get(payload_length)
    if found is None:
        length = _U64.pack(payload_length)
        found = length + _U32.pack(masked_crc32c(length))
        if len(_HEADERS) >= _HEADERS_LIMIT:
            _HEADERS.clear()
        _HEADERS[payload_length] = found
    return found


def record_footer(payload: Buffer | None = None) -> bytes:
    """The 4 bytes after a payload: the real masked CRC of ``payload``, or the events/ constant if None."""
    if payload is None:
        return _MAGIC_FOOTER_BYTES
    return _U32.pack(masked_crc32c(payload))


def encode_record(payload: bytes, *, checksum: bool = False) -> bytes:
    """Frame ``payload``. ``checksum=False`` writes smdebug's constant events/ footer; True the real CRC."""
    return record_header(len(payload)) + payload + record_footer(payload if checksum else None)


@dataclass(frozen=True, slots=True)
class RecordSpan:
    """Where one record lies in a file: ``offset`` of its header, ``length`` of the whole record."""

    offset: int
    length: int

    @property
    def payload_offset(self) -> int:
        return self.offset + HEADER_SIZE

    @property
    def payload_length(self) -> int:
        return self.length - OVERHEAD


def _check_header(buf: memoryview, offset: int, name: str) -> int:
    length, length_crc = _HEADER.unpack_from(buf, offset)
    if masked_crc32c(buf[offset : offset + 8]) != length_crc:
        raise CorruptRecordError(name, offset, "length checksum mismatch (the record header is damaged)")
    if length > MAX_PAYLOAD:
        raise CorruptRecordError(name, offset, f"implausible payload length {length}")
    return int(length)


def _check_footer(buf: memoryview, offset: int, length: int, name: str) -> None:
    footer_at = offset + HEADER_SIZE + length
    footer = buf[footer_at : footer_at + FOOTER_SIZE]
    if footer == _MAGIC_FOOTER_BYTES:
        return
    (value,) = _U32.unpack(footer)
    if masked_crc32c(buf[offset + HEADER_SIZE : footer_at]) != value:
        raise CorruptRecordError(
            name, offset, "payload checksum mismatch (footer is neither the payload CRC nor smdebug's constant)"
        )


def read_record(
    data: Buffer, offset: int = 0, *, name: str = "<buffer>", expect_length: int | None = None
) -> memoryview:
    """Check the record at ``offset`` in ``data`` and return a view of its payload.

    Args:
        data: the bytes of (part of) an event file, starting at file offset 0 of that part.
        offset: where the record header starts in ``data``.
        name: the file's name, for error messages.
        expect_length: the whole record's length as an index file states it, if known.

    Raises:
        CorruptRecordError: header CRC, footer, or length disagree, or the data ends inside the record.
    """
    buf = memoryview(data).cast("B") if not isinstance(data, memoryview) else data
    if offset < 0 or offset + HEADER_SIZE > len(buf):
        raise CorruptRecordError(name, offset, f"record header lies beyond the end of the data ({len(buf)} bytes)")
    length = _check_header(buf, offset, name)
    end = offset + OVERHEAD + length
    if expect_length is not None and expect_length != OVERHEAD + length:
        raise CorruptRecordError(
            name, offset, f"record is {OVERHEAD + length} bytes but the index says {expect_length}"
        )
    if end > len(buf):
        raise CorruptRecordError(
            name, offset, f"record of {OVERHEAD + length} bytes is truncated: only {len(buf) - offset} bytes present"
        )
    _check_footer(buf, offset, length, name)
    return buf[offset + HEADER_SIZE : offset + HEADER_SIZE + length]


def scan_records(data: Buffer, *, name: str = "<buffer>", start: int = 0) -> tuple[list[RecordSpan], int]:
    """Find the complete records in ``data`` from ``start`` on.

    A short tail (a writer mid-append) is not data: scanning stops before it. Returns the spans and
    the offset where the next complete record would start, so a caller can resume from there once
    more bytes have arrived.

    Raises:
        CorruptRecordError: a complete record fails its checks (names the file and byte offset).
    """
    buf = memoryview(data).cast("B") if not isinstance(data, memoryview) else data
    spans: list[RecordSpan] = []
    offset = start
    size = len(buf)
    while offset + HEADER_SIZE <= size:
        length = _check_header(buf, offset, name)
        end = offset + OVERHEAD + length
        if end > size:
            break  # truncated tail: not (yet) a record
        _check_footer(buf, offset, length, name)
        spans.append(RecordSpan(offset, OVERHEAD + length))
        offset = end
    return spans, offset


def iter_records(data: Buffer, *, name: str = "<buffer>", start: int = 0) -> Iterator[memoryview]:
    """Yield the payload of every complete record in ``data``; stop silently at a short tail."""
    buf = memoryview(data).cast("B") if not isinstance(data, memoryview) else data
    spans, _ = scan_records(buf, name=name, start=start)
    for span in spans:
        yield buf[span.payload_offset : span.payload_offset + span.payload_length]


__all__ = [
    "FOOTER_SIZE",
    "HEADER_SIZE",
    "MAGIC_FOOTER",
    "OVERHEAD",
    "RecordSpan",
    "crc32c",
    "encode_record",
    "iter_records",
    "masked_crc32c",
    "read_record",
    "record_footer",
    "record_header",
    "scan_records",
]
