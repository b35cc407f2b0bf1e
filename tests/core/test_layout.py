"""The tenant layout owns every object key; computing a key never creates an object.

``s3memory._layout`` names each family of objects a tenant owns. These tests hold the code to
it: every object a full workload leaves in the bucket is one the layout names, the families
cannot collide, and with encrypted names no command but ``create`` writes the names key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import pytest

import s3memory
from s3memory import EncryptedMemory, InMemoryStore, KeyCache, PathNotFoundError, TenantLayout, open_memory
from s3memory._crypto.names import NameCipher
from s3memory._layout import (
    HISTORY_KEY,
    INTERNAL_FOLDERS,
    KEY_DOCUMENT_PURPOSES,
    KEY_DOCUMENT_SUFFIX,
    NAMES_KEY,
    TENANT_KEY,
)
from s3memory._search.index import current_files

MASTER_KEY = bytes(range(32))


def family(layout: TenantLayout, key: str) -> str:
    """Which family of the layout ``key`` belongs to, or ``"unknown"``."""
    if layout.path_for_key(key) is not None:
        return "file"
    purpose = layout.key_document_purpose(key)
    if purpose is not None:
        return purpose if purpose in KEY_DOCUMENT_PURPOSES else "unknown"
    if key.startswith(layout.intents_prefix + "rename-"):
        return "intent"
    if key.startswith(layout.access_markers_prefix):
        return "access marker"
    if layout.is_history_record(key):
        return "history record"
    if key.startswith(layout.pending_prefix):
        return "pending write"
    if key == layout.index_key:
        return "search index"
    return "unknown"


def test_the_internal_families_cannot_collide() -> None:
    layout = TenantLayout("alice", "app/")
    assert all(folder.endswith("/") and not folder.endswith(KEY_DOCUMENT_SUFFIX + "/") for folder in INTERNAL_FOLDERS)
    assert len(set(INTERNAL_FOLDERS)) == len(INTERNAL_FOLDERS)
    documents = [layout.key_document(purpose) for purpose in KEY_DOCUMENT_PURPOSES]
    assert documents == [
        "app/alice/.s3memory/tenant-key",
        "app/alice/.s3memory/names-key",
        "app/alice/.s3memory/history-key",
    ]
    prefixes = [
        layout.intents_prefix,
        layout.access_markers_prefix,
        layout.history_prefix,
        layout.index_prefix,
        layout.pending_prefix,
    ]
    assert layout.index_key == "app/alice/.s3memory/index/v1"
    assert layout.index_key.startswith(layout.index_prefix)
    assert layout.key_document_purpose(layout.index_key) is None and not layout.is_history_record(layout.index_key)
    assert layout.path_for_key(layout.index_key) is None
    for prefix in prefixes:
        assert prefix.startswith(layout.internal_prefix)
        assert not any(document.startswith(prefix) for document in documents)
        assert sum(other.startswith(prefix) for other in prefixes) == 1
    # Whatever a folder holds is never taken for a key document, even a name ending "-key".
    assert layout.key_document_purpose(layout.intents_prefix + "rename-x-key") is None
    assert layout.key_document_purpose(layout.rename_intent_key("ab" * 32)) is None
    assert layout.key_document_purpose(layout.access_marker_key("app/alice/memories/a-key")) is None
    # A key document a later version writes is still recognised (erasure destroys it first).
    assert layout.key_document_purpose(layout.internal_prefix + "search-key") == "search-key"
    assert layout.key_document_purpose("app/bob/.s3memory/tenant-key") is None
    with pytest.raises(ValueError, match="unknown key document purpose"):
        layout.key_document("search-key")


def test_internal_keys_are_as_frozen() -> None:
    """The names every earlier version wrote (also frozen in tests/vectors/vectors.json)."""
    layout = TenantLayout("alice")
    assert layout.key_document(TENANT_KEY) == "alice/.s3memory/tenant-key"
    assert layout.key_document(NAMES_KEY) == "alice/.s3memory/names-key"
    assert layout.rename_intent_key("0123456789" * 5) == "alice/.s3memory/intents/rename-" + "0123456789" * 4
    assert layout.access_marker_key("alice/memories/a.md") == (
        "alice/.s3memory/access/" + hashlib.sha256(b"alice/memories/a.md").hexdigest()[:32]
    )
    assert layout.index_key == "alice/.s3memory/index/v1"


@pytest.mark.parametrize("encrypt_names", [False, True])
def test_every_object_a_workload_leaves_is_one_the_layout_names(encrypt_names: bool) -> None:
    store = InMemoryStore()
    memory = open_memory(
        user_id="alice",
        store=store,
        master_key=MASTER_KEY,
        key_cache=KeyCache(),
        encrypt_names=encrypt_names,
        track_access=True,
    )
    memory.create("/memories/a/one.md", "one\n")
    memory.create("/memories/a/two.md", "two\n")
    memory.view("/memories/a/one.md")  # an access marker
    memory.str_replace("/memories/a/two.md", "two", "2")
    memory.rename("/memories/a", "/memories/b")
    # An unfinished rename leaves its intent record.
    memory.create("/memories/c.md", "c\n")
    record = memory.layout.rename_intent_key("f" * 40)
    store.put(record, b"", {})
    assert current_files(memory.files)  # the search index
    families = {key: family(memory.layout, key) for key in (info.key for info in store.list(""))}
    assert "unknown" not in families.values(), families
    expected = {"file", TENANT_KEY, HISTORY_KEY, "access marker", "intent", "history record", "search index"} | (
        {NAMES_KEY} if encrypt_names else set()
    )
    assert set(families.values()) == expected


ReadCommand = Callable[[EncryptedMemory], object]
READS_OF_A_NEW_TENANT: dict[str, tuple[ReadCommand, str]] = {
    "view a file": (
        lambda m: m.view("/memories/notes.md"),
        "The path /memories/notes.md does not exist. Please provide a valid path.",
    ),
    "view a directory": (
        lambda m: m.view("/memories/dir/"),
        "The path /memories/dir/ does not exist. Please provide a valid path.",
    ),
    "str_replace": (
        lambda m: m.str_replace("/memories/notes.md", "a", "b"),
        "Error: The path /memories/notes.md does not exist. Please provide a valid path.",
    ),
    "insert": (lambda m: m.insert("/memories/notes.md", 0, "x"), "Error: The path /memories/notes.md does not exist"),
    "delete": (lambda m: m.delete("/memories/notes.md"), "Error: The path /memories/notes.md does not exist"),
    "rename": (
        lambda m: m.rename("/memories/notes.md", "/memories/other.md"),
        "Error: The path /memories/notes.md does not exist",
    ),
    "read_text": (
        lambda m: m.read_text("/memories/notes.md"),
        "The path /memories/notes.md does not exist. Please provide a valid path.",
    ),
    "list_files": (
        lambda m: m.list_files("/memories/dir"),
        "The path /memories/dir does not exist. Please provide a valid path.",
    ),
}


@pytest.mark.parametrize("command", sorted(READS_OF_A_NEW_TENANT))
def test_no_command_but_create_writes_the_names_key(command: str) -> None:
    store = InMemoryStore()
    memory = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache(), encrypt_names=True)
    run, message = READS_OF_A_NEW_TENANT[command]
    with pytest.raises(PathNotFoundError) as info:
        run(memory)
    assert str(info.value) == message
    assert [info.key for info in store.list("")] == []  # not even the names key
    memory.create("/memories/notes.md", "now\n")
    assert store.head(memory.layout.key_document(NAMES_KEY)) is not None


def test_computing_a_key_of_a_new_tenant_creates_nothing() -> None:
    store = InMemoryStore()
    memory = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache(), encrypt_names=True)
    assert isinstance(memory.layout.names, NameCipher)
    with pytest.raises(s3memory.TenantKeyError, match="no names key yet"):
        memory.layout.key_for(s3memory.MemoryPath("notes.md"))
    assert memory.layout.names.key_exists() is False
    assert [info.key for info in store.list("")] == []
    assert memory.layout.names.key_exists(create=True) is True
    assert [info.key for info in store.list("")] == [memory.layout.key_document(NAMES_KEY)]
    assert memory.layout.key_for(s3memory.MemoryPath("notes.md")).startswith(memory.layout.memory_prefix)


def test_the_name_cipher_is_what_the_layout_asks_for() -> None:
    """``NameSealing`` is the layout's whole view of encrypted names: the cipher has each member."""
    members = [name for name in vars(s3memory.NameSealing) if not name.startswith("_")]
    assert set(members) >= {"seal", "open", "too_long_name", "path_tag", "key_exists"}
    for name in members:
        assert hasattr(NameCipher, name), name
