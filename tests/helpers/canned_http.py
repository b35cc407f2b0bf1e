"""An HTTP/1.1 server on 127.0.0.1 that answers what a test says, for the tests of the awscrt
client (``tests/stores/s3/test_crt_client.py``, ``test_crt_connections.py``): it keeps every
request and counts the connections it accepted."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["CannedServer", "Reply", "serving"]

#: ``reply(method, path)``: the status, headers and body to answer.
Reply = Callable[[str, str], tuple[int, dict[str, str], bytes]]


class CannedServer(ThreadingHTTPServer):
    """Answers what ``reply`` says (every answer with ``x-amz-request-id: req-1``; a
    ``Connection: close`` header closes the connection after it); ``requests`` holds each
    request as (method, path, headers by lower-case name, body)."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self.connections = 0
        self.lock = threading.Lock()
        self.reply: Reply = lambda method, path: (200, {}, b"")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that cut an answer off resets the connection: expected here

    def get_request(self) -> Any:
        accepted = super().get_request()
        with self.lock:
            self.connections += 1
        return accepted


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: CannedServer

    def log_message(self, *_: Any) -> None:
        pass

    def _any(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        with self.server.lock:
            self.server.requests.append(
                (self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            )
        status, headers, data = self.server.reply(self.command, self.path)
        self.send_response(status)
        for name, value in {"Content-Length": str(len(data)), "x-amz-request-id": "req-1", **headers}.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        if headers.get("Connection") == "close":
            self.close_connection = True

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any


@contextmanager
def serving() -> Iterator[CannedServer]:
    """A :class:`CannedServer` serving on a thread of its own, shut down on the way out."""
    server = CannedServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
