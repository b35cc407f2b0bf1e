"""The local store's listing index (``index``): a whole listing of a large directory opens
no file once the directory's index is kept, and says exactly what reading every file says,
whatever changed the directory since (this store, another, a program that is not s3memory,
a crash that tore the index) and while writers run.

Each check compares the listing with the one that reads every file's header (``list`` with
a limit takes no index).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from unittest import mock

import pytest
from helpers.localdir import META, object_file, snapshot

from s3memory import InMemoryStore, LocalDirStore
from s3memory.stores import ObjectInfo
from s3memory.stores._localdir import index as _index

MANY = _index.INDEXED_FROM + 6


def listed(infos: list[ObjectInfo]) -> list[tuple[str, int, str, float]]:
    return [(i.key, i.size, i.etag, i.last_modified) for i in infos]


def truth(store: LocalDirStore, prefix: str = "t/") -> list[tuple[str, int, str, float]]:
    """The listing that reads each file's header (a limit takes no index)."""
    return listed(list(store.list(prefix, limit=10**9)))


def settle(store: LocalDirStore, directory: str = "t/d") -> None:
    """Wait until the file system's clock has moved past the directory's last change (an
    index of a directory changed in the current tick is not written: ``index``'s docstring)."""
    changed = (store.root / directory).stat()
    probe = store.root / ".tmp" / "probe-clock"
    for _ in range(300):  # at most ~3 s: a file system keeping times to the second or two
        probe.write_bytes(b"")
        if probe.stat().st_mtime_ns > max(changed.st_mtime_ns, changed.st_ctime_ns):
            break
        time.sleep(0.01)
    probe.unlink()


def indexes(store: LocalDirStore) -> list[str]:
    area = store.root / _index.INDEX
    return sorted(os.listdir(area)) if area.is_dir() else []


def filled(store: LocalDirStore) -> None:
    """t/d/: many files and a directory; t/f/: many files only (listed from its index at once)."""
    for i in range(MANY):
        store.put(f"t/d/{i:03d}", b"x" * i, {"n": str(i)})
        store.put(f"t/f/{i:03d}", b"z" * (i + 1), {})
    store.put("t/d/sub/a", b"below", {})
    store.put("t/e", b"beside", {})
    settle(store, "t/d")
    settle(store, "t/f")


def indexed_listing(store: LocalDirStore) -> list[tuple[str, int, str, float]]:
    """A whole listing that must take every file of t/d/ from the index (reading one fails)."""
    real = _index.listing_fields

    def only_outside(parent: int, name: str) -> object:
        if name.isdigit():  # a file of t/d/ or t/f/
            raise AssertionError(f"{name} was read, not taken from the index")
        return real(parent, name)

    with mock.patch.object(_index, "listing_fields", only_outside):
        return listed(list(store.list("t/")))


def test_a_large_directory_is_listed_from_its_index_as_its_files_say(store: LocalDirStore) -> None:
    filled(store)
    expected = truth(store)
    assert listed(list(store.list("t/"))) == expected  # reads the files, keeps the index
    assert len(indexes(store)) == 2
    assert indexed_listing(store) == expected
    assert list(store.list_sizes("t/")) == [(key, size) for key, size, _, _ in expected]
    for prefix in ("t/d/01", "t/f/", "t/f/06", "t/d/s", "t/d/"):
        assert listed(list(store.list(prefix))) == [e for e in expected if e[0].startswith(prefix)]


@pytest.mark.parametrize("name", ["d", "f"])
def test_every_change_to_the_directory_shows_in_the_next_listing(store: LocalDirStore, name: str) -> None:
    filled(store)
    list(store.list("t/"))
    other = LocalDirStore(store.root)  # another process's store
    directory = store.root / "t" / name
    changes = [
        lambda: other.put(f"t/{name}/new", b"new", {}),
        lambda: other.put(f"t/{name}/005", b"longer than it was", {}),  # replaced: another size
        lambda: other.delete([f"t/{name}/007"]),
        lambda: (directory / "made").mkdir(),  # a directory appears
        lambda: (directory / "planted").write_bytes(object_file(b"planted body", META)),  # not s3memory
        lambda: os.rename(directory / "010", directory / "renamed"),
        lambda: os.unlink(directory / "011"),
        lambda: os.replace(directory / "012", directory / "013"),
    ]
    for change in changes:
        change()
        assert listed(list(store.list("t/"))) == truth(store)  # at once, in the same tick too
        settle(store, f"t/{name}")
        assert listed(list(store.list("t/"))) == truth(store)  # and from the index written anew
        assert indexed_listing(store) == truth(store)


