"""History: versions with who made them, across edits, renames and deletes; restore; redact;
and provenance that a bucket writer can neither read nor forge, swap or replay unnoticed."""

from __future__ import annotations

import base64
import datetime
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from helpers import BUCKET, MASTER_KEY, REPO

from s3memory import (
    ConfigurationError,
    EncryptedMemory,
    InMemoryStore,
    InvalidPathError,
    KeyCache,
    MemoryVersion,
    NotADirectoryConflict,
    PathExistsError,
    PathNotFoundError,
    PreconditionFailedError,
    StorageAccessDeniedError,
    VersionNotFoundError,
    open_memory,
)
from s3memory._crypto.provenance import PROVENANCE_METADATA

VERSIONED = ["inmemory", "localdir", "s3-tenant-local", "s3-kms"]
MakeVersioned = Callable[..., EncryptedMemory]


@pytest.fixture
def make_versioned(request: pytest.FixtureRequest, tmp_path: Any) -> MakeVersioned:
    """``make(flavour, actor=..., **options)``: memories of user alice on one versioned store."""
    shared: dict[str, Any] = {}

    def make(flavour: str, *, actor: str = "test", **options: Any) -> EncryptedMemory:
        options.setdefault("key_cache", KeyCache())
        if flavour == "inmemory":
            store = shared.setdefault("store", InMemoryStore())
            return open_memory(user_id="alice", store=store, master_key=MASTER_KEY, actor=actor, **options)
        if flavour == "localdir":
            from s3memory.stores import LocalDirStore

            store = shared.setdefault("store", LocalDirStore(tmp_path / "store"))
            return open_memory(user_id="alice", store=store, master_key=MASTER_KEY, actor=actor, **options)
        s3 = shared.get("s3")
        if s3 is None:
            s3 = shared.setdefault("s3", request.getfixturevalue("s3_client"))
            s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        if flavour == "s3-tenant-local":
            return open_memory(
                user_id="alice", bucket=BUCKET, s3_client=s3, master_key=MASTER_KEY, actor=actor, **options
            )
        assert flavour == "s3-kms"
        return open_memory(
            user_id="alice",
            bucket=BUCKET,
            s3_client=s3,
            kms_key_id=request.getfixturevalue("kms_key_id"),
            kms_client=request.getfixturevalue("kms_client"),
            key_mode="kms",
            actor=actor,
            **options,
        )

    return make


def summary(entries: list[MemoryVersion]) -> list[tuple[str, str, str | None, bool, str]]:
    return [(e.path, e.operation, e.actor, e.verified, e.note) for e in entries]


@pytest.mark.parametrize("flavour", VERSIONED)
def test_edits_are_versions_with_who_made_them(make_versioned: MakeVersioned, flavour: str) -> None:
    alice = make_versioned(flavour, actor="session:alice")
    alice.create("/memories/notes.md", "one\n")
    bob = make_versioned(flavour, actor="session:bob")
    bob.str_replace("/memories/notes.md", "one", "two")
    alice.insert("/memories/notes.md", 0, "zero")
    entries = alice.history("/memories/notes.md")
    assert summary(entries) == [
        ("/memories/notes.md", "modified", "session:alice", True, ""),
        ("/memories/notes.md", "modified", "session:bob", True, ""),
        ("/memories/notes.md", "created", "session:alice", True, ""),
    ]
    assert [e.current for e in entries] == [True, False, False]
    assert len({e.file_id for e in entries}) == 1 and entries[0].file_id
    assert all(e.at.tzinfo is datetime.timezone.utc for e in entries)
    assert [e.size for e in entries] == [len("zero\ntwo\n"), len("two\n"), len("one\n")]
    assert [alice.read_version("/memories/notes.md", e.version) for e in entries] == [
        "zero\ntwo\n",
        "two\n",
        "one\n",
    ]


