"""A local job's disk filling up: told apart from bad input, and still reported when nothing more fits.

When the file system of the job directory fills (the hook writing tensors, most often), the job cannot go
on usefully: the runner ends it ``Failed`` with a FailureReason naming the file that could not be written,
stops the rule evaluations with that reason, and ``sdk-ext run`` exits 1 (a failed job), not 2 (bad input).

The runner sees it when one of its own writes fails (job.json, the trial's end marker, the training log), when
the training process says so on its output (the hook logs the key it could not write and disables itself; a
script's own ``OSError: [Errno 28]`` reads the same), or when less than :data:`LOW_WATER` is free on the job
directory's file system; it looks once more when training ends, before the outcome is decided. The output is
needed because a writer that fails cleans up its temporary files: by the time the runner looks, the disk may
have room again, though the step did not fit.

Saying so needs a few kilobytes (job.json, the events, the trial's end marker) on a disk that has none:
:class:`Reserve` holds :data:`RESERVE_BYTES` in ``<job dir>/.sdk-ext-reserve`` from the start of the job and
gives them back once every process of the job has ended, just before the runner writes the job's end.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from sdk_ext.exceptions import SdkExtError

RESERVE_NAME = ".sdk-ext-reserve"
RESERVE_BYTES = 1 << 20
LOW_WATER = 64 << 10  # less than this free and nothing useful fits (one saved step is usually more)
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class DiskFullError(SdkExtError, OSError):
    """The job directory's file system is full (a failure of the job's environment, not of its input)."""

    def __init__(self, cause: OSError, path: str | os.PathLike[str] | None, root: Path) -> None:
        where = os.fspath(path) if path is not None else (cause.filename or str(root))
        super().__init__(cause.errno, f"{cause.strerror or 'No space left on device'}: cannot write {where} (the "
                         f"file system of the job directory {root} is full); free space there, or choose a "
                         "larger disk (sdk-ext run --jobs-dir), then run the job again")
        self.path, self.root = str(where), root

    @property
    def failure_reason(self) -> str:
        """The job's FailureReason."""
        return f"ClientError: {self.strerror}"


def free_bytes(path: Path) -> int | None:
    """Bytes an unprivileged process may still write on ``path``'s file system; None if unknown."""
    try:
        st = os.statvfs(path)
    except (OSError, AttributeError):
        return None
    return st.f_bavail * st.f_frsize


_FULL_LINE = re.compile(r"(?:No space left on device|Disk quota exceeded)")
_PATH_BEFORE = re.compile(r"(?:writing|cannot write|open|create) '?(/[^\s:']+)'?\s*:?\s*(?:\[Errno \d+\] )?"
                          r"(?:No space left on device|Disk quota exceeded)")
_PATH_AFTER = re.compile(r"(?:No space left on device|Disk quota exceeded)\S*:? '(/[^']+)'")


def full_in_output(line: str) -> OSError | None:
    """An output line of a job's program that says the disk (or quota) is full, as the OSError it reports
    (with the path when the line names one); None for any other line."""
    found = _FULL_LINE.search(line)
    if found is None:
        return None
    code = errno.EDQUOT if found.group(0).startswith("Disk") else errno.ENOSPC
    path = _PATH_BEFORE.search(line) or _PATH_AFTER.search(line)
    return OSError(code, os.strerror(code), path.group(1) if path else None)


def is_full(err: BaseException) -> bool:
    """Whether ``err`` says the disk (or the user's quota) is full."""
    return isinstance(err, OSError) and err.errno in FULL_ERRNOS


class Reserve:
    """Space held back for the job's last words (see the module docstring)."""

    def __init__(self, root: Path, size: int = RESERVE_BYTES) -> None:
        self.path = root / RESERVE_NAME
        self.size = size

    def take(self) -> None:
        """Hold the space now.

        Raises:
            DiskFullError: not even this much is free: the job would fail at once.
        """
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                try:
                    os.posix_fallocate(fd, 0, self.size)
                except OSError as err:
                    if err.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                        raise
                    _write_zeros(fd, self.size)  # a file system without fallocate
            finally:
                os.close(fd)
        except OSError as err:
            self.give_back()
            if is_full(err):
                raise DiskFullError(err, self.path, self.path.parent) from err
            raise

    def give_back(self) -> None:
        """Free the space (idempotent)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


class Watch:
    """A runner's watch over its job's disk: the reserve, and the first sign that the disk is full.

    Args:
        root: the job directory.
        trial: the trial directory (where the job writes most).
        on_full: called once, when the disk is first found full (e.g. to wake the supervisor).
    """

    def __init__(self, root: Path, trial: Path, *, on_full: Callable[[DiskFullError], None]) -> None:
        self.root, self.trial, self.on_full = root, trial, on_full
        self.reserve = Reserve(root)
        self.full: DiskFullError | None = None  # set once: the job ends Failed with its reason
        self._next_check = 0.0

    def note(self, err: OSError, path: Path) -> bool:
        """A write of the job failed: True if it was for lack of space (then noted), False otherwise."""
        if not is_full(err):
            return False
        if self.full is None:
            self.full = DiskFullError(err, path, self.root)
            self.on_full(self.full)
        return True

    def output_line(self, line: str, program: Path) -> None:
        """A line the training process printed: a full disk it reports is noted (the path it names, else
        ``program``'s log)."""
        err = full_in_output(line)
        if err is not None:
            self.note(err, Path(err.filename) if err.filename else program)

    def check(self, log_error: OSError | None, log: Path, *, now: bool = False) -> None:
        """The training log could not be written, or less than :data:`LOW_WATER` is free (looked at once a
        second, or ``now``)."""
        if log_error is not None:
            self.note(log_error, log)
        if self.full is not None or (not now and time.monotonic() < self._next_check):
            return
        self._next_check = time.monotonic() + 1.0
        where = self.trial if self.trial.exists() else self.root
        free = free_bytes(where)
        if free is not None and free < LOW_WATER:
            self.note(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(where)), where)


def _write_zeros(fd: int, size: int) -> None:
    block = b"\0" * (1 << 16)
    written = 0
    while written < size:
        written += os.write(fd, block[: size - written])
    os.fsync(fd)


__all__ = ["LOW_WATER", "RESERVE_BYTES", "DiskFullError", "Reserve", "Watch", "free_bytes", "full_in_output",
           "is_full"]
