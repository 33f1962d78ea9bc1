"""Profiling: smdebug's ``smdebug.profiler`` paths.

Collecting (docs/PROFILING.md, "Collecting"): the system monitor (:mod:`sdk_ext.profiler.monitor`), which
samples one host's CPU, memory, disk, network and GPUs into ``profiler-output/system/``, and the step
timeline (:mod:`sdk_ext.profiler.timeline`) that the hooks write into ``profiler-output/framework/``.
Judging (docs/PROFILING.md, "Profiler rules"): the profiler rules (:mod:`sdk_ext.profiler.analysis.rules`).
Reading: the readers smdebug's ``smdebug.profiler`` package exports, by the same names (imported when
first used: importing this package runs nothing else, and the hooks import it).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "LocalAlgorithmMetricsReader": "algorithm_metrics_reader", "S3AlgorithmMetricsReader": "algorithm_metrics_reader",
    "MetricsReaderBase": "metrics_reader_base", "LocalSystemMetricsReader": "system_metrics_reader",
    "S3SystemMetricsReader": "system_metrics_reader", "ProfilerSystemEvents": "system_metrics_reader",
    "SystemProfilerEventParser": "system_profiler_file_parser", "HorovodProfilerEvents": "tf_profiler_parser",
    "SMDataParallelProfilerEvents": "tf_profiler_parser", "SMProfilerEvents": "tf_profiler_parser",
    "TensorboardProfilerEvents": "tf_profiler_parser", "TraceEvent": "trace_event_file_parser",
    "TraceEventParser": "trace_event_file_parser",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