@pytest.mark.parametrize("flavour", VERSIONED)
def test_a_file_keeps_its_identity_across_a_rename(make_versioned: MakeVersioned, flavour: str) -> None:
    memory = make_versioned(flavour, actor="cli")
    memory.create("/memories/a.md", "draft\n")
    memory.str_replace("/memories/a.md", "draft", "final")
    memory.rename("/memories/a.md", "/memories/done/b.md")
    entries = memory.history("/memories/done/b.md")
    assert summary(entries) == [
        ("/memories/done/b.md", "renamed", "cli", True, "renamed from /memories/a.md"),
        ("/memories/a.md", "modified", "cli", True, ""),
        ("/memories/a.md", "created", "cli", True, ""),
    ]
    assert len({e.file_id for e in entries}) == 1
    before_the_rename = entries[-1].version
    assert memory.read_version("/memories/done/b.md", before_the_rename) == "draft\n"
    # Restoring a version from before the rename writes it at the new path.
    assert memory.restore("/memories/done/b.md", before_the_rename) == (
        f"Restored /memories/done/b.md to version {before_the_rename}"
    )
    assert memory.read_text("/memories/done/b.md") == "draft\n"
    newest = memory.history("/memories/done/b.md")[0]
    assert (newest.operation, newest.current, newest.verified, newest.file_id) == (
        "restored",
        True,
        True,
        entries[0].file_id,
    )


@pytest.mark.parametrize("flavour", VERSIONED)
def test_a_deleted_file_has_a_history_and_comes_back(make_versioned: MakeVersioned, flavour: str) -> None:
    memory = make_versioned(flavour, actor="session:1")
    memory.create("/memories/dir/a.md", "keep me\n")
    make_versioned(flavour, actor="session:2").delete("/memories/dir")  # a directory: the record is about it
    with pytest.raises(PathNotFoundError):
        memory.read_text("/memories/dir/a.md")
    entries = memory.history("/memories/dir/a.md")
    assert summary(entries) == [
        ("/memories/dir/a.md", "deleted", "session:2", True, ""),
        ("/memories/dir/a.md", "created", "session:1", True, ""),
    ]
    memory.restore("/memories/dir/a.md", entries[1].version)
    assert memory.read_text("/memories/dir/a.md") == "keep me\n"
    assert [e.operation for e in memory.history("/memories/dir/a.md")] == ["restored", "deleted", "created"]
    assert all(e.verified for e in memory.history("/memories/dir/a.md"))


@pytest.mark.parametrize("flavour", VERSIONED)
def test_redaction_deletes_the_content_for_good_and_keeps_who_and_when(
    make_versioned: MakeVersioned, flavour: str
) -> None:
    memory = make_versioned(flavour, actor="session:leaky")
    memory.create("/memories/a.md", "token: hunter2\n")
    memory.str_replace("/memories/a.md", "hunter2", "(removed)")
    leaked = memory.history("/memories/a.md")[1]
    with pytest.raises(ConfigurationError, match="is the current content"):
        memory.redact("/memories/a.md", memory.history("/memories/a.md")[0].version)
    reviewer = make_versioned(flavour, actor="admin:carol")
    assert reviewer.redact("/memories/a.md", leaked.version) == (
        f"Redacted version {leaked.version} of /memories/a.md: removed 1 stored version of its text "
        "(/memories/a.md), 0 held writes and 0 versions of the search index"
    )
    # The ciphertext is gone from the store: no version of the key holds it any more.
    key = memory.layout.key_for(memory.gate.parse("/memories/a.md"))
    assert leaked.version not in [v.version_id for v in memory.store.list_versions(key)]
    assert memory.store.get_version(key, leaked.version) is None
    entries = memory.history("/memories/a.md")
    assert [(e.operation, e.actor, e.verified) for e in entries] == [
        ("modified", "session:leaky", True),
        ("created", "session:leaky", True),
    ]
    assert entries[1].version == leaked.version and entries[1].at == leaked.at
    assert entries[1].note.startswith("redacted by admin:carol at ")
    with pytest.raises(VersionNotFoundError, match="was redacted"):
        memory.read_version("/memories/a.md", leaked.version)
    with pytest.raises(VersionNotFoundError):
        memory.restore("/memories/a.md", leaked.version)


