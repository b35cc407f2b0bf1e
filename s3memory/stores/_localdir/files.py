"""The local store's files and directories as it opens, makes and removes them.

Other local users and planted files are distrusted:

- the root must be a directory owned by the current user and not writable by group or
  others (``ConfigurationError``), checked again by every batch (a call outside one is a
  batch of its own);
- every name below the root is opened relative to its parent's descriptor with
  ``O_NOFOLLOW`` (or, for directories several names down, in one ``openat2`` call that
  follows no link at any step: :func:`open_dir_beneath`): a symbolic link, FIFO or device
  there is not an object (missing for ``get``/``head``, skipped by ``list``, left alone by
  ``delete``/``purge``) and is never followed, written through or deleted through; the
  same holds in the version area (a link at ``.versions`` itself is refused by writers and
  read as no history);
- a file that is not a well-formed object is corrupt (``format`` says how each call
  treats one).

This module holds the open flags, the check on a directory (:func:`unsafe_directory`)
and the steps on one name that every other module takes: open a regular file or a
directory some names down, write one (under a temporary name), clear an empty directory out
of a key's way, remove the directories a removal left empty.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import stat
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..._errors import S3MemoryError, StorageError

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a planted FIFO must not hang; it changes nothing for regular files.
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
NOT_A_DIRECTORY = (errno.ENOTDIR, errno.ELOOP)  # a file or a symbolic link in the way
NO_HARD_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.EXDEV)


def unsafe_directory(st: os.stat_result, path: Path | str) -> str | None:
    """Why a directory may not hold the store (others could plant or swap files), or None."""
    if st.st_uid != os.geteuid():
        return f"the local store directory {path} is owned by another user (uid {st.st_uid}); use a directory you own"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"the local store directory {path} is writable by other users; run: chmod go-w {path}"
    return None


def storage_error(action: str, exc: OSError) -> StorageError:
    """The StorageError an OS error raised while the local store did ``action`` is told as."""
    return StorageError(f"Error: the local store could not {action}: {exc.strerror or exc}")


@contextlib.contextmanager
def mapped(action: str) -> Iterator[None]:
    """OS errors as StorageError (s3memory's own errors pass unchanged)."""
    try:
        yield
    except S3MemoryError:
        raise
    except OSError as exc:
        raise storage_error(action, exc) from exc


def close_all(fds: Iterable[int]) -> None:
    for fd in fds:
        os.close(fd)


def make_private_dirs(path: Path) -> None:
    """Create ``path`` and its missing parents, each 0700."""
    missing = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o700)


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_parts(fd: int, parts: Sequence[bytes]) -> None:
    """Write ``parts`` in order: at once (``writev``), the rest of a short write after."""
    done = os.writev(fd, parts)
    for part in parts:
        if done >= len(part):
            done -= len(part)
            continue
        write_all(fd, memoryview(part)[done:])
        done = 0


class _TemporaryNames:
    """Names for temporary files, unique across processes: a random prefix (drawn anew in
    a forked child) and a counter, without a random draw each."""

    def __init__(self) -> None:
        self.draw()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self.draw)

    def draw(self) -> None:
        self.prefix = os.urandom(8).hex()
        self.counter = itertools.count()

    def __call__(self) -> str:
        return f"{self.prefix}{next(self.counter):016x}"


temporary_name = _TemporaryNames()


def open_file(parent: int, name: str) -> tuple[int, os.stat_result] | None:
    """The regular file ``name`` in ``parent``, opened without following a link; None
    for anything else (absent, a symbolic link, a directory, a FIFO...)."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR, errno.ENXIO, errno.EISDIR):
            return None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None
    return fd, st


# -- a directory some names below another, opened in one call -------------------------------
# Linux's openat2 (5.6 and later), with RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH: no step
# follows a symbolic link, as a walk opening each name with O_NOFOLLOW does, nor leaves the
# directory it starts from. Its number is 437 wherever Linux numbers new calls alike.
_OPENAT2 = 437
_OPENAT2_MACHINES = ("x86_64", "amd64", "aarch64", "arm64", "armv7l", "armv8l", "riscv64", "ppc64le", "s390x")
_RESOLVE_NO_SYMLINKS_BENEATH = 0x04 | 0x08
_NOT_THERE = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EXDEV)  # missing, no directory, a link
_UNAVAILABLE = (errno.ENOSYS, errno.EPERM, errno.EINVAL, errno.E2BIG)  # an older kernel, or a filter
_openat2: Any = None  # (call, its argument for DIR_FLAGS) once set up; False where there is none


def can_open_beneath() -> bool:
    """Whether :func:`open_dir_beneath` can be called (Linux's openat2 was found)."""
    global _openat2
    if _openat2 is None:
        _openat2 = False
        if sys.platform.startswith("linux") and os.uname().machine in _OPENAT2_MACHINES:
            try:
                import ctypes

                class OpenHow(ctypes.Structure):
                    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]

                call = ctypes.CDLL(None, use_errno=True).syscall
                call.restype = ctypes.c_long
                # openat2(int dirfd, const char *path, struct open_how *how, size_t size)
                call.argtypes = (ctypes.c_long, ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(OpenHow), ctypes.c_size_t)
                how = OpenHow(DIR_FLAGS, 0, _RESOLVE_NO_SYMLINKS_BENEATH)
                _openat2 = (call, ctypes.byref(how), ctypes.sizeof(how), ctypes.get_errno, how)
            except (OSError, AttributeError):
                pass
    return _openat2 is not False


def open_dir_beneath(dir_fd: int, names: Sequence[str]) -> int | None:
    """The directory ``dir_fd/names[0]/names[1]/...`` opened in one call, as opening each
    name from the last with ``DIR_FLAGS`` would: None where a name on the way is missing,
    is no directory or is a symbolic link. NotImplementedError where the kernel refuses the
    call (it is not asked again: open name by name)."""
    global _openat2
    call, how, size, get_errno, _ = _openat2
    fd = call(_OPENAT2, dir_fd, os.fsencode("/".join(names)), how, size)
    if fd >= 0:
        return int(fd)
    code = get_errno()
    if code in _NOT_THERE:
        return None
    if code in _UNAVAILABLE:
        _openat2 = False
        raise NotImplementedError
    raise OSError(code, os.strerror(code))


def is_file(parent: int, name: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def clear_the_way(parent: int, name: str) -> bool:
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


def prune_dirs(parents: Sequence[int], names: Sequence[str]) -> int:
    """Remove the directories of ``names[:-1]`` left empty, deepest first; ``parents[i]``
    is the descriptor of the directory holding ``names[i]``. The number of names kept
    (``names[i]`` for ``i`` from it on were removed; ``len(names) - 1``: none)."""
    for i in range(len(names) - 2, -1, -1):
        try:
            os.rmdir(names[i], dir_fd=parents[i])
        except OSError:
            return i + 1
    return 0
