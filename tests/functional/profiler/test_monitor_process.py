"""The system monitor as a job runs it: a child process sampling this machine, rotating files, following
profilerconfig.json live, and leaving no torn data when it is SIGKILLed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from sdk_ext.profiler.system_files import recover


def _write_config(path: Path, **config: object) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(config))
    os.replace(tmp, path)


def _published(out: Path) -> list[Path]:
    return sorted((out / "system" / "incremental").rglob("*.json"))


def _records(files: list[Path]) -> list[dict]:
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]  # a torn line raises


def _wait_for(predicate, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _start(out: Path, config: Path, repo_env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "sdk_ext.profiler.monitor", "--out", str(out), "--host",
                             "algo-2", "--config", str(config), "--period", "1"], env=repo_env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_samples_every_core_rotates_follows_the_interval_live_and_survives_sigkill(
        tmp_path: Path, repo_env: dict[str, str]) -> None:
    out, config = tmp_path / "profiler-output", tmp_path / "profilerconfig.json"
    _write_config(config, ProfilingIntervalInMilliseconds=100)
    proc = _start(out, config, repo_env)
    try:
        _wait_for(lambda: len(_published(out)) >= 3)
        fast = _records(_published(out))
        _write_config(config, ProfilingIntervalInMilliseconds=1000)  # UpdateTrainingJob
        changed = time.time()
        _wait_for(lambda: any(r["Timestamp"] > changed + 4.5 for r in _records(_published(out))), timeout=30)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    records = _records(_published(out))  # every published line is whole
    cores = psutil.cpu_count(logical=True)
    util = [r for r in fast if r["Dimension"] == "CPUUtilization"]
    assert {r["Name"] for r in util} == {f"cpu{i}" for i in range(cores)}
    assert all(0 <= r["Value"] <= 100 for r in fast if r["Type"] in ("cpu", "memory"))
    assert {r["NodeId"] for r in records} == {"algo-2"}
    assert {r["Type"] for r in fast} >= {"cpu", "memory"}

    def spacing(rs: list[dict]) -> float:
        times = sorted({r["Timestamp"] for r in rs if r["Name"] == "MemoryUsedPercent"})
        gaps = [b - a for a, b in zip(times, times[1:])]
        return sorted(gaps)[len(gaps) // 2]

    assert 0.05 < spacing(fast) < 0.3  # 100 ms (a loaded machine stretches some gaps)
    assert 0.8 < spacing([r for r in records if r["Timestamp"] > changed + 1.5]) < 1.5  # then 1000 ms
    # the kill left the current period hidden; recovering it publishes only whole lines
    hidden = list((out / "system").glob(".*.tmp"))
    recovered = recover(out)
    assert len(recovered) == len(hidden)
    _records(recovered)


def test_disabled_by_its_config_it_pauses_and_sigterm_publishes_the_current_file(
        tmp_path: Path, repo_env: dict[str, str]) -> None:
    out, config = tmp_path / "profiler-output", tmp_path / "profilerconfig.json"
    _write_config(config, ProfilingIntervalInMilliseconds=100)
    proc = _start(out, config, repo_env)
    try:
        _wait_for(lambda: len(_published(out)) >= 1)
        _write_config(config, DisableProfiler=True)
        disabled = time.time()
        time.sleep(3.5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not list((out / "system").glob(".*.tmp"))  # SIGTERM: the current file was published
    late = [r for r in _records(_published(out)) if r["Timestamp"] > disabled + 1.5]
    assert late == []
