"""Which S3 failures are transient, and what the others mean for the user.

Transient (retried): throttling codes, HTTP 5xx and 429, S3's RequestTimeout, a connection that
could not be made or dropped, a body cut short. Permanent: everything else, translated into the
storage exceptions with the address, the cause and what to do.
"""

from __future__ import annotations

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionError,
    CredentialRetrievalError,
    HTTPClientError,
    IncompleteReadError,
    NoCredentialsError,
    PartialCredentialsError,
)

from sdk_ext.exceptions import StorageAccessDenied, StorageError, StorageNotFound

THROTTLING_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "BandwidthLimitExceeded",
    }
)
TRANSIENT_CODES = THROTTLING_CODES | {
    "RequestTimeout",
    "RequestTimeoutException",
    "InternalError",
    "ServiceUnavailable",
    "PriorRequestNotComplete",
}
DENIED_CODES = frozenset(
    {
        "AccessDenied",
        "403",
        "Forbidden",
        "AllAccessDisabled",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "TokenRefreshRequired",
        "AccountProblem",
    }
)


class TruncatedBody(Exception):
    """A GET's body ended before its Content-Length (the connection dropped mid-read). A transient cause
    to retry, like botocore's own errors: it is retried or translated into a StorageError, never raised to a
    caller, so it stays outside the SdkExtError root."""


def _code_and_status(err: ClientError) -> tuple[str, int]:
    error = err.response.get("Error", {})
    status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    return str(error.get("Code", "")), int(status or 0)


def _cause(err: BaseException) -> BaseException:
    """The botocore error inside a wrapper (boto3's S3UploadFailedError chains it)."""
    seen = err
    while not isinstance(seen, (ClientError, BotoCoreError, TruncatedBody)):
        nxt = seen.__cause__ or seen.__context__
        if nxt is None:
            return err
        seen = nxt
    return seen


def is_transient(err: BaseException) -> bool:
    """Whether retrying the same request may succeed."""
    err = _cause(err)
    if isinstance(err, ClientError):
        code, status = _code_and_status(err)
        return code in TRANSIENT_CODES or status >= 500 or status == 429
    return isinstance(err, (ConnectionError, HTTPClientError, IncompleteReadError, TruncatedBody))


def translate(err: BaseException, *, what: str, bucket: str, key: str | None, attempts: int) -> StorageError:
    """The storage exception for a final failure of ``what`` (e.g. "listing s3://b/p/index/")."""
    cause = _cause(err)
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    if isinstance(cause, ClientError):
        code, status = _code_and_status(cause)
        message = cause.response.get("Error", {}).get("Message", "") or str(cause)
        if code == "NoSuchBucket":
            return StorageNotFound(
                f"{what}: bucket {bucket!r} does not exist; check the bucket name, and that the endpoint "
                "(AWS_ENDPOINT_URL_S3) and region (AWS_REGION / AWS_DEFAULT_REGION) are the right ones"
            )
        if code in ("NoSuchKey", "404", "NotFound") or status == 404:
            return StorageNotFound(
                f"{what}: no such object (key {key!r}); it was deleted or never written, or the trial path "
                "is wrong"
            )
        if code in DENIED_CODES or status == 403:
            return StorageAccessDenied(
                f"{what}: access denied ({code}: {message}); the credentials found by boto3's chain (env "
                f"AWS_ACCESS_KEY_ID/AWS_PROFILE, ~/.aws, instance role) need s3:ListBucket on bucket "
                f"{bucket!r} and s3:GetObject/s3:PutObject on its keys"
            )
        if code in THROTTLING_CODES or status in (429, 503):
            return StorageError(
                f"{what}: still throttled ({code or status}){tries}; lower the concurrency (max_workers) "
                "or retry later"
            )
        return StorageError(f"{what}: {code or status}: {message}{tries}")
    if isinstance(cause, (NoCredentialsError, PartialCredentialsError, CredentialRetrievalError)):
        return StorageAccessDenied(
            f"{what}: no usable AWS credentials ({cause}); set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
            "AWS_PROFILE, or run where an instance/task role is available"
        )
    if isinstance(cause, TruncatedBody):
        return StorageError(f"{what}: the connection dropped mid-read ({cause}){tries}; nothing was returned")
    if isinstance(cause, (ConnectionError, HTTPClientError, IncompleteReadError)):
        return StorageError(
            f"{what}: network failure{tries}: {cause}; check the endpoint (AWS_ENDPOINT_URL_S3) and the network"
        )
    return StorageError(f"{what}: {type(cause).__name__}: {cause}")


__all__ = ["THROTTLING_CODES", "TRANSIENT_CODES", "TruncatedBody", "is_transient", "translate"]
