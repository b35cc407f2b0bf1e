"""Beyond the six commands, for agent frameworks' file tools (deepagents' ``write_file`` and
``edit_file(replace_all=True)``): ``write_text``, create or overwrite; ``replace_all``, every
occurrence in one compare-and-swap edit."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from typing import Any

import pytest
from helpers import MASTER_KEY

from s3memory import (
    EditError,
    EncryptedMemory,
    InMemoryStore,
    InvalidCommandError,
    InvalidPathError,
    KeyCache,
    MemoryAdmin,
    Mount,
    NotADirectoryConflict,
    NotExists,
    PathExistsError,
    PathNotFoundError,
    PreconditionFailedError,
    ReadOnlyMountError,
    SensitiveDataError,
    Sha256,
    open_memory,
)
from s3memory._paths import parse_path
from s3memory.stores import DelegatingStore

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


# -- write_text ------------------------------------------------------------------------------
def test_write_text_creates_then_overwrites(memory: EncryptedMemory) -> None:
    assert memory.write_text("/memories/dir/a.md", "one\n") == "File created successfully at: /memories/dir/a.md"
    assert memory.write_text("/memories/dir/a.md", "two\n") == "The file /memories/dir/a.md has been overwritten."
    assert memory.read_text("/memories/dir/a.md") == "two\n"
    assert [e.path for e in memory.list_files()] == ["/memories/dir/a.md"]


def test_write_text_keeps_history() -> None:
    memory = open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())
    memory.write_text("/memories/a.md", "one")
    memory.write_text("/memories/a.md", "two")
    history = memory.history("/memories/a.md")
    assert [e.operation for e in history] == ["modified", "created"]
    assert memory.read_version("/memories/a.md", history[1].version) == "one"


def test_write_text_refusals_write_nothing(memory: EncryptedMemory) -> None:
    memory.create("/memories/dir/a.md", "x")
    for path in ("/memories/dir", "/memories"):
        with pytest.raises(PathExistsError) as caught:
            memory.write_text(path, "y")
        assert str(caught.value) == f"Error: Cannot write {path}: it is a directory"
    with pytest.raises(NotADirectoryConflict):
        memory.write_text("/memories/dir/a.md/b.md", "y")
    with pytest.raises(SensitiveDataError):
        memory.write_text("/memories/dir/a.md", f"key {AWS_KEY_ID}\n")
    with pytest.raises(SensitiveDataError):
        memory.write_text("/memories/dir/new.md", f"key {AWS_KEY_ID}\n")
    with pytest.raises(InvalidPathError):
        memory.write_text("/memories/../etc/passwd", "y")
    with pytest.raises(InvalidCommandError, match="must be a string"):
        memory.write_text("/memories/dir/a.md", b"y")
    assert [(e.path, memory.read_text(e.path)) for e in memory.list_files()] == [("/memories/dir/a.md", "x")]


def test_write_text_when_the_file_vanishes_between_create_and_edit() -> None:
    """The create finds a file; before the edit reads it, it is deleted: the write creates it."""
    memory = open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())
    memory.create("/memories/a.md", "old")
    create = memory.create
    calls = []

    def create_then_lose_the_race(path: str, file_text: object) -> str:
        calls.append(path)
        try:
            return create(path, file_text)
        finally:
            if len(calls) == 1:
                memory.delete(path)

    memory.create = create_then_lose_the_race  # type: ignore[method-assign]
    assert memory.write_text("/memories/a.md", "new") == "File created successfully at: /memories/a.md"
    assert calls == ["/memories/a.md", "/memories/a.md"]
    assert memory.read_text("/memories/a.md") == "new"


def test_concurrent_writers_each_land_whole() -> None:
    memory = open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())
    barrier = threading.Barrier(4)
    texts = [f"writer {i}\n" for i in range(4)]

    def write(text: str) -> None:
        barrier.wait()
        memory.write_text("/memories/a.md", text)

    threads = [threading.Thread(target=write, args=(text,)) for text in texts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert memory.read_text("/memories/a.md") in texts
    assert sorted(e.operation for e in memory.history("/memories/a.md")) == ["created"] + ["modified"] * 3


def test_write_text_through_mounts() -> None:
    store = InMemoryStore()
    writer = open_memory(user_id="org", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    writer.create("/memories/style.md", "tabs\n")
    tree = open_memory(
        user_id="alice",
        store=store,
        master_key=MASTER_KEY,
        key_cache=KeyCache(),
        mounts=[Mount("org", "org"), Mount("team", "team", access="read_write")],
    )
    with pytest.raises(ReadOnlyMountError, match="mounted read-only"):
        tree.write_text("/memories/org/style.md", "spaces\n")
    with pytest.raises(PathExistsError, match="it is a directory"):
        tree.write_text("/memories/team", "x")
    assert tree.write_text("/memories/team/plan.md", "ship\n").startswith("File created")
    assert tree.write_text("/memories/mine.md", "a\n").startswith("File created")
    assert writer.read_text("/memories/style.md") == "tabs\n"
    reader = open_memory(user_id="team", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    assert reader.read_text("/memories/plan.md") == "ship\n"


def test_write_text_screens_a_new_file_once() -> None:
    """(An overwrite is screened by the create that finds the file too, then as an edit.)"""
    seen: list[str] = []

    def screen(text: str) -> str:
        seen.append(text)
        return text

    memory = open_memory(
        user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache(), sensitive_data=screen
    )
    memory.write_text("/memories/a.md", "one")
    assert seen == ["a.md", "one"]  # the name the write introduces, then the text, once
    memory.write_text("/memories/a.md", "two")
    assert seen[2:] == ["a.md", "two", "two"] and memory.read_text("/memories/a.md") == "two"


# -- a conditional write whose answer was lost ------------------------------------------------
class LostAnswer(DelegatingStore):
    """The next conditional PUT of ``armed`` (an object key) is applied, then answered 412:
    what a client sees when S3's answer is lost (a connection reset) and it sends the
    request again."""

    armed: str | None = None

    def put(self, key: str, body: bytes, metadata: Mapping[str, str], **conditions: Any) -> str:
        result = super().put(key, body, metadata, **conditions)
        if key == self.armed and (conditions.get("if_match") is not None or conditions.get("if_none_match")):
            self.armed = None
            raise PreconditionFailedError("Error: the precondition failed")
        return result


def key_of(memory: EncryptedMemory, path: str) -> str:
    return memory.layout.key_for(parse_path(path))


@pytest.fixture
def lossy() -> tuple[LostAnswer, EncryptedMemory]:
    store = LostAnswer(InMemoryStore())
    return store, open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())


@pytest.mark.parametrize(
    ("command", "expected_text", "expected_answer"),
    [
        (lambda m: m.replace_all("/memories/a.md", "x", "xx"), "xx\n", 1),
        (lambda m: m.str_replace("/memories/a.md", "x", "xx"), "xx\n", None),
        (lambda m: m.insert("/memories/a.md", 0, "top"), "top\nx\n", "The file /memories/a.md has been edited."),
        (lambda m: m.write_text("/memories/a.md", "new\n"), "new\n", "The file /memories/a.md has been overwritten."),
    ],
    ids=["replace_all", "str_replace", "insert", "write_text"],
)
def test_an_edit_whose_answer_was_lost_is_applied_once(
    lossy: tuple[LostAnswer, EncryptedMemory], command: Any, expected_text: str, expected_answer: object
) -> None:
    store, memory = lossy
    memory.create("/memories/a.md", "x\n")
    store.armed = key_of(memory, "/memories/a.md")
    answer = command(memory)
    assert store.armed is None  # the 412 was given
    assert memory.read_text("/memories/a.md") == expected_text
    if expected_answer is not None:
        assert answer == expected_answer
    assert [e.operation for e in memory.history("/memories/a.md")] == ["modified", "created"]


def test_a_create_whose_answer_was_lost_succeeds(lossy: tuple[LostAnswer, EncryptedMemory]) -> None:
    store, memory = lossy
    memory.create("/memories/first.md", "the tenant key exists\n")
    store.armed = key_of(memory, "/memories/a.md")
    assert memory.create("/memories/a.md", "x\n") == "File created successfully at: /memories/a.md"
    assert store.armed is None
    with pytest.raises(PathExistsError):  # another's file: still refused
        memory.create("/memories/a.md", "y\n")
    assert memory.read_text("/memories/a.md") == "x\n"


@pytest.mark.parametrize("precondition", ["none", "sha256", "not-exists"])
def test_a_management_write_whose_answer_was_lost_counts_once(
    lossy: tuple[LostAnswer, EncryptedMemory], precondition: str
) -> None:
    store, memory = lossy
    admin = MemoryAdmin(memory)
    path = "/memories/a.md" if precondition != "not-exists" else "/memories/new.md"
    memory.create("/memories/a.md", "x\n")
    condition = {"none": None, "sha256": Sha256(hashlib.sha256(b"x\n").hexdigest()), "not-exists": NotExists()}
    store.armed = key_of(memory, path)
    info = admin.write(path, "y\n", precondition=condition[precondition])
    assert store.armed is None  # the 412 was given
    assert info.path == path and memory.read_text(path) == "y\n"
    expected = ["created"] if precondition == "not-exists" else ["modified", "created"]
    assert [e.operation for e in memory.history(path)] == expected
