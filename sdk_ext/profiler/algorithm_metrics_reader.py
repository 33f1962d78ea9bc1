"""Readers of framework events (``framework/pevents/...`` trace files, TensorFlow profiler traces),
smdebug's ``smdebug.profiler.algorithm_metrics_reader``.

``LocalAlgorithmMetricsReader(path)`` / ``S3AlgorithmMetricsReader("s3://.../profiler-output")``:
``get_events(start, end, unit=...)`` returns :class:`~sdk_ext.profiler.trace_event_file_parser.TraceEvent`
objects active in the window (step events are named ``Step:ModeKeys.TRAIN`` and carry
``event_args["step_num"]``); ``get_events_by_step(start_step, end_step)`` uses python-timeline steps.

Which files a window reads: a trace file is named by the end of its last event and holds the events
that ended since its stream's previous file (a stream: one node's files of one kind), so per stream the
files named in ``[start, end]`` and the first one after ``end`` hold every event active in the window;
files up to ``TIME_BUFFER_MICROSECONDS`` (3 minutes) past ``end`` are read too, for events longer than a
file's span that started in the window (smdebug read the buffer on both sides).
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator, Sequence

from sdk_ext.format.profiler_paths import (
    FRAMEWORK_DIR,
    HOROVOD_TIMELINE_SUFFIX,
    MODEL_TIMELINE_SUFFIX,
    PYTHON_TIMELINE_SUFFIX,
    SMDATAPARALLEL_TIMELINE_SUFFIX,
    TENSORBOARD_TIMELINE_SUFFIX,
    parse_trace_file_key,
)
from sdk_ext.profiler.metrics_reader_base import MetricsReaderBase, env_microseconds
from sdk_ext.profiler.profiler_constants import ENV_TIME_BUFFER, TIME_BUFFER_DEFAULT
from sdk_ext.profiler.tf_profiler_parser import (
    HorovodProfilerEvents,
    SMDataParallelProfilerEvents,
    SMProfilerEvents,
    TensorboardProfilerEvents,
)
from sdk_ext.profiler.trace_event_file_parser import TraceEvent, TraceEventParser
from sdk_ext.profiler.utils import TimeUnits, is_valid_tfprof_tracefilename
from sdk_ext.storage import Storage


class AlgorithmMetricsReader(MetricsReaderBase):
    """Framework events under a profiler-output root (see the module doc)."""

    prefix = FRAMEWORK_DIR

    def __init__(self, use_in_memory_cache: bool = False) -> None:
        super().__init__(use_in_memory_cache)
        self._SMEventsParser = SMProfilerEvents()
        self._PythontimelineEventsParser = SMProfilerEvents()
        self._DetailedframeworkEventsParser = SMProfilerEvents(type="DetailedframeworkMetrics")
        self._TBEventsParser = TensorboardProfilerEvents()
        self._HorovordEventsParser = HorovodProfilerEvents()
        self._SMdataparallelEventsParser = SMDataParallelProfilerEvents()
        self._event_parsers = [
            self._PythontimelineEventsParser,
            self._DetailedframeworkEventsParser,
            self._TBEventsParser,
            self._HorovordEventsParser,
            self._SMdataparallelEventsParser,
        ]
        self._metadata_keys: list[str] = []

    def get_current_time_range_for_event_query(self) -> tuple[int, int]:
        """(first, latest) file timestamps in microseconds; (0, 0) without files."""
        if not self._timestamp_to_filename:
            return 0, 0
        return self.get_timestamp_of_first_available_file(), self.get_timestamp_of_latest_available_file()

    def _get_event_file_regex(self) -> str:
        return r"(.+)\.(json|csv|json.gz)$"

    def _add_files(self, keys: Sequence[str]) -> None:
        # a TF trace's timestamp is in its .metadata file: take those first
        for key in keys:
            if (
                key.endswith(".metadata")
                and "tensorflow/detailed_profiling" in key
                and key not in self._metadata_keys
            ):
                bisect.insort(self._metadata_keys, key)
        super()._add_files(keys)

    def _tf_trace_metadata(self, key: str) -> tuple[str, int, int] | None:
        """(node, start us, end us) of a TF profiler trace, from the ``.metadata`` four directories up."""
        parts = key.split("/")
        if len(parts) <= 4:
            return None
        folder = "/".join(parts[:-4]) + "/"
        for meta in self._metadata_keys:
            if meta.startswith(folder):
                node, _, rest = meta.rsplit("/", 1)[-1].removesuffix(".metadata").rpartition("_")
                node_id, _, start = node.rpartition("_")
                if node_id and start.isdigit() and rest.isdigit():
                    return node_id, int(start), int(rest)
        return None

    def _get_timestamp_from_filename(self, event_file: str) -> int | None:
        info = parse_trace_file_key(event_file)
        if info is not None:
            return info.end_time_us
        if is_valid_tfprof_tracefilename(event_file):
            metadata = self._tf_trace_metadata(event_file)
            return metadata[2] if metadata is not None else None
        return None

    def _get_event_parser(self, filename: str) -> TraceEventParser | None:
        if filename.endswith(PYTHON_TIMELINE_SUFFIX):
            return self._PythontimelineEventsParser
        if filename.endswith(MODEL_TIMELINE_SUFFIX):
            return self._DetailedframeworkEventsParser
        if filename.endswith(TENSORBOARD_TIMELINE_SUFFIX):
            return self._TBEventsParser
        if filename.endswith(HOROVOD_TIMELINE_SUFFIX):
            return self._HorovordEventsParser
        if filename.endswith(SMDATAPARALLEL_TIMELINE_SUFFIX):
            return self._SMdataparallelEventsParser
        return None

    def _get_event_files_in_the_range(
        self, start_time_microseconds: int, end_time_microseconds: int
    ) -> list[str]:
        """The files that can hold events active in ``[start, end]`` (us), oldest first (see the module doc)."""
        if end_time_microseconds >= self.get_timestamp_of_latest_available_file():
            self.refresh_event_file_list()
        buffer = env_microseconds(ENV_TIME_BUFFER, TIME_BUFFER_DEFAULT)
        streams: dict[tuple[str, str], list[tuple[int, str]]] = {}
        for stamp, names in self._timestamp_to_filename.items():
            for name in names:
                info = parse_trace_file_key(name)
                stream = (info.node_id, info.suffix) if info is not None else ("tf", os.path.dirname(name))
                streams.setdefault(stream, []).append((stamp, name))
        chosen: list[tuple[int, str]] = []
        for files in streams.values():
            files.sort()
            stamps = [s for s, _ in files]
            first = bisect.bisect_left(stamps, start_time_microseconds)
            last = max(
                bisect.bisect_right(stamps, end_time_microseconds + buffer),
                bisect.bisect_left(stamps, end_time_microseconds) + 1,
            )
            chosen.extend(files[first:last])
        return [name for _, name in sorted(chosen)]

    def parse_event_files(self, event_files: Sequence[str]) -> None:
        """Read these files into their parsers (those already read are skipped)."""
        todo = [
            f for f in event_files if f not in self._parsed_files and self._get_event_parser(f) is not None
        ]
        for name, data in zip(todo, self._fetch(todo), strict=True):
            parser = self._get_event_parser(name)
            assert parser is not None
            if isinstance(parser, TensorboardProfilerEvents):
                metadata = self._tf_trace_metadata(self._key_of.get(name, name))
                node = os.path.basename(name).split(".")[0] or "default"
                start = metadata[1] if metadata is not None else 0
                parser.read_events_from_gzip_bytes(data, name=name, start_time_us=start, node_id=node)
            else:
                info = parse_trace_file_key(name)
                parser.read_events_from_bytes(data, name=name, node_id=info.node_id if info else "")
            self._parsed_files.add(name)

    def iter_events(
        self,
        start_time_us: int,
        end_time_us: int,
        *,
        file_suffix_filter: Sequence[str] | None = None,
        files_at_once: int = 8,
    ) -> Iterator[list[TraceEvent]]:
        """The events :meth:`get_events` returns for ``[start, end]`` (us), ``files_at_once`` files at a time,
        so that memory holds one batch of files' events (a ``B``/``E`` pair split across files still pairs).
        With ``use_in_memory_cache``, everything at once, as :meth:`get_events`."""
        if self._cache_events_in_memory:
            yield self.get_events(start_time_us, end_time_us, TimeUnits.MICROSECONDS,
                                  file_suffix_filter=file_suffix_filter)
            return
        files = self._get_event_files_in_the_range(start_time_us, end_time_us)
        if file_suffix_filter is not None:
            files = [f for f in files if any(f.endswith(s) for s in file_suffix_filter)]
        self._parsed_files = set()
        try:
            for at in range(0, len(files), max(1, files_at_once)):
                self.parse_event_files(files[at : at + files_at_once])
                batch: list[TraceEvent] = []
                for parser in self._event_parsers:
                    batch.extend(parser.get_events_within_time_range(start_time_us, end_time_us, TimeUnits.MICROSECONDS))
                    parser.clear_events()
                yield batch
        finally:
            for parser in self._event_parsers:
                parser.clear_events()
            self._parsed_files = set()


class LocalAlgorithmMetricsReader(AlgorithmMetricsReader):
    """Framework events under a local profiler-output directory; lists it on construction."""

    def __init__(
        self,
        trace_root_folder: str | os.PathLike[str],
        use_in_memory_cache: bool = False,
        *,
        storage: Storage | None = None,
    ) -> None:
        super().__init__(use_in_memory_cache)
        self.trace_root_folder = os.fspath(trace_root_folder)
        self._attach(self.trace_root_folder, remote=False, other="S3AlgorithmMetricsReader", storage=storage)


class S3AlgorithmMetricsReader(AlgorithmMetricsReader):
    """Framework events under ``s3://bucket/prefix``; lists it on construction, later from a little
    before the newest file (``TRAILING_DURATION_MICROSECONDS``)."""

    def __init__(
        self, s3_trial_path: str, use_in_memory_cache: bool = False, *, storage: Storage | None = None
    ) -> None:
        super().__init__(use_in_memory_cache)
        self._attach(str(s3_trial_path), remote=True, other="LocalAlgorithmMetricsReader", storage=storage)


__all__ = ["AlgorithmMetricsReader", "LocalAlgorithmMetricsReader", "S3AlgorithmMetricsReader"]
