"""A hostile bucket: whoever can write to the store must not be able to make a tool show
altered, moved or foreign content as a memory file, nor break the tool for other files.

Every tampered object fails with one opaque :class:`IntegrityError` (the same message
whatever was changed), never with plaintext and never with another exception; keys that
no valid path maps to are invisible; tenants never see or touch each other's keys.

Tampering goes through ``memory.store`` (get/put/delete), so the same attacks run against
every store. Every read is done twice: by the tool that wrote (warm key caches) and by a
fresh tool with its own empty :class:`KeyCache`, so caches cannot hide a failure.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
from helpers import FLAVOURS, store_matrix

from s3memory import (
    ConfigurationError,
    EncryptedMemory,
    ForeignObjectError,
    IntegrityError,
    KeyCache,
    PathNotFoundError,
    S3MemoryError,
    S3Store,
    StorageAccessDeniedError,
    TenantKeyError,
    binding_context,
    open_memory,
    parse_path,
)

MakeMemory = Callable[..., EncryptedMemory]
Metadata = dict[str, str]

SECRET = "the secret plan: 42\nsecond line\n"
OTHER_SECRET = "bob's diary\n"
ALL_FLAVOURS = ["inmemory", "localdir", "s3-tenant-local", "s3-tenant-kms", "s3-kms"]
TENANT_KEY_FLAVOURS = ["inmemory", "localdir", "s3-tenant-local", "s3-tenant-kms"]
# LocalDirStore cannot hold keys such as "a//b" or "../x" at all.
FREE_KEY_FLAVOURS = ["inmemory", "s3-tenant-local", "s3-tenant-kms", "s3-kms"]


def opaque(shown_path: str) -> str:
    return (
        f"Error: The file {shown_path} failed its integrity check and cannot be read "
        "(it was modified, truncated, moved, or not written for this user)."
    )


def key_of(memory: EncryptedMemory, path: str) -> str:
    return memory.layout.key_for(parse_path(path))


def raw(memory: EncryptedMemory, path: str) -> tuple[bytes, Metadata]:
    stored = memory.store.get(key_of(memory, path))
    assert stored is not None
    return bytes(stored.body), dict(stored.metadata)


def overwrite(memory: EncryptedMemory, path: str, body: bytes, metadata: Metadata) -> None:
    memory.store.put(key_of(memory, path), body, metadata)


def context_field(metadata: Metadata) -> str:
    return "x-amz-t" if metadata["x-amz-w"] == "12" else "x-amz-m"


def flip_b64(value: str, index: int = -1) -> str:
    data = bytearray(base64.b64decode(value))
    data[index] ^= 0x01
    return base64.b64encode(bytes(data)).decode()


def assert_opaque_everywhere(tools: list[EncryptedMemory], path: str) -> None:
    """view, str_replace and insert all fail with the opaque message and write nothing."""
    writer = tools[0]
    before = writer.store.get(key_of(writer, path))
    calls: list[Callable[[EncryptedMemory], object]] = [
        lambda m: m.view(path),
        lambda m: m.view(path, [1, 1]),
        lambda m: m.str_replace(path, "secret", "public"),
        lambda m: m.insert(path, 0, "injected\n"),
        lambda m: m.execute({"command": "view", "path": path}),
    ]
    for tool in tools:
        for call in calls:
            with pytest.raises(IntegrityError) as info:
                call(tool)
            assert type(info.value) is IntegrityError
            assert str(info.value) == opaque(path)
            assert "secret" not in str(info.value) and "diary" not in str(info.value)
    after = writer.store.get(key_of(writer, path))
    assert after == before, "a failed edit must not write"


# --- tampered bodies ------------------------------------------------------------------

BODY_TAMPERS: dict[str, Callable[[bytes], bytes]] = {
    "flip-first-byte": lambda b: bytes([b[0] ^ 0x80]) + b[1:],
    "flip-middle-byte": lambda b: b[: len(b) // 2] + bytes([b[len(b) // 2] ^ 0x01]) + b[len(b) // 2 + 1 :],
    "flip-tag-byte": lambda b: b[:-1] + bytes([b[-1] ^ 0x01]),
    "truncated-by-one": lambda b: b[:-1],
    "truncated-to-tag": lambda b: b[:16],
    "truncated-to-tag-of-tail": lambda b: b[-16:],
    "shorter-than-tag": lambda b: b[:15],
    "empty": lambda b: b"",
    "extended": lambda b: b + b"\x00",
    "tag-dropped": lambda b: b[:-16],
}


@pytest.mark.parametrize(
    ("flavour", "tamper"), store_matrix(FLAVOURS, BODY_TAMPERS, {"flip-tag-byte", "truncated-by-one"})
)
def test_tampered_body(make_memory: MakeMemory, flavour: str, tamper: str) -> None:
    writer = make_memory(flavour)
    writer.create("/memories/a.txt", SECRET)
    body, metadata = raw(writer, "/memories/a.txt")
    overwrite(writer, "/memories/a.txt", BODY_TAMPERS[tamper](body), metadata)
    assert_opaque_everywhere([writer, make_memory(flavour)], "/memories/a.txt")


# --- tampered metadata ----------------------------------------------------------------


def _set(field: str, value: str) -> Callable[[Metadata], Metadata]:
    return lambda m: {**m, field: value}


def _drop(field: str) -> Callable[[Metadata], Metadata]:
    return lambda m: {k: v for k, v in m.items() if k != field}


def _edit_context(change: Callable[[dict[str, str]], None]) -> Callable[[Metadata], Metadata]:
    def apply(metadata: Metadata) -> Metadata:
        field = context_field(metadata)
        context = json.loads(metadata[field])
        change(context)
        return {**metadata, field: json.dumps(context, sort_keys=True, separators=(",", ":"))}

    return apply


def _other_wrap_algorithm(metadata: Metadata) -> Metadata:
    return {**metadata, "x-amz-w": "02" if metadata["x-amz-w"] == "12" else "12"}


def _move_context_field(metadata: Metadata) -> Metadata:
    """Same context, stored under the other wrap algorithm's field name."""
    field = context_field(metadata)
    other = "x-amz-m" if field == "x-amz-t" else "x-amz-t"
    moved = {k: v for k, v in metadata.items() if k != field}
    return {**moved, other: metadata[field]}


