"""Model-supplied paths, tenant ids and key prefixes to canonical forms, or a refusal.

Pure functions, no I/O. Every path the model sends goes through :func:`parse_path`; every
key the store returns goes back through ``TenantLayout.path_for_key`` (``_layout``), which
parses it again (or, for the plain ASCII names of nearly every key, applies the same rules
to the whole path at once: :func:`is_plain_canonical`), so a key in the bucket that could
not have come from a valid path is never shown as a file.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from urllib.parse import unquote

from ._errors import ConfigurationError, InvalidPathError

ROOT = "/memories"
MAX_SEGMENT_BYTES = 255  # one path segment; also what a local file system allows
DEFAULT_MAX_PATH_BYTES = 512  # the path under /memories, in UTF-8 bytes
MAX_S3_KEY_BYTES = 1024
MAX_TENANT_LENGTH = 128
# Reserved: the name of the memory folder in every tenant's namespace (see TenantLayout).
RESERVED_SEGMENT = "memories"
MAX_ECHOED_PATH_CHARS = 1_100  # more than any valid path (512 bytes under /memories/), as characters

# Unicode categories never allowed in a path: controls (incl. NUL, CR, LF, TAB),
# surrogates, unassigned, line/paragraph separators, and the invisible format
# characters that make two different names look the same (bidi overrides, ZWJ...).
_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cs", "Cn", "Co", "Zl", "Zp", "Cf"})

_TENANT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+=-]*")
_PREFIX_SEGMENT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._=+-]*")
_SEPARATORS_RE = re.compile(r"[/\\]")

# Look-alikes of "/", "\" and ".", so that no name displays as a path of several segments,
# as "." or "..", or as a name with a dot it does not have ("notes\uff0emd" displays as
# "notes.md", another file).
# Beyond these tables, every character whose NFKC form contains "/", "\" or "." (U+FF0F
# FULLWIDTH SOLIDUS, U+FF0E FULLWIDTH FULL STOP, U+2024 ONE DOT LEADER, U+2026 HORIZONTAL
# ELLIPSIS, U+2488 DIGIT ONE FULL STOP, U+2105 CARE OF...) is refused anywhere in a name:
# a consumer that applies NFKC would turn it into a real separator or dot.
#
# Source: the entries of Unicode's confusables.txt (UTS #39, version 17.0.0) whose target
# is, or contains, U+002F SOLIDUS, U+005C REVERSE SOLIDUS or U+002E FULL STOP, less those
# the NFKC rule already covers and the look-alikes of "%" and "‰" (U+0025, U+066A, U+2052,
# U+2030, U+0609, U+2031, U+060A, drawn "º/₀"), which look like a percent sign, not a slash.
#
# Refused anywhere in a name: the symbols and punctuation among them.
_LOOKALIKES_ANYWHERE: dict[str, str] = {
    # -> "/"
    "\u1735": "/",  # PHILIPPINE SINGLE PUNCTUATION
    "\u2041": "/",  # CARET INSERTION POINT
    "\u2044": "/",  # FRACTION SLASH
    "\u2215": "/",  # DIVISION SLASH
    "\u2571": "/",  # BOX DRAWINGS LIGHT DIAGONAL UPPER RIGHT TO LOWER LEFT
    "\u27cb": "/",  # MATHEMATICAL RISING DIAGONAL
    "\u29f8": "/",  # BIG SOLIDUS
    "\U0001d23a": "/",  # GREEK INSTRUMENTAL NOTATION SYMBOL-47
    "\u31d3": "/",  # CJK STROKE SP
    "\u2f03": "/",  # KANGXI RADICAL SLASH
    "\u29f6": "/\u0304",  # SOLIDUS WITH OVERBAR
    "\u2afd": "//",  # DOUBLE SOLIDUS OPERATOR
    "\u2afb": "///",  # TRIPLE SOLIDUS BINARY RELATION
    "\u27c9": "\u1450/",  # SUPERSET PRECEDING SOLIDUS
    # -> "\"
    "\u2216": "\\",  # SET MINUS
    "\u27cd": "\\",  # MATHEMATICAL FALLING DIAGONAL
    "\u29f5": "\\",  # REVERSE SOLIDUS OPERATOR
    "\u29f9": "\\",  # BIG REVERSE SOLIDUS
    "\U0001d20f": "\\",  # GREEK VOCAL NOTATION SYMBOL-16
    "\U0001d23b": "\\",  # GREEK INSTRUMENTAL NOTATION SYMBOL-48
    "\u31d4": "\\",  # CJK STROKE D
    "\u2f02": "\\",  # KANGXI RADICAL DOT
    "\u2cf9": "\\\\",  # COPTIC OLD NUBIAN FULL STOP
    "\u244a": "\\\\",  # OCR DOUBLE BACKSLASH
    "\u27c8": "\\\u1455",  # REVERSE SOLIDUS PRECEDING SUBSET
    # -> "."
    "\U0001d16d": ".",  # MUSICAL SYMBOL COMBINING AUGMENTATION DOT
    "\u0701": ".",  # SYRIAC SUPRALINEAR FULL STOP
    "\u0702": ".",  # SYRIAC SUBLINEAR FULL STOP
    "\ua60e": ".",  # VAI FULL STOP
    "\U00010a50": ".",  # KHAROSHTHI PUNCTUATION DOT
    "\ua4fe": "-.",  # LISU PUNCTUATION COMMA
}
# Letters and digits of living scripts (and the ideographic full stops, which IDNA maps to
# "."): ordinary text in their own scripts, so accepted inside a name, but refused where
# they would make a segment read as "." or "..", alone or between separators.
_LOOKALIKES_IN_DOT_SEGMENTS: dict[str, str] = {
    "\u30ce": "/",  # KATAKANA LETTER NO
    "\u4e3f": "/",  # CJK UNIFIED IDEOGRAPH-4E3F
    "\u3033": "/",  # VERTICAL KANA REPEAT MARK UPPER HALF
    "\u2cc6": "/",  # COPTIC CAPITAL LETTER OLD COPTIC ESH
    "\u2cc7": "/",  # COPTIC SMALL LETTER OLD COPTIC ESH
    "\u4e36": "\\",  # CJK UNIFIED IDEOGRAPH-4E36
    "\u0660": ".",  # ARABIC-INDIC DIGIT ZERO
    "\u06f0": ".",  # EXTENDED ARABIC-INDIC DIGIT ZERO
    "\ua4f8": ".",  # LISU LETTER TONE MYA TI
    "\ua4fa": "..",  # LISU LETTER TONE MYA CYA
    "\ua4fb": ".,",  # LISU LETTER TONE MYA BO
    "\u3002": ".",  # IDEOGRAPHIC FULL STOP (not in confusables.txt; a label separator in IDNA)
    # U+FF61 HALFWIDTH IDEOGRAPHIC FULL STOP is U+3002 under NFKC.
}
_SKELETON = str.maketrans({**_LOOKALIKES_IN_DOT_SEGMENTS, **_LOOKALIKES_ANYWHERE})
_LOOKS_STRUCTURAL = "./\\"


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


def echoed_path(path: str) -> str:
    """A refused path as echoed back: as given, like the reference, when every character
    is printable; else its ``repr()``, so that control, invisible and bidi characters show
    as inert escapes (and the quotes say that it was escaped). A path longer than any valid
    one is cut, so a refusal never echoes megabytes back into the model's context."""
    if len(path) > MAX_ECHOED_PATH_CHARS:
        cut = len(path) - MAX_ECHOED_PATH_CHARS
        path = path[:MAX_ECHOED_PATH_CHARS]
        return f"{path if path.isprintable() else repr(path)}... [{cut:,} more characters]"
    return path if path.isprintable() else repr(path)