@pytest.mark.parametrize("flavour", ["inmemory", "s3-tenant-local"])
def test_changes_is_the_store_wide_feed_with_filters(make_versioned: MakeVersioned, flavour: str) -> None:
    alice = make_versioned(flavour, actor="session:a")
    bob = make_versioned(flavour, actor="session:b")
    alice.create("/memories/x.md", "x\n")
    bob.create("/memories/d/y.md", "y\n")
    bob.str_replace("/memories/x.md", "x", "xx")
    alice.rename("/memories/d/y.md", "/memories/d/z.md")
    alice.delete("/memories/x.md")
    feed = alice.changes()
    summary = [(e.path, e.operation, e.actor) for e in feed]
    assert summary[0] == ("/memories/x.md", "deleted", "session:a")
    # The rename's two sides (the copy and the record) carry one time: in either order.
    assert sorted(summary[1:3]) == [
        ("/memories/d/y.md", "renamed", "session:a"),
        ("/memories/d/z.md", "renamed", "session:a"),
    ]
    assert feed[1].at == feed[2].at
    assert summary[3:] == [
        ("/memories/x.md", "modified", "session:b"),
        ("/memories/d/y.md", "created", "session:b"),
        ("/memories/x.md", "created", "session:a"),
    ]
    assert [e.path for e in alice.changes(actor="session:b")] == ["/memories/x.md", "/memories/d/y.md"]
    assert [e.path for e in alice.changes(operation="created")] == ["/memories/d/y.md", "/memories/x.md"]
    assert {e.path for e in alice.changes("/memories/d")} == {"/memories/d/y.md", "/memories/d/z.md"}
    middle = feed[3].at
    assert all(e.at >= middle for e in alice.changes(since=middle))
    assert all(e.at <= middle for e in alice.changes(until=middle))
    with pytest.raises(ConfigurationError, match="operation must be one of"):
        alice.changes(operation="edited")


def test_unknown_versions_and_paths_are_clear_errors(make_versioned: MakeVersioned) -> None:
    memory = make_versioned("inmemory")
    memory.create("/memories/a.md", "a\n")
    for bad in ("nope", "", "x" * 2000):
        with pytest.raises(VersionNotFoundError) as info:
            memory.read_version("/memories/a.md", bad)
        assert str(info.value).startswith("Error: /memories/a.md has no version ")
    with pytest.raises(VersionNotFoundError):
        memory.restore("/memories/b.md", "nope")
    assert memory.history("/memories/b.md") == []
    with pytest.raises(InvalidPathError, match="directory"):
        memory.history("/memories")


def test_a_store_without_versions_says_so(make_memory: Callable[..., EncryptedMemory]) -> None:
    memory = open_memory(user_id="alice", store=InMemoryStore(versioned=False), master_key=MASTER_KEY)
    memory.create("/memories/a.md", "a\n")
    for call in (lambda: memory.history("/memories/a.md"), lambda: memory.changes()):
        with pytest.raises(ConfigurationError) as info:
            call()
        assert "keeps no versions" in str(info.value) and "put-bucket-versioning" in str(info.value)
    assert memory.read_text("/memories/a.md") == "a\n"  # everything else works as before


def test_the_actor_is_the_applications_and_is_checked() -> None:
    for bad in ("", "x" * 129, "line\nbreak", 7):
        with pytest.raises(ConfigurationError, match="actor must be"):
            open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, actor=bad)  # type: ignore[arg-type]
    memory = open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())
    memory.execute({"command": "create", "path": "/memories/a.md", "file_text": "a"})
    assert memory.history("/memories/a.md")[0].actor == "api"  # the default, never the model's


# -- a hostile bucket ------------------------------------------------------------------------------
def test_provenance_is_sealed_not_readable_in_the_bucket(make_versioned: MakeVersioned) -> None:
    memory = make_versioned("inmemory", actor="session:secret-name")
    memory.create("/memories/a.md", "a\n")
    key = memory.layout.key_for(memory.gate.parse("/memories/a.md"))
    head = memory.store.head(key)
    assert head is not None
    sealed = head.metadata[PROVENANCE_METADATA]
    raw = base64.urlsafe_b64decode(sealed + "=" * (-len(sealed) % 4))
    assert b"secret-name" not in raw and b"created" not in raw
    for record in memory.store.list(memory.layout.history_prefix):
        stored = memory.store.get(record.key)
        assert stored is not None and b"session" not in bytes(stored.body)


