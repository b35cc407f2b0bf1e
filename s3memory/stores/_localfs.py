"""The local directory store's files: their format, their names, and how they are opened.

:class:`~s3memory.stores.LocalDirStore` (in ``_localdir``) keeps each object in one file;
this module holds what concerns one file or one name, below the store's root, lock and key
rules: the file format, the escaping of key segments, the open flags, and the checks on a
directory.

The header (format 2) is ``S3MO\\x02``, the metadata's length (4 bytes), the body's length
(8 bytes) and the body's MD5 (16 bytes), so a HEAD reads the header only, never a body,
and a listing the 33 bytes of that fixed part only (:func:`_listing_info`). Files of
format 1 (``S3MO\\x01`` and the metadata's length), written before, still read: their
size comes from the file's size and their ETag from hashing the body.
A file that is not a well-formed object has no header (:func:`_parse_header` answers None).

Kept versions (the store's version area, ``{root}/.versions``) are object files as above,
hard links of what was the current file, under a name that says everything a listing
needs, so that a listing never opens them: :func:`_version_name` and :func:`_marker_name`,
read back by :func:`_parse_entry`. A version's id is its time stamp (the file's
``mtime_ns``, which the store keeps increasing per key) and its body's MD5, so the current
file, in the format above, has its id too (:func:`_version_id`). The functions on one
version directory (list, link, mark, read) are here too.

How the store's changes reach the disk is here too: :class:`_Batch`, what one thread's
calls on one root share (the lock, the directories opened, the writes deferred, the
directories to sync) and how it syncs them (``_localdir``'s docstring says which syncs a
crash needs, and why).

Over 400 lines because it is the one module that knows what the local store's files look
like, object files and kept versions alike, and how they are made durable; kept whole, as
one description of a format.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import stat
import struct
import sys
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from .._errors import ObjectTooLargeError, S3MemoryError, StorageError
from ._base import NULL_VERSION, ObjectInfo, ObjectVersion, StoredObject

_MAGIC_V1 = b"S3MO\x01"
_HEADER_V1 = struct.Struct(">5sI")  # magic, metadata length
_MAGIC_V2 = b"S3MO\x02"
_HEADER_V2 = struct.Struct(">5sIQ16s")  # magic, metadata length, body length, MD5 of the body
_MAX_METADATA_BYTES = 64 * 1024  # S3 allows 2 KB; more is a corrupt or planted file
_CHUNK = 1024 * 1024

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a planted FIFO must not hang; it changes nothing for regular files.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_NOT_A_DIRECTORY = (errno.ENOTDIR, errno.ELOOP)  # a file or a symbolic link in the way
_NO_HARD_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.EXDEV)


def _etag(digest: bytes) -> str:
    return '"' + digest.hex() + '"'


def _unsafe_directory(st: os.stat_result, path: Path | str) -> str | None:
    """Why a directory may not hold the store (others could plant or swap files), or None."""
    if st.st_uid != os.geteuid():
        return f"the local store directory {path} is owned by another user (uid {st.st_uid}); use a directory you own"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"the local store directory {path} is writable by other users; run: chmod go-w {path}"
    return None


# -- key segments on a case-insensitive file system ---------------------------------------
# Lower-case ASCII letters, digits, '.', '_' and '-' are the same under every case folding
# and Unicode normalization; every other byte of the UTF-8 is written %xx (lower-case hex).
_SAFE_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789._-")
_HEX = "0123456789abcdef"


def _escape(segment: str) -> str:
    return "".join(chr(b) if b in _SAFE_BYTES else f"%{b:02x}" for b in segment.encode())


def _unescape(name: str) -> str | None:
    """The segment ``name`` encodes, or None if no segment is escaped as ``name``."""
    raw = bytearray()
    i = 0
    while i < len(name):
        if name[i] == "%" and len(name) >= i + 3 and name[i + 1] in _HEX and name[i + 2] in _HEX:
            raw.append(int(name[i + 1 : i + 3], 16))
            i += 3
        elif ord(name[i]) < 128:
            raw.append(ord(name[i]))
            i += 1
        else:
            return None
    try:
        segment = raw.decode()
    except UnicodeDecodeError:
        return None
    return segment if _escape(segment) == name else None  # one spelling per segment


def _fold(name: str) -> str:
    import unicodedata

    return unicodedata.normalize("NFD", unicodedata.normalize("NFD", name).casefold())


def _folds_onto_another(dir_fd: int, name: str) -> bool:
    """Whether a differently spelt entry of the directory folds to ``name`` (on a
    case-insensitive file system, opening ``name`` would open that entry instead)."""
    import unicodedata

    folded, spelling = _fold(name), unicodedata.normalize("NFC", name)
    return any(
        entry != name and _fold(entry) == folded and unicodedata.normalize("NFC", entry) != spelling
        for entry in os.listdir(dir_fd)
    )


def probe_case_sensitive(dir_fd: int) -> bool:
    """Whether the file system keeps names apart that differ only in case or in Unicode
    normalization, probed with two scratch files in the directory ``dir_fd``."""
    token = uuid.uuid4().hex
    pairs = ((f"probe-{token}-A", f"probe-{token}-a"), (f"probe-{token}-\u00e9", f"probe-{token}-e\u0301"))
    for created, other in pairs:
        try:
            os.close(os.open(created, _NEW_FILE_FLAGS, 0o600, dir_fd=dir_fd))
        except OSError:
            continue  # a file system refusing non-ASCII names cannot fold them either
        try:
            os.stat(other, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        finally:
            os.unlink(created, dir_fd=dir_fd)
        return False
    return True


# -- reading files --------------------------------------------------------------------------
@dataclass(frozen=True)
class _Header:
    metadata: dict[str, str]
    body_offset: int
    size: int
    digest: bytes | None  # None: format 1, hash the body


def _pread(fd: int, size: int, offset: int) -> bytes:
    """At most ``size`` bytes from ``offset`` (fewer only at the end of the file)."""
    parts = []
    while size > 0:
        part = os.pread(fd, min(size, 1 << 30), offset)
        if not part:
            break
        parts.append(part)
        size -= len(part)
        offset += len(part)
    return b"".join(parts)


def _parse_header(fd: int, file_size: int) -> _Header | None:
    """The header of the object file ``fd``, or None if it is not a well-formed object."""
    fixed = os.pread(fd, _HEADER_V2.size, 0)  # small reads of a regular file are short only at its end
    magic = fixed[:5]
    if magic == _MAGIC_V2 and len(fixed) == _HEADER_V2.size:
        _, meta_len, size, digest = _HEADER_V2.unpack(fixed)
        meta_offset: int = _HEADER_V2.size
    elif magic == _MAGIC_V1 and len(fixed) >= _HEADER_V1.size:
        _, meta_len = _HEADER_V1.unpack(fixed[: _HEADER_V1.size])
        meta_offset, size, digest = _HEADER_V1.size, file_size - _HEADER_V1.size - meta_len, None
    else:
        return None
    if meta_len > _MAX_METADATA_BYTES or meta_offset + meta_len + size != file_size or size < 0:
        return None
    raw = os.pread(fd, meta_len, meta_offset)
    try:
        metadata = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: a planted nesting bomb
        return None
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        return None
    return _Header(metadata, meta_offset + meta_len, size, digest)


def _listing_info(parent: int, name: str, key: str) -> ObjectInfo | None:
    """The listing entry of the file ``parent/name``; None for anything that is not an
    object file (a corrupt or planted file must not break the listing). For format 2, the
    fixed header alone (one ``pread`` of 33 bytes; the metadata is neither read nor
    checked, so a file whose metadata is corrupt is listed, and ``get``/``head`` find it
    corrupt); format 1 is read as :func:`_parse_header` reads it. A listing calls it once a
    file: it makes no call it can spare."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=parent)
    except OSError:
        return None  # gone, a symbolic link, a FIFO without a writer...
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        fixed = os.pread(fd, _FIXED_SIZE, 0)
        if fixed[:5] == _MAGIC_V2 and len(fixed) == _FIXED_SIZE:
            _, meta_len, size, digest = _unpack_v2(fixed)
            if meta_len > _MAX_METADATA_BYTES or _FIXED_SIZE + meta_len + size != st.st_size:
                return None
        elif fixed[:5] == _MAGIC_V1:
            header = _parse_header(fd, st.st_size)
            if header is None:
                return None
            size, digest = header.size, _digest(fd, header)
        else:
            return None
        # What ObjectInfo(key, size, etag, last_modified=...) makes, without the frozen
        # dataclass's __init__ (a third of the cost of listing a file whose header is cached).
        info = _new_info(ObjectInfo)
        info.__dict__.update(key=key, size=size, etag='"' + digest.hex() + '"', metadata={}, last_modified=st.st_mtime)
        return info
    except OSError:  # StorageError included: a format-1 file shrank while being hashed
        return None
    finally:
        os.close(fd)