METADATA_TAMPERS: dict[str, Callable[[Metadata], Metadata]] = {
    "x-amz-c-other-suite": _set("x-amz-c", "114"),
    "x-amz-c-v2-cipher": _set("x-amz-c", "AES/GCM/NoPadding"),
    "x-amz-c-missing": _drop("x-amz-c"),
    "x-amz-3-flipped": lambda m: {**m, "x-amz-3": flip_b64(m["x-amz-3"])},
    "x-amz-3-truncated": lambda m: {**m, "x-amz-3": base64.b64encode(base64.b64decode(m["x-amz-3"])[:-1]).decode()},
    "x-amz-3-not-base64": _set("x-amz-3", "not base64!"),
    "x-amz-3-missing": _drop("x-amz-3"),
    "x-amz-w-other": _other_wrap_algorithm,
    "x-amz-w-unknown": _set("x-amz-w", "kms+context"),
    "x-amz-w-missing": _drop("x-amz-w"),
    "context-other-path": _edit_context(lambda c: c.update(binding_context(c["s3memory:tenant"], "/memories/b.txt"))),
    "context-other-tenant": _edit_context(lambda c: c.update({"s3memory:tenant": "bob"})),
    "context-extra-entry": _edit_context(lambda c: c.update({"extra": "entry"})),
    "context-entry-removed": _edit_context(lambda c: c.pop("s3memory:path")),
    "context-not-json": lambda m: {**m, context_field(m): "not json"},
    "context-missing": lambda m: _drop(context_field(m))(m),
    "context-in-wrong-field": _move_context_field,
    "x-amz-d-flipped": lambda m: {**m, "x-amz-d": flip_b64(m["x-amz-d"], 0)},
    "x-amz-d-short": lambda m: {**m, "x-amz-d": base64.b64encode(base64.b64decode(m["x-amz-d"])[:-1]).decode()},
    "x-amz-d-missing": _drop("x-amz-d"),
    "x-amz-i-flipped": lambda m: {**m, "x-amz-i": flip_b64(m["x-amz-i"], 5)},
    "x-amz-i-long": lambda m: {**m, "x-amz-i": base64.b64encode(base64.b64decode(m["x-amz-i"]) + b"\x00").decode()},
    "x-amz-i-missing": _drop("x-amz-i"),
    "legacy-x-amz-key-v2-added": lambda m: {**m, "x-amz-key-v2": m["x-amz-3"]},
    "legacy-x-amz-iv-added": _set("x-amz-iv", base64.b64encode(b"\x01" * 12).decode()),
}


