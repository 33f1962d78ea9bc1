"""Column-wise decoding of system-metric JSON lines with numpy: no Python object per line.

A line is decoded here only when it has SageMaker's shape (see :mod:`sdk_ext.format.profiler_records`)::

    {"Type":"cpu","Name":"cpu21","Dimension":"CPUUtilization","Value":0.83,"NodeId":"algo-1","Timestamp":1591748169.2323716}

that is: the six keys in this order, at most one space after each ``:`` and ``,``, string values
without ``:``, ``\\n``-ended, no blank lines. For such lines the result equals ``json.loads`` line by line
(strings through ``json``, numbers by numpy's correctly rounded conversion, as ``float(text)``); any other input returns None and the caller
decodes line by line. How: newline and colon positions give each line's six fields; the key literals,
quotes and commas are checked at their places for every line; numbers are converted column-wise; a
line's series (type, name, dimension, node) is grouped by a hash of its bytes, and every line is then
compared byte for byte with its group's first line, so a hash collision can only send the file to the
slow path, never merge two series.
"""

from __future__ import annotations

import json

import numpy as np
import numpy.typing as npt

_COLON, _QUOTE, _COMMA, _SPACE, _NEWLINE = 58, 34, 44, 32, 10
_KEYS = (b'"Type"', b'"Name"', b'"Dimension"', b'"Value"', b'"NodeId"', b'"Timestamp"')
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


def _windows(buffer: Bytes2D, width: int) -> Bytes2D:
    return np.lib.stride_tricks.sliding_window_view(buffer, width)


def _gather(padded: Bytes2D, start: IntArray, length: IntArray, width: int) -> Bytes2D:
    """Rows of ``width`` bytes from each ``start``, zeroed past ``length``."""
    rows = _windows(padded, width)[start]
    rows *= np.arange(width, dtype=np.int64) < length[:, None]
    return rows


def _at(padded: Bytes2D, start: IntArray, literal: bytes) -> bool:
    pattern = np.frombuffer(literal, dtype=np.uint8)
    return bool((_windows(padded, len(literal))[start] == pattern).all())


def _skip_space(a: Bytes2D, at: IntArray) -> IntArray:
    skipped: IntArray = at + (a[at] == _SPACE)
    return skipped


def _string_end(a: Bytes2D, next_key: IntArray) -> IntArray | None:
    """End (exclusive) of the string value before ``, "NextKey"``; None if the quote or comma is missing."""
    comma: IntArray = next_key - 1
    comma = comma - (a[comma] == _SPACE)
    if not ((a[comma] == _COMMA).all() and (a[comma - 1] == _QUOTE).all()):
        return None
    end: IntArray = comma - 1
    return end


_NUMBER_CHAR = np.zeros(256, dtype=bool)
_NUMBER_CHAR[np.frombuffer(b"0123456789.eE+-", dtype=np.uint8)] = True
_NUMBER_CHAR[0] = True  # the zeros past a number's end


def parse_numbers(padded: Bytes2D, start: IntArray, end: IntArray) -> npt.NDArray[np.float64] | None:
    """The JSON numbers at ``[start, end)``, each exactly ``float(text)``; None if one is not a number.

    numpy's bytes-to-float conversion is correctly rounded, as ``float()``; only JSON's number
    characters are let through to it, and a number must start with a digit or ``-``.
    """
    length = end - start
    if len(length) == 0:
        return np.empty(0, dtype=np.float64)
    if (length <= 0).any() or int(length.max()) > 40:
        return None
    width = int(length.max())
    chars = _gather(padded, start, length, width)
    lead = chars[:, 0]
    if not (_NUMBER_CHAR[chars].all() and (((lead - np.uint8(48)) < 10) | (lead == 45)).all()):
        return None
    try:
        return chars.view(f"S{width}").ravel().astype(np.float64)
    except ValueError:
        return None


