"""The local store's file format: an object file, and the names and ids of kept versions.

:class:`~s3memory.stores.LocalDirStore` keeps each object in one file; this module holds
what concerns one file or one name of the version area: how a file is laid out, parsed,
read, listed and written, and how kept versions are named and identified.

The header (format 2) is ``S3MO\\x02``, the metadata's length (4 bytes), the body's length
(8 bytes) and the body's MD5 (16 bytes), so a HEAD reads the header only, never a body,
and a listing the 33 bytes of that fixed part only (:func:`listing_info`). Files of
format 1 (``S3MO\\x01`` and the metadata's length), written before, still read: their
size comes from the file's size and their ETag from hashing the body.
A file that is not a well-formed object has no header (:func:`parse_header` answers None).

Planted files are distrusted (see ``files``), and a file that is not a well-formed object
is corrupt: ``get``/``head`` raise ``StorageError``, ``list`` skips it (``list`` reads
only a file's fixed header, so a file whose header holds but whose metadata does not is
listed, as on S3, and is corrupt for every read), ``purge`` removes it; a write or delete
replaces it without keeping it as a version; a kept version that does not match its name
is corrupt for ``get_version``/``head_version``; a file in the version area whose name the
store never gives is ignored (and removed by ``purge``).

Kept versions (the store's version area, ``{root}/.versions``; ``kept`` keeps them) are
object files as above, hard links of what was the current file, under a name that says
everything a listing needs, so that a listing never opens them: :func:`version_name` and
:func:`marker_name`, read back by :func:`parse_entry`. A version's id is its time stamp
(the file's ``mtime_ns``, which the store keeps increasing per key) and its body's MD5, so
the current file, in the format above, has its id too (:func:`_version_id`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import struct
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from ..._errors import ObjectTooLargeError, StorageError
from .._base import NULL_VERSION, ObjectInfo, StoredObject
from .files import READ_FLAGS

_MAGIC_V1 = b"S3MO\x01"
_HEADER_V1 = struct.Struct(">5sI")  # magic, metadata length
_MAGIC_V2 = b"S3MO\x02"
_HEADER_V2 = struct.Struct(">5sIQ16s")  # magic, metadata length, body length, MD5 of the body
_MAX_METADATA_BYTES = 64 * 1024  # S3 allows 2 KB; more is a corrupt or planted file
_CHUNK = 1024 * 1024
_READ_WHOLE = 64 * 1024  # a file this small is read in one call (header, metadata and body)
_HEAD_AT_ONCE = 4096  # a file this small has its header read with its body, in one call


def etag_of(digest: bytes) -> str:
    return '"' + digest.hex() + '"'


# -- reading files --------------------------------------------------------------------------
@dataclass(frozen=True)
class Header:
    metadata: dict[str, str]
    body_offset: int
    size: int
    digest: bytes | None  # None: format 1, hash the body


def read_at(fd: int, size: int, offset: int) -> bytes:
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


def parse_header(fd: int, file_size: int, whole: bytes | None = None) -> Header | None:
    """The header of the object file ``fd``, or None if it is not a well-formed object.
    ``whole``: the file's bytes, read already (else its header is read here)."""
    # Small reads of a regular file are short only at its end.
    fixed = os.pread(fd, _HEADER_V2.size, 0) if whole is None else whole[: _HEADER_V2.size]
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
    raw = os.pread(fd, meta_len, meta_offset) if whole is None else whole[meta_offset : meta_offset + meta_len]
    try:
        metadata = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: a planted nesting bomb
        return None
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        return None
    return Header(metadata, meta_offset + meta_len, size, digest)


