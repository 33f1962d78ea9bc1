"""ProfilerConfig and Profiler: system monitoring and profiling of a training job.

Request form::

    "ProfilerConfig": {"S3OutputPath": "s3://b/prof", "DisableProfiler": false,
                       "ProfilingIntervalInMilliseconds": 500,
                       "ProfilingParameters": {"CPUProfilingDuration": "3600", "SMPFileRotationSecs": "600"}}

``S3OutputPath`` is sent only while the profiler is enabled; ``DisableProfiler`` always.
``ProfilingParameters`` come from ``profile_params`` (a Profiler) or ``framework_profile_params``
(a deprecated FrameworkProfile); the two cannot be combined.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

from sdk_ext.debugger.errors import Problems, check_s3_uri
from sdk_ext.debugger.framework_profile import FrameworkProfile
from sdk_ext.debugger.profiler_constants import (
    CPU_PROFILING_DURATION,
    DETAIL_PROF_PROCESSING_DEFAULT_INSTANCE_TYPE,
    DETAIL_PROF_PROCESSING_DEFAULT_VOLUME_SIZE,
    FILE_ROTATION_INTERVAL_DEFAULT,
)

logger = logging.getLogger(__name__)

FRAMEWORK_PROFILE_DEPRECATION = (
    "Framework profiling will be deprecated from tensorflow 2.12 and pytorch 2.0: with those versions "
    "FrameworkProfile collects no framework metrics. Use ProfilerConfig(profile_params=Profiler()) "
    "(SageMaker Profiler) instead, or drop framework_profile_params to keep system monitoring only"
)


class Profiler:
    """Detailed (SageMaker Profiler) profiling, post-processed by a dedicated processing job.

    Args:
        cpu_profiling_duration: Seconds of CPU profiling.
        file_rotation_interval: Seconds between trace file rotations.
    """

    def __init__(self, cpu_profiling_duration: str | int = str(CPU_PROFILING_DURATION),
                 file_rotation_interval: str | int = str(FILE_ROTATION_INTERVAL_DEFAULT)) -> None:
        self.profiling_parameters: dict[str, str] = {
            "CPUProfilingDuration": str(cpu_profiling_duration),
            "SMPFileRotationSecs": str(file_rotation_interval),
        }
        # The processing job that turns the traces into a report runs on this instance.
        self.instanceType = DETAIL_PROF_PROCESSING_DEFAULT_INSTANCE_TYPE
        self.volumeSizeInGB = DETAIL_PROF_PROCESSING_DEFAULT_VOLUME_SIZE


class ProfilerConfig:
    """How SageMaker monitors and profiles the training job.

    Args:
        s3_output_path: Where profiling data goes; apply_debugger uses the job's
            ``OutputDataConfig.S3OutputPath`` when unset.
        system_monitor_interval_millis: Interval of system metrics (100, 200, 500, 1000, 5000, 60000).
        framework_profile_params: A deprecated FrameworkProfile.
        profile_params: A Profiler, for detailed profiling.
        disable_profiler: Turn monitoring and profiling off.

    Raises:
        DebuggerConfigError: listing every invalid argument.
    """

    def __init__(self, s3_output_path: str | None = None, system_monitor_interval_millis: int | None = None,
                 framework_profile_params: FrameworkProfile | None = None, profile_params: Profiler | None = None,
                 disable_profiler: bool = False) -> None:
        problems = Problems("ProfilerConfig")
        check_s3_uri(problems, "s3_output_path", s3_output_path)
        interval = system_monitor_interval_millis
        if interval is not None and (isinstance(interval, bool) or not isinstance(interval, int) or interval <= 0):
            problems.add(f"system_monitor_interval_millis must be a positive integer, got {interval!r}")
        if framework_profile_params is not None and not isinstance(framework_profile_params, FrameworkProfile):
            problems.add("framework_profile_params must be of type FrameworkProfile if specified. Got "
                         f"{type(framework_profile_params).__name__} {framework_profile_params!r}: pass "
                         "FrameworkProfile(...) from sdk_ext.debugger, or leave it out")
        if profile_params is not None and not isinstance(profile_params, Profiler):
            problems.add(f"profile_params must be of type Profiler if specified. Got {type(profile_params).__name__} "
                         f"{profile_params!r}: pass Profiler(...) from sdk_ext.debugger, or leave it out")
        if profile_params is not None and framework_profile_params is not None:
            problems.add("Profiler will not work when Framework Profiler is ON: profile_params (Profiler) and "
                         "framework_profile_params (FrameworkProfile) are both set; keep one (FrameworkProfile "
                         "is deprecated, so Profiler)")
        if not isinstance(disable_profiler, bool):
            problems.add(f"disable_profiler must be True or False, got {disable_profiler!r}")
        problems.raise_if_any()
        if framework_profile_params is not None:
            warnings.warn(FRAMEWORK_PROFILE_DEPRECATION, DeprecationWarning, stacklevel=2)
        self.s3_output_path = s3_output_path
        self.system_monitor_interval_millis = system_monitor_interval_millis
        self.framework_profile_params = framework_profile_params
        self.profile_params = profile_params
        self.disable_profiler = disable_profiler

    def _to_request_dict(self) -> dict[str, Any]:
        request: dict[str, Any] = {}
        if self.s3_output_path is not None and self.disable_profiler is False:
            request["S3OutputPath"] = self.s3_output_path
        request["DisableProfiler"] = self.disable_profiler
        if self.system_monitor_interval_millis is not None:
            request["ProfilingIntervalInMilliseconds"] = self.system_monitor_interval_millis
        if self.framework_profile_params is not None:
            request["ProfilingParameters"] = dict(self.framework_profile_params.profiling_parameters)
        if self.profile_params is not None:
            request["ProfilingParameters"] = dict(self.profile_params.profiling_parameters)
        return request

    @classmethod
    def _to_profiler_disabled_request_dict(cls) -> dict[str, Any]:
        return {"DisableProfiler": True}

    def __repr__(self) -> str:
        return (f"ProfilerConfig(s3_output_path={self.s3_output_path!r}, "
                f"system_monitor_interval_millis={self.system_monitor_interval_millis!r}, "
                f"framework_profile_params={self.framework_profile_params!r}, "
                f"profile_params={self.profile_params!r}, disable_profiler={self.disable_profiler!r})")


__all__ = [
    "CPU_PROFILING_DURATION",
    "DETAIL_PROF_PROCESSING_DEFAULT_INSTANCE_TYPE",
    "DETAIL_PROF_PROCESSING_DEFAULT_VOLUME_SIZE",
    "FILE_ROTATION_INTERVAL_DEFAULT",
    "FRAMEWORK_PROFILE_DEPRECATION",
    "Profiler",
    "ProfilerConfig",
]
