"""`sdk-ext run` as a new user runs it, with their own scripts: what it refuses, what it says when nothing
was saved or a rule checked nothing, zero-change by default, TensorBoard, Ctrl-C, and the papercuts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.functional.local.support import HOOKED, ctrl_c_reaches_it, poll_until, write_script

# A PyTorch script with no hook code at all: nn.Sequential, a loss, SGD.
PLAIN_TORCH = """
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = nn.MSELoss()
x, y = torch.randn(32, 8), torch.randn(32, 1)
for step in range(6):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
print("trained")
"""

NO_HOOK = "print('training without any hook')\n"


def _cli(*args: str, env: dict[str, str], cwd: Path | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sdk_ext.cli", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, check=False)


def _run(tmp_path: Path, script: Path, *options: str, env: dict[str, str], name: str = "job") -> tuple[
        subprocess.CompletedProcess[str], Path]:
    result = _cli("run", "--jobs-dir", str(tmp_path / "jobs"), "--job-name", name, "--rule-timeout", "30",
                  *options, str(script), env=env)
    return result, tmp_path / "jobs" / name


# --- item 2: refused before the job starts ------------------------------------------------------------

@pytest.mark.parametrize(("options", "expected"), [
    (["--collection", "gradientz"], ["--collection gradientz: collection 'gradientz'", "did you mean 'gradients'?"]),
    (["--save-interval", "0"], ["--save-interval 0: save_interval must be a positive integer"]),
    (["--hook-param", "save_intervall=5"], ["--hook-param save_intervall=5: the hook has no parameter "
                                            "'save_intervall' (did you mean 'save_interval'?)"]),
    (["--collection-param", "weights:save_intervl=3"], ["--collection-param weights:save_intervl=3: a collection has "
                                                        "no parameter 'save_intervl' (did you mean 'save_interval'?)"]),
    (["--hook-param", "export_tensorboard=maybe"], ["--hook-param export_tensorboard=maybe: export_tensorboard must "
                                                    "be true or false"]),
])
def test_invalid_hook_configuration_is_refused_before_the_job_starts(tmp_path: Path, repo_env: dict[str, str],
                                                                     options: list[str], expected: list[str]) -> None:
    script = write_script(tmp_path, NO_HOOK)
    result, job_dir = _run(tmp_path, script, "--rule", "ExplodingTensor", *options, env=repo_env)
    assert result.returncode == 2, result.stdout + result.stderr
    for text in expected:
        assert text in result.stderr
    assert "the job was not started" in result.stderr
    assert not job_dir.exists()


def test_a_job_that_saved_nothing_says_why_and_exits_1(tmp_path: Path, repo_env: dict[str, str]) -> None:
    script = write_script(tmp_path, NO_HOOK)
    result, job_dir = _run(tmp_path, script, "--rule", "ExplodingTensor", "--rule", "VanishingGradient", env=repo_env)
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert out.splitlines()[0] == "Job job: Completed (Completed)"
    assert "  no debugging data was saved: the script created no hook and ran without the zero-change hook" in out
    assert "pass --zero-change" in out
    # the rule statuses carry the reason too (job.json is what DescribeTrainingJob returns)
    statuses = json.loads((job_dir / "job.json").read_text())["DebugRuleEvaluationStatuses"]
    assert {s["RuleEvaluationStatus"] for s in statuses} == {"Error"}
    assert all("Why: the script created no hook" in s["StatusDetails"] for s in statuses)


def test_zero_change_is_the_default_for_pytorch_and_a_rule_that_matched_nothing_says_so(
        tmp_path: Path, repo_env: dict[str, str]) -> None:
    script = write_script(tmp_path, PLAIN_TORCH)
    result, job_dir = _run(tmp_path, script, "--rule", "ExplodingTensor", "--rule", "DeadRelu",
                           "--rule-param", "DeadRelu:tensor_regex=.*relu_output", "--collection", "gradients",
                           "--save-interval", "1", "--hook-param", "export_tensorboard=true", "--report", env=repo_env)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "no debugging data" not in out
    assert "  ExplodingTensor: NoIssuesFound (Training ended; last saved step: 5)" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("  DeadRelu:"))
    assert line.startswith("  DeadRelu: NoIssuesFound, but it checked nothing (the rule matched no tensor "
                           "(tensor_regex '.*relu_output')")
    argv = json.loads((job_dir / "job.json").read_text())["SdkExtLocal"]["Command"]
    assert argv[1:3] == ["-m", "sdk_ext.pytorch.run"]
    # export_tensorboard=true is honoured in a local job
    assert list((job_dir / "output" / "tensorboard").rglob("*tfevents*"))
    html = (job_dir / "report.html").read_text()
    assert "checked nothing</span>" in html and "rules checked nothing: DeadRelu" in html
    assert "no rule found issues" not in html


def test_no_zero_change_is_recorded_in_request_json_so_running_it_again_does_the_same(
        tmp_path: Path, repo_env: dict[str, str]) -> None:
    script = write_script(tmp_path, PLAIN_TORCH)
    first, job_dir = _run(tmp_path, script, "--zero-change", "--collection", "losses", "--save-interval", "1",
                          env=repo_env, name="first")
    assert first.returncode == 0, first.stdout + first.stderr
    request = json.loads((job_dir / "request.json").read_text())
    assert request["Environment"]["SDK_EXT_ZERO_CHANGE"] == "1"
    again = _cli("run", "--request", str(job_dir / "request.json"), "--job-name", "again", "--jobs-dir",
                 str(tmp_path / "jobs"), env=repo_env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert list((tmp_path / "jobs" / "again" / "output" / "tensors" / "index").rglob("*.json"))
    off, off_dir = _run(tmp_path, script, "--no-zero-change", "--collection", "losses", "--rule", "LossNotDecreasing",
                        env=repo_env, name="off")
    assert off.returncode == 1 and "no debugging data was saved" in off.stdout
    assert json.loads((off_dir / "request.json").read_text())["Environment"]["SDK_EXT_ZERO_CHANGE"] == "0"


# --- item 6: Ctrl-C -----------------------------------------------------------------------------------

def test_ctrl_c_writes_the_summary_and_the_report_then_exits_130(tmp_path: Path, repo_env: dict[str, str]) -> None:
    script = write_script(tmp_path, HOOKED)  # saves every step until it is stopped
    job_dir = tmp_path / "jobs" / "interrupted"
    proc = subprocess.Popen([sys.executable, "-m", "sdk_ext.cli", "run", "--jobs-dir", str(tmp_path / "jobs"),
                             "--job-name", "interrupted", "--collection", "losses", "--save-interval", "1",
                             "--stop-grace", "3", "--report", str(script)], env=repo_env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_reaches_it)
    try:
        poll_until(lambda: len(list((job_dir / "output" / "tensors" / "index").rglob("*.json"))) >= 3, timeout=60)
        os.kill(proc.pid, signal.SIGINT)  # what Ctrl-C sends to the CLI
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out + err
    lines = out.splitlines()
    assert lines[0] == "Job interrupted: Stopped (Stopped)"
    assert f"  report: {(job_dir / 'report.html').resolve()}" in lines
    assert lines[-1] == "interrupted (Ctrl-C): the job was stopped"
    html = (job_dir / "report.html").read_text()
    assert "<svg" in html and "CrossEntropyLoss_output_0" in html


# --- papercuts -----------------------------------------------------------------

def test_script_arguments_without_double_dash_get_a_hint(tmp_path: Path, repo_env: dict[str, str]) -> None:
    script = write_script(tmp_path, NO_HOOK)
    result = _cli("run", str(script), "--epochs", "3", env=repo_env, cwd=tmp_path)
    assert result.returncode == 2
    assert f"arguments for the script go after --: sdk-ext run [options] {script} -- --epochs 3" in result.stderr
    assert not (tmp_path / "sdk-ext-jobs").exists()


def test_a_syntax_error_names_its_file_and_line(tmp_path: Path, repo_env: dict[str, str]) -> None:
    script = write_script(tmp_path, "import os\nprint((1, 2)\n")
    result, _ = _run(tmp_path, script, env=repo_env)
    assert result.returncode == 1
    assert f"SyntaxError: '(' was never closed ({script}, line 2)" in result.stdout


def test_a_misspelt_rule_gets_did_you_mean(tmp_path: Path, repo_env: dict[str, str]) -> None:
    script = write_script(tmp_path, NO_HOOK)
    result, _ = _run(tmp_path, script, "--rule", "VanishingGradent", env=repo_env)
    assert result.returncode == 2 and "did you mean VanishingGradient?" in result.stderr


def test_trial_piped_into_head_has_no_broken_pipe_error(tmp_path: Path, repo_env: dict[str, str]) -> None:
    trial = tmp_path / "trial"
    write = ("import numpy as np\nfrom sdk_ext.hooks import Hook, SaveConfig\n"
             f"hook = Hook({str(trial)!r}, save_config=SaveConfig(save_interval=1), include_collections=['weights'])\n"
             "for step in range(3):\n    with hook.step():\n"
             "        for i in range(400):\n            hook.save_tensor(f'layer{i}.weight', np.ones(2), 'weights')\n"
             "hook.close()\n")
    subprocess.run([sys.executable, "-c", write], env=repo_env, check=True, timeout=120)
    shell = subprocess.run(f"{sys.executable} -m sdk_ext.cli trial {trial} | head -1", shell=True, env=repo_env,
                           capture_output=True, text=True, timeout=120, check=False)
    assert shell.stdout.startswith("trial ")
    assert "Broken pipe" not in shell.stderr and "Traceback" not in shell.stderr, shell.stderr


def test_a_job_whose_hook_gave_up_gives_the_hooks_reason(tmp_path: Path) -> None:
    """From Python (no CLI check before the start), as inside SageMaker: the hook logs and saves nothing."""
    from sdk_ext.local import LocalSettings, run_training_job
    from sdk_ext.local.request.from_options import build_request

    script = write_script(tmp_path, PLAIN_TORCH)
    request = build_request(script=script, base=None, job_name="gave-up", save_interval=0, rules=["ExplodingTensor"])
    final = run_training_job(request, settings=LocalSettings(jobs_root=tmp_path / "jobs", rule_timeout=30),
                             entry_point=script)
    assert final["TrainingJobStatus"] == "Completed"
    details = final["DebugRuleEvaluationStatuses"][0]["StatusDetails"]
    assert "Why: the hook said: sdk_ext: not saving debugging data: " in details
    assert "save_interval must be a positive integer, got 0" in details


def test_unchanged_tensor_is_quiet_on_a_healthy_job_that_validates_between_training_steps(
        tmp_path: Path, repo_env: dict[str, str]) -> None:
    demo = Path(__file__).resolve().parents[3] / "examples" / "pytorch_diverge" / "train.py"
    result = _cli("run", "--jobs-dir", str(tmp_path / "jobs"), "--job-name", "healthy", "--rule", "UnchangedTensor",
                  "--collection", "weights", "--save-interval", "1", str(demo), "--",
                  "--steps", "12", "--diverge-at", "-1", "--eval-every", "2", "--step-time", "0", env=repo_env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "  UnchangedTensor: NoIssuesFound (Training ended; last saved step: " in result.stdout