def test_a_torn_or_planted_index_is_no_index(store: LocalDirStore, outside: Path) -> None:
    filled(store)
    expected = truth(store)
    list(store.list("t/"))
    path = store.root / _index.INDEX / indexes(store)[0]
    whole = path.read_bytes()
    before = snapshot(outside)
    for spoiled in (b"", whole[:100], whole[:-1], whole[:60] + bytes([whole[60] ^ 1]) + whole[61:], b"S3MI" * 99):
        path.write_bytes(spoiled)
        assert listed(list(store.list("t/"))) == expected
    path.unlink()
    path.symlink_to(outside / "obj")
    assert listed(list(store.list("t/"))) == expected
    assert snapshot(outside) == before


def test_deleted_and_purged_names_leave_no_index(store: LocalDirStore) -> None:
    filled(store)
    list(store.list("t/"))
    assert len(indexes(store)) == 2
    store.delete(["t/d/003", "t/f/003"])  # the index of their directory goes with the name
    assert indexes(store) == []
    settle(store, "t/d")
    settle(store, "t/f")
    list(store.list("t/"))
    assert len(indexes(store)) == 2
    assert store.purge("t/") > 0
    assert indexes(store) == []


def test_listings_stay_exact_while_a_writer_runs(store: LocalDirStore) -> None:
    filled(store)
    written: set[tuple[str, str]] = {(key, etag) for key, _, etag, _ in truth(store)}
    lock = threading.Lock()
    stop = threading.Event()

    def write() -> None:
        other = LocalDirStore(store.root)
        i = 0
        while not stop.is_set() and i < 300:
            key = f"t/d/{i % (MANY + 10):03d}"
            body = f"v{i}".encode()
            with lock:
                written.add((key, other.put(key, body, {})))
            if i % 7 == 0:
                other.delete([f"t/d/{(i * 3) % MANY:03d}"])
            i += 1

    thread = threading.Thread(target=write)
    thread.start()
    try:
        for _ in range(30):
            seen = {(key, etag) for key, _, etag, _ in listed(list(store.list("t/")))}
            with lock:
                assert seen <= written  # nothing listed that was never there
    finally:
        stop.set()
        thread.join(60)
    settle(store, "t/d")
    assert listed(list(store.list("t/"))) == truth(store)
    assert indexed_listing(store) == truth(store)


def test_list_sizes_is_list_s_keys_and_sizes(tmp_path: Path) -> None:
    for store in (InMemoryStore(), LocalDirStore(tmp_path / "s")):
        for i in range(MANY):
            store.put(f"t/d/{i:03d}", b"y" * i, {})
        store.put("t/a", b"a", {})
        assert list(store.list_sizes("t/")) == [(i.key, i.size) for i in store.list("t/")]


def test_a_change_in_the_tick_its_index_recorded_is_not_missed(store: LocalDirStore) -> None:
    """On a file system whose clock keeps 10 s ticks, a change in the tick the directory was
    read in leaves its times as they were: no index is kept of a directory changed in the
    tick its reading began, so no index can hide such a change."""

    def coarse(ns: int) -> int:
        return ns - ns % 10_000_000_000

    def dir_stat(fd: int) -> tuple[int, int, int, int]:
        st = os.fstat(fd)
        return st.st_dev, st.st_ino, coarse(st.st_mtime_ns), coarse(st.st_ctime_ns)

    with (
        mock.patch.object(_index, "dir_stat", dir_stat),
        mock.patch.object(_index, "clock", lambda fd: coarse(os.fstat(fd).st_mtime_ns)),
    ):
        for i in range(MANY):
            store.put(f"t/d/{i:03d}", b"x" * i, {})
        assert listed(list(store.list("t/"))) == truth(store)
        (store.root / "t" / "d" / "new").write_bytes(object_file(b"in the same tick", META))
        os.replace(store.root / "t" / "d" / "new", store.root / "t" / "d" / "005")
        os.unlink(store.root / "t" / "d" / "006")
        assert listed(list(store.list("t/"))) == truth(store)


def test_no_index_outlives_a_purge_made_while_it_was_read(store: LocalDirStore) -> None:
    filled(store)
    other = LocalDirStore(store.root)
    real = _index.listing_fields
    purged: list[int] = []

    def purging(parent: int, name: str) -> object:
        if not purged:
            purged.append(other.purge("t/"))  # another process purges while the directory is read
        return real(parent, name)

    with mock.patch.object(_index, "listing_fields", purging):
        list(store.list("t/"))
    assert purged[0] > 0 and indexes(store) == []
    assert truth(store) == []
