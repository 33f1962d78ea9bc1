"""ProfilerTrial over files written with the format codecs: windows, late files, the end, the reports."""

from __future__ import annotations

import json

import pytest

from sdk_ext.exceptions import NoMoreProfilerData
from sdk_ext.profiler.analysis.rules import LowGPUUtilization, ProfilerReport, StepOutlier
from sdk_ext.profiler.profiler_trial import ProfilerTrial, profiler_root
from sdk_ext.rules import invoke_rule
from tests.unit.profiler_rules.events import T0
from tests.unit.profiler_rules.files import end_job, local, metric, step_events, write_system, write_trace


def _gpu(values, node="algo-1", every=0.1, start=T0):
    return [metric("GPUUtilization", "gpu0", v, start + i * every, node) for i, v in enumerate(values)]


def test_windows_hand_out_each_record_once_in_time_order(tmp_path):
    storage = local(tmp_path)
    write_system(storage, _gpu(range(1200)))  # two minutes of files
    end_job(storage)
    trial = ProfilerTrial(tmp_path, poll_interval=0.01)
    first = trial.first_timestamp
    assert first == int(T0 // 60 * 60 * 1e6)
    seen, start = [], first
    with pytest.raises(NoMoreProfilerData):
        for _ in range(20):
            trial.wait_for_data(start + 30_000_000, start)
            window = trial.system_window(start, start + 30_000_000)
            for samples in window.series.values():
                assert (samples.timestamps < (start + 30_000_000) / 1e6).all()
                seen += samples.values.tolist()
            start += 30_000_000
    assert seen == [float(v) for v in range(1200)]


def test_a_late_file_goes_to_the_next_window_not_lost(tmp_path):
    storage = local(tmp_path)
    write_system(storage, _gpu([10] * 600))  # algo-1, the first minute
    trial = ProfilerTrial(tmp_path)
    trial.refresh()
    early = trial.system_window(0, int((T0 + 120) * 1e6))
    write_system(storage, _gpu([20] * 600, node="algo-2"))  # another host's file arrives afterwards
    trial.refresh()
    late = trial.system_window(0, int((T0 + 180) * 1e6))
    assert {k.node for k in early.series} == {"algo-1"} and {k.node for k in late.series} == {"algo-2"}
    assert len(late) == 600


def test_latest_timestamp_waits_for_every_host(tmp_path):
    storage = local(tmp_path)
    write_system(storage, _gpu([10] * 900) + _gpu([10] * 300, node="algo-2"))
    trial = ProfilerTrial(tmp_path)
    trial.refresh()
    assert trial.get_latest_timestamp() == int((T0 + 29.9) * 1e6)  # algo-2 lags


def test_the_end_marker_ends_the_walk_after_the_last_window(tmp_path):
    storage = local(tmp_path)
    write_system(storage, _gpu([10] * 100))
    end_job(storage)
    trial = ProfilerTrial(tmp_path)
    start = trial.first_timestamp
    trial.wait_for_data(start + 60_000_000, start)  # the job has ended: no wait
    assert len(trial.system_window(start, start + 60_000_000)) == 100
    with pytest.raises(NoMoreProfilerData):  # the next window starts past the data
        trial.wait_for_data(start + 120_000_000, start + 60_000_000)


def test_no_data_and_the_job_ended(tmp_path):
    end_job(local(tmp_path))
    trial = ProfilerTrial(tmp_path)
    assert trial.wait_for_first_data() is False
    with pytest.raises(NoMoreProfilerData):
        _ = trial.first_timestamp


def test_waits_for_data_that_is_not_there_yet(tmp_path):
    storage = local(tmp_path)
    write_system(storage, _gpu([10] * 10))
    naps = []

    def sleep(seconds):
        naps.append(seconds)
        if len(naps) == 3:
            write_system(storage, _gpu([10] * 10, start=T0 + 200))

    trial = ProfilerTrial(tmp_path, poll_interval=0.5, sleep=sleep)
    start = trial.first_timestamp
    trial.wait_for_data(start + 60_000_000, start)
    assert naps == [0.5, 0.5, 0.5]


def test_profiler_root_finds_the_output_in_a_job_directory(tmp_path):
    write_system(local(tmp_path / "profiler-output"), _gpu([1]))
    assert profiler_root(tmp_path) == str(tmp_path / "profiler-output")
    assert profiler_root(tmp_path / "profiler-output") == str(tmp_path / "profiler-output")
    assert profiler_root("s3://b/p") == "s3://b/p"


def test_a_rule_over_files_fires_writes_its_report_and_ends(tmp_path):
    storage = local(tmp_path / "data")
    write_system(storage, _gpu([20] * 1500))
    end_job(storage)
    trial = ProfilerTrial(tmp_path / "data", output_dir=tmp_path / "out")
    rule = LowGPUUtilization(trial)
    with pytest.raises(Exception) as fired:
        invoke_rule(rule, raise_eval_cond=True)
    assert type(fired.value).__name__ == "RuleEvaluationConditionMet"
    assert "gpu0 on algo-1 is underutilized" in str(fired.value)
    report = json.loads((tmp_path / "out" / "profiler-reports" / "LowGPUUtilization.json").read_text())
    assert report["RuleTriggered"] >= 1 and report["RuleParameters"].startswith("threshold_p95:70")
    quiet = LowGPUUtilization(ProfilerTrial(tmp_path / "data"), threshold_p95="10")
    invoke_rule(quiet, raise_eval_cond=True)  # NoMoreProfilerData ends the walk normally
    assert quiet.windows == 3 and not quiet.triggered


def test_step_outlier_over_a_trace_file(tmp_path):
    storage = local(tmp_path)
    write_system(storage, _gpu([90] * 10))
    write_trace(storage, step_events([0.01] * 200 + [1.0] * 12, start=T0))
    end_job(storage)
    rule = StepOutlier(ProfilerTrial(tmp_path))
    with pytest.raises(Exception, match="12 of 212 TRAIN steps on 1234-algo-1"):
        invoke_rule(rule, raise_eval_cond=True)


def test_profiler_report_runs_every_rule_with_overrides_and_reports_at_the_end(tmp_path):
    storage = local(tmp_path / "data")
    write_system(storage, _gpu([20] * 1500))
    write_trace(storage, step_events([0.01] * 200 + [1.0] * 12, start=T0))
    end_job(storage)
    rule = ProfilerReport(ProfilerTrial(tmp_path / "data", output_dir=tmp_path / "out"),
                          StepOutlier_n_outliers="20", lowgpuutilization_threshold_p95="30")
    with pytest.raises(Exception) as fired:
        invoke_rule(rule, raise_eval_cond=True)
    assert fired.value.end_of_rule and "LowGPUUtilization" in str(fired.value)
    assert "StepOutlier" not in str(fired.value)  # 12 outliers are not more than 20
    reports = sorted(p.stem for p in (tmp_path / "out" / "profiler-reports").glob("*.json"))
    assert reports == sorted(["BatchSize", "CPUBottleneck", "Dataloader", "GPUMemoryIncrease", "IOBottleneck",
                              "LoadBalancing", "LowGPUUtilization", "MaxInitializationTime",
                              "OverallFrameworkMetrics", "OverallSystemUsage", "StepOutlier"])
    step = json.loads((tmp_path / "out" / "profiler-reports" / "StepOutlier.json").read_text())
    assert "n_outliers:20" in step["RuleParameters"] and step["RuleTriggered"] == 0


def test_profiler_report_quiet_job_ends_normally(tmp_path):
    storage = local(tmp_path)
    write_system(storage, _gpu([90] * 1500))
    end_job(storage)
    rule = ProfilerReport(ProfilerTrial(tmp_path))
    invoke_rule(rule, raise_eval_cond=True)
    assert rule.fired_rules() == []
