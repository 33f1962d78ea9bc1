"""The Storage protocol: where the bytes of a trial live. The only I/O boundary for trials and hooks.

Keys are ``/``-separated paths relative to the storage root (``index/000000000/000000000003_worker_0.json``).
Objects appear whole: a reader never sees part of an object that a writer is still producing.
A failure raises :class:`~sdk_ext.exceptions.StorageError`; an empty listing means "nothing there
yet", never "the listing failed".
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from sdk_ext.storage.capabilities import Capabilities

Buffer = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True)
class ReadRequest:
    """A byte range of one object; ``length=None`` reads to the end."""

    key: str
    start: int = 0
    length: int | None = None


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """What a listing says about one object: enough to tell whether a cached copy is current."""

    key: str
    size: int
    etag: str  # S3's ETag (quotes stripped); changes whenever the object is rewritten


@runtime_checkable
class ObjectWriter(Protocol):
    """An object being written. Nothing is visible under its key until :meth:`commit`."""

    def write(self, data: Buffer) -> None: ...

    def commit(self) -> None:
        """Make the whole object visible at once."""

    def abort(self) -> None:
        """Drop what was written; the key stays as it was."""


@runtime_checkable
class Storage(Protocol):
    """A trial root on some medium (local directory, S3 prefix, memory)."""

    @property
    def uri(self) -> str:
        """Where the root is, for messages (``/abs/path`` or ``s3://bucket/prefix``)."""

    def list(self, prefix: str, *, start_after: str = "") -> Iterator[str]:
        """Keys under ``prefix`` in lexicographic order, only those after ``start_after``.

        Temporary names of objects being written are not listed.
        """

    def read(self, key: str, *, start: int = 0, length: int | None = None) -> bytes:
        """Bytes ``[start, start+length)`` of ``key``. Raises StorageNotFound if it does not exist."""

    def read_many(self, requests: Sequence[ReadRequest]) -> builtins.list[bytes]:
        """Several reads, possibly concurrent; results in request order."""

    def exists(self, key: str) -> bool: ...

    def write(self, key: str, data: Buffer | Iterable[Buffer]) -> None:
        """Write a whole object atomically."""

    def open_write(self, key: str) -> ObjectWriter:
        """Start writing ``key`` piece by piece; it appears on ``commit()``."""

    def delete(self, key: str) -> None:
        """Remove ``key`` if it exists."""

    def capabilities(self) -> Capabilities:
        """What this storage can do beyond this protocol (:mod:`sdk_ext.storage.capabilities`)."""


def join_key(*parts: str) -> str:
    """Join key parts with single slashes."""
    return "/".join(p.strip("/") for p in parts if p.strip("/"))


__all__ = ["Buffer", "ObjectInfo", "ObjectWriter", "ReadRequest", "Storage", "join_key"]
