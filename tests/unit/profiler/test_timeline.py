"""The step timeline: smdebug's Chrome-trace layout, valid JSON once published, rotation, nothing a reader
takes for data before that, recovery after a kill, and following the job's profiler config."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from sdk_ext.hooks.step_counter import Step
from sdk_ext.modes import ModeKeys
from sdk_ext.profiler.timeline import StepTimeline, node_id, recover

# smdebug 1.0.34's framework reader lists files matching this under framework/
SMDEBUG_LISTED = re.compile(r"(.+)\.(json|csv|json.gz)$")
T0 = 1591160699.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def _published(root: Path) -> list[Path]:
    return sorted((root / "framework" / "pevents").rglob("*.json"))


def _steps(events: list[dict]) -> list[tuple[str, int, int, str]]:
    return [(e["name"], e["ts"], e["dur"], e["args"]["step_num"]) for e in events if e["ph"] == "X"]


def test_each_step_start_and_duration_per_mode_in_smdebugs_layout(tmp_path: Path) -> None:
    clock = Clock()
    tl = StepTimeline(tmp_path, "1234-algo-1", clock=clock)
    for i, mode in enumerate([ModeKeys.TRAIN, ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT]):
        tl.begin(Step(i, mode, 0 if i != 1 else 1))
        clock.now += 0.25
        tl.end()
        clock.now += 0.05
    tl.close()
    [path] = _published(tmp_path)
    assert path.name == f"{int((T0 + 1.15) * 1e6)}_1234-algo-1_pythontimeline.json"  # end of the last event, us
    assert path.parent.name == "2020060305"
    events = json.loads(path.read_text())
    assert events[0] == {"name": "process_name", "ph": "M", "pid": 0,
                         "args": {"start_time_since_epoch_in_micros": int(T0 * 1e6)}}
    assert _steps(events) == [("Step:ModeKeys.TRAIN", 0, 250000, "0"), ("Step:ModeKeys.TRAIN", 300000, 250000, "1"),
                              ("Step:ModeKeys.EVAL", 600000, 250000, "0"), ("Step:ModeKeys.PREDICT", 900000, 250000, "0")]
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name" and e["pid"]}
    assert names == {1: "Step:ModeKeys.TRAIN", 2: "Step:ModeKeys.EVAL", 3: "Step:ModeKeys.PREDICT"}
    assert all(e["args"]["pid"] == os.getpid() for e in events if e["ph"] == "X")


def test_a_step_without_an_end_lasts_until_the_next_begins_and_global_mode_is_mapped_or_skipped(
        tmp_path: Path) -> None:
    clock = Clock()
    xgb = StepTimeline(tmp_path / "x", "1-algo-1", clock=clock, global_mode_as=ModeKeys.TRAIN)
    keras = StepTimeline(tmp_path / "k", "1-algo-1", clock=clock, global_mode_as=None)
    for tl in (xgb, keras):
        tl.begin(Step(0, ModeKeys.GLOBAL, 0))
        clock.now += 0.1
        tl.begin(Step(1, ModeKeys.TRAIN, 0))
        clock.now += 0.2
        tl.close()
    assert [s[0] for s in _steps(json.loads(_published(tmp_path / "x")[0].read_text()))] == \
        ["Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN"]
    assert _steps(json.loads(_published(tmp_path / "k")[0].read_text())) == [  # its steps began 0.3 s in
        ("Step:ModeKeys.TRAIN", 400000, 200000, "0")]


def test_a_step_may_start_before_the_hook_hears_of_it(tmp_path: Path) -> None:
    clock = Clock()
    tl = StepTimeline(tmp_path, "1-algo-1", clock=clock, global_mode_as=ModeKeys.TRAIN)
    tl.start_next()  # XGBoost's before_iteration
    clock.now += 0.4
    tl.begin(Step(0, ModeKeys.GLOBAL, 0))  # after_iteration
    tl.end()
    tl.close()
    assert _steps(json.loads(_published(tmp_path)[0].read_text())) == [("Step:ModeKeys.TRAIN", 0, 400000, "0")]


def test_nothing_is_published_before_rotation_and_what_is_written_meanwhile_is_hidden(tmp_path: Path) -> None:
    clock = Clock()
    tl = StepTimeline(tmp_path, "1-algo-1", clock=clock, close_interval=60)
    for i in range(30):
        tl.begin(Step(i, ModeKeys.TRAIN, i))
        clock.now += 0.1  # 3 s of steps: flushed every second, not yet rotated
    assert _published(tmp_path) == []
    hidden = [p for p in (tmp_path / "framework").iterdir() if p.is_file()]
    assert len(hidden) == 1 and re.fullmatch(r"\.1-algo-1\.\d+_pythontimeline\.json\.tmp", hidden[0].name)
    assert not SMDEBUG_LISTED.search(str(hidden[0]))
    clock.now += 60
    tl.begin(Step(30, ModeKeys.TRAIN, 30))  # the flush after the close interval rotates
    assert len(_published(tmp_path)) == 1
    tl.close()
    files = _published(tmp_path)
    assert len(files) == 2
    steps = [s for f in files for s in _steps(json.loads(f.read_text()))]
    assert [s[3] for s in steps] == [str(i) for i in range(31)]


def test_files_rotate_at_the_size_limit_each_a_valid_array_with_its_own_metadata(tmp_path: Path) -> None:
    clock = Clock()
    tl = StepTimeline(tmp_path, "1-algo-1", clock=clock, max_file_size=2000)
    for i in range(200):
        tl.begin(Step(i, ModeKeys.TRAIN, i))
        clock.now += 0.05
    tl.close()
    files = _published(tmp_path)
    assert len(files) > 3
    for f in files:
        events = json.loads(f.read_text())
        assert events[0]["args"]["start_time_since_epoch_in_micros"] == int(T0 * 1e6)
        assert any(e["name"] == "process_name" and e["args"].get("name") == "Step:ModeKeys.TRAIN" for e in events)
    assert sum(len(_steps(json.loads(f.read_text()))) for f in files) == 200


def test_recover_publishes_the_complete_events_of_a_killed_process_as_valid_json(tmp_path: Path) -> None:
    clock = Clock()
    tl = StepTimeline(tmp_path, "77-algo-1", clock=clock)
    for i in range(25):
        tl.begin(Step(i, ModeKeys.TRAIN, i))
        clock.now += 0.1
    # the process dies here: no close(); the last write was cut short
    [partial] = [p for p in (tmp_path / "framework").iterdir() if p.is_file()]
    with open(partial, "ab") as f:
        f.write(b'{"name": "Step:ModeKeys.TRAIN", "pid": 1, "ph": "X", "ts": 9')
    [published] = recover(tmp_path)
    events = json.loads(published.read_text())
    steps = _steps(events)
    assert steps and [s[3] for s in steps] == [str(i) for i in range(len(steps))]
    assert published.name.endswith("_77-algo-1_pythontimeline.json")
    last = steps[-1]
    assert int(published.name.split("_")[0]) == int(T0 * 1e6) + last[1] + last[2]
    assert recover(tmp_path) == []


def test_following_the_config_a_disabled_profiler_stops_recording(tmp_path: Path) -> None:
    clock = Clock()
    config = tmp_path / "profilerconfig.json"
    config.write_text(json.dumps({"ProfilingIntervalInMilliseconds": 500}))
    tl = StepTimeline(tmp_path / "out", "1-algo-1", clock=clock, config_path=config)
    for i in range(12):
        tl.begin(Step(i, ModeKeys.TRAIN, i))
        clock.now += 0.1
    config.write_text(json.dumps({"DisableProfiler": True}))
    os.utime(config, ns=(1, 10**18))
    clock.now += 1
    tl.begin(Step(12, ModeKeys.TRAIN, 12))  # the flush sees the change
    assert not tl.enabled
    for i in range(13, 20):
        tl.begin(Step(i, ModeKeys.TRAIN, i))
        clock.now += 0.1
    tl.close()
    steps = [s for f in _published(tmp_path / "out") for s in _steps(json.loads(f.read_text()))]
    assert steps and max(int(s[3]) for s in steps) < 12


def test_a_write_failure_stops_the_timeline_only(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    clock = Clock()
    tl = StepTimeline(blocker, "1-algo-1", clock=clock)
    for i in range(15):
        tl.begin(Step(i, ModeKeys.TRAIN, i))  # never raises
        clock.now += 0.1
    assert not tl.enabled
    assert "no more step events are recorded" in caplog.text
    tl.close()


def test_node_id_is_rank_or_pid_and_the_host_without_underscores(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    monkeypatch.setenv("SM_CURRENT_HOST", "algo-2")
    assert node_id(3) == "3-algo-2"
    monkeypatch.delenv("SM_CURRENT_HOST")
    (tmp_path / "resourceconfig.json").write_text(json.dumps({"current_host": "algo-5", "hosts": ["algo-5"]}))
    assert node_id(None, config_dir=tmp_path) == f"{os.getpid()}-algo-5"
    assert "_" not in node_id(0)


def test_two_timelines_of_one_process_write_apart(tmp_path: Path) -> None:
    clock = Clock()
    first, second = (StepTimeline(tmp_path, "9-algo-1", clock=clock) for _ in range(2))  # e.g. two hooks
    for i in range(30):
        for tl in (first, second):
            tl.begin(Step(i, ModeKeys.TRAIN, i))
        clock.now += 0.1
    first.close()
    second.close()
    steps = [s for f in _published(tmp_path) for s in _steps(json.loads(f.read_text()))]
    assert len(_published(tmp_path)) == 2 and len(steps) == 60