# Tampering is caught above the store: every tamper on every store in CI, and in the default
# tier on S3 one tamper of each field (the object's round trip through S3's headers).
SAMPLED_ON_S3 = {
    "x-amz-c-missing",
    "x-amz-3-flipped",
    "x-amz-w-other",
    "context-other-tenant",
    "x-amz-d-flipped",
    "x-amz-i-flipped",
    "legacy-x-amz-key-v2-added",
}


@pytest.mark.parametrize(("flavour", "tamper"), store_matrix(FLAVOURS, METADATA_TAMPERS, SAMPLED_ON_S3))
def test_tampered_metadata(make_memory: MakeMemory, flavour: str, tamper: str, request: pytest.FixtureRequest) -> None:
    writer = make_memory(flavour)
    writer.create("/memories/a.txt", SECRET)
    body, metadata = raw(writer, "/memories/a.txt")
    tampered = METADATA_TAMPERS[tamper](metadata)
    assert tampered != metadata
    overwrite(writer, "/memories/a.txt", body, tampered)
    assert_opaque_everywhere([writer, make_memory(flavour)], "/memories/a.txt")


def test_metadata_without_suite_and_wrapped_key_is_foreign(make_memory: MakeMemory, flavour: str) -> None:
    writer = make_memory(flavour)
    writer.create("/memories/a.txt", SECRET)
    body, metadata = raw(writer, "/memories/a.txt")
    stripped = {k: v for k, v in metadata.items() if k not in ("x-amz-c", "x-amz-3")}
    overwrite(writer, "/memories/a.txt", body, stripped)
    with pytest.raises(ForeignObjectError) as info:
        make_memory(flavour).view("/memories/a.txt")
    assert "secret" not in str(info.value)


# --- moved objects --------------------------------------------------------------------


def test_object_swapped_with_another_paths_object(make_memory: MakeMemory, flavour: str) -> None:
    writer = make_memory(flavour)
    writer.create("/memories/a.txt", SECRET)
    writer.create("/memories/b.txt", "harmless\n")
    body, metadata = raw(writer, "/memories/a.txt")
    overwrite(writer, "/memories/b.txt", body, metadata)
    tools = [writer, make_memory(flavour)]
    assert_opaque_everywhere(tools, "/memories/b.txt")
    # a.txt itself is untouched and still reads.
    for tool in tools:
        assert "secret plan" in tool.view("/memories/a.txt")


def test_object_copied_to_a_new_path(make_memory: MakeMemory, flavour: str) -> None:
    writer = make_memory(flavour)
    writer.create("/memories/a.txt", SECRET)
    body, metadata = raw(writer, "/memories/a.txt")
    for target in ("/memories/c.txt", "/memories/dir/a.txt", "/memories/A.txt", "/memories/a.txt.bak"):
        overwrite(writer, target, body, metadata)
        assert_opaque_everywhere([writer, make_memory(flavour)], target)


@pytest.mark.parametrize("other_user", ["bob", "alice2"])
def test_object_copied_from_another_tenant(make_memory: MakeMemory, flavour: str, other_user: str) -> None:
    alice = make_memory(flavour)
    other = make_memory(flavour, user_id=other_user)
    alice.create("/memories/a.txt", SECRET)
    other.create("/memories/a.txt", OTHER_SECRET)
    body, metadata = raw(other, "/memories/a.txt")
    overwrite(alice, "/memories/a.txt", body, metadata)
    assert_opaque_everywhere([alice, make_memory(flavour)], "/memories/a.txt")
    assert "diary" in other.view("/memories/a.txt")


