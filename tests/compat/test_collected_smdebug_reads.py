"""Real smdebug 1.0.34 reads what the system monitor and the step timeline write (its own readers, in
its own venv): every record, the same values, the step events with their start times and durations."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from sdk_ext.hooks.step_counter import Step
from sdk_ext.modes import ModeKeys
from sdk_ext.profiler.monitor import SystemMonitor
from sdk_ext.profiler.system_files import write_end_marker
from sdk_ext.profiler.timeline import StepTimeline

pytestmark = pytest.mark.smdebug
HERE = Path(__file__).resolve().parent


def _smdebug_reads(smdebug_python: Path, root: Path, tmp_path: Path) -> dict:
    out = tmp_path / "smdebug.json"
    subprocess.run([str(smdebug_python), str(HERE / "smdebug_read_collected.py"), str(root), str(out)], check=True,
                   capture_output=True, timeout=120)
    return json.loads(out.read_text())


def test_smdebug_reads_the_monitors_records_and_the_step_timeline(tmp_path: Path, smdebug_python: Path) -> None:
    root = tmp_path / "profiler-output"
    monitor = SystemMonitor(root, node_id="algo-1", interval_ms=100, period=1)
    for _ in range(12):
        monitor.sample_once()
        sum(i for i in range(20_000))
    monitor.close()
    clock = [1_700_000_000.0]
    timeline = StepTimeline(root, "4242-algo-1", clock=lambda: clock[0], max_file_size=400)
    for i in range(6):
        timeline.begin(Step(i, ModeKeys.TRAIN if i < 4 else ModeKeys.EVAL, i if i < 4 else i - 4))
        clock[0] += 0.125
        timeline.end()
        clock[0] += 0.375
    timeline.close()
    write_end_marker(root)
    assert len(timeline.published) > 1  # rotated: smdebug reads across files

    theirs = _smdebug_reads(smdebug_python, root, tmp_path)

    ours = [json.loads(line) for f in sorted((root / "system").rglob("*.json")) for line in f.read_text().splitlines()]
    assert len(theirs["system"]) == len(ours) > 0
    assert sorted(map(tuple, ([r["Type"], r["Name"], r["Dimension"], r["Value"], r["NodeId"], r["Timestamp"]]
                              for r in ours))) == sorted(map(tuple, theirs["system"]))
    steps = sorted(theirs["framework"], key=lambda e: e[1])
    assert [(e[0], e[4]["step_num"]) for e in steps] == [("Step:ModeKeys.TRAIN", str(i)) for i in range(4)] + [
        ("Step:ModeKeys.EVAL", "0"), ("Step:ModeKeys.EVAL", "1")]
    assert [e[1] for e in steps] == [1_700_000_000_000_000 + i * 500_000 for i in range(6)]  # us since the epoch
    assert {e[2] for e in steps} == {125_000}
    assert {e[3] for e in steps} == {"algo-1-4242"}  # smdebug's node id: host first, then the pid
    assert theirs["steps_1_to_3"] == [1, 2]  # get_events_by_step finds steps through the pythontimeline files
