"""The local store's batches: its root checked, its lock, its directories, and its syncs.

Batches. Every call runs in a batch: the calls made inside :meth:`LocalDirStore.batch` on
one thread (a local store's round trip runs its calls there, one after the other), or
else a batch of its own. A batch checks the root once, opens each directory once, and
syncs the directories its calls changed once, when it ends (the round trip answers then).
The lock is held by one call at a time, never between calls (code run between a round
trip's calls may wait for a thread that waits for the lock), so each write is checked,
synced and renamed into place within its call: its result is final when it returns. What
the batch opened before a call took the lock is looked at again (``look_again``).
:meth:`LocalDirStore.copy_many` makes many copies in one call, and syncs their files at
once. Batches nest, and are shared by the stores opened on one root in one thread.

:class:`Batch` is what one thread's calls on one root share (the lock, the directories
opened, the writes deferred, the directories to sync) and how it syncs them;
:class:`Tree` is one store's way into it: the root checked, the lock taken, the
directories and a key's file opened by descriptor (``files`` says how names are opened).

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
   the rest, which then cost a cache flush each);
4. not rule 1 for a new file under a key no object had and none will have
   (``put_unique``: a history record, whose sealed name is unique) where the batch ends
   with a ``syncfs``: that sync makes its data durable, with the directories, before the
   batch answers. A crash before then may leave its name with no data (an empty or short
   file), which loses nothing acknowledged (it replaced nothing, and its change was not
   answered) and is no well-formed object (listings skip it, purge removes it; history
   tolerates a version no record tells of). Without ``syncfs`` (a directory's fsync does
   not write a file's data) rule 1 holds. So a write round trip on Linux waits for two
   syncs: its object's file, then the ``syncfs``.

On Linux, a step with two or more files or directories to sync, or a file placed unsynced
(rule 4), is one ``syncfs`` of the store's file system instead (measured cheaper from two
on: one journal commit instead of one per directory); it also writes other programs'
unwritten data on that file system, whose amount bounds what it costs. Not synced,
because a crash there loses nothing: the temporary name's removal from ``.tmp`` (a stray
file there is never read), the removal of an emptied directory (an empty directory is no
object), a delete marker's file (its name says all it holds: it is made in place, empty),
and a listing index (``index``: a cache checked against its directory). Between a write's call and the end of
its batch, another process may read the write before its directory is on disk (as it could
read it before its file was, before this). A crash before the batch answered may leave
temporary files in ``.tmp`` and each key old or new (``tests/stores/localdir/test_crash.py`` kills
the store between any two steps).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..._errors import ConfigurationError, S3MemoryError, StorageError
from .files import (
    DIR_FLAGS,
    NOT_A_DIRECTORY,
    can_open_beneath,
    close_all,
    make_private_dirs,
    open_dir_beneath,
    open_file,
    prune_dirs,
    storage_error,
    unsafe_directory,
)
from .format import Current, Header, corrupt, current_of, parse_header
from .names import KeyNames, folded_error

VERSIONS = ".versions"  # the version area: {root}/.versions/{key}/ holds the key's older versions
_MAX_DIRS = 128  # directories a batch keeps open before it closes them between calls
_THIS_THREAD = threading.local()  # .batches: this thread's open batch of each store root, by (st_dev, st_ino)

# -- durability ------------------------------------------------------------------------------
# Measured on ext4 (2 shared cores, virtio disk): fsync of a small new file 0.22-0.29 ms,
# whether fsync or fdatasync; after the writeback of a batch of files was started
# (posix_fadvise), fsync of each 0.09 ms (the first commits the journal for all); one
# syncfs for 1,000 files 20-28 ms, 0.02-0.03 ms a file. A directory whose change another
# fsync already committed costs 0.04 ms to fsync.
_SYNCFS_FROM = 2  # files or directories to make durable at once: from this many, one syncfs


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


def syncfs_available() -> bool:
    """Whether :func:`_syncfs` can sync (Linux's ``syncfs`` was found)."""
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
    return _syncfs_call is not False


def _syncfs(fd: int) -> bool:
    """Make everything written to the file system of ``fd`` durable (Linux's ``syncfs``);
    False where it is not available (then fsync each file and directory instead)."""
    if not syncfs_available():
        return False
    if _syncfs_call(fd) != 0:  # type: ignore[operator]
        import ctypes

        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return True


def fsync_dir(fd: int) -> None:
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise  # EINVAL and the like: a file system that cannot sync a directory


# Directories made durable first: the version area's, then the root, then the keys'; see
# the module's docstring for why the order matters.
AREA, ROOT, TREE = 0, 1, 2


class Missing(Exception):
    """Internal: a name on the way to a key is absent or is not a directory."""


class Batch:
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
        self.unsynced: list[tuple[int, str]] = []  # (directory, name) of new files placed unsynced (rule 4)
        self.made: set[tuple[str, ...]] = set()  # directories this batch made, still empty
        self.missing: set[tuple[str, ...]] = set()  # directories found missing (until made)
        self.unchecked: set[tuple[str, ...]] = set()  # opened before the lock was last taken: check once

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
        unsynced, self.unsynced = self.unsynced, []
        try:
            if (unsynced or len(dirty) >= _SYNCFS_FROM) and _syncfs(self.root):
                return  # one syncfs: every directory, and the data of every file
            for parent, name in unsynced:  # no syncfs after all: each file, before the directories
                opened = open_file(parent, name)
                if opened is not None:
                    try:
                        os.fsync(opened[0])
                    finally:
                        os.close(opened[0])
            for fd, _ in dirty:
                fsync_dir(fd)
        finally:
            retired, self.retired = self.retired, []
            close_all(retired)


class Tree:
    """One store's directory tree as its calls reach it: this thread's batch on its root
    (joined, or begun and finished), the root checked to be the directory the store was
    opened on, the lock, and the directories and key files opened by descriptor, each from
    its parent's with ``O_NOFOLLOW`` (or from a directory further up in one call that
    follows no link: ``files.open_dir_beneath``).

    Raises:
        ConfigurationError: ``path`` is not a directory that can be created, or is owned by
            another user, or is writable by group or others.
    """

    def __init__(self, path: Path, names: KeyNames) -> None:
        self.path = path
        self.names = names
        try:
            make_private_dirs(path)
            fd = os.open(path, DIR_FLAGS)
        except OSError as exc:
            raise ConfigurationError(
                f"the local store directory {path} cannot be opened: {exc.strerror or exc}"
            ) from exc
        try:
            st = os.fstat(fd)
            problem = unsafe_directory(st, path)
            if problem:
                raise ConfigurationError(problem)
            self.id = (st.st_dev, st.st_ino)
        finally:
            os.close(fd)

    # -- batches ------------------------------------------------------------------------------
    def join(self) -> Batch:
        """This thread's batch on the root, joined, or begun; each join is left by :meth:`leave`."""
        batches: dict[tuple[int, int], Batch] = _THIS_THREAD.__dict__.setdefault("batches", {})
        b = batches.get(self.id)
        if b is None:
            b = Batch(self._open_root())
            batches[self.id] = b
        b.depth += 1
        return b

    def leave(self, b: Batch, *, failed: bool) -> None:
        """Leave a join; the batch begun by it is finished (after a failure, whatever
        finishing raises is not what is raised)."""
        b.depth -= 1
        if b.depth:
            return
        del _THIS_THREAD.batches[self.id]
        if not failed:
            self._finish(b)
            return
        with contextlib.suppress(Exception):  # what failed is what is raised
            self._finish(b)

    @contextlib.contextmanager
    def joined(self) -> Iterator[Batch]:
        """This thread's batch on the root, joined, or begun and, on leaving, finished."""
        b = self.join()
        try:
            yield b
        except BaseException:
            self.leave(b, failed=True)
            raise
        self.leave(b, failed=False)

    def verb(self, action: str) -> Verb:
        """One call of the interface, in this thread's batch (or in a batch of its own)."""
        return Verb(self, action)

    def _open_root(self) -> int:
        """The root's descriptor, checked to be the directory the store was opened on and
        still private (a swapped or loosened root is refused). Opened per batch, not kept:
        a store holds no descriptor between calls."""
        try:
            fd = os.open(self.path, DIR_FLAGS)
        except OSError as exc:
            raise StorageError(
                f"Error: the local store directory {self.path} cannot be opened: {exc.strerror}"
            ) from exc
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != self.id:
                raise StorageError(f"Error: the local store directory {self.path} was replaced; open the store again")
            problem = unsafe_directory(st, self.path)
            if problem:
                raise StorageError(f"Error: {problem}")
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _finish(self, b: Batch) -> None:
        """The end of a batch: the changed directories synced, every descriptor closed."""
        try:
            b.sync_dirs()
        finally:
            close_all([*b.dirs.values(), *b.retired, *(fd for fd in (b.tmp, b.lock) if fd is not None), b.root])

    def relieve(self, b: Batch) -> None:
        """Between calls (no descriptor of the batch is in use): keep the open directories
        within bounds, for descriptors are a limited resource."""
        if len(b.dirs) + len(b.retired) >= _MAX_DIRS:
            b.sync_dirs()
            close_all(b.dirs.values())
            b.dirs.clear()
            b.unchecked.clear()

    # -- the store's own entries: .tmp and the lock --------------------------------------------
    def _own(self, root: int, name: str, flags: int) -> int:
        """One of the store's own entries (``.tmp``, ``.lock``), never through a link."""
        try:
            fd = os.open(name, flags, 0o600, dir_fd=root)
        except OSError as exc:
            if exc.errno not in (*NOT_A_DIRECTORY, errno.EISDIR):
                raise
        else:
            if flags & os.O_DIRECTORY or stat.S_ISREG(os.fstat(fd).st_mode):
                return fd
            os.close(fd)
        raise StorageError(f"Error: {self.path / name} is not what the local store made there; remove it")

    def tmp(self, b: Batch) -> int:
        if b.tmp is None:
            b.tmp = self._own(b.root, ".tmp", DIR_FLAGS)
        return b.tmp

    def locked(self, b: Batch, *, shared: bool = False) -> Locked:
        """The store's lock, for one call (or a flush): exclusive for writers; shared for
        readers of history, which must not see a version between the current file and the
        version area. Never held between calls: code between them (a round trip's other
        calls) may wait for a thread that waits for this lock."""
        return Locked(self, b, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)

    def lock_file(self, b: Batch) -> int:
        if b.lock is None:
            b.lock = self._own(b.root, ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        return b.lock

    @staticmethod
    def look_again(b: Batch) -> None:
        """Once the lock is taken: forget what others may have changed since the batch last
        held it (one found missing may have been made), and look again at each directory
        opened before it is next used (it may have been removed: :meth:`dir`)."""
        b.missing.clear()
        b.made.clear()
        b.unchecked.update(b.dirs)

    # -- directories ---------------------------------------------------------------------------
    def dir(self, b: Batch, path: tuple[str, ...], *, create: bool) -> int:
        """The descriptor of the directory ``root/path[0]/path[1]...``, from the batch's or
        opened from its parent's with ``O_NOFOLLOW``, or, where the batch holds no parent,
        in one call from the nearest directory above that it holds (:meth:`_beneath`), and
        kept in the batch (never close it). A missing name, or one that is not a directory,
        raises ``Missing``, or with ``create`` is made (0700) or refused."""
        found = b.dirs.get(path)
        if found is not None:
            if not b.unchecked or path not in b.unchecked:
                return found
            b.unchecked.discard(path)
            if os.fstat(found).st_nlink:
                return found
            b.forget(path)  # removed since the batch opened it: open it anew
        if not path:
            return b.root
        if not create and path in b.missing:
            raise Missing
        if (
            len(path) > 1
            and path[:-1] not in b.dirs
            and not (create and (path in b.missing or path[:-1] in b.made))
            and not self.names.check_folding
            and can_open_beneath()
        ):
            try:
                fd = self._beneath(b, path)
            except NotImplementedError:
                pass  # name by name, below
            else:
                if fd is not None:
                    b.missing.discard(path)
                    b.dirs[path] = fd
                    return fd
                b.missing.add(path)  # somewhere on the way: made name by name below, or Missing
                if not create:
                    raise Missing
        parent = self.dir(b, path[:-1], create=create) if len(path) > 1 else b.root
        try:
            fd = self._open_area(b, create) if path == (VERSIONS,) else self._open_dir(b, parent, path, create)
        except Missing:
            b.missing.add(path)
            raise
        b.missing.discard(path)
        b.dirs[path] = fd
        b.unchecked.discard(path)
        return fd

    def _beneath(self, b: Batch, path: tuple[str, ...]) -> int | None:
        """``path`` opened in one call from the nearest directory above it the batch holds
        (:func:`open_dir_beneath`: no link followed); None where a name on the way is
        missing or no directory. Its parents are not kept: a batch needs few of them."""
        at = len(path) - 2
        while at and path[:at] not in b.dirs:
            at -= 1
        try:
            base = self.dir(b, path[:at], create=False) if at else b.root
        except Missing:
            return None
        return open_dir_beneath(base, path[at:])

    def _open_dir(self, b: Batch, parent: int, path: tuple[str, ...], create: bool) -> int:
        name = path[-1]
        if self.names.folds(parent, name):
            if create:
                raise folded_error()
            raise Missing
        try:
            if create and (path in b.missing or path[:-1] in b.made):
                raise FileNotFoundError  # known to be missing: straight to making it
            return os.open(name, DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise Missing from None
        except OSError as exc:
            if exc.errno not in NOT_A_DIRECTORY:
                raise
            if create:
                raise StorageError("Error: a file or link is in the way of this key in the local store") from None
            raise Missing from None
        try:
            os.mkdir(name, 0o700, dir_fd=parent)
            b.dirty[parent] = AREA if path[0] == VERSIONS else TREE if len(path) > 1 else ROOT
            b.made.add(path)
        except FileExistsError:
            pass
        try:
            return os.open(name, DIR_FLAGS, dir_fd=parent)
        except OSError as exc:
            if exc.errno not in NOT_A_DIRECTORY:
                raise
            raise StorageError("Error: a file or link is in the way of this key in the local store") from None

    def _open_area(self, b: Batch, create: bool) -> int:
        """The version area's descriptor. Without ``create``, ``Missing`` where there is
        none (or something the store did not make is there: no version is kept in it); with
        it, made as needed, and anything else in its place refused."""
        if create:
            try:
                os.mkdir(VERSIONS, 0o700, dir_fd=b.root)
                b.dirty[b.root] = ROOT
            except FileExistsError:
                pass
            return self._own(b.root, VERSIONS, DIR_FLAGS)
        try:
            return os.open(VERSIONS, DIR_FLAGS, dir_fd=b.root)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, *NOT_A_DIRECTORY):
                raise Missing from None
            raise

    def area(self, b: Batch, *, create: bool) -> int | None:
        """The version area's descriptor (the batch's), or None (see :meth:`_open_area`)."""
        try:
            return self.dir(b, (VERSIONS,), create=create)
        except Missing:
            return None

    def open_dirs(self, b: Batch, base: tuple[str, ...], names: Sequence[str], *, create: bool) -> list[int]:
        """Descriptors of ``base + names[:1]``, ``base + names[:2]``... (the batch's: never
        close them); ``Missing`` as :meth:`dir`."""
        fds = []
        path = base
        for name in names:
            path = (*path, name)
            fds.append(self.dir(b, path, create=create))
        return fds

    def parent(self, b: Batch, names: Sequence[str], *, create: bool) -> int:
        """The directory holding the file ``names`` (``Missing`` as :meth:`dir`)."""
        return self.dir(b, tuple(names[:-1]), create=create)

    def pruned(self, b: Batch, base: tuple[str, ...], parents: Sequence[int], names: Sequence[str]) -> None:
        """:func:`prune_dirs`, and the batch forgets the directories removed."""
        kept = prune_dirs(parents, names)
        if kept < len(names) - 1:
            b.forget((*base, *names[: kept + 1]))
            b.dirty[parents[kept]] = AREA if base else TREE if kept else ROOT

    # -- a key's file --------------------------------------------------------------------------
    def open_key(self, b: Batch, key: str) -> tuple[int, os.stat_result] | None:
        """The regular file at ``key``: descriptor (the caller closes it) and stat; None if
        there is none."""
        names = self.names.of(key)
        try:
            parent = self.parent(b, names, create=False)
        except Missing:
            return None
        if self.names.check_folding and self.names.folds(parent, names[-1]):
            return None
        return open_file(parent, names[-1])

    @contextlib.contextmanager
    def opened(self, b: Batch, key: str) -> Iterator[tuple[int, os.stat_result] | None]:
        """The regular file at ``key``: descriptor and stat; None if there is none."""
        opened = self.open_key(b, key)
        if opened is None:
            yield None
            return
        try:
            yield opened
        finally:
            os.close(opened[0])

    @contextlib.contextmanager
    def object(self, b: Batch, key: str) -> Iterator[tuple[int, os.stat_result, Header] | None]:
        """The object file of ``key``: descriptor, stat and header; None if there is none.
        A file that is not a well-formed object raises StorageError."""
        with self.opened(b, key) as opened:
            if opened is None:
                yield None
                return
            fd, st = opened
            header = parse_header(fd, st.st_size)
            if header is None:
                raise corrupt(key)
            yield fd, st, header

    def current(self, b: Batch, key: str) -> Current | None:
        """The current file of ``key`` as history sees it (its digest None if it is not a
        well-formed object); None if there is none."""
        opened = self.open_key(b, key)
        if opened is None:
            return None
        try:
            return current_of(*opened, at_once=True)
        finally:
            os.close(opened[0])


class Verb:
    """A call of the interface (:meth:`Tree.verb`): in this thread's batch on the root, its
    OS errors told as StorageError. A class rather than a generator: every call enters one."""

    __slots__ = ("_action", "_b", "_tree")

    def __init__(self, tree: Tree, action: str) -> None:
        self._tree = tree
        self._action = action

    def __enter__(self) -> Batch:
        try:
            b = self._tree.join()
        except S3MemoryError:
            raise
        except OSError as exc:
            raise storage_error(self._action, exc) from exc
        b.verbs += 1
        self._b = b
        return b

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        b, tree = self._b, self._tree
        b.verbs -= 1
        failed = exc
        if failed is None and b.depth > 1 and b.verbs == 0:
            try:
                tree.relieve(b)
            except BaseException as error:
                failed = error
        if failed is None:
            try:
                tree.leave(b, failed=False)
                return
            except BaseException as error:
                failed = error
        else:
            tree.leave(b, failed=True)
        if isinstance(failed, OSError) and not isinstance(failed, S3MemoryError):
            raise storage_error(self._action, failed) from failed
        if failed is not exc:
            raise failed


class Locked:
    """The store's lock held for one call (:meth:`Tree.locked`); not taken again when the
    call this one runs in holds it."""

    __slots__ = ("_b", "_before", "_tree", "_want")

    def __init__(self, tree: Tree, b: Batch, want: int) -> None:
        self._tree, self._b, self._want = tree, b, want

    def __enter__(self) -> None:
        b = self._b
        if b.held in (self._want, fcntl.LOCK_EX):
            self._before = -1  # held by the call this one runs in
            return
        lock = self._tree.lock_file(b)
        self._before = b.held
        fcntl.flock(lock, self._want)
        b.held = self._want
        Tree.look_again(b)

    def __exit__(self, *exc: object) -> None:
        if self._before < 0:
            return
        b = self._b
        assert b.lock is not None
        fcntl.flock(b.lock, self._before or fcntl.LOCK_UN)
        b.held = self._before
