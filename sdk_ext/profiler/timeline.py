"""The step timeline: each training step's start and duration, in smdebug's Chrome-trace layout.

Files under the job's profiler output (``ProfilingParameters.LocalPath``; ``profiler-output/`` on S3)::

    framework/pevents/2020060500/1591160699457089_1234-algo-1_pythontimeline.json
                                 ^ end of its last event, us    ^ node: pid (rank when distributed)-host

Each file is a JSON array that chrome://tracing and Perfetto open, and smdebug's readers read::

    [
    {"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": 1591160690000000}},
    {"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}},
    {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "Step:ModeKeys.TRAIN"}},
    {"name": "process_sort_index", "ph": "M", "pid": 1, "args": {"sort_index": 1}},
    {"name": "Step:ModeKeys.TRAIN", "pid": 1, "ph": "X", "ts": 1200, "dur": 5321, "args": {"pid": 1234, "step_num": "0", "global_step": 0}}
    ]

``ts`` is microseconds after ``start_time_since_epoch_in_micros``, ``dur`` microseconds; ``step_num`` is the
step within its mode (as smdebug's hooks wrote it). A step lasts from its start to its end (the
framework's end of step, or the start of the next step where the framework has no end of step).

The script's own events (``Hook.record_trace_events``, smdebug's API) go to the same files: each training
phase it names is a process row of its own, the event is named by its operation and keeps the keyword
arguments as ``args``, in smdebug's shape::

    {"name": "TrainingEpochStart", "pid": 2, "ph": "B", "ts": 1300, "args": {"epoch": 0}}

The start time of the files is the earliest of the timeline's creation and the events buffered before its
first file opens, so an event timed before the first step (a ``B`` at the start of an epoch) is not
negative.

Atomicity: events are appended to a hidden ``framework/.<node>.<n>_pythontimeline.json.tmp`` (a name no
reader lists) and the file is closed and renamed into ``pevents/`` when it rotates (60 s or 10 MB by
default, ProfilingParameters ``RotateFileCloseIntervalInSeconds`` / ``RotateMaxFileSizeInBytes``; or a
new UTC hour), or when the hook closes: a reader sees a complete JSON array or nothing.
:func:`recover` publishes what a killed process left (its complete events).

Cost: a step costs a clock read and a list append; events are formatted and written once a second.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from sdk_ext.modes import ModeKeys
from sdk_ext.profiler import config as profiler_config

logger = logging.getLogger(__name__)

FRAMEWORK_DIR = "framework"
PEVENTS_DIR = "pevents"
SUFFIX = "pythontimeline.json"
FLUSH_SECONDS = 1.0
_MAX_BUFFERED = 4096
_PARTIAL = re.compile(r"\.(.+)\.\d+_" + re.escape(SUFFIX) + r"\.tmp")
_FILE_NUMBERS = itertools.count(1)  # hidden file names unique in the process, whatever the timelines
#: Event timestamps a timeline accepts, in seconds since the epoch: a value past this (year 5138) is not
#: seconds (microseconds or nanoseconds, most likely) and would name a file no strftime can write.
MAX_TIMESTAMP_S = 1e11


class Step(Protocol):
    """A hook's step (sdk_ext.hooks.step_counter.Step; the hooks import this module, not the other way round)."""

    @property
    def global_step(self) -> int: ...

    @property
    def mode(self) -> ModeKeys: ...

    @property
    def mode_step(self) -> int: ...


class StepObserver(Protocol):
    """Something that runs over a window of steps (detailed profiling), told of each step's start."""

    def step_started(self, step: Step) -> None: ...

    def close(self) -> None: ...


def node_id(rank: int | None, *, config_dir: Path | None = None) -> str:
    """``<rank or pid>-<host>`` (smdebug's node id): the host from ``SM_CURRENT_HOST``, the job's
    resourceconfig.json, else this machine's name; no ``_`` (file names split on it)."""
    host = os.environ.get("SM_CURRENT_HOST")
    if not host and config_dir is not None:
        try:
            host = str(json.loads((config_dir / "resourceconfig.json").read_text(encoding="utf-8"))["current_host"])
        except (OSError, ValueError, KeyError, TypeError):
            host = None
    if not host:
        host = socket.gethostname()
    ident = rank if rank is not None else os.getpid()
    return f"{ident}-{host}".replace("_", "-")


def _end_name(end_us: int, node: str) -> str:
    return f"{end_us}_{node}_{SUFFIX}"


