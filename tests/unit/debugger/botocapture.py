"""Capture what botocore would send, at its last step (``before-send``), and answer locally.

A handler on ``before-send`` receives the fully built HTTP request (URL, headers, body) and may
return the response itself, so nothing leaves the process. ``BotoCapture`` records every request,
answers the operations it was given canned responses for, and fails loudly on any other.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlparse

from botocore.awsrequest import AWSResponse

_S3_LIST_BUCKETS = (
    b'<?xml version="1.0" encoding="UTF-8"?><ListAllMyBucketsResult><Owner><ID>owner</ID></Owner>'
    b"<Buckets>%s</Buckets></ListAllMyBucketsResult>"
)


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body

    def read(self, *_: Any) -> bytes:
        return self._body


class BotoCapture:
    """``before-send`` handler: records (operation, JSON body) and returns canned JSON responses."""

    def __init__(self, responses: dict[str, Any] | None = None, *, buckets: tuple[str, ...] = ()) -> None:
        self.responses = dict(responses or {})
        self.buckets = buckets
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def install(self, emitter: Any) -> BotoCapture:
        emitter.register("before-send", self)
        return self

    def bodies(self, operation: str) -> list[dict[str, Any]]:
        return [body for op, body in self.calls if op == operation]

    def __call__(self, request: Any, **_: Any) -> AWSResponse:
        target = request.headers.get("X-Amz-Target", b"")
        target = target.decode() if isinstance(target, bytes) else target
        if target:
            operation = target.split(".")[-1]
            body = json.loads(request.body or b"{}")
            self.calls.append((operation, body))
            if operation not in self.responses:
                raise AssertionError(f"unexpected AWS call {operation} (no canned response)")
            response = self.responses[operation]
            payload = response(body) if callable(response) else response
            return AWSResponse(request.url, 200, {"Content-Type": "application/x-amz-json-1.1"},
                               _Raw(json.dumps(payload).encode()))
        url = urlparse(request.url)
        if request.method == "GET" and url.hostname.startswith("s3.") and url.path in ("", "/"):
            self.calls.append(("ListBuckets", {}))
            buckets = b"".join(b"<Bucket><Name>%s</Name><CreationDate>2020-01-01T00:00:00.000Z</CreationDate>"
                               b"</Bucket>" % b.encode() for b in self.buckets)
            return AWSResponse(request.url, 200, {"Content-Type": "application/xml"}, _Raw(_S3_LIST_BUCKETS % buckets))
        raise AssertionError(f"unexpected AWS request {request.method} {request.url}")


@contextmanager
def no_network(monkeypatch: Any) -> Iterator[None]:
    """Any socket connection attempt fails the test."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"network access attempted: {args[1:] or kwargs}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    yield


def describe_response(name: str, **extra: Any) -> dict[str, Any]:
    """A minimal valid DescribeTrainingJob response."""
    return {
        "TrainingJobName": name,
        "TrainingJobArn": f"arn:aws:sagemaker:us-west-2:123456789012:training-job/{name}",
        "TrainingJobStatus": "InProgress", "SecondaryStatus": "Starting",
        "AlgorithmSpecification": {"TrainingInputMode": "File"},
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
        "OutputDataConfig": {"S3OutputPath": "s3://my-bucket/output"},
        "ResourceConfig": {"InstanceCount": 1, "InstanceType": "ml.m5.xlarge", "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600}, "CreationTime": 1700000000,
        "ModelArtifacts": {"S3ModelArtifacts": f"s3://my-bucket/output/{name}/output/model.tar.gz"},
        **extra,
    }
