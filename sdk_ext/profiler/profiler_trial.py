"""ProfilerTrial: a job's profiler output (local or S3) as the profiler rules read it, live or finished.

smdebug's ``ProfilerTrial`` interface (``first_timestamp``, ``wait_for_data``, ``get_system_metrics``,
``get_framework_metrics``, ``job_finished``, ``output_dir``), plus the columnar windows the rules compute on
(``system_window``, ``framework_window``). Times are microseconds since the epoch.

What a window holds: every record not handed out before whose time is before the window's end. A record
whose file appears late (another host's system metrics, a step timeline flushed a minute later) is thus
handed to the next window instead of being lost; each record is handed out once. A file is read once, when
it is first listed, and dropped from memory once all of it was handed out, so memory is bounded by the data
not yet judged.

How far the data goes (``latest_timestamp``): the system metrics of every host up to their latest sample (a
system file appears whole, SageMaker's and sdk_ext's monitor alike), or the framework events when there are
no system metrics. The job has finished when ``system/training_job_end.ts`` or
``framework/training_job_end.ts`` exists, or when SageMaker's rule stop signal plus its grace has passed.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sdk_ext.exceptions import NoMoreProfilerData, StorageNotFound
from sdk_ext.format.profiler_paths import (
    FRAMEWORK_END_OF_JOB,
    PROFILER_OUTPUT_DIR,
    SYSTEM_END_OF_JOB,
    SYSTEM_METRICS_DIR,
    TRACE_EVENTS_DIR,
    date_hour,
    parse_system_metrics_key,
    parse_trace_file_key,
)
from sdk_ext.format.profiler_records import SystemMetricColumns, decode_system_metric_columns, decode_timeline
from sdk_ext.profiler.analysis.rules.windows import FrameworkWindow, Samples, SeriesKey, SystemWindow
from sdk_ext.storage import Storage, open_storage

logger = logging.getLogger(__name__)

#: Files this much older than the newest seen are not listed again (a late file of another host still is).
RELIST_SECONDS = 2 * 3600


@dataclass
class _SystemFile:
    """A decoded system-metrics file, sorted by time, and how much of it was handed out."""

    keys: list[SeriesKey]
    key_index: np.ndarray[Any, np.dtype[np.int32]]
    values: np.ndarray[Any, np.dtype[np.float64]]
    timestamps: np.ndarray[Any, np.dtype[np.float64]]
    delivered: int = 0

    @classmethod
    def of(cls, columns: SystemMetricColumns) -> _SystemFile:
        order = np.argsort(columns.timestamps, kind="stable")
        keys = [SeriesKey(k.node_id, k.dimension, k.name if k.name is not None else k.type) for k in columns.keys]
        return cls(keys, columns.key_index[order], columns.values[order], columns.timestamps[order])


@dataclass
class _TraceFile:
    """A decoded trace file (its events by start time) and how much of it was handed out."""

    window: FrameworkWindow
    delivered: int = 0


@dataclass
class _Listing:
    seen: set[str] = field(default_factory=set)
    newest_s: float = 0.0  # the newest file time seen, epoch seconds


def profiler_root(path: str | os.PathLike[str]) -> str:
    """The profiler output under ``path``: ``path`` itself when it holds ``system/`` or ``framework/``,
    else ``path/profiler-output`` when that exists (a local job directory); s3:// URIs as given."""
    text = os.fspath(path)
    if text.startswith("s3://"):
        return text
    for candidate in (Path(text), Path(text) / PROFILER_OUTPUT_DIR):
        if (candidate / "system").is_dir() or (candidate / "framework").is_dir():
            return str(candidate)
    if (Path(text) / PROFILER_OUTPUT_DIR).is_dir():
        return str(Path(text) / PROFILER_OUTPUT_DIR)
    return text


