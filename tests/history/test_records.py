"""History records sealed in their names (``_records``, ``_historykey``): what a bucket writer,
a rotation, skewed clocks and a case-insensitive disk cannot make them say.

Each test reproduces a way history went wrong in review of the listable records, and fails
on that code.
"""

from __future__ import annotations

import time
from pathlib import Path
from unittest import mock

from s3memory import InMemoryStore, KeyCache, MemoryVersion, open_memory, rotate_tenant_key
from s3memory._core.memory import EncryptedMemory
from s3memory.stores import LocalDirStore, ObjectStore
from s3memory.testing import TEST_MASTER_KEY

HISTORY_KEY = "alice/.s3memory/history-key"


def opened(store: ObjectStore, actor: str = "session:alice") -> EncryptedMemory:
    """A process of its own (a cold key cache) on ``store``."""
    return open_memory(user_id="alice", store=store, master_key=TEST_MASTER_KEY, actor=actor, key_cache=KeyCache())


def told(entries: list[MemoryVersion]) -> list[tuple[str, str, str | None, bool, str]]:
    return [(e.path, e.operation, e.actor, e.verified, e.note) for e in entries]


def test_a_deleted_or_spoiled_history_key_document_loses_no_deletion_or_rename() -> None:
    store = InMemoryStore()
    memory = opened(store)
    memory.create("/memories/a.md", "v1\n")
    memory.rename("/memories/a.md", "/memories/b.md")
    memory.delete("/memories/b.md")
    before = told(opened(store, "reader").history("/memories/b.md"))
    assert [entry[1:4] for entry in before] == [
        ("deleted", "session:alice", True),
        ("renamed", "session:alice", True),
        ("created", "session:alice", True),
    ]
    # Whoever may write the bucket (not delete versions) deletes the document; a later
    # write, and a reader, find the key again among its earlier versions: no new key.
    store.delete([HISTORY_KEY])
    opened(store, "session:bob").create("/memories/other.md", "x\n")
    assert told(opened(store, "reader").history("/memories/b.md")) == before
    # ... and the same for a document overwritten with garbage.
    store.put(HISTORY_KEY, b'{"v": 2, "kid": "x", "wrapper": "local", "wrapped": "AAAA"}', {})
    opened(store, "session:bob").str_replace("/memories/other.md", "x", "y")
    assert told(opened(store, "reader").history("/memories/b.md")) == before
    assert [e.actor for e in opened(store, "reader").history("/memories/other.md")] == ["session:bob"] * 2


def test_no_new_history_key_where_records_sealed_under_a_lost_one_exist() -> None:
    store = InMemoryStore()
    memory = opened(store)
    memory.create("/memories/a.md", "v1\n")
    memory.delete("/memories/a.md")
    # Destroyed for good (an administrator's right): every version of the document.
    for version in store.list_versions(HISTORY_KEY):
        store.delete_version(version.key, version.version_id)
    later = opened(store, "session:bob")
    later.create("/memories/c.md", "c\n")  # the write goes ahead; its record goes as a body
    assert store.get(HISTORY_KEY) is None
    assert [(e.operation, e.actor, e.verified) for e in opened(store).history("/memories/c.md")] == [
        ("created", "session:bob", True)
    ]


def test_records_fit_a_local_directory_on_a_case_insensitive_disk(tmp_path: Path) -> None:
    """There every capital letter of a name is escaped (%xx): records are named in base32."""
    root = tmp_path / "store"
    root.mkdir(mode=0o700)
    (root / ".keys").write_text("escaped\n")  # what a new store writes on such a file system
    store = LocalDirStore(root)
    memory = opened(store)
    memory.create("/memories/a.md", "one\n")
    memory.str_replace("/memories/a.md", "one", "two")
    memory.delete("/memories/a.md")
    records = [info.key for info in store.list("alice/.s3memory/history/")]
    assert len(records) == 3 and all(opened(store).layout.is_sealed_name_record(key) for key in records)
    assert [(e.operation, e.actor) for e in opened(store, "reader").history("/memories/a.md")] == [
        ("deleted", "session:alice"),
        ("modified", "session:alice"),
        ("created", "session:alice"),
    ]
    memory.create("/memories/a.md", "three\n")
    oldest = opened(store).history("/memories/a.md")[-1]
    assert opened(store, "admin").redact("/memories/a.md", oldest.version).startswith("Redacted version")


