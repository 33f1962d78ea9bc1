"""Chrome-trace events of framework profiling and their parser (smdebug's
``smdebug.profiler.trace_event_file_parser``).

A trace file's ``ts`` are microseconds after the ``start_time_since_epoch_in_micros`` of its first
metadata entry; a :class:`TraceEvent` holds absolute times (``start_time``, ``end_time``, microseconds
since the epoch). Complete events (``ph: "X"``) are kept as they are; a ``B``/``E`` pair of one pid
becomes one complete event; metadata (``M``) names the phases ("processes": ``Step:ModeKeys.TRAIN``,
``DataIterator``, ...) and threads. Instant and counter events are not kept (smdebug kept none either).
The node of an event is the file's node field with a ``<pid>-algo-N`` turned into ``algo-N-<pid>``, as
smdebug did, so that a timeline sorts by host.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sdk_ext.exceptions import StorageError
from sdk_ext.format.profiler_records import START_TIME_ARG, decode_trace_file
from sdk_ext.profiler.utils import (
    TimeUnits,
    convert_utc_datetime_to_microseconds,
    convert_utc_timestamp_to_microseconds,
    get_node_id_from_tracefilename,
)

log = logging.getLogger(__name__)
_NODE = re.compile(r"(.*)-(algo.*)")


class ThreadInfo:
    def __init__(self, tid: Any, thread_name: str) -> None:
        self.tid = tid
        self.thread_name = thread_name

    def __repr__(self) -> str:
        return f"tid:{self.tid} name:{self.thread_name}"


class ProcessInfo:
    """A phase of the timeline (a "process" row in the viewer) and its threads."""

    def __init__(self, id: Any, name: str) -> None:  # noqa: A002  (smdebug's argument name)
        self.id = id
        self.name = name
        self._threads: dict[Any, ThreadInfo] = {}

    def add_thread(self, threadid: Any, thread_name: str) -> None:
        if threadid not in self._threads:
            self._threads[threadid] = ThreadInfo(threadid, thread_name)

    def get_thread_info(self, threadid: Any) -> ThreadInfo:
        return self._threads[threadid]

    def find_thread_info(self, threadid: Any) -> ThreadInfo | None:
        """The thread ``threadid`` of this row, or None when the row has no such thread."""
        return self._threads.get(threadid)

    def __repr__(self) -> str:
        return f"id:{self.id} name:{self.name} threads:{self._threads}"


class TraceEvent:
    """One complete event, absolute times in microseconds since the epoch."""

    def __init__(
        self,
        ts: int,
        name: str,
        dur: int,
        phase_pid: Any,
        phase_tid: Any,
        event_args: dict[str, Any] | None,
        node_id: str,
        phase: str,
        file_type: str,
        event_phase: str = "",
        pid: Any = 0,
        tid: Any = 0,
        process_info: ProcessInfo | None = None,
    ) -> None:
        self.start_time = ts
        self.event_name = name
        self.duration = dur
        self.end_time = ts + dur
        self.phase_pid = phase_pid  # the phase's id in the file
        self.phase_tid = phase_tid
        self.pid = pid  # the real process id, where the event says it (args.pid)
        self.tid = tid
        self.event_args = event_args
        self.node_id = node_id
        self.phase = phase
        self.event_phase = event_phase  # the phase's name
        self.process_info = process_info
        self.file_type = file_type

    def to_json(self) -> str:
        """The event as one Chrome-trace entry (``ts`` absolute)."""
        entry: dict[str, Any] = {"name": self.event_name, "pid": self.pid, "tid": self.tid, "ph": self.phase}
        entry["ts"] = self.start_time
        args = dict(self.event_args) if self.event_args else None
        if self.phase == "i":
            entry["s"] = args.pop("s", "t") if args else "t"
        elif self.phase == "X":
            entry["dur"] = self.duration
        if args:
            entry["args"] = args
        return json.dumps(entry)

    def __repr__(self) -> str:
        return (
            f"TraceEvent(name={self.event_name!r}, phase={self.event_phase!r}, start_time={self.start_time}, "
            f"duration={self.duration}, node_id={self.node_id!r})"
        )


class TraceEventParser:
    """Holds the events of trace files read so far; answers window queries over them."""

    def __init__(self, type: str = "") -> None:  # noqa: A002  (smdebug's argument name)
        self._processes: dict[Any, ProcessInfo] = {}
        self._process_name_to_id: dict[str, Any] = {}
        self._trace_events: list[TraceEvent] = []
        self._pid_stacks: dict[Any, list[Mapping[str, Any]]] = {}
        self._start_timestamp = 0
        self.type = type
        self.logger = log

    # --- metadata --------------------------------------------------------------------------------

    def _populate_process_info_for_metaevent(self, event: Mapping[str, Any]) -> None:
        if event.get("name") != "process_name":
            return
        pid = event.get("pid")
        args = event.get("args") or {}
        process_name = args.get("name", "Unknown")
        if process_name not in self._process_name_to_id:
            self._processes[pid] = ProcessInfo(pid, process_name)
            self._process_name_to_id[process_name] = pid
        else:  # the same phase from another node or file: one phase
            self._processes[pid] = ProcessInfo(self._process_name_to_id[process_name], process_name)

    def _thread(self, event: Mapping[str, Any], node_id: str, default_tid: Any, phase_name: str) -> Any:
        """The thread id of an event (a generated one when the file names none), registered with its phase."""
        pid = event.get("pid")
        if event.get("name") == "thread_name" and event.get("ph") == "M":
            tid, name = event.get("tid"), f"{node_id}_{(event.get('args') or {}).get('name', '')}"
        elif event.get("name") == "thread_sort_index" and event.get("ph") == "M":
            tid, name = event.get("tid"), "Unknown"
        elif default_tid is not None:
            name = f"{node_id}_{default_tid}"
            tid = hash(name + str(phase_name))
        else:
            return None
        if pid not in self._processes:
            self._processes[pid] = ProcessInfo(pid, "Unknown")
        self._processes[pid].add_thread(tid, name)
        return tid

    def _populate_start_time(self, event: Mapping[str, Any]) -> None:
        args = event.get("args")
        if isinstance(args, Mapping) and START_TIME_ARG in args:
            self._start_timestamp = int(args[START_TIME_ARG])

    # --- events ----------------------------------------------------------------------------------

    def _read_event(self, event: Mapping[str, Any], node_id: str = "") -> None:
        phase_type = event.get("ph")
        if phase_type is None:
            return
        if node_id:
            parts = _NODE.match(node_id)
            if parts is not None:
                node_id = f"{parts[2]}-{parts[1]}"
        if phase_type == "M":
            self._populate_process_info_for_metaevent(event)
            self._thread(event, node_id, None, "")
            self._populate_start_time(event)
        elif phase_type == "X":
            self._add(event, event["ts"], event["dur"], event.get("name", ""), node_id, event.get("args"))
        elif phase_type == "B":
            self._pid_stacks.setdefault(event.get("pid"), []).append(event)
        elif phase_type == "E":
            stack = self._pid_stacks.get(event.get("pid"))
            if not stack:
                self.logger.info(
                    "an 'E' event without its 'B' in pid %s; skipped: %s", event.get("pid"), event
                )
                return
            begin = stack.pop()
            duration = event["ts"] - begin["ts"]
            if duration < 0:
                self.logger.error(
                    "an 'E' event before its 'B' in pid %s (%s); skipped", event.get("pid"), begin
                )
                return
            merged = dict(event)
            merged.setdefault("tid", begin.get("tid", 0))
            self._add(merged, begin["ts"], duration, begin.get("name", ""), node_id, event.get("args"))

    def _add(
        self,
        event: Mapping[str, Any],
        ts: int,
        dur: int,
        name: str,
        node_id: str,
        args: dict[str, Any] | None,
    ) -> None:
        phase_pid = event.get("pid")
        process = self._processes.get(phase_pid)
        phase_name = process.name if process is not None else "Unknown"
        tid = event.get("tid")
        if tid is not None and process is not None and tid in process._threads:
            phase_tid = tid
        else:
            phase_tid = self._thread(event, node_id, tid if tid is not None else 0, phase_name)
        pid, real_tid = phase_pid, phase_tid
        if args:  # detailed profiling names the real process and thread in args
            pid = args.get("pid", pid)
            real_tid = args.get("thread_id", real_tid)
        self._trace_events.append(
            TraceEvent(
                ts + self._start_timestamp,
                name,
                dur,
                phase_pid,
                phase_tid,
                args,
                node_id,
                "X",
                file_type=self.type,
                event_phase=phase_name,
                pid=pid,
                tid=real_tid,
                process_info=self._processes.get(phase_pid),
            )
        )

    def read_trace_file(self) -> None:
        """Nothing: smdebug's placeholder."""

    def read_events_from_file(self, tracefile: str | os.PathLike[str]) -> None:
        """Add the events of a local trace file (a torn last line is dropped).

        Raises:
            CorruptProfilerRecordError: the JSON is broken before its last line.
            StorageError: the file cannot be read.
        """
        path = os.fspath(tracefile)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as err:
            raise StorageError(f"cannot read trace file {path}: {err}") from err
        self.read_events_from_bytes(data, name=path, node_id=get_node_id_from_tracefilename(path))

    def read_events_from_bytes(self, data: bytes, *, name: str, node_id: str) -> None:
        content = decode_trace_file(data, name=name)
        if content.torn_tail:
            self.logger.warning(
                "%s ends in a torn line (a writer still at it?); read its complete lines", name
            )
        self.read_events_from_json_data(content.events, node_id)

    def read_events_from_json_data(
        self, trace_json_data: Iterable[Mapping[str, Any]], node_id: str = ""
    ) -> None:
        for event in trace_json_data:
            self._read_event(event, node_id)

    # --- queries ---------------------------------------------------------------------------------

    def get_all_events(self) -> list[TraceEvent]:
        return self._trace_events

    def get_events_start_time_sorted(self) -> list[TraceEvent]:
        return sorted(self._trace_events, key=lambda e: e.start_time)

    def get_events_end_time_sorted(self) -> list[TraceEvent]:
        return sorted(self._trace_events, key=lambda e: e.end_time)

    def get_events_within_time_range(
        self, start_time: float, end_time: float, unit: TimeUnits = TimeUnits.MICROSECONDS
    ) -> list[TraceEvent]:
        """Events active at some time in ``[start, end]``: not ended before ``start``, not begun after ``end``."""
        start_us = convert_utc_timestamp_to_microseconds(start_time, unit)
        end_us = convert_utc_timestamp_to_microseconds(end_time, unit)
        return [e for e in self._trace_events if not (e.end_time < start_us or end_us < e.start_time)]

    def get_events_within_range(self, start_time: datetime, end_time: datetime) -> list[TraceEvent]:
        """As :meth:`get_events_within_time_range`, with datetimes."""
        start_us = convert_utc_datetime_to_microseconds(start_time) if isinstance(start_time, datetime) else 0
        end_us = convert_utc_datetime_to_microseconds(end_time) if isinstance(end_time, datetime) else 0
        return self.get_events_within_time_range(start_us, end_us, unit=TimeUnits.MICROSECONDS)

    def get_process_info(self, process_id: Any) -> ProcessInfo:
        return self._processes[process_id]

    def get_processes(self) -> dict[Any, ProcessInfo]:
        return self._processes

    def clear_events(self) -> None:
        self._trace_events = []


__all__ = ["ProcessInfo", "ThreadInfo", "TraceEvent", "TraceEventParser"]
