"""One Chrome-trace file of a job's timelines, for Perfetto or chrome://tracing (smdebug's
``smdebug.profiler.analysis.utils.merge_timelines``).

    from sdk_ext.profiler.analysis.utils.merge_timelines import MergedTimeline, MergeUnit

    path = MergedTimeline("sdk-ext-jobs/my-job/profiler-output").merge_timeline(2, 10, unit=MergeUnit.STEP)

``MergedTimeline(path, file_suffix_filter=None, output_directory=None)`` reads a profiler-output directory
(local, or ``s3://``; a local job's directory stands for its ``profiler-output/``) and ``merge_timeline(start, end, unit=MergeUnit.TIME, sys_metrics_filter={"lowgpu": ()})``
writes ``<output_directory or path>/<end us>_<pid>-<host>_merged_timeline.json`` and returns its path:

- every framework event active in ``[start, end]`` (microseconds since the epoch), from every trace file
  under ``framework/`` (step timelines, dataloader and detailed-profiling timelines, TensorBoard traces,
  Horovod and SMDataParallel timelines; ``file_suffix_filter`` keeps the files whose names end with one of
  its suffixes), as the algorithm reader reads them (a ``B``/``E`` pair is one complete event);
- by step (``unit=MergeUnit.STEP`` or ``"step"``): from the start of step ``start`` to just before the start
  of step ``end`` (mode steps of the step timeline, as smdebug counted them);
- unless ``sys_metrics_filter`` is None or empty, the system metrics sampled in the range, as counter tracks
  (one row per host, one track per device and metric), and a ``sys_metrics_bottlenecks`` instant at each
  moment a GPU was below 85% utilization, carrying that host's metrics of the moment (within 20 ms).

Layout: a JSON array, one entry per line, sorted by ``ts`` (absolute microseconds): each row (a training
phase, or a host's system metrics) is a process with its ``process_name`` and ``process_sort_index``
before its first event (steps first, then forward, backward, data, device and host operators, Horovod,
the rest, and the system metrics last); each thread has a ``thread_name`` (``<node>_<thread>``).

The file is written through :mod:`sdk_ext.storage` and appears complete or not at all (a failure leaves
nothing under its name). Memory is bounded: trace files are read a few at a time and events are sorted
in memory up to ``max_events_in_memory`` (beyond that, in sorted runs on disk merged as they are written).

Differences from smdebug, each where smdebug lost data or wrote what no viewer opens: a range with no
events is ``[]`` (smdebug wrote ``[``); the system metrics are merged whether or not a GPU was below 85%
(smdebug dropped them all on a host without GPUs, and every sample after the last low-GPU one); a step
range whose steps are not in the step timeline is an error naming the steps there are (smdebug merged
nothing, silently); thread ids are small numbers, stable from run to run.
"""

from __future__ import annotations

import bisect
import json
import logging
import math
import os
import time
from collections.abc import Collection, Iterable, Iterator, Mapping
from enum import Enum
from types import MappingProxyType
from typing import Any

import numpy as np

from sdk_ext.format.profiler_paths import PROFILER_OUTPUT_DIR
from sdk_ext.format.profiler_records import SystemMetricColumns
from sdk_ext.profiler.algorithm_metrics_reader import LocalAlgorithmMetricsReader, S3AlgorithmMetricsReader
from sdk_ext.profiler.analysis.utils.external_sort import ExternalSort
from sdk_ext.profiler.metrics_reader_base import ProfilerSource
from sdk_ext.profiler.profiler_constants import (
    CONVERT_TO_MICROSECS,
    MERGEDTIMELINE_SUFFIX,
    PYTHONTIMELINE_SUFFIX,
)
from sdk_ext.profiler.system_metrics_reader import LocalSystemMetricsReader, S3SystemMetricsReader
from sdk_ext.profiler.trace_event_file_parser import TraceEvent
from sdk_ext.storage import Storage, open_storage

logger = logging.getLogger(__name__)

