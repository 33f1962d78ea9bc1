"""Child processes of a local job: started in their own process group, ended as a group, never orphaned.

* Each child is the leader of a new session (``start_new_session``), so a stop reaches the whole tree
  (a training script's data-loader workers too): SIGTERM to the group, then SIGKILL after a grace
  period.
* On Linux each child also asks the kernel for a signal when the thread that started it dies
  (``PR_SET_PDEATHSIG``, set by a tiny exec wrapper before the real program starts): if the runner
  is killed outright (SIGKILL, OOM), its children end with it instead of living on as orphans. The
  runner therefore starts every child from the one thread that supervises the job for its whole life.
* Output goes to a log file (and, line by line, to an optional sink such as the CLI's console).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

logger = logging.getLogger(__name__)

# Runs before the real program (same pid, via exec): ask for ``sig`` when the parent dies, and exit at
# once if it died already (the race between fork and prctl).
_PDEATHSIG_WRAPPER = (
    "import ctypes, os, sys\n"
    "sig, parent = int(sys.argv[1]), int(sys.argv[2])\n"
    "try:\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, sig, 0, 0, 0)\n"  # 1 = PR_SET_PDEATHSIG
    "except Exception:\n"
    "    pass\n"
    "if os.getppid() != parent:\n"
    "    sys.exit(128 + sig)\n"
    "os.execvp(sys.argv[3], sys.argv[3:])\n"
)
_HAS_PDEATHSIG = sys.platform.startswith("linux")


class Child:
    """One supervised child process (and its process group).

    Args:
        name: for logs and errors (e.g. ``training`` or ``rule VanishingGradient``).
        argv: the program and its arguments.
        env: its whole environment.
        cwd: its working directory.
        log_path: stdout and stderr go here (appended).
        sink: also gets each output line (without the newline), e.g. to show training output.
        parent_death_signal: the signal the child gets if the starting thread dies (Linux); None: none.
        python: the interpreter that runs the parent-death wrapper.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | os.PathLike[str],
        log_path: Path,
        sink: Callable[[str], None] | None = None,
        parent_death_signal: int | None = signal.SIGKILL,
        python: str = sys.executable,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = dict(env)
        self.cwd = os.fspath(cwd)
        self.log_path = log_path
        self.sink = sink
        self.parent_death_signal = parent_death_signal
        self.python = python
        self.process: subprocess.Popen[bytes] | None = None
        self.terminated_at: float | None = None  # monotonic time of the SIGTERM, if one was sent
        self.killed = False
        self._pump: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def start(self) -> None:
        """Start the child (from the supervising thread; see the module docstring).

        Raises:
            OSError: the program could not be started (the message names it).
        """
        argv = self.argv
        if self.parent_death_signal is not None and _HAS_PDEATHSIG:
            argv = [self.python, "-c", _PDEATHSIG_WRAPPER, str(int(self.parent_death_signal)),
                    str(os.getpid()), *argv]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 (closed by the pump thread or below)
        try:
            self.process = subprocess.Popen(
                argv, env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if self.sink else log, stderr=subprocess.STDOUT,
                start_new_session=True, close_fds=True)
        except OSError as err:
            log.close()
            raise OSError(err.errno, f"cannot start {self.name} ({self.argv[0]!r}): {err.strerror}") from err
        if self.sink is None:
            log.close()
            return
        assert self.process.stdout is not None
        self._pump = threading.Thread(target=_pump, args=(self.process.stdout, log, self.sink),
                                      name=f"output of {self.name}", daemon=True)
        self._pump.start()

    def poll(self) -> int | None:
        """The exit code once the child has ended (negative: killed by that signal), else None.

        When the child (the group leader) has ended, whatever is left of its process group is killed
        before the leader is reaped: until then its pid, and so the group id, cannot be reused.
        """
        if self.process is None:
            return None
        if self.process.returncode is not None:
            return self.process.returncode
        try:
            exited = os.waitid(os.P_PID, self.process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # reaped elsewhere already
            return self.process.wait()
        if exited is None:
            return None
        self._signal(signal.SIGKILL)  # stragglers: nothing of a job outlives it
        code = self.process.wait()
        if self._pump is not None:
            self._pump.join(timeout=5)
        return code

    def terminate(self) -> None:
        """SIGTERM to the child's process group (once)."""
        if self.terminated_at is None:
            self.terminated_at = time.monotonic()
            self._signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL to the child's process group."""
        self.killed = True
        self._signal(signal.SIGKILL)

    def escalate(self, grace: float, now: float | None = None) -> None:
        """SIGKILL if a SIGTERM was sent more than ``grace`` seconds ago and the child still runs."""
        if self.terminated_at is None or self.killed or self.poll() is not None:
            return
        if (time.monotonic() if now is None else now) - self.terminated_at >= grace:
            logger.warning("%s did not end %.1f s after SIGTERM; sending SIGKILL", self.name, grace)
            self.kill()

    def stop(self, grace: float, *, poll_interval: float = 0.02) -> int | None:
        """Terminate, wait up to ``grace`` seconds, kill, reap. Returns the exit code.

        The child's whole process group gets the signals, so nothing of it outlives the call.
        """
        if self.process is None:
            return None
        code = self.poll()
        if code is not None:
            return code
        self.terminate()
        deadline = time.monotonic() + grace
        while (code := self.poll()) is None and time.monotonic() < deadline:
            time.sleep(poll_interval)
        if code is None:
            self.kill()
            while (code := self.poll()) is None:
                time.sleep(poll_interval)
        return code

    def _signal(self, sig: int) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            pass  # the whole group is gone already
        except PermissionError:  # the pgid was reused by someone else's process: never signal it
            logger.debug("process group %d of %s is not ours any more", self.process.pid, self.name)

    def output_tail(self, limit: int = 4000) -> str:
        """The last ``limit`` characters of the child's log (for error messages)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - limit))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""


def _pump(stream: IO[bytes], log: IO[bytes], sink: Callable[[str], None]) -> None:
    """Copy the child's output into its log and, line by line, to the sink."""
    try:
        for line in iter(stream.readline, b""):
            log.write(line)
            log.flush()
            try:
                sink(line.decode("utf-8", "replace").rstrip("\n"))
            except Exception:  # a broken console must not stop the log
                logger.exception("output sink failed")
    finally:
        log.close()
        stream.close()


def stop_all(children: Sequence[Child], grace: float, *, poll_interval: float = 0.02) -> None:
    """Stop several children at once: SIGTERM to all, one shared grace period, SIGKILL, reap."""
    running = [c for c in children if c.poll() is None and c.process is not None]
    for child in running:
        child.terminate()
    deadline = time.monotonic() + grace
    while any(c.poll() is None for c in running) and time.monotonic() < deadline:
        time.sleep(poll_interval)
    for child in running:
        if child.poll() is None:
            child.kill()
    for child in running:
        while child.poll() is None:
            time.sleep(poll_interval)
