"""One scan window of profiler data, as numpy columns: what the profiler rules compute on.

smdebug's rules walked lists of event objects one by one. Here a window of system metrics is a set of
series, one per ``(node, dimension, name)`` (e.g. ``("algo-1", "GPUUtilization", "gpu0")``), each a pair of
float64 arrays (timestamps in seconds, values) in time order; a window of framework events is a set of
columns (start and end in microseconds, name, phase, node, pid, step number). Both can be built from
the event objects of smdebug's readers (:meth:`SystemWindow.from_events`,
:meth:`FrameworkWindow.from_events`: anything with the same attribute names), so a rule accepts the
events a caller hands to ``invoke_for_timerange`` exactly as smdebug's did.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from sdk_ext.profiler.analysis.rules.series import FloatArray, as_floats

#: Dimensions of the system metrics the rules read (reference: docs/PROFILING.md, "Profiler rules").
CPU_UTILIZATION = "CPUUtilization"
IO_WAIT = "I/OWaitPercentage"
GPU_UTILIZATION = "GPUUtilization"
GPU_MEMORY = "GPUMemoryUtilization"
NETWORK = "Algorithm"  # network counters carry the dimension "Algorithm" (or "Platform")
MEMORY_USED = "MemoryUsedPercent"  # a name (of Type "memory"), not a dimension


class SeriesKey(NamedTuple):
    """Which series: the node (``algo-1``), the dimension (``GPUUtilization``) and the name (``gpu0``)."""

    node: str
    dimension: str
    name: str


@dataclass(frozen=True, slots=True)
class Samples:
    """One series in one window: timestamps (seconds since the epoch) and values, in time order."""

    timestamps: FloatArray
    values: FloatArray

    def __len__(self) -> int:
        return int(self.values.size)


_EMPTY = Samples(np.zeros(0), np.zeros(0))


@dataclass(frozen=True, slots=True)
class SystemWindow:
    """The system metrics of one time window, by series."""

    series: Mapping[SeriesKey, Samples] = field(default_factory=dict)

    def __len__(self) -> int:
        return sum(len(s) for s in self.series.values())

    def of(self, dimension: str) -> Iterator[tuple[SeriesKey, Samples]]:
        """The series of one dimension, in a stable order (node, then name)."""
        for key in sorted(k for k in self.series if k.dimension == dimension):
            yield key, self.series[key]

    def named(self, name: str) -> Iterator[tuple[SeriesKey, Samples]]:
        """The series with one name whatever their dimension (``MemoryUsedPercent``)."""
        for key in sorted(k for k in self.series if k.name == name):
            yield key, self.series[key]

    def timestamps(self) -> FloatArray:
        """Every record's timestamp, sorted (with repeats)."""
        if not self.series:
            return np.zeros(0)
        return np.sort(np.concatenate([s.timestamps for s in self.series.values()]), kind="stable")

    @classmethod
    def from_columns(cls, *, timestamp: Any, value: Any, node: Iterable[str], dimension: Iterable[str],
                     name: Iterable[str]) -> SystemWindow:
        """From parallel columns (one row per record, any order)."""
        ts, vals = as_floats(timestamp), as_floats(value)
        keys = [SeriesKey(str(n), str(d), str(m)) for n, d, m in zip(node, dimension, name)]
        if not (len(keys) == ts.size == vals.size):
            raise ValueError(f"columns of different lengths: {len(keys)} keys, {ts.size} timestamps, "
                             f"{vals.size} values")
        groups: dict[SeriesKey, list[int]] = {}
        for i, key in enumerate(keys):
            groups.setdefault(key, []).append(i)
        series = {}
        for key, rows in groups.items():
            index = np.asarray(rows, dtype=np.int64)
            order = np.argsort(ts[index], kind="stable")
            series[key] = Samples(ts[index][order], vals[index][order])
        return cls(series)

    @classmethod
    def from_events(cls, events: Iterable[Any]) -> SystemWindow:
        """From smdebug-style system events (``timestamp`` in seconds, ``value``, ``node_id``,
        ``dimension``, ``name``)."""
        rows = list(events)
        return cls.from_columns(
            timestamp=[e.timestamp for e in rows], value=[e.value for e in rows],
            node=[e.node_id for e in rows], dimension=[e.dimension for e in rows], name=[e.name for e in rows])

    @classmethod
    def concat(cls, windows: Iterable[SystemWindow]) -> SystemWindow:
        """Several windows as one (series joined in the given order)."""
        parts: dict[SeriesKey, list[Samples]] = {}
        for w in windows:
            for key, samples in w.series.items():
                parts.setdefault(key, []).append(samples)
        return cls({k: v[0] if len(v) == 1 else Samples(np.concatenate([s.timestamps for s in v]),
                                                         np.concatenate([s.values for s in v]))
                    for k, v in parts.items()})


