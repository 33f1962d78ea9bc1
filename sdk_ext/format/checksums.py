"""Checksums sdk_ext adds to the index files it writes (smdebug writes none; see docs/FORMAT.md).

smdebug's event files carry a constant record footer where TFRecord has the payload's CRC, and its
reader refuses a record with a real one, so a flipped bit in a value reads back as data. The index
file is the one place a writer can say more without changing what smdebug reads: its ``meta``
object takes one more key (smdebug's reader looks up only ``mode``, ``mode_step`` and
``event_file_name``), written last in ``meta``::

    {"meta": {"mode": "TRAIN", "mode_step": 5, "event_file_name": "events/000000000005/000000000005_worker_0.tfevents",
              "sdk_ext_crc32c": "FFFFFFFFR1R1R1R1...RnRnRnRnIIIIIIII"}, "tensor_payload": [...], "shape_payload": [...]}

The value is 8 lowercase hex digits (a big-endian u32) per CRC-32C (Castagnoli), back to back:

* ``F``: of the event file's first ``E`` bytes, ``E`` the end of its last record per this index
  (the whole file, as sdk_ext writes it). Absent when the index names no event file (shapes only).
* ``R1 .. Rn``: of each whole record (header, payload, footer), in ``tensor_payload`` order.
  Absent with ``F``.
* ``I``: of the index document itself without those 8 digits, taken *from just after them to the
  end, then from the start to just before them* (``crc32c(after + before)``). Everything after the
  digits is ``"}, `` and the tensors' places, which repeat from step to step: a reader computes
  their CRC once and extends it over each step's own head.

A reader checks ``I`` before it trusts anything in the document, ``F`` when it holds a whole event
file, and ``R`` for a record read on its own (or to name the damaged tensors of a file failing
``F``). A document without the key (smdebug's, or sdk_ext's with checksums off) is read as before.
"""

from __future__ import annotations

import functools
import logging
import struct
from collections.abc import Callable
from typing import Protocol

import google_crc32c

from sdk_ext.exceptions import IndexReaderException

Buffer = bytes | bytearray | memoryview


def _agrees(candidate: Callable[[Buffer, int], int]) -> bool:
    """Whether ``candidate`` gives google_crc32c's answers on a few buffers that reach its vector loop,
    its tail, a continued CRC and an unaligned view (a few microseconds, once per process). A backend
    that picked a wrong code path on this CPU would otherwise write checksums no other reader accepts."""
    sample = (bytes(range(251)) * 17)[:4099]
    try:
        for data, start in ((sample, 0), (sample[:1000], 0x1234ABCD), (sample[3:4002], 7)):
            if int(candidate(memoryview(data), start)) != google_crc32c.extend(start, data):
                return False
    except Exception:  # noqa: BLE001 - a broken extension module: use the next one
        return False
    return True


def _fastest() -> tuple[str, Callable[[Buffer, int], int] | None]:
    """The fastest CRC-32C over any buffer (numpy arrays, memoryviews, mmaps; no copy) installed that
    agrees with google_crc32c (:func:`_agrees`), by name: ``crc32c_rs`` folds with carry-less multiplies
    (AVX-512 VPCLMULQDQ where the CPU has it: about 13 ms per GiB, against about 38 for ``crc32c``'s
    3-way CRC32 instruction), which is most of what verifying costs a reader of large records;
    ``crc32c`` where it has no wheel (Python 3.10), imported only then (its import takes about 20 ms)."""
    try:
        from crc32c_rs import crc32c as rs_crc

        if _agrees(rs_crc):
            return "crc32c_rs", rs_crc
        logging.getLogger(__name__).warning("sdk_ext: crc32c_rs disagrees with google_crc32c on this machine; "
                                            "checksums use the crc32c package instead")
    except ImportError:  # pragma: no cover - Python 3.10, or a platform without its wheel
        pass
    try:
        from crc32c import crc32c as icrar_crc

        if _agrees(icrar_crc):
            return "crc32c", icrar_crc
    except ImportError:  # pragma: no cover - google_crc32c takes bytes only: copy the rest first
        pass
    return "google_crc32c", None


class _Crc(Protocol):
    def __call__(self, data: Buffer, crc: int = 0, /) -> int: ...


def _crc_of_copy(data: Buffer, crc: int = 0, /) -> int:
    return int(google_crc32c.extend(crc, data if isinstance(data, bytes) else bytes(data)))


