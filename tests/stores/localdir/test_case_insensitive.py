"""The local store on a case-insensitive file system (macOS and Windows defaults; CI runs on
Linux, so the probe's answer is forced, and the probe itself is checked honestly here).

- keys differing in case or Unicode normalization never share a file, nor a history: an
  escaped store's names are lowercase ASCII, no two folding together, and the escaping is
  reversible and fold-stable (hypothesis);
- the key encoding is kept when the store is reopened on another file system, and an
  unknown one is refused; an escaped store skips names it never writes;
- a store written with plain names keeps them, and refuses a key that folds onto a stored
  name or onto a key's history.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import pytest
from helpers import examples
from helpers.localdir import object_file
from hypothesis import given, settings
from hypothesis import strategies as st

from s3memory import LocalDirStore, StorageError
from s3memory.stores._localdir import names as _localnames
from s3memory.stores._localdir import store as _localstore


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


# --- histories ------------------------------------------------------------------------------


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
