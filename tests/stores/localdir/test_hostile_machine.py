"""The embedded default against whoever else can put files on the machine.

- the local store never follows a symbolic link below its root (reads, writes, listings,
  delete, copy, purge, the lock file), and refuses a root others may write to;
- the master key file and the data directory are refused, not merely warned about, when
  another user owns them or may read or write them; a link at the key is refused;
- ``get(max_bytes=...)`` refuses before reading, and listings read headers only (format 2
  records the body's size and MD5); format-1 files still read (a stored fixture);
- planted metadata (nesting bombs, non-objects) is "corrupt": ``get``/``head`` raise
  ``StorageError``, ``list`` skips it;
- on a case-insensitive file system, keys differing in case or normalization never share a
  file (forced probe; the probe itself is checked honestly on this machine);
- a hypothesis fuzz of planted trees and random operations: only s3memory errors, listings
  never raise, and nothing outside the root is read, written or deleted.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import hashlib
import json
import os
import re
import stat
import struct
import tempfile
import threading
import unicodedata
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from click.testing import CliRunner
from helpers import examples
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from s3memory import (
    ConfigurationError,
    LocalDirStore,
    ObjectTooLargeError,
    PreconditionFailedError,
    S3MemoryError,
    Settings,
    StorageError,
)
from s3memory._config import load_or_create_master_key
from s3memory.stores import ObjectVersion
from s3memory.stores._localdir import names as _localnames
from s3memory.stores._localdir import store as _localstore

META = {"x-amz-c": "115", "x-amz-w": "02"}
BODY = b"\x00body\xff"
ETAG = '"b7102b8490a8da9161d2149dfe88295f"'  # md5 of BODY, as S3 would say

# A format-1 object file exactly as s3memory wrote it before format 2 (captured from that
# code: magic, big-endian metadata length, compact metadata JSON, body).
V1_FILE = b'S3MO\x01\x00\x00\x00 {"x-amz-c":"115","x-amz-w":"02"}\x00body\xff'


def snapshot(top: Path) -> dict[str, object]:
    """Every entry under ``top`` without following links: type, mode, content or target."""
    seen: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            relative = str(path.relative_to(top))
            if stat.S_ISLNK(st.st_mode):
                seen[relative] = ("link", os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                seen[relative] = ("file", stat.S_IMODE(st.st_mode), path.read_bytes())
            else:
                seen[relative] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode))
    return seen


def object_file(body: bytes, metadata: dict[str, str] | None = None) -> bytes:
    """A well-formed format-2 object file."""
    meta = json.dumps(metadata or {}, separators=(",", ":")).encode()
    digest = hashlib.md5(body).digest()
    return struct.pack(">5sIQ16s", b"S3MO\x02", len(meta), len(body), digest) + meta + body


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside the store that planted links point at; it must never change."""
    top = tmp_path / "outside"
    (top / "dir" / "sub").mkdir(parents=True)
    (top / "obj").write_bytes(object_file(b"OUTSIDE-BODY", META))
    (top / "dir" / "obj").write_bytes(object_file(b"OUTSIDE-BODY", META))
    (top / "dir" / "sub" / "obj").write_bytes(object_file(b"OUTSIDE-BODY", META))
    return top


@pytest.fixture
def store(tmp_path: Path) -> LocalDirStore:
    return LocalDirStore(tmp_path / "store")


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


def test_a_linked_tenant_directory_is_never_followed(store: LocalDirStore, outside: Path) -> None:
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


def test_a_linked_file_is_not_an_object(store: LocalDirStore, outside: Path) -> None:
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


def test_a_swapped_in_link_is_not_followed(store: LocalDirStore, outside: Path) -> None:
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


# --- bounded reads, headers-only listings, formats 1 and 2 ---------------------------------


def test_format_2_header_records_size_and_md5(store: LocalDirStore) -> None:
    etag = store.put("alice/memories/notes.md", BODY, META)
    assert etag == ETAG
    raw = (store.root / "alice" / "memories" / "notes.md").read_bytes()
    assert raw == object_file(BODY, META)
    magic, _, size, digest = struct.unpack(">5sIQ16s", raw[:33])
    assert (magic, size, '"' + digest.hex() + '"') == (b"S3MO\x02", len(BODY), ETAG)


