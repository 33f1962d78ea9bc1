"""``Hook.record_trace_events``: the script's own events in the step timeline (smdebug's hook API).

    hook.record_trace_events(timestamp=time.time(), training_phase="Training", op_name="EpochStart",
                             phase="B", epoch=epoch)

The event goes into the step timeline the hooks write when profiling is on (the job's
``profilerconfig.json``: ``ProfilingParameters.LocalPath``, ``<job dir>/profiler-output`` in a local job),
in smdebug's shape (:mod:`sdk_ext.profiler.timeline`), so smdebug's readers, sdk_ext's and the merged
timeline see it. With profiling off it records nothing, as smdebug's did. A call before the first step
starts the timeline (with the rank the framework knows at that moment). A value that cannot be recorded
(a timestamp that is not seconds since the epoch, a negative duration) is logged once and dropped: this
never raises into training.
"""

from __future__ import annotations

import atexit
import logging
import math
import numbers
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sdk_ext.profiler.timeline import MAX_TIMESTAMP_S, StepTimeline

logger = logging.getLogger(__name__)


def event_times(timestamp: Any, duration: Any) -> tuple[int, int]:
    """(start, duration) in microseconds of smdebug's seconds.

    Raises:
        ValueError: the timestamp is not seconds since the epoch, or the duration is not seconds >= 0.
    """
    if isinstance(timestamp, bool) or not isinstance(timestamp, numbers.Real) or not (
            0 <= float(timestamp) < MAX_TIMESTAMP_S):
        raise ValueError(
            f"timestamp={timestamp!r} is not a time in seconds since the epoch (time.time()); "
            "a value in microseconds or nanoseconds must be divided by 1e6 or 1e9")
    if isinstance(duration, bool) or not isinstance(duration, numbers.Real) or not (
            math.isfinite(float(duration)) and float(duration) >= 0):
        raise ValueError(f"duration={duration!r} is not a number of seconds >= 0")
    return int(float(timestamp) * 1_000_000), int(float(duration) * 1_000_000)


class TraceEvents:
    """The hooks' ``record_trace_events``; :class:`~sdk_ext.hooks.Hook` provides the fields below."""

    dry_run: bool
    _closed: bool
    _timeline: StepTimeline | None
    _timeline_started: bool
    _rank: int | None
    _world_size: int | None
    _trace_warned: bool

    if TYPE_CHECKING:  # the hook's own

        def _start_timeline(self, rank: int | None) -> None: ...

        def _distributed_info(self) -> tuple[int, int]: ...

        def close(self) -> None: ...

    def record_trace_events(self, timestamp: float, training_phase: str = "", op_name: str = "", phase: str = "X",
                            duration: float = 1, **kwargs: Any) -> None:
        """Add an event of the script's own to the step timeline (profiling on; else nothing), as smdebug's.

        Args:
            timestamp: when it starts (``B``, ``X``, ``i``) or ends (``E``), seconds since the epoch.
            training_phase: the timeline row it goes in ("Training", "DataLoading", ...).
            op_name: the event's name.
            phase: Chrome's event type: ``"X"`` (complete: lasts ``duration``), ``"B"``/``"E"`` (begin and
                end of one span, matched per row), ``"i"`` (instant; its scope as ``s=...``).
            duration: seconds, for an ``"X"`` event (smdebug's default: 1 second).
            **kwargs: kept as the event's ``args`` (values JSON cannot hold are written as text).
        """
        if self._closed or self.dry_run:
            return
        try:
            timeline = self._timeline if self._timeline_started else self._start_timeline_early()
            if timeline is None:
                return
            start_us, duration_us = event_times(timestamp, duration)
            timeline.record(str(training_phase), str(op_name), str(phase), start_us, duration_us, kwargs)
        except Exception as err:  # noqa: BLE001 - a bad event must not reach the training loop
            log: Callable[..., None] = logger.debug if self._trace_warned else logger.warning
            self._trace_warned = True
            log("record_trace_events(op_name=%r, phase=%r) not recorded: %s", op_name, phase, err)

    def _start_timeline_early(self) -> StepTimeline | None:
        """Start the step timeline before the first step (with the rank known now), to be closed with the hook."""
        if self._rank is not None and self._world_size is not None:
            rank, size = self._rank, self._world_size
        else:
            rank, size = self._distributed_info()
        self._start_timeline(rank if size > 1 else None)
        if self._timeline is not None:
            atexit.register(_close_at_exit, weakref.ref(self))
        return self._timeline


def _close_at_exit(ref: weakref.ReferenceType[TraceEvents]) -> None:
    hook = ref()
    if hook is not None:
        hook.close()


__all__ = ["TraceEvents", "event_times"]
