"""The local cache in front of S3: a second analysis downloads nothing again, and never reads stale bytes."""

import os

import pytest

from sdk_ext.exceptions import StorageNotFound
from sdk_ext.storage import ReadRequest, open_storage
from sdk_ext.storage.cache import CachingStorage
from sdk_ext.storage.s3 import S3Storage

EVENT = "events/{0:012d}/{0:012d}_worker_0.tfevents"
INDEX = "index/000000000/{0:012d}_worker_0.json"


def trial_objects(steps):
    objects = {}
    for s in steps:
        objects[f"t/{EVENT.format(s)}"] = os.urandom(5000)
        objects[f"t/{INDEX.format(s)}"] = f'{{"step": {s}}}'.encode()
    return objects


def analysis(storage):
    """What a trial does: list the index, read every index file, then ranges of every event file."""
    index = list(storage.list("index/"))
    storage.read_many([ReadRequest(k) for k in index])
    steps = [int(k.rsplit("/", 1)[1].split("_")[0]) for k in index]
    requests = [ReadRequest(EVENT.format(s), o, 1000) for s in steps for o in (0, 1000, 4000)]
    return storage.read_many(requests), requests


def counts(proxy):
    return {"list": proxy.count("GET", query_has="list-type=2"),
            "get": proxy.count("GET") - proxy.count("GET", query_has="list-type=2")}


def test_a_second_analysis_downloads_nothing_again(s3, tmp_path):
    objects = trial_objects(range(30))
    s3.put_many(objects)
    first, requests = analysis(open_storage(s3.uri("t"), cache_dir=tmp_path))
    assert first == [objects[f"t/{r.key}"][r.start : r.start + r.length] for r in requests]
    assert counts(s3.proxy) == {"list": 2, "get": 60}  # index/ and events/ listed once; each object once
    s3.proxy.clear()
    second, _ = analysis(open_storage(s3.uri("t"), cache_dir=tmp_path))  # a new process, same cache
    assert second == first
    assert counts(s3.proxy) == {"list": 2, "get": 0}  # listings are never cached; objects are
    assert not [p for p in tmp_path.rglob(".part-*")]


def test_listings_are_never_cached_and_new_event_files_are_found(s3, tmp_path):
    s3.put_many(trial_objects(range(3)))
    storage = open_storage(s3.uri("t"), cache_dir=tmp_path)
    analysis(storage)
    s3.put_many(trial_objects([3, 4]))  # the job goes on writing
    results, _ = analysis(storage)
    assert len(results) == 15 and all(len(r) == 1000 for r in results)
    # the new event files were validated with one listing of what came after the last key seen
    assert any("start-after=t%2Fevents%2F000000000002" in r.query for r in s3.proxy.requests)


def test_a_rewritten_object_is_downloaded_again_not_served_stale(s3, tmp_path):
    s3.put("t/index/000000000/000000000000_worker_0.json", b"old contents")
    assert open_storage(s3.uri("t"), cache_dir=tmp_path).read("index/000000000/000000000000_worker_0.json") == b"old contents"
    s3.put("t/index/000000000/000000000000_worker_0.json", b"new!")  # same key rewritten (a rerun)
    storage = open_storage(s3.uri("t"), cache_dir=tmp_path)
    assert storage.read("index/000000000/000000000000_worker_0.json") == b"new!"
    assert storage.read("index/000000000/000000000000_worker_0.json", start=1, length=2) == b"ew"


def test_large_objects_are_read_through_by_range(s3, tmp_path):
    data = os.urandom(300_000)
    s3.put("t/events/big", data)
    storage = CachingStorage(S3Storage.from_uri(s3.uri("t")), tmp_path, max_object_bytes=100_000)
    assert storage.read("events/big", start=1000, length=10) == data[1000:1010]
    assert storage.read("events/big", start=1000, length=10) == data[1000:1010]
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]
    ranged = [r for r in s3.proxy.requests if r.method == "GET" and "list-type" not in r.query]
    assert len(ranged) == 2


def test_a_damaged_or_removed_cache_file_is_fetched_again(s3, tmp_path):
    s3.put("t/index/a.json", b"0123456789")
    storage = open_storage(s3.uri("t"), cache_dir=tmp_path)
    assert storage.read("index/a.json") == b"0123456789"
    [cached] = [p for p in tmp_path.rglob("*") if p.is_file()]
    cached.write_bytes(b"01234")  # truncated by hand
    assert open_storage(s3.uri("t"), cache_dir=tmp_path).read("index/a.json", start=5) == b"56789"
    cached.unlink()
    assert open_storage(s3.uri("t"), cache_dir=tmp_path).read("index/a.json", start=8) == b"89"


def test_missing_keys_and_failures_still_raise(s3, tmp_path):
    s3.put("t/index/a.json", b"{}")
    storage = open_storage(s3.uri("t"), cache_dir=tmp_path)
    with pytest.raises(StorageNotFound, match="'events/000000000009/x.tfevents'"):
        storage.read_many([ReadRequest("index/a.json"), ReadRequest("events/000000000009/x.tfevents", 0, 5)])
    with pytest.raises(StorageNotFound, match="does not exist"):
        list(open_storage("s3://no-such-bucket-either/t", cache_dir=tmp_path).list("index/"))


def test_writes_and_exists_go_straight_through(s3, tmp_path):
    storage = open_storage(s3.uri("t"), cache_dir=tmp_path)
    storage.write("training_job_end.ts", b"")
    assert storage.exists("training_job_end.ts") and s3.keys() == ["t/training_job_end.ts"]
    storage.delete("training_job_end.ts")
    assert not storage.exists("training_job_end.ts")
