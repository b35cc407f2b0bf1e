"""Object stores: S3 (boto3), in-memory, and a local directory (the embedded default)."""

from typing import TYPE_CHECKING, Any

from ._base import NULL_VERSION, ObjectInfo, ObjectStore, ObjectVersion, StoredObject
from ._delegating import DelegatingStore
from ._inmemory import InMemoryStore
from ._s3 import S3Store

if TYPE_CHECKING:
    from ._localdir import LocalDirStore


def __getattr__(name: str) -> Any:
    # Loaded on first use: the local store is the embedded default's, and S3 users
    # (a Lambda cold start) should not pay for importing it.
    if name == "LocalDirStore":
        from ._localdir import LocalDirStore

        return LocalDirStore
    raise AttributeError(f"module 's3memory.stores' has no attribute {name!r}")


__all__ = [
    "NULL_VERSION",
    "DelegatingStore",
    "InMemoryStore",
    "LocalDirStore",
    "ObjectInfo",
    "ObjectStore",
    "ObjectVersion",
    "S3Store",
    "StoredObject",
]
