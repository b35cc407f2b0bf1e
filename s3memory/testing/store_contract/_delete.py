"""The store contract's deletes: ``delete`` (many keys, missing keys, more than one batch)
and ``purge`` (every object under a directory of keys, for erasing a tenant).
"""

from __future__ import annotations

import pytest

from ...stores import ObjectStore
from ._base import StoreContractBase

__all__ = ["StoreDeleteContract"]


class StoreDeleteContract(StoreContractBase):
    """``delete`` and ``purge``. The conditional delete is
    :class:`StorePreconditionsContract`'s; a purge of versions is
    :class:`StoreVersionsContract`'s.
    """

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
