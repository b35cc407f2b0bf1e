"""The store registry (``/v1/memory_stores``): the API's shapes and rules for every method,
cursor pagination, compare-and-swap updates under concurrency, deletion as erasure of the
store's tenant, and records that are ciphertext in the store."""

from __future__ import annotations

import base64
import datetime
import functools
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from anthropic.types.beta.beta_managed_agents_deleted_memory_store import BetaManagedAgentsDeletedMemoryStore
from anthropic.types.beta.beta_managed_agents_memory_store import BetaManagedAgentsMemoryStore
from helpers import MASTER_KEY

from s3memory import (
    EncryptedMemory,
    InMemoryStore,
    LocalDirStore,
    ObjectStore,
    PathNotFoundError,
    StorageError,
    StorageUnavailableError,
    open_memory,
    validate_tenant,
)
from s3memory._admin.manage import MemoryAdmin
from s3memory.serve.http import ApiError
from s3memory.serve.registry import REGISTRY_TENANT, STORE_ID, StoreRegistry
from s3memory.stores import DelegatingStore

AWS_KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"  # AWS's documented example
THREADS = 8
MANY = 45
Body = dict[str, Any]


@dataclass
class Rig:
    """A registry over one object store, and the tenants it opened."""

    store: ObjectStore
    root: Path | None  # the local store's directory, to read its every byte
    opened: dict[str, EncryptedMemory] = field(default_factory=dict)
    failing: set[str] = field(default_factory=set)  # tenants whose deletes fail
    registry: StoreRegistry = field(init=False)

    def __post_init__(self) -> None:
        self.registry = StoreRegistry(self.open_tenant)

    def open_tenant(self, user_id: str) -> EncryptedMemory:
        if user_id in self.failing:
            return open_memory(store=DeletesFail(self.store), master_key=MASTER_KEY, user_id=user_id)
        if user_id not in self.opened:
            self.opened[user_id] = open_memory(store=self.store, master_key=MASTER_KEY, user_id=user_id)
        return self.opened[user_id]

    def objects(self) -> dict[str, str]:
        """Every object and its ETag: to show that nothing was written."""
        return {info.key: info.etag for info in self.store.list("")}

    def every_byte(self) -> bytes:
        """Everything the store holds: each file on disk (its name too), or each version of
        each object (its key too)."""
        if self.root is not None:
            files = sorted(path for path in self.root.rglob("*") if path.is_file())
            return b"".join(str(path.relative_to(self.root)).encode() + path.read_bytes() for path in files)
        chunks = []
        for version in self.store.list_versions(""):
            stored = self.store.get_version(version.key, version.version_id)
            chunks.append(version.key.encode() + (b"" if stored is None else stored.body))
        return b"".join(chunks)


class DeletesFail(DelegatingStore):
    """Every delete fails as an unavailable bucket would."""

    def _call(self, verb: str, perform: Callable[[], Any]) -> Any:
        if verb in ("delete", "purge", "delete_version"):
            raise StorageUnavailableError("Error: the store is unavailable (injected)")
        return perform()


@pytest.fixture(params=["inmemory", "localdir"])
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Rig]:
    if request.param == "inmemory":
        made = Rig(InMemoryStore(), None)
    else:
        made = Rig(LocalDirStore(tmp_path / "store"), tmp_path / "store")
    yield made
    for memory in made.opened.values():
        memory.close()


@pytest.fixture
def registry(rig: Rig) -> StoreRegistry:
    return rig.registry


def refused(call: Callable[[], object], status: int = 400) -> ApiError:
    with pytest.raises(ApiError) as caught:
        call()
    assert caught.value.status == status
    assert caught.value.error_type == {400: "invalid_request_error", 404: "not_found_error"}[status]
    return caught.value


def sdk_store(answer: Body) -> BetaManagedAgentsMemoryStore:
    """The answer as the SDK parses it, and the same JSON back (nothing the model drops)."""
    parsed = BetaManagedAgentsMemoryStore.model_validate(answer)
    assert parsed.to_dict(mode="json", exclude_unset=False).keys() == answer.keys()
    return parsed


