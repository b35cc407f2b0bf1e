"""Object stores: S3 (boto3), in-memory, and a local directory (the embedded default)."""

from ._base import ObjectInfo, ObjectStore, StoredObject
from ._delegating import DelegatingStore
from ._inmemory import InMemoryStore
from ._localdir import LocalDirStore
from ._s3 import S3Store

__all__ = ["DelegatingStore", "InMemoryStore", "LocalDirStore", "ObjectInfo", "ObjectStore", "S3Store", "StoredObject"]
