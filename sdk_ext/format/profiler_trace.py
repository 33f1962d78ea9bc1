"""Chrome trace files of framework events and profiler-rule reports (layouts in
:mod:`sdk_ext.format.profiler_records`). Nothing here does I/O."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sdk_ext.exceptions import CorruptProfilerRecordError

START_TIME_ARG = "start_time_since_epoch_in_micros"


# --- trace files -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TimelineEvent:
    """A complete ("X") event of a training phase, in absolute time."""

    phase: str  # the training phase, shown as a process: "Step:ModeKeys.TRAIN", "DataIterator", ...
    name: str  # the event name ("Step:ModeKeys.TRAIN" for a step)
    start_us: int  # microseconds since the epoch
    duration_us: int
    args: Mapping[str, Any] = field(default_factory=dict)  # e.g. {"step_num": "3"}


@dataclass(frozen=True, slots=True)
class TraceFileContent:
    """A decoded trace file: its raw events in file order and its start time."""

    events: list[dict[str, Any]]
    start_time_us: int | None  # start_time_since_epoch_in_micros, if present
    torn_tail: bool = False


def encode_trace_file(events: Sequence[TimelineEvent], *, start_time_us: int) -> bytes:
    """smdebug's trace file for ``events`` (in the order given), ``ts`` relative to ``start_time_us``.

    Raises:
        ValueError: an event before ``start_time_us`` or with a negative duration.
    """
    lines = [
        {"name": "process_name", "ph": "M", "pid": 0, "args": {START_TIME_ARG: int(start_time_us)}},
        {"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}},
    ]
    pids: dict[str, int] = {}
    for event in events:
        if event.start_us < start_time_us:
            raise ValueError(f"event {event.name!r} starts at {event.start_us} us, before {start_time_us}")
        if event.duration_us < 0:
            raise ValueError(f"event {event.name!r} has a negative duration {event.duration_us}")
        pid = pids.get(event.phase)
        if pid is None:
            pid = pids[event.phase] = len(pids) + 1
            lines.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": event.phase}})
            lines.append({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}})
        entry: dict[str, Any] = {
            "name": event.name,
            "pid": pid,
            "ph": "X",
            "ts": int(event.start_us - start_time_us),
            "dur": int(event.duration_us),
        }
        if event.args:
            entry["args"] = dict(event.args)
        lines.append(entry)
    return ("[\n" + ",\n".join(json.dumps(line) for line in lines) + "\n]").encode()


def decode_trace_file(data: bytes, *, name: str = "<data>") -> TraceFileContent:
    """The events of a trace file (a JSON array, or an object with ``traceEvents``).

    A file cut short keeps every complete line (``torn_tail``).

    Raises:
        CorruptProfilerRecordError: the JSON is broken before its last line, or is not a list of objects.
    """
    torn = False
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError) as err:
        document = _salvage(data, name, err)
        torn = True
    if isinstance(document, dict) and isinstance(document.get("traceEvents"), list):
        document = document["traceEvents"]
    if not isinstance(document, list) or not all(isinstance(e, dict) for e in document):
        raise CorruptProfilerRecordError(name, 1, "a trace file is a JSON list of event objects")
    start: int | None = None
    for event in document:
        args = event.get("args")
        if event.get("ph") == "M" and isinstance(args, dict) and START_TIME_ARG in args:
            start = int(args[START_TIME_ARG])
            break
    return TraceFileContent(document, start, torn)


def _salvage(data: bytes, name: str, err: Exception) -> list[dict[str, Any]]:
    """The complete event lines of a torn trace file; raise if it is broken anywhere but its last line."""
    lines = data.split(b"\n")
    content = [i for i, line in enumerate(lines) if line.strip() not in (b"", b"[", b"]")]
    events: list[dict[str, Any]] = []
    for i in content:
        text = lines[i].strip().rstrip(b",")
        try:
            event = json.loads(text)
        except (ValueError, UnicodeDecodeError) as line_err:
            if i == content[-1]:
                break  # the torn line
            raise CorruptProfilerRecordError(name, i + 1, f"{line_err} (file: {err})") from line_err
        if not isinstance(event, dict):
            raise CorruptProfilerRecordError(name, i + 1, "a trace event is a JSON object")
        events.append(event)
    return events


def decode_timeline(data: bytes, *, name: str = "<data>") -> list[TimelineEvent]:
    """The complete ("X") events of a trace file in absolute time, with their phase names.

    Raises:
        CorruptProfilerRecordError: as :func:`decode_trace_file`; or an X event without ts/dur.
    """
    content = decode_trace_file(data, name=name)
    base = content.start_time_us or 0
    phases: dict[object, str] = {}
    out: list[TimelineEvent] = []
    for number, event in enumerate(content.events, start=1):
        args = event.get("args")
        if event.get("ph") == "M" and event.get("name") == "process_name" and isinstance(args, dict):
            if "name" in args:
                phases[event.get("pid")] = str(args["name"])
        elif event.get("ph") == "X":
            try:
                start, duration = int(event["ts"]) + base, int(event["dur"])
            except (KeyError, TypeError, ValueError) as err:
                raise CorruptProfilerRecordError(name, number, f"an X event needs ts and dur: {err}") from err
            phase = phases.get(event.get("pid"), "Unknown")
            out.append(TimelineEvent(phase, str(event.get("name", "")), start, duration, dict(args or {})))
    return out


# --- profiler-rule reports -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RuleReport:
    """What a profiler rule leaves in ``profiler-reports/<Rule>.json``."""

    rule_triggered: int = 0
    violations: int = 0
    details: Mapping[str, Any] = field(default_factory=dict)
    datapoints: int = 0
    rule_parameters: str = ""  # "name:value" lines


def encode_rule_report(report: RuleReport) -> bytes:
    """The report JSON (keys as SageMaker's report notebook reads them)."""
    return json.dumps(
        {
            "RuleTriggered": int(report.rule_triggered),
            "Violations": int(report.violations),
            "Details": dict(report.details),
            "Datapoints": int(report.datapoints),
            "RuleParameters": report.rule_parameters,
        },
        indent=2,
    ).encode()


def decode_rule_report(data: bytes, *, name: str = "<data>") -> RuleReport:
    """A report JSON.

    Raises:
        CorruptProfilerRecordError: not JSON, or a key missing or of the wrong type.
    """
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as err:
        raise CorruptProfilerRecordError(name, getattr(err, "lineno", 1), str(err)) from err
    if not isinstance(obj, dict):
        raise CorruptProfilerRecordError(name, 1, "a rule report is a JSON object")
    try:
        return RuleReport(
            int(obj["RuleTriggered"]),
            int(obj["Violations"]),
            dict(obj["Details"]),
            int(obj["Datapoints"]),
            str(obj["RuleParameters"]),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise CorruptProfilerRecordError(name, 1, f"a rule report needs {err}") from err


__all__ = [
    "START_TIME_ARG",
    "RuleReport",
    "TimelineEvent",
    "TraceFileContent",
    "decode_rule_report",
    "decode_timeline",
    "decode_trace_file",
    "encode_rule_report",
    "encode_trace_file",
]
