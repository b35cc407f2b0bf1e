"""The local store's batches and serial round trips.

- a local store's round trips run their calls on the calling thread, in one ``batch()``,
  with the semantics of a concurrent round trip (every call runs; the first error in
  submission order is raised);
- a batch shares the root's check and the opened directories, and syncs each directory
  its calls changed once, when it ends; each write is placed when its call returns;
  ``copy_many`` syncs its files at once;
- batches nest, and stores opened on one root share this thread's batch; the lock is held
  by one call at a time, never between calls (no deadlock with code between them), and
  conditional writes stay atomic across threads and processes;
- descriptors stay bounded in a long batch, and none is left open after it;
- a listing reads the fixed header of each file, and nothing more.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from unittest import mock

import pytest
from helpers.localdir import RecordedSyncs

from s3memory import InMemoryStore, KeyCache, LocalDirStore, PreconditionFailedError, open_memory, parse_path
from s3memory._roundtrip import RoundTrip
from s3memory.stores import ObjectStore, S3Store
from s3memory.stores._localdir import batch as _localbatch


def _syncfs_here(store: LocalDirStore) -> bool:
    fd = os.open(store.root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return _localbatch._syncfs(fd)
    finally:
        os.close(fd)


def open_fds() -> int:
    gc.collect()  # stores of earlier tests close their root's descriptor when collected
    return len(os.listdir("/proc/self/fd"))


# --- serial round trips ----------------------------------------------------------------------


def test_local_stores_are_not_concurrent_and_network_ones_are() -> None:
    assert LocalDirStore.concurrent is False and InMemoryStore.concurrent is False
    assert S3Store.concurrent is True and ObjectStore.concurrent is True


def test_an_inline_round_trip_runs_every_call_on_the_calling_thread_in_order() -> None:
    ran: list[tuple[str, int]] = []

    def call(name: str, fail: bool = False) -> str:
        ran.append((name, threading.get_ident()))
        if fail:
            raise ValueError(name)
        return name

    batches: list[str] = []

    class Recording:
        def __enter__(self) -> None:
            batches.append("enter")

        def __exit__(self, *exc: object) -> None:
            batches.append("exit")

    rt = RoundTrip(lambda: pytest.fail("no pool for an inline round trip"), inline=Recording)
    first, second, third, fourth = (
        rt.submit(call, "a"),
        rt.submit(call, "b", fail=True),
        rt.submit(call, "c"),
        rt.submit(call, "d", fail=True),
    )
    with pytest.raises(ValueError, match=r"^b$"):  # the first error in submission order
        rt.wait()
    assert [name for name, _ in ran] == ["a", "b", "c", "d"]  # one error stops no other call
    assert {ident for _, ident in ran} == {threading.get_ident()}
    assert batches == ["enter", "exit"]
    assert first.result() == "a" and third.result() == "c"
    with pytest.raises(ValueError, match=r"^d$"):
        fourth.result()
    with pytest.raises(ValueError, match=r"^b$"):
        second.result()


def test_a_memory_on_a_local_store_never_starts_a_worker_thread(tmp_path: Path) -> None:
    memory = open_memory(
        user_id="u", store=LocalDirStore(tmp_path / "s"), master_key=bytes(range(32)), key_cache=KeyCache()
    )
    with mock.patch.object(ThreadPoolExecutor, "submit", side_effect=AssertionError("a worker thread")):
        memory.create("/memories/a.md", "one\ntwo\n")
        memory.str_replace("/memories/a.md", "one", "three")
        memory.rename("/memories/a.md", "/memories/b.md")
        assert "three" in memory.view("/memories/b.md")
        memory.delete("/memories/b.md")


# --- batches ---------------------------------------------------------------------------------


def test_a_batch_syncs_each_directory_once_and_copy_many_each_step_once(store: LocalDirStore) -> None:
    with RecordedSyncs() as syncs:
        for i in range(10):
            store.put(f"t/one/{i}", b"x", {})
        alone = len(syncs.calls)
        syncs.calls.clear()
        with store.batch():
            for i in range(10):
                store.put(f"t/two/{i}", b"x", {})
        batched = len(syncs.calls)
        syncs.calls.clear()
        results = store.copy_many([(f"t/two/{i}", f"t/three/{i}", {}, None, True) for i in range(10)])
        many = len(syncs.calls)
    assert alone >= 20  # each write: its file, then its directory
    assert batched <= 10 + 3  # each file; the directories once, at the end
    assert results == ['"9dd4e461268c8034f5c8564e155c67a6"'] * 10
    if _syncfs_here(store):
        assert many == 2  # one syncfs for the files' data, one for the directories
    assert [info.key for info in store.list("t/three/")] == [f"t/three/{i}" for i in range(10)]


@pytest.mark.parametrize("kind", ["local", "default"])
def test_copy_many_reports_each_copy_and_places_them_in_order(tmp_path: Path, kind: str) -> None:
    """The local store's copy_many, and the default (one copy after the other), alike."""
    store: ObjectStore = LocalDirStore(tmp_path / "s") if kind == "local" else InMemoryStore()
    store.put("t/a", b"a", {})
    store.put("t/b", b"b", {})
    results = store.copy_many(
        [
            ("t/a", "t/c", {"n": "1"}, None, True),
            ("t/b", "t/c", {"n": "2"}, None, True),  # onto the copy just made: refused
            ("t/missing", "t/d", {}, None, False),
            ("t/a", "t/e", {}, '"' + "0" * 32 + '"', False),  # the source is not that version
            ("t/c", "t/f/g", {}, None, True),  # from the copy just made
            ("t/b", "t/a", {}, None, False),  # over a source copied before
        ]
    )
    assert isinstance(results[0], str) and isinstance(results[4], str) and isinstance(results[5], str)
    assert all(isinstance(r, PreconditionFailedError) for r in (results[1], results[2], results[3]))
    c, g, a = store.get("t/c"), store.get("t/f/g"), store.get("t/a")
    assert c is not None and (c.body, c.metadata) == (b"a", {"n": "1"})
    assert g is not None and g.body == b"a" and a is not None and a.body == b"b"
    assert [v.key for v in store.list_versions("t/a")] == ["t/a", "t/a"]  # the overwritten one kept
    assert store.head("t/d") is None and store.head("t/e") is None


