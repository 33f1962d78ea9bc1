"""Many tensor records of one wire layout checked and decoded at once, with numpy.

The records a tensor gets at different steps differ only in a few places (see
:mod:`sdk_ext.format.events` for the payload)::

    record   <u64 n> <u32 masked crc of n>  payload  <u32 footer>
    payload  09 <8 bytes wall_time> [10 <varint step>] 2a <varint> 0a <varint>  LAYOUT  content  metadata

``LAYOUT`` (from the value's tag to the start of ``tensor_content``) is the same for every record
with the same tag, dtype and shape: :class:`~sdk_ext.format.record_values.RecordDecoder` remembers
it per tensor. The 12 header bytes depend only on the record's length, and the footer of
``events/`` records is a constant. So for a batch of records laid back to back in one buffer,
this module finds which of them have a given layout with a handful of array operations per batch
(not per record), then copies their contents into one fresh ``(records, *shape)`` array.

The checks are exactly those of ``RecordDecoder.decode``'s fast path: the header is the one a
writer produces for the record's length (which the index states), the footer is smdebug's
constant, the payload starts with smdebug's field order and holds the layout's bytes where that
walk puts them, and the content ends inside the payload. A record that passes is decoded to the
same bytes as one at a time; anything else (a real CRC footer, another layout, a damaged record) is
reported as not matched, and the caller decodes it one at a time, which raises the precise
CorruptRecordError for a damaged one.
"""

from __future__ import annotations

import functools
import struct
from typing import Any

import numpy as np

from sdk_ext.format.record_values import Layout
from sdk_ext.format.records import HEADER_SIZE, MAGIC_FOOTER, OVERHEAD, masked_crc32c

_U8, _U4 = np.dtype("<u8"), np.dtype("<u4")
_MAX_VARINT = 10  # bytes of a 64-bit varint
#: the walk reads at most this far past a record's start before the layout's bytes (header,
#: wall_time, step and two lengths at their longest, the three keys)
_WALK = HEADER_SIZE + 9 + 3 * (_MAX_VARINT + 1) + 3
_ONES = np.uint64(0x0101010101010101)  # eight True bytes
#: record shapes tried in one pass before the walk decides the rest (see match_layout)
_SHAPES = 3

Int64s = np.ndarray[Any, np.dtype[np.int64]]
Bytes = np.ndarray[Any, np.dtype[np.uint8]]
Bools = np.ndarray[Any, np.dtype[np.bool_]]


