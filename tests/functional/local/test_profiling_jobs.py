"""Profiling in local jobs: a request with an enabled ProfilerConfig gets a system monitor for the job's life
and the hooks' step timeline under <job dir>/profiler-output, DescribeTrainingJob says Enabled and echoes the
config, UpdateTrainingJob changes the interval or turns profiling off while the job runs, and a request
without ProfilerConfig runs as before."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sdk_ext.debugger import ProfilerConfig
from sdk_ext.debugger.update import disable_profiling_request, update_profiler_request
from sdk_ext.exceptions import ConfigError
from sdk_ext.local import LocalSageMakerClient
from sdk_ext.local.request.from_options import build_request
from tests.functional.local.support import job_pids, poll_until, request, settings, wait_gone, write_script

# The framework-free hook from the job's debughookconfig.json, one step per 50 ms; it prints the profiler config path.
TRAIN = """
import os, sys, time
from sdk_ext.hooks import Hook
print("SMPROFILER_CONFIG_PATH=" + os.environ.get("SMPROFILER_CONFIG_PATH", ""), flush=True)
hook = Hook.create_from_json_file()
steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 20
for step in range(steps):
    with hook.step():
        hook.save_scalar("loss", 1.0 / (step + 1))
        time.sleep(0.05)
hook.close()
"""


def _profiled(name: str, interval: int = 100, steps: int = 20) -> dict[str, Any]:
    req = request(name, ProfilerConfig=ProfilerConfig(s3_output_path="s3://local/prof",
                                                      system_monitor_interval_millis=interval)._to_request_dict())
    req["HyperParameters"] = {"steps": str(steps)}
    return req


def _system(job_dir: Path) -> list[dict[str, Any]]:
    files = sorted((job_dir / "profiler-output" / "system" / "incremental").rglob("*.algo-1.json"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


def _memory_times(records: list[dict[str, Any]]) -> list[float]:
    return sorted(r["Timestamp"] for r in records if r["Name"] == "MemoryUsedPercent")


def _median_gap(times: list[float]) -> float:
    gaps = sorted(b - a for a, b in zip(times, times[1:]))
    return gaps[len(gaps) // 2]


def test_a_profiled_job_has_system_metrics_a_step_timeline_and_says_enabled(tmp_path: Path) -> None:
    client = LocalSageMakerClient(settings(tmp_path))
    runner = client.prepare_job(_profiled("prof-1"), entry_point=write_script(tmp_path, TRAIN))
    final = runner.run()
    job_dir = runner.dir.root
    assert final["TrainingJobStatus"] == "Completed", (job_dir / "logs" / "training.log").read_text()
    assert final["ProfilingStatus"] == "Enabled"
    assert final["ProfilerConfig"] == {"S3OutputPath": "s3://local/prof", "DisableProfiler": False,
                                       "ProfilingIntervalInMilliseconds": 100}
    config = json.loads((job_dir / "input" / "config" / "profilerconfig.json").read_text())
    assert config["ProfilingParameters"]["LocalPath"] == str(job_dir / "profiler-output")
    assert f"SMPROFILER_CONFIG_PATH={job_dir / 'input' / 'config' / 'profilerconfig.json'}" in \
        (job_dir / "logs" / "training.log").read_text()
    records = _system(job_dir)
    assert {r["Type"] for r in records} >= {"cpu", "memory"}
    assert len(_memory_times(records)) >= 5
    timelines = list((job_dir / "profiler-output" / "framework" / "pevents").rglob("*_pythontimeline.json"))
    steps = [e for f in timelines for e in json.loads(f.read_text()) if e["ph"] == "X"]
    assert len(steps) == 20 and {e["name"] for e in steps} == {"Step:ModeKeys.GLOBAL"}
    assert all(e["dur"] >= 40_000 for e in steps)  # each step sleeps 50 ms
    for sub in ("system", "framework"):
        assert (job_dir / "profiler-output" / sub / "training_job_end.ts").is_file()
    assert not list((job_dir / "profiler-output").rglob("*.tmp"))
    local = json.loads((job_dir / "job.json").read_text())["SdkExtLocal"]
    assert local["MonitorPid"] and wait_gone(job_pids(job_dir)) == []


def test_update_training_job_changes_the_interval_then_disables_profiling_live(tmp_path: Path) -> None:
    client = LocalSageMakerClient(settings(tmp_path))
    runner = client.prepare_job(_profiled("prof-2", steps=160), entry_point=write_script(tmp_path, TRAIN))
    thread = threading.Thread(target=runner.run)
    thread.start()
    try:
        import time

        time.sleep(2.5)
        job = client.describe_training_job(TrainingJobName="prof-2")
        client.update_training_job(**update_profiler_request(job, system_monitor_interval_millis=1000,
                                                             region="us-east-1"))
        slowed = time.time()
        assert client.describe_training_job(TrainingJobName="prof-2")["ProfilerConfig"][
            "ProfilingIntervalInMilliseconds"] == 1000
        time.sleep(4.0)
        job = client.describe_training_job(TrainingJobName="prof-2")
        client.update_training_job(**disable_profiling_request(job, region="us-east-1"))
        disabled = time.time()
        assert client.describe_training_job(TrainingJobName="prof-2")["ProfilingStatus"] == "Disabled"
        poll_until(lambda: json.loads((runner.dir.root / "job.json").read_text())["ProfilingStatus"] == "Disabled",
                   timeout=10)  # job.json (DescribeTrainingJob as last seen) follows at once too
    finally:
        thread.join(timeout=60)
    final = client.describe_training_job(TrainingJobName="prof-2")
    assert final["TrainingJobStatus"] == "Completed" and final["ProfilingStatus"] == "Disabled"
    times = _memory_times(_system(runner.dir.root))
    assert 0.05 < _median_gap([t for t in times if t < slowed - 0.5]) < 0.3
    assert 0.8 < _median_gap([t for t in times if slowed + 1.5 < t < disabled - 0.5]) < 1.5
    assert not [t for t in times if t > disabled + 1.5]
    with pytest.raises(ClientError, match="in status Completed"):
        client.update_training_job(TrainingJobName="prof-2", ProfilerConfig={"ProfilingIntervalInMilliseconds": 500})


def test_update_of_an_unknown_job_or_with_a_bad_interval_is_refused_like_sagemaker(tmp_path: Path) -> None:
    client = LocalSageMakerClient(settings(tmp_path))
    with pytest.raises(ClientError, match="Requested resource not found"):
        client.update_training_job(TrainingJobName="nope", ProfilerConfig={"DisableProfiler": True})
    client.prepare_job(_profiled("prof-3"), entry_point=write_script(tmp_path, TRAIN))
    with pytest.raises(ClientError, match="ProfilingIntervalInMilliseconds 250: SageMaker accepts 100, 200, 500"):
        client.update_training_job(TrainingJobName="prof-3", ProfilerConfig={"ProfilingIntervalInMilliseconds": 250})


def test_a_request_without_profiler_config_profiles_nothing_as_before(tmp_path: Path) -> None:
    client = LocalSageMakerClient(settings(tmp_path))
    req = request("noprof")
    req["HyperParameters"] = {"steps": "3"}
    runner = client.prepare_job(req, entry_point=write_script(tmp_path, TRAIN))
    final = runner.run()
    assert final["TrainingJobStatus"] == "Completed"
    assert "ProfilingStatus" not in final and "ProfilerConfig" not in final
    assert not (runner.dir.root / "profiler-output").exists()
    assert not (runner.dir.root / "input" / "config" / "profilerconfig.json").exists()
    assert "SMPROFILER_CONFIG_PATH=\n" in (runner.dir.root / "logs" / "training.log").read_text()


def test_an_interval_sagemaker_refuses_is_refused_before_the_job_starts(tmp_path: Path) -> None:
    client = LocalSageMakerClient(settings(tmp_path))
    req = _profiled("badprof")
    req["ProfilerConfig"]["ProfilingIntervalInMilliseconds"] = 250
    with pytest.raises(ConfigError, match=r"ProfilerConfig.ProfilingIntervalInMilliseconds 250"):
        client.prepare_job(req, entry_point=write_script(tmp_path, TRAIN))


def test_cli_profile_option_builds_an_enabled_profiler_config_and_the_default_stays_off(tmp_path: Path) -> None:
    script = write_script(tmp_path, TRAIN)
    off = build_request(script=script, base=None, job_name="a")
    assert off["ProfilerConfig"] == {"DisableProfiler": True}
    on = build_request(script=script, base=None, job_name="b", profile_ms=100)
    assert on["ProfilerConfig"] == {"S3OutputPath": "s3://sdk-ext-local/output", "DisableProfiler": False,
                                    "ProfilingIntervalInMilliseconds": 100}
    kept = build_request(script=None, base=on, job_name="c", rules=["LossNotDecreasing"])
    assert kept["ProfilerConfig"]["DisableProfiler"] is False  # a request's own ProfilerConfig is kept
