"""Nothing a job started outlives it, however it was started (a child in its own session, a double-forked
daemon, a script ignoring SIGTERM) and however the runner ended (the job's end, Ctrl-C, SIGTERM, SIGKILL);
a job whose runner was killed is reported Failed by the next command; a job name is taken atomically.

Real processes and real signals, through ``sdk-ext run`` as a user runs it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.functional.local.support import ctrl_c_reaches_it, poll_until, wait_gone

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a keeper needs Linux's prctl")

# Starts a child in its own session and a double-forked daemon, both ignoring SIGTERM; writes the three pids.
SPAWNER = textwrap.dedent("""
    import json, os, signal, subprocess, sys, time
    out = sys.argv[1]
    if "--ignore-term" in sys.argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    stubborn = "import signal, time\\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\\ntime.sleep(300)"
    session = subprocess.Popen([sys.executable, "-c", stubborn], start_new_session=True)
    r, w = os.pipe()
    first = os.fork()
    if first == 0:
        os.setsid()
        if os.fork():
            os._exit(0)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.write(w, str(os.getpid()).encode())
        time.sleep(300)
        os._exit(0)
    os.waitpid(first, 0)
    os.close(w)
    daemon = int(os.read(r, 32))
    with open(out + ".tmp", "w") as f:
        json.dump([os.getpid(), session.pid, daemon], f)
    os.replace(out + ".tmp", out)
    print("ready", flush=True)
    if "--exit" in sys.argv:
        sys.exit(0)
    time.sleep(300)
