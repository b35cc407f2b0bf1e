"""A store that wraps another: every verb goes through one hook, for counting, faults, delays."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TypeVar

from ._base import ObjectInfo, ObjectStore, ObjectVersion, StoredObject

T = TypeVar("T")


class DelegatingStore(ObjectStore):
    """Forwards each verb to ``inner`` through :meth:`_call` (``verb`` is the method's name).

    Subclasses override ``_call`` to observe or disturb requests, e.g. count them or inject
    faults, without restating the interface. ``list`` and ``list_versions`` are materialised
    inside the call, so a hook sees the whole listing as one request.
    """

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner

    def _call(self, verb: str, perform: Callable[[], T]) -> T:
        return perform()

    @property
    def identity(self) -> str:
        return self.inner.identity

    def get(self, key: str, *, max_bytes: int | None = None) -> StoredObject | None:
        return self._call("get", lambda: self.inner.get(key, max_bytes=max_bytes))

    def head(self, key: str) -> ObjectInfo | None:
        return self._call("head", lambda: self.inner.head(key))

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
        def perform() -> str:
            return self.inner.put(key, body, metadata, if_none_match=if_none_match, if_match=if_match, tags=tags)

        return self._call("put", perform)

    def copy(
        self,
        source: str,
        destination: str,
        *,
        metadata: Mapping[str, str],
        if_match: str | None = None,
        if_none_match: bool = False,
    ) -> str:
        return self._call(
            "copy",
            lambda: self.inner.copy(
                source, destination, metadata=metadata, if_match=if_match, if_none_match=if_none_match
            ),
        )

    def list(self, prefix: str, *, limit: int | None = None) -> Iterator[ObjectInfo]:
        yield from self._call("list", lambda: list(self.inner.list(prefix, limit=limit)))

    def delete(self, keys: Sequence[str], *, if_match: Mapping[str, str] | None = None) -> None:
        self._call("delete", lambda: self.inner.delete(keys, if_match=if_match))

    def purge(self, prefix: str, *, suffix: str = "") -> int:
        return self._call("purge", lambda: self.inner.purge(prefix, suffix=suffix))

    def keeps_versions(self) -> bool:
        return self._call("keeps_versions", self.inner.keeps_versions)

    def list_versions(self, prefix: str, *, limit: int | None = None) -> Iterator[ObjectVersion]:
        yield from self._call("list_versions", lambda: list(self.inner.list_versions(prefix, limit=limit)))

    def get_version(self, key: str, version_id: str, *, max_bytes: int | None = None) -> StoredObject | None:
        return self._call("get_version", lambda: self.inner.get_version(key, version_id, max_bytes=max_bytes))

    def head_version(self, key: str, version_id: str) -> ObjectInfo | None:
        return self._call("head_version", lambda: self.inner.head_version(key, version_id))

    def delete_version(self, key: str, version_id: str) -> None:
        self._call("delete_version", lambda: self.inner.delete_version(key, version_id))
