"""Uploading through a bounded local spool: completed files wait on local disk until the remote store takes them.

A writer to remote storage (S3) hands each completed step to :class:`UploadSpool` as one *group*
(the step's event file, then its index file). The group's files are written under ``directory`` at
their keys (the spool is a copy of the trial's layout) and one thread uploads them in submission
order, a file at a time, deleting each local copy once the remote store has it::

    {directory}/events/000000000012/000000000012_worker_0.tfevents
    {directory}/index/000000000/000000000012_worker_0.json
    {directory}/collections/000000000/worker_0_collections.json

Invariants a reader relies on (docs/FORMAT.md#when-each-file-appears): uploads happen in submission order, never
two at once, so an index file reaches the remote store only after its event file, index files
arrive in key order (readers list with ``StartAfter``), and ``training_job_end.ts`` arrives after
everything submitted before it. Each remote object appears whole (one PUT).

Failures: a transient failure (throttling, 5xx, a refused or dropped connection, and anything that
is not one of the two below) is retried with backoff for as long as the spool lives; it never
disables the writer. Steps completed meanwhile wait in the spool, up to ``max_bytes``; during an
outage a step that does not fit is not saved (a warning names it; the count is logged at close),
while uploads work a full spool makes the writer wait for room (a store slower than training
slows training, as direct writes did, and loses nothing). A permanent failure
(:class:`~sdk_ext.exceptions.StorageNotFound`: the bucket is missing;
:class:`~sdk_ext.exceptions.StorageAccessDenied`) stops uploading: the next :meth:`UploadSpool.submit`
or :meth:`UploadSpool.close` raises it, naming where the files not uploaded are kept.

:meth:`UploadSpool.close` waits up to ``drain_timeout`` for the queue to empty, then logs how many
steps were not uploaded and where they are, and returns.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import shutil
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from sdk_ext.exceptions import StorageAccessDenied, StorageError, StorageNotFound
from sdk_ext.storage.base import Buffer, Storage

log = logging.getLogger(__name__)

_MiB = 1024 * 1024
#: Environment variables read by :meth:`SpoolConfig.from_env` (entry points only).
ENV_DIR = "SDK_EXT_SPOOL_DIR"
ENV_MAX_BYTES = "SDK_EXT_SPOOL_MAX_BYTES"
ENV_DRAIN_TIMEOUT = "SDK_EXT_SPOOL_DRAIN_TIMEOUT"
ENV_BASE_DELAY = "SDK_EXT_UPLOAD_RETRY_BASE_DELAY"
ENV_MAX_DELAY = "SDK_EXT_UPLOAD_RETRY_MAX_DELAY"
SAGEMAKER_SPOOL_DIR = "/opt/ml/output/sdk_ext-spool"  # on the job's storage volume; not uploaded by SageMaker


def default_spool_dir(environ: Mapping[str, str] = os.environ) -> str:
    """Inside a SageMaker training container (``TRAINING_JOB_NAME`` set and ``/opt/ml/output`` present):
    :data:`SAGEMAKER_SPOOL_DIR`, on the volume sized by ``VolumeSizeInGB`` (SageMaker uploads only
    ``/opt/ml/model`` and ``/opt/ml/output/data``). Elsewhere: ``{tempdir}/sdk_ext-spool``."""
    if environ.get("TRAINING_JOB_NAME") and os.path.isdir("/opt/ml/output"):
        return SAGEMAKER_SPOOL_DIR
    return os.path.join(tempfile.gettempdir(), "sdk_ext-spool")


@dataclass(frozen=True, slots=True, kw_only=True)
class SpoolConfig:
    """Where and how much to keep while the remote store does not answer.

    Attributes:
        directory: the spool's root; each writer uses its own new subdirectory. None: :func:`default_spool_dir`.
        max_bytes: the most bytes waiting in one writer's spool; a step that does not fit is not saved.
        drain_timeout: seconds :meth:`UploadSpool.close` (and a flush) waits for uploads to finish.
        base_delay: the first pause after a failed upload; it doubles up to ``max_delay``.
        max_delay: the longest pause between two attempts (how soon a returning store is noticed).
    """

    directory: str | None = None
    max_bytes: int = 1024 * _MiB
    drain_timeout: float = 60.0
    base_delay: float = 0.5
    max_delay: float = 10.0

    def __post_init__(self) -> None:
        if self.max_bytes < 0 or self.drain_timeout < 0 or self.base_delay < 0 or self.max_delay < 0:
            raise ValueError(f"SpoolConfig values must be >= 0: {self}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> SpoolConfig:
        """The configuration from ``SDK_EXT_SPOOL_DIR``, ``SDK_EXT_SPOOL_MAX_BYTES``,
        ``SDK_EXT_SPOOL_DRAIN_TIMEOUT`` (seconds), ``SDK_EXT_UPLOAD_RETRY_BASE_DELAY`` and
        ``SDK_EXT_UPLOAD_RETRY_MAX_DELAY`` (seconds); an unset or invalid value keeps its default
        (an invalid one with a warning: this runs inside training, which must go on)."""
        defaults = cls()
        values: dict[str, object] = {"directory": environ.get(ENV_DIR) or None}
        for name, attr, kind in (
            (ENV_MAX_BYTES, "max_bytes", int),
            (ENV_DRAIN_TIMEOUT, "drain_timeout", float),
            (ENV_BASE_DELAY, "base_delay", float),
            (ENV_MAX_DELAY, "max_delay", float),
        ):
            raw = environ.get(name)
            if raw is None or raw == "":
                continue
            try:
                value = kind(raw)
                if value < 0:
                    raise ValueError("negative")
            except ValueError:
                log.warning("%s=%r is not a number >= 0; using the default %s", name, raw, getattr(defaults, attr))
                continue
            values[attr] = value
        return cls(**values)  # type: ignore[arg-type]


class SpoolFile:
    """A file being written into the spool (it joins the upload queue through :meth:`UploadSpool.submit`)."""

    def __init__(self, spool: UploadSpool, key: str) -> None:
        self.key = key
        self._spool = spool
        self._tmp: str | None = None
        self._file: object = None
        self.size = 0

    def write(self, data: Buffer) -> None:
        if self._file is None:
            self._tmp = self._spool._new_tmp(self.key)  # same class: the spool's own helper
            self._file = open(self._tmp, "wb")  # noqa: SIM115 - closed by finish()/abort()
        self._file.write(data)  # type: ignore[attr-defined]
        self.size += memoryview(data).nbytes

    def commit(self) -> None:
        """Queue this file alone (an :class:`~sdk_ext.storage.base.ObjectWriter` commit)."""
        self._spool.submit([self], label=self.key, bounded=False)

    def finish(self) -> str:
        """Close the file; its temporary path (created empty if nothing was written)."""
        if self._file is None:
            self.write(b"")
        self._file.close()  # type: ignore[attr-defined]
        self._file = None
        assert self._tmp is not None
        return self._tmp

    def abort(self) -> None:
        if self._file is not None:
            self._file.close()  # type: ignore[attr-defined]
            self._file = None
        if self._tmp is not None:
            with contextlib.suppress(OSError):
                os.remove(self._tmp)
            self._tmp = None


@dataclass
class _Group:
    """Files uploaded in order; one step, or one metadata file."""

    label: str
    keys: list[str]
    size: int
    is_step: bool
    done: int = 0  # keys[:done] are uploaded


@dataclass
class _Outage:
    started: float
    error: str
    dropped: list[str] = field(default_factory=list)


class UploadSpool:
    """Uploads completed files to ``remote`` in order from a local spool (see the module doc).

    Args:
        remote: where the files go (an S3 prefix).
        config: place, bound, drain time and backoff.
        name: names this writer's subdirectory (``worker_0``).
        clock: monotonic time, for the outage's duration and the drain deadline.
    """

    def __init__(
        self,
        remote: Storage,
        *,
        config: SpoolConfig,
        name: str = "spool",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.remote = remote
        self.config = config
        self.name = name
        self._clock = clock
        self._dir: str | None = None
        self._lock = threading.Condition()  # guards every field below
        self._queue: deque[_Group] = deque()
        self._versions: dict[str, int] = {}  # key -> times written into the spool (a rewrite replaces the file)
        self._pending_keys: dict[str, int] = {}  # key -> queued groups holding it
        self._bytes = 0
        self._fatal: StorageError | None = None
        self._abandoned = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self._outage: _Outage | None = None
        self._refusing = False  # the last step offered was refused for space
        self._wake = threading.Event()  # set to cut a backoff pause short (abandon)
        self.dropped_steps: list[str] = []  #: labels of steps not saved because the spool was full
        self.uploaded_files = 0
        self.peak_bytes = 0

    @property
    def uri(self) -> str:
        return self.remote.uri

    @property
    def directory(self) -> str:
        """This writer's spool directory (created on first use)."""
        with self._lock:
            if self._dir is None:
                root = self.config.directory or default_spool_dir()
                os.makedirs(root, exist_ok=True)
                self._dir = tempfile.mkdtemp(prefix=f"{self.name}-{os.getpid()}-", dir=root)
            return self._dir

    @property
    def pending_steps(self) -> int:
        with self._lock:
            return sum(1 for g in self._queue if g.is_step)

    @property
    def pending_bytes(self) -> int:
        with self._lock:
            return self._bytes

    def _path(self, key: str) -> str:
        return os.path.join(self.directory, *key.split("/"))

    def _new_tmp(self, key: str) -> str:
        path = self._path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=os.path.dirname(path))
        os.close(fd)
        return tmp

    # --- writing ---------------------------------------------------------------------------------

    def open_write(self, key: str) -> SpoolFile:
        return SpoolFile(self, key)

    def write(self, key: str, data: Buffer) -> None:
        """Queue ``data`` as ``key`` (metadata: never refused for space)."""
        entry = self.open_write(key)
        entry.write(data)
        self.submit([entry], label=key, bounded=False)

    def submit(self, files: Sequence[SpoolFile], *, label: str, bounded: bool = True) -> bool:
        """Queue ``files`` to be uploaded in this order, after everything queued before.

        Returns False (the files discarded) when ``bounded`` and they do not fit in ``max_bytes``
        next to what is waiting; a group larger than the bound is taken when nothing waits.

        Raises:
            StorageError: uploading stopped for good (a permanent failure) or the spool is closed.
        """
        try:
            self.raise_error()
            if self._closed:
                raise StorageError(f"{self.uri}: the upload spool is closed; {label} not saved")
            size = sum(f.size for f in files)
            with self._lock:
                # full while uploads work (a store slower than training): wait for room, as a direct write
                # would; full during an outage: the step is not saved (training must not wait for S3)
                while (bounded and self._bytes and self._bytes + size > self.config.max_bytes
                       and self._outage is None and self._fatal is None and not self._abandoned):
                    self._lock.wait(0.5)
                if bounded and self._bytes and self._bytes + size > self.config.max_bytes:
                    self._refuse(label)
                    return False
            paths = [(f.key, f.finish()) for f in files]
        except BaseException:
            for f in files:
                f.abort()
            raise
        with self._lock:
            for key, tmp in paths:
                os.replace(tmp, self._path(key))
                self._versions[key] = self._versions.get(key, 0) + 1
                self._pending_keys[key] = self._pending_keys.get(key, 0) + 1
            self._queue.append(_Group(label, [k for k, _ in paths], size, bounded))
            if bounded:
                self._refusing = False
            self._bytes += size
            self.peak_bytes = max(self.peak_bytes, self._bytes)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"sdk_ext-upload-{self.name}", daemon=True)
                self._thread.start()
            self._lock.notify_all()
        return True

    def _refuse(self, label: str) -> None:
        """Under the lock: a step that does not fit."""
        self.dropped_steps.append(label)
        if self._outage is not None:
            self._outage.dropped.append(label)
        if self._refusing:
            return  # one warning per run of refused steps
        self._refusing = True
        log.warning(
            "sdk_ext upload spool %s is full (%d bytes waiting, limit %d, set by %s): %s is not saved, nor "
            "are later steps until uploads to %s catch up",
            self._dir, self._bytes, self.config.max_bytes, ENV_MAX_BYTES, label, self.uri,
        )

    def raise_error(self) -> None:
        """Raise the permanent failure that stopped uploading, if one did."""
        if self._fatal is not None:
            raise self._fatal

    # --- uploading -------------------------------------------------------------------------------

    def _run(self) -> None:
        failures = 0
        while True:
            with self._lock:
                while not self._queue and not self._abandoned:
                    self._lock.wait()
                if self._abandoned:
                    return
                group = self._queue[0]
                key = group.keys[group.done]
                version = self._versions[key]
            try:
                with open(self._path(key), "rb") as file:
                    data = file.read()
            except OSError as err:  # the spool itself is damaged: this group cannot be uploaded whole
                self._skip(group, err)
                continue
            try:
                self.remote.write(key, data)
            except (StorageNotFound, StorageAccessDenied) as err:
                self._stop(err)
                return
            except Exception as err:  # noqa: BLE001 - anything else may pass: retried, never fatal
                if self._abandoned:
                    return
                self._failed(err)
                pause = min(self.config.max_delay, self.config.base_delay * 2**failures)
                failures += 1
                self._wake.wait(random.uniform(pause / 2, pause))  # jitter: writers do not return in lockstep
                continue
            failures = 0
            with self._lock:
                if self._abandoned:
                    return
                self.uploaded_files += 1
                self._recovered()
                if self._versions[key] != version:
                    continue  # rewritten meanwhile (collections file): upload the new content too
                self._pending_keys[key] -= 1
                if not self._pending_keys[key]:
                    del self._pending_keys[key]
                    with contextlib.suppress(OSError):
                        os.remove(self._path(key))
                group.done += 1
                if group.done == len(group.keys):
                    self._queue.popleft()
                    self._bytes -= group.size
                    self._lock.notify_all()

    def _skip(self, group: _Group, err: OSError) -> None:
        log.error(
            "sdk_ext: %s cannot be uploaded to %s: its spooled file is unreadable (%s); the rest of it is skipped",
            group.label, self.uri, err,
        )
        with self._lock:
            for key in group.keys[group.done :]:
                self._pending_keys[key] -= 1
                if not self._pending_keys[key]:
                    del self._pending_keys[key]
            self._queue.popleft()
            self._bytes -= group.size
            self._lock.notify_all()

    def _failed(self, err: BaseException) -> None:
        with self._lock:
            if self._outage is not None:
                return
            self._outage = _Outage(self._clock(), str(err))
            self._lock.notify_all()  # a writer waiting for room stops waiting
        log.warning(
            "sdk_ext: uploads to %s are failing (%s); completed steps are kept in %s (up to %d bytes) and "
            "uploaded in order when the store answers again; retrying with backoff",
            self.uri, err, self._dir, self.config.max_bytes,
        )

    def _recovered(self) -> None:
        """Under the lock: an upload succeeded."""
        if self._outage is None:
            return
        outage, self._outage = self._outage, None
        dropped = f"; {len(outage.dropped)} steps were not saved (spool full)" if outage.dropped else ""
        log.warning(
            "sdk_ext: uploads to %s work again after %.1f s; catching up on %d waiting steps%s",
            self.uri, self._clock() - outage.started, sum(1 for g in self._queue if g.is_step), dropped,
        )

    def _stop(self, err: StorageError) -> None:
        with self._lock:
            steps = sum(1 for g in self._queue if g.is_step)
            self._fatal = type(err)(
                f"saving stopped: {err}. {steps} completed steps that were not uploaded are kept in "
                f"{self._dir} (same layout as the trial)"
            )
            self._fatal.__cause__ = err
            self._lock.notify_all()

    # --- ending ----------------------------------------------------------------------------------

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until everything queued is uploaded (True), uploading stopped, or ``timeout`` passed (False)."""
        timeout = self.config.drain_timeout if timeout is None else timeout
        deadline = self._clock() + timeout
        with self._lock:
            while self._queue and self._fatal is None:
                left = deadline - self._clock()
                if left <= 0:
                    return False
                self._lock.wait(min(left, 0.5))
            return not self._queue

    def close(self, timeout: float | None = None) -> bool:
        """Drain for up to ``timeout`` (default ``drain_timeout``), then stop. True if everything was uploaded.

        What is not uploaded stays in :attr:`directory`; one error line says how many steps and where.

        Raises:
            StorageError: uploading had stopped for good (the permanent failure, naming the spool).
        """
        if self._closed:
            self.raise_error()
            return not self._queue
        timeout = self.config.drain_timeout if timeout is None else timeout
        started = self._clock()
        drained = self.drain(timeout)
        with self._lock:
            self._closed = True
            self._abandoned = True
            self._wake.set()
            self._lock.notify_all()
            thread, self._thread = self._thread, None
            steps = sum(1 for g in self._queue if g.is_step)
            files = sum(len(g.keys) - g.done for g in self._queue)
            waiting = self._bytes
        if drained and thread is not None:
            thread.join()
        if self.dropped_steps:
            log.error(
                "sdk_ext: %d steps were not saved to %s because the upload spool was full (first: %s); "
                "raise %s or free disk space", len(self.dropped_steps), self.uri, self.dropped_steps[0], ENV_MAX_BYTES,
            )
        self.raise_error()
        if not drained:
            log.error(
                "sdk_ext: %d completed steps (%d files, %d bytes) were not uploaded to %s within %.1f s "
                "(%s=%s); they are kept in %s with the trial's layout: copy events/ first, then index/, then the "
                "rest (e.g. aws s3 cp --recursive)",
                steps, files, waiting, self.uri, self._clock() - started, ENV_DRAIN_TIMEOUT, timeout, self._dir,
            )
            return False
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)  # empty but for directories
        return True


__all__ = ["SpoolConfig", "SpoolFile", "UploadSpool", "default_spool_dir"]
