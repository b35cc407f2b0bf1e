"""The object store interface. Stores see keys and bytes, never plaintext.

Six primitive verbs, with preconditions as first-class options; everything else
(directories, rename, recursion) is written once above them in ``_memory``. Four more for
history (list, get, head and delete one version), with defaults for a store that keeps no
versions.
"""

from __future__ import annotations

import builtins
import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from .._errors import ObjectTooLargeError


@dataclass(frozen=True)
class ObjectInfo:
    """What a listing or a HEAD returns. ``metadata`` is empty in listings.

    ``last_modified`` is seconds since the epoch of the last write (listings fill it in;
    0.0 where a store cannot tell).
    """

    key: str
    size: int
    etag: str
    metadata: Mapping[str, str] = field(default_factory=dict)
    last_modified: float = 0.0


@dataclass(frozen=True)
class StoredObject:
    body: bytes
    etag: str
    metadata: Mapping[str, str]
    last_modified: float = 0.0


@dataclass(frozen=True)
class ObjectVersion:
    """One version of an object, or a delete marker, as :meth:`ObjectStore.list_versions`
    returns it. A delete marker has no ETag and no size."""

    key: str
    version_id: str
    etag: str = ""
    size: int = 0
    last_modified: float = 0.0
    is_latest: bool = False
    is_delete_marker: bool = False


#: The version id of an object in a store (or bucket) that keeps no versions, as S3 names it.
NULL_VERSION = "null"

#: One copy of :meth:`ObjectStore.copy_many`: source, destination, the destination's
#: metadata, ``if_match`` (the source's ETag) and ``if_none_match`` (the destination's).
Move = tuple[str, str, Mapping[str, str], "str | None", bool]


