"""The keeper: one small process between the runner and each program of a local job (Linux), so that every
process the program starts ends when the program or the runner does, however it was started.

    python -I keeper.py RUNNER_PID DEATH_SIGNAL DEATH_GRACE REPORT_FD -- PROGRAM [ARGS...]

It runs by its file path with the standard library only (``-I``: no site, no PYTHONPATH), so it starts the
same whatever the job's environment holds. It:

* makes itself a *child subreaper* (``PR_SET_CHILD_SUBREAPER``): a descendant whose parent dies (a double
  fork, a daemon that called ``setsid()``) is re-parented to the keeper, not to init, so the keeper can
  always find and end the whole tree (its descendants, read from ``/proc``), wherever they moved their
  session or process group;
* asks for SIGHUP when the runner dies (``PR_SET_PDEATHSIG``; checked against ``RUNNER_PID`` to close the
  race with the fork): then it sends the tree ``DEATH_SIGNAL`` (SIGTERM lets a hook write its open step) and
  SIGKILL ``DEATH_GRACE`` seconds later. A program that ignores SIGTERM cannot outlive a SIGKILLed runner;
* starts the program in its own process group and tells the runner through ``REPORT_FD`` either
  ``started <pid>`` or ``failed <errno> <message>`` (the program could not be executed);
* on SIGTERM or SIGINT (the runner stops the job) passes SIGTERM to the program's group and to every other
  descendant; on SIGUSR1 (the runner's SIGKILL, after its grace period) kills the tree;
* when the program ends, kills whatever of the tree is left (nothing of a job outlives it) -- after a stop,
  what is left got SIGTERM too and may end by itself until the SIGKILL --, reaps it all, and ends as the
  program ended: the same exit code, or killed by the same signal (no core file).

Everything but the program's output goes to stderr as one ``sdk-ext keeper:`` line, only when something is
wrong. The runner side is :class:`sdk_ext.local.jobs.processes.Child`.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
KILL_SIGNAL = signal.SIGUSR1  # the runner's "kill the tree now"
DEATH_NOTICE = signal.SIGHUP  # the kernel's "the runner died"

_libc = ctypes.CDLL(None, use_errno=True)
_program = 0  # the program's pid (its process group too)
_status: int | None = None  # its wait status once reaped
_dying_at: float | None = None  # the runner died: SIGKILL for everything at this time
_stopping = False  # the tree got SIGTERM: what outlives the program gets until the SIGKILL to end


def _prctl(option: int, value: int) -> None:
    if _libc.prctl(option, value, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _say(text: str) -> None:
    try:
        os.write(2, f"sdk-ext keeper: {text}\n".encode("utf-8", "replace"))
    except OSError:
        pass


def descendants() -> list[int]:
    """Every live descendant of this process (from /proc; zombies included, they are reaped below)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:  # no /proc here: only the program's group and our own children can be reached
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # gone meanwhile
        fields = stat.rsplit(b")", 1)[-1].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    todo = [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _reap() -> bool:
    """Reap every child that has ended; False once there is no child left at all."""
    global _status
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True
        if pid == _program:
            _status = status


def _signal_tree(sig: int) -> None:
    """``sig`` to the program's group (while it is unreaped its pid names only it) and every descendant."""
    if _status is None:
        try:
            os.killpg(_program, sig)
        except OSError:
            pass
    for pid in descendants():
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def kill_tree(deadline: float = 30.0) -> None:
    """SIGKILL every descendant until none is left (a fork in flight re-parents its child to us: loop)."""
    end = time.monotonic() + deadline
    while _reap():
        _signal_tree(signal.SIGKILL)
        if time.monotonic() > end:
            _say(f"processes {descendants()} did not end within {deadline:.0f} s of SIGKILL; leaving them")
            return
        time.sleep(0.01)


def _on_stop(signum: int, frame: object) -> None:
    global _stopping
    _stopping = True
    _signal_tree(signal.SIGTERM)


def _on_kill(signum: int, frame: object) -> None:
    kill_tree()


def _on_death_notice(signum: int, frame: object, *, runner: int, first: int, grace: float) -> None:
    global _dying_at
    if os.getppid() == runner or _dying_at is not None:
        return  # not from the kernel (the runner is still our parent), or already handled
    _dying_at = time.monotonic() + grace
    if first == signal.SIGKILL or grace <= 0:
        kill_tree()
        return
    global _stopping
    _stopping = True
    _signal_tree(first)
    signal.setitimer(signal.ITIMER_REAL, grace)


def _on_alarm(signum: int, frame: object) -> None:
    kill_tree()


def _start(argv: list[str], report_fd: int) -> int:
    """Fork and exec the program in its own process group; report to the runner. Returns its pid or 0."""
    ready_r, ready_w = os.pipe()  # close-on-exec: EOF after a successful exec; else the child writes the errno
    keeper = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(ready_r)
            os.close(report_fd)
            os.setpgid(0, 0)
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGALRM):
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # should the keeper itself be killed
            if os.getppid() != keeper:
                os._exit(127)
            os.execvp(argv[0], argv)
        except OSError as err:
            os.write(ready_w, f"{err.errno} {err.strerror}".encode("utf-8", "replace"))
        except BaseException as err:  # noqa: BLE001 - the child must never return into the keeper
            os.write(ready_w, f"0 {err}".encode("utf-8", "replace"))
        os._exit(127)
    os.close(ready_w)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass  # the child did it already (and may have exec'd)
    failure = b""
    while chunk := os.read(ready_r, 4096):
        failure += chunk
    os.close(ready_r)
    if failure:
        os.waitpid(pid, 0)
        code, _, message = failure.decode("utf-8", "replace").partition(" ")
        os.write(report_fd, f"failed {code} {message}\n".encode())
        os.close(report_fd)
        return 0
    os.write(report_fd, f"started {pid}\n".encode())
    os.close(report_fd)
    return pid


