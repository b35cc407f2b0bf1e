"""A store's memories (``/v1/memory_stores/{id}/memories``): create, retrieve, update (content,
path, or both, with a ``content_sha256`` precondition), list by prefix and depth, delete.

A store is a tenant (``registry``): its memory ``/x/y.md`` is the tenant's memory file
``/memories/x/y.md``, written and read through :class:`~s3memory.MemoryAdmin` and the
memory's own commands, so every rule of s3memory holds (path limits, quotas, screens,
compare-and-swap, history records beside every change).

**Ids.** A memory's id is ``mem_`` and the 32 hex digits of its provenance ``file`` id: a
random 128-bit id sealed in every version, kept across edits and renames, so the id
survives a rename and is never stored in clear. A memory is found by its id through the
sealed search index, whose entries repeat each version's provenance (at most 3 round
trips, 1 when nothing changed). A version's id is ``memver_`` and 40 hex digits of a
SHA-256 over the store, the memory's path and its stored version's ETag: stable for that
version, and new for each change (a rename included). A file written without provenance (outside
s3memory) has none of these: it is listed with an id made from its object key (``mem_k``),
which an update or rename through the API replaces by a real one.

**Times.** ``updated_at`` is the version's provenance time (authenticated). ``created_at``
is the time of the memory's first version, which provenance keeps (``born``) across edits
and renames; a file whose first version predates ``born`` and was changed since has no
known birth, and its ``created_at`` is its current version's time (the server guide says so).
"""

from __future__ import annotations

import datetime
import hashlib
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._admin.manage import MemoryAdmin, MemoryInfo, NotExists, Sha256
from .._core.memory import EncryptedMemory
from .._errors import (
    InvalidCommandError,
    InvalidPathError,
    LimitExceededError,
    NotADirectoryConflict,
    PathExistsError,
    PathNotFoundError,
    PreconditionFailedError,
)
from .._paths import ROOT
from .._search.index import IndexedFile, current_files
from .http import ApiError, invalid, not_found
from .query import decode_page, encode_page, full_view, integer, page_size, parameters

#: The API's limits (the SDK's ``MemoryCreateParams``).
MAX_CONTENT_BYTES = 102_400
MAX_PATH_BYTES = 1024
MAX_SEGMENTS = 20
#: How often an unconditional update or delete re-finds its memory after losing a race.
ATTEMPTS = 5

_MEMORY_ID = re.compile(r"mem_(k?)([0-9a-f]{32})")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_NEVER_IN_PATHS = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_CREATE_FIELDS = frozenset({"path", "content"})
_UPDATE_FIELDS = frozenset({"path", "content", "precondition"})
_LIST_PARAMETERS = frozenset({"path_prefix", "depth", "limit", "page", "view"})


# -- paths, ids, times -----------------------------------------------------------------------
def api_path(value: object, field: str = "path") -> str:
    """``value`` if it is a path as the API allows one: ``/`` then 1 to 20 non-empty segments,
    none ``.`` or ``..``, no control or format characters nor U+2028/U+2029, NFC, at most
    1,024 bytes of UTF-8. ApiError 400 naming ``field`` otherwise."""
    if not isinstance(value, str):
        raise invalid(f"{field}: must be a string")
    if not value.startswith("/"):
        raise invalid(f"{field}: must start with '/'")
    if any(unicodedata.category(c) in _NEVER_IN_PATHS for c in value):
        raise invalid(f"{field}: must not contain control or format characters, or U+2028/U+2029")
    if len(value.encode("utf-8")) > MAX_PATH_BYTES:
        raise invalid(f"{field}: must be at most {MAX_PATH_BYTES} bytes of UTF-8")
    if unicodedata.normalize("NFC", value) != value:
        raise invalid(f"{field}: must be in Unicode Normalization Form C (NFC)")
    segments = value[1:].split("/")
    if not 1 <= len(segments) <= MAX_SEGMENTS:
        raise invalid(f"{field}: must have 1 to {MAX_SEGMENTS} segments")
    if any(segment in ("", ".", "..") for segment in segments):
        raise invalid(f"{field}: a segment must not be empty, '.' or '..'")
    return value


