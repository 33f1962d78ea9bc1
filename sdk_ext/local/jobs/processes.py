"""Child processes of a local job: each program with its whole process tree, ended with the job, never orphaned.

On Linux every program runs under a *keeper* (keeper.py, a small process of the standard library only):
a child subreaper, so that every descendant of the program, a daemon that called ``setsid()`` or
double-forked included, stays in the keeper's tree, which it ends as a whole:

* a stop (:meth:`Child.terminate`) is SIGTERM to the program's process group and to each descendant
  that left it; :meth:`Child.kill` has the keeper SIGKILL the whole tree;
* when the program ends, whatever it left running is killed before the keeper ends as it did (same exit
  code, or killed by the same signal);
* when the runner dies, however (Ctrl-C, SIGTERM, SIGKILL, OOM), the kernel tells each keeper
  (``PR_SET_PDEATHSIG``), which sends its tree the child's ``parent_death_signal`` and SIGKILL
  ``death_grace`` seconds later: a script that ignores SIGTERM cannot outlive a killed runner. The
  signal comes when the *thread* that started the keeper ends, so the runner starts every child from
  the one thread that supervises the job for its whole life.

Elsewhere (no ``prctl``) the program itself is the leader of a new session and the signals go to its
process group, as before. Output goes to a log file (and, line by line, to an optional sink such as the
CLI's console). Any number of children, each its own tree: a job may run several (training, rule
evaluators, a system monitor, one per host or rank).
"""

from __future__ import annotations

import errno
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

logger = logging.getLogger(__name__)

KEEPER = Path(__file__).with_name("keeper.py")
HAS_KEEPER = sys.platform.startswith("linux")
_KILL = signal.SIGUSR1  # to the keeper: SIGKILL the whole tree (keeper.py's KILL_SIGNAL)
_START_TIMEOUT = 60.0  # seconds for the keeper to say whether the program started
_KEEPER_KILL_GRACE = 10.0  # a keeper asked to kill its tree that is still there after this is itself killed


