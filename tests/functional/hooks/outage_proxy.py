"""A TCP proxy on 127.0.0.1 in front of moto's server that can take S3 down for real and bring it back.

While ``down`` is set, every connection (new or kept alive) is answered the way a failing endpoint
answers: ``mode="reset"`` drops it (RST, the client sees a connection error), ``mode="503"`` reads
the request head and answers ``503 ServiceUnavailable`` with ``Connection: close``, ``mode="403"``
answers ``403 AccessDenied`` (a permanent failure). Otherwise bytes pass through unchanged.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from urllib.parse import urlsplit

_BODIES = {
    "503": (503, "Service Unavailable", "ServiceUnavailable", "Please reduce your request rate."),
    "403": (403, "Forbidden", "AccessDenied", "Access Denied"),
}


class OutageProxy:
    def __init__(self, upstream: str, *, mode: str = "reset") -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.mode = mode
        self.down = threading.Event()
        self.connections = 0
        self.refused = 0
        self._lock = threading.Lock()  # guards _open, the counters
        self._open: set[socket.socket] = set()
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self._closed = False
        self._thread = threading.Thread(target=self._accept, name="outage-proxy", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._listener.getsockname()[:2]
        return f"http://{host}:{port}"

    def start(self) -> OutageProxy:
        self._thread.start()
        return self

    def go_down(self) -> None:
        """Start the outage: new connections fail, open ones are cut."""
        self.down.set()
        with self._lock:
            sockets = list(self._open)
        for sock in sockets:
            _reset(sock)

    def come_back(self) -> None:
        self.down.clear()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
        self.go_down()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
            if self.down.is_set():
                with self._lock:
                    self.refused += 1
                threading.Thread(target=self._fail, args=(client,), daemon=True).start()
                continue
            threading.Thread(target=self._pipe, args=(client,), daemon=True).start()

    def _fail(self, client: socket.socket) -> None:
        if self.mode == "reset":
            _reset(client)
            return
        status, reason, code, message = _BODIES[self.mode]
        client.settimeout(5)
        with contextlib.suppress(OSError):
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = client.recv(65536)
                if not chunk:
                    break
                head += chunk
            body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>{message}'
                    "</Message><RequestId>outage</RequestId></Error>").encode()
            client.sendall(
                f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\nContent-Length: {len(body)}\r\n"
                f"Connection: close\r\n\r\n".encode() + body
            )
        with contextlib.suppress(OSError):
            client.shutdown(socket.SHUT_RDWR)
        client.close()

    def _pipe(self, client: socket.socket) -> None:
        try:
            server = socket.create_connection(self.upstream, timeout=30)
        except OSError:
            _reset(client)
            return
        for sock in (client, server):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._open.update((client, server))
        done = threading.Event()

        def copy(src: socket.socket, dst: socket.socket) -> None:
            try:
                while not done.is_set():
                    data = src.recv(65536)
                    if not data or self.down.is_set():
                        break
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                done.set()
                for sock in (client, server):
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)

        other = threading.Thread(target=copy, args=(server, client), daemon=True)
        other.start()
        copy(client, server)
        other.join()
        with self._lock:
            self._open.difference_update((client, server))
        if self.down.is_set():
            _reset(client)
        for sock in (client, server):
            sock.close()


def _reset(sock: socket.socket) -> None:
    """Close with RST (SO_LINGER 0), as a dead endpoint or a load balancer dropping us would."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()
