"""Opening a trial: wait (a bounded time) for the collections files the hook writes first.

smdebug waited forever for them unless training had ended; here the wait ends after
``TrialOptions.collections_timeout`` with MissingCollectionFiles, whose message says where it looked
and what to check. Workers announced in the first file (``_meta.num_workers``) that have not
written theirs by then are waited for no longer: the trial goes on and ``workers()`` grows on refresh.

A finished trial with index files but no collections file lost it (its directory was deleted while
training, or the disk filled exactly when it was written): it is opened from its index files, with
one warning saying so (no collections, one worker per name in the index files), rather than taken
for a trial where nothing was saved.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sdk_ext.exceptions import MissingCollectionFiles
from sdk_ext.format.collection_file import CollectionsFile, parse_collections
from sdk_ext.format.paths import COLLECTIONS_DIR, INDEX_DIR, parse_collections_key, parse_index_key
from sdk_ext.storage import Storage
from sdk_ext.trials.options import TrialOptions, poll

logger = logging.getLogger(__name__)


def collection_workers(storage: Storage) -> dict[str, str]:
    """``{collections file key: worker}`` for every collections file present."""
    found = {}
    for key in storage.list(COLLECTIONS_DIR + "/"):
        worker = parse_collections_key(key)
        if worker is not None:
            found[key] = worker
    return found


def wait_for_collections(
    storage: Storage, options: TrialOptions, *, ended: Callable[[], bool]
) -> tuple[CollectionsFile, set[str]]:
    """The first collections file (definitions, worker count) and the workers that wrote one.

    Raises:
        MissingCollectionFiles: none within ``options.collections_timeout``; or training ended
            (``ended()``) with none, or with fewer than the workers the first file announced.
    """
    clock = options.clock
    deadline = clock.now() + options.collections_timeout

    def first() -> dict[str, str] | None:
        found = collection_workers(storage)
        if found:
            return found
        if ended():
            if _index_workers(storage):
                return {}  # lost its collections file: opened from the index files (below)
            raise MissingCollectionFiles(
                f"{storage.uri}: training has ended (training_job_end.ts) but no collections file was written "
                f"under {COLLECTIONS_DIR}/: nothing was saved, or this is not the hook's output path"
            )
        return None

    found = poll(first, timeout=options.collections_timeout, interval=options.poll_interval, clock=clock,
                 what=f"collections files under {storage.uri}")
    if found is None:
        raise MissingCollectionFiles(
            f"{storage.uri}: no collections file under {COLLECTIONS_DIR}/ after {options.collections_timeout:g} s. "
            "Check that this is the hook's output path (the job's tensors prefix); if the job has not saved "
            "its first step yet, retry later or pass a longer timeout to create_trial"
        )
    if not found:
        workers = _index_workers(storage)
        logger.warning(
            "%s: no collections file under %s/, but index files of %d worker(s) exist: the collections file was "
            "lost (the trial directory deleted while training, or a full disk); opening the trial from its index "
            "files, without collection definitions", storage.uri, COLLECTIONS_DIR, len(workers),
        )
        return CollectionsFile({}, len(workers)), workers
    key = min(found)  # smdebug reads the first one listed
    doc = parse_collections(storage.read(key), key=key)
    workers = set(found.values())
    needed = doc.num_workers
    if len(workers) >= needed:
        return doc, workers

    def all_workers() -> bool | None:
        workers.update(collection_workers(storage).values())
        if len(workers) >= needed:
            return True
        if ended():
            workers.update(collection_workers(storage).values())
            if len(workers) < needed:
                raise MissingCollectionFiles(
                    f"{storage.uri}: training has ended but only {len(workers)} of the {needed} workers "
                    f"announced in the collections file wrote theirs ({', '.join(sorted(workers))})"
                )
            return True
        return None

    if poll(all_workers, timeout=max(0.0, deadline - clock.now()), interval=options.poll_interval, clock=clock,
            what=f"{needed} collections files") is None:
        logger.warning(
            "%s: %d of %d workers have written their collections file; going on, workers() will grow",
            storage.uri, len(workers), needed,
        )
    return doc, workers


def _index_workers(storage: Storage) -> set[str]:
    """The workers that wrote index files (a full listing: only for a trial that lost its collections file)."""
    workers = set()
    for key in storage.list(INDEX_DIR + "/"):
        parsed = parse_index_key(key)
        if parsed is not None:
            workers.add(parsed[1])
    return workers


__all__ = ["collection_workers", "wait_for_collections"]