def stamp_of(text: str) -> datetime.datetime:
    assert text.endswith("Z") and len(text) == len("2026-01-01T00:00:00.000000Z")
    return datetime.datetime.fromisoformat(text)


# -- create and retrieve -------------------------------------------------------------------


def test_create_gives_the_sdk_shape_and_retrieve_gives_it_back(registry: StoreRegistry) -> None:
    created = registry.create({"name": "User Preferences", "description": "Per-user.", "metadata": {"user": "42"}})
    parsed = sdk_store(created)
    assert parsed.type == "memory_store"
    assert (parsed.name, parsed.description, parsed.metadata) == ("User Preferences", "Per-user.", {"user": "42"})
    assert parsed.archived_at is None and created["archived_at"] is None
    assert created["created_at"] == created["updated_at"]
    assert stamp_of(created["created_at"]).tzinfo == datetime.timezone.utc
    assert registry.retrieve(created["id"]) == created


def test_a_store_id_is_a_fresh_valid_tenant_id(registry: StoreRegistry) -> None:
    ids = {registry.create({"name": "s"})["id"] for _ in range(5)}
    assert len(ids) == 5
    for store_id in ids:
        assert STORE_ID.fullmatch(store_id) and len(store_id) == len("memstore_") + 26
        assert validate_tenant(store_id) == store_id
    assert not STORE_ID.fullmatch(REGISTRY_TENANT)


def test_description_and_metadata_default_to_empty(registry: StoreRegistry) -> None:
    created = registry.create({"name": "bare"})
    assert (created["description"], created["metadata"]) == ("", {})


def metadata(pairs: int, key_chars: int = 4, value_chars: int = 3) -> dict[str, str]:
    return {f"{i:0{key_chars}d}"[-key_chars:]: "v" * value_chars for i in range(pairs)}


ACCEPTED: list[tuple[str, Body]] = [
    ("name at 255", {"name": "n" * 255}),
    ("name of 1", {"name": "n"}),
    ("unicode name", {"name": "Préférences 用户 🧠"}),
    ("description at 1,024", {"name": "n", "description": "d" * 1024}),
    ("empty description", {"name": "n", "description": ""}),
    ("control characters in a description", {"name": "n", "description": "line\nnext\ttab"}),
    ("16 pairs", {"name": "n", "metadata": metadata(16)}),
    ("key at 64", {"name": "n", "metadata": {"k" * 64: "v"}}),
    ("value at 512", {"name": "n", "metadata": {"k": "v" * 512}}),
    ("empty value", {"name": "n", "metadata": {"k": ""}}),
    ("every limit at once", {"name": "n" * 255, "description": "d" * 1024, "metadata": metadata(16, 64, 512)}),
]


@pytest.mark.parametrize(("case", "body"), ACCEPTED, ids=[case for case, _ in ACCEPTED])
def test_create_accepts_each_field_at_its_limit(registry: StoreRegistry, case: str, body: Body) -> None:
    created = registry.create(body)
    sdk_store(created)
    assert created["name"] == body["name"]
    assert created["description"] == body.get("description", "")
    assert created["metadata"] == body.get("metadata", {})
    assert registry.retrieve(created["id"]) == created


REFUSED: list[tuple[str, object, str]] = [
    ("no name", {}, "name"),
    ("null name", {"name": None}, "name"),
    ("empty name", {"name": ""}, "name"),
    ("name of 256", {"name": "n" * 256}, "name"),
    ("name not a string", {"name": 5}, "name"),
    ("NUL in a name", {"name": "a\x00b"}, "name"),
    ("newline in a name", {"name": "a\nb"}, "name"),
    ("unit separator in a name", {"name": "a\x1fb"}, "name"),
    ("DEL in a name", {"name": "a\x7fb"}, "name"),
    ("C1 control in a name", {"name": "a\x85b"}, "name"),
    ("lone surrogate in a name", {"name": "a\ud800b"}, "name"),
    ("description of 1,025", {"name": "n", "description": "d" * 1025}, "description"),
    ("null description", {"name": "n", "description": None}, "description"),
    ("description not a string", {"name": "n", "description": ["d"]}, "description"),
    ("17 pairs", {"name": "n", "metadata": metadata(17)}, "metadata"),
    ("key of 65", {"name": "n", "metadata": {"k" * 65: "v"}}, "metadata"),
    ("empty key", {"name": "n", "metadata": {"": "v"}}, "metadata"),
    ("value of 513", {"name": "n", "metadata": {"k": "v" * 513}}, "metadata"),
    ("value not a string", {"name": "n", "metadata": {"k": 5}}, "metadata"),
    ("null value", {"name": "n", "metadata": {"k": None}}, "metadata"),
    ("metadata not an object", {"name": "n", "metadata": [["k", "v"]]}, "metadata"),
    ("null metadata", {"name": "n", "metadata": None}, "metadata"),
    ("an unknown field", {"name": "n", "workspace": "w"}, "workspace"),
    ("a body that is not an object", ["name"], "object"),
]


