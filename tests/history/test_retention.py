"""Retention and keys: old versions stay readable across key rotations (retired keys are
kept while versions under them exist, and the report says so), kept keys leave once their
versions are gone, noncurrent versions expire after a configurable time (the bucket lifecycle
rule on S3, ``expire_noncurrent_versions`` elsewhere), and erasing a user leaves no version
of anything it owned.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers import BUCKET, MASTER_KEY, REPO

from s3memory import (
    ConfigurationError,
    EncryptedMemory,
    InMemoryStore,
    KeyCache,
    StorageUnavailableError,
    TenantKeyError,
    lifecycle_configuration,
    open_memory,
)
from s3memory._admin.lifecycle import (
    DAY,
    EXPIRY_GRACE_DAYS,
    erase_tenant,
    expire_noncurrent_versions,
    rewrap_tenant_key,
    rotate_tenant_key,
)
from s3memory._crypto.keyring import MAX_KEPT_KEYS, RetiredKey, TenantKeyring
from s3memory.stores import DelegatingStore, LocalDirStore, ObjectStore, ObjectVersion

MakeMemory = Callable[..., EncryptedMemory]
VERSIONED = ["inmemory", "localdir", "s3-tenant-local", "s3-tenant-kms"]
NOTES = "/memories/notes.md"
PLAN = "/memories/projects/plan.md"


@pytest.fixture
def make_versioned(request: pytest.FixtureRequest, tmp_path: Any) -> MakeMemory:
    """``make(flavour, user_id="alice", **options)``: memories on one store that keeps versions
    (on moto, a bucket with versioning enabled); each call a fresh process (its own key cache)."""
    shared: dict[str, Any] = {}

    def make(flavour: str, user_id: str = "alice", **options: Any) -> EncryptedMemory:
        options.setdefault("key_cache", KeyCache())
        if flavour == "inmemory":
            store = shared.setdefault("store", InMemoryStore())
            return open_memory(user_id=user_id, store=store, **{"master_key": MASTER_KEY, **options})
        if flavour == "localdir":
            store = shared.setdefault("store", LocalDirStore(tmp_path / "store"))
            return open_memory(user_id=user_id, store=store, **{"master_key": MASTER_KEY, **options})
        s3 = shared.get("s3")
        if s3 is None:
            s3 = shared.setdefault("s3", request.getfixturevalue("s3_client"))
            s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        if flavour == "s3-tenant-local":
            return open_memory(user_id=user_id, bucket=BUCKET, s3_client=s3, master_key=MASTER_KEY, **options)
        assert flavour == "s3-tenant-kms"
        return open_memory(
            user_id=user_id,
            bucket=BUCKET,
            s3_client=s3,
            kms_key_id=request.getfixturevalue("kms_key_id"),
            kms_client=request.getfixturevalue("kms_client"),
            **options,
        )

    return make


def document(memory: EncryptedMemory) -> dict[str, Any]:
    stored = memory.store.get(memory.layout.internal_prefix + "tenant-key")
    assert stored is not None
    return dict(json.loads(stored.body))


def versions_of(memory: EncryptedMemory, path: str) -> list[str]:
    """The store's version ids of a file, newest first (delete markers left out)."""
    key = memory.layout.key_for(memory_path(path))
    return [v.version_id for v in memory.store.list_versions(key) if v.key == key and not v.is_delete_marker]


def memory_path(path: str) -> Any:
    from s3memory import parse_path

    return parse_path(path)


def everything(store: ObjectStore, prefix: str) -> list[ObjectVersion]:
    return list(store.list_versions(prefix))


def written_before_a_rotation(memory: EncryptedMemory) -> dict[str, str]:
    """Two files with two versions each; their version ids (before any rotation) and texts."""
    memory.create(NOTES, "Prefers green tea.\n")
    memory.str_replace(NOTES, "green", "black")
    memory.create(PLAN, "step one\n")
    memory.insert(PLAN, 1, "step two")
    texts = {}
    for path in (NOTES, PLAN):
        for version in versions_of(memory, path):
            texts[version] = memory.read_version(path, version)
    assert sorted(texts.values()) == sorted(
        ["Prefers green tea.\n", "Prefers black tea.\n", "step one\n", "step one\nstep two\n"]
    )
    return texts


