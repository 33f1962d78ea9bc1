"""Uploading a custom rule's local source file, so the rule container can read it from S3.

A rule built with ``Rule.custom(source="my_rule.py", ...)`` names a local file. Before the job is
created, apply_debugger uploads it through a :class:`RuleSourceUploader` and sends the S3 URI in
the rule's ``source_s3_uri`` parameter. The default uploader puts the file at
``<base>/<rule name>/<uuid4>/<file name>`` where ``<base>`` is ``s3://<bucket>/<prefix>`` when a
bucket is configured, else the job's ``OutputDataConfig.S3OutputPath`` (the SDK used the session's
default bucket; the job's output location needs no extra bucket and the job's role can read it).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlparse

from sdk_ext.exceptions import StorageError
from sdk_ext.storage.uris import local_path


class RuleSourceUploader(Protocol):
    """Puts a rule source file in S3 and returns its ``s3://`` URI."""

    def upload(self, local_path: str, *, rule_name: str, default_prefix: str | None) -> str: ...


def local_source_path(source: str) -> str | None:
    """The filesystem path of a local ``source`` (plain path or ``file://`` URI, percent-decoded), else None.

    Raises:
        ValueError: a ``file://`` URI naming another host (``file://server/share/rule.py``).
    """
    try:
        return local_path(source)
    except ValueError as err:
        raise ValueError(f"rule source {err}") from err


def _split_s3(uri: str) -> tuple[str, str]:
    parsed = urlparse(uri)
    return parsed.netloc, parsed.path.strip("/")


class S3RuleSourceUploader:
    """Uploads rule sources with boto3.

    Args:
        client: An S3 client; by default ``boto3.client("s3", region_name=region)``, made on first use.
        bucket: Upload into this bucket instead of next to the job's output.
        prefix: Key prefix inside ``bucket``.
        region: Region of the default client.
        uuid_factory: Makes the unique path component (injectable for reproducible paths).
    """

    def __init__(self, *, client: Any = None, bucket: str | None = None, prefix: str | None = None,
                 region: str | None = None, uuid_factory: Callable[[], uuid.UUID] = uuid.uuid4) -> None:
        self._client = client
        self.bucket = bucket
        self.prefix = prefix
        self.region = region
        self.uuid_factory = uuid_factory

    def _s3(self) -> Any:
        if self._client is None:
            import boto3  # imported here: building configs must not need AWS libraries loaded

            self._client = boto3.client("s3", region_name=self.region)
        return self._client

    def upload(self, local_path: str, *, rule_name: str, default_prefix: str | None) -> str:
        """Upload ``local_path``; return the ``s3://`` URI of the uploaded object.

        Raises:
            ValueError: neither a bucket nor a default prefix says where to put the file.
            StorageError: the upload failed.
        """
        if self.bucket:
            bucket, key_prefix = self.bucket, (self.prefix or "").strip("/")
        elif default_prefix:
            bucket, key_prefix = _split_s3(default_prefix)
        else:
            raise ValueError(f"nowhere to upload rule source {local_path!r}: give S3RuleSourceUploader a bucket")
        parts = [p for p in (key_prefix, rule_name, str(self.uuid_factory()), os.path.basename(local_path)) if p]
        key = "/".join(parts)
        uri = f"s3://{bucket}/{key}"
        try:
            with open(local_path, "rb") as source:
                self._s3().put_object(Bucket=bucket, Key=key, Body=source.read())
        except Exception as err:  # botocore raises ClientError, BotoCoreError and OSError alike
            raise StorageError(f"uploading rule source {local_path!r} to {uri} failed: {err}") from err
        return uri
