"""A store in a local directory: the embedded default, no AWS account needed.

Each object is one file at ``{root}/{key}``: a header, the metadata JSON, then the body.
It is written to a temporary file and renamed into place, so a reader sees the old or the
new object, never half of one. Writers take an exclusive ``flock`` on ``{root}/.lock``,
which makes the preconditions hold across threads and processes on one machine (readers of
history take it shared). Files are created 0600 and directories 0700.

:class:`LocalDirStore` is the interface; each of its calls runs in a batch and takes the
lock through its tree (``batch``), reaches the names that ``names`` spells, writes through
``writes`` and keeps versions through ``kept``. The package's docstring maps the rest.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from ..._errors import PreconditionFailedError, StorageError
from .._base import Move, ObjectInfo, ObjectStore, ObjectVersion, StoredObject, check_purge_prefix
from .batch import ROOT, TREE, Batch, Missing, Tree
from .files import is_file, mapped, open_file
from .format import (
    body_digest,
    corrupt,
    current_of,
    etag_of,
    listing_info,
    parse_entry,
    parse_header,
    read_current,
    seconds_of,
    stamp_of,
)
from .index import ListingIndex, drop_index
from .kept import KeptVersions
from .names import ESCAPED, KeyNames, probe_case_sensitive, read_keys_file, write_keys_file
from .walk import walk_kept, walk_tree
from .writes import Writes, Written, add_key, overlaps

_MAX_WRITTEN = 64  # files copy_many syncs at once (each is held open until then)


class LocalDirStore(ObjectStore):
    """Objects as files under ``root`` (see the docstrings of ``s3memory.stores._localdir``
    for what it distrusts: ``files`` and ``format``).

    It keeps every version of every object, as a versioned S3 bucket does (see ``kept``);
    ``versioned=False`` keeps only the current one.

    Raises:
        ConfigurationError: ``root`` is not a directory that can be created, or is owned by
            another user, or is writable by group or others.
    """

    concurrent = False  # a round trip's calls run on the calling thread, in one batch

    def __init__(self, root: str | os.PathLike[str], *, versioned: bool = True) -> None:
        self.root = Path(root).expanduser().resolve()
        self.versioned = versioned
        self._names = KeyNames()  # plain names, unchecked, until read from .keys below
        self._tree = Tree(self.root, self._names)
        self._kept = KeptVersions(self._tree)
        self._writes = Writes(self._tree, self._kept)
        self._index = ListingIndex(self._tree)
        with mapped("open its directory"), self._tree.joined() as b:
            with contextlib.suppress(FileExistsError):
                os.mkdir(".tmp", 0o700, dir_fd=b.root)
            self._tree.tmp(b)
            self._names.escaped, self._names.check_folding = self._key_encoding(b)

    @property
    def identity(self) -> str:
        return f"local:{self.root}"

    def batch(self) -> contextlib.AbstractContextManager[None]:
        """Calls on this thread inside it share the root's check, the lock file and the
        directories opened, and the syncs of the directories they change, made when it
        exits (every write is durable then). Reentrant; shared by every store opened on
        the same root in this thread."""
        return self._batch_scope()

    @contextlib.contextmanager
    def _batch_scope(self) -> Iterator[None]:
        with mapped("write"), self._tree.joined():
            yield

    def _key_encoding(self, b: Batch) -> tuple[bool, bool]:
        """(escape key segments, check plain names for folding), from ``.keys`` or a probe."""
        marker = read_keys_file(b.root, self.root)
        if marker is not None:
            return marker == ESCAPED, False
        tmp = self._tree.tmp(b)
        if probe_case_sensitive(tmp):
            return False, False
        with self._tree.locked(b):
            marker = read_keys_file(b.root, self.root)
            if marker is not None:
                return marker == ESCAPED, False
            if any(not name.startswith(".") for name in os.listdir(b.root)) or self._kept.has_history(b):
                return False, True  # plain names written before: keep them, refuse folds
            write_keys_file(b.root, tmp)
            b.dirty[b.root] = ROOT
            return True, False

    # -- the interface --------------------------------------------------------------
    def get(self, key: str, *, max_bytes: int | None = None) -> StoredObject | None:
        with self._tree.verb("read") as b:
            opened = self._tree.open_key(b, key)
            if opened is None:
                return None
            fd, st = opened
            try:
                return read_current(key, fd, st, max_bytes)
            finally:
                os.close(fd)

    def head(self, key: str) -> ObjectInfo | None:
        with self._tree.verb("read") as b:
            opened = self._tree.open_key(b, key)
            if opened is None:
                return None
            fd, st = opened
            try:
                header = parse_header(fd, st.st_size)
                if header is None:
                    raise corrupt(key)
                return ObjectInfo(key, header.size, etag_of(body_digest(fd, header)), header.metadata, st.st_mtime)
            finally:
                os.close(fd)

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
        return self._put(key, body, metadata, if_none_match=if_none_match, if_match=if_match)

    def put_unique(self, key: str, body: bytes, metadata: Mapping[str, str]) -> str:
        """Its file's data is made durable by the batch's ``syncfs`` rather than by a sync
        of its own, where there is one (``batch``'s rule 4)."""
        return self._put(key, body, metadata, unique=True)

    def _put(
        self,
        key: str,
        body: bytes,
        metadata: Mapping[str, str],
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
        unique: bool = False,
    ) -> str:
        names = self._names.of(key)
        directory = tuple(names[:-1])
        digest = hashlib.md5(body, usedforsecurity=False).digest()
        with self._tree.verb("write") as b, self._tree.locked(b):
            current = self._tree.current(b, key) if self.versioned else None  # read once, for both
            if if_match is not None:
                found = self._writes.etag_of_current(current) if self.versioned else self._writes.current_etag(b, key)
                if found != if_match:
                    raise PreconditionFailedError("Error: the object changed concurrently")
            exists = current is not None if self.versioned else None
            made_before = directory in b.made
            parent = self._writes.target(b, names, if_none_match=if_none_match, exists=exists)
            write = self._writes.write(
                b,
                key,
                names,
                parent,
                metadata,
                len(body),
                digest,
                [body],
                versioned=self.versioned,
                unique=unique,
                read=(current,) if self.versioned else None,
                fresh=not made_before and directory in b.made,  # made just now, under this hold of the lock
            )
            self._writes.commit_one(b, write)
        return etag_of(digest)

    def copy(
        self,
        source: str,
        destination: str,
        *,
        metadata: Mapping[str, str],
        if_match: str | None = None,
        if_none_match: bool = False,
    ) -> str:
        with self._tree.verb("copy") as b, self._tree.locked(b):
            etag, write = self._writes.copied(
                b, source, destination, metadata, if_match, if_none_match, versioned=self.versioned
            )
            self._writes.commit_one(b, write)
        return etag

    def copy_many(self, moves: Sequence[Move]) -> builtins.list[str | Exception]:
        """Every copy in one call: their files written, then synced at once (one ``syncfs``
        where there is one), then renamed into place, all under one hold of the lock, so each
        copy's preconditions hold when it is placed. At most ``_MAX_WRITTEN`` files are
        held open at a time."""
        results: builtins.list[str | Exception] = []
        with self._tree.verb("copy") as b, self._tree.locked(b):
            pending: builtins.list[tuple[int, Written]] = []
            keys: set[str] = set()
            dirs: set[str] = set()

            def commit() -> None:
                for (at, _), outcome in zip(pending, self._writes.commit(b, [w for _, w in pending]), strict=True):
                    if outcome is not None:
                        results[at] = outcome if isinstance(outcome, Exception) else StorageError(str(outcome))
                pending.clear()
                keys.clear()
                dirs.clear()

            for source, destination, metadata, if_match, if_none_match in moves:
                if pending and (overlaps(destination, keys, dirs) or overlaps(source, keys, dirs)):
                    commit()  # a copy from or onto a key written before: that one is placed first
                try:
                    with mapped("copy"):
                        etag, write = self._writes.copied(
                            b, source, destination, metadata, if_match, if_none_match, versioned=self.versioned
                        )
                except Exception as exc:
                    results.append(exc)
                    continue
                results.append(etag)
                pending.append((len(results) - 1, write))
                add_key(destination, keys, dirs)
                if len(pending) >= _MAX_WRITTEN:
                    commit()
            if pending:
                commit()
        return results

    def list(self, prefix: str, *, limit: int | None = None) -> Iterator[ObjectInfo]:
        """Each file's fixed header only (:func:`listing_info`): never a body, nor its
        metadata; a whole listing takes a large directory's from its index (``index``)."""
        found: builtins.list[ObjectInfo] = []
        if limit is None:
            with self._tree.verb("list") as b:
                new_info = object.__new__
                for key, (size, digest, mtime_ns) in self._index.walk(b, prefix):
                    # What ObjectInfo(key, size, etag, last_modified=...) makes, without the
                    # frozen dataclass's __init__ (a third of the cost of a listed file).
                    made = new_info(ObjectInfo)
                    made.__dict__.update(
                        key=key, size=size, etag=etag_of(digest), metadata={}, last_modified=seconds_of(mtime_ns)
                    )
                    found.append(made)
            yield from found
            return
        with self._tree.verb("list") as b:
            with contextlib.closing(walk_tree(self._tree, b, prefix)) as walk:
                for key, parent, name in walk:
                    if limit is not None and len(found) >= limit:
                        break
                    info = listing_info(parent, name, key)
                    if info is not None:
                        found.append(info)
        yield from found

    def list_sizes(self, prefix: str) -> Iterator[tuple[str, int]]:
        """:meth:`list`'s keys and sizes, without an ``ObjectInfo`` each."""
        with self._tree.verb("list") as b:
            found = [(key, fields[0]) for key, fields in self._index.walk(b, prefix)]
        yield from found

    def purge(self, prefix: str, *, suffix: str = "") -> int:
        """Every matching file is removed, corrupt ones included, and every version and
        delete marker kept of the matching keys (symbolic links and other non-files are left
        where they are, and never followed). The count is of objects, versions and markers."""
        check_purge_prefix(prefix)
        removed = 0
        stamps: dict[str, int] = {}  # of the current files removed: kept entries as late are leftovers
        with self._tree.verb("delete") as b:
            with self._tree.locked(b):
                try:
                    with contextlib.closing(walk_tree(self._tree, b, prefix, prune=True)) as walk:
                        for key, parent, name in walk:
                            if key.endswith(suffix):
                                with contextlib.suppress(FileNotFoundError):
                                    stamps[key] = stamp_of(os.stat(name, dir_fd=parent, follow_symlinks=False))
                                    os.unlink(name, dir_fd=parent)  # unlink never follows a link
                                    removed += 1
                    with contextlib.closing(walk_kept(self._tree, b, prefix, prune=True)) as kept:
                        for key, container, names in kept:
                            if not key.endswith(suffix):
                                continue
                            hidden_from = stamps.get(key)
                            for name in names:
                                with contextlib.suppress(FileNotFoundError):
                                    os.unlink(name, dir_fd=container)
                                    entry = parse_entry(name)
                                    if entry is not None and (hidden_from is None or entry.stamp < hidden_from):
                                        removed += 1  # a version or marker, not a leftover
                finally:
                    b.forget(())  # directories were removed
                    self._index.clear(b)  # the indexes hold names, some of them purged
        return removed

    def delete(self, keys: Sequence[str], *, if_match: Mapping[str, str] | None = None) -> None:
        """Versioned, a delete keeps the current version and adds a delete marker over it."""
        changed = []
        emptied: dict[tuple[str, ...], None] = {}  # the directories files were deleted from
        with self._tree.verb("delete") as b:
            with self._tree.locked(b):
                for key in keys:
                    names = self._names.of(key)
                    try:
                        dirs = self._tree.open_dirs(b, (), names[:-1], create=False)
                    except Missing:
                        continue
                    parents = [b.root, *dirs]
                    if self._names.folds(parents[-1], names[-1]):
                        continue  # another key's file on a case-insensitive disk: none of this key
                    expected = if_match.get(key) if if_match else None
                    if self.versioned or expected is not None:  # the file, opened once for both
                        opened = open_file(parents[-1], names[-1])
                        if opened is None:
                            continue  # not an object
                        try:
                            current = current_of(*opened, at_once=True)
                        finally:
                            os.close(opened[0])
                        if expected is not None and (current.digest is None or etag_of(current.digest) != expected):
                            changed.append(key)  # a corrupt file matches no ETag
                            continue
                        if self.versioned:
                            self._kept.retire(b, key, parents[-1], names[-1], current)
                    elif not is_file(parents[-1], names[-1]):
                        continue
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(names[-1], dir_fd=parents[-1])
                    drop_index(b.root, key)
                    b.dirty[parents[-1]] = TREE if dirs else ROOT
                    emptied[tuple(names[:-1])] = None
                    self._tree.relieve(b)  # between keys no descriptor of the batch is in use
                for path in sorted(emptied, key=len, reverse=True):  # once per directory, deepest first
                    try:
                        dirs = self._tree.open_dirs(b, (), path, create=False)
                    except Missing:
                        continue
                    self._tree.pruned(b, (), [b.root, *dirs], [*path, ""])
        if changed:
            raise PreconditionFailedError(f"Error: {len(changed)} objects changed and were not deleted")

    # -- versions (``kept``) ------------------------------------------------------------
    def keeps_versions(self) -> bool:
        return self.versioned

    def list_versions(self, prefix: str, *, limit: int | None = None) -> Iterator[ObjectVersion]:
        """The current files (their headers, as :meth:`list` reads them) and the names in
        the version area: no kept version is ever opened."""
        if not self.versioned:
            yield from super().list_versions(prefix, limit=limit)
            return
        if limit is not None and limit <= 0:
            return
        yield from self._kept.listed(prefix, limit=limit)

    def get_version(self, key: str, version_id: str, *, max_bytes: int | None = None) -> StoredObject | None:
        if not self.versioned:
            return super().get_version(key, version_id, max_bytes=max_bytes)
        found = self._kept.read(key, version_id, max_bytes=max_bytes, body=True)
        return None if found is None else found[0]

    def head_version(self, key: str, version_id: str) -> ObjectInfo | None:
        if not self.versioned:
            return super().head_version(key, version_id)
        found = self._kept.read(key, version_id, max_bytes=None, body=False)
        if found is None:
            return None
        obj, size = found
        return ObjectInfo(key, size, obj.etag, obj.metadata, obj.last_modified)

    def delete_version(self, key: str, version_id: str) -> None:
        """Deleting the current version makes the previous one current (renamed back into
        place), or leaves no current object if that is a delete marker; deleting the delete
        marker that hides the key makes the version under it current."""
        if not self.versioned:
            super().delete_version(key, version_id)
            return
        self._kept.delete(key, version_id)