def test_format_1_files_still_read(store: LocalDirStore) -> None:
    path = store.root / "alice" / "memories" / "notes.md"
    path.parent.mkdir(parents=True, mode=0o700)
    path.write_bytes(V1_FILE)
    got = store.get("alice/memories/notes.md")
    assert got is not None and (got.body, got.etag, dict(got.metadata)) == (BODY, ETAG, META)
    head = store.head("alice/memories/notes.md")
    assert head is not None and (head.size, head.etag, dict(head.metadata)) == (len(BODY), ETAG, META)
    (listed,) = store.list("alice/")
    assert (listed.key, listed.size, listed.etag) == ("alice/memories/notes.md", len(BODY), ETAG)
    with pytest.raises(ObjectTooLargeError):
        store.get("alice/memories/notes.md", max_bytes=len(BODY) - 1)
    # Preconditions compare the same ETag, and a copy keeps it (written as format 2).
    assert store.copy("alice/memories/notes.md", "alice/memories/copy", metadata={}, if_match=ETAG) == ETAG
    assert (store.root / "alice" / "memories" / "copy").read_bytes() == object_file(BODY)
    with pytest.raises(PreconditionFailedError):
        store.delete(["alice/memories/notes.md"], if_match={"alice/memories/notes.md": '"' + "0" * 32 + '"'})
    assert store.put("alice/memories/notes.md", b"new", {}, if_match=ETAG) != ETAG
    assert path.read_bytes()[:5] == b"S3MO\x02"


def test_max_bytes_refuses_before_reading(store: LocalDirStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.put("t/small", b"x" * 100, {})
    got = store.get("t/small", max_bytes=100)
    assert got is not None and got.body == b"x" * 100
    with pytest.raises(ObjectTooLargeError) as info:
        store.get("t/small", max_bytes=99)
    assert info.value.size == 100 and str(info.value).startswith("Error: ")
    # A planted sparse file claiming 8 GiB: refused from the header, no body byte read.
    huge = 8 << 30
    path = store.root / "t" / "huge"
    with open(path, "wb") as f:
        f.write(struct.pack(">5sIQ16s", b"S3MO\x02", 2, huge, b"\x00" * 16) + b"{}")
        f.truncate(33 + 2 + huge)
    read: list[int] = []
    real_pread = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, offset: read.append(n) or real_pread(fd, n, offset))
    with pytest.raises(ObjectTooLargeError) as info:
        store.get("t/huge", max_bytes=1 << 20)
    assert info.value.size == huge and sum(read) <= 64
    assert [(i.key, i.size) for i in store.list("t/")] == [("t/huge", huge), ("t/small", 100)]