""")


def _start(tmp_path: Path, repo_env: dict[str, str], *script_args: str, rules: tuple[str, ...] = (),
           name: str = "spawner") -> tuple[subprocess.Popen[str], Path, Path]:
    script = tmp_path / "spawner.py"
    script.write_text(SPAWNER)
    pids = tmp_path / "pids.json"
    argv = [sys.executable, "-m", "sdk_ext.cli", "run", str(script), "--no-zero-change", "--no-auto-stop",
            "--jobs-dir", str(tmp_path / "jobs"), "--job-name", name, "--stop-grace", "1", "--rule-timeout", "5"]
    for rule in rules:
        argv += ["--rule", rule]
    runner = subprocess.Popen([*argv, "--", str(pids), *script_args], env=repo_env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, preexec_fn=ctrl_c_reaches_it)
    return runner, pids, tmp_path / "jobs" / name


def _pids(path: Path, runner: subprocess.Popen[str]) -> list[int]:
    def written() -> list[int] | None:
        if runner.poll() is not None:
            raise AssertionError(f"the runner ended early: {runner.communicate()[0]}")
        try:
            return list(json.loads(path.read_text()))
        except (OSError, ValueError):
            return None

    pids = poll_until(written, timeout=60)
    assert len(pids) == 3 and wait_gone(pids, timeout=0) == pids  # all three run
    return pids


def test_what_a_completed_script_left_running_ends_with_the_job(tmp_path: Path, repo_env: dict[str, str]) -> None:
    runner, pids_file, job = _start(tmp_path, repo_env, "--exit")
    out, _ = runner.communicate(timeout=120)
    pids = json.loads(pids_file.read_text())
    assert runner.returncode == 0, out
    assert json.loads((job / "job.json").read_text())["TrainingJobStatus"] == "Completed"
    assert wait_gone(pids, timeout=0) == []  # gone before the runner returned


@pytest.mark.parametrize(("sig", "code", "how"), [(signal.SIGINT, 130, "Ctrl-C"), (signal.SIGTERM, 143, "SIGTERM")])
def test_an_interrupted_runner_stops_the_job_and_ends_every_descendant(sig: int, code: int, how: str, tmp_path: Path,
                                                                       repo_env: dict[str, str]) -> None:
    runner, pids_file, job = _start(tmp_path, repo_env, "--ignore-term")
    pids = _pids(pids_file, runner)
    runner.send_signal(sig)
    out, _ = runner.communicate(timeout=120)
    assert runner.returncode == code, out
    assert f"interrupted ({how}): the job was stopped" in out
    assert wait_gone(pids, timeout=0) == []  # gone before the runner exited
    assert json.loads((job / "job.json").read_text())["TrainingJobStatus"] == "Stopped"


def test_a_killed_runners_job_ends_every_process_and_the_next_command_reports_it_failed(
        tmp_path: Path, repo_env: dict[str, str]) -> None:
    runner, pids_file, job = _start(tmp_path, repo_env, "--ignore-term", rules=("LossNotDecreasing",))
    pids = _pids(pids_file, runner)
    local = json.loads((job / "job.json").read_text())["SdkExtLocal"]
    rule_pid = local["Rules"]["LossNotDecreasing"]["Pid"]
    runner_pid = runner.pid
    runner.kill()  # SIGKILL: the runner can do nothing more
    runner.communicate(timeout=30)
    # the keepers saw it die: SIGTERM (ignored here), SIGKILL after --stop-grace 1
    assert wait_gone([*pids, rule_pid], timeout=20) == []
    assert json.loads((job / "job.json").read_text())["TrainingJobStatus"] == "InProgress"  # nobody said otherwise

    looked = subprocess.run([sys.executable, "-m", "sdk_ext.cli", "report", str(job), "-o",
                             str(tmp_path / "report.html")], env=repo_env, capture_output=True, text=True,
                            timeout=120, check=False)
    final = json.loads((job / "job.json").read_text())
    assert final["TrainingJobStatus"] == "Failed", looked.stdout + looked.stderr
    assert f"the local runner (pid {runner_pid} on " in final["FailureReason"]
    assert "ended without ending the job" in final["FailureReason"]
    [rule] = final["DebugRuleEvaluationStatuses"]
    assert rule["RuleEvaluationStatus"] == "Stopped" and f"pid {runner_pid}" in rule["StatusDetails"]
    assert (job / "output" / "tensors" / "training_job_end.ts").exists()  # readers do not wait for more

    again, _, _ = _start(tmp_path, repo_env, "--exit")  # the same name: refused, saying why
    out, _ = again.communicate(timeout=120)
    assert again.returncode == 2
    assert f"its local runner (pid {runner_pid} on" in out and "has ended; the job is Failed" in out


RACER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from sdk_ext.exceptions import ConfigError
    from sdk_ext.local import LocalSageMakerClient, LocalSettings
    from tests.functional.local.support import request
    tmp, script = Path(sys.argv[1]), sys.argv[2]
    client = LocalSageMakerClient(LocalSettings(jobs_root=tmp / "jobs", poll_interval=0.02))  # auto-stop on
    (tmp / f"ready-{os.getpid()}").write_text("")  # imports done: wait for the others
    go = tmp / "go"
    while not go.exists():
        time.sleep(0.0005)
    try:
        runner = client.prepare_job(request("same-name"), entry_point=script)
    except ConfigError as err:
        print("refused:", err, flush=True)
        sys.exit(2)
    print("won", runner.run()["TrainingJobStatus"], flush=True)
""")


def test_of_runs_of_one_name_at_the_same_moment_one_runs_and_the_others_are_refused(
        tmp_path: Path, repo_env: dict[str, str]) -> None:
    script = tmp_path / "train.py"
    script.write_text("import json, os\nfrom pathlib import Path\n"
                      "trial = Path(json.load(open(os.environ['SMDEBUG_CONFIG_FILE_PATH']))['LocalPath'])\n"
                      "trial.mkdir(parents=True, exist_ok=True)\n(trial / f'written-by-{os.getpid()}').write_text('x')\n")
    racers = [subprocess.Popen([sys.executable, "-c", RACER, str(tmp_path), str(script)], env=repo_env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(4)]
    poll_until(lambda: len(list(tmp_path.glob("ready-*"))) == len(racers), timeout=60)
    (tmp_path / "go").write_text("")
    outs = [r.communicate(timeout=120)[0] for r in racers]
    codes = [r.returncode for r in racers]
    assert sorted(codes) == [0, 2, 2, 2], outs
    assert any("won Completed" in o for o in outs)
    assert all("already holds a job" in o for o, c in zip(outs, codes) if c == 2)
    written = list((tmp_path / "jobs" / "same-name" / "output" / "tensors").glob("written-by-*"))
    assert len(written) == 1  # one job's trial, not a mix