class Child:
    """One supervised program, and every process it starts.

    Args:
        name: for logs and errors (e.g. ``training`` or ``rule VanishingGradient``).
        argv: the program and its arguments.
        env: its whole environment.
        cwd: its working directory.
        log_path: stdout and stderr go here (appended).
        sink: also gets each output line (without the newline), e.g. to show training output.
        parent_death_signal: what the program's tree gets first if the runner dies: SIGKILL (or None), or
            e.g. SIGTERM, then SIGKILL after ``death_grace`` seconds (a hook writes its open step on SIGTERM).
        death_grace: seconds from ``parent_death_signal`` to SIGKILL when the runner died.
        python: the interpreter that runs the keeper (the standard library is all it needs).
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
        death_grace: float = 5.0,
        python: str = sys.executable,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = dict(env)
        self.cwd = os.fspath(cwd)
        self.log_path = log_path
        self.sink = sink
        self.parent_death_signal = parent_death_signal
        self.death_grace = death_grace
        self.python = python
        self.process: subprocess.Popen[bytes] | None = None  # the keeper (or, without one, the program)
        self.program_pid: int | None = None
        self.terminated_at: float | None = None  # monotonic time of the SIGTERM, if one was sent
        self.killed = False
        self.output_error: OSError | None = None  # the log could not be written (e.g. a full disk)
        self._killed_at: float | None = None
        self._keeper = HAS_KEEPER
        self._pump: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        """The program's pid (not the keeper's)."""
        return self.program_pid

    @property
    def keeper_pid(self) -> int | None:
        return self.process.pid if self.process is not None and self._keeper else None

    def start(self) -> None:
        """Start the program (from the supervising thread; see the module docstring).

        Raises:
            OSError: the program could not be started (the message names it).
        """
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 (closed by the pump thread or below)
        report_r = report_w = -1
        argv = self.argv
        if self._keeper:
            report_r, report_w = os.pipe()
            first = signal.SIGKILL if self.parent_death_signal is None else int(self.parent_death_signal)
            argv = [self.python, "-I", "-S", str(KEEPER), str(os.getpid()), str(first), repr(float(self.death_grace)),
                    str(report_w), "--", *self.argv]
        try:
            self.process = subprocess.Popen(
                argv, env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if self.sink else log, stderr=subprocess.STDOUT,
                start_new_session=True, close_fds=True, pass_fds=(report_w,) if self._keeper else ())
        except OSError as err:
            log.close()
            for fd in (report_r, report_w):
                if fd >= 0:
                    os.close(fd)
            raise OSError(err.errno, f"cannot start {self.name} ({self.argv[0]!r}): {err.strerror}") from err
        if self._keeper:
            os.close(report_w)
            self._await_start(report_r, log)
        else:
            self.program_pid = self.process.pid
        if self.sink is None:
            log.close()
            return
        assert self.process.stdout is not None
        self._pump = threading.Thread(target=_pump, args=(self.process.stdout, log, self.sink, self),
                                      name=f"output of {self.name}", daemon=True)
        self._pump.start()

    def _await_start(self, report: int, log: IO[bytes]) -> None:
        """The keeper's one line: ``started PID`` or ``failed ERRNO MESSAGE``."""
        assert self.process is not None
        text, deadline = b"", time.monotonic() + _START_TIMEOUT
        try:
            while time.monotonic() < deadline:
                ready, _, _ = select.select([report], [], [], max(0.0, deadline - time.monotonic()))
                if not ready:
                    break
                chunk = os.read(report, 4096)
                if not chunk:
                    break
                text += chunk
        finally:
            os.close(report)
        word, _, rest = text.decode("utf-8", "replace").strip().partition(" ")
        if word == "started" and rest.isdigit():
            self.program_pid = int(rest)
            return
        self.process.kill()
        self.process.wait()
        log.close()
        if word == "failed":
            code, _, message = rest.partition(" ")
            number = int(code) if code.isdigit() else errno.ENOEXEC
            raise OSError(number, f"cannot start {self.name} ({self.argv[0]!r}): {message or os.strerror(number)}")
        raise OSError(errno.ECHILD, f"cannot start {self.name} ({self.argv[0]!r}): its keeper ended without "
                      f"starting it ({text.decode('utf-8', 'replace').strip() or 'no word'}; see {self.log_path})")

    def poll(self) -> int | None:
        """The exit code once the program has ended and its tree is gone (negative: killed by that signal)."""
        if self.process is None:
            return None
        if self.process.returncode is not None:
            return self.process.returncode
        if not self._keeper:
            return self._poll_leader()
        code = self.process.poll()
        if code is None:
            if self._killed_at is not None and time.monotonic() - self._killed_at > _KEEPER_KILL_GRACE:
                logger.warning("the keeper of %s did not end its processes %.0f s after being asked; killing it",
                               self.name, _KEEPER_KILL_GRACE)
                self.process.kill()
                self._killed_at = None
            return None
        if self._pump is not None:
            self._pump.join(timeout=5)
        return code

    def _poll_leader(self) -> int | None:
        """Without a keeper: the leader has ended, so kill what is left of its group, then reap it (until
        then its pid, and so the group id, cannot be reused)."""
        assert self.process is not None
        try:
            exited = os.waitid(os.P_PID, self.process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # reaped elsewhere already
            return self.process.wait()
        if exited is None:
            return None
        self._signal_group(signal.SIGKILL)  # stragglers: nothing of a job outlives it
        code = self.process.wait()
        if self._pump is not None:
            self._pump.join(timeout=5)
        return code

    def terminate(self) -> None:
        """SIGTERM to the program's tree (once)."""
        if self.terminated_at is None:
            self.terminated_at = time.monotonic()
            self._send(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL to the program's whole tree."""
        self.killed = True
        if self._killed_at is None:
            self._killed_at = time.monotonic()
        self._send(signal.SIGKILL)

    def escalate(self, grace: float, now: float | None = None) -> None:
        """SIGKILL if a SIGTERM was sent more than ``grace`` seconds ago and the child still runs."""
        if self.terminated_at is None or self.killed or self.poll() is not None:
            return
        if (time.monotonic() if now is None else now) - self.terminated_at >= grace:
            logger.warning("%s did not end %.1f s after SIGTERM; sending SIGKILL", self.name, grace)
            self.kill()

    def stop(self, grace: float, *, poll_interval: float = 0.02) -> int | None:
        """Terminate, wait up to ``grace`` seconds, kill, reap. Returns the exit code.

        The program's whole tree gets the signals, so nothing of it outlives the call.
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

    def _send(self, sig: int) -> None:
        if self.process is None or self.process.returncode is not None:
            return
        if not self._keeper:
            self._signal_group(sig)
            return
        try:  # the keeper is our unreaped child: its pid is still its own
            self.process.send_signal(_KILL if sig == signal.SIGKILL else sig)
        except ProcessLookupError:
            pass

    def _signal_group(self, sig: int) -> None:
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


def _pump(stream: IO[bytes], log: IO[bytes], sink: Callable[[str], None], child: Child) -> None:
    """Copy the child's output into its log and, line by line, to the sink. A log that cannot be written
    (a full disk) is recorded in ``child.output_error`` and the output still drained: the program never
    blocks or dies on its stdout."""
    try:
        for line in iter(stream.readline, b""):
            if child.output_error is None:
                try:
                    log.write(line)
                    log.flush()
                except OSError as err:
                    child.output_error = OSError(err.errno, err.strerror, str(child.log_path))
                    logger.error("%s: its log %s cannot be written (%s); its output goes on to the console only",
                                 child.name, child.log_path, err.strerror)
            try:
                sink(line.decode("utf-8", "replace").rstrip("\n"))
            except Exception:  # a broken console must not stop the log
                logger.exception("output sink failed")
    finally:
        try:
            log.close()
        except OSError:
            pass  # the buffered rest could not be written either: output_error says so already
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
