"""FrameworkProfile: framework-metrics profiling (deprecated by SageMaker, kept for payload parity).

``ProfilingParameters`` built from a FrameworkProfile, e.g. with every default::

    {"LocalPath": "/opt/ml/output/profiler", "RotateMaxFileSizeInBytes": "10485760",
     "RotateFileCloseIntervalInSeconds": "60", "FileOpenFailThreshold": "50",
     "DetailedProfilingConfig": "{\"StartStep\": 5, \"NumSteps\": 1, }", ...}

The metrics configs live in :mod:`sdk_ext.debugger.metrics_config` (as in ``sagemaker.debugger``);
this module re-exports them and the trace-file defaults under v2's names.
"""

from __future__ import annotations

from collections.abc import Callable

from sdk_ext.debugger.errors import DebuggerConfigError, Problems
from sdk_ext.debugger.metrics_config import (
    DataloaderProfilingConfig,
    DetailedProfilingConfig,
    HorovodProfilingConfig,
    MetricsConfigBase,
    PythonProfilingConfig,
    SMDataParallelProfilingConfig,
)
from sdk_ext.debugger.profiler_constants import (
    BASE_FOLDER_DEFAULT,
    CLOSE_FILE_INTERVAL_DEFAULT,
    FILE_OPEN_FAIL_THRESHOLD_DEFAULT,
    MAX_FILE_SIZE_DEFAULT,
)
from sdk_ext.debugger.utils import ErrorMessages, PythonProfiler, cProfileTimer

ALL_METRIC_CONFIGS: list[Callable[..., MetricsConfigBase]] = [
    DetailedProfilingConfig, DataloaderProfilingConfig, PythonProfilingConfig, HorovodProfilingConfig,
    SMDataParallelProfilingConfig,
]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class FrameworkProfile:
    """Framework-metrics profiling (deprecated by SageMaker for TF >= 2.12 and PyTorch >= 2.0).

    With metrics configs given, exactly those are sent; else with a step or time range, all five
    configs use it; else all five use their default steps.

    Raises:
        DebuggerConfigError: listing every invalid argument.
    """

    def __init__(self, local_path: str = BASE_FOLDER_DEFAULT, file_max_size: int = MAX_FILE_SIZE_DEFAULT,
                 file_close_interval: float = CLOSE_FILE_INTERVAL_DEFAULT,
                 file_open_fail_threshold: int = FILE_OPEN_FAIL_THRESHOLD_DEFAULT,
                 detailed_profiling_config: DetailedProfilingConfig | None = None,
                 dataloader_profiling_config: DataloaderProfilingConfig | None = None,
                 python_profiling_config: PythonProfilingConfig | None = None,
                 horovod_profiling_config: HorovodProfilingConfig | None = None,
                 smdataparallel_profiling_config: SMDataParallelProfilingConfig | None = None,
                 start_step: int | None = None, num_steps: int | None = None,
                 start_unix_time: int | None = None, duration: float | None = None) -> None:
        problems = Problems("FrameworkProfile")
        if not isinstance(local_path, str):
            problems.add(f"{ErrorMessages.INVALID_LOCAL_PATH.value} Got {local_path!r}: give the directory in the "
                         f"training container, e.g. {BASE_FOLDER_DEFAULT!r}")
        if not (_is_int(file_max_size) and file_max_size > 0):
            problems.add(f"{ErrorMessages.INVALID_FILE_MAX_SIZE.value} Got {file_max_size!r}: give the bytes a "
                         f"trace file may reach before it is rotated, e.g. {MAX_FILE_SIZE_DEFAULT}")
        if not (_is_number(file_close_interval) and file_close_interval > 0):
            problems.add(f"{ErrorMessages.INVALID_FILE_CLOSE_INTERVAL.value} Got {file_close_interval!r}: give the "
                         f"seconds before a trace file is rotated, e.g. {CLOSE_FILE_INTERVAL_DEFAULT}")
        if not (_is_int(file_open_fail_threshold) and file_open_fail_threshold > 0):
            problems.add(f"{ErrorMessages.INVALID_FILE_OPEN_FAIL_THRESHOLD.value} Got {file_open_fail_threshold!r}: "
                         f"give a whole number of attempts, e.g. {FILE_OPEN_FAIL_THRESHOLD_DEFAULT}")
        given: list[MetricsConfigBase] = [c for c in (detailed_profiling_config, dataloader_profiling_config,
                                                      python_profiling_config, horovod_profiling_config,
                                                      smdataparallel_profiling_config) if c is not None]
        for config in given:
            if not isinstance(config, MetricsConfigBase):
                problems.add(f"{config!r} is not a metrics config such as DetailedProfilingConfig(...)")
        configs: list[MetricsConfigBase] = []
        ranged = any(v is not None for v in (start_step, num_steps, start_unix_time, duration))
        for cls in () if given else ALL_METRIC_CONFIGS:
            try:
                configs.append(cls(start_step, num_steps, start_unix_time, duration) if ranged
                               else cls(profile_default_steps=True))
            except DebuggerConfigError as err:
                problems.add_all(err.problems)
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


__all__ = [
    "ALL_METRIC_CONFIGS",
    "BASE_FOLDER_DEFAULT",
    "CLOSE_FILE_INTERVAL_DEFAULT",
    "FILE_OPEN_FAIL_THRESHOLD_DEFAULT",
    "MAX_FILE_SIZE_DEFAULT",
    "DataloaderProfilingConfig",
    "DetailedProfilingConfig",
    "ErrorMessages",
    "FrameworkProfile",
    "HorovodProfilingConfig",
    "PythonProfiler",
    "PythonProfilingConfig",
    "SMDataParallelProfilingConfig",
    "cProfileTimer",
]
