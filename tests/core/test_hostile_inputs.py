"""What a hostile model or bucket writer could once do to the core, each refused now.

Tenants of two deployments never overlap; objects are bound to their deployment; internal
records are sealed for names no memory path has; edit answers are linear-time and capped;
access markers are written only for files that exist; stored objects are read with a size
bound; any integer from the model gets a clear error; no new tenant key appears silently
beside existing files; edits are screened as the file they leave; every version has a fresh
data key; and what s3memory 0.1 stored (``tests/vectors/format_v1.json``) still opens.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from helpers import BUCKET, MASTER_KEY, VECTORS_DIR
from helpers.fakekms import FakeKms

from s3memory import (
    EditError,
    EncryptedMemory,
    InMemoryStore,
    IntegrityError,
    InvalidCommandError,
    KeyCache,
    Limits,
    ObjectTooLargeError,
    PathNotFoundError,
    SensitiveDataError,
    TenantKeyError,
    erase_tenant,
    open_memory,
    rotate_tenant_key,
)
from s3memory._core.access import ACCESS_MARKERS
from s3memory._crypto import envelope
from s3memory.stores import ObjectStore, S3Store, StoredObject

MakeMemory = Callable[..., EncryptedMemory]
FIXTURES = json.loads((VECTORS_DIR / "format_v1.json").read_text())


def stored(memory: EncryptedMemory, path: str) -> StoredObject:
    from s3memory import parse_path

    found = memory.store.get(memory.layout.key_for(parse_path(path)))
    assert found is not None
    return found


def put_raw(memory: EncryptedMemory, key: str, obj: StoredObject) -> None:
    memory.store.put(key, bytes(obj.body), dict(obj.metadata))


# --- no deployment's tenant lives inside another's ------------------------------------------------


@pytest.mark.parametrize("flavour", ["inmemory", "s3-tenant-local"])
def test_erasing_user_app_without_a_prefix_leaves_the_deployment_with_prefix_app(
    make_memory: MakeMemory, flavour: str
) -> None:
    other = make_memory(flavour, user_id="x", prefix="app/")
    other.create("/memories/keep.md", "another deployment's memory\n")
    app = make_memory(flavour, user_id="app")  # prefix "": its keys start with "app/" too
    app.create("/memories/mine.md", "user app's memory\n")

    erase_tenant(app)

    assert make_memory(flavour, user_id="x", prefix="app/").read_text("/memories/keep.md") == (
        "another deployment's memory\n"
    )
    assert [k for k in all_keys(app.store) if not k.startswith("app/x/")] == []


def all_keys(store: ObjectStore) -> list[str]:
    return sorted(info.key for info in store.list(""))


# --- the deployment is bound ----------------------------------------------------------------------


@pytest.mark.parametrize("flavour", ["inmemory", "s3-tenant-local", "s3-tenant-kms", "s3-kms"])
def test_an_object_copied_between_deployments_does_not_open(make_memory: MakeMemory, flavour: str) -> None:
    """Two deployments share a bucket and a key; a writer copies alice's file, and in tenant-key
    mode her key document too, from one to the other: it fails as a moved object does."""
    first = make_memory(flavour, prefix="one/")
    first.create("/memories/secret.md", "deployment one only\n")
    second = make_memory(flavour, prefix="two/")
    second.create("/memories/other.md", "deployment two\n")
    for name in ("memories/secret.md", ".s3memory/tenant-key"):
        found = first.store.get(f"one/alice/{name}")
        if found is not None:
            first.store.put(f"two/alice/{name}", bytes(found.body), dict(found.metadata))

    fresh = make_memory(flavour, prefix="two/")
    with pytest.raises(IntegrityError):
        fresh.read_text("/memories/secret.md")


@pytest.mark.parametrize("scenario", sorted(FIXTURES["scenarios"]))
def test_objects_and_key_documents_of_format_v1_still_open(scenario: str) -> None:
    """Stored by s3memory 0.1 (binding v1, key documents v1); read, edited, renamed and
    rotated by today's code, which binds what it writes to the deployment."""
    fixture = FIXTURES["scenarios"][scenario]
    store = InMemoryStore()
    for key, obj in fixture["objects"].items():
        store.put(key, base64.b64decode(obj["body_b64"]), obj["metadata"])
    options = dict(fixture["options"])
    if options.pop("kms", False):
        options.update(kms_client=FakeKms(FIXTURES["fake_kms_seed"].encode()), kms_key_id="alias/fixture")
    else:
        options["master_key"] = base64.b64decode(FIXTURES["master_key_b64"])

    def memory() -> EncryptedMemory:
        return open_memory(user_id="alice", store=store, prefix="app/", key_cache=KeyCache(), **options)

    files = fixture["files"]
    assert {entry.path for entry in memory().list_files()} == set(files)
    for path, text in files.items():
        assert memory().read_text(path) == text
    first = next(iter(sorted(files)))
    memory().str_replace(first, files[first][:3], "NEW")
    assert memory().read_text(first) == "NEW" + files[first][3:]
    header = envelope.parse_header(store.get(memory().layout.key_for(parse(first))).metadata)  # type: ignore[union-attr]
    assert header.wrapped_key.context[envelope.CONTEXT_PREFIX] == "app/"
    memory().rename(first, "/memories/renamed/by-v2.md")
    assert memory().read_text("/memories/renamed/by-v2.md") == "NEW" + files[first][3:]
    if options.get("key_mode") != "kms":
        report = rotate_tenant_key(memory(), retire_after=0)
        assert report.complete
        if not report.started:  # it finished the rotation the fixture left under way; now a new one
            assert rotate_tenant_key(memory(), retire_after=0).started
        rest = {p: t for p, t in files.items() if p != first}
        for path, text in rest.items():
            assert memory().read_text(path) == text
            meta = store.get(memory().layout.key_for(parse(path))).metadata  # type: ignore[union-attr]
            # the rotation bound every file to the deployment
            assert envelope.parse_header(meta).wrapped_key.context[envelope.CONTEXT_PREFIX] == "app/"
        document = json.loads(store.get("app/alice/.s3memory/tenant-key").body)  # type: ignore[union-attr]
        # Upgraded from version 1; version 3, as the store keeps the versions from before the
        # rotation, wrapped under the old key, which the document keeps for them.
        assert document["v"] == 3 and document["kept"]


