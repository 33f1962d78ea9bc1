"""Key names of profiler output (SageMaker's ``profiler-output/`` prefix), identical on local disk and S3.

Under ``<ProfilerConfig.S3OutputPath>/<job>/profiler-output/`` (a local job: ``<job dir>/profiler-output/``)::

    system/incremental/YYYYMMDDHH/<epoch s>.algo-N.json          system metrics of host algo-N, JSON lines
    system/training_job_end.ts                                    empty marker: the job has ended
    framework/pevents/YYYYMMDDHH/<end us>_<node>_<suffix>         a Chrome trace file (framework events)
    framework/training_job_end.ts                                 empty marker, as in system/
    framework/pytorch/... framework/tensorflow/detailed_profiling/...   detailed profiling (not parsed here)

- ``YYYYMMDDHH`` is the UTC hour of the timestamp in the file name.
- A system-metrics file is named by the epoch second of its first sample (SageMaker starts a file each
  minute, so the name is a whole minute); it holds that host's samples until the next file's name.
  Files directly under ``system/incremental/`` (no hour directory) are read too.
- A trace file is named by the end time (microseconds since the epoch) of its last event. ``<node>`` is
  ``<pid or rank>-algo-N`` (smdebug's node id: ``_`` written as ``-``); ``<suffix>`` is one of
  :data:`TRACE_SUFFIXES` (``model_timeline.json`` for step timings).
- Rule outputs: ``rule-output/<RuleConfigurationName>/profiler-output/profiler-reports/<Rule>.json`` under
  the job's output path; :func:`rule_report_key` gives the part below the rule's ``profiler-output/``.

Nothing here does I/O.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

PROFILER_OUTPUT_DIR = "profiler-output"
SYSTEM_DIR = "system"
SYSTEM_METRICS_DIR = "system/incremental"
FRAMEWORK_DIR = "framework"
TRACE_EVENTS_DIR = "framework/pevents"
END_OF_JOB = "training_job_end.ts"
SYSTEM_END_OF_JOB = f"{SYSTEM_DIR}/{END_OF_JOB}"
FRAMEWORK_END_OF_JOB = f"{FRAMEWORK_DIR}/{END_OF_JOB}"
RULE_REPORTS_DIR = "profiler-reports"
DATE_HOUR_FORMAT = "%Y%m%d%H"

MODEL_TIMELINE_SUFFIX = "model_timeline.json"
PYTHON_TIMELINE_SUFFIX = "pythontimeline.json"
HOROVOD_TIMELINE_SUFFIX = "horovod_timeline.json"
SMDATAPARALLEL_TIMELINE_SUFFIX = "smdataparallel_timeline.json"
TENSORBOARD_TIMELINE_SUFFIX = "trace.json.gz"
#: Trace-file suffixes in ``framework/pevents/``, longest first (``_``-separated names end with one).
TRACE_SUFFIXES = (
    SMDATAPARALLEL_TIMELINE_SUFFIX,
    HOROVOD_TIMELINE_SUFFIX,
    PYTHON_TIMELINE_SUFFIX,
    MODEL_TIMELINE_SUFFIX,
)

# smdebug's test in file names: ten digits, then ".algo-<n>.json", anywhere below system/
_SYSTEM_RE = re.compile(r"(?:^|/)system/(?:.+/)?(\d{10})\.(algo-\d+)\.json$")
# "<end us>_<node>_<rest>.json": the node is the second '_' field (smdebug reads it so)
_TRACE_RE = re.compile(r"(?:^|/)pevents/(?:.+/)?(\d+)_([^/_]+)_([^/]+\.json)$")


@dataclass(frozen=True, slots=True)
class SystemMetricsFile:
    """What the name of a system-metrics file says."""

    timestamp_s: int  # epoch seconds of its first sample
    node_id: str  # algo-N

    @property
    def timestamp_us(self) -> int:
        return self.timestamp_s * 1_000_000


@dataclass(frozen=True, slots=True)
class TraceFile:
    """What the name of a trace file in ``framework/pevents/`` says."""

    end_time_us: int  # end of its last event, microseconds since the epoch
    node_id: str  # <pid or rank>-algo-N as written (smdebug's order)
    suffix: str  # one of TRACE_SUFFIXES when the name ends with one, else all after the node

    @property
    def host(self) -> str:
        """``algo-N`` when the node id ends with one, else the whole node id."""
        match = re.search(r"(algo-\d+)$", self.node_id)
        return match.group(1) if match else self.node_id


def date_hour(timestamp_s: float) -> str:
    """``YYYYMMDDHH`` of an epoch time, in UTC."""
    return time.strftime(DATE_HOUR_FORMAT, time.gmtime(timestamp_s))


def node_id_for(host: str, process: int | str) -> str:
    """smdebug's node id of a process on a host: ``<pid or rank>-<host>``, with ``_`` written as ``-``."""
    return f"{process}-{host}".replace("_", "-")


