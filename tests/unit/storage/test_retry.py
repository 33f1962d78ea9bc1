"""Backoff with full jitter; only transient failures are retried."""

import random

import pytest

from sdk_ext.storage.retry import RetriesExhausted, RetryPolicy, call_with_retries


class Flaky:
    def __init__(self, failures, error=None):
        self.failures, self.error, self.calls = failures, error or TimeoutError("slow"), 0

    def __call__(self):
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "ok"


def test_transient_failures_are_retried_with_growing_capped_pauses():
    pauses = []
    fn = Flaky(4)
    policy = RetryPolicy(max_attempts=5, base_delay=0.1, max_delay=0.3)
    result = call_with_retries(fn, policy=policy, is_transient=lambda e: True, what="x", sleep=pauses.append)
    assert result == "ok" and fn.calls == 5
    assert len(pauses) == 4
    assert all(0 <= p <= c for p, c in zip(pauses, [0.1, 0.2, 0.3, 0.3]))


def test_exhausted_attempts_raise_with_the_last_error_and_count():
    fn = Flaky(10)
    with pytest.raises(RetriesExhausted) as info:
        call_with_retries(fn, policy=RetryPolicy(max_attempts=3), is_transient=lambda e: True, what="x",
                          sleep=lambda s: None)
    assert fn.calls == 3 and info.value.attempts == 3 and info.value.error is fn.error


def test_permanent_error_is_raised_at_once_unchanged():
    fn = Flaky(1, KeyError("nope"))
    with pytest.raises(KeyError):
        call_with_retries(fn, policy=RetryPolicy(), is_transient=lambda e: False, what="x", sleep=lambda s: None)
    assert fn.calls == 1


def test_jitter_is_spread_over_the_whole_window():
    rng = random.Random(1)
    samples = [RetryPolicy(base_delay=1.0, max_delay=8.0).delay(3, rng) for _ in range(2000)]
    assert min(samples) < 0.5 and max(samples) > 7.5 and all(0 <= s <= 8.0 for s in samples)


def test_policy_rejects_zero_attempts():
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
