"""Storage on an S3 prefix (boto3), for trials at ``s3://bucket/prefix``.

Costs are requests: one ListObjectsV2 per 1000 keys (a big prefix of big directories, as ``index/``,
is listed directory by directory, concurrently: a few more requests, far fewer round trips one after
another), one GET per object or coalesced range group (see :mod:`sdk_ext.storage.ranges`), run
``max_workers`` at a time. Transient failures (throttling,
5xx, a dropped connection, a body cut short) are retried with backoff (:mod:`sdk_ext.storage.retry`);
the client built by :meth:`S3Storage.from_uri` has botocore's own retries off, so each attempt is one
request. Everything else raises: StorageNotFound (bucket or key), StorageAccessDenied (credentials,
policy), StorageError (the rest) — a failed listing never looks like an empty one.

Objects appear whole: one PutObject, or a multipart upload (completed in one call) above
``multipart_threshold``; :meth:`S3Storage.open_write` buffers and uploads on commit.
"""

from __future__ import annotations

import builtins
import io
import logging
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any

from sdk_ext.exceptions import ConfigError, StorageError
from sdk_ext.storage.base import Buffer, ObjectInfo, ReadRequest
from sdk_ext.storage.capabilities import Capabilities, Writes
from sdk_ext.storage.ranges import Span, plan_reads, split_span
from sdk_ext.storage.retry import RetriesExhausted, RetryPolicy, call_with_retries
from sdk_ext.storage.s3_errors import TruncatedBody, is_transient, translate

S3Client = Any  # boto3's S3 client (typed stubs are optional: mypy_boto3_s3)

log = logging.getLogger(__name__)

TMP_SUFFIX = ".tmp"  # never written here, but skipped in listings like LocalStorage (a synced local trial)
_MiB = 1024 * 1024
DEFAULT_RETRY = RetryPolicy()


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix/`` -> ``("bucket", "some/prefix")``.

    Raises:
        ConfigError: not an ``s3://`` URI, or no bucket.
    """
    if not uri.startswith("s3://"):
        raise ConfigError(f"{uri!r} is not an S3 URI; write it as s3://bucket/prefix", where="S3 path")
    bucket, _, prefix = uri[len("s3://") :].partition("/")
    if not bucket:
        raise ConfigError(f"{uri!r} names no bucket; write it as s3://bucket/prefix", where="S3 path")
    return bucket, prefix.strip("/")


def make_client(
    *, endpoint_url: str | None = None, region_name: str | None = None, max_pool_connections: int = 16
) -> S3Client:
    """An S3 client from the standard boto3 chain (env, profile, instance role; AWS_ENDPOINT_URL_S3),
    with botocore's retries off (:class:`S3Storage` retries itself) and enough pooled connections."""
    import boto3
    from botocore.config import Config

    config = Config(
        retries={"total_max_attempts": 1},
        max_pool_connections=max_pool_connections,
        connect_timeout=10,
        read_timeout=60,
    )
    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint_url, region_name=region_name, config=config
    )


class _S3Writer:
    """Buffers (in memory, spilling to a temporary file past 16 MiB) and uploads on commit."""

    def __init__(self, storage: S3Storage, key: str) -> None:
        self._storage, self._key = storage, key
        self._buffer: IO[bytes] | None = tempfile.SpooledTemporaryFile(max_size=16 * _MiB)  # noqa: SIM115

    def _open(self) -> IO[bytes]:
        if self._buffer is None:
            raise StorageError(f"{self._storage.uri_of(self._key)}: writer already committed or aborted")
        return self._buffer

    def write(self, data: Buffer) -> None:
        self._open().write(data)

    def commit(self) -> None:
        buffer = self._open()
        try:
            size = buffer.tell()
            self._storage._upload(self._key, buffer, size)
        finally:
            self.abort()

    def abort(self) -> None:
        if self._buffer is not None:
            self._buffer.close()
            self._buffer = None


