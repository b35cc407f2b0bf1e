"""The sealed search index (``s3memory._search.index``): what it finds, what it refuses, what it costs.

Run on the in-memory store, the local directory store (the embedded default) and S3 (moto) in
tenant-key and KMS-per-object mode. "Another process" is another memory object with a key
cache of its own; a cold process is one whose index cache was cleared.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import hypothesis.strategies as st
import pytest
from helpers import BUCKET, MASTER_KEY, examples
from helpers.meter import Meter
from hypothesis import HealthCheck, given, settings

from s3memory import (
    ConfigurationError,
    EncryptedMemory,
    InMemoryStore,
    IntegrityError,
    KeyCache,
    StorageError,
    erase_tenant,
    expire_memories,
    expire_noncurrent_versions,
    open_memory,
    rewrap_tenant_key,
    rotate_tenant_key,
)
from s3memory._core.access import AccessLog
from s3memory._crypto import envelope
from s3memory._errors import PreconditionFailedError
from s3memory._search import index as _index
from s3memory._search.index import (
    INDEX_NAME,
    PROCESS_INDEX_CACHE,
    IndexCache,
    _Cached,
    _Entry,
    current_files,
    encode_index,
    open_index,
    seal_index,
)
from s3memory._search.query import parse_query, search_texts
from s3memory.stores import DelegatingStore, ObjectStore

T = TypeVar("T")
FLAVOURS = ["inmemory", "localdir", "s3-tenant-local", "s3-kms"]
MakeMemory = Callable[..., EncryptedMemory]


@pytest.fixture(autouse=True)
def cold_cache() -> Iterator[None]:
    PROCESS_INDEX_CACHE.clear()
    yield
    PROCESS_INDEX_CACHE.clear()


def texts(memory: EncryptedMemory, *, write_back: bool = True) -> dict[str, str]:
    return {f.path.display: f.text for f in current_files(memory.files, write_back=write_back)}


def found(memory: EncryptedMemory, query: str, **options: Any) -> list[str]:
    documents = ((f.path.display, f.text) for f in current_files(memory.files, **options))
    return [result.path for result in search_texts(documents, parse_query(query))]


def index_entries(memory: EncryptedMemory) -> dict[str, str | None]:
    stored = memory.store.get(memory.layout.index_key)
    assert stored is not None
    return {key: entry.text for key, entry in open_index(memory.files, stored).items()}


def copy_object(store: ObjectStore, source: str, target: str) -> None:
    stored = store.get(source)
    assert stored is not None
    store.put(target, bytes(stored.body), dict(stored.metadata))


class Recorder(DelegatingStore):
    """Records each request (verb and when it was in flight) while ``recording``; each
    request takes ``rtt`` seconds, so that requests sent one after another do not overlap."""

    def __init__(self, inner: ObjectStore, rtt: float = 0.01) -> None:
        super().__init__(inner)
        self.rtt = rtt
        self.recording = False
        self.intervals: list[tuple[float, float, str]] = []
        self.puts: list[str] = []
        self._lock = threading.Lock()
        self.before_put: Callable[[str], None] | None = None

    def _call(self, verb: str, perform: Callable[[], T]) -> T:
        if not self.recording or verb == "keeps_versions":
            return perform()
        start = time.perf_counter()
        time.sleep(self.rtt)
        result = perform()
        with self._lock:
            self.intervals.append((start, time.perf_counter(), verb))
        return result

    def put(self, key: str, body: bytes, metadata: Any, **options: Any) -> str:
        self.puts.append(key)
        if self.before_put is not None:
            hook, self.before_put = self.before_put, None
            hook(key)
        return super().put(key, body, metadata, **options)

    def take(self) -> tuple[dict[str, int], int]:
        with self._lock:
            intervals, self.intervals = sorted(self.intervals), []
        chain: list[tuple[float, int]] = []
        best = 0
        for start, end, _ in intervals:
            length = 1 + max((n for finished, n in chain if finished <= start), default=0)
            chain.append((end, length))
            best = max(best, length)
        return dict(Counter(verb for _, _, verb in intervals)), best


def recorded(store: Recorder, action: Callable[[], T]) -> tuple[T, dict[str, int], int]:
    store.take()
    store.recording = True
    try:
        result = action()
    finally:
        store.recording = False
    verbs, trips = store.take()
    return result, verbs, trips


# -- what search finds -----------------------------------------------------------------------
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_search_finds_what_was_written_and_nothing_of_another_tenant(make_memory: MakeMemory, flavour: str) -> None:
    alice = make_memory(flavour, "alice")
    bob = make_memory(flavour, "bob")
    alice.create("/memories/tea.md", "Prefers green tea.\nNo sugar.\n")
    alice.create("/memories/work/notes.md", "Project pineapple ships in May.\n")
    bob.create("/memories/tea.md", "Bob prefers black tea and pineapple juice.\n")
    assert found(alice, "tea") == ["/memories/tea.md"]
    assert found(alice, "pineapple") == ["/memories/work/notes.md"]
    assert found(alice, "black") == [] and found(alice, "juice") == []
    assert found(bob, "pineapple") == ["/memories/tea.md"]
    assert texts(alice) == {
        "/memories/tea.md": "Prefers green tea.\nNo sugar.\n",
        "/memories/work/notes.md": "Project pineapple ships in May.\n",
    }
    # Each tenant's index is its own object, sealed: the bucket sees no plaintext in it.
    for memory in (alice, bob):
        stored = memory.store.get(memory.layout.index_key)
        assert stored is not None
        assert b"tea" not in bytes(stored.body) and b"pineapple" not in bytes(stored.body)
        assert envelope.is_envelope(stored.metadata)
    files = current_files(alice.files)
    assert [(f.path.display, f.size, f.key) for f in files] == [
        ("/memories/tea.md", 29, "alice/memories/tea.md"),
        ("/memories/work/notes.md", 32, "alice/memories/work/notes.md"),
    ]
    import hashlib

    assert files[0].sha256 == hashlib.sha256(b"Prefers green tea.\nNo sugar.\n").hexdigest()
    assert all(f.last_modified > 0 for f in files)


@pytest.mark.parametrize("encrypt_names", [False, True])
def test_a_new_tenant_is_searched_without_writing_anything(encrypt_names: bool) -> None:
    store = InMemoryStore()
    memory = open_memory(
        user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache(), encrypt_names=encrypt_names
    )
    assert current_files(memory.files) == []
    assert list(store.list("")) == []  # no tenant key, no names key, no index
    memory.create("/memories/a.md", "alpha\n")
    assert found(memory, "ALPHA") == ["/memories/a.md"]
    if encrypt_names:  # the index holds the object keys, which are sealed names
        assert all("a.md" not in key for key in index_entries(memory))


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_index_never_records_access(make_memory: MakeMemory, flavour: str) -> None:
    memory = make_memory(flavour, track_access=True, access_log=AccessLog())
    memory.create("/memories/a.md", "alpha\n")
    assert found(memory, "alpha") == ["/memories/a.md"]
    assert list(memory.store.list(memory.layout.access_markers_prefix)) == []
    memory.view("/memories/a.md")  # a read through the tool does
    assert len(list(memory.store.list(memory.layout.access_markers_prefix))) == 1


# -- what it refuses -------------------------------------------------------------------------
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_an_index_copied_from_another_tenant_is_refused_and_rebuilt(
    make_memory: MakeMemory, flavour: str, caplog: pytest.LogCaptureFixture
) -> None:
    alice = make_memory(flavour, "alice")
    bob = make_memory(flavour, "bob")
    bob.create("/memories/a.md", "bob's secret: pineapple\n")
    alice.create("/memories/a.md", "alice's notes\n")
    assert found(bob, "pineapple") == ["/memories/a.md"]
    copy_object(bob.store, bob.layout.index_key, alice.layout.index_key)
    PROCESS_INDEX_CACHE.clear()
    with caplog.at_level(logging.WARNING, logger="s3memory"):
        assert texts(alice) == {"/memories/a.md": "alice's notes\n"}
    assert "did not open as this user's" in caplog.text
    assert "pineapple" not in caplog.text
    assert found(alice, "pineapple") == []
    # It was replaced by alice's own, which opens as hers and holds nothing of bob's.
    assert list(index_entries(alice).values()) == ["alice's notes\n"]
    stored = bob.store.get(bob.layout.index_key)
    assert stored is not None
    with pytest.raises(IntegrityError):
        open_index(alice.files, stored)


@pytest.mark.parametrize("flavour", ["inmemory", "localdir"])
def test_an_index_of_another_deployment_does_not_open(make_memory: MakeMemory, flavour: str) -> None:
    here = make_memory(flavour, "alice")
    there = make_memory(flavour, "alice", prefix="other/")
    there.create("/memories/a.md", "elsewhere\n")
    here.create("/memories/a.md", "here\n")
    assert texts(there)
    copy_object(there.store, there.layout.index_key, here.layout.index_key)
    PROCESS_INDEX_CACHE.clear()
    assert texts(here) == {"/memories/a.md": "here\n"}
    assert list(index_entries(here).values()) == ["here\n"]


@pytest.mark.parametrize("key_mode", ["tenant", "kms"])
def test_an_index_of_another_store_shows_nothing_that_is_not_there(
    key_mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Another bucket, the same master key and tenant. In tenant-key mode each store has its
    own tenant key: the index does not open. With one KMS key per object it opens (the same
    key domain, where a file copied across opens too), but an entry is only used where the
    listing shows the very object it was read from, so none of it shows."""
    from helpers.fakekms import FakeKms

    kms = FakeKms()
    first, second = InMemoryStore(), InMemoryStore()

    def make(store: ObjectStore) -> EncryptedMemory:
        if key_mode == "kms":
            return open_memory(
                user_id="alice", store=store, kms_key_id="k", kms_client=kms, key_mode="kms", key_cache=KeyCache()
            )
        return open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())

    a, b = make(first), make(second)
    a.create("/memories/a.md", "apple\n")
    a.create("/memories/only-there.md", "cherry\n")
    b.create("/memories/a.md", "banana\n")
    assert texts(a) and texts(b)
    copy_object_between(first, second, a.layout.index_key)
    PROCESS_INDEX_CACHE.clear()
    with caplog.at_level(logging.WARNING, logger="s3memory"):
        assert texts(make(second)) == {"/memories/a.md": "banana\n"}
    assert ("did not open as this user's" in caplog.text) == (key_mode == "tenant")
    assert found(b, "apple") == [] and found(b, "cherry") == []
    assert list(index_entries(b).values()) == ["banana\n"]
    # Under another master key it does not open either.
    if key_mode == "tenant":
        c = open_memory(user_id="alice", store=second, master_key=bytes(range(1, 33)), key_cache=KeyCache())
        stored = second.get(a.layout.index_key)
        assert stored is not None
        with pytest.raises(IntegrityError):
            open_index(c.files, stored)


