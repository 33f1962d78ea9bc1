"""``Hook.record_trace_events`` (smdebug's hook API): the script's own events go into the step timeline the
hooks write when profiling is on, in smdebug's shape, read back by sdk_ext's reader and by real smdebug
1.0.34's; with profiling off nothing is written; a bad event never reaches the training loop."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sdk_ext.hooks import Hook
from sdk_ext.profiler.algorithm_metrics_reader import LocalAlgorithmMetricsReader
from sdk_ext.profiler.config import CONFIG_ENV
from sdk_ext.profiler.timeline import recover
from sdk_ext.trials import create_trial
from tests.compat.test_profiler_smdebug_reads import read_with_sdk_ext, read_with_smdebug, same


def profiling_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """smdebug's test configuration: ProfilerEnabled with a LocalPath."""
    out = tmp_path / "profiler-output"
    config = tmp_path / "profilerconfig.json"
    config.write_text(json.dumps({"ProfilingParameters": {"ProfilerEnabled": True, "LocalPath": str(out)}}))
    monkeypatch.setenv(CONFIG_ENV, str(config))
    monkeypatch.setenv("SM_CURRENT_HOST", "algo-1")
    return out


def timeline_events(out: Path) -> list[dict[str, Any]]:
    files = sorted((out / "framework" / "pevents").rglob("*_pythontimeline.json"))
    assert files
    return [e for f in files for e in json.loads(f.read_text())]


def train_with_events(tmp_path: Path) -> tuple[Hook, float]:
    start = time.time()
    hook = Hook(str(tmp_path / "trial"))
    # before the first step: the timeline starts for it (and an event timed before it stays >= 0)
    hook.record_trace_events(timestamp=start - 2, training_phase="Training", op_name="EpochStart", phase="B",
                             epoch=0)
    for _ in range(3):
        with hook.step():
            hook.save_scalar("loss", 1.0)
    hook.record_trace_events(timestamp=start, training_phase="Data", op_name="load", duration=0.25, batch=7)
    hook.record_trace_events(timestamp=start + 1, training_phase="Data", op_name="marker", phase="i", s="g")
    hook.record_trace_events(timestamp=time.time(), training_phase="Training", op_name="EpochEnd", phase="E",
                             epoch=0)
    hook.close()
    return hook, start


def test_events_go_into_the_step_timeline_in_smdebugs_shape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = profiling_on(tmp_path, monkeypatch)
    _, start = train_with_events(tmp_path)
    events = timeline_events(out)
    base = events[0]["args"]["start_time_since_epoch_in_micros"]
    assert base == int((start - 2) * 1e6)
    assert all(e["ts"] >= 0 for e in events if "ts" in e)
    rows = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name" and "name" in e["args"]}
    mine = [dict(e, row=rows[e["pid"]]) for e in events if e["ph"] != "M" and not e["name"].startswith("Step:")]
    assert [(e["row"], e["name"], e["ph"]) for e in mine] == [
        ("Training", "EpochStart", "B"), ("Data", "load", "X"), ("Data", "marker", "i"), ("Training", "EpochEnd", "E")]
    load = mine[1]
    assert (base + load["ts"], load["dur"], load["args"]) == (int(start * 1e6), 250_000, {"batch": 7})
    assert mine[2]["s"] == "g" and "args" not in mine[2]
    assert [e["args"]["step_num"] for e in events if e["name"] == "Step:ModeKeys.GLOBAL"] == ["0", "1", "2"]
    assert create_trial(str(tmp_path / "trial")).steps() == [0, 1, 2]  # tensors saved as before


def test_sdk_ext_reads_them_as_complete_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = profiling_on(tmp_path, monkeypatch)
    _, start = train_with_events(tmp_path)
    read = LocalAlgorithmMetricsReader(str(out)).get_events(0, time.time() * 1e6)
    found = {e.event_name: e for e in read}
    epoch = found["EpochStart"]  # the B/E pair: one event from B to E
    assert epoch.event_phase == "Training" and epoch.start_time == int((start - 2) * 1e6)
    assert epoch.end_time >= int(start * 1e6) and epoch.event_args == {"epoch": 0}
    assert (found["load"].event_phase, found["load"].duration) == ("Data", 250_000)
    assert sum(e.event_phase == "Step:ModeKeys.GLOBAL" for e in read) == 3


