"""Parsers by trace-file kind (smdebug's ``smdebug.profiler.tf_profiler_parser``).

:class:`SMProfilerEvents` reads smdebug/sdk_ext timelines (``model_timeline.json``,
``pythontimeline.json``); :class:`TensorboardProfilerEvents` a TensorFlow profiler trace
(``<host>.trace.json.gz``, its start time from the ``.metadata`` file beside it); Horovod and
SMDataParallel timelines are Chrome traces too.
"""

from __future__ import annotations

import gzip
import json
import os
from typing import Any

from sdk_ext.exceptions import CorruptProfilerRecordError, StorageError
from sdk_ext.format.profiler_records import START_TIME_ARG
from sdk_ext.profiler.trace_event_file_parser import TraceEventParser
from sdk_ext.profiler.utils import read_tf_profiler_metadata_file


class SMProfilerEvents(TraceEventParser):
    def __init__(self, type: str = "PythontimelineMetrics") -> None:  # noqa: A002
        super().__init__(type=type)


class TensorboardProfilerEvents(TraceEventParser):
    """A TensorFlow profiler trace: gzip'd ``{"traceEvents": [...]}``, ``ts`` after its metadata's start."""

    def __init__(self) -> None:
        super().__init__(type="TFProfilerMetrics")

    def read_events_from_gzip_bytes(
        self, data: bytes, *, name: str, start_time_us: int, node_id: str
    ) -> None:
        """Add the events of a trace's gzip'd bytes.

        Raises:
            CorruptProfilerRecordError: not gzip'd JSON with ``traceEvents``.
        """
        try:
            document = json.loads(gzip.decompress(data))
        except (OSError, ValueError, EOFError) as err:
            raise CorruptProfilerRecordError(name, 1, f"not a gzip'd JSON trace: {err}") from err
        events = document.get("traceEvents") if isinstance(document, dict) else None
        if not isinstance(events, list):
            raise CorruptProfilerRecordError(name, 1, "a TensorFlow trace holds a traceEvents list")
        metadata: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": 0, "args": {START_TIME_ARG: int(start_time_us)}},
            {"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}},
        ]
        self.read_events_from_json_data(metadata + events, node_id)

    def read_events_from_file(self, tracefile: str | os.PathLike[str]) -> None:
        path = os.fspath(tracefile)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as err:
            raise StorageError(f"cannot read trace file {path}: {err}") from err
        _, start, _ = read_tf_profiler_metadata_file(path)
        node_id = os.path.basename(path).split(".")[0] or "default"
        self.read_events_from_gzip_bytes(data, name=path, start_time_us=int(start), node_id=node_id)


class HorovodProfilerEvents(TraceEventParser):
    def __init__(self) -> None:
        super().__init__(type="HorovodMetrics")


class SMDataParallelProfilerEvents(TraceEventParser):
    def __init__(self) -> None:
        super().__init__(type="SMDataParallelMetrics")


__all__ = [
    "HorovodProfilerEvents",
    "SMDataParallelProfilerEvents",
    "SMProfilerEvents",
    "TensorboardProfilerEvents",
]