def copy_object_between(source: ObjectStore, target: ObjectStore, key: str) -> None:
    stored = source.get(key)
    assert stored is not None
    target.put(key, bytes(stored.body), dict(stored.metadata))


@pytest.mark.parametrize("flavour", ["inmemory", "s3-tenant-local"])
def test_the_index_never_opens_as_a_file_nor_a_file_as_the_index(make_memory: MakeMemory, flavour: str) -> None:
    memory = make_memory(flavour)
    memory.create("/memories/a.md", "alpha\n")
    assert texts(memory)
    copy_object(memory.store, memory.layout.index_key, memory.layout.memory_prefix + "index.md")
    with pytest.raises(IntegrityError):
        memory.view("/memories/index.md")
    # Searched, it is a file that does not open: left out, never a failure.
    assert texts(memory) == {"/memories/a.md": "alpha\n"}
    copy_object(memory.store, memory.layout.memory_prefix + "a.md", memory.layout.index_key)
    PROCESS_INDEX_CACHE.clear()
    assert texts(memory) == {"/memories/a.md": "alpha\n"}
    assert list(index_entries(memory).values()) == ["alpha\n", None]  # rebuilt; index.md kept as unreadable


@pytest.mark.parametrize(
    "plaintext",
    [
        b"not json",
        b"[]",
        b'{"v": 2, "files": []}',
        b'{"v": 1}',
        b'{"v": 1, "files": [1]}',
        b'{"v": 1, "files": [{"k": "bob/memories/a.md", "e": "x", "t": "planted"}]}',
        b'{"v": 1, "files": [{"k": "alice/memories/a.md", "e": "", "t": "planted"}]}',
        b'{"v": 1, "files": [{"k": "alice/memories/a.md", "e": "x", "t": 5}]}',
        b'{"v": 1, "files": [{"k": "alice/memories/a.md", "e": "x", "t": "\\ud800"}]}',
        b'{"v": 1, "files": [{"k": "alice/memories/a.md", "e": "x", "t": "a"}, '
        b'{"k": "alice/memories/a.md", "e": "y", "t": "b"}]}',
        b"[" * 100_000,
    ],
)
def test_a_malformed_index_is_rebuilt_and_never_shown(plaintext: bytes, caplog: pytest.LogCaptureFixture) -> None:
    memory = open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())
    memory.create("/memories/a.md", "alpha\n")
    body, metadata = seal_index(memory.files, plaintext)
    memory.store.put(memory.layout.index_key, body, metadata)
    with caplog.at_level(logging.WARNING, logger="s3memory"):
        assert texts(memory) == {"/memories/a.md": "alpha\n"}
    assert "rebuilding it" in caplog.text
    assert list(index_entries(memory).values()) == ["alpha\n"]