def _publish(partial: Path, out_dir: Path, node: str, end_us: int) -> Path:
    hour = time.strftime("%Y%m%d%H", time.gmtime(end_us / 1e6))
    directory = out_dir / FRAMEWORK_DIR / PEVENTS_DIR / hour
    directory.mkdir(parents=True, exist_ok=True)
    while (directory / _end_name(end_us, node)).exists():
        end_us += 1
    target = directory / _end_name(end_us, node)
    os.replace(partial, target)
    return target


#: A script's own event (:meth:`StepTimeline.record`): training phase, name, ph, start us, duration us, args.
_Record = tuple[str, str, str, int, int, dict[str, Any]]


class StepTimeline:
    """Writes one process's step events under ``out_dir`` (the profiler output root).

    Args:
        out_dir: where ``framework/`` goes (the job's ProfilingParameters.LocalPath).
        node: the node id in file names (:func:`node_id`).
        max_file_size, close_interval: rotation (bytes, seconds).
        config_path: a profilerconfig.json to follow: when it disables profiling, recording stops.
        global_mode_as: the mode GLOBAL steps are recorded as (XGBoost's rounds: TRAIN), or None to skip
            them (Keras's per-epoch metrics steps).
        clock: wall time in seconds.
    """

    def __init__(self, out_dir: str | os.PathLike[str], node: str, *,
                 max_file_size: int = profiler_config.MAX_FILE_SIZE_DEFAULT,
                 close_interval: float = profiler_config.CLOSE_INTERVAL_DEFAULT,
                 config_path: str | os.PathLike[str] | None = None,
                 global_mode_as: ModeKeys | None = ModeKeys.GLOBAL, clock: Callable[[], float] = time.time) -> None:
        self.out_dir = Path(out_dir)
        self.node = node
        self.max_file_size = max_file_size
        self.close_interval = close_interval
        self.config_path = Path(config_path) if config_path is not None else None
        self.global_mode_as = global_mode_as
        self._clock = clock
        self._pid = os.getpid()
        self._base_us = round(clock() * 1e6)
        self._phase_pids: dict[str, int] = {}
        self._open: Step | None = None
        self._start = 0.0
        self._next_start: float | None = None
        self._events: list[tuple[Step, float, float]] = []
        self._records: list[_Record] = []
        self._base_fixed = False  # a file has been written with _base_us as its start: it no longer moves
        self._lock = threading.RLock()  # guards the file: flush may come from the script's threads too
        self._flush_at = clock() + FLUSH_SECONDS
        self._file: Any = None
        self._partial: Path | None = None
        self._file_phases: set[str] = set()
        self._file_opened = 0.0
        self._file_hour = ""
        self._file_end_us = 0
        # built from the config's settings: only a later change of the file counts
        self._config = (profiler_config.ConfigFollower(self.config_path, first_counts=False)
                        if self.config_path is not None else None)
        self.enabled = True
        self.observers: list[StepObserver] = []
        #: the files published so far
        self.published: list[Path] = []

    # --- what the hooks call (hot path: keep it to a clock read and an append) ---------------------

    def begin(self, step: Step) -> None:
        """A step starts (and the open one, if any, ends now)."""
        if not self.enabled:
            return
        now = self._clock()
        if self._open is not None:
            self._events.append((self._open, self._start, now))
        if self.observers:  # a profiler window starting or stopping is no part of either step
            for observer in self.observers:
                observer.step_started(step)
            now = self._clock()
        self._open = step
        if self._next_start is not None:
            self._start, self._next_start = self._next_start, None
        else:
            self._start = now
        if now >= self._flush_at or len(self._events) >= _MAX_BUFFERED:
            self.flush(now)

    def end(self) -> None:
        """The open step ends now."""
        if self._open is None:
            return
        self._events.append((self._open, self._start, self._clock()))
        self._open = None

    def start_next(self) -> None:
        """The next step starts now, although the hook learns of it later (XGBoost's before_iteration)."""
        if self.enabled:
            self._next_start = self._clock()

    def record(self, training_phase: str, name: str, ph: str, start_us: int, duration_us: int,
               args: Mapping[str, Any]) -> None:
        """One event of the script's own (``Hook.record_trace_events``), in absolute microseconds.

        Raises:
            ValueError: ``start_us`` is not a time in microseconds since the epoch.
        """
        if not self.enabled:
            return
        if not 0 <= start_us < MAX_TIMESTAMP_S * 1e6:
            raise ValueError(f"event {name!r} at {start_us} us is not a time since the epoch")
        if start_us < self._base_us and not self._base_fixed:
            self._base_us = start_us  # no file carries the start time yet: move it so that ts stays >= 0
        self._records.append((training_phase, name, ph, start_us, max(0, duration_us), dict(args)))
        now = self._clock()
        if now >= self._flush_at or len(self._records) >= _MAX_BUFFERED:
            self.flush(now)

    # --- writing ------------------------------------------------------------------------------------

    def flush(self, now: float | None = None) -> None:
        """Write the buffered events; rotate the file when due. Never raises: a failure stops the timeline."""
        now = self._clock() if now is None else now
        self._flush_at = now + FLUSH_SECONDS
        with self._lock:
            try:
                self._follow_config()
                if self._events or self._records:
                    self._write_events()
                if self._file is not None and (now - self._file_opened >= self.close_interval
                                               or self._file.tell() >= self.max_file_size):
                    self._publish()
            except Exception:  # noqa: BLE001 - the timeline must never stop training; it stops itself
                logger.exception("step timeline: writing under %s failed; no more step events are recorded",
                                 self.out_dir)
                self.enabled = False
                self._events.clear()
                self._records.clear()

    def _follow_config(self) -> None:
        if self._config is None or not self._config.changed():
            return
        on = profiler_config.load(self._config.path).enabled
        if on != self.enabled:
            logger.info("step timeline: profiling %s", "enabled" if on else "disabled")
        if not on:
            self._events.clear()
            self._records.clear()
            self._open = None
            self._publish()
        self.enabled = on

    def _phase_pid(self, phase: str) -> int:
        pid = self._phase_pids.get(phase)
        if pid is None:
            pid = self._phase_pids[phase] = len(self._phase_pids) + 1  # pid 0 holds the start time
        return pid

    def _open_file(self) -> None:
        framework = self.out_dir / FRAMEWORK_DIR
        framework.mkdir(parents=True, exist_ok=True)
        self._partial = framework / f".{self.node}.{next(_FILE_NUMBERS)}_{SUFFIX}.tmp"
        self._file = open(self._partial, "wb")  # noqa: SIM115 - kept open across flushes, closed in _publish
        self._file_phases = set()
        self._file_opened = self._clock()
        self._file_end_us = 0
        self._base_fixed = True
        head = [{"name": "process_name", "ph": "M", "pid": 0,
                 "args": {"start_time_since_epoch_in_micros": self._base_us}},
                {"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}}]
        self._file.write(b"[\n" + "".join(json.dumps(e) + ",\n" for e in head).encode())

    def _write_events(self) -> None:
        steps, self._events = self._events, []
        records, self._records = self._records, []
        lines: list[str] = []
        for phase, end_us, line in itertools.chain(self._step_lines(steps), self._record_lines(records)):
            hour = time.strftime("%Y%m%d%H", time.gmtime(end_us / 1e6))
            if self._file is not None and hour != self._file_hour:
                self._write_lines(lines)
                lines = []
                self._publish()
            if self._file is None:
                self._open_file()
                self._file_hour = hour
            if phase not in self._file_phases:
                self._file_phases.add(phase)
                pid = self._phase_pid(phase)
                lines.append(f'{{"name": "process_name", "ph": "M", "pid": {pid}, "args": {{"name": {json.dumps(phase)}}}}},\n')
                lines.append(f'{{"name": "process_sort_index", "ph": "M", "pid": {pid}, '
                             f'"args": {{"sort_index": {pid}}}}},\n')
            lines.append(line)
            self._file_end_us = max(self._file_end_us, end_us)
        self._write_lines(lines)

    def _step_lines(self, events: list[tuple[Step, float, float]]) -> Iterator[tuple[str, int, str]]:
        """(phase, end us, line) of each step event."""
        base = self._base_us
        for step, start, end in events:
            mode = step.mode
            if mode is ModeKeys.GLOBAL:
                if self.global_mode_as is None:
                    continue
                mode = self.global_mode_as
            phase = f"Step:ModeKeys.{mode.name}"
            start_us = round(start * 1e6)
            end_us = max(start_us, round(end * 1e6))
            yield phase, end_us, (
                f'{{"name": "{phase}", "pid": {self._phase_pid(phase)}, "ph": "X", "ts": {start_us - base}, '
                f'"dur": {end_us - start_us}, "args": {{"pid": {self._pid}, "step_num": "{step.mode_step}", '
                f'"global_step": {step.global_step}}}}},\n')

    def _record_lines(self, records: list[_Record]) -> Iterator[tuple[str, int, str]]:
        """(phase, end us, line) of each of the script's events, in smdebug's shape."""
        for phase, name, ph, start_us, duration_us, args in records:
            entry: dict[str, Any] = {"name": name, "pid": self._phase_pid(phase), "ph": ph,
                                     "ts": start_us - self._base_us}
            if ph == "X":
                entry["dur"] = duration_us
            elif ph == "i":
                entry["s"] = args.pop("s", "t")  # an instant's scope travels in args, as smdebug's API has it
            if args:
                entry["args"] = args
            yield phase, start_us + (duration_us if ph == "X" else 0), _json_line(entry)

    def _write_lines(self, lines: list[str]) -> None:
        if lines and self._file is not None:
            self._file.write("".join(lines).encode())
            self._file.flush()  # in the page cache: a killed process leaves them for recover()

    def _publish(self) -> None:
        if self._file is None or self._partial is None:
            return
        f, self._file = self._file, None
        try:
            if self._file_end_us == 0:  # metadata only: nothing to publish
                f.close()
                self._partial.unlink()
                return
            f.seek(-2, os.SEEK_END)  # the last ",\n"
            f.truncate()
            f.write(b"\n]\n")
            f.close()
            self.published.append(_publish(self._partial, self.out_dir, self.node, self._file_end_us))
        finally:
            if not f.closed:
                f.close()
            self._partial = None

    def close(self) -> None:
        """End the open step, write everything and publish the file. Safe to call twice; never raises."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        for observer in self.observers:
            try:
                observer.close()
            except Exception:  # noqa: BLE001 - a profiler window must not stop the timeline's close
                logger.exception("step timeline: closing %r failed", observer)
        self.observers = []
        if self.enabled:
            self.end()
            self.flush()
        try:
            self._publish()
        except Exception:  # noqa: BLE001 - close runs at exit too
            logger.exception("step timeline: publishing under %s failed", self.out_dir)
        self.enabled = False


def _json_line(entry: dict[str, Any]) -> str:
    """``entry`` as one line of a trace file: strict JSON (a NaN or infinity in args becomes its text, as
    browsers' JSON parsers accept no other), anything else json cannot write as its ``str``."""
    try:
        return json.dumps(entry, allow_nan=False, default=str) + ",\n"
    except ValueError:
        return json.dumps(_finite(entry), allow_nan=False, default=str) + ",\n"


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def from_config(rank: int | None, *, global_mode_as: ModeKeys | None = ModeKeys.GLOBAL,
                path: str | os.PathLike[str] | None = None) -> tuple[StepTimeline, profiler_config.ProfilingConfig] | None:
    """The timeline the job's profiler config asks for (``$SMPROFILER_CONFIG_PATH`` or SageMaker's
    profilerconfig.json), or None when profiling is off or there is no config."""
    file = profiler_config.config_path(path)
    settings = profiler_config.load(file)
    if not settings.enabled:
        return None
    node = node_id(rank, config_dir=file.parent)
    timeline = StepTimeline(settings.local_path, node, max_file_size=settings.max_file_size,
                            close_interval=settings.close_interval, config_path=file, global_mode_as=global_mode_as)
    logger.info("profiling on (%s): step timeline under %s/%s", file, settings.local_path, FRAMEWORK_DIR)
    return timeline, settings


def recover(out_dir: str | os.PathLike[str]) -> list[Path]:
    """Publish the timelines killed processes left under ``out_dir/framework`` (their complete events).

    Call only when the processes that wrote them have ended.
    """
    framework = Path(out_dir) / FRAMEWORK_DIR
    found: list[Path] = []
    if not framework.is_dir():
        return found
    for partial in sorted(framework.iterdir()):
        match = _PARTIAL.fullmatch(partial.name)
        if match is None:
            continue
        lines = partial.read_bytes().split(b"\n")
        kept: list[bytes] = []
        base = 0
        end_us = 0
        for line in lines[1:]:  # lines[0] is "["
            if not line.endswith(b"},"):
                break  # cut short by the kill: not data, nor anything after it
            try:
                event = json.loads(line[:-1])
            except ValueError:
                break
            kept.append(line)
            start = (event.get("args") or {}).get("start_time_since_epoch_in_micros")
            if isinstance(start, int):
                base = start
            if event.get("ph") != "M" and "ts" in event:  # steps, and the script's own events
                end_us = max(end_us, base + int(event["ts"]) + int(event.get("dur", 0)))
        if end_us == 0:
            partial.unlink()
            continue
        partial.write_bytes(b"[\n" + b"\n".join(kept)[:-1] + b"\n]\n")
        published = _publish(partial, Path(out_dir), match[1], end_us)
        logger.info("recovered %s from an interrupted process", published)
        found.append(published)
    return found


__all__ = ["FRAMEWORK_DIR", "PEVENTS_DIR", "SUFFIX", "Step", "StepObserver", "StepTimeline", "from_config", "node_id",
           "recover"]