def refuse_path(path: str, why: str) -> InvalidPathError:
    return InvalidPathError(f"Error: Invalid path {echoed_path(path)}: {why}")


def _outside(path: str) -> InvalidPathError:
    # The reference's words (BetaLocalFilesystemMemoryTool), then which rule was broken.
    return InvalidPathError(
        f"Path must start with /memories, got: {echoed_path(path)} (a path is /memories or starts with /memories/)"
    )


def _escapes(path: str, how: str = "") -> InvalidPathError:
    # The reference's words, then which rule was broken.
    return InvalidPathError(
        f"Path {echoed_path(path)} would escape /memories directory: "
        f"'..' segments (directory traversal) are not allowed{how}"
    )


def _character(ch: str) -> str:
    return f"U+{ord(ch):04X} {unicodedata.name(ch, 'UNNAMED')}"


def _lookalike(form: str) -> tuple[str, str] | None:
    """The first character of ``form`` refused anywhere as a look-alike of "/", "\\" or ".",
    with what it looks like; ``None`` if there is none. Non-ASCII ``form`` only."""
    nfkc = unicodedata.normalize("NFKC", form)
    if nfkc != form and any(nfkc.count(c) != form.count(c) for c in _LOOKS_STRUCTURAL):
        for ch in form:
            folded = unicodedata.normalize("NFKC", ch)
            if ch not in _LOOKS_STRUCTURAL and any(c in folded for c in _LOOKS_STRUCTURAL):
                return ch, folded
    for ch in form:
        if ch in _LOOKALIKES_ANYWHERE:
            return ch, _LOOKALIKES_ANYWHERE[ch]
    return None


