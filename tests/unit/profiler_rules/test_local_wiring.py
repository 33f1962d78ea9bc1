"""How local jobs and the CLI take profiler rules: the request sdk-ext builds, which rules run, which may stop."""

from __future__ import annotations

import smdebug_rulesconfig as rc
from auto_stop_policy import TrainingJobChange, decide

from sdk_ext.local.jobs import deployment, rule_jobs
from sdk_ext.local.request.from_options import build_request


def test_a_profiler_rule_on_the_command_line_becomes_a_profiler_rule_configuration_and_turns_profiling_on():
    request = build_request(script=None, base={"TrainingJobName": "j"}, job_name=None,
                            rules=["step_outlier", "ExplodingTensor"], rule_params=["StepOutlier:n_outliers=5"])
    (profiler,) = request["ProfilerRuleConfigurations"]
    assert profiler["RuleConfigurationName"] == "StepOutlier"
    assert profiler["RuleParameters"] == {"stddev": "3", "mode": "None", "n_outliers": "5",
                                          "scan_interval_us": "60000000", "rule_to_invoke": "StepOutlier"}
    assert request["ProfilerConfig"]["DisableProfiler"] is False
    assert [r["RuleConfigurationName"] for r in request["DebugRuleConfigurations"]] == ["ExplodingTensor"]


def test_tensor_rules_alone_leave_profiling_off():
    request = build_request(script=None, base={"TrainingJobName": "j"}, job_name=None, rules=["ExplodingTensor"])
    assert request["ProfilerConfig"] == {"DisableProfiler": True} and "ProfilerRuleConfigurations" not in request


def _rule(name: str, **params: str) -> dict:
    return {"RuleConfigurationName": name, "RuleParameters": {"rule_to_invoke": name, **params}}


def test_detailed_profiler_processing_is_not_evaluated_locally():
    assert rule_jobs.not_evaluated_locally(_rule("DetailedProfilerProcessing")) is not None
    assert rule_jobs.not_evaluated_locally(_rule("LowGPUUtilization")) is None


def _event(statuses: list[dict], debug: list[dict] = ()) -> dict:
    return {"source": "aws.sagemaker", "detail-type": "SageMaker Training Job State Change",
            "detail": {"TrainingJobName": "job-1", "TrainingJobStatus": "InProgress",
                       "ProfilerRuleEvaluationStatuses": statuses, "DebugRuleEvaluationStatuses": list(debug)}}


def _issues(name: str) -> dict:
    return {"RuleConfigurationName": name, "RuleEvaluationStatus": "IssuesFound"}


def test_only_profiler_rules_that_ask_for_stop_training_may_stop_a_local_job():
    module = deployment.load_auto_stop()
    actions = rc.ActionList(rc.StopTraining())
    actions.update_training_job_prefix_if_not_specified("job-1")
    request = {"DebugRuleConfigurations": [_rule("ExplodingTensor")],
               "ProfilerRuleConfigurations": [_rule("StepOutlier", action_json=actions.serialize()),
                                              _rule("LowGPUUtilization")]}
    assert rule_jobs.asks_to_stop(request["ProfilerRuleConfigurations"][0])
    config = rule_jobs.auto_stop_config(module, request)
    assert decide(TrainingJobChange.from_event(_event([_issues("StepOutlier")])), config).stop
    assert not decide(TrainingJobChange.from_event(_event([_issues("LowGPUUtilization")])), config).stop
    assert decide(TrainingJobChange.from_event(_event([], [_issues("ExplodingTensor")])), config).stop
    # no profiler rule asks: the function's default (Debugger rules only)
    assert rule_jobs.auto_stop_config(module, {"ProfilerRuleConfigurations": [_rule("LowGPUUtilization")]}) is None
    every = rule_jobs.auto_stop_config(module, request, profiler_rules_stop=True)
    assert decide(TrainingJobChange.from_event(_event([_issues("LowGPUUtilization")])), every).stop
