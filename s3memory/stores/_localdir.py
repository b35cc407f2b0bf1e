"""A store in a local directory: the embedded default, no AWS account needed.

Each object is one file at ``{root}/{key}``: a header, the metadata JSON, then the body.
It is written to a temporary file and renamed into place, so a reader sees the old or the
new object, never half of one. Writers take an exclusive ``flock`` on ``{root}/.lock``,
which makes the preconditions hold across threads and processes on one machine (readers of
history take it shared). Files are created 0600 and directories 0700.

The file format (a header that a listing or a HEAD reads without the body), the escaping
of key segments, the open flags and the names of kept versions are in ``_localfs``.

Batches. Every call runs in a batch: the calls made inside :meth:`LocalDirStore.batch` on
one thread (a local store's round trip runs its calls there, one after the other), or
else a batch of its own. A batch checks the root once, opens each directory once, and
syncs the directories its calls changed once, when it ends (the round trip answers then).
The lock is held by one call at a time, never between calls (code run between a round
trip's calls may wait for a thread that waits for the lock), so each write is checked,
synced and renamed into place within its call: its result is final when it returns. What
the batch opened before a call took the lock is looked at again (``_look_again``).
:meth:`LocalDirStore.copy_many` makes many copies in one call, and syncs their files at
once. Batches nest, and are shared by the stores opened on one root in one thread.

Durability: what a crash (power cut) needs for nothing acknowledged to be lost, each sync
made before the batch (a round trip, or a call outside one) answers:

1. each new file's data, and its time stamp, before its name: ``fsync`` of the temporary
   file before the rename, in the call (``copy_many``: all its files at once, then their
   renames). Without it ext4 and xfs (delayed allocation) may commit the rename first: the
   name would then lead to an empty file after a crash, a corrupt object in place of the
   acknowledged one it replaced;
2. each directory whose entries changed, once, when the batch ends: the key's directory
   after the rename or the unlink, the parent of each directory made, the version
   directory after the hard link or the delete marker (and, in a purge, each directory
   emptied). A rename or a link changes the directory, not the file: until the directory
   is on disk, a crash can undo an acknowledged write or delete;
3. in that order between directories: the version area's first, then the root, then the
   keys', so that the current file is never durably replaced or unlinked while the hard
   link keeping it is not (on a file system that logs each synced directory apart, as
   btrfs does; ext4 and xfs commit one journal in order, so there the first sync covers
   the rest, which then cost a cache flush each).

On Linux, a step with two or more files or directories to sync is one ``syncfs`` of the
store's file system instead (measured cheaper from two on: one journal commit instead of
one per directory); it also writes other programs' unwritten data on that file system,
whose amount bounds what it costs. Not synced, because a crash there loses nothing: the
temporary name's removal from ``.tmp`` (a stray file there is never read), the removal of
an emptied directory (an empty directory is no object), and a delete marker's file (its
name says all it holds: it is made in place, empty). Between a write's call and the end of
its batch, another process may read the write before its directory is on disk (as it could
read it before its file was, before this). A crash before the batch answered may leave
temporary files in ``.tmp`` and each key old or new (``tests/test_localdir_crash.py`` kills
the store between any two steps).

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
versions stay until deleted (``s3memory._admin.lifecycle.expire_noncurrent_versions`` expires a
user's noncurrent versions as the bucket rule does on S3). A file system without hard links
cannot keep versions (``StorageError`` on the first overwrite or delete: open the store
with ``versioned=False``).

Other local users and planted files are distrusted:

- the root must be a directory owned by the current user and not writable by group or
  others (``ConfigurationError``), checked again by every batch (a call outside one is a
  batch of its own);
- every name below the root is opened relative to its parent's descriptor with
  ``O_NOFOLLOW``: a symbolic link, FIFO or device there is not an object (missing for
  ``get``/``head``, skipped by ``list``, left alone by ``delete``/``purge``) and is never
  followed, written through or deleted through; the same holds in the version area (a
  link at ``.versions`` itself is refused by writers and read as no history);
- a file that is not a well-formed object is corrupt: ``get``/``head`` raise
  ``StorageError``, ``list`` skips it (``list`` reads only a file's fixed header, so a file
  whose header holds but whose metadata does not is listed, as on S3, and is corrupt for
  every read), ``purge`` removes it; a write or delete replaces it without keeping it as a
  version; a kept version that does not match its name is corrupt for
  ``get_version``/``head_version``; a file in the version area whose name the store never
  gives is ignored (and removed by ``purge``).

On a case-insensitive file system (macOS and Windows defaults), a new store escapes every
key segment so that keys differing in case or Unicode normalization never share a file,
and records that in ``{root}/.keys``. A store without that file keeps plain names; on a
case-insensitive file system (a store made by an earlier version) it refuses a key whose
segment folds onto a different stored name, in the version area too. The names of kept
versions are lower-case hex digits, digits and ``-``, which no file system folds.

Over 400 lines because :class:`LocalDirStore` is one class, kept whole because its rules
are read together: every method starts from the batch's root descriptor, checked by
``_open_root``, opens the names ``_names`` makes with ``O_NOFOLLOW`` from their parents'
descriptors, and writes under the one lock; the version area follows the same rules with
the same methods; split, the checks would sit apart from what they guard.
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
import threading
import uuid
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from .._errors import ConfigurationError, PreconditionFailedError, StorageError
from ._base import Move, ObjectInfo, ObjectStore, ObjectVersion, StoredObject, check_purge_prefix
from ._localfs import (
    _DIR_FLAGS,
    _HEADER_V2,
    _MAGIC_V2,
    _MAX_METADATA_BYTES,
    _NEW_FILE_FLAGS,
    _NOT_A_DIRECTORY,
    _READ_FLAGS,
    AREA,
    ROOT,
    TREE,
    _add_key,
    _add_marker,
    _Batch,
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
    _fsync_dir,
    _Header,
    _kept_entries,
    _link_version,
    _listed_versions,
    _listing_info,
    _make_private_dirs,
    _mapped,
    _overlaps,
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
    _write_all,
    _Written,
    probe_case_sensitive,
)

_MAX_KEY_BYTES = 1024  # as S3

_KEYS_FILE = ".keys"  # the key encoding of the store; absent: plain names
_ESCAPED = "escaped"
_VERSIONS = ".versions"  # the version area: {root}/.versions/{key}/ holds the key's older versions
_MAX_WRITTEN = 64  # files copy_many syncs at once (each is held open until then)
_MAX_DIRS = 128  # directories a batch keeps open before it closes them between calls
_THIS_THREAD = threading.local()  # .batches: this thread's open batch of each store root, by (st_dev, st_ino)

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

    concurrent = False  # a round trip's calls run on the calling thread, in one batch

    def __init__(self, root: str | os.PathLike[str], *, versioned: bool = True) -> None:
        self.root = Path(root).expanduser().resolve()
        self.versioned = versioned
        self._escaped = self._check_folding = False  # until read from .keys below
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
        finally:
            os.close(fd)
        with _mapped("open its directory"), self._joined() as b:
            with contextlib.suppress(FileExistsError):
                os.mkdir(".tmp", 0o700, dir_fd=b.root)
            self._tmp(b)
            self._escaped, self._check_folding = self._key_encoding(b)

    @property
    def identity(self) -> str:
        return f"local:{self.root}"

    # -- batches: the root, the lock, directories, syncs ------------------------------------
    def batch(self) -> contextlib.AbstractContextManager[None]:
        """Calls on this thread inside it share the root's check, the lock file and the
        directories opened, and the syncs of the directories they change, made when it
        exits (every write is durable then). Reentrant; shared by every store opened on
        the same root in this thread."""
        return self._batch_scope()

    @contextlib.contextmanager
    def _batch_scope(self) -> Iterator[None]:
        with _mapped("write"), self._joined():
            yield

    @contextlib.contextmanager
    def _joined(self) -> Iterator[_Batch]:
        """This thread's batch on the root, joined, or begun and, on leaving, finished."""
        batches: dict[tuple[int, int], _Batch] = _THIS_THREAD.__dict__.setdefault("batches", {})
        b = batches.get(self._root_id)
        if b is not None:
            b.depth += 1
            try:
                yield b
            finally:
                b.depth -= 1
            return
        b = _Batch(self._open_root())
        b.depth = 1
        batches[self._root_id] = b
        try:
            yield b
        except BaseException:
            del batches[self._root_id]
            with contextlib.suppress(Exception):  # what failed is what is raised
                self._finish(b)
            raise
        del batches[self._root_id]
        self._finish(b)

    @contextlib.contextmanager
    def _verb(self, action: str) -> Iterator[_Batch]:
        """One call of the interface, in this thread's batch (or in a batch of its own)."""
        with _mapped(action), self._joined() as b:
            b.verbs += 1
            try:
                yield b
            finally:
                b.verbs -= 1
            if b.depth > 1 and b.verbs == 0:
                self._relieve(b)

    def _open_root(self) -> int:
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
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _finish(self, b: _Batch) -> None:
        """The end of a batch: the changed directories synced, every descriptor closed."""
        try:
            b.sync_dirs()
        finally:
            _close_all([*b.dirs.values(), *b.retired, *(fd for fd in (b.tmp, b.lock) if fd is not None), b.root])

    def _relieve(self, b: _Batch) -> None:
        """Between calls (no descriptor of the batch is in use): keep the open directories
        within bounds, for descriptors are a limited resource."""
        if len(b.dirs) + len(b.retired) >= _MAX_DIRS:
            b.sync_dirs()
            _close_all(b.dirs.values())
            b.dirs.clear()

    def _commit(self, b: _Batch, writes: Sequence[_Written]) -> builtins.list[BaseException | None]:
        """Sync the written files (under the lock, in the call that wrote them), then rename
        each into place, in order: what each write raised (None: placed). A write that
        fails is undone; the others are placed all the same."""
        tmp_dir = self._tmp(b)
        try:
            b.sync_files([write.fd for write in writes])
        except BaseException:
            for write in writes:
                self._undo(tmp_dir, write)
            raise
        outcomes: builtins.list[BaseException | None] = []
        for write in writes:
            os.close(write.fd)
            write.fd = -1
            try:
                with _mapped("write"):
                    self._place(b, write)
                outcomes.append(None)
            except Exception as exc:
                outcomes.append(exc)
                with contextlib.suppress(OSError):
                    os.unlink(write.tmp, dir_fd=tmp_dir)
        return outcomes

    def _commit_one(self, b: _Batch, write: _Written) -> None:
        (outcome,) = self._commit(b, [write])
        if outcome is not None:
            raise outcome

    @staticmethod
    def _undo(tmp_dir: int, write: _Written) -> None:
        if write.fd >= 0:
            os.close(write.fd)
            write.fd = -1
        with contextlib.suppress(OSError):
            os.unlink(write.tmp, dir_fd=tmp_dir)

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

    def _tmp(self, b: _Batch) -> int:
        if b.tmp is None:
            b.tmp = self._own(b.root, ".tmp", _DIR_FLAGS)
        return b.tmp

    @contextlib.contextmanager
    def _locked(self, b: _Batch, *, shared: bool = False) -> Iterator[None]:
        """The store's lock, for one call (or a flush): exclusive for writers; shared for
        readers of history, which must not see a version between the current file and the
        version area. Never held between calls: code between them (a round trip's other
        calls) may wait for a thread that waits for this lock."""
        want = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        if b.held in (want, fcntl.LOCK_EX):
            yield  # held by the call this one runs in
            return
        if b.lock is None:
            b.lock = self._own(b.root, ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        before = b.held
        fcntl.flock(b.lock, want)
        b.held = want
        try:
            self._look_again(b)
            yield
        finally:
            fcntl.flock(b.lock, before or fcntl.LOCK_UN)
            b.held = before

    def _look_again(self, b: _Batch) -> None:
        """Once the lock is taken: forget what others may have changed since the batch last
        held it (a directory opened may have been removed, one found missing made)."""
        b.missing.clear()
        b.made.clear()
        for path, fd in builtins.list(b.dirs.items()):
            if path in b.dirs and os.fstat(fd).st_nlink == 0:  # removed
                b.forget(path)

    def _key_encoding(self, b: _Batch) -> tuple[bool, bool]:
        """(escape key segments, check plain names for folding), from ``.keys`` or a probe."""
        marker = self._read_keys_file(b.root)
        if marker is not None:
            return marker == _ESCAPED, False
        tmp = self._tmp(b)
        if probe_case_sensitive(tmp):
            return False, False
        with self._locked(b):
            marker = self._read_keys_file(b.root)
            if marker is not None:
                return marker == _ESCAPED, False
            if any(not name.startswith(".") for name in os.listdir(b.root)) or self._has_history(b):
                return False, True  # plain names written before: keep them, refuse folds
            name = uuid.uuid4().hex
            fd = os.open(name, _NEW_FILE_FLAGS, 0o600, dir_fd=tmp)
            with os.fdopen(fd, "wb") as f:
                f.write(_ESCAPED.encode() + b"\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(name, _KEYS_FILE, src_dir_fd=tmp, dst_dir_fd=b.root)
            b.dirty[b.root] = ROOT
            return True, False

    def _has_history(self, b: _Batch) -> bool:
        """Whether the version area holds anything (names written in the store's encoding)."""
        area = self._area(b, create=False)
        return area is not None and bool(os.listdir(area))

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

    def _names(self, key: str) -> builtins.list[str]:
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

    def _dir(self, b: _Batch, path: tuple[str, ...], *, create: bool) -> int:
        """The descriptor of the directory ``root/path[0]/path[1]...``, from the batch's or
        opened from its parent's with ``O_NOFOLLOW`` (and kept in the batch; never close
        it). A missing name, or one that is not a directory, raises ``_Missing``, or with
        ``create`` is made (0700) or refused."""
        found = b.dirs.get(path)
        if found is not None:
            return found
        if not path:
            return b.root
        if not create and path in b.missing:
            raise _Missing
        parent = self._dir(b, path[:-1], create=create) if len(path) > 1 else b.root
        try:
            fd = self._open_area(b, create) if path == (_VERSIONS,) else self._open_dir(b, parent, path, create)
        except _Missing:
            b.missing.add(path)
            raise
        b.missing.discard(path)
        b.dirs[path] = fd
        return fd

    def _open_dir(self, b: _Batch, parent: int, path: tuple[str, ...], create: bool) -> int:
        name = path[-1]
        if self._check_folding and _folds_onto_another(parent, name):
            if create:
                raise StorageError(
                    "Error: a stored name differs from this key's only in case; "
                    "this case-insensitive file system cannot hold both"
                )
            raise _Missing
        try:
            if create and (path in b.missing or path[:-1] in b.made):
                raise FileNotFoundError  # known to be missing: straight to making it
            return os.open(name, _DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise _Missing from None
        except OSError as exc:
            if exc.errno not in _NOT_A_DIRECTORY:
                raise
            if create:
                raise StorageError("Error: a file or link is in the way of this key in the local store") from None
            raise _Missing from None
        try:
            os.mkdir(name, 0o700, dir_fd=parent)
            b.dirty[parent] = AREA if path[0] == _VERSIONS else TREE if len(path) > 1 else ROOT
            b.made.add(path)
        except FileExistsError:
            pass
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=parent)
        except OSError as exc:
            if exc.errno not in _NOT_A_DIRECTORY:
                raise
            raise StorageError("Error: a file or link is in the way of this key in the local store") from None

    def _open_area(self, b: _Batch, create: bool) -> int:
        """The version area's descriptor. Without ``create``, ``_Missing`` where there is
        none (or something the store did not make is there: no version is kept in it); with
        it, made as needed, and anything else in its place refused."""
        if create:
            try:
                os.mkdir(_VERSIONS, 0o700, dir_fd=b.root)
                b.dirty[b.root] = ROOT
            except FileExistsError:
                pass
            return self._own(b.root, _VERSIONS, _DIR_FLAGS)
        try:
            return os.open(_VERSIONS, _DIR_FLAGS, dir_fd=b.root)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, *_NOT_A_DIRECTORY):
                raise _Missing from None
            raise

    def _open_dirs(self, b: _Batch, base: tuple[str, ...], names: Sequence[str], *, create: bool) -> builtins.list[int]:
        """Descriptors of ``base + names[:1]``, ``base + names[:2]``... (the batch's: never
        close them); ``_Missing`` as :meth:`_dir`."""
        fds = []
        path = base
        for name in names:
            path = (*path, name)
            fds.append(self._dir(b, path, create=create))
        return fds

    def _parent(self, b: _Batch, names: Sequence[str], *, create: bool) -> int:
        """The directory holding the file ``names`` (``_Missing`` as :meth:`_dir`)."""
        return self._dir(b, tuple(names[:-1]), create=create)

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
    def _opened(self, b: _Batch, key: str) -> Iterator[tuple[int, os.stat_result] | None]:
        """The regular file at ``key``: descriptor and stat; None if there is none."""
        names = self._names(key)
        try:
            parent = self._parent(b, names, create=False)
        except _Missing:
            yield None
            return
        folded = self._check_folding and _folds_onto_another(parent, names[-1])
        opened = None if folded else self._open_file(parent, names[-1])
        if opened is None:
            yield None
            return
        try:
            yield opened
        finally:
            os.close(opened[0])

    @contextlib.contextmanager
    def _object(self, b: _Batch, key: str) -> Iterator[tuple[int, os.stat_result, _Header] | None]:
        """The object file of ``key``: descriptor, stat and header; None if there is none.
        A file that is not a well-formed object raises StorageError."""
        with self._opened(b, key) as opened:
            if opened is None:
                yield None
                return
            fd, st = opened
            header = _parse_header(fd, st.st_size)
            if header is None:
                raise _corrupt(key)
            yield fd, st, header

    def _current(self, b: _Batch, key: str) -> _Current | None:
        """The current file of ``key`` as history sees it (its digest None if it is not a
        well-formed object); None if there is none."""
        with self._opened(b, key) as opened:
            return None if opened is None else _current_of(*opened)

    @staticmethod
    def _is_file(parent: int, name: str) -> bool:
        try:
            return stat.S_ISREG(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
        except FileNotFoundError:
            return False

    def _write(
        self,
        b: _Batch,
        key: str,
        names: Sequence[str],
        parent: int,
        metadata: Mapping[str, str],
        size: int,
        digest: bytes,
        body: Iterable[bytes],
    ) -> _Written:
        """Write a format-2 file in ``.tmp`` (under the lock), to be synced and renamed to
        ``parent/names[-1]`` by :meth:`_commit`. Versioned, it is stamped later than every
        version of ``key``, and the file it replaces is kept when it is placed."""
        meta = json.dumps(dict(metadata), separators=(",", ":")).encode()
        if len(meta) > _MAX_METADATA_BYTES:
            raise StorageError("Error: the object's metadata is too large for the local store")
        current = self._current(b, key) if self.versioned else None
        if self.versioned and self._check_folding:
            self._refuse_folded_history(b, key)
        tmp_dir = self._tmp(b)
        tmp = uuid.uuid4().hex
        fd = os.open(tmp, _NEW_FILE_FLAGS, 0o600, dir_fd=tmp_dir)
        write = _Written(key, tuple(names), parent, fd, tmp, current)
        try:
            _write_all(fd, _HEADER_V2.pack(_MAGIC_V2, len(meta), size, digest) + meta)
            for chunk in body:
                _write_all(fd, chunk)
            if self.versioned:
                _stamp_file(fd, self._newest_stamp(b, key, current))
        except BaseException:
            self._undo(tmp_dir, write)
            raise
        return write

    def _place(self, b: _Batch, write: _Written) -> None:
        """Rename the synced file into place, the file it replaces kept first (:meth:`_keep`)."""
        names, parent = write.names, write.parent
        if _clear_the_way(parent, names[-1]):
            b.forget(names)
        current = write.current
        if current is not None and current.digest is not None:
            self._keep(b, write.key, parent, names[-1], current)
        # A symbolic link at the name is replaced, not followed: rename acts on the link.
        os.replace(write.tmp, names[-1], src_dir_fd=self._tmp(b), dst_dir_fd=parent)
        b.dirty[parent] = TREE if len(names) > 1 else ROOT

    # -- the interface --------------------------------------------------------------
    def get(self, key: str, *, max_bytes: int | None = None) -> StoredObject | None:
        with self._verb("read") as b:
            with self._object(b, key) as found:
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
        with self._verb("read") as b:
            with self._object(b, key) as found:
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
        with self._verb("write") as b, self._locked(b):
            if if_match is not None and self._current_etag(b, key) != if_match:
                raise PreconditionFailedError("Error: the object changed concurrently")
            parent = self._target(b, names, if_none_match=if_none_match)
            self._commit_one(b, self._write(b, key, names, parent, metadata, len(body), digest, [body]))
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
        with self._verb("copy") as b, self._locked(b):
            etag, write = self._copied(b, source, destination, metadata, if_match, if_none_match)
            self._commit_one(b, write)
        return etag

    def copy_many(self, moves: Sequence[Move]) -> builtins.list[str | Exception]:
        """Every copy in one call: their files written, then synced at once (one ``syncfs``
        where there is one), then renamed into place, all under one hold of the lock, so each
        copy's preconditions hold when it is placed. At most ``_MAX_WRITTEN`` files are
        held open at a time."""
        results: builtins.list[str | Exception] = []
        with self._verb("copy") as b, self._locked(b):
            pending: builtins.list[tuple[int, _Written]] = []
            keys: set[str] = set()
            dirs: set[str] = set()

            def commit() -> None:
                for (at, _), outcome in zip(pending, self._commit(b, [w for _, w in pending]), strict=True):
                    if outcome is not None:
                        results[at] = outcome if isinstance(outcome, Exception) else StorageError(str(outcome))
                pending.clear()
                keys.clear()
                dirs.clear()

            for source, destination, metadata, if_match, if_none_match in moves:
                if pending and (_overlaps(destination, keys, dirs) or _overlaps(source, keys, dirs)):
                    commit()  # a copy from or onto a key written before: that one is placed first
                try:
                    with _mapped("copy"):
                        etag, write = self._copied(b, source, destination, metadata, if_match, if_none_match)
                except Exception as exc:
                    results.append(exc)
                    continue
                results.append(etag)
                pending.append((len(results) - 1, write))
                _add_key(destination, keys, dirs)
                if len(pending) >= _MAX_WRITTEN:
                    commit()
            if pending:
                commit()
        return results

    def _copied(
        self,
        b: _Batch,
        source: str,
        destination: str,
        metadata: Mapping[str, str],
        if_match: str | None,
        if_none_match: bool,
    ) -> tuple[str, _Written]:
        """The copy's ETag and its file, written (under the lock), not yet placed."""
        names = self._names(destination)
        with self._object(b, source) as found:
            if found is None:
                raise PreconditionFailedError("Error: the source object changed concurrently")
            fd, _, header = found
            digest = _digest(fd, header)  # the copy keeps the source's ETag
            if if_match is not None and _etag(digest) != if_match:
                raise PreconditionFailedError("Error: the source object changed concurrently")
            parent = self._target(b, names, if_none_match=if_none_match)
            body = _chunks(fd, header.body_offset, header.size)  # streamed, never whole in memory
            write = self._write(b, destination, names, parent, metadata, header.size, digest, body)
        return _etag(digest), write

    def _target(self, b: _Batch, names: Sequence[str], *, if_none_match: bool) -> int:
        """The directory to write ``names`` into (made as needed), its descriptor."""
        parent = self._parent(b, names, create=True)
        if self._check_folding and _folds_onto_another(parent, names[-1]):
            raise StorageError(
                "Error: a stored name differs from this key's only in case; "
                "this case-insensitive file system cannot hold both"
            )
        if if_none_match and self._is_file(parent, names[-1]):
            raise PreconditionFailedError("Error: the object already exists")
        return parent

    def _current_etag(self, b: _Batch, key: str) -> str | None:
        """The ETag of ``key``; None if it is missing, "" if it is corrupt (matches no ETag)."""
        try:
            with self._object(b, key) as found:
                return None if found is None else _etag(_digest(found[0], found[2]))
        except StorageError:
            return ""

    def _walk(self, b: _Batch, prefix: str, *, prune: bool = False) -> Generator[tuple[str, int, str], None, None]:
        """``(key, directory descriptor, file name)`` of every regular file whose key starts
        with ``prefix``, in key order; symbolic links and other non-files are skipped and
        never followed. ``prune`` (a purge): sync each directory left, and remove those
        found empty on the way out."""
        base = prefix.split("/")[:-1]
        if any(p in ("", ".", "..") or "\x00" in p for p in base) or (base and base[0].startswith(".")):
            return  # no key lies below such a prefix
        try:
            prefix.encode()
        except UnicodeEncodeError:
            return  # nor below one that is not UTF-8
        base_names = [_escape(p) for p in base] if self._escaped else base
        try:
            base_fds = self._open_dirs(b, (), base_names, create=False)
        except _Missing:
            return
        top = base_fds[-1] if base_fds else b.root
        base_key = "".join(p + "/" for p in base)
        # One frame per directory being visited: descriptor, name, parent's descriptor, and
        # the entries still to visit, last key first.
        stack: builtins.list[tuple[int, str, int, builtins.list[tuple[str, str, bool]]]] = [
            (top, "", -1, self._entries(top, base_key, prefix))
        ]
        try:
            while stack:
                fd, name, parent, entries = stack[-1]
                if not entries:
                    stack.pop()
                    if fd != top:
                        if prune:
                            _fsync_dir(fd)
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
                b.dirty[top] = TREE if base_fds else ROOT
                for i in range(len(base_fds) - 1, -1, -1):
                    try:
                        os.rmdir(base_names[i], dir_fd=base_fds[i - 1] if i else b.root)
                    except OSError:
                        break
        finally:
            _close_all(fd for fd, *_ in stack if fd != top)

    def _entries(self, fd: int, dir_key: str, prefix: str) -> builtins.list[tuple[str, str, bool]]:
        """``(key, name, is a directory)`` of the entries worth visiting, last key first."""
        entries: builtins.list[tuple[str, str, bool]] = []
        try:
            scanned = builtins.list(os.scandir(fd))
        except OSError:
            return entries
        decode = self._decode
        for entry in scanned:
            name = entry.name
            if not dir_key and name.startswith("."):
                continue  # the store's own files (.lock, .tmp, .keys); no key starts with '.'
            segment = name if name.isascii() and not self._escaped else decode(name)  # ASCII: as written
            if segment is None:
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = not is_dir and entry.is_file(follow_symlinks=False)
            except OSError:
                continue
            if is_file:
                key = dir_key + segment
                if not key.startswith(prefix):
                    continue
            elif is_dir:
                key = f"{dir_key}{segment}/"
                if len(key.encode()) > _MAX_KEY_BYTES or not (key.startswith(prefix) or prefix.startswith(key)):
                    continue
            else:
                continue  # a symbolic link, FIFO, socket or device is not an object
            entries.append((key, name, is_dir))
        entries.sort(reverse=True)
        return entries

    def list(self, prefix: str, *, limit: int | None = None) -> Iterator[ObjectInfo]:
        """Each file's fixed header only (:func:`_listing_info`): never a body, nor its metadata."""
        found: builtins.list[ObjectInfo] = []
        with self._verb("list") as b:
            with contextlib.closing(self._walk(b, prefix)) as walk:
                for key, parent, name in walk:
                    if limit is not None and len(found) >= limit:
                        break
                    info = _listing_info(parent, name, key)
                    if info is not None:
                        found.append(info)
        yield from found

    def purge(self, prefix: str, *, suffix: str = "") -> int:
        """Every matching file is removed, corrupt ones included, and every version and
        delete marker kept of the matching keys (symbolic links and other non-files are left
        where they are, and never followed). The count is of objects, versions and markers."""
        check_purge_prefix(prefix)
        removed = 0
        stamps: dict[str, int] = {}  # of the current files removed: kept entries as late are leftovers
        with self._verb("delete") as b:
            with self._locked(b):
                try:
                    with contextlib.closing(self._walk(b, prefix, prune=True)) as walk:
                        for key, parent, name in walk:
                            if key.endswith(suffix):
                                with contextlib.suppress(FileNotFoundError):
                                    stamps[key] = _stamp(os.stat(name, dir_fd=parent, follow_symlinks=False))
                                    os.unlink(name, dir_fd=parent)  # unlink never follows a link
                                    removed += 1
                    with contextlib.closing(self._walk_kept(b, prefix, prune=True)) as kept:
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
                finally:
                    b.forget(())  # directories were removed
        return removed

    def delete(self, keys: Sequence[str], *, if_match: Mapping[str, str] | None = None) -> None:
        """Versioned, a delete keeps the current version and adds a delete marker over it."""
        changed = []
        emptied: dict[tuple[str, ...], None] = {}  # the directories files were deleted from
        with self._verb("delete") as b:
            with self._locked(b):
                for key in keys:
                    names = self._names(key)
                    try:
                        dirs = self._open_dirs(b, (), names[:-1], create=False)
                    except _Missing:
                        continue
                    parents = [b.root, *dirs]
                    if self._check_folding and _folds_onto_another(parents[-1], names[-1]):
                        continue  # another key's file on a case-insensitive disk: none of this key
                    expected = if_match.get(key) if if_match else None
                    if self.versioned or expected is not None:  # the file, opened once for both
                        opened = self._open_file(parents[-1], names[-1])
                        if opened is None:
                            continue  # not an object
                        try:
                            current = _current_of(*opened)
                        finally:
                            os.close(opened[0])
                        if expected is not None and (current.digest is None or _etag(current.digest) != expected):
                            changed.append(key)  # a corrupt file matches no ETag
                            continue
                        if self.versioned:
                            self._retire(b, key, parents[-1], names[-1], current)
                    elif not self._is_file(parents[-1], names[-1]):
                        continue
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(names[-1], dir_fd=parents[-1])
                    b.dirty[parents[-1]] = TREE if dirs else ROOT
                    emptied[tuple(names[:-1])] = None
                    self._relieve(b)  # between keys no descriptor of the batch is in use
                for path in sorted(emptied, key=len, reverse=True):  # once per directory, deepest first
                    try:
                        dirs = self._open_dirs(b, (), path, create=False)
                    except _Missing:
                        continue
                    self._pruned(b, (), [b.root, *dirs], [*path, ""])
        if changed:
            raise PreconditionFailedError(f"Error: {len(changed)} objects changed and were not deleted")

    def _pruned(self, b: _Batch, base: tuple[str, ...], parents: Sequence[int], names: Sequence[str]) -> None:
        """:func:`_prune_dirs`, and the batch forgets the directories removed."""
        kept = _prune_dirs(parents, names)
        if kept < len(names) - 1:
            b.forget((*base, *names[: kept + 1]))
            b.dirty[parents[kept]] = AREA if base else TREE if kept else ROOT

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

    def _area(self, b: _Batch, *, create: bool) -> int | None:
        """The version area's descriptor (the batch's), or None (see :meth:`_open_area`)."""
        try:
            return self._dir(b, (_VERSIONS,), create=create)
        except _Missing:
            return None

    def _container(self, b: _Batch, key: str, *, create: bool) -> int | None:
        """The directory of ``key``'s kept versions: its descriptor (the batch's), or None if
        there is none (and not ``create``)."""
        try:
            return self._dir(b, (_VERSIONS, *self._names(key)), create=create)
        except _Missing:
            return None

    def _refuse_folded_history(self, b: _Batch, key: str) -> None:
        """With plain names on a case-insensitive file system: refuse a key whose directory
        in the version area would be a different key's (one differing only in case)."""
        area = self._area(b, create=False)
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

    def _newest_stamp(self, b: _Batch, key: str, current: _Current | None) -> int:
        """The latest time stamp among ``key``'s current file and kept entries (-1: none)."""
        kept = _kept_entries(self._container(b, key, create=False))
        return max(current.stamp if current is not None else -1, kept[0].stamp if kept else -1)

    def _keep(self, b: _Batch, key: str, parent: int, name: str, current: _Current) -> None:
        """Hard-link the current file ``parent/name`` into ``key``'s container, named by its
        stamp, digest and size (under the lock). Leftovers as late as it are removed first."""
        path = (_VERSIONS, *self._names(key))
        try:
            container = self._dir(b, path, create=True)
            new = path in b.made
            b.made.discard(path)
            _link_version(parent, name, container, current, new=new)
            b.dirty[container] = AREA
        except BaseException:
            with contextlib.suppress(OSError):
                self._prune_kept(b, self._names(key))  # the directories made for it
            raise

    def _retire(self, b: _Batch, key: str, parent: int, name: str, current: _Current) -> None:
        """Before the current file of ``key`` is unlinked: keep it, and add a delete marker
        stamped later (not for a file that is no object, unless versions of it are kept)."""
        if current.digest is not None:
            self._keep(b, key, parent, name, current)  # the newest entry now: stamped as the file
            container, newest = self._container(b, key, create=False), current.stamp
        else:
            container = self._container(b, key, create=False)
            kept = _kept_entries(container)
            if container is None or not kept:
                return
            newest = max(current.stamp, kept[0].stamp)
        assert container is not None
        _add_marker(container, newest)
        b.dirty[container] = AREA

    def _history(self, b: _Batch, key: str) -> tuple[_Current | None, _Entries, _Entries]:
        """``key``'s current object (None if there is none, or it is corrupt), its kept
        entries newest first, and those hidden by the current file (leftovers)."""
        current = self._current(b, key)
        if current is not None and current.digest is None:
            current = None
        kept = _kept_entries(self._container(b, key, create=False))
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
        with self._verb("list") as b:
            with self._locked(b, shared=True):
                kept: dict[str, _Entries] = {}
                with contextlib.closing(self._walk_kept(b, prefix)) as kept_walk:
                    for key, _, names in kept_walk:
                        kept[key] = sorted(
                            (e for n in names if (e := _parse_entry(n)) is not None), key=lambda e: e.name
                        )
                only_kept = sorted(kept)  # keys with kept entries, merged in key order with the current files
                next_kept = 0
                with contextlib.closing(self._walk(b, prefix)) as walk:
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
        with self._verb("read") as b:
            with self._locked(b, shared=True):
                current, visible, _ = self._history(b, key)
                if current is not None and current.version_id == version_id:
                    with self._object(b, key) as found:
                        if found is None:
                            return None
                        fd, _, header = found
                        return _read_object(key, fd, header, current.stamp, max_bytes=max_bytes, body=body)
                entry = next((e for e in visible if e.version_id == version_id and not e.is_marker), None)
                if entry is None:
                    return None
                container = self._container(b, key, create=False)
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
        with self._verb("delete") as b:
            with self._locked(b):
                current, visible, hidden = self._history(b, key)
                container = self._container(b, key, create=False)
                if current is not None and current.version_id == version_id:
                    for leftover in hidden if container is not None else []:
                        os.unlink(leftover.name, dir_fd=container)
                    previous = visible[0] if visible else None
                    if container is not None and previous is not None and not previous.is_marker:
                        self._restore(b, names, container, previous)
                    else:
                        self._unlink_current(b, names)
                else:
                    doomed = next((e for e in visible + hidden if e.version_id == version_id), None)
                    if doomed is None or container is None:
                        return
                    if current is None and doomed is visible[0] and len(visible) > 1 and not visible[1].is_marker:
                        self._restore(b, names, container, visible[1])  # the marker on top is going
                    os.unlink(doomed.name, dir_fd=container)
                if container is not None:
                    b.dirty[container] = AREA
                self._prune_kept(b, names)

    def _restore(self, b: _Batch, names: Sequence[str], container: int, entry: _Entry) -> None:
        """Rename the kept version ``entry`` back into place as the current file (it hides
        the entries stamped later, until they are removed)."""
        parent = self._parent(b, names, create=True)
        if self._check_folding and _folds_onto_another(parent, names[-1]):
            raise StorageError(
                "Error: a stored name differs from this key's only in case; "
                "this case-insensitive file system cannot hold both"
            )
        if _clear_the_way(parent, names[-1]):
            b.forget(tuple(names))
        os.replace(entry.name, names[-1], src_dir_fd=container, dst_dir_fd=parent)
        b.dirty[container] = AREA
        b.dirty[parent] = TREE if len(names) > 1 else ROOT

    def _unlink_current(self, b: _Batch, names: Sequence[str]) -> None:
        try:
            dirs = self._open_dirs(b, (), names[:-1], create=False)
        except _Missing:
            return
        parents = [b.root, *dirs]
        if self._is_file(parents[-1], names[-1]):
            os.unlink(names[-1], dir_fd=parents[-1])
            b.dirty[parents[-1]] = TREE if dirs else ROOT
            self._pruned(b, (), parents, names)

    def _prune_kept(self, b: _Batch, names: Sequence[str]) -> None:
        """Remove ``names``' directories in the version area left empty, deepest first."""
        area = self._area(b, create=False)
        if area is None:
            return
        try:
            dirs = self._open_dirs(b, (_VERSIONS,), names, create=False)
        except _Missing:
            return
        self._pruned(b, (_VERSIONS,), [area, *dirs], [*names, ""])

    def _walk_kept(
        self, b: _Batch, prefix: str, *, prune: bool = False
    ) -> Generator[tuple[str, int, _Names], None, None]:
        """``(key, directory descriptor, file names)`` of the version area's directory of
        every key starting with ``prefix`` that has files there (in no particular order);
        symbolic links and other non-files are skipped and never followed. ``prune`` (a
        purge): sync each directory left, and remove those found empty on the way out."""
        base = prefix.split("/")[:-1]
        if any(p in ("", ".", "..") or "\x00" in p for p in base) or (base and base[0].startswith(".")):
            return
        try:
            prefix.encode()
        except UnicodeEncodeError:
            return
        area = self._area(b, create=False)
        if area is None:
            return
        base_names = [_escape(p) for p in base] if self._escaped else base
        try:
            base_fds = self._open_dirs(b, (_VERSIONS,), base_names, create=False)
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
                            _fsync_dir(fd)
                            with contextlib.suppress(OSError):
                                os.rmdir(name, dir_fd=parent)
                        os.close(fd)
                    continue
                key, entry = children.pop()
                try:
                    child = os.open(entry, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue
                stack.append((child, entry, fd, self._kept_dirs(child, key, prefix)))
                if key.startswith(prefix):
                    try:
                        files = [f.name for f in os.scandir(child) if f.is_file(follow_symlinks=False)]
                    except OSError:
                        files = []
                    if files:
                        yield key, child, files
            if prune:
                b.dirty[top] = AREA
                for i in range(len(base_fds) - 1, -1, -1):
                    try:
                        os.rmdir(base_names[i], dir_fd=base_fds[i - 1] if i else area)
                    except OSError:
                        break
        finally:
            _close_all(fd for fd, *_ in stack if fd != top)

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
