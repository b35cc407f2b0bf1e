"""The local store's version area (``.versions/``), where replaced and deleted objects are kept.

- it holds the replaced files themselves (linked away, format unchanged, private), under
  names that sort newest first, with version ids that never change when a version is kept
  or restored;
- listing versions opens no kept file; ``get``, ``head`` and ``list`` never reach the area;
- a crash at any step of an overwrite, a delete or a version delete leaves the history before
  or after it, and the store goes on working; a reader sees the old object or the new one,
  never none;
- stamps keep increasing under a clock stuck in the past or file times kept to the second;
  without hard links a write fails cleanly (``versioned=False`` is the way out);
- a kept version tampered with is corrupt; planted files and links in the area, or a link at
  it, are never followed;
- files of a store written before versions (formats 1 and 2) become versions; an unversioned
  store keeps nothing and purges what was kept; a purge keeps the history of keys outside
  its prefix.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from helpers.localdir import BODY, ETAG, META, V1_FILE, RecordedOpens, object_file, snapshot

from s3memory import LocalDirStore, StorageError
from s3memory.stores import ObjectVersion

MAX_STAMP = 2**64 - 1


def kept_name(version: ObjectVersion) -> str:
    """The file name the version area gives ``version`` (the module docstring's scheme)."""
    stamp = int(version.version_id[:16], 16)
    rest = "m" if version.is_delete_marker else f"{version.version_id[16:]}-{version.size}"
    return f"{MAX_STAMP - stamp:016x}-{rest}"


def test_the_version_area_holds_the_replaced_files_themselves(store: LocalDirStore) -> None:
    first = store.put("t/a", b"one", {"n": "1"})
    current = store.root / "t" / "a"
    raw, inode = current.read_bytes(), current.stat().st_ino
    (before,) = store.list_versions("t/a")
    store.put("t/a", b"two", {})
    store.delete(["t/a"])
    assert not current.exists() and not (store.root / "t").exists()  # the tree is as without versions
    listed = list(store.list_versions("t/a"))
    marker, _, one = listed
    assert (one.version_id, one.etag, one.last_modified) == (before.version_id, first, before.last_modified)
    area = store.root / ".versions" / "t" / "a"
    assert sorted(os.listdir(area)) == [kept_name(v) for v in listed]  # names sort newest first
    kept = area / kept_name(one)
    assert kept.read_bytes() == raw and kept.stat().st_ino == inode  # the file itself, format unchanged
    assert kept.stat().st_mtime_ns == int(one.version_id[:16], 16)
    assert (area / kept_name(marker)).read_bytes() == b""
    for path in (store.root / ".versions", store.root / ".versions" / "t", area):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    for name in os.listdir(area):
        assert stat.S_IMODE((area / name).stat().st_mode) == 0o600, name
    assert os.listdir(store.root / ".tmp") == [] and list(store.list("")) == []
    assert sorted(os.listdir(store.root)) == [".lock", ".tmp", ".versions"]


def test_version_ids_stay_the_same_when_a_version_is_kept(store: LocalDirStore) -> None:
    store.put("t/a", b"v1", {})
    ids = [v.version_id for v in store.list_versions("t/")]
    for body in (b"v2", b"v3"):
        store.put("t/a", body, {})
        listed = [v.version_id for v in store.list_versions("t/")]
        assert listed[1:] == ids and len(set(listed)) == len(listed)
        ids = listed
    newest, middle, _ = store.list_versions("t/a")
    store.delete_version("t/a", newest.version_id)  # v2 is renamed back into place, id and time kept
    (restored, _) = store.list_versions("t/a")
    assert (restored.version_id, restored.last_modified, restored.is_latest) == (
        middle.version_id,
        middle.last_modified,
        True,
    )
    assert (store.root / "t" / "a").stat().st_mtime_ns == int(middle.version_id[:16], 16)


def test_listing_versions_opens_no_kept_version(store: LocalDirStore) -> None:
    for _ in range(5):
        store.put("t/a", os.urandom(10_000), META)
        store.put("t/b", os.urandom(10_000), META)
    store.delete(["t/b"])
    opened: list[str] = []
    read: list[int] = []
    real_open, real_pread, real_read = os.open, os.pread, os.read
    with (
        mock.patch.object(os, "open", lambda path, *a, **k: opened.append(str(path)) or real_open(path, *a, **k)),
        mock.patch.object(os, "pread", lambda fd, n, offset: read.append(n) or real_pread(fd, n, offset)),
        mock.patch.object(os, "read", lambda fd, n: read.append(n) or real_read(fd, n)),
        mock.patch("builtins.open", None),
    ):
        listed = list(store.list_versions("t/"))
    assert [(v.key, v.is_delete_marker) for v in listed] == [("t/a", False)] * 5 + [("t/b", True)] + [
        ("t/b", False)
    ] * 5
    assert not [name for name in opened if re.fullmatch(r"[0-9a-f]{16}-.*", name)]  # no kept file
    assert sum(read) <= 33 + 64  # the header of the one current file


def test_get_head_and_list_never_reach_the_version_area(store: LocalDirStore, resolving: str) -> None:
    for i in range(3):
        store.put("t/d/a", b"%d" % i, {})
    store.put("t/d/b", b"b", {})
    store.delete(["t/d/b"])
    with RecordedOpens() as recorded:
        got, head = store.get("t/d/a"), store.head("t/d/a")
        assert store.get("t/d/b") is None and store.head("t/d/b") is None
        listed = [i.key for i in store.list("")]
    opened = [name for path in recorded.names for name in path.split("/")]  # every name, whichever way
    assert got is not None and got.body == b"2" and head is not None and listed == ["t/d/a"]
    assert "d" in opened  # (the names opened are seen)
    assert ".versions" not in opened and not any(re.fullmatch(r"[0-9a-f]{16}-.*", n) for n in opened)


MUTATING = ("link", "rename", "replace", "unlink", "mkdir", "rmdir", "utime")


def crash_at(step: int) -> Any:
    """Patch the file system calls that change the tree, so that the ``step``-th raises EIO
    (as a crash there would stop the store); count them in ``.calls``."""
    stack = contextlib.ExitStack()
    stack.calls = 0  # type: ignore[attr-defined]
    for name in MUTATING:
        real = getattr(os, name)

        def failing(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            stack.calls += 1  # type: ignore[attr-defined]
            if stack.calls == step:  # type: ignore[attr-defined]
                raise OSError(errno.EIO, "injected crash")
            return _real(*args, **kwargs)

        stack.enter_context(mock.patch.object(os, name, failing))
    return stack


def bodies(store: LocalDirStore, key: str = "t/a") -> list[bytes | None]:
    """``key``'s history as bodies, newest first (None: a delete marker); one latest."""
    listed = list(store.list_versions(key))
    assert [v.is_latest for v in listed] == [True] + [False] * (len(listed) - 1)
    assert len({v.version_id for v in listed}) == len(listed)
    found = []
    for version in listed:
        got = store.get_version(key, version.version_id)
        assert (got is None) == version.is_delete_marker
        found.append(None if got is None else got.body)
    return found


SCENARIOS: list[tuple[str, list[str], Any, list[list[bytes | None]]]] = [
    # name, set-up (bodies, "-" a delete), the operation, the histories allowed after it
    ("overwrite", ["v1", "v2"], lambda s: s.put("t/a", b"v3", {}), [[b"v2", b"v1"], [b"v3", b"v2", b"v1"]]),
    ("delete", ["v1", "v2"], lambda s: s.delete(["t/a"]), [[b"v2", b"v1"], [None, b"v2", b"v1"]]),
    (
        "delete-current",
        ["v1", "v2"],
        lambda s: s.delete_version("t/a", next(s.list_versions("t/a")).version_id),
        [[b"v2", b"v1"], [b"v1"]],
    ),
    (
        "delete-marker",
        ["v1", "v2", "-"],
        lambda s: s.delete_version("t/a", next(s.list_versions("t/a")).version_id),
        [[None, b"v2", b"v1"], [b"v2", b"v1"]],
    ),
    (
        "delete-older",
        ["v1", "v2", "v3"],
        lambda s: s.delete_version("t/a", list(s.list_versions("t/a"))[1].version_id),
        [[b"v3", b"v2", b"v1"], [b"v3", b"v1"]],
    ),
    ("write-after-delete", ["v1", "-"], lambda s: s.put("t/a", b"v2", {}), [[None, b"v1"], [b"v2", None, b"v1"]]),
]


@pytest.mark.parametrize(("setup", "operation", "allowed"), [s[1:] for s in SCENARIOS], ids=[s[0] for s in SCENARIOS])
def test_a_crash_at_any_step_loses_nothing(tmp_path: Path, setup: list[str], operation: Any, allowed: Any) -> None:
    """Each change of the tree in turn fails, as a crash there would stop the store: the key's
    history is then the one before or the one after, never anything else (no version lost,
    none doubled, the current object readable), and the store goes on working."""
    step = 0
    while True:
        step += 1
        root = tmp_path / f"store{step}"
        store = LocalDirStore(root)
        for body in setup:
            store.delete(["t/a"]) if body == "-" else store.put("t/a", body.encode(), {})
        with crash_at(step) as crash:
            try:
                operation(store)
                done = True
            except StorageError:
                done = False
        reopened = LocalDirStore(root)
        after = bodies(reopened)
        assert after in allowed, (step, after)
        got = reopened.get("t/a")
        assert (None if got is None else got.body) == after[0]
        reopened.put("t/a", b"next", {})
        assert bodies(reopened) == [b"next", *after]
        if done and crash.calls < step:
            break  # the operation ran through without reaching this step
    assert step > 2


def test_a_reader_sees_the_old_object_or_the_new_one_while_it_is_replaced(store: LocalDirStore) -> None:
    """No lock for readers: at every change of the tree a put makes, the key reads as the old
    object or the new one, never as missing (the old file is linked away, not moved)."""
    store.put("t/a", b"old", {})
    seen: list[bytes | None] = []
    patches = contextlib.ExitStack()
    for name in MUTATING:
        real = getattr(os, name)

        def reading(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            result = _real(*args, **kwargs)
            got = store.get("t/a")
            seen.append(None if got is None else got.body)
            return result

        patches.enter_context(mock.patch.object(os, name, reading))
    with patches:
        store.put("t/a", b"new", {})
        store.put("t/a", b"newer", {})
    assert len(seen) >= 4 and set(seen) == {b"old", b"new", b"newer"}


def test_stamps_keep_increasing_whatever_the_clock_says(store: LocalDirStore, monkeypatch: pytest.MonkeyPatch) -> None:
    from s3memory.stores._localdir import format as _localformat

    monkeypatch.setattr(_localformat.time, "time_ns", lambda: 1_000_000_000)  # a clock stuck in 1970
    for i in range(4):
        store.put("t/a", b"same", {})
        if i == 1:
            store.delete(["t/a"])
    listed = list(store.list_versions("t/a"))
    stamps = [int(v.version_id[:16], 16) for v in listed]
    assert stamps == sorted(set(stamps), reverse=True) and len(stamps) == 5
    assert len({v.etag for v in listed if not v.is_delete_marker}) == 1  # same body, distinct versions


def test_a_file_system_with_coarse_times_still_orders_versions(
    store: LocalDirStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Times kept to the second (HFS+, some network file systems): each version a second later."""
    real_utime = os.utime

    def seconds(fd: Any, *, ns: tuple[int, int]) -> None:
        real_utime(fd, ns=tuple(t - t % 1_000_000_000 for t in ns))

    monkeypatch.setattr(os, "utime", seconds)
    for body in (b"1", b"2", b"3"):
        store.put("t/a", body, {})
    stamps = [int(v.version_id[:16], 16) for v in store.list_versions("t/a")]
    assert stamps == sorted(set(stamps), reverse=True) and all(s % 1_000_000_000 == 0 for s in stamps)
    assert bodies(store) == [b"3", b"2", b"1"]


def test_without_hard_links_an_overwrite_fails_cleanly(store: LocalDirStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.put("t/a", b"old", {})
    before = snapshot(store.root)

    def no_links(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    for change in (lambda: store.put("t/a", b"new", {}), lambda: store.delete(["t/a"])):
        with pytest.raises(StorageError, match="versioned=False") as info:
            change()
        assert "\n" not in str(info.value)
    after = snapshot(store.root)
    assert {k: v for k, v in after.items() if k != ".versions"} == before  # nothing changed, nothing left
    assert os.listdir(store.root / ".versions") == []
    got = store.get("t/a")
    assert got is not None and got.body == b"old"
    unversioned = LocalDirStore(store.root, versioned=False)
    unversioned.put("t/a", b"new", {})
    got = unversioned.get("t/a")
    assert got is not None and got.body == b"new"


def test_a_kept_version_that_was_tampered_with_is_corrupt(store: LocalDirStore) -> None:
    store.put("t/a", b"original", META)
    store.put("t/a", b"current", {})
    _, old = store.list_versions("t/a")
    kept = store.root / ".versions" / "t" / "a" / kept_name(old)
    kept.write_bytes(object_file(b"forged!!", META))  # same size, another body
    for read in (lambda: store.get_version("t/a", old.version_id), lambda: store.head_version("t/a", old.version_id)):
        with pytest.raises(StorageError, match="is corrupt"):
            read()
    kept.write_bytes(b"not an object")
    with pytest.raises(StorageError, match="is corrupt"):
        store.get_version("t/a", old.version_id)
    assert [v.version_id for v in store.list_versions("t/")][1] == old.version_id  # listings read names only


def test_planted_things_in_the_version_area_are_never_followed(
    store: LocalDirStore, outside: Path, resolving: str
) -> None:
    before = snapshot(outside)
    store.put("t/a", b"v1", {})
    store.put("t/a", b"v2", {})
    area = store.root / ".versions" / "t" / "a"
    (area / "notes.txt").write_bytes(b"planted")  # a name the store never gives
    (area / ("0" * 16 + "-m")).symlink_to(outside / "obj")  # a marker's name, as a link
    (area / ("1" * 16 + "-" + "a" * 32 + "-12")).symlink_to(outside / "obj")  # a version's name, as a link
    os.mkfifo(area / ("2" * 16 + "-m"))
    (store.root / ".versions" / "t" / "linked").symlink_to(outside / "dir")  # a key's directory, as a link
    (store.root / ".versions" / "u").symlink_to(outside / "dir")
    assert bodies(store) == [b"v2", b"v1"]
    assert [v.key for v in store.list_versions("")] == ["t/a", "t/a"]
    assert list(store.list_versions("t/linked")) == [] and list(store.list_versions("u/")) == []
    for version_id in ("f" * 16 + "m", "e" * 16 + "a" * 32, "0" * 16 + "m"):
        assert store.get_version("t/linked", version_id) is None and store.get_version("t/a", version_id) is None
    store.put("t/linked", b"x", {})
    with pytest.raises(StorageError, match="in the way"):  # a write that would keep a version under a link
        store.put("t/linked", b"y", {})
    store.delete_version("u/obj", "f" * 16 + "m")
    assert store.purge("t/") == 3  # t/a's two versions, t/linked; the planted file goes uncounted
    assert sorted(os.listdir(area)) == ["0" * 16 + "-m", "1" * 16 + "-" + "a" * 32 + "-12", "2" * 16 + "-m"]
    assert store.purge("u/") == 0
    assert snapshot(outside) == before


def test_a_link_at_the_version_area_is_refused_by_writers_and_read_as_no_history(
    store: LocalDirStore, outside: Path
) -> None:
    before = snapshot(outside)
    store.put("t/a", b"v1", {})
    (store.root / ".versions").symlink_to(outside / "dir")
    assert bodies(store) == [b"v1"]
    with pytest.raises(StorageError, match="not what the local store made there"):
        store.put("t/a", b"v2", {})
    got = store.get("t/a")
    assert got is not None and got.body == b"v1"
    assert store.purge("t/") == 1  # the object; nothing is followed
    assert snapshot(outside) == before


def test_a_store_written_before_versions_keeps_its_files_as_versions(store: LocalDirStore) -> None:
    """Format-1 and format-2 files as an earlier s3memory left them: they get ids from their
    times and digests, and an overwrite keeps them, readable as they were."""
    (store.root / "alice" / "memories").mkdir(parents=True, mode=0o700)
    (store.root / "alice" / "memories" / "v1.md").write_bytes(V1_FILE)
    (store.root / "alice" / "memories" / "v2.md").write_bytes(object_file(BODY, META))
    os.utime(store.root / "alice" / "memories" / "v1.md", ns=(10**18, 10**18))
    listed = list(store.list_versions("alice/"))
    assert [(v.key, v.etag, v.size, v.is_latest) for v in listed] == [
        ("alice/memories/v1.md", ETAG, len(BODY), True),
        ("alice/memories/v2.md", ETAG, len(BODY), True),
    ]
    assert listed[0].version_id == f"{10**18:016x}" + ETAG.strip('"')
    for version in listed:
        store.put(version.key, b"new", {})
        got = store.get_version(version.key, version.version_id)
        assert got is not None and (got.body, got.etag, dict(got.metadata)) == (BODY, ETAG, META)
        assert bodies(store, version.key) == [b"new", BODY]


def test_an_unversioned_store_keeps_nothing_and_purges_what_was_kept(tmp_path: Path) -> None:
    LocalDirStore(tmp_path / "store").put("t/a", b"v1", {})
    LocalDirStore(tmp_path / "store").put("t/a", b"v2", {})
    store = LocalDirStore(tmp_path / "store", versioned=False)
    assert store.keeps_versions() is False
    store.put("t/a", b"v3", {})
    assert [(v.version_id, v.is_latest) for v in store.list_versions("t/")] == [("null", True)]
    assert len(os.listdir(tmp_path / "store" / ".versions" / "t" / "a")) == 1  # v1, kept before
    assert store.purge("t/") == 2  # v3, and v1
    assert not (tmp_path / "store" / ".versions" / "t").exists()


def test_purge_keeps_the_history_of_keys_outside_the_prefix(store: LocalDirStore) -> None:
    store.put("t", b"t", {})
    store.delete(["t"])  # key "t" has history only, in .versions/t/, beside the directory of t/...
    store.put("t/a", b"1", {})
    store.put("t/a", b"2", {})
    store.put("tt/a", b"x", {})
    store.put("tt/a", b"y", {})
    assert store.purge("t/") == 2
    assert [(v.key, v.is_delete_marker) for v in store.list_versions("")] == [
        ("t", True),
        ("t", False),
        ("tt/a", False),
        ("tt/a", False),
    ]
    kept = sorted(kept_name(v) for v in store.list_versions("t") if v.key == "t")
    assert sorted(os.listdir(store.root / ".versions" / "t")) == kept  # and t/'s directory pruned
