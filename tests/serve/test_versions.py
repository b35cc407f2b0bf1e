"""Acceptance of ``s3memory serve``'s memory versions (list with its filters, retrieve, redact)
through the anthropic SDK's own client, unmodified: the sync client against uvicorn in a thread.

Tests taking ``client`` run on the embedded default (one server and home directory for the
module, a fresh store per test) and on S3 (moto, a versioned bucket, one server per test);
those taking ``local`` on the embedded default only. ``Server.open_store`` opens a store as an
s3memory memory with the server's own settings, to look under the API (what redaction left)
and to write as an agent's session would."""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import anthropic
import pytest
from anthropic.types.beta.memory_stores import (
    BetaManagedAgentsAPIActor,
    BetaManagedAgentsMemoryVersion,
    BetaManagedAgentsSessionActor,
)
from helpers import BUCKET, MASTER_KEY

from s3memory import EncryptedMemory, UserMemories, VersionNotFoundError, open_memory
from s3memory._config import Settings
from s3memory.serve.api import MemoryStoreAPI, build_api, key_id
from s3memory.serve.app import running

KEY = "versions-acceptance-key-" + "v" * 32
API_ACTOR = BetaManagedAgentsAPIActor(type="api_actor", api_key_id=key_id(KEY))
SESSION = "sesn_direct_writer"  # the actor of writes made beside the API, as an agent's session
BACKENDS = ["embedded", "moto"]
UNKNOWN_VERSION = "memver_" + "0" * 40

Version = BetaManagedAgentsMemoryVersion


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Server:
    url: str
    open_store: Callable[[str], EncryptedMemory]  # a store's memory, opened as the server opens it


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    settings = Settings.from_environment({"S3MEMORY_HOME": str(tmp_path_factory.mktemp("home"))})
    api = build_api(settings, serve_key=KEY)

    def open_store(store_id: str) -> EncryptedMemory:
        memory: EncryptedMemory = open_memory(user_id=store_id, actor=SESSION, **settings.memory_options())
        return memory

    with running(api) as url:
        yield Server(url, open_store)


@contextmanager
def moto_server(s3_client: Any, *, versioned: bool) -> Iterator[Server]:
    if versioned:
        s3_client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    users = UserMemories(bucket=BUCKET, s3_client=s3_client, master_key=MASTER_KEY)

    def open_tenant(user_id: str, actor: str) -> EncryptedMemory:
        memory = users.open(user_id, actor=actor)
        assert isinstance(memory, EncryptedMemory)
        return memory

    def open_store(store_id: str) -> EncryptedMemory:
        return open_memory(user_id=store_id, bucket=BUCKET, s3_client=s3_client, master_key=MASTER_KEY, actor=SESSION)

    with running(MemoryStoreAPI(open_tenant, key=KEY)) as url:
        yield Server(url, open_store)


@pytest.fixture(params=BACKENDS)
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    if request.param == "embedded":
        yield request.getfixturevalue("embedded")
    else:
        with moto_server(request.getfixturevalue("s3_client"), versioned=True) as moto:
            yield moto


def _client(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)


@pytest.fixture
def client(server: Server) -> Iterator[anthropic.Anthropic]:
    with _client(server.url) as sdk:
        yield sdk


@pytest.fixture
def local(embedded: Server) -> Iterator[anthropic.Anthropic]:
    """A client of the embedded default only."""
    with _client(embedded.url) as sdk:
        yield sdk


def new_store(sdk: anthropic.Anthropic, name: str = "versions") -> str:
    return sdk.beta.memory_stores.create(name=name).id


def listed(sdk: anthropic.Anthropic, store_id: str, **query: Any) -> list[Version]:
    """Every version the filters admit, newest first (through the SDK's auto-pagination)."""
    return list(sdk.beta.memory_stores.memory_versions.list(store_id, limit=100, **query))


def ids(versions: list[Version]) -> list[str]:
    return [v.id for v in versions]


def current_version(sdk: anthropic.Anthropic, store_id: str, memory_id: str) -> str:
    return sdk.beta.memory_stores.memories.retrieve(memory_id, memory_store_id=store_id).memory_version_id


def error_type(error: anthropic.APIStatusError) -> str:
    body = error.body
    assert isinstance(body, dict)
    return str(body["error"]["type"])


def history_texts(memory: EncryptedMemory, api_path: str) -> list[str]:
    """The text of every stored version of ``api_path`` that can still be read."""
    texts = []
    for entry in memory.history("/memories" + api_path):
        if entry.operation == "deleted":
            continue
        try:
            texts.append(memory.read_version(entry.path, entry.version))
        except VersionNotFoundError:
            continue
    return texts