def parse(path: str) -> Any:
    from s3memory import parse_path

    return parse_path(path)


def test_a_v1_object_is_not_accepted_in_another_deployment_without_its_key_document() -> None:
    """A format-v1 object carries no deployment, but it still needs its own tenant key: copied
    into another deployment (where alice has another key) it does not open."""
    fixture = FIXTURES["scenarios"]["tenant-local"]
    store = InMemoryStore()
    master = base64.b64decode(FIXTURES["master_key_b64"])
    other = open_memory(user_id="alice", store=store, prefix="two/", master_key=master, key_cache=KeyCache())
    other.create("/memories/mine.md", "two\n")
    obj = fixture["objects"]["app/alice/memories/notes.md"]
    store.put("two/alice/memories/notes.md", base64.b64decode(obj["body_b64"]), obj["metadata"])
    with pytest.raises(IntegrityError):
        other.read_text("/memories/notes.md")


# --- internal records are sealed for names no memory path has -------------------------------------


@pytest.mark.parametrize("flavour", ["inmemory", "s3-kms"])
def test_a_memory_file_moved_onto_an_intent_record_is_not_a_record(make_memory: MakeMemory, flavour: str) -> None:
    """The model writes a file shaped like an intent record at /memories/.s3memory/rename-...;
    a bucket writer moves it onto the record's key. The rename must not trust it (it would
    let copies at the destination count as "ours" and be overwritten)."""
    memory = make_memory(flavour)
    memory.create("/memories/a.md", "source\n")
    memory.create("/memories/b.md", "the destination, which must survive\n")
    intent_tag = memory_intent_key(memory, "/memories/a.md", "/memories/b.md")
    name = intent_tag.rsplit("/", 1)[1]
    forged = json.dumps({"v": 1, "op": "rename", "etags": [stored(memory, "/memories/b.md").etag.strip('"')]})
    memory.create(f"/memories/.s3memory/{name}", forged)
    put_raw(memory, intent_tag, stored(memory, f"/memories/.s3memory/{name}"))

    with pytest.raises(Exception, match="already exists"):
        memory.rename("/memories/a.md", "/memories/b.md")
    assert memory.read_text("/memories/b.md") == "the destination, which must survive\n"


