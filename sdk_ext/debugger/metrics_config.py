"""The framework-metrics configs of a FrameworkProfile, and the step or time range each one covers.

Each config becomes one ``ProfilingParameters`` value in SageMaker's string form, e.g.
``"DetailedProfilingConfig": "{\\"StartStep\\": 5, \\"NumSteps\\": 1, }"`` or with a time range
``"{\\"StartTimeInSecSinceEpoch\\": 1700000000, \\"Duration\\": 60, }"`` (see
:func:`~sdk_ext.debugger.utils.convert_json_config_to_string`). Names, defaults and payloads are
SageMaker SDK v2's (``sagemaker.debugger.metrics_config``); invalid arguments are all reported at
once in one DebuggerConfigError whose lines start with v2's message.
"""

from __future__ import annotations

from typing import Any

from sdk_ext.debugger.errors import Problems
from sdk_ext.debugger.profiler_constants import (
    DATALOADER_PROFILING_CONFIG_NAME,
    DATALOADER_PROFILING_START_STEP_DEFAULT,
    DETAILED_PROFILING_CONFIG_NAME,
    DETAILED_PROFILING_START_STEP_DEFAULT,
    HOROVOD_PROFILING_CONFIG_NAME,
    HOROVOD_PROFILING_START_STEP_DEFAULT,
    PROFILING_NUM_STEPS_DEFAULT,
    PYTHON_PROFILING_CONFIG_NAME,
    PYTHON_PROFILING_NUM_STEPS_DEFAULT,
    PYTHON_PROFILING_START_STEP_DEFAULT,
    SMDATAPARALLEL_PROFILING_CONFIG_NAME,
    SMDATAPARALLEL_PROFILING_START_STEP_DEFAULT,
    START_STEP_DEFAULT,
)
from sdk_ext.debugger.utils import (
    ErrorMessages,
    PythonProfiler,
    convert_json_config_to_string,
    cProfileTimer,
    is_valid_regex,
    is_valid_unix_time,
)


class StepRange:
    """Profile ``num_steps`` steps from ``start_step`` (step 0 and 1 step when unset)."""

    def __init__(self, start_step: int | None, num_steps: int | None) -> None:
        if start_step is None:
            start_step = START_STEP_DEFAULT
        elif num_steps is None:
            num_steps = PROFILING_NUM_STEPS_DEFAULT
        self.start_step = start_step
        self.num_steps = num_steps

    def to_json(self) -> dict[str, Any]:
        return {"StartStep": self.start_step, "NumSteps": self.num_steps}

    def __repr__(self) -> str:
        return f"StepRange(start_step={self.start_step!r}, num_steps={self.num_steps!r})"


class TimeRange:
    """Profile ``duration`` seconds from ``start_unix_time``; an unset field is left out."""

    def __init__(self, start_unix_time: int | None, duration: float | None) -> None:
        self.start_unix_time = start_unix_time
        self.duration = duration

    def to_json(self) -> dict[str, Any]:
        fields = (("StartTimeInSecSinceEpoch", self.start_unix_time), ("Duration", self.duration))
        return {key: value for key, value in fields if value is not None}

    def __repr__(self) -> str:
        return f"TimeRange(start_unix_time={self.start_unix_time!r}, duration={self.duration!r})"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_range(problems: Problems, start_step: Any, num_steps: Any, start_unix_time: Any,
                duration: Any) -> StepRange | TimeRange:
    """Add a problem for each invalid range field; return the range they describe."""
    if start_step is not None and not (_is_int(start_step) and start_step >= 0):
        problems.add(f"{ErrorMessages.INVALID_START_STEP.value} Got {start_step!r}: give the first step to "
                     "profile as a whole number, e.g. start_step=5")
    if num_steps is not None and not (_is_int(num_steps) and num_steps > 0):
        problems.add(f"{ErrorMessages.INVALID_NUM_STEPS.value} Got {num_steps!r}: give how many steps to "
                     "profile as a whole number, e.g. num_steps=1")
    if start_unix_time is not None and not (_is_int(start_unix_time) and is_valid_unix_time(start_unix_time)):
        problems.add(f"{ErrorMessages.INVALID_START_UNIX_TIME.value} Got {start_unix_time!r}: give whole seconds "
                     "since 1970, e.g. start_unix_time=int(time.time()) + 600")
    if duration is not None and not (isinstance(duration, (int, float)) and not isinstance(duration, bool)
                                     and duration > 0):
        problems.add(f"{ErrorMessages.INVALID_DURATION.value} Got {duration!r}: give the seconds to profile, "
                     "e.g. duration=60")
    by_step = start_step is not None or num_steps is not None
    by_time = start_unix_time is not None or duration is not None
    if by_step and by_time:
        problems.add(f"{ErrorMessages.FOUND_BOTH_STEP_AND_TIME_FIELDS.value} Got a step range "
                     f"(start_step={start_step!r}, num_steps={num_steps!r}) and a time range "
                     f"(start_unix_time={start_unix_time!r}, duration={duration!r}): keep one of the two")
    return StepRange(start_step, num_steps) if by_step else TimeRange(start_unix_time, duration)


