"""Column-wise decoding of system-metric JSON lines with numpy: no Python object per line.

A line is decoded here only when it has SageMaker's shape (see :mod:`sdk_ext.format.profiler_records`)::

    {"Type":"cpu","Name":"cpu21","Dimension":"CPUUtilization","Value":0.83,"NodeId":"algo-1","Timestamp":1591748169.2323716}

that is: the six keys in this order, at most one space after each ``:`` and ``,``, string values
without ``:``, ``\\n``-ended, no blank lines. For such lines the result equals ``json.loads`` line by
line (strings through ``json``; numbers by numpy's correctly rounded conversion, as ``float(text)``);
any other input returns None and the caller decodes line by line. How: newline and colon positions give
each line's two numbers; the rest of a line (its bytes before the Value and between the two numbers)
is grouped by a hash, every line is compared byte for byte with its group's first line, and that one is
checked by ``json`` (keys, order, strings). So a series' lines are exact, and a hash collision can only
send the file to the slow path, never merge two series.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import numpy as np
import numpy.typing as npt

_COLON, _SPACE, _NEWLINE, _COMMA, _CLOSE = 58, 32, 10, 44, 125
_PAD = 64
_FNV = np.uint64(0x100000001B3)

IntArray = npt.NDArray[np.int64]
Bytes2D = npt.NDArray[np.uint8]


class RegularLines:
    """Decoded lines: per line its series group, value and timestamp; per group the four strings."""

    __slots__ = ("group", "groups", "timestamps", "values")

    def __init__(
        self,
        groups: list[tuple[str, str, str, str]],
        group: npt.NDArray[np.intp],
        values: npt.NDArray[np.float64],
        timestamps: npt.NDArray[np.float64],
    ) -> None:
        self.groups = groups  # (type, name, dimension, node) of each group
        self.group, self.values, self.timestamps = group, values, timestamps


def _rows_at(buffer: Bytes2D, start: IntArray, width: int) -> Bytes2D:
    """Rows of the ``width`` bytes from each ``start`` (zeros past the buffer's end): one gather, no copy
    of the buffer to pad it."""
    limit = buffer.size - width
    if not len(start) or int(start.max()) <= limit:
        if limit < 0:
            return np.zeros((len(start), width), dtype=np.uint8)
        rows: Bytes2D = _at_width(buffer, width)[start].view(np.uint8).reshape(-1, width)
        return rows
    out = np.zeros((len(start), width), dtype=np.uint8)
    inside = start <= limit
    if limit >= 0:
        out[inside] = _at_width(buffer, width)[start[inside]].view(np.uint8).reshape(-1, width)
    for k in np.flatnonzero(~inside).tolist():  # the last line's few rows
        tail = buffer[int(start[k]) :]
        out[k, : len(tail)] = tail
    return out


def _gather(buffer: Bytes2D, start: IntArray, length: IntArray, width: int) -> Bytes2D:
    """Rows of ``width`` bytes from each ``start``, zeroed past ``length``."""
    rows = _rows_at(buffer, start, width)
    rows *= _prefix_masks(width)[length]
    return rows


@functools.lru_cache(maxsize=64)
def _prefix_masks(width: int) -> Bytes2D:
    """Row ``k``: ``k`` ones, then zeros (a row gather of this is far cheaper than a broadcast compare)."""
    return np.tri(width + 1, width, -1, dtype=np.uint8)


def _skip_space(a: Bytes2D, at: IntArray) -> IntArray:
    skipped: IntArray = at + (a[at] == _SPACE)
    return skipped


_NUMBER_CHAR = np.zeros(256, dtype=bool)
_NUMBER_CHAR[np.frombuffer(b"0123456789.eE+-", dtype=np.uint8)] = True
_NUMBER_CHAR[0] = True  # the zeros past a number's end


def parse_numbers(
    buffer: Bytes2D, start: IntArray, end: IntArray, *, repeats: bool = False
) -> npt.NDArray[np.float64] | None:
    """The JSON numbers at ``[start, end)``, each exactly ``float(text)``; None if one is not a number.

    numpy's bytes-to-float conversion is correctly rounded, as ``float()``; only JSON's number
    characters are let through to it, and a number must start with a digit or ``-``. ``repeats``: most
    numbers equal the one before (a sample's lines share its timestamp): each run is converted once.
    """
    length = end - start
    n = len(length)
    if n == 0:
        return np.empty(0, dtype=np.float64)
    if (length <= 0).any() or int(length.max()) > 40:
        return None
    width = int(length.max())
    chars = _gather(buffer, start, length, width)
    if not repeats:
        return parse_numbers_text(chars)
    new = np.ones(n, dtype=bool)
    new[1:] = (chars[1:] != chars[:-1]).any(axis=1)
    if not new.all():
        distinct = chars[new]
        parsed = parse_numbers_text(distinct)
        if parsed is None:
            return None
        spread: npt.NDArray[np.float64] = parsed[np.cumsum(new) - 1]
        return spread
    return parse_numbers_text(chars)


def parse_numbers_text(chars: Bytes2D) -> npt.NDArray[np.float64] | None:
    """:func:`parse_numbers` of numbers already gathered one per row, zero-padded."""
    width = chars.shape[1]
    lead = chars[:, 0]
    if not (_NUMBER_CHAR[chars].all() and (((lead - np.uint8(48)) < 10) | (lead == 45)).all()):
        return None
    try:
        return chars.view(f"S{width}").ravel().astype(np.float64)
    except ValueError:
        return None


def _periodic(rows: Bytes2D) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]] | None:
    """A writer that repeats its series in one order each sample makes row ``i`` equal row ``i - p``:
    then the groups are the first ``p`` rows, found without hashing. None if the rows are not so."""
    again = np.flatnonzero((rows[1:] == rows[0]).all(axis=1))
    if not len(again):
        return None
    p = int(again[0]) + 1
    if not (rows[p:] == rows[:-p]).all():
        return None
    first = np.arange(p, dtype=np.intp)
    if len(np.unique(rows[:p].view(f"V{rows.shape[1]}").ravel())) != p:
        return None
    return first, np.resize(first, len(rows))


def _group(rows: Bytes2D) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]] | None:
    """Group equal rows: (index of each group's first row, group of each row); None on a hash collision."""
    periodic = _periodic(rows)
    if periodic is not None:
        return periodic
    words = rows.view(np.uint64)
    multipliers = (np.arange(1, words.shape[1] + 1, dtype=np.uint64) * _FNV) | np.uint64(1)
    with np.errstate(over="ignore"):
        digest = (words * multipliers).sum(axis=1, dtype=np.uint64)
        digest ^= digest >> np.uint64(29)
    _, first, inverse = np.unique(digest, return_index=True, return_inverse=True)
    group = inverse.reshape(-1).astype(np.intp)
    if not (rows == rows[first[group]]).all():
        return None  # two series with one digest: let the line-by-line path decide
    return first, group


_FIELDS = ["Type", "Name", "Dimension", "Value", "NodeId", "Timestamp"]


def _check_group(head: bytes | bytearray, tail: bytes | bytearray) -> tuple[str, str, str, str] | None:
    """The strings of a series whose lines read ``head`` <Value> ``tail`` <Timestamp> ``}``, if that is
    a JSON object with SageMaker's six keys in order and string values; else None."""
    try:
        obj = json.loads(head + b"0" + tail + b"0}")
    except ValueError:
        return None
    if not isinstance(obj, dict) or list(obj) != _FIELDS:
        return None
    strings = (obj["Type"], obj["Name"], obj["Dimension"], obj["NodeId"])
    if not all(isinstance(x, str) for x in strings):
        return None
    return strings


def decode_regular(data: bytes | bytearray, end: int) -> RegularLines | None:
    """Decode ``data[:end]`` (``\\n``-ended lines) if every line has SageMaker's shape, else None."""
    if end == 0 or data[end - 1] != _NEWLINE:
        return None
    a = np.frombuffer(data, dtype=np.uint8, count=end)
    if end > _PREFIX_BYTES:
        ends = np.flatnonzero(a == _NEWLINE)
        if len(ends) > 2 * _PREFIX_LINES:
            periodic = _decode_periodic(data, a, ends)
            if periodic is not None:
                return periodic
    scanned = _scan(data, a)
    if scanned is None:
        return None
    lines, _ = scanned
    return lines


#: lines the periodic decoder learns the series' order from (the general scan of them), and bytes below
#: which a file is too small for it to pay off
_PREFIX_LINES = 4096
_PREFIX_BYTES = 1 << 20
#: the most bytes a number may take (as :func:`parse_numbers` allows), and what most take at most
_NUMBER_WIDTH = 40
_SHORT_NUMBER = 16


def _decode_periodic(data: bytes | bytearray, a: Bytes2D, ends: IntArray) -> RegularLines | None:
    """:func:`decode_regular` for a file whose series repeat in one order, sample after sample (what a
    monitor writes): the general scan of the first :data:`_PREFIX_LINES` lines gives the order (``p``
    series) and each series' text around its two numbers; every later line ``i`` must then read, byte
    for byte, series ``i % p``'s text before its Value, a number, its text between the numbers, a
    number, ``}``. Found with a newline scan and, per series, two gathers and compares of exactly its
    text: a few passes over the file instead of the general scan's. None (use the general scan) if a
    line reads otherwise, so the result is the general scan's whenever this one gives one."""
    n = len(ends)
    k = _PREFIX_LINES
    prefix_end = int(ends[k - 1]) + 1
    scanned = _scan(data, a[:prefix_end])
    if scanned is None:
        return None
    head, (starts0, value_start0, value_end0, time_start0) = scanned
    p = len(head.groups)
    if p * 2 > k or not np.array_equal(head.group, np.resize(np.arange(p, dtype=np.intp), k)):
        return None  # not one series order repeated (the general scan decides)
    head_length = (value_start0 - starts0)[:p]
    mid_length = (time_start0 - value_end0)[:p]
    rest_ends = ends[k:]
    starts = np.empty(n - k, dtype=np.int64)
    starts[0] = prefix_end
    starts[1:] = rest_ends[:-1] + 1
    series = np.arange(k, n, dtype=np.intp) % p
    value_start = starts + head_length[series]
    # a Value ends at the first comma after its start (a number has none; the text after it starts with one):
    # looked for in the next 16 bytes, then, for the lines without one there, in the next 40
    value_end = _first_comma(a, value_start, _SHORT_NUMBER)
    longer = np.flatnonzero(value_end < 0)
    if len(longer):
        value_end[longer] = _first_comma(a, value_start[longer], _NUMBER_WIDTH)
        if (value_end[longer] < 0).any():
            return None
    time_start = value_end + mid_length[series]
    time_end = rest_ends - 1
    if not ((time_start < time_end).all() and (a[time_end] == _CLOSE).all()):
        return None
    # each line's text before its Value, and between its numbers, as its series' first line's: compared a
    # width at a time, whole periods of lines from a period's start (re-checking a few prefix lines) as a
    # (periods, series of that width, width) block against the series' texts, lines in file order
    # (gathers that walk the file, not one series' lines 27 KB apart); then the lines of the last period
    k0 = k // p * p
    periods = (n - k0) // p
    full = k0 + periods * p
    all_starts = np.concatenate([starts0, starts])
    all_value_end = np.concatenate([value_end0, value_end])
    period_base = k0 + np.arange(periods, dtype=np.intp)[:, None] * p
    tail = np.arange(full, n, dtype=np.intp)
    for at, begin, length in ((all_starts, starts0, head_length), (all_value_end, value_end0, mid_length)):
        for width in np.unique(length).tolist():
            which = np.flatnonzero(length == width)  # the series with text this wide
            texts = _rows_at(a, begin[which], width)
            block = _rows_at(a, at[(period_base + which).ravel()], width).reshape(periods, len(which), width)
            if not (block == texts).all():
                return None
    if len(tail):  # the last, partial period: each line against its series' text
        for at, begin, length in ((all_starts, starts0, head_length), (all_value_end, value_end0, mid_length)):
            for line in tail.tolist():
                s, width = line % p, int(length[line % p])
                if data[int(at[line]) : int(at[line]) + width] != data[int(begin[s]) : int(begin[s]) + width]:
                    return None
    values = parse_numbers(a, np.concatenate([value_start0, value_start]), np.concatenate([value_end0, value_end]))
    timestamps = parse_numbers(
        a, np.concatenate([time_start0, time_start]), np.concatenate([ends[:k] - 1, time_end]), repeats=True
    )
    if values is None or timestamps is None:
        return None
    return RegularLines(head.groups, np.resize(np.arange(p, dtype=np.intp), n), values, timestamps)


def _first_comma(a: Bytes2D, start: IntArray, width: int) -> IntArray:
    """The position of the first comma in the ``width`` bytes from each ``start``; -1 where there is none."""
    found = _rows_at(a, start, width) == _COMMA
    at = found.argmax(axis=1)
    hit = found.reshape(-1)[np.arange(len(start), dtype=np.intp) * width + at]
    out: IntArray = np.where(hit, start + at, -1)
    return out


def _at_width(buffer: Bytes2D, width: int) -> np.ndarray[Any, Any]:
    """Element ``k`` is the ``width`` bytes at ``buffer[k:]`` (a view; gathering from it copies them)."""
    view: np.ndarray[Any, Any] = np.ndarray((buffer.size - width + 1,), np.dtype((np.void, width)), buffer, 0, (1,))
    return view


def _scan(
    data: bytes | bytearray, a: Bytes2D
) -> tuple[RegularLines, tuple[IntArray, IntArray, IntArray, IntArray]] | None:
    """The general scan of ``a`` (``data``'s first bytes, ``\\n``-ended lines): the lines, and each line's
    start, Value start and end, and Timestamp start; None if a line does not have SageMaker's shape."""
    found = np.flatnonzero((a == _COLON) | (a == _NEWLINE))
    if len(found) % 7:
        return None
    n = len(found) // 7
    marks = found.reshape(n, 7)  # six colons, then the newline, per line
    ends, colons = marks[:, 6], marks[:, :6]
    if not ((a[ends] == _NEWLINE).all() and (a[colons] == _COLON).all()):
        return None  # a line without its six colons (a blank line, a colon inside a string)
    starts = np.empty(n, dtype=np.int64)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    if not ((a[starts] == ord("{")).all() and (a[ends - 1] == _CLOSE).all()):
        return None
    value_start = _skip_space(a, colons[:, 3] + 1)
    value_end = colons[:, 4] - len(b'"NodeId"') - 1
    value_end = value_end - (a[value_end] == _SPACE)
    time_start = _skip_space(a, colons[:, 5] + 1)
    values = parse_numbers(a, value_start, value_end)
    timestamps = parse_numbers(a, time_start, ends - 1, repeats=True)
    if values is None or timestamps is None:
        return None
    # a line's series: its bytes before the Value number and between the two numbers, grouped by hash
    # and compared byte for byte with its group's first line, whose bytes are then checked by json
    head_length, tail_length = value_start - starts, time_start - value_end
    width_head = -(-int(head_length.max()) // 8) * 8
    width_tail = -(-int(tail_length.max()) // 8) * 8
    if width_head + width_tail > _PAD * 8:
        return None
    rows = np.concatenate(
        [_gather(a, starts, head_length, width_head), _gather(a, value_end, tail_length, width_tail)],
        axis=1,
    )
    grouping = _group(rows)
    if grouping is None:
        return None
    first, group = grouping
    groups: list[tuple[str, str, str, str]] = []
    for line in first.tolist():
        head = data[starts[line] : value_start[line]]
        tail = data[value_end[line] : time_start[line]]
        strings = _check_group(head, tail)
        if strings is None:
            return None
        groups.append(strings)
    return RegularLines(groups, group, values, timestamps), (starts, value_start, value_end, time_start)


__all__ = ["RegularLines", "decode_regular", "parse_numbers"]
