"""SageMaker's rule-stop signal: the service tells a rule job to finish by writing a file into the trial.

When a training job stops or fails before the hook wrote ``training_job_end.ts``, nothing would end
its rule jobs. SageMaker then writes a unix timestamp into the file named by the environment variable
``SAGEMAKER_ENV_RULE_STOP_SIGNAL_FILE``, under the trial prefix (an absolute path is a local file). A
rule job treats the training job as ended ``rule_stop_grace_time_secs`` seconds (default 60) after
that time, so steps still being synced arrive first, and finishes the way it does at a normal end
(docs/RULES.md#stop-signal).

:class:`StopSignalStorage` does that for a whole trial reader at once: it answers "does the end marker
exist?" with yes once the signal's time plus the grace period has passed, and passes everything else
through. Deliberate difference from smdebug: the grace period is parsed as a number (smdebug added
the string from the environment to an int, failed, and so used a grace of 0 whenever it was set).
"""

from __future__ import annotations

import builtins
import logging
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from sdk_ext.exceptions import ConfigError, StorageNotFound
from sdk_ext.format.paths import END_OF_JOB
from sdk_ext.storage import Buffer, ObjectWriter, ReadRequest, Storage
from sdk_ext.storage.capabilities import Capabilities

logger = logging.getLogger(__name__)

ENV_SIGNAL_FILE = "SAGEMAKER_ENV_RULE_STOP_SIGNAL_FILE"
ENV_GRACE = "rule_stop_grace_time_secs"
DEFAULT_GRACE = 60.0


@dataclass(frozen=True, slots=True)
class StopSignal:
    """Where the stop signal appears and how long after its timestamp the job counts as ended."""

    file: str  # a key under the trial root, or an absolute local path
    grace: float = DEFAULT_GRACE

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> StopSignal | None:
        """The signal SageMaker configured, or None when ``SAGEMAKER_ENV_RULE_STOP_SIGNAL_FILE`` is unset.

        Raises:
            ConfigError: ``rule_stop_grace_time_secs`` is not a non-negative number of seconds.
        """
        name = environ.get(ENV_SIGNAL_FILE, "").strip()
        if not name:
            return None
        return cls(name, parse_grace(environ.get(ENV_GRACE)))


def parse_grace(value: str | None) -> float:
    """``rule_stop_grace_time_secs`` as seconds; unset or blank means the default (60)."""
    if value is None or not value.strip():
        return DEFAULT_GRACE
    try:
        grace = float(value)
    except ValueError:
        grace = math.nan
    if not math.isfinite(grace) or grace < 0:
        raise ConfigError(f"environment variable {ENV_GRACE}={value!r} must be a number of seconds >= 0 "
                          f"(unset, it is {DEFAULT_GRACE:g})", where="rule stop signal")
    return grace


class StopSignalStorage:
    """A trial's storage that reports the end marker once the stop signal's time + grace has passed.

    Args:
        inner: the trial's storage.
        signal: the signal file and the grace period.
        clock: unix time now (``time.time``); tests pass their own.
    """

    def __init__(self, inner: Storage, signal: StopSignal, *, clock: Callable[[], float] = time.time) -> None:
        self.inner = inner
        self.signal = signal
        self.clock = clock
        #: the signal's time (unix seconds) once the file was seen
        self.signalled_at: float | None = None
        #: True once the end was reported because of the signal (not the real marker)
        self.ended_by_signal = False

    def __repr__(self) -> str:
        return f"StopSignalStorage({self.inner!r}, {self.signal!r})"

    @property
    def uri(self) -> str:
        return self.inner.uri

    def describe(self) -> str:
        """The signal in words, for status details: when it came and the grace period."""
        if self.signalled_at is None:
            return "no stop signal"
        when = datetime.fromtimestamp(self.signalled_at, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"rule stop signal of {when} + {self.signal.grace:g} s grace"

    def _read_signal(self) -> bytes | None:
        if os.path.isabs(self.signal.file):
            try:
                with open(self.signal.file, "rb") as f:
                    return f.read()
            except FileNotFoundError:
                return None
        try:
            return self.inner.read(self.signal.file)
        except StorageNotFound:
            return None

    def signal_time(self) -> float | None:
        """The signal's timestamp, or None while there is no signal file."""
        if self.signalled_at is None:
            data = self._read_signal()
            if data is None:
                return None
            text = data.decode("utf-8", "replace").strip()
            try:
                at = float(text)
            except ValueError:
                at = math.nan
            if not math.isfinite(at):
                at = self.clock()
                logger.warning("stop signal %s holds %r, not a unix time; counting the grace period from now",
                               self.signal.file, text[:40])
            self.signalled_at = at
            logger.info("stop signal %s: the training job counts as ended %g s after %s (in %.1f s)",
                        self.signal.file, self.signal.grace, at, max(0.0, at + self.signal.grace - self.clock()))
        return self.signalled_at

    def signal_expired(self) -> bool:
        at = self.signal_time()
        return at is not None and self.clock() >= at + self.signal.grace

    # --- Storage --------------------------------------------------------------------------------

    def exists(self, key: str) -> bool:
        if self.inner.exists(key):
            return True
        if key == END_OF_JOB and self.signal_expired():
            if not self.ended_by_signal:
                logger.info("%s passed: treating the training job as ended", self.describe())
            self.ended_by_signal = True
            return True
        return False

    def list(self, prefix: str, *, start_after: str = "") -> Iterator[str]:
        return self.inner.list(prefix, start_after=start_after)

    def read(self, key: str, *, start: int = 0, length: int | None = None) -> bytes:
        return self.inner.read(key, start=start, length=length)

    def read_many(self, requests: Sequence[ReadRequest]) -> builtins.list[bytes]:
        return self.inner.read_many(requests)

    def write(self, key: str, data: Buffer | Iterable[Buffer]) -> None:
        self.inner.write(key, data)

    def open_write(self, key: str) -> ObjectWriter:
        return self.inner.open_write(key)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def capabilities(self) -> Capabilities:
        """The inner storage's, all forwarded: the signal changes only whether the end marker exists,
        and no capability answers that."""
        return self.inner.capabilities()


__all__ = ["DEFAULT_GRACE", "ENV_GRACE", "ENV_SIGNAL_FILE", "StopSignal", "StopSignalStorage", "parse_grace"]
