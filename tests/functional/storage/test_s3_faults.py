"""S3Storage when S3 misbehaves (moto behind a proxy that throttles, cuts bodies, goes away)."""

import os

import pytest

from sdk_ext.exceptions import StorageAccessDenied, StorageError, StorageNotFound
from sdk_ext.storage import ReadRequest
from sdk_ext.storage.retry import RetryPolicy
from sdk_ext.storage.s3 import S3Storage

FAST = RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.004)


def is_list(seen):
    return seen.method == "GET" and "list-type=2" in seen.query


def is_get(seen):
    return seen.method == "GET" and "list-type" not in seen.query


def storage(s3, prefix="p", **options):
    options.setdefault("retry", FAST)
    return S3Storage.from_uri(s3.uri(prefix), **options)


def test_throttled_listing_is_retried_with_backoff(s3):
    s3.put_many({f"p/index/{i:04d}.json": b"{}" for i in range(30)})
    s3.proxy.add_fault(is_list, "status", status=503, code="SlowDown", times=3)
    pauses = []
    st = storage(s3, retry=RetryPolicy(max_attempts=5, base_delay=0.001, max_delay=1), sleep=pauses.append)
    assert len(list(st.list("index/"))) == 30
    assert s3.proxy.count() == 4 and len(pauses) == 3
    assert all(0 <= p <= 0.001 * 2**i for i, p in enumerate(pauses))


@pytest.mark.parametrize(("status", "code"), [(503, "SlowDown"), (400, "Throttling"), (400, "RequestLimitExceeded"),
                                              (500, "InternalError"), (502, "BadGateway")])
def test_throttled_and_failed_gets_are_retried_until_they_succeed(s3, status, code):
    blobs = {f"events/{i}": os.urandom(2000) for i in range(6)}
    s3.put_many({f"p/{k}": v for k, v in blobs.items()})
    s3.proxy.add_fault(is_get, "status", status=status, code=code, times=3)
    results = storage(s3, max_workers=3).read_many([ReadRequest(k, 10, 100) for k in blobs])
    assert results == [v[10:110] for v in blobs.values()]
    assert s3.proxy.count("GET") == 6 + 3


def test_throttled_write_is_retried_and_the_object_appears_once_whole(s3):
    s3.proxy.add_fault(lambda r: r.method == "PUT", "status", status=503, code="SlowDown", times=2)
    storage(s3).write("index/000000000/000000000001_worker_0.json", b'{"x": 1}')
    assert s3.get("p/index/000000000/000000000001_worker_0.json") == b'{"x": 1}'
    assert s3.proxy.count("PUT") == 3


def test_throttling_that_never_ends_raises_after_the_last_attempt(s3):
    s3.proxy.add_fault(is_list, "status", status=503, code="SlowDown", times=100)
    with pytest.raises(StorageError, match="still throttled.*after 4 attempts"):
        storage(s3).list("index/")
    assert s3.proxy.count() == 4


def test_a_listing_that_fails_on_a_later_page_raises_instead_of_returning_part(s3):
    s3.put_many({f"p/index/{i:04d}.json": b"{}" for i in range(25)})
    s3.proxy.add_fault(lambda r: is_list(r) and "continuation-token" in r.query, "status",
                       status=500, code="InternalError", times=100)
    with pytest.raises(StorageError, match=r"listing s3://.*/p/index/: InternalError.*after 4 attempts"):
        storage(s3, page_size=10).list("index/")


def test_a_body_cut_short_is_fetched_again(s3):
    data = os.urandom(50_000)
    s3.put("p/events/e.tfevents", data)
    s3.proxy.add_fault(is_get, "truncate", times=1)
    assert storage(s3).read("events/e.tfevents", start=100, length=40_000) == data[100:40_100]
    assert s3.proxy.count("GET") == 2


def test_a_body_always_cut_short_raises_and_returns_nothing(s3):
    s3.put("p/events/e.tfevents", os.urandom(50_000))
    s3.proxy.add_fault(is_get, "truncate", times=100)
    with pytest.raises(StorageError, match=r"reading s3://.*/p/events/e.tfevents.*after 4 attempts"):
        storage(s3).read("events/e.tfevents")


def test_server_stopped_mid_read_raises_a_clear_error_not_partial_data(s3):
    blobs = {f"events/{i}": os.urandom(20_000) for i in range(8)}
    s3.put_many({f"p/{k}": v for k, v in blobs.items()})
    s3.proxy.add_fault(is_get, "stop")  # the first GET gets half its body, then the endpoint is gone
    st = storage(s3, max_workers=4)
    with pytest.raises(StorageError, match="network failure|dropped mid-read") as info:
        st.read_many([ReadRequest(k, 0, 20_000) for k in blobs])
    assert "s3://" in str(info.value)
    with pytest.raises(StorageError, match="AWS_ENDPOINT_URL_S3"):
        st.list("")  # and nothing after it looks like an empty bucket


def test_a_key_deleted_between_listing_and_reading_is_not_found(s3):
    s3.put_many({"p/events/000000000001/000000000001_worker_0.tfevents": b"abc", "p/events/b": b"def"})
    st = storage(s3)
    keys = list(st.list("events/"))
    s3.direct.delete_object(Bucket=s3.bucket, Key="p/events/000000000001/000000000001_worker_0.tfevents")
    with pytest.raises(StorageNotFound, match="000000000001_worker_0.tfevents.*deleted or never written"):
        st.read_many([ReadRequest(k, 0, 3) for k in keys])
    assert s3.proxy.count("GET") == 1 + 2  # not retried: a missing key is not transient


def test_a_missing_bucket_is_an_error_everywhere_never_an_empty_trial(s3):
    st = S3Storage.from_uri("s3://no-such-bucket-here/trial", retry=FAST)
    for call in (lambda: st.list("index/"), lambda: st.exists("training_job_end.ts"),
                 lambda: st.read("index/a.json"), lambda: st.write("a", b"x")):
        with pytest.raises(StorageNotFound, match="bucket 'no-such-bucket-here' does not exist"):
            call()


def test_access_denied_is_reported_at_once_with_what_to_grant(s3):
    s3.proxy.add_fault(is_list, "status", status=403, code="AccessDenied", times=100)
    with pytest.raises(StorageAccessDenied, match=r"listing s3://.*/p/.*s3:ListBucket"):
        storage(s3).list("")
    assert s3.proxy.count() == 1


def test_missing_credentials_are_reported_before_any_request(s3, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(StorageAccessDenied, match="no usable AWS credentials"):
        storage(s3).list("")
    assert s3.proxy.count() == 0


def test_an_unreachable_endpoint_names_it(s3):
    s3.proxy.stop()
    with pytest.raises(StorageError, match=r"network failure after 4 attempts.*127\.0\.0\.1"):
        storage(s3).read("k")
