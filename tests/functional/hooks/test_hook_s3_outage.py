"""A hook writing to s3:// rides out S3 outages: moto's server behind a proxy that really goes down.

Steps completed while S3 does not answer wait in a local spool and are uploaded in order when it
returns; a reader never sees a step before it is whole on S3; only a permanent failure (access
denied, bucket gone) stops saving, with one log line; close() returns in bounded time and says
what is left and where. Backoffs are short (environment), the outages are real.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from sdk_ext.exceptions import StorageAccessDenied, StorageNotFound
from sdk_ext.hooks import Hook, SaveConfig
from sdk_ext.trials import create_trial
from tests.functional.hooks.outage_proxy import OutageProxy

_pause = threading.Event()  # never set: wait(t) paces the training loop like a step that takes t seconds


def value(step: int) -> np.ndarray:
    return np.arange(256, dtype=np.float32) + step


def train(hook: Hook, steps: range, *, pace: float = 0.0) -> None:
    for step in steps:
        with hook.step():
            hook.save_tensor("w", value(step), collections_to_write="weights")
            hook.save_scalar("loss", float(step))
        if pace:
            _pause.wait(pace)


def spool_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def sdk_ext_records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("sdk_ext") and r.levelno == level]


@pytest.fixture
def outage(s3, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[OutageProxy]:  # type: ignore[no-untyped-def]
    """A proxy in front of moto that boto3 in this test goes through, and a short-backoff spool in tmp_path."""
    proxy = OutageProxy(s3.moto_url).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", proxy.url)
    monkeypatch.setenv("SDK_EXT_SPOOL_DIR", str(tmp_path / "spool"))
    monkeypatch.setenv("SDK_EXT_UPLOAD_RETRY_BASE_DELAY", "0.05")
    monkeypatch.setenv("SDK_EXT_UPLOAD_RETRY_MAX_DELAY", "0.5")
    monkeypatch.setenv("SDK_EXT_SPOOL_DRAIN_TIMEOUT", "60")
    try:
        yield proxy
    finally:
        proxy.close()


@pytest.mark.slow
def test_a_60_s_outage_in_the_middle_of_a_job_loses_no_step(s3, outage, tmp_path, caplog) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.INFO, logger="sdk_ext")
    uri = s3.uri("jobs/outage")
    hook = Hook(uri, save_config=SaveConfig(save_interval=1))
    train(hook, range(20))
    hook.flush()
    outage.go_down()
    started = time.monotonic()
    step = 20
    while time.monotonic() - started < 60.0:  # training goes on through a 60 s outage
        train(hook, range(step, step + 1), pace=0.2)
        step += 1
    during = step - 20
    uploaded_before = set(s3.keys("jobs/outage/index/"))
    assert len(uploaded_before) == 20  # nothing of the outage's steps reached S3 (the proxy was down)
    spool = hook._out.spool  # type: ignore[union-attr]
    waiting = spool.pending_steps
    outage.come_back()
    back = time.monotonic()

    # a reader polling while the spool catches up only ever sees whole steps, with their values
    trial = create_trial(uri)
    seen: set[int] = set()
    while spool.pending_steps:
        for s in set(trial.steps()) - seen:
            np.testing.assert_array_equal(trial.tensor("w").value(s), value(s))
            seen.add(s)
    caught_up = time.monotonic() - back
    train(hook, range(step, step + 20))
    hook.close()
    total = step + 20

    assert hook.failure is None  # never disabled
    trial = create_trial(uri)
    assert trial.steps() == list(range(total))
    for s in range(total):
        np.testing.assert_array_equal(trial.tensor("w").value(s), value(s))
        assert trial.tensor("scalar/loss").value(s)[0] == s
    assert "jobs/outage/training_job_end.ts" in s3.keys("jobs/outage/")
    assert spool_files(tmp_path / "spool") == []  # everything uploaded, local copies gone
    warnings = [r.getMessage() for r in sdk_ext_records(caplog, logging.WARNING)]
    assert sum("are failing" in m for m in warnings) == 1  # one line when the outage starts
    assert sum("work again after" in m for m in warnings) == 1  # one when it ends
    assert not sdk_ext_records(caplog, logging.ERROR)
    print(  # the numbers for the note (pytest -s)
        f"\noutage 60 s: {during} steps during it, {waiting} waiting at its end, {outage.refused} connections "
        f"refused, caught up in {caught_up:.2f} s, peak spool {spool.peak_bytes} bytes, {total} steps read back"
    )


def test_an_outage_still_going_at_close_returns_in_bounded_time_with_the_log_line(  # type: ignore[no-untyped-def]
    s3, outage, tmp_path, caplog, monkeypatch
) -> None:
    monkeypatch.setenv("SDK_EXT_SPOOL_DRAIN_TIMEOUT", "3")
    caplog.set_level(logging.INFO, logger="sdk_ext")
    uri = s3.uri("jobs/closing")
    hook = Hook(uri, save_config=SaveConfig(save_interval=1))
    train(hook, range(10))
    hook.flush()
    outage.go_down()
    train(hook, range(10, 20))
    spool_dir = Path(hook._out.spool.directory)  # type: ignore[union-attr]
    started = time.monotonic()
    hook.close()
    took = time.monotonic() - started

    assert took < 3 + 10  # the drain timeout, plus at most the request in flight; never an unbounded wait
    assert hook.failure is None
    errors = [r.getMessage() for r in sdk_ext_records(caplog, logging.ERROR)]
    assert len(errors) == 1
    # how many: 10 steps (event + index) + the consolidated index + the end marker
    assert "10 completed steps (22 files" in errors[0]
    assert f"were not uploaded to {uri}" in errors[0]
    assert f"they are kept in {spool_dir}" in errors[0]  # where
    assert "SDK_EXT_SPOOL_DRAIN_TIMEOUT=3" in errors[0]  # and what controls the wait
    kept = spool_files(spool_dir)
    assert len(kept) == 22 and "training_job_end.ts" in kept and "consolidated/worker_0_index.sdkidx" in kept
    assert not [k for k in s3.keys("jobs/closing/") if "/000000000015" in k or k.endswith("end.ts")]

    # nothing is lost: the kept files, copied as the log line says, complete the trial
    outage.come_back()
    for folder in ("events", "index", ""):
        for key in kept:
            if key.startswith(folder) and (folder or not key.startswith(("events", "index"))):
                s3.put(f"jobs/closing/{key}", (spool_dir / key).read_bytes())
    trial = create_trial(uri)
    assert trial.steps() == list(range(20))
    for s in range(20):
        np.testing.assert_array_equal(trial.tensor("w").value(s), value(s))
    print(f"\nclose() with S3 down and a 3 s drain timeout returned in {took:.2f} s")


@pytest.mark.parametrize("failure", ["access denied", "bucket deleted"])
def test_a_permanent_failure_stops_saving_with_one_log_line(  # type: ignore[no-untyped-def]
    s3, outage, tmp_path, caplog, failure
) -> None:
    caplog.set_level(logging.INFO, logger="sdk_ext")
    uri = s3.uri("jobs/denied")
    hook = Hook(uri, save_config=SaveConfig(save_interval=1))
    train(hook, range(5))
    hook.flush()
    if failure == "access denied":
        outage.mode = "403"
        outage.go_down()
    else:
        for key in s3.keys(""):
            s3.direct.delete_object(Bucket=s3.bucket, Key=key)
        s3.direct.delete_bucket(Bucket=s3.bucket)
    train(hook, range(5, 15))  # training goes on
    hook.close()

    expected = StorageAccessDenied if failure == "access denied" else StorageNotFound
    assert isinstance(hook.failure, expected)
    errors = [r.getMessage() for r in sdk_ext_records(caplog, logging.ERROR)]
    assert len(errors) == 1, errors  # one line says what happened, why, and where the unsent steps are
    assert "the hook is disabled" in errors[0] and "saving stopped" in errors[0]
    assert ("access denied" in errors[0]) if failure == "access denied" else ("does not exist" in errors[0])
    assert "completed steps that were not uploaded are kept in" in errors[0]
    if failure == "access denied":
        outage.come_back()
        trial = create_trial(uri)
        assert trial.steps()[:5] == list(range(5))  # what was uploaded before stays intact


def test_a_full_spool_drops_whole_steps_and_says_so(s3, outage, tmp_path, caplog, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.INFO, logger="sdk_ext")
    monkeypatch.setenv("SDK_EXT_SPOOL_MAX_BYTES", str(8 * 1400))  # room for about 7 steps of ~1.4 KB
    uri = s3.uri("jobs/full")
    hook = Hook(uri, save_config=SaveConfig(save_interval=1))
    for step in range(5):
        train(hook, range(step, step + 1))
        hook.flush()  # S3 is slower than this loop: keep the spool empty before the outage
    outage.go_down()
    train(hook, range(5, 25))
    spool = hook._out.spool  # type: ignore[union-attr]
    kept, dropped = spool.pending_steps, list(spool.dropped_steps)
    outage.come_back()
    hook.flush()  # waits until the spool has caught up
    train(hook, range(25, 30))
    hook.close()

    assert hook.failure is None
    assert 0 < kept < 20 and len(dropped) == 20 - kept
    saved = list(range(5)) + list(range(5, 5 + kept)) + list(range(25, 30))
    trial = create_trial(uri)
    assert trial.steps() == saved  # each step whole or absent: no index without its event file
    for s in saved:
        np.testing.assert_array_equal(trial.tensor("w").value(s), value(s))
    warnings = [r.getMessage() for r in sdk_ext_records(caplog, logging.WARNING)]
    assert sum("is full" in m for m in warnings) == 1
    errors = [r.getMessage() for r in sdk_ext_records(caplog, logging.ERROR)]
    assert len(errors) == 1 and f"{len(dropped)} steps were not saved" in errors[0]
    assert "SDK_EXT_SPOOL_MAX_BYTES" in errors[0]