@pytest.mark.parametrize(("case", "body", "named"), REFUSED, ids=[case for case, _, _ in REFUSED])
def test_create_refuses_each_field_past_its_limit(rig: Rig, case: str, body: Any, named: str) -> None:
    before = rig.objects()
    error = refused(lambda: rig.registry.create(body))
    assert named in error.message
    assert rig.objects() == before


def test_extra_inputs_are_refused_as_the_api_does(registry: StoreRegistry) -> None:
    assert "Extra inputs are not permitted" in refused(lambda: registry.create({"name": "n", "x": 1})).message


def test_a_name_holding_a_secret_is_refused_by_the_guard_and_nothing_is_written(rig: Rig) -> None:
    before = rig.objects()
    error = refused(lambda: rig.registry.create({"name": "n", "description": f"key {AWS_KEY_ID}"}))
    assert AWS_KEY_ID not in error.message
    assert rig.objects() == before


@pytest.mark.parametrize(
    "store_id",
    [
        "memstore_" + "a" * 26,
        "memstore_" + "A" * 26,
        "memstore_short",
        REGISTRY_TENANT,
        "../x",
        "",
        "memstore_" + "a" * 200,
    ],
)
def test_unknown_and_malformed_ids_are_404(registry: StoreRegistry, store_id: str) -> None:
    for call in (
        lambda: registry.retrieve(store_id),
        lambda: registry.update(store_id, {"name": "x"}),
        lambda: registry.archive(store_id),
        lambda: registry.delete(store_id),
        lambda: registry.require(store_id, writable=False),
    ):
        error = refused(call, 404)
        assert len(error.message) < 200


def test_an_unreadable_record_is_a_server_error_and_left_out_of_listings(rig: Rig) -> None:
    kept = rig.registry.create({"name": "kept"})
    broken = rig.registry.create({"name": "broken"})["id"]
    MemoryAdmin(rig.open_tenant(REGISTRY_TENANT)).write(f"/memories/stores/{broken}.json", "{not json")
    with pytest.raises(ApiError) as caught:
        rig.registry.retrieve(broken)
    assert (caught.value.status, caught.value.error_type) == (500, "api_error")
    assert [store["id"] for store in rig.registry.list([])["data"]] == [kept["id"]]


def test_the_record_is_the_documented_v1_json(rig: Rig) -> None:
    created = rig.registry.create({"name": "n", "metadata": {"a": "b"}})
    text, _ = MemoryAdmin(rig.open_tenant(REGISTRY_TENANT)).read(f"/memories/stores/{created['id']}.json")
    record = json.loads(text)
    assert record == {"v": 1, **{key: value for key, value in created.items() if key != "type"}}


# -- update ----------------------------------------------------------------------------------


def test_update_changes_name_and_description_and_keeps_the_rest(registry: StoreRegistry) -> None:
    created = registry.create({"name": "old", "description": "old text", "metadata": {"a": "1"}})
    updated = registry.update(created["id"], {"name": "new", "description": "new text"})
    sdk_store(updated)
    assert (updated["name"], updated["description"], updated["metadata"]) == ("new", "new text", {"a": "1"})
    assert updated["created_at"] == created["created_at"]
    assert stamp_of(updated["updated_at"]) >= stamp_of(created["updated_at"])
    assert registry.retrieve(created["id"]) == updated


def test_an_empty_description_clears_it(registry: StoreRegistry) -> None:
    created = registry.create({"name": "n", "description": "text"})
    assert registry.update(created["id"], {"description": ""})["description"] == ""
    assert registry.retrieve(created["id"])["description"] == ""


