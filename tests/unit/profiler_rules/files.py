"""Writing synthetic profiler output (SageMaker's layout) with sdk_ext's format codecs, for rule tests."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from sdk_ext.format.profiler_paths import (
    FRAMEWORK_END_OF_JOB,
    SYSTEM_END_OF_JOB,
    node_id_for,
    system_metrics_key,
    trace_file_key,
)
from sdk_ext.format.profiler_records import (
    SystemMetric,
    TimelineEvent,
    encode_system_metrics,
    encode_trace_file,
)
from sdk_ext.storage import Storage


def metric(dimension: str, name: str, value: float, t: float, node: str = "algo-1") -> SystemMetric:
    kind = "gpu" if dimension.startswith("GPU") else "memory" if name == "MemoryUsedPercent" else \
        "network" if dimension == "Algorithm" else "cpu"
    return SystemMetric(kind, name, dimension, float(value), node, float(t))


def write_system(storage: Storage, metrics: Sequence[SystemMetric], *, period: int = 60) -> list[str]:
    """One file per host per ``period`` seconds, named by the period's start."""
    files: dict[tuple[int, str], list[SystemMetric]] = {}
    for m in metrics:
        files.setdefault((int(m.timestamp // period * period), m.node_id), []).append(m)
    keys = []
    for (start, node), rows in sorted(files.items()):
        key = system_metrics_key(start, node)
        storage.write(key, encode_system_metrics(sorted(rows, key=lambda m: m.timestamp)))
        keys.append(key)
    return keys


def step_events(durations: Iterable[float], *, start: float, gap: float = 0.001, mode: str = "TRAIN"
                ) -> list[TimelineEvent]:
    out, t = [], start
    for i, d in enumerate(durations):
        out.append(TimelineEvent(f"Step:ModeKeys.{mode}", f"Step:ModeKeys.{mode}", int(t * 1e6), int(d * 1e6),
                                 {"step_num": str(i)}))
        t += d + gap
    return out


def write_trace(storage: Storage, events: Sequence[TimelineEvent], *, host: str = "algo-1", pid: int = 1234) -> str:
    events = sorted(events, key=lambda e: e.start_us)
    end = max(e.start_us + e.duration_us for e in events)
    key = trace_file_key(end, node_id_for(host, pid))
    storage.write(key, encode_trace_file(events, start_time_us=events[0].start_us))
    return key


def end_job(storage: Storage) -> None:
    storage.write(SYSTEM_END_OF_JOB, b"")
    storage.write(FRAMEWORK_END_OF_JOB, b"")


def local(root: Path) -> Storage:
    from sdk_ext.storage import LocalStorage

    root.mkdir(parents=True, exist_ok=True)
    return LocalStorage(root)
