"""Notebook analysis over PandasFrame's frames (smdebug's
``smdebug.profiler.analysis.utils.pandas_data_analysis``).

    from sdk_ext.profiler.analysis.utils.profiler_data_to_pandas import PandasFrame
    from sdk_ext.profiler.analysis.utils.pandas_data_analysis import PandasFrameAnalysis, Resource, StatsBy

    frames = PandasFrame("sdk-ext-jobs/my-job/profiler-output")
    analysis = PandasFrameAnalysis(frames.get_all_system_metrics(), frames.get_all_framework_metrics())
    analysis.get_step_statistics(by=StatsBy.TRAINING_PHASE)     # duration per step: mean, min, max, p50, p95, p99
    analysis.get_utilization_stats(resource=Resource.GPU, by=StatsBy.TRAINING_PHASE)
    analysis.get_device_usage_stats(utilization_ranges=[(90, 100), (10, 90), (0, 10)])
    analysis.get_training_phase_intervals()                      # Before/TRAIN/Between/EVAL/After intervals
    analysis.get_job_statistics()                                # initialization, training loop, finalization

Each function answers as smdebug's did (same arguments, same columns, ``None`` or an empty frame with a
logged reason for an argument of the wrong type), with its arithmetic vectorized (no Python call per
row). Times are the frames' microseconds (after PandasFrame's origin); percentiles interpolate linearly
(pandas' ``describe``).

Differences from smdebug, where it was wrong or crashed:
- the frames given are not modified (smdebug added ``duration_us``, ``phase`` and ``ranges`` columns to the
  caller's frames and overwrote their ``step``); the analysis keeps its own copies, with those columns;
- an event without a step number gets the step it ran in: of the steps containing it, the shortest, one
  phase's step counted alone (smdebug joined TRAIN step 3 and EVAL step 3 into one span and gave an event the
  lowest-numbered span holding it: with EVAL steps, most TRAIN-time events landed in step 0); an event outside
  every step keeps step -1 and is left out of the step statistics (smdebug's constructor raised IndexError);
- CPU and GPU utilization are the ``CPUUtilization`` and ``GPUUtilization`` series (smdebug mixed in I/O wait
  and GPU memory, which moved every percentile); memory, I/O and network are their whole types, as before;
- job statistics count initialization from the first system sample, so that initialization, training loop
  and finalization add up to the job's duration, start at the first TRAIN (or GLOBAL) step whatever its
  number, and the training loop's duration is a number (smdebug: a one-row Series); without system metrics
  or training steps they raise ValueError saying so (smdebug: KeyError);
- training-phase intervals are built in time order (smdebug used the frame's row order);
- ``resource`` may name resources by their values (``["cpu", "gpu"]``) in a list.

pandas is optional for sdk_ext: constructing the analysis without it raises ImportError saying
``pip install pandas``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from enum import Enum
from typing import Any

import numpy as np

from sdk_ext.profiler.analysis.utils.profiler_data_to_pandas import (
    FRAMEWORK_COLUMNS,
    SYSTEM_COLUMNS,
    import_pandas,
)

logger = logging.getLogger(__name__)

STEP_PHASE = "Step:ModeKeys"
TRAINING_STEPS = ("Step:ModeKeys.TRAIN", "Step:ModeKeys.GLOBAL")
DEFAULT_UTILIZATION_RANGES = [(90, 100), (10, 90), (0, 10)]
_STATS = ("mean", "min", "max", "p50", "p95", "p99")


class StatsBy(Enum):
    """How step and utilization statistics are grouped."""

    TRAINING_PHASE = "training_phase"  # Step:ModeKeys.TRAIN, EVAL, GLOBAL, ...
    FRAMEWORK_METRICS = "framework_metric"  # event (operator, function) names
    PROCESS = "process"  # the phase ("process" row) an event is in


class Resource(Enum):
    """A ``type`` of system metrics."""

    CPU = "cpu"
    GPU = "gpu"
    IO = "i/o"
    NETWORK = "network"
    MEMORY = "memory"


#: The series of a resource that are its utilization (the other resources: every series of the type).
UTILIZATION_DIMENSION = {Resource.CPU.value: "CPUUtilization", Resource.GPU.value: "GPUUtilization"}


class JobStats(dict[str, Any]):
    """Job statistics: a dict (``stats["job_duration"]``) whose repr is a table, one line per item."""

    def __repr__(self) -> str:
        width = max((len(k) for k in self), default=0)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in self.items())


def _describe(values: Any, keys: list[Any]) -> Any:
    """mean, min, max, p50, p95, p99 of ``values`` (a Series) per group of ``keys``."""
    grouped = values.groupby(keys, sort=True)
    pd = import_pandas()
    return pd.DataFrame({
        "mean": grouped.mean(), "min": grouped.min(), "max": grouped.max(),
        "p50": grouped.quantile(0.5), "p95": grouped.quantile(0.95), "p99": grouped.quantile(0.99),
    }).reset_index()


def _resources(resource: Any, default: Sequence[Resource]) -> list[str] | None:
    """The ``type`` values named by ``resource`` (a Resource, or a list of Resources or their values)."""
    if resource is None:
        return [r.value for r in default]
    if isinstance(resource, Resource):
        return [resource.value]
    if not isinstance(resource, list):
        return None
    try:
        return [r.value if isinstance(r, Resource) else Resource(r).value for r in resource]
    except ValueError:
        return None


class PandasFrameAnalysis:
    """Queries over the system and framework frames of :class:`PandasFrame` (see the module doc).

    Args:
        system_df: ``PandasFrame.get_all_system_metrics()`` (or a part of it).
        framework_df: ``PandasFrame.get_all_framework_metrics()`` (or a part of it).

    Raises:
        ImportError: pandas is not installed.
        ValueError: a frame lacks one of PandasFrame's columns.
    """

    def __init__(self, system_df: Any, framework_df: Any) -> None:
        import_pandas()
        for frame, columns, what in ((system_df, SYSTEM_COLUMNS, "system"), (framework_df, FRAMEWORK_COLUMNS, "framework")):
            missing = [c for c in columns if c not in frame.columns]
            if missing:
                raise ValueError(
                    f"the {what} metrics frame lacks the columns {missing}: pass the frames of "
                    f"PandasFrame.get_all_system_metrics() and get_all_framework_metrics()"
                )
        self.sys_metrics_df = system_df.copy()
        self.framework_metrics_df = framework_df.copy()
        fw = self.framework_metrics_df
        fw["duration_us"] = fw["end_time_us"] - fw["start_time_us"]
        self._get_step_numbers()

    # --- steps -----------------------------------------------------------------------------------

    def _step_events(self) -> Any:
        fw = self.framework_metrics_df
        return fw[fw["framework_metric"].astype(str).str.contains(STEP_PHASE, regex=False)]

    def _get_step_time_mapping(self) -> None:
        """``step_time_df``: per step number, the first start and last end of its step events."""
        steps = self._step_events()
        steps = steps[steps["step"] != -1]
        self.step_time_df = (
            steps.groupby("step").agg(start_time_us=("start_time_us", "min"), end_time_us=("end_time_us", "max"))
            .reset_index()
        )

    def _get_step_numbers(self) -> None:
        """An event without a step number gets the number of the step it ran in: of the steps (one phase's
        step of one number, its first start to its last end) that strictly contain it, the shortest."""
        self._get_step_time_mapping()
        fw = self.framework_metrics_df
        todo = np.flatnonzero((fw["step"] == -1).to_numpy())
        steps = self._step_events()
        steps = steps[steps["step"] != -1]
        if not len(todo) or steps.empty:
            return
        e_start = fw["start_time_us"].to_numpy()[todo]
        e_end = fw["end_time_us"].to_numpy()[todo]
        found = np.full(len(todo), -1, dtype=np.int64)
        found_length = np.full(len(todo), np.inf)
        intervals = steps.groupby(["framework_metric", "step"]).agg(
            start=("start_time_us", "min"), end=("end_time_us", "max")).reset_index()
        for _, mode in intervals.groupby("framework_metric"):
            mode = mode.sort_values("start", kind="stable")
            numbers, s_start, s_end = (mode[c].to_numpy() for c in ("step", "start", "end"))
            length = (s_end - s_start).astype(float)
            if np.all(s_end[:-1] <= s_start[1:]):  # one mode's steps follow one another: one candidate each
                at = np.searchsorted(s_start, e_start, side="left") - 1
                cand = np.maximum(at, 0)
                hit = (at >= 0) & (s_start[cand] < e_start) & (s_end[cand] > e_end) & (length[cand] < found_length)
                found[hit], found_length[hit] = numbers[cand[hit]], length[cand[hit]]
            else:  # overlapping steps of one mode (hosts out of step): each in turn
                for i in range(len(numbers)):
                    hit = (s_start[i] < e_start) & (s_end[i] > e_end) & (length[i] < found_length)
                    found[hit], found_length[hit] = numbers[i], length[i]
        step_column = fw["step"].to_numpy().copy()
        step_column[todo] = found
        fw["step"] = step_column

    # --- queries ---------------------------------------------------------------------------------

    def get_job_statistics(self) -> JobStats:
        """Start, end and duration of the job; initialization (to the first training step), the training
        loop (to the last framework event) and finalization (to the last system sample), in us and percent.

        Raises:
            ValueError: no system metrics, or no training step (``Step:ModeKeys.TRAIN`` or ``GLOBAL``) events.
        """
        sys_df, fw = self.sys_metrics_df, self.framework_metrics_df
        if sys_df.empty:
            raise ValueError("job statistics need system metrics: the system frame is empty")
        steps = fw[fw["framework_metric"].isin(TRAINING_STEPS)]
        if steps.empty:
            raise ValueError(
                "job statistics need the step timeline: the framework frame has no Step:ModeKeys.TRAIN or "
                "Step:ModeKeys.GLOBAL events (was profiling on, and did a hook run?)"
            )
        first = steps.loc[steps["start_time_us"].idxmin()]
        job_start, job_end = sys_df["timestamp_us"].min(), sys_df["timestamp_us"].max()
        loop_end = fw["end_time_us"].max()
        stats = JobStats()
        stats["start_time"] = sys_df["timestamp"].min()
        stats["end_time"] = sys_df["timestamp"].max()
        stats["job_duration"] = job_end - job_start
        stats["training_loop_start"] = first["start_time"]
        stats["training_loop_end"] = fw["end_time"].max()
        stats["training_loop_duration"] = loop_end - first["start_time_us"]
        stats["initialization"] = first["start_time_us"] - job_start
        stats["finalization"] = job_end - loop_end
        for part, key in (("initialization", "initialization_%"), ("training_loop_duration", "training_loop_%"),
                          ("finalization", "finalization_%")):
            stats[key] = stats[part] / stats["job_duration"] * 100 if stats["job_duration"] else float("nan")
        return stats

    def get_step_statistics(self, by: StatsBy = StatsBy.TRAINING_PHASE) -> Any:
        """Per training phase, event name or process: the duration of its part of each step (first start to
        last end within the step), as mean, min, max, p50, p95, p99 (us). None if ``by`` is not a StatsBy."""
        if not isinstance(by, StatsBy):
            logger.info("get_step_statistics: by=%r should be a StatsBy (%s)", by, ", ".join(map(str, StatsBy)))
            return None
        fw = self._step_events() if by is StatsBy.TRAINING_PHASE else self.framework_metrics_df
        column = "framework_metric" if by is StatsBy.TRAINING_PHASE else by.value
        fw = fw[fw["step"] != -1]
        per_step = fw.groupby(["step", column]).agg(start=("start_time_us", "min"), end=("end_time_us", "max"))
        durations = (per_step["end"] - per_step["start"]).rename("duration_us").reset_index()
        stats = _describe(durations["duration_us"], [durations[column]])
        stats.columns = [by.value, *(f"duration_{s}_us" for s in _STATS)]
        return stats

    def _phase_of_samples(self, intervals: Any) -> np.ndarray[Any, Any]:
        """Each system sample's interval name (a later interval wins where they overlap), None outside all."""
        stamps = self.sys_metrics_df["timestamp_us"].to_numpy()
        order = np.argsort(stamps, kind="stable")
        ordered = stamps[order]
        phases = np.full(len(stamps), None, dtype=object)
        for start, end, name in zip(intervals["start_time_us"].tolist(), intervals["end_time_us"].tolist(),
                                    intervals["phase"].tolist(), strict=True):
            lo, hi = np.searchsorted(ordered, start, "left"), np.searchsorted(ordered, end, "right")
            phases[order[lo:hi]] = name
        return phases

    def _samples_of(self, resource: str) -> Any:
        sys_df = self.sys_metrics_df
        rows = sys_df["type"].astype(str).str.contains(resource, regex=False)
        if resource in UTILIZATION_DIMENSION:
            rows &= sys_df["dimension"] == UTILIZATION_DIMENSION[resource]
        return sys_df[rows]

    def get_utilization_stats(self, resource: Any = None, by: StatsBy | None = None,
                              phase: str | list[str] | None = None) -> Any:
        """Utilization per resource and host (``by=StatsBy.TRAINING_PHASE``: also per training-phase interval of
        ``phase``, see :meth:`get_training_phase_intervals`): mean, min, max, p50, p95, p99.

        ``resource``: a Resource or a list of them (default: all). None if an argument has the wrong type.
        """
        pd = import_pandas()
        if by is not None and not isinstance(by, StatsBy):
            logger.info("get_utilization_stats: by=%r should be a StatsBy", by)
            return None
        resources = _resources(resource, list(Resource))
        if resources is None:
            logger.info("get_utilization_stats: resource=%r should be a Resource or a list of them", resource)
            return None
        by_phase = by is StatsBy.TRAINING_PHASE
        columns = ["Resource", *(["Training_phase"] if by_phase else []), "nodeID",
                   *(f"utilization_{s}" for s in _STATS)]
        if by_phase:
            intervals = self.get_training_phase_intervals(phase)
            if intervals is None:
                return None
            self.sys_metrics_df["phase"] = self._phase_of_samples(intervals)
        parts = []
        for name in resources:
            rows = self._samples_of(name)
            if rows.empty:
                continue
            keys = [rows["phase"], rows["nodeID"]] if by_phase else [rows["nodeID"]]
            stats = _describe(rows["value"], keys)
            stats.insert(0, "Resource", name)
            stats.columns = columns
            parts.append(stats)
        if not parts:
            return pd.DataFrame({c: [] for c in columns})
        return pd.concat(parts).reset_index(drop=True)

    def get_device_usage_stats(self, device: Any = None, utilization_ranges: Any = None) -> Any:
        """How many samples of each device type and host fall in each utilization range (default: >90,
        10-90, <10; a value belongs to the first range holding it, ends included): one column per range.
        An empty frame if an argument is not as described."""
        pd = import_pandas()
        resources = _resources(device, [Resource.CPU, Resource.GPU])
        if resources is None:
            logger.info("get_device_usage_stats: device=%r should be a Resource or a list of them", device)
            return pd.DataFrame()
        ranges = DEFAULT_UTILIZATION_RANGES if utilization_ranges is None else utilization_ranges
        if not isinstance(ranges, list) or not ranges or any(
                not isinstance(r, Sequence) or len(r) != 2 for r in ranges):
            logger.info("get_device_usage_stats: utilization_ranges=%r should be a non-empty list of (start, end)",
                        utilization_ranges)
            return pd.DataFrame()
        rows = pd.concat([self._samples_of(name) for name in resources])
        values = rows["value"].to_numpy(dtype=float)
        which = np.full(len(values), -1)
        for i, (low, high) in enumerate(ranges):
            which[(which == -1) & (values >= low) & (values <= high)] = i
        rows = rows.assign(ranges=which)[which >= 0]
        if rows.empty:
            return pd.DataFrame()
        counts = rows.groupby(["type", "nodeID", "ranges"]).size().unstack("ranges", fill_value=0)
        counts.columns = [tuple(ranges[i]) for i in counts.columns]
        counts = counts[sorted(counts.columns)]
        counts.columns.name = "ranges"
        return counts.reset_index()

    def get_training_phase_intervals(self, phase: str | list[str] | None = None) -> Any:
        """Intervals of the training phases (default: every ``Step:ModeKeys.*`` phase there is), in time order:
        ``Before <first>``, each step (one phase) or each run of one phase's steps (several phases),
        ``Between <a> and <b>`` between them, ``After <last>`` to the last system sample. Columns:
        ``start_time_us``, ``end_time_us``, ``phase``. None if no phase matches or ``phase`` is not a str or list."""
        pd = import_pandas()
        fw = self.framework_metrics_df
        processes = fw["process"].unique().tolist()
        if phase is None:
            phase = [p for p in processes if STEP_PHASE in str(p)]
        if isinstance(phase, str):
            phase = [phase]
        if not isinstance(phase, list):
            logger.info("get_training_phase_intervals: phase=%r should be a str or a list of them", phase)
            return None
        phase = [p for p in phase if p in processes]
        mode = fw[fw["framework_metric"].isin(phase)].sort_values("start_time_us", kind="stable")
        if mode.empty:
            logger.info("get_training_phase_intervals: none of the phases is in the framework metrics (%s)",
                        ", ".join(map(str, processes)))
            return None
        if len(phase) > 1:  # each run of one phase's events is one interval
            run = mode["framework_metric"].ne(mode["framework_metric"].shift()).cumsum()
            mode = mode.groupby(run).agg(start_time_us=("start_time_us", "min"), end_time_us=("end_time_us", "max"),
                                         framework_metric=("framework_metric", "first"))
        starts = mode["start_time_us"].to_numpy()
        ends = mode["end_time_us"].to_numpy()
        names = mode["framework_metric"].astype(str).tolist()
        n = len(names)
        out_start = np.empty(2 * n - 1, dtype=np.result_type(starts, ends))
        out_end = np.empty_like(out_start)
        out_start[0::2], out_end[0::2] = starts, ends
        out_start[1::2], out_end[1::2] = ends[:-1] + 1, starts[1:] - 1
        out_names: list[str] = [""] * (2 * n - 1)
        out_names[0::2] = names
        out_names[1::2] = ["Between " + " and ".join(sorted(pair)) for pair in zip(names[:-1], names[1:], strict=True)]
        sys_stamps = self.sys_metrics_df["timestamp_us"]
        return pd.DataFrame({
            "start_time_us": [sys_stamps.min(), *out_start.tolist(), ends[-1] + 1],
            "end_time_us": [starts[0] - 1, *out_end.tolist(), sys_stamps.max()],
            "phase": [f"Before {names[0]}", *out_names, f"After {names[-1]}"],
        })


__all__ = ["JobStats", "PandasFrameAnalysis", "Resource", "StatsBy"]