def system_metrics_key(timestamp_s: int, node_id: str) -> str:
    """``system/incremental/YYYYMMDDHH/<timestamp_s>.<node_id>.json``.

    Raises:
        ValueError: ``node_id`` is not ``algo-N`` or ``timestamp_s`` is not ten digits (readers
            would not find the file).
    """
    if re.fullmatch(r"algo-\d+", node_id) is None:
        raise ValueError(f"system metrics node id {node_id!r} must be algo-N (SageMaker's host names)")
    if not 1_000_000_000 <= timestamp_s <= 9_999_999_999:
        raise ValueError(f"system metrics file timestamp {timestamp_s} must be epoch seconds (ten digits)")
    return f"{SYSTEM_METRICS_DIR}/{date_hour(timestamp_s)}/{timestamp_s}.{node_id}.json"


def trace_file_key(end_time_us: int, node_id: str, suffix: str = MODEL_TIMELINE_SUFFIX) -> str:
    """``framework/pevents/YYYYMMDDHH/<end_time_us>_<node_id>_<suffix>``; ``node_id`` as from :func:`node_id_for`.

    Raises:
        ValueError: an unknown suffix, or a node id with ``_`` or ``/`` (the name would not parse).
    """
    if suffix not in TRACE_SUFFIXES:
        raise ValueError(f"trace file suffix {suffix!r} is not one of {', '.join(TRACE_SUFFIXES)}")
    if "_" in node_id or "/" in node_id or not node_id:
        raise ValueError(f"trace file node id {node_id!r} must be non-empty, without '_' or '/'")
    hour = date_hour(end_time_us / 1_000_000)
    return f"{TRACE_EVENTS_DIR}/{hour}/{int(end_time_us)}_{node_id}_{suffix}"


def rule_report_key(rule_name: str) -> str:
    """``profiler-reports/<rule_name>.json``, below a profiler rule's ``profiler-output/``."""
    if not rule_name or "/" in rule_name:
        raise ValueError(f"rule name {rule_name!r} must be one non-empty path component")
    return f"{RULE_REPORTS_DIR}/{rule_name}.json"


def parse_system_metrics_key(key: str) -> SystemMetricsFile | None:
    """The timestamp and node of a system-metrics key (any depth below ``system/``), or None."""
    match = _SYSTEM_RE.search(key)
    if match is None:
        return None
    return SystemMetricsFile(int(match.group(1)), match.group(2))


def parse_trace_file_key(key: str) -> TraceFile | None:
    """The end time, node and suffix of a trace-file key in ``pevents/``, or None (not a trace file)."""
    match = _TRACE_RE.search(key)
    if match is None:
        return None
    end, node, rest = match.groups()
    suffix = next((known for known in TRACE_SUFFIXES if rest.endswith(known)), rest)
    return TraceFile(int(end), node, suffix)


__all__ = [
    "DATE_HOUR_FORMAT",
    "END_OF_JOB",
    "FRAMEWORK_DIR",
    "FRAMEWORK_END_OF_JOB",
    "HOROVOD_TIMELINE_SUFFIX",
    "MODEL_TIMELINE_SUFFIX",
    "PROFILER_OUTPUT_DIR",
    "PYTHON_TIMELINE_SUFFIX",
    "RULE_REPORTS_DIR",
    "SMDATAPARALLEL_TIMELINE_SUFFIX",
    "SYSTEM_DIR",
    "SYSTEM_END_OF_JOB",
    "SYSTEM_METRICS_DIR",
    "TENSORBOARD_TIMELINE_SUFFIX",
    "TRACE_EVENTS_DIR",
    "TRACE_SUFFIXES",
    "SystemMetricsFile",
    "TraceFile",
    "date_hour",
    "node_id_for",
    "parse_system_metrics_key",
    "parse_trace_file_key",
    "rule_report_key",
    "system_metrics_key",
    "trace_file_key",
]
