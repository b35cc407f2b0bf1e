"""The embedded default's local store against whoever else can put files on the machine.

- the local store never follows a symbolic link below its root (reads, writes, listings,
  delete, copy, purge, the lock file and the scratch directory), even one swapped in between
  its checks and its use, whichever way it opens a directory several names down (in one
  ``openat2`` call, or name by name: ``resolving``); it refuses a root others may write to
  or another user owns, or one loosened or replaced after opening, creates its directories
  private, and refuses keys no file can hold;
- a planted FIFO is no object, and reading it never hangs;
- planted metadata (nesting bombs, non-objects) and malformed files are "corrupt": ``get`` and
  ``head`` raise ``StorageError``, ``list`` skips them (a format-2 file whose fixed header
  holds is listed, as it reads headers only), and a memory's listing is not broken by them;
- a hypothesis fuzz of planted trees and random operations: only s3memory errors, listings
  never raise, and nothing outside the root is read, written or deleted.

Beside this module: the object file formats and bounded reads (``test_file_format.py``),
case-insensitive file systems (``test_case_insensitive.py``) and the version area
(``test_versions.py``); the master key file and the data directory are in
``tests/crypto/test_key_file.py``.
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from helpers import examples
from helpers.localdir import object_file, snapshot
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from s3memory import (
    ConfigurationError,
    LocalDirStore,
    PreconditionFailedError,
    S3MemoryError,
    StorageError,
)
from s3memory.stores._localdir import files as _localfiles
from s3memory.stores._localdir import store as _localstore

# --- the root, and links below it --------------------------------------------------------


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777, 0o1777], ids=oct)
def test_a_root_others_may_write_to_is_refused(tmp_path: Path, mode: int) -> None:
    root = tmp_path / "store"
    root.mkdir()
    root.chmod(mode)
    with pytest.raises(ConfigurationError, match="writable by other users; run: chmod go-w"):
        LocalDirStore(root)
    assert sorted(os.listdir(root)) == []  # refused before anything was written


def test_a_root_owned_by_another_user_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "store"
    root.mkdir(mode=0o700)
    monkeypatch.setattr(os, "geteuid", lambda: os.stat(root).st_uid + 1)  # as another user sees it
    with pytest.raises(ConfigurationError, match="owned by another user"):
        LocalDirStore(root)


def test_a_root_loosened_or_replaced_after_opening_is_refused(tmp_path: Path) -> None:
    store = LocalDirStore(tmp_path / "store")
    store.put("t/a", b"x", {})
    (tmp_path / "store").chmod(0o777)
    with pytest.raises(StorageError, match="writable by other users"):
        store.get("t/a")
    (tmp_path / "store").chmod(0o700)
    (tmp_path / "store").rename(tmp_path / "old")
    (tmp_path / "store").mkdir(mode=0o700)
    with pytest.raises(StorageError, match="was replaced"):
        store.put("t/b", b"x", {})
    assert not (tmp_path / "store" / "t").exists()


@pytest.mark.parametrize("folding", [False, True])
def test_keys_no_file_can_hold_are_refused_and_listed_as_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, folding: bool
) -> None:
    monkeypatch.setattr(_localstore, "probe_case_sensitive", lambda fd: not folding)
    store = LocalDirStore(tmp_path / "store")
    store.put("t/a", b"x", {})
    for key in ["t/\udcff", "t/" + "x" * 1100, ".keys", "t/a/", "t\x00"]:
        with pytest.raises(StorageError) as info:
            store.put(key, b"x", {})
        assert "\n" not in str(info.value)
        with pytest.raises(StorageError):
            store.get(key)
        assert list(store.list(key)) == []
    assert [i.key for i in store.list("")] == ["t/a"]


def test_created_directories_are_private(tmp_path: Path) -> None:
    LocalDirStore(tmp_path / "a" / "b" / "store")
    for path in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "store"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path


def test_a_linked_tenant_directory_is_never_followed(store: LocalDirStore, outside: Path, resolving: str) -> None:
    before = snapshot(outside)
    (store.root / "alice").symlink_to(outside / "dir")
    store.put("bob/memories/a", b"bob's", {})
    assert store.purge("alice/") == 0  # erase-user of the linked tenant
    assert store.get("alice/obj") is None and store.head("alice/obj") is None
    assert list(store.list("alice/")) == [] and [i.key for i in store.list("")] == ["bob/memories/a"]
    with pytest.raises(StorageError, match="in the way"):
        store.put("alice/memories/new", b"x", {})
    with pytest.raises(StorageError, match="in the way"):
        store.copy("bob/memories/a", "alice/obj", metadata={})
    store.delete(["alice/obj", "alice/sub/obj"])
    with pytest.raises(PreconditionFailedError):
        store.copy("alice/obj", "bob/memories/b", metadata={})
    assert snapshot(outside) == before


def test_a_linked_file_is_not_an_object(store: LocalDirStore, outside: Path, resolving: str) -> None:
    before = snapshot(outside)
    store.put("t/memories/real", b"real", {})
    (store.root / "t" / "memories" / "link").symlink_to(outside / "obj")
    (store.root / "t" / "memories" / "dangling").symlink_to(outside / "nothing")
    (store.root / "t" / "memories" / "linkdir").symlink_to(outside / "dir")
    for name in ("link", "dangling", "linkdir/obj"):
        assert store.get(f"t/memories/{name}") is None and store.head(f"t/memories/{name}") is None
    assert [i.key for i in store.list("t/")] == ["t/memories/real"]
    with pytest.raises(PreconditionFailedError):
        store.copy("t/memories/link", "t/memories/copy", metadata={})
    store.delete(["t/memories/link", "t/memories/dangling", "t/memories/linkdir/obj"])
    # A write replaces the link itself (rename acts on the link), never its target.
    store.put("t/memories/dangling", b"mine", {}, if_none_match=True)
    assert not (outside / "nothing").exists()
    assert store.purge("t/") == 2  # the two files; the remaining links are left, not followed
    assert snapshot(outside) == before


def test_a_swapped_in_link_is_not_followed(store: LocalDirStore, outside: Path, resolving: str) -> None:
    """The race the check-then-use code lost: a directory on the way is replaced by a link
    between the store's checks and its use. Every name is opened from its parent's
    descriptor with O_NOFOLLOW, so the swap is refused, not followed."""
    before = snapshot(outside)
    store.put("t/memories/a", b"x", {})
    real_open = os.open

    def swapping_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        memories = store.root / "t" / "memories"
        if not memories.is_symlink():  # on the first open of the put, after its key checks
            (memories / "a").unlink()
            memories.rmdir()
            memories.symlink_to(outside / "dir")
        return real_open(path, flags, *args, **kwargs)

    with mock.patch.object(os, "open", swapping_open), pytest.raises(StorageError):
        store.put("t/memories/obj", b"overwritten", {})
    assert snapshot(outside) == before


def test_a_planted_lock_or_scratch_link_is_refused(tmp_path: Path, outside: Path) -> None:
    before = snapshot(outside)
    store = LocalDirStore(tmp_path / "store")
    (store.root / ".lock").symlink_to(outside / "lockfile")
    with pytest.raises(StorageError):
        store.put("t/a", b"x", {})
    (store.root / ".lock").unlink()
    (store.root / ".tmp").rmdir()
    (store.root / ".tmp").symlink_to(outside / "dir")
    with pytest.raises(StorageError):
        store.put("t/a", b"x", {})
    with pytest.raises(StorageError):
        LocalDirStore(tmp_path / "store")
    assert snapshot(outside) == before and not (outside / "lockfile").exists()


def test_a_planted_fifo_is_not_an_object_and_does_not_hang(store: LocalDirStore) -> None:
    store.put("t/a", b"x", {})
    os.mkfifo(store.root / "t" / "fifo")
    assert store.get("t/fifo") is None and store.head("t/fifo") is None
    assert [i.key for i in store.list("t/")] == ["t/a"]
    store.put("t/fifo", b"replaced", {})
    got = store.get("t/fifo")
    assert got is not None and got.body == b"replaced"


# --- planted metadata and malformed files are corrupt ---------------------------------------

PLANTED_METADATA = [
    b"[" * 100_000 + b"]" * 100_000,  # a nesting bomb (capped to 64 KiB of metadata below)
    b'{"a":' * 20_000 + b"1" + b"}" * 20_000,
    b'"x"',
    b'{"a": 1}',
    b'{"a": ["b"]}',
    b"[]",
    b"null",
    b"\xff\xfe",
    b"",
    b'{"a":"b"',
]


def _v1(meta: bytes, body: bytes = b"body") -> bytes:
    return struct.pack(">5sI", b"S3MO\x01", len(meta)) + meta + body


def _v2(meta: bytes, body: bytes = b"body") -> bytes:
    return struct.pack(">5sIQ16s", b"S3MO\x02", len(meta), len(body), hashlib.md5(body).digest()) + meta + body


PLANTED_FILES = [
    *[pytest.param(_v1(m), id=f"v1-meta{i}") for i, m in enumerate(PLANTED_METADATA)],
    *[pytest.param(_v2(m), id=f"v2-meta{i}") for i, m in enumerate(PLANTED_METADATA)],
    pytest.param(b"", id="empty"),
    pytest.param(b"S3MO", id="short-magic"),
    pytest.param(b"S3MO\x03" + b"\x00" * 40, id="unknown-version"),
    pytest.param(b"S3MO\x01\xff\xff\xff\xff{}", id="v1-huge-metadata-length"),
    pytest.param(struct.pack(">5sIQ16s", b"S3MO\x02", 2**32 - 1, 4, b"\x00" * 16) + b"{}body", id="v2-huge-meta"),
    pytest.param(struct.pack(">5sIQ16s", b"S3MO\x02", 2, 2**64 - 1, b"\x00" * 16) + b"{}body", id="v2-huge-body"),
    pytest.param(struct.pack(">5sIQ16s", b"S3MO\x02", 2, 5, b"\x00" * 16) + b"{}body", id="v2-truncated"),
    pytest.param(struct.pack(">5sIQ16s", b"S3MO\x02", 2, 3, b"\x00" * 16) + b"{}body", id="v2-trailing"),
    pytest.param(_v2(b"{" + b'"k":"' + b"v" * 70_000 + b'"}'), id="v2-metadata-over-64KiB"),
    pytest.param(b"not an object at all", id="foreign"),
]


def _fixed_header_holds(content: bytes) -> bool:
    """Whether a listing, which reads a format-2 file's fixed header only, takes ``content``
    for an object: the header's lengths add up to the file's (its metadata is not read)."""
    if content[:5] != b"S3MO\x02" or len(content) < 33:
        return False
    _, meta_len, size, _ = struct.unpack(">5sIQ16s", content[:33])
    return meta_len <= 64 * 1024 and 33 + meta_len + size == len(content)


@pytest.mark.parametrize("content", PLANTED_FILES)
def test_a_planted_file_is_corrupt_and_skipped_by_listings(store: LocalDirStore, content: bytes) -> None:
    """A file that is no object is skipped by listings; one whose format-2 header holds but
    whose metadata does not is listed (a listing never reads the metadata, as an S3 listing
    never does), and is corrupt for every read."""
    store.put("t/memories/a", b"ok", {})
    (store.root / "t" / "memories" / "planted").write_bytes(content)
    store.put("t/memories/z", b"ok", {})
    for read in (store.get, store.head):
        with pytest.raises(StorageError, match="is corrupt") as info:
            read("t/memories/planted")
        assert type(info.value) is StorageError and "\n" not in str(info.value)
    listed = ["t/memories/a", *(["t/memories/planted"] if _fixed_header_holds(content) else []), "t/memories/z"]
    assert [i.key for i in store.list("t/")] == listed
    assert [i.key for i in store.list("t/memories/p")] == listed[1:-1]
    with pytest.raises(StorageError):
        store.copy("t/memories/planted", "t/memories/c", metadata={})
    with pytest.raises(PreconditionFailedError):  # no ETag matches a corrupt file
        store.put("t/memories/planted", b"x", {}, if_match='"' + "0" * 32 + '"')
    with pytest.raises(PreconditionFailedError):
        store.put("t/memories/planted", b"x", {}, if_none_match=True)
    assert store.purge("t/") == 3  # a purge removes it with the rest


def test_planted_files_do_not_break_a_memory(tmp_path: Path) -> None:
    """ "Objects s3memory did not write do not break listings", on the local store."""
    from helpers import MASTER_KEY

    from s3memory import KeyCache, open_memory

    store = LocalDirStore(tmp_path / "store")
    memory = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    memory.create("/memories/ok.md", "fine\n")
    for i, meta in enumerate(PLANTED_METADATA):
        (store.root / "alice" / "memories" / f"bomb{i}.md").write_bytes(_v1(meta))
    listing = memory.view("/memories")
    assert "/memories/ok.md" in listing and "bomb" not in listing


# --- fuzz: planted trees and random operations ---------------------------------------------

# Bodies here are at most 80 bytes: a listing or read of this size came from outside.
OUTSIDE_BODY = b"OUTSIDE-" * 125 + b"!"
SEGMENTS = ["a", "A", "b", "memories", ".s3memory", "x.md", "caf\u00e9", "cafe\u0301", "%41", "%2e", "..", "."]
KEPT_NAMES = ["0" * 16 + "-m", "f" * 16 + "-" + "0" * 32 + "-3", "ffffffffffffff00-m"]  # the version area's names
ROOT_SPECIALS = [
    ".lock",
    ".tmp",
    ".keys",
    ".tmp/x",
    ".versions",
    ".versions/a",
    ".versions/a/x.md",
    *(f".versions/a/x.md/{name}" for name in KEPT_NAMES),
    *(f".versions/a/a/{name}" for name in KEPT_NAMES),
]


@st.composite
def planted_content(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["v1", "v2", "v2-random", "random", "valid"]))
    meta = draw(
        st.sampled_from([b"{}", b'{"a":"b"}', b"[" * 5000, b'"x"', b'{"a":1}', b"null", b"\xff", b"{"])
        | st.binary(max_size=40)
    )
    body = draw(st.binary(max_size=64))
    if kind == "v1":
        return _v1(meta, body)
    if kind == "v2":
        return _v2(meta, body)
    if kind == "v2-random":
        fields = (
            draw(st.integers(0, 2**32 - 1)),
            draw(st.integers(0, 2**64 - 1)),
            draw(st.binary(min_size=16, max_size=16)),
        )
        return struct.pack(">5sIQ16s", b"S3MO\x02", *fields) + meta + body
    if kind == "valid":
        return object_file(body, {"k": "v"})
    return draw(st.binary(max_size=80))


@st.composite
def plantings(draw: st.DrawFn) -> list[tuple[str, str, bytes]]:
    """``(relative path, kind, content)`` of things someone else put under the root."""
    segments = st.lists(st.sampled_from(SEGMENTS[:10]), min_size=1, max_size=3).map("/".join)
    paths = st.one_of(*[segments] * 7, st.sampled_from(ROOT_SPECIALS))  # specials: mostly fatal to opening
    kinds = st.sampled_from(["file", "dir", "link-file", "link-dir", "link-dangling", "link-up", "fifo"])
    return draw(st.lists(st.tuples(paths, kinds, planted_content()), max_size=8))


def _plant(root: Path, outside: Path, relative: str, kind: str, content: bytes) -> None:
    path = root / relative
    try:
        for parent in reversed(path.relative_to(root).parents[:-1]):
            directory = root / parent
            if directory.is_symlink() or (directory.exists() and not directory.is_dir()):
                return  # the planter's own writes never go through links either
            directory.mkdir(mode=0o700, exist_ok=True)
        if os.path.lexists(path):
            return
        if kind == "file":
            path.write_bytes(content)
        elif kind == "dir":
            path.mkdir(mode=0o700)
        elif kind == "link-file":
            path.symlink_to(outside / "obj")
        elif kind == "link-dir":
            path.symlink_to(outside / "dir")
        elif kind == "link-dangling":
            path.symlink_to(outside / "nothing")
        elif kind == "link-up":
            path.symlink_to(os.path.relpath(outside, path.parent))
        else:
            os.mkfifo(path)
    except OSError:  # a planted file is in the way of another planting
        pass


# Keys that meet the planted names and each other often, and anything at all.
KEY_POOL = ["a/x.md", "a/a", "A/x.md", "a/memories/x.md", "a/memories/a/b", "b", "a/.s3memory/k", "caf\u00e9/a"]
keys = st.one_of(
    st.sampled_from(KEY_POOL),
    st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=4).map("/".join),
    st.text(st.characters(codec="utf-8"), max_size=12),
)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("put"), keys, st.binary(max_size=32), st.booleans()),
        st.tuples(st.just("get"), keys, st.none() | st.integers(0, 40)),
        st.tuples(st.just("head"), keys),
        st.tuples(st.just("list"), st.sampled_from(["", "a", "a/", "A/", "a/memories/", "b/"]) | keys),
        st.tuples(st.just("copy"), keys, keys, st.booleans()),
        st.tuples(st.just("delete"), st.lists(keys, max_size=3)),
        st.tuples(st.just("purge"), st.sampled_from(["a/", "A/", "b/", "a/memories/", "%41/", "a/.s3memory/"])),
        st.tuples(st.just("reopen")),
        st.tuples(st.just("versions"), st.sampled_from(["", "a", "a/", "A/", "a/memories/", "b/"]) | keys),
        st.tuples(st.just("get_version"), keys, st.integers(0, 3)),
        st.tuples(st.just("delete_version"), keys, st.integers(0, 3)),
    ),
    max_size=12,
)


@pytest.mark.slow  # heavy hypothesis
@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(planted=plantings(), ops=operations, folding=st.booleans(), plant_first=st.booleans(), one_call=st.booleans())
def test_fuzz_planted_trees_and_operations(
    planted: list[tuple[str, str, bytes]], ops: list[tuple[Any, ...]], folding: bool, plant_first: bool, one_call: bool
) -> None:
    with (
        tempfile.TemporaryDirectory() as scratch,
        mock.patch.object(_localstore, "probe_case_sensitive", lambda fd: not folding),
        # Directories several names down opened in one call (where the kernel can), or name by name.
        mock.patch.object(_localfiles, "_openat2", _localfiles._openat2 if one_call else False),
    ):
        top = Path(scratch)
        outside = top / "outside"
        (outside / "dir" / "sub").mkdir(parents=True)
        for path in (outside / "obj", outside / "dir" / "obj", outside / "dir" / "sub" / "x.md"):
            path.write_bytes(object_file(OUTSIDE_BODY, {"k": "v"}))
        before = snapshot(outside)
        root = top / "store"
        store: LocalDirStore | None = None
        if not plant_first:
            store = LocalDirStore(root)
        root.mkdir(mode=0o700, exist_ok=True)
        for relative, kind, content in planted:
            _plant(root, outside, relative, kind, content)
        for op in [("reopen",), *ops] if plant_first else ops:
            if op[0] == "list" and store is not None:
                _check_listing(store, op[1])  # outside the try: a listing never raises
                continue
            try:
                store = _apply(store, root, op)
                event(f"{op[0]}: done")
            except S3MemoryError as error:
                event(f"{op[0]}: {type(error).__name__}")
                assert "\n" not in str(error), error
            except ValueError as error:  # check_purge_prefix's refusal
                assert op[0] == "purge", error
        assert snapshot(outside) == before


def _apply(store: LocalDirStore | None, root: Path, op: tuple[Any, ...]) -> LocalDirStore | None:
    if op[0] == "reopen" or store is None:
        return LocalDirStore(root)
    name = op[0]
    if name == "put":
        _, key, body, if_none_match = op
        etag = store.put(key, body, {"k": "v"}, if_none_match=if_none_match)
        got = store.get(key)
        assert got is not None and (got.body, got.etag) == (body, etag)
        assert key in [i.key for i in store.list(key)]
    elif name == "get":
        got = store.get(op[1], max_bytes=op[2])
        assert got is None or OUTSIDE_BODY not in got.body
    elif name == "head":
        store.head(op[1])
    elif name == "copy":
        _, source, destination, if_none_match = op
        store.copy(source, destination, metadata={}, if_none_match=if_none_match)
    elif name == "delete":
        store.delete(op[1])
    elif name == "versions":  # may fail as a write does (it takes the lock), never otherwise
        _check_versions(store, op[1])
    elif name in ("get_version", "delete_version"):
        _, key, n = op
        listed = [v for v in store.list_versions(key) if v.key == key]
        if listed:
            version = listed[n % len(listed)]
            if name == "get_version":
                got = store.get_version(key, version.version_id)
                assert (got is None) == version.is_delete_marker
                assert got is None or OUTSIDE_BODY not in got.body
            else:
                store.delete_version(key, version.version_id)
                assert version.version_id not in [v.version_id for v in store.list_versions(key) if v.key == key]
    elif name == "purge":
        store.purge(op[1])
    return store


def _check_versions(store: LocalDirStore, prefix: str) -> None:
    listed = list(store.list_versions(prefix))
    keys = [v.key for v in listed]
    assert keys == sorted(keys) and all(key.startswith(prefix) for key in keys)
    for key in set(keys):
        mine = [v for v in listed if v.key == key]
        assert [v.is_latest for v in mine] == [True] + [False] * (len(mine) - 1)
        assert [v.last_modified for v in mine] == sorted((v.last_modified for v in mine), reverse=True)
        assert len({v.version_id for v in mine}) == len(mine)
    assert all(v.size != len(OUTSIDE_BODY) for v in listed)


def _check_listing(store: LocalDirStore, prefix: str) -> None:
    listed = list(store.list(prefix))
    assert [i.key for i in listed] == sorted(i.key for i in listed)
    assert all(i.key.startswith(prefix) and i.size != len(OUTSIDE_BODY) for i in listed)