@pytest.mark.parametrize("flavour", ["inmemory", "s3-tenant-local"])
def test_forged_swapped_and_replayed_provenance_is_detected(make_versioned: MakeVersioned, flavour: str) -> None:
    memory = make_versioned(flavour, actor="session:1")
    memory.create("/memories/a.md", "one\n")
    memory.str_replace("/memories/a.md", "one", "two")
    memory.create("/memories/b.md", "other\n")
    store, layout = memory.store, memory.layout
    key_a = layout.key_for(memory.gate.parse("/memories/a.md"))
    key_b = layout.key_for(memory.gate.parse("/memories/b.md"))
    versions_a = [v.version_id for v in store.list_versions(key_a) if v.key == key_a]
    first = store.get_version(key_a, versions_a[-1])
    current_b = store.get(key_b)
    assert first is not None and current_b is not None

    # Replayed: the first version's body and metadata put back as the newest version.
    store.put(key_a, bytes(first.body), dict(first.metadata))
    newest = memory.history("/memories/a.md")[0]
    assert (newest.verified, newest.note) == (False, "out of sequence: a copy of an earlier version (replayed)")
    assert memory.read_text("/memories/a.md") == "one\n"  # the content itself is genuine

    # Swapped: b's provenance on a's current version (same envelope, other record).
    current_a = store.get(key_a)
    assert current_a is not None
    swapped = {**current_a.metadata, PROVENANCE_METADATA: current_b.metadata[PROVENANCE_METADATA]}
    store.put(key_a, bytes(current_a.body), swapped)
    newest = memory.history("/memories/a.md")[0]
    assert (newest.verified, newest.actor) == (False, None)
    assert newest.note == "provenance failed its integrity check (forged, or moved here)"

    # Forged: a record made up by someone without the history key.
    forged_record = json.dumps({"v": 1, "op": "created", "at": 0, "by": "admin", "file": "f", "rev": "r"})
    forged = {**current_a.metadata, PROVENANCE_METADATA: base64.urlsafe_b64encode(forged_record.encode()).decode()}
    store.put(key_a, bytes(current_a.body), forged)
    assert memory.history("/memories/a.md")[0].note == "provenance failed its integrity check (forged, or moved here)"

    # Stripped: no provenance at all.
    store.put(key_a, bytes(current_a.body), {k: v for k, v in current_a.metadata.items() if k != PROVENANCE_METADATA})
    newest = memory.history("/memories/a.md")[0]
    assert (newest.verified, newest.actor) == (False, None) and newest.note.startswith("no provenance")


def test_a_planted_or_tampered_history_record_is_ignored(make_versioned: MakeVersioned) -> None:
    memory = make_versioned("inmemory", actor="session:1")
    memory.create("/memories/a.md", "a\n")
    memory.delete("/memories/a.md")
    records = sorted(info.key for info in memory.store.list(memory.layout.history_prefix))
    assert len(records) == 2  # the creation's and the deletion's, sealed in their names
    deletion = records[0]  # the inverted time first: the newest sorts first
    # Overwritten or deleted by whoever may write the bucket (not delete versions): the
    # record is its name, and its earlier version is still listed.
    memory.store.put(deletion, b"\x00forged", {})
    deleted = memory.history("/memories/a.md")[0]
    assert (deleted.operation, deleted.actor, deleted.verified) == ("deleted", "session:1", True)
    memory.store.delete([deletion])
    assert memory.history("/memories/a.md")[0].actor == "session:1"
    # Destroyed for good (deleting versions: an administrator's right) and replaced by a
    # tampered name: it grants nothing, and the deletion is no longer attributed.
    for version in memory.store.list_versions(deletion):
        memory.store.delete_version(version.key, version.version_id)
    flipped = deletion[:-3] + ("A" if deletion[-3] != "A" else "B") + deletion[-2:]
    memory.store.put(flipped, b"", {})
    # ... as is a record moved to another time (its name is bound to its place).
    folder = deletion[: deletion.index("/", len(memory.layout.history_prefix)) + 1]
    when, sealed = deletion[len(folder) : len(folder) + 16], deletion[len(folder) + 16 :]
    memory.store.put(f"{folder}{int(when) + 1:016d}{sealed}", b"", {})
    deleted = memory.history("/memories/a.md")[0]
    assert (deleted.operation, deleted.actor, deleted.verified) == ("deleted", None, False)
    assert deleted.note == "no record of who deleted it"