def _at(buf: Bytes, dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """Element ``k`` is the ``dtype`` value (or ``dtype`` bytes) stored at ``buf[k:]``: a view, unaligned."""
    view: np.ndarray[Any, Any] = np.ndarray((buf.size - dtype.itemsize + 1,), dtype, buf, 0, (1,))
    return view


@functools.lru_cache(maxsize=4096)
def _length_crc(payload_length: int) -> int:
    return masked_crc32c(struct.pack("<Q", payload_length))


def _length_crcs(lengths: Int64s) -> np.ndarray[Any, np.dtype[np.uint32]]:
    """The header CRC a record of each length carries (few distinct lengths: one CRC each)."""
    low = int(lengths.min())
    high = int(lengths.max())
    is_low = lengths == low
    if (is_low | (lengths == high)).all():  # two lengths (a step's varint or digits grew): the usual case
        crcs: np.ndarray[Any, np.dtype[np.uint32]] = np.where(
            is_low, np.uint32(_length_crc(low - OVERHEAD)), np.uint32(_length_crc(high - OVERHEAD))
        )
        return crcs
    span = high - low + 1
    if span <= 4 * lengths.size + 64:
        present = np.zeros(span, bool)
        present[lengths - low] = True
        table = np.zeros(span, np.uint32)
        for k in np.flatnonzero(present).tolist():
            table[k] = _length_crc(k + low - OVERHEAD)
        return table[lengths - low]
    return np.fromiter((_length_crc(n - OVERHEAD) for n in lengths.tolist()), np.uint32, lengths.size)


def _prefix_matches(buf: Bytes, at: Int64s, prefix: bytes) -> Bools:
    """Whether ``buf[at[k] : at[k]+len(prefix)] == prefix``, compared eight bytes at a time.

    Rows are read 64 bytes at a time (the bytes past the prefix are masked out), so the eight
    per-word results of a row fit one uint64 that is all ones exactly when every word matched.
    """
    span = -(-len(prefix) // 64) * 64
    rows = _at(buf, np.dtype((np.void, span)))[at].view(_U8).reshape(at.size, span // 8)
    padded = np.zeros(span, np.uint8)
    padded[: len(prefix)] = np.frombuffer(prefix, np.uint8)
    mask = np.zeros(span, np.uint8)
    mask[: len(prefix)] = 0xFF
    words_equal = (rows & mask.view(_U8)) == padded.view(_U8)
    return (words_equal.view(_U8) == _ONES).all(axis=1)  # type: ignore[no-any-return]


def match_layout(buf: Bytes, starts: Int64s, lengths: Int64s, layout: Layout) -> tuple[Int64s, Int64s]:
    """Which of the records ``buf[starts[k] : starts[k]+lengths[k]]`` have ``layout``, and where their content is.

    Args:
        buf: the records (and possibly other bytes), as a 1-D uint8 array.
        starts, lengths: each record's place in ``buf``.
        layout: a layout learned by ``RecordDecoder`` (bytes from the tag to the content, dtype,
            shape, content size).

    Returns:
        ``(matched, content_starts)``: the positions (into ``starts``) of the records that pass
        every check and have the layout, in order, and where each one's content starts in ``buf``.
        A record too close to the end of ``buf`` for the reads below is reported as not matched.
    """
    prefix, _, _, nbytes = layout
    if not starts.size:
        return starts, starts
    span = -(-len(prefix) // 64) * 64
    width = -(-(_WALK + span) // 8) * 8  # what the checks below read of a record's start
    inside = (starts >= 0) & (lengths >= OVERHEAD) & (starts + np.maximum(lengths, width) <= buf.size)
    if not inside.all():
        chosen = np.flatnonzero(inside)
        if not chosen.size:
            return chosen, chosen
        matched, content = match_layout(buf, starts[chosen], lengths[chosen], layout)
        return chosen[matched], content
    # The records' first bytes, copied side by side: one pass over scattered memory, then the walk
    # runs on a small array that stays in cache.
    heads = _at(buf, np.dtype((np.void, width)))[starts].view(np.uint8)
    ok = heads.view(_U8)[:: width // 8] == (lengths - OVERHEAD).astype(np.uint64)
    low = int(lengths.min())
    if low == int(lengths.max()):  # the usual case: a tensor's records all have one length
        ok &= heads.view(_U4)[2 :: width // 4] == _length_crc(low - OVERHEAD)
    else:
        ok &= heads.view(_U4)[2 :: width // 4] == _length_crcs(lengths)
    p_end = starts + lengths - 4
    ok &= _at(buf, _U4)[p_end] == MAGIC_FOOTER
    # Most records are laid out alike: the walk below then ends where a typical one's does, so comparing
    # the bytes it looks at (masked: a varint's continuation bits, the keys, the layout) with that one's
    # decides them in one pass. The shape is taken from the last record (a trial's first step, 0, has no
    # step field: it is the odd one), then from the first left over, twice at most; the rest take the walk.
    n = starts.size
    rows = heads.view(_U8).reshape(n, width // 8)
    content = np.zeros(n, np.int64)
    left = None  # positions not laid out like any shape tried yet (None: all of them)
    for _ in range(_SHAPES):
        pick = n - 1 if left is None else int(left[0])
        shape = _shape_of(heads[pick * width : (pick + 1) * width], prefix)
        if shape is None:
            break
        pattern, mask, at = shape
        if left is None:
            alike = ((rows[:, : pattern.size] & mask) == pattern).all(axis=1)
            if alike.all():
                offset = at + len(prefix)
                ok &= lengths - 4 >= offset + nbytes  # the content ends inside the payload
                matched = np.flatnonzero(ok)
                return matched, starts[matched] + offset
            content[alike] = starts[alike] + at + len(prefix)
            left = np.flatnonzero(~alike)
        else:
            alike = ((rows[left, : pattern.size] & mask) == pattern).all(axis=1)
            content[left[alike]] = starts[left[alike]] + at + len(prefix)
            left = left[~alike]
        if not left.size:
            break
    if left is None:
        left = np.arange(n)
    if left.size:
        rest_ok, rest_content = _walk_heads(heads.reshape(n, width)[left].reshape(-1), width, starts[left], prefix)
        content[left] = rest_content
        ok[left] &= rest_ok
    ok &= content + nbytes <= p_end
    matched = np.flatnonzero(ok)
    return matched, content[matched]


Shape = tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], int]
#: (head size, layout bytes, the walk's key positions and varint ends) -> shape: records of one tensor
#: have a few shapes, so a shape is built once
_SHAPE_CACHE: dict[tuple[Any, ...], Shape | None] = {}


def _shape_of(head: Bytes, prefix: bytes) -> Shape | None:
    """What :func:`_walk_heads` looks at in one record's first bytes ``head``, as ``(pattern, mask, at)``:
    a record whose bytes equal ``pattern`` where ``mask`` is set (as 64-bit words) is walked exactly
    as this one is, to the layout's bytes at ``at`` (which the pattern holds too); None if this one
    does not walk to them."""
    h = head.tobytes()
    # the walk's turns (where the keys are, where each varint ends) decide the shape: look them up first
    turns: list[int] = []
    i = HEADER_SIZE
    size = len(h)
    if h[i] == 0x09:
        i += 9
    for key in (0x10, 0x2A, 0x0A):
        if i >= size:
            turns = []
            break
        turns.append(h[i])
        if h[i] != key:
            if key == 0x10:
                continue  # no step: the summary key is here
            break
        i += 1
        while i < size and h[i] & 0x80:
            i += 1
        turns.append(i)
        i += 1
    cache_key = (size, prefix, h[HEADER_SIZE] == 0x09, *turns)
    if cache_key in _SHAPE_CACHE:
        found = _SHAPE_CACHE[cache_key]
        if found is None or h[found[2] : found[2] + len(prefix)] == prefix:
            return found
        return _build_shape(h, prefix)
    built = _build_shape(h, prefix)
    if len(_SHAPE_CACHE) > 4096:
        _SHAPE_CACHE.clear()
    _SHAPE_CACHE[cache_key] = built
    return built


def _build_shape(h: bytes, prefix: bytes) -> Shape | None:
    """:func:`_shape_of`, worked out."""
    size = len(h)
    pattern = bytearray(size)
    mask = bytearray(size)

    def fixed(i: int, value: int) -> None:
        pattern[i], mask[i] = value, 0xFF

    def varint(i: int) -> int | None:
        """Mark the varint at ``i``: its continuation bits; the index of its last byte (None: too long)."""
        for _ in range(_MAX_VARINT):
            if i >= size:
                return None
            mask[i] = 0x80
            if not h[i] & 0x80:
                return i
            pattern[i] = 0x80
            i += 1
        if i >= size or h[i] & 0x80:
            return None
        mask[i] = 0x80
        return i

    i = HEADER_SIZE
    if h[i] == 0x09:  # wall_time; a record without it has 0x10 or 0x2A here, so never 0x09
        fixed(i, 0x09)
        i += 9
    if h[i] == 0x10:  # step; a record without it has 0x2A here
        fixed(i, 0x10)
        last = varint(i + 1)
        if last is None:
            return None
        i = last + 1
    if i + 1 >= size or h[i] != 0x2A:  # summary
        return None
    fixed(i, 0x2A)
    last = varint(i + 1)
    if last is None or last + 2 >= size or h[last + 1] != 0x0A:  # its first value
        return None
    fixed(last + 1, 0x0A)
    last = varint(last + 2)
    if last is None:
        return None
    at = last + 1
    if at + len(prefix) > size or h[at : at + len(prefix)] != prefix:
        return None
    pattern[at : at + len(prefix)] = prefix
    mask[at : at + len(prefix)] = b"\xff" * len(prefix)
    words = -(-(at + len(prefix)) // 8)
    return (np.frombuffer(bytes(pattern[: words * 8]), _U8), np.frombuffer(bytes(mask[: words * 8]), _U8), at)


def _walk_heads(heads: Bytes, width: int, starts: Int64s, prefix: bytes) -> tuple[Bools, Int64s]:
    """Walk each record's first bytes (``heads``: ``width`` bytes per record) from its payload's start to
    the layout's bytes, in smdebug's field order; ``(ok, content starts)`` (content: in ``buf``, at
    ``starts`` plus the walk plus the layout's bytes)."""
    ok = np.ones(starts.size, bool)

    def skip_varint(i: Int64s, where: Bools | None = None) -> Int64s:
        """Advance ``i`` over continuation bytes (``while heads[i] & 0x80: i += 1``) where ``where``."""
        nonlocal ok
        for _ in range(_MAX_VARINT):
            more = heads[i] >= 0x80
            if where is not None:
                more &= where
            if not more.any():
                return i
            i = i + more
        ok &= heads[i] < 0x80  # longer than any varint: not smdebug's
        return i

    row = np.arange(0, starts.size * width, width, dtype=np.int64)  # each record's first byte in heads
    i = row + HEADER_SIZE
    i += 9 * (heads[i] == 0x09)  # wall_time (omitted when 0)
    has_step = heads[i] == 0x10  # step (omitted when 0)
    i += has_step
    i = skip_varint(i, has_step) + has_step
    ok &= heads[i] == 0x2A  # summary
    i = skip_varint(i + 1)
    ok &= heads[i + 1] == 0x0A  # its first value
    i = skip_varint(i + 2) + 1
    content = starts + (i - row) + len(prefix)
    if prefix:
        ok &= _prefix_matches(heads, i, prefix)
    return ok, content


def gather_contents(buf: Bytes, content_starts: Int64s, layout: Layout) -> np.ndarray[Any, Any]:
    """A fresh writable ``(len(content_starts), *shape)`` array of the contents at ``content_starts``."""
    _, dtype, shape, nbytes = layout
    if not content_starts.size:
        return np.empty((0, *shape), dtype)
    block = _at(buf, np.dtype((np.void, nbytes)))[content_starts]  # fancy indexing copies: owns its memory
    return block.view(dtype).reshape((len(content_starts), *shape))


__all__ = ["gather_contents", "match_layout"]
