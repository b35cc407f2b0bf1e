"""The store contract's copy: a body copied inside the store, under new metadata."""

from __future__ import annotations

import pytest

from ..._errors import PreconditionFailedError
from ...stores import ObjectStore
from ._base import StoreContractBase

__all__ = ["StoreCopyContract"]


class StoreCopyContract(StoreContractBase):
    """``copy``: the body kept, the metadata replaced, a missing source refused. Its
    preconditions are :class:`StorePreconditionsContract`'s.
    """

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