def memory_intent_key(memory: EncryptedMemory, old: str, new: str) -> str:
    import hashlib

    tag = hashlib.sha256(f"{old}\n{new}".encode()).hexdigest()[:40]
    return f"{memory.layout.internal_prefix}intents/rename-{tag}"


def test_the_intent_key_is_where_rename_looks(make_memory: MakeMemory) -> None:
    """Keeps the forging test honest: an interrupted rename leaves its record at that key
    (a directory's: a rename of one file writes none, but reads one there all the same)."""
    memory = make_memory("inmemory")
    memory.create("/memories/a/x.md", "x\n")

    original_delete = memory.store.delete

    def failing_delete(keys: Any, **kwargs: Any) -> None:
        raise IntegrityError("Error: injected")

    memory.store.delete = failing_delete  # type: ignore[method-assign]
    with pytest.raises(IntegrityError):
        memory.rename("/memories/a", "/memories/b")
    memory.store.delete = original_delete  # type: ignore[method-assign]
    assert memory.store.get(memory_intent_key(memory, "/memories/a", "/memories/b")) is not None


# --- edit answers ---------------------------------------------------------------------------------


def test_multiple_occurrences_answer_is_capped_and_linear(make_memory: MakeMemory) -> None:
    memory = make_memory("inmemory")
    line = "x" * 40 + "\n"
    memory.create("/memories/big.md", line * 2400)  # 98,400 bytes, 2,400 occurrences of "x" * 40
    started = time.process_time()
    with pytest.raises(EditError) as info:
        memory.str_replace("/memories/big.md", line * 2, "y")
    spent = time.process_time() - started
    message = str(info.value)
    assert message.startswith("No replacement was performed. Multiple occurrences of old_str `")
    assert len(message) <= memory.limits.max_view_chars
    assert message.count(", ") == 100  # 100 line numbers, then the total
    assert message.endswith(", 197, 199, ... (1,200 occurrences in all). Please ensure it is unique")
    assert spent < 1.0, spent  # generous: quadratic numbering took seconds on this input


def test_not_found_answer_does_not_echo_a_huge_old_str(make_memory: MakeMemory) -> None:
    memory = make_memory("inmemory")
    memory.create("/memories/a.md", "short\n")
    with pytest.raises(EditError) as info:
        memory.str_replace("/memories/a.md", "z" * 90_000, "y")
    assert len(str(info.value)) < 1_200 and str(info.value).endswith("did not appear verbatim in /memories/a.md.")


def test_the_edit_snippet_is_capped_like_view(make_memory: MakeMemory) -> None:
    memory = make_memory("inmemory")
    memory.create("/memories/a.md", "anchor\n")
    answer = memory.str_replace("/memories/a.md", "anchor", "w" * 90_000)
    assert answer.startswith("The memory file has been edited.")
    assert len(answer) <= memory.limits.max_view_chars and answer.endswith("view the file to see the change.]")
    assert memory.read_text("/memories/a.md") == "w" * 90_000 + "\n"  # the write itself is whole


# --- access markers -------------------------------------------------------------------------------


def test_access_markers_only_for_files_that_exist(make_memory: MakeMemory) -> None:
    memory = make_memory("inmemory", track_access=True, user_id="marker-test")
    markers = memory.layout.internal_prefix + ACCESS_MARKERS
    for n in range(20):
        with pytest.raises(PathNotFoundError):
            memory.view(f"/memories/made-up-{n}-{time.time_ns()}.md")
    assert list(memory.store.list(markers)) == []
    memory.create("/memories/real.md", "x\n")
    memory.view("/memories/real.md")
    assert len(list(memory.store.list(markers))) == 1


