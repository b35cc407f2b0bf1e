"""The local directory store's files: their format, their names, and how they are opened.

:class:`~s3memory.stores.LocalDirStore` (in ``_localdir``) keeps each object in one file;
this module holds what concerns one file or one name, below the store's root, lock and key
rules: the file format, the escaping of key segments, the open flags, and the checks on a
directory.

The header (format 2) is ``S3MO\\x02``, the metadata's length (4 bytes), the body's length
(8 bytes) and the body's MD5 (16 bytes), so a listing or a HEAD reads the header only,
never a body. Files of format 1 (``S3MO\\x01`` and the metadata's length), written before,
still read: their size comes from the file's size and their ETag from hashing the body.
A file that is not a well-formed object has no header (:func:`_parse_header` answers None).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import stat
import struct
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .._errors import S3MemoryError, StorageError

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
