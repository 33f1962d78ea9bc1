"""Profiler output as pandas DataFrames (smdebug's
``smdebug.profiler.analysis.utils.profiler_data_to_pandas.PandasFrame``).

pandas is optional for sdk_ext: it is imported when a frame is asked for, and its absence is an error
that says ``pip install pandas``. System-metric frames are built from the readers' columns (no object
per sample); framework frames from the trace events.

Columns, as smdebug's:
- system metrics: ``timestamp`` (``YYYY-mm-ddTHH:MM:SS:ffffff`` UTC), ``timestamp_us`` (microseconds after
  the first system-metrics file), ``value``, ``system_metric`` (cpu0, gpu1, ...), ``dimension``,
  ``nodeID``, ``type``;
- framework metrics: ``start_time``, ``end_time``, ``start_time_us``, ``end_time_us`` (after the same
  origin), ``tid``, ``pid``, ``framework_metric``, ``step``, ``bytes``, ``process``, ``nodeID``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from sdk_ext.profiler.algorithm_metrics_reader import LocalAlgorithmMetricsReader, S3AlgorithmMetricsReader
from sdk_ext.profiler.system_metrics_reader import LocalSystemMetricsReader, S3SystemMetricsReader
from sdk_ext.profiler.utils import (
    TimeUnits,
    convert_utc_datetime_to_microseconds,
    us_since_epoch_to_human_readable_time,
)

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped,unused-ignore]

SYSTEM_COLUMNS = ["timestamp", "timestamp_us", "value", "system_metric", "dimension", "nodeID", "type"]
FRAMEWORK_COLUMNS = [
    "start_time",
    "end_time",
    "start_time_us",
    "end_time_us",
    "tid",
    "pid",
    "framework_metric",
    "step",
    "bytes",
    "process",
    "nodeID",
]
DATALOADER_COLUMNS = [
    "start_time",
    "end_time",
    "start_time_us",
    "end_time_us",
    "duration_us",
    "pid",
    "framework_metric",
    "step",
    "worker_id",
    "num_workers",
    "pin_memory",
    "process",
    "node_id",
]


def import_pandas() -> Any:
    """pandas, or an ImportError that says how to get it."""
    try:
        import pandas
    except ImportError as err:
        raise ImportError(
            "profiler DataFrames need pandas, which sdk_ext does not install: pip install pandas"
        ) from err
    return pandas


def human_readable_us(us: np.ndarray) -> np.ndarray:
    """``us_since_epoch_to_human_readable_time`` of each element, vectorized."""
    text = np.datetime_as_string(us.astype("datetime64[us]"), unit="us")
    return np.char.replace(text.astype(str), ".", ":")


def _selected(values: Sequence[str], wanted: Sequence[str]) -> bool:
    return not wanted or any(v in wanted for v in values)


class PandasFrame:
    """System and framework metrics of one profiler-output path (local or ``s3://``) as DataFrames.

    Args:
        path: the profiler-output directory or S3 prefix.
        use_in_memory_cache: keep parsed framework files between queries.
        scan_interval: framework events are read this many microseconds at a time.
    """

    def __init__(
        self, path: str | os.PathLike[str], use_in_memory_cache: bool = False, scan_interval: int = 5000000000
    ) -> None:
        self.path = os.fspath(path)
        self.step_time_mapping: dict[Any, Any] = {}
        self.system_metrics_reader: LocalSystemMetricsReader | S3SystemMetricsReader
        self.framework_metrics_reader: LocalAlgorithmMetricsReader | S3AlgorithmMetricsReader
        if self.path.startswith("s3://"):
            self.system_metrics_reader = S3SystemMetricsReader(self.path)
            self.framework_metrics_reader = S3AlgorithmMetricsReader(
                self.path, use_in_memory_cache=use_in_memory_cache
            )
        else:
            self.system_metrics_reader = LocalSystemMetricsReader(self.path)
            self.framework_metrics_reader = LocalAlgorithmMetricsReader(
                self.path, use_in_memory_cache=use_in_memory_cache
            )
        self.system_metrics: list[Any] = []
        self.framework_metrics: list[list[Any]] = []
        self.interval = scan_interval
        self.start_time = self.system_metrics_reader.get_timestamp_of_first_available_file()

    # --- whole job -------------------------------------------------------------------------------

    def get_all_system_metrics(self, selected_system_metrics: Sequence[str] = ()) -> pd.DataFrame:
        """Every system sample (of these device names, if given)."""
        start = self.system_metrics_reader.get_timestamp_of_first_available_file()
        end = self.system_metrics_reader.get_timestamp_of_latest_available_file() + self.interval
        frame, _ = self.get_profiler_data_by_time(
            start, end, selected_system_metrics=selected_system_metrics, get_framework_metrics=False
        )
        return frame

    def get_all_framework_metrics(self, selected_framework_metrics: Sequence[str] = ()) -> pd.DataFrame:
        """Every framework event (of these event or phase names, if given)."""
        self.framework_metrics_reader.refresh_event_file_list()
        start = self.system_metrics_reader.get_timestamp_of_first_available_file()
        end = self.framework_metrics_reader.get_timestamp_of_latest_available_file()
        _, frame = self.get_profiler_data_by_time(
            start, end, selected_framework_metrics=selected_framework_metrics, get_system_metrics=False
        )
        return frame

    # --- by time and step ------------------------------------------------------------------------

    def convert_datetime_to_timestamp(self, timestamp: Any) -> int:
        """Microseconds since the epoch of a datetime or of smdebug's ``YYYY-mm-ddTHH:MM:SS:ffffff`` text."""
        pd = import_pandas()
        stamp = pd.to_datetime(timestamp, format="%Y-%m-%dT%H:%M:%S:%f", utc=True)
        return int(convert_utc_datetime_to_microseconds(stamp))

    def _framework_chunks(self, start_us: int, end_us: int) -> Any:
        """Framework events, ``scan_interval`` microseconds at a time."""
        while start_us < end_us:
            current = min(start_us + self.interval, end_us)
            self.framework_metrics_reader.refresh_event_file_list()
            yield self.framework_metrics_reader.get_events(start_us, current)
            start_us = current

    def get_profiler_data_by_time(
        self,
        start_time_us: float,
        end_time_us: float,
        cache_metrics: bool = False,
        selected_framework_metrics: Sequence[str] = (),
        selected_system_metrics: Sequence[str] = (),
        get_framework_metrics: bool = True,
        get_system_metrics: bool = True,
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(system frame, framework frame) of ``[start_time_us, end_time_us]``, duplicates dropped.

        ``cache_metrics`` adds this query's rows to those of earlier cached queries.
        """
        pd = import_pandas()
        start_us, end_us = int(start_time_us), int(end_time_us)
        system = pd.DataFrame({c: [] for c in SYSTEM_COLUMNS})
        if get_system_metrics:
            window = self.system_metrics_reader.get_window(start_us, end_us, TimeUnits.MICROSECONDS)
            keys = window.keys
            keep = np.ones(len(window.values), dtype=bool)
            if selected_system_metrics:
                wanted = np.array([k.name in selected_system_metrics for k in keys] + [False])
                keep = wanted[window.key_index]
            index = window.key_index[keep]
            stamps_us = (window.timestamps[keep] * 1000000).astype(np.int64)
            lookup = np.array(
                [(k.name, k.dimension, k.node_id, k.type) for k in keys] or [("", "", "", "")], dtype=object
            )
            system = pd.DataFrame(
                {
                    "timestamp": human_readable_us(stamps_us),
                    "timestamp_us": stamps_us,
                    "value": window.values[keep],
                    "system_metric": lookup[index, 0],
                    "dimension": lookup[index, 1],
                    "nodeID": lookup[index, 2],
                    "type": lookup[index, 3],
                }
            )
            if cache_metrics:
                self.system_metrics.append(system)
                system = pd.concat(self.system_metrics, ignore_index=True)
            system = system.assign(timestamp_us=system["timestamp_us"] - self.start_time)
        rows: list[list[Any]] = []
        if get_framework_metrics:
            for events in self._framework_chunks(start_us, end_us):
                for e in events:
                    if selected_framework_metrics and not _selected(
                        (e.event_name, e.event_phase), selected_framework_metrics
                    ):
                        continue
                    args = e.event_args or {}
                    rows.append(
                        [
                            us_since_epoch_to_human_readable_time(e.start_time),
                            us_since_epoch_to_human_readable_time(e.end_time),
                            e.start_time,
                            e.end_time,
                            e.tid,
                            e.pid,
                            args.get("layer_name", args.get("name", e.event_name)),
                            int(args["step_num"]) if "step_num" in args else -1,
                            args.get("bytes_fetched", -1),
                            e.event_phase,
                            e.node_id,
                        ]
                    )
            if cache_metrics:
                self.framework_metrics.extend(rows)
                rows = self.framework_metrics
        framework = pd.DataFrame(rows, columns=FRAMEWORK_COLUMNS)
        framework["start_time_us"] = framework["start_time_us"] - self.start_time
        framework["end_time_us"] = framework["end_time_us"] - self.start_time
        return system[~system.duplicated()], framework[~framework.duplicated()]

    def get_profiler_data_by_step(
        self, start_step: int, end_step: int, cache_metrics: bool = False
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(system frame, framework frame) of the steps ``start_step..end_step`` (the system samples of
        the time those steps' events span)."""
        system, framework = self.get_all_system_metrics(), self.get_all_framework_metrics()
        framework = framework[framework["step"].between(start_step, end_step)]
        start, end = framework["start_time_us"].min(), framework["end_time_us"].max()
        return system[system["timestamp_us"].between(start, end)], framework

    def get_framework_metrics_by_timesteps(
        self, timestep_list: Sequence[Any] = (), selected_framework_metrics: Sequence[str] = ()
    ) -> tuple[dict[str, float], dict[str, int], dict[str, int]]:
        """For system-metric timestamps: time spent per phase (normalized to the largest), per event name,
        and per training phase (``Step:*``), counting events running at each timestamp."""
        stamps = sorted(self.convert_datetime_to_timestamp(t) for t in timestep_list)
        if not stamps:
            return {}, {}, {}
        results: dict[str, int] = {}
        detailed: dict[str, int] = {}
        for events in self._framework_chunks(stamps[0], stamps[-1]):
            for stamp in stamps:
                for e in events:
                    if selected_framework_metrics and not _selected(
                        (e.event_name, e.event_phase), selected_framework_metrics
                    ):
                        continue
                    if e.start_time < stamp < e.end_time:
                        results[e.event_phase] = results.get(e.event_phase, 0) + e.end_time - e.start_time
                        if "Step" not in e.event_name:
                            detailed[e.event_name] = detailed.get(e.event_name, 0) + e.end_time - e.start_time
        training = {k: v for k, v in results.items() if "Step" in k}
        framework = {k: v for k, v in results.items() if "Step" not in k}
        if framework:
            top = float(max(framework.values()))
            framework_norm = {k: v / top for k, v in framework.items()}
        else:
            framework_norm = {}
        return framework_norm, detailed, training

    def get_framework_metrics_by_begin_and_end_timesteps(
        self,
        begin_timestep_list: Sequence[Any],
        end_timestep_list: Sequence[Any],
        selected_framework_metrics: Sequence[str] = (),
    ) -> tuple[dict[str, float], dict[str, float]]:
        """Time spent per phase and per event name (both normalized to their largest) by non-step events
        overlapping the intervals ``begin[i]..end[i]``."""
        intervals = [
            (self.convert_datetime_to_timestamp(b), self.convert_datetime_to_timestamp(e))
            for b, e in zip(begin_timestep_list, end_timestep_list, strict=True)
        ]
        if not intervals:
            return {}, {}
        per_phase: dict[str, float] = {}
        per_name: dict[str, float] = {}
        for events in self._framework_chunks(min(b for b, _ in intervals), max(e for _, e in intervals)):
            for begin, end in intervals:
                for e in events:
                    if selected_framework_metrics and not _selected(
                        (e.event_name, e.event_phase), selected_framework_metrics
                    ):
                        continue
                    if e.end_time >= begin and e.start_time <= end and "Step" not in e.event_name:
                        per_phase[e.event_phase] = per_phase.get(e.event_phase, 0) + e.end_time - e.start_time
                        per_name[e.event_name] = per_name.get(e.event_name, 0) + e.end_time - e.start_time
        for table in (per_phase, per_name):
            if table:
                top = float(max(table.values()))
                for k in table:
                    table[k] = table[k] / top
        return per_phase, per_name

    def get_all_dataloader_metrics(self, selected_framework_metrics: Sequence[str] = ()) -> pd.DataFrame:
        """Dataloader events (of these names, if given: a name matches by substring)."""
        self.framework_metrics_reader.refresh_event_file_list()
        start = self.system_metrics_reader.get_timestamp_of_first_available_file()
        end = self.framework_metrics_reader.get_timestamp_of_latest_available_file()
        return self._get_dataloader_profiler_data_by_time(
            start, end, selected_framework_metrics=selected_framework_metrics
        )

    def _get_dataloader_profiler_data_by_time(
        self,
        start_time_us: float,
        end_time_us: float,
        cache_metrics: bool = False,
        selected_framework_metrics: Sequence[str] = (),
    ) -> pd.DataFrame:
        pd = import_pandas()
        rows: list[list[Any]] = []
        for events in self._framework_chunks(int(start_time_us), int(end_time_us)):
            for e in events:
                if selected_framework_metrics and not any(
                    w in e.event_name or w in e.event_phase for w in selected_framework_metrics
                ):
                    continue
                args = e.event_args or {}
                rows.append(
                    [
                        us_since_epoch_to_human_readable_time(e.start_time),
                        us_since_epoch_to_human_readable_time(e.end_time),
                        e.start_time,
                        e.end_time,
                        e.duration,
                        e.pid,
                        args.get("layer_name", args.get("name", e.event_name)),
                        int(args["step_num"]) if "step_num" in args else -1,
                        args.get("worker_id", -1),
                        args.get("num_workers", -1),
                        ("True" if args["pin_memory"] is True else "False") if "pin_memory" in args else "NA",
                        e.event_phase,
                        e.node_id,
                    ]
                )
        if cache_metrics:
            self.framework_metrics.extend(rows)
            rows = self.framework_metrics
        frame = pd.DataFrame(rows, columns=DATALOADER_COLUMNS)
        frame["start_time_us"] = frame["start_time_us"] - self.start_time
        frame["end_time_us"] = frame["end_time_us"] - self.start_time
        return frame[~frame.duplicated()]


__all__ = ["PandasFrame", "import_pandas"]