def listing_fields(parent: int, name: str) -> tuple[int, bytes, int] | None:
    """What a listing says of the file ``parent/name`` (body size, body MD5, ``mtime_ns``),
    read as :func:`listing_info` reads it; None for anything that is not an object file."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=parent)
    except OSError:
        return None
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
            header = parse_header(fd, st.st_size)
            if header is None:
                return None
            size, digest = header.size, body_digest(fd, header)
        else:
            return None
        return size, digest, st.st_mtime_ns
    except OSError:  # StorageError included: a format-1 file shrank while being hashed
        return None
    finally:
        os.close(fd)


def seconds_of(mtime_ns: int) -> float:
    """``st_mtime`` of a file whose ``st_mtime_ns`` is ``mtime_ns``, to the same bit."""
    seconds, nanoseconds = divmod(mtime_ns, 1_000_000_000)
    return seconds + nanoseconds * 1e-9


def listing_info(parent: int, name: str, key: str) -> ObjectInfo | None:
    """The listing entry of the file ``parent/name``; None for anything that is not an
    object file (a corrupt or planted file must not break the listing). For format 2, the
    fixed header alone (one ``pread`` of 33 bytes; the metadata is neither read nor
    checked, so a file whose metadata is corrupt is listed, and ``get``/``head`` find it
    corrupt); format 1 is read as :func:`parse_header` reads it (:func:`listing_fields`).
    A listing calls it once a file: it makes no call it can spare."""
    fields = listing_fields(parent, name)
    if fields is None:
        return None
    size, digest, mtime_ns = fields
    # What ObjectInfo(key, size, etag, last_modified=...) makes, without the frozen
    # dataclass's __init__ (a third of the cost of listing a file whose header is cached).
    info = _new_info(ObjectInfo)
    info.__dict__.update(
        key=key, size=size, etag='"' + digest.hex() + '"', metadata={}, last_modified=seconds_of(mtime_ns)
    )
    return info


_FIXED_SIZE = _HEADER_V2.size
_unpack_v2 = _HEADER_V2.unpack
_new_info = object.__new__


def chunks(fd: int, offset: int, size: int) -> Iterator[bytes]:
    while size > 0:
        chunk = os.pread(fd, min(size, _CHUNK), offset)
        if not chunk:
            raise StorageError("Error: a local object file shrank while it was read")
        yield chunk
        offset += len(chunk)
        size -= len(chunk)


def body_digest(fd: int, header: Header) -> bytes:
    if header.digest is not None:
        return header.digest
    md5 = hashlib.md5(usedforsecurity=False)
    for chunk in chunks(fd, header.body_offset, header.size):
        md5.update(chunk)
    return md5.digest()


def corrupt(key: str) -> StorageError:
    return StorageError(f"Error: the local object file for {key!r} is corrupt")


def read_object(
    key: str, fd: int, header: Header, stamp: int, *, max_bytes: int | None, body: bool
) -> tuple[StoredObject, int]:
    """The object file ``fd`` (its body only with ``body``, bounded by ``max_bytes``), and its size."""
    check_bound(header.size, max_bytes)
    if not body:
        return StoredObject(b"", etag_of(body_digest(fd, header)), header.metadata, stamp / 1e9), header.size
    data = read_at(fd, header.size, header.body_offset)
    if len(data) != header.size:
        raise corrupt(key)
    digest = header.digest or hashlib.md5(data, usedforsecurity=False).digest()
    return StoredObject(data, etag_of(digest), header.metadata, stamp / 1e9), header.size


def read_current(key: str, fd: int, st: os.stat_result, max_bytes: int | None) -> StoredObject:
    """The object file ``fd`` (``st``: its stat) whole, bounded by ``max_bytes``; a file of
    at most ``_READ_WHOLE`` bytes in one read, a larger one its header first (a planted
    huge file is refused before any of its body is read). StorageError if it is corrupt."""
    whole = os.pread(fd, st.st_size, 0) if st.st_size <= _READ_WHOLE else None
    header = parse_header(fd, st.st_size, whole)
    if header is None:
        raise corrupt(key)
    check_bound(header.size, max_bytes)
    if whole is None:
        body = read_at(fd, header.size, header.body_offset)
    else:
        body = whole[header.body_offset : header.body_offset + header.size]
    if len(body) != header.size:
        raise corrupt(key)
    digest = header.digest or hashlib.md5(body, usedforsecurity=False).digest()
    return StoredObject(body, etag_of(digest), header.metadata, st.st_mtime)


def check_bound(size: int, max_bytes: int | None) -> None:
    if max_bytes is not None and size > max_bytes:
        raise ObjectTooLargeError(
            f"Error: a stored object is too large to read ({size:,} bytes, at most {max_bytes:,})", size=size
        )


# -- writing files ------------------------------------------------------------------------
def encode_metadata(metadata: Mapping[str, str]) -> bytes:
    """The metadata as a file holds it (StorageError if it is too large)."""
    meta = json.dumps(dict(metadata), separators=(",", ":")).encode()
    if len(meta) > _MAX_METADATA_BYTES:
        raise StorageError("Error: the object's metadata is too large for the local store")
    return meta


def head_of(meta: bytes, size: int, digest: bytes) -> bytes:
    """What a format-2 file holds before its body: the header, then the metadata ``meta``."""
    return _HEADER_V2.pack(_MAGIC_V2, len(meta), size, digest) + meta


# -- kept versions: names, ids and time stamps -----------------------------------------------
# A kept version is named "{inverted stamp}-{md5}-{size}", a delete marker "{inverted
# stamp}-m": 16 lower-case hex digits of 2**64 - 1 - stamp, so a directory's names sort
# newest first, and only lower-case hex, digits and '-', which every file system keeps
# apart (case and normalization never fold them). Ids: "{stamp}{md5}" (16 + 32 hex
# digits) for a version, "{stamp}m" for a marker.
MAX_STAMP = 2**64 - 1
_ENTRY_RE = re.compile(r"([0-9a-f]{16})-(?:([0-9a-f]{32})-(0|[1-9][0-9]{0,19})|m)")
_VERSION_ID_RE = re.compile(r"([0-9a-f]{16})(?:([0-9a-f]{32})|m)")


def stamp_of(st: os.stat_result) -> int:
    """A file's time stamp: its ``mtime_ns``, within what 64 bits hold."""
    return min(max(st.st_mtime_ns, 0), MAX_STAMP)


