"""create_trial("s3://...") on moto's server: live refresh while a hook writes, the local cache, errors."""

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sdk_ext.exceptions import MissingCollectionFiles, NoMoreData, StorageError, StorageNotFound
from sdk_ext.hooks import Hook, SaveConfig
from sdk_ext.modes import ModeKeys, StepState
from sdk_ext.storage.retry import RetryPolicy
from sdk_ext.storage.s3 import S3Storage
from sdk_ext.trials import TrialOptions, create_trial


def new_hook(out: Any, **kwargs: Any) -> Hook:
    return Hook(out, save_config=SaveConfig(save_interval=1), **kwargs)


def train(hook: Hook, steps: range) -> None:
    hook.set_mode(ModeKeys.TRAIN)
    for step in steps:
        with hook.step():
            hook.save_tensor("fc/weight", np.full((4, 3), step, dtype=np.float32), collections_to_write="weights")
            hook.save_scalar("loss", 1.0 / (step + 1))


def gets(s3: Any) -> int:
    return s3.proxy.count("GET") - s3.proxy.count("GET", query_has="list-type=2")


def test_trial_follows_a_job_writing_to_s3_then_sees_it_end(s3: Any) -> None:
    hook = new_hook(s3.uri("jobs/live"))
    train(hook, range(3))
    hook.flush()
    trial = create_trial(s3.uri("jobs/live"), timeout=5)
    assert trial.steps() == [0, 1, 2] and not trial.loaded_all_steps
    assert trial.has_passed_step(3) == StepState.NOT_YET_AVAILABLE
    assert trial.tensor("fc/weight").value(2).tolist() == [[2.0] * 3] * 4

    train(hook, range(3, 6))
    hook.flush()
    s3.proxy.clear()
    assert trial.steps() == [0, 1, 2, 3, 4, 5]  # refreshed: only what is new is listed and read
    assert any("start-after=" in r.query for r in s3.proxy.requests)
    assert gets(s3) == 3  # the three new index files
    assert trial.tensor("fc/weight").value(5).tolist() == [[5.0] * 3] * 4

    hook.close()
    trial.wait_for_steps([5], timeout=5)
    assert trial.steps() == list(range(6)) and trial.loaded_all_steps
    with pytest.raises(NoMoreData):
        trial.wait_for_steps([6], timeout=5)
    assert {s: v.item() for s, v in trial.tensor("scalar/loss").values().items()} == pytest.approx({s: 1.0 / (s + 1) for s in range(6)})


def test_s3_trial_answers_like_the_same_trial_on_disk(s3: Any, tmp_path: Path) -> None:
    for out in (s3.uri("t"), tmp_path / "t"):
        hook = new_hook(out, include_collections=["weights", "losses", "default"])
        train(hook, range(4))
        hook.close()
    remote, local = create_trial(s3.uri("t")), create_trial(str(tmp_path / "t"))
    assert remote.tensor_names() == local.tensor_names() and remote.steps() == local.steps()
    assert remote.workers() == local.workers() and remote.collections().keys() == local.collections().keys()
    for name in local.tensor_names():
        ours, theirs = remote.tensor(name).values(), local.tensor(name).values()
        assert ours.keys() == theirs.keys()
        for step in ours:
            np.testing.assert_array_equal(ours[step], theirs[step])


def test_a_second_analysis_with_a_cache_dir_downloads_nothing(s3: Any, tmp_path: Path) -> None:
    hook = new_hook(s3.uri("t"))
    train(hook, range(5))
    hook.close()

    def analyse() -> dict[int, Any]:
        trial = create_trial(s3.uri("t"), cache_dir=tmp_path / "cache")
        return trial.tensor("fc/weight").values()

    s3.proxy.clear()
    first = analyse()
    assert gets(s3) >= 5 + 5  # index and event files downloaded
    s3.proxy.clear()
    second = analyse()
    assert gets(s3) == 0  # only listings went out
    assert first.keys() == second.keys() and all(np.array_equal(first[s], second[s]) for s in first)


def test_a_missing_bucket_raises_and_a_missing_prefix_says_where_it_looked(s3: Any) -> None:
    with pytest.raises(StorageNotFound, match="bucket 'no-such-bucket-x' does not exist"):
        create_trial("s3://no-such-bucket-x/jobs/a", timeout=5)
    with pytest.raises(MissingCollectionFiles, match=f"s3://{s3.bucket}/jobs/nothing-here"):
        create_trial(s3.uri("jobs/nothing-here"), timeout=0)


