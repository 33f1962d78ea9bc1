"""Profiler helpers and enums, under the names of ``sagemaker.debugger.utils``.

``ErrorMessages`` holds SageMaker SDK v2's validation texts. sdk_ext's errors start with that text
(so code that matches it keeps working) and go on to say what was given and how to fix it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from enum import Enum
from typing import Any


def convert_json_config_to_string(config: Mapping[Any, Any]) -> str:
    """The service's string form of a metrics config: ``{"k": v, }`` (each pair followed by ``", "``).

    It is not JSON (note the trailing comma); ``eval`` of it gives the dict back, and SageMaker
    expects exactly these bytes.
    """
    return "{" + "".join(f"{_quoted(k)}: {_quoted(v)}, " for k, v in config.items()) + "}"


def _quoted(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def is_valid_unix_time(unix_time: Any) -> bool:
    """True when ``unix_time`` (seconds) is a time the platform can represent."""
    try:
        datetime.fromtimestamp(unix_time)
    except (OverflowError, ValueError, OSError, TypeError):
        return False
    return True


def is_valid_regex(regex: Any) -> bool:
    """True when ``regex`` is a string that compiles as a regular expression."""
    try:
        re.compile(regex)
    except (re.error, TypeError):
        return False
    return True


class ErrorMessages(Enum):
    """SageMaker SDK v2's texts for invalid profiling arguments (each sdk_ext message starts with one)."""

    INVALID_LOCAL_PATH = "local_path must be a string!"
    INVALID_FILE_MAX_SIZE = "file_max_size must be an integer greater than 0!"
    INVALID_FILE_CLOSE_INTERVAL = "file_close_interval must be a float/integer greater than 0!"
    INVALID_FILE_OPEN_FAIL_THRESHOLD = "file_open_fail threshold must be an integer greater than 0!"
    INVALID_PROFILE_DEFAULT_STEPS = "profile_default_steps must be a boolean!"
    INVALID_START_STEP = "start_step must be integer greater or equal to 0!"
    INVALID_NUM_STEPS = "num_steps must be integer greater than 0!"
    INVALID_START_UNIX_TIME = "start_unix_time must be valid integer unix time!"
    INVALID_DURATION = "duration must be float greater than 0!"
    FOUND_BOTH_STEP_AND_TIME_FIELDS = "Both step and time fields cannot be specified in the metrics config!"
    INVALID_METRICS_REGEX = "metrics_regex is invalid!"
    INVALID_PYTHON_PROFILER = "python_profiler must be of type PythonProfiler!"
    INVALID_CPROFILE_TIMER = "cprofile_timer must be of type cProfileTimer"


class PythonProfiler(Enum):
    """Which Python profiler PythonProfilingConfig uses."""

    CPROFILE = "cprofile"
    PYINSTRUMENT = "pyinstrument"


class cProfileTimer(Enum):
    """The timer cProfile measures with."""

    TOTAL_TIME = "total_time"
    CPU_TIME = "cpu_time"
    OFF_CPU_TIME = "off_cpu_time"
    DEFAULT = "default"


__all__ = [
    "ErrorMessages",
    "PythonProfiler",
    "cProfileTimer",
    "convert_json_config_to_string",
    "is_valid_regex",
    "is_valid_unix_time",
]
