"""Reading values out of event files: whole small files once, large records by range, in batches.

Round trips dominate on S3, so an event file no larger than ``whole_file_bytes`` is fetched whole
the first time any of its records is wanted and kept in an LRU cache (``file_cache_bytes``): a rule
that reads every tensor of a step pays one request for the step. Larger files are read record by
record (a ranged read each), and a batch (``Tensor.values``) sends all its requests in one
``Storage.read_many`` so a remote backend can run them concurrently.

An index can name an event file that is not there yet (S3 uploads in any order) or that is still
being appended to. Neither is data: the reader waits up to ``event_file_timeout`` for it, never
caches a short file, and decodes a record as soon as all of its bytes are present.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sdk_ext.exceptions import SdkExtError, StorageNotFound
from sdk_ext.format.record_values import decode_record_value
from sdk_ext.storage import ReadRequest, Storage
from sdk_ext.trials.options import TrialOptions, poll

logger = logging.getLogger(__name__)

#: (event file key, record start, record length, bytes the index says the file holds)
Request = tuple[str, int, int, int]


class EventFileUnavailable(SdkExtError):
    """An event file named by an index never became (fully) readable."""

    def __init__(self, key: str, reason: str) -> None:
        self.key, self.reason = key, reason
        super().__init__(f"{key}: {reason}")


class ValueReader:
    """Decodes records of a trial's event files, with a cache of whole small files."""

    def __init__(self, storage: Storage, options: TrialOptions, *, training_ended: Callable[[], bool]) -> None:
        self._storage = storage
        self._options = options
        self._training_ended = training_ended
        self._files: OrderedDict[str, bytes] = OrderedDict()
        self._cached_bytes = 0
        self.requests = 0  # storage requests made, for benchmarks and tests

    def _remember(self, key: str, data: bytes) -> None:
        budget = self._options.file_cache_bytes
        if len(data) > budget:
            return
        self._files[key] = data
        self._cached_bytes += len(data)
        while self._cached_bytes > budget:
            _, old = self._files.popitem(last=False)
            self._cached_bytes -= len(old)

    def read(self, key: str, start: int, length: int, size: int) -> np.ndarray[Any, Any]:
        """The value of the record ``[start, start+length)`` of event file ``key`` (``size`` from its index)."""
        data = self._files.get(key)
        if data is not None:
            self._files.move_to_end(key)
            return decode_record_value(data, start, length, name=key)
        if size <= self._options.whole_file_bytes:
            data = self._whole(key, start + length, size)
            return decode_record_value(data, start, length, name=key)
        record = self._range(key, start, length)
        return decode_record_value(record, 0, length, name=key, base=start)

    def read_many(self, requests: Sequence[Request]) -> list[np.ndarray[Any, Any]]:
        """Values of several records; storage requests for files not cached go out in one batch."""
        files: dict[str, int] = {}  # whole files to fetch -> their size
        ranges: dict[tuple[str, int], int] = {}
        for key, start, length, size in requests:
            if key in self._files or key in files:
                continue
            if size <= self._options.whole_file_bytes:
                files[key] = size
            else:
                ranges[(key, start)] = length
        fetched: dict[str, bytes] = {}
        records: dict[tuple[str, int], bytes] = {}
        batch = [ReadRequest(k) for k in files] + [ReadRequest(k, s, n) for (k, s), n in ranges.items()]
        if batch:
            self.requests += len(batch)
            try:
                results = self._storage.read_many(batch)
            except StorageNotFound:
                results = None  # some file is missing: fall back to one read (and wait) per request
            if results is not None:
                for req, data in zip(batch, results):
                    if req.length is None:
                        if len(data) >= files[req.key]:
                            fetched[req.key] = data
                            self._remember(req.key, data)
                    elif len(data) == req.length:
                        records[(req.key, req.start)] = data
        out = []
        for key, start, length, size in requests:
            data = fetched.get(key) or self._files.get(key)
            if data is not None:
                out.append(decode_record_value(data, start, length, name=key))
                continue
            record = records.get((key, start))
            if record is not None:
                out.append(decode_record_value(record, 0, length, name=key, base=start))
            else:
                out.append(self.read(key, start, length, size))
        return out

    def _whole(self, key: str, need: int, size: int) -> bytes:
        """The file, or at least its first ``need`` bytes once they exist; cached when complete."""

        def attempt() -> bytes | None:
            self.requests += 1
            try:
                data = self._storage.read(key)
            except StorageNotFound:
                return None
            return data if len(data) >= need else None

        data = self._wait(key, attempt)
        if len(data) >= size:
            self._remember(key, data)
        return data

    def _range(self, key: str, start: int, length: int) -> bytes:
        def attempt() -> bytes | None:
            self.requests += 1
            try:
                data = self._storage.read(key, start=start, length=length)
            except StorageNotFound:
                return None
            return data if len(data) == length else None

        return self._wait(key, attempt)

    def _wait(self, key: str, attempt: Callable[[], bytes | None]) -> bytes:
        data = attempt()
        if data is not None:
            return data
        if self._training_ended():
            data = attempt()  # the marker may have come with the file
            if data is not None:
                return data
            raise EventFileUnavailable(key, "named by an index file but missing or short, and training has ended")
        logger.info("waiting up to %.1f s for event file %s", self._options.event_file_timeout, key)
        data = poll(
            attempt,
            timeout=self._options.event_file_timeout,
            interval=self._options.poll_interval,
            clock=self._options.clock,
            what=f"event file {key}",
        )
        if data is None:
            raise EventFileUnavailable(
                key, f"named by an index file but still missing or short after {self._options.event_file_timeout} s"
            )
        return data

    def clear(self) -> None:
        self._files.clear()
        self._cached_bytes = 0


__all__ = ["EventFileUnavailable", "Request", "ValueReader"]