def _stored_path(path: str) -> str:
    return ROOT + path


def api_path_of(shown: str) -> str:
    """The API's path of a memory file shown as ``/memories/...``."""
    return shown[len(ROOT) :]


def memory_id(file_id: str | None, key: str) -> str:
    if file_id is not None:
        return "mem_" + file_id
    return "mem_k" + hashlib.sha256(b"s3memory memory key\0" + key.encode()).hexdigest()[:32]


def version_id(store_id: str, stored_path: str, etag: str) -> str:
    """``memver_`` and a hash of the store, the memory file's path (``/memories/...``) and the
    stored version's ETag (or what stands for it: ``versions``)."""
    material = "\0".join(("s3memory memory version v1", store_id, stored_path, etag.strip('"')))
    return "memver_" + hashlib.sha256(material.encode()).hexdigest()[:40]


def _time(us: int | None, fallback: float) -> str:
    moment = (
        datetime.datetime.fromtimestamp(us / 1_000_000, tz=datetime.timezone.utc)
        if us is not None
        else datetime.datetime.fromtimestamp(max(fallback, 0.0), tz=datetime.timezone.utc)
    )
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _fields(body: Mapping[str, Any], allowed: frozenset[str]) -> None:
    extra = sorted(set(body) - allowed)
    if extra:
        raise invalid(f"{extra[0]}: Extra inputs are not permitted")


def _content(value: object) -> str:
    if not isinstance(value, str):
        raise invalid("content: must be a string")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise invalid("content: must be valid UTF-8 text (no lone surrogates)") from None
    if size > MAX_CONTENT_BYTES:
        raise invalid(f"content: is {size} bytes; at most {MAX_CONTENT_BYTES} bytes of UTF-8")
    return value


