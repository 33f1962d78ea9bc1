"""Children never outlive the runner: not when it is interrupted (Ctrl-C), not when it is killed outright."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.functional.local.support import (
    BAD,
    ctrl_c_reaches_it,
    job_pids,
    poll_until,
    wait_gone,
    write_script,
)

RUNNER = """
import sys
from pathlib import Path
from sdk_ext.local import run_training_job
from tests.functional.local.support import request, rule, settings
tmp = Path(sys.argv[1])
req = request("victim", rules=[rule("Hangs", fake="hang"), rule("Quiet", fake="quiet")],
              ProfilerConfig={"DisableProfiler": False, "ProfilingIntervalInMilliseconds": 100})  # a monitor too
run_training_job(req, settings=settings(tmp, auto_stop=False), entry_point=sys.argv[2])
"""


def _start_runner(tmp_path: Path, repo_env: dict[str, str]) -> tuple[subprocess.Popen[bytes], Path]:
    script = write_script(tmp_path, BAD)
    runner = subprocess.Popen([sys.executable, "-c", RUNNER, str(tmp_path), str(script)], env=repo_env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=ctrl_c_reaches_it)
    job_dir = tmp_path / "jobs" / "victim"

    def started() -> bool:
        try:
            local = json.loads((job_dir / "job.json").read_text())["SdkExtLocal"]
        except (OSError, ValueError, KeyError):
            return False
        return bool(local.get("TrainingPid")) and bool(local.get("MonitorPid")) and len(local["Rules"]) == 2

    poll_until(started, timeout=30)
    return runner, job_dir


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")
def test_children_die_with_a_killed_runner(tmp_path: Path, repo_env: dict[str, str]) -> None:
    runner, job_dir = _start_runner(tmp_path, repo_env)
    pids = job_pids(job_dir)
    assert len(pids) == 4 and wait_gone(pids, timeout=0) == pids  # all running (training, monitor, two rules)
    runner.send_signal(signal.SIGKILL)
    runner.wait(timeout=10)
    # the "Hangs" evaluator ignores SIGTERM: only the kernel's parent-death SIGKILL ends it
    assert wait_gone(pids, timeout=10) == []


def test_interrupted_runner_stops_the_job_and_ends_every_child(tmp_path: Path, repo_env: dict[str, str]) -> None:
    runner, job_dir = _start_runner(tmp_path, repo_env)
    pids = job_pids(job_dir)
    runner.send_signal(signal.SIGINT)
    out, _ = runner.communicate(timeout=30)
    assert runner.returncode != 0
    assert b"KeyboardInterrupt" in out
    assert wait_gone(pids, timeout=0) == []  # ended before the runner exited
    job = json.loads((job_dir / "job.json").read_text())
    assert job["TrainingJobStatus"] == "Stopped"
    statuses = {r["RuleConfigurationName"]: r["RuleEvaluationStatus"] for r in job["DebugRuleEvaluationStatuses"]}
    assert statuses["Quiet"] in ("Stopped", "NoIssuesFound")
    assert statuses["Hangs"] != "InProgress"
