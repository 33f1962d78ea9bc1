"""rules/evaluate.py as a subprocess: the contract sdk_ext.local relies on (rules/README.md).

Exit codes 0 NoIssuesFound, 3 IssuesFound, 2 Error, 4 Stopped; ``<output-dir>/status.json`` says
the same, with StatusDetails naming the tensor and why.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO
from tests.functional.rules.trial_writer import write_trial

EVALUATE = str(REPO / "rules" / "evaluate.py")


def evaluate(args: list[str], env: dict[str, str], *, timeout: float = 60) -> tuple[int, dict, str]:
    proc = subprocess.run([sys.executable, EVALUATE, *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    out = Path(args[args.index("--output-dir") + 1]) if "--output-dir" in args else None
    status = json.loads((out / "status.json").read_text()) if out and (out / "status.json").exists() else {}
    return proc.returncode, status, proc.stderr


def wait_for(predicate, *, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def read_status(out: Path) -> dict:
    try:
        return json.loads((out / "status.json").read_text())
    except FileNotFoundError:
        return {}


@pytest.fixture
def grads_trial(tmp_path):
    return write_trial(tmp_path / "trial", [
        (0, {"gradient/fc1.weight": np.full(8, 0.5)}),
        (4, {"gradient/fc1.weight": np.full(8, 1e-9)}),
        (8, {"gradient/fc1.weight": np.full(8, 0.5)}),
    ])


def test_issues_found_names_the_step_tensor_and_why(grads_trial, tmp_path, repo_env):
    out = tmp_path / "out"
    code, status, _ = evaluate(["--trial-dir", str(grads_trial), "--rule-name", "VanishingGradient",
                                "--output-dir", str(out), "--rule-configuration-name", "VG"], repo_env)
    assert code == 3
    assert status["RuleEvaluationStatus"] == "IssuesFound" and status["Step"] == 4
    assert status["RuleConfigurationName"] == "VG"
    assert status["StatusDetails"].startswith(
        "RuleEvaluationConditionMet: Evaluation of the rule VanishingGradient at step 4 resulted in the condition "
        "being met: tensor 'gradient/fc1.weight': mean absolute gradient 1e-09 is below threshold 1e-07")
    assert status["LastModifiedTime"].endswith("Z")


def test_no_issues_found_at_the_end_of_training_and_at_end_step(grads_trial, tmp_path, repo_env):
    out = tmp_path / "out"
    code, status, _ = evaluate(["--trial-dir", str(grads_trial), "--rule-name", "VanishingGradient",
                                "--param", "threshold=1e-10", "--output-dir", str(out)], repo_env)
    assert (code, status["RuleEvaluationStatus"], status["Step"]) == (0, "NoIssuesFound", None)
    assert "Training ended" in status["StatusDetails"]
    code, status, _ = evaluate(["--trial-dir", str(grads_trial), "--rule-name", "VanishingGradient",
                                "--end-step", "4", "--output-dir", str(out)], repo_env)
    assert (code, status["StatusDetails"]) == (0, "Reached end_step 4")  # end_step is exclusive
    every = write_trial(tmp_path / "every", [(s, {"gradient/w": np.full(4, 0.5)}) for s in range(6)])
    code, status, _ = evaluate(["--trial-dir", str(every), "--rule-name", "VanishingGradient",
                                "--end-step", "4", "--output-dir", str(out)], repo_env)
    assert (code, status["StatusDetails"]) == (0, "Reached end_step 4")


def test_reserved_keys_work_as_params_the_same_as_flags(grads_trial, tmp_path, repo_env):
    out = tmp_path / "out"
    code, status, _ = evaluate(["--trial-dir", str(grads_trial), "--param", "rule_to_invoke=VanishingGradient",
                                "--param", "start_step=5", "--output-dir", str(out)], repo_env)
    assert (code, status["RuleEvaluationStatus"]) == (0, "NoIssuesFound")  # step 4 is before start_step
    code, status, _ = evaluate(["--trial-dir", str(grads_trial), "--param", "rule_to_invoke=VanishingGradient",
                                "--param", "end_step=9", "--start-step", "4", "--output-dir", str(out)], repo_env)
    assert (code, status["Step"]) == (3, 4)


@pytest.mark.parametrize("args, fragment", [
    (["--rule-name", "VanishingGradient", "--param", "threshold=abc"], "threshold='abc'"),
    (["--rule-name", "VanishingGradient", "--param", "treshold=1"], "treshold='1'"),
    (["--rule-name", "VanishingGradients"], "'VanishingGradients' is not a built-in rule"),
    (["--rule-name", "VanishingGradient", "--param", "start_step=x"], "start_step='x'"),
    (["--rule-name", "VanishingGradient", "--param", "oops"], "--param 'oops'"),
    (["--param", "threshold=1"], "no rule given"),
    (["--rule-name", "AllZero"], "Insufficient information to invoke rule AllZero"),
])
def test_bad_input_is_an_error_naming_what_and_the_value(args, fragment, grads_trial, tmp_path, repo_env):
    out = tmp_path / "out"
    code, status, _ = evaluate(["--trial-dir", str(grads_trial), *args, "--output-dir", str(out)], repo_env)
    assert code == 2 and status["RuleEvaluationStatus"] == "Error"
    assert fragment in status["StatusDetails"]
    assert status["StatusDetails"].startswith("ClientError: ")


def test_missing_data_is_an_error(tmp_path, repo_env):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "training_job_end.ts").write_text("")
    out = tmp_path / "out"
    code, status, _ = evaluate(["--trial-dir", str(empty), "--rule-name", "VanishingGradient",
                                "--output-dir", str(out)], repo_env)
    assert code == 2 and status["StatusDetails"].startswith(
        "ClientError: No debugging data was saved by the training job.")


CUSTOM = textwrap.dedent('''
    from smdebug.rules.rule import Rule

    class GradientTooSmall(Rule):
        def __init__(self, base_trial, threshold="0.001", action_str=""):
            super().__init__(base_trial, action_str)
            self.threshold = float(threshold)

        def invoke_at_step(self, step):
            for name in self.base_trial.tensor_names(collection="gradients"):
                if self.base_trial.tensor(name).reduction_value(step, "mean", abs=True) < self.threshold:
                    return True
            return False

    class Broken(Rule):
        def invoke_at_step(self, step):
            raise RuntimeError("boom at step %d" % step)
''')


def test_custom_rule_written_for_smdebug_runs_from_its_source_file(grads_trial, tmp_path, repo_env):
    source = tmp_path / "my_rules.py"
    source.write_text(CUSTOM)
    out = tmp_path / "out"
    code, status, _ = evaluate(["--trial-dir", str(grads_trial), "--source", str(source), "--rule-to-invoke",
                                "GradientTooSmall", "--param", "threshold=0.01", "--output-dir", str(out)], repo_env)
    assert (code, status["Step"], status["RuleConfigurationName"]) == (3, 4, "GradientTooSmall")
    code, status, _ = evaluate(["--trial-dir", str(grads_trial), "--param", f"source_s3_uri=file://{source}",
                                "--param", "rule_to_invoke=Broken", "--output-dir", str(out)], repo_env)
    assert code == 2 and "RuntimeError: boom at step 0" in status["StatusDetails"]


def test_other_trials_are_passed_to_similar_across_runs(tmp_path, repo_env):
    a = write_trial(tmp_path / "a", [(0, {"w": np.ones(3)}), (1, {"w": np.ones(3)})])
    b = write_trial(tmp_path / "b", [(0, {"w": np.ones(3)}), (1, {"w": np.ones(3) * 2})])
    out = tmp_path / "out"
    code, status, _ = evaluate(["--trial-dir", str(a), "--rule-name", "SimilarAcrossRuns", "--other-trial", str(b),
                                "--output-dir", str(out)], repo_env)
    assert (code, status["Step"]) == (3, 1) and "'w' differs" in status["StatusDetails"]
    code, status, _ = evaluate(["--trial-dir", str(a), "--rule-name", "SimilarAcrossRuns", "--output-dir", str(out)],
                               repo_env)
    assert code == 2 and "other_trial_0" in status["StatusDetails"]


def test_container_mode_reads_sagemaker_paths_and_parameters_from_the_environment(grads_trial, tmp_path, repo_env):
    out = tmp_path / "rule"
    env = {**repo_env, "TRIAL_DIR": str(grads_trial), "RULE_OUTPUT_DIR": str(out),
           "RULE_PARAMETERS": json.dumps({"rule_to_invoke": "VanishingGradient", "threshold": "1e-7"}),
           "RULE_CONFIGURATION_NAME": "VanishingGradientRule", "RULE_MESSAGE_FILE": str(tmp_path / "message")}
    proc = subprocess.run([sys.executable, EVALUATE], env=env, capture_output=True, text=True, timeout=60, check=False)
    status = json.loads((out / "status.json").read_text())
    assert proc.returncode == 3 and status["RuleConfigurationName"] == "VanishingGradientRule"
    assert (tmp_path / "message").read_text() == status["StatusDetails"]


def test_live_trial_in_progress_first_then_issues_found_at_the_offending_step(tmp_path, repo_env):
    trial, out = tmp_path / "trial", tmp_path / "out"
    rule = subprocess.Popen([sys.executable, EVALUATE, "--trial-dir", str(trial), "--rule-name", "VanishingGradient",
                             "--output-dir", str(out)], env=repo_env, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: read_status(out).get("RuleEvaluationStatus") == "InProgress", what="InProgress")
        job = subprocess.Popen([sys.executable, "-m", "tests.functional.rules.live_writer", str(trial), "--steps", "40",
                                "--interval", "0.02", "--bad-step", "25", "--no-end"], env=repo_env, cwd=REPO)
        try:
            assert rule.wait(timeout=60) == 3
        finally:
            job.kill()
            job.wait()
    finally:
        if rule.poll() is None:
            rule.kill()
        rule.communicate()
    status = read_status(out)
    assert status["RuleEvaluationStatus"] == "IssuesFound" and status["Step"] == 25


def test_sigterm_stops_promptly_with_status_stopped(tmp_path, repo_env):
    trial, out = tmp_path / "trial", tmp_path / "out"
    write_trial(trial, [(0, {"gradient/w": np.full(4, 0.5)})], end=False)  # still "training"
    rule = subprocess.Popen([sys.executable, EVALUATE, "--trial-dir", str(trial), "--rule-name", "VanishingGradient",
                             "--output-dir", str(out)], env=repo_env, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: read_status(out).get("RuleEvaluationStatus") == "InProgress", what="InProgress")
        rule.send_signal(signal.SIGTERM)
        assert rule.wait(timeout=10) == 4
    finally:
        if rule.poll() is None:
            rule.kill()
        rule.communicate()
    status = read_status(out)
    assert status["RuleEvaluationStatus"] == "Stopped" and status["Step"] is None
    assert not [p for p in out.iterdir() if p.name != "status.json"]  # no temporary left behind


def test_waits_for_a_job_that_has_not_written_anything_yet(tmp_path, repo_env):
    trial, out = tmp_path / "trial", tmp_path / "out"
    rule = subprocess.Popen([sys.executable, EVALUATE, "--trial-dir", str(trial), "--rule-name", "VanishingGradient",
                             "--output-dir", str(out)], env=repo_env, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: read_status(out).get("RuleEvaluationStatus") == "InProgress", what="InProgress")
        time_written = write_trial(trial, [(0, {"gradient/w": np.full(4, 1e-9)})], end=False)
        assert time_written
        assert rule.wait(timeout=60) == 3
    finally:
        if rule.poll() is None:
            rule.kill()
        rule.communicate()
    assert read_status(out)["Step"] == 0


def test_usage_error_without_output_dir_still_exits_2(tmp_path, repo_env):
    proc = subprocess.run([sys.executable, EVALUATE, "--rule-name", "VanishingGradient"], env=repo_env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2
    status = json.loads((tmp_path / "status.json").read_text())
    assert "--trial-dir" in status["StatusDetails"]
    assert os.environ.get("TRAINING_JOB_NAME") is None


def test_no_arguments_outside_a_container_prints_usage(tmp_path, repo_env):
    env = {k: v for k, v in repo_env.items() if not k.startswith("RULE_")}
    proc = subprocess.run([sys.executable, EVALUATE], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 2 and "usage:" in proc.stderr and not list(tmp_path.iterdir())


def test_container_mode_parameters_file_with_json_values(grads_trial, tmp_path, repo_env):
    out = tmp_path / "rule"
    params = tmp_path / "rule_parameters.json"
    params.write_text(json.dumps({"rule_to_invoke": "VanishingGradient", "threshold": 1e-10, "start_step": 0}))
    env = {**repo_env, "TRIAL_DIR": str(grads_trial), "RULE_OUTPUT_DIR": str(out), "RULE_PARAMETERS_FILE": str(params),
           "RULE_MESSAGE_FILE": str(tmp_path / "message")}
    proc = subprocess.run([sys.executable, EVALUATE], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and json.loads((out / "status.json").read_text())["RuleConfigurationName"] == \
        "VanishingGradient"


def test_end_step_ends_a_live_evaluation_once_the_job_has_passed_it(tmp_path, repo_env):
    trial, out = tmp_path / "trial", tmp_path / "out"
    write_trial(trial, [(0, {"gradient/w": np.full(4, 0.5)}), (10, {"gradient/w": np.full(4, 1e-9)})], end=False)
    code, status, _ = evaluate(["--trial-dir", str(trial), "--rule-name", "VanishingGradient", "--end-step", "5",
                                "--output-dir", str(out)], repo_env)  # the job has not ended: no NoMoreData
    assert (code, status["StatusDetails"]) == (0, "Reached end_step 5")