# --- bounded reads --------------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", ["inmemory", "s3-tenant-local"])
def test_a_planted_oversized_object_is_refused_without_being_read(make_memory: MakeMemory, flavour: str) -> None:
    memory = make_memory(flavour, limits=Limits(max_file_bytes=1024))
    memory.store.put(memory.layout.memory_prefix + "huge.md", b"\0" * 4096, {"x-amz-c": "115"})
    with pytest.raises(ObjectTooLargeError) as info:
        memory.view("/memories/huge.md")
    assert str(info.value).startswith("Error: The file /memories/huge.md is larger (4,080 bytes) than the limit")
    assert "1,024" in str(info.value)


def test_the_s3_store_reads_at_most_one_byte_past_the_bound(s3_client: Any) -> None:
    store = S3Store(BUCKET, s3_client)
    store.put("k", b"a" * 10_000, {})
    reads: list[int | None] = []
    original = s3_client.get_object

    def spying_get_object(**kwargs: Any) -> Any:
        response = original(**kwargs)
        body = response["Body"]
        real_read = body.read

        def read(amount: int | None = None) -> bytes:
            reads.append(amount)
            return bytes(real_read(amount))

        body.read = read
        response["ContentLength"] = 0  # a store that does not announce the size
        return response

    s3_client.get_object = spying_get_object
    with pytest.raises(ObjectTooLargeError):
        store.get("k", max_bytes=100)
    assert reads == [101]
    assert store.get("k", max_bytes=10_000) is not None and reads[-1] == 10_001


def test_a_huge_key_document_is_a_corrupt_key_document(make_memory: MakeMemory) -> None:
    memory = make_memory("inmemory")
    memory.store.put(memory.layout.internal_prefix + "tenant-key", b"{" * 200_000, {})
    with pytest.raises(TenantKeyError):
        memory.create("/memories/a.md", "x")


# --- integers from the model ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.view("/memories/a.md", [10**5000, 1]),
        lambda m: m.view("/memories/a.md", [1, -(10**5000)]),
        lambda m: m.view("/memories/a.md", [10**5000]),
        lambda m: m.view("/memories/a.md", [[[[[[[[1]]]]]]], 2]),
        lambda m: m.view("/memories/a.md", list(range(100_000))),
        lambda m: m.insert("/memories/a.md", 10**5000, "x"),
        lambda m: m.insert("/memories/a.md", -(10**9000), "x"),
    ],
    ids=["huge-start", "huge-negative-end", "one-huge", "nested", "long-list", "huge-line", "huge-negative-line"],
)
def test_any_integer_from_the_model_gets_a_clear_error(
    make_memory: MakeMemory, call: Callable[[EncryptedMemory], str]
) -> None:
    memory = make_memory("inmemory")
    memory.create("/memories/a.md", "one\ntwo\n")
    with pytest.raises(InvalidCommandError) as info:
        call(memory)
    assert str(info.value).startswith("Error: Invalid `")
    assert len(str(info.value)) < 400


def test_a_huge_end_of_view_range_still_reads_to_the_end(make_memory: MakeMemory) -> None:
    memory = make_memory("inmemory")
    memory.create("/memories/a.md", "one\ntwo\n")
    assert memory.view("/memories/a.md", [2, 10**5000]).endswith("     2\ttwo\n     3\t")


# --- no silent new tenant key ---------------------------------------------------------------------


@pytest.mark.parametrize("flavour", ["inmemory", "s3-tenant-local", "s3-tenant-kms"])
def test_a_missing_tenant_key_beside_files_is_refused_not_replaced(make_memory: MakeMemory, flavour: str) -> None:
    memory = make_memory(flavour)
    memory.create("/memories/a.md", "written under the first key\n")
    key_document = memory.layout.internal_prefix + "tenant-key"
    saved = memory.store.get(key_document)
    assert saved is not None
    memory.store.delete([key_document])

    fresh = make_memory(flavour)
    with pytest.raises(TenantKeyError) as info:
        fresh.create("/memories/b.md", "would orphan a.md")
    assert "has files but its encryption key is missing" in str(info.value)
    assert memory.store.get(key_document) is None
    # Restoring the document restores everything.
    memory.store.put(key_document, bytes(saved.body), dict(saved.metadata))
    assert make_memory(flavour).read_text("/memories/a.md") == "written under the first key\n"