def test_a_tampered_index_is_rebuilt() -> None:
    memory = open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())
    memory.create("/memories/a.md", "alpha\n")
    assert texts(memory)
    stored = memory.store.get(memory.layout.index_key)
    assert stored is not None
    body = bytearray(stored.body)
    body[5] ^= 1
    memory.store.put(memory.layout.index_key, bytes(body), dict(stored.metadata))
    memory.store.put(memory.layout.index_key + "x", b"", {})  # a stray object beside it: ignored
    PROCESS_INDEX_CACHE.clear()
    assert texts(memory) == {"/memories/a.md": "alpha\n"}
    assert list(index_entries(memory).values()) == ["alpha\n"]


def test_an_oversized_index_is_not_read_and_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    """s3memory never writes one so large: a planted one is not read, and is replaced
    (conditionally on its ETag), so that it cannot switch the index off for good."""
    store = Recorder(InMemoryStore(), rtt=0)
    memory = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    memory.create("/memories/a.md", "alpha\n")
    store.put(memory.layout.index_key, b"x" * 2000, {})
    monkeypatch.setattr(_index, "MAX_INDEX_BYTES", 1000)
    store.puts.clear()
    assert texts(memory) == {"/memories/a.md": "alpha\n"}
    assert store.puts == [memory.layout.index_key]
    assert list(index_entries(memory).values()) == ["alpha\n"]


def test_an_emptied_memory_leaves_no_index_behind() -> None:
    """The index holds every file's text: when the files are gone, so is it."""
    store = InMemoryStore()
    memory = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    memory.create("/memories/diary.md", "a private diagnosis\n")
    assert texts(memory)
    assert store.head(memory.layout.index_key) is not None
    memory.clear_all()
    assert store.head(memory.layout.index_key) is None  # clear_all takes it with the files
    memory.create("/memories/diary.md", "again\n")
    assert texts(memory)
    other = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    other.delete("/memories/diary.md")  # a plain delete: the next search drops the index
    assert texts(memory) == {}
    assert store.head(memory.layout.index_key) is None


