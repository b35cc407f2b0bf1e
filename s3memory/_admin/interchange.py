"""Interchange with Managed Agents memory stores: their memories as JSON Lines, both ways.

A managed memory store's memories are objects with ``path`` (rooted at the store:
``/preferences/formatting.md``), ``content``, ``content_sha256`` and ``size_bytes``. The API
defines no export file, so the one written here is JSON Lines: one memory a line, sorted by
path, UTF-8, ``{"path": ..., "content": ..., "content_sha256": ..., "size_bytes": N}``. A
managed path ``/x.md`` is the memory file ``/memories/x.md`` (below another base with
``--to`` and ``--from``).

Reading accepts that file, a JSON array of such objects, or a page of the API's listings
(``{"data": [...]}``); each memory is checked (``content_sha256`` and ``size_bytes`` when
present, the path as the memory tool would check it, duplicates, a file where another memory
needs a directory) and a refused one is reported by its line (or item) number, so the others
can still be imported. Unknown fields (``id``, ``type``, ``created_at``...) are ignored; a
memory whose ``content`` is null (redacted) is counted, not imported.

Writing escapes, as ``\\uXXXX``, the characters that could act on a terminal or hide text
(controls, bidi and zero-width characters, line separators): the same JSON, inert when
printed. Pure: no request; ``_cli_bulk`` reads and writes the memory.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .._errors import InvalidPathError
from .._paths import DEFAULT_MAX_PATH_BYTES, ROOT, MemoryPath, echoed_path, parse_path
from .._render import never_raw

__all__ = [
    "MANAGED_MAX_BYTES",
    "ManagedImport",
    "ManagedMemory",
    "Refusal",
    "format_managed",
    "managed_path",
    "memory_path",
    "read_managed",
]

MANAGED_MAX_BYTES = 102_400  # the SDK's MemoryCreateParams: "The maximum size is 100 kB (102,400 bytes)"
_SHA256_HEX = re.compile(r"[0-9a-fA-F]{64}")
_MAY_ACT = re.compile(r"[^ -~]")  # json.dumps already escaped the C0 controls; look at the rest


@dataclass(frozen=True)
class ManagedMemory:
    """One memory as a managed store holds it: ``path`` rooted at the store (``/x.md``)."""

    path: str
    content: str

    @property
    def size_bytes(self) -> int:
        return len(self.content.encode("utf-8"))

    @property
    def content_sha256(self) -> str:
        return hashlib.sha256(self.content.encode("utf-8")).hexdigest()

    def record(self) -> dict[str, Any]:
        """The JSON object of this memory, in the export's field order."""
        return {
            "path": self.path,
            "content": self.content,
            "content_sha256": self.content_sha256,
            "size_bytes": self.size_bytes,
        }


@dataclass(frozen=True)
class Parsed:
    """A memory read from a file, to be written at ``path`` (a memory path, ``/memories/...``)."""

    where: str  # "line 3", "item 3"
    path: str
    content: str


@dataclass(frozen=True)
class Refusal:
    """A line (or item) that is not imported, and why (``Error: ...; skipped``)."""

    where: str
    message: str
    path: str | None = None


@dataclass
class ManagedImport:
    """What :func:`read_managed` found: the memories to write, those redacted, those refused."""

    memories: list[Parsed] = field(default_factory=list)
    redacted: list[str] = field(default_factory=list)  # where
    refused: list[Refusal] = field(default_factory=list)
    records: int = 0  # memories seen (lines or items, blank lines not counted)


class _Refused(Exception):
    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


def managed_path(path: str, base: str = ROOT) -> str:
    """The managed path (``/x.md``) of the memory file ``path`` below ``base`` (``/memories/x.md``).

    Raises:
        ValueError: ``path`` is not below ``base``.
    """
    base = base.rstrip("/")
    if not path.startswith(base + "/"):
        raise ValueError(f"{path} is not below {base}")
    return path[len(base) :]