_FIXED_SIZE = _HEADER_V2.size
_unpack_v2 = _HEADER_V2.unpack
_new_info = object.__new__


def _chunks(fd: int, offset: int, size: int) -> Iterator[bytes]:
    while size > 0:
        chunk = os.pread(fd, min(size, _CHUNK), offset)
        if not chunk:
            raise StorageError("Error: a local object file shrank while it was read")
        yield chunk
        offset += len(chunk)
        size -= len(chunk)


def _digest(fd: int, header: _Header) -> bytes:
    if header.digest is not None:
        return header.digest
    md5 = hashlib.md5(usedforsecurity=False)
    for chunk in _chunks(fd, header.body_offset, header.size):
        md5.update(chunk)
    return md5.digest()


def _corrupt(key: str) -> StorageError:
    return StorageError(f"Error: the local object file for {key!r} is corrupt")


@contextlib.contextmanager
def _mapped(action: str) -> Iterator[None]:
    """OS errors as StorageError (s3memory's own errors pass unchanged)."""
    try:
        yield
    except S3MemoryError:
        raise
    except OSError as exc:
        raise StorageError(f"Error: the local store could not {action}: {exc.strerror or exc}") from exc


def _close_all(fds: Iterable[int]) -> None:
    for fd in fds:
        os.close(fd)