def test_the_model_never_sees_history(make_versioned: MakeVersioned) -> None:
    memory = make_versioned("inmemory")
    memory.create("/memories/a.md", "a\n")
    memory.str_replace("/memories/a.md", "a", "b")
    memory.rename("/memories/a.md", "/memories/c.md")
    memory.delete("/memories/c.md")
    assert memory.view("/memories") == (
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items "
        "and node_modules:\n0B\t/memories"
    )
    assert memory.list_files() == []
    with pytest.raises(PathNotFoundError):
        memory.view("/memories/c.md")


def test_a_restore_loses_no_concurrent_edit(make_versioned: MakeVersioned) -> None:
    memory = make_versioned("inmemory")
    memory.create("/memories/a.md", "one\n")
    memory.str_replace("/memories/a.md", "one", "two")
    oldest = memory.history("/memories/a.md")[-1].version

    original_put = memory.store.put
    raced = []

    def put(key: str, body: bytes, metadata: Any, **kwargs: Any) -> str:
        if kwargs.get("if_match") and not raced:
            raced.append(True)
            make_versioned("inmemory", actor="other").str_replace("/memories/a.md", "two", "three")
        return original_put(key, body, metadata, **kwargs)

    memory.store.put = put  # type: ignore[method-assign]
    with pytest.raises(PreconditionFailedError, match="changed while it was being restored"):
        memory.restore("/memories/a.md", oldest)
    assert memory.read_text("/memories/a.md") == "three\n"


def test_the_readme_example_runs() -> None:

    page = (REPO / "docs" / "features" / "history.md").read_text(encoding="utf-8")
    section = page[page.index("# History: who changed what") :]
    start = section.index("```python\n") + len("```python\n")
    example = section[start : section.index("\n```", start)]
    printed: list[tuple[Any, ...]] = []
    namespace: dict[str, Any] = {"open_memory": open_memory, "InMemoryStore": InMemoryStore, "key": MASTER_KEY}
    namespace["print"] = lambda *args: printed.append(args)
    exec(example, namespace)  # our own README's example
    assert [row[1:4] for row in printed] == [
        ("renamed", "session:1", True),
        ("modified", "session:1", True),
        ("created", "session:1", True),
    ]
    memory = namespace["memory"]
    assert memory.read_text("/memories/style/prefs.md") == "tabs\n"  # restored


def test_each_front_end_names_its_actor(tmp_path: Any) -> None:
    from s3memory import S3MemoryTool, Settings

    tool = S3MemoryTool(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, actor="session:tool")
    tool.memory.create("/memories/a.md", "a\n")
    assert tool.memory.history("/memories/a.md")[0].actor == "session:tool"
    settings = Settings(home=tmp_path / "home", user="alice")
    cli = settings.open()
    cli.create("/memories/b.md", "b\n")
    assert cli.history("/memories/b.md")[0].actor == "cli"  # the CLI's; the MCP server opens with "mcp"
    mcp = settings.open(actor="mcp")
    mcp.str_replace("/memories/b.md", "b", "c")
    assert [v.actor for v in cli.history("/memories/b.md")] == ["mcp", "cli"]


def test_a_path_renamed_into_twice_tells_each_rename_apart(make_versioned: MakeVersioned) -> None:
    memory = make_versioned("inmemory")
    memory.create("/memories/a.md", "from a\n")
    memory.rename("/memories/a.md", "/memories/b.md")
    memory.delete("/memories/b.md")
    memory.create("/memories/c.md", "from c\n")
    memory.rename("/memories/c.md", "/memories/b.md")
    entries = memory.history("/memories/b.md")
    assert [(e.path, e.operation, e.note) for e in entries] == [
        ("/memories/b.md", "renamed", "renamed from /memories/c.md"),
        ("/memories/c.md", "created", ""),
        ("/memories/b.md", "deleted", ""),
        ("/memories/b.md", "renamed", "renamed from /memories/a.md"),
        ("/memories/a.md", "created", ""),
    ]
    assert entries[0].file_id == entries[1].file_id != entries[3].file_id == entries[4].file_id


