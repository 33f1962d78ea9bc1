"""A stop (SIGTERM) writes the step in progress, then the process dies of SIGTERM as before.

Real processes and real signals: each script runs in its own interpreter, the test sends the signal.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from sdk_ext.trials import create_trial

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

PRELUDE = """
import os, signal, sys, time
import numpy as np
from sdk_ext.hooks import Hook, SaveConfig
hook = Hook(sys.argv[1], save_config=SaveConfig(save_interval=1), include_collections=["weights"])
for step in range(3):
    with hook.step():
        hook.save_tensor("w", np.full(4, step, dtype=np.float32), "weights")
"""


def _run(tmp_path: Path, body: str, repo_env: dict[str, str], *, signal_after_ready: bool = True
         ) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "train.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "trial")], env=repo_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    if signal_after_ready:
        line = proc.stdout.readline()
        assert line.strip() == "ready", (line, proc.stderr.read() if proc.stderr else "")
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_sigterm_between_steps_writes_the_open_step_and_dies_of_sigterm(tmp_path: Path,
                                                                       repo_env: dict[str, str]) -> None:
    done = _run(tmp_path, """
        hook.begin_step()  # step 3 trained; the script stalls before the next step would close it
        hook.save_tensor("w", np.full(4, 3, dtype=np.float32), "weights")
        print("ready", flush=True)
        time.sleep(60)
        print("not stopped")
    """, repo_env)
    assert done.returncode == -signal.SIGTERM, done.stderr  # still "killed by SIGTERM" for whoever waits
    assert "not stopped" not in done.stdout
    trial = create_trial(str(tmp_path / "trial"))
    assert trial.steps() == [0, 1, 2, 3]
    np.testing.assert_array_equal(trial.tensor("w").value(3), np.full(4, 3, dtype=np.float32))


def test_sigterm_inside_a_hook_call_waits_until_the_call_is_done(tmp_path: Path, repo_env: dict[str, str]) -> None:
    # The signal arrives while save_tensor converts the value: the step is closed only after the call.
    done = _run(tmp_path, """
        class Value:
            def __array__(self, dtype=None, copy=None):
                os.kill(os.getpid(), signal.SIGTERM)
                x = np.arange(5, dtype=np.float64)  # bytecodes run after the signal: the handler runs here
                return x
        hook.begin_step()
        hook.save_tensor("w", Value(), "weights")
        print("after the call", flush=True)
    """, repo_env, signal_after_ready=False)
    assert done.returncode == -signal.SIGTERM, done.stderr
    assert "after the call" not in done.stdout  # it died as soon as the hook call returned
    trial = create_trial(str(tmp_path / "trial"))
    assert trial.steps() == [0, 1, 2, 3]
    np.testing.assert_array_equal(trial.tensor("w").value(3), np.arange(5, dtype=np.float64))


def test_a_scripts_own_sigterm_handler_is_left_alone(tmp_path: Path, repo_env: dict[str, str]) -> None:
    script = tmp_path / "own.py"
    script.write_text(textwrap.dedent("""
        import signal, sys, time
        import numpy as np
        from sdk_ext.hooks import Hook, SaveConfig
        def mine(signum, frame):
            print("my handler", flush=True)
            sys.exit(7)
        signal.signal(signal.SIGTERM, mine)  # before the hook exists: the hook must not replace it
        hook = Hook(sys.argv[1], save_config=SaveConfig(save_interval=1), include_collections=["weights"])
        hook.begin_step()
        hook.save_tensor("w", np.ones(3, dtype=np.float32), "weights")
        print("ready", flush=True)
        time.sleep(60)
    """))
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "trial")], env=repo_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 7, err  # the script's handler decided the exit
    assert "my handler" in out
    assert create_trial(str(tmp_path / "trial")).steps() == [0]  # sys.exit ran atexit: the hook closed


def test_a_forked_child_dies_of_sigterm_without_writing_the_parents_step(tmp_path: Path,
                                                                          repo_env: dict[str, str]) -> None:
    done = _run(tmp_path, """
        hook.begin_step()
        hook.save_tensor("w", np.full(4, 3, dtype=np.float32), "weights")
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # a data-loader-like worker: inherits the handler, not the hooks
            os.write(w, b"up")  # (a signal before CPython's after-fork reset would be dropped)
            time.sleep(60)
            os._exit(0)
        os.read(r, 2)
        os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
        print("child", os.WTERMSIG(status) if os.WIFSIGNALED(status) else -1, flush=True)
        hook.save_tensor("v", np.ones(2, dtype=np.float32), "weights")
        hook.close()
    """, repo_env, signal_after_ready=False)
    assert done.returncode == 0, done.stderr
    assert f"child {int(signal.SIGTERM)}" in done.stdout
    trial = create_trial(str(tmp_path / "trial"))
    assert trial.steps() == [0, 1, 2, 3]
    assert sorted(trial.tensor_names(step=3)) == ["v", "w"]  # written once, by the parent, whole
