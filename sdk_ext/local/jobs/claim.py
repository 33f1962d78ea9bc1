"""Who runs a local job: its directory's claim (``runner.json``), taken atomically, and what a later command
does when that runner is gone.

A job name is taken by creating ``<job dir>/runner.json`` with a hard link from a complete temporary file
(``link()`` fails if the name exists: two runs of one name at the same moment cannot both win, and a reader
never sees half a file). It records the runner's pid, the kernel's start time of that pid (so a reused pid
is not taken for the runner), the host and the boot::

    {"Pid": 4242, "StartTicks": 987654, "Host": "box", "BootId": "6f1c...", "Started": "2026-11-26T13:50:14+00:00"}

A runner killed outright (SIGKILL, OOM, a crash) cannot write its job's end. Its keepers end the job's
processes (processes.py); :func:`settle` is what the next reader does: a job.json still ``InProgress`` or
``Stopping`` whose runner is provably gone becomes ``Failed``, with a FailureReason naming the runner; the
rule evaluations still open become ``Stopped`` with that reason; the trial gets its end marker so readers
do not wait for more. A runner on another host (a shared jobs directory) is never judged.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import socket
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sdk_ext.exceptions import ConfigError
from sdk_ext.local.jobs import layout
from sdk_ext.local.jobs.state import TERMINAL_JOB_STATUSES, TERMINAL_RULE_STATUSES, truncate

logger = logging.getLogger(__name__)

RUNNER_FILE = "runner.json"


class JobExistsError(ConfigError):
    """The job name (its directory) is taken by another run."""

    def __init__(self, root: Path, detail: str) -> None:
        super().__init__(f"{root} already holds a job ({detail}); choose another job name or directory",
                         where="local job")
        self.root = root


@dataclass(frozen=True, slots=True)
class RunnerRecord:
    """A runner process, identified well enough to tell later whether it still runs."""

    pid: int
    start_ticks: int | None  # /proc/<pid>/stat field 22 (Linux); None elsewhere
    host: str
    boot_id: str | None
    started: str

    @classmethod
    def current(cls) -> RunnerRecord:
        pid = os.getpid()
        return cls(pid, _start_ticks(pid), socket.gethostname(), _boot_id(),
                   datetime.now(timezone.utc).isoformat(timespec="seconds"))

    def to_json(self) -> dict[str, Any]:
        return {"Pid": self.pid, "StartTicks": self.start_ticks, "Host": self.host, "BootId": self.boot_id,
                "Started": self.started}

    @classmethod
    def from_json(cls, doc: Any) -> RunnerRecord | None:
        if not isinstance(doc, dict) or not isinstance(doc.get("Pid"), int):
            return None
        ticks = doc.get("StartTicks")
        return cls(doc["Pid"], ticks if isinstance(ticks, int) else None, str(doc.get("Host") or ""),
                   doc.get("BootId") if isinstance(doc.get("BootId"), str) else None, str(doc.get("Started") or ""))

    def alive(self) -> bool | None:
        """True while this runner runs, False once it provably does not, None when that cannot be told here
        (another host)."""
        if self.host != socket.gethostname():
            return None
        boot = _boot_id()
        if boot is not None and self.boot_id is not None and boot != self.boot_id:
            return False  # the machine restarted since
        if self.start_ticks is not None:
            ticks = _start_ticks(self.pid)
            return ticks is not None and ticks == self.start_ticks
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}, started {self.started}"


def _start_ticks(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[-1].split()
        return int(fields[19])  # field 22 of stat; fields[0] here is field 3 (state)
    except (OSError, IndexError, ValueError):
        return None


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip() or None
    except OSError:
        return None


def read_record(root: Path) -> RunnerRecord | None:
    """The claim's record; None if there is none (or it is unreadable)."""
    try:
        return RunnerRecord.from_json(json.loads((root / RUNNER_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


class Claim:
    """This process's claim on a job directory (see the module docstring)."""

    def __init__(self, root: Path, record: RunnerRecord, *, made: list[Path]) -> None:
        self.root, self.record = root, record
        self.made = made  # the directories this claim created, the job directory first

    @property
    def created_dir(self) -> bool:
        """Whether this claim made the job directory (so everything in it is this run's)."""
        return bool(self.made) and self.made[0] == self.root

    @classmethod
    def take(cls, root: Path) -> Claim:
        """Take ``root`` for this process.

        Raises:
            JobExistsError: another run holds it, or it holds a job already (job.json).
        """
        made = _make_dirs(root)
        record = RunnerRecord.current()
        try:
            _link_new(root / RUNNER_FILE, json.dumps(record.to_json(), indent=1) + "\n", root)
        except BaseException:
            _remove_empty(made)
            raise
        claim = cls(root, record, made=made)
        if (root / "job.json").exists():  # a job of an older sdk_ext, which did not claim its directory
            claim.release()
            raise JobExistsError(root, "job.json")
        return claim

    def release(self) -> None:
        """Give the name back (nothing ran): remove the claim, and the directories this claim made that are
        empty now."""
        with contextlib.suppress(FileNotFoundError):
            (self.root / RUNNER_FILE).unlink()
        _remove_empty(self.made)


def _make_dirs(path: Path) -> list[Path]:
    """``mkdir -p path``; returns the directories it created, deepest first."""
    missing = []
    here = path
    while not here.exists() and here != here.parent:
        missing.append(here)
        here = here.parent
    made = []
    for directory in reversed(missing):
        try:
            directory.mkdir()
            made.append(directory)
        except FileExistsError:  # made meanwhile by someone else: theirs
            pass
    return made[::-1]


def _remove_empty(dirs: list[Path]) -> None:
    """Remove ``dirs`` (deepest first) that are empty; leave the others (someone else's files are in them)."""
    for directory in dirs:
        with contextlib.suppress(OSError):
            directory.rmdir()


def _link_new(target: Path, text: str, root: Path) -> None:
    """Create ``target`` with ``text``, atomically and only if it does not exist."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    try:
        try:
            tmp.write_text(text, encoding="utf-8")
        except OSError as err:
            raise OSError(err.errno, err.strerror, str(target)) from err
        os.link(tmp, target)
    except FileExistsError:
        raise JobExistsError(root, _holder(root)) from None
    except OSError as err:
        if err.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS, errno.EXDEV):
            raise
        try:  # a file system without hard links: exclusive create (a reader may see it empty for a moment)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            raise JobExistsError(root, _holder(root)) from None
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _holder(root: Path) -> str:
    record = read_record(root)
    if record is None:
        return "another run is creating it"
    alive = record.alive()
    if alive is False:
        job = settle(root)
        status = f"; the job is {job.get('TrainingJobStatus')}" if job else ""
        return f"its local runner ({record.describe()}) has ended{status}"
    return f"run by the local runner {record.describe()}" + ("" if alive else ", on another host")


def settle(job_dir: Path) -> dict[str, Any] | None:
    """A job whose runner is gone while its job.json says it runs: end it ``Failed`` (see the module docstring).

    Returns:
        The job.json as it is now (settled or not); None when there is no readable job.json.
    """
    try:
        job: dict[str, Any] = json.loads((job_dir / "job.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if job.get("TrainingJobStatus") in TERMINAL_JOB_STATUSES:
        return job
    record = read_record(job_dir)
    if record is None or record.alive() is not False:
        return job
    try:
        last_seen = datetime.fromtimestamp((job_dir / "job.json").stat().st_mtime, timezone.utc).isoformat()
    except OSError:
        last_seen = datetime.now(timezone.utc).isoformat()
    reason = (f"InternalServerError: the local runner ({record.describe()}) ended without ending the job (it was "
              "killed or crashed); the job's processes were ended with it, and the trial keeps what was saved "
              "until then")
    was_stopping = job.get("TrainingJobStatus") == "Stopping"
    job["TrainingJobStatus"] = "Failed"
    job["FailureReason"] = truncate(reason)
    job["TrainingEndTime"] = job["LastModifiedTime"] = last_seen
    transitions = job.setdefault("SecondaryStatusTransitions", [])
    if transitions and "EndTime" not in transitions[-1]:
        transitions[-1]["EndTime"] = last_seen
    transitions.append({"Status": "Failed", "StartTime": last_seen, "EndTime": last_seen,
                        "StatusMessage": truncate(f"Training job failed. Reason: {reason}", 512)})
    job["SecondaryStatus"] = "Failed"
    for rule in job.get("DebugRuleEvaluationStatuses") or []:
        if rule.get("RuleEvaluationStatus") not in TERMINAL_RULE_STATUSES:
            rule["RuleEvaluationStatus"] = "Stopped"
            rule["StatusDetails"] = truncate(f"Rule evaluation stopped: {reason}")
            rule["LastModifiedTime"] = last_seen
    local = job.setdefault("SdkExtLocal", {})
    local["RunnerEnded"] = {"Runner": record.to_json(), "SettledAt": datetime.now(timezone.utc).isoformat(),
                            "WasStopping": was_stopping}
    try:
        layout.write_json(job_dir / "job.json", job)
        trial = local.get("TrialDir")
        if trial:
            layout.write_end_marker(Path(trial))
    except OSError as err:
        logger.warning("job %s: its runner is gone, but job.json could not be updated: %s", job_dir, err)
        return job
    logger.warning("job %s: the local runner (%s) is gone; the job is now Failed", job_dir, record.describe())
    return job


__all__ = ["RUNNER_FILE", "Claim", "JobExistsError", "RunnerRecord", "read_record", "settle"]