def test_object_swapped_with_forged_context(
    make_memory: MakeMemory, flavour: str, request: pytest.FixtureRequest
) -> None:
    """The attacker also rewrites the (unencrypted) context to the target path's."""
    writer = make_memory(flavour)
    writer.create("/memories/a.txt", SECRET)
    writer.create("/memories/b.txt", "harmless\n")
    body, metadata = raw(writer, "/memories/a.txt")
    _, target_metadata = raw(writer, "/memories/b.txt")
    field = context_field(metadata)
    overwrite(writer, "/memories/b.txt", body, {**metadata, field: target_metadata[field]})
    assert_opaque_everywhere([writer, make_memory(flavour)], "/memories/b.txt")


def test_object_from_another_tenant_with_forged_context(
    make_memory: MakeMemory, flavour: str, request: pytest.FixtureRequest
) -> None:
    alice = make_memory(flavour)
    bob = make_memory(flavour, user_id="bob")
    alice.create("/memories/a.txt", SECRET)
    bob.create("/memories/a.txt", OTHER_SECRET)
    body, metadata = raw(bob, "/memories/a.txt")
    _, alice_metadata = raw(alice, "/memories/a.txt")
    field = context_field(metadata)
    overwrite(alice, "/memories/a.txt", body, {**metadata, field: alice_metadata[field]})
    assert_opaque_everywhere([alice, make_memory(flavour)], "/memories/a.txt")


def test_mixing_body_and_metadata_of_two_versions_fails(make_memory: MakeMemory, flavour: str) -> None:
    """An old body under the new metadata (or the reverse) is a rollback attempt."""
    writer = make_memory(flavour)
    writer.create("/memories/a.txt", SECRET)
    old_body, old_metadata = raw(writer, "/memories/a.txt")
    writer.str_replace("/memories/a.txt", "42", "43")
    new_body, new_metadata = raw(writer, "/memories/a.txt")
    for body, metadata in ((old_body, new_metadata), (new_body, old_metadata)):
        overwrite(writer, "/memories/a.txt", body, metadata)
        assert_opaque_everywhere([writer, make_memory(flavour)], "/memories/a.txt")


def test_rename_does_not_launder_a_tampered_object(make_memory: MakeMemory, flavour: str) -> None:
    writer = make_memory(flavour)
    writer.create("/memories/dir/good.txt", "good\n")
    writer.create("/memories/dir/moved.txt", "harmless\n")
    writer.create("/memories/dir/body.txt", SECRET)
    writer.create("/memories/other.txt", SECRET)
    # one object from another path, one with a flipped body byte
    overwrite(writer, "/memories/dir/moved.txt", *raw(writer, "/memories/other.txt"))
    body, metadata = raw(writer, "/memories/dir/body.txt")
    overwrite(writer, "/memories/dir/body.txt", body[:-1] + bytes([body[-1] ^ 1]), metadata)
    assert writer.rename("/memories/dir", "/memories/new") == "Successfully renamed /memories/dir to /memories/new"
    for tool in (writer, make_memory(flavour)):
        assert "good" in tool.view("/memories/new/good.txt")
    assert_opaque_everywhere([writer, make_memory(flavour)], "/memories/new/moved.txt")
    assert_opaque_everywhere([writer, make_memory(flavour)], "/memories/new/body.txt")
    # renaming a single tampered file does not launder it either
    writer.rename("/memories/new/moved.txt", "/memories/laundered.txt")
    assert_opaque_everywhere([writer, make_memory(flavour)], "/memories/laundered.txt")


def test_tampered_file_does_not_break_the_listing(make_memory: MakeMemory, flavour: str) -> None:
    writer = make_memory(flavour)
    writer.create("/memories/a.txt", SECRET)
    writer.create("/memories/b.txt", "ok\n")
    body, metadata = raw(writer, "/memories/a.txt")
    overwrite(writer, "/memories/a.txt", body, {**metadata, "x-amz-d": flip_b64(metadata["x-amz-d"])})
    listing = make_memory(flavour).view("/memories")
    assert "/memories/a.txt" in listing
    assert "3B\t/memories/b.txt" in listing
    assert "secret" not in listing


