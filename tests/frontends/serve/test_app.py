"""The ASGI face of ``s3memory serve`` with a fake API: what reaches ``handle``, what is
answered, the body bound, the 500 that says nothing, the log line, and the real server."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import re
import socket
import sys
import threading
import types
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anthropic
import httpx2
import pytest

import s3memory.serve.app as app_module
from s3memory import ConfigurationError
from s3memory.serve.app import SERVER_ERROR_MESSAGE, create_app, running, serve
from s3memory.serve.http import ApiError, Request, Response

SECRET_KEY = "sk-serve-test-key-0123456789abcdefghij"


class FakeApi:
    """Records each request and answers with ``answer(request)``."""

    def __init__(self, answer: Callable[[Request], Response] | None = None) -> None:
        self.requests: list[Request] = []
        self._answer = answer or (lambda request: Response(200, {"ok": True}))

    def handle(self, request: Request) -> Response:
        self.requests.append(request)
        return self._answer(request)


def call(api: FakeApi, method: str, url: str, *, max_body_bytes: int | None = None, **options: Any) -> httpx2.Response:
    """One request to the app through httpx2's ASGI transport (no sockets)."""
    limit = {} if max_body_bytes is None else {"max_body_bytes": max_body_bytes}

    async def send() -> httpx2.Response:
        transport = httpx2.ASGITransport(app=create_app(api, **limit))
        async with httpx2.AsyncClient(transport=transport, base_url="http://testserver") as client:
            return await client.request(method, url, **options)

    return asyncio.run(send())


# -- what reaches handle, and what comes back -----------------------------------------------
def test_the_answer_is_passed_through_with_its_status_headers_and_json_body() -> None:
    body = {"id": "mem_1", "content": "café ☕", "list": [1, None]}
    api = FakeApi(lambda request: Response(201, body, {"X-Custom": "kept", "request-id": "req_from_api"}))
    response = call(api, "POST", "/v1/memory_stores")
    assert response.status_code == 201
    assert response.json() == body
    assert response.content == json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-custom"] == "kept"
    assert response.headers.get_list("request-id") == ["req_from_api"]


def test_an_answer_without_a_body_has_no_content_type_and_a_request_id_of_its_own() -> None:
    response = call(FakeApi(lambda request: Response(204)), "DELETE", "/v1/memory_stores/memstore_1")
    assert response.status_code == 204
    assert response.content == b""
    assert "content-type" not in response.headers
    assert response.headers["request-id"].startswith("req_")
    other = call(FakeApi(lambda request: Response(204)), "DELETE", "/v1/memory_stores/memstore_1")
    assert other.headers["request-id"] != response.headers["request-id"]


def test_framing_headers_of_the_api_are_the_servers_own() -> None:
    api = FakeApi(lambda request: Response(200, {"a": 1}, {"Content-Length": "999", "content-type": "text/x-api"}))
    response = call(api, "GET", "/v1/x")
    assert response.headers["content-length"] == str(len(b'{"a":1}'))
    assert response.headers["content-type"] == "text/x-api"  # the API's own choice stands


def test_method_path_query_pairs_lowercased_headers_and_body_reach_handle() -> None:
    api = FakeApi()
    call(
        api,
        "POST",
        "/v1/memory_stores/memstore_1/memories?path_prefix=%2Fnotes%2F&depth=2&view=full&depth=3&empty=",
        headers={"X-Api-Key": SECRET_KEY, "Anthropic-Beta": "managed-agents-2026-04-01"},
        content=b'{"path": "/notes/a.md"}',
    )
    [request] = api.requests
    assert (request.method, request.path) == ("POST", "/v1/memory_stores/memstore_1/memories")
    assert list(request.query) == [
        ("path_prefix", "/notes/"),
        ("depth", "2"),
        ("view", "full"),
        ("depth", "3"),
        ("empty", ""),
    ]
    assert request.headers["x-api-key"] == SECRET_KEY
    assert request.headers["anthropic-beta"] == "managed-agents-2026-04-01"
    assert all(name == name.lower() for name in request.headers)
    assert request.body == b'{"path": "/notes/a.md"}'


def test_the_path_is_decoded_once_and_not_split_at_an_encoded_question_mark() -> None:
    api = FakeApi()
    call(api, "GET", "/v1/memory_stores/a%3Fb%20c?x=1")
    [request] = api.requests
    assert (request.path, list(request.query)) == ("/v1/memory_stores/a?b c", [("x", "1")])


