"""``replace_all``: every occurrence in one compare-and-swap edit (beyond the six commands;
the deepagents adapter's ``edit_file(replace_all=True)``)."""

from __future__ import annotations

import threading

import pytest
from conftest import MASTER_KEY

from s3memory import (
    EditError,
    EncryptedMemory,
    InMemoryStore,
    InvalidCommandError,
    KeyCache,
    Mount,
    PathNotFoundError,
    ReadOnlyMountError,
    SensitiveDataError,
    open_memory,
)

AWS_KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"  # AWS's documented example


def test_replaces_every_occurrence_and_counts_them(memory: EncryptedMemory) -> None:
    memory.create("/memories/notes.md", "tea, tea and more tea\nno coffee\n")
    assert memory.replace_all("/memories/notes.md", "tea", "mate") == 3
    assert memory.read_text("/memories/notes.md") == "mate, mate and more mate\nno coffee\n"


def test_occurrences_do_not_overlap(memory: EncryptedMemory) -> None:
    memory.create("/memories/a.md", "aaaa")
    assert memory.replace_all("/memories/a.md", "aa", "b") == 2
    assert memory.read_text("/memories/a.md") == "bb"


def test_one_new_version_with_history() -> None:
    memory = open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())
    memory.create("/memories/a.md", "x y x")
    memory.replace_all("/memories/a.md", "x", "z")
    assert [e.operation for e in memory.history("/memories/a.md")] == ["modified", "created"]


def test_refusals_write_nothing(memory: EncryptedMemory) -> None:
    memory.create("/memories/a.md", "x y x")
    with pytest.raises(EditError) as caught:
        memory.replace_all("/memories/a.md", "q", "z")
    assert str(caught.value) == "No replacement was performed, old_str `q` did not appear verbatim in /memories/a.md."
    with pytest.raises(EditError, match="must not be empty"):
        memory.replace_all("/memories/a.md", "", "z")
    with pytest.raises(InvalidCommandError, match="must be strings"):
        memory.replace_all("/memories/a.md", "x", 3)
    with pytest.raises(SensitiveDataError):
        memory.replace_all("/memories/a.md", "y", AWS_KEY_ID)
    with pytest.raises(PathNotFoundError, match="does not exist"):
        memory.replace_all("/memories/b.md", "x", "z")
    assert memory.read_text("/memories/a.md") == "x y x"


def test_concurrent_calls_are_both_applied() -> None:
    """Compare-and-swap: two edits racing on one file both land, neither overwrites the other."""
    memory = open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())
    memory.create("/memories/a.md", "one two\n")
    barrier = threading.Barrier(2)

    def edit(old: str, new: str) -> None:
        barrier.wait()
        memory.replace_all("/memories/a.md", old, new)

    threads = [threading.Thread(target=edit, args=args) for args in (("one", "1"), ("two", "2"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert memory.read_text("/memories/a.md") == "1 2\n"


def test_a_read_only_mount_refuses_before_any_request() -> None:
    store = InMemoryStore()
    writer = open_memory(user_id="org", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    writer.create("/memories/style.md", "tabs\n")
    tree = open_memory(
        user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache(), mounts=[Mount("org", "org")]
    )
    with pytest.raises(ReadOnlyMountError, match="mounted read-only"):
        tree.replace_all("/memories/org/style.md", "tabs", "spaces")
    assert writer.read_text("/memories/style.md") == "tabs\n"
    tree.create("/memories/mine.md", "a a\n")
    assert tree.replace_all("/memories/mine.md", "a", "b") == 2
    assert tree.read_text("/memories/mine.md") == "b b\n"