# --- foreign objects ------------------------------------------------------------------


def put_foreign(memory: EncryptedMemory, key: str, body: bytes) -> None:
    """A plain, unencrypted object, as another program would write it."""
    store = memory.store
    if isinstance(store, S3Store):
        store.client.put_object(Bucket=store.bucket, Key=key, Body=body)
    else:
        store.put(key, body, {})


def test_foreign_object(make_memory: MakeMemory, flavour: str) -> None:
    memory = make_memory(flavour)
    memory.create("/memories/a.txt", SECRET)
    memory.create("/memories/dir/b.txt", "bee\n")
    put_foreign(memory, "alice/memories/foreign.txt", b"hello")
    put_foreign(memory, "alice/memories/dir/foreign.md", b"# plain markdown\n")
    expected = (
        "Error: The file /memories/foreign.txt was not written by s3memory (it is not encrypted) and cannot be read."
    )
    for tool in (memory, make_memory(flavour)):
        for call in (
            lambda t: t.view("/memories/foreign.txt"),
            lambda t: t.str_replace("/memories/foreign.txt", "hello", "bye"),
            lambda t: t.insert("/memories/foreign.txt", 0, "x"),
        ):
            with pytest.raises(ForeignObjectError) as info:
                call(tool)
            assert str(info.value) == expected
        listing = tool.view("/memories")
        assert "/memories/a.txt" in listing
        assert "/memories/dir/b.txt" in listing
        assert f"{len(SECRET)}B\t/memories/a.txt" in listing
        assert "4B\t/memories/dir/b.txt" in listing
        assert "/memories/dir/b.txt" in tool.view("/memories/dir")
        assert "bee" in tool.view("/memories/dir/b.txt")
    assert memory.store.get("alice/memories/foreign.txt").body == b"hello"  # type: ignore[union-attr]


def test_foreign_object_is_moved_and_deleted_unchanged(make_memory: MakeMemory, flavour: str) -> None:
    memory = make_memory(flavour)
    memory.create("/memories/dir/b.txt", "bee\n")
    put_foreign(memory, "alice/memories/dir/foreign.txt", b"hello")
    assert memory.rename("/memories/dir", "/memories/moved") == "Successfully renamed /memories/dir to /memories/moved"
    moved = memory.store.get("alice/memories/moved/foreign.txt")
    assert moved is not None and moved.body == b"hello"
    assert "bee" in make_memory(flavour).view("/memories/moved/b.txt")
    with pytest.raises(ForeignObjectError):
        memory.view("/memories/moved/foreign.txt")
    assert memory.delete("/memories/moved") == "Successfully deleted /memories/moved"
    assert list(memory.store.list("alice/memories/")) == []


# --- keys no valid path maps to -------------------------------------------------------

INVALID_KEYS = [
    "alice/memories/dir/",
    "alice/memories/a//b",
    "alice/memories/../x",
    "alice/memories/./y",
    "alice/memories/%2e%2e/z",
    "alice/memories/back\\slash",
    "alice/memories/tab\there",
    "alice/memories/cafe\u0301.txt",  # not NFC
    "alice/memories/zero\u200bwidth",
    "alice/memories/",
    "alice/memoriesX/z.txt",
    "alice/memories",
]


@pytest.mark.parametrize("flavour_name", FREE_KEY_FLAVOURS)
def test_keys_no_valid_path_maps_to_are_invisible(make_memory: MakeMemory, flavour_name: str) -> None:
    memory = make_memory(flavour_name)
    memory.create("/memories/a.txt", "hello\n")
    _, metadata = raw(memory, "/memories/a.txt")
    for key in INVALID_KEYS:
        # sealed-looking metadata, so nothing short-circuits on "foreign"
        memory.store.put(key, b"x" * 40, metadata)
    stored = {info.key for info in memory.store.list("alice/")}
    assert set(INVALID_KEYS) <= stored, "the store must hold every key as given"
    expected = (
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and "
        "node_modules:\n6B\t/memories\n6B\t/memories/a.txt"
    )
    for tool in (memory, make_memory(flavour_name)):
        assert tool.view("/memories") == expected
        assert tool.view("/memories/") == expected
        for path in ("/memories/dir", "/memories/a", "/memories/b"):
            with pytest.raises(PathNotFoundError):
                tool.view(path)
        assert "hello" in tool.view("/memories/a.txt")


