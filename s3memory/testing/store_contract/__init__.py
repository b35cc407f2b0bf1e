"""The contract of an object store, as a class of pytest tests: :class:`ObjectStoreContract`.

Imported by :mod:`s3memory.testing`, where store authors find it (``from s3memory.testing
import ObjectStoreContract``); the fixtures that mock AWS are there, the contract is here.
The tests use only the store under test: no AWS, no moto.

A store declares in ``lacks`` the capabilities (:data:`STORE_CAPABILITIES`) it does not
have. A test that needs one calls :meth:`ObjectStoreContract.unless_lacking` first, which
makes the test a strict expected failure on such a store: its body still runs, a failure
is reported as expected (``XFAIL``), and a pass fails the test (``[XPASS(strict)]``),
because then the store has the capability and its declaration is stale.

Over 400 lines because the contract is one class of tests, kept whole: a store's author
reads in one place everything a store must do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import pytest

from .._errors import ObjectTooLargeError, PreconditionFailedError
from ..stores import NULL_VERSION, ObjectStore

__all__ = ["STORE_CAPABILITIES", "ObjectStoreContract"]


STORE_CAPABILITIES = frozenset({"copy_if_match", "copy_if_none_match", "delete_if_match", "versions"})
"""What an :class:`ObjectStoreContract` subclass may declare its store ``lacks``:

- ``copy_if_match``: ``copy(..., if_match=etag)`` refuses a source whose ETag differs;
- ``copy_if_none_match``: ``copy(..., if_none_match=True)`` refuses an existing destination;
- ``delete_if_match``: ``delete(keys, if_match={...})`` keeps an object whose ETag differs;
- ``versions``: the store keeps every version (``keeps_versions()`` is true): a write adds a
  version, a delete a delete marker, and ``list_versions``, ``get_version``,
  ``head_version`` and ``delete_version`` reach them (the tests named ``test_versions_...``).
  A store that keeps none lists each current object once, as version ``NULL_VERSION``.
