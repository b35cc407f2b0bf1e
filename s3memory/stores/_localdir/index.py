"""The local store's listing index: what a listing says of each file of a large directory,
kept so that a listing of it opens no file.

A listing (``list`` without a limit, ``list_sizes``) of a directory of at least
``INDEXED_FROM`` files reads each file's fixed header once and keeps what it found (body
size, MD5 and ``mtime_ns`` by file name) in ``{root}/.index/{hash of the directory's key}``,
with the directory's ``(st_dev, st_ino, st_mtime_ns, st_ctime_ns)`` as it was while it was
read. The next listing stats the directory once: the same, it takes each file's entry from
the index (a name the index lacks is read from its file); else it reads every file again,
and writes the index anew.

Why an index that equals the directory's stat tells the truth. A file's name changes only
with its directory (rename, link, unlink, create all set the directory's ``mtime`` and
``ctime``), so while the directory's stat is the one recorded, each name leads to the file
that was read. The clock of a file system is coarse (a jiffy on ext4, a second or two on
others): a change in the same tick as the recorded times leaves them as they were. So an
index is written only if the directory's recorded times are earlier than the file system's
time when its reading began (the time stamp of a file made then, on the same file system:
``git``'s rule for "racily clean" files), and only if the directory's stat did not move
while it was read: any later change is stamped later than what was recorded, and shows.
That holds whoever changes the directory (this store, another process, a program that is
not s3memory) and whatever a crash loses (the index is written without a sync, and checked
whole by its MD5: a torn one is no index). What it cannot see: a file rewritten in place,
its name kept (no s3memory writer does that: each writes a new file and renames it), and a
clock set back to exactly a recorded time. ``get`` and ``head`` read the file itself, so
such a file is still found corrupt or changed there.

The index is a cache: nothing else reads it, and any file of ``.index`` that does not parse
and check is ignored. It holds file names (what the directory itself shows): ``purge``
removes every index, under the lock, and an index is written under the lock shared, after
its directory's stat is checked once more, so none outlives a purge of the names it holds.
"""

from __future__ import annotations

import array
import contextlib
import hashlib
import os
import stat
import struct
import sys
import uuid
from collections.abc import Generator, Sequence
from dataclasses import dataclass

from ..._errors import StorageError
from .batch import Batch, Tree
from .files import DIR_FLAGS, NEW_FILE_FLAGS, READ_FLAGS, close_all, write_all
from .format import listing_fields
from .walk import dir_entries, walk_start

INDEX = ".index"  # {root}/.index/{hash of a directory's key}: that directory's listing index
INDEXED_FROM = 64  # files in a directory from which a whole listing keeps an index of it
_MAGIC = b"S3MI\x02"
_HEAD = struct.Struct("<5sQQqqIQQ")  # magic; the directory's dev, ino, mtime_ns, ctime_ns; entries; 2 lengths
_MAX_INDEX_BYTES = 64 * 1024 * 1024
OBJECT, OTHER, DIRECTORY = 0, 1, 2  # an entry: an object file, a file that was no object, a directory

Fields = tuple[int, bytes, int]  # body size, body MD5, mtime_ns
DirStat = tuple[int, int, int, int]
Entry = tuple[str, str, bool]  # key, name, is a directory (as walk.dir_entries gives them)


def dir_stat(fd: int) -> DirStat:
    """What an index records of its directory ``fd``, and is checked against."""
    st = os.fstat(fd)
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns


def clock(fd: int) -> int:
    """The file system's time when the file ``fd`` was written (its ``mtime_ns``)."""
    return os.fstat(fd).st_mtime_ns