class ObjectStore(ABC):
    """Bytes under keys, with compare-and-swap preconditions.

    Errors are s3memory errors: a lost precondition is ``PreconditionFailedError``, any
    backend failure a ``StorageError``. A missing object is ``None``, not an error.
    """

    #: Whether the calls of one round trip are worth sending concurrently (a network
    #: store). A local store's calls take microseconds of CPU each, so threads only add
    #: overhead: its round trips run their calls one after the other on the calling thread,
    #: inside :meth:`batch`.
    concurrent: bool = True

    def batch(self) -> contextlib.AbstractContextManager[None]:
        """A context in which consecutive calls on this thread may share work (the checks
        of a store's root, the directories opened, the syncs of directories). Every call
        made inside it is durable when it exits, as each is on return outside one. The
        default shares nothing."""
        return contextlib.nullcontext()

    @abstractmethod
    def get(self, key: str, *, max_bytes: int | None = None) -> StoredObject | None:
        """The object's body, ETag and metadata, or ``None`` if there is none.

        ``max_bytes`` bounds the body: a larger object raises ``ObjectTooLargeError``
        without being read whole (the size is checked before the body is read, and at most
        ``max_bytes + 1`` bytes are ever read), so a planted huge object cannot exhaust memory.
        """

    @abstractmethod
    def head(self, key: str) -> ObjectInfo | None:
        """The object's size, ETag and metadata, or ``None``."""

    @abstractmethod
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
        """Write the object; return its ETag.

        ``if_none_match=True`` writes only if no object exists (``If-None-Match: *``);
        ``if_match=etag`` only if the current ETag is ``etag``. Otherwise
        ``PreconditionFailedError``, and nothing is written. ``tags`` are object tags, for
        lifecycle rules (stores without tags ignore them).
        """

    def put_unique(self, key: str, body: bytes, metadata: Mapping[str, str]) -> str:
        """:meth:`put` of a key that no object had before and none will have after (a
        history record's: its name is new and unique). Durable when the call (or the batch
        it runs in) returns, as every call; a store may make it so with the batch's last
        sync instead of a sync of its own, for no crash can spoil an object it replaces.
        The default is :meth:`put`."""
        return self.put(key, body, metadata)

    @abstractmethod
    def copy(
        self,
        source: str,
        destination: str,
        *,
        metadata: Mapping[str, str],
        if_match: str | None = None,
        if_none_match: bool = False,
    ) -> str:
        """Copy ``source``'s body to ``destination`` with new ``metadata``, inside the store
        (the body is not downloaded). ``if_match`` guards the source (a missing source also
        raises ``PreconditionFailedError``); ``if_none_match=True`` refuses to overwrite an
        existing ``destination``."""

    @abstractmethod
    def list(self, prefix: str, *, limit: int | None = None) -> Iterator[ObjectInfo]:
        """Objects whose key starts with ``prefix``, in key order (at most ``limit``)."""

    def list_sizes(self, prefix: str) -> Iterator[tuple[str, int]]:
        """The key and size of each object :meth:`list` lists, in its order (what a
        directory's view needs). The default takes them from :meth:`list`."""
        for info in self.list(prefix):
            yield info.key, info.size

    def list_pages(self, prefix: str) -> Iterator[tuple[builtins.list[ObjectInfo], bool]]:
        """:meth:`list` in pages, each with whether another page follows. Where each page
        is a request (S3), that is known without asking for the next page, so a caller can
        overlap the next page's request with work on this one. This default is one page."""
        yield builtins.list(self.list(prefix)), False

    @abstractmethod
    def delete(self, keys: Sequence[str], *, if_match: Mapping[str, str] | None = None) -> None:
        """Delete the keys (batched as the backend allows). Missing keys are not an error.

        ``if_match`` maps keys to the ETag they must still have: a key whose object changed
        is kept, and ``PreconditionFailedError`` is raised after the others are deleted.
        """

    def copy_many(self, moves: Sequence[Move]) -> builtins.list[str | Exception]:
        """Each copy as :meth:`copy` makes it, in order: its ETag, or the error it raised
        (the others are made all the same). A local store makes them in one call, syncing
        their files at once; this default copies one after the other."""
        results: builtins.list[str | Exception] = []
        for source, destination, metadata, if_match, if_none_match in moves:
            try:
                results.append(
                    self.copy(source, destination, metadata=metadata, if_match=if_match, if_none_match=if_none_match)
                )
            except Exception as exc:
                results.append(exc)
        return results

    def purge(self, prefix: str, *, suffix: str = "") -> int:
        """Delete for good every object whose key starts with ``prefix`` (and ends with
        ``suffix``), with every version and delete marker a versioned bucket keeps of it;
        return how many objects (versions) were removed. Nothing there is not an error.

        ``prefix`` must be non-empty and end with ``/``, so that one tenant's purge can never
        reach another's (``alice/`` is not a prefix of ``alice2/...``). This default, for
        stores without versions, lists and deletes; a failure part-way leaves the rest, and
        purging again finishes the job.
        """
        check_purge_prefix(prefix)
        keys = [info.key for info in self.list(prefix) if info.key.endswith(suffix)]
        self.delete(keys)
        return len(keys)

    # -- versions ------------------------------------------------------------------------
    # What history needs. The defaults are those of a store that keeps no versions: each
    # current object is its only version, "null", as S3 lists an unversioned bucket.
    def keeps_versions(self) -> bool:
        """Whether every write and delete keeps the object's earlier versions (on S3: the
        bucket's versioning is ``Enabled``). May make a request; stores cache the answer."""
        return False

    def list_versions(self, prefix: str, *, limit: int | None = None) -> Iterator[ObjectVersion]:
        """Every version and delete marker of the keys starting with ``prefix``: keys in
        order, each key's newest first (at most ``limit`` entries)."""
        for info in self.list(prefix, limit=limit):
            yield ObjectVersion(info.key, NULL_VERSION, info.etag, info.size, info.last_modified, True, False)

    def get_version(self, key: str, version_id: str, *, max_bytes: int | None = None) -> StoredObject | None:
        """One version's body, ETag and metadata; ``None`` if there is no such version (or
        it is a delete marker). ``max_bytes`` as for :meth:`get`."""
        return self.get(key, max_bytes=max_bytes) if version_id == NULL_VERSION else None

    def head_version(self, key: str, version_id: str) -> ObjectInfo | None:
        """One version's size, ETag and metadata, or ``None`` (as :meth:`get_version`)."""
        return self.head(key) if version_id == NULL_VERSION else None

    def delete_version(self, key: str, version_id: str) -> None:
        """Delete one version (or delete marker) for good; a missing one is not an error.
        Deleting the newest version makes the one before it current, as on S3."""
        if version_id == NULL_VERSION:
            self.delete([key])

    @property
    def identity(self) -> str:
        """A stable, non-secret name of where the data lives (used to key caches)."""
        return f"{type(self).__name__}:{id(self)}"


def check_purge_prefix(prefix: str) -> None:
    """Refuse a purge prefix that could reach beyond one directory of keys (e.g. ``""``)."""
    if not isinstance(prefix, str) or not prefix.endswith("/") or prefix.startswith("/") or "//" in prefix:
        raise ValueError(f"purge needs a key prefix ending in '/', not {prefix!r}")


def check_size(key: str, size: int, max_bytes: int | None) -> None:
    """Raise ``ObjectTooLargeError`` if an object of ``size`` bytes is over ``max_bytes``."""
    if max_bytes is not None and size > max_bytes:
        raise ObjectTooLargeError(
            f"Error: the stored object {key!r} is {size:,} bytes, over the {max_bytes:,} this read allows",
            size=size,
        )
