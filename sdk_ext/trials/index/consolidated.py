"""Index files served from the consolidated indexes writers leave at close (:mod:`sdk_ext.format.consolidated`).

Opening a finished trial on S3 otherwise costs one GET per index file. When a refresh has many index
files to read and the storage's listings carry sizes (S3), the trial lists ``consolidated/`` once and
fetches the consolidated index of each worker it needs, concurrently. An entry is used only for an
index file the trial's own listing shows with exactly the entry's size (the last entry for a key
wins, as the last write of an index file does); every other index file is read on its own, so the
result is what reading each index file would give. A damaged consolidated index is skipped with a
warning; a failed request raises, as any storage failure does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

from sdk_ext.exceptions import IndexReaderException, StorageNotFound
from sdk_ext.format.consolidated import CONSOLIDATED_DIR, parse_consolidated, parse_consolidated_key
from sdk_ext.format.paths import index_key
from sdk_ext.storage import Listings, ReadRequest, Storage

logger = logging.getLogger(__name__)

#: a refresh with fewer index files to read than this reads them one by one (no listing of consolidated/)
CONSOLIDATED_MIN = 16

#: what an index listing gives: (key, global step, worker, size or None)
Listed = tuple[str, int, str, "int | None"]


def list_with_sizes(storage: Storage, listings: Listings | None, prefix: str, *,
                    start_after: str = "") -> Iterator[tuple[str, int | None]]:
    """``(key, size)`` under ``prefix``; the size is None where the storage has no ``listings`` capability."""
    if listings is None:
        return ((key, None) for key in storage.list(prefix, start_after=start_after))
    return ((o.key, o.size) for o in listings.list_objects(prefix, start_after=start_after))


def read_consolidated(storage: Storage, listings: Listings | None,
                      wanted: Sequence[Listed]) -> dict[str, tuple[bytes, bytes]]:
    """``{index key: (head, tail)}`` for the ``wanted`` index files the trial's consolidated indexes hold
    with the listed size (an index document is ``head + tail``). Empty when sizes are unknown.

    Raises:
        StorageError: a listing or read failed (other than an object gone between listing and read).
    """
    sizes = {key: size for key, _, _, size in wanted if size is not None}
    workers = {worker for _, _, worker, size in wanted if size is not None}
    if len(sizes) < CONSOLIDATED_MIN:  # (sizes come only from storages that list them)
        return {}
    objects = [
        (key, worker)
        for key, _ in list_with_sizes(storage, listings, CONSOLIDATED_DIR + "/")
        if (worker := parse_consolidated_key(key)) is not None and worker in workers
    ]
    if not objects:
        return {}
    try:
        datas = storage.read_many([ReadRequest(key) for key, _ in objects])
    except StorageNotFound:  # deleted since the listing: read the index files instead
        return {}
    found: dict[str, tuple[bytes, bytes]] = {}
    for (key, worker), data in zip(objects, datas):
        try:
            doc = parse_consolidated(data, key=f"{storage.uri}/{key}")
        except IndexReaderException as err:
            logger.warning("%s", err)
            continue
        if doc.worker != worker:
            logger.warning("%s/%s names worker %r, not %r; not used", storage.uri, key, doc.worker, worker)
            continue
        for step, head, tail in doc.entries:
            index = index_key(step, worker)
            if sizes.get(index) == len(head) + len(tail):
                found[index] = (head, tail)
            else:  # not listed, or listed as another object than this entry's (a later write): read it
                found.pop(index, None)
    logger.debug("%s: %d of %d index files from %d consolidated index(es)", storage.uri, len(found), len(sizes),
                 len(objects))
    return found


__all__ = ["CONSOLIDATED_MIN", "Listed", "list_with_sizes", "read_consolidated"]
