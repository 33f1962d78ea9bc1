"""Whole event files kept in memory, least recently used out, in chunks.

Files fetched together (a read-ahead batch, the files of a ``Tensor.values`` call) are stored back
to back in one ``bytes`` object, a chunk, so a batch decoder can look at records of many files in
one buffer (:mod:`sdk_ext.trials.read.many_steps`). A file read alone is a chunk of one. The chunk is the
unit of eviction: the budget counts exactly the bytes held. ``epoch`` changes whenever a file
leaves the cache, so a caller that noted where files were can tell whether that still holds.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

#: a chunk: files back to back, as bytes or a read-only memoryview (of memory read into directly)
Chunk = bytes | memoryview
#: where a cached file is: (chunk, offset of the file in it, file size, chunk number)
Entry = tuple[Chunk, int, int, int]


class FileCache:
    """Whole files by key, within ``budget`` bytes. Chunks bigger than the budget are not kept."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.files: dict[str, Entry] = {}
        self.epoch = 0  # bumped whenever a file leaves the cache
        self._chunks: OrderedDict[int, tuple[Chunk, list[str]]] = OrderedDict()  # least recently used first
        self._next = 0
        self._bytes = 0

    @property
    def chunk_limit(self) -> int:
        """Most bytes of files stored as one chunk: a batch larger than this goes in several."""
        return max(self.budget // 4, 1)

    def __contains__(self, key: object) -> bool:
        return key in self.files

    def __len__(self) -> int:
        return len(self.files)

    def get(self, key: str) -> Entry | None:
        """The file's entry (and it counts as used), or None."""
        entry = self.files.get(key)
        if entry is not None:
            self._chunks.move_to_end(entry[3])
        return entry

    def touch(self, number: int) -> None:
        """Count chunk ``number`` as just used."""
        if number in self._chunks:
            self._chunks.move_to_end(number)

    def chunk(self, number: int) -> Chunk | None:
        """The chunk numbered ``number``, if it is still cached."""
        found = self._chunks.get(number)
        return None if found is None else found[0]

    def add(self, files: Sequence[tuple[str, bytes]]) -> None:
        """Keep these whole files (``(key, bytes)``), as one chunk; files already cached are skipped."""
        seen: set[str] = set()
        items = []
        for key, data in files:
            if key not in self.files and key not in seen:
                seen.add(key)
                items.append((key, data))
        limit = self.chunk_limit
        group: list[tuple[str, bytes]] = []
        size = 0
        for key, data in items:
            if group and size + len(data) > limit:
                self._add_chunk(group)
                group, size = [], 0
            group.append((key, data))
            size += len(data)
        if group:
            self._add_chunk(group)

    def _add_chunk(self, items: list[tuple[str, bytes]]) -> None:
        chunk = items[0][1] if len(items) == 1 else b"".join(data for _, data in items)
        placed = []
        offset = 0
        for key, data in items:
            placed.append((key, offset, len(data)))
            offset += len(data)
        self.add_chunk(chunk, placed)

    def add_chunk(self, chunk: Chunk, placed: Sequence[tuple[str, int, int]]) -> None:
        """Keep ``chunk``, which holds the files ``placed`` (``(key, offset, size)``); cached keys are skipped."""
        placed = [p for p in placed if p[0] not in self.files]
        if not placed or len(chunk) > self.budget:
            return
        number = self._next
        self._next += 1
        for key, offset, size in placed:
            self.files[key] = (chunk, offset, size, number)
        self._chunks[number] = (chunk, [key for key, _, _ in placed])
        self._bytes += len(chunk)
        while self._bytes > self.budget:
            _, (old, keys) = self._chunks.popitem(last=False)
            self._bytes -= len(old)
            for key in keys:
                del self.files[key]
            self.epoch += 1

    def reserve(self, chunk: Chunk) -> int:
        """Keep ``chunk`` (counted whole) with no files yet: files go into it later (:meth:`place`).
        Returns its number; other chunks may leave the cache to make room."""
        number = self._next
        self._next += 1
        self._chunks[number] = (chunk, [])
        self._bytes += len(chunk)
        self._evict(keep=number)
        return number

    def place(self, number: int, placed: Sequence[tuple[str, int, int]]) -> bool:
        """Add the files ``placed`` (``(key, offset, size)``) of chunk ``number``, which :meth:`reserve`
        kept; False (nothing added) if that chunk has left the cache."""
        found = self._chunks.get(number)
        if found is None:
            return False
        chunk, keys = found
        for key, offset, size in placed:
            if key not in self.files:
                self.files[key] = (chunk, offset, size, number)
                keys.append(key)
        self._chunks.move_to_end(number)
        return True

    def _evict(self, keep: int) -> None:
        """Drop least recently used chunks, never ``keep``, while over the budget."""
        while self._bytes > self.budget and len(self._chunks) > 1:
            number = next(iter(self._chunks))
            if number == keep:
                self._chunks.move_to_end(number)
                continue
            old, keys = self._chunks.pop(number)
            self._bytes -= len(old)
            for key in keys:
                del self.files[key]
            self.epoch += 1

    def clear(self) -> None:
        if self.files:
            self.epoch += 1
        self.files.clear()
        self._chunks.clear()
        self._bytes = 0


__all__ = ["Chunk", "Entry", "FileCache"]
