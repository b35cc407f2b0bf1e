"""A store in a local directory: the embedded default, no AWS account needed.

Each object is one file at ``{root}/{key}``: a header, the metadata JSON, then the body.
It is written to a temporary file and renamed into place, so a reader sees the old or the
new object, never half of one. Writers take an exclusive ``flock`` on ``{root}/.lock``,
which makes the preconditions hold across threads and processes on one machine (readers of
history take it shared). Files are created 0600 and directories 0700.

The file format (a header that a listing or a HEAD reads without the body), the escaping
of key segments, the open flags and the names of kept versions are in ``_localfs``.

Versions (``versioned=True``, the default) are kept as a versioned S3 bucket keeps them.
The current version stays the file at ``{root}/{key}``, so ``get``, ``head`` and ``list``
cost what they cost without versions. The others are in the version area,
``{root}/.versions``, which no key reaches (keys never start with ``.``, and names starting
with ``.`` at the root are the store's own: ``.lock``, ``.tmp``, ``.keys``, ``.versions``):
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
versions stay until deleted (``s3memory._lifecycle.expire_noncurrent_versions`` expires a
user's noncurrent versions as the bucket rule does on S3). A file system without hard links
cannot keep versions (``StorageError`` on the first overwrite or delete: open the store
with ``versioned=False``).

Other local users and planted files are distrusted:

- the root must be a directory owned by the current user and not writable by group or
  others (``ConfigurationError``), checked again by every call;
- every name below the root is opened relative to its parent's descriptor with
  ``O_NOFOLLOW``: a symbolic link, FIFO or device there is not an object (missing for
  ``get``/``head``, skipped by ``list``, left alone by ``delete``/``purge``) and is never
  followed, written through or deleted through; the same holds in the version area (a
  link at ``.versions`` itself is refused by writers and read as no history);
- a file that is not a well-formed object is corrupt: ``get``/``head`` raise
  ``StorageError``, ``list`` skips it, ``purge`` removes it; a write or delete replaces
  it without keeping it as a version; a kept version that does not match its name is
  corrupt for ``get_version``/``head_version``; a file in the version area whose name the
  store never gives is ignored (and removed by ``purge``).

On a case-insensitive file system (macOS and Windows defaults), a new store escapes every
key segment so that keys differing in case or Unicode normalization never share a file,
and records that in ``{root}/.keys``. A store without that file keeps plain names; on a
case-insensitive file system (a store made by an earlier version) it refuses a key whose
segment folds onto a different stored name, in the version area too. The names of kept
versions are lower-case hex digits, digits and ``-``, which no file system folds.

Over 400 lines because :class:`LocalDirStore` is one class, kept whole because its rules
are read together: every method starts from the root descriptor ``_opened_root`` checks,
opens the names ``_names`` makes with ``O_NOFOLLOW`` from their parents' descriptors, and
writes under the one lock; the version area follows the same rules with the same methods;
split, the checks would sit apart from what they guard.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
import uuid
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from .._errors import ConfigurationError, PreconditionFailedError, StorageError
from ._base import ObjectInfo, ObjectStore, ObjectVersion, StoredObject, check_purge_prefix
from ._localfs import (
    _DIR_FLAGS,
    _HEADER_V2,
    _MAGIC_V2,
    _MAX_METADATA_BYTES,
    _NEW_FILE_FLAGS,
    _NOT_A_DIRECTORY,
    _READ_FLAGS,
    _add_marker,
    _check_bound,
    _chunks,
    _clear_the_way,
    _close_all,
    _corrupt,
    _Current,
    _current_of,
    _digest,
    _Entry,
    _escape,
    _etag,
    _folds_onto_another,
    _Header,
    _kept_entries,
    _link_version,
    _listed_versions,
    _make_private_dirs,
    _mapped,
    _parse_entry,
    _parse_header,
    _parse_version_id,
    _pread,
    _prune_dirs,
    _read_object,
    _stamp,
    _stamp_file,
    _unescape,
    _unsafe_directory,
    probe_case_sensitive,
)

_MAX_KEY_BYTES = 1024  # as S3

_KEYS_FILE = ".keys"  # the key encoding of the store; absent: plain names
_ESCAPED = "escaped"
_VERSIONS = ".versions"  # the version area: {root}/.versions/{key}/ holds the key's older versions

# In LocalDirStore, ``list`` is the method.
_Entries = list[_Entry]
_Names = list[str]


class _Missing(Exception):
    """Internal: a name on the way to a key is absent or is not a directory."""


class LocalDirStore(ObjectStore):
    """Objects as files under ``root`` (see the module's docstring for what it distrusts).

    It keeps every version of every object, as a versioned S3 bucket does (see the module's
    docstring); ``versioned=False`` keeps only the current one.

    Raises:
        ConfigurationError: ``root`` is not a directory that can be created, or is owned by
            another user, or is writable by group or others.
    """

    def __init__(self, root: str | os.PathLike[str], *, versioned: bool = True) -> None:
        self.root = Path(root).expanduser().resolve()
        self.versioned = versioned
        try:
            _make_private_dirs(self.root)
            fd = os.open(self.root, _DIR_FLAGS)
        except OSError as exc:
            raise ConfigurationError(
                f"the local store directory {self.root} cannot be opened: {exc.strerror or exc}"
            ) from exc
        try:
            st = os.fstat(fd)
            problem = _unsafe_directory(st, self.root)
            if problem:
                raise ConfigurationError(problem)
            self._root_id = (st.st_dev, st.st_ino)
            with _mapped("open its directory"):
                with contextlib.suppress(FileExistsError):
                    os.mkdir(".tmp", 0o700, dir_fd=fd)
                os.close(self._own(fd, ".tmp", _DIR_FLAGS))
                self._escaped, self._check_folding = self._key_encoding(fd)
        finally:
            os.close(fd)

    @property
    def identity(self) -> str:
        return f"local:{self.root}"

    # -- the root, the lock, keys -----------------------------------------------------------
    @contextlib.contextmanager
    def _opened_root(self) -> Iterator[int]:
        """The root's descriptor, checked to be the directory the store was opened on and
        still private (a swapped or loosened root is refused)."""
        try:
            fd = os.open(self.root, _DIR_FLAGS)
        except OSError as exc:
            raise StorageError(
                f"Error: the local store directory {self.root} cannot be opened: {exc.strerror}"
            ) from exc
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != self._root_id:
                raise StorageError(f"Error: the local store directory {self.root} was replaced; open the store again")
            problem = _unsafe_directory(st, self.root)
            if problem:
                raise StorageError(f"Error: {problem}")
            yield fd
        finally:
            os.close(fd)

    def _own(self, root: int, name: str, flags: int) -> int:
        """One of the store's own entries (``.tmp``, ``.lock``), never through a link."""
        try:
            fd = os.open(name, flags, 0o600, dir_fd=root)
        except OSError as exc:
            if exc.errno not in (*_NOT_A_DIRECTORY, errno.EISDIR):
                raise
        else:
            if stat.S_ISREG(os.fstat(fd).st_mode) or flags & os.O_DIRECTORY:
                return fd
            os.close(fd)
        raise StorageError(f"Error: {self.root / name} is not what the local store made there; remove it")

    @contextlib.contextmanager
    def _locked(self, root: int, *, shared: bool = False) -> Iterator[None]:
        """The store's lock: exclusive for writers; shared for readers of history, which
        must not see a version between the current file and the version area."""
        fd = self._own(root, ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _key_encoding(self, root: int) -> tuple[bool, bool]:
        """(escape key segments, check plain names for folding), from ``.keys`` or a probe."""
        marker = self._read_keys_file(root)
        if marker is not None:
            return marker == _ESCAPED, False
        tmp = self._own(root, ".tmp", _DIR_FLAGS)
        try:
            if probe_case_sensitive(tmp):
                return False, False
            with self._locked(root):
                marker = self._read_keys_file(root)
                if marker is not None:
                    return marker == _ESCAPED, False
                if any(not name.startswith(".") for name in os.listdir(root)) or self._has_history(root):
                    return False, True  # plain names written before: keep them, refuse folds
                name = uuid.uuid4().hex
                fd = os.open(name, _NEW_FILE_FLAGS, 0o600, dir_fd=tmp)
                with os.fdopen(fd, "wb") as f:
                    f.write(_ESCAPED.encode() + b"\n")
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(name, _KEYS_FILE, src_dir_fd=tmp, dst_dir_fd=root)
                return True, False
        finally:
            os.close(tmp)

    def _has_history(self, root: int) -> bool:
        """Whether the version area holds anything (names written in the store's encoding)."""
        area = self._area(root, create=False)
        if area is None:
            return False
        try:
            return bool(os.listdir(area))
        finally:
            os.close(area)

    def _read_keys_file(self, root: int) -> str | None:
        try:
            fd = os.open(_KEYS_FILE, _READ_FLAGS, dir_fd=root)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            raise StorageError(f"Error: {self.root / _KEYS_FILE} is not what the local store made there") from None
        try:
            content = os.read(fd, 64).decode("ascii", "replace").strip() if stat.S_ISREG(os.fstat(fd).st_mode) else ""
        finally:
            os.close(fd)
        if content not in (_ESCAPED, "plain"):
            raise StorageError(f"Error: {self.root / _KEYS_FILE} names an unknown key encoding")
        return content

    def _names(self, key: str) -> list[str]:
        """The file names of ``key``'s segments (StorageError for a key no file can hold)."""
        if not isinstance(key, str):
            raise StorageError(f"Error: the key {key!r} cannot be stored in a local directory")
        parts = key.split("/")
        if not key or key.startswith(".") or "\x00" in key or any(p in ("", ".", "..") for p in parts):
            raise StorageError(f"Error: the key {key!r} cannot be stored in a local directory")
        try:
            size = len(key.encode())
        except UnicodeEncodeError:
            raise StorageError(f"Error: the key {key!r} cannot be stored in a local directory") from None
        if size > _MAX_KEY_BYTES:
            raise StorageError(f"Error: a key of {size:,} bytes cannot be stored (at most {_MAX_KEY_BYTES:,})")
        return [_escape(p) for p in parts] if self._escaped else parts

    def _decode(self, name: str) -> str | None:
        """The key segment stored as ``name``, or None for a name s3memory never writes."""
        if self._escaped:
            return _unescape(name)
        try:
            name.encode()
        except UnicodeEncodeError:
            return None  # not UTF-8 on disk: no key is spelt so
        return name

    def _open_dirs(self, root: int, names: Sequence[str], *, create: bool) -> list[int]:
        """Descriptors of ``root/names[0]``, ``.../names[1]``... (the caller closes them),
        each opened from its parent's with ``O_NOFOLLOW``. A missing name, or one that is not
        a directory, raises ``_Missing``, or with ``create`` is made (0700) or refused."""
        fds: list[int] = []
        try:
            for name in names:
                parent = fds[-1] if fds else root
                if self._check_folding and _folds_onto_another(parent, name):
                    if create:
                        raise StorageError(
                            "Error: a stored name differs from this key's only in case; "
                            "this case-insensitive file system cannot hold both"
                        )
                    raise _Missing
                try:
                    fds.append(os.open(name, _DIR_FLAGS, dir_fd=parent))
                    continue
                except FileNotFoundError:
                    if not create:
                        raise _Missing from None
                except OSError as exc:
                    if exc.errno not in _NOT_A_DIRECTORY:
                        raise
                    if create:
                        raise StorageError(
                            "Error: a file or link is in the way of this key in the local store"
                        ) from None
                    raise _Missing from None
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o700, dir_fd=parent)
                try:
                    fds.append(os.open(name, _DIR_FLAGS, dir_fd=parent))
                except OSError as exc:
                    if exc.errno not in _NOT_A_DIRECTORY:
                        raise
                    raise StorageError("Error: a file or link is in the way of this key in the local store") from None
        except BaseException:
            _close_all(fds)
            raise
        return fds

    def _open_file(self, parent: int, name: str) -> tuple[int, os.stat_result] | None:
        """The regular file ``name`` in ``parent``, opened without following a link; None
        for anything else (absent, a symbolic link, a directory, a FIFO...)."""
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=parent)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR, errno.ENXIO, errno.EISDIR):
                return None
            raise
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            return None
        return fd, st

    @contextlib.contextmanager
    def _opened(self, root: int, key: str) -> Iterator[tuple[int, os.stat_result] | None]:
        """The regular file at ``key``: descriptor and stat; None if there is none."""
        names = self._names(key)
        try:
            dirs: list[int] | None = self._open_dirs(root, names[:-1], create=False)
        except _Missing:
            dirs = None
        if dirs is None:
            yield None
            return
        try:
            parent = dirs[-1] if dirs else root
            folded = self._check_folding and _folds_onto_another(parent, names[-1])
            opened = None if folded else self._open_file(parent, names[-1])
        finally:
            _close_all(dirs)
        if opened is None:
            yield None
            return
        try:
            yield opened
        finally:
            os.close(opened[0])

    @contextlib.contextmanager
    def _object(self, root: int, key: str) -> Iterator[tuple[int, os.stat_result, _Header] | None]:
        """The object file of ``key``: descriptor, stat and header; None if there is none.
        A file that is not a well-formed object raises StorageError."""
        with self._opened(root, key) as opened:
            if opened is None:
                yield None
                return
            fd, st = opened
            header = _parse_header(fd, st.st_size)
            if header is None:
                raise _corrupt(key)
            yield fd, st, header

    def _current(self, root: int, key: str) -> _Current | None:
        """The current file of ``key`` as history sees it (its digest None if it is not a
        well-formed object); None if there is none."""
        with self._opened(root, key) as opened:
            return None if opened is None else _current_of(*opened)

    @staticmethod
    def _is_file(parent: int, name: str) -> bool:
        try:
            return stat.S_ISREG(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
        except FileNotFoundError:
            return False

    def _write(
        self,
        root: int,
        key: str,
        parent: int,
        name: str,
        metadata: Mapping[str, str],
        size: int,
        digest: bytes,
        body: Iterable[bytes],
    ) -> None:
        """Write a format-2 file in ``.tmp``, fsync it, and rename it to ``parent/name``.
        Versioned, the file it replaces is kept first (:meth:`_keep`), and the new one is
        stamped later than every version of ``key``."""
        meta = json.dumps(dict(metadata), separators=(",", ":")).encode()
        if len(meta) > _MAX_METADATA_BYTES:
            raise StorageError("Error: the object's metadata is too large for the local store")
        current = self._current(root, key) if self.versioned else None
        if self.versioned and self._check_folding:
            self._refuse_folded_history(root, key)
        tmp_dir = self._own(root, ".tmp", _DIR_FLAGS)
        tmp = uuid.uuid4().hex
        renamed = False
        try:
            fd = os.open(tmp, _NEW_FILE_FLAGS, 0o600, dir_fd=tmp_dir)
            with os.fdopen(fd, "wb") as f:
                f.write(_HEADER_V2.pack(_MAGIC_V2, len(meta), size, digest) + meta)
                for chunk in body:
                    f.write(chunk)
                f.flush()
                if self.versioned:
                    _stamp_file(f.fileno(), self._newest_stamp(root, key, current))
                os.fsync(f.fileno())
            _clear_the_way(parent, name)
            if current is not None and current.digest is not None:
                self._keep(root, key, parent, name, current)
            # A symbolic link at the name is replaced, not followed: rename acts on the link.
            os.replace(tmp, name, src_dir_fd=tmp_dir, dst_dir_fd=parent)
            renamed = True
        finally:
            if not renamed:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp, dir_fd=tmp_dir)
            os.close(tmp_dir)

    # -- the interface --------------------------------------------------------------
    def get(self, key: str, *, max_bytes: int | None = None) -> StoredObject | None:
        with _mapped("read"), self._opened_root() as root, self._object(root, key) as found:
            if found is None:
                return None
            fd, st, header = found
            _check_bound(header.size, max_bytes)
            body = _pread(fd, header.size, header.body_offset)
            if len(body) != header.size:
                raise _corrupt(key)
            digest = header.digest or hashlib.md5(body, usedforsecurity=False).digest()
            return StoredObject(body, _etag(digest), header.metadata, st.st_mtime)

    def head(self, key: str) -> ObjectInfo | None:
        with _mapped("read"), self._opened_root() as root, self._object(root, key) as found:
            if found is None:
                return None
            fd, st, header = found
            return ObjectInfo(key, header.size, _etag(_digest(fd, header)), header.metadata, st.st_mtime)

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
        names = self._names(key)
        digest = hashlib.md5(body, usedforsecurity=False).digest()
        with _mapped("write"), self._opened_root() as root, self._locked(root):
            if if_match is not None and self._current_etag(root, key) != if_match:
                raise PreconditionFailedError("Error: the object changed concurrently")
            with self._target(root, names, if_none_match=if_none_match) as parent:
                self._write(root, key, parent, names[-1], metadata, len(body), digest, [body])
        return _etag(digest)

    def copy(
        self,
        source: str,
        destination: str,
        *,
        metadata: Mapping[str, str],
        if_match: str | None = None,
        if_none_match: bool = False,
    ) -> str:
        names = self._names(destination)
        with _mapped("copy"), self._opened_root() as root, self._locked(root), self._object(root, source) as found:
            if found is None:
                raise PreconditionFailedError("Error: the source object changed concurrently")
            fd, _, header = found
            digest = _digest(fd, header)  # the copy keeps the source's ETag
            if if_match is not None and _etag(digest) != if_match:
                raise PreconditionFailedError("Error: the source object changed concurrently")
            with self._target(root, names, if_none_match=if_none_match) as parent:
                body = _chunks(fd, header.body_offset, header.size)  # streamed, never whole in memory
                self._write(root, destination, parent, names[-1], metadata, header.size, digest, body)
        return _etag(digest)

    @contextlib.contextmanager
    def _target(self, root: int, names: Sequence[str], *, if_none_match: bool) -> Iterator[int]:
        """The directory to write ``names`` into (made as needed), its descriptor."""
        dirs = self._open_dirs(root, names[:-1], create=True)
        try:
            parent = dirs[-1] if dirs else root
            if self._check_folding and _folds_onto_another(parent, names[-1]):
                raise StorageError(
                    "Error: a stored name differs from this key's only in case; "
                    "this case-insensitive file system cannot hold both"
                )
            if if_none_match and self._is_file(parent, names[-1]):
                raise PreconditionFailedError("Error: the object already exists")
            yield parent
        finally:
            _close_all(dirs)

    def _current_etag(self, root: int, key: str) -> str | None:
        """The ETag of ``key``; None if it is missing, "" if it is corrupt (matches no ETag)."""
        try:
            with self._object(root, key) as found:
                return None if found is None else _etag(_digest(found[0], found[2]))
        except StorageError:
            return ""

    def _walk(self, root: int, prefix: str, *, prune: bool = False) -> Generator[tuple[str, int, str], None, None]:
        """``(key, directory descriptor, file name)`` of every regular file whose key starts
        with ``prefix``, in key order; symbolic links and other non-files are skipped and
        never followed. ``prune``: remove the directories found empty on the way out."""
        base = prefix.split("/")[:-1]
        if any(p in ("", ".", "..") or "\x00" in p for p in base) or (base and base[0].startswith(".")):
            return  # no key lies below such a prefix
        try:
            prefix.encode()
        except UnicodeEncodeError:
            return  # nor below one that is not UTF-8
        base_names = [_escape(p) for p in base] if self._escaped else base
        try:
            base_fds = self._open_dirs(root, base_names, create=False)
        except _Missing:
            return
        top = base_fds[-1] if base_fds else root
        base_key = "".join(p + "/" for p in base)
        # One frame per directory being visited: descriptor, name, parent's descriptor, and
        # the entries still to visit, last key first.
        stack: list[tuple[int, str, int, list[tuple[str, str, bool]]]] = [
            (top, "", -1, self._entries(top, base_key, prefix))
        ]
        try:
            while stack:
                fd, name, parent, entries = stack[-1]
                if not entries:
                    stack.pop()
                    if fd != top:
                        if prune:
                            with contextlib.suppress(OSError):
                                os.rmdir(name, dir_fd=parent)
                        os.close(fd)
                    continue
                key, entry, is_dir = entries.pop()
                if not is_dir:
                    yield key, fd, entry
                    continue
                try:
                    child = os.open(entry, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue  # gone, swapped for a link, or unreadable: nothing of ours to list
                stack.append((child, entry, fd, self._entries(child, key, prefix)))
            if prune:  # the prefix's own directories, up to the root, as far as they are empty
                for i in range(len(base_fds) - 1, -1, -1):
                    try:
                        os.rmdir(base_names[i], dir_fd=base_fds[i - 1] if i else root)
                    except OSError:
                        break
        finally:
            _close_all(fd for fd, *_ in stack if fd != top)
            _close_all(base_fds)

    def _entries(self, fd: int, dir_key: str, prefix: str) -> list[tuple[str, str, bool]]:
        """``(key, name, is a directory)`` of the entries worth visiting, last key first."""
        entries: list[tuple[str, str, bool]] = []
        try:
            scanned = list(os.scandir(fd))
        except OSError:
            return entries
        for entry in scanned:
            if not dir_key and entry.name.startswith("."):
                continue  # the store's own files (.lock, .tmp, .keys); no key starts with '.'
            segment = self._decode(entry.name)
            if segment is None:
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = not is_dir and entry.is_file(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                key = f"{dir_key}{segment}/"
                if len(key.encode()) > _MAX_KEY_BYTES or not (key.startswith(prefix) or prefix.startswith(key)):
                    continue
            elif is_file:
                key = dir_key + segment
                if not key.startswith(prefix):
                    continue
            else:
                continue  # a symbolic link, FIFO, socket or device is not an object
            entries.append((key, entry.name, is_dir))
        entries.sort(reverse=True)
        return entries

    def list(self, prefix: str, *, limit: int | None = None) -> Iterator[ObjectInfo]:
        found: list[ObjectInfo] = []
        with _mapped("list"), self._opened_root() as root, contextlib.closing(self._walk(root, prefix)) as walk:
            for key, parent, name in walk:
                if limit is not None and len(found) >= limit:
                    break
                info = self._listed(parent, name, key)
                if info is not None:
                    found.append(info)
        yield from found

    def _listed(self, parent: int, name: str, key: str) -> ObjectInfo | None:
        """The listing entry of one file; None for a file that is not a well-formed object
        (a corrupt or planted file must not break the listing)."""
        try:
            opened = self._open_file(parent, name)
            if opened is None:
                return None
            fd, st = opened
            try:
                header = _parse_header(fd, st.st_size)
                if header is None:
                    return None
                return ObjectInfo(key, header.size, _etag(_digest(fd, header)), last_modified=st.st_mtime)
            finally:
                os.close(fd)
        except OSError:  # StorageError included: it shrank while being hashed
            return None

    def purge(self, prefix: str, *, suffix: str = "") -> int:
        """Every matching file is removed, corrupt ones included, and every version and
        delete marker kept of the matching keys (symbolic links and other non-files are left
        where they are, and never followed). The count is of objects, versions and markers."""
        check_purge_prefix(prefix)
        removed = 0
        stamps: dict[str, int] = {}  # of the current files removed: kept entries as late are leftovers
        with (
            _mapped("delete"),
            self._opened_root() as root,
            self._locked(root),
            contextlib.closing(self._walk(root, prefix, prune=True)) as walk,  # its directory fds, on any error
        ):
            for key, parent, name in walk:
                if key.endswith(suffix):
                    with contextlib.suppress(FileNotFoundError):
                        stamps[key] = _stamp(os.stat(name, dir_fd=parent, follow_symlinks=False))
                        os.unlink(name, dir_fd=parent)  # unlink never follows a link
                        removed += 1
            with contextlib.closing(self._walk_kept(root, prefix, prune=True)) as kept:
                for key, container, names in kept:
                    if not key.endswith(suffix):
                        continue
                    hidden_from = stamps.get(key)
                    for name in names:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(name, dir_fd=container)
                            entry = _parse_entry(name)
                            if entry is not None and (hidden_from is None or entry.stamp < hidden_from):
                                removed += 1  # a version or marker, not a leftover
        return removed

    def delete(self, keys: Sequence[str], *, if_match: Mapping[str, str] | None = None) -> None:
        """Versioned, a delete keeps the current version and adds a delete marker over it."""
        changed = []
        with _mapped("delete"), self._opened_root() as root, self._locked(root):
            for key in keys:
                names = self._names(key)
                if if_match and key in if_match and self._current_etag(root, key) not in (None, if_match[key]):
                    changed.append(key)
                    continue
                try:
                    dirs = self._open_dirs(root, names[:-1], create=False)
                except _Missing:
                    continue
                try:
                    parents = [root, *dirs]
                    if not self._is_file(parents[-1], names[-1]) or (
                        self._check_folding and _folds_onto_another(parents[-1], names[-1])
                    ):
                        continue  # not an object, or another key's file on a case-insensitive disk
                    if self.versioned:
                        self._retire(root, key, parents[-1], names[-1])
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(names[-1], dir_fd=parents[-1])
                    _prune_dirs(parents, names)
                finally:
                    _close_all(dirs)
        if changed:
            raise PreconditionFailedError(f"Error: {len(changed)} objects changed and were not deleted")

    # -- versions --------------------------------------------------------------------
    # The current version is the file at {root}/{key}, as without versions. The others are
    # in {root}/.versions/{key}/ (the key's segments as directories, named as in the tree),
    # as files named by _localfs._version_name and _marker_name: a write hard-links the file
    # it replaces there before renaming the new one into place, and a delete hard-links it
    # there and adds a marker before unlinking it; so a reader without the lock sees the old
    # object or the new one, never none. The current file hides kept entries stamped as late
    # as it or later: what an interrupted write or delete leaves (removed by the next write).

    def keeps_versions(self) -> bool:
        return self.versioned

    def _area(self, root: int, *, create: bool) -> int | None:
        """The version area's descriptor. Without ``create``, None where there is none (or
        something the store did not make is there: no version is kept in it); with it, made
        as needed, and anything else in its place refused."""
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(_VERSIONS, 0o700, dir_fd=root)
            return self._own(root, _VERSIONS, _DIR_FLAGS)
        try:
            return os.open(_VERSIONS, _DIR_FLAGS, dir_fd=root)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, *_NOT_A_DIRECTORY):
                return None
            raise

    @contextlib.contextmanager
    def _container(self, root: int, key: str, *, create: bool) -> Iterator[int | None]:
        """The directory of ``key``'s kept versions: its descriptor, or None if there is none
        (and not ``create``)."""
        names = self._names(key)
        area = self._area(root, create=create)
        if area is None:
            yield None
            return
        try:
            try:
                dirs = self._open_dirs(area, names, create=create)
            except _Missing:
                dirs = []
            try:
                yield dirs[-1] if dirs else None
            finally:
                _close_all(dirs)
        finally:
            os.close(area)

    def _refuse_folded_history(self, root: int, key: str) -> None:
        """With plain names on a case-insensitive file system: refuse a key whose directory
        in the version area would be a different key's (one differing only in case)."""
        area = self._area(root, create=False)
        if area is None:
            return
        fds: builtins.list[int] = []
        try:
            parent = area
            for name in self._names(key):
                if _folds_onto_another(parent, name):
                    raise StorageError(
                        "Error: a stored name differs from this key's only in case; "
                        "this case-insensitive file system cannot hold both"
                    )
                try:
                    fds.append(os.open(name, _DIR_FLAGS, dir_fd=parent))
                except OSError:
                    return  # no history below: nothing to fold onto
                parent = fds[-1]
        finally:
            _close_all(fds)
            os.close(area)

    def _newest_stamp(self, root: int, key: str, current: _Current | None) -> int:
        """The latest time stamp among ``key``'s current file and kept entries (-1: none)."""
        with self._container(root, key, create=False) as container:
            kept = _kept_entries(container)
        return max(current.stamp if current is not None else -1, kept[0].stamp if kept else -1)

    def _keep(self, root: int, key: str, parent: int, name: str, current: _Current) -> None:
        """Hard-link the current file ``parent/name`` into ``key``'s container, named by its
        stamp, digest and size (under the lock). Leftovers as late as it are removed first."""
        try:
            with self._container(root, key, create=True) as container:
                assert container is not None
                _link_version(parent, name, container, current)
        except BaseException:
            with contextlib.suppress(OSError):
                self._prune_kept(root, self._names(key))  # the directories made for it
            raise

    def _retire(self, root: int, key: str, parent: int, name: str) -> None:
        """Before the current file of ``key`` is unlinked: keep it, and add a delete marker
        stamped later (not for a file that is no object, unless versions of it are kept)."""
        current = self._current(root, key)
        if current is None:
            return
        if current.digest is not None:
            self._keep(root, key, parent, name, current)
        with self._container(root, key, create=current.digest is not None) as container:
            if container is None:
                return
            kept = _kept_entries(container)
            if not kept:
                return
            tmp_dir = self._own(root, ".tmp", _DIR_FLAGS)
            try:
                _add_marker(tmp_dir, container, max(current.stamp, kept[0].stamp))
            finally:
                os.close(tmp_dir)

    def _history(self, root: int, key: str) -> tuple[_Current | None, _Entries, _Entries]:
        """``key``'s current object (None if there is none, or it is corrupt), its kept
        entries newest first, and those hidden by the current file (leftovers)."""
        current = self._current(root, key)
        if current is not None and current.digest is None:
            current = None
        with self._container(root, key, create=False) as container:
            kept = _kept_entries(container)
        if current is None:
            return None, kept, []
        return current, [e for e in kept if e.stamp < current.stamp], [e for e in kept if e.stamp >= current.stamp]

    def list_versions(self, prefix: str, *, limit: int | None = None) -> Iterator[ObjectVersion]:
        """The current files (their headers, as :meth:`list` reads them) and the names in
        the version area: no kept version is ever opened."""
        if not self.versioned:
            yield from super().list_versions(prefix, limit=limit)
            return
        if limit is not None and limit <= 0:
            return
        found: builtins.list[ObjectVersion] = []
        with (
            _mapped("list"),
            self._opened_root() as root,
            self._locked(root, shared=True),
            contextlib.closing(self._walk(root, prefix)) as walk,
        ):
            kept: dict[str, _Entries] = {}
            with contextlib.closing(self._walk_kept(root, prefix)) as kept_walk:
                for key, _, names in kept_walk:
                    kept[key] = sorted((e for n in names if (e := _parse_entry(n)) is not None), key=lambda e: e.name)
            only_kept = sorted(kept)  # keys with kept entries, merged in key order with the current files
            next_kept = 0
            for key, parent, name in walk:
                while next_kept < len(only_kept) and only_kept[next_kept] < key:
                    found += _listed_versions(only_kept[next_kept], None, kept[only_kept[next_kept]])
                    next_kept += 1
                if next_kept < len(only_kept) and only_kept[next_kept] == key:
                    next_kept += 1
                found += _listed_versions(key, self._current_at(parent, name), kept.get(key, []))
                if limit is not None and len(found) >= limit:
                    break
            else:
                for key in only_kept[next_kept:]:
                    found += _listed_versions(key, None, kept[key])
        yield from found[:limit]

    def _current_at(self, parent: int, name: str) -> _Current | None:
        """The current file ``parent/name`` if it is a well-formed object (else None)."""
        try:
            opened = self._open_file(parent, name)
            if opened is None:
                return None
            try:
                current = _current_of(*opened)
            finally:
                os.close(opened[0])
        except OSError:
            return None
        return current if current.digest is not None else None

    def get_version(self, key: str, version_id: str, *, max_bytes: int | None = None) -> StoredObject | None:
        if not self.versioned:
            return super().get_version(key, version_id, max_bytes=max_bytes)
        found = self._read_version(key, version_id, max_bytes=max_bytes, body=True)
        return None if found is None else found[0]

    def head_version(self, key: str, version_id: str) -> ObjectInfo | None:
        if not self.versioned:
            return super().head_version(key, version_id)
        found = self._read_version(key, version_id, max_bytes=None, body=False)
        if found is None:
            return None
        obj, size = found
        return ObjectInfo(key, size, obj.etag, obj.metadata, obj.last_modified)

    def _read_version(
        self, key: str, version_id: str, *, max_bytes: int | None, body: bool
    ) -> tuple[StoredObject, int] | None:
        """One version (its body only with ``body``) and its size; None if there is no such
        version or it is a delete marker. A kept file that does not match its name is
        corrupt (StorageError)."""
        if _parse_version_id(version_id) is None:
            return None
        with _mapped("read"), self._opened_root() as root, self._locked(root, shared=True):
            current, visible, _ = self._history(root, key)
            if current is not None and current.version_id == version_id:
                with self._object(root, key) as found:
                    if found is None:
                        return None
                    fd, _, header = found
                    return _read_object(key, fd, header, current.stamp, max_bytes=max_bytes, body=body)
            entry = next((e for e in visible if e.version_id == version_id and not e.is_marker), None)
            if entry is None:
                return None
            with self._container(root, key, create=False) as container:
                opened = None if container is None else self._open_file(container, entry.name)
            if opened is None:
                return None
            fd, st = opened
            try:
                kept = _parse_header(fd, st.st_size)
                if kept is None or kept.size != entry.size or kept.digest not in (None, entry.digest):
                    raise _corrupt(key)
                return _read_object(key, fd, kept, entry.stamp, max_bytes=max_bytes, body=body)
            finally:
                os.close(fd)

    def delete_version(self, key: str, version_id: str) -> None:
        """Deleting the current version makes the previous one current (renamed back into
        place), or leaves no current object if that is a delete marker; deleting the delete
        marker that hides the key makes the version under it current."""
        if not self.versioned:
            super().delete_version(key, version_id)
            return
        if _parse_version_id(version_id) is None:
            return
        names = self._names(key)
        with _mapped("delete"), self._opened_root() as root, self._locked(root):
            current, visible, hidden = self._history(root, key)
            with self._container(root, key, create=False) as container:
                if current is not None and current.version_id == version_id:
                    for leftover in hidden if container is not None else []:
                        os.unlink(leftover.name, dir_fd=container)
                    previous = visible[0] if visible else None
                    if container is not None and previous is not None and not previous.is_marker:
                        self._restore(root, names, container, previous)
                    else:
                        self._unlink_current(root, names)
                else:
                    doomed = next((e for e in visible + hidden if e.version_id == version_id), None)
                    if doomed is None or container is None:
                        return
                    if current is None and doomed is visible[0] and len(visible) > 1 and not visible[1].is_marker:
                        self._restore(root, names, container, visible[1])  # the marker on top is going
                    os.unlink(doomed.name, dir_fd=container)
            self._prune_kept(root, names)

    def _restore(self, root: int, names: Sequence[str], container: int, entry: _Entry) -> None:
        """Rename the kept version ``entry`` back into place as the current file (it hides
        the entries stamped later, until they are removed)."""
        dirs = self._open_dirs(root, names[:-1], create=True)
        try:
            parent = dirs[-1] if dirs else root
            if self._check_folding and _folds_onto_another(parent, names[-1]):
                raise StorageError(
                    "Error: a stored name differs from this key's only in case; "
                    "this case-insensitive file system cannot hold both"
                )
            _clear_the_way(parent, names[-1])
            os.replace(entry.name, names[-1], src_dir_fd=container, dst_dir_fd=parent)
        finally:
            _close_all(dirs)

    def _unlink_current(self, root: int, names: Sequence[str]) -> None:
        try:
            dirs = self._open_dirs(root, names[:-1], create=False)
        except _Missing:
            return
        try:
            parents = [root, *dirs]
            if self._is_file(parents[-1], names[-1]):
                os.unlink(names[-1], dir_fd=parents[-1])
                _prune_dirs(parents, names)
        finally:
            _close_all(dirs)

    def _prune_kept(self, root: int, names: Sequence[str]) -> None:
        """Remove ``names``' directories in the version area left empty, deepest first."""
        area = self._area(root, create=False)
        if area is None:
            return
        try:
            try:
                dirs = self._open_dirs(area, names, create=False)
            except _Missing:
                return
            try:
                _prune_dirs([area, *dirs], [*names, ""])
            finally:
                _close_all(dirs)
        finally:
            os.close(area)

    def _walk_kept(
        self, root: int, prefix: str, *, prune: bool = False
    ) -> Generator[tuple[str, int, _Names], None, None]:
        """``(key, directory descriptor, file names)`` of the version area's directory of
        every key starting with ``prefix`` that has files there (in no particular order);
        symbolic links and other non-files are skipped and never followed. ``prune``:
        remove the directories found empty on the way out."""
        base = prefix.split("/")[:-1]
        if any(p in ("", ".", "..") or "\x00" in p for p in base) or (base and base[0].startswith(".")):
            return
        try:
            prefix.encode()
        except UnicodeEncodeError:
            return
        area = self._area(root, create=False)
        if area is None:
            return
        try:
            base_names = [_escape(p) for p in base] if self._escaped else base
            try:
                base_fds = self._open_dirs(area, base_names, create=False)
            except _Missing:
                return
            top = base_fds[-1] if base_fds else area
            base_key = "/".join(base)
            # One frame per directory being visited: descriptor, name, parent's descriptor,
            # and the directories below it still to visit.
            stack: builtins.list[tuple[int, str, int, builtins.list[tuple[str, str]]]] = [
                (top, "", -1, self._kept_dirs(top, base_key, prefix))
            ]
            try:
                while stack:
                    fd, name, parent, children = stack[-1]
                    if not children:
                        stack.pop()
                        if fd != top:
                            if prune:
                                with contextlib.suppress(OSError):
                                    os.rmdir(name, dir_fd=parent)
                            os.close(fd)
                        continue
                    key, entry = children.pop()
                    try:
                        child = os.open(entry, _DIR_FLAGS, dir_fd=fd)
                    except OSError:
                        continue  # gone, swapped for a link, or unreadable: nothing of ours
                    stack.append((child, entry, fd, self._kept_dirs(child, key, prefix)))
                    if key.startswith(prefix):
                        try:
                            files = [f.name for f in os.scandir(child) if f.is_file(follow_symlinks=False)]
                        except OSError:
                            files = []
                        if files:
                            yield key, child, files
                if prune:
                    for i in range(len(base_fds) - 1, -1, -1):
                        try:
                            os.rmdir(base_names[i], dir_fd=base_fds[i - 1] if i else area)
                        except OSError:
                            break
            finally:
                _close_all(fd for fd, *_ in stack if fd != top)
                _close_all(base_fds)
        finally:
            os.close(area)

    def _kept_dirs(self, fd: int, key: str, prefix: str) -> builtins.list[tuple[str, str]]:
        """``(key, name)`` of the directories below ``fd`` (the version area's directory of
        ``key``) worth visiting for ``prefix``."""
        try:
            scanned = list(os.scandir(fd))
        except OSError:
            return []
        found = []
        for entry in scanned:
            if not key and entry.name.startswith("."):
                continue  # no key starts with '.'
            try:
                if not entry.is_dir(follow_symlinks=False):
                    continue
            except OSError:
                continue
            segment = self._decode(entry.name)
            if segment is None:
                continue
            child = f"{key}/{segment}" if key else segment
            if len(child.encode()) <= _MAX_KEY_BYTES and (child.startswith(prefix) or prefix.startswith(child + "/")):
                found.append((child, entry.name))
        return found