def _precondition(value: object) -> str | None:
    """The expected content hash of an update's precondition, or None."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or value.get("type") != "content_sha256":
        raise invalid("precondition: must be {'type': 'content_sha256', 'content_sha256': ...}")
    extra = sorted(set(value) - {"type", "content_sha256"})
    if extra:
        raise invalid(f"precondition.{extra[0]}: Extra inputs are not permitted")
    expected = value.get("content_sha256")
    if not isinstance(expected, str) or not _SHA256.fullmatch(expected):
        raise invalid("precondition.content_sha256: must be 64 lowercase hexadecimal characters")
    return expected


# -- errors --------------------------------------------------------------------------------
def _path_taken(path: str) -> ApiError:
    return ApiError(409, "memory_path_conflict_error", f"A memory already exists at {path}.")


def _failed(memory_id_: str) -> ApiError:
    return ApiError(
        409, "memory_precondition_failed_error", f"The content_sha256 precondition failed for memory {memory_id_}."
    )


def _refused(error: Exception) -> ApiError:
    """What s3memory's own rules refused, as the API's 400 (or 409 for a path in the way)."""
    message = str(error).removeprefix("Error: ")
    if isinstance(error, (NotADirectoryConflict, PathExistsError)):
        return ApiError(409, "memory_path_conflict_error", message.replace(ROOT, "", 1))
    return invalid(message.replace(ROOT + "/", "/"))


#: (InvalidCommandError covers the screens' refusals: a secret, a write held for review.)
_REFUSED = (InvalidPathError, InvalidCommandError, LimitExceededError)


# -- the memories ----------------------------------------------------------------------------
@dataclass(frozen=True)
class _Found:
    """One memory as a listing found it."""

    id: str
    path: str  # the API's
    key: str
    etag: str
    size: int
    sha256: str
    text: str
    at_us: int | None
    created_us: int | None
    last_modified: float


def _found(file: IndexedFile, shown: str) -> _Found:
    return _Found(
        memory_id(file.file_id, file.key),
        api_path_of(shown),
        file.key,
        file.etag,
        file.size,
        file.sha256,
        file.text,
        file.at_us,
        file.created_us,
        file.last_modified,
    )


class Memories:
    """The memories endpoints, each given the store's memory as the request's caller opened
    it (``api`` checks the caller's scope and the store first)."""

    def _all(self, memory: EncryptedMemory) -> list[_Found]:
        files = current_files(memory.files, write_back=not memory.read_only, with_provenance=True)
        return [_found(f, memory.files.shown(f.path)) for f in files]

    def _find(self, memory: EncryptedMemory, memory_id_: str) -> _Found:
        if not isinstance(memory_id_, str) or not _MEMORY_ID.fullmatch(memory_id_):
            raise not_found(f"No memory with id {memory_id_[:80]!r}.")
        for found in self._all(memory):
            if found.id == memory_id_:
                return found
        raise not_found(f"No memory with id {memory_id_}.")

    def _shape(self, store_id: str, found: _Found, full: bool) -> dict[str, Any]:
        updated = _time(found.at_us, found.last_modified)
        created = _time(found.created_us, 0) if found.created_us is not None else updated
        return {
            "type": "memory",
            "id": found.id,
            "memory_store_id": store_id,
            "path": found.path,
            "content_sha256": found.sha256,
            "content_size_bytes": found.size,
            "created_at": created,
            "updated_at": updated,
            "memory_version_id": version_id(store_id, _stored_path(found.path), found.etag),
            "content": found.text if full else None,
        }

    def _written(self, store_id: str, memory: EncryptedMemory, info: MemoryInfo, text: str) -> _Found:
        key = memory.layout.key_for(memory.gate.parse(info.path))
        if info.etag is None:  # our own write, re-sent after a lost answer: look it up
            for found in self._all(memory):
                if found.key == key:
                    return found
            raise not_found(f"The memory at {api_path_of(info.path)} changed before it could be shown.")
        return _Found(
            memory_id(info.file_id, key),
            api_path_of(info.path),
            key,
            info.etag,
            info.size,
            info.sha256,
            text,
            info.changed_us,
            info.created_us,
            0.0,
        )

    # -- endpoints -------------------------------------------------------------------------
    def create(
        self, store_id: str, memory: EncryptedMemory, body: Mapping[str, Any], query: Sequence[tuple[str, str]]
    ) -> dict[str, Any]:
        full = full_view(parameters(query, frozenset({"view"})), "basic")
        _fields(body, _CREATE_FIELDS)
        if "path" not in body:
            raise invalid("path: Field required")
        if "content" not in body:
            raise invalid("content: Field required")
        path = api_path(body["path"])
        text = _content(body["content"])
        try:
            info = MemoryAdmin(memory).write(_stored_path(path), text, precondition=NotExists())
        except PreconditionFailedError:
            raise _path_taken(path) from None
        except (*_REFUSED, NotADirectoryConflict, PathExistsError) as error:
            raise _refused(error) from None
        return self._shape(store_id, self._written(store_id, memory, info, text), full)

    def retrieve(
        self, store_id: str, memory: EncryptedMemory, memory_id_: str, query: Sequence[tuple[str, str]]
    ) -> dict[str, Any]:
        full = full_view(parameters(query, frozenset({"view"})), "full")
        return self._shape(store_id, self._find(memory, memory_id_), full)

    def update(
        self,
        store_id: str,
        memory: EncryptedMemory,
        memory_id_: str,
        body: Mapping[str, Any],
        query: Sequence[tuple[str, str]],
    ) -> dict[str, Any]:
        """Content, path or both. With a precondition, the memory's content must have that
        hash when the change lands (compare-and-swap); a rename checks it just before moving.
        A change of both moves first (refused at once if the new path is taken), then
        writes the content conditionally on the hash the move kept."""
        full = full_view(parameters(query, frozenset({"view"})), "basic")
        _fields(body, _UPDATE_FIELDS)
        text = None if body.get("content") is None else _content(body["content"])
        new_path = None if body.get("path") is None else api_path(body["path"])
        expected = _precondition(body.get("precondition"))
        admin = MemoryAdmin(memory)
        for attempt in range(ATTEMPTS):
            found = self._find(memory, memory_id_)
            if expected is not None and found.sha256 != expected:
                raise _failed(memory_id_)
            moved = new_path is not None and new_path != found.path
            if not moved and (text is None or text == found.text):
                return self._shape(store_id, found, full)  # nothing changes: no new version
            try:
                if moved:
                    assert new_path is not None
                    self._move(memory, found, new_path)
                    found = self._find(memory, memory_id_)
                if text is None or text == found.text:
                    return self._shape(store_id, found, full)
                # Conditional on what was found (or the precondition): never another memory's content.
                info = admin.write(_stored_path(found.path), text, precondition=Sha256(expected or found.sha256))
            except PreconditionFailedError:
                if expected is not None:
                    raise _failed(memory_id_) from None
                if attempt + 1 == ATTEMPTS:
                    raise ApiError(409, "conflict_error", f"Memory {memory_id_} kept changing; try again.") from None
                continue
            except (*_REFUSED,) as error:
                raise _refused(error) from None
            return self._shape(store_id, self._written(store_id, memory, info, text), full)
        raise AssertionError("unreachable")

    @staticmethod
    def _move(memory: EncryptedMemory, found: _Found, new_path: str) -> None:
        source, target = _stored_path(found.path), _stored_path(new_path)
        try:
            memory.rename(source, target)
        except PathExistsError:
            raise _path_taken(new_path) from None
        except PathNotFoundError:
            raise PreconditionFailedError("moved meanwhile", path=source) from None
        except (*_REFUSED, NotADirectoryConflict) as error:
            raise _refused(error) from None

    def delete(
        self, store_id: str, memory: EncryptedMemory, memory_id_: str, query: Sequence[tuple[str, str]]
    ) -> dict[str, Any]:
        given = parameters(query, frozenset({"expected_content_sha256"}))
        expected = given.get("expected_content_sha256")
        if expected is not None and not _SHA256.fullmatch(expected):
            raise invalid("expected_content_sha256: must be 64 lowercase hexadecimal characters")
        admin = MemoryAdmin(memory)
        for _ in range(ATTEMPTS):
            found = self._find(memory, memory_id_)
            if expected is not None and found.sha256 != expected:
                raise _failed(memory_id_)
            try:
                admin.delete(_stored_path(found.path), expected_sha256=expected or found.sha256)
            except PreconditionFailedError:
                if expected is not None:
                    raise _failed(memory_id_) from None
                continue
            return {"type": "memory_deleted", "id": memory_id_}
        raise ApiError(409, "conflict_error", f"Memory {memory_id_} kept changing; try again.")

    def list(self, store_id: str, memory: EncryptedMemory, query: Sequence[tuple[str, str]]) -> dict[str, Any]:
        given = parameters(query, _LIST_PARAMETERS)
        full = full_view(given, "basic")
        prefix = given.get("path_prefix", "/")
        if prefix != "/":
            if not prefix.endswith("/"):
                raise invalid("path_prefix: must end with '/'")
            api_path(prefix[:-1], "path_prefix")
        depth = integer(given, "depth", 0, 0, MAX_SEGMENTS)
        limit = page_size(given, full)
        after = decode_page(given["page"]) if "page" in given else None
        items: list[tuple[str, dict[str, Any]]] = []
        prefixes: set[str] = set()
        for found in self._all(memory):
            if not found.path.startswith(prefix):
                continue
            below = found.path[len(prefix) :].split("/")
            if depth and len(below) > depth:
                rolled = prefix + "/".join(below[:depth]) + "/"
                if rolled not in prefixes:
                    prefixes.add(rolled)
                    items.append((rolled, {"type": "memory_prefix", "path": rolled}))
                continue
            items.append((found.path, self._shape(store_id, found, full)))
        items.sort(key=lambda item: item[0])
        if after is not None:
            items = [item for item in items if item[0] > after]
        page = items[:limit]
        more = len(items) > limit
        return {"data": [shape for _, shape in page], "next_page": encode_page(page[-1][0]) if more else None}
