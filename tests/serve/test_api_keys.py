"""What each key may do through the API: the server's own key, and scoped keys (``serve-key``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import MASTER_KEY

from s3memory import InMemoryStore, UserMemories
from s3memory.serve.api import MemoryStoreAPI
from s3memory.serve.http import Request, Response

SERVER_KEY = "s" * 40


class Rig:
    def __init__(self) -> None:
        users = UserMemories(store=InMemoryStore(), master_key=MASTER_KEY)
        self.api = MemoryStoreAPI(lambda user, actor: users.open(user, actor=actor), key=SERVER_KEY)  # type: ignore[arg-type,return-value]

    def call(
        self, key: str, method: str, path: str, body: Any = None, query: tuple[tuple[str, str], ...] = ()
    ) -> Response:
        data = b"" if body is None else json.dumps(body).encode()
        return self.api.handle(Request(method, path, query, {"authorization": f"Bearer {key}"}, data))

    def store(self, name: str) -> str:
        answer = self.call(SERVER_KEY, "POST", "/v1/memory_stores", {"name": name})
        assert answer.status == 200, answer.body
        return str(answer.body["id"])


@pytest.fixture
def rig() -> Rig:
    return Rig()


def test_a_scoped_key_sees_only_its_stores_and_others_as_missing(rig: Rig) -> None:
    mine, other = rig.store("mine"), rig.store("other")
    _, key = rig.api.keys.create("agent", stores=[mine])
    listed = rig.call(key, "GET", "/v1/memory_stores")
    assert [s["id"] for s in listed.body["data"]] == [mine]
    assert rig.call(key, "GET", f"/v1/memory_stores/{mine}").status == 200
    hidden = rig.call(key, "GET", f"/v1/memory_stores/{other}")
    missing = rig.call(key, "GET", "/v1/memory_stores/memstore_" + "a" * 26)
    assert hidden.status == missing.status == 404
    assert hidden.body["error"]["message"] == f"No memory store with id {other}."
    for suffix in ("/memories", "/memory_versions"):
        assert rig.call(key, "GET", f"/v1/memory_stores/{other}{suffix}").status == 404
    made = rig.call(key, "POST", f"/v1/memory_stores/{mine}/memories", {"path": "/a.md", "content": "x"})
    assert made.status == 200
    assert rig.call(key, "POST", f"/v1/memory_stores/{other}/memories", {"path": "/a.md", "content": "x"}).status == 404


def test_a_scoped_key_may_not_manage_stores(rig: Rig) -> None:
    mine = rig.store("mine")
    _, key = rig.api.keys.create("agent", stores=[mine])
    for method, path, body in (
        ("POST", "/v1/memory_stores", {"name": "x"}),
        ("POST", f"/v1/memory_stores/{mine}", {"name": "renamed"}),
        ("POST", f"/v1/memory_stores/{mine}/archive", None),
        ("DELETE", f"/v1/memory_stores/{mine}", None),
    ):
        answer = rig.call(key, method, path, body)
        assert (answer.status, answer.body["error"]["type"]) == (403, "permission_error"), (method, path)
    assert rig.call(SERVER_KEY, "GET", f"/v1/memory_stores/{mine}").body["name"] == "mine"


def test_a_read_only_key_reads_and_never_writes(rig: Rig) -> None:
    store = rig.store("s")
    made = rig.call(SERVER_KEY, "POST", f"/v1/memory_stores/{store}/memories", {"path": "/a.md", "content": "x"}).body
    _, key = rig.api.keys.create("auditor", access="read_only")
    assert rig.call(key, "GET", f"/v1/memory_stores/{store}/memories/{made['id']}").body["content"] == "x"
    assert rig.call(key, "GET", f"/v1/memory_stores/{store}/memory_versions").status == 200
    memory = f"/v1/memory_stores/{store}/memories/{made['id']}"
    for method, path, body in (
        ("POST", f"/v1/memory_stores/{store}/memories", {"path": "/b.md", "content": "y"}),
        ("POST", memory, {"content": "changed"}),
        ("DELETE", memory, None),
        ("POST", f"/v1/memory_stores/{store}/memory_versions/memver_{'0' * 40}/redact", None),
        ("POST", "/v1/memory_stores", {"name": "x"}),
    ):
        answer = rig.call(key, method, path, body)
        assert (answer.status, answer.body["error"]["type"]) == (403, "permission_error"), (method, path)
    assert rig.call(SERVER_KEY, "GET", memory).body["content"] == "x"


def test_versions_record_the_key_that_wrote_them(rig: Rig) -> None:
    store = rig.store("s")
    record, key = rig.api.keys.create("writer", stores=[store])
    made = rig.call(key, "POST", f"/v1/memory_stores/{store}/memories", {"path": "/a.md", "content": "x"}).body
    (version,) = rig.call(SERVER_KEY, "GET", f"/v1/memory_stores/{store}/memory_versions").body["data"]
    assert version["created_by"] == {"type": "api_actor", "api_key_id": record["id"]}
    assert version["id"] == made["memory_version_id"]
    mine = rig.call(
        SERVER_KEY, "GET", f"/v1/memory_stores/{store}/memory_versions", query=(("api_key_id", record["id"]),)
    )
    assert [v["id"] for v in mine.body["data"]] == [version["id"]]


def test_a_revoked_or_wrong_key_is_401(rig: Rig) -> None:
    record, key = rig.api.keys.create("gone")
    assert rig.call(key, "GET", "/v1/memory_stores").status == 200
    rig.api.keys.revoke(record["id"])
    for token in (key, key[:-1] + ("A" if key[-1] != "A" else "B"), "s3m_nonsense", SERVER_KEY + "x"):
        answer = rig.call(token, "GET", "/v1/memory_stores")
        assert (answer.status, answer.body["error"]["type"]) == (401, "authentication_error"), token
