"""The anthropic SDK's ``SessionMemoryStores`` (a store synced with a local folder, for
self-hosted sandboxes) against ``s3memory serve``, both ways, unmodified.

``SessionMemoryStores.download`` pulls every attached store into its ``mount_path`` (one
``view=full`` listing, 20 memories a page) and stamps a marker naming the store; each sync
(``sync_if_due`` once ``sync_interval`` has passed, ``finish`` at the end) lists the store
without content, pushes local changes (a create, or an update with a ``content_sha256``
precondition), pulls remote ones one ``retrieve`` each, and sends a local delete (with
``expected_content_sha256``) only after it has been missing for 30 s. Its clock is the
module's ``monotonic``: the tests replace it, so no test waits and none depends on timing.

The client is ``AsyncAnthropic`` through ``httpx2.ASGITransport`` (inside ``asyncio.run``:
pytest-asyncio is off), with the SDK's default retries, so a request it should not retry
would show. Every request reaches the API through :class:`Recorder`, which notes who sent
it, its method, route and status, and can make another writer's change just before a
request of the session's is answered (a race, made deterministic).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anthropic
import httpx2
import pytest
from anthropic.lib.tools import _memories
from anthropic.lib.tools._memories import (
    DELETE_CORROBORATION_SECONDS,
    MARKER_PATH,
    MIN_MEMORY_SYNC_INTERVAL,
    SessionMemoryStores,
)
from anthropic.types.beta import BetaManagedAgentsSession
from anthropic.types.beta.sessions import BetaManagedAgentsMemoryStoreResource

from s3memory._config import Settings
from s3memory.serve.api import MemoryStoreAPI, build_api
from s3memory.serve.app import create_app
from s3memory.serve.http import Request, Response, error_response, new_request_id

KEY = "session-sync-key-" + "s" * 32
WRITER_HEADER = "x-test-writer"
SDK_LOG = "anthropic.lib.tools.agent_toolset"
STORES = "/v1/memory_stores/{memstore}"
LIST_BASIC = ("GET", STORES + "/memories?view=basic")
LIST_FULL = ("GET", STORES + "/memories?view=full")
RETRIEVE = ("GET", STORES + "/memories/{mem}?view=full")
CREATE = ("POST", STORES + "/memories")
UPDATE = ("POST", STORES + "/memories/{mem}")
DELETE = ("DELETE", STORES + "/memories/{mem}")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# -- the server, watched ------------------------------------------------------------------------
@dataclass(frozen=True)
class Call:
    writer: str  # "session": the SessionMemoryStores' client; "other": the test's own writes
    method: str
    route: str  # ids replaced by their kind; a listing's or retrieval's ``view`` kept
    path: str
    query: tuple[tuple[str, str], ...]
    body: bytes
    status: int

    @property
    def key(self) -> tuple[str, str]:
        return self.method, self.route


def route_of(request: Request) -> str:
    route = re.sub(r"/(memstore|memver|mem)_[^/]+", r"/{\1}", request.path)
    view = dict(request.query).get("view")
    return f"{route}?view={view}" if view else route


@dataclass
class Recorder:
    """The API as the app serves it: every request recorded; ``before`` runs a change of
    another writer's just before the first session request of a (method, route); ``lose``
    lists the (method, route)s whose next session request is carried out but answered 503,
    as when the answer is lost after the write."""

    api: MemoryStoreAPI
    calls: list[Call] = field(default_factory=list)
    before: dict[tuple[str, str], Callable[[], None]] = field(default_factory=dict)
    lose: set[tuple[str, str]] = field(default_factory=set)

    def handle(self, request: Request) -> Response:
        writer = request.headers.get(WRITER_HEADER, "session")
        route = route_of(request)
        if writer == "session" and (hook := self.before.pop((request.method, route), None)):
            hook()
        response = self.api.handle(request)
        if writer == "session" and (request.method, route) in self.lose:
            self.lose.discard((request.method, route))
            assert response.status == 200, response.body
            # retry-after-ms: the SDK's retry comes at once rather than after its backoff.
            lost = error_response(503, "overloaded_error", "answer lost", new_request_id())
            response = Response(503, lost.body, {"retry-after-ms": "1"})
        call = Call(writer, request.method, route, request.path, tuple(request.query), request.body, response.status)
        self.calls.append(call)
        return response

    def mark(self) -> int:
        return len(self.calls)

    def session_since(self, mark: int) -> Counter[tuple[str, str]]:
        return Counter(call.key for call in self.calls[mark:] if call.writer == "session")

    def direct(self, method: str, path: str, body: dict[str, Any] | None = None, **query: str) -> Any:
        """A change by another writer, straight to the API (from inside a request's thread)."""
        data = json.dumps(body).encode() if body is not None else b""
        request = Request(method, path, tuple(query.items()), {"x-api-key": KEY, WRITER_HEADER: "other"}, data)
        answer = self.handle(request)
        assert answer.status == 200, answer.body
        return answer.body


class Clock:
    """``SessionMemoryStores``' ``monotonic``, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> MemoryStoreAPI:
    home = tmp_path_factory.mktemp("home")
    return build_api(Settings.from_environment({"S3MEMORY_HOME": str(home)}), serve_key=KEY)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(_memories, "monotonic", fake)
    return fake


@dataclass
class Clients:
    session: anthropic.AsyncAnthropic
    other: anthropic.AsyncAnthropic
    recorder: Recorder
    clock: Clock
    folder: Path

    async def new_store(self, memories: dict[str, str], name: str = "synced") -> str:
        store = await self.other.beta.memory_stores.create(name=name)
        for path, content in memories.items():
            await self.other.beta.memory_stores.memories.create(store.id, path=path, content=content)
        return store.id

    async def contents(self, store_id: str) -> dict[str, str]:
        """What the store holds, path to content, as the SDK lists it."""
        listed = self.other.beta.memory_stores.memories.list(store_id, view="full")
        return {item.path: item.content or "" async for item in listed if item.type == "memory"}

    async def memory_id(self, store_id: str, path: str) -> str:
        listed = self.other.beta.memory_stores.memories.list(store_id, path_prefix=path.rsplit("/", 1)[0] + "/")
        [found] = [item.id async for item in listed if item.type == "memory" and item.path == path]
        return found

    async def attach(
        self, *store_ids: str, access: Literal["read_write", "read_only"] = "read_write"
    ) -> tuple[SessionMemoryStores, list[Path]]:
        """A session with these stores attached, downloaded: its stores and their folders."""
        mounts = [self.folder / "mnt" / f"store{index}" for index in range(len(store_ids))]
        resources = [
            BetaManagedAgentsMemoryStoreResource(
                type="memory_store", memory_store_id=store_id, mount_path=str(mount), access=access
            )
            for store_id, mount in zip(store_ids, mounts, strict=True)
        ]
        stores = SessionMemoryStores(self.session, workdir=self.folder / "work", sync_interval=MIN_MEMORY_SYNC_INTERVAL)
        await stores.download(BetaManagedAgentsSession.model_construct(id="sesn_sync", resources=resources))
        return stores, mounts

    async def sync(
        self, stores: SessionMemoryStores, wait: float = MIN_MEMORY_SYNC_INTERVAL
    ) -> Counter[tuple[str, str]]:
        """One cadence sync, ``wait`` seconds after the last: the session's requests."""
        mark = self.recorder.mark()
        self.clock.advance(wait)
        await stores.sync_if_due()
        return self.recorder.session_since(mark)


@asynccontextmanager
async def connected(recorder: Recorder, clock: Clock, folder: Path) -> AsyncIterator[Clients]:
    def client(headers: dict[str, str], retries: int) -> anthropic.AsyncAnthropic:
        transport = httpx2.ASGITransport(app=create_app(recorder))
        return anthropic.AsyncAnthropic(
            base_url="http://test",
            api_key=KEY,
            max_retries=retries,
            default_headers=headers,
            http_client=anthropic.DefaultAsyncHttpxClient(transport=transport),
        )

    # The session's client keeps the SDK's default retries, as SessionMemoryStores gets it.
    async with client({}, anthropic.DEFAULT_MAX_RETRIES) as session, client({WRITER_HEADER: "other"}, 0) as other:
        yield Clients(session, other, recorder, clock, folder)


@pytest.fixture
def run(api: MemoryStoreAPI, clock: Clock, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """``run(scenario)``: ``asyncio.run`` of ``scenario(clients)``."""
    recorder = Recorder(api)

    def runner(scenario: Callable[[Clients], Any]) -> Any:
        async def main() -> Any:
            async with connected(recorder, clock, tmp_path) as clients:
                return await scenario(clients)

        return asyncio.run(main())

    yield runner
    assert not recorder.before, "a race the test set up never happened"
    assert not recorder.lose, "an answer the test meant to lose was never sent"


def files(folder: Path) -> dict[str, bytes]:
    """The folder's files as the store names them (``/`` first), the SDK's marker left out."""
    return {
        "/" + path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != MARKER_PATH
    }


def encoded(memories: dict[str, str]) -> dict[str, bytes]:
    return {path: content.encode("utf-8") for path, content in memories.items()}


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == SDK_LOG and record.levelno >= 30]


# -- down ---------------------------------------------------------------------------------------
NESTED = {
    "/notes.md": "top level\n",
    "/projects/alpha/plan.md": "# Plan\r\nwindows line ends, no final newline",
    "/projects/alpha/deep/er/still/deeper/leaf.txt": "  leading and trailing spaces  \n\n",
    "/projects/beta.md": "ünïcödé and emoji 🧠\n",
    "/café/résumé.md": "an NFC path\n",
    "/empty.md": "",
    **{f"/many/item{index:02}.md": f"item {index}\n" * index for index in range(20)},
}


def test_download_writes_every_memory_with_its_bytes(run: Callable[..., Any]) -> None:
    async def scenario(clients: Clients) -> None:
        store_id = await clients.new_store(NESTED)
        mark = clients.recorder.mark()
        stores, [folder] = await clients.attach(store_id)
        # 26 memories: two pages of the full view's 20; nothing fetched one by one.
        assert clients.recorder.session_since(mark) == {LIST_FULL: 2}
        assert files(folder) == encoded(NESTED)
        assert (folder / MARKER_PATH).read_text() == f"version 1\n{store_id}"
        assert stores.roots == [folder.resolve()]
        await stores.dispose()
        assert not folder.exists()

    run(scenario)


def test_a_sync_waits_for_its_interval_and_an_idle_one_moves_no_content(run: Callable[..., Any]) -> None:
    async def scenario(clients: Clients) -> None:
        store_id = await clients.new_store({"/a.md": "a", "/b/c.md": "c"})
        stores, [folder] = await clients.attach(store_id)
        assert await clients.sync(stores, wait=MIN_MEMORY_SYNC_INTERVAL - 1) == {}
        assert await clients.sync(stores, wait=1) == {LIST_BASIC: 1}
        assert await clients.sync(stores) == {LIST_BASIC: 1}
        assert files(folder) == {"/a.md": b"a", "/b/c.md": b"c"}

    run(scenario)


def test_a_store_larger_than_a_listing_page_syncs_whole(run: Callable[..., Any]) -> None:
    memories = {f"/bulk/{index // 10}/m{index:03}.md": f"memory {index}" for index in range(105)}

    async def scenario(clients: Clients) -> None:
        store_id = await clients.new_store(memories)
        mark = clients.recorder.mark()
        stores, [folder] = await clients.attach(store_id)
        assert clients.recorder.session_since(mark) == {LIST_FULL: 6}  # 20 a page
        assert files(folder) == encoded(memories)
        # The content-free listing pages 100 at a time; the last memory is on its second page.
        (folder / "bulk" / "10" / "m104.md").write_text("edited last")
        assert await clients.sync(stores) == {LIST_BASIC: 2, UPDATE: 1}
        assert (await clients.contents(store_id))["/bulk/10/m104.md"] == "edited last"

    run(scenario)


# -- up -----------------------------------------------------------------------------------------
def test_local_creates_and_edits_reach_the_store(run: Callable[..., Any]) -> None:
    async def scenario(clients: Clients) -> None:
        store_id = await clients.new_store({"/kept.md": "kept", "/edited/here.md": "before"})
        stores, [folder] = await clients.attach(store_id)
        edited_id = await clients.memory_id(store_id, "/edited/here.md")
        (folder / "new" / "deeper").mkdir(parents=True)
        (folder / "new" / "deeper" / "made.md").write_text("made locally\n")
        (folder / "edited" / "here.md").write_text("after")

        assert await clients.sync(stores) == {LIST_BASIC: 1, CREATE: 1, UPDATE: 1}
        assert await clients.contents(store_id) == {
            "/kept.md": "kept",
            "/edited/here.md": "after",
            "/new/deeper/made.md": "made locally\n",
        }
        # An edit is an update of the same memory, conditional on the content it replaced.
        assert await clients.memory_id(store_id, "/edited/here.md") == edited_id
        update = next(call for call in clients.recorder.calls if call.key == UPDATE)
        assert update.status == 200
        assert json.loads(update.body)["precondition"] == {"type": "content_sha256", "content_sha256": sha("before")}
        # What was pushed is the new baseline: the next sync sends nothing again.
        assert await clients.sync(stores) == {LIST_BASIC: 1}

    run(scenario)


def test_a_local_delete_waits_to_be_corroborated_then_goes_out_conditionally(run: Callable[..., Any]) -> None:
    async def scenario(clients: Clients) -> None:
        store_id = await clients.new_store({"/gone/soon.md": "doomed", "/stays.md": "stays"})
        stores, [folder] = await clients.attach(store_id)
        (folder / "gone" / "soon.md").unlink()

        assert await clients.sync(stores) == {LIST_BASIC: 1}
        assert await clients.sync(stores, wait=DELETE_CORROBORATION_SECONDS - MIN_MEMORY_SYNC_INTERVAL - 1) == {
            LIST_BASIC: 1
        }
        assert "/gone/soon.md" in await clients.contents(store_id)
        assert await clients.sync(stores, wait=1 + MIN_MEMORY_SYNC_INTERVAL) == {LIST_BASIC: 1, DELETE: 1}
        assert await clients.contents(store_id) == {"/stays.md": "stays"}
        delete = next(call for call in clients.recorder.calls if call.key == DELETE)
        assert (delete.status, dict(delete.query)["expected_content_sha256"]) == (200, sha("doomed"))
        assert await clients.sync(stores) == {LIST_BASIC: 1}
        assert files(folder) == {"/stays.md": b"stays"}

    run(scenario)


def test_the_final_sync_sends_a_local_delete_at_once(run: Callable[..., Any]) -> None:
    async def scenario(clients: Clients) -> None:
        store_id = await clients.new_store({"/a.md": "a", "/b.md": "b"})
        stores, [folder] = await clients.attach(store_id)
        (folder / "a.md").unlink()
        (folder / "b.md").write_text("b at the end")
        mark = clients.recorder.mark()
        await stores.finish()
        assert clients.recorder.session_since(mark) == {LIST_BASIC: 1, DELETE: 1, UPDATE: 1}
        assert await clients.contents(store_id) == {"/b.md": "b at the end"}

    run(scenario)


def test_a_file_the_server_refuses_is_skipped_and_the_rest_sync(
    run: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    too_large = "x" * 102_401
    at_the_limit = "é" * 51_200  # 102,400 bytes of UTF-8: the limit is in bytes

    async def scenario(clients: Clients) -> None:
        store_id = await clients.new_store({"/a.md": "a"})
        stores, [folder] = await clients.attach(store_id)
        (folder / "large.md").write_text(too_large)
        (folder / "e\u0301.md").write_text("a name not in NFC")  # the server's path rule refuses it
        (folder / "fine.md").write_text(at_the_limit)

        assert await clients.sync(stores) == {LIST_BASIC: 1, CREATE: 3}
        refused = [call.status for call in clients.recorder.calls if call.key == CREATE and call.writer == "session"]
        assert sorted(refused) == [200, 400, 400]
        assert await clients.contents(store_id) == {"/a.md": "a", "/fine.md": at_the_limit}
        # Refused once, retried only once the file changes.
        assert await clients.sync(stores) == {LIST_BASIC: 1}
        (folder / "large.md").write_text("small now")
        assert await clients.sync(stores) == {LIST_BASIC: 1, CREATE: 1}
        assert (await clients.contents(store_id))["/large.md"] == "small now"

    with caplog.at_level(logging.WARNING, logger=SDK_LOG):
        run(scenario)
    assert sum("the server rejected this memory file" in line for line in warnings_of(caplog)) == 2


def test_a_write_whose_answer_was_lost_is_settled_by_the_next_listing(run: Callable[..., Any]) -> None:
    async def scenario(clients: Clients) -> None:
        store_id = await clients.new_store({"/edited.md": "base", "/stays.md": "stays"})
        stores, [folder] = await clients.attach(store_id)
        clients.recorder.lose.update({CREATE, UPDATE})
        (folder / "created.md").write_text("created once")
        (folder / "edited.md").write_text("edited once")

        # Each write lands, its answer is lost (503), the SDK retries it: the create finds its
        # path taken, the update its precondition failed; both 409, neither retried again.
        assert await clients.sync(stores) == {LIST_BASIC: 1, CREATE: 2, UPDATE: 2}
        statuses = [call.status for call in clients.recorder.calls if call.writer == "session"]
        assert statuses.count(503) == 2 and statuses.count(409) == 2
        expected = {"/created.md": "created once", "/edited.md": "edited once", "/stays.md": "stays"}
        assert await clients.contents(store_id) == expected
        # The next listing shows the bytes that were sent: the writes were this session's own.
        assert await clients.sync(stores) == {LIST_BASIC: 1}
        assert files(folder) == encoded(expected)
        (folder / "edited.md").write_text("edited twice")
        assert await clients.sync(stores) == {LIST_BASIC: 1, UPDATE: 1}
        assert (await clients.contents(store_id))["/edited.md"] == "edited twice"

    run(scenario)


# -- down, while the folder holds the old content -------------------------------------------------
def test_changes_in_the_store_reach_the_folder(run: Callable[..., Any]) -> None:
    async def scenario(clients: Clients) -> None:
        store_id = await clients.new_store(
            {"/edited.md": "old", "/deleted.md": "bye", "/renamed/from.md": "moving", "/same.md": "same"}
        )
        stores, [folder] = await clients.attach(store_id)
        memories = clients.other.beta.memory_stores.memories
        edited, deleted, renamed = [
            await clients.memory_id(store_id, path) for path in ("/edited.md", "/deleted.md", "/renamed/from.md")
        ]
        await memories.update(edited, memory_store_id=store_id, content="new")
        await memories.delete(deleted, memory_store_id=store_id)
        await memories.update(renamed, memory_store_id=store_id, path="/renamed/to/here.md")
        await memories.create(store_id, path="/created/in/store.md", content="remote")

        # A content-free listing, then one retrieval for each memory to write.
        assert await clients.sync(stores) == {LIST_BASIC: 1, RETRIEVE: 3}
        expected = {"/edited.md": "new", "/renamed/to/here.md": "moving", "/same.md": "same"}
        expected["/created/in/store.md"] = "remote"
        assert files(folder) == encoded(expected)
        assert await clients.contents(store_id) == expected
        assert await clients.sync(stores) == {LIST_BASIC: 1}

    run(scenario)


# -- conflicts ----------------------------------------------------------------------------------
def test_when_both_sides_changed_the_store_wins(run: Callable[..., Any], caplog: pytest.LogCaptureFixture) -> None:
    async def scenario(clients: Clients) -> None:
        store_id = await clients.new_store({"/both.md": "base"})
        stores, [folder] = await clients.attach(store_id)
        memory = await clients.memory_id(store_id, "/both.md")
        await clients.other.beta.memory_stores.memories.update(memory, memory_store_id=store_id, content="remote")
        (folder / "both.md").write_text("local")

        assert await clients.sync(stores) == {LIST_BASIC: 1, RETRIEVE: 1}
        assert (folder / "both.md").read_text() == "remote"
        assert await clients.contents(store_id) == {"/both.md": "remote"}

    with caplog.at_level(logging.WARNING, logger=SDK_LOG):
        run(scenario)
    assert any("changed both locally and remotely; keeping the remote version" in w for w in warnings_of(caplog))


def test_an_upload_losing_the_precondition_race_is_dropped_and_the_winner_pulled(
    run: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario(clients: Clients) -> None:
        store_id = await clients.new_store({"/raced.md": "base"})
        stores, [folder] = await clients.attach(store_id)
        memory = await clients.memory_id(store_id, "/raced.md")
        path = f"/v1/memory_stores/{store_id}/memories/{memory}"
        # Another writer's change lands between the session's listing and its update.
        clients.recorder.before[UPDATE] = lambda: clients.recorder.direct("POST", path, {"content": "winner"})
        (folder / "raced.md").write_text("loser")

        # One update, refused with 409 and not retried.
        assert await clients.sync(stores) == {LIST_BASIC: 1, UPDATE: 1}
        update = next(call for call in clients.recorder.calls if call.key == UPDATE and call.writer == "session")
        assert update.status == 409
        assert await clients.contents(store_id) == {"/raced.md": "winner"}
        assert await clients.sync(stores) == {LIST_BASIC: 1, RETRIEVE: 1}
        assert (folder / "raced.md").read_text() == "winner"

    with caplog.at_level(logging.WARNING, logger=SDK_LOG):
        run(scenario)
    assert any("the upload was refused and the local edit loses" in w for w in warnings_of(caplog))


def test_a_create_racing_a_create_of_the_same_path_leaves_the_store_version(run: Callable[..., Any]) -> None:
    async def scenario(clients: Clients) -> None:
        store_id = await clients.new_store({"/stays.md": "stays"})
        stores, [folder] = await clients.attach(store_id)
        memories = f"/v1/memory_stores/{store_id}/memories"
        body = {"path": "/both/made.md", "content": "made remotely"}
        clients.recorder.before[CREATE] = lambda: clients.recorder.direct("POST", memories, body)
        (folder / "both").mkdir()
        (folder / "both" / "made.md").write_text("made locally")

        # The path is taken by the time the create arrives: 409, not retried.
        assert await clients.sync(stores) == {LIST_BASIC: 1, CREATE: 1}
        create = next(call for call in clients.recorder.calls if call.key == CREATE and call.writer == "session")
        assert create.status == 409
        assert await clients.contents(store_id) == {"/stays.md": "stays", "/both/made.md": "made remotely"}
        assert await clients.sync(stores) == {LIST_BASIC: 1, RETRIEVE: 1}
        assert (folder / "both" / "made.md").read_text() == "made remotely"

    run(scenario)


def test_a_wiped_folder_is_downloaded_again_and_deletes_nothing(run: Callable[..., Any]) -> None:
    async def scenario(clients: Clients) -> None:
        memories = {"/a.md": "a", "/b/c.md": "c"}
        store_id = await clients.new_store(memories)
        stores, [folder] = await clients.attach(store_id)
        (folder / "a.md").unlink()
        (folder / "b" / "c.md").unlink()
        assert await clients.sync(stores, wait=DELETE_CORROBORATION_SECONDS) == {LIST_BASIC: 1, LIST_FULL: 1}
        assert files(folder) == encoded(memories)
        assert await clients.contents(store_id) == memories

    run(scenario)


def test_a_local_delete_loses_to_a_change_in_the_store(run: Callable[..., Any]) -> None:
    async def scenario(clients: Clients) -> None:
        # A third file stays: every file gone at once reads as a wiped folder, re-downloaded.
        store_id = await clients.new_store({"/seen.md": "base", "/raced.md": "base", "/stays.md": "stays"})
        stores, [folder] = await clients.attach(store_id)
        memories = clients.other.beta.memory_stores.memories
        seen, raced = [await clients.memory_id(store_id, path) for path in ("/seen.md", "/raced.md")]
        (folder / "seen.md").unlink()
        (folder / "raced.md").unlink()
        # Changed in the store before a sync saw the file missing: restored, no delete sent.
        await memories.update(seen, memory_store_id=store_id, content="seen remotely")
        assert await clients.sync(stores) == {LIST_BASIC: 1, RETRIEVE: 1}
        assert (folder / "seen.md").read_text() == "seen remotely"

        # Changed just before the corroborated delete arrives: its precondition fails (409).
        path = f"/v1/memory_stores/{store_id}/memories/{raced}"
        clients.recorder.before[DELETE] = lambda: clients.recorder.direct("POST", path, {"content": "raced remotely"})
        assert await clients.sync(stores, wait=DELETE_CORROBORATION_SECONDS) == {LIST_BASIC: 1, DELETE: 1}
        delete = next(call for call in clients.recorder.calls if call.key == DELETE and call.writer == "session")
        assert delete.status == 409
        expected = {"/seen.md": "seen remotely", "/raced.md": "raced remotely", "/stays.md": "stays"}
        assert await clients.contents(store_id) == expected
        assert await clients.sync(stores) == {LIST_BASIC: 1, RETRIEVE: 1}
        assert files(folder) == encoded(expected)

    run(scenario)


def test_a_store_delete_of_a_locally_edited_file_re_creates_it(run: Callable[..., Any]) -> None:
    async def scenario(clients: Clients) -> None:
        store_id = await clients.new_store({"/edited.md": "base", "/untouched.md": "base"})
        stores, [folder] = await clients.attach(store_id)
        memories = clients.other.beta.memory_stores.memories
        for path in ("/edited.md", "/untouched.md"):
            await memories.delete(await clients.memory_id(store_id, path), memory_store_id=store_id)
        (folder / "edited.md").write_text("the only copy")

        assert await clients.sync(stores) == {LIST_BASIC: 1, CREATE: 1}
        assert await clients.contents(store_id) == {"/edited.md": "the only copy"}
        assert files(folder) == {"/edited.md": b"the only copy"}

    run(scenario)


def test_a_read_only_attachment_pulls_and_never_pushes(run: Callable[..., Any]) -> None:
    async def scenario(clients: Clients) -> None:
        store_id = await clients.new_store({"/a.md": "a", "/b.md": "b"})
        stores, [folder] = await clients.attach(store_id, access="read_only")
        assert stores.read_only_roots == [folder.resolve()]
        (folder / "a.md").write_text("local edit")
        (folder / "new.md").write_text("local file")
        memory = await clients.memory_id(store_id, "/b.md")
        await clients.other.beta.memory_stores.memories.update(memory, memory_store_id=store_id, content="b2")

        assert await clients.sync(stores) == {LIST_BASIC: 1, RETRIEVE: 1}
        assert await clients.contents(store_id) == {"/a.md": "a", "/b.md": "b2"}
        assert (folder / "b.md").read_text() == "b2"

    run(scenario)


# -- tenants ------------------------------------------------------------------------------------
def test_nothing_of_another_store_appears(run: Callable[..., Any]) -> None:
    async def scenario(clients: Clients) -> None:
        mine = await clients.new_store({"/shared.md": "mine", "/only/mine.md": "m"}, name="mine")
        theirs_content = {"/shared.md": "theirs", "/only/theirs.md": "t", "/deep/a/b.md": "b"}
        theirs = await clients.new_store(theirs_content, name="theirs")

        stores, [folder] = await clients.attach(mine)
        assert files(folder) == {"/shared.md": b"mine", "/only/mine.md": b"m"}
        (folder / "shared.md").write_text("mine, edited")
        (folder / "only" / "theirs.md").write_text("a path the other store has")
        assert await clients.sync(stores) == {LIST_BASIC: 1, CREATE: 1, UPDATE: 1}
        assert await clients.contents(theirs) == theirs_content
        assert await clients.contents(mine) == {
            "/shared.md": "mine, edited",
            "/only/mine.md": "m",
            "/only/theirs.md": "a path the other store has",
        }
        # Only this session's store was ever named in the session's requests.
        session_paths = [call.path for call in clients.recorder.calls if call.writer == "session"]
        assert session_paths and not [path for path in session_paths if theirs in path]

    run(scenario)


def test_two_attached_stores_sync_each_into_its_own_folder(run: Callable[..., Any]) -> None:
    async def scenario(clients: Clients) -> None:
        first = await clients.new_store({"/same.md": "first"}, name="first")
        second = await clients.new_store({"/same.md": "second", "/x/y.md": "y"}, name="second")
        stores, [first_folder, second_folder] = await clients.attach(first, second)
        assert files(first_folder) == {"/same.md": b"first"}
        assert files(second_folder) == {"/same.md": b"second", "/x/y.md": b"y"}

        (first_folder / "added.md").write_text("to the first")
        (second_folder / "same.md").write_text("second, edited")
        assert await clients.sync(stores) == {LIST_BASIC: 2, CREATE: 1, UPDATE: 1}
        assert await clients.contents(first) == {"/same.md": "first", "/added.md": "to the first"}
        assert await clients.contents(second) == {"/same.md": "second, edited", "/x/y.md": "y"}

    run(scenario)
