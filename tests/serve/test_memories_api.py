"""The memories endpoints' input rules, through ``MemoryStoreAPI.handle`` (no HTTP): paths,
content, bodies and list queries, each at its limit and one past it; routes and methods."""

from __future__ import annotations

import base64
import json
import unicodedata
from typing import Any

import pytest
from helpers import MASTER_KEY

from s3memory import EncryptedMemory, InMemoryStore, UserMemories
from s3memory.serve.api import MemoryStoreAPI
from s3memory.serve.http import Request, Response

KEY = "test-serve-key-" + "x" * 32
AUTH = {"x-api-key": KEY}


def _api() -> MemoryStoreAPI:
    users = UserMemories(store=InMemoryStore(), master_key=MASTER_KEY)

    def open_tenant(user_id: str, actor: str) -> EncryptedMemory:
        memory = users.open(user_id, actor=actor)
        assert isinstance(memory, EncryptedMemory)
        return memory

    return MemoryStoreAPI(open_tenant, key=KEY)


class Rig:
    def __init__(self) -> None:
        self.api = _api()
        created = self.call("POST", "/v1/memory_stores", {"name": "rules"})
        assert created.status == 200, created.body
        self.store_id = str(created.body["id"])
        self.memories = f"/v1/memory_stores/{self.store_id}/memories"

    def call(
        self, method: str, path: str, body: Any = None, query: list[tuple[str, str]] | None = None, raw: bytes = b""
    ) -> Response:
        data = raw if body is None else json.dumps(body).encode()
        return self.api.handle(Request(method, path, tuple(query or ()), AUTH, data))

    def create(self, path: Any, content: Any = "x") -> Response:
        return self.call("POST", self.memories, {"path": path, "content": content})


@pytest.fixture
def rig() -> Rig:
    return Rig()


def _refused(response: Response, field: str) -> None:
    assert response.status == 400, response.body
    assert response.body["error"]["type"] == "invalid_request_error"
    assert field in response.body["error"]["message"]
    assert response.headers["x-should-retry"] == "false"


def _path_of_bytes(total: int) -> str:
    """A path of ``total`` bytes of UTF-8 in segments of at most 100 bytes."""
    segments, left = [], total - 1
    while left > 0:
        size = min(100, left)
        segments.append("p" * size)
        left -= size + 1
    path = "/" + "/".join(segments)
    if len(path) < total:  # the last separator was not needed: lengthen the last segment
        path += "q" * (total - len(path))
    assert len(path.encode()) == total
    return path


# -- paths -----------------------------------------------------------------------------------
def test_twenty_segments_are_accepted(rig: Rig) -> None:
    path = "/" + "/".join(f"s{i}" for i in range(20))
    answer = rig.create(path)
    assert answer.status == 200, answer.body
    assert answer.body["path"] == path


def test_twenty_one_segments_are_refused(rig: Rig) -> None:
    _refused(rig.create("/" + "/".join(f"s{i}" for i in range(21))), "path")


def test_a_path_the_api_allows_but_over_s3memorys_512_bytes_is_refused_clearly(rig: Rig) -> None:
    """The API allows 1,024 bytes; an S3 key holds at most 1,024 with the prefix and the store
    id besides, so s3memory's paths stop at 512 (``Limits.max_path_bytes``): a 400 that says so."""
    answer = rig.create(_path_of_bytes(1024))
    assert answer.status == 400 and answer.body["error"]["type"] == "invalid_request_error"
    assert "512" in answer.body["error"]["message"]


def test_a_path_of_512_bytes_is_accepted(rig: Rig) -> None:
    path = _path_of_bytes(512)
    answer = rig.create(path)
    assert answer.status == 200, answer.body
    assert answer.body["path"] == path


def test_a_path_of_1025_bytes_is_refused(rig: Rig) -> None:
    answer = rig.create(_path_of_bytes(1025))
    _refused(answer, "path")
    assert "1024 bytes" in answer.body["error"]["message"]


def test_format_character_is_a_format_character() -> None:
    assert unicodedata.category("\u200b") == "Cf"
    assert unicodedata.category("\u2028") == "Zl"