def read_all(memory: EncryptedMemory, texts: dict[str, str]) -> dict[str, str]:
    found = {}
    for path in (NOTES, PLAN):
        for version in versions_of(memory, path):
            if version in texts:
                found[version] = memory.read_version(path, version)
    return found


# --- old versions across rotations ------------------------------------------------------------


@pytest.mark.parametrize("flavour", VERSIONED)
def test_versions_from_before_a_rotation_stay_readable_and_restorable(make_versioned: MakeMemory, flavour: str) -> None:
    memory = make_versioned(flavour)
    texts = written_before_a_rotation(memory)
    old_kid = document(memory)["kid"]

    report = rotate_tenant_key(memory, retire_after=0)

    # The rotation is complete (every current object is under the new key), and the old key
    # is kept, not dropped: the versions from before are wrapped under it. The report says so.
    assert report.complete and report.retired == [] and report.dropped == []
    assert [k.kid for k in report.kept] == [old_kid]
    kept = report.kept[0]
    assert kept.until == pytest.approx(kept.kept_since + (30 + EXPIRY_GRACE_DAYS) * DAY)
    stored = document(memory)
    assert stored["v"] == 3 and "retired" not in stored and stored["kid"] == report.kid
    assert [(k["kid"], k["kept_since"]) for k in stored["kept"]] == [(old_kid, kept.kept_since)]
    # A cold process reads every version from before, and restores one.
    cold = make_versioned(flavour)
    assert read_all(cold, texts) == texts
    oldest = versions_of(cold, NOTES)[-1]
    cold.restore(NOTES, oldest)
    assert make_versioned(flavour).read_text(NOTES) == "Prefers green tea.\n"

    # A second rotation keeps both former keys; every version still reads.
    again = rotate_tenant_key(make_versioned(flavour), retire_after=0)
    assert [k.kid for k in again.kept] == [old_kid, report.kid] and again.dropped == []
    assert read_all(make_versioned(flavour), texts) == texts


def test_a_store_without_versions_drops_the_retired_key_at_once() -> None:
    store = InMemoryStore(versioned=False)
    memory = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    memory.create(NOTES, "tea\n")
    old_kid = document(memory)["kid"]
    report = rotate_tenant_key(memory, retire_after=0)
    assert report.dropped == [old_kid] and report.kept == []
    assert document(memory)["v"] == 2 and old_kid not in json.dumps(document(memory))
    assert report.requests["LIST-VERSIONS"] == 2  # the check that no version needs it: one listing a prefix


@pytest.mark.parametrize("flavour", ["inmemory", "localdir", "s3-tenant-local"])
def test_kept_keys_leave_once_no_version_needs_them(make_versioned: MakeMemory, flavour: str) -> None:
    memory = make_versioned(flavour)
    texts = written_before_a_rotation(memory)
    first = rotate_tenant_key(memory, retire_after=0)
    (k1,) = (k.kid for k in first.kept)
    start = first.kept[0].kept_since

    # 40 days later (past the 30-day retention and the grace), but the store kept the old
    # versions (nothing expired them): the key is still needed, and stays.
    later = start + 40 * DAY
    second = rotate_tenant_key(make_versioned(flavour), retire_after=0, now=later)
    k2 = first.kid
    assert [k.kid for k in second.kept] == [k1, k2] and second.dropped == []
    assert second.requests["HEAD-VERSION"] >= 1  # it looked at the old versions' keys
    assert read_all(make_versioned(flavour), texts) == texts

    # Expiring the versions noncurrent for 30 days removes every old version; k1 has then
    # none left and leaves. k2 (kept since `later`) is not due for another 32 days.
    expired = expire_noncurrent_versions(make_versioned(flavour), now=later)
    assert expired.versions_deleted > 0 and expired.dropped == [k1]
    assert [k.kid for k in expired.kept] == [k2]
    assert all(v.is_latest for v in everything(memory.store, memory.layout.memory_prefix))

    # A rotation after k2's time finds no version under it either, and drops it; the key
    # it retires itself is kept for the versions its copies just replaced.
    third = rotate_tenant_key(make_versioned(flavour), retire_after=0, now=later + 40 * DAY)
    assert third.dropped == [k2] and [k.kid for k in third.kept] == [second.kid]
    fresh = make_versioned(flavour)
    assert fresh.read_text(NOTES) == "Prefers black tea.\n"
    assert fresh.read_text(PLAN) == "step one\nstep two\n"
    for path in (NOTES, PLAN):
        for version in versions_of(fresh, path):
            fresh.read_version(path, version)  # every version left still opens

    # And once those versions expire too, the document is a version 2 one again.
    final = expire_noncurrent_versions(fresh, now=later + 80 * DAY)
    assert final.dropped == [second.kid] and final.kept == []
    assert document(memory)["v"] == 2 and "kept" not in document(memory)