def test_a_repeated_header_reaches_handle_as_one_joined_value() -> None:
    api = FakeApi()
    call(api, "GET", "/v1/x", headers=[("x-api-key", "first"), ("X-Api-Key", "second")])
    assert api.requests[0].headers["x-api-key"] == "first, second"


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD", "PROPFIND"])
def test_every_method_on_every_path_reaches_handle(method: str) -> None:
    api = FakeApi(lambda request: Response(404, {"type": "error"}))
    response = call(api, method, "/not/an/api/path")
    assert response.status_code == 404
    assert [(r.method, r.path) for r in api.requests] == [(method, "/not/an/api/path")]


def test_the_root_path_reaches_handle() -> None:
    api = FakeApi()
    assert call(api, "GET", "/").status_code == 200
    assert api.requests[0].path == "/"


# -- the body's bound ---------------------------------------------------------------------
def assert_too_large(response: httpx2.Response, limit: int) -> None:
    assert response.status_code == 413
    document = response.json()
    assert document["type"] == "error"
    assert document["error"] == {
        "type": "request_too_large",
        "message": f"The request body is larger than the limit of {limit} bytes.",
    }
    assert document["request_id"] == response.headers["request-id"]
    assert response.headers["x-should-retry"] == "false"


def test_a_body_at_the_limit_is_read_and_one_byte_more_is_refused() -> None:
    api = FakeApi()
    assert call(api, "POST", "/v1/x", max_body_bytes=100, content=b"a" * 100).status_code == 200
    assert api.requests[0].body == b"a" * 100
    assert_too_large(call(api, "POST", "/v1/x", max_body_bytes=100, content=b"a" * 101), 100)
    assert len(api.requests) == 1


def test_a_streamed_body_without_a_length_is_refused_once_it_passes_the_limit() -> None:
    api = FakeApi()
    sent: list[int] = []

    async def chunks() -> AsyncIterator[bytes]:
        for index in range(1000):
            sent.append(index)
            yield b"x" * 64

    response = call(api, "POST", "/v1/x", max_body_bytes=1000, content=chunks())
    assert_too_large(response, 1000)
    assert api.requests == []
    assert len(sent) == 1000 // 64 + 1  # read until past the limit, and no further


