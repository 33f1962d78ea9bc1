"""Where trial bytes live: the Storage protocol and its backends (local directory, memory; S3)."""

from __future__ import annotations

import os

from sdk_ext.storage.base import Buffer, ObjectInfo, ObjectWriter, ReadRequest, Storage, join_key
from sdk_ext.storage.capabilities import Capabilities, DirectReads, Listings, LocalPaths, MemoryMaps, Writes
from sdk_ext.storage.local import LocalStorage
from sdk_ext.storage.memory import InMemoryStorage


def is_s3_uri(path: str | os.PathLike[str]) -> bool:
    return isinstance(path, str) and path.startswith("s3://")


def open_storage(path: str | os.PathLike[str], *, cache_dir: str | os.PathLike[str] | None = None) -> Storage:
    """The storage for a trial path: ``s3://bucket/prefix`` or a local directory.

    ``cache_dir`` keeps downloaded S3 objects on local disk (see :mod:`sdk_ext.storage.cache`), so a
    second analysis of the same trial does not download them again; ignored for local paths.
    """
    if is_s3_uri(path):
        from sdk_ext.storage.s3 import S3Storage  # boto3 is imported only when S3 is used

        storage = S3Storage.from_uri(str(path))
        if cache_dir is not None:
            from sdk_ext.storage.cache import CachingStorage

            return CachingStorage(storage, cache_dir)
        return storage
    return LocalStorage(path)


__all__ = [
    "Buffer",
    "Capabilities",
    "DirectReads",
    "InMemoryStorage",
    "Listings",
    "LocalPaths",
    "LocalStorage",
    "MemoryMaps",
    "ObjectInfo",
    "ObjectWriter",
    "ReadRequest",
    "Storage",
    "Writes",
    "is_s3_uri",
    "join_key",
    "open_storage",
]
