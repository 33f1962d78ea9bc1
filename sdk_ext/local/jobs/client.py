"""A SageMaker client for local jobs: CreateTrainingJob, DescribeTrainingJob, StopTrainingJob, UpdateTrainingJob.

Drop-in for the calls Debugger code makes on ``boto3.client("sagemaker")``: keyword arguments as in
boto3, responses shaped like SageMaker's, errors raised as botocore ``ClientError`` with SageMaker's
codes and messages (``ValidationException`` "Requested resource not found." for an unknown job,
"The request was rejected because the training job is in status Stopped." for stopping a job that
is not running). So ``sdk_ext.debugger.rule_statuses``/``wait_for_rules`` and lambda/auto_stop.py
work unchanged against it::

    client = LocalSageMakerClient(LocalSettings(jobs_root=Path("jobs")))
    client.create_training_job(**apply_debugger(request, rules=[...], region="us-east-1"))
    wait_for_rules(request["TrainingJobName"], client, poll=1)

``create_training_job`` starts the job on a background thread; :meth:`run_training_job` runs it on
the calling thread and returns the final DescribeTrainingJob response (what ``sdk-ext run`` does).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from sdk_ext.exceptions import ConfigError
from sdk_ext.local.jobs.claim import JobExistsError
from sdk_ext.local.jobs.runner import JobRunner, LocalSettings
from sdk_ext.local.jobs.state import TERMINAL_JOB_STATUSES, JobStateError
from sdk_ext.local.request.check import profiler_config_problems

logger = logging.getLogger(__name__)


def _error(operation: str, message: str, code: str = "ValidationException") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message},
                        "ResponseMetadata": {"HTTPStatusCode": 400}}, operation)


class LocalSageMakerClient:
    """SageMaker's training-job calls, served by local jobs (thread-safe)."""

    def __init__(self, settings: LocalSettings | None = None) -> None:
        self.settings = settings or LocalSettings()
        self._lock = threading.Lock()  # guards _jobs and _threads
        self._jobs: dict[str, JobRunner] = {}
        self._threads: dict[str, threading.Thread] = {}

    # --- creating and running -------------------------------------------------------------------------

    def prepare_job(self, request: dict[str, Any], *, job_dir: str | os.PathLike[str] | None = None,
                    entry_point: str | os.PathLike[str] | None = None, script_args: Sequence[str] = (),
                    zero_change: bool | None = None) -> JobRunner:
        """Register a job and prepare its directory, without starting it.

        Raises:
            ConfigError: the request cannot run locally (the message says why and how to fix it); JobExistsError
                when its job directory is another run's (in this process or another).
            ClientError: ResourceInUse, a job of that name exists already in this client.
        """
        runner = JobRunner(request, settings=self.settings, client=self, job_dir=job_dir,
                           entry_point=entry_point, script_args=script_args, zero_change=zero_change)
        with self._lock:
            if runner.name in self._jobs:
                raise _error("CreateTrainingJob", f"Training job {runner.name} already exists", "ResourceInUse")
            self._jobs[runner.name] = runner
        try:
            runner.prepare()
        except BaseException:
            with self._lock:
                del self._jobs[runner.name]
            raise
        return runner

    def run_training_job(self, request: dict[str, Any], **options: Any) -> dict[str, Any]:
        """Run a job to its end on this thread; returns its final DescribeTrainingJob response.

        ``options`` are :meth:`prepare_job`'s (job_dir, entry_point, script_args, zero_change).
        """
        return self.prepare_job(request, **options).run()

    def create_training_job(self, **request: Any) -> dict[str, str]:
        """CreateTrainingJob: prepare the job and start it on a background thread.

        Raises:
            ClientError: ValidationException for a request the local runner cannot run (with the reason),
                ResourceInUse for a job name already used.
        """
        try:
            runner = self.prepare_job(request)
        except JobExistsError as err:  # another run (maybe another process) holds the name
            raise _error("CreateTrainingJob", str(err), "ResourceInUse") from err
        except ConfigError as err:
            raise _error("CreateTrainingJob", str(err)) from err
        thread = threading.Thread(target=self._run_quietly, args=(runner,), name=f"local job {runner.name}",
                                  daemon=True)
        with self._lock:
            self._threads[runner.name] = thread
        thread.start()
        return {"TrainingJobArn": runner.arn}

    @staticmethod
    def _run_quietly(runner: JobRunner) -> None:
        try:
            runner.run()
        except Exception:  # the runner logged it and put it in the job's FailureReason
            logger.debug("local job %s ended with an error in the runner", runner.name, exc_info=True)

    # --- reading and stopping -------------------------------------------------------------------------

    def _runner(self, name: str, operation: str) -> JobRunner:
        with self._lock:
            runner = self._jobs.get(name)
        if runner is None:
            raise _error(operation, "Requested resource not found.")
        return runner

    def describe_training_job(self, *, TrainingJobName: str) -> dict[str, Any]:
        """DescribeTrainingJob."""
        return self._runner(TrainingJobName, "DescribeTrainingJob").job.describe()

    def stop_training_job(self, *, TrainingJobName: str) -> dict[str, Any]:
        """StopTrainingJob: the job becomes Stopping, its entry point gets SIGTERM (SIGKILL after the grace).

        Raises:
            ClientError: ValidationException if the job is unknown or not InProgress.
        """
        runner = self._runner(TrainingJobName, "StopTrainingJob")
        try:
            runner.stop()
        except JobStateError as err:
            raise _error("StopTrainingJob", str(err)) from err
        return {"ResponseMetadata": {"HTTPStatusCode": 200}}

    def update_training_job(self, *, TrainingJobName: str, ProfilerConfig: dict[str, Any] | None = None,
                            ProfilerRuleConfigurations: list[dict[str, Any]] | None = None,
                            **others: Any) -> dict[str, Any]:
        """UpdateTrainingJob: change profiling of a running job (what sdk_ext.debugger's
        ``update_profiler_request`` / ``disable_profiling_request`` / ``enable_default_profiling_request`` build).

        The new interval applies from the monitor's next sample (it looks at the job's profilerconfig.json
        every second); ``DisableProfiler: true`` pauses the monitor and the hooks' step timeline.

        Raises:
            ClientError: ValidationException for an unknown job, a job not InProgress, an invalid
                ProfilerConfig, or an update this client does not apply (ResourceConfig, RemoteDebugConfig).
        """
        runner = self._runner(TrainingJobName, "UpdateTrainingJob")
        if others:
            raise _error("UpdateTrainingJob", f"{', '.join(sorted(others))}: not applied to a local job; this "
                         "client updates ProfilerConfig and ProfilerRuleConfigurations")
        if ProfilerConfig is None and not ProfilerRuleConfigurations:
            raise _error("UpdateTrainingJob", "Nothing to update: give ProfilerConfig and/or "
                         "ProfilerRuleConfigurations")
        problems = profiler_config_problems(ProfilerConfig or {}, "ProfilerConfig", update=True)
        if problems:
            raise _error("UpdateTrainingJob", "; ".join(problems))
        try:
            runner.update_profiler(ProfilerConfig, ProfilerRuleConfigurations)
        except JobStateError as err:
            raise _error("UpdateTrainingJob", str(err)) from err
        return {"TrainingJobArn": runner.arn, "ResponseMetadata": {"HTTPStatusCode": 200}}

    def list_training_jobs(self, **_: Any) -> dict[str, Any]:
        """ListTrainingJobs (no filters): every job this client knows."""
        with self._lock:
            runners = list(self._jobs.values())
        summaries = []
        for r in runners:
            d = r.job.describe()
            summaries.append({k: d[k] for k in ("TrainingJobName", "TrainingJobArn", "CreationTime",
                                                 "LastModifiedTime", "TrainingJobStatus") if k in d})
        return {"TrainingJobSummaries": summaries}

    def job_dir(self, name: str) -> Path:
        """The directory of a job (its trial is ``output/tensors`` unless the hook config says otherwise)."""
        return self._runner(name, "DescribeTrainingJob").dir.root

    def wait(self, name: str, *, timeout: float | None = None) -> dict[str, Any]:
        """Wait until the job and all its rule evaluations have ended; returns DescribeTrainingJob.

        Raises:
            TimeoutError: still running after ``timeout`` seconds.
        """
        runner = self._runner(name, "DescribeTrainingJob")
        if not runner.job.done.wait(timeout):
            raise TimeoutError(f"local job {name} still {runner.job.status} after {timeout} s")
        return runner.job.describe()

    def wait_for_status(self, name: str, statuses: set[str] | frozenset[str] = TERMINAL_JOB_STATUSES, *,
                        timeout: float = 60.0, poll: float = 0.02) -> dict[str, Any]:
        """Poll DescribeTrainingJob until TrainingJobStatus is one of ``statuses``.

        Raises:
            TimeoutError: not reached within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            d = self.describe_training_job(TrainingJobName=name)
            if d["TrainingJobStatus"] in statuses:
                return d
            if time.monotonic() >= deadline:
                raise TimeoutError(f"local job {name} is {d['TrainingJobStatus']}, not {sorted(statuses)}, "
                                   f"after {timeout} s")
            time.sleep(poll)