# -- every change adds one version ---------------------------------------------------------------
def test_every_change_adds_one_version_newest_first(client: anthropic.Anthropic) -> None:
    memories = client.beta.memory_stores.memories
    store = new_store(client)
    first, second = "première version\n", "deuxième version\n"
    memory = memories.create(store, path="/notes/a.md", content=first)
    (created,) = listed(client, store)
    assert (created.operation, created.path, created.memory_id) == ("created", "/notes/a.md", memory.id)
    assert created.id == memory.memory_version_id == current_version(client, store, memory.id)

    # Nothing changes: no version.
    memories.update(memory.id, memory_store_id=store, content=first)
    memories.update(memory.id, memory_store_id=store, path="/notes/a.md")
    assert ids(listed(client, store)) == [created.id]

    updated = memories.update(memory.id, memory_store_id=store, content=second)
    modified, _ = after_update = listed(client, store)
    assert ids(after_update) == [modified.id, created.id]
    assert (modified.operation, modified.path, modified.content_sha256) == ("modified", "/notes/a.md", sha(second))
    assert modified.id == updated.memory_version_id == current_version(client, store, memory.id)

    renamed = memories.update(memory.id, memory_store_id=store, path="/notes/b.md")
    after_rename = listed(client, store)
    # One version for the rename, at its new path: the old side is none of the API's.
    assert ids(after_rename[1:]) == ids(after_update)
    moved = after_rename[0]
    assert (moved.operation, moved.path, moved.content_sha256) == ("modified", "/notes/b.md", sha(second))
    assert moved.memory_id == memory.id
    assert moved.id == renamed.memory_version_id == current_version(client, store, memory.id)

    memories.delete(memory.id, memory_store_id=store)
    everything = listed(client, store)
    deleted = everything[0]
    assert ids(everything[1:]) == ids(after_rename)
    assert (deleted.operation, deleted.memory_id, deleted.path) == ("deleted", memory.id, "/notes/b.md")
    assert (deleted.content, deleted.content_sha256, deleted.content_size_bytes) == (None, None, None)

    assert [v.operation for v in everything] == ["deleted", "modified", "modified", "created"]
    assert all(v.memory_store_id == store and v.type == "memory_version" for v in everything)
    assert all(v.created_by == API_ACTOR and v.redacted_at is None and v.redacted_by is None for v in everything)
    times = [v.created_at for v in everything]
    assert times == sorted(times, reverse=True)
    assert len(set(ids(everything))) == 4


@pytest.mark.xfail(
    strict=True,
    reason="an update changing path and content records two versions (a rename, then a write); "
    "the API records one change as one version",
)
def test_an_update_of_path_and_content_adds_one_version(local: anthropic.Anthropic) -> None:
    memories = local.beta.memory_stores.memories
    store = new_store(local)
    memory = memories.create(store, path="/a.md", content="before")
    memories.update(memory.id, memory_store_id=store, path="/b.md", content="after")
    newest, *older = listed(local, store)
    assert [v.operation for v in older] == ["created"]
    assert (newest.operation, newest.path, newest.content_sha256) == ("modified", "/b.md", sha("after"))


# -- content, hash and size ------------------------------------------------------------------------
def test_each_version_holds_what_was_written_then(client: anthropic.Anthropic) -> None:
    memories = client.beta.memory_stores.memories
    versions = client.beta.memory_stores.memory_versions
    store = new_store(client)
    texts = ["un café\n", "deux cafés ☕\n", "trois\n"]
    memory = memories.create(store, path="/cafe.md", content=texts[0])
    for text in texts[1:]:
        memories.update(memory.id, memory_store_id=store, content=text)
    newest_first = list(reversed(texts))

    basic = listed(client, store)
    assert [v.content for v in basic] == [None] * 3
    assert [v.content_sha256 for v in basic] == [sha(t) for t in newest_first]
    assert [v.content_size_bytes for v in basic] == [len(t.encode("utf-8")) for t in newest_first]
    assert len(texts[1].encode("utf-8")) != len(texts[1])  # sizes are of the bytes

    full = listed(client, store, view="full")
    assert [v.content for v in full] == newest_first
    assert [v.model_dump(exclude={"content"}) for v in full] == [v.model_dump(exclude={"content"}) for v in basic]

    for version, text in zip(basic, newest_first, strict=True):
        fetched = versions.retrieve(version.id, memory_store_id=store)  # full by default
        assert fetched.content == text
        assert fetched.model_dump(exclude={"content"}) == version.model_dump(exclude={"content"})
        summary = versions.retrieve(version.id, memory_store_id=store, view="basic")
        assert (summary.content, summary.content_sha256) == (None, sha(text))