def _make_private_dirs(path: Path) -> None:
    """Create ``path`` and its missing parents, each 0700."""
    missing = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o700)


# -- kept versions: names, ids and time stamps -----------------------------------------------
# A kept version is named "{inverted stamp}-{md5}-{size}", a delete marker "{inverted
# stamp}-m": 16 lower-case hex digits of 2**64 - 1 - stamp, so a directory's names sort
# newest first, and only lower-case hex, digits and '-', which every file system keeps
# apart (case and normalization never fold them). Ids: "{stamp}{md5}" (16 + 32 hex
# digits) for a version, "{stamp}m" for a marker.
_MAX_STAMP = 2**64 - 1
_ENTRY_RE = re.compile(r"([0-9a-f]{16})-(?:([0-9a-f]{32})-(0|[1-9][0-9]{0,19})|m)")
_VERSION_ID_RE = re.compile(r"([0-9a-f]{16})(?:([0-9a-f]{32})|m)")


def _stamp(st: os.stat_result) -> int:
    """A file's time stamp: its ``mtime_ns``, within what 64 bits hold."""
    return min(max(st.st_mtime_ns, 0), _MAX_STAMP)


def _version_id(stamp: int, digest: bytes | None) -> str:
    """The id of the version stamped ``stamp`` with body MD5 ``digest`` (None: a marker)."""
    return f"{stamp:016x}" + ("m" if digest is None else digest.hex())


