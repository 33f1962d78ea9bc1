"""Storage in a dict, for tests and dry runs. Thread-safe; objects appear on commit."""

from __future__ import annotations

import builtins
import hashlib
import threading
from collections.abc import Iterable, Iterator, Sequence

from sdk_ext.exceptions import StorageNotFound
from sdk_ext.storage.base import Buffer, ObjectInfo, ReadRequest
from sdk_ext.storage.capabilities import Capabilities, Writes


class _MemoryWriter:
    def __init__(self, store: InMemoryStorage, key: str) -> None:
        self._store, self._key, self._parts = store, key, bytearray()

    def write(self, data: Buffer) -> None:
        self._parts += data

    def commit(self) -> None:
        self._store._put(self._key, bytes(self._parts))

    def abort(self) -> None:
        self._parts.clear()


class InMemoryStorage:
    def __init__(self, objects: dict[str, bytes] | None = None) -> None:
        self._objects: dict[str, bytes] = dict(objects or {})
        self._lock = threading.Lock()  # guards _objects

    @property
    def uri(self) -> str:
        return f"memory://{id(self):x}"

    def _put(self, key: str, data: bytes) -> None:
        with self._lock:
            self._objects[key] = data

    def list(self, prefix: str, *, start_after: str = "") -> Iterator[str]:
        with self._lock:
            keys = sorted(k for k in self._objects if k.startswith(prefix) and k > start_after)
        return iter(keys)

    def list_objects(self, prefix: str, *, start_after: str = "") -> Iterator[ObjectInfo]:
        """As :meth:`list`, with each object's size and an ETag (the MD5 of its bytes, as S3's for one PUT)."""
        with self._lock:
            found = sorted((k, v) for k, v in self._objects.items() if k.startswith(prefix) and k > start_after)
        return iter([ObjectInfo(k, len(v), hashlib.md5(v).hexdigest()) for k, v in found])  # noqa: S324 - not security

    def info(self, key: str) -> ObjectInfo | None:
        with self._lock:
            data = self._objects.get(key)
        return None if data is None else ObjectInfo(key, len(data), hashlib.md5(data).hexdigest())  # noqa: S324

    def capabilities(self) -> Capabilities:
        """Direct reads and listings with sizes and ETags; writes commit in place."""
        return Capabilities(Writes.DIRECT, direct_reads=self, listings=self)

    def read(self, key: str, *, start: int = 0, length: int | None = None) -> bytes:
        with self._lock:
            data = self._objects.get(key)
        if data is None:
            raise StorageNotFound(f"{self.uri}/{key}: no such object")
        return data[start:] if length is None else data[start : start + length]

    def read_many(self, requests: Sequence[ReadRequest]) -> builtins.list[bytes]:
        return [self.read(r.key, start=r.start, length=r.length) for r in requests]

    def exists(self, key: str) -> bool:
        with self._lock:
            return key in self._objects

    def write(self, key: str, data: Buffer | Iterable[Buffer]) -> None:
        if isinstance(data, (bytes, bytearray, memoryview)):
            self._put(key, bytes(data))
        else:
            self._put(key, b"".join(bytes(p) for p in data))

    def open_write(self, key: str) -> _MemoryWriter:
        return _MemoryWriter(self, key)

    def delete(self, key: str) -> None:
        with self._lock:
            self._objects.pop(key, None)

    def read_into(self, key: str, buffer: bytearray | memoryview, *, start: int = 0) -> int:
        """Fill ``buffer`` with the bytes of ``key`` from ``start`` on; return how many there were."""
        data = self.read(key, start=start, length=len(memoryview(buffer).cast("B")))
        memoryview(buffer).cast("B")[: len(data)] = data
        return len(data)

    def size(self, key: str) -> int:
        """Bytes ``key`` holds. Raises StorageNotFound if it does not exist."""
        return len(self.read(key))


__all__ = ["InMemoryStorage"]