def _version_id(stamp: int, digest: bytes | None) -> str:
    """The id of the version stamped ``stamp`` with body MD5 ``digest`` (None: a marker)."""
    return f"{stamp:016x}" + ("m" if digest is None else digest.hex())


def parse_version_id(version_id: object) -> tuple[int, bytes | None] | None:
    """``(stamp, digest)`` of an id :func:`_version_id` makes; None for any other string."""
    if not isinstance(version_id, str) or version_id == NULL_VERSION:
        return None
    match = _VERSION_ID_RE.fullmatch(version_id)
    if match is None:
        return None
    return int(match.group(1), 16), None if match.group(2) is None else bytes.fromhex(match.group(2))


def version_name(stamp: int, digest: bytes, size: int) -> str:
    return f"{MAX_STAMP - stamp:016x}-{digest.hex()}-{size}"


def marker_name(stamp: int) -> str:
    return f"{MAX_STAMP - stamp:016x}-m"


@dataclass(frozen=True)
class Entry:
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
class Current:
    """The current file of a key, as history sees it."""

    stamp: int
    digest: bytes | None  # None: the file is not a well-formed object
    size: int
    inode: tuple[int, int]  # (st_dev, st_ino): the file a hard link must reach

    @property
    def version_id(self) -> str:
        return _version_id(self.stamp, self.digest)


def parse_entry(name: str) -> Entry | None:
    """The entry named ``name``; None for a name the store never gives one."""
    match = _ENTRY_RE.fullmatch(name)
    if match is None:
        return None
    inverted, digest, size = match.groups()
    return Entry(name, MAX_STAMP - int(inverted, 16), None if digest is None else bytes.fromhex(digest), int(size or 0))


def stamp_file(fd: int, newest: int) -> int:
    """Give the file ``fd`` a time stamp later than ``newest`` (now, if that is later) and
    return it. A file system that keeps times coarser than nanoseconds gets the first later
    time it can hold; one that cannot store a later time is an error."""
    now = time.time_ns()
    for step in (1, 1_000, 1_000_000, 1_000_000_000, 2_000_000_000):
        wanted = min(max(now, newest + step), MAX_STAMP)
        os.utime(fd, ns=(wanted, wanted))
        stamp = stamp_of(os.fstat(fd))
        if stamp > newest:
            return stamp
    raise StorageError("Error: the local store's file system cannot give a new version a later time than the last")


def current_of(fd: int, st: os.stat_result, *, at_once: bool = False) -> Current:
    """The file ``fd`` (``st``: its stat) as history sees it. ``at_once``: a file of at most
    ``_HEAD_AT_ONCE`` bytes is read whole, in one call rather than two (a writer's read of
    the file it replaces; a listing reads headers only)."""
    whole = os.pread(fd, st.st_size, 0) if at_once and st.st_size <= _HEAD_AT_ONCE else None
    header = parse_header(fd, st.st_size, whole)
    try:
        digest = None if header is None else body_digest(fd, header)
    except StorageError:  # it shrank while being hashed
        digest = None
    return Current(stamp_of(st), digest, 0 if header is None else header.size, (st.st_dev, st.st_ino))
