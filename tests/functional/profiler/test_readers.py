"""The profiler readers as a user meets them: SageMaker's own files read exactly, a window reads only its
files, a live directory is picked up on refresh, torn and corrupt files, the same answers from S3 (moto
over HTTP), a failed listing raising, the numpy series API, PandasFrame and TrainingJob."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sdk_ext.exceptions import CorruptProfilerRecordError, StorageError
from sdk_ext.format.profiler_paths import node_id_for, system_metrics_key, trace_file_key
from sdk_ext.format.profiler_records import (
    SeriesKey,
    SystemMetric,
    TimelineEvent,
    encode_system_metrics,
    encode_trace_file,
)
from sdk_ext.profiler.algorithm_metrics_reader import LocalAlgorithmMetricsReader, S3AlgorithmMetricsReader
from sdk_ext.profiler.analysis.notebook_utils.training_job import TrainingJob
from sdk_ext.profiler.analysis.utils.profiler_data_to_pandas import PandasFrame
from sdk_ext.profiler.system_metrics_reader import LocalSystemMetricsReader, S3SystemMetricsReader
from sdk_ext.profiler.utils import TimeUnits
from tests.conftest import FIXTURES

SAGEMAKER = FIXTURES / "profiler" / "sagemaker"
T0 = 1_764_000_000


def write_minutes(
    root: Path, minutes: int, *, nodes: tuple[str, ...] = ("algo-1",), per_second: int = 2
) -> int:
    """``minutes`` one-minute files per host: cpu0 and gpu0 samples; returns the sample count per host."""
    count = 0
    for node in nodes:
        count = 0
        for minute in range(minutes):
            start = T0 + 60 * minute
            metrics = []
            for tick in range(60 * per_second):
                ts = start + tick / per_second
                metrics.append(SystemMetric("cpu", "cpu0", "CPUUtilization", float(tick % 100), node, ts))
                metrics.append(SystemMetric("gpu", "gpu0", "GPUUtilization", float(minute), node, ts))
                count += 2
            path = root / system_metrics_key(start, node)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(encode_system_metrics(metrics))
    return count


def test_sagemakers_system_files_read_exactly() -> None:
    reader = LocalSystemMetricsReader(SAGEMAKER)
    events = reader.get_events(0, 2_000_000_000, unit=TimeUnits.SECONDS)
    expected = [
        json.loads(line)
        for f in sorted((SAGEMAKER / "system").rglob("*.json"))
        for line in f.read_text().splitlines()
    ]
    assert [(e.type, e.name, e.dimension, e.value, e.node_id, e.timestamp) for e in events] == [
        (o["Type"], o["Name"], o["Dimension"], o["Value"], o["NodeId"], o["Timestamp"]) for o in expected
    ]
    assert reader.get_timestamp_of_first_available_file() == 1591748100_000000
    assert reader.get_nodes() == ["algo-1"]
    # smdebug's own expectations on these files
    assert len(reader.get_events(1591748165, 1591749000, TimeUnits.SECONDS)) == 32
    assert len(reader.get_events(1591748170, 1591749000, TimeUnits.SECONDS)) == 0


def test_step_timeline_written_by_smdebug_reads_with_steps_and_nodes() -> None:
    reader = LocalAlgorithmMetricsReader(SAGEMAKER)
    events = reader.get_events(1594662614000000, 1594662630000000)
    steps = [e for e in events if e.event_name == "Step:ModeKeys.TRAIN"]
    assert len(steps) == 30 and {e.node_id for e in steps} == {"905-b88ab1bb8259"}
    assert {e.event_phase for e in events} == {"Step:ModeKeys.TRAIN", "Step:ModeKeys.EVAL", "DataIterator"}
    assert [int(e.event_args["step_num"]) for e in steps] == sorted(
        int(e.event_args["step_num"]) for e in steps
    )
    assert all(e.end_time == e.start_time + e.duration for e in events)
    tf = LocalAlgorithmMetricsReader(FIXTURES / "profiler" / "tf_dataset")
    dataset = tf.get_events(1590461127873222, 1590461139949971)
    assert len(dataset) == 54 and dataset[0].node_id == "0001"  # smdebug's own expectation


def test_a_window_reads_only_the_files_of_that_window(tmp_path: Path) -> None:
    write_minutes(tmp_path, 10, nodes=("algo-1", "algo-2"))
    reader = LocalSystemMetricsReader(tmp_path)
    assert reader.files_read == 0
    events = reader.get_events(T0 + 185, T0 + 235, TimeUnits.SECONDS)
    assert reader.files_read == 2  # minute 3 of each host: its first sample is at T0+180
    assert {e.node_id for e in events} == {"algo-1", "algo-2"} and len(events) == 2 * 2 * 101
    assert all(T0 + 185 <= e.timestamp <= T0 + 235 for e in events)
    reader.files_read = 0
    reader.get_events(T0 + 150, T0 + 250, TimeUnits.SECONDS)
    assert reader.files_read == 2 * 3  # minutes 2, 3 and 4
    reader.files_read = 0
    reader.get_events(T0 - 1000, T0 - 1, TimeUnits.SECONDS)
    assert reader.files_read == 0  # before the job: no file can hold a sample


def test_a_live_directory_is_picked_up_on_the_next_query(tmp_path: Path) -> None:
    reader = LocalSystemMetricsReader(tmp_path)
    assert reader.get_timestamp_of_latest_available_file() == 0 and reader.get_events(0, 2**62) == []
    write_minutes(tmp_path, 2)
    assert len(reader.get_events(T0, T0 + 120, TimeUnits.SECONDS)) == 2 * 240
    assert reader.get_timestamp_of_latest_available_file() == (T0 + 60) * 1_000_000


def test_torn_last_line_is_skipped_and_a_corrupt_middle_line_names_file_and_line(tmp_path: Path) -> None:
    write_minutes(tmp_path, 1)
    path = next(tmp_path.rglob("*.algo-1.json"))
    whole = path.read_bytes()
    path.write_bytes(whole[:-25])  # a writer killed mid-line
    reader = LocalSystemMetricsReader(tmp_path)
    assert len(reader.get_events(0, 2**62)) == 119 * 2 + 1
    lines = whole.split(b"\n")
    lines[5] = lines[5][:30]
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(CorruptProfilerRecordError, match=rf"{path.name}: line 6 is not a profiler record"):
        reader.get_events(0, 2**62)


def test_series_are_arrays_per_device_and_dimension_sorted_by_time(tmp_path: Path) -> None:
    write_minutes(tmp_path, 3, nodes=("algo-1", "algo-2"))
    reader = LocalSystemMetricsReader(tmp_path)
    series = reader.get_series(T0 + 30, T0 + 150, TimeUnits.SECONDS)
    assert list(series) == [
        SeriesKey("algo-1", "cpu", "cpu0", "CPUUtilization"),
        SeriesKey("algo-1", "gpu", "gpu0", "GPUUtilization"),
        SeriesKey("algo-2", "cpu", "cpu0", "CPUUtilization"),
        SeriesKey("algo-2", "gpu", "gpu0", "GPUUtilization"),
    ]
    gpu = series[SeriesKey("algo-2", "gpu", "gpu0", "GPUUtilization")]
    assert gpu.timestamps.dtype == np.float64 and np.all(np.diff(gpu.timestamps) > 0)
    assert gpu.timestamps[0] == T0 + 30 and gpu.timestamps[-1] == T0 + 150 and len(gpu) == 241
    assert set(gpu.values.tolist()) == {0.0, 1.0, 2.0}
    events = [
        e
        for e in reader.get_events(T0 + 30, T0 + 150, TimeUnits.SECONDS)
        if e.node_id == "algo-2" and e.type == "gpu"
    ]
    assert [(e.timestamp, e.value) for e in events] == list(
        zip(gpu.timestamps.tolist(), gpu.values.tolist(), strict=True)
    )
    only = reader.get_series(T0, T0 + 200, TimeUnits.SECONDS, event_type="gpu", node_id="algo-1")
    assert list(only) == [SeriesKey("algo-1", "gpu", "gpu0", "GPUUtilization")]


def put_tree(s3: Any, root: Path, prefix: str) -> None:
    s3.put_many(
        {f"{prefix}/{p.relative_to(root).as_posix()}": p.read_bytes() for p in root.rglob("*") if p.is_file()}
    )


def test_s3_readers_answer_as_the_local_ones(s3: Any, tmp_path: Path) -> None:
    write_minutes(tmp_path, 4, nodes=("algo-1", "algo-2"))
    base = T0 * 1_000_000
    events = [
        TimelineEvent(
            "Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", base + i * 1000, 900, {"step_num": str(i)}
        )
        for i in range(20)
    ]
    trace = tmp_path / trace_file_key(base + 20_000, node_id_for("algo-1", 12))
    trace.parent.mkdir(parents=True)
    trace.write_bytes(encode_trace_file(events, start_time_us=base))
    put_tree(s3, tmp_path, "job/profiler-output")
    remote = S3SystemMetricsReader(s3.uri("job/profiler-output"))
    local = LocalSystemMetricsReader(tmp_path)
    window = (T0 + 70, T0 + 130)
    assert [vars_of(e) for e in remote.get_events(*window, TimeUnits.SECONDS)] == [
        vars_of(e) for e in local.get_events(*window, TimeUnits.SECONDS)
    ]
    assert remote.files_read == 2 * 2  # minutes 1 and 2 of both hosts
    assert remote._startAfter_prefix.startswith("system/incremental/")
    frames = S3AlgorithmMetricsReader(s3.uri("job/profiler-output")).get_events(base, base + 30_000)
    assert [int(e.event_args["step_num"]) for e in frames] == list(range(20))
    assert {e.node_id for e in frames} == {"algo-1-12"}


def vars_of(event: Any) -> tuple[Any, ...]:
    return (event.type, event.name, event.dimension, event.value, event.node_id, event.timestamp)


def test_a_failed_s3_listing_raises_instead_of_reading_as_no_data(s3: Any) -> None:
    with pytest.raises(StorageError):
        S3SystemMetricsReader(f"s3://{s3.bucket}-missing/job/profiler-output")
    reader = S3SystemMetricsReader(s3.uri("job/profiler-output"))  # an empty prefix is "nothing yet"
    s3.proxy.add_fault(lambda seen: True, "status", times=100, status=403, code="AccessDenied")
    with pytest.raises(StorageError):
        reader.get_events(0, 2**62)


def test_readers_refuse_the_wrong_kind_of_path_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="use S3SystemMetricsReader"):
        LocalSystemMetricsReader("s3://bucket/job/profiler-output")
    with pytest.raises(ValueError, match="s3://bucket/prefix"):
        S3AlgorithmMetricsReader(str(tmp_path))


def test_pandas_frame_of_system_and_framework_metrics(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    write_minutes(tmp_path, 2)
    base = T0 * 1_000_000
    events = [
        TimelineEvent(
            "Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", base + i * 1000, 900, {"step_num": str(i)}
        )
        for i in range(5)
    ]
    trace = tmp_path / trace_file_key(base + 5_000, node_id_for("algo-1", 3))
    trace.parent.mkdir(parents=True)
    trace.write_bytes(encode_trace_file(events, start_time_us=base))
    frame = PandasFrame(str(tmp_path))
    system = frame.get_all_system_metrics()
    assert list(system.columns) == [
        "timestamp",
        "timestamp_us",
        "value",
        "system_metric",
        "dimension",
        "nodeID",
        "type",
    ]
    assert len(system) == 2 * 240 and system["timestamp_us"].min() == 0
    assert system.iloc[0]["timestamp"] == "2025-11-24T16:00:00:000000" and system.iloc[1]["type"] == "gpu"
    assert set(frame.get_all_system_metrics(["gpu0"])["system_metric"]) == {"gpu0"}
    framework = frame.get_all_framework_metrics()
    assert list(framework["step"]) == [0, 1, 2, 3, 4] and set(framework["process"]) == {"Step:ModeKeys.TRAIN"}
    _, by_step = frame.get_profiler_data_by_step(1, 2)
    assert list(by_step["step"]) == [1, 2]


def test_pandas_missing_is_an_error_that_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        PandasFrame(str(tmp_path)).get_all_system_metrics()


class FakeSageMaker:
    def __init__(self, description: dict[str, Any]) -> None:
        self.description = description
        self.calls = 0

    def describe_training_job(self, TrainingJobName: str) -> dict[str, Any]:  # noqa: N803 (boto3's keyword)
        self.calls += 1
        return {"TrainingJobName": TrainingJobName, **self.description}


def test_training_job_finds_a_local_jobs_profiler_output(tmp_path: Path) -> None:
    job = tmp_path / "sdk-ext-jobs" / "my-job"
    write_minutes(job / "profiler-output", 1)
    (job / "job.json").write_text(json.dumps({"TrainingJobStatus": "Completed"}))
    for target, kwargs in (
        (job, {}),
        ("my-job", {"jobs_root": tmp_path / "sdk-ext-jobs"}),
        (job / "profiler-output", {}),
    ):
        tj = TrainingJob(target, **kwargs)  # type: ignore[arg-type]
        assert tj.name == "my-job" and tj.profiler_output_path == str(job / "profiler-output")
        assert len(tj.get_systems_metrics_reader().get_events(0, 2**62)) == 240
    assert TrainingJob(job).describe_training_job()["TrainingJobStatus"] == "Completed"
    with pytest.raises(FileNotFoundError, match="no profiler output"):
        TrainingJob(tmp_path / "sdk-ext-jobs")


def test_training_job_by_sagemaker_name_reads_its_s3_output_and_waits_boundedly(
    s3: Any, tmp_path: Path
) -> None:
    client = FakeSageMaker(
        {"ProfilerConfig": {"S3OutputPath": s3.uri("out/")}, "TrainingJobStatus": "InProgress"}
    )
    tj = TrainingJob("job-1", sm_client=client, jobs_root=tmp_path, sleep=lambda s: None)
    assert tj.profiler_output_path == s3.uri("out/job-1/profiler-output")
    with pytest.raises(TimeoutError, match="no system profiling data"):
        tj.wait_for_sys_profiling_data_to_be_available(timeout=0.0)
    write_minutes(tmp_path / "local", 1)
    put_tree(s3, tmp_path / "local", "out/job-1/profiler-output")
    tj.wait_for_sys_profiling_data_to_be_available(timeout=5)
    assert len(tj.get_systems_metrics_reader().get_events(0, 2**62)) == 240
    with pytest.raises(ValueError, match="profiling off"):
        TrainingJob("job-2", sm_client=FakeSageMaker({}), jobs_root=tmp_path)


def test_local_files_of_any_size_read_one_after_another_through_one_buffer_give_their_own_samples(
    tmp_path: Path,
) -> None:
    # a large file, then smaller ones (one with a torn last line): none may show another's bytes
    sizes = [400, 3, 120, 1]
    expected = []
    for minute, ticks in enumerate(sizes):
        start = T0 + 60 * minute
        metrics = [SystemMetric("cpu", f"cpu{k % 3}", "CPUUtilization", float(k), "algo-1", start + k / 10)
                   for k in range(ticks)]
        data = encode_system_metrics(metrics)
        if minute == 2:
            data += b'{"Type": "cpu", "Name": "cp'  # a writer still appending
        path = tmp_path / system_metrics_key(start, "algo-1")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        expected += [(m.name, m.value, m.timestamp) for m in metrics]
    reader = LocalSystemMetricsReader(str(tmp_path))
    events = reader.get_events(T0 * 10**6, (T0 + 60 * len(sizes)) * 10**6)
    assert [(e.name, e.value, e.timestamp) for e in events] == expected
    assert reader.files_read == len(sizes)


@pytest.mark.parametrize(("reader", "path", "message"), [
    (LocalSystemMetricsReader, "s3://bucket/job/profiler-output", "is an S3 path: use S3SystemMetricsReader"),
    (LocalAlgorithmMetricsReader, "s3://bucket/job/profiler-output", "is an S3 path: use S3AlgorithmMetricsReader"),
    (S3SystemMetricsReader, "/data/profiler-output", "not an S3 path: .*or use LocalSystemMetricsReader"),
    (S3AlgorithmMetricsReader, "/data/profiler-output", "not an S3 path: .*or use LocalAlgorithmMetricsReader"),
])
def test_a_reader_given_the_other_kind_of_path_names_the_reader_to_use(reader: Any, path: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        reader(path)
