"""Profiler rules in real local jobs on this machine: the system monitor samples the host, the framework-free
hook records its step timeline, one rules/evaluate.py per ProfilerRuleConfiguration judges them live, and
DescribeTrainingJob reports ProfilerRuleEvaluationStatuses. What needs a GPU is shown with synthetic files
(test_evaluate_profiler_rules.py); here the rules that need one say that they checked nothing."""

from __future__ import annotations

import json
from pathlib import Path

import smdebug_rulesconfig as rc

from sdk_ext.debugger import (
    DebuggerHookConfig,
    ProfilerConfig,
    ProfilerRule,
    apply_debugger,
    rule_configs,
)
from sdk_ext.local import run_training_job
from sdk_ext.local.report import write_report
from tests.functional.local.support import events, job_pids, settings, wait_gone, write_script

# A framework-free training loop: each step busy-loops --work-ms on the CPU (a CPU-bound loop); every
# --slow-every steps one step also sleeps --slow-ms; --start-delay seconds pass before the first step.
TRAIN = """
import argparse, time
from sdk_ext.hooks import Hook
from sdk_ext.modes import ModeKeys
p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=300)
p.add_argument("--work-ms", type=float, default=4.0)
p.add_argument("--slow-every", type=int, default=0)
p.add_argument("--slow-ms", type=float, default=100.0)
p.add_argument("--start-delay", type=float, default=0.0)
args = p.parse_args()
hook = Hook.create_from_json_file()
hook.set_mode(ModeKeys.TRAIN)
time.sleep(args.start_delay)
for step in range(args.steps):
    with hook.step():
        end = time.perf_counter() + args.work_ms / 1000
        while time.perf_counter() < end:
            pass
        if args.slow_every and step % args.slow_every == args.slow_every - 1:
            time.sleep(args.slow_ms / 1000)
hook.close()
print("done")
"""


def _request(name: str, rules: list[ProfilerRule], **hyperparameters: str) -> dict:
    base = {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": "local", "TrainingInputMode": "File"},
        "OutputDataConfig": {"S3OutputPath": "s3://local/output"},
        "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 120},
        "HyperParameters": hyperparameters,
    }
    return apply_debugger(base, debugger_hook_config=DebuggerHookConfig(), rules=rules, region="us-east-1",
                          profiler_config=ProfilerConfig(system_monitor_interval_millis=100))


def _run(tmp_path: Path, request: dict, **changes) -> dict:
    script = write_script(tmp_path, TRAIN)
    local = settings(tmp_path, rules_dir=None, rule_poll_interval=0.1, profiler_file_seconds=1.0, **changes)
    return run_training_job(request, settings=local, entry_point=script)


def _profiler_statuses(final: dict) -> dict[str, dict]:
    return {r["RuleConfigurationName"]: r for r in final["ProfilerRuleEvaluationStatuses"]}


def test_slow_steps_in_a_cpu_bound_loop(tmp_path):
    request = _request("prof-slow-steps", [
        ProfilerRule.sagemaker(rule_configs.StepOutlier()),
        ProfilerRule.sagemaker(rule_configs.CPUBottleneck()),
        ProfilerRule.sagemaker(rule_configs.LowGPUUtilization()),
        ProfilerRule.sagemaker(rule_configs.ProfilerReport()),
    ], **{"steps": "300", "work-ms": "5", "slow-every": "25", "slow-ms": "150"})
    final = _run(tmp_path, request)
    assert final["TrainingJobStatus"] == "Completed"  # profiler rules do not stop a job unless asked to
    assert final["ProfilingStatus"] == "Enabled"
    statuses = _profiler_statuses(final)
    assert statuses["StepOutlier"]["RuleEvaluationStatus"] == "IssuesFound"
    assert "TRAIN steps on" in statuses["StepOutlier"]["StatusDetails"]
    assert "outlier steps: 24, 49, 74" in statuses["StepOutlier"]["StatusDetails"]
    assert statuses["ProfilerReport"]["RuleEvaluationStatus"] == "IssuesFound"
    assert "StepOutlier:" in statuses["ProfilerReport"]["StatusDetails"]
    described = json.loads((tmp_path / "jobs" / "prof-slow-steps" / "job.json").read_text())
    if not _has_gpu(tmp_path / "jobs" / "prof-slow-steps"):
        for name in ("CPUBottleneck", "LowGPUUtilization"):  # a CPU-only host: nothing to judge, and said so
            assert statuses[name]["RuleEvaluationStatus"] == "NoIssuesFound"
            assert statuses[name]["StatusDetails"].startswith("CheckedNothing:")
    job_dir = tmp_path / "jobs" / "prof-slow-steps"
    reports = job_dir / "rules" / "ProfilerReport" / "profiler-output" / "profiler-reports"
    usage = json.loads((reports / "OverallSystemUsage.json").read_text())["Details"]["CPU"]["algo-1"]
    assert usage["max"] >= 40  # the busy loop kept at least one core busy (mean over the host's cores)
    assert (job_dir / "rules" / "ProfilerReport" / "profiler-output" / "profiler-report.html").is_file()
    summary = json.loads((reports.parent / "profiler-rules-summary.json").read_text())["rules"]
    assert summary["StepOutlier"]["RuleTriggered"] >= 1 and "outlier steps" in summary["StepOutlier"]["finding"]
    assert json.loads((job_dir / "rules" / "StepOutlier" / "profiler-output" / "profiler-reports" /
                       "StepOutlier.json").read_text())["RuleTriggered"] >= 1
    assert described["SdkExtLocal"]["ProfilerRules"]["StepOutlier"]["ExitCode"] == 3
    page = write_report(job_dir, job_dir / "report.html")
    html = (job_dir / "report.html").read_text()
    assert page.profile is not None and "Utilization on algo-1" in html and "Step durations: TRAIN" in html
    assert "ules found issues: StepOutlier, ProfilerReport; the job is Completed" in html
    assert "No debugging data was saved" not in html and "No loss tensors" not in html
    if not _has_gpu(job_dir):  # ProfilerReport's own rows say which of its rules judged nothing
        assert html.count("checked nothing") >= 6
    assert wait_gone(job_pids(job_dir), timeout=0) == []