def test_a_redacted_version_keeps_the_record_of_its_files_rename(make_versioned: MakeVersioned) -> None:
    """The deletion or rename that followed a version is matched to it by its ETag, which a
    redaction keeps (the rename's copy goes too: it holds the same text)."""
    memory = make_versioned("inmemory", actor="cli")
    memory.create("/memories/a.md", "one\n")
    memory.str_replace("/memories/a.md", "one", "two")
    memory.rename("/memories/a.md", "/memories/b.md")
    memory.str_replace("/memories/b.md", "two", "three")
    before = memory.history("/memories/a.md")
    memory.redact("/memories/a.md", before[1].version)  # the version the rename moved
    after = memory.history("/memories/a.md")
    renamed = [e for e in after if e.note == "renamed to /memories/b.md"]
    assert len(renamed) == 1 and renamed[0].actor == "cli" and renamed[0].verified
    newest, copy = memory.history("/memories/b.md")[:2]
    assert memory.read_version("/memories/b.md", newest.version) == "three\n"
    assert (copy.operation, copy.size, copy.verified) == ("renamed", None, True)


def test_read_and_restore_on_a_store_without_versions_say_so() -> None:
    memory = open_memory(user_id="alice", store=InMemoryStore(versioned=False), master_key=MASTER_KEY)
    memory.create("/memories/a.md", "a\n")
    for call in (
        lambda: memory.read_version("/memories/a.md", "null"),
        lambda: memory.restore("/memories/a.md", "null"),
    ):
        with pytest.raises(ConfigurationError, match="keeps no versions"):
            call()


# -- found by review: each of these failed before its fix ------------------------------------------
def test_a_deleted_file_put_back_by_a_bucket_writer_is_not_hidden(make_versioned: MakeVersioned) -> None:
    memory = make_versioned("inmemory", actor="alice")
    memory.create("/memories/a.md", "secret plan\n")
    key = memory.layout.key_for(memory.gate.parse("/memories/a.md"))
    (old,) = [v for v in memory.store.list_versions(key) if not v.is_delete_marker]
    memory.delete("/memories/a.md")
    stored = memory.store.get_version(key, old.version_id)
    assert stored is not None
    memory.store.put(key, bytes(stored.body), dict(stored.metadata))  # no keys needed
    newest = memory.history("/memories/a.md")[0]
    assert (newest.current, newest.verified) == (True, False)
    assert newest.note == "out of sequence: a copy of an earlier version (replayed)"
    memory.store.delete([key])  # and deleted again: alice's record explains one deletion only
    deletions = [e for e in memory.history("/memories/a.md") if e.operation == "deleted"]
    assert [(e.actor, e.verified) for e in deletions] == [(None, False), ("alice", True)]


def test_renames_back_and_forth_are_followed_once_each() -> None:
    from s3memory.stores import DelegatingStore

    class Counting(DelegatingStore):
        requests = 0

        def _call(self, verb: str, perform: Callable[[], Any]) -> Any:
            Counting.requests += 1
            return perform()

    memory = open_memory(user_id="alice", store=Counting(InMemoryStore()), master_key=MASTER_KEY, key_cache=KeyCache())
    memory.create("/memories/a.md", "x")
    for _ in range(3):
        memory.rename("/memories/a.md", "/memories/b.md")
        memory.rename("/memories/b.md", "/memories/a.md")
    Counting.requests = 0
    entries = memory.history("/memories/a.md")
    assert [(e.path, e.operation) for e in entries] == [
        *[(path, "renamed") for path in ["/memories/a.md", "/memories/b.md"] * 3],
        ("/memories/a.md", "created"),
    ]
    assert Counting.requests < 40  # each (path, file) read once: it grew exponentially before


def test_a_redaction_whose_delete_failed_can_be_redone(make_versioned: MakeVersioned) -> None:
    memory = make_versioned("inmemory")
    memory.create("/memories/a.md", "leak\n")
    memory.str_replace("/memories/a.md", "leak", "fine")
    leaked = memory.history("/memories/a.md")[1].version
    real_delete = memory.store.delete_version

    def refused(key: str, version_id: str) -> None:
        raise StorageAccessDeniedError("Error: Memory storage failed during delete_object: access denied.")

    memory.store.delete_version = refused  # type: ignore[method-assign]
    with pytest.raises(StorageAccessDeniedError):
        memory.redact("/memories/a.md", leaked)
    assert memory.read_version("/memories/a.md", leaked) == "leak\n"  # still there, and says so
    memory.store.delete_version = real_delete  # type: ignore[method-assign]
    memory.redact("/memories/a.md", leaked)
    with pytest.raises(VersionNotFoundError, match="was redacted"):
        memory.read_version("/memories/a.md", leaked)


