"""processes.Child under its keeper (Linux): the program's pid, its exit as it was, a program that cannot be
started named, and its whole tree ended when it ends (real processes)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from sdk_ext.local.jobs.processes import HAS_KEEPER, Child
from tests.functional.local.support import alive, poll_until, wait_gone

pytestmark = pytest.mark.skipif(not HAS_KEEPER, reason="the keeper needs Linux's prctl")


def _child(tmp_path: Path, code: str) -> Child:
    return Child("training", [sys.executable, "-c", code], env=dict(os.environ), cwd=tmp_path,
                 log_path=tmp_path / "log")


def _wait(child: Child, timeout: float = 30) -> int:
    code: int = poll_until(lambda: (c := child.poll()) is not None and (c,), timeout=timeout)[0]
    return code


@pytest.mark.parametrize(("code", "expected"), [("raise SystemExit(3)", 3), ("pass", 0),
                                                ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", -9),
                                                ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", -11)])
def test_the_program_ends_as_it_ended_under_its_keeper(code: str, expected: int, tmp_path: Path) -> None:
    child = _child(tmp_path, code)
    child.start()
    assert child.pid is not None and child.keeper_pid is not None and child.pid != child.keeper_pid
    assert _wait(child) == expected
    assert not list(tmp_path.glob("core*"))  # the keeper does not dump core for the program's signal


def test_a_program_that_cannot_be_executed_is_named(tmp_path: Path) -> None:
    child = Child("rule VG", ["/no/such/evaluator", "--x"], env=dict(os.environ), cwd=tmp_path,
                  log_path=tmp_path / "log")
    with pytest.raises(OSError, match=r"cannot start rule VG \('/no/such/evaluator'\): No such file"):
        child.start()


def test_what_the_program_left_running_ends_with_it(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    child = _child(tmp_path, f"""
import os, subprocess, sys, time
daemon = subprocess.Popen([sys.executable, "-c", "import os, time; os.setsid(); time.sleep(60)"])
open({str(pids)!r}, "w").write(str(daemon.pid))
time.sleep(0.5)
""")
    child.start()
    daemon = int(poll_until(lambda: pids.exists() and pids.read_text(), timeout=30))
    assert alive(daemon)
    assert _wait(child) == 0
    assert wait_gone([daemon], timeout=0) == []


def test_a_stop_reaches_a_descendant_in_another_session(tmp_path: Path) -> None:
    marker = tmp_path / "got-term"
    child = _child(tmp_path, f"""
import os, signal, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import os, signal, time\\nos.setsid()\\n"
                  "signal.signal(signal.SIGTERM, lambda s, f: (open({str(marker)!r}, 'w').close(), os._exit(0)))\\n"
                  "open({str(marker)!r} + '.up', 'w').close()\\ntime.sleep(60)"])
time.sleep(60)
""")
    child.start()
    poll_until(lambda: Path(str(marker) + ".up").exists(), timeout=30)
    started = time.monotonic()
    assert child.stop(5.0) == -signal.SIGTERM
    assert marker.exists()  # the daemon got SIGTERM (its chance to clean up), not only the final SIGKILL
    assert time.monotonic() - started < 5.0
