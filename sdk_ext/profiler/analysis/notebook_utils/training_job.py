"""A training job's profiler readers (smdebug's
``smdebug.profiler.analysis.notebook_utils.training_job.TrainingJob``).

``TrainingJob(target)`` finds the job's ``profiler-output`` and makes its readers:

- a local directory: an sdk_ext job directory (``sdk-ext-jobs/<job>``: its ``profiler-output/``) or a
  profiler-output directory itself;
- ``s3://...``: a profiler-output prefix;
- a job name: ``<jobs_root>/<name>`` if that local job exists (``./sdk-ext-jobs`` by default), else the
  SageMaker job of that name (``DescribeTrainingJob``: ``<ProfilerConfig.S3OutputPath>/<name>/profiler-output``).

Waiting for data is bounded (``timeout``), unlike smdebug's, which polled forever.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sdk_ext.format.profiler_paths import PROFILER_OUTPUT_DIR
from sdk_ext.profiler.algorithm_metrics_reader import (
    AlgorithmMetricsReader,
    LocalAlgorithmMetricsReader,
    S3AlgorithmMetricsReader,
)
from sdk_ext.profiler.system_metrics_reader import (
    LocalSystemMetricsReader,
    S3SystemMetricsReader,
    SystemMetricsReader,
)
from sdk_ext.profiler.utils import us_since_epoch_to_human_readable_time

log = logging.getLogger(__name__)
JOBS_ROOT_DEFAULT = Path("sdk-ext-jobs")


def local_profiler_output(path: str | os.PathLike[str]) -> Path | None:
    """The profiler-output directory of a local job directory or of a profiler-output directory, or None."""
    root = Path(path)
    if (root / PROFILER_OUTPUT_DIR).is_dir():
        return root / PROFILER_OUTPUT_DIR
    if root.is_dir() and (
        (root / "system").is_dir() or (root / "framework").is_dir() or root.name == PROFILER_OUTPUT_DIR
    ):
        return root
    return None


class TrainingJob:
    """The profiler data of one job (see the module doc).

    Args:
        training_job_name: a job name, a local job or profiler-output directory, or an ``s3://`` prefix.
        region: the SageMaker client's region (a SageMaker job only).
        sm_client: a SageMaker client to use instead of a new boto3 one.
        jobs_root: where local jobs live.
        sleep: the pause between polls (tests pass a fake).
    """

    def __init__(
        self,
        training_job_name: str | os.PathLike[str],
        region: str | None = None,
        *,
        sm_client: Any = None,
        jobs_root: str | os.PathLike[str] = JOBS_ROOT_DEFAULT,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        target = os.fspath(training_job_name)
        self._sleep = sleep
        self._region = region
        self.sm_client = sm_client
        self.profiler_config: dict[str, Any] | None = None
        self.profiler_s3_output_path: str | None = None
        self.local_job_dir: Path | None = None
        self.system_metrics_reader: SystemMetricsReader | None = None
        self.framework_metrics_reader: AlgorithmMetricsReader | None = None
        local = None if target.startswith("s3://") else local_profiler_output(target)
        if local is None and not target.startswith("s3://") and os.sep not in target:
            named = Path(jobs_root) / target
            local = local_profiler_output(named) if named.is_dir() else None
        if target.startswith("s3://"):
            self.name = target.rstrip("/").rsplit("/", 1)[-1]
            self.profiler_output_path = target
        elif local is not None:
            self.local_job_dir = local.parent if local.name == PROFILER_OUTPUT_DIR else None
            self.name = (self.local_job_dir or local).name
            self.profiler_output_path = str(local)
        elif os.sep in target or Path(target).exists():
            raise FileNotFoundError(
                f"{target!r} holds no profiler output: give a job directory with profiler-output/, a "
                "profiler-output directory (system/, framework/), an s3:// prefix or a SageMaker job name"
            )
        else:
            self.name = target
            self.profiler_config, self.profiler_s3_output_path = self.get_config_and_profiler_s3_output_path()
            assert self.profiler_s3_output_path is not None
            self.profiler_output_path = self.profiler_s3_output_path

    @property
    def is_local(self) -> bool:
        return not self.profiler_output_path.startswith("s3://")

    # --- SageMaker ---------------------------------------------------------------------------------

    def get_sm_client(self) -> Any:
        if self.sm_client is None:
            import boto3

            self.sm_client = boto3.client("sagemaker", region_name=self._region)
        return self.sm_client

    def describe_training_job(self) -> dict[str, Any]:
        """DescribeTrainingJob: SageMaker's answer, or a local job's ``job.json``."""
        if self.local_job_dir is not None:
            job_json = self.local_job_dir / "job.json"
            return dict(json.loads(job_json.read_text())) if job_json.exists() else {}
        if (
            self.profiler_output_path.startswith("s3://")
            and self.profiler_config is None
            and self.sm_client is None
        ):
            return {}
        return dict(self.get_sm_client().describe_training_job(TrainingJobName=self.name))

    def get_config_and_profiler_s3_output_path(self) -> tuple[dict[str, Any] | None, str | None]:
        """The job's ProfilerConfig and ``<S3OutputPath>/<job>/profiler-output``.

        Raises:
            ValueError: the job has no ProfilerConfig with an S3OutputPath (profiling was off).
        """
        if self.profiler_config is not None:
            return self.profiler_config, self.profiler_s3_output_path
        description = self.get_sm_client().describe_training_job(TrainingJobName=self.name)
        config = description.get("ProfilerConfig") or {}
        if "S3OutputPath" not in config:
            raise ValueError(
                f"training job {self.name!r} has no ProfilerConfig.S3OutputPath: it ran with profiling off"
            )
        path = f"{config['S3OutputPath'].rstrip('/')}/{self.name}/{PROFILER_OUTPUT_DIR}"
        return dict(config), path

    # --- readers -----------------------------------------------------------------------------------

    def get_systems_metrics_reader(self) -> SystemMetricsReader:
        if self.system_metrics_reader is None:
            if self.is_local:
                self.system_metrics_reader = LocalSystemMetricsReader(self.profiler_output_path)
            else:
                self.system_metrics_reader = S3SystemMetricsReader(self.profiler_output_path)
        return self.system_metrics_reader

    def get_framework_metrics_reader(self) -> AlgorithmMetricsReader:
        if self.framework_metrics_reader is None:
            if self.is_local:
                self.framework_metrics_reader = LocalAlgorithmMetricsReader(self.profiler_output_path)
            else:
                self.framework_metrics_reader = S3AlgorithmMetricsReader(self.profiler_output_path)
        return self.framework_metrics_reader

    def _wait(
        self, reader: SystemMetricsReader | AlgorithmMetricsReader, what: str, timeout: float, poll: float
    ) -> None:
        deadline = time.monotonic() + timeout
        last_status = None
        while reader.get_timestamp_of_latest_available_file() == 0:
            status = self.describe_training_job().get("TrainingJobStatus")
            if status != last_status:
                log.info("no %s profiling data yet; job %s is %s", what, self.name, status)
                last_status = status
            if status in ("Completed", "Failed", "Stopped"):
                raise TimeoutError(f"job {self.name!r} ended ({status}) without {what} profiling data")
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"no {what} profiling data under {self.profiler_output_path} after {timeout:g} s"
                )
            self._sleep(poll)
            reader.refresh_event_file_list()

    def wait_for_sys_profiling_data_to_be_available(
        self, timeout: float = 600.0, poll_interval: float = 10.0
    ) -> None:
        """Return once system metrics exist.

        Raises:
            TimeoutError: none after ``timeout`` seconds, or the job ended without any.
        """
        self._wait(self.get_systems_metrics_reader(), "system", timeout, poll_interval)

    def wait_for_framework_profiling_data_to_be_available(
        self, timeout: float = 600.0, poll_interval: float = 10.0
    ) -> None:
        """Return once framework events exist (see :meth:`wait_for_sys_profiling_data_to_be_available`)."""
        reader = self.get_framework_metrics_reader()
        self._wait(reader, "framework", timeout, poll_interval)
        last = reader.get_timestamp_of_latest_available_file()
        log.info("framework events up to %s (%s UTC)", last, us_since_epoch_to_human_readable_time(last))


__all__ = ["JOBS_ROOT_DEFAULT", "TrainingJob", "local_profiler_output"]
