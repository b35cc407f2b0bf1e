"""Layer 1: model-supplied paths and tenant ids to canonical object keys, or a refusal.

Pure functions, no I/O (except that a layout with encrypted names loads the tenant's
names key on first use, see ``_names``). Every path the model sends goes through
:func:`parse_path`; every key the store returns goes back through
:meth:`TenantLayout.path_for_key`, so a key in the bucket that could not have come from a
valid path is never shown as a file.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import unquote

from ._errors import ConfigurationError, InvalidPathError

if TYPE_CHECKING:
    from ._names import NameCipher

ROOT = "/memories"
MAX_SEGMENT_BYTES = 255  # one path segment; also what a local file system allows
DEFAULT_MAX_PATH_BYTES = 512  # the path under /memories, in UTF-8 bytes
MAX_S3_KEY_BYTES = 1024
MAX_TENANT_LENGTH = 128

# Unicode categories never allowed in a path: controls (incl. NUL, CR, LF, TAB),
# surrogates, unassigned, line/paragraph separators, and the invisible format
# characters that make two different names look the same (bidi overrides, ZWJ...).
_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cs", "Cn", "Co", "Zl", "Zp", "Cf"})

_TENANT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+=-]*")
_PREFIX_SEGMENT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._=+-]*")


@dataclass(frozen=True, order=True)
class MemoryPath:
    """A validated path under ``/memories``; ``relative`` is ``""`` for the root."""

    relative: str

    @property
    def is_root(self) -> bool:
        return self.relative == ""

    @property
    def display(self) -> str:
        return f"{ROOT}/{self.relative}" if self.relative else ROOT

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(self.relative.split("/")) if self.relative else ()

    def ancestors(self) -> list[MemoryPath]:
        """Proper ancestors below the root, nearest the root first."""
        parts = self.parts
        return [MemoryPath("/".join(parts[:i])) for i in range(1, len(parts))]

    def is_within(self, other: MemoryPath) -> bool:
        """True if ``self`` is ``other`` or lies below it."""
        return other.is_root or self == other or self.relative.startswith(other.relative + "/")

    def child(self, name: str) -> MemoryPath:
        return MemoryPath(f"{self.relative}/{name}" if self.relative else name)

    def __str__(self) -> str:
        return self.display


def _refuse(path: str, why: str) -> InvalidPathError:
    # repr() so that control characters in the echoed path are visible and inert.
    return InvalidPathError(f"Error: Invalid path {path!r}: {why}")


def _check_segment(path: str, segment: str) -> None:
    if segment == "":
        raise _refuse(path, "empty path segments ('//') are not allowed")
    if segment.isascii() and segment.isprintable() and "%" not in segment and "\\" not in segment:
        # The common case, decided without decoding (listings validate every key).
        if segment in (".", ".."):
            raise _refuse(path, "'.' and '..' segments (directory traversal) are not allowed")
        if len(segment) > MAX_SEGMENT_BYTES:
            raise _refuse(path, f"a path segment is longer than {MAX_SEGMENT_BYTES} bytes")
        return
    # Decode percent-escapes until stable, so %2e%2e%2f and %252e... are judged as
    # what a later decoder would turn them into.
    decoded = segment
    for _ in range(4):
        step = unquote(decoded)
        if step == decoded:
            break
        decoded = step
    for form in (segment, decoded):
        if form in (".", ".."):
            raise _refuse(path, "'.' and '..' segments (directory traversal) are not allowed")
        if "\\" in form or "/" in form:
            raise _refuse(path, "backslashes and encoded separators are not allowed")
        if any(unicodedata.category(ch) in _FORBIDDEN_CATEGORIES for ch in form):
            raise _refuse(path, "control and invisible characters are not allowed")
    if len(segment.encode("utf-8")) > MAX_SEGMENT_BYTES:
        raise _refuse(path, f"a path segment is longer than {MAX_SEGMENT_BYTES} bytes")


def parse_path(path: object, *, max_path_bytes: int = DEFAULT_MAX_PATH_BYTES) -> MemoryPath:
    """Validate a model-supplied path and return its canonical form.

    Accepts ``/memories`` and ``/memories/a/b`` (one trailing ``/`` is ignored). Refuses,
    with :class:`InvalidPathError`: anything not under ``/memories`` (``/memoriesX``
    included), empty, ``.`` and ``..`` segments, backslashes, percent-encoded traversal,
    control or invisible characters, and over-long paths. The result is NFC-normalized.
    """
    if not isinstance(path, str):
        raise InvalidPathError(f"Error: The path must be a string, got {type(path).__name__}")
    if path != ROOT and not path.startswith(ROOT + "/"):
        raise _refuse(path, "paths must start with /memories/")
    rest = path[len(ROOT) + 1 :]
    if rest.endswith("/"):
        rest = rest[:-1]
        if rest == "":
            raise _refuse(path, "empty path segments ('//') are not allowed")
    if rest == "":
        return MemoryPath("")
    try:
        rest.encode("utf-8")
    except UnicodeEncodeError:
        raise _refuse(path, "the path is not valid Unicode") from None
    if not rest.isascii():
        rest = unicodedata.normalize("NFC", rest)
    for segment in rest.split("/"):
        _check_segment(path, segment)
    if len(rest.encode("utf-8")) > max_path_bytes:
        raise _refuse(path, f"the path is longer than {max_path_bytes} bytes")
    return MemoryPath(rest)


def validate_tenant(user_id: object) -> str:
    """Return ``user_id`` if it is a safe tenant id, else raise :class:`ConfigurationError`.

    A tenant id becomes one key segment: ASCII letters, digits and ``. _ @ + = -``,
    starting with a letter or digit (so never ``.`` or ``..``), at most 128 characters.
    """
    if not isinstance(user_id, str) or not user_id:
        raise ConfigurationError("user_id must be a non-empty string")
    if len(user_id) > MAX_TENANT_LENGTH:
        raise ConfigurationError(f"user_id is longer than {MAX_TENANT_LENGTH} characters")
    if not _TENANT_RE.fullmatch(user_id):
        raise ConfigurationError(
            f"user_id {user_id!r} is not allowed: use ASCII letters, digits and . _ @ + = -, "
            "starting with a letter or digit"
        )
    return user_id


def validate_prefix(prefix: object) -> str:
    """The bucket-wide key prefix: ``""`` or segments like ``app/memory/`` ending in ``/``."""
    if not isinstance(prefix, str):
        raise ConfigurationError("prefix must be a string")
    if prefix == "":
        return prefix
    if not prefix.endswith("/") or len(prefix) > 256:
        raise ConfigurationError(f"prefix {prefix!r} must end with '/' and be at most 256 characters")
    for segment in prefix[:-1].split("/"):
        if not _PREFIX_SEGMENT_RE.fullmatch(segment) or segment in (".", ".."):
            raise ConfigurationError(f"prefix {prefix!r} has an invalid segment {segment!r}")
    return prefix


@dataclass(frozen=True)
class TenantLayout:
    """Where one tenant's objects live in the bucket.

    ``{prefix}{tenant}/memories/{path}`` holds memory files; ``{prefix}{tenant}/.s3memory/``
    holds internal objects (the wrapped tenant key). Every prefix ends in ``/`` so that
    tenant ``alice`` never lists ``alice2``'s keys.

    With ``names`` (``open_memory(encrypt_names=True)``), each segment of the path under
    ``memories/`` is sealed by the :class:`~s3memory._names.NameCipher` instead of written in
    clear (see ``_names``); the methods keep their meaning, and the first one that needs
    the tenant's names key loads it (a request, once per process and cache lifetime).
    """

    tenant: str
    prefix: str = ""
    names: NameCipher | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        validate_tenant(self.tenant)
        validate_prefix(self.prefix)

    @property
    def tenant_prefix(self) -> str:
        return f"{self.prefix}{self.tenant}/"

    @property
    def memory_prefix(self) -> str:
        return f"{self.tenant_prefix}memories/"

    @property
    def internal_prefix(self) -> str:
        return f"{self.tenant_prefix}.s3memory/"

    def key_for(self, path: MemoryPath) -> str:
        """The object key of a file at ``path`` (never the root)."""
        if path.is_root:
            raise InvalidPathError("Error: /memories is a directory, not a file")
        if self.names is not None:
            return self._sealed_key(path)
        key = self.key_for_unchecked(path)
        if len(key.encode("utf-8")) > MAX_S3_KEY_BYTES:
            raise _refuse(path.display, "the path is too long for an object key")
        return key

    def key_for_unchecked(self, path: MemoryPath) -> str:
        if self.names is not None:
            return self.memory_prefix + self.names.seal(path)
        return self.memory_prefix + path.relative

    def dir_prefix(self, path: MemoryPath) -> str:
        """The key prefix of everything below the directory ``path``."""
        if self.names is not None and not path.is_root:
            # A directory whose own key would be too long can hold nothing: refused like a file.
            return self._sealed_key(path) + "/"
        return self.memory_prefix + (path.relative + "/" if path.relative else "")

    def _sealed_key(self, path: MemoryPath) -> str:
        assert self.names is not None
        if self.names.too_long_name(path) is not None:
            limit = self.names.max_name_bytes
            raise _refuse(
                path.display, f"a path segment is longer than {limit} bytes, the most an encrypted name holds"
            )
        key = self.key_for_unchecked(path)
        size = len(key.encode("utf-8"))
        if size > MAX_S3_KEY_BYTES:
            raise _refuse(
                path.display,
                f"the path is too long for an object key once its names are encrypted "
                f"({size:,} bytes, at most {MAX_S3_KEY_BYTES:,})",
            )
        return key

    def path_for_key(self, key: str) -> MemoryPath | None:
        """The memory path a listed key stands for, or ``None`` if no valid path maps to it."""
        if not key.startswith(self.memory_prefix):
            return None
        relative = key[len(self.memory_prefix) :]
        if not relative:
            return None
        if self.names is not None:
            opened = self.names.open(relative)
            if opened is None:
                return None  # a foreign, tampered or moved key
            relative = opened
        try:
            parsed = parse_path(f"{ROOT}/{relative}", max_path_bytes=MAX_S3_KEY_BYTES - len(self.memory_prefix))
        except InvalidPathError:
            return None
        # Only the exact canonical spelling counts: "a/" or a non-NFC key is not ours.
        return parsed if parsed.relative == relative else None