# --- tenant isolation -----------------------------------------------------------------


def _others(memory: EncryptedMemory) -> dict[str, str]:
    """Raw key -> ETag of every object that is not alice's."""
    return {info.key: info.etag for info in memory.store.list("") if not info.key.startswith("alice/")}


def test_tenant_isolation(make_memory: MakeMemory, flavour: str) -> None:
    alice = make_memory(flavour)
    alice2 = make_memory(flavour, user_id="alice2")
    bob = make_memory(flavour, user_id="bob")
    alice.create("/memories/notes/a.txt", "alice\n")
    alice2.create("/memories/notes/b.txt", "alice2 note\n")
    alice2.create("/memories/notes/sub/c.txt", "alice2 deep\n")
    bob.create("/memories/notes/d.txt", "bob note\n")
    bob.create("/memories/notes.txt", "bob flat\n")

    listing = alice.view("/memories")
    assert "/memories/notes/a.txt" in listing
    for foreign in ("b.txt", "c.txt", "d.txt", "notes.txt", "sub"):
        assert foreign not in listing
    assert "b.txt" in alice2.view("/memories/notes") and "a.txt" not in alice2.view("/memories/notes")
    assert "d.txt" in bob.view("/memories/notes") and "a.txt" not in bob.view("/memories/notes")
    for path in ("/memories/notes/b.txt", "/memories/notes/d.txt", "/memories/notes.txt", "/memories/notes/sub"):
        with pytest.raises(PathNotFoundError):
            alice.view(path)

    others = _others(alice)
    assert {"alice2/memories/notes/b.txt", "bob/memories/notes/d.txt"} <= set(others)

    assert alice.rename("/memories/notes", "/memories/archive") == (
        "Successfully renamed /memories/notes to /memories/archive"
    )
    assert _others(alice) == others
    alice.create("/memories/notes.txt", "alice flat\n")  # bob has this path: no conflict
    assert alice.delete("/memories/archive") == "Successfully deleted /memories/archive"
    assert alice.delete("/memories/notes.txt") == "Successfully deleted /memories/notes.txt"
    assert _others(alice) == others
    assert [info.key for info in alice.store.list("alice/memories/")] == []

    assert "alice2 deep" in make_memory(flavour, user_id="alice2").view("/memories/notes/sub/c.txt")
    assert "bob flat" in make_memory(flavour, user_id="bob").view("/memories/notes.txt")
    with pytest.raises(PathNotFoundError):
        alice.view("/memories/archive")


def test_tenant_isolation_delete_root_level_files(make_memory: MakeMemory, flavour: str) -> None:
    alice = make_memory(flavour)
    alice2 = make_memory(flavour, user_id="alice2")
    alice.create("/memories/x.txt", "a\n")
    alice2.create("/memories/x.txt", "b\n")
    others = _others(alice)
    alice.delete("/memories/x.txt")
    assert _others(alice) == others
    assert "b" in alice2.view("/memories/x.txt")


# --- tenant key -----------------------------------------------------------------------

TENANT_KEY = "alice/.s3memory/tenant-key"


def _assert_clear_key_error(exc: BaseException) -> None:
    assert isinstance(exc, (IntegrityError, ConfigurationError))
    message = str(exc)
    assert message.startswith("Error: ")
    assert "tenant key" in message or "master key" in message


def _same_store_tool(memory: EncryptedMemory, **options: Any) -> EncryptedMemory:
    return open_memory(user_id="alice", store=memory.store, key_cache=KeyCache(), **options)