def test_a_slow_start_fires_max_initialization_time_and_the_request_stops_the_job(tmp_path):
    rule = ProfilerRule.sagemaker(rule_configs.MaxInitializationTime(threshold=0.05, scan_interval_us=1_000_000))
    request = _request("prof-slow-start", [rule], **{"start-delay": "60", "steps": "5"})
    actions = rc.ActionList(rc.StopTraining())
    actions.update_training_job_prefix_if_not_specified("prof-slow-start")
    request["ProfilerRuleConfigurations"][0]["RuleParameters"]["action_json"] = actions.serialize()
    final = _run(tmp_path, request)
    status = _profiler_statuses(final)["MaxInitializationTime"]
    assert final["TrainingJobStatus"] == "Stopped"
    assert status["RuleEvaluationStatus"] == "IssuesFound"
    assert "no training step after" in status["StatusDetails"]
    job_dir = tmp_path / "jobs" / "prof-slow-start"
    decisions = [r["result"] for e in events(job_dir) for r in e["results"] if r["result"]]
    assert any(d.get("action") == "stopped" for d in decisions)
    assert wait_gone(job_pids(job_dir), timeout=0) == []


def test_without_the_request_asking_a_profiler_rule_does_not_stop_the_job(tmp_path):
    rule = ProfilerRule.sagemaker(rule_configs.MaxInitializationTime(threshold=0.03, scan_interval_us=1_000_000))
    final = _run(tmp_path, _request("prof-no-stop", [rule], **{"start-delay": "4", "steps": "5"}))
    assert final["TrainingJobStatus"] == "Completed"
    assert _profiler_statuses(final)["MaxInitializationTime"]["RuleEvaluationStatus"] == "IssuesFound"


def _has_gpu(job_dir: Path) -> bool:
    return any("gpu" in p.read_text() for p in (job_dir / "profiler-output" / "system").rglob("*.json"))


def test_update_training_job_adds_a_profiler_rule_to_a_running_job(tmp_path):
    import threading

    from sdk_ext.local import LocalSageMakerClient
    from tests.functional.local.support import poll_until

    request = _request("prof-update", [], **{"start-delay": "2", "steps": "300", "work-ms": "2", "slow-every": "25",
                                              "slow-ms": "100"})
    client = LocalSageMakerClient(settings(tmp_path, rules_dir=None, rule_poll_interval=0.1,
                                           profiler_file_seconds=1.0))
    runner = client.prepare_job(request, entry_point=write_script(tmp_path, TRAIN))
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    poll_until(lambda: client.describe_training_job(TrainingJobName="prof-update")["SecondaryStatus"] == "Training")
    added = ProfilerRule.sagemaker(rule_configs.StepOutlier()).to_profiler_rule_config_dict()
    client.update_training_job(TrainingJobName="prof-update", ProfilerRuleConfigurations=[added])
    thread.join(timeout=90)
    final = client.describe_training_job(TrainingJobName="prof-update")
    assert final["TrainingJobStatus"] == "Completed"
    status = _profiler_statuses(final)["StepOutlier"]
    assert status["RuleEvaluationStatus"] == "IssuesFound" and "outlier steps: 24, 49" in status["StatusDetails"]