#: smdebug's default ``sys_metrics_filter``: merge the system metrics.
DEFAULT_SYS_METRICS_FILTER: Mapping[str, Any] = MappingProxyType({"lowgpu": ()})
#: A GPU below this utilization (percent) marks a ``sys_metrics_bottlenecks`` instant (smdebug's threshold).
LOW_GPU_UTILIZATION = 85.0
#: Samples of a host within this many microseconds of a low-GPU sample are that moment's metrics.
SNAPSHOT_US = 20_000
#: Events sorted in memory before sorted runs go to disk.
MAX_EVENTS_IN_MEMORY = 500_000
BOTTLENECK_EVENT = "sys_metrics_bottlenecks"
_SYSTEM_ROW = "System metrics {node}"

# Row order in the viewer: the first of these a phase name contains gives its pid range (pids sort the rows).
_ROW_ORDER = (("Step:", 1), ("Forward", 10_000), ("Backward", 20_000), ("DataIterator", 30_000),
              ("Dataset", 40_000), ("/device", 50_000), ("/host", 60_000), ("gpu_functions", 70_000),
              ("cpu_functions", 80_000), ("Horovod", 90_000))
_OTHER_ROWS = 1_000_000
_SYSTEM_ROWS = 2_000_000
_FLUSH_BYTES = 1 << 20


class MergeUnit(Enum):
    """What ``merge_timeline``'s start and end count."""

    TIME = "time"  # microseconds since the epoch
    STEP = "step"  # steps of the step timeline


def _unit(unit: MergeUnit | str) -> MergeUnit:
    if isinstance(unit, MergeUnit):
        return unit
    try:
        return MergeUnit(str(unit).lower())
    except ValueError:
        raise ValueError(f"unit={unit!r}: use MergeUnit.TIME (microseconds) or MergeUnit.STEP (steps)") from None