@pytest.mark.parametrize("flavour_name", TENANT_KEY_FLAVOURS)
def test_other_master_key_fails_clearly(make_memory: MakeMemory, flavour_name: str) -> None:
    memory = make_memory(flavour_name)
    memory.create("/memories/a.txt", SECRET)
    tenant_key_before = memory.store.get(TENANT_KEY)
    other = _same_store_tool(memory, master_key=bytes(range(1, 33)))
    for call in (
        lambda: other.view("/memories/a.txt"),
        lambda: other.str_replace("/memories/a.txt", "secret", "x"),
        lambda: other.create("/memories/new.txt", "x"),
    ):
        with pytest.raises(S3MemoryError) as info:
            call()
        _assert_clear_key_error(info.value)
        assert "secret" not in str(info.value)
    if flavour_name == "s3-tenant-kms":
        assert isinstance(info.value, ConfigurationError)  # a KMS-wrapped key, a local master key
    else:
        assert "wrong master key" in str(info.value)
    assert memory.store.get(TENANT_KEY) == tenant_key_before
    assert memory.store.head("alice/memories/new.txt") is None
    assert "secret plan" in make_memory(flavour_name).view("/memories/a.txt")


@pytest.mark.parametrize("flavour_name", ["inmemory", "s3-tenant-local"])
def test_kms_master_key_on_locally_wrapped_tenant_key(
    make_memory: MakeMemory, flavour_name: str, kms_client: Any, kms_key_id: str
) -> None:
    memory = make_memory(flavour_name)
    memory.create("/memories/a.txt", SECRET)
    other = _same_store_tool(memory, kms_key_id=kms_key_id, kms_client=kms_client)
    with pytest.raises(ConfigurationError) as info:
        other.view("/memories/a.txt")
    _assert_clear_key_error(info.value)


def test_other_kms_key_fails_clearly(make_memory: MakeMemory, kms_client: Any) -> None:
    memory = make_memory("s3-tenant-kms")
    memory.create("/memories/a.txt", SECRET)
    other_key = kms_client.create_key(Description="another key")["KeyMetadata"]["Arn"]
    other = _same_store_tool(memory, kms_key_id=other_key, kms_client=kms_client)
    with pytest.raises(S3MemoryError) as info:
        other.view("/memories/a.txt")
    # Real KMS answers IncorrectKeyException (-> the tenant-key IntegrityError); moto answers
    # AccessDeniedException, which s3memory reports as a denied key: clear either way.
    if isinstance(info.value, StorageAccessDeniedError):
        assert str(info.value) == (
            "Error: Memory storage failed during kms:decrypt: access to the encryption key was denied."
        )
    else:
        _assert_clear_key_error(info.value)


def _tamper_wrapped(document: dict[str, Any]) -> dict[str, Any]:
    return {**document, "wrapped": flip_b64(document["wrapped"])}