# --- a secret split across edits ------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["refuse", "redact"])
def test_a_secret_completed_by_a_second_edit_is_caught(make_memory: MakeMemory, policy: str) -> None:
    memory = make_memory("inmemory", sensitive_data=policy)
    memory.create("/memories/a.md", "aws access key: AKIA2E0A8F3B\n")
    if policy == "refuse":
        with pytest.raises(SensitiveDataError):
            memory.str_replace("/memories/a.md", "AKIA2E0A8F3B", "AKIA2E0A8F3B244C9E7F")
        assert memory.read_text("/memories/a.md") == "aws access key: AKIA2E0A8F3B\n"
    else:
        answer = memory.str_replace("/memories/a.md", "AKIA2E0A8F3B", "AKIA2E0A8F3B244C9E7F")
        assert "AKIA2E0A8F3B244C9E7F" not in memory.read_text("/memories/a.md")
        assert "AKIA2E0A8F3B244C9E7F" not in answer and "[REDACTED" in answer


def test_an_edit_beside_a_secret_the_file_already_held_passes(make_memory: MakeMemory) -> None:
    allowing = make_memory("inmemory", sensitive_data="allow")
    allowing.create("/memories/a.md", "key AKIA2E0A8F3B244C9E7F\nnote: tea\n")
    guarded = make_memory("inmemory")
    guarded.str_replace("/memories/a.md", "tea", "coffee")
    assert guarded.read_text("/memories/a.md") == "key AKIA2E0A8F3B244C9E7F\nnote: coffee\n"


# --- a fresh data key for every version -----------------------------------------------------------


@pytest.mark.parametrize("flavour", ["inmemory", "s3-kms"])
def test_an_earlier_version_cannot_be_spliced_onto_the_current_metadata(make_memory: MakeMemory, flavour: str) -> None:
    """A writer takes an old version's body, message id and commitment and the current
    version's wrapped key (the splice a shared data key allowed): it does not open."""
    memory = make_memory(flavour)
    memory.create("/memories/a.md", "version one\n")
    old = stored(memory, "/memories/a.md")
    memory.str_replace("/memories/a.md", "one", "two")
    current = stored(memory, "/memories/a.md")
    spliced = dict(current.metadata)
    for field in (envelope.META_MESSAGE_ID, envelope.META_COMMITMENT):
        spliced[field] = old.metadata[field]
    memory.store.put(memory.layout.key_for(parse("/memories/a.md")), bytes(old.body), spliced)
    with pytest.raises(IntegrityError):
        make_memory(flavour).read_text("/memories/a.md")


def test_a_version_from_before_a_rename_cannot_be_spliced_at_the_new_path(make_memory: MakeMemory) -> None:
    memory = make_memory("inmemory")
    memory.create("/memories/a.md", "version one\n")
    old = stored(memory, "/memories/a.md")
    memory.str_replace("/memories/a.md", "one", "two")
    memory.rename("/memories/a.md", "/memories/b.md")
    current = stored(memory, "/memories/b.md")
    spliced = {**current.metadata}
    for field in (envelope.META_MESSAGE_ID, envelope.META_COMMITMENT):
        spliced[field] = old.metadata[field]
    memory.store.put(memory.layout.key_for(parse("/memories/b.md")), bytes(old.body), spliced)
    with pytest.raises(IntegrityError):
        make_memory("inmemory").read_text("/memories/b.md")


def test_fixture_master_key_is_what_the_fixtures_were_written_with() -> None:
    """Guards the fixture test against silently testing nothing: a wrong master key fails."""
    fixture = FIXTURES["scenarios"]["tenant-local"]
    store = InMemoryStore()
    for key, obj in fixture["objects"].items():
        store.put(key, base64.b64decode(obj["body_b64"]), obj["metadata"])
    wrong = open_memory(user_id="alice", store=store, prefix="app/", master_key=MASTER_KEY, key_cache=KeyCache())
    with pytest.raises(TenantKeyError):
        wrong.read_text("/memories/notes.md")


