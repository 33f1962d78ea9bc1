"""Retrying a remote call: exponential backoff with full jitter.

Only transient failures are retried (the caller decides which: throttling, 5xx, a dropped
connection). Every attempt is a real request, so the number of requests a reader makes is what it
sends, retries included. The clock is a parameter so tests do not sleep.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from sdk_ext.exceptions import StorageError

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How often and how patiently to retry.

    Attempt ``n`` (0-based) that fails transiently is followed by a pause drawn uniformly from
    ``[0, min(max_delay, base_delay * 2**n)]`` ("full jitter": many clients throttled together do not
    come back in lockstep). With the defaults, 8 attempts wait about 3 s in total on average.
    """

    max_attempts: int = 8
    base_delay: float = 0.05
    max_delay: float = 5.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"RetryPolicy.max_attempts must be >= 1, got {self.max_attempts}")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("RetryPolicy delays must be >= 0")

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """The pause after failed attempt ``attempt`` (0-based)."""
        ceiling = min(self.max_delay, self.base_delay * (2**attempt))
        return (rng or random).uniform(0.0, ceiling)


class RetriesExhausted(StorageError):
    """A call that failed transiently on every attempt: ``error`` is the last failure. A storage error
    (the root's): S3Storage translates it into the specific StorageError of that last failure."""

    def __init__(self, error: BaseException, attempts: int) -> None:
        super().__init__(f"{error} (after {attempts} attempts)")
        self.error, self.attempts = error, attempts


def call_with_retries(
    fn: Callable[[], T],
    *,
    policy: RetryPolicy,
    is_transient: Callable[[BaseException], bool],
    what: str,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``fn`` until it succeeds, fails permanently, or the attempts run out.

    Raises:
        RetriesExhausted: every attempt failed transiently (chained to the last error).
        Exception: the first permanent error, unchanged.
    """
    attempt = 0
    while True:
        try:
            return fn()
        except Exception as err:
            if not is_transient(err):
                raise
            attempt += 1
            if attempt >= policy.max_attempts:
                raise RetriesExhausted(err, attempt) from err
            pause = policy.delay(attempt - 1)
            log.debug("%s: transient failure (%s), attempt %d, retrying in %.3f s", what, err, attempt, pause)
            sleep(pause)


__all__ = ["RetriesExhausted", "RetryPolicy", "call_with_retries"]