def memory_path(path: object, base: str = ROOT, *, max_path_bytes: int = DEFAULT_MAX_PATH_BYTES) -> MemoryPath:
    """The memory file a managed ``path`` (``/x.md``) is below ``base`` (``/memories/x.md``),
    checked as the memory tool checks a path (and NFC-normalized, as it stores every path).

    Raises:
        InvalidPathError: ``path`` is not a string starting with ``/`` and naming a file, or
            the memory tool refuses the result.
    """
    if not isinstance(path, str):
        raise InvalidPathError('Error: "path" is not a string')
    if not path.startswith("/") or path.endswith("/"):
        raise InvalidPathError(
            f"Error: Invalid path {echoed_path(path)}: a memory's path starts with '/' and names a file"
        )
    parsed = parse_path(base.rstrip("/") + path, max_path_bytes=max_path_bytes)
    if parsed.is_root:  # pragma: no cover - a path ending in "/" was refused above
        raise InvalidPathError(f"Error: Invalid path {echoed_path(path)}: it names no file")
    return parsed


def _inert(line: str) -> str:
    """``line`` (JSON) with every control, format and separator character as a ``\\u`` escape."""

    def escape(match: re.Match[str]) -> str:
        char = match.group()
        if not never_raw(char):
            return char
        code = ord(char)
        if code < 0x10000:
            return f"\\u{code:04x}"
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"

    return _MAY_ACT.sub(escape, line)


def format_managed(memories: Iterable[ManagedMemory]) -> bytes:
    """The JSON Lines export of ``memories``: one a line, sorted by path, UTF-8, each line
    ending in a newline (no memories: empty)."""
    ordered = sorted(memories, key=lambda memory: memory.path)
    lines = (_inert(json.dumps(memory.record(), ensure_ascii=False)) + "\n" for memory in ordered)
    return "".join(lines).encode("utf-8")


# -- reading ---------------------------------------------------------------------------------
_TOO_DEEP = "Error: not valid JSON (nested too deeply); skipped"


def _json_error(error: json.JSONDecodeError) -> str:
    return f"Error: not valid JSON ({error.msg} at column {error.colno}); skipped"


def _check(item: object, base: str, max_path_bytes: int) -> tuple[MemoryPath, str] | None:
    """The memory path and content of one item; ``None`` if redacted (content null).

    Raises:
        _Refused: why it is not imported.
    """
    if not isinstance(item, dict):
        raise _Refused("Error: not a JSON object; skipped")
    if "path" not in item:
        raise _Refused('Error: no "path"; skipped')
    try:
        parsed = memory_path(item["path"], base, max_path_bytes=max_path_bytes)
    except InvalidPathError as error:
        message = str(error)  # "Path ... would escape": the reference's words, without "Error: "
        raise _Refused(f"{message if message.startswith('Error') else 'Error: ' + message}; skipped") from None
    shown = parsed.display
    if "content" not in item:
        raise _Refused(
            f'Error: {shown} has no "content" (a listing holds none: export each memory with its content); skipped',
            shown,
        )
    content = item["content"]
    if content is None:
        return None
    if not isinstance(content, str):
        raise _Refused(f'Error: {shown}: "content" is not a string; skipped', shown)
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError:
        raise _Refused(f'Error: {shown}: "content" is not valid Unicode (a lone surrogate); skipped', shown) from None
    expected = item.get("content_sha256")
    if expected is not None:
        if not isinstance(expected, str) or not _SHA256_HEX.fullmatch(expected):
            raise _Refused(f'Error: {shown}: "content_sha256" is not 64 hexadecimal digits; skipped', shown)
        if expected.lower() != hashlib.sha256(data).hexdigest():
            raise _Refused(f"Error: {shown}: content_sha256 does not match the content; skipped", shown)
    for name in ("size_bytes", "content_size_bytes"):  # the listings' name, the versions' name
        size = item.get(name)
        if size is None:
            continue
        if not isinstance(size, int) or isinstance(size, bool):
            raise _Refused(f'Error: {shown}: "{name}" is not a whole number; skipped', shown)
        if size != len(data):
            raise _Refused(f"Error: {shown}: {name} is {size} but the content has {len(data)} bytes; skipped", shown)
    return parsed, content


