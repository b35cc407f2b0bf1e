"""How the local store writes an object: its file, whole, in ``.tmp``, then in place.

A write (``put``, ``copy``, each copy of ``copy_many``) checks its preconditions and writes
a format-2 file in ``.tmp`` under the lock (stamped later than every version of its key,
when versions are kept); :meth:`Writes.commit` then syncs the files written (rule 1 of
``batch``'s durability rules: each file's data before its name) and renames each into
place, the file it replaces kept first in the version area (``kept``). A write that fails
is undone: its temporary file removed, nothing placed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..._errors import PreconditionFailedError, StorageError
from .batch import ROOT, TREE, Batch, Tree, syncfs_available
from .files import NEW_FILE_FLAGS, clear_the_way, is_file, mapped, temporary_name, write_all, write_parts
from .format import Current, Entry, body_digest, chunks, encode_metadata, etag_of, head_of, stamp_file
from .kept import KeptVersions
from .names import folded_error


@dataclass
class Written:
    """A write whose temporary file is written (and stamped), to be synced, then renamed
    into place by the call that wrote it, under the lock it holds."""

    key: str
    names: tuple[str, ...]  # the target's file names, from the root
    parent: int  # the target's directory
    fd: int  # the temporary file, open (-1 once closed)
    tmp: str  # its name in .tmp
    current: Current | None  # the file it replaces, to keep as a version
    unsynced: bool = False  # a new unique key's: its data left to the batch's syncfs (rule 4)
    kept: list[Entry] | None = None  # the key's kept entries, as listed under the lock
    fresh: bool = False  # its directory was made by the call that writes it: nothing is in its way


def overlaps(key: str, keys: set[str], dirs: set[str]) -> bool:
    """Whether ``key`` is one of ``keys``, above one (``dirs`` holds "a/", "a/b/" of each
    key "a/b/c") or below one."""
    if key in keys or key + "/" in dirs:
        return True
    at = key.find("/")
    while at != -1:
        if key[:at] in keys:
            return True
        at = key.find("/", at + 1)
    return False


def add_key(key: str, keys: set[str], dirs: set[str]) -> None:
    keys.add(key)
    at = key.find("/")
    while at != -1:
        dirs.add(key[: at + 1])
        at = key.find("/", at + 1)


class Writes:
    """The writes of one store, over its tree and its version area (``kept``)."""

    def __init__(self, tree: Tree, kept: KeptVersions) -> None:
        self._tree = tree
        self._kept = kept

    @staticmethod
    def etag_of_current(current: Current | None) -> str | None:
        """As :meth:`current_etag`, of the current file read for history."""
        if current is None:
            return None
        return "" if current.digest is None else etag_of(current.digest)

    def current_etag(self, b: Batch, key: str) -> str | None:
        """The ETag of ``key``; None if it is missing, "" if it is corrupt (matches no ETag)."""
        try:
            with self._tree.object(b, key) as found:
                return None if found is None else etag_of(body_digest(found[0], found[2]))
        except StorageError:
            return ""

    def target(self, b: Batch, names: Sequence[str], *, if_none_match: bool, exists: bool | None = None) -> int:
        """The directory to write ``names`` into (made as needed), its descriptor.
        ``exists``: whether a regular file is there, as the caller just found (else looked at)."""
        parent = self._tree.parent(b, names, create=True)
        if self._tree.names.folds(parent, names[-1]):
            raise folded_error()
        if if_none_match and (is_file(parent, names[-1]) if exists is None else exists):
            raise PreconditionFailedError("Error: the object already exists")
        return parent

    def write(
        self,
        b: Batch,
        key: str,
        names: Sequence[str],
        parent: int,
        metadata: Mapping[str, str],
        size: int,
        digest: bytes,
        body: Iterable[bytes],
        *,
        versioned: bool,
        unique: bool = False,
        read: tuple[Current | None] | None = None,
        fresh: bool = False,
    ) -> Written:
        """Write a format-2 file in ``.tmp`` (under the lock), to be synced and renamed to
        ``parent/names[-1]`` by :meth:`commit`. ``versioned``, it is stamped later than every
        version of ``key``, and the file it replaces is kept when it is placed. ``unique``
        (a key no object had or will have, so none of its versions is kept either): where
        it replaces nothing and the batch can end with a ``syncfs``, its data is left to
        that (``batch``'s rule 4), and its own time stamps it. ``read``: the file it
        replaces, as the caller just read it under the lock (else read here). ``fresh``:
        ``parent`` was made by the calling call, under the lock it holds: nothing is there."""
        meta = encode_metadata(metadata)
        current = None if not versioned else self._tree.current(b, key) if read is None else read[0]
        unsynced = (
            unique and current is None and (versioned or fresh or not is_file(parent, names[-1])) and syncfs_available()
        )
        if versioned and self._tree.names.check_folding:
            self._kept.refuse_folded_history(b, key)
        tmp_dir = self._tree.tmp(b)
        tmp = temporary_name()
        fd = os.open(tmp, NEW_FILE_FLAGS, 0o600, dir_fd=tmp_dir)
        write = Written(key, tuple(names), parent, fd, tmp, current, unsynced, fresh=fresh)
        try:
            head = head_of(meta, size, digest)
            if isinstance(body, list):
                write_parts(fd, [head, *body])  # the whole file in one call
            else:
                write_all(fd, head)
                for chunk in body:
                    write_all(fd, chunk)
            if versioned and (current is not None or not unique):
                newest, write.kept = self._kept.newest_stamp(b, key, current)
                stamp_file(fd, newest)
        except BaseException:
            self._undo(tmp_dir, write)
            raise
        return write

    def copied(
        self,
        b: Batch,
        source: str,
        destination: str,
        metadata: Mapping[str, str],
        if_match: str | None,
        if_none_match: bool,
        *,
        versioned: bool,
    ) -> tuple[str, Written]:
        """The copy's ETag and its file, written (under the lock), not yet placed."""
        names = self._tree.names.of(destination)
        with self._tree.object(b, source) as found:
            if found is None:
                raise PreconditionFailedError("Error: the source object changed concurrently")
            fd, _, header = found
            digest = body_digest(fd, header)  # the copy keeps the source's ETag
            if if_match is not None and etag_of(digest) != if_match:
                raise PreconditionFailedError("Error: the source object changed concurrently")
            parent = self.target(b, names, if_none_match=if_none_match)
            body = chunks(fd, header.body_offset, header.size)  # streamed, never whole in memory
            write = self.write(b, destination, names, parent, metadata, header.size, digest, body, versioned=versioned)
        return etag_of(digest), write

    def commit(self, b: Batch, writes: Sequence[Written]) -> list[BaseException | None]:
        """Sync the written files (under the lock, in the call that wrote them), then rename
        each into place, in order: what each write raised (None: placed). A write that
        fails is undone; the others are placed all the same."""
        tmp_dir = self._tree.tmp(b)
        try:
            b.sync_files([write.fd for write in writes if not write.unsynced])
        except BaseException:
            for write in writes:
                self._undo(tmp_dir, write)
            raise
        outcomes: list[BaseException | None] = []
        for write in writes:
            os.close(write.fd)
            write.fd = -1
            try:
                with mapped("write"):
                    self._place(b, write)
                outcomes.append(None)
            except Exception as exc:
                outcomes.append(exc)
                with contextlib.suppress(OSError):
                    os.unlink(write.tmp, dir_fd=tmp_dir)
        return outcomes

    def commit_one(self, b: Batch, write: Written) -> None:
        (outcome,) = self.commit(b, [write])
        if outcome is not None:
            raise outcome

    @staticmethod
    def _undo(tmp_dir: int, write: Written) -> None:
        if write.fd >= 0:
            os.close(write.fd)
            write.fd = -1
        with contextlib.suppress(OSError):
            os.unlink(write.tmp, dir_fd=tmp_dir)

    def _place(self, b: Batch, write: Written) -> None:
        """Rename the synced file into place, the file it replaces kept first (``kept``)."""
        names, parent = write.names, write.parent
        current = write.current
        if current is None and not write.fresh and clear_the_way(parent, names[-1]):  # (a current file is no directory)
            b.forget(names)
        if current is not None and current.digest is not None:
            self._kept.keep(b, write.key, parent, names[-1], current, write.kept)
        # A symbolic link at the name is replaced, not followed: rename acts on the link.
        os.replace(write.tmp, names[-1], src_dir_fd=self._tree.tmp(b), dst_dir_fd=parent)
        b.dirty[parent] = TREE if len(names) > 1 else ROOT
        if write.unsynced:
            b.unsynced.append((parent, names[-1]))