def test_null_fields_leave_the_store_as_it_is(rig: Rig) -> None:
    created = rig.registry.create({"name": "n", "description": "text", "metadata": {"a": "1"}})
    before = rig.objects()
    assert rig.registry.update(created["id"], {"name": None, "description": None, "metadata": None}) == created
    assert rig.registry.update(created["id"], {}) == created
    assert rig.objects() == before


def test_an_update_that_changes_nothing_writes_nothing(rig: Rig) -> None:
    created = rig.registry.create({"name": "n", "description": "d", "metadata": {"a": "1"}})
    before = rig.objects()
    same = rig.registry.update(created["id"], {"name": "n", "description": "d", "metadata": {"a": "1", "gone": None}})
    assert same == created
    assert rig.objects() == before


def test_metadata_is_a_patch_and_null_removes_a_key(registry: StoreRegistry) -> None:
    created = registry.create({"name": "n", "metadata": {"keep": "1", "change": "2", "drop": "3"}})
    updated = registry.update(created["id"], {"metadata": {"change": "two", "drop": None, "add": "4", "absent": None}})
    assert updated["metadata"] == {"keep": "1", "change": "two", "add": "4"}
    assert registry.retrieve(created["id"])["metadata"] == updated["metadata"]


def test_metadata_may_reach_16_pairs_after_a_patch_and_not_17(rig: Rig) -> None:
    store_id = rig.registry.create({"name": "n", "metadata": metadata(15)})["id"]
    full = rig.registry.update(store_id, {"metadata": {"sixteenth": "v"}})
    assert len(full["metadata"]) == 16
    before = rig.objects()
    assert "16" in refused(lambda: rig.registry.update(store_id, {"metadata": {"seventeenth": "v"}})).message
    assert rig.objects() == before
    swapped = rig.registry.update(store_id, {"metadata": {"sixteenth": None, "another": "v"}})
    assert len(swapped["metadata"]) == 16 and "another" in swapped["metadata"]


UPDATE_REFUSED: list[tuple[str, object, str]] = [
    ("empty name", {"name": ""}, "name"),
    ("name of 256", {"name": "n" * 256}, "name"),
    ("control character in a name", {"name": "a\tb"}, "name"),
    ("name not a string", {"name": 1}, "name"),
    ("description of 1,025", {"description": "d" * 1025}, "description"),
    ("key of 65", {"metadata": {"k" * 65: "v"}}, "metadata"),
    ("empty key", {"metadata": {"": None}}, "metadata"),
    ("value of 513", {"metadata": {"k": "v" * 513}}, "metadata"),
    ("value not a string", {"metadata": {"k": 1}}, "metadata"),
    ("17 pairs in the patch", {"metadata": metadata(17)}, "metadata"),
    ("metadata not an object", {"metadata": "k=v"}, "metadata"),
    ("an unknown field", {"archived_at": None}, "archived_at"),
    ("a body that is not an object", "name", "object"),
]


@pytest.mark.parametrize(("case", "body", "named"), UPDATE_REFUSED, ids=[case for case, _, _ in UPDATE_REFUSED])
def test_update_refuses_each_field_past_its_limit(rig: Rig, case: str, body: Any, named: str) -> None:
    store_id = rig.registry.create({"name": "n"})["id"]
    before = rig.objects()
    assert named in refused(lambda: rig.registry.update(store_id, body)).message
    assert rig.objects() == before


@pytest.mark.parametrize(
    "body", [{"name": "n" * 255}, {"description": "d" * 1024}, {"metadata": {"k" * 64: "v" * 512}}], ids=str
)
def test_update_accepts_each_field_at_its_limit(registry: StoreRegistry, body: Body) -> None:
    store_id = registry.create({"name": "n"})["id"]
    updated = registry.update(store_id, body)
    for key, value in body.items():
        assert updated[key] == value


def run_threads(count: int, work: Callable[[int], object]) -> tuple[list[object], list[BaseException]]:
    """(what each thread's work returned, errors raised), all started at once."""
    results: list[object] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(count)

    def body(i: int) -> None:
        try:
            barrier.wait()
            results.append(work(i))
        except BaseException as exc:  # collected and asserted on
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results, errors