def check_default_steps(problems: Problems, profile_default_steps: Any) -> None:
    if not isinstance(profile_default_steps, bool):
        problems.add(f"{ErrorMessages.INVALID_PROFILE_DEFAULT_STEPS.value} Got {profile_default_steps!r}: "
                     "pass True or False")


class MetricsConfigBase:
    """A named step or time range of framework metrics (``range``: a StepRange or a TimeRange).

    Raises:
        DebuggerConfigError: every invalid field, each line starting with SageMaker's message.
    """

    def __init__(self, name: str, start_step: int | None, num_steps: int | None, start_unix_time: int | None,
                 duration: float | None) -> None:
        problems = Problems(type(self).__name__)
        self.name = name
        self.range = check_range(problems, start_step, num_steps, start_unix_time, duration)
        self._check(problems)
        problems.raise_if_any()

    def _check(self, problems: Problems) -> None:
        """Checks of subclass fields, reported with the range's problems."""

    def _to_json(self) -> dict[str, Any]:
        return self.range.to_json()

    def to_json_string(self) -> str:
        return convert_json_config_to_string(self._to_json())


class _DefaultStepsConfig(MetricsConfigBase):
    """A config that profiles its default steps when asked to, or when given no range at all."""

    _name = ""
    _default_start_step = START_STEP_DEFAULT
    _default_num_steps = PROFILING_NUM_STEPS_DEFAULT

    def __init__(self, start_step: int | None = None, num_steps: int | None = None,
                 start_unix_time: int | None = None, duration: float | None = None,
                 profile_default_steps: bool = False) -> None:
        self._profile_default_steps = profile_default_steps
        if profile_default_steps is True or start_step is num_steps is start_unix_time is duration is None:
            start_step, num_steps = self._default_start_step, self._default_num_steps
        super().__init__(self._name, start_step, num_steps, start_unix_time, duration)

    def _check(self, problems: Problems) -> None:
        check_default_steps(problems, self._profile_default_steps)


class DetailedProfilingConfig(_DefaultStepsConfig):
    """Detailed framework profiling; step 5 by default."""

    _name = DETAILED_PROFILING_CONFIG_NAME
    _default_start_step = DETAILED_PROFILING_START_STEP_DEFAULT


class HorovodProfilingConfig(_DefaultStepsConfig):
    """Horovod metrics; step 13 by default."""

    _name = HOROVOD_PROFILING_CONFIG_NAME
    _default_start_step = HOROVOD_PROFILING_START_STEP_DEFAULT


class SMDataParallelProfilingConfig(_DefaultStepsConfig):
    """SageMaker distributed data parallel metrics; step 15 by default."""

    _name = SMDATAPARALLEL_PROFILING_CONFIG_NAME
    _default_start_step = SMDATAPARALLEL_PROFILING_START_STEP_DEFAULT