def test_over_the_cap_the_index_is_kept_in_the_process_only(monkeypatch: pytest.MonkeyPatch) -> None:
    store = Recorder(InMemoryStore(), rtt=0)
    memory = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    for n in range(5):
        memory.create(f"/memories/{n}.md", f"file {n} " * 20)
    monkeypatch.setattr(_index, "MAX_INDEX_BYTES", 200)
    store.puts.clear()
    _, verbs, _ = recorded(store, lambda: texts(memory))
    assert store.puts == [] and verbs["get"] == 6  # the index (none), every file
    # The requests, not their overlap: with no delay per request (rtt=0) whether two overlap is
    # the wall clock's; test_round_trips_warm_cold_and_changed (slow tier) counts round trips.
    result, verbs, _ = recorded(store, lambda: texts(memory))
    assert len(result) == 5 and verbs == {"list": 1, "head": 1}


def test_a_file_that_does_not_open_is_left_out_and_not_read_again() -> None:
    store = Recorder(InMemoryStore(), rtt=0)
    memory = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    memory.create("/memories/a.md", "alpha\n")
    memory.create("/memories/b.md", "beta\n")
    stored = store.get(memory.layout.memory_prefix + "b.md")
    assert stored is not None
    store.put(memory.layout.memory_prefix + "b.md", bytes(stored.body)[::-1], dict(stored.metadata))
    store.put(memory.layout.memory_prefix + "plain.md", b"not encrypted", {})
    assert texts(memory) == {"/memories/a.md": "alpha\n"}
    _, verbs, _ = recorded(store, lambda: texts(memory))
    assert verbs == {"list": 1, "head": 1}
    PROCESS_INDEX_CACHE.clear()
    _, verbs, _ = recorded(store, lambda: texts(memory))
    assert verbs == {"list": 1, "get": 1}  # the index, no file


# -- freshness -------------------------------------------------------------------------------
@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("warm", [True, False])
def test_a_stale_index_is_refreshed_after_another_writer(make_memory: MakeMemory, flavour: str, warm: bool) -> None:
    searcher = make_memory(flavour)
    writer = make_memory(flavour)  # another process: its own key cache
    searcher.create("/memories/a.md", "alpha\n")
    searcher.create("/memories/b.md", "beta\n")
    searcher.create("/memories/c.md", "gamma\n")
    assert found(searcher, "beta") == ["/memories/b.md"]
    writer.create("/memories/d.md", "delta beta\n")
    writer.str_replace("/memories/a.md", "alpha", "alpha beta")
    writer.delete("/memories/b.md")
    if not warm:
        PROCESS_INDEX_CACHE.clear()
    assert found(searcher, "beta") == ["/memories/a.md", "/memories/d.md"]
    assert texts(searcher) == {
        "/memories/a.md": "alpha beta\n",
        "/memories/c.md": "gamma\n",
        "/memories/d.md": "delta beta\n",
    }
    assert sorted(v for v in index_entries(searcher).values() if v) == ["alpha beta\n", "delta beta\n", "gamma\n"]
    # A rename is a deletion and a creation.
    writer.rename("/memories/c.md", "/memories/sub/c.md")
    assert sorted(texts(searcher)) == ["/memories/a.md", "/memories/d.md", "/memories/sub/c.md"]


def test_two_processes_racing_to_write_the_index_lose_nothing(caplog: pytest.LogCaptureFixture) -> None:
    store = Recorder(InMemoryStore(), rtt=0)
    first = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    other = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    for n in range(3):
        first.create(f"/memories/{n}.md", f"file {n}\n")
    assert len(texts(first)) == 3
    other.create("/memories/from-other.md", "other\n")
    first.create("/memories/from-first.md", "first\n")

    def the_other_process_writes_first(key: str) -> None:
        assert key == first.layout.index_key
        with another_process():
            assert len(texts(other)) == 5

    PROCESS_INDEX_CACHE.clear()
    store.before_put = the_other_process_writes_first
    with caplog.at_level(logging.INFO, logger="s3memory"):
        assert len(texts(first)) == 5  # its write-back lost the race: not an error
    assert "wrote the search index first" in caplog.text
    assert store.puts[-2:] == [first.layout.index_key, first.layout.index_key]
    assert len(index_entries(first)) == 5  # the winner's, complete
    # The loser adopts the winner's index without reading or writing anything.
    store.puts.clear()
    _, verbs, _ = recorded(store, lambda: texts(first))
    assert verbs == {"list": 1, "head": 1}  # (their overlap: see the test above)
    # And a cold process reads no file.
    PROCESS_INDEX_CACHE.clear()
    _, verbs, _ = recorded(store, lambda: texts(first))
    assert verbs == {"list": 1, "get": 1}


