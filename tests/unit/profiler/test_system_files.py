"""System metric files: SageMaker's layout and line format, rotation per period, and no file a reader could
take for data until it is complete (a torn line is never published)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sdk_ext.profiler.system_files import SystemMetricsWriter, encode, recover, write_end_marker
from sdk_ext.profiler.system_sampler import SystemMetric

# smdebug 1.0.34's tests of a system file name (re.search on the listing, then re.match on the path)
SMDEBUG_LISTED = re.compile(r"(.+)\.json")
SMDEBUG_VALID = re.compile(r".+/system/.+/(\d{10}).algo-\d+.json")
T = 1591160699.457089  # 2020-06-03 05:04:59 UTC


def _metric(t: float, value: float = 4.756) -> SystemMetric:
    return SystemMetric("cpu", "cpu0", "CPUUtilization", value, t)


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_a_line_is_sagemakers_json_object() -> None:
    line = encode(_metric(T), "algo-1")
    assert line.endswith("\n")
    assert json.loads(line) == {"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": 4.76,
                                "NodeId": "algo-1", "Timestamp": T}
    assert json.loads(encode(SystemMetric("memory", "MemoryUsedPercent", "", float("nan"), T), "algo-2"))["Value"] == 0


def test_files_rotate_per_period_into_hour_directories_named_by_period_start(tmp_path: Path) -> None:
    writer = SystemMetricsWriter(tmp_path, "algo-1", period=60)
    for t in (T, T + 0.2, T + 0.4, T + 61, T + 3600):
        writer.write([_metric(t), _metric(t, 9.0)])
    writer.close()
    assert _files(tmp_path) == ["system/incremental/2020060305/1591160640.algo-1.json",
                                "system/incremental/2020060305/1591160760.algo-1.json",
                                "system/incremental/2020060306/1591164240.algo-1.json"]
    first = (tmp_path / _files(tmp_path)[0]).read_text().splitlines()
    assert len(first) == 6 and all(json.loads(line)["NodeId"] == "algo-1" for line in first)
    assert all(SMDEBUG_VALID.match(str(tmp_path / f)) for f in _files(tmp_path))


def test_the_current_file_is_hidden_from_readers_until_complete(tmp_path: Path) -> None:
    writer = SystemMetricsWriter(tmp_path, "algo-3", period=60)
    writer.write([_metric(T)])
    [partial] = _files(tmp_path)
    assert partial == "system/.1591160640.algo-3.tmp"
    path = str(tmp_path / partial)
    assert not SMDEBUG_LISTED.search(path) and not SMDEBUG_VALID.match(path)
    writer.close()
    assert _files(tmp_path) == ["system/incremental/2020060305/1591160640.algo-3.json"]
    writer.close()  # twice: nothing more


def test_recover_publishes_the_complete_lines_a_killed_writer_left_and_drops_a_torn_one(tmp_path: Path) -> None:
    writer = SystemMetricsWriter(tmp_path, "algo-1", period=60)
    writer.write([_metric(T), _metric(T + 0.1)])
    partial = tmp_path / "system" / ".1591160640.algo-1.tmp"
    with open(partial, "ab") as f:  # a kill in the middle of a write
        f.write(encode(_metric(T + 0.2), "algo-1").encode()[:37])
    [published] = recover(tmp_path)
    lines = published.read_text().splitlines()
    assert [json.loads(line)["Timestamp"] for line in lines] == pytest.approx([T, T + 0.1], abs=1e-6)
    assert recover(tmp_path) == []  # nothing left


def test_recover_of_a_file_with_no_complete_line_leaves_nothing(tmp_path: Path) -> None:
    system = tmp_path / "system"
    system.mkdir()
    (system / ".1591160640.algo-1.tmp").write_text('{"Type": "cp')
    assert recover(tmp_path) == [] and _files(tmp_path) == []


def test_a_published_name_already_taken_moves_to_the_next_free_second(tmp_path: Path) -> None:
    for _ in range(2):  # two monitors of the same host in the same period, one after the other
        writer = SystemMetricsWriter(tmp_path, "algo-1", period=60)
        writer.write([_metric(T)])
        writer.close()
    assert _files(tmp_path) == ["system/incremental/2020060305/1591160640.algo-1.json",
                                "system/incremental/2020060305/1591160641.algo-1.json"]


def test_end_markers_in_system_and_framework(tmp_path: Path) -> None:
    write_end_marker(tmp_path)
    assert _files(tmp_path) == ["framework/training_job_end.ts", "system/training_job_end.ts"]


@pytest.mark.parametrize("host", ["host-1", "algo_1", "algo-", "ALGO-1"])
def test_a_host_name_smdebug_cannot_read_is_refused_naming_the_form(tmp_path: Path, host: str) -> None:
    with pytest.raises(ValueError, match="algo-N"):
        SystemMetricsWriter(tmp_path, host)
