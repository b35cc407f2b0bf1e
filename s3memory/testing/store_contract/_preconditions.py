"""The store contract's preconditions: ``if_match`` and ``if_none_match`` on put, copy and
delete, compared against ETags: the compare-and-swap concurrent writers rely on.
"""

from __future__ import annotations

import pytest

from ..._errors import PreconditionFailedError
from ...stores import ObjectStore
from ._base import StoreContractBase

__all__ = ["StorePreconditionsContract"]

_NO_SUCH_ETAG = '"0123456789abcdef0123456789abcdef"'


class StorePreconditionsContract(StoreContractBase):
    """Compare-and-swap: ``put``'s ``if_none_match`` and ``if_match``, ``copy``'s (the
    ``copy_if_match`` and ``copy_if_none_match`` capabilities) and ``delete``'s
    (``delete_if_match``). The last three may be declared in ``lacks``; ``put``'s
    cannot: s3memory's writes rely on them.
    """

    # -- put -----------------------------------------------------------------------------------

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

    # -- copy ---------------------------------------------------------------------------------

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

    # -- delete ---------------------------------------------------------------------------------

    def test_conditional_delete_keeps_changed_objects(self, store: ObjectStore) -> None:
        self.unless_lacking("delete_if_match")
        first = store.put("t/a", b"v1", {})
        store.put("t/a", b"v2", {})  # changed since its ETag was read
        unchanged = store.put("t/b", b"b", {})
        with pytest.raises(PreconditionFailedError):
            store.delete(["t/a", "t/b"], if_match={"t/a": first, "t/b": unchanged})
        assert [i.key for i in store.list("t/")] == ["t/a"]
