"""A hook writing to s3:// (moto's server over HTTP) refuses a prefix holding a finished trial, like a local one."""

from __future__ import annotations

import numpy as np
import pytest

from sdk_ext.exceptions import ConfigError
from sdk_ext.hooks import Hook, SaveConfig
from sdk_ext.storage import InMemoryStorage


def write_steps(out_dir: str, steps: int = 2) -> None:
    hook = Hook(out_dir, save_config=SaveConfig(save_interval=1))
    for _ in range(steps):
        with hook.step():
            hook.save_tensor("w", np.ones(3, dtype=np.float32), collections_to_write="weights")
    hook.close()
    assert hook.failure is None


def test_a_finished_trial_on_s3_is_not_overwritten(s3) -> None:  # type: ignore[no-untyped-def]
    write_steps(s3.uri("jobs/run-1"))
    assert "jobs/run-1/training_job_end.ts" in s3.keys("jobs/run-1/")
    before = {key: s3.get(key) for key in s3.keys("")}
    with pytest.raises(ConfigError) as err:
        Hook(s3.uri("jobs/run-1"))
    message = str(err.value)
    assert f"out_dir {s3.uri('jobs/run-1')} already holds a finished trial" in message  # what, where
    assert f"({s3.uri('jobs/run-1')}/training_job_end.ts exists)" in message
    assert "use a new out_dir, or delete the old trial" in message  # how to fix
    assert {key: s3.get(key) for key in s3.keys("")} == before  # nothing written


def test_only_the_marker_of_this_prefix_counts(s3) -> None:  # type: ignore[no-untyped-def]
    s3.put("jobs/run-10/training_job_end.ts", b"")  # a sibling whose name starts like ours
    s3.put("jobs/run-1/other/training_job_end.ts", b"")  # deeper: not this trial's marker
    write_steps(s3.uri("jobs/run-1"))
    assert "jobs/run-1/training_job_end.ts" in s3.keys("jobs/run-1/")


def test_a_bucket_that_does_not_exist_is_a_config_error_naming_it(s3) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError) as err:
        Hook(f"s3://{s3.bucket}-missing/run")
    assert f"out_dir s3://{s3.bucket}-missing/run: could not check for a finished trial" in str(err.value)
    assert f"{s3.bucket}-missing" in str(err.value).split("could not check", 1)[1]


def test_any_storage_backend_is_checked() -> None:
    storage = InMemoryStorage()
    storage.write("training_job_end.ts", b"")
    with pytest.raises(ConfigError, match="already holds a finished trial"):
        Hook(storage)
    Hook(storage, dry_run=True)  # a dry run writes nothing: allowed