def _parse_version_id(version_id: object) -> tuple[int, bytes | None] | None:
    """``(stamp, digest)`` of an id :func:`_version_id` makes; None for any other string."""
    if not isinstance(version_id, str) or version_id == NULL_VERSION:
        return None
    match = _VERSION_ID_RE.fullmatch(version_id)
    if match is None:
        return None
    return int(match.group(1), 16), None if match.group(2) is None else bytes.fromhex(match.group(2))


def _version_name(stamp: int, digest: bytes, size: int) -> str:
    return f"{_MAX_STAMP - stamp:016x}-{digest.hex()}-{size}"


def _marker_name(stamp: int) -> str:
    return f"{_MAX_STAMP - stamp:016x}-m"


@dataclass(frozen=True)
class _Entry:
    """A kept version or delete marker, as its name says (the file itself is not read)."""

    name: str
    stamp: int
    digest: bytes | None  # None: a delete marker
    size: int

    @property
    def version_id(self) -> str:
        return _version_id(self.stamp, self.digest)

    @property
    def is_marker(self) -> bool:
        return self.digest is None


@dataclass(frozen=True)
class _Current:
    """The current file of a key, as history sees it."""

    stamp: int
    digest: bytes | None  # None: the file is not a well-formed object
    size: int
    inode: tuple[int, int]  # (st_dev, st_ino): the file a hard link must reach

    @property
    def version_id(self) -> str:
        return _version_id(self.stamp, self.digest)


def _parse_entry(name: str) -> _Entry | None:
    """The entry named ``name``; None for a name the store never gives one."""
    match = _ENTRY_RE.fullmatch(name)
    if match is None:
        return None
    inverted, digest, size = match.groups()
    return _Entry(
        name, _MAX_STAMP - int(inverted, 16), None if digest is None else bytes.fromhex(digest), int(size or 0)
    )


def _stamp_file(fd: int, newest: int) -> int:
    """Give the file ``fd`` a time stamp later than ``newest`` (now, if that is later) and
    return it. A file system that keeps times coarser than nanoseconds gets the first later
    time it can hold; one that cannot store a later time is an error."""
    now = time.time_ns()
    for step in (1, 1_000, 1_000_000, 1_000_000_000, 2_000_000_000):
        wanted = min(max(now, newest + step), _MAX_STAMP)
        os.utime(fd, ns=(wanted, wanted))
        stamp = _stamp(os.fstat(fd))
        if stamp > newest:
            return stamp
    raise StorageError("Error: the local store's file system cannot give a new version a later time than the last")


def _current_of(fd: int, st: os.stat_result) -> _Current:
    header = _parse_header(fd, st.st_size)
    try:
        digest = None if header is None else _digest(fd, header)
    except StorageError:  # it shrank while being hashed
        digest = None
    return _Current(_stamp(st), digest, 0 if header is None else header.size, (st.st_dev, st.st_ino))


def _kept_entries(container: int | None) -> list[_Entry]:
    """The kept versions and markers in ``container``, newest first, from their names."""
    if container is None:
        return []
    entries = [
        entry
        for found in os.scandir(container)
        if found.is_file(follow_symlinks=False) and (entry := _parse_entry(found.name)) is not None
    ]
    entries.sort(key=lambda entry: entry.name)
    return entries


def _link_version(parent: int, name: str, container: int, current: _Current, *, new: bool = False) -> None:
    """Hard-link the current file ``parent/name`` into the version directory ``container``,
    named by its stamp, digest and size; kept entries as late as it (leftovers of an
    interrupted write or delete) are removed first. The link must reach the file
    ``current`` describes, else it is undone. ``new``: the container was just made, empty."""
    assert current.digest is not None
    for entry in [] if new else _kept_entries(container):  # new: the container was just made
        if entry.stamp >= current.stamp:
            os.unlink(entry.name, dir_fd=container)
    kept = _version_name(current.stamp, current.digest, current.size)
    try:
        os.link(name, kept, src_dir_fd=parent, dst_dir_fd=container, follow_symlinks=False)
    except FileExistsError:
        raise StorageError("Error: a directory is in the way of a version in the local store") from None
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
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
    stamp = min(max(time.time_ns(), newest + 1), _MAX_STAMP)
    os.close(os.open(_marker_name(stamp), _NEW_FILE_FLAGS, 0o600, dir_fd=container))


