"""The ASGI face of the memory-store API: Starlette parses HTTP, uvicorn serves it.

The API (``api``) sees only :class:`~.http.Request` and answers :class:`~.http.Response`,
in a worker thread: its calls block on S3 and KMS. This module is the only one that imports
Starlette and uvicorn (the ``serve`` extra); without them, :func:`create_app`, :func:`serve`
and :func:`running` raise :class:`ConfigurationError` saying what to install.

Each request is one log line on ``s3memory.serve`` at INFO: method, URL path, status,
milliseconds, request id. Never the query string (a ``path_prefix`` names the user's
files), a header (keys are secrets) or a body (memory content).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import aclosing, contextmanager
from typing import TYPE_CHECKING, Protocol

from .._errors import ConfigurationError
from .._render import never_raw
from .http import MAX_BODY_BYTES, ApiError, Request, Response, error_response, new_request_id

try:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import ClientDisconnect
    from starlette.requests import Request as StarletteRequest
    from starlette.responses import Response as StarletteResponse
except ImportError as missing:  # pragma: no cover - the tests load the module without them too
    _MISSING: ImportError | None = missing
else:
    _MISSING = None

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

__all__ = ["MISSING_SERVE", "HandlesRequests", "create_app", "running", "serve"]

log = logging.getLogger("s3memory.serve")

MISSING_SERVE = (
    "s3memory serve needs the serve extra (starlette, uvicorn): install s3memory[serve], "
    "e.g. pip install -e '.[serve]' in the s3memory checkout"
)
#: What a 500 says: an unexpected error's own text may quote content or keys.
SERVER_ERROR_MESSAGE = "The server failed to answer the request; the operator's log has the details."
#: How long a shutdown waits for requests in flight before closing their connections.
GRACEFUL_SHUTDOWN_SECONDS = 5
#: The status logged for a client that left before its body was read (nginx's convention).
CLIENT_CLOSED_REQUEST = 499
_LOGGED_PATH_CHARS = 256
# Framing is the server's to set, from the body it sends: never the API's.
_FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding", "connection"})


class HandlesRequests(Protocol):
    """What the face serves: the memory-store API (``api.build_api``), or a test's fake."""

    def handle(self, request: Request) -> Response: ...


def _require_framework() -> None:
    if _MISSING is not None:
        raise ConfigurationError(MISSING_SERVE) from _MISSING


def create_app(api: HandlesRequests, *, max_body_bytes: int = MAX_BODY_BYTES) -> Starlette:
    """An ASGI app answering every method on every path with ``api.handle``.

    A body over ``max_body_bytes`` is refused with 413 ``request_too_large`` (as soon as its
    ``Content-Length`` says so, or as soon as the bytes read pass it); an exception escaping
    ``api.handle`` is a 500 ``api_error`` whose message says nothing of it.

    Raises:
        ConfigurationError: Starlette or uvicorn is not installed.
    """
    _require_framework()
    app = Starlette()
    # The router's default is the catch-all: a Route("/{path:path}") misses a path holding a
    # newline (its regex's "." does not match one), and only lists methods (others: 405),
    # and either miss would be Starlette's plain-text answer, not the API's error body.
    app.router.default = _Face(api, max_body_bytes)
    return app


class _Face:
    """The one ASGI endpoint: every method, every path."""

    def __init__(self, api: HandlesRequests, max_body_bytes: int) -> None:
        self._api = api
        self._max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        incoming = StarletteRequest(scope, receive)
        # The decoded path, as routed; ``incoming.url.path`` would re-split it at a "%3F".
        method, path = scope["method"], scope["path"]
        try:
            body = await self._read_body(incoming)
        except ClientDisconnect:
            _log_request(method, path, CLIENT_CLOSED_REQUEST, started, "-")
            return
        if body is None:
            message = f"The request body is larger than the limit of {self._max_body_bytes} bytes."
            answer, content = _encoded(error_response(413, "request_too_large", message, new_request_id()))
        else:
            query = incoming.query_params.multi_items()
            request = Request(method, path, query, _headers(incoming.headers.items()), body)
            answer, content = await run_in_threadpool(self._answer, request)
        headers = {name.lower(): value for name, value in answer.headers.items()}
        headers = {name: value for name, value in headers.items() if name not in _FRAMING_HEADERS}
        if answer.body is not None:
            headers.setdefault("content-type", "application/json")
        request_id = headers.get("request-id") or new_request_id()
        headers["request-id"] = request_id
        await StarletteResponse(content, answer.status, headers)(scope, receive, send)
        _log_request(method, path, answer.status, started, request_id)

    async def _read_body(self, incoming: StarletteRequest) -> bytes | None:
        """The body, or None once it is known to be over the limit (the rest is left unread)."""
        try:
            declared = int(incoming.headers.get("content-length", ""))
        except ValueError:  # absent, or not a number (4,300 digits and more too): the bytes are counted
            declared = 0
        if declared > self._max_body_bytes:
            return None
        chunks: list[bytes] = []
        size = 0
        async with aclosing(incoming.stream()) as stream:
            async for chunk in stream:
                size += len(chunk)
                if size > self._max_body_bytes:
                    return None
                chunks.append(chunk)
        return b"".join(chunks)

    def _answer(self, request: Request) -> tuple[Response, bytes]:
        """``api.handle``'s answer and its encoding (in the worker thread: a large answer's
        JSON is not encoded on the event loop), or the 500 if either fails."""
        try:
            return _encoded(self._api.handle(request))
        except ApiError as error:  # the API answers its own errors; one that escapes still is one
            return _encoded(error.response(new_request_id()))
        except Exception:
            log.error(
                "%s %s: unexpected error answering the request", request.method, _loggable(request.path), exc_info=True
            )
            return _encoded(error_response(500, "api_error", SERVER_ERROR_MESSAGE, new_request_id()))