def _items(data: bytes) -> Iterable[tuple[str, object]]:
    """Each memory of ``data`` with where it is (``line N`` or ``item N``); a refused line as
    a :class:`_Refused` in place of its item."""
    text_start = data.lstrip(b" \t\r\n\xef\xbb\xbf")[:1]
    if text_start in (b"[", b"{"):
        try:
            document = json.loads(data.decode("utf-8-sig"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
            document = error
        page = (
            isinstance(document, dict)
            and isinstance(document.get("data"), list)
            and "path" not in document
            and "content" not in document
        )  # a memory that happens to have a "data" field is a memory, not a page
        if isinstance(document, list) or page:
            items = document if isinstance(document, list) else document["data"]
            yield from ((f"item {number}", item) for number, item in enumerate(items, 1))
            return
        if text_start == b"[":  # an array that does not parse: one error, where it is
            if isinstance(document, json.JSONDecodeError):
                yield f"line {document.lineno}", _Refused(_json_error(document))
            elif isinstance(document, RecursionError):
                yield "line 1", _Refused(_TOO_DEEP)
            else:
                yield "line 1", _Refused("Error: not UTF-8 text; skipped")
            return
    for number, line in enumerate(data.split(b"\n"), 1):
        if number == 1 and line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        if not line.strip(b" \t\r"):
            continue
        try:
            yield f"line {number}", json.loads(line.decode("utf-8"))
        except UnicodeDecodeError:
            yield f"line {number}", _Refused("Error: not UTF-8 text; skipped")
        except json.JSONDecodeError as error:
            yield f"line {number}", _Refused(_json_error(error))
        except RecursionError:
            yield f"line {number}", _Refused(_TOO_DEEP)


def read_managed(data: bytes, *, base: str = ROOT, max_path_bytes: int = DEFAULT_MAX_PATH_BYTES) -> ManagedImport:
    """The memories of a managed export (JSON Lines, a JSON array, or a ``{"data": [...]}``
    page), to be written below ``base``; each refused line or item with its reason.

    A refused memory leaves the others alone: bad JSON or UTF-8, not an object, no path or a
    path the memory tool refuses, no content, a ``content_sha256`` or ``size_bytes`` that
    does not match the content, a duplicate of an earlier path, or a path that is a file
    where an earlier memory needs a directory (or the reverse). ``content: null`` (redacted)
    is counted in ``redacted``.
    """
    result = ManagedImport()
    files: dict[MemoryPath, str] = {}
    folders: dict[MemoryPath, str] = {}
    for where, item in _items(data):
        result.records += 1
        try:
            if isinstance(item, _Refused):
                raise item
            checked = _check(item, base, max_path_bytes)
            if checked is None:
                result.redacted.append(where)
                continue
            path, content = checked
            shown = path.display
            if path in files:
                raise _Refused(f"Error: {shown} is also at {files[path]}; skipped", shown)
            if path in folders:
                raise _Refused(f"Error: {shown} is a directory of the memory at {folders[path]}; skipped", shown)
            for ancestor in path.ancestors():
                if ancestor in files:
                    raise _Refused(
                        f"Error: {shown} needs {ancestor.display} to be a directory, "
                        f"but {files[ancestor]} is a memory there; skipped",
                        shown,
                    )
        except _Refused as refused:
            result.refused.append(Refusal(where, str(refused), refused.path))
            continue
        files[path] = where
        for ancestor in path.ancestors():
            folders.setdefault(ancestor, where)
        result.memories.append(Parsed(where, shown, content))
    return result