# -- filters ---------------------------------------------------------------------------------------
def test_filters_by_memory_operation_and_actor(local: anthropic.Anthropic, embedded: Server) -> None:
    memories = local.beta.memory_stores.memories
    store = new_store(local)
    gone = memories.create(store, path="/gone.md", content="one")
    memories.update(gone.id, memory_store_id=store, content="two")
    memories.delete(gone.id, memory_store_id=store)
    kept = memories.create(store, path="/kept.md", content="kept")
    embedded.open_store(store).write_text("/memories/agent.md", "written by a session")
    everything = listed(local, store)
    assert len(everything) == 5

    of_gone = listed(local, store, memory_id=gone.id)  # the memory is deleted: its versions remain
    assert [v.operation for v in of_gone] == ["deleted", "modified", "created"]
    assert {v.memory_id for v in of_gone} == {gone.id}
    assert [v.path for v in listed(local, store, memory_id=kept.id)] == ["/kept.md"]
    assert listed(local, store, memory_id="mem_" + "0" * 32) == []
    assert ids(listed(local, store, memory_id=gone.id, operation="modified")) == ids(of_gone[1:2])

    for operation in ("created", "modified", "deleted"):
        chosen = listed(local, store, operation=operation)
        assert ids(chosen) == [v.id for v in everything if v.operation == operation]
    assert [v.path for v in listed(local, store, operation="created")] == ["/agent.md", "/kept.md", "/gone.md"]

    by_key = listed(local, store, api_key_id=key_id(KEY))
    assert ids(by_key) == [v.id for v in everything if v.path != "/agent.md"]
    assert listed(local, store, api_key_id=key_id("another-key-" + "x" * 32)) == []
    (by_session,) = listed(local, store, session_id=SESSION)
    assert (by_session.path, by_session.operation) == ("/agent.md", "created")
    assert by_session.created_by == BetaManagedAgentsSessionActor(type="session_actor", session_id=SESSION)
    assert listed(local, store, session_id="sesn_nobody") == []
    assert listed(local, store, api_key_id=key_id(KEY), session_id=SESSION) == []
    assert listed(local, store, service_account_id="svac_nobody") == []


def test_filters_by_creation_time(client: anthropic.Anthropic) -> None:
    memories = client.beta.memory_stores.memories
    store = new_store(client)
    memory = memories.create(store, path="/t.md", content="0")
    for n in range(1, 4):
        memories.update(memory.id, memory_store_id=store, content=str(n))
    everything = listed(client, store)
    times = [v.created_at for v in everything]
    assert len(set(times)) == 4  # the bounds below split the history
    pivot = times[2]

    since = listed(client, store, created_at_gte=pivot)
    assert ids(since) == ids(everything[:3])
    until = listed(client, store, created_at_lte=pivot.isoformat())
    assert ids(until) == ids(everything[2:])
    between = listed(client, store, created_at_gte=times[3], created_at_lte=times[1])
    assert ids(between) == ids(everything[1:])
    after_all = times[0] + datetime.timedelta(seconds=1)
    assert listed(client, store, created_at_gte=after_all.strftime("%Y-%m-%dT%H:%M:%S.%fZ")) == []


def test_pages_give_every_version_once_in_order(local: anthropic.Anthropic) -> None:
    memories = local.beta.memory_stores.memories
    versions = local.beta.memory_stores.memory_versions
    store = new_store(local)
    memory = memories.create(store, path="/counter.md", content="count 0")
    for n in range(1, 25):
        memories.update(memory.id, memory_store_id=store, content=f"count {n}")
    newest_first = [f"count {n}" for n in reversed(range(25))]

    whole = versions.list(store, limit=100)
    assert whole.next_page is None
    assert [v.content_sha256 for v in whole.data] == [sha(t) for t in newest_first]
    assert len(versions.list(store).data) == 20  # the default page

    first = versions.list(store, limit=4)
    assert ids(first.data) == ids(whole.data[:4])
    assert first.next_page is not None
    assert ids(versions.list(store, limit=4, page=first.next_page).data) == ids(whole.data[4:8])
    assert [v.id for v in versions.list(store, limit=4)] == ids(whole.data)

    full = versions.list(store, view="full", limit=100)
    assert len(full.data) == 20  # view=full caps a page at 20
    assert full.next_page is not None
    assert [v.content for v in full.data] == newest_first[:20]
    every = list(versions.list(store, view="full", limit=100))
    assert [v.content for v in every] == newest_first
    assert ids(every) == ids(whole.data)


