"""Isolation and limits through EncryptedMemory, on every backend flavour.

- every refused path is refused by every command, and nothing at all reaches the store;
- construction refuses bad user ids, master keys and conflicting options;
- size and path limits hold before anything is written (bytes, not characters);
- a file and a directory of one name never coexist; tenants never see each other;
- execute() answers malformed tool input with an ``Error: ...`` S3MemoryError, never a
  raw TypeError / KeyError / AttributeError.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import MASTER_KEY
from helpers.path_rules import BAD_CATEGORIES, REFUSED_PATHS

from s3memory import (
    ConfigurationError,
    EncryptedMemory,
    InMemoryStore,
    InvalidCommandError,
    InvalidPathError,
    KeyCache,
    LimitExceededError,
    Limits,
    LocalDirStore,
    NotADirectoryConflict,
    PathExistsError,
    PathNotFoundError,
    S3MemoryError,
    open_memory,
)

TENANT_KEY = "alice/.s3memory/tenant-key"


def _assert_error_message(error: BaseException) -> None:
    message = str(error)
    if isinstance(error, InvalidPathError) and message.startswith("Path "):
        # Outside /memories and ".." segments: the SDK reference's words, then the rule.
        assert message.startswith("Path must start with /memories, got: ") or (
            " would escape /memories directory: " in message
        ), message
    else:
        assert message.startswith("Error:"), message
    assert not any(unicodedata.category(ch) in BAD_CATEGORIES for ch in message), repr(message)


def _all_keys(memory: EncryptedMemory) -> list[str]:
    return sorted(info.key for info in memory.store.list(""))


def _snapshot(memory: EncryptedMemory) -> dict[str, str]:
    """Every key in the store with its ETag: equal snapshots mean nothing was written."""
    return {info.key: info.etag for info in memory.store.list("")}


def _memory_keys(memory: EncryptedMemory) -> list[str]:
    return sorted(info.key for info in memory.store.list(memory.layout.memory_prefix))


def _files_on_disk(directory: Path) -> Iterator[Path]:
    for dirpath, _dirnames, filenames in os.walk(directory):
        for name in filenames:
            yield Path(dirpath) / name


def _calls_for(bad: object) -> list[tuple[str, Callable[[EncryptedMemory], object]]]:
    ok = "/memories/ok.txt"
    calls: list[tuple[str, Callable[[EncryptedMemory], object]]] = [
        ("view", lambda m: m.view(bad)),  # type: ignore[arg-type]
        ("view range", lambda m: m.view(bad, [1, 2])),  # type: ignore[arg-type]
        ("create", lambda m: m.create(bad, "secret")),  # type: ignore[arg-type]
        ("str_replace", lambda m: m.str_replace(bad, "a", "b")),  # type: ignore[arg-type]
        ("insert", lambda m: m.insert(bad, 0, "x")),  # type: ignore[arg-type]
        ("delete", lambda m: m.delete(bad)),  # type: ignore[arg-type]
        ("rename old", lambda m: m.rename(bad, ok)),  # type: ignore[arg-type]
        ("rename new", lambda m: m.rename(ok, bad)),  # type: ignore[arg-type]
    ]
    if isinstance(bad, str):  # a None path through execute() is a missing parameter instead
        calls += [
            ("execute view", lambda m: m.execute({"command": "view", "path": bad})),
            ("execute create", lambda m: m.execute({"command": "create", "path": bad, "file_text": "x"})),
            ("execute delete", lambda m: m.execute({"command": "delete", "path": bad})),
            ("execute rename", lambda m: m.execute({"command": "rename", "old_path": bad, "new_path": ok})),
            ("execute rename new", lambda m: m.execute({"command": "rename", "old_path": ok, "new_path": bad})),
        ]
    return calls


# -- refused paths never reach the store ----------------------------------------------


def test_every_command_refuses_every_bad_path_and_writes_nothing(
    memory: EncryptedMemory, flavour: str, tmp_path: Path
) -> None:
    outside_before = sorted(os.listdir(tmp_path.parent))
    for bad in REFUSED_PATHS:
        for name, call in _calls_for(bad):
            with pytest.raises(InvalidPathError) as caught:
                call(memory)
            assert isinstance(caught.value, InvalidPathError), (name, bad)
            _assert_error_message(caught.value)

    keys = _all_keys(memory)
    assert set(keys) <= {TENANT_KEY}, keys
    assert memory.view("/memories").endswith("\n0B\t/memories")

    if flavour == "localdir":
        assert isinstance(memory.store, LocalDirStore)
        root = memory.store.root
        for file in _files_on_disk(tmp_path):
            assert file.is_relative_to(root), file
            relative = file.relative_to(root).as_posix()
            assert relative == ".lock" or relative == TENANT_KEY, relative
        assert sorted(os.listdir(tmp_path.parent)) == outside_before


def test_refused_paths_leave_existing_files_untouched(memory: EncryptedMemory) -> None:
    memory.create("/memories/ok.txt", "a\nb\n")
    memory.create("/memories/x", "kept\n")  # what "/memories/a/../../x" and friends would reach
    before = _snapshot(memory)
    for bad in REFUSED_PATHS:
        for _name, call in _calls_for(bad):
            with pytest.raises(InvalidPathError):
                call(memory)
    assert _snapshot(memory) == before
    assert memory.view("/memories/ok.txt") == "Here's the content of /memories/ok.txt with line numbers:\n" + (
        "     1\ta\n     2\tb\n     3\t"
    )
    assert memory.view("/memories/x").endswith("     1\tkept\n     2\t")


# -- tenants and sibling prefixes -----------------------------------------------------


def test_tenants_never_see_each_other(make_memory: Callable[..., EncryptedMemory], flavour: str) -> None:
    alice = make_memory(flavour, user_id="alice")
    alice2 = make_memory(flavour, user_id="alice2")
    ali = make_memory(flavour, user_id="ali")
    alice.create("/memories/secret.txt", "alice only\n")
    alice.create("/memories/dir/deep.txt", "deep\n")
    before = _snapshot(alice)
    for other in (alice2, ali):
        assert other.view("/memories").endswith("\n0B\t/memories")
        for path in ("/memories/secret.txt", "/memories/dir", "/memories/dir/deep.txt"):
            with pytest.raises(PathNotFoundError):
                other.view(path)
            with pytest.raises(PathNotFoundError):
                other.delete(path)
        with pytest.raises(PathNotFoundError):
            other.str_replace("/memories/secret.txt", "alice", "mallory")
        with pytest.raises(PathNotFoundError):
            other.rename("/memories/dir", "/memories/stolen")
    # alice2 may have created its own tenant key; alice's objects are unchanged.
    after = {k: v for k, v in _snapshot(alice).items() if k.startswith("alice/")}
    assert after == before
    alice2.create("/memories/secret.txt", "alice2's own\n")
    assert alice.view("/memories/secret.txt").endswith("     1\talice only\n     2\t")
    assert "alice2" not in alice.view("/memories")


def test_sibling_directories_sharing_a_prefix_are_separate(memory: EncryptedMemory) -> None:
    memory.create("/memories/d/x.txt", "in d\n")
    memory.create("/memories/d2/y.txt", "in d2\n")
    memory.create("/memories/d.txt", "file d.txt\n")
    memory.rename("/memories/d", "/memories/e")
    assert memory.view("/memories/d2/y.txt").endswith("in d2\n     2\t")
    assert memory.view("/memories/d.txt").endswith("file d.txt\n     2\t")
    assert memory.delete("/memories/e") == "Successfully deleted /memories/e"
    assert memory.view("/memories/d2/y.txt").endswith("in d2\n     2\t")
    assert memory.view("/memories/d.txt").endswith("file d.txt\n     2\t")
    assert _memory_keys(memory) == ["alice/memories/d.txt", "alice/memories/d2/y.txt"]


# -- construction ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "user_id",
    ["", "/", "a/b", ".", "..", ".hidden", "a\x00", "a\n", "\x1b", "é", "a" * 129, None, 5],
    ids=repr,
)
def test_bad_user_ids_are_refused(user_id: object) -> None:
    store = InMemoryStore()
    with pytest.raises(ConfigurationError) as caught:
        open_memory(user_id=user_id, store=store, master_key=MASTER_KEY)  # type: ignore[arg-type]
    assert "user_id" in str(caught.value)
    assert list(store.list("")) == []


@pytest.mark.parametrize(
    "master_key",
    [bytes(range(31)), bytes(range(33)), "k" * 32, bytes([7]) * 32, bytes(32), b""],
    ids=["31 bytes", "33 bytes", "str", "repeated byte", "zeros", "empty"],
)
def test_bad_master_keys_are_refused(master_key: object) -> None:
    store = InMemoryStore()
    with pytest.raises(ConfigurationError) as caught:
        open_memory(user_id="alice", store=store, master_key=master_key)  # type: ignore[arg-type]
    assert "master_key" in str(caught.value)
    assert list(store.list("")) == []


@pytest.mark.parametrize(
    ("options", "mentions"),
    [
        ({"master_key": MASTER_KEY, "kms_key_id": "alias/x"}, "master_key"),
        ({}, "master_key"),
        ({"key_mode": "kms"}, "kms_key_id"),
        ({"key_mode": "kms", "master_key": MASTER_KEY}, "kms_key_id"),
        ({"key_mode": "kms", "master_key": MASTER_KEY, "kms_key_id": "alias/x"}, "master_key"),
        ({"key_mode": "bogus", "master_key": MASTER_KEY}, "key_mode"),
        ({"master_key": MASTER_KEY, "bucket": "some-bucket"}, "bucket"),
        ({"master_key": MASTER_KEY, "prefix": "app"}, "prefix"),
        ({"master_key": MASTER_KEY, "prefix": "../"}, "prefix"),
    ],
)
def test_conflicting_options_are_refused(options: dict[str, Any], mentions: str) -> None:
    store = InMemoryStore()
    with pytest.raises(ConfigurationError) as caught:
        open_memory(user_id="alice", store=store, key_cache=KeyCache(), **options)
    assert mentions in str(caught.value)
    assert list(store.list("")) == []


def test_neither_bucket_nor_store_is_refused() -> None:
    with pytest.raises(ConfigurationError) as caught:
        open_memory(user_id="alice", master_key=MASTER_KEY)
    assert "bucket" in str(caught.value)


@pytest.mark.parametrize(
    "options",
    [
        {"max_file_bytes": 0},
        {"max_file_bytes": -1},
        {"max_path_bytes": 0},
        {"max_file_bytes": True},
        {"max_path_bytes": "512"},
    ],
    ids=repr,
)
def test_bad_limits_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Limits(**options)
    assert next(iter(options)) in str(caught.value)


# -- size limits ----------------------------------------------------------------------


def test_create_over_the_file_limit_stores_nothing(make_memory: Callable[..., EncryptedMemory], flavour: str) -> None:
    memory = make_memory(flavour, limits=Limits(max_file_bytes=10))
    with pytest.raises(LimitExceededError) as caught:
        memory.create("/memories/big.txt", "x" * 11)
    _assert_error_message(caught.value)
    # Bytes, not characters: 6 characters, 12 bytes.
    with pytest.raises(LimitExceededError):
        memory.create("/memories/wide.txt", "é" * 6)
    with pytest.raises(LimitExceededError):
        memory.execute({"command": "create", "path": "/memories/emoji.txt", "file_text": "\U0001f600" * 3})
    assert _memory_keys(memory) == []
    with pytest.raises(PathNotFoundError):
        memory.view("/memories/big.txt")
    # Exactly at the limit is fine.
    assert memory.create("/memories/exact.txt", "é" * 5) == "File created successfully at: /memories/exact.txt"
    assert memory.create("/memories/ascii.txt", "x" * 10) == "File created successfully at: /memories/ascii.txt"
    assert _memory_keys(memory) == ["alice/memories/ascii.txt", "alice/memories/exact.txt"]


def test_edits_over_the_file_limit_change_nothing(make_memory: Callable[..., EncryptedMemory], flavour: str) -> None:
    memory = make_memory(flavour, limits=Limits(max_file_bytes=10))
    memory.create("/memories/f.txt", "abc\n")  # 4 bytes
    shown = memory.view("/memories/f.txt")
    before = _snapshot(memory)

    with pytest.raises(LimitExceededError) as caught:
        memory.str_replace("/memories/f.txt", "abc", "abcdefghijk")
    _assert_error_message(caught.value)
    with pytest.raises(LimitExceededError):
        memory.str_replace("/memories/f.txt", "b", "日本語")  # "a日本語c\n": 6 characters, 12 bytes
    with pytest.raises(LimitExceededError):
        memory.insert("/memories/f.txt", 1, "日本")  # "abc\n日本\n": 7 characters, 11 bytes
    with pytest.raises(LimitExceededError):
        memory.execute({"command": "insert", "path": "/memories/f.txt", "insert_line": 0, "insert_text": "x" * 7})

    assert _snapshot(memory) == before
    assert memory.view("/memories/f.txt") == shown
    # Edits that stay within the limit (in bytes) still work.
    memory.str_replace("/memories/f.txt", "b", "é")  # "aéc\n": 5 bytes
    memory.insert("/memories/f.txt", 1, "日")  # "aéc\n日\n": 9 bytes
    assert memory.view("/memories/f.txt").endswith("     1\taéc\n     2\t日\n     3\t")


def test_paths_over_the_path_limit_are_refused_before_any_write(
    make_memory: Callable[..., EncryptedMemory], flavour: str
) -> None:
    memory = make_memory(flavour, limits=Limits(max_path_bytes=20))
    assert memory.create("/memories/" + "é" * 10, "ok") == "File created successfully at: /memories/" + "é" * 10
    before = _snapshot(memory)
    too_long = ["/memories/" + "é" * 11, "/memories/abcdefghij/abcdefghij", "/memories/" + "x" * 21]
    for path in too_long:
        with pytest.raises((InvalidPathError, LimitExceededError)) as caught:
            memory.create(path, "x")
        _assert_error_message(caught.value)
        with pytest.raises((InvalidPathError, LimitExceededError)):
            memory.rename("/memories/" + "é" * 10, path)
    assert _snapshot(memory) == before


def test_directory_rename_whose_children_would_be_too_long_changes_nothing(
    make_memory: Callable[..., EncryptedMemory], flavour: str
) -> None:
    memory = make_memory(flavour, limits=Limits(max_path_bytes=20))
    memory.create("/memories/d/0123456789", "long child\n")  # 12 bytes
    memory.create("/memories/d/x", "short child\n")
    memory.create("/memories/d/sub/y", "nested\n")
    before = _snapshot(memory)
    # "dddddddddd/0123456789" is 21 bytes; "dddddddddd/x" alone would fit.
    with pytest.raises((InvalidPathError, LimitExceededError)) as caught:
        memory.rename("/memories/d", "/memories/dddddddddd")
    _assert_error_message(caught.value)
    assert _snapshot(memory) == before
    assert memory.view("/memories/d/0123456789").endswith("long child\n     2\t")
    assert memory.view("/memories/d/x").endswith("short child\n     2\t")
    assert memory.view("/memories/d/sub/y").endswith("nested\n     2\t")
    with pytest.raises(PathNotFoundError):
        memory.view("/memories/dddddddddd")
    # Multi-byte: "éééé/0123456789" is 4 characters but 8 bytes, 19 bytes in all: fits.
    assert memory.rename("/memories/d", "/memories/éééé") == "Successfully renamed /memories/d to /memories/éééé"
    assert memory.view("/memories/éééé/0123456789").endswith("long child\n     2\t")


def test_directory_rename_never_moves_files_out_of_reach() -> None:
    store = InMemoryStore()
    try:
        memory = open_memory(
            user_id="alice",
            store=store,
            master_key=MASTER_KEY,
            key_cache=KeyCache(),
            limits=Limits(max_path_bytes=3000),
        )
    except ConfigurationError:
        return  # a limit that no object key could honour may fairly be refused up front
    deep = "/".join(["a" * 250] * 3)
    memory.create(f"/memories/d/{deep}", "deep\n")  # key of about 770 bytes: fine
    before = _snapshot(memory)
    target = "/memories/" + "/".join(["b" * 250] * 2)
    try:
        memory.rename("/memories/d", target)
    except S3MemoryError as error:
        _assert_error_message(error)
        assert _snapshot(memory) == before
        assert memory.view(f"/memories/d/{deep}").endswith("deep\n     2\t")
    else:
        assert memory.view(f"{target}/{deep}").endswith("deep\n     2\t")
        assert "a" * 250 in memory.view(target)


# -- a file and a directory of one name never coexist ----------------------------------


def test_create_under_a_file_is_a_clear_conflict(memory: EncryptedMemory) -> None:
    memory.create("/memories/f.txt", "file\n")
    before = _snapshot(memory)
    for path in ("/memories/f.txt/x", "/memories/f.txt/y/z"):
        with pytest.raises(NotADirectoryConflict) as caught:
            memory.create(path, "x")
        _assert_error_message(caught.value)
        assert "/memories/f.txt" in str(caught.value)
    assert _snapshot(memory) == before
    assert memory.view("/memories/f.txt").endswith("     1\tfile\n     2\t")


def test_create_over_a_directory_says_file_exists(memory: EncryptedMemory) -> None:
    memory.create("/memories/d/x", "x\n")
    before = _snapshot(memory)
    with pytest.raises(PathExistsError) as caught:
        memory.create("/memories/d", "would shadow the directory")
    assert str(caught.value) == "Error: File /memories/d already exists"
    with pytest.raises(PathExistsError) as caught:
        memory.create("/memories/d/x", "overwrite")
    assert str(caught.value) == "Error: File /memories/d/x already exists"
    with pytest.raises(PathExistsError) as caught:
        memory.create("/memories", "root")
    assert str(caught.value) == "Error: File /memories already exists"
    assert _snapshot(memory) == before
    assert memory.view("/memories/d/x").endswith("     1\tx\n     2\t")


def test_rename_never_overwrites(memory: EncryptedMemory) -> None:
    memory.create("/memories/a.txt", "a\n")
    memory.create("/memories/d/x", "x\n")
    memory.create("/memories/e/y", "y\n")
    before = _snapshot(memory)
    for old, new in [
        ("/memories/a.txt", "/memories/d"),  # file onto a directory
        ("/memories/a.txt", "/memories/d/x"),  # file onto a file
        ("/memories/d", "/memories/a.txt"),  # directory onto a file
        ("/memories/d", "/memories/e"),  # directory onto a directory
        ("/memories/d/x", "/memories/d/x"),  # onto itself
    ]:
        with pytest.raises(PathExistsError) as caught:
            memory.rename(old, new)
        assert str(caught.value) == f"Error: The destination {new} already exists"
    assert _snapshot(memory) == before


def test_rename_a_directory_into_itself_is_refused(memory: EncryptedMemory) -> None:
    memory.create("/memories/d/x", "x\n")
    before = _snapshot(memory)
    for new in ("/memories/d/sub", "/memories/d/sub/deeper"):
        with pytest.raises(InvalidCommandError) as caught:
            memory.rename("/memories/d", new)
        _assert_error_message(caught.value)
        assert "/memories/d" in str(caught.value)
    assert _snapshot(memory) == before


def test_rename_to_a_path_under_a_file_is_a_clear_conflict(memory: EncryptedMemory) -> None:
    memory.create("/memories/a.txt", "a\n")
    memory.create("/memories/b.txt", "b\n")
    memory.create("/memories/d/x", "x\n")
    before = _snapshot(memory)
    for old, new in [
        ("/memories/b.txt", "/memories/a.txt/b.txt"),
        ("/memories/d", "/memories/a.txt/d"),
        ("/memories/b.txt", "/memories/a.txt/deeper/b.txt"),
    ]:
        with pytest.raises(NotADirectoryConflict) as caught:
            memory.rename(old, new)
        _assert_error_message(caught.value)
        assert "/memories/a.txt" in str(caught.value)
    assert _snapshot(memory) == before


def test_missing_sources_are_reported(memory: EncryptedMemory) -> None:
    with pytest.raises(PathNotFoundError) as caught:
        memory.rename("/memories/nope", "/memories/other")
    assert str(caught.value) == "Error: The path /memories/nope does not exist"
    with pytest.raises(InvalidCommandError) as caught:
        memory.delete("/memories")
    assert str(caught.value) == "Error: Cannot delete the /memories directory itself"
    assert set(_all_keys(memory)) <= {TENANT_KEY}


# -- execute(): malformed tool input ---------------------------------------------------

FILE = "/memories/f.txt"
MALFORMED: list[object] = [
    None,
    "view",
    ["view", "/memories"],
    5,
    {},
    {"path": "/memories"},
    {"command": None},
    {"command": 5},
    {"command": "explode", "path": "/memories"},
    {"command": "VIEW", "path": "/memories"},
    # missing required fields
    {"command": "view"},
    {"command": "create", "path": "/memories/n.txt"},
    {"command": "create", "file_text": "x"},
    {"command": "str_replace", "path": FILE, "old_str": "a"},
    {"command": "str_replace", "path": FILE, "new_str": "a"},
    {"command": "insert", "path": FILE, "insert_text": "x"},
    {"command": "insert", "path": FILE, "insert_line": 1},
    {"command": "delete"},
    {"command": "rename", "old_path": FILE},
    {"command": "rename", "new_path": FILE},
    # wrong types
    {"command": "view", "path": 5},
    {"command": "view", "path": ["/memories"]},
    {"command": "create", "path": 5, "file_text": "x"},
    {"command": "create", "path": "/memories/n.txt", "file_text": None},
    {"command": "create", "path": "/memories/n.txt", "file_text": 5},
    {"command": "create", "path": "/memories/n.txt", "file_text": b"bytes"},
    {"command": "create", "path": "/memories/n.txt", "file_text": "lone \ud800 surrogate"},
    {"command": "str_replace", "path": FILE, "old_str": 5, "new_str": "x"},
    {"command": "str_replace", "path": FILE, "old_str": "1", "new_str": 5},
    {"command": "str_replace", "path": FILE, "old_str": "", "new_str": "x"},
    {"command": "insert", "path": FILE, "insert_line": "2", "insert_text": "x"},
    {"command": "insert", "path": FILE, "insert_line": True, "insert_text": "x"},
    {"command": "insert", "path": FILE, "insert_line": 1.0, "insert_text": "x"},
    {"command": "insert", "path": FILE, "insert_line": -1, "insert_text": "x"},
    {"command": "insert", "path": FILE, "insert_line": 99, "insert_text": "x"},
    {"command": "insert", "path": FILE, "insert_line": 1, "insert_text": 5},
    {"command": "delete", "path": 5},
    {"command": "rename", "old_path": 5, "new_path": "/memories/n.txt"},
    {"command": "rename", "old_path": FILE, "new_path": ["/memories/n.txt"]},
    {"command": "view", "path": FILE, "view_range": "1,2"},
    {"command": "view", "path": FILE, "view_range": [1]},
    {"command": "view", "path": FILE, "view_range": [1, 2, 3]},
    {"command": "view", "path": FILE, "view_range": [0, 2]},
    {"command": "view", "path": FILE, "view_range": [3, 1]},
    {"command": "view", "path": FILE, "view_range": [9, -1]},
    {"command": "view", "path": FILE, "view_range": [1, "2"]},
    {"command": "view", "path": FILE, "view_range": [True, 2]},
    {"command": "view", "path": FILE, "view_range": [1.0, 2.0]},
    {"command": "view", "path": FILE, "view_range": {"start": 1, "end": 2}},
]


@pytest.fixture
def plain_memory() -> EncryptedMemory:
    memory = open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())
    memory.create(FILE, "1\n2\n3\n4\n5")
    return memory


@pytest.mark.parametrize("tool_input", MALFORMED, ids=repr)
def test_malformed_tool_input_is_a_clear_error(plain_memory: EncryptedMemory, tool_input: object) -> None:
    before = _snapshot(plain_memory)
    with pytest.raises(S3MemoryError) as caught:
        plain_memory.execute(tool_input)
    assert isinstance(caught.value, InvalidCommandError), type(caught.value)
    _assert_error_message(caught.value)
    assert _snapshot(plain_memory) == before
    assert plain_memory.view(FILE).endswith("     5\t5")


@pytest.mark.parametrize("command", [["view"], {"name": "view"}], ids=repr)
def test_unhashable_command_is_a_clear_error(plain_memory: EncryptedMemory, command: object) -> None:
    with pytest.raises(InvalidCommandError) as caught:
        plain_memory.execute({"command": command, "path": "/memories"})
    _assert_error_message(caught.value)


def test_well_formed_view_ranges_still_work(plain_memory: EncryptedMemory) -> None:
    header = f"Here's the content of {FILE} with line numbers:\n"
    assert plain_memory.execute({"command": "view", "path": FILE, "view_range": [2, 3]}) == (
        header + "     2\t2\n     3\t3"
    )
    assert plain_memory.execute({"command": "view", "path": FILE, "view_range": [4, -1]}) == (
        header + "     4\t4\n     5\t5"
    )
    assert plain_memory.execute({"command": "view", "path": FILE, "view_range": (5, 5)}) == header + "     5\t5"