def test_throttling_is_retried_and_a_dead_endpoint_raises_during_reads(s3: Any) -> None:
    hook = new_hook(s3.uri("t"))
    train(hook, range(4))
    hook.close()
    s3.proxy.add_fault(lambda r: r.method == "GET", "status", status=503, code="SlowDown", times=3)
    fast = RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.004)
    trial = create_trial(S3Storage.from_uri(s3.uri("t"), retry=fast))
    assert trial.steps() == [0, 1, 2, 3]
    s3.proxy.add_fault(lambda r: r.method == "GET" and "list-type" not in r.query, "stop")
    with pytest.raises(StorageError, match="s3://"):
        trial.tensor("fc/weight").values()


def test_a_failed_refresh_raises_instead_of_looking_like_no_new_steps(s3: Any) -> None:
    hook = new_hook(s3.uri("t"))
    train(hook, range(2))
    hook.flush()
    fast = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.004)
    trial = create_trial(S3Storage.from_uri(s3.uri("t"), retry=fast), timeout=5)
    assert trial.steps() == [0, 1]
    s3.proxy.add_fault(lambda r: "list-type=2" in r.query, "status", status=500, code="InternalError", times=100)
    with pytest.raises(StorageError, match=r"listing s3://.*InternalError.*after 3 attempts"):
        trial.steps()
    hook.close()


def test_a_finished_trial_the_hook_wrote_opens_with_a_handful_of_requests(s3: Any, tmp_path: Path) -> None:
    """Issue 17.6: the hook's consolidated index serves every index file; without it (a trial smdebug
    wrote) the value at the last step still costs one index file, not one per step (smdebug #99)."""
    hook = new_hook(s3.uri("jobs/done"))
    train(hook, range(120))
    hook.close()
    keys = s3.keys("jobs/done/")
    assert "jobs/done/consolidated/worker_0_index.sdkidx" in keys
    s3.proxy.clear()
    trial = create_trial(s3.uri("jobs/done"))
    steps = trial.steps()
    assert trial.tensor("fc/weight").value(steps[-1]).tolist() == [[119.0] * 3] * 4
    index_gets = [r for r in s3.proxy.requests if r.method == "GET" and "/index/" in r.path and "list-type" not in r.query]
    assert steps == list(range(120)) and index_gets == []
    assert len(s3.proxy.requests) <= 8  # 5 listings, the collections file, the consolidated index, one event file
    local = tmp_path / "t"
    hook = new_hook(local)
    train(hook, range(120))
    hook.close()
    names = trial.tensor_names()
    assert names == create_trial(local).tensor_names()
    for name in names:
        assert {s: v.tolist() for s, v in trial.tensor(name).values().items()} == {
            s: v.tolist() for s, v in create_trial(local).tensor(name).values().items()
        }

    # the same trial as smdebug's writer leaves it: no consolidated index
    s3.delete("jobs/done/consolidated/worker_0_index.sdkidx")
    s3.proxy.clear()
    trial = create_trial(s3.uri("jobs/done"), options=TrialOptions(lazy_index_files=16))
    assert trial.tensor("fc/weight").value(trial.steps()[-1]).tolist() == [[119.0] * 3] * 4
    index_gets = [r.path for r in s3.proxy.requests if r.method == "GET" and "/index/" in r.path and "list-type" not in r.query]
    assert [p.rsplit("/", 1)[1] for p in index_gets] == ["000000000119_worker_0.json"]


def test_a_trial_whose_index_spans_directories_lists_them_concurrently_and_refreshes(s3: Any, tmp_path: Path) -> None:
    """index/ holds a directory per 1000 steps; listed 50 keys a page, each directory holds pages, so the
    trial's listings (the first one, then a refresh after its token) go by directory: the same steps."""
    local = tmp_path / "t"

    def upload() -> None:
        s3.put_many({f"t/{p.relative_to(local).as_posix()}": p.read_bytes() for p in local.rglob("*") if p.is_file()})

    hook = new_hook(local)
    train(hook, range(1200))
    hook.flush()
    upload()
    trial = create_trial(S3Storage.from_uri(s3.uri("t"), page_size=50), timeout=5)
    assert trial.steps() == list(range(1200)) and not trial.loaded_all_steps
    assert s3.proxy.count("GET", query_has="delimiter=") == 1
    train(hook, range(1200, 2300))
    hook.close()
    upload()
    s3.proxy.clear()
    trial.wait_for_steps([2299], timeout=5)
    assert trial.steps() == list(range(2300)) and trial.loaded_all_steps
    assert any("start-after=t%2Findex%2F000000001%2F" in r.query for r in s3.proxy.requests)  # after the token
    assert s3.proxy.count("GET", query_has="delimiter=") >= 1
    assert trial.tensor("fc/weight").value(2299).tolist() == [[2299.0] * 3] * 4
    assert trial.tensor("fc/weight").value(999).tolist() == [[999.0] * 3] * 4