def test_listings_and_head_read_headers_only(store: LocalDirStore, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(20):
        store.put(f"t/memories/{i:02d}", os.urandom(100_000), META)
    read: list[int] = []
    real_pread, real_read = os.pread, os.read
    with (
        mock.patch.object(os, "pread", lambda fd, n, offset: read.append(n) or real_pread(fd, n, offset)),
        mock.patch.object(os, "read", lambda fd, n: read.append(n) or real_read(fd, n)),
        mock.patch("builtins.open", None),  # every read is counted: none goes through open()
    ):
        listed = list(store.list("t/"))
        head = store.head("t/memories/00")
    assert [i.size for i in listed] == [100_000] * 20 and head is not None and head.size == 100_000
    assert sum(read) <= 21 * (33 + 64)  # the fixed header and the metadata length each


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


# --- case-insensitive file systems ---------------------------------------------------------


def test_the_probe_reports_this_file_system_honestly(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert _localnames.probe_case_sensitive(fd) is True  # Linux, ext4/tmpfs/overlay: case-sensitive
    finally:
        os.close(fd)
    assert os.listdir(tmp_path) == []  # the probe cleans up after itself
    store = LocalDirStore(tmp_path / "store")
    store.put("Alice/x", b"A", {})
    assert os.listdir(store.root / "Alice") == ["x"] and not (store.root / ".keys").exists()


@pytest.fixture
def case_insensitive(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the probe answers on macOS and Windows defaults (CI runs on Linux)."""
    monkeypatch.setattr(_localstore, "probe_case_sensitive", lambda fd: False)


FOLDING_KEYS = [
    "Alice/memories/a",
    "alice/memories/a",
    "ALICE/memories/a",
    "t/caf\u00e9.md",  # NFC
    "t/cafe\u0301.md",  # NFD
    "t/CAF\u00c9.md",
    "t/stra\u00dfe",
    "t/STRASSE",
    "t/strasse",
    "t/\u212a",  # KELVIN SIGN folds to k
    "t/k",
    "t/K",
    "t/%41",
    "t/.s3memory/tenant-key",
]


def _fold(name: str) -> str:
    return unicodedata.normalize("NFD", unicodedata.normalize("NFD", name).casefold())


def test_keys_never_fold_together_on_a_case_insensitive_root(tmp_path: Path, case_insensitive: None) -> None:
    store = LocalDirStore(tmp_path / "store")
    assert (store.root / ".keys").read_text() == "escaped\n"
    for key in FOLDING_KEYS:
        store.put(key, key.encode(), {"k": key})
    for dirpath, dirnames, filenames in os.walk(store.root):
        names = [n for n in dirnames + filenames if Path(dirpath) != store.root or not n.startswith(".")]
        assert len({_fold(n) for n in names}) == len(names), names  # no two names fold together
        assert all(set(n) <= set("abcdefghijklmnopqrstuvwxyz0123456789._-%") for n in names), names
    for key in FOLDING_KEYS:
        got = store.get(key)
        assert got is not None and got.body == key.encode() and dict(got.metadata) == {"k": key}
    assert [i.key for i in store.list("")] == sorted(FOLDING_KEYS)
    assert [i.key for i in store.list("t/caf")] == sorted(["t/caf\u00e9.md", "t/cafe\u0301.md"])
    assert store.purge("Alice/") == 1
    assert store.get("alice/memories/a") is not None and store.get("ALICE/memories/a") is not None


def test_the_key_encoding_is_kept_when_reopened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_localstore, "probe_case_sensitive", lambda fd: False)
    LocalDirStore(tmp_path / "store").put("Alice/x", b"1", {})
    monkeypatch.setattr(_localstore, "probe_case_sensitive", lambda fd: True)  # moved to Linux
    store = LocalDirStore(tmp_path / "store")
    got = store.get("Alice/x")
    assert got is not None and got.body == b"1" and [i.key for i in store.list("")] == ["Alice/x"]
    (store.root / ".keys").write_text("rot13\n")
    with pytest.raises(StorageError, match="unknown key encoding"):
        LocalDirStore(tmp_path / "store")


def test_an_escaped_store_skips_names_it_never_writes(tmp_path: Path, case_insensitive: None) -> None:
    store = LocalDirStore(tmp_path / "store")
    store.put("t/a", b"1", {})
    for planted in ("B", "%2e%2e", "%41%4", "%C3%A9", "caf\u00e9", "%ff"):
        (store.root / "t" / planted).write_bytes(object_file(b"planted"))
    assert [i.key for i in store.list("")] == ["t/a"]


def test_a_plain_store_on_a_case_insensitive_root_refuses_folding_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store written with plain names (by an earlier version, say on macOS) keeps them,
    and refuses a key whose segment folds onto a different stored name."""
    LocalDirStore(tmp_path / "store").put("alice/memories/Notes.md", b"alice's", {})
    monkeypatch.setattr(_localstore, "probe_case_sensitive", lambda fd: False)
    store = LocalDirStore(tmp_path / "store")
    assert not (store.root / ".keys").exists()
    got = store.get("alice/memories/Notes.md")
    assert got is not None and got.body == b"alice's"
    for key in ("Alice/memories/Notes.md", "alice/memories/notes.md", "alice/MEMORIES/Notes.md"):
        assert store.get(key) is None and store.head(key) is None
        with pytest.raises(StorageError, match="only in case"):
            store.put(key, b"x", {})
    assert store.purge("ALICE/") == 0
    store.delete(["alice/memories/notes.md", "Alice/memories/Notes.md"])
    store.put("alice/memories/Other.md", b"fine", {})
    assert [i.key for i in store.list("")] == ["alice/memories/Notes.md", "alice/memories/Other.md"]


@settings(max_examples=examples(300), deadline=None)
@given(st.text(max_size=40))
def test_escaping_is_reversible_and_fold_stable(segment: str) -> None:
    try:
        segment.encode()
    except UnicodeEncodeError:
        return
    escaped = _localnames._escape(segment)
    assert _localnames._unescape(escaped) == segment
    assert escaped == _fold(escaped) == unicodedata.normalize("NFC", escaped) and escaped.isascii()


# --- the master key and the data directory -------------------------------------------------


def test_a_created_key_is_private_in_private_directories(tmp_path: Path) -> None:
    key = load_or_create_master_key(tmp_path / "a" / "b" / "master.key")
    assert len(key) == 32
    assert stat.S_IMODE((tmp_path / "a" / "b" / "master.key").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == stat.S_IMODE((tmp_path / "a" / "b").stat().st_mode) == 0o700
    assert load_or_create_master_key(tmp_path / "a" / "b" / "master.key") == key
    assert os.listdir(tmp_path / "a" / "b") == ["master.key"]


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o620, 0o602, 0o660], ids=oct)
def test_a_key_others_may_read_or_write_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "master.key"
    path.write_text(base64.b64encode(bytes(range(32))).decode())
    path.chmod(mode)
    with pytest.raises(ConfigurationError, match=r"readable or writable by other users; run: chmod 600"):
        load_or_create_master_key(path)


def test_a_key_owned_by_another_user_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "master.key"
    load_or_create_master_key(path)
    if os.geteuid() == 0:
        os.chown(path, 1, -1)  # planted by another user
    else:
        monkeypatch.setattr(os, "geteuid", lambda: path.stat().st_uid + 1)  # as another user sees it
    with pytest.raises(ConfigurationError, match=r"master key file .* is owned by another user"):
        load_or_create_master_key(path)


@pytest.mark.parametrize("target", ["dangling", "regular"])
def test_a_link_at_the_key_is_refused(tmp_path: Path, target: str) -> None:
    real = tmp_path / "real.key"
    if target == "regular":
        real.write_text(base64.b64encode(bytes(range(32))).decode())
        real.chmod(0o600)
    (tmp_path / "master.key").symlink_to(real)
    with pytest.raises(ConfigurationError, match="is a symbolic link"):
        load_or_create_master_key(tmp_path / "master.key")
    assert real.exists() == (target == "regular")  # nothing created through the link


def test_a_key_in_a_directory_others_may_write_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o777)  # pre-created world-writable, with a key planted in it
    (home / "master.key").write_text(base64.b64encode(bytes(range(32))).decode())
    (home / "master.key").chmod(0o600)
    with pytest.raises(ConfigurationError, match="writable by other users; run: chmod go-w"):
        load_or_create_master_key(home / "master.key")
    with pytest.raises(ConfigurationError, match=r"data directory .* writable by other users"):
        Settings(home=home).open()
    assert sorted(os.listdir(home)) == ["master.key"]  # no store was created in it


def test_a_data_home_not_ours_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setattr(os, "geteuid", lambda: home.stat().st_uid + 1)
    with pytest.raises(ConfigurationError, match=r"data directory .* owned by another user"):
        Settings(home=home).open()


def test_the_cli_refuses_an_unsafe_home_without_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from s3memory.cli import EXIT_CONFIGURATION, cli

    for name in list(os.environ):
        if name.startswith("S3MEMORY_"):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o777)
    monkeypatch.setenv("S3MEMORY_HOME", str(home))
    result = CliRunner().invoke(cli, ["view"])
    assert result.exit_code == EXIT_CONFIGURATION and "Traceback" not in result.output
    assert result.stderr.startswith("Error: the data directory") and "chmod go-w" in result.stderr