#: the package computing :func:`crc32c`
BACKEND, _any_buffer_crc = _fastest()
crc32c: _Crc = _any_buffer_crc if _any_buffer_crc is not None else _crc_of_copy  # type: ignore[assignment]
"""``crc32c(data, crc=0)``: CRC-32C of ``data`` (continuing ``crc``, the CRC of the bytes before it);
any contiguous buffer. The backend's function itself (it returns an int): the hook's writer calls it a
few times per record, so no Python wrapper sits in between."""

#: the ``meta`` key holding the checksums
KEY = "sdk_ext_crc32c"
_OPEN = b', "' + KEY.encode() + b'": "'  # what precedes the digits (json.dumps' separators)
_CLOSE = b'"}, '  # what follows them: the end of meta and the separator before tensor_payload
DIGITS = 8
_CLOSE_CRC = crc32c(_CLOSE)


_POLY = 0x82F63B78  # CRC-32C's polynomial, bit-reflected


def _multiply(a: int, b: int) -> int:
    """``a * b`` modulo CRC-32C's polynomial, both bit-reflected (x^0 is the top bit)."""
    product, bit = 0, 1 << 31
    while a:
        if a & bit:
            product ^= b
            a ^= bit
        bit >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1
    return product


def _powers_of_two() -> list[int]:
    """``x^(2^k)`` modulo the polynomial, k = 0..31."""
    power, powers = 1 << 30, []  # x^1
    for _ in range(32):
        powers.append(power)
        power = _multiply(power, power)
    return powers


_X_2K = _powers_of_two()


def _shift_by(length: int) -> int:
    """``x^(8 * length)`` modulo the polynomial: what appending ``length`` bytes does to a CRC."""
    power, k, n = 1 << 31, 3, length  # x^0; 2^3 bits per byte
    while n:
        if n & 1:
            power = _multiply(_X_2K[k & 31], power)
        n >>= 1
        k += 1
    return power


@functools.lru_cache(maxsize=256)  # a hook writes the same record lengths step after step
def _shifter(length: int) -> tuple[int, ...]:
    """Multiplication by ``x^(8 * length)`` as a table of 8 x 16 entries: entry ``16 * j + v`` is the
    product with ``v << 4 * j`` (the multiplication is linear: a CRC's product is the XOR of its nibbles')."""
    by_bit = [0] * 32
    value = _shift_by(length)
    for bit in range(31, -1, -1):  # bit 31 is x^0: the product itself; each lower bit one more factor x
        by_bit[bit] = value
        value = (value >> 1) ^ _POLY if value & 1 else value >> 1
    table = [0] * 128
    for j in range(8):
        base = 16 * j
        for v in range(1, 16):
            low = v & -v
            table[base + v] = table[base + (v ^ low)] ^ by_bit[4 * j + low.bit_length() - 1]
    return tuple(table)


def combine(crc1: int, crc2: int, length2: int) -> int:
    """The CRC-32C of ``A + B`` from ``crc1 = crc32c(A)``, ``crc2 = crc32c(B)`` and ``length2 = len(B)``,
    without reading either again (zlib's ``crc32_combine`` for this polynomial): about a microsecond
    for a length met before (tables cached by length), against about 35 us for one pass over a MiB."""
    t = _shifter(length2)
    return (t[crc1 & 15] ^ t[16 + (crc1 >> 4 & 15)] ^ t[32 + (crc1 >> 8 & 15)] ^ t[48 + (crc1 >> 12 & 15)]
            ^ t[64 + (crc1 >> 16 & 15)] ^ t[80 + (crc1 >> 20 & 15)] ^ t[96 + (crc1 >> 24 & 15)]
            ^ t[112 + (crc1 >> 28)] ^ crc2)


def extend_parts(crc: int, parts: list[bytes | memoryview]) -> int:
    """:func:`crc32c` of ``parts`` one after the other, continuing ``crc``."""
    for part in parts:
        crc = crc32c(part, crc)
    return crc


def _hex(values: list[int]) -> bytes:
    return struct.pack(f">{len(values)}I", *values).hex().encode()


def checksum_field(file_crc: int | None, record_crcs: list[int]) -> bytes:
    """The key and value to insert before the closing ``}`` of meta, with ``I`` still to come:
    ``, "sdk_ext_crc32c": "F R1..Rn`` (no closing quote); :func:`seal` finishes the document."""
    values = [] if file_crc is None else [file_crc, *record_crcs]
    return _OPEN + _hex(values)


