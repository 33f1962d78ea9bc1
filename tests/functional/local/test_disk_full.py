"""A job's disk fills up (a real 8 MiB tmpfs): the job ends Failed naming the path, the rules end with that
reason, ``sdk-ext run`` exits 1 (not 2, "bad input"), no evaluator dies with a traceback, the events log holds
whole lines only, and the steps saved before read back exactly."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from sdk_ext.trials import create_trial
from tests.tmpfs import fill, mounted_tmpfs

# 512 KiB a step (a weight and its gradient), each value the step number: what was saved is checkable.
FILLER = textwrap.dedent("""
    import logging, time
    import numpy as np
    from sdk_ext.hooks import Hook
    logging.basicConfig(level=logging.WARNING)
    hook = Hook.create_from_json_file()
    for step in range(200):
        with hook.step():
            w = np.full((256, 256), step, dtype=np.float32)
            hook.save_tensor("loss", np.float32(1.0 / (step + 1)), "losses")
            hook.save_tensor("gradient/w", w, "gradients")
            hook.save_tensor("w", w, "weights")
        print("step", step, flush=True)
        time.sleep(0.02)
""")


def _run(tmp_path: Path, jobs: Path, repo_env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "fill.py"
    script.write_text(FILLER)
    return subprocess.run([sys.executable, "-m", "sdk_ext.cli", "run", str(script), "--no-zero-change", "--jobs-dir",
                           str(jobs), "--job-name", "full", "--save-interval", "1", "--collection", "weights",
                           "--collection", "gradients", "--rule", "ExplodingTensor", "--rule", "LossNotDecreasing",
                           "--stop-grace", "5"], env=repo_env, capture_output=True, text=True, timeout=300,
                          check=False)


def test_a_full_disk_fails_the_job_naming_the_path_and_ends_the_rules_with_the_reason(
        tmp_path: Path, repo_env: dict[str, str]) -> None:
    with mounted_tmpfs(tmp_path / "disk", size="8m") as jobs:
        done = _run(tmp_path, jobs, repo_env)
        job_dir = jobs / "full"
        job = json.loads((job_dir / "job.json").read_text())
        logs = {p.parent.name: p.read_text() for p in (job_dir / "rules").glob("*/evaluator.log")}
        events = (job_dir / "events.jsonl").read_text().splitlines()
        trial = create_trial(str(job_dir / "output" / "tensors"))
        steps = trial.steps()
        values = {s: trial.tensor("w").value(s) for s in steps}
        reserve_left = (job_dir / ".sdk-ext-reserve").exists()
    assert done.returncode == 1, done.stdout + done.stderr  # a failed job, not bad input
    assert "Traceback" not in done.stderr
    assert job["TrainingJobStatus"] == "Failed"
    reason = job["FailureReason"]
    assert reason.startswith("ClientError: No space left on device: cannot write ")
    assert str(job_dir) in reason  # the path that could not be written (the trial or a job file)
    for rule in job["DebugRuleEvaluationStatuses"]:
        assert rule["RuleEvaluationStatus"] in ("Stopped", "NoIssuesFound", "IssuesFound"), rule
        if rule["RuleEvaluationStatus"] == "Stopped":
            assert "No space left on device" in rule["StatusDetails"]
    assert sorted(logs) == ["ExplodingTensor", "LossNotDecreasing"]
    assert all("Traceback" not in text for text in logs.values()), logs
    assert [json.loads(line)["event"]["detail"]["TrainingJobStatus"] for line in events][-1] == "Failed"
    assert not reserve_left
    assert steps and steps == list(range(len(steps)))  # training went on; what was saved is whole
    for step, value in values.items():
        np.testing.assert_array_equal(value, np.full((256, 256), step, dtype=np.float32))


def test_a_disk_full_before_the_job_starts_is_exit_1_and_leaves_nothing(tmp_path: Path,
                                                                       repo_env: dict[str, str]) -> None:
    with mounted_tmpfs(tmp_path / "disk", size="2m") as jobs:
        fill(jobs)
        done = _run(tmp_path, jobs, repo_env)
        left = sorted(p.name for p in jobs.iterdir())
    assert done.returncode == 1, done.stdout + done.stderr
    assert "No space left on device" in done.stderr and "Traceback" not in done.stderr
    assert left == ["filler"]  # no half-made job directory holds the name
