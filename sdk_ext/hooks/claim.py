"""Which of several unidentified processes writes a local trial (``claim.smd``, smdebug's file name).

A process that knows no rank (no ``torch.distributed``, no ``rank=`` given) is ``worker_0``. When a
script forks workers that each train (``torch.multiprocessing``), several such processes would write
the same ``worker_0`` files; as in smdebug, only the first to claim the trial writes, the others
save nothing (each says so once). The claim is an exclusive ``flock`` on ``{out_dir}/claim.smd``,
held while the hook is open: the system releases it when its process ends, however it ends, so a
crashed or killed writer never leaves a claim that silences the next run in the same directory
(smdebug's ``O_EXCL`` file did, until someone deleted it). The file stays empty (it takes no space
on a full disk) and is removed at close.

Claims are advisory: where ``flock`` does not exist (not POSIX), the trial is not a local directory
(S3: nothing to lock, as in smdebug) or the file cannot be created (a full or read-only disk, which the
writer then reports itself), every process writes.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from sdk_ext.format.paths import CLAIM_FILE

logger = logging.getLogger(__name__)

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]


class TrialClaim:
    """This process's claim on a local trial directory (:meth:`acquire`, :meth:`release`)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.path = Path(root) / CLAIM_FILE
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Claim the trial: True if this process may write it (it holds the claim, or claims are not
        possible here); False if another live process holds it."""
        if fcntl is None:
            return True
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_CREAT | os.O_RDONLY, 0o644)
        except OSError as err:
            logger.debug("no claim on %s (%s): this process writes without one", self.path, err)
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        """Give the claim up and remove the file (safe to call twice; never raises)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        with contextlib.suppress(OSError):
            os.close(fd)


__all__ = ["TrialClaim"]