class FailingListings(DelegatingStore):
    def list_versions(self, prefix: str, *, limit: int | None = None) -> Iterator[ObjectVersion]:
        raise StorageUnavailableError("Error: injected fault")


def test_a_failed_version_listing_keeps_the_keys_and_fails_nothing() -> None:
    store = InMemoryStore(versioned=False)  # no versions: the retired key would leave at once
    cache = KeyCache()
    memory = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=cache)
    memory.create(NOTES, "tea\n")
    old_kid = document(memory)["kid"]
    failing = EncryptedMemory(store=FailingListings(store), layout=memory.layout, keyring=memory.keyring)

    report = rotate_tenant_key(failing, retire_after=0)

    assert report.complete and report.dropped == [] and [k.kid for k in report.kept] == [old_kid]
    assert expire_noncurrent_versions(memory).dropped == [old_kid]  # once it can look, it goes
    assert "kept" not in document(memory)


def test_a_kept_key_is_rewrapped_under_a_new_master_key(make_versioned: MakeMemory) -> None:
    memory = make_versioned("inmemory")
    texts = written_before_a_rotation(memory)
    rotate_tenant_key(memory, retire_after=0)
    new_master = bytes(range(100, 132))

    rewrap_tenant_key(memory, new_master)

    stored = document(memory)
    assert stored["v"] == 3 and len(stored["kept"]) == 1
    on_new = make_versioned("inmemory", master_key=new_master)
    assert read_all(on_new, texts) == texts


def test_rotation_refuses_to_keep_more_than_the_document_holds(make_versioned: MakeMemory) -> None:
    memory = make_versioned("inmemory")
    memory.create(NOTES, "tea\n")
    keyring = memory.keyring
    assert isinstance(keyring, TenantKeyring)
    keys = keyring.keys(create=False)
    kept = [RetiredKey(f"{i:016x}", keys.wrapped, 1.0, 2.0) for i in range(MAX_KEPT_KEYS)]
    memory.store.put(keyring.object_key, keys.evolve(kept=kept).document(), {"s3memory": "tenant-key"})

    with pytest.raises(TenantKeyError) as info:
        rotate_tenant_key(make_versioned("inmemory"), retire_after=0)
    assert "expire old versions" in str(info.value)
    assert "retired" not in document(memory)


@pytest.mark.parametrize("arguments", [{"noncurrent_days": 0}, {"noncurrent_days": 1.5}, {"noncurrent_days": True}])
def test_rotation_refuses_a_bad_retention(make_versioned: MakeMemory, arguments: dict[str, Any]) -> None:
    memory = make_versioned("inmemory")
    memory.create(NOTES, "tea\n")
    with pytest.raises(ConfigurationError):
        rotate_tenant_key(memory, **arguments)
    assert "retired" not in document(memory)


def test_noncurrent_days_none_keeps_the_key_until_told_otherwise(make_versioned: MakeMemory) -> None:
    memory = make_versioned("inmemory")
    memory.create(NOTES, "tea\n")
    report = rotate_tenant_key(memory, retire_after=0, noncurrent_days=None)
    assert len(report.kept) == 1 and report.kept[0].until is None


# --- the key document: version 3, and what came before -------------------------------------------


