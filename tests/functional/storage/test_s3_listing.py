"""S3Storage lists a big prefix of big directories (``index/``) directory by directory, concurrently, and
gets exactly what a sequential listing gets (moto over HTTP, behind the counting proxy)."""

import threading
from urllib.parse import parse_qs

import pytest

from sdk_ext.exceptions import StorageError
from sdk_ext.storage import ObjectInfo
from sdk_ext.storage.cache import CachingStorage
from sdk_ext.storage.retry import RetryPolicy
from sdk_ext.storage.s3 import S3Storage

FAST = RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.004)
WORKERS, STEPS, EVENT_STEPS, PAGE = 2, 2500, 200, 200  # moto reads its whole bucket per request: small
INDEX = "index/{0:09d}/{1:012d}_worker_{2}.json"
EVENT = "events/{0:012d}/{0:012d}_worker_{1}.tfevents"


def trial(root="t"):
    """A trial's keys: 2 workers x 2500 steps of index files (2000, 2000 and 1000 keys in index/'s three
    directories, listed 200 a page) and 2 x 200 event files (2 keys a directory), sizes that differ."""
    objects = {}
    for step in range(STEPS):
        for w in range(WORKERS):
            objects[f"{root}/{INDEX.format(step // 1000, step, w)}"] = b"{}" + b" " * (step % 7)
    for step in range(EVENT_STEPS):
        for w in range(WORKERS):
            objects[f"{root}/{EVENT.format(step, w)}"] = b"e" * (w + 1)
    objects[f"{root}/training_job_end.ts"] = b""
    return objects


def snapshot(s3):
    """Every object in the bucket, from moto's backend (not a listing; moto renders a listed key slowly):
    ``{full key: (size, ETag)}`` in key order."""
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    bucket = s3_backends[DEFAULT_ACCOUNT_ID]["aws"].get_bucket(s3.bucket)
    return {name: (key.size, key.etag.strip('"')) for name, key in sorted(bucket.keys.items())}


def expected(snap, root, prefix, start_after=""):
    """What listing ``prefix`` after ``start_after`` on a storage at ``root`` must give (no .tmp names)."""
    cut = len(root) + 1 if root else 0
    full = f"{root}/{prefix}" if root else prefix
    return [ObjectInfo(key[cut:], size, etag) for key, (size, etag) in snap.items()
            if key.startswith(full) and key[cut:] > start_after and not key.endswith(".tmp")]


def storage(s3, root="t", **options):
    options.setdefault("retry", FAST)
    options.setdefault("page_size", PAGE)
    return S3Storage.from_uri(s3.uri(root), **options)


def listed_prefixes(s3):
    """The Prefix of every listing request, in arrival order."""
    return [parse_qs(r.query).get("prefix", [""])[0] for r in s3.proxy.requests if "list-type=2" in r.query]


def delimited(s3):
    return s3.proxy.count("GET", query_has="delimiter=")


STARTS = [
    "",  # from the first directory's first key
    INDEX.format(0, 500, 1),  # inside the first directory
    INDEX.format(0, 999, WORKERS - 1),  # the first directory's last key
    "index/000000001/",  # a directory's name
    INDEX.format(1, 1234, 0),  # inside a later directory
    INDEX.format(2, 2300, 1),  # inside the last one
]


def test_index_listing_by_directory_equals_the_sequential_listing(s3):
    s3.put_many(trial())
    snap = snapshot(s3)
    for start in STARTS:
        s3.proxy.clear()
        got = list(storage(s3).list_objects("index/", start_after=start))
        assert got == expected(snap, "t", "index/", start), start
        assert delimited(s3) == 1, start  # it did go by directory
        assert any(p.startswith("t/index/00000000") for p in listed_prefixes(s3)), start
    # S3Storage's own sequential listing (pages too big to be truncated: moto takes any MaxKeys) agrees
    s3.proxy.clear()
    assert list(storage(s3, page_size=100_000).list_objects("index/")) == expected(snap, "t", "index/")
    assert delimited(s3) == 0


