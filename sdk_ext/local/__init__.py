"""The embedded default: a CreateTrainingJob request run as a local job, the whole Debugger loop on one machine.

    from sdk_ext.debugger import Rule, apply_debugger, rule_configs
    from sdk_ext.local import LocalSettings, run_training_job

    request = apply_debugger({"TrainingJobName": "mnist-1", "HyperParameters": {"sagemaker_program": "train.py",
                              "sagemaker_submit_directory": "file:///path/to/code"}, ...},
                             rules=[Rule.sagemaker(rule_configs.exploding_tensor())], region="us-east-1")
    final = run_training_job(request, settings=LocalSettings(jobs_root=Path("jobs")))
    final["TrainingJobStatus"], final["DebugRuleEvaluationStatuses"]

A job directory shaped like /opt/ml (layout.py), the entry point as a subprocess with SageMaker's
environment, one ``rules/evaluate.py`` subprocess per DebugRuleConfiguration reading the tensors
live, DescribeTrainingJob-shaped state (job.py), and "SageMaker Training Job State Change" events
delivered to lambda/auto_stop.py's handler with a client (client.py) whose StopTrainingJob stops
the local job. Nothing of AWS is needed. See runner.py for what a local request runs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from sdk_ext.local.jobs.client import LocalSageMakerClient
from sdk_ext.local.jobs.events import AutoStopTarget, EventDispatcher, state_change_event
from sdk_ext.local.jobs.layout import JobDir
from sdk_ext.local.jobs.runner import JobRunner, LocalSettings
from sdk_ext.local.jobs.state import TERMINAL_JOB_STATUSES, TERMINAL_RULE_STATUSES, LocalJob, RuleState


def run_training_job(request: dict[str, Any], *, settings: LocalSettings | None = None,
                     job_dir: str | os.PathLike[str] | None = None, entry_point: str | os.PathLike[str] | None = None,
                     script_args: Sequence[str] = (), zero_change: bool | None = None) -> dict[str, Any]:
    """Run a CreateTrainingJob request locally to its end; returns the final DescribeTrainingJob response."""
    client = LocalSageMakerClient(settings)
    return client.run_training_job(request, job_dir=job_dir, entry_point=entry_point, script_args=script_args,
                                   zero_change=zero_change)


__all__ = [
    "TERMINAL_JOB_STATUSES",
    "TERMINAL_RULE_STATUSES",
    "AutoStopTarget",
    "EventDispatcher",
    "JobDir",
    "JobRunner",
    "LocalJob",
    "LocalSageMakerClient",
    "LocalSettings",
    "RuleState",
    "run_training_job",
    "state_change_event",
]