@pytest.mark.smdebug
def test_real_smdebug_reads_them_as_sdk_ext_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 smdebug_python: Path) -> None:
    out = profiling_on(tmp_path, monkeypatch)
    train_with_events(tmp_path)
    end = int(time.time() * 1e6) + 1
    theirs = read_with_smdebug(smdebug_python, out, 0, end)
    assert {e[0] for e in theirs["framework"]} == {"EpochStart", "load", "Step:ModeKeys.GLOBAL"}
    same(theirs, read_with_sdk_ext(out, 0, end))


def test_profiling_off_records_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "absent.json"))
    hook = Hook(str(tmp_path / "trial"))
    hook.record_trace_events(timestamp=time.time(), training_phase="Training", op_name="x")
    with hook.step():
        hook.save_scalar("loss", 1.0)
    hook.record_trace_events(timestamp=time.time(), training_phase="Training", op_name="y")
    hook.close()
    assert hook._timeline is None and not list(tmp_path.rglob("*timeline*"))


def test_a_bad_event_is_logged_and_dropped_and_training_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    out = profiling_on(tmp_path, monkeypatch)
    hook = Hook(str(tmp_path / "trial"))
    with caplog.at_level(logging.WARNING):
        hook.record_trace_events(timestamp=time.time() * 1e6, training_phase="Training", op_name="micro")
        hook.record_trace_events(timestamp="now", training_phase="Training", op_name="text")  # type: ignore[arg-type]
        hook.record_trace_events(timestamp=time.time(), op_name="negative", duration=-1)
    assert "not a time in seconds since the epoch" in caplog.text and "1e6" in caplog.text
    hook.record_trace_events(timestamp=time.time(), training_phase="Training", op_name="fine",
                             value=float("nan"), obj=object())
    with hook.step():
        hook.save_scalar("loss", 1.0)
    hook.close()
    assert hook.failure is None
    names = [e["name"] for e in timeline_events(out)]
    assert "fine" in names and not {"micro", "text", "negative"} & set(names)
    fine = next(e for e in timeline_events(out) if e["name"] == "fine")
    assert fine["args"]["value"] == "nan" and fine["args"]["obj"].startswith("<object")  # strict JSON


KILLED = """
import os, signal, sys, time
from sdk_ext.hooks import Hook
hook = Hook(sys.argv[1])
hook.record_trace_events(timestamp=time.time(), training_phase="Training", op_name="only", phase="B")
hook._timeline.flush()  # written to its hidden file, not yet published
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_process_leaves_its_events_for_recovery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         repo_env: dict[str, str]) -> None:
    out = profiling_on(tmp_path, monkeypatch)
    env = dict(repo_env, **{CONFIG_ENV: str(tmp_path / "profilerconfig.json")})
    done = subprocess.run([sys.executable, "-c", KILLED, str(tmp_path / "trial")], env=env, timeout=120,
                          capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    assert not (out / "framework" / "pevents").exists()
    published = recover(out)  # what the job runner does when training has ended
    assert len(published) == 1 and [e["name"] for e in json.loads(published[0].read_text())][-1] == "only"


def test_every_framework_hook_has_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from sdk_ext.pytorch import Hook as TorchHook

    out = profiling_on(tmp_path, monkeypatch)
    hook = TorchHook(str(tmp_path / "trial"))
    model = torch.nn.Linear(2, 1)
    hook.register_module(model)
    hook.record_trace_events(timestamp=time.time(), training_phase="Training", op_name="TrainingEpochStart",
                             phase="B", rank=0, epoch=0)
    for _ in range(2):
        model(torch.randn(3, 2)).sum().backward()
    hook.record_trace_events(timestamp=time.time(), training_phase="Training", op_name="TrainingEpochEnd",
                             phase="E", rank=0, epoch=0, duration=1.0)
    hook.close()
    names = [e["name"] for e in timeline_events(out)]
    assert "TrainingEpochStart" in names and "TrainingEpochEnd" in names and "Step:ModeKeys.GLOBAL" in names
