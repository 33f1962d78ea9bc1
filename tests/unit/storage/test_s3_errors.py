"""Classification and wording of S3 failures (no network: errors built as botocore builds them)."""

import pytest
from botocore.exceptions import (
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    ResponseStreamingError,
)

from sdk_ext.exceptions import ConfigError, StorageAccessDenied, StorageError, StorageNotFound
from sdk_ext.storage.s3 import parse_s3_uri
from sdk_ext.storage.s3_errors import TruncatedBody, is_transient, translate


def client_error(code, status, op="GetObject"):
    return ClientError({"Error": {"Code": code, "Message": f"{code} message"},
                        "ResponseMetadata": {"HTTPStatusCode": status}}, op)


@pytest.mark.parametrize(
    ("err", "transient"),
    [
        (client_error("SlowDown", 503), True),
        (client_error("Throttling", 400), True),
        (client_error("RequestLimitExceeded", 400), True),
        (client_error("InternalError", 500), True),
        (client_error("Whatever", 502), True),
        (client_error("RequestTimeout", 400), True),
        (client_error("TooManyRequests", 429), True),
        (EndpointConnectionError(endpoint_url="http://127.0.0.1:1"), True),
        (ResponseStreamingError(error="reset"), True),
        (TruncatedBody("got 3 of 9 bytes"), True),
        (client_error("NoSuchKey", 404), False),
        (client_error("AccessDenied", 403), False),
        (client_error("NoSuchBucket", 404), False),
        (NoCredentialsError(), False),
    ],
)
def test_transient_errors_are_throttling_5xx_and_connections(err, transient):
    assert is_transient(err) is transient


def test_wrapped_upload_failure_is_classified_by_its_cause():
    try:
        try:
            raise client_error("SlowDown", 503, "UploadPart")
        except ClientError as inner:
            raise RuntimeError("Failed to upload") from inner
    except RuntimeError as outer:
        assert is_transient(outer)
        assert "throttled" in str(translate(outer, what="writing s3://b/k", bucket="b", key="k", attempts=8))


def test_missing_bucket_names_bucket_and_how_to_fix():
    err = translate(client_error("NoSuchBucket", 404, "ListObjectsV2"), what="listing s3://nope/p/index/",
                    bucket="nope", key=None, attempts=1)
    assert isinstance(err, StorageNotFound)
    assert "'nope'" in str(err) and "AWS_ENDPOINT_URL_S3" in str(err) and "listing s3://nope/p/index/" in str(err)


def test_missing_key_and_head_404_are_not_found():
    for code in ("NoSuchKey", "404"):
        err = translate(client_error(code, 404), what="reading s3://b/p/k", bucket="b", key="k", attempts=1)
        assert isinstance(err, StorageNotFound) and "'k'" in str(err)


def test_access_denied_says_which_permissions():
    err = translate(client_error("AccessDenied", 403), what="reading s3://b/k", bucket="b", key="k", attempts=1)
    assert isinstance(err, StorageAccessDenied) and "s3:GetObject" in str(err) and "s3:ListBucket" in str(err)
    err = translate(NoCredentialsError(), what="listing s3://b/", bucket="b", key=None, attempts=1)
    assert isinstance(err, StorageAccessDenied) and "AWS_ACCESS_KEY_ID" in str(err)


def test_exhausted_retries_report_the_attempts():
    err = translate(TruncatedBody("got 3 of 9 bytes"), what="reading s3://b/k", bucket="b", key="k", attempts=8)
    assert type(err) is StorageError and "after 8 attempts" in str(err) and "3 of 9" in str(err)


def test_s3_uri_parsing():
    assert parse_s3_uri("s3://bucket/a/b/") == ("bucket", "a/b")
    assert parse_s3_uri("s3://bucket") == ("bucket", "")
    for bad in ("s3://", "s3:///x", "/local/path"):
        with pytest.raises(ConfigError):
            parse_s3_uri(bad)
