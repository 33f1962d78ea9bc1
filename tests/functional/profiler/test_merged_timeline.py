"""MergedTimeline (smdebug's merge_timelines): one Chrome-trace file of a job's timelines, by time or by step,
from what SageMaker and smdebug wrote (tests/fixtures/profiler/sagemaker) and from a small job of known
numbers (tests/functional/profiler/analysis_job.py), local and on S3, written whole or not at all."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from sdk_ext.profiler.algorithm_metrics_reader import LocalAlgorithmMetricsReader
from sdk_ext.profiler.analysis.utils import merge_timelines
from sdk_ext.profiler.analysis.utils.external_sort import ExternalSort
from sdk_ext.profiler.analysis.utils.merge_timelines import MergedTimeline, MergeUnit
from sdk_ext.profiler.profiler_constants import (
    MERGEDTIMELINE_SUFFIX,
    MODELTIMELINE_SUFFIX,
    PYTHONTIMELINE_SUFFIX,
)
from sdk_ext.profiler.tf_profiler_parser import SMProfilerEvents
from sdk_ext.profiler.utils import read_tf_profiler_metadata_file
from tests.conftest import FIXTURES
from tests.functional.profiler.analysis_job import BASE_US, S, write_analysis_job
from tests.moto_s3 import S3Env

SAGEMAKER = FIXTURES / "profiler" / "sagemaker"
# the fixture's step timeline: TRAIN steps 0..29, then EVAL steps 0..9; its data events in between
START, END = 1594662618874598, 1594662623418701


def load(path: str | Path) -> list[dict[str, Any]]:
    events = json.loads(Path(path).read_text())
    assert isinstance(events, list)
    return events


def check_layout(events: list[dict[str, Any]]) -> None:
    """Sorted by ts; every row and thread named before it is used."""
    stamps = [e["ts"] for e in events if "ts" in e]
    assert stamps == sorted(stamps)
    named: set[int] = set()
    threads: set[tuple[int, int]] = set()
    for e in events:
        if e["ph"] == "M" and e["name"] == "process_name":
            named.add(e["pid"])
        elif e["ph"] == "M" and e["name"] == "thread_name":
            assert e["pid"] in named
            threads.add((e["pid"], e["tid"]))
        elif e["ph"] != "M":
            assert e["pid"] in named
            if "tid" in e:
                assert (e["pid"], e["tid"]) in threads


def complete(events: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    return sorted((e["name"], e["ts"], e["dur"]) for e in events if e["ph"] == "X")


def test_merge_by_time_holds_every_event_of_the_range_once(tmp_path: Path) -> None:
    path = MergedTimeline(str(SAGEMAKER), output_directory=str(tmp_path)).merge_timeline(START, END)
    assert path.startswith(str(tmp_path)) and path.endswith(f"{END}_{Path(path).name.split('_')[1]}_"
                                                           f"{MERGEDTIMELINE_SUFFIX}")
    events = load(path)
    check_layout(events)
    merged = complete(events)
    assert all(ts <= END and ts + dur >= START for _, ts, dur in merged)  # active in the range
    read = LocalAlgorithmMetricsReader(str(SAGEMAKER)).get_events(START, END)
    assert merged == sorted((e.event_name, e.start_time, e.duration) for e in read)
    assert len(merged) == 231
    rows = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert rows == {"Step:ModeKeys.TRAIN", "Step:ModeKeys.EVAL", "DataIterator"}  # system metrics: another day
    parsed = SMProfilerEvents()
    parsed.read_events_from_file(path)  # smdebug's parser reads it back, event for event
    assert len(parsed.get_all_events()) == 231


def test_merge_by_step_runs_from_the_start_of_one_step_to_the_start_of_another(tmp_path: Path) -> None:
    timeline = MergedTimeline(str(SAGEMAKER), output_directory=str(tmp_path))
    events = load(timeline.merge_timeline(2, 4, unit=MergeUnit.STEP))
    check_layout(events)
    steps = json.loads(next(SAGEMAKER.rglob("*_pythontimeline.json")).read_text())
    base = steps[0]["args"]["start_time_since_epoch_in_micros"]
    start = {int(e["args"]["step_num"]): base + e["ts"] for e in reversed(steps) if e["ph"] == "X"}
    lo, hi = start[2], start[4] - 1  # each step number's first start (TRAIN's: EVAL comes later)
    merged = [e for e in events if e["ph"] == "X"]
    assert all(e["ts"] <= hi and e["ts"] + e["dur"] >= lo for e in merged)
    assert sorted(int(e["args"]["step_num"]) for e in merged if e["name"].startswith("Step:")) == [2, 3]
    data = LocalAlgorithmMetricsReader(str(SAGEMAKER)).get_events_by_step(2, 4)
    assert len(merged) == len(data) > 2
    assert load(MergedTimeline(str(SAGEMAKER), output_directory=str(tmp_path / "b")).merge_timeline(
        2, 4, unit="step")) == events


def test_the_suffix_filter_keeps_those_files(tmp_path: Path) -> None:
    only_data = load(MergedTimeline(str(SAGEMAKER), [MODELTIMELINE_SUFFIX], str(tmp_path)).merge_timeline(START, END))
    assert {e["args"]["name"] for e in only_data if e["name"] == "process_name"} == {"DataIterator"}
    only_steps = load(MergedTimeline(str(SAGEMAKER), PYTHONTIMELINE_SUFFIX, str(tmp_path / "s")).merge_timeline(
        START, END))
    assert {e["name"] for e in only_steps if e["ph"] == "X"} == {"Step:ModeKeys.TRAIN", "Step:ModeKeys.EVAL"}
    assert len(complete(only_data)) + len(complete(only_steps)) == 231


def test_system_metrics_become_counters_and_low_gpu_moments_instants(tmp_path: Path) -> None:
    root = write_analysis_job(tmp_path / "job")
    lo, hi = BASE_US + 25 * S, BASE_US + 35 * S
    events = load(MergedTimeline(str(root), output_directory=str(tmp_path)).merge_timeline(lo, hi))
    check_layout(events)
    counters = [e for e in events if e["ph"] == "C"]
    assert len(counters) == 11 * 6  # samples at 25..35 s, six series
    assert all(lo <= e["ts"] <= hi for e in counters)
    gpu = sorted((e["ts"], e["args"]["value"]) for e in counters if e["name"] == "gpu0_GPUUtilization")
    assert gpu == [(BASE_US + t * S, 95.0 if t < 30 else 5.0) for t in range(25, 36)]
    instants = [e for e in events if e["ph"] == "i"]
    assert [e["ts"] for e in instants] == [BASE_US + t * S for t in range(30, 36)]  # GPU below 85% from 30 s
    assert instants[0]["name"] == "sys_metrics_bottlenecks"
    assert instants[0]["args"] == {"node": "algo-1", "cpu0_CPUUtilization": 0.0, "cpu1_CPUUtilization": 50.0,
                                   "gpu0_GPUUtilization": 5.0, "cpu0_I/OWaitPercentage": 7.0,
                                   "gpu0_GPUMemoryUtilization": 40.0, "MemoryUsedPercent": 30.0}
    rows = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert rows == {"Step:ModeKeys.TRAIN", "DataIterator", "System metrics algo-1", "sys_metrics_bottlenecks"}
    # the step rows come first in the viewer, the system metrics last
    order = {e["args"]["name"]: e["pid"] for e in events if e["name"] == "process_name"}
    assert order["Step:ModeKeys.TRAIN"] < order["DataIterator"] < order["System metrics algo-1"]
    without = load(MergedTimeline(str(root), output_directory=str(tmp_path / "w")).merge_timeline(
        lo, hi, sys_metrics_filter=None))
    assert [e for e in without if e["ph"] != "M"] == [e for e in events if e["ph"] == "X"]


def test_a_local_jobs_directory_is_taken_for_its_profiler_output(tmp_path: Path) -> None:
    write_analysis_job(tmp_path / "job" / "profiler-output")
    timeline = MergedTimeline(str(tmp_path / "job"))
    path = timeline.merge_timeline(BASE_US, BASE_US + 60 * S)
    assert Path(path).parent == tmp_path / "job" / "profiler-output" and timeline.events_written > 360


def test_sorting_on_disk_writes_the_same_file(tmp_path: Path) -> None:
    root = write_analysis_job(tmp_path / "job")
    whole = MergedTimeline(str(root), output_directory=str(tmp_path / "a"))
    spilled = MergedTimeline(str(root), output_directory=str(tmp_path / "b"), max_events_in_memory=7)
    a = Path(whole.merge_timeline(BASE_US, BASE_US + 60 * S))
    b = Path(spilled.merge_timeline(BASE_US, BASE_US + 60 * S))
    assert a.read_bytes() == b.read_bytes() and whole.events_written == spilled.events_written > 360


def test_external_sort_orders_any_number_of_runs() -> None:
    rng = random.Random(7)
    records = [(rng.randrange(50), i, f"r{i}") for i in range(1000)]
    for limit in (1, 3, 64, 5000):
        with ExternalSort(limit) as sorter:
            for r in records:
                sorter.add(r)
            assert list(sorter.sorted()) == sorted(records)


def test_a_failed_write_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    real = merge_timelines._Rows.lines_for

    def failing(self: Any, row: str, thread: str, body: str) -> list[str]:
        nonlocal calls
        calls += 1
        if calls == 100:
            raise OSError(28, "No space left on device")
        return real(self, row, thread, body)

    monkeypatch.setattr(merge_timelines._Rows, "lines_for", failing)
    monkeypatch.setattr(merge_timelines, "_FLUSH_BYTES", 64)  # so that part of it was written when it fails
    with pytest.raises(OSError, match="No space"):
        MergedTimeline(str(SAGEMAKER), output_directory=str(tmp_path)).merge_timeline(START, END)
    assert list(tmp_path.iterdir()) == []


def test_an_empty_range_is_an_empty_array(tmp_path: Path) -> None:
    timeline = MergedTimeline(str(SAGEMAKER), output_directory=str(tmp_path))
    assert load(timeline.merge_timeline(1_000_000, 2_000_000)) == []
    assert timeline.events_written == 0


def test_bad_ranges_say_what_is_wrong(tmp_path: Path) -> None:
    timeline = MergedTimeline(str(SAGEMAKER), output_directory=str(tmp_path))
    with pytest.raises(ValueError, match=r"step 40 is not in the step timeline .*steps 0\.\.29"):
        timeline.merge_timeline(2, 40, unit=MergeUnit.STEP)
    with pytest.raises(ValueError, match="must come after start_step"):
        timeline.merge_timeline(4, 2, unit="step")
    with pytest.raises(ValueError, match="ends .* before it starts"):
        timeline.merge_timeline(END, START)
    with pytest.raises(ValueError, match="MergeUnit.TIME"):
        timeline.merge_timeline(START, END, unit="seconds")
    with pytest.raises(ValueError, match="no profiler output under .*nowhere"):
        MergedTimeline(str(tmp_path / "nowhere"), output_directory=str(tmp_path)).merge_timeline(START, END)
    assert list(tmp_path.iterdir()) == []


def test_merge_reads_and_writes_s3(s3: S3Env, tmp_path: Path) -> None:
    s3.upload_dir(SAGEMAKER, "job/profiler-output")
    timeline = MergedTimeline(s3.uri("job/profiler-output"), output_directory=s3.uri("merged"))
    path = timeline.merge_timeline(2, 4, unit=MergeUnit.STEP)
    assert path.startswith(s3.uri("merged/")) and s3.keys("merged/") == ["merged/" + path.rsplit("/", 1)[1]]
    on_s3 = json.loads(s3.get("merged/" + path.rsplit("/", 1)[1]))
    local = load(MergedTimeline(str(SAGEMAKER), output_directory=str(tmp_path)).merge_timeline(2, 4, unit="step"))
    assert on_s3 == local and len(on_s3) > 10
    # by default next to the data
    beside = MergedTimeline(s3.uri("job/profiler-output")).merge_timeline(START, END)
    assert beside.startswith(s3.uri("job/profiler-output/")) and beside.endswith(MERGEDTIMELINE_SUFFIX)


def test_tensorflow_trace_metadata_is_found_on_s3(s3: S3Env) -> None:
    folder = "job/framework/tensorflow/detailed_profiling/2020080523/000000002"
    s3.put(f"{folder}/151-algo-1_1596668425766312_1596668425896759.metadata", b"")
    trace = f"{folder}/plugins/profile/2020_08_05_23_00_25/ip-10-0-209-63.ec2.internal.trace.json.gz"
    s3.put(trace, b"")
    assert read_tf_profiler_metadata_file(s3.uri(trace)) == ("151-algo-1", "1596668425766312", "1596668425896759")
    assert read_tf_profiler_metadata_file(s3.uri("job/framework/pevents/2020052817/x.trace.json.gz")) == ("", "0", "0")
