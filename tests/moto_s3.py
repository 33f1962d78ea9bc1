"""S3 for tests: moto's server on 127.0.0.1 behind a small HTTP proxy that counts and breaks requests.

Fixtures (registered by tests/conftest.py through ``pytest_plugins``):

* ``moto_server`` (session): ``ThreadedMotoServer(ip_address="127.0.0.1", port=0)``; its URL.
* ``s3`` (per test): a fresh bucket, a fresh :class:`FaultProxy` in front of moto, and the standard
  boto3 environment pointing at the proxy (``AWS_ENDPOINT_URL_S3``, fake credentials, region, no
  config files, no instance metadata), restored after the test. ``s3.env`` is the same environment
  for subprocesses (smdebug, hooks).

Faults are real HTTP behaviour, not a patched client: an error answer (``SlowDown`` 503), a body cut
off after half its bytes with the connection closed, or the whole endpoint going away mid-read. The
proxy can also add a round trip's latency to every request (``latency``, for benchmarks), or hold
requests in a test's hands before answering them (``hold``).
"""

from __future__ import annotations

import http.client
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

REGION = "us-east-1"
_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection"}


@dataclass(frozen=True)
class Seen:
    """One request the proxy received."""

    method: str
    path: str  # without the query string
    query: str


@dataclass
class Fault:
    """What to do to the next ``times`` requests that ``match``.

    ``action``: ``"status"`` answers ``status``/``code`` without asking moto; ``"truncate"`` forwards,
    then sends the headers and only half the body and drops the connection; ``"stop"`` does the same
    and then takes the proxy down, so every later request fails to connect.
    """

    match: Callable[[Seen], bool]
    action: str
    times: int = 1
    status: int = 503
    code: str = "SlowDown"
    hits: int = 0


