"""The local master key file: read, or created on first use, only as the user's own.

:func:`load_or_create_master_key` reads the base64 master key of the embedded default
(:class:`~s3memory._config.Settings` says where it is), creating it 0600 on first use;
:func:`private_directory` creates a data directory 0700. A file or directory that another
user owns or may write to (or, for the key, read) is refused with ``ConfigurationError``
and the fix, never trusted, and the key file is never read through a symbolic link.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import errno
import os
import stat
import uuid
from pathlib import Path

from .._errors import ConfigurationError
from .master import generate_master_key


def private_directory(path: Path, *, what: str) -> None:
    """Create ``path`` and its missing parents (0700); refuse it (``ConfigurationError``) if
    another user owns it or group or others may write to it, who could plant or swap files."""
    missing = []
    ancestor = path
    while not os.path.lexists(ancestor) and ancestor != ancestor.parent:
        missing.append(ancestor)
        ancestor = ancestor.parent
    try:
        for directory in reversed(missing):
            with contextlib.suppress(FileExistsError):
                os.mkdir(directory, 0o700)
        st = os.stat(path)
    except OSError as exc:
        raise ConfigurationError(f"the {what} {path} cannot be created: {exc.strerror or exc}") from exc
    _check_directory(st, path, what=what)


def _check_directory(st: os.stat_result, path: Path, *, what: str, root_may_own: bool = False) -> None:
    if not stat.S_ISDIR(st.st_mode):
        raise ConfigurationError(f"the {what} {path} is not a directory")
    if st.st_uid != os.geteuid() and not (root_may_own and st.st_uid == 0):
        raise ConfigurationError(
            f"the {what} {path} is owned by another user (uid {st.st_uid}); use a directory you own"
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ConfigurationError(f"the {what} {path} is writable by other users; run: chmod go-w {path}")


_KEY_FILE_MAX_BYTES = 4096  # 44 characters of base64 and a newline; more is not a key


def load_or_create_master_key(path: Path) -> bytes:
    """Read the base64 master key at ``path``, creating it (mode 0600) if it is missing.

    The file is trusted only as the current user's private file in a directory no one else
    may write to: ``ConfigurationError`` (with the fix) if the file is a symbolic link or not
    a regular file, is owned by another user, or is readable or writable by group or others,
    or if its directory is writable by them or owned by another user (root excepted).
    Creation is atomic: the key is written to a new file (``O_EXCL|O_NOFOLLOW``, 0600) and
    linked into place only if no key is there yet, so concurrent first uses agree on one key.
    """
    path = Path(path)
    directory = path.parent
    if not os.path.lexists(directory):
        private_directory(directory, what="directory of the master key file")
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigurationError(f"the master key's directory {directory} cannot be opened: {exc.strerror}") from exc
    try:
        _check_directory(os.fstat(dir_fd), directory, what="directory of the master key file", root_may_own=True)
        fd = _open_key_file(dir_fd, path)
        if fd is None:
            _create_key_file(dir_fd, path)
            fd = _open_key_file(dir_fd, path)
        if fd is None:
            raise ConfigurationError(f"the master key file {path} vanished while it was created")
        try:
            text = _read_key_file(fd, path)
        finally:
            os.close(fd)
    finally:
        os.close(dir_fd)
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigurationError(f"the master key file {path} is not base64") from None
    if len(key) != 32:
        raise ConfigurationError(f"the master key file {path} must hold 32 bytes (base64)")
    return key


def _open_key_file(dir_fd: int, path: Path) -> int | None:
    """The key file opened for reading without following a link; None if it is missing."""
    try:
        return os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfigurationError(
                f"the master key file {path} is a symbolic link; s3memory reads only a regular file: "
                "replace the link with the key file itself"
            ) from None
        raise ConfigurationError(f"the master key file {path} cannot be read: {exc.strerror}") from exc


def _read_key_file(fd: int, path: Path) -> str:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise ConfigurationError(f"the master key file {path} is not a regular file")
    if st.st_uid != os.geteuid():
        raise ConfigurationError(
            f"the master key file {path} is owned by another user (uid {st.st_uid}); "
            "use a key file you own (chown it, or remove it to create a new key)"
        )
    if st.st_mode & 0o077:
        raise ConfigurationError(
            f"the master key file {path} is readable or writable by other users; run: chmod 600 {path}"
        )
    try:
        data = os.read(fd, _KEY_FILE_MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigurationError(f"the master key file {path} cannot be read: {exc.strerror}") from exc
    if len(data) > _KEY_FILE_MAX_BYTES:
        raise ConfigurationError(f"the master key file {path} must hold 32 bytes (base64)")
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        raise ConfigurationError(f"the master key file {path} is not base64") from None


def _create_key_file(dir_fd: int, path: Path) -> None:
    tmp = f".{path.name}.{uuid.uuid4().hex}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(base64.b64encode(generate_master_key()).decode() + "\n")
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except FileExistsError:
                pass  # another process created it first: its key is the key
            except OSError:  # no hard links on this file system: create in place
                with contextlib.suppress(FileExistsError):
                    fd = os.open(path.name, flags, 0o600, dir_fd=dir_fd)
                    with os.fdopen(fd, "w") as f:
                        f.write(base64.b64encode(generate_master_key()).decode() + "\n")
        finally:
            os.unlink(tmp, dir_fd=dir_fd)
    except OSError as exc:
        raise ConfigurationError(f"the master key file {path} cannot be created: {exc.strerror}") from exc