@pytest.mark.parametrize(
    "query",
    [
        {"extra_query": {"operation": "renamed"}},
        {"created_at_gte": "yesterday"},
        {"created_at_lte": "2026-13-45T00:00:00Z"},
        {"page": "not-a-page-token"},
        {"page": "eyJhZnRlciI6ICJtZW12ZXJfMDAwIn0"},  # well formed, of no version of the store
        {"limit": 0},
        {"limit": 101},
        {"view": "everything"},
    ],
)
def test_a_bad_list_query_is_refused(local: anthropic.Anthropic, query: dict[str, Any]) -> None:
    store = new_store(local)
    local.beta.memory_stores.memories.create(store, path="/a.md", content="a")
    with pytest.raises(anthropic.BadRequestError) as raised:
        local.beta.memory_stores.memory_versions.list(store, **query)
    assert raised.value.status_code == 400
    assert error_type(raised.value) == "invalid_request_error"


# -- redaction -------------------------------------------------------------------------------------
def test_redaction_clears_the_text_for_good_and_keeps_the_audit_trail(
    client: anthropic.Anthropic, server: Server
) -> None:
    memories = client.beta.memory_stores.memories
    versions = client.beta.memory_stores.memory_versions
    store = new_store(client)
    leaked, fixed, latest = "my home address is 12 Rue Leak\n", "address removed\n", "latest\n"
    memory = memories.create(store, path="/profile.md", content=leaked)
    memories.update(memory.id, memory_store_id=store, content=fixed)
    memories.update(memory.id, memory_store_id=store, content=latest)
    before = listed(client, store, view="full")
    target = before[2]
    assert (target.operation, target.content) == ("created", leaked)
    underneath = server.open_store(store)
    assert leaked in history_texts(underneath, "/profile.md")  # readable before: the check below can fail

    redacted = versions.redact(target.id, memory_store_id=store)
    assert (redacted.id, redacted.operation, redacted.memory_id) == (target.id, "created", memory.id)
    assert (redacted.created_at, redacted.created_by) == (target.created_at, API_ACTOR)
    assert (redacted.content, redacted.content_sha256, redacted.content_size_bytes, redacted.path) == (
        None,
        None,
        None,
        None,
    )
    assert redacted.redacted_at is not None
    assert redacted.redacted_at >= target.created_at
    assert redacted.redacted_by == API_ACTOR

    fetched = versions.retrieve(target.id, memory_store_id=store)
    assert fetched == redacted
    after = listed(client, store, view="full")
    assert after == [*before[:2], redacted]  # the other versions are untouched
    assert memories.retrieve(memory.id, memory_store_id=store).content == latest

    again = versions.redact(target.id, memory_store_id=store)
    assert again == redacted

    # Under the API: no stored version of the memory reads the redacted text any more.
    assert leaked not in history_texts(server.open_store(store), "/profile.md")
    assert fixed in history_texts(server.open_store(store), "/profile.md")
    old = next(e for e in underneath.history("/memories/profile.md") if e.operation == "created")
    with pytest.raises(VersionNotFoundError):
        underneath.read_version(old.path, old.version)


def test_redacting_the_current_version_is_a_conflict_and_changes_nothing(client: anthropic.Anthropic) -> None:
    memories = client.beta.memory_stores.memories
    versions = client.beta.memory_stores.memory_versions
    store = new_store(client)
    memory = memories.create(store, path="/a.md", content="old")
    memories.update(memory.id, memory_store_id=store, content="current")
    before = listed(client, store, view="full")
    with pytest.raises(anthropic.ConflictError) as raised:
        versions.redact(before[0].id, memory_store_id=store)
    assert raised.value.status_code == 409
    assert error_type(raised.value) == "conflict_error"
    assert listed(client, store, view="full") == before
    assert memories.retrieve(memory.id, memory_store_id=store).content == "current"