def test_requests_the_directory_listing_costs(s3):
    s3.put_many(trial())
    assert len(list(storage(s3).list("index/"))) == WORKERS * STEPS
    # the first page, the listing of index/'s directories, then by directory: the rest of 000000000
    # (9 pages), 000000001 (10) and 000000002 (5): 26 requests for the 25 pages of a sequential listing
    assert s3.proxy.count("GET", query_has="list-type=2") == 1 + 1 + 9 + 10 + 5
    prefixes = listed_prefixes(s3)
    assert prefixes[0] == "t/index/" and prefixes.count("t/index/") == 2  # the first page, the directories
    assert sorted(set(prefixes)) == ["t/index/", "t/index/000000000/", "t/index/000000001/", "t/index/000000002/"]


def test_past_the_end_and_nothing_after_the_first_directory(s3):
    s3.put_many(trial())
    snap = snapshot(s3)
    assert list(storage(s3).list_objects("index/", start_after="index/zzz")) == []
    s3.proxy.clear()
    # the last directory: one directory only; its rest is listed after the first page as it would be anyway
    start = INDEX.format(2, 2000, 0)
    assert list(storage(s3).list_objects("index/", start_after=start)) == expected(snap, "t", "index/", start)
    assert delimited(s3) == 1


def test_the_trial_root_and_a_bucket_root_list_the_same(s3):
    s3.put_many(trial())
    snap = snapshot(s3)
    # the root of the trial: the first page lies in events/ (400 keys), so events/, index/ and the end
    # marker (a key directly under the root) are listed concurrently
    assert list(storage(s3).list_objects("")) == expected(snap, "t", "")
    assert delimited(s3) == 1
    s3.proxy.clear()
    at_bucket_root = storage(s3, root="")
    start = INDEX.format(1, 1500, 1)
    assert list(at_bucket_root.list_objects("t/index/", start_after=f"t/{start}")) == (
        expected(snap, "", "t/index/", f"t/{start}"))
    assert delimited(s3) == 1
    s3.proxy.clear()
    start = f"t/{INDEX.format(2, 2100, 0)}"
    assert list(at_bucket_root.list_objects("", start_after=start)) == expected(snap, "", "", start)  # t/ alone
    assert delimited(s3) == 1


def test_events_one_key_per_worker_a_directory_stay_sequential(s3):
    s3.put_many(trial())
    snap = snapshot(s3)
    assert list(storage(s3).list_objects("events/")) == expected(snap, "t", "events/")
    assert delimited(s3) == 0
    assert s3.proxy.count("GET", query_has="list-type=2") == 2  # 400 keys, 200 a page
    s3.proxy.clear()
    start = EVENT.format(150, 0)
    assert list(storage(s3).list_objects("events/", start_after=start)) == expected(snap, "t", "events/", start)
    assert delimited(s3) == 0


def test_a_prefix_that_is_no_directory_or_a_limit_stays_sequential(s3):
    s3.put_many(trial())
    snap = snapshot(s3)
    start = INDEX.format(2, 2200, 0)
    assert list(storage(s3).list_objects("index", start_after=start)) == expected(snap, "t", "index", start)
    assert list(storage(s3).list_objects("index/000000002/000000002")) == expected(
        snap, "t", "index/000000002/000000002")
    assert len(list(storage(s3).list_objects("index/", limit=250))) == 250
    assert storage(s3).info(INDEX.format(0, 3, 1)) is not None
    assert delimited(s3) == 0


def test_keys_directly_under_the_prefix_are_merged_in_key_order(s3):
    s3.put_many(trial())
    direct = {
        "index/000000000.json": b"a",  # '.' sorts before '/': before 000000000/'s keys
        "index/000000001": b"bb",  # a prefix of a directory's keys: just before them
        "index/000000001a": b"ccc",  # after 000000001/ ('a' > '/'), before 000000002/
        "index/000000002-x": b"dddd",  # '-' sorts before '/': before 000000002/'s keys
        "index/zz.json": b"eeeee",  # after everything
        "index/half.tmp": b"partial",  # a temporary name: never listed
    }
    s3.put_many({f"t/{k}": v for k, v in direct.items()})
    snap = snapshot(s3)
    # each start is followed by a page of one directory's keys: by directory, with the direct keys after it
    for start in (INDEX.format(0, 10, 0), "index/000000000.json", "index/000000001", INDEX.format(1, 1500, 0),
                  "index/000000002-x"):
        s3.proxy.clear()
        got = list(storage(s3).list_objects("index/", start_after=start))
        assert got == expected(snap, "t", "index/", start)
        assert delimited(s3) == 1
        assert {k for k in direct if k > start and not k.endswith(".tmp")} <= {o.key for o in got}
    # from the start, the first page holds index/000000000.json and 199 keys of 000000000/: sequential
    s3.proxy.clear()
    assert list(storage(s3).list_objects("index/")) == expected(snap, "t", "index/")
    assert delimited(s3) == 0