def _skeleton_parts(form: str) -> list[str]:
    """``form`` as it displays: NFKC, every look-alike replaced by what it looks like,
    split at "/" and "\\"."""
    return _SEPARATORS_RE.split(unicodedata.normalize("NFKC", form).translate(_SKELETON))


def _check_segment(path: str, segment: str) -> None:
    if segment == "":
        raise refuse_path(path, "empty path segments ('//') are not allowed")
    if segment.isascii() and segment.isprintable() and "%" not in segment and "\\" not in segment:
        # The common case, decided without decoding (is_plain_canonical applies these same
        # rules to a whole path at once: a rule added here must be added there).
        if segment == "..":
            raise _escapes(path)
        if segment == ".":
            raise refuse_path(path, "'.' segments are not allowed")
        if len(segment) > MAX_SEGMENT_BYTES:
            raise refuse_path(path, f"a path segment is longer than {MAX_SEGMENT_BYTES} bytes")
        return
    # Decode percent-escapes until stable, so %2e%2e%2f and %252e... are judged as
    # what a later decoder would turn them into.
    decoded = segment
    for _ in range(4):
        step = unquote(decoded)
        if step == decoded:
            break
        decoded = step
    forms = (segment,) if decoded == segment else (segment, decoded)
    for form in forms:
        if any(unicodedata.category(ch) in _FORBIDDEN_CATEGORIES for ch in form):
            raise refuse_path(path, "control and invisible characters are not allowed")
    # Traversal in any spelling: ".." between backslashes, percent-encoded, or drawn with
    # look-alikes ("\uff0e\uff0e\u2215x" displays as "../x").
    for index, form in enumerate(forms):
        parts = _SEPARATORS_RE.split(form) if form.isascii() else _skeleton_parts(form)
        if ".." in parts:
            if index == 1:
                raise _escapes(path, ", percent-encoded or not")
            if not form.isascii():
                raise _escapes(path, ", nor look-alikes of '.', '/' and '\\' that spell them")
            raise _escapes(path, ", also between backslashes")
    for form in forms:
        if form == ".":
            raise refuse_path(path, "'.' segments are not allowed, percent-encoded or not")
        if "\\" in form or "/" in form:
            raise refuse_path(path, "backslashes and encoded separators are not allowed")
        if not form.isascii():
            found = _lookalike(form)
            if found is not None:
                ch, looks = found
                raise refuse_path(
                    path, f"{_character(ch)} looks like '{looks}'; look-alikes of '/', '\\' and '.' are not allowed"
                )
            if "." in _skeleton_parts(form):
                raise refuse_path(path, "a segment that displays as '.' is not allowed")
    if len(segment.encode("utf-8")) > MAX_SEGMENT_BYTES:
        raise refuse_path(path, f"a path segment is longer than {MAX_SEGMENT_BYTES} bytes")