def test_a_write_is_placed_when_its_call_returns_even_in_a_batch(store: LocalDirStore) -> None:
    other = LocalDirStore(store.root)
    seen: list[bytes | None] = []

    def look() -> None:
        got = other.get("t/a")
        seen.append(None if got is None else got.body)
        other.delete(["t/d/x"])  # and removes a directory the batch opened

    store.put("t/d/x", b"x", {})
    with store.batch():
        assert store.get("t/d/x") is not None
        store.put("t/a", b"a", {}, if_none_match=True)
        thread = threading.Thread(target=look)
        thread.start()
        thread.join(30)
        store.put("t/d/y", b"y", {})  # into the directory made again
    assert seen == [b"a"]
    assert [i.key for i in store.list("t/")] == ["t/a", "t/d/y"]


def test_a_call_in_a_batch_sees_the_writes_before_it(store: LocalDirStore) -> None:
    store.put("t/a", b"one", {})
    with store.batch():
        etag = store.put("t/a", b"two", {})
        got = store.get("t/a")
        assert got is not None and got.body == b"two" and got.etag == etag
        with pytest.raises(PreconditionFailedError):
            store.put("t/a", b"three", {}, if_none_match=True)
        store.put("t/b/c", b"c", {})
        assert [info.key for info in store.list("t/")] == ["t/a", "t/b/c"]
        store.copy("t/b/c", "t/d", metadata={})
        store.delete(["t/b/c"])
        assert store.head("t/d") is not None and store.head("t/b/c") is None
    assert [v.key for v in store.list_versions("t/") if v.is_latest and not v.is_delete_marker] == ["t/a", "t/d"]