def test_concurrent_updates_all_land(registry: StoreRegistry) -> None:
    store_id = registry.create({"name": "n", "metadata": {"base": "0"}})["id"]
    results, errors = run_threads(THREADS, lambda i: registry.update(store_id, {"metadata": {f"k{i}": str(i)}}))
    assert errors == []
    assert registry.retrieve(store_id)["metadata"] == {"base": "0", **{f"k{i}": str(i) for i in range(THREADS)}}
    for answer in results:
        assert isinstance(answer, dict) and answer["metadata"]["base"] == "0"


def test_concurrent_renames_leave_one_of_the_names(registry: StoreRegistry) -> None:
    store_id = registry.create({"name": "n"})["id"]
    results, errors = run_threads(THREADS, lambda i: registry.update(store_id, {"name": f"name {i}"}))
    assert errors == []
    assert registry.retrieve(store_id)["name"] in {f"name {i}" for i in range(THREADS)}
    assert sorted(answer["name"] for answer in results if isinstance(answer, dict)) == sorted(
        f"name {i}" for i in range(THREADS)
    )


# -- archive and require ---------------------------------------------------------------------


def test_archive_sets_archived_at_and_updated_at_once(rig: Rig) -> None:
    created = rig.registry.create({"name": "n"})
    archived = rig.registry.archive(created["id"])
    parsed = sdk_store(archived)
    assert parsed.archived_at is not None
    assert archived["archived_at"] == archived["updated_at"]
    assert stamp_of(archived["archived_at"]) >= stamp_of(created["created_at"])
    before = rig.objects()
    assert rig.registry.archive(created["id"]) == archived  # unchanged, as the API documents
    assert rig.objects() == before
    assert rig.registry.retrieve(created["id"]) == archived


def test_an_archived_store_refuses_updates_and_writes_to_its_memories(rig: Rig) -> None:
    store_id = rig.registry.create({"name": "n"})["id"]
    assert rig.registry.require(store_id, writable=True)["id"] == store_id
    archived = rig.registry.archive(store_id)
    before = rig.objects()
    bodies: list[Body] = [{"name": "other"}, {}, {"metadata": {"a": None}}]
    for body in bodies:
        assert "archived" in refused(functools.partial(rig.registry.update, store_id, body)).message
    assert "archived" in refused(lambda: rig.registry.require(store_id, writable=True)).message
    assert rig.registry.require(store_id, writable=False) == archived
    assert rig.objects() == before


# -- delete ----------------------------------------------------------------------------------


def test_delete_erases_the_stores_tenant_and_its_record(rig: Rig) -> None:
    store_id = rig.registry.create({"name": "n"})["id"]
    other_id = rig.registry.create({"name": "other"})["id"]
    tenant = rig.open_tenant(store_id)
    tenant.create("/memories/notes.md", "a note of the deleted store")
    rig.open_tenant(other_id).create("/memories/notes.md", "a note of another store")
    prefixes = tenant.layout.owned_prefixes
    assert any(next(rig.store.list(prefix), None) for prefix in prefixes)

    deleted = rig.registry.delete(store_id)
    assert deleted == {"type": "memory_store_deleted", "id": store_id}
    assert BetaManagedAgentsDeletedMemoryStore.model_validate(deleted).id == store_id
    for prefix in prefixes:
        assert list(rig.store.list(prefix)) == []
        assert list(rig.store.list_versions(prefix)) == []
    fresh = open_memory(store=rig.store, master_key=MASTER_KEY, user_id=store_id)
    with pytest.raises(PathNotFoundError):
        fresh.read_text("/memories/notes.md")
    fresh.close()

    refused(lambda: rig.registry.retrieve(store_id), 404)
    refused(lambda: rig.registry.delete(store_id), 404)
    assert [store["id"] for store in rig.registry.list([("include_archived", "true")])["data"]] == [other_id]
    assert rig.open_tenant(other_id).read_text("/memories/notes.md") == "a note of another store"


