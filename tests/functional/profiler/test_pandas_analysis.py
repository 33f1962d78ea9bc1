"""PandasFrameAnalysis (smdebug's notebook analysis) over PandasFrame's frames: each query gives the numbers
worked out by hand, on a small job built for it (tests/functional/profiler/analysis_job.py) and on what
SageMaker and smdebug wrote (tests/fixtures/profiler/sagemaker)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

pd = pytest.importorskip("pandas")

from sdk_ext.profiler.analysis.utils.pandas_data_analysis import (  # noqa: E402
    JobStats,
    PandasFrameAnalysis,
    Resource,
    StatsBy,
)
from sdk_ext.profiler.analysis.utils.profiler_data_to_pandas import PandasFrame  # noqa: E402
from tests.conftest import FIXTURES  # noqa: E402
from tests.functional.profiler.analysis_job import S, write_analysis_job  # noqa: E402

SAGEMAKER = FIXTURES / "profiler" / "sagemaker"
STATS = ["mean", "min", "max", "p50", "p95", "p99"]


def frames(root: Path) -> tuple[Any, Any]:
    pf = PandasFrame(str(root))
    return pf.get_all_system_metrics(), pf.get_all_framework_metrics()


@pytest.fixture
def job(tmp_path: Path) -> PandasFrameAnalysis:
    return PandasFrameAnalysis(*frames(write_analysis_job(tmp_path)))


def pct(values: list[float], q: float) -> float:
    """The q-quantile with linear interpolation between the two nearest ranks, by hand."""
    v = sorted(values)
    pos = q * (len(v) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def summary(values: list[float]) -> list[float]:
    return [sum(values) / len(values), min(values), max(values), pct(values, 0.5), pct(values, 0.95),
            pct(values, 0.99)]


def row(frame: Any, **where: Any) -> list[float]:
    selected = frame
    for column, value in where.items():
        selected = selected[selected[column] == value]
    assert len(selected) == 1, selected
    return [float(x) for x in selected.iloc[0, -6:]]


# --- step statistics -------------------------------------------------------------------------------


def test_step_statistics_by_training_phase_are_the_step_durations(job: PandasFrameAnalysis) -> None:
    stats = job.get_step_statistics()  # TRAIN step i lasts 1 + 0.1 i s; EVAL steps 1 s
    assert list(stats.columns) == ["training_phase"] + [f"duration_{s}_us" for s in STATS]
    train = [S + i * S // 10 for i in range(10)]
    assert row(stats, training_phase="Step:ModeKeys.TRAIN") == pytest.approx(summary(train))
    # by hand: mean 1.45 s; p95 at rank 8.55 -> 1.8 + 0.55 x 0.1 s; p99 at rank 8.91
    assert row(stats, training_phase="Step:ModeKeys.TRAIN") == pytest.approx(
        [1_450_000, 1_000_000, 1_900_000, 1_450_000, 1_855_000, 1_891_000])
    assert row(stats, training_phase="Step:ModeKeys.EVAL") == [S] * 6


def test_step_statistics_by_process_and_event_name(job: PandasFrameAnalysis) -> None:
    by_process = job.get_step_statistics(by=StatsBy.PROCESS)
    assert sorted(by_process["process"]) == ["DataIterator", "Step:ModeKeys.EVAL", "Step:ModeKeys.TRAIN"]
    assert row(by_process, process="DataIterator") == [S / 2] * 6  # one 0.5 s data event in each TRAIN step
    by_name = job.get_step_statistics(by=StatsBy.FRAMEWORK_METRICS)
    assert row(by_name, framework_metric="dataset::GetNext") == [S / 2] * 6


def test_step_statistics_need_a_statsby(job: PandasFrameAnalysis) -> None:
    assert job.get_step_statistics(by="step") is None  # type: ignore[arg-type]
    assert job.get_step_statistics(by="training_phase") is None  # type: ignore[arg-type]


def test_an_event_gets_the_step_it_ran_in_and_one_outside_every_step_keeps_minus_one(
        job: PandasFrameAnalysis) -> None:
    data = job.framework_metrics_df[job.framework_metrics_df["process"] == "DataIterator"].sort_values("start_time_us")
    # the first data event (at 5 s) is before every step; the others run inside TRAIN steps 0..9, which
    # share their numbers with EVAL steps 0..4 (smdebug joined TRAIN 3 and EVAL 3 into one span from 19 s
    # to 52 s and gave the events of TRAIN steps 1..9 the lowest span holding them: step 0 or 1)
    assert data["step"].tolist() == [-1, *range(10)]


def test_the_frames_given_are_not_modified(tmp_path: Path) -> None:
    system, framework = frames(write_analysis_job(tmp_path))
    before = (system.copy(), framework.copy())
    analysis = PandasFrameAnalysis(system, framework)
    analysis.get_utilization_stats(by=StatsBy.TRAINING_PHASE)
    analysis.get_device_usage_stats()
    pd.testing.assert_frame_equal(system, before[0])
    pd.testing.assert_frame_equal(framework, before[1])
    assert "duration_us" in analysis.framework_metrics_df and "phase" in analysis.sys_metrics_df


# --- utilization -----------------------------------------------------------------------------------


def test_utilization_stats_per_resource_and_host(job: PandasFrameAnalysis) -> None:
    stats = job.get_utilization_stats()
    assert list(stats.columns) == ["Resource", "nodeID"] + [f"utilization_{s}" for s in STATS]
    assert stats["Resource"].tolist() == ["cpu", "gpu", "memory"]  # no i/o or network samples
    # cpu: the CPUUtilization of cpu0 (0, 10, ..., 90, six times each) and cpu1 (50, 60 times); sorted, 30
    # values below 50, 66 of 50, then 60, 70, 80, 90 six times each: p50 = 50, p95 at rank 113.05 = 80.5
    assert row(stats, Resource="cpu") == pytest.approx([47.5, 0, 90, 50, 80.5, 90])
    # gpu: GPUUtilization only (95 for 30 s, 5 for 30 s): GPU memory (40) is not utilization
    assert row(stats, Resource="gpu") == pytest.approx([50, 5, 95, 50, 95, 95])
    assert row(stats, Resource="memory") == pytest.approx([30.5, 30, 31, 30.5, 31, 31])
    only = job.get_utilization_stats(resource=[Resource.GPU, "cpu"])
    assert only["Resource"].tolist() == ["gpu", "cpu"]


def test_utilization_stats_by_training_phase(job: PandasFrameAnalysis) -> None:
    stats = job.get_utilization_stats(resource=Resource.GPU, by=StatsBy.TRAINING_PHASE)
    assert list(stats.columns) == ["Resource", "Training_phase", "nodeID"] + [f"utilization_{s}" for s in STATS]
    gpu = {p: row(stats, Training_phase=p) for p in stats["Training_phase"]}
    # samples at t = 0..59 s: before the first TRAIN step (10 s) t = 0..9; TRAIN (10 s .. 38.9 s) t = 10..38,
    # 95% until t = 29 (20 samples) then 5% (9); between TRAIN and EVAL t = 39..44; EVAL (45 .. 54 s)
    # t = 45..54; after, t = 55..59
    assert gpu["Before Step:ModeKeys.TRAIN"] == [95] * 6
    assert gpu["Step:ModeKeys.TRAIN"] == pytest.approx([(20 * 95 + 9 * 5) / 29, 5, 95, 95, 95, 95])
    for later in ("Between Step:ModeKeys.EVAL and Step:ModeKeys.TRAIN", "Step:ModeKeys.EVAL",
                  "After Step:ModeKeys.EVAL"):
        assert gpu[later] == [5] * 6
    assert len(gpu) == 5


def test_utilization_stats_refuse_arguments_of_the_wrong_type(job: PandasFrameAnalysis) -> None:
    assert job.get_utilization_stats(resource="cpu") is None
    assert job.get_utilization_stats(by="step") is None  # type: ignore[arg-type]
    assert job.get_utilization_stats(by=StatsBy.TRAINING_PHASE, phase=("Step:ModeKeys.TRAIN",)) is None  # type: ignore[arg-type]


def test_device_usage_counts_samples_per_range(job: PandasFrameAnalysis) -> None:
    usage = job.get_device_usage_stats()
    assert list(usage.columns) == ["type", "nodeID", (0, 10), (10, 90), (90, 100)]
    counts = {t: usage[usage["type"] == t].iloc[0, 2:].tolist() for t in ("cpu", "gpu")}
    # cpu0: 0 six times, 10..80 six times each (48), 90 six times (90 belongs to (90, 100), listed first);
    # cpu1: 50, sixty times
    assert counts["cpu"] == [6, 48 + 60, 6]
    assert counts["gpu"] == [30, 0, 30]
    mine = job.get_device_usage_stats(device=Resource.CPU, utilization_ranges=[(0, 10), (10, 20), (30, 80)])
    assert mine.iloc[0, 2:].tolist() == [12, 6, 6 * 6 + 60]  # 0 and 10; 20; 30, 40, ..., 80 and cpu1's 50


def test_device_usage_returns_an_empty_frame_for_bad_arguments(job: PandasFrameAnalysis) -> None:
    for device, ranges in (("cpu", None), (None, [(30,)]), (None, []), (None, ((0, 10), (10, 90)))):
        assert job.get_device_usage_stats(device=device, utilization_ranges=ranges).empty


# --- training phases and the job -------------------------------------------------------------------


def test_training_phase_intervals(job: PandasFrameAnalysis) -> None:
    both = job.get_training_phase_intervals()
    assert both.values.tolist() == [
        [0, 10 * S - 1, "Before Step:ModeKeys.TRAIN"],
        [10 * S, 38_900_000, "Step:ModeKeys.TRAIN"],
        [38_900_001, 45 * S - 1, "Between Step:ModeKeys.EVAL and Step:ModeKeys.TRAIN"],
        [45 * S, 54 * S, "Step:ModeKeys.EVAL"],
        [54 * S + 1, 59 * S, "After Step:ModeKeys.EVAL"],
    ]
    train = job.get_training_phase_intervals("Step:ModeKeys.TRAIN")
    assert len(train) == 1 + 10 + 9 + 1
    assert train.values.tolist()[1:4] == [[10 * S, 11 * S, "Step:ModeKeys.TRAIN"],
                                          [11 * S + 1, 13 * S - 1, "Between Step:ModeKeys.TRAIN and Step:ModeKeys.TRAIN"],
                                          [13 * S, 14_100_000, "Step:ModeKeys.TRAIN"]]
    assert train.values.tolist()[-1] == [38_900_001, 59 * S, "After Step:ModeKeys.TRAIN"]
    assert job.get_training_phase_intervals(["Step:ModeKeys.PREDICT"]) is None
    assert job.get_training_phase_intervals(("Step:ModeKeys.TRAIN",)) is None  # type: ignore[arg-type]


def test_job_statistics_add_up_to_the_job(job: PandasFrameAnalysis) -> None:
    stats = job.get_job_statistics()
    assert isinstance(stats, JobStats)
    assert stats["start_time"] == "2025-11-24T16:00:00:000000" and stats["end_time"] == "2025-11-24T16:00:59:000000"
    assert stats["job_duration"] == 59 * S
    assert stats["training_loop_start"] == "2025-11-24T16:00:10:000000"
    assert stats["training_loop_end"] == "2025-11-24T16:00:54:000000"  # the last EVAL step's end
    assert (stats["initialization"], stats["training_loop_duration"], stats["finalization"]) == (10 * S, 44 * S, 5 * S)
    assert stats["initialization_%"] + stats["training_loop_%"] + stats["finalization_%"] == pytest.approx(100)
    assert stats["initialization_%"] == pytest.approx(1000 / 59)
    assert "job_duration" in repr(stats)


def test_job_statistics_without_steps_say_what_is_missing(tmp_path: Path) -> None:
    system, framework = frames(write_analysis_job(tmp_path))
    analysis = PandasFrameAnalysis(system, framework[framework["process"] == "DataIterator"])
    with pytest.raises(ValueError, match="step timeline"):
        analysis.get_job_statistics()


# --- frames of what SageMaker and smdebug wrote ----------------------------------------------------


def _sagemaker_steps() -> list[dict[str, Any]]:
    timeline = next((SAGEMAKER / "framework").rglob("*_pythontimeline.json"))
    events = json.loads(timeline.read_text())
    base = events[0]["args"]["start_time_since_epoch_in_micros"]
    return [dict(e, start=base + e["ts"]) for e in events if e["ph"] == "X"]


def test_step_statistics_of_a_sagemaker_tensorflow_job() -> None:
    analysis = PandasFrameAnalysis(*frames(SAGEMAKER))
    stats = analysis.get_step_statistics()
    steps = _sagemaker_steps()
    for mode in ("Step:ModeKeys.TRAIN", "Step:ModeKeys.EVAL"):
        durations = [e["dur"] for e in steps if e["name"] == mode]
        assert len(durations) == {"Step:ModeKeys.TRAIN": 30, "Step:ModeKeys.EVAL": 10}[mode]
        assert row(stats, training_phase=mode) == pytest.approx(summary(durations))


def test_the_data_events_of_a_sagemaker_job_get_the_step_they_ran_in() -> None:
    analysis = PandasFrameAnalysis(*frames(SAGEMAKER))
    fw = analysis.framework_metrics_df
    origin = PandasFrame(str(SAGEMAKER)).start_time
    steps = _sagemaker_steps()
    data = fw[fw["process"] == "DataIterator"]
    assert len(data) == 662
    expected = []
    for start, end in zip(data["start_time_us"] + origin, data["end_time_us"] + origin, strict=True):
        holding = [e for e in steps if e["start"] < start and e["start"] + e["dur"] > end]
        expected.append(int(min(holding, key=lambda e: e["dur"])["args"]["step_num"]) if holding else -1)
    assert data["step"].tolist() == expected
    # every step has its data events (smdebug 1.0.34, which joins TRAIN step j and EVAL step j into one
    # span, puts 626 of the 662 in step 0 and 4 in each of steps 1..9, the EVAL ones)
    assert sorted(set(expected)) == list(range(30))


def test_device_usage_of_sagemaker_system_metrics() -> None:
    analysis = PandasFrameAnalysis(*frames(SAGEMAKER))
    values = [json.loads(line)["Value"] for f in sorted((SAGEMAKER / "system").rglob("*.json"))
              for line in f.read_text().splitlines() if '"CPUUtilization"' in line]
    usage = analysis.get_device_usage_stats()
    by_hand = {r: 0 for r in ((0, 10), (10, 90), (90, 100))}
    for v in values:
        by_hand[next(r for r in ((90, 100), (10, 90), (0, 10)) if r[0] <= v <= r[1])] += 1
    assert usage.iloc[0, 2:].tolist() == [by_hand[c] for c in usage.columns[2:]]
    assert sum(by_hand.values()) == 64


# --- errors ----------------------------------------------------------------------------------------


def test_frames_without_pandas_frames_columns_are_refused() -> None:
    with pytest.raises(ValueError, match="lacks the columns"):
        PandasFrameAnalysis(pd.DataFrame({"value": [1.0]}), pd.DataFrame())


def test_without_pandas_the_error_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        PandasFrameAnalysis(object(), object())
