"""A store in a local directory: the embedded default, no AWS account needed.

Each object is one file at ``{root}/{key}``: a header, the metadata JSON, then the body.
It is written to a temporary file and renamed into place, so a reader sees the old or the
new object, never half of one. Writers take an exclusive ``flock`` on ``{root}/.lock``,
which makes the preconditions hold across threads and processes on one machine. Files
are created 0600 and directories 0700.

The file format (a header that a listing or a HEAD reads without the body), the escaping
of key segments and the open flags are in ``_localfs``.

Other local users and planted files are distrusted:

- the root must be a directory owned by the current user and not writable by group or
  others (``ConfigurationError``), checked again by every call;
- every name below the root is opened relative to its parent's descriptor with
  ``O_NOFOLLOW``: a symbolic link, FIFO or device there is not an object (missing for
  ``get``/``head``, skipped by ``list``, left alone by ``delete``/``purge``) and is never
  followed, written through or deleted through;
- a file that is not a well-formed object is corrupt: ``get``/``head`` raise
  ``StorageError``, ``list`` skips it, ``purge`` removes it.

On a case-insensitive file system (macOS and Windows defaults), a new store escapes every
key segment so that keys differing in case or Unicode normalization never share a file,
and records that in ``{root}/.keys``. A store without that file keeps plain names; on a
case-insensitive file system (a store made by an earlier version) it refuses a key whose
segment folds onto a different stored name.

Over 400 lines because :class:`LocalDirStore` is one class, kept whole because its rules
are read together: every method starts from the root descriptor ``_opened_root`` checks,
opens the names ``_names`` makes with ``O_NOFOLLOW`` from their parents' descriptors, and
writes under the one lock; split, the checks would sit apart from what they guard.
"""

from __future__ import annotations

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

from .._errors import ConfigurationError, ObjectTooLargeError, PreconditionFailedError, StorageError
from ._base import ObjectInfo, ObjectStore, StoredObject, check_purge_prefix
from ._localfs import (
    _DIR_FLAGS,
    _HEADER_V2,
    _MAGIC_V2,
    _MAX_METADATA_BYTES,
    _NEW_FILE_FLAGS,
    _NOT_A_DIRECTORY,
    _READ_FLAGS,
    _chunks,
    _close_all,
    _corrupt,
    _digest,
    _escape,
    _etag,
    _folds_onto_another,
    _Header,
    _make_private_dirs,
    _mapped,
    _parse_header,
    _pread,
    _unescape,
    _unsafe_directory,
    probe_case_sensitive,
)

_MAX_KEY_BYTES = 1024  # as S3

_KEYS_FILE = ".keys"  # the key encoding of the store; absent: plain names
_ESCAPED = "escaped"


class _Missing(Exception):
    """Internal: a name on the way to a key is absent or is not a directory."""


class LocalDirStore(ObjectStore):
    """Objects as files under ``root`` (see the module's docstring for what it distrusts).

    Raises:
        ConfigurationError: ``root`` is not a directory that can be created, or is owned by
            another user, or is writable by group or others.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser().resolve()
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
    def _locked(self, root: int) -> Iterator[None]:
        fd = self._own(root, ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
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
                if any(not name.startswith(".") for name in os.listdir(root)):
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
    def _object(self, root: int, key: str) -> Iterator[tuple[int, os.stat_result, _Header] | None]:
        """The object file of ``key``: descriptor, stat and header; None if there is none.
        A file that is not a well-formed object raises StorageError."""
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
        fd, st = opened
        try:
            header = _parse_header(fd, st.st_size)
            if header is None:
                raise _corrupt(key)
            yield fd, st, header
        finally:
            os.close(fd)

    @staticmethod
    def _is_file(parent: int, name: str) -> bool:
        try:
            return stat.S_ISREG(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
        except FileNotFoundError:
            return False

    def _write(
        self,
        root: int,
        parent: int,
        name: str,
        metadata: Mapping[str, str],
        size: int,
        digest: bytes,
        body: Iterable[bytes],
    ) -> None:
        """Write a format-2 file in ``.tmp``, fsync it, and rename it to ``parent/name``."""
        meta = json.dumps(dict(metadata), separators=(",", ":")).encode()
        if len(meta) > _MAX_METADATA_BYTES:
            raise StorageError("Error: the object's metadata is too large for the local store")
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
                os.fsync(f.fileno())
            try:
                if stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
                    os.rmdir(name, dir_fd=parent)  # an empty directory left behind is not an object
            except FileNotFoundError:
                pass
            except OSError:
                raise StorageError("Error: a directory is in the way of this key in the local store") from None
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
            if max_bytes is not None and header.size > max_bytes:
                raise ObjectTooLargeError(
                    f"Error: a stored object is too large to read ({header.size:,} bytes, at most {max_bytes:,})",
                    size=header.size,
                )
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
                self._write(root, parent, names[-1], metadata, len(body), digest, [body])
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
                self._write(root, parent, names[-1], metadata, header.size, digest, body)
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
        """No versions here: every matching file is removed, corrupt ones included (symbolic
        links and other non-files are left where they are, and never followed)."""
        check_purge_prefix(prefix)
        removed = 0
        with (
            _mapped("delete"),
            self._opened_root() as root,
            self._locked(root),
            contextlib.closing(self._walk(root, prefix, prune=True)) as walk,  # its directory fds, on any error
        ):
            for key, parent, name in walk:
                if key.endswith(suffix):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(name, dir_fd=parent)  # unlink never follows a link
                        removed += 1
        return removed

    def delete(self, keys: Sequence[str], *, if_match: Mapping[str, str] | None = None) -> None:
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
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(names[-1], dir_fd=parents[-1])
                    for i in range(len(dirs) - 1, -1, -1):  # remove the directories left empty
                        try:
                            os.rmdir(names[i], dir_fd=parents[i])
                        except OSError:
                            break
                finally:
                    _close_all(dirs)
        if changed:
            raise PreconditionFailedError(f"Error: {len(changed)} objects changed and were not deleted")