def test_directories_are_listed_at_the_same_time(s3):
    """Both later directories' first pages must be in flight together: the proxy holds each until the
    other arrives (a listing that waits for one directory before asking for the next never gets there)."""
    s3.put_many(trial())
    snap = snapshot(s3)
    together = threading.Barrier(2, timeout=20)
    broken = []

    def hold(seen):
        prefix = parse_qs(seen.query).get("prefix", [""])[0]
        if prefix in ("t/index/000000001/", "t/index/000000002/") and "continuation-token" not in seen.query:
            try:
                together.wait()
            except threading.BrokenBarrierError:
                broken.append(prefix)

    s3.proxy.hold = hold
    assert list(storage(s3).list_objects("index/")) == expected(snap, "t", "index/")
    assert broken == []


@pytest.mark.parametrize(("listing", "failing"), [
    ("t/index/", lambda q: "delimiter" in q),  # the listing of index/'s directories
    ("t/index/000000000/", lambda q: "continuation-token" in q),  # a later page of the first directory's rest
    ("t/index/000000001/", lambda q: "continuation-token" in q),  # a later page of a later directory
    ("t/index/000000002/", lambda q: True),  # the last directory, from its first page
])
def test_a_failed_directory_listing_raises_never_a_part(s3, listing, failing):
    s3.put_many(trial())

    def match(seen):
        query = parse_qs(seen.query)
        return query.get("prefix") == [listing] and failing(query)

    s3.proxy.add_fault(match, "status", status=500, code="InternalError", times=100)  # beyond 4 attempts
    with pytest.raises(StorageError, match=rf"listing s3://{s3.bucket}/{listing}: InternalError.*after 4 attempts"):
        list(storage(s3).list_objects("index/"))
    assert s3.proxy.faults[0].hits == 4


def test_a_directory_listing_retried_within_the_policy_is_whole(s3):
    s3.put_many(trial())
    snap = snapshot(s3)
    s3.proxy.add_fault(lambda seen: "prefix=t%2Findex%2F000000001%2F" in seen.query, "status", status=503,
                       code="SlowDown", times=3)
    assert list(storage(s3).list_objects("index/")) == expected(snap, "t", "index/")


def test_the_endpoint_going_away_during_a_directory_listing_raises(s3):
    s3.put_many(trial())
    s3.proxy.add_fault(lambda seen: "prefix=t%2Findex%2F000000002%2F" in seen.query, "stop")
    with pytest.raises(StorageError, match="network failure|dropped"):
        list(storage(s3).list_objects("index/"))


def test_the_cache_in_front_lists_and_reads_the_same(s3, tmp_path):
    s3.put_many(trial())
    snap = snapshot(s3)
    cached = CachingStorage(storage(s3), tmp_path)
    start = INDEX.format(0, 700, 0)
    assert list(cached.list_objects("index/", start_after=start)) == expected(snap, "t", "index/", start)
    assert delimited(s3) == 1
    lists = s3.proxy.count("GET", query_has="list-type=2")
    key = INDEX.format(2, 2222, 1)
    assert cached.read(key) == s3.get(f"t/{key}")
    assert s3.proxy.count("GET", query_has="list-type=2") == lists  # validated by that listing
    assert cached.read(EVENT.format(7, 1)) == b"ee"
    assert s3.proxy.count("GET", query_has="list-type=2") == lists + 2  # events/ listed once, page by page
    assert delimited(s3) == 1
    s3.proxy.clear()
    assert cached.read(key) == s3.get(f"t/{key}") and s3.proxy.count() == 0  # from the cache