def test_the_embedded_default_creates_private_directories(tmp_path: Path) -> None:
    home = tmp_path / "xdg" / "s3memory"
    Settings(home=home).open().create("/memories/a.md", "x")
    for path in (tmp_path / "xdg", home, home / "store"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    assert stat.S_IMODE((home / "master.key").stat().st_mode) == 0o600


def test_concurrent_first_uses_agree_on_one_key(tmp_path: Path) -> None:
    path = tmp_path / "master.key"
    keys: list[bytes] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def first_use() -> None:
        start.wait()
        try:
            keys.append(load_or_create_master_key(path))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(keys) == 8 and len(set(keys)) == 1
    assert os.listdir(tmp_path) == ["master.key"]


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
@given(planted=plantings(), ops=operations, folding=st.booleans(), plant_first=st.booleans())
def test_fuzz_planted_trees_and_operations(
    planted: list[tuple[str, str, bytes]], ops: list[tuple[Any, ...]], folding: bool, plant_first: bool
) -> None:
    with (
        tempfile.TemporaryDirectory() as scratch,
        mock.patch.object(_localstore, "probe_case_sensitive", lambda fd: not folding),
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


# --- versions: the version area ------------------------------------------------------------

MAX_STAMP = 2**64 - 1


def kept_name(version: ObjectVersion) -> str:
    """The file name the version area gives ``version`` (the module docstring's scheme)."""
    stamp = int(version.version_id[:16], 16)
    rest = "m" if version.is_delete_marker else f"{version.version_id[16:]}-{version.size}"
    return f"{MAX_STAMP - stamp:016x}-{rest}"


def history(store: LocalDirStore, prefix: str = "t/") -> list[tuple[str, str, bool, bool]]:
    return [(v.key, v.version_id, v.is_latest, v.is_delete_marker) for v in store.list_versions(prefix)]


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


def test_get_head_and_list_never_reach_the_version_area(store: LocalDirStore) -> None:
    for i in range(3):
        store.put("t/a", b"%d" % i, {})
    store.put("t/b", b"b", {})
    store.delete(["t/b"])
    opened: list[str] = []
    real_open = os.open
    with mock.patch.object(os, "open", lambda path, *a, **k: opened.append(str(path)) or real_open(path, *a, **k)):
        got, head = store.get("t/a"), store.head("t/a")
        assert store.get("t/b") is None and store.head("t/b") is None
        listed = [i.key for i in store.list("")]
    assert got is not None and got.body == b"2" and head is not None and listed == ["t/a"]
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


def test_planted_things_in_the_version_area_are_never_followed(store: LocalDirStore, outside: Path) -> None:
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


def test_histories_never_fold_together_on_a_case_insensitive_root(tmp_path: Path, case_insensitive: None) -> None:
    store = LocalDirStore(tmp_path / "store")
    for key in ("Alice/x", "alice/x", "Alice/x"):
        store.put(key, key.encode(), {})
    store.delete(["alice/x"])
    assert [(v.key, v.is_delete_marker) for v in store.list_versions("")] == [
        ("Alice/x", False),
        ("Alice/x", False),
        ("alice/x", True),
        ("alice/x", False),
    ]
    assert sorted(os.listdir(store.root / ".versions")) == ["%41lice", "alice"]


def test_a_plain_store_on_a_case_insensitive_root_refuses_a_key_folding_onto_a_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalDirStore(tmp_path / "store")
    store.put("t/Notes", b"1", {})
    store.delete(["t/Notes"])  # only its history is left
    monkeypatch.setattr(_localstore, "probe_case_sensitive", lambda fd: False)
    store = LocalDirStore(tmp_path / "store")
    with pytest.raises(StorageError, match="only in case"):
        store.put("t/notes", b"2", {})
    assert [(v.key, v.is_delete_marker) for v in store.list_versions("t/")] == [("t/Notes", True), ("t/Notes", False)]
    store.put("t/Other", b"fine", {})