def parse_path(path: object, *, max_path_bytes: int = DEFAULT_MAX_PATH_BYTES) -> MemoryPath:
    """Validate a model-supplied path and return its canonical form.

    Accepts ``/memories`` and ``/memories/a/b`` (one trailing ``/`` is ignored). Refuses,
    with :class:`InvalidPathError`: anything not under ``/memories`` (``/memoriesX``
    included), empty, ``.`` and ``..`` segments, backslashes, percent-encoded traversal,
    control or invisible characters, look-alikes of ``/``, ``\\`` and ``.`` (see
    ``_LOOKALIKES_ANYWHERE``), and over-long paths. The result is NFC-normalized.

    A path outside ``/memories`` and a ``..`` segment (in any spelling) are refused in the
    words of the SDK's reference implementation (``Path must start with /memories, got:
    {path}``, ``Path {path} would escape /memories directory``), followed by the rule that
    was broken; every other refusal starts with ``Error: Invalid path``. The path is echoed
    as given if it is printable, else as its ``repr()``.
    """
    if not isinstance(path, str):
        raise InvalidPathError(f"Error: The path must be a string, got {type(path).__name__}")
    if path != ROOT and not path.startswith(ROOT + "/"):
        raise _outside(path)
    rest = path[len(ROOT) + 1 :]
    if rest.endswith("/"):
        rest = rest[:-1]
        if rest == "":
            raise refuse_path(path, "empty path segments ('//') are not allowed")
    if rest == "":
        return MemoryPath("")
    try:
        rest.encode("utf-8")
    except UnicodeEncodeError:
        raise refuse_path(path, "the path is not valid Unicode") from None
    if not rest.isascii():
        rest = unicodedata.normalize("NFC", rest)
    for segment in rest.split("/"):
        _check_segment(path, segment)
    if len(rest.encode("utf-8")) > max_path_bytes:
        raise refuse_path(path, f"the path is longer than {max_path_bytes} bytes")
    return MemoryPath(rest)


def is_plain_canonical(relative: str, max_path_bytes: int) -> bool:
    """True only if ``parse_path(f"/memories/{relative}", max_path_bytes=max_path_bytes)``
    accepts ``relative`` and returns it unchanged, decided without parsing.

    A listing checks every key it returns, and nearly all are printable ASCII, where
    :func:`_check_segment` asks only for non-empty segments that are not ``.`` or ``..`` and
    fit :data:`MAX_SEGMENT_BYTES`; this asks the same of the whole string at once (``/``
    itself being printable ASCII, neither ``%`` nor ``\\``). False is not a refusal: the
    caller then asks :func:`parse_path`, which alone decides everything else.
    """
    if not relative or len(relative) > max_path_bytes or not (relative.isascii() and relative.isprintable()):
        return False
    if "%" in relative or "\\" in relative or "//" in relative or relative[0] == "/" or relative[-1] == "/":
        return False
    if relative[0] == "." or "/." in relative:  # else no segment starts with ".", as "." and ".." do
        framed = f"/{relative}/"
        if "/./" in framed or "/../" in framed:
            return False
    # Only a string longer than a segment may hold a segment too long.
    return len(relative) <= MAX_SEGMENT_BYTES or all(len(s) <= MAX_SEGMENT_BYTES for s in relative.split("/"))


def validate_tenant(user_id: object) -> str:
    """Return ``user_id`` if it is a safe tenant id, else raise :class:`ConfigurationError`.

    A tenant id becomes one key segment: ASCII letters, digits and ``. _ @ + = -``,
    starting with a letter or digit (so never ``.`` or ``..``), at most 128 characters,
    and never ``memories`` in any case (reserved, see :class:`TenantLayout`).
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
    if user_id.lower() == RESERVED_SEGMENT:
        raise ConfigurationError(
            f"user_id {user_id!r} is reserved: under a prefix such as 'app/', its objects would lie "
            "inside the memory files of user 'app' of a deployment with no prefix; choose another user_id"
        )
    return user_id


def validate_prefix(prefix: object) -> str:
    """The bucket-wide key prefix: ``""`` or segments like ``app/memory/`` ending in ``/``.

    Segments as user ids (ASCII letters, digits and ``. _ = + -``, starting with a letter or
    digit); a segment after the first is never ``memories`` in any case (see
    :class:`TenantLayout`). A first segment ``memories`` is fine: no tenant comes before it.
    """
    if not isinstance(prefix, str):
        raise ConfigurationError("prefix must be a string")
    if prefix == "":
        return prefix
    if not prefix.endswith("/") or len(prefix) > 256:
        raise ConfigurationError(f"prefix {prefix!r} must end with '/' and be at most 256 characters")
    segments = prefix[:-1].split("/")
    for index, segment in enumerate(segments):
        if not _PREFIX_SEGMENT_RE.fullmatch(segment) or segment in (".", ".."):
            raise ConfigurationError(f"prefix {prefix!r} has an invalid segment {segment!r}")
        if index > 0 and segment.lower() == RESERVED_SEGMENT:
            shorter = "".join(part + "/" for part in segments[: index - 1])
            raise ConfigurationError(
                f"prefix {prefix!r} is not allowed: its segment {segment!r} would put this deployment "
                f"inside the memory files of user {segments[index - 1]!r} of a deployment with prefix "
                f"{shorter!r}; a segment named 'memories' (in any case) may only come first"
            )
    return prefix