def test_after_redactions_each_deletion_keeps_its_own_author(make_versioned: MakeVersioned) -> None:
    alice, bob = make_versioned("inmemory", actor="alice"), make_versioned("inmemory", actor="bob")
    alice.create("/memories/a.md", "one\n")
    alice.delete("/memories/a.md")
    bob.create("/memories/a.md", "two\n")
    bob.delete("/memories/a.md")
    for entry in [e for e in alice.history("/memories/a.md") if e.operation == "created"]:
        alice.redact("/memories/a.md", entry.version)
    deletions = [(e.operation, e.actor, e.verified) for e in alice.history("/memories/a.md") if e.size is None]
    assert ("deleted", "bob", True) in deletions and ("deleted", "alice", True) in deletions
    assert [e.actor for e in alice.history("/memories/a.md") if e.operation == "deleted"] == ["bob", "alice"]


def test_restore_keeps_the_shape_rules_of_create(make_versioned: MakeVersioned) -> None:
    memory = make_versioned("inmemory")
    memory.create("/memories/x", "a file\n")
    version = memory.history("/memories/x")[0].version
    memory.delete("/memories/x")
    memory.create("/memories/x/inside.md", "now a directory\n")
    with pytest.raises(PathExistsError, match="it is a directory now"):
        memory.restore("/memories/x", version)
    memory.create("/memories/p/q.md", "q\n")
    q = memory.history("/memories/p/q.md")[0].version
    memory.delete("/memories/p")
    memory.create("/memories/p", "p is a file\n")
    with pytest.raises(NotADirectoryConflict, match="/memories/p is a file"):
        memory.restore("/memories/p/q.md", q)


def test_clearing_and_expiring_leave_records(make_versioned: MakeVersioned) -> None:
    memory = make_versioned("inmemory", actor="admin")
    memory.create("/memories/d/a.md", "a\n")
    memory.clear_all()
    (deleted,) = [e for e in memory.history("/memories/d/a.md") if e.operation == "deleted"]
    assert (deleted.actor, deleted.verified) == ("admin", True)


def test_changes_wants_aware_times(make_versioned: MakeVersioned) -> None:
    memory = make_versioned("inmemory")
    memory.create("/memories/a.md", "a\n")
    with pytest.raises(ConfigurationError, match="aware datetime"):
        memory.changes(since=datetime.datetime(2020, 1, 1))


# -- redaction removes the content, not one version ------------------------------------------------
# Each of these failed before the fix: a rename's copy, a restored copy, a held write or the
# current file kept the text a redaction reported gone.
def stored_texts(memory: EncryptedMemory) -> dict[tuple[str, str], str]:
    """(path, version id): the text of every stored version of every file of the tenant."""
    found = {}
    for version in memory.store.list_versions(memory.layout.memory_prefix):
        if version.is_delete_marker:
            continue
        path = memory.layout.path_for_key(version.key)
        stored = memory.store.get_version(version.key, version.version_id)
        assert path is not None and stored is not None
        plaintext = memory.files.decrypt(path.display, path.display, bytes(stored.body), stored.metadata)
        found[(path.display, version.version_id)] = plaintext.decode()
    return found


