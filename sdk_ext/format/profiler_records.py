"""Records of profiler output: system-metric JSON lines, Chrome trace files, profiler-rule reports.

System metrics (``system/incremental/.../<epoch>.algo-N.json``), one JSON object per line, ``\\n``-ended::

    {"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": 4.76, "NodeId": "algo-1", "Timestamp": 1591160699.457089}

``Type`` is cpu, gpu, memory, io or network; ``Name`` the device (``cpu0``, ``gpu3``; optional in the
format); ``Value`` a number; ``Timestamp`` epoch seconds. SageMaker writes the same keys without spaces;
both spellings (and any key order) decode. A torn *last* line (a writer still appending, or killed
mid-line) is never data: it is skipped and reported (``torn_tail``). A line that is not a record
anywhere else raises :class:`~sdk_ext.exceptions.CorruptProfilerRecordError` naming file and line.
Blank lines are ignored.

Trace files (``framework/pevents/...``), smdebug's Chrome-trace layout (Perfetto and chrome://tracing
open it), one event per line::

    [
    {"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": 1594662605425850}},
    {"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}},
    {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "Step:ModeKeys.TRAIN"}},
    {"name": "process_sort_index", "ph": "M", "pid": 1, "args": {"sort_index": 1}},
    {"name": "Step:ModeKeys.TRAIN", "pid": 1, "ph": "X", "ts": 2664345, "dur": 9020725, "args": {"step_num": "0"}}
    ]

``ts`` is microseconds after ``start_time_since_epoch_in_micros`` (the first metadata entry); each
training phase (a "process" in the viewer) gets a pid with its ``process_name`` entry before its first
event. The object form ``{"traceEvents": [...]}`` decodes too. A file cut short (no closing ``]``)
keeps its complete lines and drops the torn one.

Profiler-rule reports (``profiler-reports/<Rule>.json``)::

    {"RuleTriggered": 2, "Violations": 5, "Details": {...}, "Datapoints": 3600,
     "RuleParameters": "threshold_p95:70\\nthreshold_p5:10\\nwindow:500\\npatience:1000"}

Nothing here does I/O.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from sdk_ext.exceptions import CorruptProfilerRecordError
from sdk_ext.format.profiler_scan import RegularLines, decode_regular
from sdk_ext.format.profiler_trace import (
    START_TIME_ARG,
    RuleReport,
    TimelineEvent,
    TraceFileContent,
    decode_rule_report,
    decode_timeline,
    decode_trace_file,
    encode_rule_report,
    encode_trace_file,
)

_REQUIRED = ("Type", "Dimension", "Value", "NodeId", "Timestamp")
_BLANK = frozenset(b" \t\r\n")


# --- system metrics --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SystemMetric:
    """One sample of one metric of one device of one host."""

    type: str  # cpu, gpu, memory, io, network
    name: str | None  # cpu0, gpu3, ... (None: the line had no Name)
    dimension: str  # CPUUtilization, GPUMemoryUtilization, ...
    value: float
    node_id: str  # algo-N
    timestamp: float  # epoch seconds


@dataclass(frozen=True, slots=True, order=True)
class SeriesKey:
    """Which series a sample belongs to."""

    node_id: str
    type: str
    name: str | None
    dimension: str


@dataclass(frozen=True, slots=True)
class SystemMetricColumns:
    """The samples of one file, column-wise, in file order.

    ``keys[key_index[i]]`` is the series of sample ``i``; ``timestamps`` are epoch seconds.
    """

    keys: tuple[SeriesKey, ...]
    key_index: npt.NDArray[np.int32]
    values: npt.NDArray[np.float64]
    timestamps: npt.NDArray[np.float64]
    torn_tail: bool = False  # the last line was torn and skipped

    def __len__(self) -> int:
        return len(self.values)

    def records(self) -> list[SystemMetric]:
        """The samples as :class:`SystemMetric` values."""
        keys = self.keys
        return [
            SystemMetric(keys[k].type, keys[k].name, keys[k].dimension, v, keys[k].node_id, t)
            for k, v, t in zip(
                self.key_index.tolist(), self.values.tolist(), self.timestamps.tolist(), strict=True
            )
        ]


def _number_text(value: float) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"a metric value must be a number, not {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"a metric value must be finite, not {value!r} (JSON has no NaN or infinity)")
    return repr(value) if isinstance(value, float) else str(int(value))


def encode_system_metric(metric: SystemMetric) -> bytes:
    """One JSON line, ``\\n``-ended. The timestamp is kept to the microsecond (16 digits or fewer).

    Raises:
        ValueError / TypeError: a non-finite or non-numeric value, or a key field with a newline.
    """
    fields: dict[str, object] = {"Type": metric.type}
    if metric.name is not None:
        fields["Name"] = metric.name
    fields["Dimension"] = metric.dimension
    for text in (metric.type, metric.name or "", metric.dimension, metric.node_id):
        if "\n" in text or "\r" in text:
            raise ValueError(f"metric field {text!r} holds a line break")
    head = json.dumps(fields)[:-1]
    value = _number_text(metric.value)
    timestamp = _number_text(round(float(metric.timestamp), 6))
    return f'{head}, "Value": {value}, "NodeId": {json.dumps(metric.node_id)}, "Timestamp": {timestamp}}}\n'.encode()


def encode_system_metrics(metrics: Iterable[SystemMetric]) -> bytes:
    """Several lines, in the order given."""
    return b"".join(encode_system_metric(m) for m in metrics)


def _record_from_object(obj: object) -> SystemMetric:
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, found {type(obj).__name__}")
    missing = [k for k in _REQUIRED if k not in obj]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    value, timestamp = obj["Value"], obj["Timestamp"]
    for key, number in (("Value", value), ("Timestamp", timestamp)):
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            raise ValueError(f"{key} is {number!r}, not a number")
    for key in ("Type", "Dimension", "NodeId"):
        if not isinstance(obj[key], str):
            raise ValueError(f"{key} is {obj[key]!r}, not a string")
    name = obj.get("Name")
    if name is not None and not isinstance(name, str):
        raise ValueError(f"Name is {name!r}, not a string")
    return SystemMetric(obj["Type"], name, obj["Dimension"], value, obj["NodeId"], timestamp)


def decode_system_metric(line: bytes | str, *, name: str = "<line>", line_number: int = 1) -> SystemMetric:
    """One JSON line.

    Raises:
        CorruptProfilerRecordError: not a JSON object with Type, Dimension, Value, NodeId, Timestamp.
    """
    try:
        return _record_from_object(json.loads(line))
    except (ValueError, UnicodeDecodeError) as err:
        raise CorruptProfilerRecordError(name, line_number, str(err)) from err


def decode_system_metrics(data: bytes, *, name: str = "<data>") -> list[SystemMetric]:
    """Every sample of a file, in file order (a torn last line skipped).

    Raises:
        CorruptProfilerRecordError: a line other than the last is not a record.
    """
    return decode_system_metric_columns(data, name=name).records()


def decode_system_metric_columns(
    data: bytes | bytearray, *, name: str = "<data>", size: int | None = None
) -> SystemMetricColumns:
    """Every sample of a file, column-wise (a torn last line skipped); the file is ``data[:size]`` (all
    of ``data`` if ``size`` is None: a reader may pass a buffer it reuses). Nothing returned refers to
    ``data``.

    Lines in SageMaker's shape decode without a Python object per line
    (:func:`sdk_ext.format.profiler_scan.decode_regular`); anything else line by line through ``json``.

    Raises:
        CorruptProfilerRecordError: a line other than the last is not a record.
    """
    end = len(data) if size is None else size
    while end and data[end - 1] in _BLANK:
        end -= 1
    if end == 0:
        return _columns([], [], [], [])
    last_start = data.rfind(b"\n", 0, end) + 1
    try:
        last: SystemMetric | None = _record_from_object(json.loads(data[last_start:end]))
    except (ValueError, UnicodeDecodeError):
        last = None  # torn: what a writer still appending leaves
    columns = _from_regular(decode_regular(data, last_start)) if last_start else _columns([], [], [], [])
    if columns is None:
        columns = _decode_lines(bytes(data[:last_start]), name)
    if last is None:
        return SystemMetricColumns(columns.keys, columns.key_index, columns.values, columns.timestamps, True)
    return _append(columns, last)


def _from_regular(lines: RegularLines | None) -> SystemMetricColumns | None:
    if lines is None:
        return None
    key_ids: dict[SeriesKey, int] = {}
    ids = np.array(
        [
            key_ids.setdefault(SeriesKey(node, type_, name, dim), len(key_ids))
            for type_, name, dim, node in lines.groups
        ],
        dtype=np.int32,
    )
    return SystemMetricColumns(tuple(key_ids), ids[lines.group], lines.values, lines.timestamps)


def _columns(
    keys: Sequence[SeriesKey], index: Sequence[int], values: Sequence[float], timestamps: Sequence[float]
) -> SystemMetricColumns:
    return SystemMetricColumns(
        tuple(keys),
        np.asarray(index, dtype=np.int32),
        np.asarray(values, dtype=np.float64),
        np.asarray(timestamps, dtype=np.float64),
    )


def _append(columns: SystemMetricColumns, record: SystemMetric) -> SystemMetricColumns:
    key = SeriesKey(record.node_id, record.type, record.name, record.dimension)
    keys = list(columns.keys)
    try:
        k = keys.index(key)
    except ValueError:
        k = len(keys)
        keys.append(key)
    return SystemMetricColumns(
        tuple(keys),
        np.append(columns.key_index, np.int32(k)).astype(np.int32),
        np.append(columns.values, float(record.value)),
        np.append(columns.timestamps, float(record.timestamp)),
        columns.torn_tail,
    )


def _decode_lines(data: bytes, name: str) -> SystemMetricColumns:
    """Line by line: every non-blank line must be a record (the caller took off the last one)."""
    key_ids: dict[SeriesKey, int] = {}
    index: list[int] = []
    values: list[float] = []
    timestamps: list[float] = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        record = decode_system_metric(line, name=name, line_number=number)
        key = SeriesKey(record.node_id, record.type, record.name, record.dimension)
        index.append(key_ids.setdefault(key, len(key_ids)))
        values.append(record.value)
        timestamps.append(record.timestamp)
    return _columns(list(key_ids), index, values, timestamps)


__all__ = [
    "START_TIME_ARG",
    "RuleReport",
    "SeriesKey",
    "SystemMetric",
    "SystemMetricColumns",
    "TimelineEvent",
    "TraceFileContent",
    "decode_rule_report",
    "decode_system_metric",
    "decode_system_metric_columns",
    "decode_system_metrics",
    "decode_timeline",
    "decode_trace_file",
    "encode_rule_report",
    "encode_system_metric",
    "encode_system_metrics",
    "encode_trace_file",
]