class ProfilerTrial:
    """The profiler output at ``path`` (see the module docstring).

    Args:
        path: a ``profiler-output/`` directory (or a local job directory holding one), an ``s3://`` prefix, or
            a :class:`~sdk_ext.storage.Storage` rooted there.
        output_dir: where the rules write ``profiler-reports/<Rule>.json`` (None: nowhere).
        poll_interval: seconds between looks for new data while waiting.
        signal_expired: True once SageMaker's rule stop signal plus its grace has passed (None: no signal).
        sleep, clock: for tests.
    """

    def __init__(self, path: str | os.PathLike[str] | Storage, *, output_dir: str | os.PathLike[str] | None = None,
                 name: str = "profiler_trial", poll_interval: float = 1.0,
                 signal_expired: Callable[[], bool] | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        if isinstance(path, (str, os.PathLike)):
            self.path = profiler_root(path)
            self._storage: Storage | None = None
        else:
            self.path = path.uri
            self._storage = path
        self.name = name
        self.output_dir = os.fspath(output_dir) if output_dir is not None else None
        self.poll_interval = poll_interval
        self._signal_expired = signal_expired
        self._sleep = sleep
        self._system: dict[str, _SystemFile] = {}
        self._traces: dict[str, _TraceFile] = {}
        self._system_listing, self._trace_listing = _Listing(), _Listing()
        self._latest_by_node: dict[str, float] = {}  # epoch s of each host's newest system sample
        self._framework_end_us = -math.inf
        self._first_us: float = math.inf
        self._finished = False
        self.records = 0  # system records read so far

    @property
    def storage(self) -> Storage:
        if self._storage is None:
            self._storage = open_storage(self.path)
        return self._storage

    def __repr__(self) -> str:
        return f"ProfilerTrial({self.path!r})"

    # --- listing and reading -----------------------------------------------------------------------

    def refresh(self) -> None:
        """List and read the files that appeared since the last refresh.

        Raises:
            StorageError: a listing or read failed (never taken for "no data yet").
        """
        for key in self._new_keys(SYSTEM_METRICS_DIR, self._system_listing, system=True):
            self._read_system(key)
        for key in self._new_keys(TRACE_EVENTS_DIR, self._trace_listing, system=False):
            self._read_trace(key)

    def _new_keys(self, prefix: str, listing: _Listing, *, system: bool) -> list[str]:
        start_after = ""
        if listing.newest_s:
            start_after = f"{prefix}/{date_hour(max(listing.newest_s - RELIST_SECONDS, 0))}"
        new: list[tuple[float, str]] = []
        try:
            keys = list(self.storage.list(prefix + "/", start_after=start_after))
        except StorageNotFound:
            return []
        for key in keys:
            if key in listing.seen:
                continue
            parsed_s: float | None
            if system:
                info = parse_system_metrics_key(key)
                parsed_s = float(info.timestamp_s) if info is not None else None
            else:
                trace = parse_trace_file_key(key)
                parsed_s = trace.end_time_us / 1e6 if trace is not None else None
            if parsed_s is None:
                continue
            listing.seen.add(key)
            listing.newest_s = max(listing.newest_s, parsed_s)
            new.append((parsed_s, key))
        return [key for _, key in sorted(new)]

    def _read_system(self, key: str) -> None:
        info = parse_system_metrics_key(key)
        assert info is not None
        self._first_us = min(self._first_us, float(info.timestamp_us))
        columns = decode_system_metric_columns(self.storage.read(key), name=f"{self.path}/{key}")
        if not len(columns):
            return
        data = _SystemFile.of(columns)
        self.records += len(columns)
        for k, ts in zip(data.key_index.tolist(), data.timestamps.tolist()):
            node = data.keys[k].node
            if ts > self._latest_by_node.get(node, -math.inf):
                self._latest_by_node[node] = ts
        self._first_us = min(self._first_us, float(data.timestamps[0]) * 1e6)
        self._system[key] = data

    def _read_trace(self, key: str) -> None:
        trace = parse_trace_file_key(key)
        assert trace is not None
        events = decode_timeline(self.storage.read(key), name=f"{self.path}/{key}")
        if not events:
            return
        events.sort(key=lambda e: e.start_us)
        args = tuple(dict(e.args) for e in events)
        window = FrameworkWindow(
            start_us=np.array([e.start_us for e in events], dtype=np.float64),
            end_us=np.array([e.start_us + e.duration_us for e in events], dtype=np.float64),
            name=tuple(e.name for e in events), phase=tuple(e.phase for e in events),
            node=(trace.node_id,) * len(events), pid=tuple(_int(a.get("pid")) for a in args),
            step=tuple(_int(a.get("step_num")) for a in args), file_type=(trace.suffix,) * len(events), args=args)
        self._first_us = min(self._first_us, float(window.start_us[0]))
        self._framework_end_us = max(self._framework_end_us, float(window.end_us.max()))
        self._traces[key] = _TraceFile(window)

    # --- smdebug's ProfilerTrial -----------------------------------------------------------------------

    def job_finished(self) -> bool:
        """The job has ended (its end marker), or SageMaker's stop signal plus grace has passed."""
        if not self._finished:
            self._finished = self.storage.exists(SYSTEM_END_OF_JOB) or self.storage.exists(FRAMEWORK_END_OF_JOB) \
                or (self._signal_expired is not None and self._signal_expired())
        return self._finished

    def has_data(self) -> bool:
        return math.isfinite(self._first_us)

    def wait_for_first_data(self) -> bool:
        """Wait until some profiler data exists; False when the job ended without any."""
        while True:
            self.refresh()
            if self.has_data():
                return True
            if self.job_finished():
                self.refresh()  # what was written before the marker
                return self.has_data()
            self._sleep(self.poll_interval)

    @property
    def first_timestamp(self) -> int:
        """The first data's time (µs), waiting for it.

        Raises:
            NoMoreProfilerData: the job ended without profiler data.
        """
        if not self.wait_for_first_data():
            raise NoMoreProfilerData(0)
        return int(self._first_us)

    def get_latest_timestamp(self) -> int:
        """How far the data is complete (µs); see the module docstring. 0 without data."""
        if self._latest_by_node:
            return int(min(self._latest_by_node.values()) * 1e6)
        return int(self._framework_end_us) if math.isfinite(self._framework_end_us) else 0

    def last_timestamp(self) -> int:
        """The end of all the data read (µs)."""
        ends = [max(self._latest_by_node.values()) * 1e6] if self._latest_by_node else []
        ends += [self._framework_end_us] if math.isfinite(self._framework_end_us) else []
        return int(max(ends)) if ends else 0

    def wait_for_data(self, end_time: int, start_time: int) -> None:
        """Return once the data reaches ``end_time`` or the job has finished.

        Raises:
            NoMoreProfilerData: the job has finished and ``start_time`` lies past all of its data.
        """
        while True:
            self.refresh()
            if end_time <= self.get_latest_timestamp():
                return
            if self.job_finished():
                self.refresh()  # the last files, written before the marker
                if start_time > self.last_timestamp():
                    raise NoMoreProfilerData(end_time)
                return
            self._sleep(self.poll_interval)

    def system_window(self, start_time: int, end_time: int) -> SystemWindow:
        """System records before ``end_time`` (µs) not handed out before, as series."""
        parts: dict[SeriesKey, list[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]] = {}
        for file_key in list(self._system):
            data = self._system[file_key]
            stop = int(np.searchsorted(data.timestamps, end_time / 1e6, side="left"))
            if stop <= data.delivered:
                continue
            index = data.key_index[data.delivered:stop]
            ts, vals = data.timestamps[data.delivered:stop], data.values[data.delivered:stop]
            for k in np.unique(index).tolist():
                rows = index == k
                parts.setdefault(data.keys[k], []).append((ts[rows], vals[rows]))
            data.delivered = stop
            if stop == data.values.size:
                del self._system[file_key]
        series = {}
        for series_key, chunks in parts.items():
            ts = np.concatenate([c[0] for c in chunks])
            vals = np.concatenate([c[1] for c in chunks])
            order = np.argsort(ts, kind="stable")
            series[series_key] = Samples(ts[order], vals[order])
        return SystemWindow(series)

    def framework_window(self, start_time: int, end_time: int) -> FrameworkWindow:
        """Framework events starting before ``end_time`` (µs) not handed out before."""
        parts = []
        for key in list(self._traces):
            trace = self._traces[key]
            stop = int(np.searchsorted(trace.window.start_us, end_time, side="left"))
            if stop <= trace.delivered:
                continue
            parts.append(_slice(trace.window, trace.delivered, stop))
            trace.delivered = stop
            if stop == len(trace.window):
                del self._traces[key]
        return FrameworkWindow.concat(parts)

    def get_system_metrics(self, start_time: int, end_time: int) -> list[Any]:
        """smdebug's form of :meth:`system_window`: event objects (``timestamp`` in seconds, ``value``,
        ``dimension``, ``name``, ``node_id``)."""
        window = self.system_window(start_time, end_time)
        return sorted((_SystemEvent(float(t), float(v), k.dimension, k.name, k.node)
                       for k, s in window.series.items() for t, v in zip(s.timestamps, s.values)),
                      key=lambda e: e.timestamp)

    def get_framework_metrics(self, start_time: int, end_time: int) -> list[Any]:
        """smdebug's form of :meth:`framework_window`: event objects (``start_time``/``end_time`` in µs,
        ``event_name``, ``event_phase``, ``event_args``, ``node_id``, ``file_type``)."""
        w = self.framework_window(start_time, end_time)
        return [_TraceEvent(float(w.start_us[i]), float(w.end_us[i]), w.name[i], w.phase[i], w.node[i],
                            dict(w.args[i]), w.file_type[i]) for i in range(len(w))]


@dataclass(frozen=True)
class _SystemEvent:
    timestamp: float
    value: float
    dimension: str
    name: str
    node_id: str


@dataclass(frozen=True)
class _TraceEvent:
    start_time: float
    end_time: float
    event_name: str
    event_phase: str
    node_id: str
    event_args: dict[str, Any]
    file_type: str

    @property
    def duration(self) -> float:
        return self.end_time - self.start_time


def _slice(window: FrameworkWindow, start: int, stop: int) -> FrameworkWindow:
    return FrameworkWindow(start_us=window.start_us[start:stop], end_us=window.end_us[start:stop],
                           name=window.name[start:stop], phase=window.phase[start:stop],
                           node=window.node[start:stop], pid=window.pid[start:stop], step=window.step[start:stop],
                           file_type=window.file_type[start:stop], args=window.args[start:stop])


def _int(value: object) -> int:
    if isinstance(value, (int, float, str)):
        try:
            return int(value)
        except ValueError:
            return -1
    return -1


__all__ = ["RELIST_SECONDS", "ProfilerTrial", "profiler_root"]
