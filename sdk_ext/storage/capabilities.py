"""What a storage can do beyond the :class:`~sdk_ext.storage.base.Storage` protocol, declared, never probed.

Every backend and every wrapper answers :meth:`Storage.capabilities` with one :class:`Capabilities`
value. Readers and writers ask once, where a trial or a writer is built, and keep the answer:

=================  ====================  ==========================================================
capability         declared by           used by
=================  ====================  ==========================================================
``direct_reads``   local dir, memory     trials.read: records read straight into arrays (no
                                         ``bytes`` in between), 16-fold read-ahead growth; every
                                         index file read at open (nothing is read on demand)
``memory_maps``    local dir             trials.read.byte_ranges: a file mapped once, a range is a copy
``listings``       S3, memory, cache     trials.index.consolidated (sizes confirm consolidated
                                         entries), the cache's validators (size + ETag)
``local_paths``    local dir             hooks.writer: files created ahead on a background thread
``writes``         all                   hooks.output: ``DIRECT`` commits in place (a step is whole
                                         before the next opens); ``SPOOLED`` goes through a local
                                         upload spool, so a slow or failing remote never blocks
                                         training
=================  ====================  ==========================================================

A wrapper states for each capability whether it forwards its inner storage's (and then the inner's
methods serve it, bypassing the wrapper, which is right for reads of immutable objects) or not.
Nothing is looked up by attribute name, so a wrapper cannot lose a capability by forgetting to
forward an attribute: it must say what it forwards. tests/functional/storage/test_capabilities.py checks
that every backend and wrapper declares exactly what it can do.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from sdk_ext.storage.base import ObjectInfo


class DirectReads(Protocol):
    """Reading straight into caller memory, and an object's size without reading it."""

    def read_into(self, key: str, buffer: bytearray | memoryview, *, start: int = 0) -> int:
        """Fill ``buffer`` with the bytes of ``key`` from ``start`` on; return how many there were."""

    def size(self, key: str) -> int:
        """Bytes ``key`` holds. Raises StorageNotFound if it does not exist."""


class MemoryMaps(Protocol):
    """An object as a read-only view of memory (a mapped file): ranges cost a copy, no call."""

    def map(self, key: str) -> memoryview: ...


class Listings(Protocol):
    """Listings that carry each object's size and ETag, and the same for one key."""

    def list_objects(self, prefix: str, *, start_after: str = "") -> Iterator[ObjectInfo]: ...

    def info(self, key: str) -> ObjectInfo | None:
        """What a listing would say of ``key``, or None if it does not exist."""


class LocalPaths(Protocol):
    """Objects that are files on this machine."""

    def path(self, key: str) -> str:
        """The filesystem path of ``key``."""


class Writes(enum.Enum):
    """How a writer should get its objects into the storage."""

    DIRECT = "direct"  #: commit in place: cheap and local (a directory, memory)
    SPOOLED = "spooled"  #: through a bounded local upload spool: remote, may be slow or down


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What one storage can do beyond the protocol: each field is the object serving it, or None."""

    writes: Writes
    direct_reads: DirectReads | None = None
    memory_maps: MemoryMaps | None = None
    listings: Listings | None = None
    local_paths: LocalPaths | None = None

    def names(self) -> frozenset[str]:
        """The optional capabilities present, by field name (for messages and tests)."""
        return frozenset(name for name in ("direct_reads", "memory_maps", "listings", "local_paths")
                         if getattr(self, name) is not None)


__all__ = ["Capabilities", "DirectReads", "Listings", "LocalPaths", "MemoryMaps", "Writes"]