def index_name(dir_key: str) -> str:
    return hashlib.sha256(dir_key.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def drop_index(root: int, key: str) -> None:
    """Remove the index of the directory of ``key`` (a file of it was deleted: the index
    must not keep its name). Under the lock, as the deletion."""
    with contextlib.suppress(OSError):
        os.unlink(f"{INDEX}/{index_name(key[: key.rfind('/') + 1])}", dir_fd=root)


def _text(parts: Sequence[str]) -> bytes:
    return "\0".join(parts).encode(sys.getfilesystemencoding(), sys.getfilesystemencodeerrors())


def _parts(block: bytes, count: int) -> list[str]:
    return block.decode(sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()).split("\0") if count else []


def _little(values: array.array[int]) -> bytes:
    if sys.byteorder == "big":
        values = array.array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


@dataclass
class Listed:
    """A directory as its index records it: its entries in key order (a directory's key
    ends with "/"), their names on disk, kinds, and the fields of each object file."""

    keys: list[str]
    names: list[str]
    kinds: bytes
    sizes: Sequence[int]
    md5s: bytes  # 16 bytes an entry
    stamps: Sequence[int]

    def fields(self, i: int) -> Fields:
        return self.sizes[i], self.md5s[16 * i : 16 * i + 16], self.stamps[i]


def encode(recorded: DirStat, dir_key: str, entries: Sequence[Entry], found: dict[str, Fields]) -> bytes:
    """An index of the directory ``dir_key``: ``entries`` (in key order) and the fields of
    the object files among them (``found``, by name)."""
    segments = [key[len(dir_key) :] for key, _, _ in entries]
    names = [name for _, name, _ in entries]
    kinds = bytes(DIRECTORY if is_dir else OBJECT if name in found else OTHER for _, name, is_dir in entries)
    none: Fields = (0, bytes(16), 0)
    fields = [found.get(name, none) for name in names]
    segment_block = _text(segments)
    name_block = b"" if names == segments else _text(names)  # most often spelt alike
    body = b"".join(
        [
            _HEAD.pack(_MAGIC, *recorded, len(entries), len(segment_block), len(name_block)),
            segment_block,
            name_block,
            kinds,
            _little(array.array("Q", [f[0] for f in fields])),
            b"".join(f[1] for f in fields),
            _little(array.array("q", [f[2] for f in fields])),
        ]
    )
    return body + hashlib.md5(body, usedforsecurity=False).digest()


def decode(data: bytes, dir_key: str, recorded: DirStat) -> Listed | None:
    """The directory an index records, if the index is whole and recorded at ``recorded``."""
    if len(data) < _HEAD.size + 16:
        return None
    body, check = data[:-16], data[-16:]
    magic, dev, ino, mtime_ns, ctime_ns, count, segment_len, name_len = _HEAD.unpack_from(body)
    if magic != _MAGIC or (dev, ino, mtime_ns, ctime_ns) != recorded:
        return None
    at = _HEAD.size
    if len(body) != at + segment_len + name_len + count * 33:
        return None
    if hashlib.md5(body, usedforsecurity=False).digest() != check:
        return None
    segments = _parts(body[at : at + segment_len], count)
    at += segment_len
    names = _parts(body[at : at + name_len], count) if name_len else segments
    at += name_len
    sizes, stamps = array.array("Q"), array.array("q")
    if len(segments) != count or len(names) != count or sizes.itemsize != 8 or stamps.itemsize != 8:
        return None
    kinds = body[at : at + count]
    sizes.frombytes(body[at + count : at + 9 * count])
    md5s = body[at + 9 * count : at + 25 * count]
    stamps.frombytes(body[at + 25 * count :])
    if sys.byteorder == "big":
        sizes.byteswap()
        stamps.byteswap()
    return Listed([dir_key + s for s in segments], names, kinds, sizes, md5s, stamps)


class ListingIndex:
    """The listing indexes of one store, over its tree."""

    def __init__(self, tree: Tree) -> None:
        self._tree = tree

    @staticmethod
    def _area(b: Batch, *, create: bool) -> int | None:
        """``.index``'s descriptor (the caller closes it), or None (absent, or not a
        directory: then no index is read or written)."""
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(INDEX, 0o700, dir_fd=b.root)
        try:
            return os.open(INDEX, DIR_FLAGS, dir_fd=b.root)
        except OSError:
            return None

    @staticmethod
    def _load(area: int, dir_key: str, recorded: DirStat) -> Listed | None:
        try:
            fd = os.open(index_name(dir_key), READ_FLAGS, dir_fd=area)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_INDEX_BYTES:
                return None
            data = os.pread(fd, st.st_size, 0)
        except OSError:
            return None
        finally:
            os.close(fd)
        try:
            return decode(data, dir_key, recorded)
        except (ValueError, struct.error, UnicodeError):
            return None

    def walk(self, b: Batch, prefix: str) -> Generator[tuple[str, Fields], None, None]:
        """``(key, (size, MD5, mtime_ns))`` of every object file whose key starts with
        ``prefix``, in key order: the files ``walk_tree`` visits, each read as
        ``listing_info`` reads it, or taken from its directory's index."""
        tree = self._tree
        start = walk_start(tree, b, prefix)
        if start is None:
            return
        _, base_fds, base_key = start
        top = base_fds[-1] if base_fds else b.root
        area = self._area(b, create=False)
        stack: list[tuple[int, list[Entry], dict[str, Fields] | None]] = []
        try:
            present = set(os.listdir(area)) if area is not None else set()
            todo: tuple[int, str] | None = (top, base_key)
            while todo is not None or stack:
                if todo is not None:  # a directory to enter: from its index, or read
                    fd, dir_key = todo
                    todo = None
                    listed = None
                    if dir_key and area is not None and index_name(dir_key) in present:
                        with contextlib.suppress(OSError):
                            listed = self._load(area, dir_key, dir_stat(fd))
                    if listed is not None and DIRECTORY not in listed.kinds and dir_key.startswith(prefix):
                        # A directory of files only, all listed: its keys, in order, at once.
                        try:
                            for i, key in enumerate(listed.keys):
                                kind = listed.kinds[i]
                                found = listed.fields(i) if kind == OBJECT else listing_fields(fd, listed.names[i])
                                if found is not None:
                                    yield key, found
                        finally:
                            if fd != top:
                                os.close(fd)
                        continue
                    if listed is not None:
                        entries, known = _entries_of(listed, prefix)
                    else:
                        entries = dir_entries(tree.names, fd, dir_key, prefix)
                        known = None
                        whole = dir_key and dir_key.startswith(prefix)
                        if whole and sum(1 for entry in entries if not entry[2]) >= INDEXED_FROM:
                            known = self._indexed(b, fd, dir_key)
                    stack.append((fd, entries, known))
                    continue
                fd, entries, known = stack[-1]
                if not entries:
                    stack.pop()
                    if fd != top:
                        os.close(fd)
                    continue
                key, name, is_dir = entries.pop()
                if not is_dir:
                    found = known.get(name) if known is not None else None
                    if found is None:
                        found = listing_fields(fd, name)
                    if found is not None:
                        yield key, found
                    continue
                try:
                    todo = (os.open(name, DIR_FLAGS, dir_fd=fd), key)
                except OSError:
                    continue  # gone, swapped for a link, or unreadable: nothing of ours to list
        finally:
            close_all(fd for fd, *_ in stack if fd != top)
            if area is not None:
                os.close(area)

    def _indexed(self, b: Batch, fd: int, dir_key: str) -> dict[str, Fields] | None:
        """Read the whole directory ``fd`` (its entries and every file's fields) and keep it
        as its index (see the module's docstring for when); the fields read."""
        tree = self._tree
        tmp = uuid.uuid4().hex
        try:
            tmp_dir = tree.tmp(b)
            out = os.open(tmp, NEW_FILE_FLAGS, 0o600, dir_fd=tmp_dir)
        except (OSError, StorageError):  # e.g. a planted .tmp: no index, the listing goes on
            return None
        written = False
        try:
            began = clock(out)  # the file system's time as the reading begins
            before = dir_stat(fd)
            entries = dir_entries(tree.names, fd, dir_key, dir_key)
            entries.reverse()  # key order
            found: dict[str, Fields] = {}
            for _, name, is_dir in entries:
                if not is_dir and (fields := listing_fields(fd, name)) is not None:
                    found[name] = fields
            if max(before[2], before[3]) >= began:
                return found  # changed in this very tick: a later change might not show
            write_all(out, encode(before, dir_key, entries, found))
            with tree.locked(b, shared=True):  # not across a purge (it takes the lock)
                if dir_stat(fd) != before:
                    return found
                area = self._area(b, create=True)
                if area is None:
                    return found
                try:
                    os.replace(tmp, index_name(dir_key), src_dir_fd=tmp_dir, dst_dir_fd=area)
                    written = True
                finally:
                    os.close(area)
            return found
        except (OSError, StorageError):
            return None
        finally:
            os.close(out)
            if not written:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=tmp_dir)

    def clear(self, b: Batch) -> None:
        """Remove every index (a purge's, under the lock): none holds names purged."""
        area = self._area(b, create=False)
        if area is None:
            return
        try:
            for entry in os.scandir(area):
                with contextlib.suppress(OSError):
                    os.unlink(entry.name, dir_fd=area)
        finally:
            close_all([area])


def _entries_of(listed: Listed, prefix: str) -> tuple[list[Entry], dict[str, Fields]]:
    """What a walk takes of an indexed directory below ``prefix``: its entries (last key
    first, as ``dir_entries`` gives them) and the fields of its object files."""
    entries: list[Entry] = []
    known: dict[str, Fields] = {}
    for i, key in enumerate(listed.keys):
        kind = listed.kinds[i]
        if kind == DIRECTORY:
            if key.startswith(prefix) or prefix.startswith(key):
                entries.append((key, listed.names[i], True))
        elif key.startswith(prefix):
            entries.append((key, listed.names[i], False))
            if kind == OBJECT:
                known[listed.names[i]] = listed.fields(i)
    entries.reverse()
    return entries, known
