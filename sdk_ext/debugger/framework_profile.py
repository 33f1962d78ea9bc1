"""FrameworkProfile and its metrics configs (deprecated by SageMaker, kept for payload parity).

``ProfilingParameters`` built from a FrameworkProfile, e.g. with every default::

    {"LocalPath": "/opt/ml/output/profiler", "RotateMaxFileSizeInBytes": "10485760",
     "RotateFileCloseIntervalInSeconds": "60", "FileOpenFailThreshold": "50",
     "DetailedProfilingConfig": "{\"StartStep\": 5, \"NumSteps\": 1, }", ...}

Each metrics config value is SageMaker's own string form: ``"key": value`` pairs each followed by
``", "``, inside braces. It is not JSON (note the trailing comma), and the service expects it so.
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import Enum
from typing import Any

from sdk_ext.debugger.errors import DebuggerConfigError, Problems


class PythonProfiler(Enum):
    CPROFILE = "cprofile"
    PYINSTRUMENT = "pyinstrument"


class cProfileTimer(Enum):
    TOTAL_TIME = "total_time"
    CPU_TIME = "cpu_time"
    OFF_CPU_TIME = "off_cpu_time"
    DEFAULT = "default"


def _service_string(fields: dict[str, Any]) -> str:
    parts = "".join(f"{_quoted(k)}: {_quoted(v)}, " for k, v in fields.items())
    return "{" + parts + "}"


def _quoted(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def _is_int(value: object) -> bool:
    return isinstance(value, int)


def _valid_unix_time(value: int) -> bool:
    try:
        datetime.fromtimestamp(value)
    except (OverflowError, ValueError, OSError):
        return False
    return True


class MetricsConfigBase:
    """A step range or a time range for one kind of framework metrics."""

    # (config name, default start step, default number of steps); set by each subclass
    _defaults: tuple[str, int, int] = ("", 0, 1)

    def __init__(self, start_step: int | None = None, num_steps: int | None = None,
                 start_unix_time: int | None = None, duration: float | None = None,
                 profile_default_steps: bool = False) -> None:
        problems = Problems(type(self).__name__)
        name, default_start, default_steps = self._defaults
        if not isinstance(profile_default_steps, bool):
            problems.add(f"profile_default_steps must be True or False, got {profile_default_steps!r}")
        if profile_default_steps is True or all(v is None for v in (start_step, num_steps, start_unix_time,
                                                                   duration)):
            start_step, num_steps = default_start, default_steps
        if start_step is not None and not (_is_int(start_step) and start_step >= 0):
            problems.add(f"start_step must be an integer >= 0, got {start_step!r}")
        if num_steps is not None and not (_is_int(num_steps) and num_steps > 0):
            problems.add(f"num_steps must be an integer > 0, got {num_steps!r}")
        if start_unix_time is not None and not (_is_int(start_unix_time) and _valid_unix_time(start_unix_time)):
            problems.add(f"start_unix_time must be an integer unix time in seconds, got {start_unix_time!r}")
        if duration is not None and not (isinstance(duration, (int, float)) and duration > 0):
            problems.add(f"duration must be a number of seconds > 0, got {duration!r}")
        by_step = start_step is not None or num_steps is not None
        by_time = start_unix_time is not None or duration is not None
        if by_step and by_time:
            problems.add("give either a step range (start_step/num_steps) or a time range "
                         "(start_unix_time/duration) in one metrics config, not both")
        self.name = name
        self._range: dict[str, Any]
        if by_step:
            start = 0 if start_step is None else start_step
            steps = 1 if start_step is not None and num_steps is None else num_steps
            self._range = {"StartStep": start, "NumSteps": steps}
        else:
            self._range = {k: v for k, v in (("StartTimeInSecSinceEpoch", start_unix_time),
                                             ("Duration", duration)) if v is not None}
        self._check_more(problems)
        problems.raise_if_any()

    def _check_more(self, problems: Problems) -> None:
        """Subclass checks that run before the error is raised."""

    def _fields(self) -> dict[str, Any]:
        return dict(self._range)

    def to_json_string(self) -> str:
        return _service_string(self._fields())


class DetailedProfilingConfig(MetricsConfigBase):
    _defaults = ("DetailedProfilingConfig", 5, 1)


class HorovodProfilingConfig(MetricsConfigBase):
    _defaults = ("HorovodProfilingConfig", 13, 1)


class SMDataParallelProfilingConfig(MetricsConfigBase):
    _defaults = ("SMDataParallelProfilingConfig", 15, 1)


class DataloaderProfilingConfig(MetricsConfigBase):
    _defaults = ("DataloaderProfilingConfig", 7, 1)

    def __init__(self, start_step: int | None = None, num_steps: int | None = None,
                 start_unix_time: int | None = None, duration: float | None = None,
                 profile_default_steps: bool = False, metrics_regex: str = ".*") -> None:
        self.metrics_regex = metrics_regex
        super().__init__(start_step, num_steps, start_unix_time, duration, profile_default_steps)

    def _check_more(self, problems: Problems) -> None:
        try:
            re.compile(self.metrics_regex)
        except (re.error, TypeError) as err:
            problems.add(f"metrics_regex {self.metrics_regex!r} is not a valid regular expression ({err})")

    def _fields(self) -> dict[str, Any]:
        return {**self._range, "MetricsRegex": self.metrics_regex}


class PythonProfilingConfig(MetricsConfigBase):
    _defaults = ("PythonProfilingConfig", 9, 3)

    def __init__(self, start_step: int | None = None, num_steps: int | None = None,
                 start_unix_time: int | None = None, duration: float | None = None,
                 profile_default_steps: bool = False, python_profiler: PythonProfiler = PythonProfiler.CPROFILE,
                 cprofile_timer: cProfileTimer = cProfileTimer.TOTAL_TIME) -> None:
        if profile_default_steps is True:
            cprofile_timer = cProfileTimer.DEFAULT
        self.python_profiler = python_profiler
        self.cprofile_timer: cProfileTimer | None = (
            None if python_profiler == PythonProfiler.PYINSTRUMENT else cprofile_timer)
        super().__init__(start_step, num_steps, start_unix_time, duration, profile_default_steps)

    def _check_more(self, problems: Problems) -> None:
        if not isinstance(self.python_profiler, PythonProfiler):
            problems.add(f"python_profiler must be a PythonProfiler member (PythonProfiler.CPROFILE or "
                         f"PythonProfiler.PYINSTRUMENT), got {self.python_profiler!r}")
        if self.cprofile_timer is not None and not isinstance(self.cprofile_timer, cProfileTimer):
            problems.add(f"cprofile_timer must be a cProfileTimer member, got {self.cprofile_timer!r}")

    def _fields(self) -> dict[str, Any]:
        fields = {**self._range, "ProfilerName": self.python_profiler.value}
        if self.cprofile_timer is not None:
            fields["cProfileTimer"] = self.cprofile_timer.value
        return fields


_ALL_METRICS_CONFIGS: tuple[type[MetricsConfigBase], ...] = (
    DetailedProfilingConfig, DataloaderProfilingConfig, PythonProfilingConfig, HorovodProfilingConfig,
    SMDataParallelProfilingConfig,
)


class FrameworkProfile:
    """Framework-metrics profiling (deprecated by SageMaker for TF >= 2.12 and PyTorch >= 2.0).

    With metrics configs given, exactly those are sent; else with a step or time range, all five
    configs use it; else all five use their default steps.

    Raises:
        DebuggerConfigError: listing every invalid argument.
    """

    def __init__(self, local_path: str = "/opt/ml/output/profiler", file_max_size: int = 10485760,
                 file_close_interval: float = 60, file_open_fail_threshold: int = 50,
                 detailed_profiling_config: DetailedProfilingConfig | None = None,
                 dataloader_profiling_config: DataloaderProfilingConfig | None = None,
                 python_profiling_config: PythonProfilingConfig | None = None,
                 horovod_profiling_config: HorovodProfilingConfig | None = None,
                 smdataparallel_profiling_config: SMDataParallelProfilingConfig | None = None,
                 start_step: int | None = None, num_steps: int | None = None,
                 start_unix_time: int | None = None, duration: float | None = None) -> None:
        problems = Problems("FrameworkProfile")
        if not isinstance(local_path, str):
            problems.add(f"local_path must be a string, got {local_path!r}")
        if not (_is_int(file_max_size) and file_max_size > 0):
            problems.add(f"file_max_size must be an integer number of bytes > 0, got {file_max_size!r}")
        if not (isinstance(file_close_interval, (int, float)) and file_close_interval > 0):
            problems.add(f"file_close_interval must be a number of seconds > 0, got {file_close_interval!r}")
        if not (_is_int(file_open_fail_threshold) and file_open_fail_threshold > 0):
            problems.add(f"file_open_fail_threshold must be an integer > 0, got {file_open_fail_threshold!r}")
        given: list[MetricsConfigBase] = [c for c in (detailed_profiling_config, dataloader_profiling_config, python_profiling_config,
                             horovod_profiling_config, smdataparallel_profiling_config) if c is not None]
        for config in given:
            if not isinstance(config, MetricsConfigBase):
                problems.add(f"{config!r} is not a metrics config such as DetailedProfilingConfig(...)")
        configs: list[MetricsConfigBase] = []
        ranged = any(v is not None for v in (start_step, num_steps, start_unix_time, duration))
        for cls in () if given else _ALL_METRICS_CONFIGS:
            try:
                configs.append(cls(start_step, num_steps, start_unix_time, duration) if ranged
                               else cls(profile_default_steps=True))
            except DebuggerConfigError as err:
                problems.items.extend(err.problems)
                break  # the same range problem would repeat for each of the five configs
        problems.raise_if_any()
        self.profiling_parameters: dict[str, str] = {
            "LocalPath": local_path,
            "RotateMaxFileSizeInBytes": str(file_max_size),
            "RotateFileCloseIntervalInSeconds": str(file_close_interval),
            "FileOpenFailThreshold": str(file_open_fail_threshold),
        }
        for config in given or configs:
            self.profiling_parameters[config.name] = config.to_json_string()
