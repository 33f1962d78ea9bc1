"""Profiler-output layout and record codecs: names round-trip, lines decode as json does (fast path and
line by line alike), a torn last line is never data, a torn line elsewhere names file and line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdk_ext.exceptions import CorruptProfilerRecordError
from sdk_ext.format import profiler_scan
from sdk_ext.format.profiler_paths import (
    MODEL_TIMELINE_SUFFIX,
    PYTHON_TIMELINE_SUFFIX,
    node_id_for,
    parse_system_metrics_key,
    parse_trace_file_key,
    rule_report_key,
    system_metrics_key,
    trace_file_key,
)
from sdk_ext.format.profiler_records import (
    RuleReport,
    SeriesKey,
    SystemMetric,
    TimelineEvent,
    decode_rule_report,
    decode_system_metric_columns,
    decode_system_metrics,
    decode_timeline,
    decode_trace_file,
    encode_rule_report,
    encode_system_metric,
    encode_system_metrics,
    encode_trace_file,
)
from sdk_ext.format.profiler_scan import decode_regular

SAGEMAKER_LINES = (
    b'{"Type":"cpu","Name":"cpu21","Dimension":"CPUUtilization","Value":0.83,"NodeId":"algo-1",'
    b'"Timestamp":1591748169.2323716}\n'
    b'{"Type":"gpu","Name":"gpu0","Dimension":"GPUMemoryUtilization","Value":12,"NodeId":"algo-1",'
    b'"Timestamp":1591748169.2323716}\n'
)


def metric(i: int, *, node: str = "algo-1") -> SystemMetric:
    return SystemMetric("cpu", f"cpu{i % 3}", "CPUUtilization", i * 1.25, node, 1591160699.0 + i / 10)


def as_json(data: bytes) -> list[tuple[object, ...]]:
    out = []
    for line in data.splitlines():
        o = json.loads(line)
        # values are float64 columns: an integer Value reads as float(Value)
        out.append((o["Type"], o.get("Name"), o["Dimension"], float(o["Value"]), o["NodeId"], o["Timestamp"]))
    return out


def as_tuples(records: list[SystemMetric]) -> list[tuple[object, ...]]:
    return [(r.type, r.name, r.dimension, r.value, r.node_id, r.timestamp) for r in records]


def test_keys_have_smdebugs_layout_and_parse_back() -> None:
    key = system_metrics_key(1591160699, "algo-1")
    assert key == "system/incremental/2020060305/1591160699.algo-1.json"
    parsed = parse_system_metrics_key("job/profiler-output/" + key)
    assert parsed is not None and (parsed.timestamp_s, parsed.node_id) == (1591160699, "algo-1")
    assert parse_system_metrics_key("system/incremental/1591160699.algo-1.json") is not None  # no hour dir
    assert parse_system_metrics_key("system/incremental/2020060500/1591160699.lgo-1.json") is None

    trace = trace_file_key(1594662624558411, node_id_for("algo-2", 905))
    assert trace == "framework/pevents/2020071317/1594662624558411_905-algo-2_model_timeline.json"
    info = parse_trace_file_key(trace)
    assert info is not None
    assert (info.end_time_us, info.node_id, info.suffix, info.host) == (
        1594662624558411,
        "905-algo-2",
        MODEL_TIMELINE_SUFFIX,
        "algo-2",
    )
    old = parse_trace_file_key("framework/pevents/2020051923/1589930991000000_4487_0000_pythontimeline.json")
    assert old is not None and (old.node_id, old.suffix) == ("4487", PYTHON_TIMELINE_SUFFIX)
    assert parse_trace_file_key("framework/pevents/2020051923/notatrace.json") is None
    assert rule_report_key("LowGPUUtilization") == "profiler-reports/LowGPUUtilization.json"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: system_metrics_key(1591160699, "host-1"), "algo-N"),
        (lambda: system_metrics_key(159116069, "algo-1"), "ten digits"),
        (lambda: trace_file_key(1, "1_algo-1"), "without '_'"),
        (lambda: trace_file_key(1, "1-algo-1", "x.json"), "suffix"),
    ],
)
def test_bad_key_parts_are_refused_with_the_reason(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


def test_encoded_lines_are_json_lines_that_decode_to_the_same_metrics() -> None:
    metrics = [metric(i) for i in range(50)] + [
        SystemMetric("memory", None, "MemoryUsedPercent", 3, "algo-1", 1.5e9)
    ]
    data = encode_system_metrics(metrics)
    assert data.endswith(b"\n") and data.count(b"\n") == len(metrics)
    assert as_json(data) == as_tuples(metrics)
    assert as_tuples(decode_system_metrics(data, name="f")) == as_tuples(metrics)


def test_sagemakers_own_lines_take_the_fast_path_and_equal_json() -> None:
    assert decode_regular(SAGEMAKER_LINES, len(SAGEMAKER_LINES)) is not None
    columns = decode_system_metric_columns(SAGEMAKER_LINES + SAGEMAKER_LINES, name="f")
    assert as_tuples(columns.records()) == as_json(SAGEMAKER_LINES + SAGEMAKER_LINES)
    assert columns.keys == (
        SeriesKey("algo-1", "cpu", "cpu21", "CPUUtilization"),
        SeriesKey("algo-1", "gpu", "gpu0", "GPUMemoryUtilization"),
    )


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
names = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=8)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["cpu", "gpu"]), names, finite | st.integers(-(10**18), 10**18), finite),
        min_size=1,
        max_size=30,
    ),
    st.booleans(),
)
def test_any_lines_decode_exactly_as_json_loads(
    rows: list[tuple[str, str, float, float]], compact: bool
) -> None:
    lines = []
    for type_, name, value, ts in rows:
        obj = {"Type": type_, "Name": name, "Dimension": "D:x" if name == "" else "D", "Value": value}
        obj |= {"NodeId": "algo-1", "Timestamp": ts}
        sep = (",", ":") if compact else (", ", ": ")
        lines.append(json.dumps(obj, separators=sep).encode())
    data = b"\n".join(lines) + b"\n"
    assert as_tuples(decode_system_metric_columns(data, name="f").records()) == as_json(data)


def monitor_file(samples: int, series: int = 40) -> list[bytes]:
    """What a monitor writes: ``series`` series in one order, sample after sample (over a MiB: the periodic path)."""
    lines = []
    for k in range(samples):
        for s in range(series):
            value = round((k * 7 + s * 13) % 1000 / 7, 2) if s % 5 else (k * s) % 97  # floats and integers
            obj = {"Type": "cpu" if s % 2 else "gpu", "Name": f"dev{s}", "Dimension": "CPUUtilization",
                   "Value": value, "NodeId": "algo-1", "Timestamp": round(1591748169.25 + k / 10, 6)}
            lines.append(json.dumps(obj).encode())
    return lines


CHANGES = {
    "none": lambda line: line,
    "another series": lambda line: line.replace(b'"dev', b'"DEV'),
    "a key out of order": lambda line: json.dumps(dict(reversed(list(json.loads(line).items())))).encode(),
    "an exponent": lambda line: line.split(b'"Value": ')[0] + b'"Value": 1.5e-3, "NodeId"' + line.split(b', "NodeId"')[1],
    "a negative value": lambda line: line.replace(b'"Value": ', b'"Value": -'),
    "a space before a comma": lambda line: line.replace(b', "NodeId"', b' , "NodeId"'),
    "no space after a colon": lambda line: line.replace(b'"Value": ', b'"Value":'),
    "a colon in a name": lambda line: line.replace(b'"dev', b'"d:v'),
    "NaN": lambda line: line.split(b'"Value": ')[0] + b'"Value": NaN, "NodeId"' + line.split(b', "NodeId"')[1],
    "a number too long": lambda line: line.replace(b'"Value": ', b'"Value": 1' + b"0" * 45),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_monitors_large_file_decodes_as_json_loads_whatever_its_later_lines_hold(change: str) -> None:
    # 12,017 lines: the first 4,096 teach the series' order, the rest follow it (the last sample cut short)
    lines = monitor_file(301)[: 300 * 40 + 17]
    for at in (5000, 5001, 11999, 12016):  # lines after the first 4,096, in the last sample too
        lines[at] = CHANGES[change](lines[at])
    data = b"\n".join(lines) + b"\n"
    assert len(data) > 1 << 20
    expected = as_json(data) if change != "NaN" else None
    got = decode_system_metric_columns(data, name="f")
    if expected is None:
        assert str(got.values[5000]) == "nan" and len(got) == len(lines)
        return
    assert as_tuples(got.records()) == expected
    # the periodic decoder takes the file only where every later line follows its series' text
    a = np.frombuffer(data, np.uint8)
    periodic = profiler_scan._decode_periodic(data, a, np.flatnonzero(a == 10))
    assert (periodic is not None) == (change in ("none", "an exponent", "a negative value"))


def test_a_torn_last_line_is_skipped_and_reported() -> None:
    data = encode_system_metrics([metric(i) for i in range(5)])
    for cut in range(len(data) - 30, len(data) - 1):
        columns = decode_system_metric_columns(data[:cut], name="f")
        assert len(columns) == 4 and columns.torn_tail
    torn_with_newline = data[:-20] + b"\n"  # smdebug's own .corrupt resource ends like this
    assert len(decode_system_metric_columns(torn_with_newline, name="f")) == 4
    whole = decode_system_metric_columns(data + b"\n\n", name="f")
    assert len(whole) == 5 and not whole.torn_tail


def test_a_torn_line_before_the_last_names_file_and_line() -> None:
    lines = encode_system_metrics([metric(i) for i in range(5)]).split(b"\n")
    lines[2] = lines[2][:40]
    with pytest.raises(CorruptProfilerRecordError, match=r"x\.json: line 3 is not a profiler record") as err:
        decode_system_metric_columns(b"\n".join(lines), name="x.json")
    assert isinstance(err.value, ValueError) and err.value.line == 3
    missing = b'{"Type": "cpu", "Dimension": "D", "Value": 1, "NodeId": "algo-1"}\n' + lines[0] + b"\n"
    with pytest.raises(CorruptProfilerRecordError, match="line 1 .*missing Timestamp"):
        decode_system_metric_columns(missing, name="y")


def test_encoding_refuses_what_json_lines_cannot_hold() -> None:
    with pytest.raises(ValueError, match="finite"):
        encode_system_metric(SystemMetric("cpu", "cpu0", "D", float("nan"), "algo-1", 1.0))
    with pytest.raises(ValueError, match="line break"):
        encode_system_metric(SystemMetric("cpu", "cpu\n0", "D", 1.0, "algo-1", 1.0))


def test_trace_file_has_smdebugs_layout_and_decodes_back() -> None:
    start = 1594662605425850
    events = [
        TimelineEvent("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", start + 10, 500, {"step_num": "0"}),
        TimelineEvent("Step:ModeKeys.EVAL", "Step:ModeKeys.EVAL", start + 600, 40, {"step_num": "1"}),
        TimelineEvent("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", start + 700, 450, {"step_num": "2"}),
    ]
    data = encode_trace_file(events, start_time_us=start)
    assert data.startswith(b"[\n") and data.endswith(b"\n]")
    doc = json.loads(data)
    assert doc[0] == {
        "name": "process_name",
        "ph": "M",
        "pid": 0,
        "args": {"start_time_since_epoch_in_micros": start},
    }
    assert [e["pid"] for e in doc if e["ph"] == "X"] == [1, 2, 1]
    assert decode_timeline(data, name="t") == events
    content = decode_trace_file(data, name="t")
    assert content.start_time_us == start and not content.torn_tail


def test_a_torn_trace_file_keeps_its_complete_lines_and_a_broken_middle_raises() -> None:
    start = 1_600_000_000_000_000
    events = [TimelineEvent("p", "e", start + i, 1) for i in range(4)]
    data = encode_trace_file(events, start_time_us=start)
    torn = data[: data.rindex(b"{") + 12]
    content = decode_trace_file(torn, name="t")
    assert content.torn_tail and len([e for e in content.events if e["ph"] == "X"]) == 3
    lines = data.split(b"\n")
    lines[3] = lines[3][:10]
    with pytest.raises(CorruptProfilerRecordError, match="t: line 4"):
        decode_trace_file(b"\n".join(lines), name="t")
    assert len(decode_timeline(json.dumps({"traceEvents": json.loads(data)}).encode())) == 4


def test_rule_report_round_trips_with_the_notebooks_keys() -> None:
    report = RuleReport(2, 5, {"algo-1": {"gpu0": {"p95": 3.0}}}, 3600, "threshold_p95:70\nwindow:500")
    data = encode_rule_report(report)
    assert set(json.loads(data)) == {"RuleTriggered", "Violations", "Details", "Datapoints", "RuleParameters"}
    assert decode_rule_report(data) == report
    with pytest.raises(CorruptProfilerRecordError, match="r.json"):
        decode_rule_report(b'{"RuleTriggered": 1}', name="r.json")


@pytest.mark.parametrize("at", [4096, 8000, 12016])  # the first line after the prefix, a middle one, the cut sample
def test_one_line_unlike_its_series_anywhere_sends_the_file_to_the_general_scan(at: int) -> None:
    lines = monitor_file(301)[: 300 * 40 + 17]
    lines[at] = lines[at].replace(b'"algo-1"', b'"algo-2"')  # another host: another series
    data = b"\n".join(lines) + b"\n"
    a = np.frombuffer(data, np.uint8)
    assert profiler_scan._decode_periodic(data, a, np.flatnonzero(a == 10)) is None
    got = decode_system_metric_columns(data, name="f")
    assert as_tuples(got.records()) == as_json(data) and len(got.keys) == 41