def samples_or_empty(window: SystemWindow, key: SeriesKey) -> Samples:
    return window.series.get(key, _EMPTY)


@dataclass(frozen=True, slots=True)
class FrameworkWindow:
    """The framework events (Chrome-trace ``X`` events) of one time window, as columns in start order.

    ``start_us``/``end_us``: microseconds since the epoch; ``step`` the ``step_num`` argument (-1 when
    absent); ``pid`` the ``pid`` argument (a dataloader worker's process id; -1 when absent); ``args``: each
    event's arguments.
    """

    start_us: FloatArray = field(default_factory=lambda: np.zeros(0))
    end_us: FloatArray = field(default_factory=lambda: np.zeros(0))
    name: tuple[str, ...] = ()
    phase: tuple[str, ...] = ()
    node: tuple[str, ...] = ()
    pid: tuple[int, ...] = ()
    step: tuple[int, ...] = ()
    file_type: tuple[str, ...] = ()
    args: tuple[Mapping[str, Any], ...] = ()

    def __len__(self) -> int:
        return len(self.name)

    @property
    def duration_us(self) -> FloatArray:
        return self.end_us - self.start_us

    @classmethod
    def from_events(cls, events: Iterable[Any]) -> FrameworkWindow:
        """From smdebug-style trace events (``start_time``/``end_time`` in microseconds, ``event_name``,
        ``event_phase``, ``node_id``, ``event_args``, ``pid``, ``file_type``)."""
        rows = sorted(events, key=lambda e: float(e.start_time))
        args = tuple(dict(getattr(e, "event_args", None) or {}) for e in rows)
        return cls(
            start_us=as_floats([e.start_time for e in rows]),
            end_us=as_floats([e.end_time for e in rows]),
            name=tuple(str(e.event_name or "") for e in rows),
            phase=tuple(str(getattr(e, "event_phase", "") or "") for e in rows),
            node=tuple(str(getattr(e, "node_id", "") or "") for e in rows),
            pid=tuple(_pid(a) for a in args),
            step=tuple(_step(a) for a in args),
            file_type=tuple(str(getattr(e, "file_type", "") or "") for e in rows),
            args=args,
        )

    @classmethod
    def concat(cls, windows: Iterable[FrameworkWindow]) -> FrameworkWindow:
        parts = [w for w in windows if len(w)]
        if not parts:
            return cls()
        if len(parts) == 1:
            return parts[0]
        order = np.argsort(np.concatenate([w.start_us for w in parts]), kind="stable")

        def pick(column: str) -> tuple[Any, ...]:
            joined = [v for w in parts for v in getattr(w, column)]
            return tuple(joined[i] for i in order)

        return cls(start_us=np.concatenate([w.start_us for w in parts])[order],
                   end_us=np.concatenate([w.end_us for w in parts])[order],
                   name=pick("name"), phase=pick("phase"), node=pick("node"), pid=pick("pid"),
                   step=pick("step"), file_type=pick("file_type"), args=pick("args"))


def _step(args: Mapping[str, Any]) -> int:
    try:
        return int(args.get("step_num", -1))
    except (TypeError, ValueError):
        return -1


def _pid(args: Mapping[str, Any]) -> int:
    try:
        return int(args.get("pid", -1))
    except (TypeError, ValueError):
        return -1


__all__ = [
    "CPU_UTILIZATION", "GPU_MEMORY", "GPU_UTILIZATION", "IO_WAIT", "MEMORY_USED", "NETWORK", "FrameworkWindow",
    "Samples", "SeriesKey", "SystemWindow", "samples_or_empty",
]