class DataloaderProfilingConfig(_DefaultStepsConfig):
    """Data loader metrics matching ``metrics_regex``; step 7 by default."""

    _name = DATALOADER_PROFILING_CONFIG_NAME
    _default_start_step = DATALOADER_PROFILING_START_STEP_DEFAULT

    def __init__(self, start_step: int | None = None, num_steps: int | None = None,
                 start_unix_time: int | None = None, duration: float | None = None,
                 profile_default_steps: bool = False, metrics_regex: str = ".*") -> None:
        self.metrics_regex = metrics_regex
        super().__init__(start_step, num_steps, start_unix_time, duration, profile_default_steps)

    def _check(self, problems: Problems) -> None:
        super()._check(problems)
        if not is_valid_regex(self.metrics_regex):
            problems.add(f"{ErrorMessages.INVALID_METRICS_REGEX.value} Got {self.metrics_regex!r}, which is not a "
                         "regular expression: write e.g. '.*' for every metric, or escape it with re.escape()")

    def _to_json(self) -> dict[str, Any]:
        return {**self.range.to_json(), "MetricsRegex": self.metrics_regex}


class PythonProfilingConfig(_DefaultStepsConfig):
    """Python profiling (cProfile or Pyinstrument); steps 9-11 by default."""

    _name = PYTHON_PROFILING_CONFIG_NAME
    _default_start_step = PYTHON_PROFILING_START_STEP_DEFAULT
    _default_num_steps = PYTHON_PROFILING_NUM_STEPS_DEFAULT

    def __init__(self, start_step: int | None = None, num_steps: int | None = None,
                 start_unix_time: int | None = None, duration: float | None = None,
                 profile_default_steps: bool = False, python_profiler: PythonProfiler = PythonProfiler.CPROFILE,
                 cprofile_timer: cProfileTimer = cProfileTimer.TOTAL_TIME) -> None:
        if profile_default_steps is True:
            cprofile_timer = cProfileTimer.DEFAULT
        self.python_profiler = python_profiler
        self._given_timer = cprofile_timer
        # the timer only applies to cProfile
        self.cprofile_timer: cProfileTimer | None = (
            None if python_profiler == PythonProfiler.PYINSTRUMENT else cprofile_timer)
        super().__init__(start_step, num_steps, start_unix_time, duration, profile_default_steps)

    def _check(self, problems: Problems) -> None:
        super()._check(problems)
        if not isinstance(self.python_profiler, PythonProfiler):
            problems.add(f"{ErrorMessages.INVALID_PYTHON_PROFILER.value} Got {self.python_profiler!r}: use "
                         "PythonProfiler.CPROFILE or PythonProfiler.PYINSTRUMENT (from sdk_ext.debugger.utils)")
        if not isinstance(self._given_timer, cProfileTimer):
            problems.add(f"{ErrorMessages.INVALID_CPROFILE_TIMER.value}! Got {self._given_timer!r}: use a "
                         "cProfileTimer member such as cProfileTimer.TOTAL_TIME (from sdk_ext.debugger.utils)")

    def _to_json(self) -> dict[str, Any]:
        fields = {**self.range.to_json(), "ProfilerName": self.python_profiler.value}
        if self.cprofile_timer is not None:
            fields["cProfileTimer"] = self.cprofile_timer.value
        return fields


__all__ = [
    "DataloaderProfilingConfig",
    "DetailedProfilingConfig",
    "ErrorMessages",
    "HorovodProfilingConfig",
    "MetricsConfigBase",
    "PythonProfiler",
    "PythonProfilingConfig",
    "SMDataParallelProfilingConfig",
    "StepRange",
    "TimeRange",
    "cProfileTimer",
    "convert_json_config_to_string",
    "is_valid_regex",
    "is_valid_unix_time",
]