def test_an_archived_store_can_be_deleted(registry: StoreRegistry) -> None:
    store_id = registry.create({"name": "n"})["id"]
    registry.archive(store_id)
    assert registry.delete(store_id)["id"] == store_id
    refused(lambda: registry.retrieve(store_id), 404)


def test_a_failed_erasure_leaves_the_store_and_deleting_again_finishes(rig: Rig) -> None:
    created = rig.registry.create({"name": "n"})
    store_id = created["id"]
    rig.open_tenant(store_id).create("/memories/notes.md", "text")
    rig.failing.add(store_id)
    with pytest.raises(StorageError):
        rig.registry.delete(store_id)
    assert rig.registry.retrieve(store_id) == created
    assert [store["id"] for store in rig.registry.list([])["data"]] == [store_id]

    rig.failing.discard(store_id)
    assert rig.registry.delete(store_id)["id"] == store_id
    refused(lambda: rig.registry.retrieve(store_id), 404)
    assert list(rig.store.list(rig.open_tenant(store_id).layout.memory_prefix)) == []


# -- list ------------------------------------------------------------------------------------


def newest_first(stores: list[Body]) -> list[str]:
    return [s["id"] for s in sorted(stores, key=lambda s: (s["created_at"], s["id"]), reverse=True)]


def every_page(registry: StoreRegistry, query: list[tuple[str, str]], cursor: str | None = None) -> list[list[Body]]:
    """Every page of the listing, from ``cursor`` (the first page if None)."""
    pages: list[list[Body]] = []
    while True:
        answer = registry.list(query + ([("page", cursor)] if cursor else []))
        assert set(answer) == {"data", "next_page"}
        pages.append(answer["data"])
        cursor = answer["next_page"]
        if cursor is None:
            return pages
        assert isinstance(cursor, str) and cursor


@pytest.fixture
def many(registry: StoreRegistry) -> list[Body]:
    return [registry.create({"name": f"store {i}"}) for i in range(MANY)]


def test_pagination_shows_every_store_once_newest_first(registry: StoreRegistry, many: list[Body]) -> None:
    pages = every_page(registry, [("limit", "20")])
    assert [len(page) for page in pages] == [20, 20, 5]
    seen = [store["id"] for page in pages for store in page]
    assert seen == newest_first(many)
    for page in pages:
        for store in page:
            sdk_store(store)
    assert registry.list([])["data"] == pages[0]  # 20 by default


def test_limit_bounds_a_page(registry: StoreRegistry, many: list[Body]) -> None:
    assert len(registry.list([("limit", "1")])["data"]) == 1
    everything = registry.list([("limit", "100")])
    assert len(everything["data"]) == MANY and everything["next_page"] is None
    assert [len(page) for page in every_page(registry, [("limit", "45")])] == [45]


def test_archived_stores_are_listed_only_when_asked(registry: StoreRegistry, many: list[Body]) -> None:
    archived = {registry.archive(store["id"])["id"] for store in many[::3]}
    live = [s["id"] for s in registry.list([("limit", "100")])["data"]]
    assert set(live) == {s["id"] for s in many} - archived
    assert [s["id"] for s in registry.list([("limit", "100"), ("include_archived", "false")])["data"]] == live
    paged = every_page(registry, [("limit", "7"), ("include_archived", "true")])
    assert [s["id"] for page in paged for s in page] == newest_first(many)
    assert {s["id"] for page in paged for s in page if s["archived_at"] is not None} == archived


def test_created_at_bounds_are_inclusive(registry: StoreRegistry, many: list[Body]) -> None:
    oldest_first = sorted(many, key=lambda s: (s["created_at"], s["id"]))
    low, high = oldest_first[10]["created_at"], oldest_first[30]["created_at"]

    def listed(query: list[tuple[str, str]]) -> list[str]:
        return [s["id"] for page in every_page(registry, query) for s in page]

    def expected(keep: Callable[[str], bool]) -> list[str]:
        return newest_first([s for s in many if keep(s["created_at"])])

    assert listed([("created_at[gte]", low)]) == expected(lambda t: t >= low)
    assert oldest_first[10]["id"] in listed([("created_at[gte]", low)])
    assert listed([("created_at[lte]", high)]) == expected(lambda t: t <= high)
    assert oldest_first[30]["id"] in listed([("created_at[lte]", high)])
    both = listed([("created_at[gte]", low), ("created_at[lte]", high), ("limit", "4")])
    assert both == expected(lambda t: low <= t <= high)

    # The same instant as the SDK sends a datetime (isoformat), in any offset, or naive (UTC).
    moment = stamp_of(low)
    for written in (moment.isoformat(), moment.astimezone(datetime.timezone(datetime.timedelta(hours=2))).isoformat()):
        assert listed([("created_at[gte]", written)]) == expected(lambda t: t >= low)
    assert listed([("created_at[gte]", moment.replace(tzinfo=None).isoformat())]) == expected(lambda t: t >= low)
    assert listed([("created_at[gte]", "2999-01-01T00:00:00Z")]) == []