def test_a_refused_huge_path_is_not_echoed_whole(make_memory: MakeMemory) -> None:
    memory = make_memory("inmemory")
    for path in ("/memories/" + "a" * 1_000_000, "/elsewhere/" + "b" * 1_000_000, "/memories/\x1b" * 100_000):
        with pytest.raises(InvalidCommandError) as info:
            memory.view(path)
        assert len(str(info.value)) < 1_600 and "more characters]" in str(info.value)


def test_multiple_occurrences_of_a_long_old_str_are_numbered_in_linear_time(make_memory: MakeMemory) -> None:
    """The worst case for numbering overlapping matches: 100 KB of one letter, a 50 KB old_str."""
    memory = make_memory("inmemory")
    memory.create("/memories/a.md", "a" * 100_000)
    started = time.process_time()
    with pytest.raises(EditError) as info:
        memory.str_replace("/memories/a.md", "a" * 40_000, "b")
    spent = time.process_time() - started
    assert "in lines: 1, 1. Please ensure it is unique" in str(info.value)  # two, as str.count counts them
    assert spent < 0.5, spent  # numbering overlapping matches took about 2 s here


@pytest.mark.parametrize("planted", ["sealed-by-0.1", "garbage", "oversized"])
def test_an_unreadable_object_at_an_intent_key_does_not_block_the_rename(make_memory: MakeMemory, planted: str) -> None:
    """A record left by s3memory 0.1 (sealed for /memories/.s3memory/rename-...), or anything
    else a writer put there, grants nothing and is replaced: the rename goes through."""
    from s3memory._core.rename import MAX_INTENT_BYTES

    memory = make_memory("inmemory")
    memory.create("/memories/a.md", "moving\n")
    key = memory_intent_key(memory, "/memories/a.md", "/memories/b.md")
    if planted == "sealed-by-0.1":
        old_name = "/memories/.s3memory/" + key.rsplit("/", 1)[1]
        data_key, wrapped = memory.keyring.generate(envelope.binding_context("alice", old_name, version=1))
        record = json.dumps({"v": 1, "op": "rename", "etags": []}).encode()
        body, metadata = envelope.seal(record, data_key, wrapped)
    else:
        body, metadata = (b"x" * (MAX_INTENT_BYTES + 1) if planted == "oversized" else b"garbage"), {}
    memory.store.put(key, body, metadata)

    assert memory.rename("/memories/a.md", "/memories/b.md") == "Successfully renamed /memories/a.md to /memories/b.md"
    assert memory.read_text("/memories/b.md") == "moving\n" and memory.store.get(key) is None


@pytest.mark.parametrize("name", [10**5000, "x" * 3_000_000, [[[["view"]]]]], ids=["huge-int", "huge-str", "nested"])
def test_an_unknown_command_of_any_shape_gets_a_short_clear_error(make_memory: MakeMemory, name: object) -> None:
    with pytest.raises(InvalidCommandError) as info:
        make_memory("inmemory").execute({"command": name, "path": "/memories"})
    assert str(info.value).startswith("Error: Unknown command ") and len(str(info.value)) < 300


def test_rewrapping_key_documents_of_format_v1_binds_them_to_the_deployment() -> None:
    from s3memory import generate_master_key, rewrap_tenant_key

    fixture = FIXTURES["scenarios"]["tenant-local-names"]
    store = InMemoryStore()
    for key, obj in fixture["objects"].items():
        store.put(key, base64.b64decode(obj["body_b64"]), obj["metadata"])
    old, new = base64.b64decode(FIXTURES["master_key_b64"]), generate_master_key()

    def memory(master: bytes) -> EncryptedMemory:
        options: dict[str, Any] = {"encrypt_names": True, "key_cache": KeyCache()}
        return open_memory(user_id="alice", store=store, prefix="app/", master_key=master, **options)

    report = rewrap_tenant_key(memory(old), new)
    assert sorted(report.rewrapped) == ["app/alice/.s3memory/names-key", "app/alice/.s3memory/tenant-key"]
    for name in ("names-key", "tenant-key"):
        assert json.loads(store.get(f"app/alice/.s3memory/{name}").body)["v"] == 2  # type: ignore[union-attr]
    for path, text in fixture["files"].items():
        assert memory(new).read_text(path) == text
    with pytest.raises(TenantKeyError):
        memory(old).read_text(next(iter(fixture["files"])))
