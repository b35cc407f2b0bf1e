"""Acceptance of ``s3memory serve`` through the anthropic SDK's own client, unmodified: the
sync client against uvicorn in a thread, the async one through ``httpx2.ASGITransport``.

Every test runs on the embedded default (one server and home directory for the module, a
fresh store per test); those parametrized with ``backend`` also on S3 (moto), one server per
test (moto's mock lives for one test)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest
from anthropic.types.beta.beta_managed_agents_memory_store import BetaManagedAgentsMemoryStore
from helpers import BUCKET, MASTER_KEY

from s3memory import EncryptedMemory, UserMemories
from s3memory._config import Settings
from s3memory.serve.api import MemoryStoreAPI, build_api
from s3memory.serve.app import create_app, running

KEY = "sdk-acceptance-key-" + "z" * 32
WRITERS = 6
BACKENDS = ["embedded", "moto"]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Server:
    url: str
    api: MemoryStoreAPI
    every_byte: Callable[[], bytes]  # what the storage holds, names and keys included


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("home")
    api = build_api(Settings.from_environment({"S3MEMORY_HOME": str(home)}), serve_key=KEY)

    def every_byte() -> bytes:
        files = sorted(path for path in Path(home).rglob("*") if path.is_file())
        return b"".join(str(path.relative_to(home)).encode() + path.read_bytes() for path in files)

    with running(api) as url:
        yield Server(url, api, every_byte)


def _moto_server(s3_client: Any) -> Iterator[Server]:
    users = UserMemories(bucket=BUCKET, s3_client=s3_client, master_key=MASTER_KEY)

    def open_tenant(user_id: str, actor: str) -> EncryptedMemory:
        memory = users.open(user_id, actor=actor)
        assert isinstance(memory, EncryptedMemory)
        return memory

    api = MemoryStoreAPI(open_tenant, key=KEY)

    def every_byte() -> bytes:
        chunks = []
        for page in s3_client.get_paginator("list_object_versions").paginate(Bucket=BUCKET):
            for version in page.get("Versions", []):
                body = s3_client.get_object(Bucket=BUCKET, Key=version["Key"], VersionId=version["VersionId"])["Body"]
                chunks.append(version["Key"].encode() + body.read())
        return b"".join(chunks)

    with running(api) as url:
        yield Server(url, api, every_byte)


@pytest.fixture(params=BACKENDS)
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    if request.param == "embedded":
        yield request.getfixturevalue("embedded")
    else:
        yield from _moto_server(request.getfixturevalue("s3_client"))


@pytest.fixture
def client(server: Server) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=server.url, api_key=KEY, max_retries=0) as sdk:
        yield sdk


@pytest.fixture
def local(embedded: Server) -> Iterator[anthropic.Anthropic]:
    """A client of the embedded default only."""
    with anthropic.Anthropic(base_url=embedded.url, api_key=KEY, max_retries=0) as sdk:
        yield sdk


def new_store(sdk: anthropic.Anthropic, name: str = "test store") -> BetaManagedAgentsMemoryStore:
    return sdk.beta.memory_stores.create(name=name)


def error_type(error: anthropic.APIStatusError) -> str:
    body = error.body
    assert isinstance(body, dict)
    return str(body["error"]["type"])


# -- stores ------------------------------------------------------------------------------------
@pytest.mark.parametrize("server", BACKENDS, indirect=True)
def test_store_create_retrieve_update(client: anthropic.Anthropic) -> None:
    stores = client.beta.memory_stores
    created = stores.create(name="Prefs", description="about me", metadata={"a": "1", "b": "2"})
    assert created.id.startswith("memstore_")
    assert (created.name, created.description, created.metadata) == ("Prefs", "about me", {"a": "1", "b": "2"})
    assert created.archived_at is None
    assert stores.retrieve(created.id) == created
    updated = stores.update(created.id, name="Renamed", description="new", metadata={"a": None, "c": "3"})
    assert (updated.name, updated.description, updated.metadata) == ("Renamed", "new", {"b": "2", "c": "3"})
    assert stores.retrieve(created.id) == updated


@pytest.mark.parametrize("server", BACKENDS, indirect=True)
def test_store_list_auto_paginates(client: anthropic.Anthropic) -> None:
    mine = {new_store(client, f"listed {i}").id for i in range(23)}
    first = client.beta.memory_stores.list(limit=7)
    assert len(first.data) == 7
    seen = [store.id for store in client.beta.memory_stores.list(limit=7)]
    assert len(seen) == len(set(seen))
    assert mine <= set(seen)


@pytest.mark.parametrize("server", BACKENDS, indirect=True)
def test_store_delete_removes_it_and_its_memories(client: anthropic.Anthropic) -> None:
    stores = client.beta.memory_stores
    store = new_store(client)
    memory = stores.memories.create(store.id, path="/a.md", content="doomed")
    deleted = stores.delete(store.id)
    assert deleted.id == store.id
    with pytest.raises(anthropic.NotFoundError):
        stores.retrieve(store.id)
    with pytest.raises(anthropic.NotFoundError):
        stores.memories.retrieve(memory.id, memory_store_id=store.id)
    with pytest.raises(anthropic.NotFoundError):
        stores.memories.list(store.id)
    assert store.id not in {s.id for s in stores.list()}


def test_archived_store_refuses_changes_but_allows_reads_and_deletes(local: anthropic.Anthropic) -> None:
    stores = local.beta.memory_stores
    store = new_store(local)
    kept = stores.memories.create(store.id, path="/kept.md", content="kept")
    doomed = stores.memories.create(store.id, path="/doomed.md", content="doomed")
    archived = stores.archive(store.id)
    assert archived.archived_at is not None
    assert stores.retrieve(store.id).archived_at == archived.archived_at
    with pytest.raises(anthropic.BadRequestError):
        stores.memories.create(store.id, path="/new.md", content="x")
    with pytest.raises(anthropic.BadRequestError):
        stores.memories.update(kept.id, memory_store_id=store.id, content="changed")
    assert stores.memories.retrieve(kept.id, memory_store_id=store.id).content == "kept"
    stores.memories.delete(doomed.id, memory_store_id=store.id)
    assert [m.path for m in stores.memories.list(store.id) if m.type == "memory"] == ["/kept.md"]


# -- memories ----------------------------------------------------------------------------------
@pytest.mark.parametrize("server", BACKENDS, indirect=True)
def test_memory_create_retrieve_update_delete(client: anthropic.Anthropic) -> None:
    memories = client.beta.memory_stores.memories
    store = new_store(client)
    text = "héllo wörld\n"
    basic = memories.create(store.id, path="/notes/a.md", content=text)
    assert basic.content is None
    assert basic.content_sha256 == sha(text)
    assert basic.content_size_bytes == len(text.encode("utf-8"))
    assert basic.memory_store_id == store.id
    full = memories.retrieve(basic.id, memory_store_id=store.id)
    assert (full.path, full.content, full.content_sha256) == ("/notes/a.md", text, sha(text))
    moved = memories.update(
        basic.id,
        memory_store_id=store.id,
        path="/notes/b.md",
        content="bye",
        precondition={"type": "content_sha256", "content_sha256": sha(text)},
    )
    assert (moved.id, moved.path, moved.content_sha256) == (basic.id, "/notes/b.md", sha("bye"))
    assert moved.memory_version_id != basic.memory_version_id
    assert memories.retrieve(basic.id, memory_store_id=store.id).content == "bye"
    assert [m.path for m in memories.list(store.id)] == ["/notes/b.md"]
    assert memories.delete(basic.id, memory_store_id=store.id).id == basic.id
    with pytest.raises(anthropic.NotFoundError):
        memories.retrieve(basic.id, memory_store_id=store.id)


def test_create_with_full_view_has_content(local: anthropic.Anthropic) -> None:
    store = new_store(local)
    full = local.beta.memory_stores.memories.create(store.id, path="/a.md", content="shown", view="full")
    assert full.content == "shown"


def test_update_with_a_wrong_precondition_changes_nothing(local: anthropic.Anthropic) -> None:
    memories = local.beta.memory_stores.memories
    store = new_store(local)
    memory = memories.create(store.id, path="/a.md", content="kept")
    with pytest.raises(anthropic.ConflictError) as raised:
        memories.update(
            memory.id,
            memory_store_id=store.id,
            path="/moved.md",
            content="lost",
            precondition={"type": "content_sha256", "content_sha256": sha("something else")},
        )
    assert error_type(raised.value) == "memory_precondition_failed_error"
    after = memories.retrieve(memory.id, memory_store_id=store.id)
    assert (after.path, after.content, after.memory_version_id) == ("/a.md", "kept", memory.memory_version_id)


def test_rename_onto_a_taken_path_moves_nothing(local: anthropic.Anthropic) -> None:
    memories = local.beta.memory_stores.memories
    store = new_store(local)
    first = memories.create(store.id, path="/a.md", content="first")
    second = memories.create(store.id, path="/b.md", content="second")
    with pytest.raises(anthropic.ConflictError) as raised:
        memories.update(first.id, memory_store_id=store.id, path="/b.md")
    assert error_type(raised.value) == "memory_path_conflict_error"
    assert memories.retrieve(first.id, memory_store_id=store.id).content == "first"
    assert memories.retrieve(second.id, memory_store_id=store.id).content == "second"
    assert [m.path for m in memories.list(store.id)] == ["/a.md", "/b.md"]


def test_create_on_a_taken_path_is_a_conflict(local: anthropic.Anthropic) -> None:
    memories = local.beta.memory_stores.memories
    store = new_store(local)
    memories.create(store.id, path="/a.md", content="first")
    with pytest.raises(anthropic.ConflictError) as raised:
        memories.create(store.id, path="/a.md", content="second")
    assert raised.value.status_code == 409
    assert error_type(raised.value) == "memory_path_conflict_error"
    (only,) = memories.list(store.id, view="full")
    assert only.type == "memory" and only.content == "first"


def test_list_by_prefix_and_depth(local: anthropic.Anthropic) -> None:
    memories = local.beta.memory_stores.memories
    store = new_store(local)
    for path in ["/notes/a.md", "/notes/deep/b.md", "/notes/deep/er/c.md", "/notes-archive/x", "/top.md"]:
        memories.create(store.id, path=path, content=path)

    def listed(**query: Any) -> list[tuple[str, str]]:
        return [(item.type, item.path) for item in memories.list(store.id, **query)]

    assert [p for _, p in listed(path_prefix="/notes/")] == ["/notes/a.md", "/notes/deep/b.md", "/notes/deep/er/c.md"]
    assert listed(depth=1) == [
        ("memory_prefix", "/notes-archive/"),
        ("memory_prefix", "/notes/"),
        ("memory", "/top.md"),
    ]
    assert listed(path_prefix="/notes/", depth=2) == [
        ("memory", "/notes/a.md"),
        ("memory", "/notes/deep/b.md"),
        ("memory_prefix", "/notes/deep/er/"),
    ]


def test_list_pages_give_every_memory_once_in_order(local: anthropic.Anthropic) -> None:
    memories = local.beta.memory_stores.memories
    store = new_store(local)
    paths = sorted(f"/m/{i:02d}.md" for i in range(25))
    for path in reversed(paths):
        memories.create(store.id, path=path, content=path)
    first = memories.list(store.id, limit=4)
    assert [m.path for m in first.data] == paths[:4]
    assert [m.path for m in memories.list(store.id, limit=4)] == paths
    full = memories.list(store.id, view="full", limit=100)
    assert len(full.data) == 20
    assert all(m.type == "memory" and m.content == m.path for m in full.data)
    assert [m.path for m in memories.list(store.id, view="full", limit=100)] == paths


def test_delete_with_an_expected_hash(local: anthropic.Anthropic) -> None:
    memories = local.beta.memory_stores.memories
    store = new_store(local)
    memory = memories.create(store.id, path="/a.md", content="body")
    with pytest.raises(anthropic.ConflictError) as raised:
        memories.delete(memory.id, memory_store_id=store.id, expected_content_sha256=sha("other"))
    assert error_type(raised.value) == "memory_precondition_failed_error"
    assert memories.retrieve(memory.id, memory_store_id=store.id).content == "body"
    memories.delete(memory.id, memory_store_id=store.id, expected_content_sha256=sha("body"))
    with pytest.raises(anthropic.NotFoundError):
        memories.retrieve(memory.id, memory_store_id=store.id)


@pytest.mark.parametrize("server", BACKENDS, indirect=True)
def test_exactly_one_of_concurrent_conditional_updates_wins(client: anthropic.Anthropic) -> None:
    memories = client.beta.memory_stores.memories
    store = new_store(client)
    memory = memories.create(store.id, path="/contested.md", content="start")
    read = memories.retrieve(memory.id, memory_store_id=store.id).content_sha256
    start = threading.Barrier(WRITERS)
    outcomes: dict[int, str] = {}

    def write(writer: int) -> None:
        start.wait()
        try:
            memories.update(
                memory.id,
                memory_store_id=store.id,
                content=f"writer {writer}",
                precondition={"type": "content_sha256", "content_sha256": read},
            )
            outcomes[writer] = "won"
        except anthropic.ConflictError as error:
            outcomes[writer] = error_type(error)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [writer for writer, outcome in outcomes.items() if outcome == "won"]
    assert len(winners) == 1, outcomes
    assert sorted(o for o in outcomes.values() if o != "won") == ["memory_precondition_failed_error"] * (WRITERS - 1)
    assert memories.retrieve(memory.id, memory_store_id=store.id).content == f"writer {winners[0]}"


def test_another_stores_id_does_not_reach_a_memory(local: anthropic.Anthropic) -> None:
    memories = local.beta.memory_stores.memories
    owner, other = new_store(local, "A"), new_store(local, "B")
    memory = memories.create(owner.id, path="/a.md", content="A's")
    with pytest.raises(anthropic.NotFoundError):
        memories.retrieve(memory.id, memory_store_id=other.id)
    with pytest.raises(anthropic.NotFoundError):
        memories.update(memory.id, memory_store_id=other.id, content="B's")
    with pytest.raises(anthropic.NotFoundError):
        memories.delete(memory.id, memory_store_id=other.id)
    after = memories.retrieve(memory.id, memory_store_id=owner.id)
    assert (after.content, after.memory_version_id) == ("A's", memory.memory_version_id)


# -- keys, headers -------------------------------------------------------------------------------
def test_a_wrong_key_is_refused(embedded: Server) -> None:
    with anthropic.Anthropic(base_url=embedded.url, api_key="wrong-" + "k" * 40, max_retries=0) as sdk:
        with pytest.raises(anthropic.AuthenticationError) as raised:
            sdk.beta.memory_stores.list()
    assert raised.value.status_code == 401


def test_keys_in_either_header_are_accepted_and_none_is_refused(embedded: Server) -> None:
    stores = embedded.url + "/v1/memory_stores"
    assert httpx2.get(stores, headers={"x-api-key": KEY}).status_code == 200
    assert httpx2.get(stores, headers={"authorization": f"Bearer {KEY}"}).status_code == 200
    assert httpx2.get(stores, headers={"x-api-key": KEY + "x"}).status_code == 401
    unauthenticated = httpx2.get(stores)
    assert unauthenticated.status_code == 401
    assert unauthenticated.json()["error"]["type"] == "authentication_error"
    with anthropic.Anthropic(
        base_url=embedded.url, api_key="unused", default_headers={"x-api-key": KEY}, max_retries=0
    ) as sdk:
        assert new_store(sdk).name == "test store"


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/v1/memory_stores/memstore_" + "a" * 26, 404),
        ("POST", "/v1/memory_stores", 400),
        ("GET", "/v1/memory_stores?limit=0", 400),
        ("PUT", "/v1/memory_stores", 405),
    ],
)
def test_client_errors_are_not_retried_and_carry_a_request_id(
    embedded: Server, method: str, path: str, status: int
) -> None:
    answer = httpx2.request(method, embedded.url + path, headers={"x-api-key": KEY}, content=b"[]")
    assert answer.status_code == status
    assert answer.headers["x-should-retry"] == "false"
    assert answer.headers["request-id"] == answer.json()["request_id"]
    assert answer.headers["request-id"].startswith("req_")


def test_a_conflict_through_the_sdk_is_not_retried(local: anthropic.Anthropic, embedded: Server) -> None:
    store = new_store(local)
    local.beta.memory_stores.memories.create(store.id, path="/a.md", content="x")
    with anthropic.Anthropic(base_url=embedded.url, api_key=KEY, max_retries=3) as retrying:
        raw = retrying.beta.memory_stores.memories.with_raw_response
        with pytest.raises(anthropic.ConflictError) as raised:
            raw.create(store.id, path="/a.md", content="y")
    assert raised.value.response.headers["x-should-retry"] == "false"
    # Only the first attempt's request: a retry would have sent the retry-count header.
    assert "x-stainless-retry-count" not in raised.value.response.request.headers or (
        raised.value.response.request.headers["x-stainless-retry-count"] == "0"
    )


# -- ciphertext only -----------------------------------------------------------------------------
@pytest.mark.parametrize("server", BACKENDS, indirect=True)
def test_storage_holds_only_ciphertext(client: anthropic.Anthropic, server: Server) -> None:
    # Paths may name objects (s3memory's layout); a store's name and a memory's content never.
    name, content = f"StoreName{os.urandom(8).hex()}", f"MemoryContent{os.urandom(8).hex()}"
    store = new_store(client, name)
    memory = client.beta.memory_stores.memories.create(store.id, path="/plain.md", content=content)
    client.beta.memory_stores.memories.update(memory.id, memory_store_id=store.id, content=content + " again")
    stored = server.every_byte()
    assert stored  # something was written where we look
    for secret in (name, content, content[-16:]):
        assert secret.encode() not in stored


# -- the async client ----------------------------------------------------------------------------
def test_the_async_client_through_asgi(embedded: Server) -> None:
    async def scenario() -> tuple[str, list[str], str | None]:
        transport = httpx2.ASGITransport(app=create_app(embedded.api))
        async with anthropic.AsyncAnthropic(
            base_url="http://test",
            api_key=KEY,
            max_retries=0,
            http_client=anthropic.DefaultAsyncHttpxClient(transport=transport),
        ) as sdk:
            store = await sdk.beta.memory_stores.create(name="async")
            memories = sdk.beta.memory_stores.memories
            created = await memories.create(store.id, path="/async.md", content="awaited")
            listed = [item.path async for item in memories.list(store.id)]
            fetched = await memories.retrieve(created.id, memory_store_id=store.id)
            return (await sdk.beta.memory_stores.retrieve(store.id)).name, listed, fetched.content

    assert asyncio.run(scenario()) == ("async", ["/async.md"], "awaited")