def test_a_cursor_keeps_its_place_when_newer_stores_arrive(registry: StoreRegistry, many: list[Body]) -> None:
    first = registry.list([("limit", "20")])
    newer = registry.create({"name": "newer"})
    cursor = first["next_page"]
    assert cursor is not None
    rest = [s["id"] for page in every_page(registry, [("limit", "20")], cursor) for s in page]
    assert rest == newest_first(many)[20:]
    assert registry.list([("limit", "1")])["data"][0]["id"] == newer["id"]


def cursor_of(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


LIST_REFUSED: list[tuple[str, list[tuple[str, str]], str]] = [
    ("limit 0", [("limit", "0")], "limit"),
    ("limit 101", [("limit", "101")], "limit"),
    ("limit not a number", [("limit", "ten")], "limit"),
    ("limit empty", [("limit", "")], "limit"),
    ("limit negative", [("limit", "-1")], "limit"),
    ("limit fractional", [("limit", "1.5")], "limit"),
    ("include_archived not a boolean", [("include_archived", "yes")], "include_archived"),
    ("created_at not a time", [("created_at[gte]", "yesterday")], "created_at[gte]"),
    ("created_at empty", [("created_at[lte]", "")], "created_at[lte]"),
    ("page not base64", [("page", "!!!")], "page"),
    ("page not JSON", [("page", base64.urlsafe_b64encode(b"not json").decode())], "page"),
    ("page of another shape", [("page", cursor_of([1, 2]))], "page"),
    ("page with a bad id", [("page", cursor_of(["2026-01-01T00:00:00.000000Z", "x"]))], "page"),
    ("page with a bad time", [("page", cursor_of(["2026-01-01", "memstore_" + "a" * 26]))], "page"),
    ("an unknown parameter", [("created_at_gte", "2026-01-01T00:00:00Z")], "created_at_gte"),
    ("a parameter twice", [("limit", "5"), ("limit", "6")], "limit"),
]


@pytest.mark.parametrize(("case", "query", "named"), LIST_REFUSED, ids=[case for case, _, _ in LIST_REFUSED])
def test_list_refuses_a_bad_query(registry: StoreRegistry, case: str, query: list[tuple[str, str]], named: str) -> None:
    registry.create({"name": "n"})
    assert named in refused(lambda: registry.list(query)).message


def test_an_empty_registry_lists_nothing(registry: StoreRegistry) -> None:
    assert registry.list([("beta", "true")]) == {"data": [], "next_page": None}


# -- what the store holds --------------------------------------------------------------------


def test_the_store_holds_no_plaintext_of_a_record(rig: Rig) -> None:
    words = {
        "name": "Quokka Ledger Name",
        "description": "Zanzibar description of the store",
        "key": "wombat-metadata-key",
        "value": "platypus-metadata-value",
        "renamed": "Narwhal Renamed Store",
    }
    created = rig.registry.create(
        {"name": words["name"], "description": words["description"], "metadata": {words["key"]: words["value"]}}
    )
    rig.registry.update(created["id"], {"name": words["renamed"]})  # the old record kept as a version
    rig.registry.archive(created["id"])
    assert rig.registry.list([("include_archived", "true")])["data"][0]["name"] == words["renamed"]  # the index
    stored = rig.every_byte()
    assert created["id"].encode() in stored  # the bytes read are the store's (its keys name the record)
    for word in words.values():
        for encoded in (word.encode("utf-8"), word.encode("utf-16-le")):
            assert encoded not in stored