def test_a_failed_write_in_a_batch_spoils_none_of_the_others(store: LocalDirStore) -> None:
    store.put("t/a", b"one", {})
    with store.batch():
        store.put("t/b", b"b", {})
        with pytest.raises(PreconditionFailedError):
            store.put("t/a", b"x", {}, if_match='"' + "0" * 32 + '"')
        store.put("t/c", b"c", {})
    assert [(i.key, i.size) for i in store.list("t/")] == [("t/a", 3), ("t/b", 1), ("t/c", 1)]


def test_batches_nest_and_stores_on_one_root_share_the_thread_s_batch(store: LocalDirStore) -> None:
    other = LocalDirStore(store.root)
    done = threading.Event()

    def nested() -> None:
        with store.batch():
            store.put("t/a", b"1", {})  # the lock is taken, and held to the end of the batch
            with store.batch():
                other.put("t/b", b"2", {})  # the same root: joins, does not wait for itself
                with other.batch():
                    store.put("t/c", b"3", {})
        done.set()

    thread = threading.Thread(target=nested, daemon=True)
    thread.start()
    assert done.wait(30), "a nested batch waited for the lock its own thread holds"
    assert [i.key for i in other.list("t/")] == ["t/a", "t/b", "t/c"]


def test_a_batch_holds_no_lock_between_its_calls(store: LocalDirStore) -> None:
    """The deadlock a held lock would make (found by test_cli's bulk import): a batch's call
    writes, then the next waits for a thread that holds an in-process lock and writes."""
    in_process = threading.Lock()
    holding = threading.Event()
    errors: list[BaseException] = []

    def other() -> None:
        try:
            with in_process:
                holding.set()
                store.put("t/other", b"o", {})  # waits for the store's lock, if the batch holds it
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=other, daemon=True)
    with store.batch():
        store.put("t/a", b"a", {})
        thread.start()
        assert holding.wait(30)
        assert in_process.acquire(timeout=30), "deadlock: the batch held the lock between its calls"
        in_process.release()
        store.put("t/b", b"b", {})
    thread.join(30)
    assert errors == [] and [i.key for i in store.list("t/")] == ["t/a", "t/b", "t/other"]


WORKER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from s3memory import LocalDirStore, PreconditionFailedError

    root, go, rounds = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    store = LocalDirStore(root)
    while not go.exists():
        time.sleep(0.001)
    won = created = 0
    for i in range(rounds):
        with store.batch():  # a read, then conditional writes: one round trip's worth
            got = store.get("t/counter")
            try:
                store.put("t/counter", str(int(got.body) + 1).encode(), {}, if_match=got.etag)
                won += 1
            except PreconditionFailedError:
                pass
            try:
                store.put(f"t/once/{i}", b"mine", {}, if_none_match=True)
                created += 1
            except PreconditionFailedError:
                pass
    print(won, created)
    """
)


@pytest.mark.slow  # subprocesses
def test_conditional_writes_in_batches_stay_atomic_across_processes(store: LocalDirStore, tmp_path: Path) -> None:
    store.put("t/counter", b"0", {})
    go = tmp_path / "go"
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(store.root), str(go), "40"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    go.touch()
    results = []
    for worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err.decode()
        results.append([int(n) for n in out.split()])
    counter = store.get("t/counter")
    assert counter is not None and int(counter.body) == sum(won for won, _ in results)  # no update lost
    assert sum(created for _, created in results) == 40  # each key made once
    assert len([v for v in store.list_versions("t/counter")]) == int(counter.body) + 1


@pytest.mark.slow  # a long batch of files
@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts /proc/self/fd")
def test_a_long_batch_keeps_descriptors_bounded_and_leaves_none_open(store: LocalDirStore) -> None:
    before = open_fds()
    most = 0
    with store.batch():
        for i in range(400):
            store.put(f"t/{i % 200}/{i}", b"x", {})
            most = max(most, len(os.listdir("/proc/self/fd")))
        store.delete([f"t/{i % 200}/{i}" for i in range(400)])
        most = max(most, len(os.listdir("/proc/self/fd")))
    assert most - before < 250
    assert open_fds() == before
    assert list(store.list("t/")) == []


# --- listings --------------------------------------------------------------------------------


def test_a_listing_reads_each_file_s_fixed_header_and_nothing_more(store: LocalDirStore) -> None:
    metadata = {f"x-amz-meta-{i}": "v" * 100 for i in range(10)}
    for i in range(30):
        store.put(f"t/{i % 3}/f{i:02d}", os.urandom(50_000), metadata)
    reads: list[tuple[int, int]] = []
    real_pread, real_read = os.pread, os.read
    with (
        mock.patch.object(os, "pread", lambda fd, n, at: reads.append((n, at)) or real_pread(fd, n, at)),
        mock.patch.object(os, "read", lambda fd, n: reads.append((n, -1)) or real_read(fd, n)),
    ):
        listed = list(store.list("t/"))
    assert len(listed) == 30 and all(info.size == 50_000 for info in listed)
    assert reads == [(33, 0)] * 30  # one pread of the 33-byte header a file; no metadata, no body


def test_a_listing_of_a_format_1_file_still_has_its_etag(store: LocalDirStore) -> None:
    (store.root / "t").mkdir(mode=0o700)
    (store.root / "t" / "old").write_bytes(b"S3MO\x01\x00\x00\x00\x02{}body")
    (info,) = store.list("t/")
    assert (info.key, info.size, info.etag) == ("t/old", 4, '"841a2d689ad86bd1611447453c22c6fc"')


def test_no_batch_is_left_open_after_an_error(store: LocalDirStore) -> None:
    before = open_fds()
    with pytest.raises(RuntimeError), store.batch():
        store.put("t/a", b"a", {})
        raise RuntimeError("boom")
    assert store.get("t/a") is not None  # a write that returned is placed all the same
    assert open_fds() == before  # the lock's descriptor too: the lock is released


class _CreatedMeanwhile(LocalDirStore):
    """Another writer creates a file at one of a rename's targets just before its copies."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.intruder: str | None = None

    def copy_many(self, moves):  # type: ignore[no-untyped-def]
        if self.intruder is not None and len(moves) > 1:
            self.put(moves[1][1], b"someone else's", {})
        return super().copy_many(moves)