def test_concurrent_searches_of_one_process_agree() -> None:
    memory = open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())
    for n in range(40):
        memory.create(f"/memories/{n:02}.md", f"file {n}\n")
    results: list[int] = []

    def search() -> None:
        results.append(len(texts(memory)))

    threads = [threading.Thread(target=search) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [40] * 8
    assert len(index_entries(memory)) == 40


@pytest.mark.parametrize("failure", ["refused", "if-match unsupported"])
def test_a_failed_write_back_never_fails_the_search(failure: str, caplog: pytest.LogCaptureFixture) -> None:
    class Refusing(Recorder):
        def put(self, key: str, body: bytes, metadata: Any, **options: Any) -> str:
            if key.endswith("/index/v1") and (failure == "refused" or options.get("if_match")):
                self.puts.append(key)
                raise StorageError("Error: the store refused the request")
            return super().put(key, body, metadata, **options)

    store = Refusing(InMemoryStore(), rtt=0)
    memory = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    memory.create("/memories/a.md", "alpha\n")
    with caplog.at_level(logging.WARNING, logger="s3memory"):
        assert found(memory, "alpha") == ["/memories/a.md"]
        memory.create("/memories/b.md", "beta alpha\n")
        assert found(memory, "alpha") == ["/memories/a.md", "/memories/b.md"]
    if failure == "refused":
        assert "could not be written back" in caplog.text
        assert store.puts.count(memory.layout.index_key) == 1  # not tried again at once
    else:  # created with If-None-Match, then If-Match refused (radosgw on a versioned bucket)
        assert store.puts.count(memory.layout.index_key) == 2
        assert "could not be written back" in caplog.text


@pytest.mark.parametrize("flavour", ["inmemory", "s3-kms"])
def test_a_read_only_refresh_writes_nothing(make_memory: MakeMemory, flavour: str) -> None:
    writer = make_memory(flavour)
    writer.create("/memories/a.md", "alpha\n")
    assert texts(writer)
    writer.create("/memories/b.md", "beta\n")
    reader = make_memory(flavour)
    before = {(i.key, i.etag) for i in reader.store.list("")}
    PROCESS_INDEX_CACHE.clear()
    assert texts(reader, write_back=False) == {"/memories/a.md": "alpha\n", "/memories/b.md": "beta\n"}
    assert texts(reader, write_back=False) == {"/memories/a.md": "alpha\n", "/memories/b.md": "beta\n"}
    assert {(i.key, i.etag) for i in reader.store.list("")} == before


# -- round trips -----------------------------------------------------------------------------
@pytest.mark.slow  # round trips read from the wall clock
def test_round_trips_warm_cold_and_changed() -> None:
    store = Recorder(InMemoryStore(), rtt=0.04)  # round trips from timing: jitter stays small beside it
    memory = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    other = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    for n in range(60):
        memory.create(f"/memories/{n:02}.md", f"file {n}\n")
    _, verbs, _ = recorded(store, lambda: texts(memory))
    assert verbs == {"list": 1, "get": 61, "put": 1}  # the first build: every file
    _, verbs, trips = recorded(store, lambda: texts(memory))
    assert (verbs, trips) == ({"list": 1, "head": 1}, 1)  # warm, nothing changed
    for n in range(5):
        other.str_replace(f"/memories/{n:02}.md", "file", "changed")
    _, verbs, trips = recorded(store, lambda: texts(memory))
    assert (verbs, trips) == ({"list": 1, "head": 1, "get": 5, "put": 1}, 3)
    for n in range(5, 55):
        other.str_replace(f"/memories/{n:02}.md", "file", "changed")
    _, verbs, trips = recorded(store, lambda: texts(memory))
    assert (verbs, trips) == ({"list": 1, "head": 1, "get": 50, "put": 1}, 3)  # one wave of 64
    other.delete("/memories/00.md")
    _, verbs, trips = recorded(store, lambda: texts(memory))
    assert (verbs, trips) == ({"list": 1, "head": 1, "put": 1}, 2)
    # A cold process whose index is current: the listing, the index and the tenant key, at once.
    cold = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    PROCESS_INDEX_CACHE.clear()
    result, verbs, trips = recorded(store, lambda: texts(cold))
    assert (len(result), verbs, trips) == (59, {"list": 1, "get": 2}, 1)
    # Another process wrote a file and the index: adopted without a write, its file read.
    with another_process():
        other.create("/memories/new.md", "new\n")
        _, verbs, _ = recorded(store, lambda: texts(other))
        assert verbs == {"list": 1, "get": 2, "put": 1}  # the index (then the new file), and the write
    _, verbs, trips = recorded(store, lambda: texts(memory))
    assert (verbs, trips) == ({"list": 1, "head": 1, "get": 1}, 2)
    _, verbs, trips = recorded(store, lambda: texts(memory))
    assert (verbs, trips) == ({"list": 1, "head": 1}, 1)


@contextlib.contextmanager
def another_process() -> Iterator[None]:
    """Run as a process of its own would: with an index cache of its own."""
    ours = _index.PROCESS_INDEX_CACHE
    _index.PROCESS_INDEX_CACHE = IndexCache()
    try:
        yield
    finally:
        _index.PROCESS_INDEX_CACHE = ours


def test_requests_on_s3_in_kms_mode(s3_client: Any, kms_client: Any, kms_key_id: str) -> None:
    def make() -> EncryptedMemory:
        return open_memory(
            user_id="alice",
            bucket=BUCKET,
            s3_client=s3_client,
            kms_key_id=kms_key_id,
            kms_client=kms_client,
            key_mode="kms",
            key_cache=KeyCache(),
        )

    memory, other = make(), make()
    memory.create("/memories/a.md", "alpha\n")
    memory.create("/memories/b.md", "beta\n")
    meter = Meter(s3_client, kms_client)
    assert texts(memory)
    # The files this process wrote: their data keys are cached; the index's is generated.
    assert meter.take() == {"ListObjectsV2": 1, "GetObject": 3, "GenerateDataKey": 1, "PutObject": 1}
    assert texts(memory)
    assert meter.take() == {"ListObjectsV2": 1, "HeadObject": 1}
    other.str_replace("/memories/a.md", "alpha", "ALPHA")
    meter.take()
    assert found(memory, "alpha") == ["/memories/a.md"]
    # Written by another process: its data key is one KMS Decrypt after its GET; the index's
    # data key is made beside them, and the write-back deferred to the next search's first
    # round trip (now, it would be a fourth).
    assert meter.take() == {"ListObjectsV2": 1, "HeadObject": 1, "GetObject": 1, "Decrypt": 1, "GenerateDataKey": 1}
    assert found(memory, "alpha") == ["/memories/a.md"]
    assert meter.take() == {"ListObjectsV2": 1, "HeadObject": 1, "PutObject": 1}
    assert texts(memory)
    assert meter.take() == {"ListObjectsV2": 1, "HeadObject": 1}  # the written index is this process's
    PROCESS_INDEX_CACHE.clear()
    cold = make()
    assert texts(cold)
    assert meter.take() == {"ListObjectsV2": 1, "GetObject": 1, "Decrypt": 1}
    # Read-only: no data key is generated, nothing is written.
    PROCESS_INDEX_CACHE.clear()
    other.create("/memories/c.md", "gamma\n")
    meter.take()
    assert len(texts(make(), write_back=False)) == 3
    assert meter.take() == {"ListObjectsV2": 1, "GetObject": 2, "Decrypt": 2}


# -- lifecycle: rotation, erasure, redaction, the other scans ---------------------------------
@pytest.mark.parametrize("flavour", ["inmemory", "localdir", "s3-tenant-local"])
def test_rotation_rewraps_the_index(make_memory: MakeMemory, flavour: str) -> None:
    memory = make_memory(flavour)
    memory.create("/memories/a.md", "alpha\n")
    memory.create("/memories/b.md", "beta\n")
    assert texts(memory)
    report = rotate_tenant_key(memory, retire_after=0)
    assert report.unreadable == []
    info = memory.store.head(memory.layout.index_key)
    assert info is not None
    kid = envelope.parse_header(info.metadata).wrapped_key.context["s3memory:kid"]
    assert kid == report.kid
    # A cold process with the new key opens it as it is: no file is read again.
    cold = make_memory(flavour)
    PROCESS_INDEX_CACHE.clear()
    assert texts(cold) == {"/memories/a.md": "alpha\n", "/memories/b.md": "beta\n"}
    assert index_entries(cold) == {
        cold.layout.memory_prefix + "a.md": "alpha\n",
        cold.layout.memory_prefix + "b.md": "beta\n",
    }


def test_a_new_master_key_leaves_the_index_readable() -> None:
    store = InMemoryStore()
    memory = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    memory.create("/memories/a.md", "alpha\n")
    assert texts(memory)
    new_master = bytes(range(1, 33))
    rewrap_tenant_key(memory, new_master)
    PROCESS_INDEX_CACHE.clear()
    moved = open_memory(user_id="alice", store=store, master_key=new_master, key_cache=KeyCache())
    assert texts(moved) == {"/memories/a.md": "alpha\n"}
    assert store.head(moved.layout.index_key) is not None


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_erasure_deletes_the_index_and_forgets_it(make_memory: MakeMemory, flavour: str) -> None:
    memory = make_memory(flavour)
    bob = make_memory(flavour, "bob")
    memory.create("/memories/a.md", "alpha\n")
    bob.create("/memories/a.md", "bob\n")
    assert texts(memory) and texts(bob)
    erase_tenant(memory)
    assert [i.key for i in memory.store.list("") if i.key.startswith("alice/")] == []
    assert PROCESS_INDEX_CACHE.get(_index._cache_key(memory.files)) is None
    assert PROCESS_INDEX_CACHE.get(_index._cache_key(bob.files)) is not None
    assert texts(bob) == {"/memories/a.md": "bob\n"}


@pytest.fixture
def versioned(make_memory: MakeMemory, request: pytest.FixtureRequest) -> MakeMemory:
    def make(flavour: str, *args: Any, **options: Any) -> EncryptedMemory:
        if flavour.startswith("s3"):
            request.getfixturevalue("s3_client").put_bucket_versioning(
                Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"}
            )
        return make_memory(flavour, *args, **options)

    return make


@pytest.mark.parametrize("flavour", ["inmemory", "localdir", "s3-tenant-local", "s3-kms"])
def test_redaction_purges_every_version_of_the_index(versioned: MakeMemory, flavour: str) -> None:
    memory = versioned(flavour)
    memory.create("/memories/a.md", "token: hunter2\n")
    memory.create("/memories/b.md", "beta\n")
    assert found(memory, "hunter2") == ["/memories/a.md"]
    memory.str_replace("/memories/a.md", "hunter2", "(removed)")
    memory.create("/memories/c.md", "gamma\n")
    assert found(memory, "hunter2") == []
    assert found(memory, "gamma") == ["/memories/c.md"]  # in KMS mode, the deferred write-back
    index_versions = [v for v in memory.store.list_versions(memory.layout.index_prefix) if not v.is_delete_marker]
    assert len(index_versions) >= 2  # the first still holds the token
    leaked = memory.history("/memories/a.md")[1]
    memory.redact("/memories/a.md", leaked.version)
    assert list(memory.store.list_versions(memory.layout.index_prefix)) == []
    # Rebuilt lazily, from the current files only (this process's snapshot saves the reads).
    assert texts(memory) == {
        "/memories/a.md": "token: (removed)\n",
        "/memories/b.md": "beta\n",
        "/memories/c.md": "gamma\n",
    }
    assert "hunter2" not in "".join(t or "" for t in index_entries(memory).values())
    PROCESS_INDEX_CACHE.clear()
    assert found(versioned(flavour), "hunter2") == []


@pytest.mark.parametrize("flavour", ["inmemory", "s3-tenant-local"])
def test_a_redaction_whose_text_is_current_elsewhere_is_refused_and_keeps_the_index(
    versioned: MakeMemory, flavour: str
) -> None:
    """A version whose rename's copy is the current file: failed before the fix (accepted,
    reported redacted, the index purged, and its text indexed again from the copy)."""
    memory = versioned(flavour)
    memory.create("/memories/a.md", "token: hunter2\n")
    leaked = memory.history("/memories/a.md")[0]
    memory.rename("/memories/a.md", "/memories/b.md")
    assert found(memory, "hunter2") == ["/memories/b.md"]
    index_versions = list(memory.store.list_versions(memory.layout.index_prefix))
    with pytest.raises(ConfigurationError, match=r"is the current content of /memories/b\.md"):
        memory.redact("/memories/a.md", leaked.version)
    assert list(memory.store.list_versions(memory.layout.index_prefix)) == index_versions  # not purged
    assert memory.read_version("/memories/a.md", leaked.version) == "token: hunter2\n"


@pytest.mark.parametrize("flavour", ["inmemory", "s3-tenant-local"])
def test_the_other_scans_ignore_the_index(versioned: MakeMemory, flavour: str) -> None:
    memory = versioned(flavour, instruction_policy="quarantine")
    memory.create("/memories/a.md", "alpha\n")
    memory.str_replace("/memories/a.md", "alpha", "alpha two")
    memory.create("/memories/d/b.md", "beta\n")
    memory.delete("/memories/d/b.md")
    assert texts(memory)
    assert memory.store.head(memory.layout.index_key) is not None
    changes = memory.changes("/memories")
    assert {c.path for c in changes} == {"/memories/a.md", "/memories/d/b.md"}
    assert [e.operation for e in memory.history("/memories/a.md")] == ["modified", "created"]
    assert memory.pending() == []
    assert [m.path for m in expire_memories(memory, older_than_days=0, now=time.time() + 10).stale] == [
        "/memories/a.md"
    ]
    assert [(e.path, e.size) for e in memory.list_files()] == [("/memories/a.md", 10)]
    assert "index" not in memory.view("/memories")
    report = expire_noncurrent_versions(memory, noncurrent_days=1, now=time.time() + 3 * 86400)
    assert report.versions_deleted >= 1
    assert texts(memory) == {"/memories/a.md": "alpha two\n"}


# -- the process cache -----------------------------------------------------------------------
def test_the_process_cache_is_bounded_by_bytes() -> None:
    cache = IndexCache(max_bytes=1000)

    def snapshot(size: int) -> _Cached:
        return _Cached("e", {}, size)

    cache.put("a", snapshot(400))
    cache.put("b", snapshot(400))
    assert cache.get("a") is not None  # a is now the most recently used
    cache.put("c", snapshot(400))
    assert cache.get("b") is None and cache.get("a") is not None and cache.get("c") is not None
    cache.put("huge", snapshot(5000))
    assert cache.get("huge") is None and len(cache) == 2
    cache.put("a", snapshot(100))
    cache.put("d", snapshot(500))
    assert len(cache) == 3
    cache.discard_matching(lambda key: key in ("a", "d"))
    assert len(cache) == 1
    cache.clear()
    assert len(cache) == 0


def test_the_cache_is_per_master_key() -> None:
    store = InMemoryStore()
    memory = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    memory.create("/memories/a.md", "alpha\n")
    assert texts(memory)
    wrong = open_memory(user_id="alice", store=store, master_key=bytes(range(1, 33)), key_cache=KeyCache())
    from s3memory import TenantKeyError

    with pytest.raises(TenantKeyError):
        texts(wrong)  # never served from what the right key decrypted


def test_the_index_plaintext_is_json_of_keys_etags_and_texts() -> None:
    entries = {"alice/memories/b.md": _Entry("e2", "bé\n"), "alice/memories/a.md": _Entry("e1", None)}
    assert (
        encode_index(entries)
        == (
            '{"v":1,"files":[{"k":"alice/memories/a.md","e":"e1","t":null},'
            '{"k":"alice/memories/b.md","e":"e2","t":"bé\\n"}]}'
        ).encode()
    )
    assert INDEX_NAME == "s3memory-internal:index/v1"


def test_a_lost_race_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    class Losing(Recorder):
        def put(self, key: str, body: bytes, metadata: Any, **options: Any) -> str:
            if key.endswith("/index/v1"):
                raise PreconditionFailedError("Error: lost")
            return super().put(key, body, metadata, **options)

    memory = open_memory(user_id="alice", store=Losing(InMemoryStore(), rtt=0), master_key=MASTER_KEY)
    memory.create("/memories/a.md", "alpha\n")
    with caplog.at_level(logging.INFO, logger="s3memory"):
        assert texts(memory) == {"/memories/a.md": "alpha\n"}
    assert "wrote the search index first" in caplog.text


# -- a model of the index against the files ----------------------------------------------------
OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["write", "write-other", "delete", "search", "cold"]),
        st.integers(0, 4),
        st.text(alphabet="abc \n", max_size=12),
    ),
    max_size=25,
)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(OPERATIONS)
def test_the_index_always_agrees_with_the_files(operations: list[tuple[str, int, str]]) -> None:
    PROCESS_INDEX_CACHE.clear()
    store = InMemoryStore()
    mine = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    theirs = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    model: dict[str, str] = {}
    for operation, n, text in operations:
        path = f"/memories/f{n}.md"
        if operation in ("write", "write-other"):
            writer = mine if operation == "write" else theirs
            if path in model:
                writer.delete(path)
            writer.create(path, text)
            model[path] = text
        elif operation == "delete" and path in model:
            theirs.delete(path)
            del model[path]
        elif operation == "cold":
            PROCESS_INDEX_CACHE.clear()
        assert texts(mine) == model


