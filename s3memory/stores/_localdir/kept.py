"""The local store's kept versions: the version area, ``{root}/.versions``.

Versions (``versioned=True``, the default) are kept as a versioned S3 bucket keeps them.
The current version stays the file at ``{root}/{key}``, so ``get``, ``head`` and ``list``
cost what they cost without versions. The others are in the version area,
``{root}/.versions``, which no key reaches (keys never start with ``.``, and names starting
with ``.`` at the root are the store's own: ``.lock``, ``.tmp``, ``.keys``, ``.versions``, ``.index``):
the versions of ``key`` are files in the directory ``{root}/.versions/{key}/`` (the key's
segments as directories, named as in the tree; the files of one directory are the versions
of its key, its directories those of longer keys). Under the lock, a write hard-links the
file it replaces into that directory before renaming the new one into place, and a delete
hard-links the file there, adds a delete marker (an empty file) and unlinks it, so a
reader without the lock sees the old object or the new one, never none, and nothing is
copied. A kept version is named ``{2**64 - 1 - stamp:016x}-{md5}-{size}``, a marker
``{2**64 - 1 - stamp:016x}-m``, where ``stamp`` is the file's ``mtime_ns``, which every
write and delete makes later than any before it for that key: the names sort newest
first, and say all a listing needs, so a listing never opens a kept version. A version's
id is ``{stamp:016x}{md5}`` (``{stamp:016x}m`` for a marker): the current file has one
without any new format, and it stays the same when the file is kept. The current file
hides kept entries stamped as late as it (what an interrupted write or delete leaves;
the next write removes them). Deleting the current version renames the previous one back
into place (or, if that is a delete marker, leaves no current file); ``purge`` removes the
files and every kept version and marker under the prefix. ``versioned=False`` keeps
nothing (versions kept before stay until purged). There are no lifecycle rules: kept
versions stay until deleted (``s3memory._admin.lifecycle.expire_noncurrent_versions`` expires a
user's noncurrent versions as the bucket rule does on S3). A file system without hard links
cannot keep versions (``StorageError`` on the first overwrite or delete: open the store
with ``versioned=False``).

The names and ids are made and read in ``format``; the functions on one version directory
(list, link, mark) are here, and :class:`KeptVersions` is the version area of one store,
over its tree (the same batch, lock and directories as its current files).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence

from ..._errors import StorageError
from .._base import ObjectVersion, StoredObject
from .batch import AREA, ROOT, TREE, VERSIONS, Batch, Missing, Tree
from .files import DIR_FLAGS, NEW_FILE_FLAGS, NO_HARD_LINKS, clear_the_way, close_all, is_file, open_file
from .format import (
    MAX_STAMP,
    Current,
    Entry,
    corrupt,
    current_of,
    etag_of,
    marker_name,
    parse_entry,
    parse_header,
    parse_version_id,
    read_object,
    version_name,
)
from .index import drop_index
from .names import folded_error, folds_onto_another
from .walk import walk_kept, walk_tree


def _kept_entries(container: int | None) -> list[Entry]:
    """The kept versions and markers in ``container``, newest first, from their names."""
    if container is None:
        return []
    entries = [
        entry
        for found in os.scandir(container)
        if found.is_file(follow_symlinks=False) and (entry := parse_entry(found.name)) is not None
    ]
    entries.sort(key=lambda entry: entry.name)
    return entries


def _link_version(
    parent: int,
    name: str,
    container: int,
    current: Current,
    *,
    new: bool = False,
    entries: Sequence[Entry] | None = None,
) -> None:
    """Hard-link the current file ``parent/name`` into the version directory ``container``,
    named by its stamp, digest and size; kept entries as late as it (leftovers of an
    interrupted write or delete) are removed first. The link must reach the file
    ``current`` describes, else it is undone. ``new``: the container was just made, empty;
    ``entries``: its entries, as listed under the lock this call holds."""
    assert current.digest is not None
    for entry in [] if new else _kept_entries(container) if entries is None else entries:
        if entry.stamp >= current.stamp:
            os.unlink(entry.name, dir_fd=container)
    kept = version_name(current.stamp, current.digest, current.size)
    try:
        os.link(name, kept, src_dir_fd=parent, dst_dir_fd=container, follow_symlinks=False)
    except FileExistsError:
        raise StorageError("Error: a directory is in the way of a version in the local store") from None
    except OSError as exc:
        if exc.errno not in NO_HARD_LINKS:
            raise
        raise StorageError(
            "Error: the local store keeps versions as hard links, which this file system does not "
            "support; open it with versioned=False"
        ) from None
    st = os.stat(kept, dir_fd=container, follow_symlinks=False)
    if (st.st_dev, st.st_ino) != current.inode:
        os.unlink(kept, dir_fd=container)
        raise StorageError("Error: a local object file was replaced while its version was kept")


def _add_marker(container: int, newest: int) -> None:
    """Add a delete marker to the version directory ``container``, stamped later than
    ``newest``. Its name holds all it says (its stamp; the file is empty and its times
    unused), so it is made in place: the name appears with the whole marker."""
    stamp = min(max(time.time_ns(), newest + 1), MAX_STAMP)
    os.close(os.open(marker_name(stamp), NEW_FILE_FLAGS, 0o600, dir_fd=container))


def _listed_versions(key: str, current: Current | None, kept: Sequence[Entry]) -> list[ObjectVersion]:
    """``key``'s versions, newest first: the current file (a well-formed object, or None)
    and the kept entries it does not hide."""
    listed = []
    if current is not None and current.digest is not None:
        listed.append(
            ObjectVersion(key, current.version_id, etag_of(current.digest), current.size, current.stamp / 1e9, True)
        )
        kept = [entry for entry in kept if entry.stamp < current.stamp]
    for i, entry in enumerate(kept):
        etag = "" if entry.digest is None else etag_of(entry.digest)
        listed.append(
            ObjectVersion(
                key,
                entry.version_id,
                etag,
                entry.size,
                entry.stamp / 1e9,
                is_latest=not listed and i == 0,
                is_delete_marker=entry.is_marker,
            )
        )
    return listed


class KeptVersions:
    """The version area of one store, over its tree: where a write keeps the file it
    replaces and a delete the file it removes, and what reads, lists and deletes versions.

    The current version is the file at {root}/{key}, as without versions. The others are
    in {root}/.versions/{key}/ (the key's segments as directories, named as in the tree),
    as files named by ``format.version_name`` and ``marker_name``: a write hard-links the
    file it replaces there before renaming the new one into place, and a delete hard-links
    it there and adds a marker before unlinking it; so a reader without the lock sees the
    old object or the new one, never none. The current file hides kept entries stamped as
    late as it or later: what an interrupted write or delete leaves (removed by the next
    write)."""

    def __init__(self, tree: Tree) -> None:
        self._tree = tree
        self._names = tree.names

    def has_history(self, b: Batch) -> bool:
        """Whether the version area holds anything (names written in the store's encoding)."""
        area = self._tree.area(b, create=False)
        return area is not None and bool(os.listdir(area))

    def container(self, b: Batch, key: str, *, create: bool) -> int | None:
        """The directory of ``key``'s kept versions: its descriptor (the batch's), or None if
        there is none (and not ``create``)."""
        try:
            return self._tree.dir(b, (VERSIONS, *self._names.of(key)), create=create)
        except Missing:
            return None

    def refuse_folded_history(self, b: Batch, key: str) -> None:
        """With plain names on a case-insensitive file system: refuse a key whose directory
        in the version area would be a different key's (one differing only in case)."""
        area = self._tree.area(b, create=False)
        if area is None:
            return
        fds: list[int] = []
        try:
            parent = area
            for name in self._names.of(key):
                if folds_onto_another(parent, name):
                    raise folded_error()
                try:
                    fds.append(os.open(name, DIR_FLAGS, dir_fd=parent))
                except OSError:
                    return  # no history below: nothing to fold onto
                parent = fds[-1]
        finally:
            close_all(fds)

    def newest_stamp(self, b: Batch, key: str, current: Current | None) -> tuple[int, list[Entry]]:
        """The latest time stamp among ``key``'s current file and kept entries (-1: none),
        and those entries (for :meth:`keep`, under the same hold of the lock)."""
        kept = _kept_entries(self.container(b, key, create=False))
        return max(current.stamp if current is not None else -1, kept[0].stamp if kept else -1), kept

    def keep(
        self, b: Batch, key: str, parent: int, name: str, current: Current, kept: Sequence[Entry] | None = None
    ) -> None:
        """Hard-link the current file ``parent/name`` into ``key``'s container, named by its
        stamp, digest and size (under the lock). Leftovers as late as it are removed first
        (``kept``: the container's entries, listed under this hold of the lock)."""
        path = (VERSIONS, *self._names.of(key))
        try:
            container = self._tree.dir(b, path, create=True)
            new = path in b.made
            b.made.discard(path)
            _link_version(parent, name, container, current, new=new, entries=kept)
            b.dirty[container] = AREA
        except BaseException:
            with contextlib.suppress(OSError):
                self.prune(b, self._names.of(key))  # the directories made for it
            raise

    def retire(self, b: Batch, key: str, parent: int, name: str, current: Current) -> None:
        """Before the current file of ``key`` is unlinked: keep it, and add a delete marker
        stamped later (not for a file that is no object, unless versions of it are kept)."""
        if current.digest is not None:
            self.keep(b, key, parent, name, current)  # the newest entry now: stamped as the file
            container, newest = self.container(b, key, create=False), current.stamp
        else:
            container = self.container(b, key, create=False)
            kept = _kept_entries(container)
            if container is None or not kept:
                return
            newest = max(current.stamp, kept[0].stamp)
        assert container is not None
        _add_marker(container, newest)
        b.dirty[container] = AREA

    def _history(self, b: Batch, key: str) -> tuple[Current | None, list[Entry], list[Entry]]:
        """``key``'s current object (None if there is none, or it is corrupt), its kept
        entries newest first, and those hidden by the current file (leftovers)."""
        current = self._tree.current(b, key)
        if current is not None and current.digest is None:
            current = None
        kept = _kept_entries(self.container(b, key, create=False))
        if current is None:
            return None, kept, []
        return current, [e for e in kept if e.stamp < current.stamp], [e for e in kept if e.stamp >= current.stamp]

    def listed(self, prefix: str, *, limit: int | None) -> list[ObjectVersion]:
        """The versions of the keys starting with ``prefix``, at most ``limit``: the current
        files (their headers, as ``list`` reads them) and the names in the version area: no
        kept version is ever opened."""
        found: list[ObjectVersion] = []
        with self._tree.verb("list") as b:
            with self._tree.locked(b, shared=True):
                kept: dict[str, list[Entry]] = {}
                with contextlib.closing(walk_kept(self._tree, b, prefix)) as kept_walk:
                    for key, _, names in kept_walk:
                        kept[key] = sorted(
                            (e for n in names if (e := parse_entry(n)) is not None), key=lambda e: e.name
                        )
                only_kept = sorted(kept)  # keys with kept entries, merged in key order with the current files
                next_kept = 0
                with contextlib.closing(walk_tree(self._tree, b, prefix)) as walk:
                    for key, parent, name in walk:
                        while next_kept < len(only_kept) and only_kept[next_kept] < key:
                            found += _listed_versions(only_kept[next_kept], None, kept[only_kept[next_kept]])
                            next_kept += 1
                        if next_kept < len(only_kept) and only_kept[next_kept] == key:
                            next_kept += 1
                        found += _listed_versions(key, _current_at(parent, name), kept.get(key, []))
                        if limit is not None and len(found) >= limit:
                            break
                    else:
                        for key in only_kept[next_kept:]:
                            found += _listed_versions(key, None, kept[key])
        return found[:limit]

    def read(self, key: str, version_id: str, *, max_bytes: int | None, body: bool) -> tuple[StoredObject, int] | None:
        """One version (its body only with ``body``) and its size; None if there is no such
        version or it is a delete marker. A kept file that does not match its name is
        corrupt (StorageError)."""
        if parse_version_id(version_id) is None:
            return None
        with self._tree.verb("read") as b:
            with self._tree.locked(b, shared=True):
                current, visible, _ = self._history(b, key)
                if current is not None and current.version_id == version_id:
                    with self._tree.object(b, key) as found:
                        if found is None:
                            return None
                        fd, _, header = found
                        return read_object(key, fd, header, current.stamp, max_bytes=max_bytes, body=body)
                entry = next((e for e in visible if e.version_id == version_id and not e.is_marker), None)
                if entry is None:
                    return None
                container = self.container(b, key, create=False)
                opened = None if container is None else open_file(container, entry.name)
                if opened is None:
                    return None
                fd, st = opened
                try:
                    kept = parse_header(fd, st.st_size)
                    if kept is None or kept.size != entry.size or kept.digest not in (None, entry.digest):
                        raise corrupt(key)
                    return read_object(key, fd, kept, entry.stamp, max_bytes=max_bytes, body=body)
                finally:
                    os.close(fd)

    def delete(self, key: str, version_id: str) -> None:
        """Deleting the current version makes the previous one current (renamed back into
        place), or leaves no current object if that is a delete marker; deleting the delete
        marker that hides the key makes the version under it current."""
        if parse_version_id(version_id) is None:
            return
        names = self._names.of(key)
        with self._tree.verb("delete") as b:
            with self._tree.locked(b):
                current, visible, hidden = self._history(b, key)
                container = self.container(b, key, create=False)
                if current is not None and current.version_id == version_id:
                    for leftover in hidden if container is not None else []:
                        os.unlink(leftover.name, dir_fd=container)
                    previous = visible[0] if visible else None
                    if container is not None and previous is not None and not previous.is_marker:
                        self._restore(b, names, container, previous)
                    else:
                        self._unlink_current(b, key, names)
                else:
                    doomed = next((e for e in visible + hidden if e.version_id == version_id), None)
                    if doomed is None or container is None:
                        return
                    if current is None and doomed is visible[0] and len(visible) > 1 and not visible[1].is_marker:
                        self._restore(b, names, container, visible[1])  # the marker on top is going
                    os.unlink(doomed.name, dir_fd=container)
                if container is not None:
                    b.dirty[container] = AREA
                self.prune(b, names)

    def _restore(self, b: Batch, names: Sequence[str], container: int, entry: Entry) -> None:
        """Rename the kept version ``entry`` back into place as the current file (it hides
        the entries stamped later, until they are removed)."""
        parent = self._tree.parent(b, names, create=True)
        if self._names.folds(parent, names[-1]):
            raise folded_error()
        if clear_the_way(parent, names[-1]):
            b.forget(tuple(names))
        os.replace(entry.name, names[-1], src_dir_fd=container, dst_dir_fd=parent)
        b.dirty[container] = AREA
        b.dirty[parent] = TREE if len(names) > 1 else ROOT

    def _unlink_current(self, b: Batch, key: str, names: Sequence[str]) -> None:
        try:
            dirs = self._tree.open_dirs(b, (), names[:-1], create=False)
        except Missing:
            return
        parents = [b.root, *dirs]
        if is_file(parents[-1], names[-1]):
            os.unlink(names[-1], dir_fd=parents[-1])
            drop_index(b.root, key)
            b.dirty[parents[-1]] = TREE if dirs else ROOT
            self._tree.pruned(b, (), parents, names)

    def prune(self, b: Batch, names: Sequence[str]) -> None:
        """Remove ``names``' directories in the version area left empty, deepest first."""
        area = self._tree.area(b, create=False)
        if area is None:
            return
        try:
            dirs = self._tree.open_dirs(b, (VERSIONS,), names, create=False)
        except Missing:
            return
        self._tree.pruned(b, (VERSIONS,), [area, *dirs], [*names, ""])


def _current_at(parent: int, name: str) -> Current | None:
    """The current file ``parent/name`` if it is a well-formed object (else None)."""
    try:
        opened = open_file(parent, name)
        if opened is None:
            return None
        try:
            current = current_of(*opened)
        finally:
            os.close(opened[0])
    except OSError:
        return None
    return current if current.digest is not None else None