class FaultProxy:
    """An HTTP/1.1 proxy to ``upstream`` that logs every request and injects :class:`Fault` s.

    ``latency``: seconds slept before answering each request (S3's round trip is tens of ms; moto's
    on 127.0.0.1 is a fraction of one). ``hold``: called with each request, in its own thread, before
    it is answered (a test can make requests wait for one another).
    """

    def __init__(self, upstream: str, *, latency: float = 0.0) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.latency = latency
        self.hold: Callable[[Seen], None] | None = None
        self.requests: list[Seen] = []
        self.faults: list[Fault] = []
        self.stopped = threading.Event()
        self._lock = threading.Lock()  # guards requests and faults
        proxy = self

        class Handler(_ProxyHandler):
            owner = proxy

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # the default backlog of 5 drops connects under load: 1 s SYN retries
            daemon_threads = True

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="fault-proxy", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Take the endpoint down: refuse new connections and drop kept-alive ones."""
        if self.stopped.is_set():
            return
        self.stopped.set()
        self._server.shutdown()
        self._server.server_close()

    def add_fault(self, match: Callable[[Seen], bool], action: str, **kwargs: Any) -> Fault:
        fault = Fault(match, action, **kwargs)
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear(self) -> None:
        """Forget the request log (faults stay)."""
        with self._lock:
            self.requests.clear()

    def count(self, method: str | None = None, *, query_has: str = "") -> int:
        with self._lock:
            return sum(
                1 for r in self.requests if (method is None or r.method == method) and query_has in r.query
            )

    def _record(self, seen: Seen) -> Fault | None:
        with self._lock:
            self.requests.append(seen)
            for fault in self.faults:
                if fault.hits < fault.times and fault.match(seen):
                    fault.hits += 1
                    return fault
        return None


class _ProxyHandler(BaseHTTPRequestHandler):
    owner: FaultProxy
    protocol_version = "HTTP/1.1"
    _upstream: http.client.HTTPConnection | None = None

    def setup(self) -> None:
        super().setup()
        # headers and body leave in separate writes: without this, Nagle + delayed ACK stall each one 40 ms
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle()

    do_PUT = do_POST = do_DELETE = do_HEAD = do_GET

    def _handle(self) -> None:
        if self.owner.stopped.is_set():
            self.close_connection = True
            return
        path, _, query = self.path.partition("?")
        seen = Seen(self.command, path, query)
        fault = self.owner._record(seen)
        body = self._read_body()
        if self.owner.hold is not None:
            self.owner.hold(seen)
        if self.owner.latency > 0:
            time.sleep(self.owner.latency)
        if fault is not None and fault.action == "status":
            self._send_error(fault.status, fault.code)
            return
        status, reason, headers, payload = self._forward(body)
        cut = len(payload) // 2 if fault is not None else len(payload)
        self.send_response(status, reason)
        for name, value in headers:
            if name.lower() not in _HOP_HEADERS:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        if any(n.lower() == "connection" and v.lower() == "close" for n, v in headers):
            # transparent: moto (werkzeug) closes every connection, so clients reconnect as they would
            # without the proxy (smdebug's forked readers share one pooled connection otherwise)
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload[:cut])
        self.wfile.flush()
        if fault is not None:  # truncate / stop: drop the connection with the body half sent
            self.close_connection = True
            if fault.action == "stop":
                threading.Thread(target=self.owner.stop, daemon=True).start()

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                chunks.append(self.rfile.read(size + 2)[:size])
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _forward(self, body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        for attempt in range(2):  # moto may have closed an idle kept-alive connection
            if self._upstream is None:
                self._upstream = http.client.HTTPConnection(*self.owner.upstream, timeout=60)
                self._upstream.connect()
                self._upstream.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                self._upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for name, value in self.headers.items():
                    if name.lower() not in _HOP_HEADERS:
                        self._upstream.putheader(name, value)
                self._upstream.putheader("Content-Length", str(len(body)))
                self._upstream.endheaders(body)
                response = self._upstream.getresponse()
                payload = response.read()
                return response.status, response.reason, response.getheaders(), payload
            except (http.client.HTTPException, OSError):
                self._upstream.close()
                self._upstream = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _send_error(self, status: int, code: str) -> None:
        payload = (
            f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
            f"<Message>injected by the test proxy</Message><RequestId>fault</RequestId></Error>"
        ).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)


@dataclass
class S3Env:
    """One test's S3: ``bucket`` on moto, reached through ``proxy`` (``endpoint``) by default."""

    bucket: str
    endpoint: str  # the proxy: what AWS_ENDPOINT_URL_S3 points at
    moto_url: str  # moto itself, bypassing faults and the request log
    proxy: FaultProxy
    env: dict[str, str]  # the boto3 environment, for subprocesses
    direct: Any = field(repr=False)  # a boto3 client straight to moto, to arrange and inspect

    def uri(self, prefix: str = "") -> str:
        return f"s3://{self.bucket}/{prefix}" if prefix else f"s3://{self.bucket}"

    def put(self, key: str, data: bytes) -> None:
        self.direct.put_object(Bucket=self.bucket, Key=key, Body=data)

    def put_many(self, objects: dict[str, bytes]) -> None:
        """Arrange many objects at once, straight into moto's backend (the server runs in this process;
        thousands of PUTs over HTTP would take seconds). Reads under test still go over HTTP."""
        from moto.core.models import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
        for key, data in objects.items():
            backend.put_object(self.bucket, key, data)

    def get(self, key: str) -> bytes:
        return bytes(self.direct.get_object(Bucket=self.bucket, Key=key)["Body"].read())

    def delete(self, key: str) -> None:
        self.direct.delete_object(Bucket=self.bucket, Key=key)

    def keys(self, prefix: str = "") -> list[str]:
        pages = self.direct.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return [obj["Key"] for page in pages for obj in page.get("Contents", ())]

    def upload_dir(self, local: Path, prefix: str) -> list[str]:
        """Copy every file under ``local`` to ``prefix/`` (directly to moto); returns the keys."""
        keys = []
        for path in sorted(p for p in local.rglob("*") if p.is_file()):
            key = f"{prefix.strip('/')}/{path.relative_to(local).as_posix()}"
            self.put(key, path.read_bytes())
            keys.append(key)
        return keys


def s3_environment(endpoint: str, tmp: Path) -> dict[str, str]:
    """The boto3 environment of a test: fake credentials, a region, ``endpoint``, nothing from ~/.aws."""
    return {
        "AWS_ENDPOINT_URL_S3": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": str(tmp / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp / "no-aws-credentials"),
    }


_UNSET = ("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL")


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    """moto's S3 (and friends) on 127.0.0.1, one per test session; its base URL."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3(moto_server: str, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Env]:
    """A fresh bucket behind a fresh fault proxy, with the boto3 environment set for this test only."""
    import boto3
    from botocore.config import Config

    proxy = FaultProxy(moto_server).start()
    env = s3_environment(proxy.url, tmp_path_factory.mktemp("aws"))
    for name in _UNSET:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    direct = boto3.session.Session().client(
        "s3", endpoint_url=moto_server, region_name=REGION, config=Config(retries={"total_max_attempts": 1})
    )
    bucket = f"test-{uuid.uuid4().hex[:16]}"
    direct.create_bucket(Bucket=bucket)
    sub_env = dict(os.environ)
    try:
        yield S3Env(bucket, proxy.url, moto_server, proxy, sub_env, direct)
    finally:
        proxy.stop()