@pytest.mark.slow  # round trips read from the wall clock
def test_with_encrypted_names_a_cold_process_is_still_one_round_trip() -> None:
    store = Recorder(InMemoryStore(), rtt=0.04)
    memory = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache(), encrypt_names=True)
    memory.create("/memories/private/plans.md", "move to Lisbon\n")
    assert found(memory, "lisbon") == ["/memories/private/plans.md"]
    assert all("plans" not in key and "private" not in key for key in index_entries(memory))
    cold = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache(), encrypt_names=True)
    PROCESS_INDEX_CACHE.clear()
    result, verbs, trips = recorded(store, lambda: found(cold, "lisbon"))
    # The listing, the index, the tenant key and the names key, all at once.
    assert (result, verbs, trips) == (["/memories/private/plans.md"], {"list": 1, "get": 3}, 1)
    # Opened without encrypted names, it says so (as every command does) rather than find nothing.
    plain = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    PROCESS_INDEX_CACHE.clear()
    from s3memory import ConfigurationError

    with pytest.raises(ConfigurationError, match="encrypted names"):
        texts(plain)


def test_expiry_takes_the_index_with_the_files_it_deletes() -> None:
    from s3memory import expire_memories

    store = InMemoryStore()
    memory = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    memory.create("/memories/old.md", "forgotten secret\n")
    assert texts(memory)
    report = expire_memories(memory, older_than_days=0, delete=True, now=time.time() + 60)
    assert report.deleted == ["/memories/old.md"]
    assert store.head(memory.layout.index_key) is None
    assert texts(memory) == {}


