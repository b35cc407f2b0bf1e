"""Which syncs the local store makes, and what a power cut between them may leave.

- a new file under a unique key (``put_unique``: a history record) is left to the batch's
  closing ``syncfs`` where there is one (``batch``'s rule 4): a write round trip waits for
  two syncs, its object's file and the ``syncfs``; without ``syncfs``, or over a file
  already there, it is synced before its name as every write is (rule 1);
- what that leaves a power cut (not a process kill: the page cache survives one, which
  ``test_crash`` covers) is a record's name with no data or part of it, which breaks
  neither history nor listings, and a purge removes.
"""

from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

import pytest
from helpers.localdir import RecordedSyncs

from s3memory import KeyCache, LocalDirStore, open_memory
from s3memory._core.memory import EncryptedMemory
from s3memory.stores._localdir import batch as _localbatch
from s3memory.stores._localdir import writes as _localwrites
from s3memory.testing import TEST_MASTER_KEY

HAS_SYNCFS = _localbatch.syncfs_available()


def memory_on(store: LocalDirStore) -> EncryptedMemory:
    return open_memory(user_id="alice", store=store, master_key=TEST_MASTER_KEY, key_cache=KeyCache())


@pytest.mark.skipif(not HAS_SYNCFS, reason="syncfs is Linux's")
def test_a_unique_key_s_file_is_left_to_the_batch_s_syncfs(store: LocalDirStore) -> None:
    with RecordedSyncs() as syncs:
        store.put_unique("t/records/r1", b"", {})
    assert syncs.calls == ["syncfs"]
    with RecordedSyncs() as syncs, store.batch():
        store.put("t/a", b"a", {})
        store.put_unique("t/records/r2", b"", {})
    assert syncs.calls == ["file", "syncfs"]  # the object's file, then everything at once
    assert [i.key for i in store.list("t/")] == ["t/a", "t/records/r1", "t/records/r2"]


@pytest.mark.skipif(not HAS_SYNCFS, reason="syncfs is Linux's")
def test_a_write_command_waits_for_two_syncs(tmp_path: Path) -> None:
    """The object's file before its name (it replaces an acknowledged version), then one
    syncfs for the history record's data and every directory."""
    memory = memory_on(LocalDirStore(tmp_path / "s"))
    memory.create("/memories/a.md", "one\n")
    with RecordedSyncs() as syncs:
        memory.str_replace("/memories/a.md", "one", "two")
    assert syncs.calls == ["file", "syncfs"]
    with RecordedSyncs() as syncs:
        memory.create("/memories/b/c.md", "new\n")
    assert syncs.calls == ["file", "syncfs"]


def test_without_syncfs_a_unique_key_s_file_is_synced_before_its_name(store: LocalDirStore) -> None:
    with mock.patch.object(_localwrites, "syncfs_available", return_value=False):
        with RecordedSyncs() as syncs:
            store.put_unique("t/records/r1", b"", {})
    assert syncs.calls[0] == "file" and "file" not in syncs.calls[1:]


@pytest.mark.skipif(not HAS_SYNCFS, reason="syncfs is Linux's")
def test_a_unique_key_over_a_file_already_there_is_synced_as_any_write(store: LocalDirStore) -> None:
    """A name taken (by a planted file, or a key that was not unique after all): the file it
    replaces must not be lost to an empty one."""
    store.put("t/records/r1", b"there", {})
    with RecordedSyncs() as syncs:
        store.put_unique("t/records/r1", b"", {})
    assert syncs.calls == ["file", "syncfs"]
    got = store.get("t/records/r1")
    assert got is not None and got.body == b""


def test_a_file_left_unsynced_is_synced_by_name_if_the_syncfs_fails_to_come(store: LocalDirStore) -> None:
    """Rule 4 counts on the batch's syncfs; were it not made after all, the file is synced
    before the directories, by its name."""
    if not HAS_SYNCFS:
        pytest.skip("no file is left unsynced without syncfs")
    calls: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        calls.append("file" if os.path.isfile(f"/proc/self/fd/{fd}") else "dir")
        real_fsync(fd)

    with mock.patch.object(os, "fsync", fsync), mock.patch.object(_localbatch, "_syncfs", return_value=False):
        store.put_unique("t/records/r1", b"", {})
    assert calls[0] == "file" and set(calls[1:]) == {"dir"}  # the file, then each directory changed


@pytest.mark.parametrize("kept", [0, 5, 34], ids=["empty", "short", "one-byte-short"])
def test_a_record_a_power_cut_left_without_its_data_breaks_nothing(tmp_path: Path, kept: int) -> None:
    """A power cut after a record's name reached the disk and before its data (rule 4):
    its file is empty or short. History still tells every version (the records that
    remain, and the version itself for the one without), listings skip the file, later
    writes go on, and a purge removes it."""
    store = LocalDirStore(tmp_path / "s")
    memory = memory_on(store)
    memory.create("/memories/a.md", "one\n")
    memory.str_replace("/memories/a.md", "one", "two")
    history_dir = store.root / "alice" / ".s3memory" / "history"
    records = sorted((p for p in history_dir.rglob("*") if p.is_file()), key=lambda p: p.stat().st_mtime_ns)
    assert len(records) == 2
    newest = records[-1]
    newest.write_bytes(newest.read_bytes()[:kept])

    reader = memory_on(LocalDirStore(tmp_path / "s"))
    entries = reader.history("/memories/a.md")
    assert [(e.operation, e.current) for e in entries] == [("modified", True), ("created", False)]
    assert entries[1].verified and entries[1].actor is not None  # its record is whole
    assert "two" in reader.view("/memories/a.md") and "a.md" in reader.view("/memories")
    assert [e.path for e in reader.changes()] == ["/memories/a.md", "/memories/a.md"]
    assert all(info.key != str(newest.relative_to(store.root)) for info in store.list("alice/"))
    reader.str_replace("/memories/a.md", "two", "three")
    assert [e.operation for e in reader.history("/memories/a.md")][:2] == ["modified", "modified"]
    assert store.purge("alice/") > 0
    assert not [p for p in (store.root / "alice").rglob("*") if p.is_file()]
