"""System-metric events and their parser (smdebug's ``smdebug.profiler.system_profiler_file_parser``).

The parser keeps events as :class:`ProfilerSystemEvent` objects, as smdebug's did; the readers decode
files column-wise (:func:`sdk_ext.format.profiler_records.decode_system_metric_columns`) and make
objects only for what a query returns.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from sdk_ext.exceptions import StorageError
from sdk_ext.format.profiler_records import SystemMetricColumns, decode_system_metric_columns
from sdk_ext.profiler.utils import TimeUnits, convert_utc_timestamp_to_nanoseconds

log = logging.getLogger(__name__)


class ProfilerSystemEvent:
    """One sample: ``type`` (cpu, gpu, ...), ``name`` (cpu0, gpu1; None if absent), ``dimension``
    (CPUUtilization, ...), ``value``, ``node_id`` (algo-N) and ``timestamp`` (epoch seconds)."""

    __slots__ = ("dimension", "name", "node_id", "timestamp", "type", "value")

    def __init__(
        self, event_type: str, name: str | None, dimension: str, value: float, node_id: str, timestamp: float
    ) -> None:
        self.type = event_type
        self.name = name
        self.dimension = dimension
        self.value = value
        self.node_id = node_id
        self.timestamp = timestamp

    def __repr__(self) -> str:
        return (
            f"ProfilerSystemEvent(type={self.type!r}, name={self.name!r}, dimension={self.dimension!r}, "
            f"value={self.value!r}, node_id={self.node_id!r}, timestamp={self.timestamp!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProfilerSystemEvent):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    __hash__ = None  # type: ignore[assignment]  # mutable, as smdebug's


def events_from_columns(
    columns: SystemMetricColumns, mask: np.ndarray | None = None
) -> list[ProfilerSystemEvent]:
    """Objects for the samples of ``columns`` (those where ``mask`` is true), in file order."""
    index, values, stamps = columns.key_index, columns.values, columns.timestamps
    if mask is not None:
        index, values, stamps = index[mask], values[mask], stamps[mask]
    keys = columns.keys
    return [
        ProfilerSystemEvent(keys[k].type, keys[k].name, keys[k].dimension, v, keys[k].node_id, t)
        for k, v, t in zip(index.tolist(), values.tolist(), stamps.tolist(), strict=True)
    ]


def window_mask(
    columns: SystemMetricColumns, start_ns: int, end_ns: int, event_type: str | None = None
) -> np.ndarray:
    """Samples with ``start_ns <= int(timestamp * 1e9) <= end_ns`` (smdebug's test, product for product)."""
    stamps_ns = (columns.timestamps * 1000 * 1000 * 1000).astype(np.int64)
    mask = (stamps_ns >= start_ns) & (stamps_ns <= end_ns)
    if event_type is not None:
        wanted = np.array([k.type == event_type for k in columns.keys] + [False], dtype=bool)
        mask &= wanted[columns.key_index]
    return mask


class SystemProfilerEventParser:
    """Holds system-metric events read from files or dicts; answers window queries over them."""

    def __init__(self) -> None:
        self._events: list[ProfilerSystemEvent] = []
        self.logger = log

    def _read_event(self, event: Mapping[str, Any]) -> None:
        self._events.append(
            ProfilerSystemEvent(
                event["Type"],
                event.get("Name"),
                event["Dimension"],
                event["Value"],
                event["NodeId"],
                event["Timestamp"],
            )
        )

    def read_events_from_file(self, eventfile: str | os.PathLike[str]) -> None:
        """Add the events of a local file (a torn last line is skipped).

        Raises:
            CorruptProfilerRecordError: a line before the last is not a record (file and line named).
            StorageError: the file cannot be read.
        """
        try:
            with open(eventfile, "rb") as f:
                data = f.read()
        except OSError as err:
            raise StorageError(f"cannot read system metrics file {os.fspath(eventfile)}: {err}") from err
        self.read_events_from_bytes(data, name=os.fspath(eventfile))

    def read_events_from_bytes(self, data: bytes, *, name: str) -> None:
        columns = decode_system_metric_columns(data, name=name)
        if columns.torn_tail:
            self.logger.debug("skipped the torn last line of %s", name)
        self.add_events(events_from_columns(columns))

    def add_events(self, events: Iterable[ProfilerSystemEvent]) -> None:
        """Keep these events (a reader's decoded file)."""
        self._events.extend(events)

    def read_events_from_json_data(self, system_profiler_json_data: Iterable[Mapping[str, Any]]) -> None:
        for event in system_profiler_json_data:
            self._read_event(event)

    def read_event_from_dict(self, event: Mapping[str, Any]) -> None:
        self._read_event(event)

    def get_events_within_time_range(
        self,
        start_time: float,
        end_time: float,
        unit: TimeUnits = TimeUnits.MICROSECONDS,
        event_type: str | None = None,
    ) -> list[ProfilerSystemEvent]:
        """Events with ``start <= timestamp <= end`` (compared in integer nanoseconds), of ``event_type`` if given."""
        start_ns = convert_utc_timestamp_to_nanoseconds(start_time, unit)
        end_ns = convert_utc_timestamp_to_nanoseconds(end_time, unit)
        return [
            e
            for e in self._events
            if start_ns <= convert_utc_timestamp_to_nanoseconds(e.timestamp, TimeUnits.SECONDS) <= end_ns
            and (event_type is None or e.type == event_type)
        ]

    def get_all_events(self) -> list[ProfilerSystemEvent]:
        return self._events

    def clear_events(self) -> None:
        self._events = []


class ProfilerSystemEvents(SystemProfilerEventParser):
    """smdebug's name for the parser."""


__all__ = [
    "ProfilerSystemEvent",
    "ProfilerSystemEvents",
    "SystemProfilerEventParser",
    "events_from_columns",
    "window_mask",
]