def tampered(memory: EncryptedMemory, change: Callable[[dict[str, Any]], dict[str, Any]]) -> EncryptedMemory:
    key = memory.layout.internal_prefix + "tenant-key"
    memory.store.put(key, json.dumps(change(document(memory))).encode(), {"s3memory": "tenant-key"})
    return open_memory(user_id="alice", store=memory.store, master_key=MASTER_KEY, key_cache=KeyCache())


KEPT_TAMPERINGS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "kept-in-a-version-2-document": lambda d: {**d, "v": 2},
    "kept-not-a-list": lambda d: {**d, "kept": "x"},
    "kept-since-missing": lambda d: {**d, "kept": [{k: v for k, v in d["kept"][0].items() if k != "kept_since"}]},
    "kept-since-boolean": lambda d: {**d, "kept": [{**d["kept"][0], "kept_since": True}]},
    "kept-duplicates-current": lambda d: {**d, "kept": [{**d["kept"][0], "kid": d["kid"]}]},
    "too-many": lambda d: {**d, "kept": [{**d["kept"][0], "kid": f"k{i}"} for i in range(MAX_KEPT_KEYS + 1)]},
    "version-4": lambda d: {**d, "v": 4},
}


@pytest.mark.parametrize("tamper", sorted(KEPT_TAMPERINGS))
def test_a_malformed_version_3_document_fails_clearly(make_versioned: MakeMemory, tamper: str) -> None:
    memory = make_versioned("inmemory")
    memory.create(NOTES, "tea\n")
    rotate_tenant_key(memory, retire_after=0)
    assert document(memory)["v"] == 3
    reader = tampered(memory, KEPT_TAMPERINGS[tamper])
    with pytest.raises(TenantKeyError) as info:
        reader.read_text(NOTES)
    assert "integrity check" in str(info.value)


def test_a_version_2_document_with_a_rotation_under_way_still_reads_and_finishes(make_versioned: MakeMemory) -> None:
    """As s3memory wrote it before kept keys (a rotation interrupted before its drop): it
    reads, and the rotation resumed from it keeps the retired key for the old versions."""
    memory = make_versioned("inmemory")
    texts = written_before_a_rotation(memory)
    first = rotate_tenant_key(memory)  # the retired key stays (the cache wait): a version 2 document
    stored = document(memory)
    assert stored["v"] == 2 and [r["kid"] for r in stored["retired"]] == first.retired and "kept" not in stored
    assert read_all(make_versioned("inmemory"), texts) == texts

    resumed = rotate_tenant_key(make_versioned("inmemory"), retire_after=0)
    assert not resumed.started and resumed.complete and [k.kid for k in resumed.kept] == first.retired
    assert read_all(make_versioned("inmemory"), texts) == texts


# --- expiring noncurrent versions where no lifecycle rule does ---------------------------------


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


def test_noncurrent_versions_expire_counted_from_when_they_were_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock(1_000_000.0)
    monkeypatch.setattr("s3memory.stores._inmemory.time", clock)
    store = InMemoryStore()
    memory = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    key = memory.layout.memory_prefix + "a.md"
    gone = memory.layout.memory_prefix + "gone.md"
    store.put(key, b"one", {})  # day 0
    store.put(gone, b"x", {})
    clock.now += 10 * DAY
    store.put(key, b"two", {})  # day 10: "one" noncurrent since
    store.delete([gone])  # a delete marker on top of "x"
    clock.now += 40 * DAY
    store.put(key, b"three", {})  # day 50: "two" noncurrent since (created 50 days ago, noncurrent for 5)
    neighbour = "alice2/memories/a.md"
    store.put(neighbour, b"old", {})
    store.put(neighbour, b"new", {})

    report = expire_noncurrent_versions(memory, noncurrent_days=30, now=clock.now + 5 * DAY)

    # "one" was noncurrent for 45 days: gone. "two" was written 45 days ago too, but has been
    # noncurrent for 5 only: kept, as S3 counts NoncurrentDays.
    kept = [store.get_version(key, v.version_id) for v in store.list_versions(key)]
    assert [k.body for k in kept if k is not None] == [b"three", b"two"]
    # "x" was noncurrent for 45 days: gone, and the delete marker left alone on top of nothing too.
    assert list(store.list_versions(gone)) == []
    assert report.versions_deleted == 3
    assert len(list(store.list_versions(neighbour))) == 2  # another user's versions are not touched