def _clear_the_way(parent: int, name: str) -> bool:
    """Remove an empty directory at ``name`` (left behind, not an object); refuse a full one.
    Whether one was removed."""
    try:
        if stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
            os.rmdir(name, dir_fd=parent)
            return True
    except FileNotFoundError:
        pass
    except OSError:
        raise StorageError("Error: a directory is in the way of this key in the local store") from None
    return False


def _prune_dirs(parents: Sequence[int], names: Sequence[str]) -> int:
    """Remove the directories of ``names[:-1]`` left empty, deepest first; ``parents[i]``
    is the descriptor of the directory holding ``names[i]``. The number of names kept
    (``names[i]`` for ``i`` from it on were removed; ``len(names) - 1``: none)."""
    for i in range(len(names) - 2, -1, -1):
        try:
            os.rmdir(names[i], dir_fd=parents[i])
        except OSError:
            return i + 1
    return 0


def _listed_versions(key: str, current: _Current | None, kept: Sequence[_Entry]) -> list[ObjectVersion]:
    """``key``'s versions, newest first: the current file (a well-formed object, or None)
    and the kept entries it does not hide."""
    listed = []
    if current is not None and current.digest is not None:
        listed.append(
            ObjectVersion(key, current.version_id, _etag(current.digest), current.size, current.stamp / 1e9, True)
        )
        kept = [entry for entry in kept if entry.stamp < current.stamp]
    for i, entry in enumerate(kept):
        etag = "" if entry.digest is None else _etag(entry.digest)
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


def _read_object(
    key: str, fd: int, header: _Header, stamp: int, *, max_bytes: int | None, body: bool
) -> tuple[StoredObject, int]:
    """The object file ``fd`` (its body only with ``body``, bounded by ``max_bytes``), and its size."""
    _check_bound(header.size, max_bytes)
    if not body:
        return StoredObject(b"", _etag(_digest(fd, header)), header.metadata, stamp / 1e9), header.size
    data = _pread(fd, header.size, header.body_offset)
    if len(data) != header.size:
        raise _corrupt(key)
    digest = header.digest or hashlib.md5(data, usedforsecurity=False).digest()
    return StoredObject(data, _etag(digest), header.metadata, stamp / 1e9), header.size


def _check_bound(size: int, max_bytes: int | None) -> None:
    if max_bytes is not None and size > max_bytes:
        raise ObjectTooLargeError(
            f"Error: a stored object is too large to read ({size:,} bytes, at most {max_bytes:,})", size=size
        )


# -- durability ------------------------------------------------------------------------------
# Measured on ext4 (2 shared cores, virtio disk): fsync of a small new file 0.22-0.29 ms,
# whether fsync or fdatasync; after the writeback of a batch of files was started
# (posix_fadvise), fsync of each 0.09 ms (the first commits the journal for all); one
# syncfs for 1,000 files 20-28 ms, 0.02-0.03 ms a file. A directory whose change another
# fsync already committed costs 0.04 ms to fsync.
_SYNCFS_FROM = 2  # files or directories to make durable at once: from this many, one syncfs


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _start_writeback(fd: int) -> None:
    """Start writing ``fd``'s data to disk without waiting: when a batch later fsyncs its
    files, the first fsync commits every file's allocation, and the others do not wait for
    a journal commit of their own. (Linux starts writeback for POSIX_FADV_DONTNEED; pages
    being written back stay cached.)"""
    advise = getattr(os, "posix_fadvise", None)
    if advise is not None:
        with contextlib.suppress(OSError):
            advise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


