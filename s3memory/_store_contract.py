"""The contract of an object store, as a class of pytest tests: :class:`ObjectStoreContract`.

Imported by :mod:`s3memory.testing`, where store authors find it (``from s3memory.testing
import ObjectStoreContract``); the fixtures that mock AWS are there, the contract is here.
The tests use only the store under test: no AWS, no moto.

A store declares in ``lacks`` the capabilities (:data:`STORE_CAPABILITIES`) it does not
have. A test that needs one calls :meth:`ObjectStoreContract.unless_lacking` first, which
makes the test a strict expected failure on such a store: its body still runs, a failure
is reported as expected (``XFAIL``), and a pass fails the test (``[XPASS(strict)]``),
because then the store has the capability and its declaration is stale.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import pytest

from ._errors import ObjectTooLargeError, PreconditionFailedError
from .stores import ObjectStore

__all__ = ["STORE_CAPABILITIES", "ObjectStoreContract"]


STORE_CAPABILITIES = frozenset({"copy_if_match", "copy_if_none_match", "delete_if_match"})
"""What an :class:`ObjectStoreContract` subclass may declare its store ``lacks``:

- ``copy_if_match``: ``copy(..., if_match=etag)`` refuses a source whose ETag differs;
- ``copy_if_none_match``: ``copy(..., if_none_match=True)`` refuses an existing destination;
- ``delete_if_match``: ``delete(keys, if_match={...})`` keeps an object whose ETag differs.
"""

_META = {"x-amz-c": "115", "x-amz-w": "02"}
_NO_SUCH_ETAG = '"0123456789abcdef0123456789abcdef"'


class ObjectStoreContract:
    """The contract of :class:`~s3memory.stores.ObjectStore`, as pytest tests to subclass.

    Every store s3memory ships passes it (``S3Store`` on moto and on radosgw 16 lacks the
    three capabilities, which those servers ignore; real S3 has them). Subclass it in a test
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
    thousand small objects (listing and deleting more than one page of 1,000). This class
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

    # -- identity ---------------------------------------------------------------------------------

    def test_identity_is_a_stable_string(self, store: ObjectStore) -> None:
        identity = store.identity
        assert isinstance(identity, str) and identity
        store.put("t/k", b"x", {})
        assert store.identity == identity