def _group(rows: Bytes2D) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]] | None:
    """Group equal rows: (index of each group's first row, group of each row); None on a hash collision."""
    words = rows.view(np.uint64)
    digest = np.zeros(len(rows), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(words.shape[1]):
            digest ^= words[:, j]
            digest *= _FNV
            digest ^= digest >> np.uint64(29)
    # a writer repeats its series in one order each sample: then the groups are the first period
    period = np.flatnonzero(digest[1:] == digest[0])
    group: npt.NDArray[np.intp] | None = None
    if len(period):
        p = int(period[0]) + 1
        head = digest[:p]
        if (digest[p:] == np.resize(head, len(digest) - p)).all() and len(np.unique(head)) == p:
            first = np.arange(p, dtype=np.intp)
            group = np.resize(first, len(digest))
    if group is None:
        _, first, inverse = np.unique(digest, return_index=True, return_inverse=True)
        group = inverse.reshape(-1).astype(np.intp)
    if not (rows == rows[first[group]]).all():
        return None
    return first, group


def decode_regular(data: bytes, end: int) -> RegularLines | None:
    """Decode ``data[:end]`` (``\\n``-ended lines) if every line has SageMaker's shape, else None."""
    if end == 0 or data[end - 1] != _NEWLINE:
        return None
    a = np.frombuffer(data, dtype=np.uint8, count=end)
    ends = np.flatnonzero(a == _NEWLINE)
    n = len(ends)
    colon_at = np.flatnonzero(a == _COLON)
    if len(colon_at) != 6 * n:
        return None
    colons = colon_at.reshape(n, 6)
    starts = np.empty(n, dtype=np.int64)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    if not ((colons[:, 0] > starts).all() and (colons[:, 5] < ends).all()):
        return None  # a line without its six colons (a blank line, a colon inside a string)
    if not ((a[starts] == ord("{")).all() and (a[ends - 1] == ord("}")).all()):
        return None
    padded = np.concatenate([a, np.zeros(_PAD, dtype=np.uint8)])
    key_at = [colons[:, i] - len(key) for i, key in enumerate(_KEYS)]
    if (key_at[0] != starts + 1).any() or not all(
        _at(padded, k, key) for k, key in zip(key_at, _KEYS, strict=True)
    ):
        return None
    opens = [_skip_space(a, colons[:, i] + 1) for i in (0, 1, 2, 4)]
    if not all((a[o] == _QUOTE).all() for o in opens):
        return None
    closes = [_string_end(a, key_at[i]) for i in (1, 2, 3, 5)]
    value_end = key_at[4] - 1
    value_end = value_end - (a[value_end] == _SPACE)
    if any(c is None for c in closes) or not (a[value_end] == _COMMA).all():
        return None
    values = parse_numbers(padded, _skip_space(a, colons[:, 3] + 1), value_end)
    timestamps = parse_numbers(padded, _skip_space(a, colons[:, 5] + 1), ends - 1)
    if values is None or timestamps is None:
        return None
    # a line's series: its bytes from "{" to the Value key (type, name, dimension) and its node
    node_start, node_end = opens[3] + 1, closes[3]
    assert node_end is not None
    head_length, node_length = key_at[3] - starts, node_end - node_start
    width_head = -(-int(head_length.max()) // 8) * 8
    width_node = -(-max(int(node_length.max()), 1) // 8) * 8
    if width_head + width_node > _PAD * 8:
        return None
    rows = np.concatenate(
        [
            _gather(padded, starts, head_length, width_head),
            _gather(padded, node_start, node_length, width_node),
        ],
        axis=1,
    )
    grouping = _group(rows)
    if grouping is None:
        return None
    first, group = grouping
    groups: list[tuple[str, str, str, str]] = []
    spans = [(o + 1, c) for o, c in zip(opens, closes, strict=True)]
    for line in first.tolist():
        try:
            strings = [json.loads(data[lo[line] - 1 : hi[line] + 1]) for lo, hi in spans if hi is not None]
        except ValueError:
            return None
        if not all(isinstance(s, str) for s in strings):
            return None
        groups.append((strings[0], strings[1], strings[2], strings[3]))
    return RegularLines(groups, group, values, timestamps)


__all__ = ["RegularLines", "decode_regular", "parse_numbers"]
