"""A small profiled job whose numbers can be worked out by hand (the analysis and merge tests use it).

One host (algo-1), one sample a second for 60 s from T0 (a whole minute; the first sample at T0 exactly):

    cpu0 CPUUtilization   (t % 10) * 10         0, 10, ..., 90, 0, 10, ...
    cpu1 CPUUtilization   50
    cpu0 I/OWaitPercentage 7
    gpu0 GPUUtilization   95 for t < 30, then 5
    gpu0 GPUMemoryUtilization 40
    memory MemoryUsedPercent 30 + t % 2

Step timeline (seconds after T0): TRAIN step i (0..9) from 10 + 3i, lasting 1 + 0.1i; EVAL step j (0..4)
from 45 + 2j, lasting 1 (``with_eval``). Data events (``DataIterator``, ``dataset::GetNext``, no step
number) from 0.1 s into each TRAIN step, lasting 0.5 s; with ``outside``, one more at 5 s (before every step).
"""

from __future__ import annotations

from pathlib import Path

from sdk_ext.format.profiler_paths import (
    MODEL_TIMELINE_SUFFIX,
    PYTHON_TIMELINE_SUFFIX,
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

T0 = 1_764_000_000
BASE_US = T0 * 1_000_000
NODE = node_id_for("algo-1", 905)
S = 1_000_000


def train_step(i: int) -> tuple[int, int]:
    """(start us after T0, duration us) of TRAIN step i."""
    return (10 + 3 * i) * S, S + i * S // 10


def write_analysis_job(root: Path, *, with_eval: bool = True, outside: bool = True,
                       utilization_only: bool = False) -> Path:
    """Write the job under ``root`` (a profiler-output directory); ``utilization_only`` leaves out the
    series that are not CPUUtilization or GPUUtilization."""
    metrics = []
    for t in range(60):
        ts = float(T0 + t)
        metrics.append(SystemMetric("cpu", "cpu0", "CPUUtilization", float((t % 10) * 10), "algo-1", ts))
        metrics.append(SystemMetric("cpu", "cpu1", "CPUUtilization", 50.0, "algo-1", ts))
        metrics.append(SystemMetric("gpu", "gpu0", "GPUUtilization", 95.0 if t < 30 else 5.0, "algo-1", ts))
        if not utilization_only:
            metrics.append(SystemMetric("cpu", "cpu0", "I/OWaitPercentage", 7.0, "algo-1", ts))
            metrics.append(SystemMetric("gpu", "gpu0", "GPUMemoryUtilization", 40.0, "algo-1", ts))
            metrics.append(SystemMetric("memory", "MemoryUsedPercent", "", 30.0 + t % 2, "algo-1", ts))
    key = root / system_metrics_key(T0, "algo-1")
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_bytes(encode_system_metrics(metrics))

    steps: list[TimelineEvent] = []
    data: list[TimelineEvent] = []
    for i in range(10):
        start, duration = train_step(i)
        steps.append(TimelineEvent("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", BASE_US + start, duration,
                                   {"pid": 905, "step_num": str(i)}))
        data.append(TimelineEvent("DataIterator", "dataset::GetNext", BASE_US + start + S // 10, S // 2))
    if with_eval:
        for j in range(5):
            steps.append(TimelineEvent("Step:ModeKeys.EVAL", "Step:ModeKeys.EVAL", BASE_US + (45 + 2 * j) * S, S,
                                       {"pid": 905, "step_num": str(j)}))
    if outside:
        data.insert(0, TimelineEvent("DataIterator", "dataset::GetNext", BASE_US + 5 * S, S // 2))
    for events, suffix in ((steps, PYTHON_TIMELINE_SUFFIX), (data, MODEL_TIMELINE_SUFFIX)):
        end = max(e.start_us + e.duration_us for e in events)
        key = root / trace_file_key(end, NODE, suffix)
        key.parent.mkdir(parents=True, exist_ok=True)
        key.write_bytes(encode_trace_file(events, start_time_us=BASE_US))
    return root