def _end_as(status: int) -> None:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # (those two have no handler to reset)
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
        time.sleep(1)  # the signal ends us here (a stop signal would not: fall through)
    sys.exit(os.waitstatus_to_exitcode(status) if not os.WIFSIGNALED(status) else 128 + os.WTERMSIG(status))


def main(argv: list[str]) -> None:
    global _program, _status
    if len(argv) < 6 or argv[4] != "--":
        _say("usage: keeper.py RUNNER_PID DEATH_SIGNAL DEATH_GRACE REPORT_FD -- PROGRAM [ARGS...]")
        sys.exit(2)
    runner, first, grace, report_fd = int(argv[0]), int(argv[1]), float(argv[2]), int(argv[3])
    signal.signal(signal.SIGTERM, _on_stop)
    signal.signal(signal.SIGINT, _on_stop)
    signal.signal(KILL_SIGNAL, _on_kill)
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.signal(DEATH_NOTICE, lambda s, f: _on_death_notice(s, f, runner=runner, first=first, grace=grace))
    try:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        _prctl(PR_SET_PDEATHSIG, DEATH_NOTICE)
    except OSError as err:
        _say(f"prctl failed ({err}); descendants that leave the program's process group may outlive it")
    if os.getppid() != runner:  # the runner died before PR_SET_PDEATHSIG took effect
        os.write(report_fd, f"failed {errno.ESRCH} the local runner ended before the program started\n".encode())
        sys.exit(1)
    _program = _start(argv[5:], report_fd)
    if not _program:
        sys.exit(127)
    while True:  # reap whatever ends; signals are handled in between (waitpid is resumed after them)
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if pid == _program:
            _status = status
            if not _stopping:
                kill_tree()  # the program ended: nothing it started outlives it
            # else: the rest got SIGTERM with it and has until the SIGKILL (the runner's, or the alarm) to end
    _end_as(_status if _status is not None else 0)


if __name__ == "__main__":
    main(sys.argv[1:])