_syncfs_call: object = None  # libc's syncfs once looked up; False where there is none


def _syncfs(fd: int) -> bool:
    """Make everything written to the file system of ``fd`` durable (Linux's ``syncfs``);
    False where it is not available (then fsync each file and directory instead)."""
    global _syncfs_call
    if _syncfs_call is None:
        _syncfs_call = False
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                libc = ctypes.CDLL(None, use_errno=True)
                call = libc.syncfs
                call.argtypes = [ctypes.c_int]
                _syncfs_call = call
            except (OSError, AttributeError):
                pass
    if _syncfs_call is False:
        return False
    if _syncfs_call(fd) != 0:  # type: ignore[operator]
        import ctypes

        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return True


def _fsync_dir(fd: int) -> None:
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise  # EINVAL and the like: a file system that cannot sync a directory


# Directories made durable first: the version area's, then the root, then the keys'; see
# _localdir's docstring for why the order matters.
AREA, ROOT, TREE = 0, 1, 2


@dataclass
class _Written:
    """A write whose temporary file is written (and stamped), to be synced, then renamed
    into place by the call that wrote it, under the lock it holds."""

    key: str
    names: tuple[str, ...]  # the target's file names, from the root
    parent: int  # the target's directory
    fd: int  # the temporary file, open (-1 once closed)
    tmp: str  # its name in .tmp
    current: _Current | None  # the file it replaces, to keep as a version


def _overlaps(key: str, keys: set[str], dirs: set[str]) -> bool:
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


def _add_key(key: str, keys: set[str], dirs: set[str]) -> None:
    keys.add(key)
    at = key.find("/")
    while at != -1:
        dirs.add(key[: at + 1])
        at = key.find("/", at + 1)


class _Batch:
    """What one thread's calls on one store root share until the outermost batch ends: the
    root's descriptor (checked once), the lock file (held by one call at a time, never
    between calls), the directories opened (by their path of names from the root) and the
    directories to sync before the batch ends."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.depth = 0  # batch() and verbs entered, and not left
        self.verbs = 0  # calls running: while one runs, no descriptor it may hold is closed
        self.lock: int | None = None  # the .lock file, open for the whole batch
        self.held = 0  # 0, or the flock mode a running call holds (only while one runs)
        self.tmp: int | None = None
        self.dirs: dict[tuple[str, ...], int] = {}
        self.retired: list[int] = []  # forgotten (their directory removed), closed at the next sync
        self.dirty: dict[int, int] = {}  # descriptor -> AREA, ROOT or TREE: to fsync before answering
        self.made: set[tuple[str, ...]] = set()  # directories this batch made, still empty
        self.missing: set[tuple[str, ...]] = set()  # directories found missing (until made)

    def forget(self, path: tuple[str, ...]) -> None:
        """The directory at ``path`` was removed: forget it and everything below it (their
        descriptors stay open until the next sync, for the running call may hold one)."""
        gone = [p for p in self.dirs if p[: len(path)] == path]
        for p in gone:
            self.retired.append(self.dirs.pop(p))

    def sync_files(self, fds: Sequence[int]) -> None:
        """Make the written files durable (each one's data, before its name is)."""
        if len(fds) < _SYNCFS_FROM or not _syncfs(self.root):
            if len(fds) > 1:
                for fd in fds:
                    _start_writeback(fd)
            for fd in fds:
                os.fsync(fd)

    def sync_dirs(self) -> None:
        """Make the changed directories durable, the version area's first; then close the
        forgotten ones."""
        dirty = sorted(self.dirty.items(), key=lambda item: item[1])
        self.dirty = {}
        try:
            if dirty and (len(dirty) < _SYNCFS_FROM or not _syncfs(self.root)):
                for fd, _ in dirty:
                    _fsync_dir(fd)
        finally:
            retired, self.retired = self.retired, []
            _close_all(retired)