def test_redacting_text_a_memory_still_holds_elsewhere_is_a_conflict(local: anthropic.Anthropic) -> None:
    memories = local.beta.memory_stores.memories
    store = new_store(local)
    memory = memories.create(store, path="/a.md", content="moved, not changed")
    memories.update(memory.id, memory_store_id=store, path="/b.md")
    before = listed(local, store, view="full")
    assert before[1].operation == "created"
    with pytest.raises(anthropic.ConflictError) as raised:
        local.beta.memory_stores.memory_versions.redact(before[1].id, memory_store_id=store)
    assert error_type(raised.value) == "conflict_error"
    assert listed(local, store, view="full") == before


def test_a_deletion_cannot_be_redacted(local: anthropic.Anthropic) -> None:
    memories = local.beta.memory_stores.memories
    store = new_store(local)
    memory = memories.create(store, path="/a.md", content="x")
    memories.delete(memory.id, memory_store_id=store)
    before = listed(local, store)
    assert before[0].operation == "deleted"
    with pytest.raises(anthropic.BadRequestError) as raised:
        local.beta.memory_stores.memory_versions.redact(before[0].id, memory_store_id=store)
    assert error_type(raised.value) == "invalid_request_error"
    assert listed(local, store) == before


# -- ids: unknown, another store's, an archived store ------------------------------------------------
def test_a_version_is_not_reachable_through_another_stores_id(local: anthropic.Anthropic) -> None:
    memories = local.beta.memory_stores.memories
    versions = local.beta.memory_stores.memory_versions
    owner, other = new_store(local, "A"), new_store(local, "B")
    memory = memories.create(owner, path="/shared-name.md", content="A's first")
    memories.update(memory.id, memory_store_id=owner, content="A's second")
    memories.create(other, path="/shared-name.md", content="B's")
    old = listed(local, owner)[1]
    with pytest.raises(anthropic.NotFoundError):
        versions.retrieve(old.id, memory_store_id=other)
    with pytest.raises(anthropic.NotFoundError) as raised:
        versions.redact(old.id, memory_store_id=other)
    assert error_type(raised.value) == "not_found_error"
    assert listed(local, other, memory_id=memory.id) == []
    assert versions.retrieve(old.id, memory_store_id=owner).content == "A's first"
    assert versions.retrieve(old.id, memory_store_id=owner).redacted_at is None


@pytest.mark.parametrize("version_id", [UNKNOWN_VERSION, "mem_" + "0" * 32, "memver_"])
def test_an_unknown_version_id_is_404(local: anthropic.Anthropic, version_id: str) -> None:
    versions = local.beta.memory_stores.memory_versions
    store = new_store(local)
    local.beta.memory_stores.memories.create(store, path="/a.md", content="a")
    with pytest.raises(anthropic.NotFoundError):
        versions.retrieve(version_id, memory_store_id=store)
    with pytest.raises(anthropic.NotFoundError):
        versions.redact(version_id, memory_store_id=store)


def test_versions_of_an_unknown_store_are_404(local: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.NotFoundError):
        local.beta.memory_stores.memory_versions.list("memstore_" + "a" * 26)


def test_an_archived_store_still_lists_and_redacts_versions(local: anthropic.Anthropic) -> None:
    memories = local.beta.memory_stores.memories
    store = new_store(local)
    memory = memories.create(store, path="/a.md", content="archived first")
    memories.update(memory.id, memory_store_id=store, content="archived second")
    before = listed(local, store)
    assert local.beta.memory_stores.archive(store).archived_at is not None
    assert listed(local, store) == before
    redacted = local.beta.memory_stores.memory_versions.redact(before[1].id, memory_store_id=store)
    assert (redacted.redacted_by, redacted.content_sha256) == (API_ACTOR, None)
    assert listed(local, store)[1] == redacted


# -- a bucket that keeps no versions ----------------------------------------------------------------
def test_versions_of_a_bucket_without_versioning_are_refused(s3_client: Any) -> None:
    with moto_server(s3_client, versioned=False) as unversioned, _client(unversioned.url) as sdk:
        store = new_store(sdk)
        memory = sdk.beta.memory_stores.memories.create(store, path="/a.md", content="unversioned")
        with pytest.raises(anthropic.BadRequestError) as raised:
            sdk.beta.memory_stores.memory_versions.list(store)
        assert error_type(raised.value) == "invalid_request_error"
        assert "versioning" in raised.value.message
        with pytest.raises(anthropic.BadRequestError):
            sdk.beta.memory_stores.memory_versions.retrieve(memory.memory_version_id, memory_store_id=store)
        assert sdk.beta.memory_stores.memories.retrieve(memory.id, memory_store_id=store).content == "unversioned"