# -- provenance in the entries (the memory-store API's ids) -------------------------------------
def test_entries_carry_each_versions_file_id_and_times_across_edits_and_renames() -> None:
    memory = open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())
    memory.create("/memories/a.md", "alpha\n")
    (first,) = current_files(memory.files)
    assert first.file_id is not None and first.at_us is not None and first.created_us == first.at_us
    memory.str_replace("/memories/a.md", "alpha", "beta")
    memory.rename("/memories/a.md", "/memories/b.md")
    (moved,) = current_files(memory.files)
    assert (moved.path.display, moved.file_id, moved.created_us) == ("/memories/b.md", first.file_id, first.created_us)
    assert moved.at_us is not None and moved.at_us >= first.at_us
    PROCESS_INDEX_CACHE.clear()  # a cold process reads them back from the stored index
    (cold,) = current_files(memory.files)
    assert (cold.file_id, cold.at_us, cold.created_us) == (moved.file_id, moved.at_us, first.created_us)


def test_an_index_written_without_provenance_is_read_again_only_when_it_is_needed() -> None:
    """An index an older s3memory wrote has no f/a/c: search uses it as it is; a caller that
    needs the ids (``with_provenance``) reads the files again, once, and writes them back."""
    store = InMemoryStore()
    memory = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    memory.create("/memories/a.md", "alpha\n")
    (fresh,) = current_files(memory.files)
    stored = memory.store.get(memory.layout.index_key)
    assert stored is not None
    old_entries = {k: _Entry(e.etag, e.text) for k, e in open_index(memory.files, stored).items()}
    assert b'"f"' not in encode_index(old_entries)
    body, metadata = seal_index(memory.files, encode_index(old_entries))
    memory.store.put(memory.layout.index_key, body, metadata)
    PROCESS_INDEX_CACHE.clear()
    recorder = Recorder(store, rtt=0)
    memory = open_memory(user_id="alice", store=recorder, master_key=MASTER_KEY, key_cache=KeyCache())
    (plain,), verbs, _ = recorded(recorder, lambda: current_files(memory.files))
    assert plain.file_id is None and verbs.get("get") == 2 and "put" not in verbs  # the index and the key: no file
    (known,), verbs, _ = recorded(recorder, lambda: current_files(memory.files, with_provenance=True))
    assert (known.file_id, known.at_us, known.created_us) == (fresh.file_id, fresh.at_us, fresh.created_us)
    assert verbs.get("get") == 1 and verbs.get("put") == 1  # the file read again; the index written back
    (again,), verbs, _ = recorded(recorder, lambda: current_files(memory.files, with_provenance=True))
    assert again.file_id == fresh.file_id and "get" not in verbs and "put" not in verbs
