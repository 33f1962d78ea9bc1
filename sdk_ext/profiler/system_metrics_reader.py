"""Readers of system metrics (``system/incremental/...``), smdebug's ``smdebug.profiler.system_metrics_reader``.

``LocalSystemMetricsReader(path)`` and ``S3SystemMetricsReader("s3://bucket/.../profiler-output")``
answer smdebug's queries (``get_events(start, end, unit=..., event_type=...)``,
``get_timestamp_of_first_available_file()``, ``get_timestamp_of_latest_available_file()``,
``refresh_event_file_list()``), and one of their own for code that needs numbers, not objects:

    series = reader.get_series(start, end, TimeUnits.SECONDS, event_type="gpu", dimension="GPUUtilization")
    for key, s in series.items():          # key: SeriesKey(node_id, type, name, dimension)
        s.timestamps, s.values             # float64 arrays (epoch seconds; values), sorted by time

That is the data API the profiler rules build on: one array pair per (node, type, name, dimension) for
a window, made without a Python object per sample.

Which files a window reads: a host's file is named by its first sample and holds its samples until the
host's next file, so ``[start, end]`` needs, per host, the last file named at or before ``start`` and
every file named in ``(start, end]`` -- nothing else is fetched (``files_read`` counts). smdebug read
three minutes more on each side. Files are fetched a few at a time and decoded column-wise, so memory
holds the window's samples (16 bytes each, plus 4 for their series) and a few files' bytes, whatever
the job's length.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from sdk_ext.format.profiler_paths import SYSTEM_DIR, parse_system_metrics_key
from sdk_ext.format.profiler_records import SeriesKey, SystemMetricColumns, decode_system_metric_columns
from sdk_ext.profiler.metrics_reader_base import MetricsReaderBase
from sdk_ext.profiler.system_profiler_file_parser import (
    ProfilerSystemEvent,
    ProfilerSystemEvents,
    events_from_columns,
    window_mask,
)
from sdk_ext.profiler.utils import TimeUnits, convert_utc_timestamp_to_microseconds
from sdk_ext.storage import Storage

#: Files fetched at once: S3 GETs run concurrently within a batch; memory holds one batch's bytes.
FETCH_BATCH = 8


@dataclass(frozen=True, slots=True)
class MetricSeries:
    """The samples of one series in a window, sorted by time."""

    key: SeriesKey
    timestamps: npt.NDArray[np.float64]  # epoch seconds
    values: npt.NDArray[np.float64]

    def __len__(self) -> int:
        return len(self.values)


class SystemMetricsReader(MetricsReaderBase):
    """System metrics under a profiler-output root (see the module doc)."""

    prefix = SYSTEM_DIR

    def __init__(self, use_in_memory_cache: bool = False) -> None:
        super().__init__(use_in_memory_cache)
        self._SystemProfilerEventParser = ProfilerSystemEvents()
        self._event_parsers = [self._SystemProfilerEventParser]
        self._columns: dict[str, SystemMetricColumns] = {}  # with use_in_memory_cache: decoded files
        self._buffer = bytearray()  # local files are read into this one buffer (see _decoded)

    def _get_timestamp_from_filename(self, event_file: str) -> int | None:
        info = parse_system_metrics_key(event_file)
        return info.timestamp_us if info is not None else None

    def _get_event_file_regex(self) -> str:
        return r"(.+)\.json"

    def _get_event_parser(self, filename: str) -> ProfilerSystemEvents:
        return self._SystemProfilerEventParser

    def _get_event_files_in_the_range(
        self, start_time_microseconds: int, end_time_microseconds: int
    ) -> list[str]:
        """The files holding samples of ``[start, end]`` (us), oldest first (see the module doc)."""
        if end_time_microseconds >= self.get_timestamp_of_latest_available_file():
            self.refresh_event_file_list()
        by_node: dict[str, list[tuple[int, str]]] = {}
        for stamp, names in self._timestamp_to_filename.items():
            for name in names:
                info = parse_system_metrics_key(name)
                if info is not None:
                    by_node.setdefault(info.node_id, []).append((stamp, name))
        chosen: list[tuple[int, str]] = []
        for files in by_node.values():
            files.sort()
            stamps = [s for s, _ in files]
            first = max(bisect.bisect_right(stamps, start_time_microseconds) - 1, 0)
            last = bisect.bisect_right(stamps, end_time_microseconds)
            chosen.extend(files[first:last])
        return [name for _, name in sorted(chosen)]

    def _decoded(self, names: Sequence[str]) -> Iterator[tuple[str, SystemMetricColumns]]:
        """Each file's samples, fetching a batch at a time (cached files are not fetched again); from a
        local directory, one file at a time into one buffer the reader keeps (a file's fresh memory costs
        a page fault per 4 KiB, more than reading it)."""
        direct = self._source.storage.capabilities().direct_reads if self._source is not None else None
        if direct is not None:
            for name in names:
                columns = self._columns.get(name)
                if columns is None:
                    key = self._key_of.get(name, name)
                    size = direct.size(key)
                    if len(self._buffer) < size:
                        self._buffer = bytearray(size + (size >> 3))
                    got = direct.read_into(key, memoryview(self._buffer)[:size])
                    self.files_read += 1
                    columns = decode_system_metric_columns(self._buffer, name=name, size=got)
                    if columns.torn_tail:
                        self.logger.debug("skipped the torn last line of %s", name)
                    if self._cache_events_in_memory:
                        self._columns[name] = columns
                yield name, columns
            return
        for at in range(0, len(names), FETCH_BATCH):
            batch = list(names[at : at + FETCH_BATCH])
            missing = [n for n in batch if n not in self._columns]
            fetched = dict(zip(missing, self._fetch(missing), strict=True))
            for name in batch:
                columns = self._columns.get(name)
                if columns is None:
                    columns = decode_system_metric_columns(fetched.pop(name), name=name)
                    if columns.torn_tail:
                        self.logger.debug("skipped the torn last line of %s", name)
                    if self._cache_events_in_memory:
                        self._columns[name] = columns
                yield name, columns

    def parse_event_files(self, event_files: Sequence[str]) -> None:
        """Read these files into the parser (smdebug's step; :meth:`get_events` does not need it)."""
        for name, columns in self._decoded([f for f in event_files if f not in self._parsed_files]):
            self._SystemProfilerEventParser.add_events(events_from_columns(columns))
            self._parsed_files.add(name)

    def get_events(
        self,
        start_time: float,
        end_time: float,
        unit: TimeUnits = TimeUnits.MICROSECONDS,
        event_type: str | None = None,
        file_suffix_filter: Sequence[str] | None = None,
    ) -> list[ProfilerSystemEvent]:
        """The samples with ``start <= timestamp <= end`` (in ``unit``; compared in integer nanoseconds as
        smdebug did), of ``event_type`` ("cpu", "gpu", ...) if given, in file order."""
        start_us = int(convert_utc_timestamp_to_microseconds(start_time, unit))
        end_us = int(convert_utc_timestamp_to_microseconds(end_time, unit))
        files = self._get_event_files_in_the_range(start_us, end_us)
        if file_suffix_filter is not None:
            files = [f for f in files if any(f.endswith(s) for s in file_suffix_filter)]
        events: list[ProfilerSystemEvent] = []
        for _, columns in self._decoded(files):
            events.extend(
                events_from_columns(columns, window_mask(columns, start_us * 1000, end_us * 1000, event_type))
            )
        return events

    def iter_columns(self, start_time_us: int, end_time_us: int) -> Iterator[SystemMetricColumns]:
        """The samples of ``[start, end]`` (us; as :meth:`get_events` selects them), one file's at a time, in
        file order: memory holds a few files, whatever the window's length."""
        for _, columns in self._decoded(self._get_event_files_in_the_range(start_time_us, end_time_us)):
            mask = window_mask(columns, start_time_us * 1000, end_time_us * 1000)
            if mask.any():
                yield SystemMetricColumns(
                    columns.keys, columns.key_index[mask], columns.values[mask], columns.timestamps[mask]
                )

    def get_series(
        self,
        start_time: float,
        end_time: float,
        unit: TimeUnits = TimeUnits.MICROSECONDS,
        *,
        event_type: str | None = None,
        node_id: str | None = None,
        name: str | None = None,
        dimension: str | None = None,
    ) -> dict[SeriesKey, MetricSeries]:
        """Samples of ``[start, end]`` (as :meth:`get_events` selects them) as one array pair per series,
        sorted by key; filters keep only series of that type, node, device name or dimension."""
        window = self.get_window(
            start_time, end_time, unit, event_type=event_type, node_id=node_id, name=name, dimension=dimension
        )
        if not len(window.values):
            return {}
        periodic = _periodic_series(window)
        if periodic is not None:
            return periodic
        order, key_ids, stamps = _series_order(window.key_index, window.timestamps, len(window.keys))
        values = window.values[order]
        bounds = np.flatnonzero(np.diff(key_ids)) + 1
        out = {}
        for lo, hi in zip(np.r_[0, bounds].tolist(), np.r_[bounds, len(key_ids)].tolist(), strict=True):
            key = window.keys[int(key_ids[lo])]
            out[key] = MetricSeries(key, stamps[lo:hi], values[lo:hi])
        return dict(sorted(out.items()))

    def get_window(
        self,
        start_time: float,
        end_time: float,
        unit: TimeUnits = TimeUnits.MICROSECONDS,
        *,
        event_type: str | None = None,
        node_id: str | None = None,
        name: str | None = None,
        dimension: str | None = None,
    ) -> SystemMetricColumns:
        """The samples of ``[start, end]`` (as :meth:`get_events` selects them) as one set of columns in
        file order, filtered as :meth:`get_series`."""
        start_us = int(convert_utc_timestamp_to_microseconds(start_time, unit))
        end_us = int(convert_utc_timestamp_to_microseconds(end_time, unit))
        ids: dict[SeriesKey, int] = {}
        parts: list[tuple[npt.NDArray[np.int32], npt.NDArray[np.float64], npt.NDArray[np.float64]]] = []
        for _, columns in self._decoded(self._get_event_files_in_the_range(start_us, end_us)):
            wanted = [
                (event_type is None or k.type == event_type)
                and (node_id is None or k.node_id == node_id)
                and (name is None or k.name == name)
                and (dimension is None or k.dimension == dimension)
                for k in columns.keys
            ]
            if not any(wanted):
                continue
            mask = window_mask(columns, start_us * 1000, end_us * 1000)
            if not all(wanted):
                mask &= np.array([*wanted, False], dtype=bool)[columns.key_index]
            to_global = np.array([ids.setdefault(k, len(ids)) for k in columns.keys] + [0], dtype=np.int32)
            if mask.all():  # the whole file (the usual case inside a long window): no selection to copy
                parts.append((to_global[columns.key_index], columns.timestamps, columns.values))
            else:
                parts.append((to_global[columns.key_index[mask]], columns.timestamps[mask], columns.values[mask]))
        if not parts:
            return SystemMetricColumns((), np.empty(0, np.int32), np.empty(0), np.empty(0))
        return SystemMetricColumns(
            tuple(ids),
            np.concatenate([p[0] for p in parts]),
            np.concatenate([p[2] for p in parts]),
            np.concatenate([p[1] for p in parts]),
        )

    def get_nodes(self) -> list[str]:
        """The hosts (``algo-N``) that have written system metrics, from the file names."""
        nodes = {
            info.node_id
            for names in self._timestamp_to_filename.values()
            for n in names
            if (info := parse_system_metrics_key(n)) is not None
        }
        return sorted(nodes)


def _periodic_series(window: SystemMetricColumns) -> dict[SeriesKey, MetricSeries] | None:
    """:meth:`SystemMetricsReader.get_series` of a window that is whole samples of every series in one order
    (what a monitor writes), each series in time order: every series is a column of the window seen as
    a (samples, series) table, so no sort is needed. None where the window is not so."""
    count = len(window.keys)
    n = len(window.key_index)
    if not count or not n or n % count:
        return None
    table = window.key_index.reshape(-1, count)
    stamps = window.timestamps.reshape(-1, count)
    # every series once a sample, in one order, and no timestamp before the one before it in its series
    # (NaN compares False)
    if len(set(table[0].tolist())) != count or not ((table == table[0]).all() and (stamps[1:] >= stamps[:-1]).all()):
        return None
    values = window.values.reshape(-1, count)
    out = {}
    for column, key_id in enumerate(table[0].tolist()):
        key = window.keys[key_id]
        out[key] = MetricSeries(key, stamps[:, column].copy(), values[:, column].copy())
    return dict(sorted(out.items()))


def _series_order(
    key_index: npt.NDArray[np.int32], timestamps: npt.NDArray[np.float64], keys: int
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.int32], npt.NDArray[np.float64]]:
    """The order that sorts samples by series, then timestamp, ties kept in file order (``np.lexsort``'s),
    with the series and timestamps in that order. Files hold each series' samples in time order, so a
    stable sort by series alone (a radix sort of small integers: linear, where lexsort compares) usually
    gives it; checked, else lexsort."""
    if keys <= np.iinfo(np.int16).max:
        order: npt.NDArray[np.intp] = np.argsort(key_index.astype(np.int16), kind="stable")
        key_ids, stamps = key_index[order], timestamps[order]
        # within a series, no timestamp before the one before it (NaN compares False: lexsort's place for it)
        if ((stamps[1:] >= stamps[:-1]) | (key_ids[1:] != key_ids[:-1])).all():
            return order, key_ids, stamps
    order = np.lexsort((timestamps, key_index))
    return order, key_index[order], timestamps[order]


