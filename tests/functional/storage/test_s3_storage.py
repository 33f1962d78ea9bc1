"""S3Storage against moto's server over HTTP: listing, ranged reads, writes, errors."""

import os

import pytest

from sdk_ext.exceptions import StorageError, StorageNotFound
from sdk_ext.storage import ReadRequest, open_storage
from sdk_ext.storage.s3 import S3Storage

INDEX = "index/{:09d}/{:012d}_worker_0.json"


def test_open_storage_takes_endpoint_and_credentials_from_the_standard_chain(s3):
    storage = open_storage(s3.uri("jobs/run1/"))
    assert isinstance(storage, S3Storage) and storage.uri == f"s3://{s3.bucket}/jobs/run1"
    storage.write("collections/000000000/worker_0_collections.json", b"{}")
    assert s3.keys() == ["jobs/run1/collections/000000000/worker_0_collections.json"]
    assert s3.proxy.count("PUT") == 1  # it went through AWS_ENDPOINT_URL_S3


def test_constructor_touches_nothing(s3):
    S3Storage(bucket="no-such-bucket", prefix="p", client=s3.direct)
    S3Storage.from_uri("s3://no-such-bucket/p")
    assert s3.proxy.count() == 0


def test_listing_thousands_of_keys_pages_through_all_of_them_in_order(s3):
    keys = [INDEX.format(s // 1000, s) for s in range(2500)]
    s3.put_many({f"trial/{k}": b"{}" for k in reversed(keys)})
    s3.put_many({"trial-other/index/000000000/000000000000_worker_0.json": b"{}", "trial/events/x": b""})
    storage = S3Storage.from_uri(s3.uri("trial"))
    assert list(storage.list("index/")) == keys
    # 1000 keys a page, and one page is one directory: the first page, then concurrently the listing of
    # index/'s directories, the rest of 000000000 (nothing), 000000001 and 000000002 (see test_s3_listing)
    assert s3.proxy.count("GET", query_has="list-type=2") == 5
    assert s3.proxy.count("GET", query_has="delimiter=") == 1


def test_start_after_resumes_a_listing_where_the_last_one_ended(s3):
    keys = [INDEX.format(s // 1000, s) for s in range(1990, 2030)]
    s3.put_many({f"t/{k}": b"{}" for k in keys})
    storage = S3Storage.from_uri(s3.uri("t"), page_size=7)
    assert list(storage.list("index/", start_after=keys[9])) == keys[10:]
    assert list(storage.list("index/000000001/", start_after=keys[-1])) == []
    # start_after before the prefix: everything under the prefix
    assert list(storage.list("index/000000002/", start_after="events/")) == keys[10:]


def test_listing_at_bucket_root_and_of_a_missing_prefix(s3):
    s3.put_many({"a/1": b"x", "b/2": b"y", "b/3.tmp": b"half"})
    storage = S3Storage.from_uri(s3.uri())
    assert list(storage.list("")) == ["a/1", "b/2"]  # leftover .tmp names (a synced crashed job) are skipped
    assert list(storage.list("nothing/")) == []  # an empty prefix is "nothing yet", not an error


def test_list_objects_reports_size_and_etag(s3):
    s3.put("p/k", b"12345")
    [info] = list(S3Storage.from_uri(s3.uri("p")).list_objects(""))
    assert (info.key, info.size) == ("k", 5)
    assert info.etag == s3.direct.head_object(Bucket=s3.bucket, Key="p/k")["ETag"].strip('"')


def test_ranged_reads_return_exactly_the_bytes_named(s3):
    data = os.urandom(100_000)
    s3.put("p/events/000000000001/000000000001_worker_0.tfevents", data)
    storage = S3Storage.from_uri(s3.uri("p"))
    key = "events/000000000001/000000000001_worker_0.tfevents"
    assert storage.read(key) == data
    assert storage.read(key, start=1234, length=4321) == data[1234:5555]
    assert storage.read(key, start=99_990) == data[99_990:]
    assert storage.read(key, start=99_990, length=50) == data[99_990:]  # short at the end, like a file
    assert storage.read(key, start=100_000) == b""
    assert storage.read(key, start=500_000, length=10) == b""
    assert storage.read(key, start=7, length=0) == b""
    ranged = [r for r in s3.proxy.requests if r.method == "GET"]
    assert len(ranged) == 6  # the zero-length read costs nothing


def test_read_many_returns_results_in_request_order_with_coalesced_gets(s3):
    blobs = {f"events/{i:012d}/{i:012d}_worker_0.tfevents": os.urandom(3000 + i) for i in range(40)}
    s3.put_many({f"p/{k}": v for k, v in blobs.items()})
    storage = S3Storage.from_uri(s3.uri("p"), max_workers=8)
    requests = []
    for key in reversed(list(blobs)):  # every object read as 3 adjacent records, out of order
        requests += [ReadRequest(key, 1000, 1000), ReadRequest(key, 0, 1000), ReadRequest(key, 2000)]
    s3.proxy.clear()
    results = storage.read_many(requests)
    expected = [blobs[r.key][r.start :] if r.length is None else blobs[r.key][r.start : r.start + r.length]
                for r in requests]
    assert results == expected
    assert s3.proxy.count("GET") == 40  # one GET per object, not per range


def test_read_many_of_nothing_and_of_a_missing_key(s3):
    s3.put("p/a", b"abc")
    storage = S3Storage.from_uri(s3.uri("p"))
    assert storage.read_many([]) == []
    with pytest.raises(StorageNotFound, match="'gone'"):
        storage.read_many([ReadRequest("a", 0, 1), ReadRequest("gone", 0, 1), ReadRequest("a", 2, 1)])


def test_exists_is_exact_about_the_key(s3):
    s3.put_many({"p/training_job_end.ts": b"", "p/index/a.json": b"{}"})
    storage = S3Storage.from_uri(s3.uri("p"))
    assert storage.exists("training_job_end.ts")
    assert not storage.exists("training_job_end")  # a prefix of a key is not the key
    assert not storage.exists("index")
    assert storage.info("index/a.json").size == 2 and storage.info("index/b.json") is None


def test_write_accepts_bytes_views_and_pieces(s3):
    storage = S3Storage.from_uri(s3.uri("p"))
    storage.write("a", b"one")
    storage.write("b", memoryview(bytearray(b"two")))
    storage.write("c", [b"th", bytearray(b"r"), memoryview(b"ee")])
    assert [s3.get(f"p/{k}") for k in "abc"] == [b"one", b"two", b"three"]


def test_open_write_uploads_once_on_commit_and_nothing_on_abort(s3):
    storage = S3Storage.from_uri(s3.uri("p"))
    writer = storage.open_write("events/000000000005/000000000005_worker_0.tfevents")
    writer.write(b"rec1")
    writer.write(memoryview(b"rec2"))
    assert s3.keys() == [] and s3.proxy.count() == 0  # nothing visible, nothing sent before commit
    writer.commit()
    assert s3.get("p/events/000000000005/000000000005_worker_0.tfevents") == b"rec1rec2"
    assert s3.proxy.count("PUT") == 1
    with pytest.raises(StorageError, match="already committed"):
        writer.write(b"late")
    aborted = storage.open_write("index/000000000/000000000005_worker_0.json")
    aborted.write(b"{")
    aborted.abort()
    assert s3.keys("p/index") == [] and s3.proxy.count() == 1


def test_large_object_is_uploaded_in_parts_and_appears_whole(s3):
    data = os.urandom(11 * 1024 * 1024)
    storage = S3Storage.from_uri(s3.uri("p"), multipart_threshold=5 * 1024 * 1024)
    writer = storage.open_write("big.tfevents")
    for i in range(0, len(data), 1 << 20):
        writer.write(data[i : i + (1 << 20)])
    writer.commit()
    assert s3.get("p/big.tfevents") == data
    assert s3.proxy.count("POST", query_has="uploads") == 1  # CreateMultipartUpload
    assert s3.proxy.count("PUT", query_has="partNumber") == 3
    assert s3.direct.head_object(Bucket=s3.bucket, Key="p/big.tfevents")["ETag"].endswith('-3"')


def test_delete_removes_the_key_and_ignores_a_missing_one(s3):
    s3.put("p/k", b"x")
    storage = S3Storage.from_uri(s3.uri("p"))
    storage.delete("k")
    storage.delete("k")
    assert s3.keys() == []
