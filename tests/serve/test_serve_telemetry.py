"""The memory-store API's requests as OpenTelemetry SERVER spans, the memory calls their children."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import MASTER_KEY

from s3memory import InMemoryStore, UserMemories
from s3memory.serve.api import MemoryStoreAPI, route_of
from s3memory.serve.http import Request

KEY = "t" * 40


@pytest.fixture
def spans() -> Iterator[Any]:
    pytest.importorskip("opentelemetry.sdk")
    import opentelemetry.trace  # noqa: F401  (s3memory traces only once the application imported it)
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from s3memory import _telemetry

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _telemetry.use_tracer_provider(provider)
    yield exporter
    _telemetry.use_tracer_provider(None)
    provider.shutdown()


def _api() -> MemoryStoreAPI:
    users = UserMemories(store=InMemoryStore(), master_key=MASTER_KEY)
    return MemoryStoreAPI(lambda user, actor: users.open(user, actor=actor), key=KEY)  # type: ignore[arg-type,return-value]


def _call(api: MemoryStoreAPI, method: str, path: str, body: Any = None) -> Any:
    data = b"" if body is None else json.dumps(body).encode()
    return api.handle(Request(method, path, (), {"x-api-key": KEY}, data))


def test_each_request_is_one_server_span_named_by_its_route_never_an_id(spans: Any) -> None:
    api = _api()
    store = _call(api, "POST", "/v1/memory_stores", {"name": "s"}).body
    spans.clear()
    created = _call(api, "POST", f"/v1/memory_stores/{store['id']}/memories", {"path": "/a.md", "content": "x"})
    assert created.status == 200
    finished = spans.get_finished_spans()
    (server,) = [s for s in finished if s.kind.name == "SERVER"]
    assert server.name == "POST /v1/memory_stores/{memory_store_id}/memories"
    assert dict(server.attributes) == {
        "http.request.method": "POST",
        "http.route": "/v1/memory_stores/{memory_store_id}/memories",
        "http.response.status_code": 200,
    }
    children = [s for s in finished if s.parent is not None and s.parent.span_id == server.context.span_id]
    assert {s.name for s in children} >= {"create_memory"}  # MemoryAdmin.write(NotExists())
    text = repr([(s.name, dict(s.attributes or {})) for s in finished])
    assert store["id"] not in text and created.body["id"] not in text and "/a.md" not in text


def test_a_refused_request_is_its_status_not_an_error(spans: Any) -> None:
    api = _api()
    assert _call(api, "GET", "/v1/memory_stores/memstore_aaaaaaaaaaaaaaaaaaaaaaaaaa").status == 404
    (server,) = [s for s in spans.get_finished_spans() if s.kind.name == "SERVER"]
    assert server.attributes["http.response.status_code"] == 404 and "error.type" not in server.attributes
    assert server.status.status_code.name == "UNSET"


def test_route_templates() -> None:
    assert route_of("/v1/memory_stores") == "/v1/memory_stores"
    assert route_of("/v1/memory_stores/memstore_x/memory_versions/memver_y/redact") == (
        "/v1/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}/redact"
    )
    assert route_of("/v2/other") == "unknown"


def test_a_storage_failure_is_a_503_and_an_error_span_and_says_nothing_of_the_bucket(spans: Any) -> None:
    from s3memory._errors import StorageUnavailableError
    from s3memory.stores import DelegatingStore

    class Failing(DelegatingStore):
        failing = False

        def _call(self, verb: str, perform: Any) -> Any:
            if self.failing and verb in ("get", "head", "list"):
                raise StorageUnavailableError("Error: bucket secret-bucket-name is unreachable")
            return perform()

    store = Failing(InMemoryStore())
    users = UserMemories(store=store, master_key=MASTER_KEY)
    api = MemoryStoreAPI(lambda user, actor: users.open(user, actor=actor), key=KEY)  # type: ignore[arg-type,return-value]
    made = _call(api, "POST", "/v1/memory_stores", {"name": "s"}).body
    store.failing = True
    spans.clear()
    answer = _call(api, "GET", f"/v1/memory_stores/{made['id']}")
    assert answer.status == 503 and answer.body["error"]["type"] == "overloaded_error"
    assert "secret-bucket-name" not in json.dumps(answer.body) and "x-should-retry" not in answer.headers
    (server,) = [s for s in spans.get_finished_spans() if s.kind.name == "SERVER"]
    assert server.attributes["error.type"] == "503" and server.status.status_code.name == "ERROR"
