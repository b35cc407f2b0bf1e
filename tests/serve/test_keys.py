"""The server's API keys (``serve.keys``): create, list, revoke and authenticate; the limits
of what a key is made with; records that hold the secret's SHA-256 and never the secret;
tokens refused for every way of being wrong; what a key may do; the cache of checked keys,
driven by a clock of the test's own."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest
from helpers import MASTER_KEY

from s3memory import (
    ConfigurationError,
    EncryptedMemory,
    InMemoryStore,
    LocalDirStore,
    ObjectStore,
    PathNotFoundError,
    open_memory,
)
from s3memory._admin.manage import MemoryAdmin
from s3memory.serve import keys as keys_module
from s3memory.serve.http import ApiError
from s3memory.serve.keys import CACHE_SECONDS, KeyRing, Principal
from s3memory.serve.registry import REGISTRY_TENANT, StoreRegistry
from s3memory.stores import DelegatingStore

STORE_A = "memstore_" + "a" * 26
STORE_B = "memstore_" + "b" * 26
STORE_C = "memstore_" + "c" * 26
AWS_KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"  # AWS's documented example
TOKEN = re.compile(r"s3m_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
PUBLIC_FIELDS = {"id", "name", "access", "stores", "created_at", "revoked_at"}
RECORD_FIELDS = PUBLIC_FIELDS | {"v", "secret_sha256"}


class Clock:
    """Seconds that pass only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Counting(DelegatingStore):
    """Counts the requests made of the store."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.requests = 0

    def _call(self, verb: str, perform: Callable[[], Any]) -> Any:
        self.requests += 1
        return perform()


@dataclass
class Rig:
    """Key rings over one object store (each ring a process of its own), and the clock."""

    store: Counting
    root: Path | None  # the local store's directory, to read its every byte
    clock: Clock = field(default_factory=Clock)
    opened: list[EncryptedMemory] = field(default_factory=list)

    def open_tenant(self, user_id: str, sensitive_data: Literal["refuse", "redact"] = "refuse") -> EncryptedMemory:
        memory = open_memory(store=self.store, master_key=MASTER_KEY, user_id=user_id, sensitive_data=sensitive_data)
        self.opened.append(memory)
        return memory

    def ring(self) -> KeyRing:
        return KeyRing(self.open_tenant, clock=self.clock)

    def admin(self) -> MemoryAdmin:
        return MemoryAdmin(self.open_tenant(REGISTRY_TENANT))

    def stored_record(self, key_id: str) -> dict[str, Any]:
        text, _ = self.admin().read(f"/memories/keys/{key_id.removeprefix('apikey_')}.json")
        record: dict[str, Any] = json.loads(text)
        return record

    def every_byte(self) -> bytes:
        if self.root is not None:
            files = sorted(path for path in self.root.rglob("*") if path.is_file())
            return b"".join(str(path.relative_to(self.root)).encode() + path.read_bytes() for path in files)
        chunks = []
        for version in self.store.list_versions(""):
            stored = self.store.get_version(version.key, version.version_id)
            chunks.append(version.key.encode() + (b"" if stored is None else stored.body))
        return b"".join(chunks)


@pytest.fixture(params=["inmemory", "localdir"])
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Rig]:
    if request.param == "inmemory":
        made = Rig(Counting(InMemoryStore()), None)
    else:
        made = Rig(Counting(LocalDirStore(tmp_path / "store")), tmp_path / "store")
    yield made
    for memory in made.opened:
        memory.close()


@pytest.fixture
def ring(rig: Rig) -> KeyRing:
    return rig.ring()


def secret_of(key: str) -> str:
    match = TOKEN.fullmatch(key)
    assert match is not None, key
    return match[2]


# -- create --------------------------------------------------------------------------------


def test_create_gives_the_record_without_the_hash_and_the_key_once(ring: KeyRing) -> None:
    record, key = ring.create("ci bot")
    match = TOKEN.fullmatch(key)
    assert match is not None
    assert record.keys() == PUBLIC_FIELDS
    assert record["id"] == "apikey_" + match[1]
    assert (record["name"], record["access"], record["stores"], record["revoked_at"]) == (
        "ci bot",
        "read_write",
        None,
        None,
    )
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", record["created_at"])
    assert ring.authenticate(key) == Principal(record["id"], "read_write", None)


def test_every_key_is_fresh(ring: KeyRing) -> None:
    made = [ring.create(f"k{i}") for i in range(6)]
    assert len({record["id"] for record, _ in made}) == 6
    assert len({secret_of(key) for _, key in made}) == 6


def test_a_scoped_read_only_key_keeps_its_scope(ring: KeyRing) -> None:
    record, key = ring.create("reader", access="read_only", stores=[STORE_B, STORE_A, STORE_B])
    assert record["access"] == "read_only"
    assert record["stores"] == [STORE_A, STORE_B]  # sorted, once each
    assert ring.authenticate(key) == Principal(record["id"], "read_only", frozenset({STORE_A, STORE_B}))


def test_the_store_holds_the_hash_of_the_secret_never_the_secret(rig: Rig, ring: KeyRing) -> None:
    record, key = ring.create("hash only", stores=[STORE_A])
    secret = secret_of(key)
    stored = rig.stored_record(record["id"])
    assert stored.keys() == RECORD_FIELDS
    assert stored["secret_sha256"] == hashlib.sha256(secret.encode()).hexdigest()
    assert {name: stored[name] for name in PUBLIC_FIELDS} == record
    assert secret not in json.dumps(stored)
    every_byte = rig.every_byte()
    assert every_byte  # something was written, and it is ciphertext
    for plain in (secret, key, stored["secret_sha256"], "hash only"):
        assert plain.encode() not in every_byte


ACCEPTED_NAMES = ["n", "n" * 100, "Clé de l'équipe 用户 🧠", " padded "]


@pytest.mark.parametrize("name", ACCEPTED_NAMES)
def test_create_accepts_names_within_the_limits(ring: KeyRing, name: str) -> None:
    record, _ = ring.create(name)
    assert record["name"] == name
    assert [listed["name"] for listed in ring.list()] == [name]


REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("empty name", {"name": ""}, "1 to 100 characters"),
    ("name of 101", {"name": "n" * 101}, "1 to 100 characters, not 101"),
    ("only spaces", {"name": "   "}, "1 to 100 characters"),
    ("name not a string", {"name": 7}, "must be a string"),
    ("newline in a name", {"name": "a\nb"}, "printable"),
    ("NUL in a name", {"name": "a\x00b"}, "printable"),
    ("bidi override in a name", {"name": "a\u202eb"}, "printable"),
    ("lone surrogate in a name", {"name": "a\ud800b"}, "printable"),
    ("unknown access", {"name": "n", "access": "admin"}, "read_write or read_only, not 'admin'"),
    ("access of another case", {"name": "n", "access": "READ_ONLY"}, "read_write or read_only"),
    ("no stores", {"name": "n", "stores": []}, "at least one memory store"),
    ("one string for stores", {"name": "n", "stores": STORE_A}, "not one string"),
    ("a bad store id", {"name": "n", "stores": [STORE_A, "memstore_short"]}, "'memstore_short' is not a memory store"),
    ("the registry as a store", {"name": "n", "stores": [REGISTRY_TENANT]}, "is not a memory store id"),
    ("a store id not a string", {"name": "n", "stores": [5]}, "'5' is not a memory store id"),
    (
        "101 stores",
        {"name": "n", "stores": [f"memstore_{i:026b}".replace("0", "a").replace("1", "b") for i in range(101)]},
        "at most 100 stores, not 101",
    ),
]


@pytest.mark.parametrize(("case", "arguments", "message"), REFUSED, ids=[case for case, _, _ in REFUSED])
def test_create_refuses_a_bad_name_access_or_stores_and_writes_nothing(
    rig: Rig, ring: KeyRing, case: str, arguments: dict[str, Any], message: str
) -> None:
    before = rig.store.requests
    options = dict(arguments)
    name = options.pop("name")
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        ring.create(name, **options)
    assert rig.store.requests == before
    assert ring.list() == []


def test_a_key_may_name_100_stores(ring: KeyRing) -> None:
    stores = [f"memstore_{i:026b}".replace("0", "a").replace("1", "b") for i in range(100)]
    record, key = ring.create("wide", stores=stores)
    principal = ring.authenticate(key)
    assert principal is not None and principal.stores == frozenset(stores)
    assert record["stores"] == sorted(stores)


def test_a_name_holding_a_secret_is_refused_by_the_guard(rig: Rig, ring: KeyRing) -> None:
    with pytest.raises(ConfigurationError, match="name was refused") as caught:
        ring.create(f"key {AWS_KEY_ID}")
    assert AWS_KEY_ID not in str(caught.value)
    assert ring.list() == []


def test_under_redact_a_name_is_stored_redacted_and_answered_as_stored(rig: Rig) -> None:
    ring = KeyRing(lambda user_id: rig.open_tenant(user_id, sensitive_data="redact"), clock=rig.clock)
    record, key = ring.create(f"key {AWS_KEY_ID}")
    assert AWS_KEY_ID not in record["name"] and record["name"].startswith("key ")
    assert ring.list() == [record]
    assert ring.authenticate(key) is not None  # the hash is no secret to the guard


# -- list ----------------------------------------------------------------------------------


def test_list_gives_every_key_oldest_first_revoked_too_without_hashes(ring: KeyRing) -> None:
    assert ring.list() == []
    made = [ring.create(name)[0] for name in ("first", "second", "third")]
    revoked = ring.revoke(made[1]["id"])
    listed = ring.list()
    assert listed == [made[0], revoked, made[2]]
    assert all(record.keys() == PUBLIC_FIELDS for record in listed)


def test_keys_and_stores_share_the_registry_without_mixing(rig: Rig, ring: KeyRing) -> None:
    registry = StoreRegistry(rig.open_tenant)
    store = registry.create({"name": "a store"})
    record, _ = ring.create("a key")
    assert ring.list() == [record]
    assert [listed["id"] for listed in registry.list(())["data"]] == [store["id"]]


def test_an_unreadable_record_is_left_out_of_the_list_refused_and_not_revoked(
    rig: Rig, ring: KeyRing, caplog: pytest.LogCaptureFixture
) -> None:
    good, _ = ring.create("good")
    bad, bad_key = ring.create("bad")
    path = f"/memories/keys/{bad['id'].removeprefix('apikey_')}.json"
    rig.admin().write(path, json.dumps({**rig.stored_record(bad["id"]), "access": "root"}))
    fresh = rig.ring()
    with caplog.at_level(logging.ERROR, logger="s3memory.serve.keys"):
        assert fresh.list() == [good]
        assert fresh.authenticate(bad_key) is None
    assert len([r for r in caplog.records if "does not parse" in r.getMessage()]) == 2
    with pytest.raises(ConfigurationError, match="unreadable"):
        fresh.revoke(bad["id"])


# -- revoke --------------------------------------------------------------------------------


def test_revoke_stamps_the_key_refuses_it_at_once_and_is_idempotent(rig: Rig, ring: KeyRing) -> None:
    record, key = ring.create("short-lived")
    assert ring.authenticate(key) is not None  # now cached
    revoked = ring.revoke(record["id"])
    assert revoked == {**record, "revoked_at": revoked["revoked_at"]}
    assert revoked["revoked_at"] is not None and revoked["revoked_at"] >= record["created_at"]
    assert ring.authenticate(key) is None  # this process: at once, cache or not
    assert ring.revoke(record["id"]) == revoked
    assert rig.stored_record(record["id"])["revoked_at"] == revoked["revoked_at"]


def test_revoke_of_an_unknown_or_malformed_id_is_refused(ring: KeyRing) -> None:
    with pytest.raises(PathNotFoundError, match="No API key with id apikey_0123456789abcdef"):
        ring.revoke("apikey_0123456789abcdef")
    for bad in ("apikey_0123", "apikey_0123456789ABCDEF", "0123456789abcdef", "memstore_" + "a" * 26, ""):
        with pytest.raises(ConfigurationError, match="is not an API key id"):
            ring.revoke(bad)
    record, key = ring.create("pasted")
    with pytest.raises(ConfigurationError, match=f"not an API key id .*: its id is {record['id']}$") as pasted:
        ring.revoke(key)
    assert secret_of(key) not in str(pasted.value)
    with pytest.raises(ConfigurationError, match="that is an API key, not an API key id") as partial:
        ring.revoke(key[:30])
    assert key[:30] not in str(partial.value)


def test_concurrent_revocations_agree_on_one_time(rig: Rig, ring: KeyRing) -> None:
    record, _ = ring.create("raced")
    rings = [rig.ring() for _ in range(6)]
    answers: list[dict[str, Any]] = []
    barrier = threading.Barrier(len(rings))

    def revoke(each: KeyRing) -> None:
        barrier.wait()
        answers.append(each.revoke(record["id"]))

    threads = [threading.Thread(target=revoke, args=(each,)) for each in rings]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == len(rings)
    assert len({answer["revoked_at"] for answer in answers}) == 1
    assert rig.stored_record(record["id"])["revoked_at"] == answers[0]["revoked_at"]


# -- authenticate --------------------------------------------------------------------------


def test_a_wrong_secret_or_an_unknown_kid_is_refused(ring: KeyRing) -> None:
    _, key = ring.create("target")
    kid, secret = TOKEN.fullmatch(key).groups()  # type: ignore[union-attr]
    other_secret = ("A" if secret[0] != "A" else "B") + secret[1:]
    assert ring.authenticate(f"s3m_{kid}_{other_secret}") is None
    assert ring.authenticate(f"s3m_{'0' * 16}_{secret}") is None
    _, second = ring.create("other")
    assert ring.authenticate(f"s3m_{kid}_{secret_of(second)}") is None  # another key's secret
    assert ring.authenticate(key) is not None


@pytest.mark.parametrize(
    "token",
    [
        "",
        "s3m_",
        "s3m_0123456789abcdef_",
        "s3m_0123456789ABCDEF_" + "a" * 43,
        "s3m_0123456789abcde_" + "a" * 43,
        "s3m_0123456789abcdef_" + "a" * 42,
        "s3m_0123456789abcdef_" + "a" * 44,
        "s3m_0123456789abcdef_" + "a" * 42 + "=",
        "s3m_0123456789abcdef_" + "a" * 42 + "+",
        "S3M_0123456789abcdef_" + "a" * 43,
        " s3m_0123456789abcdef_" + "a" * 43,
        "s3m_0123456789abcdef_" + "a" * 43 + "\n",
        "Bearer s3m_0123456789abcdef_" + "a" * 43,
        "k" * 64,
    ],
)
def test_a_malformed_token_is_refused_without_a_request(rig: Rig, ring: KeyRing, token: str) -> None:
    before = rig.store.requests
    assert ring.authenticate(token) is None
    assert rig.store.requests == before


@pytest.mark.parametrize("token", [None, b"s3m_0123456789abcdef_" + b"a" * 43, 42])
def test_a_token_not_a_string_is_refused(ring: KeyRing, token: object) -> None:
    assert ring.authenticate(token) is None  # type: ignore[arg-type]


def test_a_real_key_with_padding_or_a_changed_character_is_refused(ring: KeyRing) -> None:
    _, key = ring.create("exact")
    for variant in (key + "=", key[:-1], key.upper(), key.replace("s3m_", "s3m-"), " " + key):
        assert ring.authenticate(variant) is None
    assert ring.authenticate(key) is not None


# -- the cache -----------------------------------------------------------------------------


def test_a_checked_key_is_not_read_again_within_the_bound(rig: Rig, ring: KeyRing) -> None:
    _, key = ring.create("busy")
    assert ring.authenticate(key) is not None
    before = rig.store.requests
    for _ in range(5):
        assert ring.authenticate(key) is not None
    assert rig.store.requests == before
    rig.clock.now += CACHE_SECONDS
    assert ring.authenticate(key) is not None
    assert rig.store.requests > before  # read again once the bound passed


def test_a_key_revoked_elsewhere_is_refused_once_the_bound_passes(rig: Rig) -> None:
    server, cli = rig.ring(), rig.ring()
    record, key = cli.create("revoked elsewhere")
    assert server.authenticate(key) is not None
    cli.revoke(record["id"])
    rig.clock.now += CACHE_SECONDS - 0.001
    assert server.authenticate(key) is not None  # still within the documented bound
    rig.clock.now += 0.001
    assert server.authenticate(key) is None
    rig.clock.now += 1000
    assert server.authenticate(key) is None  # a refusal is not forgotten either


def test_a_wrong_secret_is_refused_from_the_cache_too(rig: Rig, ring: KeyRing) -> None:
    _, key = ring.create("cached")
    assert ring.authenticate(key) is not None
    kid, secret = TOKEN.fullmatch(key).groups()  # type: ignore[union-attr]
    before = rig.store.requests
    assert ring.authenticate(f"s3m_{kid}_{secret[::-1]}") is None
    assert rig.store.requests == before


def test_a_key_created_elsewhere_is_accepted_at_once(rig: Rig) -> None:
    server, cli = rig.ring(), rig.ring()
    assert server.authenticate("s3m_0123456789abcdef_" + "a" * 43) is None
    _, key = cli.create("new")
    assert server.authenticate(key) is not None


def test_the_cache_is_bounded_and_drops_the_least_recent(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keys_module, "CACHE_ENTRIES", 2)
    server, cli = rig.ring(), rig.ring()
    made = [cli.create(name) for name in ("a", "b", "c")]
    for _, key in made:
        assert server.authenticate(key) is not None  # "a" dropped when "c" came in
    for record, _ in made:
        cli.revoke(record["id"])
    first, _, third = (server.authenticate(key) for _, key in made)
    assert first is None  # not cached: read again, and refused
    assert third is not None  # still cached (within the bound)


# -- what a key may do ---------------------------------------------------------------------


def test_a_full_key_may_do_everything() -> None:
    principal = Principal.full("apikey_0123456789abcdef")
    assert principal == Principal("apikey_0123456789abcdef", "read_write", None)
    assert principal.may_read(STORE_A) and principal.may_write(STORE_A) and principal.may_manage_stores
    principal.require_read(STORE_A)
    principal.require_write(STORE_A)
    principal.require_manage()


@pytest.mark.parametrize(
    ("access", "stores", "reads", "writes", "manages"),
    [
        ("read_write", None, {STORE_A, STORE_B, STORE_C}, {STORE_A, STORE_B, STORE_C}, True),
        ("read_only", None, {STORE_A, STORE_B, STORE_C}, set(), False),
        ("read_write", frozenset({STORE_A, STORE_B}), {STORE_A, STORE_B}, {STORE_A, STORE_B}, False),
        ("read_only", frozenset({STORE_A}), {STORE_A}, set(), False),
    ],
)
def test_what_each_kind_of_key_may_do(
    access: Any, stores: frozenset[str] | None, reads: set[str], writes: set[str], manages: bool
) -> None:
    principal = Principal("apikey_0123456789abcdef", access, stores)
    for store in (STORE_A, STORE_B, STORE_C):
        assert principal.may_read(store) == (store in reads)
        assert principal.may_write(store) == (store in writes)
        if store not in reads:
            with pytest.raises(ApiError) as unseen:
                principal.require_read(store)
            assert (unseen.value.status, unseen.value.error_type) == (404, "not_found_error")
            assert unseen.value.message == f"No memory store with id {store}."  # as for no store at all
        if store in reads and store not in writes:
            with pytest.raises(ApiError) as read_only:
                principal.require_write(store)
            assert (read_only.value.status, read_only.value.error_type) == (403, "permission_error")
    assert principal.may_manage_stores == manages
    if not manages:
        with pytest.raises(ApiError) as unmanaged:
            principal.require_manage()
        assert unmanaged.value.status == 403
