"""How a trial waits and caches: every knob in one frozen value, plus the injectable clock.

Nothing here reads the environment except :meth:`TrialOptions.from_env`, which entry points (the
rule evaluator, the CLI) call explicitly; library code always takes the options it is given.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar

from sdk_ext.exceptions import ConfigError

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: smdebug's environment variables (and the poll period it multiplies its retry limit with).
_SMDEBUG_END_DELAY = "SMDEBUG_TRAINING_END_DELAY_REFRESH"
_SMDEBUG_WINDOW = "SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW"
_SMDEBUG_EVENT_RETRIES = "SMDEBUG_MISSING_EVENT_FILE_RETRY_LIMIT"
_SMDEBUG_RETRY_PERIOD = 2.0


@dataclass(frozen=True, slots=True)
class Clock:
    """Where a trial gets the time and how it waits; tests pass a fake that advances on ``sleep``."""

    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


@dataclass(frozen=True, slots=True, kw_only=True)
class TrialOptions:
    """Waiting and caching behaviour of a :class:`~sdk_ext.trials.Trial`.

    Attributes:
        collections_timeout: seconds ``create_trial`` waits for the first collections file before it
            raises MissingCollectionFiles (smdebug waited forever). 0 checks once.
        poll_interval: seconds between two listings while waiting (collections, steps, event files).
        training_end_delay: with several workers, seconds to wait after the end-of-training marker
            appears before the final listing (each worker writes the marker when it closes, so the
            others may still be committing their last steps). Not used with one worker: the marker
            is checked *before* the final listing and a writer commits its index files before the
            marker, so that listing already holds everything.
        event_file_timeout: seconds a value read waits for an event file its index names (or for the
            rest of a file still being appended) before it gives up with TensorUnavailableForStep.
        incomplete_step_window: once more steps than this are waiting for missing workers, the
            oldest half are taken as complete (smdebug's SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW).
        file_cache_bytes: budget of the cache of whole event files (least recently used out). A
            trial whose event files are larger than this is read by byte ranges
            (:mod:`sdk_ext.trials.read.byte_ranges`, which keep at most as many bytes again).
        whole_file_bytes: event files up to this size are read whole on their first value read
            (one request for all their records); larger ones are read record by record.
        read_ahead_bytes: most bytes of values decoded ahead when ``value()`` walks one tensor
            step after step (see :mod:`sdk_ext.trials.read.reader`); 0 reads strictly one value per call.
            Values of a window are rows of one array, as those of ``values()`` are: keeping one
            keeps its window's array (at most this many bytes) alive.
        lazy_index_files: a finished trial on storage that is not local (S3) with more index files
            than this left to read at open (after the consolidated indexes) reads each when a query
            first needs it: the value at one step costs that step's index files, not all of them
            (:mod:`sdk_ext.trials.index.trial_index`). 0 reads every index file at open, as smdebug.
    """

    collections_timeout: float = 10.0
    poll_interval: float = 1.0
    training_end_delay: float = 1.0
    event_file_timeout: float = 30.0
    incomplete_step_window: int = 1000
    file_cache_bytes: int = 256 << 20
    whole_file_bytes: int = 1 << 20
    read_ahead_bytes: int = 1 << 20
    lazy_index_files: int = 64
    clock: Clock = field(default_factory=Clock)

    def __post_init__(self) -> None:
        problems = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "clock":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                problems.append(f"{f.name} must be a non-negative number, got {value!r}")
        if isinstance(self.poll_interval, (int, float)) and self.poll_interval <= 0:
            problems.append(f"poll_interval must be positive, got {self.poll_interval!r}")
        if problems:
            raise ConfigError(problems, where="TrialOptions")

    def with_changes(self, **changes: Any) -> TrialOptions:
        """A copy with some fields replaced."""
        return replace(self, **changes)

    @classmethod
    def from_env(cls, environ: Mapping[str, str], **overrides: Any) -> TrialOptions:
        """Options from smdebug's environment variables; for entry points only.

        Reads ``SMDEBUG_TRAINING_END_DELAY_REFRESH`` (seconds), ``SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW``
        (steps), ``SMDEBUG_MISSING_EVENT_FILE_RETRY_LIMIT`` (retries of smdebug's 2 s period) and
        ``SDK_EXT_COLLECTIONS_TIMEOUT`` (seconds). Explicit ``overrides`` win.
        """
        values: dict[str, Any] = {}
        problems = []

        def number(key: str, target: str, kind: Callable[[str], Any], scale: float = 1.0) -> None:
            raw = environ.get(key)
            if raw is None or raw.strip() == "":
                return
            try:
                value = kind(raw)
            except ValueError:
                problems.append(f"{key}={raw!r} is not a number")
                return
            values[target] = value * scale if scale != 1.0 else value

        number(_SMDEBUG_END_DELAY, "training_end_delay", float)
        number(_SMDEBUG_WINDOW, "incomplete_step_window", int)
        number(_SMDEBUG_EVENT_RETRIES, "event_file_timeout", float, _SMDEBUG_RETRY_PERIOD)
        number("SDK_EXT_COLLECTIONS_TIMEOUT", "collections_timeout", float)
        if problems:
            raise ConfigError(problems, where="environment")
        values.update(overrides)
        return cls(**values)


def poll(
    attempt: Callable[[], T | None],
    *,
    timeout: float | None,
    interval: float,
    clock: Clock,
    what: str,
) -> T | None:
    """Call ``attempt`` until it returns something other than None, or ``timeout`` seconds pass.

    ``timeout=None`` waits as long as it takes. The last attempt happens at (or just after) the
    deadline, so a zero timeout still tries once. Returns None on timeout.
    """
    deadline = None if timeout is None else clock.now() + timeout
    polls = 0
    while True:
        result = attempt()
        if result is not None:
            return result
        now = clock.now()
        if deadline is not None and now >= deadline:
            return None
        polls += 1
        if polls % 30 == 0:
            logger.info("still waiting for %s (%d polls)", what, polls)
        pause = interval if deadline is None else min(interval, deadline - now)
        clock.sleep(max(pause, 0.0))


__all__ = ["Clock", "TrialOptions", "poll"]