@pytest.mark.parametrize("days", [0, -1, 1.5, True, "30", None])
def test_expiry_refuses_a_bad_retention(days: Any) -> None:
    memory = open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())
    with pytest.raises(ConfigurationError):
        expire_noncurrent_versions(memory, noncurrent_days=days)


# --- the lifecycle rule -------------------------------------------------------------------------


@pytest.mark.parametrize("days", [1, 30, 365])
def test_the_lifecycle_rule_keeps_noncurrent_versions_for_the_configured_days(days: int) -> None:
    (old_versions, _markers) = lifecycle_configuration(noncurrent_days=days)["Rules"]
    assert old_versions["NoncurrentVersionExpiration"] == {"NoncurrentDays": days}
    assert lifecycle_configuration()["Rules"][0]["NoncurrentVersionExpiration"] == {"NoncurrentDays": 30}


@pytest.mark.parametrize("days", [0, -5, 1.5, True, "30", None])
def test_the_lifecycle_rule_refuses_a_bad_retention(days: Any) -> None:
    with pytest.raises(ConfigurationError) as info:
        lifecycle_configuration(noncurrent_days=days)
    assert "noncurrent_days" in str(info.value)


def test_the_lambda_template_takes_the_retention_as_a_parameter() -> None:

    template = json.loads((REPO / "examples/lambda/template.json").read_text())
    parameter = template["Parameters"]["NoncurrentVersionDays"]
    assert parameter["Type"] == "Number" and parameter["Default"] == 30 and parameter["MinValue"] == 1
    bucket = template["Resources"]["MemoryBucket"]["Properties"]
    old_versions = bucket["LifecycleConfiguration"]["Rules"][0]
    assert old_versions["NoncurrentVersionExpiration"] == {"NoncurrentDays": {"Ref": "NoncurrentVersionDays"}}


# --- crypto-shredding removes every version ----------------------------------------------------


@pytest.mark.parametrize("flavour", ["inmemory", "localdir", "s3-tenant-local"])
def test_erasing_a_user_leaves_no_version_of_anything_it_owned(make_versioned: MakeMemory, flavour: str) -> None:
    memory = make_versioned(flavour)
    written_before_a_rotation(memory)
    rotate_tenant_key(memory, retire_after=0)  # kept keys, copies
    memory.rename("/memories/projects", "/memories/archive")  # history records
    memory.delete(NOTES)
    memory.create(NOTES, "again\n")
    neighbour = make_versioned(flavour, user_id="alice2")
    neighbour.create(NOTES, "the neighbour's\n")
    neighbour_versions = everything(memory.store, neighbour.layout.tenant_prefix)
    before = everything(memory.store, memory.layout.tenant_prefix)
    internal = [v for v in before if v.key.startswith(memory.layout.internal_prefix)]
    assert len(internal) > 2 and len(before) > 10  # key document versions, records, and files

    report = erase_tenant(memory)

    assert report.shredded and report.key_versions_destroyed + report.versions_deleted == len(before)
    assert everything(memory.store, memory.layout.tenant_prefix) == []
    assert everything(memory.store, neighbour.layout.tenant_prefix) == neighbour_versions
    assert make_versioned(flavour, user_id="alice2").read_text(NOTES) == "the neighbour's\n"


def test_base64_of_a_kept_key_is_the_master_wrapping(make_versioned: MakeMemory) -> None:
    """The kept key in the document is the retired key's wrapping, as stored before: nothing
    else (no plaintext key) is written."""
    memory = make_versioned("inmemory")
    memory.create(NOTES, "tea\n")
    before = document(memory)
    rotate_tenant_key(memory, retire_after=0)
    (kept,) = document(memory)["kept"]
    assert kept["kid"] == before["kid"] and base64.b64decode(kept["wrapped"]) == base64.b64decode(before["wrapped"])