def asgi_call(api: FakeApi, content_length: bytes, body: bytes, received: list[object]) -> list[dict[str, Any]]:
    """One request straight to the ASGI app, with the ``Content-Length`` given (an ASGI
    server checks the header; a direct caller need not): the messages sent back."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        received.append("receive")
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/x",
        "raw_path": b"/v1/x",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-length", content_length)],
        "server": ("testserver", 80),
        "client": ("127.0.0.1", 1234),
    }
    asyncio.run(create_app(api, max_body_bytes=1000)(scope, receive, send))
    return sent


def test_a_declared_length_over_the_limit_is_refused_before_the_body_is_read() -> None:
    api = FakeApi()
    received: list[object] = []
    sent = asgi_call(api, b"2000", b"x" * 2000, received)
    assert received == [] and api.requests == []
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 413
    assert json.loads(sent[1]["body"])["error"]["type"] == "request_too_large"


@pytest.mark.parametrize("content_length", [b"9" * 5000, "\u00b2".encode("latin-1"), b"ten", b""])
def test_a_malformed_length_leaves_the_bound_to_the_bytes_read(content_length: bytes) -> None:
    api = FakeApi()
    sent = asgi_call(api, content_length, b"small", [])
    assert sent[0]["status"] == 200
    assert api.requests[0].body == b"small"
    assert asgi_call(api, content_length, b"x" * 1001, [])[0]["status"] == 413


def test_a_client_gone_before_its_body_is_logged_and_not_answered(caplog: pytest.LogCaptureFixture) -> None:
    api = FakeApi()
    sent: list[object] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        sent.append(message)  # pragma: no cover - nothing is sent

    scope = {"type": "http", "method": "PUT", "path": "/v1/x", "query_string": b"", "headers": []}
    with caplog.at_level(logging.INFO, logger="s3memory.serve"):
        asyncio.run(create_app(api)(scope, receive, send))
    assert sent == [] and api.requests == []
    assert [line.split(" ")[:3] for line in request_lines(caplog)] == [["PUT", "/v1/x", "499"]]


# -- failures -----------------------------------------------------------------------------
def test_an_exception_in_handle_is_a_generic_500_and_its_text_is_only_logged(caplog: pytest.LogCaptureFixture) -> None:
    def explode(request: Request) -> Response:
        raise RuntimeError(f"internal detail {SECRET_KEY}")

    with caplog.at_level(logging.ERROR, logger="s3memory.serve"):
        response = call(FakeApi(explode), "GET", "/v1/memory_stores/memstore_1")
    assert response.status_code == 500
    document = response.json()
    assert document["error"] == {"type": "api_error", "message": SERVER_ERROR_MESSAGE}
    assert document["request_id"] == response.headers["request-id"]
    assert "internal detail" not in response.text and SECRET_KEY not in response.text
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.name == "s3memory.serve"
    assert record.exc_info is not None and "internal detail" in str(record.exc_info[1])
    assert "/v1/memory_stores/memstore_1" in record.getMessage()


def test_an_unencodable_answer_is_a_500_too() -> None:
    response = call(FakeApi(lambda request: Response(200, {"not json": object()})), "GET", "/v1/x")
    assert response.status_code == 500
    assert response.json()["error"]["type"] == "api_error"


def test_an_api_error_escaping_handle_is_answered_as_itself() -> None:
    def refuse(request: Request) -> Response:
        raise ApiError(404, "not_found_error", "No such memory store.")

    response = call(FakeApi(refuse), "GET", "/v1/memory_stores/memstore_none")
    assert response.status_code == 404
    assert response.json()["error"] == {"type": "not_found_error", "message": "No such memory store."}


# -- the log line -------------------------------------------------------------------------
def request_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "s3memory.serve" and r.levelno == logging.INFO]


def test_one_log_line_per_request_without_query_headers_or_body(caplog: pytest.LogCaptureFixture) -> None:
    api = FakeApi(lambda request: Response(201, {"content": "the answer's secret content"}, {"request-id": "req_x1"}))
    with caplog.at_level(logging.INFO, logger="s3memory.serve"):
        call(
            api,
            "POST",
            "/v1/memory_stores/memstore_1/memories?path_prefix=/private/diagnosis",
            headers={"x-api-key": SECRET_KEY, "authorization": f"Bearer {SECRET_KEY}"},
            content=b'{"content": "the request\'s secret content"}',
        )
    [line] = request_lines(caplog)
    method, path, status, milliseconds, request_id = line.split(" ")
    assert (method, path, status, request_id) == ("POST", "/v1/memory_stores/memstore_1/memories", "201", "req_x1")
    assert milliseconds.endswith("ms") and float(milliseconds[:-2]) >= 0
    assert "private" not in caplog.text and "diagnosis" not in caplog.text
    assert SECRET_KEY not in caplog.text and "secret content" not in caplog.text


def test_the_refused_and_the_failed_are_logged_too(caplog: pytest.LogCaptureFixture) -> None:
    def explode(request: Request) -> Response:
        raise RuntimeError("boom")

    with caplog.at_level(logging.INFO, logger="s3memory.serve"):
        call(FakeApi(), "POST", "/v1/big", max_body_bytes=10, content=b"x" * 11)
        failed = call(FakeApi(explode), "GET", "/v1/failing")
    assert [line.split(" ")[:3] for line in request_lines(caplog)] == [
        ["POST", "/v1/big", "413"],
        ["GET", "/v1/failing", "500"],
    ]
    assert request_lines(caplog)[1].endswith(failed.headers["request-id"])


def test_a_logged_path_cannot_forge_a_line(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="s3memory.serve"):
        call(FakeApi(), "GET", "/v1/a%0aGET%20/v1/forged%20200%E2%80%AE" + "b" * 1000)
    [line] = request_lines(caplog)
    assert "\n" not in line and "\u202e" not in line
    assert line.startswith("GET /v1/a\\u000aGET /v1/forged 200\\u202e")
    assert len(line) < 400  # a long path is cut


# -- the real server ----------------------------------------------------------------------
def test_running_serves_over_http_and_stops() -> None:
    api = FakeApi(lambda request: Response(200, {"path": request.path, "body": request.body.decode()}))
    with running(api) as url, httpx2.Client(base_url=url) as client:
        assert url.startswith("http://127.0.0.1:")
        response = client.post("/v1/memory_stores", content=b"hello")
        assert response.status_code == 200
        assert response.json() == {"path": "/v1/memory_stores", "body": "hello"}
        assert response.headers["request-id"].startswith("req_")
        port = int(url.rsplit(":", 1)[1])
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port)):
        pass  # nothing listens once the context is left


def test_running_refuses_a_large_body_over_a_real_connection_and_keeps_serving() -> None:
    api = FakeApi()
    with running(api, max_body_bytes=1000) as url, httpx2.Client(base_url=url) as client:
        assert_too_large(client.post("/v1/x", content=b"x" * 5000), 1000)
        assert_too_large(client.post("/v1/x", content=iter([b"x" * 600, b"y" * 600])), 1000)
        assert client.get("/v1/x").status_code == 200
    assert [r.method for r in api.requests] == ["GET"]


def test_the_sdk_reads_a_500_as_an_api_error_and_does_not_retry_it() -> None:
    def explode(request: Request) -> Response:
        raise RuntimeError("boom")

    api = FakeApi(explode)
    with running(api) as url, anthropic.Anthropic(base_url=url, api_key=SECRET_KEY, max_retries=2) as client:
        with pytest.raises(anthropic.InternalServerError) as raised:
            client.beta.memory_stores.retrieve("memstore_1")
    assert raised.value.status_code == 500
    assert raised.value.request_id == raised.value.response.headers["request-id"]
    assert len(api.requests) == 1  # x-should-retry: false
    [request] = api.requests
    assert (request.method, request.path) == ("GET", "/v1/memory_stores/memstore_1")
    assert request.headers["authorization"] == f"Bearer {SECRET_KEY}"


def test_serve_logs_its_address_and_closes_its_socket(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    listened: list[socket.socket] = []

    def run(server: Any, sockets: list[socket.socket]) -> None:
        listened.extend(sockets)
        assert server.config.timeout_graceful_shutdown == 5 and not server.config.access_log

    monkeypatch.setattr(app_module.uvicorn.Server, "run", run)
    with caplog.at_level(logging.INFO, logger="s3memory.serve"):
        serve(FakeApi(), port=0)
    [listener] = listened
    assert listener.fileno() == -1  # closed
    [line] = request_lines(caplog)
    assert line.startswith("listening on http://127.0.0.1:") and int(line.rsplit(":", 1)[1]) > 0


def test_an_address_in_use_is_a_configuration_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(ConfigurationError, match=re.escape(f"cannot listen on 127.0.0.1:{port}:")):
            serve(FakeApi(), port=port)
        with pytest.raises(ConfigurationError, match=re.escape("cannot listen on no-such-host.invalid:0:")):
            serve(FakeApi(), host="no-such-host.invalid", port=0)


def test_running_reports_a_server_that_stops_before_it_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    def run(server: Any, sockets: list[socket.socket]) -> None:
        raise SystemExit(3)  # as uvicorn exits on a failed startup

    monkeypatch.setattr(app_module.uvicorn.Server, "run", run)
    with pytest.raises(RuntimeError, match="stopped before it started"), running(FakeApi()):
        pass  # pragma: no cover
    assert not [t for t in threading.enumerate() if t.name == "s3memory-serve"]


# -- without the serve extra --------------------------------------------------------------
@pytest.fixture
def app_without_framework(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    """A fresh copy of ``s3memory.serve.app`` loaded as if starlette and uvicorn were absent."""
    for name in [n for n in sys.modules if n.split(".")[0] in ("starlette", "uvicorn")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "starlette", None)
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    spec = importlib.util.find_spec("s3memory.serve.app")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module


def test_without_the_serve_extra_each_entry_point_says_what_to_install(app_without_framework: types.ModuleType) -> None:
    for entry in (
        lambda: app_without_framework.create_app(FakeApi()),
        lambda: app_without_framework.serve(FakeApi(), port=0),
        lambda: app_without_framework.running(FakeApi()).__enter__(),
    ):
        with pytest.raises(ConfigurationError, match=r"s3memory\[serve\]"):
            entry()


def test_the_listening_socket_sends_without_delay() -> None:
    """Accepted connections inherit TCP_NODELAY from it: without, a keep-alive client waits
    about 40 ms for each answer (Nagle's algorithm against its delayed ACKs)."""
    import socket

    from s3memory.serve import app as face

    listener = face._listen("127.0.0.1", 0)
    try:
        assert listener.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
    finally:
        listener.close()