class LocalSystemMetricsReader(SystemMetricsReader):
    """System metrics under a local profiler-output directory. Lists it on construction (as smdebug's),
    so the first/latest timestamps are there at once."""

    def __init__(
        self,
        trace_root_folder: str | os.PathLike[str],
        use_in_memory_cache: bool = False,
        *,
        storage: Storage | None = None,
    ) -> None:
        super().__init__(use_in_memory_cache)
        self.trace_root_folder = os.fspath(trace_root_folder)
        self._attach(self.trace_root_folder, remote=False, other="S3SystemMetricsReader", storage=storage)


class S3SystemMetricsReader(SystemMetricsReader):
    """System metrics under ``s3://bucket/prefix`` (a profiler-output prefix). Lists it on construction;
    later listings start a few minutes (``TRAILING_DURATION_MICROSECONDS``) before the newest file seen,
    so late uploads are found without listing everything again."""

    def __init__(
        self, s3_trial_path: str, use_in_memory_cache: bool = False, *, storage: Storage | None = None
    ) -> None:
        super().__init__(use_in_memory_cache)
        self._attach(str(s3_trial_path), remote=True, other="LocalSystemMetricsReader", storage=storage)


__all__ = [
    "LocalSystemMetricsReader",
    "MetricSeries",
    "S3SystemMetricsReader",
    "SystemMetricsReader",
]