class MergedTimeline:
    """Merges the timelines under a profiler-output path (see the module doc).

    Args:
        path: the profiler-output directory or ``s3://`` prefix (holding ``framework/`` and ``system/``), or a
            local job's directory (holding ``profiler-output/``).
        file_suffix_filter: trace-file name endings to merge (``PYTHONTIMELINE_SUFFIX``,
            ``MODELTIMELINE_SUFFIX``, ``TENSORBOARDTIMELINE_SUFFIX``, ``HOROVODTIMELINE_SUFFIX``,
            ``SMDATAPARALLELTIMELINE_SUFFIX`` of ``sdk_ext.profiler.profiler_constants``); None: every file.
        output_directory: where the merged file goes (a directory or ``s3://`` prefix); None: ``path``.
        storage: the storage of ``path`` (default: opened from it).
        max_events_in_memory: events sorted in memory before sorted runs go to disk.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        file_suffix_filter: Iterable[str] | str | None = None,
        output_directory: str | os.PathLike[str] | None = None,
        *,
        storage: Storage | None = None,
        max_events_in_memory: int = MAX_EVENTS_IN_MEMORY,
    ) -> None:
        self.path = os.fspath(path)
        job_output = os.path.join(self.path, PROFILER_OUTPUT_DIR)
        if not self.path.startswith("s3://") and os.path.isdir(job_output):  # a local job's directory
            self.path = job_output
        self.out_dir = os.fspath(output_directory) if output_directory is not None else self.path
        if isinstance(file_suffix_filter, str):
            file_suffix_filter = [file_suffix_filter]
        self.file_suffix_filter = list(file_suffix_filter) if file_suffix_filter is not None else None
        if self.file_suffix_filter is not None and not all(isinstance(s, str) for s in self.file_suffix_filter):
            raise TypeError(f"file_suffix_filter must hold file-name endings (str), got {self.file_suffix_filter!r}")
        if max_events_in_memory < 1:
            raise ValueError(f"max_events_in_memory must be at least 1, got {max_events_in_memory}")
        self.max_events_in_memory = max_events_in_memory
        self._source = ProfilerSource(self.path, storage=storage)
        self._framework: LocalAlgorithmMetricsReader | S3AlgorithmMetricsReader | None = None
        self._system: LocalSystemMetricsReader | S3SystemMetricsReader | None = None
        #: bytes of the last merged file
        self.bytes_written = 0
        #: events in the last merged file (framework events, counters and instants; no metadata)
        self.events_written = 0

    @property
    def framework_metrics_reader(self) -> LocalAlgorithmMetricsReader | S3AlgorithmMetricsReader:
        """The reader of ``path``'s framework events (made at first use)."""
        if self._framework is None:
            if self._source.is_s3:
                self._framework = S3AlgorithmMetricsReader(self.path, storage=self._source.storage)
            else:
                self._framework = LocalAlgorithmMetricsReader(self.path, storage=self._source.storage)
        return self._framework

    @property
    def system_metrics_reader(self) -> LocalSystemMetricsReader | S3SystemMetricsReader:
        """The reader of ``path``'s system metrics (made at first use)."""
        if self._system is None:
            if self._source.is_s3:
                self._system = S3SystemMetricsReader(self.path, storage=self._source.storage)
            else:
                self._system = LocalSystemMetricsReader(self.path, storage=self._source.storage)
        return self._system

    def file_name(self, end_timestamp_in_us: float) -> str:
        """Where a merge ending at ``end_timestamp_in_us`` is written (smdebug's name for it)."""
        from sdk_ext.profiler.timeline import node_id

        name = f"{round(end_timestamp_in_us)}_{node_id(None)}_{MERGEDTIMELINE_SUFFIX}"
        if self.out_dir.startswith("s3://"):
            return f"{self.out_dir.rstrip('/')}/{name}"
        return os.path.join(self.out_dir, name)

    def merge_timeline(
        self,
        start: float,
        end: float,
        unit: MergeUnit | str = MergeUnit.TIME,
        sys_metrics_filter: Mapping[str, Any] | Collection[Any] | None = DEFAULT_SYS_METRICS_FILTER,
    ) -> str:
        """Merge ``[start, end]`` into one trace file; return its path (see the module doc).

        Raises:
            ValueError: a bad unit or range, or a step range whose steps the step timeline does not hold.
            StorageError: reading the profiler output or writing the merged file failed (nothing is left).
        """
        if _unit(unit) is MergeUnit.STEP:
            start_us, end_us = self._step_interval(int(start), int(end))
        else:
            if not (math.isfinite(start) and math.isfinite(end)):
                raise ValueError(f"start={start!r} and end={end!r} must be microseconds since the epoch")
            start_us, end_us = int(start), int(end)
        if end_us < start_us:
            raise ValueError(f"the range ends ({end_us} us) before it starts ({start_us} us)")
        self._check_there_is_output()
        filename = self.file_name(end_us)
        with ExternalSort(self.max_events_in_memory) as events:
            seq = 0
            for record in self._framework_records(start_us, end_us):
                events.add((record[0], seq, *record[1:]))
                seq += 1
            if sys_metrics_filter:
                for record in self._system_records(start_us, end_us):
                    events.add((record[0], seq, *record[1:]))
                    seq += 1
            self._write(filename, events.sorted())
            if events.spilled_runs:
                logger.info("merged timeline: %d events sorted in %d runs on disk", seq, events.spilled_runs)
        logger.info("merged timeline saved at %s (%d events)", filename, self.events_written)
        return filename

    def _check_there_is_output(self) -> None:
        """A path without any profiler output (a typo, the job's directory instead of its profiler output)
        is an error, not an empty merge."""
        framework, system = self.framework_metrics_reader, self.system_metrics_reader
        framework.refresh_event_file_list()
        system.refresh_event_file_list()
        if not framework.get_timestamp_of_latest_available_file() and not system.get_timestamp_of_latest_available_file():
            raise ValueError(
                f"no profiler output under {self.path}: it holds no framework/pevents/... trace files and no "
                "system/incremental/... metrics files; give the profiler-output directory (a local job's "
                "<job dir>/profiler-output, or SageMaker's s3://.../<job>/profiler-output)"
            )

    # --- ranges ----------------------------------------------------------------------------------

    def _step_interval(self, start_step: int, end_step: int) -> tuple[int, int]:
        """From the start of ``start_step`` to 1 us before the start of ``end_step`` (each step's first start)."""
        if end_step <= start_step:
            raise ValueError(
                f"end_step {end_step} must come after start_step {start_step}: the range ends where end_step starts"
            )
        starts: dict[int, int] = {}
        reader = self.framework_metrics_reader
        reader.refresh_event_file_list()
        now_us = int(time.time() * CONVERT_TO_MICROSECS)
        for batch in reader.iter_events(0, now_us, file_suffix_filter=[PYTHONTIMELINE_SUFFIX]):
            for event in batch:
                args = event.event_args
                if args and "step_num" in args:
                    step = int(args["step_num"])
                    if step not in starts or event.start_time < starts[step]:
                        starts[step] = event.start_time
        missing = [s for s in (start_step, end_step) if s not in starts]
        if missing:
            held = f"steps {min(starts)}..{max(starts)}" if starts else "no steps"
            raise ValueError(
                f"step {missing[0]} is not in the step timeline under {self.path} ({held}); a step range runs from "
                "the start of start_step to the start of end_step, so both must be recorded steps (merge by time "
                "to reach the end of the data)"
            )
        return starts[start_step], starts[end_step] - 1

    # --- records: (ts, row, thread, JSON body without pid/tid) -----------------------------------

    def _framework_records(self, start_us: int, end_us: int) -> Iterator[tuple[int, str, str, str]]:
        reader = self.framework_metrics_reader
        reader.refresh_event_file_list()
        for batch in reader.iter_events(start_us, end_us, file_suffix_filter=self.file_suffix_filter):
            for event in batch:
                yield event.start_time, event.event_phase, _thread_name(event), _event_body(event)

    def _system_records(self, start_us: int, end_us: int) -> Iterator[tuple[int, str, str, str]]:
        reader = self.system_metrics_reader
        reader.refresh_event_file_list()
        for columns in reader.iter_columns(start_us, end_us):
            yield from _counter_records(columns)
            yield from _bottleneck_records(columns)

    # --- writing ---------------------------------------------------------------------------------

    def _write(self, filename: str, records: Iterator[tuple[Any, ...]]) -> None:
        key = os.path.basename(filename) if not filename.startswith("s3://") else filename.rsplit("/", 1)[1]
        writer = open_storage(self.out_dir).open_write(key)
        rows = _Rows()
        written = events = 0
        chunk: list[str] = []
        size = 0
        try:
            writer.write(b"[\n")
            written = 2
            first = True
            for ts, _seq, row, thread, body in records:
                lines = rows.lines_for(row, thread, body)
                for line in lines:
                    text = line if first else ",\n" + line
                    first = False
                    chunk.append(text)
                    size += len(text)
                events += 1
                if size >= _FLUSH_BYTES:
                    data = "".join(chunk).encode()
                    writer.write(data)
                    written += len(data)
                    chunk, size = [], 0
            data = ("".join(chunk) + "\n]\n").encode()
            writer.write(data)
            written += len(data)
            writer.commit()
        except BaseException:
            writer.abort()
            raise
        self.bytes_written, self.events_written = written, events