@pytest.mark.parametrize("flavour", VERSIONED)
def test_redacting_a_version_removes_the_copy_its_rename_made(make_versioned: MakeVersioned, flavour: str) -> None:
    memory = make_versioned(flavour, actor="session:leaky")
    memory.create("/memories/a.md", "token: hunter2\n")
    memory.rename("/memories/a.md", "/memories/b.md")
    memory.str_replace("/memories/b.md", "hunter2", "(removed)")
    renamed, original = memory.history("/memories/b.md")[1:]
    assert (renamed.path, renamed.operation, original.path) == ("/memories/b.md", "renamed", "/memories/a.md")
    answer = make_versioned(flavour, actor="admin").redact("/memories/a.md", original.version)
    assert not any("hunter2" in text for text in stored_texts(memory).values())
    assert answer.startswith(
        f"Redacted version {original.version} of /memories/a.md: removed 2 stored versions of its text "
        "(/memories/a.md, /memories/b.md), 0 held writes and "
    ), answer
    for path, version in [("/memories/b.md", renamed.version), ("/memories/a.md", original.version)]:
        with pytest.raises(VersionNotFoundError, match="was redacted"):
            memory.read_version(path, version)
    entries = memory.history("/memories/b.md")
    assert [(e.path, e.operation, e.size is None, e.verified) for e in entries] == [
        ("/memories/b.md", "modified", False, True),
        ("/memories/b.md", "renamed", True, True),
        ("/memories/a.md", "created", True, True),
    ]
    assert entries[1].note.startswith("redacted by admin at ") and entries[1].note.endswith(
        "(renamed from /memories/a.md)"
    )


def test_redacting_the_copy_removes_the_original_and_keeps_the_earlier_history(
    make_versioned: MakeVersioned,
) -> None:
    memory = make_versioned("inmemory", actor="cli")
    memory.create("/memories/a.md", "draft\n")
    memory.str_replace("/memories/a.md", "draft", "token: hunter2")
    memory.rename("/memories/a.md", "/memories/b.md")
    memory.str_replace("/memories/b.md", "hunter2", "(removed)")
    copy = memory.history("/memories/b.md")[1]
    assert (copy.path, copy.operation) == ("/memories/b.md", "renamed")
    memory.redact("/memories/b.md", copy.version)
    assert not any("hunter2" in text for text in stored_texts(memory).values())
    entries = memory.history("/memories/b.md")
    assert [(e.path, e.operation, e.size is None) for e in entries] == [
        ("/memories/b.md", "modified", False),
        ("/memories/b.md", "renamed", True),
        ("/memories/a.md", "modified", True),
        ("/memories/a.md", "created", False),
    ]
    assert memory.read_version("/memories/b.md", entries[-1].version) == "draft\n"
    assert memory.history("/memories/a.md")[0].note == "renamed to /memories/b.md"  # its record still told


@pytest.mark.parametrize("how", ["renamed", "restored", "written again"])
def test_a_version_whose_text_is_still_current_is_refused(make_versioned: MakeVersioned, how: str) -> None:
    memory = make_versioned("inmemory")
    memory.create("/memories/a.md", "token: hunter2\n")
    leaked = memory.history("/memories/a.md")[0]
    current = "/memories/b.md"
    if how == "renamed":
        memory.rename("/memories/a.md", current)
    else:
        memory.str_replace("/memories/a.md", "hunter2", "(removed)")
        if how == "restored":
            memory.restore("/memories/a.md", leaked.version)
            current = "/memories/a.md"
        else:
            memory.create(current, "token: hunter2\n")
    before = stored_texts(memory)
    with pytest.raises(ConfigurationError, match=f"is the current content of {re.escape(current)}"):
        memory.redact("/memories/a.md", leaked.version)
    assert stored_texts(memory) == before  # nothing was removed
    assert [r.path for r in memory.search("hunter2")] == [current]


def test_a_restored_copy_of_the_text_goes_with_it(make_versioned: MakeVersioned) -> None:
    memory = make_versioned("inmemory")
    memory.create("/memories/a.md", "token: hunter2\n")
    memory.str_replace("/memories/a.md", "hunter2", "x")
    leaked = memory.history("/memories/a.md")[1]
    memory.restore("/memories/a.md", leaked.version)
    memory.str_replace("/memories/a.md", "hunter2", "y")
    answer = memory.redact("/memories/a.md", leaked.version)
    assert not any("hunter2" in text for text in stored_texts(memory).values())
    assert "removed 2 stored versions of its text (/memories/a.md)" in answer
    assert [(e.operation, e.size is None, e.verified) for e in memory.history("/memories/a.md")] == [
        ("modified", False, True),
        ("restored", True, True),
        ("modified", False, True),
        ("created", True, True),
    ]