def tail_crc(tail: bytes) -> int:
    """The CRC of what follows ``I``'s digits in a document whose tail (everything after meta) is ``tail``."""
    return crc32c(tail, _CLOSE_CRC)


def seal(before: bytes, tail: bytes, *, after_crc: int | None = None) -> bytes:
    """The head of a checksummed index document: ``before`` (the document up to ``I``'s digits, ending
    with :func:`checksum_field`) followed by ``I`` and ``"}, ``; ``tail`` is the rest of the document."""
    crc = crc32c(before, tail_crc(tail) if after_crc is None else after_crc)
    return before + b"%08x" % crc + _CLOSE


class IndexChecks:
    """The checksums of one index document: ``file`` (None without an event file) and ``records``
    (big-endian hex digits, ``DIGITS`` per record in ``tensor_payload`` order, parsed when asked)."""

    __slots__ = ("file", "records")

    def __init__(self, file: int | None, records: bytes) -> None:
        self.file, self.records = file, records

    @property
    def count(self) -> int:
        return len(self.records) // DIGITS

    def record(self, k: int) -> int:
        """The CRC of the ``k``-th record of ``tensor_payload``."""
        return int(self.records[k * DIGITS : (k + 1) * DIGITS], 16)


def _fail(key: str, what: str) -> IndexReaderException:
    return IndexReaderException(
        f"{key}: {what}; the index file is damaged (its sdk_ext checksum says so: do not trust its steps; "
        "restore it from a copy or re-run the job)",
        key=key,
    )


def locate(data: bytes) -> tuple[int, int] | None:
    """Where the checksum value lies in an index document, as ``(start, end)`` of its digits (end is
    the closing quote), or None if the document has no checksum key."""
    at = data.find(_OPEN)
    if at < 0:
        return None
    start = at + len(_OPEN)
    end = data.find(b'"', start)
    return (start, end) if end >= 0 else (start, len(data))


def check(value: bytes, before: Buffer, after_crc: int, *, key: str) -> IndexChecks:
    """Check a checksum ``value`` (the digits between the quotes) against its document.

    Args:
        value: the digits.
        before: the document up to the last ``DIGITS`` digits of ``value`` (``I``'s).
        after_crc: the CRC of what follows the closing quote (``tail_crc(tail)``, or :func:`crc32c` of it).
        key: the index file, for errors.

    Raises:
        IndexReaderException: the value is malformed or ``I`` does not match; names ``key``.
    """
    n = len(value)
    if n % DIGITS or n == 2 * DIGITS or not n:
        raise _fail(key, f"its checksum value {value[:40].decode(errors='replace')!r} is malformed")
    try:
        claimed = int(value[-DIGITS:], 16)
    except ValueError:
        raise _fail(key, "its checksum value is not hexadecimal") from None
    if value[-DIGITS:] != b"%08x" % claimed:  # the only spelling a writer makes (I does not cover its own)
        raise _fail(key, f"its checksum {value[-DIGITS:].decode(errors='replace')!r} is not 8 lowercase hex digits")
    if crc32c(before, after_crc) != claimed:
        raise _fail(key, f"its CRC-32C does not match its bytes (stored {claimed:08x})")
    # I covers the other digits: they are as written (hexadecimal), so they are parsed when used
    if n == DIGITS:
        return IndexChecks(None, b"")
    return IndexChecks(int(value[:DIGITS], 16), value[DIGITS:-DIGITS])


def verify(data: bytes, span: tuple[int, int], *, key: str) -> IndexChecks:
    """:func:`check` the checksum value at ``span`` (from :func:`locate`) of the whole document ``data``."""
    start, end = span
    view = memoryview(data)
    return check(data[start:end], view[: max(start, end - DIGITS)], crc32c(view[end:]), key=key)


def strip(data: bytes) -> bytes:
    """The document without the checksum key: exactly what smdebug's writer makes for the same step."""
    span = locate(data)
    if span is None:
        return data
    return data[: span[0] - len(_OPEN)] + data[span[1] + 1 :]


__all__ = [
    "BACKEND",
    "DIGITS",
    "KEY",
    "IndexChecks",
    "check",
    "checksum_field",
    "combine",
    "crc32c",
    "extend_parts",
    "locate",
    "seal",
    "strip",
    "tail_crc",
    "verify",
]
