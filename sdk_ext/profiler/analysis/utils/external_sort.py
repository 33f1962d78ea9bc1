"""Sorting more records than memory should hold: sorted runs spilled to temporary files, merged lazily.

The merged timeline's events arrive grouped by file and must leave sorted by time. Up to ``limit``
records are sorted in memory; past that each full buffer is sorted and written to a temporary file (one
JSON array per line) and the runs are merged with :func:`heapq.merge`, reading one record of each run at a
time. Memory holds one buffer, whatever the number of records. A record is a tuple whose first two
items, a time and a sequence number unique to the record, order it (the rest is never compared).
"""

from __future__ import annotations

import heapq
import json
import os
import tempfile
from collections.abc import Iterator
from typing import IO, Any

Record = tuple[Any, ...]


class ExternalSort:
    """Collects records (:meth:`add`), then yields them in order (:meth:`sorted`); :meth:`close` removes
    the temporary files (it is also a context manager).

    Args:
        limit: records held in memory before a run is spilled.
        directory: where the temporary runs go (default: the system's temporary directory).
    """

    def __init__(self, limit: int, *, directory: str | os.PathLike[str] | None = None) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1 record, got {limit}")
        self.limit = limit
        self.directory = directory
        self._buffer: list[Record] = []
        self._runs: list[IO[str]] = []
        #: how many runs went to disk (0: everything was sorted in memory)
        self.spilled_runs = 0

    def __enter__(self) -> ExternalSort:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, record: Record) -> None:
        self._buffer.append(record)
        if len(self._buffer) >= self.limit:
            self._spill()

    def _spill(self) -> None:
        self._buffer.sort()
        run = tempfile.TemporaryFile("w+", encoding="utf-8", dir=self.directory, prefix="merge-run-")
        self._runs.append(run)
        self.spilled_runs += 1
        chunk: list[str] = []
        for record in self._buffer:
            chunk.append(json.dumps(record))
            if len(chunk) >= 4096:
                run.write("\n".join(chunk) + "\n")
                chunk = []
        if chunk:
            run.write("\n".join(chunk) + "\n")
        self._buffer = []

    def sorted(self) -> Iterator[Record]:
        """Every record added, in order. Call once, after the last :meth:`add`."""
        self._buffer.sort()
        if not self._runs:
            yield from self._buffer
            return
        for run in self._runs:
            run.seek(0)
        yield from heapq.merge(*(_read_run(run) for run in self._runs), iter(self._buffer))

    def close(self) -> None:
        for run in self._runs:
            run.close()  # a TemporaryFile is deleted when closed
        self._runs = []
        self._buffer = []


def _read_run(run: IO[str]) -> Iterator[Record]:
    for line in run:
        yield tuple(json.loads(line))


__all__ = ["ExternalSort", "Record"]