@pytest.mark.parametrize(
    "path",
    [
        "/a//b",
        "/a/",
        "/",
        "/a/./b",
        "/a/../b",
        "/..",
        "/a\x00b",
        "/a\nb",
        "/a\x7fb",
        "/a\u200bb",
        "/a\u2028b",
        "/a\u2029b",
        "/caf" + "e\u0301",
        "a/b",
        "",
        5,
        None,
        ["/a"],
        {"path": "/a"},
    ],
    ids=repr,
)
def test_a_path_the_api_forbids_is_refused_naming_the_field(rig: Rig, path: object) -> None:
    _refused(rig.create(path), "path")
    listing = rig.call("GET", rig.memories)
    assert listing.body["data"] == []


def test_a_rename_onto_a_forbidden_path_is_refused(rig: Rig) -> None:
    created = rig.create("/a.md", "kept")
    answer = rig.call("POST", f"{rig.memories}/{created.body['id']}", {"path": "/a/../b"})
    _refused(answer, "path")
    kept = rig.call("GET", f"{rig.memories}/{created.body['id']}")
    assert (kept.body["path"], kept.body["content"]) == ("/a.md", "kept")


# -- content and bodies ------------------------------------------------------------------------
def test_content_of_102400_bytes_is_accepted(rig: Rig) -> None:
    content = "é" * 51_200
    answer = rig.create("/big.md", content)
    assert answer.status == 200, answer.body
    assert answer.body["content_size_bytes"] == 102_400


def test_content_of_102401_bytes_is_refused(rig: Rig) -> None:
    _refused(rig.create("/big.md", "é" * 51_200 + "x"), "content")
    assert rig.call("GET", rig.memories).body["data"] == []


@pytest.mark.parametrize("content", [5, None, ["x"], {"a": 1}], ids=repr)
def test_content_that_is_not_a_string_is_refused(rig: Rig, content: object) -> None:
    _refused(rig.create("/a.md", content), "content")


def test_content_with_a_lone_surrogate_is_refused(rig: Rig) -> None:
    # json.dumps writes the surrogate as \ud800, which json.loads gives back unpaired.
    _refused(rig.create("/a.md", "a\ud800b"), "content")


def test_an_update_to_oversized_content_changes_nothing(rig: Rig) -> None:
    created = rig.create("/a.md", "kept")
    _refused(rig.call("POST", f"{rig.memories}/{created.body['id']}", {"content": "x" * 102_401}), "content")
    assert rig.call("GET", f"{rig.memories}/{created.body['id']}").body["content"] == "kept"


def test_an_unknown_body_field_is_refused(rig: Rig) -> None:
    _refused(rig.call("POST", rig.memories, {"path": "/a.md", "content": "x", "colour": "red"}), "colour")


@pytest.mark.parametrize("field", ["path", "content"])
def test_a_missing_field_is_refused(rig: Rig, field: str) -> None:
    body = {"path": "/a.md", "content": "x"}
    del body[field]
    _refused(rig.call("POST", rig.memories, body), field)


@pytest.mark.parametrize("raw", [b"{", b"not json", b"\xff\xfe"], ids=repr)
def test_a_body_that_is_not_json_is_refused(rig: Rig, raw: bytes) -> None:
    _refused(rig.call("POST", rig.memories, raw=raw), "JSON")


@pytest.mark.parametrize("raw", [b"[]", b'"x"', b"5", b"null"], ids=repr)
def test_a_body_that_is_not_an_object_is_refused(rig: Rig, raw: bytes) -> None:
    _refused(rig.call("POST", rig.memories, raw=raw), "JSON object")


@pytest.mark.parametrize(
    "precondition",
    [{"type": "etag", "content_sha256": "0" * 64}, {"type": "content_sha256", "content_sha256": "A" * 64}, "x"],
    ids=repr,
)
def test_a_malformed_precondition_is_refused(rig: Rig, precondition: object) -> None:
    created = rig.create("/a.md", "kept")
    answer = rig.call("POST", f"{rig.memories}/{created.body['id']}", {"content": "new", "precondition": precondition})
    _refused(answer, "precondition")
    assert rig.call("GET", f"{rig.memories}/{created.body['id']}").body["content"] == "kept"


