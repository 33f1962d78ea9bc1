"""A local cache in front of a remote storage, so a second analysis of a trial does not download again.

Trial objects (event, index, collections files) are written once and never changed, so a copy is good
as long as the object's ETag and size are those a fresh listing reports. Listings are never cached: every
``list`` goes to the remote (a live trial must see new steps), and what it reports (key, size, ETag) is
what validates the cached copies. Objects nobody listed (event files: the trial finds them through the
index, not by listing) are validated by listing their top-level directory once (``events/``: one request
per 1000 keys), then only what came after the last key seen; anything else costs one one-key listing.

Whole objects are cached (a step's event file is read whole sooner or later); objects larger than
``max_object_bytes`` are read through, range by range, uncached. ``exists``, writes and deletes go
straight to the remote. Files are written to a temporary name and renamed, so two analyses can share a
cache directory and a crash never leaves a partial copy that looks complete.
"""

from __future__ import annotations

import builtins
import hashlib
import logging
import os
import re
import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence

from sdk_ext.exceptions import ConfigError
from sdk_ext.storage.base import Buffer, ObjectInfo, ObjectWriter, ReadRequest, Storage
from sdk_ext.storage.capabilities import Capabilities, Listings, Writes

log = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9-]")


class CachingStorage:
    """``inner`` with whole immutable objects kept under ``cache_dir``. The constructor touches nothing.

    ``inner`` must have the ``listings`` capability (sizes and ETags are what validate a cached copy).
    """

    def __init__(
        self, inner: Storage, cache_dir: str | os.PathLike[str], *, max_object_bytes: int = 64 << 20
    ) -> None:
        listings = inner.capabilities().listings
        if listings is None:
            raise ConfigError(f"{inner!r} cannot be cached: its listings carry no size and ETag to validate a "
                              "cached copy with (the cache is for S3Storage)", where="CachingStorage")
        self.inner = inner
        self._listings: Listings = listings
        self.cache_dir = os.path.abspath(os.path.expanduser(os.fspath(cache_dir)))
        self.max_object_bytes = max_object_bytes
        self._known: dict[str, ObjectInfo] = {}  # the latest listing's word on each key
        self._listed_upto: dict[str, str] = {}  # top-level dir -> last key of our own listing of it
        self._lock = threading.Lock()  # guards _known and _listed_upto

    def __repr__(self) -> str:
        return f"CachingStorage({self.inner!r}, {self.cache_dir!r})"

    @property
    def uri(self) -> str:
        return self.inner.uri

    # --- listing: never cached, but remembered as validators --------------------------------------

    def list_objects(self, prefix: str, *, start_after: str = "") -> Iterator[ObjectInfo]:
        infos = builtins.list(self._listings.list_objects(prefix, start_after=start_after))
        with self._lock:
            self._known.update((i.key, i) for i in infos)
        return iter(infos)

    def list(self, prefix: str, *, start_after: str = "") -> Iterator[str]:
        return iter([i.key for i in self.list_objects(prefix, start_after=start_after)])

    def info(self, key: str) -> ObjectInfo | None:
        """What the latest listing said of ``key`` (listing its directory once if needed)."""
        return self._info(key)

    def capabilities(self) -> Capabilities:
        """Listings (validated, remembered); writes go to the remote, through an upload spool. Direct
        reads and maps are not offered: a cached copy may be missing and then the remote answers."""
        return Capabilities(Writes.SPOOLED, listings=self)

    def _info(self, key: str) -> ObjectInfo | None:
        with self._lock:
            info = self._known.get(key)
            top, sep, _ = key.partition("/")
            upto = self._listed_upto.get(top + sep)
        if info is not None:
            return info
        if sep and (upto is None or key > upto):  # list the directory once, then only what is new
            infos = builtins.list(self._listings.list_objects(top + sep, start_after=upto or ""))
            with self._lock:
                self._known.update((i.key, i) for i in infos)
                if infos:
                    self._listed_upto[top + sep] = max(infos[-1].key, upto or "")
                info = self._known.get(key)
            if info is not None or upto is None or not infos:
                return info
        info = self._listings.info(key)
        if info is not None:
            with self._lock:
                self._known[key] = info
        return info

    # --- reading ---------------------------------------------------------------------------------

    def _path(self, info: ObjectInfo) -> str:
        digest = hashlib.sha256(f"{self.inner.uri}/{info.key}".encode()).hexdigest()
        return os.path.join(self.cache_dir, digest[:2], f"{digest[2:40]}-{_UNSAFE.sub('', info.etag)}-{info.size}")

    def _cached(self, info: ObjectInfo) -> str | None:
        path = self._path(info)
        try:
            return path if os.path.getsize(path) == info.size else None
        except OSError:
            return None

    def _store(self, info: ObjectInfo, data: bytes) -> None:
        if len(data) != info.size:  # rewritten since it was listed: serve it, but do not keep it
            log.debug("%s/%s changed since listed (%d != %d bytes); not cached", self.uri, info.key,
                      len(data), info.size)
            return
        path = self._path(info)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".part-")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except OSError as err:  # a full or read-only cache only costs speed
            log.warning("cannot cache %s/%s in %s: %s", self.uri, info.key, self.cache_dir, err)

    def read(self, key: str, *, start: int = 0, length: int | None = None) -> bytes:
        return self.read_many([ReadRequest(key, start, length)])[0]

    def read_many(self, requests: Sequence[ReadRequest]) -> builtins.list[bytes]:
        """Cached objects are sliced locally; missing small ones are downloaded whole (concurrently) and
        kept; large or unlisted ones are read through."""
        infos: dict[str, ObjectInfo | None] = {r.key: None for r in requests if r.length != 0}
        for key in infos:
            infos[key] = self._info(key)
        local: dict[str, bytes | str] = {}  # key -> cached path, or freshly downloaded bytes
        fetch: builtins.list[ObjectInfo] = []
        for key, info in infos.items():
            if info is None or info.size > self.max_object_bytes:
                continue
            path = self._cached(info)
            if path is not None:
                local[key] = path
            else:
                fetch.append(info)
        if fetch:
            for info, data in zip(fetch, self.inner.read_many([ReadRequest(i.key) for i in fetch])):
                self._store(info, data)
                local[info.key] = data
        results = [b""] * len(requests)
        by_key: dict[str, builtins.list[int]] = {}
        for i, r in enumerate(requests):
            if r.length != 0:
                by_key.setdefault(r.key, []).append(i)
        through: builtins.list[int] = []
        for key, indexes in by_key.items():
            source = local.get(key)
            if source is None or not _serve(source, [requests[i] for i in indexes], indexes, results):
                through += indexes
        through.sort()
        for i, data in zip(through, self.inner.read_many([requests[i] for i in through])):
            results[i] = data
        return results

    # --- everything else goes straight through ----------------------------------------------------

    def exists(self, key: str) -> bool:
        return self.inner.exists(key)

    def write(self, key: str, data: Buffer | Iterable[Buffer]) -> None:
        self._forget(key)
        self.inner.write(key, data)

    def open_write(self, key: str) -> ObjectWriter:
        self._forget(key)
        return self.inner.open_write(key)

    def delete(self, key: str) -> None:
        self._forget(key)
        self.inner.delete(key)

    def _forget(self, key: str) -> None:
        with self._lock:
            self._known.pop(key, None)


def _serve(source: bytes | str, requests: Sequence[ReadRequest], indexes: Sequence[int],
           results: builtins.list[bytes]) -> bool:
    """Slice ``requests`` (all of one key) out of downloaded bytes or a cached file; False if the
    cached file vanished (evicted by hand) and the remote must answer instead."""
    if isinstance(source, bytes):
        for i, r in zip(indexes, requests):
            results[i] = source[r.start :] if r.length is None else source[r.start : r.start + r.length]
        return True
    try:
        with open(source, "rb") as f:
            for i, r in zip(indexes, requests):
                f.seek(r.start)
                results[i] = f.read() if r.length is None else f.read(r.length)
    except OSError:
        return False
    return True


__all__ = ["CachingStorage"]
