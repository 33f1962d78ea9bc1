"""UpdateTrainingJob requests that change profiling on a running job (the v2 Estimator's
``enable_default_profiling``, ``disable_profiling`` and ``update_profiler``).

Each function takes the job's DescribeTrainingJob response and returns the request to send with
``client.update_training_job(**request)``; nothing is sent here. The region defaults to the one in
the response's ``TrainingJobArn``.

Request form::

    {"TrainingJobName": "job", "ProfilerConfig": {"DisableProfiler": false, ...},
     "ProfilerRuleConfigurations": [...]}      # the rule list only when not empty
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sdk_ext.debugger.apply import JobPlan
from sdk_ext.debugger.errors import Problems
from sdk_ext.debugger.framework_profile import FrameworkProfile
from sdk_ext.debugger.images import region_supports_debugger
from sdk_ext.debugger.profiler import ProfilerConfig
from sdk_ext.debugger.rules import ProfilerRule, RuleBase
from sdk_ext.debugger.sources import RuleSourceUploader, S3RuleSourceUploader


def _start(job: Mapping[str, Any], region: str | None, where: str) -> tuple[Problems, str, str]:
    problems = Problems(where)
    name = job.get("TrainingJobName")
    if not name:
        problems.add("the DescribeTrainingJob response has no TrainingJobName")
    if region is None:
        arn = str(job.get("TrainingJobArn") or "")
        region = arn.split(":")[3] if arn.count(":") >= 5 else None
    if not region:
        problems.add("no region: pass region=, or a response with its TrainingJobArn")
    elif not region_supports_debugger(region):
        problems.add(f"Current region does not support profiler / debugger! Region {region!r} does not support "
                     "SageMaker Debugger profiling; it can only be changed for jobs in a supported region")
    problems.raise_if_any()
    return problems, str(name), str(region)


def enable_default_profiling_request(job: Mapping[str, Any], *, region: str | None = None) -> dict[str, Any]:
    """Turn system monitoring on for a job running with the profiler off.

    Profiling data goes to the job's profiler S3 path if it has one, else its output path.

    Raises:
        DebuggerConfigError: monitoring is already on, or the region does not support it.
    """
    problems, name, _ = _start(job, region, "enable_default_profiling")
    if job.get("ProfilingStatus") == "Enabled":
        problems.add("Debugger monitoring is already enabled. To update the profiler_config parameter and the "
                     "Debugger profiling rules, please use the update_profiler function. (Here: "
                     "update_profiler_request; this job's ProfilingStatus is 'Enabled'.)")
    problems.raise_if_any()
    path = (job.get("ProfilerConfig") or {}).get("S3OutputPath") or (job.get("OutputDataConfig") or {}).get(
        "S3OutputPath")
    return {"TrainingJobName": name, "ProfilerConfig": ProfilerConfig(s3_output_path=path)._to_request_dict()}


def disable_profiling_request(job: Mapping[str, Any], *, region: str | None = None) -> dict[str, Any]:
    """Turn monitoring, profiling and the profiler rules off.

    Raises:
        DebuggerConfigError: the profiler is already off, or the region does not support it.
    """
    problems, name, _ = _start(job, region, "disable_profiling")
    if job.get("ProfilingStatus") == "Disabled":
        problems.add("Profiler is already disabled. This job's ProfilingStatus is 'Disabled': there is "
                     "nothing to turn off")
    problems.raise_if_any()
    return {"TrainingJobName": name, "ProfilerConfig": ProfilerConfig._to_profiler_disabled_request_dict()}


def update_profiler_request(job: Mapping[str, Any], *, rules: Sequence[RuleBase] | None = None,
                            system_monitor_interval_millis: int | None = None, s3_output_path: str | None = None,
                            framework_profile_params: FrameworkProfile | None = None,
                            disable_framework_metrics: bool = False, region: str | None = None,
                            uploader: RuleSourceUploader | None = None) -> dict[str, Any]:
    """Add profiler rules and/or change profiling settings of a running job.

    Raises:
        DebuggerConfigError: nothing to update, a rule that is not a ProfilerRule, framework
            metrics both set and disabled, or an unsupported region.
    """
    problems, name, resolved_region = _start(job, region, "update_profiler")
    if not (rules or system_monitor_interval_millis or s3_output_path or framework_profile_params
            or disable_framework_metrics):
        problems.add("Please provide profiler config or profiler rule to be updated. Nothing to update: give "
                     "rules, system_monitor_interval_millis, s3_output_path, framework_profile_params or "
                     "disable_framework_metrics=True")
    if disable_framework_metrics and framework_profile_params:
        problems.add("framework_profile_params cannot be set when disable_framework_metrics is True: pass "
                     "one of the two")
    for i, rule in enumerate(rules or []):
        if not isinstance(rule, ProfilerRule):
            problems.add(f"Please provide ProfilerRule to be updated. rules[{i}] is a {type(rule).__name__}; only "
                         "ProfilerRule objects can be added to a running job")
    problems.raise_if_any()

    plan = JobPlan(job, resolved_region, problems, None)
    prepared = [plan.prepare_rule(rule) for rule in rules or [] if isinstance(rule, ProfilerRule)]  # all are, checked above
    problems.raise_if_any()
    sender = uploader or S3RuleSourceUploader(region=resolved_region)
    for rule, path in plan.uploads:
        rule.rule_parameters["source_s3_uri"] = sender.upload(path, rule_name=rule.name,
                                                             default_prefix=plan.job.output_path)
    config = ProfilerConfig(s3_output_path=s3_output_path, system_monitor_interval_millis=system_monitor_interval_millis,
                            framework_profile_params=framework_profile_params)
    request: dict[str, Any] = {"TrainingJobName": name}
    rule_dicts = [r.to_profiler_rule_config_dict() for r in prepared]
    if rule_dicts:
        request["ProfilerRuleConfigurations"] = rule_dicts
    request["ProfilerConfig"] = config._to_request_dict()
    if disable_framework_metrics:
        request["ProfilerConfig"]["ProfilingParameters"] = {}
    return request