def test_a_body_renamed_away_and_back_is_told_right_whatever_the_clocks() -> None:
    store = InMemoryStore()
    real = time.time
    with mock.patch("time.time", lambda: real() + 3600):  # writer A's clock runs an hour fast
        opened(store, "writer:A").create("/memories/a.md", "hello\n")
    writer_b = opened(store, "writer:B")
    writer_b.rename("/memories/a.md", "/memories/b.md")
    writer_b.rename("/memories/b.md", "/memories/a.md")
    entries = opened(store, "reader").history("/memories/a.md")
    by_version = {e.version: (e.operation, e.actor, e.verified) for e in entries if e.path == "/memories/a.md"}
    versions = [v for v in store.list_versions("alice/memories/a.md") if not v.is_delete_marker]
    newest, first = versions[0].version_id, versions[-1].version_id
    assert by_version[first] == ("created", "writer:A", True)
    assert by_version[newest] == ("renamed", "writer:B", True)


def test_a_rotation_then_renames_away_and_back_raise_no_false_alarm() -> None:
    store = InMemoryStore()
    opened(store).create("/memories/a.md", "hello\n")
    rotate_tenant_key(opened(store, "admin"), retire_after=0)  # a re-wrap in place: the same ETag
    memory = opened(store)
    memory.rename("/memories/a.md", "/memories/b.md")
    memory.rename("/memories/b.md", "/memories/a.md")
    entries = opened(store, "reader").history("/memories/a.md")
    assert [(e.path, e.operation, e.verified) for e in entries] == [
        ("/memories/a.md", "renamed", True),
        ("/memories/b.md", "renamed", True),
        ("/memories/a.md", "created", True),
    ]


def test_a_forged_copy_of_a_renamed_file_is_not_verified_in_the_feed_either() -> None:
    store = InMemoryStore()
    memory = opened(store)
    memory.create("/memories/a.md", "hello\n")
    memory.create("/memories/c.md", "other\n")
    memory.rename("/memories/a.md", "/memories/b.md")
    # The renamed body back, with another file's metadata (a forged provenance).
    first = [v for v in store.list_versions("alice/memories/b.md") if not v.is_delete_marker][-1]
    body = store.get_version("alice/memories/b.md", first.version_id)
    other = store.head("alice/memories/c.md")
    assert body is not None and other is not None
    store.put("alice/memories/b.md", bytes(body.body), dict(other.metadata))
    reader = opened(store, "reader")
    newest_in_history = reader.history("/memories/b.md")[0]
    newest_in_feed = next(e for e in reader.changes() if e.path == "/memories/b.md")
    assert newest_in_history.verified is False and newest_in_history.actor is None
    assert (newest_in_feed.version, newest_in_feed.verified, newest_in_feed.actor) == (
        newest_in_history.version,
        False,
        None,
    )


def test_a_redacted_version_put_back_by_the_bucket_is_not_verified() -> None:
    store = InMemoryStore()
    memory = opened(store)
    memory.create("/memories/a.md", "my password is hunter2\n")
    saved = store.get("alice/memories/a.md")  # a bucket writer keeps the ciphertext
    assert saved is not None
    memory.str_replace("/memories/a.md", "my password is hunter2", "(removed)")
    leaked = opened(store).history("/memories/a.md")[-1]
    opened(store, "admin").redact("/memories/a.md", leaked.version)
    store.put("alice/memories/a.md", bytes(saved.body), dict(saved.metadata))  # the replay
    newest = opened(store, "reader").history("/memories/a.md")[0]
    assert newest.current and not newest.verified
    assert newest.note == "out of sequence: a copy of a redacted version (replayed)"


