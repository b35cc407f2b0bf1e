"""A store in a dict: each instance owns its data. For tests and short-lived use."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator, Mapping, Sequence

from .._errors import PreconditionFailedError
from ._base import ObjectInfo, ObjectStore, StoredObject, check_purge_prefix, check_size


def _etag(body: bytes) -> str:
    return '"' + hashlib.md5(body, usedforsecurity=False).hexdigest() + '"'


class InMemoryStore(ObjectStore):
    """Thread-safe; preconditions are exact, like S3's."""

    def __init__(self) -> None:
        self._objects: dict[str, StoredObject] = {}
        self._lock = threading.Lock()

    def get(self, key: str, *, max_bytes: int | None = None) -> StoredObject | None:
        with self._lock:
            found = self._objects.get(key)
        if found is not None:
            check_size(key, len(found.body), max_bytes)
        return found

    def head(self, key: str) -> ObjectInfo | None:
        with self._lock:
            obj = self._objects.get(key)
        return None if obj is None else ObjectInfo(key, len(obj.body), obj.etag, dict(obj.metadata))

    def put(
        self,
        key: str,
        body: bytes,
        metadata: Mapping[str, str],
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> str:
        with self._lock:
            current = self._objects.get(key)
            if if_none_match and current is not None:
                raise PreconditionFailedError("Error: the object already exists")
            if if_match is not None and (current is None or current.etag != if_match):
                raise PreconditionFailedError("Error: the object changed concurrently")
            obj = StoredObject(bytes(body), _etag(body), dict(metadata), time.time())
            self._objects[key] = obj
            return obj.etag

    def copy(
        self,
        source: str,
        destination: str,
        *,
        metadata: Mapping[str, str],
        if_match: str | None = None,
        if_none_match: bool = False,
    ) -> str:
        with self._lock:
            current = self._objects.get(source)
            if current is None or (if_match is not None and current.etag != if_match):
                raise PreconditionFailedError("Error: the source object changed concurrently")
            if if_none_match and destination in self._objects:
                raise PreconditionFailedError("Error: the destination object already exists")
            self._objects[destination] = StoredObject(current.body, current.etag, dict(metadata), time.time())
            return current.etag

    def list(self, prefix: str, *, limit: int | None = None) -> Iterator[ObjectInfo]:
        with self._lock:
            keys = sorted(k for k in self._objects if k.startswith(prefix))
            found = [(k, self._objects[k]) for k in keys[:limit]]
        for key, obj in found:
            yield ObjectInfo(key, len(obj.body), obj.etag, last_modified=obj.last_modified)

    def purge(self, prefix: str, *, suffix: str = "") -> int:
        check_purge_prefix(prefix)
        with self._lock:
            doomed = [k for k in self._objects if k.startswith(prefix) and k.endswith(suffix)]
            for key in doomed:
                del self._objects[key]
        return len(doomed)

    def delete(self, keys: Sequence[str], *, if_match: Mapping[str, str] | None = None) -> None:
        changed = []
        with self._lock:
            for key in keys:
                current = self._objects.get(key)
                if current is not None and if_match and key in if_match and current.etag != if_match[key]:
                    changed.append(key)
                    continue
                self._objects.pop(key, None)
        if changed:
            raise PreconditionFailedError(f"Error: {len(changed)} objects changed and were not deleted")