def _encoded(answer: Response) -> tuple[Response, bytes]:
    return answer, answer.encoded()


def _headers(pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Lowercased names; a repeated header's values joined with ", " (RFC 9110, 5.3), so a
    second ``x-api-key`` makes the key wrong rather than choosing one of the two."""
    headers: dict[str, str] = {}
    for name, value in pairs:
        name = name.lower()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return headers


def _loggable(path: str) -> str:
    """The URL path for a log line: bounded, with what could forge or hide a line escaped
    (a ``%0a`` in the URL is a newline once decoded)."""
    shown = "".join(f"\\u{ord(char):04x}" if never_raw(char) or char == "\\" else char for char in path)
    return shown if len(shown) <= _LOGGED_PATH_CHARS else shown[:_LOGGED_PATH_CHARS] + "..."


def _log_request(method: str, path: str, status: int, started: float, request_id: str) -> None:
    milliseconds = (time.perf_counter() - started) * 1000
    log.info("%s %s %d %.1fms %s", method, _loggable(path), status, milliseconds, request_id)


# -- the server ---------------------------------------------------------------------------
def serve(
    api: HandlesRequests,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_body_bytes: int = MAX_BODY_BYTES,
    graceful_shutdown_seconds: int = GRACEFUL_SHUTDOWN_SECONDS,
) -> None:
    """Serve ``api`` on ``host``:``port`` (0: a free port) until SIGINT or SIGTERM.

    On either signal uvicorn stops accepting, lets the requests in flight finish (for at
    most ``graceful_shutdown_seconds``), then raises the signal again: SIGINT as
    KeyboardInterrupt, SIGTERM with its default action.

    Raises:
        ConfigurationError: Starlette or uvicorn is not installed, or the address cannot be
            listened on (in use, not this host's, not resolvable).
    """
    server, listener = _server(api, host, port, max_body_bytes, graceful_shutdown_seconds)
    try:
        log.info("listening on %s", _url(listener))
        server.run(sockets=[listener])
    finally:
        listener.close()


@contextmanager
def running(api: HandlesRequests, host: str = "127.0.0.1", *, max_body_bytes: int = MAX_BODY_BYTES) -> Iterator[str]:
    """Serve ``api`` on a free port in a thread, for tests and embedding: yields the base URL
    (``http://127.0.0.1:PORT``); on exit, waits for the requests in flight and stops.

    Raises:
        ConfigurationError: as :func:`serve`.
        RuntimeError: the server stopped before it started.
    """
    server, listener = _server(api, host, 0, max_body_bytes, GRACEFUL_SHUTDOWN_SECONDS)
    failures: list[BaseException] = []

    def run() -> None:
        try:
            server.run(sockets=[listener])
        except BaseException as error:  # uvicorn exits (SystemExit) on a failed startup
            failures.append(error)

    thread = threading.Thread(target=run, name="s3memory-serve", daemon=True)
    thread.start()
    try:
        while not server.started:  # uvicorn offers no event to wait on
            thread.join(0.005)
            if not thread.is_alive() and not server.started:
                raise RuntimeError("the server stopped before it started") from (failures[0] if failures else None)
        yield _url(listener)
    finally:
        server.should_exit = True
        thread.join()
        listener.close()


def _server(
    api: HandlesRequests, host: str, port: int, max_body_bytes: int, graceful_shutdown_seconds: int
) -> tuple[uvicorn.Server, socket.socket]:
    app = create_app(api, max_body_bytes=max_body_bytes)
    config = uvicorn.Config(
        app,
        log_config=None,  # the application's logging, not uvicorn's dictConfig of the root logger
        access_log=False,  # uvicorn's line has the query string: ours is the one line per request
        lifespan="off",
        server_header=False,
        timeout_graceful_shutdown=graceful_shutdown_seconds,
    )
    return uvicorn.Server(config), _listen(host, port)


def _listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host``:``port``, bound here rather than by uvicorn: uvicorn
    logs a failed bind and exits the process, where this raises an error saying why."""
    try:
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        listener = socket.create_server(address, family=family)
        # Accepted connections inherit it. Without it, a socket uvicorn did not bind itself
        # answers a keep-alive client 40 ms late (Nagle's algorithm against delayed ACKs):
        # measured 44 ms a request against 2 ms with it.
        listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return listener
    except OSError as error:
        raise ConfigurationError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None


def _url(listener: socket.socket) -> str:
    host, port = listener.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
