"""The whole loop for real: a request from apply_debugger, the framework-free hook writing the trial
from its debughookconfig.json, the real rules/evaluate.py per rule, the auto-stop Lambda's handler."""

from __future__ import annotations

from pathlib import Path

import pytest

from sdk_ext.debugger import CollectionConfig, DebuggerHookConfig, Rule, apply_debugger, rule_configs
from sdk_ext.local import run_training_job
from tests.conftest import REPO
from tests.functional.local.support import events, job_pids, settings, wait_gone, write_script

pytestmark = pytest.mark.skipif(not (REPO / "rules" / "evaluate.py").is_file(), reason="needs rules/evaluate.py")

# Saves a loss and a weight every step; at --bad-step the weight turns NaN. Paced so a stop can land.
TRAIN = """
import argparse, json, os, sys, time
import numpy as np
from sdk_ext.hooks import Hook, SaveConfig
p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=40)
p.add_argument("--bad-step", type=int, default=-1)
p.add_argument("--crash-at", type=int, default=-1)
args = p.parse_args()
if hasattr(Hook, "create_from_json_file"):
    hook = Hook.create_from_json_file()
else:  # until the hook reads SageMaker's config itself: the same settings, by hand
    config = json.load(open(os.environ["SMDEBUG_CONFIG_FILE_PATH"]))
    hook = Hook(config["LocalPath"], save_config=SaveConfig(save_interval=1), include_collections=["weights", "losses"])
w = np.ones((4, 4), dtype=np.float32)
for step in range(args.steps):
    if step == args.crash_at:
        raise RuntimeError(f"diverged at step {step}")
    with hook.step():
        if step == args.bad_step:
            w[0, 0] = np.nan
        hook.save_tensor("dense/weight", w, "weights")
        hook.save_tensor("loss", np.float32(1.0 / (step + 1)), "losses")
    time.sleep(0.05)
hook.close()
print("done")
"""


def _request(name: str, steps: int, **hps: str) -> dict:
    base = {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": "local", "TrainingInputMode": "File"},
        "OutputDataConfig": {"S3OutputPath": "s3://local/output"},
        "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 120},
        "HyperParameters": {"steps": str(steps), **hps},
    }
    hook = DebuggerHookConfig(hook_parameters={"save_interval": "1"},
                              collection_configs=[CollectionConfig("weights", {"save_interval": "1"}),
                                                  CollectionConfig("losses", {"save_interval": "1"})])
    return apply_debugger(base, debugger_hook_config=hook, region="us-east-1", rules=[
        Rule.sagemaker(rule_configs.exploding_tensor()),
        Rule.sagemaker(rule_configs.loss_not_decreasing(), rule_parameters={"num_steps": "3"})])


def _run(tmp_path: Path, req: dict) -> dict:
    script = write_script(tmp_path, TRAIN)
    return run_training_job(req, settings=settings(tmp_path, rules_dir=None, rule_poll_interval=0.1),
                            entry_point=script)


def _statuses(final: dict) -> dict[str, str]:
    return {r["RuleConfigurationName"]: r["RuleEvaluationStatus"] for r in final["DebugRuleEvaluationStatuses"]}


def test_nan_is_caught_and_the_handler_stops_the_job(tmp_path: Path) -> None:
    final = _run(tmp_path, _request("real-bad", 400, **{"bad-step": "8"}))
    assert final["TrainingJobStatus"] == "Stopped"
    assert _statuses(final)["ExplodingTensor"] == "IssuesFound"
    details = next(r["StatusDetails"] for r in final["DebugRuleEvaluationStatuses"]
                   if r["RuleConfigurationName"] == "ExplodingTensor")
    assert "Evaluation of the rule ExplodingTensor at step 8 resulted in the condition being met" in details
    job_dir = tmp_path / "jobs" / "real-bad"
    assert any(r["result"]["action"] == "stopped" for e in events(job_dir) for r in e["results"])
    assert wait_gone(job_pids(job_dir), timeout=0) == []


def test_healthy_job_completes_and_every_rule_finds_no_issues(tmp_path: Path) -> None:
    final = _run(tmp_path, _request("real-good", 12))
    assert final["TrainingJobStatus"] == "Completed"
    assert _statuses(final) == {"ExplodingTensor": "NoIssuesFound", "LossNotDecreasing": "NoIssuesFound"}
    assert wait_gone(job_pids(tmp_path / "jobs" / "real-good"), timeout=0) == []


def test_crashing_job_fails_and_its_rules_end(tmp_path: Path) -> None:
    final = _run(tmp_path, _request("real-crash", 40, **{"crash-at": "4"}))
    assert final["TrainingJobStatus"] == "Failed"
    assert 'ErrorMessage "RuntimeError: diverged at step 4"' in final["FailureReason"]
    assert set(_statuses(final).values()) <= {"NoIssuesFound", "IssuesFound"}
    assert wait_gone(job_pids(tmp_path / "jobs" / "real-crash"), timeout=0) == []
