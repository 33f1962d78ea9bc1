"""Synthetic profiler events for rule tests, shaped like smdebug's reader objects (same attribute names)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

T0 = 1_700_000_000.0  # seconds since the epoch: where synthetic data starts


@dataclass
class SysEvent:
    timestamp: float
    value: float
    dimension: str
    name: str
    node_id: str = "algo-1"
    type: str = ""


@dataclass
class FwEvent:
    start_time: float  # µs
    end_time: float
    event_name: str
    event_phase: str
    node_id: str = "algo-1"
    event_args: dict[str, Any] = field(default_factory=dict)
    file_type: str = "model_timeline"


def series(dimension: str, name: str, values: Iterable[float], *, start: float = T0, every: float = 0.1,
           node: str = "algo-1", offset: float = 0.0) -> list[SysEvent]:
    """One metric sampled every ``every`` seconds from ``start`` (+ ``offset``)."""
    return [SysEvent(start + offset + i * every, float(v), dimension, name, node) for i, v in enumerate(values)]


def steps(durations: Sequence[float], *, start: float = T0, gap: float = 0.001, mode: str = "TRAIN",
          node: str = "algo-1") -> list[FwEvent]:
    """Back-to-back step events (durations in seconds), numbered from 0."""
    out, t = [], start * 1e6
    for i, d in enumerate(durations):
        out.append(FwEvent(t, t + d * 1e6, f"Step:ModeKeys.{mode}", f"Step:ModeKeys.{mode}", node,
                           {"step_num": i}))
        t += (d + gap) * 1e6
    return out


def us(seconds: float) -> int:
    return int(seconds * 1e6)


class FakeProfilerData:
    """An in-memory profiler data source with smdebug's ProfilerTrial interface.

    ``available_until`` (seconds) is how far the data goes while the job runs; ``ended`` says the job ended.
    """

    def __init__(self, system: list[SysEvent], framework: list[FwEvent] = (), *,  # type: ignore[assignment]
                 ended: bool = True, output_dir: Any = None) -> None:
        self.system = sorted(system, key=lambda e: e.timestamp)
        self.framework = sorted(framework, key=lambda e: e.start_time)
        self.ended = ended
        self.output_dir = output_dir
        stamps = [e.timestamp * 1e6 for e in self.system] + [e.start_time for e in self.framework]
        self._first = int(min(stamps)) if stamps else 0
        self._last = max([e.timestamp * 1e6 for e in self.system] + [e.end_time for e in self.framework] or [0])
        self.waits: list[tuple[int, int]] = []

    @property
    def first_timestamp(self) -> int:
        return self._first

    def wait_for_data(self, end_time: int, start_time: int) -> None:
        from sdk_ext.exceptions import NoMoreProfilerData

        self.waits.append((end_time, start_time))
        if end_time > self._last and not self.ended:
            raise AssertionError("a live wait: give the fake more data")
        if self.ended and start_time >= self._last:
            raise NoMoreProfilerData(end_time)

    def get_system_metrics(self, start_time: int, end_time: int) -> list[SysEvent]:
        return [e for e in self.system if start_time <= e.timestamp * 1e6 < end_time]

    def get_framework_metrics(self, start_time: int, end_time: int) -> list[FwEvent]:
        return [e for e in self.framework if start_time <= e.start_time < end_time]
