"""Real smdebug 1.0.34's profiler readers and sdk_ext's agree on every event: on what SageMaker and
smdebug wrote (tests/fixtures/profiler) and on what sdk_ext's codecs write (system metrics of two hosts
over several files, a step timeline over two files)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sdk_ext.format.profiler_paths import node_id_for, system_metrics_key, trace_file_key
from sdk_ext.format.profiler_records import (
    SystemMetric,
    TimelineEvent,
    encode_system_metrics,
    encode_trace_file,
)
from sdk_ext.profiler.algorithm_metrics_reader import LocalAlgorithmMetricsReader
from sdk_ext.profiler.system_metrics_reader import LocalSystemMetricsReader
from tests.conftest import FIXTURES

SCRIPT = Path(__file__).with_name("smdebug_read_profiler.py")
T0 = 1_764_000_000  # a whole minute


def read_with_smdebug(python: Path, path: Path, start: int, end: int) -> dict[str, Any]:
    done = subprocess.run(
        [str(python), str(SCRIPT), str(path), str(start), str(end)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.splitlines()[-1]))


def read_with_sdk_ext(path: Path, start: int, end: int) -> dict[str, Any]:
    system = LocalSystemMetricsReader(path)
    framework = LocalAlgorithmMetricsReader(path)
    return {
        "system_first": system.get_timestamp_of_first_available_file(),
        "system_latest": system.get_timestamp_of_latest_available_file(),
        "framework_latest": framework.get_timestamp_of_latest_available_file(),
        "system": [
            [e.type, e.name, e.dimension, e.value, e.node_id, e.timestamp]
            for e in system.get_events(start, end)
        ],
        "gpu": len(system.get_events(start, end, event_type="gpu")),
        "framework": [
            [
                e.event_name,
                e.event_phase,
                e.start_time,
                e.duration,
                e.end_time,
                e.node_id,
                e.event_args,
                e.pid,
            ]
            for e in framework.get_events(start, end)
        ],
    }


def same(theirs: dict[str, Any], ours: dict[str, Any]) -> None:
    for key in ("system_first", "system_latest", "framework_latest", "gpu", "system"):
        assert ours[key] == theirs[key], key
    # framework events come out grouped by parser in both; compare them whole, in a stable order
    assert sorted(map(json.dumps, ours["framework"])) == sorted(map(json.dumps, theirs["framework"]))


def write_job(root: Path) -> tuple[int, int]:
    """Three minutes of 100 ms samples of two hosts (2 CPUs, 1 GPU, memory), one file per host per
    minute, and a step timeline of two processes over two files. Returns the time span in us."""
    for node in ("algo-1", "algo-2"):
        for minute in range(3):
            start = T0 + 60 * minute
            metrics = []
            for tick in range(600):
                ts = start + tick / 10 + 0.0123
                for c in range(2):
                    metrics.append(
                        SystemMetric("cpu", f"cpu{c}", "CPUUtilization", (tick * 7 + c) % 100 / 3, node, ts)
                    )
                metrics.append(SystemMetric("gpu", "gpu0", "GPUUtilization", float(tick % 100), node, ts))
                metrics.append(SystemMetric("gpu", "gpu0", "GPUMemoryUtilization", 12, node, ts))
                metrics.append(SystemMetric("memory", "total", "MemoryUsedPercent", 41.5, node, ts))
            key = root / system_metrics_key(start, node)
            key.parent.mkdir(parents=True, exist_ok=True)
            key.write_bytes(encode_system_metrics(metrics))
    base = T0 * 1_000_000
    for pid, node in ((905, "algo-1"), (77, "algo-2")):
        for part in range(2):
            events = []
            for step in range(part * 50, part * 50 + 50):
                mode = "Step:ModeKeys.EVAL" if step % 10 == 9 else "Step:ModeKeys.TRAIN"
                begin = base + step * 2_000_000 + pid
                events.append(
                    TimelineEvent(mode, mode, begin, 1_500_000 + step, {"step_num": str(step), "pid": pid})
                )
                events.append(
                    TimelineEvent("Forward", "Net.forward", begin + 100, 700_000, {"step_num": str(step)})
                )
            end = max(e.start_us + e.duration_us for e in events)
            key = root / trace_file_key(end, node_id_for(node, pid))
            key.parent.mkdir(parents=True, exist_ok=True)
            key.write_bytes(encode_trace_file(events, start_time_us=base))
    return base, base + 200_000_000


@pytest.mark.smdebug
def test_smdebug_reads_sdk_ext_profiler_output_as_sdk_ext_does(tmp_path: Path, smdebug_python: Path) -> None:
    start, end = write_job(tmp_path)
    whole = read_with_smdebug(smdebug_python, tmp_path, start, end)
    assert len(whole["system"]) == 2 * 3 * 600 * 5 and whole["gpu"] == 2 * 3 * 600 * 2
    assert len(whole["framework"]) == 2 * 100 * 2
    same(whole, read_with_sdk_ext(tmp_path, start, end))
    # a window inside the second minute and one across the file boundaries
    for lo, hi in ((70_000_000, 80_000_000), (59_950_000, 121_000_000)):
        theirs = read_with_smdebug(smdebug_python, tmp_path, start + lo, start + hi)
        assert theirs["system"] and theirs["framework"]
        same(theirs, read_with_sdk_ext(tmp_path, start + lo, start + hi))


@pytest.mark.smdebug
@pytest.mark.parametrize(
    ("fixture", "start", "end"),
    [
        ("sagemaker", 0, 2_000_000_000_000_000),
        ("sagemaker", 1591748165_000000, 1591749000_000000),
        ("sagemaker", 1594662614000000, 1594662620000000),
        ("tf_dataset", 1590461127873222, 1590461139949971),
    ],
)
def test_sdk_ext_reads_what_sagemaker_and_smdebug_wrote_exactly_as_smdebug(
    smdebug_python: Path, fixture: str, start: int, end: int
) -> None:
    path = FIXTURES / "profiler" / fixture
    theirs = read_with_smdebug(smdebug_python, path, start, end)
    assert theirs["system"] or theirs["framework"]
    same(theirs, read_with_sdk_ext(path, start, end))
