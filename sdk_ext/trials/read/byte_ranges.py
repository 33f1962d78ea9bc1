"""Reading just the byte ranges that hold one tensor's records, for trials larger than the file cache.

A save-all trial of a real model holds hundreds to thousands of tensors per step, so its event files
together are larger than any cache: reading a tensor over all steps by whole files would read the
whole trial once per tensor. The index gives each record's offset and length, so only those bytes
are needed. Two ways to get them, both into one new array the batch decoder (:mod:`sdk_ext.trials.read.many_steps`)
checks and copies a layout at a time:

* a **slab**: the same bytes ``[lo, lo + window + MARGIN)`` of every file of a step plan, one row
  per file (windows do not overlap; a record starting in one ends in its row's margin). A step's records lie in write order and every step repeats its layout, so a tensor's
  records sit at (nearly) the same offset in every file, and the next tensors' right after them:
  one slab serves all the tensors whose records fall in its window, at one copy per file rather
  than one per record. Slabs are kept, least recently used out, within ``budget`` bytes; one slab
  is at most ``slab_bytes``.
* **records one by one** (:meth:`Slabs.gather`), when a slab would be too narrow (very many files)
  or a tensor's records are not in one window.

Local files are mapped (``Storage.map``) once and kept mapped, so a range costs a copy and no
system call; elsewhere (S3) ranges go out in one ``read_many`` (concurrent ranged GETs, ranges of
one object coalesced). A mapped file whose index gives checksums is checked whole once, when it is
mapped (``whole_ok``); the files whose bytes were handed out without that check (read by range, or
failing it) are in ``unverified``, and the caller checks their records one by one. A missing or short file leaves its rows marked not present: the caller reads
those records one at a time, which waits for the file or says why not.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sdk_ext.exceptions import StorageError, StorageNotFound
from sdk_ext.storage import MemoryMaps, ReadRequest, Storage

#: zero bytes after the rows, so that the batch decoder's fixed reach past a record start stays inside
PAD = 512
#: the narrowest window worth a slab (below this, records are gathered one by one)
MIN_WINDOW = 4096
#: a row holds its window and this much more, so that a record starting in the window ends in the row
MARGIN = 16 << 10
#: files kept mapped (half of Linux's default limit of 65530 mappings per process); files past this
#: are read range by range instead: a scan through more files than this would otherwise map every
#: file again for every tensor
MAPS = 32768

Array = np.ndarray[Any, Any]
Ints = np.ndarray[Any, np.dtype[np.int64]]


class Slabs:
    """Slabs and gathered records of one trial's event files (see the module docstring)."""

    def __init__(
        self,
        storage: Storage,
        maps: MemoryMaps | None,
        *,
        budget: int,
        slab_bytes: int,
        whole_ok: Callable[[str, memoryview], bool] = lambda key, data: True,
        checked: Callable[[str], bool] = lambda key: False,
    ) -> None:
        self._whole_ok = whole_ok  # whether a whole (mapped) file passes its checksum, or has none
        self._checked = checked  # whether an index gives checksums for a file
        #: files with checksums whose bytes were handed out unchecked: their records need checking one by one
        self.unverified: set[str] = set()
        self._storage = storage
        self._map = maps.map if maps is not None else None
        self._maps: dict[str, memoryview] = {}
        self._unmappable = False  # mapping failed once (limits): files are read range by range
        self.budget = budget
        self.slab_bytes = slab_bytes
        self._slabs: OrderedDict[tuple[int, int, int], tuple[object, Array, Ints]] = OrderedDict()
        self._bytes = 0
        self._spare: Array | None = None  # the memory of the last slab let go, reused by the next of its size
        self.requests = 0  # files mapped or ranges requested, for benchmarks and tests
        self.filled = 0  # slabs made, for benchmarks and tests

    def window(self, files: int) -> int:
        """The window of a slab over ``files`` files (a row holds it and ``MARGIN``), or 0 if too narrow."""
        window = self.slab_bytes // max(files, 1) // MIN_WINDOW * MIN_WINDOW - MARGIN
        return window if window >= MIN_WINDOW else 0

    def _mapped(self, key: str) -> memoryview | None:
        """The file mapped; None if it does not exist, or past ``MAPS`` files, or when mapping fails
        (then :meth:`_range` reads it range by range)."""
        m = self._maps.get(key)
        if m is None:
            assert self._map is not None
            self.requests += 1
            if len(self._maps) < MAPS and not self._unmappable:
                try:
                    mapped: memoryview = self._map(key)
                except StorageNotFound:
                    return None
                except StorageError:  # out of mappings or address space: read ranges from here on
                    self._unmappable = True
                else:
                    self._maps[key] = mapped
                    if not self._whole_ok(key, mapped):
                        self.unverified.add(key)
                    return mapped
            if self._checked(key):
                self.unverified.add(key)  # read range by range from here on
            return None
        return m

    def _range(self, key: str, start: int, length: int) -> bytes | None:
        """Bytes ``[start, start+length)`` of ``key`` (fewer at its end) without mapping it; None if missing."""
        self.requests += 1
        try:
            return self._storage.read(key, start=start, length=length)
        except StorageNotFound:
            return None

    def slab(self, owner: object, keys: Sequence[str | None], lo: int, row: int) -> tuple[Array, Ints]:
        """Bytes ``[lo, lo + row)`` of each file of ``keys`` as the rows of one array (``row`` bytes apart,
        ``PAD`` zero bytes after the last), and how many bytes of each row the file holds.

        Slabs are kept per ``owner`` (a step plan: the same files in the same order) and window.
        """
        tag = (id(owner), lo, row)
        hit = self._slabs.get(tag)
        if hit is not None and hit[0] is owner:
            self._slabs.move_to_end(tag)
            return hit[1], hit[2]
        n = len(keys)
        spare, self._spare = self._spare, None
        # fresh memory costs a page fault per 4 KiB on first touch: reuse the last slab's when it fits
        array = spare if spare is not None and spare.size == n * row + PAD else np.empty(n * row + PAD, np.uint8)
        array[n * row :] = 0
        have: Ints = np.zeros(n, np.int64)
        view = array.data
        if self._map is not None:
            for i, key in enumerate(keys):
                if key is None:
                    continue
                m = self._mapped(key)
                if m is not None:
                    got = max(0, min(row, len(m) - lo))
                    view[i * row : i * row + got] = m[lo : lo + got]
                else:  # not mapped (limits), or missing
                    data = self._range(key, lo, row) or b""
                    got = len(data)
                    view[i * row : i * row + got] = data
                have[i] = got
        else:
            wanted = [i for i, key in enumerate(keys) if key is not None]
            self.unverified.update(k for k in keys if k is not None and self._checked(k))
            self.requests += len(wanted)
            try:
                results: list[bytes] = self._storage.read_many([ReadRequest(keys[i], lo, row) for i in wanted])  # type: ignore[arg-type]
            except StorageNotFound:
                results = [b""] * len(wanted)  # some file is missing: every record of the slab is read alone
            for i, data in zip(wanted, results):
                view[i * row : i * row + len(data)] = data
                have[i] = len(data)
        self.filled += 1
        if array.nbytes <= self.budget:
            self._slabs[tag] = (owner, array, have)
            self._bytes += array.nbytes
            while self._bytes > self.budget:
                _, (_, old, _) = self._slabs.popitem(last=False)
                self._bytes -= old.nbytes
                self._spare = old  # nothing handed out refers to a slab: values are copies
        return array, have

    def gather(self, records: Sequence[tuple[str, int, int]]) -> tuple[Array, Ints, list[bool]]:
        """The records ``(event file key, start, length)`` back to back in one new array.

        Returns ``(array, where, ok)``: ``where[k]`` is record k's offset in the array (which ends
        with ``PAD`` zero bytes), ``ok[k]`` whether all of its bytes were there.
        """
        lengths = np.fromiter((n for _, _, n in records), np.int64, len(records))
        where: Ints = np.zeros(len(records), np.int64)
        np.cumsum(lengths[:-1], out=where[1:])
        total = int(lengths.sum())
        array = np.empty(total + PAD, np.uint8)
        array[total:] = 0
        view = array.data
        ok = [False] * len(records)
        if self._map is not None:
            offset = 0
            maps = self._maps
            for k, (key, start, length) in enumerate(records):
                m = maps.get(key) or self._mapped(key)
                if m is not None:
                    if start + length <= len(m):
                        view[offset : offset + length] = m[start : start + length]
                        ok[k] = True
                    else:  # short: not kept, the next read maps it again
                        maps.pop(key, None)
                else:  # not mapped (limits), or missing
                    data = self._range(key, start, length)
                    if data is not None and len(data) == length:
                        view[offset : offset + length] = data
                        ok[k] = True
                offset += length
            return array, where, ok
        self.requests += len(records)
        self.unverified.update(k for k, _, _ in records if self._checked(k))
        try:
            results: list[bytes] = self._storage.read_many([ReadRequest(k, s, n) for k, s, n in records])
        except StorageNotFound:
            return array, where, ok
        for k, data in enumerate(results):
            if len(data) == records[k][2]:
                at = int(where[k])
                view[at : at + len(data)] = data
                ok[k] = True
        return array, where, ok

    def clear(self) -> None:
        self._maps.clear()
        self._slabs.clear()
        self._bytes = 0
        self._spare = None


__all__ = ["MIN_WINDOW", "PAD", "Slabs"]