def test_a_directory_rename_on_a_local_store_copies_at_once_and_loses_nothing_when_refused(tmp_path: Path) -> None:
    """A local store's directory rename makes its copies in one ``copy_many``; a target
    created meanwhile refuses that copy (If-None-Match), the rename answers that something
    changed, and every source and the intruder are kept."""
    store = _CreatedMeanwhile(tmp_path / "store")
    memory = open_memory(user_id="u", store=store, master_key=bytes(range(32)), key_cache=KeyCache())
    try:
        for name in ("a", "b", "c"):
            memory.create(f"/memories/d/{name}.md", name)
        with mock.patch.object(LocalDirStore, "copy", side_effect=AssertionError("one copy at a time")):
            memory.rename("/memories/d", "/memories/e")
        assert [memory.read_text(f"/memories/e/{n}.md") for n in "abc"] == ["a", "b", "c"]
        store.intruder = "yes"
        with pytest.raises(PreconditionFailedError, match="changed while it was being renamed"):
            memory.rename("/memories/e", "/memories/f")
        assert [memory.read_text(f"/memories/e/{n}.md") for n in "abc"] == ["a", "b", "c"]
        intruder = store.get(memory.layout.key_for(parse_path("/memories/f/b.md")))
        assert intruder is not None and intruder.body == b"someone else's"
    finally:
        memory.close()


def test_listing_entries_are_plain_object_infos(store: LocalDirStore) -> None:
    """A listing builds its entries without ``ObjectInfo.__init__`` (a third of its cost):
    they must be the same values, usable as any other."""
    import dataclasses
    import hashlib

    from s3memory.stores import ObjectInfo

    store.put("t/a", b"abc", {"m": "1"})
    (info,) = store.list("t/")
    expected = ObjectInfo("t/a", 3, '"' + hashlib.md5(b"abc").hexdigest() + '"', last_modified=info.last_modified)
    assert info == expected and type(info) is ObjectInfo
    assert dataclasses.replace(info, size=4).size == 4 and info.metadata == {}
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.size = 5  # type: ignore[misc]
