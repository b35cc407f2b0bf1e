"""Keys as file names: which keys a local directory can hold, and how their segments are spelt.

Each key segment is a directory or file name (``{root}/{key}``), so a key must be one that
names can spell: not empty, no ``.`` or ``..`` segment, no empty segment, no NUL, valid
UTF-8, at most 1,024 bytes (as S3), and not starting with ``.`` (names starting with ``.``
at the root are the store's own: ``.lock``, ``.tmp``, ``.keys``, ``.versions``, ``.index``).

On a case-insensitive file system (macOS and Windows defaults), a new store escapes every
key segment so that keys differing in case or Unicode normalization never share a file,
and records that in ``{root}/.keys``. A store without that file keeps plain names; on a
case-insensitive file system (a store made by an earlier version) it refuses a key whose
segment folds onto a different stored name, in the version area too. The names of kept
versions are lower-case hex digits, digits and ``-``, which no file system folds.
"""

from __future__ import annotations

import errno
import os
import stat
import uuid
from pathlib import Path

from ..._errors import StorageError
from .files import NEW_FILE_FLAGS, READ_FLAGS

MAX_KEY_BYTES = 1024  # as S3
_SPELT_KEPT = 256  # keys whose spelling a store keeps (a few commands' worth)

_KEYS_FILE = ".keys"  # the key encoding of the store; absent: plain names
ESCAPED = "escaped"

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


def folds_onto_another(dir_fd: int, name: str) -> bool:
    """Whether a differently spelt entry of the directory folds to ``name`` (on a
    case-insensitive file system, opening ``name`` would open that entry instead)."""
    import unicodedata

    folded, spelling = _fold(name), unicodedata.normalize("NFC", name)
    return any(
        entry != name and _fold(entry) == folded and unicodedata.normalize("NFC", entry) != spelling
        for entry in os.listdir(dir_fd)
    )


def folded_error() -> StorageError:
    """The error for a key whose name a different stored name folds onto."""
    return StorageError(
        "Error: a stored name differs from this key's only in case; this case-insensitive file system cannot hold both"
    )


def probe_case_sensitive(dir_fd: int) -> bool:
    """Whether the file system keeps names apart that differ only in case or in Unicode
    normalization, probed with two scratch files in the directory ``dir_fd``."""
    token = uuid.uuid4().hex
    pairs = ((f"probe-{token}-A", f"probe-{token}-a"), (f"probe-{token}-\u00e9", f"probe-{token}-e\u0301"))
    for created, other in pairs:
        try:
            os.close(os.open(created, NEW_FILE_FLAGS, 0o600, dir_fd=dir_fd))
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


class KeyNames:
    """How one store spells its keys on disk: escaped or plain (``escaped``), and whether
    plain names are checked for folding onto another (``check_folding``); both False until
    the store has read its ``.keys`` or probed its file system."""

    def __init__(self) -> None:
        self._escaped = False
        self.check_folding = False
        # A call spells its key several times (its file, its directory, its versions'),
        # and a command's calls the same few keys: each key is checked and spelt once.
        self._spelt: dict[str, tuple[str, ...]] = {}

    @property
    def escaped(self) -> bool:
        return self._escaped

    @escaped.setter
    def escaped(self, value: bool) -> None:
        self._escaped = value
        self._spelt.clear()

    def of(self, key: str) -> list[str]:
        """The file names of ``key``'s segments (StorageError for a key no file can hold)."""
        spelt = self._spelt.get(key) if isinstance(key, str) else None
        if spelt is not None:
            return list(spelt)
        if not isinstance(key, str):
            raise StorageError(f"Error: the key {key!r} cannot be stored in a local directory")
        parts = key.split("/")
        if not key or key.startswith(".") or "\x00" in key or any(p in ("", ".", "..") for p in parts):
            raise StorageError(f"Error: the key {key!r} cannot be stored in a local directory")
        try:
            size = len(key.encode())
        except UnicodeEncodeError:
            raise StorageError(f"Error: the key {key!r} cannot be stored in a local directory") from None
        if size > MAX_KEY_BYTES:
            raise StorageError(f"Error: a key of {size:,} bytes cannot be stored (at most {MAX_KEY_BYTES:,})")
        names = self.spell(parts)
        if len(self._spelt) >= _SPELT_KEPT:
            self._spelt.clear()
        self._spelt[key] = tuple(names)
        return names

    def spell(self, segments: list[str]) -> list[str]:
        """The file names of key segments known to be valid."""
        return [_escape(p) for p in segments] if self.escaped else segments

    def decode(self, name: str) -> str | None:
        """The key segment stored as ``name``, or None for a name s3memory never writes."""
        if self.escaped:
            return _unescape(name)
        try:
            name.encode()
        except UnicodeEncodeError:
            return None  # not UTF-8 on disk: no key is spelt so
        return name

    def folds(self, parent: int, name: str) -> bool:
        """Whether opening ``name`` in ``parent`` would open a different stored name (only
        checked with ``check_folding``)."""
        return self.check_folding and folds_onto_another(parent, name)


# -- the key encoding, in {root}/.keys ----------------------------------------------------
def read_keys_file(root: int, path: Path) -> str | None:
    """The key encoding ``.keys`` names in the root ``root`` (at ``path``); None without one."""
    try:
        fd = os.open(_KEYS_FILE, READ_FLAGS, dir_fd=root)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise StorageError(f"Error: {path / _KEYS_FILE} is not what the local store made there") from None
    try:
        content = os.read(fd, 64).decode("ascii", "replace").strip() if stat.S_ISREG(os.fstat(fd).st_mode) else ""
    finally:
        os.close(fd)
    if content not in (ESCAPED, "plain"):
        raise StorageError(f"Error: {path / _KEYS_FILE} names an unknown key encoding")
    return content


def write_keys_file(root: int, tmp: int) -> None:
    """Record in ``.keys`` that the store escapes its key segments: written in ``tmp``,
    synced, then renamed into the root (whose sync is the caller's)."""
    name = uuid.uuid4().hex
    fd = os.open(name, NEW_FILE_FLAGS, 0o600, dir_fd=tmp)
    with os.fdopen(fd, "wb") as f:
        f.write(ESCAPED.encode() + b"\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(name, _KEYS_FILE, src_dir_fd=tmp, dst_dir_fd=root)