def test_record_names_decode_as_base32_does() -> None:
    """The fast encoder and decoder of record names agree with the standard library's, and refuses
    whatever is not unpadded lowercase base32 (a planted name is never half-read)."""
    import base64
    import os

    import pytest

    from s3memory._history.records import _b32decode, _b32encode

    for size in range(1, 300):
        raw = os.urandom(size)
        text = base64.b32encode(raw).rstrip(b"=").decode().lower()
        assert _b32decode(text) == raw and _b32encode(raw) == text
    for planted in ["", "A" * 8, "ab_cdefg", "abcd0fgh", " abcdefg", "abcdefg9", "a" * 9, "ab", "abcdefgz"[:7] + "="]:
        with pytest.raises(ValueError):
            _b32decode(planted)


def _sealed_key_as_before(stem_key: str, stem: str, history_key: bytes, record: dict[str, object]) -> str:
    """What ``_sealed_key`` made before a record's name length was known from its size."""
    import base64
    import json
    import os

    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = os.urandom(12)
    plaintext = json.dumps(record, separators=(",", ":")).encode()
    sealed = AESGCM(history_key).encrypt(nonce, plaintext, b"s3memory record v2\x00" + stem.encode("ascii"))
    text = base64.b32encode(nonce + sealed).rstrip(b"=").decode("ascii").lower()
    return f"{stem_key}s" + "/".join(text[i : i + 200] for i in range(0, len(text), 200))


def test_a_record_name_is_as_long_as_foretold_and_as_before() -> None:
    """The length known before sealing is the sealed name's, to the byte, across segment
    boundaries and a stem spelt in UTF-8; and the name itself is what it was before."""
    import json

    from s3memory._history import records

    key = bytes(range(32))
    for stem_key in ["alice/.s3memory/history/" + "0" * 32 + "/0000000000000001-", "é/" + "1" * 32 + "/2-"]:
        for size in [*range(700), 1000, 5000]:
            record = {"v": 2, "op": "created", "path": "x" * size}
            plaintext = json.dumps(record, separators=(",", ":")).encode()
            with mock.patch("os.urandom", lambda n: b"\x07" * n):
                now = records._sealed_key(stem_key, "stem-", key, plaintext)
                before = _sealed_key_as_before(stem_key, "stem-", key, record)
            assert now == before
            assert len(now.encode("utf-8")) == records._sealed_key_bytes(stem_key, len(plaintext))


def test_a_record_too_long_for_a_name_is_never_sealed_into_one() -> None:
    """A deletion of many files is stored as a body without first being sealed and spelt
    as a name (hundreds of KB, thrown away); smaller records are still sealed in names."""
    from s3memory._history import records

    store = InMemoryStore()
    memory = opened(store)
    for i in range(40):
        memory.create(f"/memories/dir/a-rather-long-file-name-for-a-note-{i:03d}.md", f"{i}\n")
    sealed_sizes: list[int] = []
    real = records._sealed_key

    def spy(stem_key: str, stem: str, history_key: bytes, plaintext: bytes) -> str:
        sealed_sizes.append(len(plaintext))
        return real(stem_key, stem, history_key, plaintext)

    with mock.patch.object(records, "_sealed_key", spy):
        memory.delete("/memories/dir")
        memory.create("/memories/b.md", "b\n")
    assert len(sealed_sizes) == 1  # the creation's record only
    bodies = [
        i.key for i in store.list("alice/.s3memory/history/") if not opened(store).layout.is_sealed_name_record(i.key)
    ]
    assert len(bodies) >= 1  # the deletion's record(s), as bodies
    entries = opened(store, "reader").history("/memories/dir/a-rather-long-file-name-for-a-note-007.md")
    assert [(e.operation, e.verified) for e in entries] == [("deleted", True), ("created", True)]