class _Rows:
    """Gives each row (process) and thread its id, in order of first appearance, with their metadata lines."""

    def __init__(self) -> None:
        self._pids: dict[str, int] = {}
        self._next: dict[int, int] = {}
        self._tids: dict[tuple[int, str], int] = {}
        self._threads_of: dict[int, int] = {}

    def _pid(self, row: str, out: list[str]) -> int:
        pid = self._pids.get(row)
        if pid is None:
            base = _SYSTEM_ROWS if row.startswith("System metrics ") or row == BOTTLENECK_EVENT else next(
                (b for key, b in _ROW_ORDER if key in row), _OTHER_ROWS)
            pid = self._pids[row] = base + self._next.get(base, 0)
            self._next[base] = self._next.get(base, 0) + 1
            out.append(json.dumps({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": row}}))
            out.append(json.dumps({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}}))
        return pid

    def lines_for(self, row: str, thread: str, body: str) -> list[str]:
        out: list[str] = []
        pid = self._pid(row, out)
        if not thread:
            out.append(f'{{"pid": {pid}, {body[1:]}')
            return out
        tid = self._tids.get((pid, thread))
        if tid is None:
            tid = self._tids[(pid, thread)] = self._threads_of[pid] = self._threads_of.get(pid, 0) + 1
            out.append(json.dumps({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": thread}}))
        out.append(f'{{"pid": {pid}, "tid": {tid}, {body[1:]}')
        return out


def _thread_name(event: TraceEvent) -> str:
    info = event.process_info
    thread = info.find_thread_info(event.phase_tid) if info is not None else None
    return thread.thread_name if thread is not None else f"{event.node_id}_{event.tid}"


def _event_body(event: TraceEvent) -> str:
    """The event as a JSON object (no pid or tid: the row and thread give those), absolute ``ts``."""
    entry: dict[str, Any] = {"name": event.event_name, "ph": "X", "ts": int(event.start_time),
                             "dur": int(event.duration)}
    if event.event_args:
        entry["args"] = event.event_args
    try:
        return json.dumps(entry, allow_nan=False, default=str)
    except ValueError:  # a NaN in args: browsers' JSON has none
        entry["args"] = json.loads(json.dumps(event.event_args, default=str), parse_constant=str)
        return json.dumps(entry, default=str)


def _series_name(name: str | None, dimension: str) -> str:
    """``cpu0_CPUUtilization``; a series without a device name or without a dimension is named by the other."""
    return "_".join(part for part in (name, dimension) if part)


def _counter_records(columns: SystemMetricColumns) -> Iterator[tuple[int, str, str, str]]:
    """One counter event per sample: the host's row, a track per device and metric."""
    keys = columns.keys
    heads = [f'{{"name": {json.dumps(_series_name(k.name, k.dimension))}, "ph": "C", "ts": ' for k in keys]
    rows = [_SYSTEM_ROW.format(node=k.node_id) for k in keys]
    stamps = np.round(columns.timestamps * CONVERT_TO_MICROSECS).astype(np.int64).tolist()
    for k, ts, value in zip(columns.key_index.tolist(), stamps, columns.values.tolist(), strict=True):
        if math.isfinite(value):
            yield ts, rows[k], "", f'{heads[k]}{ts}, "args": {{"value": {value!r}}}}}'


def _bottleneck_records(columns: SystemMetricColumns) -> Iterator[tuple[int, str, str, str]]:
    """A ``sys_metrics_bottlenecks`` instant at each moment (per host) a GPU was below 85% utilization."""
    keys = columns.keys
    low_keys = np.array([k.dimension == "GPUUtilization" for k in keys] + [False], dtype=bool)
    low = low_keys[columns.key_index] & (columns.values < LOW_GPU_UTILIZATION)
    if not low.any():
        return
    stamps = np.round(columns.timestamps * CONVERT_TO_MICROSECS).astype(np.int64)
    nodes = sorted({k.node_id for k in keys})
    node_of_key = np.array([nodes.index(k.node_id) for k in keys] + [0], dtype=np.int64)
    for n, node in enumerate(nodes):
        of_node = node_of_key[columns.key_index] == n
        order = np.argsort(stamps[of_node], kind="stable")
        node_stamps = stamps[of_node][order]
        node_keys = columns.key_index[of_node][order].tolist()
        node_values = columns.values[of_node][order].tolist()
        sorted_stamps = node_stamps.tolist()
        last = None
        for moment in np.unique(stamps[of_node & low]).tolist():
            if last is not None and moment - last <= SNAPSHOT_US:
                continue  # the same moment as the marker just made
            last = moment
            lo = bisect.bisect_left(sorted_stamps, moment - SNAPSHOT_US)
            hi = bisect.bisect_right(sorted_stamps, moment + SNAPSHOT_US)
            args: dict[str, Any] = {"node": node}
            for i in range(lo, hi):
                if math.isfinite(node_values[i]):
                    k = keys[node_keys[i]]
                    args[_series_name(k.name, k.dimension)] = node_values[i]
            body = json.dumps({"name": BOTTLENECK_EVENT, "ph": "i", "ts": moment, "s": "p", "args": args})
            yield moment, BOTTLENECK_EVENT, "", body


__all__ = ["DEFAULT_SYS_METRICS_FILTER", "LOW_GPU_UTILIZATION", "MergeUnit", "MergedTimeline"]