TENANT_KEY_TAMPERS: dict[str, Callable[[bytes], bytes]] = {
    "wrapped-flipped": lambda b: json.dumps(_tamper_wrapped(json.loads(b))).encode(),
    "wrapped-truncated": lambda b: json.dumps({**json.loads(b), "wrapped": "AAAA"}).encode(),
    "wrapped-empty": lambda b: json.dumps({**json.loads(b), "wrapped": ""}).encode(),
    "wrapped-not-base64": lambda b: json.dumps({**json.loads(b), "wrapped": "%%%"}).encode(),
    "wrapped-not-a-string": lambda b: json.dumps({**json.loads(b), "wrapped": 7}).encode(),
    "wrapped-missing": lambda b: json.dumps({k: v for k, v in json.loads(b).items() if k != "wrapped"}).encode(),
    "kid-changed": lambda b: json.dumps({**json.loads(b), "kid": "0000000000000000"}).encode(),
    "kid-not-a-string": lambda b: json.dumps({**json.loads(b), "kid": 5}).encode(),
    # A version-2 document (bound to its deployment) relabelled as version 1 (unbound).
    "version-downgraded": lambda b: json.dumps({**json.loads(b), "v": 1}).encode(),
    "version-unknown": lambda b: json.dumps({**json.loads(b), "v": 99}).encode(),
    "wrapper-unknown": lambda b: json.dumps({**json.loads(b), "wrapper": "rot13"}).encode(),
    "not-json": lambda b: b"garbage",
    "empty": lambda b: b"",
    "not-utf8": lambda b: b"\xff\xfe\xfd",
    "json-array": lambda b: b"[]",
    "json-null": lambda b: b"null",
    "json-string": lambda b: b'"tenant-key"',
    "json-number": lambda b: b"5",
    "truncated": lambda b: b[: len(b) // 2],
    "deeply-nested": lambda b: b"[" * 100_000 + b"]" * 100_000,
}


@pytest.mark.parametrize(
    ("flavour_name", "tamper"),
    store_matrix(TENANT_KEY_FLAVOURS, TENANT_KEY_TAMPERS, {"wrapped-flipped", "version-downgraded", "not-json"}),
)
def test_tampered_tenant_key_fails_clearly(
    make_memory: MakeMemory, flavour_name: str, tamper: str, request: pytest.FixtureRequest
) -> None:
    memory = make_memory(flavour_name)
    memory.create("/memories/a.txt", SECRET)
    stored = memory.store.get(TENANT_KEY)
    assert stored is not None
    tampered = TENANT_KEY_TAMPERS[tamper](bytes(stored.body))
    memory.store.put(TENANT_KEY, tampered, dict(stored.metadata))
    fresh = make_memory(flavour_name)
    for call in (
        lambda: fresh.view("/memories/a.txt"),
        lambda: fresh.insert("/memories/a.txt", 0, "x"),
        lambda: fresh.create("/memories/new.txt", "x"),
    ):
        with pytest.raises(S3MemoryError) as info:
            call()
        _assert_clear_key_error(info.value)
        assert "secret" not in str(info.value)
    # Nothing was overwritten: not the tenant key, not the file.
    assert bytes(memory.store.get(TENANT_KEY).body) == tampered  # type: ignore[union-attr]
    assert memory.store.head("alice/memories/new.txt") is None
    # Restoring the key object restores access.
    memory.store.put(TENANT_KEY, bytes(stored.body), dict(stored.metadata))
    assert "secret plan" in make_memory(flavour_name).view("/memories/a.txt")


@pytest.mark.parametrize("flavour_name", TENANT_KEY_FLAVOURS)
def test_lost_tenant_key_fails_clearly_and_reads_never_replace_it(make_memory: MakeMemory, flavour_name: str) -> None:
    memory = make_memory(flavour_name)
    memory.create("/memories/a.txt", SECRET)
    original = memory.store.get(TENANT_KEY)
    assert original is not None
    memory.store.delete([TENANT_KEY])
    fresh = make_memory(flavour_name)
    with pytest.raises(TenantKeyError) as info:
        fresh.view("/memories/a.txt")
    assert str(info.value) == (
        "Error: The encryption key of this memory is missing, so its files cannot be decrypted (was this user erased?)."
    )
    # a read must not mint a new key: restoring the original object brings the files back
    assert fresh.store.get(TENANT_KEY) is None
    fresh.store.put(TENANT_KEY, bytes(original.body), dict(original.metadata))
    assert SECRET.splitlines()[0] in make_memory(flavour_name).view("/memories/a.txt")


@pytest.mark.parametrize("flavour_name", TENANT_KEY_FLAVOURS)
def test_tenant_key_of_another_tenant_fails(make_memory: MakeMemory, flavour_name: str) -> None:
    """bob's tenant-key object copied over alice's: it is bound to bob."""
    alice = make_memory(flavour_name)
    bob = make_memory(flavour_name, user_id="bob")
    alice.create("/memories/a.txt", SECRET)
    bob.create("/memories/a.txt", OTHER_SECRET)
    bobs = alice.store.get("bob/.s3memory/tenant-key")
    assert bobs is not None
    alice.store.put(TENANT_KEY, bytes(bobs.body), dict(bobs.metadata))
    with pytest.raises(S3MemoryError) as info:
        make_memory(flavour_name).view("/memories/a.txt")
    _assert_clear_key_error(info.value)
    assert "diary" not in str(info.value) and "secret" not in str(info.value)
