"""Trials on S3 (moto's server over HTTP): what the hook writes to s3:// is read by real smdebug 1.0.34
(its S3 trial, same server) and by sdk_ext, and each object is complete when it appears."""

from pathlib import Path

import pytest

from sdk_ext.format.paths import event_key, parse_index_key
from sdk_ext.storage import open_storage
from tests.compat.test_hooks_smdebug_reads import write_trial
from tests.trial_dump import dump_with_format, dump_with_smdebug


@pytest.mark.smdebug
def test_smdebug_reads_a_trial_the_hook_wrote_straight_to_s3(s3, tmp_path: Path, smdebug_python: Path) -> None:
    write_trial(s3.uri("jobs/run-1"))  # endpoint and credentials from the environment, like a user's
    # sdk_ext's one addition to smdebug's files, which smdebug must not trip over (it lists "index" without a slash)
    assert "jobs/run-1/consolidated/worker_0_index.sdkidx" in s3.keys("jobs/run-1/")
    local = tmp_path / "local"
    write_trial(local)  # the same training, written to a directory
    theirs = dump_with_smdebug(smdebug_python, s3.uri("jobs/run-1"), tmp_path)  # smdebug's S3Trial
    ours = dump_with_format(s3.uri("jobs/run-1"))
    # save_scalar("lr") is written at every TRAIN step; the collections save at TRAIN steps 0, 2, 4
    assert theirs["steps"] == ours["steps"] == {"GLOBAL": [0, 1, 2, 3, 4, 5, 6], "TRAIN": [0, 1, 2, 3, 4], "EVAL": [0, 1]}
    assert theirs["loaded_all_steps"] is True
    assert theirs["tensors"] == ours["tensors"] == dump_with_format(local)["tensors"]
    assert theirs["tensor_names"] == ours["tensor_names"] and theirs["mode_of_step"] == ours["mode_of_step"]


def test_hook_objects_on_s3_are_whole_when_they_appear(s3) -> None:
    write_trial(s3.uri("t"))
    puts = [r.path.split("/", 2)[2] for r in s3.proxy.requests if r.method == "PUT"]
    # one listing (the hook refuses a prefix holding a finished trial), then single PUTs: no multipart
    check, *writes = s3.proxy.requests
    assert check.method == "GET" and "list-type=2" in check.query and "training_job_end.ts" in check.query
    assert all(r.method == "PUT" and not r.query for r in writes)
    keys = s3.keys("t/")
    assert sorted(set(puts)) == keys
    assert not [k for k in keys if k.endswith((".tmp", "claim.smd"))]
    # an index appears only after its event file; data files are written once, collections rewritten whole
    indexes = [k for k in keys if parse_index_key(k[2:]) is not None]
    assert len(indexes) == 7
    for key in indexes:
        assert puts.index("t/" + event_key(*parse_index_key(key[2:]))) < puts.index(key)
    assert {k for k in puts if puts.count(k) > 1} == {"t/collections/000000000/worker_0_collections.json"}
    assert puts[-2:] == ["t/consolidated/worker_0_index.sdkidx", "t/training_job_end.ts"]
    assert open_storage(s3.uri("t")).exists("training_job_end.ts")