"""

_META = {"x-amz-c": "115", "x-amz-w": "02"}
_NO_SUCH_ETAG = '"0123456789abcdef0123456789abcdef"'


class ObjectStoreContract:
    """The contract of :class:`~s3memory.stores.ObjectStore`, as pytest tests to subclass.

    Every store s3memory ships passes it (``S3Store`` on moto and on radosgw 16 lacks the
    three conditional capabilities, which those servers ignore; real S3 has them; a store,
    or a bucket, that keeps no versions lacks ``versions``). Subclass it in a test
    module under a name pytest collects (``Test...``), define a ``store`` fixture returning a
    fresh, empty store, and list in ``lacks`` what the store cannot do (see
    :data:`STORE_CAPABILITIES`), each with the reason. The tests of those capabilities then
    run as strict expected failures: a failure is reported as ``XFAIL``, and a pass fails the
    test (``[XPASS(strict)]``, with the reason), so a declaration the store has outgrown is
    noticed and removed::

        import pytest
        from s3memory.testing import ObjectStoreContract

        class TestMyStore(ObjectStoreContract):
            lacks = {"delete_if_match": "the backend has no conditional delete"}

            @pytest.fixture
            def store(self, tmp_path):
                return MyStore(tmp_path)

    The tests use keys under ``t/``, ``t2/``, ``tt/`` and ``u/``, and write at most a few
    thousand small objects (listing and deleting more than one page of 1,000). The tests of
    versions are named ``test_versions_...``, and none of them needs a precondition, so a
    fixture may give them a versioned bucket and the other tests an unversioned one (as on
    a server that refuses conditional writes on a versioned bucket). This class
    has no ``Test`` prefix, so pytest never collects it by itself, nor where it is imported.
    """

    lacks: ClassVar[Mapping[str, str]] = {}
    """Capabilities (names in :data:`STORE_CAPABILITIES`) the store lacks, each with why."""

    _request: pytest.FixtureRequest | None = None  # the running test's, for unless_lacking

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not isinstance(cls.lacks, Mapping):
            raise TypeError(f"{cls.__name__}.lacks must map capability names to reasons, not {cls.lacks!r}")
        unknown = sorted(set(cls.lacks) - STORE_CAPABILITIES)
        if unknown:
            known = ", ".join(sorted(STORE_CAPABILITIES))
            raise TypeError(f"{cls.__name__}.lacks names unknown capabilities {unknown}; known: {known}")

    @pytest.fixture
    def store(self) -> ObjectStore:
        """Override: a fresh, empty store for one test."""
        raise NotImplementedError(
            f"{type(self).__name__} must define a `store` fixture returning a fresh, empty ObjectStore"
        )

    @pytest.fixture(autouse=True)
    def _s3memory_contract_request(self, request: pytest.FixtureRequest) -> None:
        """Internal: keeps the running test's request, to which :meth:`unless_lacking` adds a mark."""
        self._request = request

    def unless_lacking(self, capability: str) -> None:
        """Make the running test a strict expected failure if the store lacks ``capability``.

        The test goes on either way. On a store that declares ``capability`` in ``lacks``, a
        failure of the rest of the test is reported as expected (``XFAIL``, with the declared
        reason), and a pass fails the test (``[XPASS(strict)]``): the store has the capability
        after all, and its declaration is stale.

        Raises:
            ValueError: ``capability`` is not in :data:`STORE_CAPABILITIES`.
        """
        if capability not in STORE_CAPABILITIES:
            raise ValueError(f"unknown store capability {capability!r}")
        if capability not in self.lacks:
            return
        reason = (
            f"the store lacks {capability}: {self.lacks[capability]} "
            f"(strict: should this test pass, the declaration in {type(self).__name__}.lacks is stale)"
        )
        if self._request is None:  # not in a test of this class (its autouse fixture did not run)
            pytest.xfail(reason)
        self._request.applymarker(pytest.mark.xfail(reason=reason, strict=True))

    # -- get, head, put -------------------------------------------------------------------

    def test_get_and_head_of_missing_key_are_none(self, store: ObjectStore) -> None:
        assert store.get("t/memories/nope") is None
        assert store.head("t/memories/nope") is None

    def test_put_get_head_round_trip(self, store: ObjectStore) -> None:
        etag = store.put("t/memories/a", b"\x00body\xff", _META)
        got = store.get("t/memories/a")
        assert got is not None
        assert got.body == b"\x00body\xff"
        assert dict(got.metadata) == _META
        assert got.etag == etag
        head = store.head("t/memories/a")
        assert head is not None
        assert (head.size, head.etag, dict(head.metadata)) == (6, etag, _META)

    def test_get_max_bytes_bounds_the_body(self, store: ObjectStore) -> None:
        store.put("t/k", b"0123456789", {})
        got = store.get("t/k", max_bytes=10)
        assert got is not None and got.body == b"0123456789"
        with pytest.raises(ObjectTooLargeError) as info:
            store.get("t/k", max_bytes=9)
        assert info.value.size in (10, None)  # None: the store could not tell before reading
        assert store.get("t/none", max_bytes=0) is None

    def test_put_if_none_match_refuses_existing(self, store: ObjectStore) -> None:
        store.put("t/k", b"one", {}, if_none_match=True)
        with pytest.raises(PreconditionFailedError):
            store.put("t/k", b"two", {}, if_none_match=True)
        got = store.get("t/k")
        assert got is not None and got.body == b"one"

    def test_put_if_match_is_compare_and_swap(self, store: ObjectStore) -> None:
        first = store.put("t/k", b"one", {})
        second = store.put("t/k", b"two", {}, if_match=first)
        assert second != first
        with pytest.raises(PreconditionFailedError):
            store.put("t/k", b"three", {}, if_match=first)
        got = store.get("t/k")
        assert got is not None and got.body == b"two"

    def test_put_if_match_on_missing_key_fails(self, store: ObjectStore) -> None:
        with pytest.raises(PreconditionFailedError):
            store.put("t/gone", b"x", {}, if_match=_NO_SUCH_ETAG)
        assert store.get("t/gone") is None

    def test_put_with_tags_stores_the_object(self, store: ObjectStore) -> None:
        store.put("t/k", b"tagged", {"a": "1"}, tags={"s3memory": "intent"})
        got = store.get("t/k")
        assert got is not None and got.body == b"tagged" and dict(got.metadata) == {"a": "1"}

    # -- copy ---------------------------------------------------------------------------------

    def test_copy_replaces_metadata_and_keeps_body(self, store: ObjectStore) -> None:
        etag = store.put("t/src", b"payload", {"a": "1"})
        store.copy("t/src", "t/dir/dst", metadata={"b": "2"}, if_match=etag)
        got = store.get("t/dir/dst")
        assert got is not None
        assert got.body == b"payload" and dict(got.metadata) == {"b": "2"}
        src = store.get("t/src")
        assert src is not None and dict(src.metadata) == {"a": "1"}

    def test_copy_of_missing_source_fails(self, store: ObjectStore) -> None:
        with pytest.raises(PreconditionFailedError):
            store.copy("t/none", "t/dst", metadata={})
        assert store.get("t/dst") is None

    def test_copy_source_if_match(self, store: ObjectStore) -> None:
        self.unless_lacking("copy_if_match")
        store.put("t/src", b"v1", {})
        with pytest.raises(PreconditionFailedError):
            store.copy("t/src", "t/dst", metadata={}, if_match=_NO_SUCH_ETAG)

    def test_copy_if_none_match_never_overwrites(self, store: ObjectStore) -> None:
        self.unless_lacking("copy_if_none_match")
        store.put("t/src", b"new", {})
        store.put("t/dst", b"theirs", {})
        with pytest.raises(PreconditionFailedError):
            store.copy("t/src", "t/dst", metadata={}, if_none_match=True)
        got = store.get("t/dst")
        assert got is not None and got.body == b"theirs"
        store.copy("t/src", "t/fresh", metadata={}, if_none_match=True)

    # -- list -----------------------------------------------------------------------------------

    def test_list_is_prefix_scoped_sorted_and_sized(self, store: ObjectStore) -> None:
        for key in ["t/m/b", "t/m/a/x", "t/m/a/y", "t/mm/z", "u/m/a"]:
            store.put(key, key.encode(), {})
        listed = list(store.list("t/m/"))
        assert [i.key for i in listed] == ["t/m/a/x", "t/m/a/y", "t/m/b"]
        assert [i.size for i in listed] == [7, 7, 5]
        assert [i.key for i in store.list("t/m/", limit=1)] == ["t/m/a/x"]
        assert list(store.list("t/nothing/")) == []

    def test_list_pages_beyond_one_thousand(self, store: ObjectStore) -> None:
        keys = [f"t/many/{i:05d}" for i in range(1005)]
        for key in keys:
            store.put(key, b"", {})
        assert [i.key for i in store.list("t/many/")] == keys

    # -- delete ---------------------------------------------------------------------------------

    def test_delete_many_and_missing(self, store: ObjectStore) -> None:
        for key in ["t/a", "t/d/b", "t/d/c"]:
            store.put(key, b"x", {})
        store.delete(["t/a", "t/d/b", "t/missing"])
        assert [i.key for i in store.list("t/")] == ["t/d/c"]
        store.delete([])
        store.delete(["t/d/c"])
        assert list(store.list("t/")) == []

    def test_delete_more_than_one_batch(self, store: ObjectStore) -> None:
        keys = [f"t/bulk/{i:05d}" for i in range(1001)]
        for key in keys:
            store.put(key, b"", {})
        store.delete(keys)
        assert list(store.list("t/bulk/")) == []

    def test_key_reused_as_directory_after_delete(self, store: ObjectStore) -> None:
        store.put("t/x/y", b"1", {})
        store.delete(["t/x/y"])
        store.put("t/x", b"2", {})
        got = store.get("t/x")
        assert got is not None and got.body == b"2"

    def test_conditional_delete_keeps_changed_objects(self, store: ObjectStore) -> None:
        self.unless_lacking("delete_if_match")
        first = store.put("t/a", b"v1", {})
        store.put("t/a", b"v2", {})  # changed since its ETag was read
        unchanged = store.put("t/b", b"b", {})
        with pytest.raises(PreconditionFailedError):
            store.delete(["t/a", "t/b"], if_match={"t/a": first, "t/b": unchanged})
        assert [i.key for i in store.list("t/")] == ["t/a"]

    # -- purge: every object (and version) under a prefix, for erasing a tenant ---------------

    def test_purge_is_prefix_scoped(self, store: ObjectStore) -> None:
        for key in ["t/a", "t/d/b", "t/.s3memory/tenant-key", "t2/a", "tt/a", "u/t/a"]:
            store.put(key, b"x", {})
        assert store.purge("t/") == 3
        assert [i.key for i in store.list("t/")] == []
        assert sorted(i.key for p in ("t2/", "tt/", "u/") for i in store.list(p)) == ["t2/a", "tt/a", "u/t/a"]
        assert store.purge("t/") == 0  # nothing left: not an error

    def test_purge_with_suffix_keeps_the_rest(self, store: ObjectStore) -> None:
        for key in ["t/.s3memory/tenant-key", "t/.s3memory/names-key", "t/.s3memory/intents/x", "t/memories/a-key"]:
            store.put(key, b"x", {})
        assert store.purge("t/.s3memory/", suffix="-key") == 2
        assert [i.key for i in store.list("t/")] == ["t/.s3memory/intents/x", "t/memories/a-key"]

    @pytest.mark.parametrize("prefix", ["", "t", "/t/", "t//", "t/a"])
    def test_purge_refuses_a_prefix_that_is_not_a_directory(self, store: ObjectStore, prefix: str) -> None:
        store.put("t/a", b"x", {})
        with pytest.raises(ValueError):
            store.purge(prefix)
        assert [i.key for i in store.list("t/")] == ["t/a"]

    def test_purge_more_than_one_batch(self, store: ObjectStore) -> None:
        keys = [f"t/bulk/{i:05d}" for i in range(1001)]
        for key in keys:
            store.put(key, b"", {})
        store.put("t/bulk-other", b"", {})
        assert store.purge("t/bulk/") == 1001
        assert [i.key for i in store.list("t/")] == ["t/bulk-other"]

    # -- versions: each change a version, for history -------------------------------------------
    # Every test here but the last two fails on a store that keeps no versions, and so runs
    # as a strict expected failure where ``versions`` is declared lacking.

    def test_versions_are_kept_newest_first(self, store: ObjectStore) -> None:
        self.unless_lacking("versions")
        assert store.keeps_versions() is True
        bodies = [b"one", b"two!", b"three"]
        etags = [store.put("t/a", body, {"n": str(i)}) for i, body in enumerate(bodies)]
        listed = list(store.list_versions("t/a"))
        assert [(v.key, v.etag, v.size, v.is_latest, v.is_delete_marker) for v in listed] == [
            ("t/a", etags[2], 5, True, False),
            ("t/a", etags[1], 4, False, False),
            ("t/a", etags[0], 3, False, False),
        ]
        ids = [v.version_id for v in listed]
        assert len(set(ids)) == 3 and NULL_VERSION not in ids
        times = [v.last_modified for v in listed]
        assert times == sorted(times, reverse=True) and times[-1] > 0
        for version, n in zip(listed, [2, 1, 0], strict=True):
            got = store.get_version("t/a", version.version_id)
            assert got is not None
            assert (got.body, got.etag, dict(got.metadata)) == (bodies[n], etags[n], {"n": str(n)})
            head = store.head_version("t/a", version.version_id)
            assert head is not None
            assert (head.key, head.size, head.etag, dict(head.metadata)) == (
                "t/a",
                len(bodies[n]),
                etags[n],
                {"n": str(n)},
            )
        current = store.get("t/a")
        assert current is not None and current.body == b"three"

    def test_versions_get_version_max_bytes_bounds_the_body(self, store: ObjectStore) -> None:
        self.unless_lacking("versions")
        store.put("t/k", b"0123456789", {})
        store.put("t/k", b"new", {})
        _, old = store.list_versions("t/k")
        got = store.get_version("t/k", old.version_id, max_bytes=10)
        assert got is not None and got.body == b"0123456789"
        with pytest.raises(ObjectTooLargeError):
            store.get_version("t/k", old.version_id, max_bytes=9)

    def test_versions_a_delete_adds_a_marker(self, store: ObjectStore) -> None:
        self.unless_lacking("versions")
        etag = store.put("t/a", b"kept", {"a": "1"})
        store.delete(["t/a"])
        assert store.get("t/a") is None and store.head("t/a") is None and list(store.list("t/")) == []
        marker, kept = store.list_versions("t/")
        assert (marker.key, marker.is_delete_marker, marker.is_latest, marker.etag, marker.size) == (
            "t/a",
            True,
            True,
            "",
            0,
        )
        assert (kept.key, kept.is_delete_marker, kept.is_latest, kept.etag, kept.size) == ("t/a", False, False, etag, 4)
        assert marker.version_id != kept.version_id
        got = store.get_version("t/a", kept.version_id)
        assert got is not None and (got.body, got.etag, dict(got.metadata)) == (b"kept", etag, {"a": "1"})
        assert store.get_version("t/a", marker.version_id) is None
        assert store.head_version("t/a", marker.version_id) is None

    def test_versions_deleting_an_older_version_removes_it_for_good(self, store: ObjectStore) -> None:
        self.unless_lacking("versions")
        for body in (b"v1", b"v2", b"v3"):
            store.put("t/a", body, {})
        newest, middle, oldest = store.list_versions("t/a")
        store.delete_version("t/a", middle.version_id)
        assert [(v.version_id, v.is_latest) for v in store.list_versions("t/")] == [
            (newest.version_id, True),
            (oldest.version_id, False),
        ]
        assert store.get_version("t/a", middle.version_id) is None
        assert store.head_version("t/a", middle.version_id) is None
        store.delete_version("t/a", middle.version_id)  # gone already: not an error
        current = store.get("t/a")
        assert current is not None and current.body == b"v3"
        old = store.get_version("t/a", oldest.version_id)
        assert old is not None and old.body == b"v1"

    def test_versions_deleting_the_current_version_makes_the_previous_current(self, store: ObjectStore) -> None:
        self.unless_lacking("versions")
        first = store.put("t/a", b"v1", {"n": "1"})
        store.put("t/a", b"v2", {"n": "2"})
        current, previous = store.list_versions("t/a")
        store.delete_version("t/a", current.version_id)
        got = store.get("t/a")
        assert got is not None and (got.body, got.etag, dict(got.metadata)) == (b"v1", first, {"n": "1"})
        head = store.head("t/a")
        assert head is not None and (head.size, head.etag) == (2, first)
        assert [(v.version_id, v.is_latest) for v in store.list_versions("t/")] == [(previous.version_id, True)]
        assert [i.key for i in store.list("t/")] == ["t/a"]
        assert store.get_version("t/a", current.version_id) is None
        store.delete_version("t/a", previous.version_id)  # the last one: nothing is left
        assert store.get("t/a") is None and list(store.list("t/")) == [] and list(store.list_versions("t/")) == []

    def test_versions_under_a_delete_marker_the_key_stays_deleted(self, store: ObjectStore) -> None:
        self.unless_lacking("versions")
        store.put("t/b", b"w1", {})
        store.delete(["t/b"])
        store.put("t/b", b"w2", {})
        newest, marker, oldest = store.list_versions("t/b")
        assert [newest.is_delete_marker, marker.is_delete_marker, oldest.is_delete_marker] == [False, True, False]
        store.delete_version("t/b", newest.version_id)  # the previous version is a delete marker
        assert store.get("t/b") is None and list(store.list("t/")) == []
        assert [(v.version_id, v.is_latest) for v in store.list_versions("t/b")] == [
            (marker.version_id, True),
            (oldest.version_id, False),
        ]
        store.delete_version("t/b", marker.version_id)  # the version under it is current again
        got = store.get("t/b")
        assert got is not None and got.body == b"w1"
        assert [(v.version_id, v.is_latest) for v in store.list_versions("t/b")] == [(oldest.version_id, True)]

    def test_versions_list_delete_markers_in_their_place(self, store: ObjectStore) -> None:
        """Versions and delete markers written in quick succession (in one second, the
        resolution of some servers' times) are listed in the order they were made."""
        self.unless_lacking("versions")
        made: list[tuple[bool, str]] = []
        for step in ["a", "-", "b", "c", "-", "d", "-", "e", "f", "g", "-"]:
            if step == "-":
                store.delete(["t/k"])
                made.append((True, ""))
            else:
                made.append((False, store.put("t/k", step.encode(), {})))
        listed = list(store.list_versions("t/"))
        assert [(v.is_delete_marker, v.etag) for v in listed] == made[::-1]
        assert [v.is_latest for v in listed] == [True] + [False] * (len(made) - 1)

    def test_versions_purge_removes_every_version_and_marker(self, store: ObjectStore) -> None:
        self.unless_lacking("versions")
        for body in (b"v1", b"v2", b"v3"):
            store.put("t/a", body, {})
            store.put("t2/a", body, {})
        store.put("t/b", b"b", {})
        store.delete(["t/b"])  # a delete marker over one version
        store.put("tt/a", b"x", {})
        old = [(v.key, v.version_id) for v in store.list_versions("t/")]
        assert store.purge("t/") == 5  # three versions of t/a, one of t/b, one delete marker
        assert list(store.list_versions("t/")) == [] and list(store.list("t/")) == []
        assert all(store.get_version(key, version_id) is None for key, version_id in old)
        assert [v.key for v in store.list_versions("t2/")] == ["t2/a"] * 3
        assert [v.key for v in store.list_versions("tt/")] == ["tt/a"]

    def test_versions_of_keys_sharing_a_prefix_are_listed_apart_and_in_order(self, store: ObjectStore) -> None:
        self.unless_lacking("versions")
        for key in ["t/ab", "t/a", "t/a-", "t/ab", "u/a"]:
            store.put(key, key.encode(), {})
        store.put("t/x", b"x", {})
        store.delete(["t/x"])  # only its history is left...
        store.put("t/x/y", b"y", {})  # ... beside a key below it
        store.put("t/x-z", b"z", {})
        assert [(v.key, v.is_delete_marker, v.is_latest) for v in store.list_versions("t/")] == [
            ("t/a", False, True),
            ("t/a-", False, True),
            ("t/ab", False, True),
            ("t/ab", False, False),
            ("t/x", True, True),
            ("t/x", False, False),
            ("t/x-z", False, True),
            ("t/x/y", False, True),
        ]
        assert [v.key for v in store.list_versions("t/a")] == ["t/a", "t/a-", "t/ab", "t/ab"]
        assert [v.key for v in store.list_versions("t/ab")] == ["t/ab", "t/ab"]
        assert [v.key for v in store.list_versions("t/x")] == ["t/x", "t/x", "t/x-z", "t/x/y"]
        assert [v.key for v in store.list_versions("t/x/")] == ["t/x/y"]
        assert list(store.list_versions("t/nothing/")) == []

    def test_versions_limit(self, store: ObjectStore) -> None:
        self.unless_lacking("versions")
        for body in (b"1", b"2", b"3"):
            store.put("t/a", body, {})
        store.put("t/b", b"b", {})
        store.delete(["t/b"])
        store.put("t/c", b"c", {})
        everything = [(v.key, v.version_id) for v in store.list_versions("t/")]
        assert [key for key, _ in everything] == ["t/a", "t/a", "t/a", "t/b", "t/b", "t/c"]
        for limit in range(len(everything) + 2):
            assert [(v.key, v.version_id) for v in store.list_versions("t/", limit=limit)] == everything[:limit]

    def test_versions_page_beyond_one_thousand(self, store: ObjectStore) -> None:
        self.unless_lacking("versions")
        made: list[tuple[str, bool, str]] = []
        for i in range(1001):
            made.append(("t/a", False, store.put("t/a", b"%d" % i, {})))
            if i in (400, 800):
                store.delete(["t/a"])
                made.append(("t/a", True, ""))
        made.append(("t/b", False, store.put("t/b", b"b", {})))
        expected = made[-2::-1] + made[-1:]  # t/a newest first, then t/b
        assert [(v.key, v.is_delete_marker, v.etag) for v in store.list_versions("t/")] == expected
        assert [(v.key, v.is_delete_marker, v.etag) for v in store.list_versions("t/", limit=1002)] == expected[:1002]

    def test_unknown_version_ids_answer_none(self, store: ObjectStore) -> None:
        store.put("t/a", b"x", {})
        (version,) = (v for v in store.list_versions("t/") if v.is_latest)
        for version_id in ["", "no-such-version", "0" * 48, "0" * 16 + "m", "../a", "a/b", "\u00e9"]:
            assert store.get_version("t/a", version_id) is None, version_id
            assert store.head_version("t/a", version_id) is None, version_id
            store.delete_version("t/a", version_id)  # not an error, and deletes nothing
        assert store.get_version("t/missing", version.version_id) is None
        assert store.head_version("t/missing", version.version_id) is None
        store.delete_version("t/missing", version.version_id)
        got = store.get_version("t/a", version.version_id)
        assert got is not None and got.body == b"x"
        assert [i.key for i in store.list("t/")] == ["t/a"]

    def test_a_store_keeping_no_versions_lists_each_object_once_as_null(self, store: ObjectStore) -> None:
        store.put("t/a", b"1", {})
        etag = store.put("t/a", b"22", {})
        store.put("t/b", b"b", {})
        store.delete(["t/b"])
        listed = list(store.list_versions("t/"))
        if store.keeps_versions():  # the tests above check what it keeps
            assert [v.key for v in listed if not v.is_delete_marker] == ["t/a", "t/a", "t/b"]
            assert all(v.version_id != NULL_VERSION for v in listed)
            return
        assert [(v.key, v.version_id, v.etag, v.size, v.is_latest, v.is_delete_marker) for v in listed] == [
            ("t/a", NULL_VERSION, etag, 2, True, False)
        ]
        got = store.get_version("t/a", NULL_VERSION)
        assert got is not None and (got.body, got.etag) == (b"22", etag)
        head = store.head_version("t/a", NULL_VERSION)
        assert head is not None and (head.size, head.etag) == (2, etag)
        assert store.get_version("t/b", NULL_VERSION) is None
        store.delete_version("t/a", NULL_VERSION)
        assert store.get("t/a") is None and list(store.list_versions("t/")) == []

    # -- identity ---------------------------------------------------------------------------------

    def test_identity_is_a_stable_string(self, store: ObjectStore) -> None:
        identity = store.identity
        assert isinstance(identity, str) and identity
        store.put("t/k", b"x", {})
        assert store.identity == identity
