"""A store in a dict: each instance owns its data. For tests and short-lived use.

It keeps every version of every object, as a versioned S3 bucket does (``versioned=False``
keeps only the current one): a write adds a version, a delete adds a delete marker. It has no
lifecycle rules: versions stay until deleted; ``s3memory._admin.lifecycle.expire_noncurrent_versions``
expires a user's noncurrent versions as the bucket rule does on S3.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from .._errors import PreconditionFailedError
from ._base import (
    NULL_VERSION,
    ObjectInfo,
    ObjectStore,
    ObjectVersion,
    StoredObject,
    check_purge_prefix,
    check_size,
)


def _etag(body: bytes) -> str:
    return '"' + hashlib.md5(body, usedforsecurity=False).hexdigest() + '"'


@dataclass(frozen=True)
class _Version:
    version_id: str
    stored: StoredObject | None  # None: a delete marker
    last_modified: float


class InMemoryStore(ObjectStore):
    """Thread-safe; preconditions are exact, like S3's."""

    concurrent = False  # a dict: a round trip's calls run on the calling thread

    def __init__(self, *, versioned: bool = True) -> None:
        self.versioned = versioned
        self._versions: dict[str, list[_Version]] = {}  # oldest first
        self._lock = threading.Lock()

    # -- the current version -----------------------------------------------------------
    def _current(self, key: str) -> StoredObject | None:
        versions = self._versions.get(key)
        return versions[-1].stored if versions else None

    def _add(self, key: str, stored: StoredObject | None) -> None:
        version = _Version(secrets.token_hex(16) if self.versioned else NULL_VERSION, stored, time.time())
        if self.versioned:
            self._versions.setdefault(key, []).append(version)
        elif stored is None:
            self._versions.pop(key, None)
        else:
            self._versions[key] = [version]

    def get(self, key: str, *, max_bytes: int | None = None) -> StoredObject | None:
        with self._lock:
            found = self._current(key)
        if found is not None:
            check_size(key, len(found.body), max_bytes)
        return found

    def head(self, key: str) -> ObjectInfo | None:
        with self._lock:
            obj = self._current(key)
        return None if obj is None else ObjectInfo(key, len(obj.body), obj.etag, dict(obj.metadata), obj.last_modified)

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
            current = self._current(key)
            if if_none_match and current is not None:
                raise PreconditionFailedError("Error: the object already exists")
            if if_match is not None and (current is None or current.etag != if_match):
                raise PreconditionFailedError("Error: the object changed concurrently")
            obj = StoredObject(bytes(body), _etag(body), dict(metadata), time.time())
            self._add(key, obj)
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
            current = self._current(source)
            if current is None or (if_match is not None and current.etag != if_match):
                raise PreconditionFailedError("Error: the source object changed concurrently")
            if if_none_match and self._current(destination) is not None:
                raise PreconditionFailedError("Error: the destination object already exists")
            self._add(destination, StoredObject(current.body, current.etag, dict(metadata), time.time()))
            return current.etag

    def list(self, prefix: str, *, limit: int | None = None) -> Iterator[ObjectInfo]:
        with self._lock:
            found = [(k, obj) for k in sorted(self._versions) if k.startswith(prefix) and (obj := self._current(k))]
        for key, obj in found[:limit]:
            yield ObjectInfo(key, len(obj.body), obj.etag, last_modified=obj.last_modified)

    def purge(self, prefix: str, *, suffix: str = "") -> int:
        check_purge_prefix(prefix)
        with self._lock:
            doomed = [k for k in self._versions if k.startswith(prefix) and k.endswith(suffix)]
            return sum(len(self._versions.pop(key)) for key in doomed)

    def delete(self, keys: Sequence[str], *, if_match: Mapping[str, str] | None = None) -> None:
        changed = []
        with self._lock:
            for key in keys:
                current = self._current(key)
                if current is not None and if_match and key in if_match and current.etag != if_match[key]:
                    changed.append(key)
                    continue
                if current is not None:
                    self._add(key, None)
        if changed:
            raise PreconditionFailedError(f"Error: {len(changed)} objects changed and were not deleted")

    # -- versions ------------------------------------------------------------------------
    def keeps_versions(self) -> bool:
        return self.versioned

    def list_versions(self, prefix: str, *, limit: int | None = None) -> Iterator[ObjectVersion]:
        with self._lock:
            listed = []
            for key in sorted(k for k in self._versions if k.startswith(prefix)):
                versions = self._versions[key]
                for index, version in enumerate(reversed(versions)):
                    stored = version.stored
                    listed.append(
                        ObjectVersion(
                            key,
                            version.version_id,
                            "" if stored is None else stored.etag,
                            0 if stored is None else len(stored.body),
                            version.last_modified,
                            is_latest=index == 0,
                            is_delete_marker=stored is None,
                        )
                    )
        yield from listed[:limit]

    def _version(self, key: str, version_id: str) -> StoredObject | None:
        for version in self._versions.get(key, []):
            if version.version_id == version_id:
                return version.stored
        return None

    def get_version(self, key: str, version_id: str, *, max_bytes: int | None = None) -> StoredObject | None:
        with self._lock:
            found = self._version(key, version_id)
        if found is not None:
            check_size(key, len(found.body), max_bytes)
        return found

    def head_version(self, key: str, version_id: str) -> ObjectInfo | None:
        with self._lock:
            obj = self._version(key, version_id)
        return None if obj is None else ObjectInfo(key, len(obj.body), obj.etag, dict(obj.metadata), obj.last_modified)

    def delete_version(self, key: str, version_id: str) -> None:
        with self._lock:
            versions = self._versions.get(key, [])
            versions[:] = [v for v in versions if v.version_id != version_id]
            if not versions:
                self._versions.pop(key, None)