# -- list queries ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("query", "field"),
    [
        ([("colour", "red")], "colour"),
        ([("depth", "-1")], "depth"),
        ([("depth", "21")], "depth"),
        ([("depth", "x")], "depth"),
        ([("limit", "0")], "limit"),
        ([("limit", "101")], "limit"),
        ([("limit", "x")], "limit"),
        ([("page", "%%%")], "page"),
        ([("page", base64.urlsafe_b64encode(b"[1]").decode())], "page"),
        ([("path_prefix", "/notes")], "path_prefix"),
        ([("path_prefix", "/a//")], "path_prefix"),
        ([("view", "everything")], "view"),
        ([("limit", "5"), ("limit", "6")], "limit"),
    ],
    ids=repr,
)
def test_a_bad_list_query_is_refused(rig: Rig, query: list[tuple[str, str]], field: str) -> None:
    _refused(rig.call("GET", rig.memories, query=query), field)


@pytest.mark.parametrize(("depth", "limit"), [("0", "1"), ("20", "100")])
def test_list_query_limits_are_accepted(rig: Rig, depth: str, limit: str) -> None:
    rig.create("/a/b.md")
    answer = rig.call("GET", rig.memories, query=[("depth", depth), ("limit", limit), ("path_prefix", "/a/")])
    assert answer.status == 200, answer.body
    assert [item["path"] for item in answer.body["data"]] == ["/a/b.md"]


# -- routes ------------------------------------------------------------------------------------
def test_an_unknown_route_is_404(rig: Rig) -> None:
    answer = rig.call("GET", "/v1/nothing_here")
    assert answer.status == 404
    assert answer.body["error"]["type"] == "not_found_error"
    assert answer.headers["x-should-retry"] == "false"


@pytest.mark.parametrize(
    ("method", "suffix"),
    [("PUT", "/memories"), ("DELETE", "/memories"), ("PATCH", "/memories/mem_x"), ("GET", "/archive")],
)
def test_a_wrong_method_is_405(rig: Rig, method: str, suffix: str) -> None:
    answer = rig.call(method, f"/v1/memory_stores/{rig.store_id}{suffix}")
    assert answer.status == 405, answer.body
    assert answer.body["error"]["type"] == "invalid_request_error"
    assert method in answer.body["error"]["message"]


def test_memory_versions_of_an_unknown_store_are_404(rig: Rig) -> None:
    answer = rig.call("GET", "/v1/memory_stores/memstore_" + "a" * 26 + "/memory_versions")
    assert answer.status == 404


def test_an_unknown_memory_id_is_404(rig: Rig) -> None:
    for memory_id in ("mem_" + "0" * 32, "nonsense", "mem_" + "0" * 33):
        answer = rig.call("GET", f"{rig.memories}/{memory_id}")
        assert answer.status == 404, (memory_id, answer.body)
        assert answer.body["error"]["type"] == "not_found_error"


def test_without_a_key_nothing_is_answered(rig: Rig) -> None:
    answer = rig.api.handle(Request("GET", rig.memories))
    assert answer.status == 401
    assert answer.body["error"]["type"] == "authentication_error"


def test_user_memories_open_with_an_actor_records_it_and_refuses_a_bad_one() -> None:
    """What the server's keys rely on: ``UserMemories.open(user, actor=...)`` writes as that actor."""
    from s3memory import ConfigurationError, InMemoryStore, UserMemories

    users = UserMemories(store=InMemoryStore(), master_key=MASTER_KEY)
    memory = users.open("alice", actor="apikey_0123456789abcdef")
    memory.create("/memories/a.md", "x\n")
    assert memory.history("/memories/a.md")[0].actor == "apikey_0123456789abcdef"
    assert users.open("alice").history("/memories/a.md")[0].actor == "apikey_0123456789abcdef"
    with pytest.raises(ConfigurationError):
        users.open("alice", actor="")
    with pytest.raises(TypeError, match="opener"):
        UserMemories(lambda user: memory).open("alice", actor="someone")
