"""The store contract's listing: by prefix, in key order, with sizes, ``limit`` and
pagination past one page of 1,000; ``list_sizes`` says what ``list`` does, keys and sizes.
"""

from __future__ import annotations

from ...stores import ObjectStore
from ._base import StoreContractBase

__all__ = ["StoreListContract"]


class StoreListContract(StoreContractBase):
    """``list``: prefix-scoped, sorted, sized, bounded by ``limit``, and whole beyond
    one page of 1,000 keys.
    """

    def test_list_is_prefix_scoped_sorted_and_sized(self, store: ObjectStore) -> None:
        for key in ["t/m/b", "t/m/a/x", "t/m/a/y", "t/mm/z", "u/m/a"]:
            store.put(key, key.encode(), {})
        listed = list(store.list("t/m/"))
        assert [i.key for i in listed] == ["t/m/a/x", "t/m/a/y", "t/m/b"]
        assert [i.size for i in listed] == [7, 7, 5]
        assert [i.key for i in store.list("t/m/", limit=1)] == ["t/m/a/x"]
        assert list(store.list("t/nothing/")) == []
        assert list(store.list_sizes("t/m/")) == [("t/m/a/x", 7), ("t/m/a/y", 7), ("t/m/b", 5)]
        assert list(store.list_sizes("t/nothing/")) == []

    def test_list_pages_beyond_one_thousand(self, store: ObjectStore) -> None:
        keys = [f"t/many/{i:05d}" for i in range(1005)]
        for key in keys:
            store.put(key, b"", {})
        assert [i.key for i in store.list("t/many/")] == keys
        assert list(store.list_sizes("t/many/")) == [(key, 0) for key in keys]