class S3Storage:
    """A trial root at ``s3://bucket/prefix``. The constructor only assigns.

    Args:
        bucket: the bucket name.
        prefix: the root inside the bucket (no leading or trailing ``/`` needed).
        client: a boto3 S3 client; its own retry settings add to ours (see :func:`make_client`).
        max_workers: concurrent GETs in :meth:`read_many` (the client needs as many pooled connections).
        retry: how transient failures are retried.
        max_gap: ranges of one object at most this many bytes apart are fetched in one GET.
        max_span: the largest coalesced GET.
        multipart_threshold: objects larger than this are uploaded in parts (same size).
        page_size: keys per ListObjectsV2 page (S3's maximum is 1000).
        sleep: the pause between retries (tests pass a fake).
    """

    def __init__(
        self,
        *,
        bucket: str,
        prefix: str = "",
        client: S3Client,
        max_workers: int = 16,
        retry: RetryPolicy = DEFAULT_RETRY,
        max_gap: int = 256 * 1024,
        max_span: int = 16 * _MiB,
        multipart_threshold: int = 64 * _MiB,
        page_size: int = 1000,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.client = client
        self.max_workers = max_workers
        self.retry = retry
        self.max_gap = max_gap
        self.max_span = max_span
        self.multipart_threshold = multipart_threshold
        self.page_size = page_size
        self._sleep = sleep

    @classmethod
    def from_uri(
        cls,
        uri: str,
        *,
        client: S3Client | None = None,
        endpoint_url: str | None = None,
        region_name: str | None = None,
        **options: Any,
    ) -> S3Storage:
        """The storage for ``s3://bucket/prefix``; without ``client``, one from the standard chain.

        ``options`` are the constructor's keyword arguments (``max_workers``, ``retry``, ...).
        """
        bucket, prefix = parse_s3_uri(uri)
        if client is None:
            workers = int(options.get("max_workers", 16))
            client = make_client(endpoint_url=endpoint_url, region_name=region_name, max_pool_connections=workers)
        return cls(bucket=bucket, prefix=prefix, client=client, **options)

    def __repr__(self) -> str:
        return f"S3Storage({self.uri!r})"

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def uri_of(self, key: str) -> str:
        """The full ``s3://`` address of ``key``, for messages."""
        return f"s3://{self.bucket}/{self._full(key)}"

    def _full(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _call(self, fn: Callable[[], Any], *, what: str, key: str | None = None) -> Any:
        """Run one request with retries; translate what finally fails."""
        try:
            return call_with_retries(fn, policy=self.retry, is_transient=is_transient, what=what, sleep=self._sleep)
        except RetriesExhausted as err:
            raise translate(err.error, what=what, bucket=self.bucket, key=key, attempts=err.attempts) from err.error
        except Exception as err:
            raise translate(err, what=what, bucket=self.bucket, key=key, attempts=1) from err

    # --- listing ---------------------------------------------------------------------------------

    def list_objects(self, prefix: str, *, start_after: str = "", limit: int | None = None) -> Iterator[ObjectInfo]:
        """Objects (key, size, ETag) under ``prefix`` after ``start_after``, in key order.

        Every page is fetched before this returns, so a failure raises here, never midway. Pages follow
        one another (continuation tokens), except where a directory's listing is big enough to pay for
        listing it by subdirectory, concurrently (see :meth:`_list_by_directory`).
        """
        full_prefix = self._full(prefix) if prefix else (self.prefix + "/" if self.prefix else "")
        args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": full_prefix}
        if start_after:
            args["StartAfter"] = self._full(start_after)
        what = f"listing s3://{self.bucket}/{full_prefix}"
        found: builtins.list[ObjectInfo] = []
        while True:
            args["MaxKeys"] = self.page_size if limit is None else min(self.page_size, limit - len(found))
            page = self._call(lambda: self.client.list_objects_v2(**args), what=what)
            contents: Sequence[dict[str, Any]] = page.get("Contents", ())
            # a truncated first page wholly in one subdirectory: directories hold a page or more (index/),
            # so listing them side by side pays; where they hold a few keys (events/), it would not
            if limit is None and page.get("IsTruncated") and "ContinuationToken" not in args:
                directory = _sole_directory(full_prefix, contents)
                if directory is not None:
                    return iter(self._list_by_directory(full_prefix, directory, contents, args.get("StartAfter", "")))
            found += self._infos(contents)
            if not page.get("IsTruncated") or (limit is not None and len(found) >= limit):
                return iter(found)
            args["ContinuationToken"] = page["NextContinuationToken"]

    def _infos(self, contents: Iterable[dict[str, Any]]) -> builtins.list[ObjectInfo]:
        """A page's ``Contents`` as ObjectInfo (keys relative to the root), without temporary names."""
        cut = len(self.prefix) + 1 if self.prefix else 0
        return [
            ObjectInfo(obj["Key"][cut:], int(obj.get("Size", 0)), str(obj.get("ETag", "")).strip('"'))
            for obj in contents
            if not obj["Key"].endswith(TMP_SUFFIX)
        ]

    def _list_all(
        self, prefix: str, *, start_after: str = "", delimiter: str = ""
    ) -> tuple[builtins.list[ObjectInfo], builtins.list[str]]:
        """Every page of one listing (``prefix`` and ``start_after`` are full S3 keys), one after another:
        the objects and, with a ``delimiter``, the common prefixes (full, as S3 sends them)."""
        args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix, "MaxKeys": self.page_size}
        if start_after:
            args["StartAfter"] = start_after
        if delimiter:
            args["Delimiter"] = delimiter
        what = f"listing s3://{self.bucket}/{prefix}"
        objects: builtins.list[ObjectInfo] = []
        prefixes: builtins.list[str] = []
        while True:
            page = self._call(lambda: self.client.list_objects_v2(**args), what=what)
            objects += self._infos(page.get("Contents", ()))
            prefixes += [str(p["Prefix"]) for p in page.get("CommonPrefixes", ())]
            if not page.get("IsTruncated"):
                return objects, prefixes
            args["ContinuationToken"] = page["NextContinuationToken"]

    def _list_by_directory(
        self, prefix: str, first_dir: str, first_page: Sequence[dict[str, Any]], start_after: str
    ) -> builtins.list[ObjectInfo]:
        """The listing of ``prefix`` after ``start_after`` (full S3 keys) whose truncated first page
        lies wholly in ``first_dir`` (a subdirectory directly under ``prefix``), the rest fetched
        directory by directory, concurrently.

        Such a prefix holds directories of at least a page of keys each (``index/``: 1000 steps x
        workers), and a sequential listing would cost one round trip per page. Instead, concurrently
        on ``max_workers`` threads: one listing of ``prefix`` with Delimiter ``/`` after ``start_after``
        (its subdirectories and the keys directly under it), the rest of ``first_dir`` after the first
        page's last key, then every later subdirectory whole. Nothing but ``first_dir`` lies between
        ``start_after`` and that key (the first page is all there is), so the delimiter listing costs
        no more than one after the last key would. Which directories come after ``first_dir`` is
        decided here, by name (S3 lists a directory with keys after StartAfter as a common prefix,
        moto only one whose name is after it); a directory's keys are contiguous in key order, so
        merging directories and direct keys by name gives exactly the sequential listing. Any failed
        request raises.
        """
        cut = len(self.prefix) + 1 if self.prefix else 0
        last = first_page[-1]["Key"]
        head = self._infos(first_page)
        pool = ThreadPoolExecutor(max_workers=max(1, self.max_workers), thread_name_prefix="s3-list")
        try:
            tree = pool.submit(self._list_all, prefix, start_after=start_after, delimiter="/")
            rest = pool.submit(self._list_all, first_dir, start_after=last)
            direct, dirs = tree.result()
            later = sorted({d for d in dirs if d > first_dir})
            futures = [(d, pool.submit(self._list_all, d)) for d in later]
            segments = [(first_dir[cut:], head + rest.result()[0])]
            segments += [(d[cut:], future.result()[0]) for d, future in futures]
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        segments += [(o.key, [o]) for o in direct]  # after start_after, so after the first page too
        segments.sort(key=lambda segment: segment[0])
        log.debug("listed s3://%s/%s by directory: %d directories, %d keys directly under it", self.bucket,
                  prefix, 1 + len(later), len(segments) - 1 - len(later))
        return [o for _, objects in segments for o in objects]

    def list(self, prefix: str, *, start_after: str = "") -> Iterator[str]:
        return iter([o.key for o in self.list_objects(prefix, start_after=start_after)])

    def capabilities(self) -> Capabilities:
        """Listings with sizes and ETags; writes go through an upload spool (a remote may be slow or down)."""
        return Capabilities(Writes.SPOOLED, listings=self)

    def info(self, key: str) -> ObjectInfo | None:
        """Size and ETag of ``key``, or None if it does not exist (one LIST request, like exists())."""
        for obj in self.list_objects(key, limit=1):
            return obj if obj.key == key else None
        return None

    def exists(self, key: str) -> bool:
        # A one-key listing rather than HEAD: HEAD cannot tell a missing bucket from a missing key.
        return self.info(key) is not None

    # --- reading ---------------------------------------------------------------------------------

    def read(self, key: str, *, start: int = 0, length: int | None = None) -> bytes:
        if start < 0 or (length is not None and length < 0):
            raise ValueError(f"invalid byte range for {key!r}: start={start}, length={length}")
        if length == 0:
            return b""
        return self._get(key, start, None if length is None else start + length)

    def _get(self, key: str, start: int, end: int | None) -> bytes:
        """Bytes ``[start, end)`` of ``key`` (fewer if the object is shorter), complete or an error."""
        args: dict[str, Any] = {"Bucket": self.bucket, "Key": self._full(key)}
        ranged = start > 0 or end is not None
        if ranged:
            args["Range"] = f"bytes={start}-{'' if end is None else end - 1}"
        where = "" if not ranged else f" bytes {start}-{'' if end is None else end - 1}"
        what = f"reading {self.uri_of(key)}{where}"

        def attempt() -> bytes:
            from botocore.exceptions import ClientError

            try:
                response = self.client.get_object(**args)
            except ClientError as err:
                if err.response.get("Error", {}).get("Code") == "InvalidRange":
                    return b""  # starts past the end of the object: nothing there, as with a file
                raise
            body = response["Body"]
            try:
                data = body.read()
            finally:
                body.close()
            expected = response.get("ContentLength")
            if expected is not None and len(data) != int(expected):
                raise TruncatedBody(f"got {len(data)} of {expected} bytes")
            if ranged and "ContentRange" not in response:
                return bytes(data[start:end])  # the server ignored Range and sent the whole object
            return bytes(data)

        data: bytes = self._call(attempt, what=what, key=key)
        return data

    def read_many(self, requests: Sequence[ReadRequest]) -> builtins.list[bytes]:
        """All ``requests``, in order; adjacent ranges of one object share a GET, GETs run concurrently.

        Raises the first failure; nothing partial is returned.
        """
        results: builtins.list[bytes] = [b""] * len(requests)
        spans = plan_reads(requests, max_gap=self.max_gap, max_span=self.max_span)

        def fetch(span: Span) -> None:
            split_span(span, self._get(span.key, span.start, span.end), results)

        if len(spans) <= 1 or self.max_workers <= 1:
            for span in spans:
                fetch(span)
            return results
        with ThreadPoolExecutor(max_workers=min(self.max_workers, len(spans)), thread_name_prefix="s3-read") as pool:
            futures = [pool.submit(fetch, span) for span in spans]
            try:
                for future in futures:
                    future.result()
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
        return results

    # --- writing ---------------------------------------------------------------------------------

    def write(self, key: str, data: Buffer | Iterable[Buffer]) -> None:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            data = b"".join(bytes(p) for p in data)
        self._upload(key, io.BytesIO(data), memoryview(data).nbytes)

    def open_write(self, key: str) -> _S3Writer:
        return _S3Writer(self, key)

    def _upload(self, key: str, stream: IO[bytes], size: int) -> None:
        what = f"writing {self.uri_of(key)} ({size} bytes)"
        if size <= self.multipart_threshold:

            def put() -> None:
                stream.seek(0)
                self.client.put_object(Bucket=self.bucket, Key=self._full(key), Body=stream.read())

            self._call(put, what=what, key=key)
            return
        from boto3.s3.transfer import TransferConfig

        config = TransferConfig(
            multipart_threshold=self.multipart_threshold,
            multipart_chunksize=self.multipart_threshold,
            max_concurrency=max(1, min(self.max_workers, 8)),
        )

        def multipart() -> None:
            stream.seek(0)  # a failed multipart upload is aborted by s3transfer; start over
            self.client.upload_fileobj(stream, self.bucket, self._full(key), Config=config)

        self._call(multipart, what=what, key=key)

    def delete(self, key: str) -> None:
        self._call(
            lambda: self.client.delete_object(Bucket=self.bucket, Key=self._full(key)),
            what=f"deleting {self.uri_of(key)}",
            key=key,
        )


def _sole_directory(prefix: str, contents: Sequence[dict[str, Any]]) -> str | None:
    """The subdirectory directly under the directory-like ``prefix`` (``""`` or ending in ``/``) that
    holds every key of ``contents`` (``prefix + name + "/"``), or None."""
    if not contents or (prefix and not prefix.endswith("/")):
        return None
    name, slash, _ = contents[0]["Key"][len(prefix) :].partition("/")
    directory = f"{prefix}{name}{slash}"
    if not slash or not all(obj["Key"].startswith(directory) for obj in contents):
        return None
    return directory


__all__ = ["S3Storage", "TruncatedBody", "make_client", "parse_s3_uri"]
