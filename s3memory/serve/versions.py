"""A store's memory versions (``/v1/memory_stores/{id}/memory_versions``): list with its
filters, retrieve, redact.

They are s3memory's history (``EncryptedMemory.changes``, which needs a bucket that keeps
versions), in the API's words:

- ``created`` is ``created``; ``modified``, ``restored`` and the new side of a rename are
  ``modified`` (the API records a rename as a change of path); a deletion is ``deleted``.
  The old side of a rename (its delete marker) is not a version of the API.
- ``created_by`` is the version's actor: an ``api_actor`` for this server's keys
  (``apikey_...``), a ``user_actor`` for a person the Lambda face's token named (``u-...``),
  else a ``session_actor`` naming the actor as s3memory recorded it (the application that
  opened the memory for an agent: ``cli``, ``mcp``, ``session:abc``).
- A redacted version keeps its operation, actor and time, and says when and by whom it was
  redacted; its content, hash, size and path are null.

A version's id is ``memver_`` and 40 hex digits of a SHA-256 over the store, the memory path
and the stored version's ETag (a deletion: its delete marker's version id): the same id the
memory's ``memory_version_id`` gives its current version. Finding a version by its id lists
the store's history (one round of listings, plus a HEAD per version no record tells).

Redaction is s3memory's: every stored copy of that text in the store goes, after a sealed
record keeps who wrote it and when. It refuses a version whose text is some memory's current
content (409 ``conflict_error``): change or delete that memory first.
"""

from __future__ import annotations

import datetime
import hashlib
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from .._core.memory import EncryptedMemory
from .._errors import ConfigurationError, VersionNotFoundError
from .._history.entries import MemoryVersion
from .http import ApiError, invalid, not_found
from .memories import api_path_of, version_id
from .query import decode_page, encode_page, full_view, moment, page_size, parameters

_OPERATIONS = {"created": "created", "modified": "modified", "restored": "modified", "renamed": "modified"}
_LIST_PARAMETERS = frozenset(
    {
        "memory_id",
        "operation",
        "api_key_id",
        "session_id",
        "service_account_id",
        "created_at[gte]",
        "created_at[lte]",
        "limit",
        "page",
        "view",
    }
)
_READERS = 16
#: A person, as the Lambda face names the token's subject (``user_id_for_subject``).
_USER = re.compile(r"u-[a-z2-7]{32}")


@dataclass(frozen=True)
class _Version:
    """One version as the API shows it, before its content is read."""

    id: str
    entry: MemoryVersion
    operation: str
    memory_id: str | None


def _stamp(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _actor(actor: str | None) -> dict[str, str] | None:
    if actor is None:
        return None
    if actor.startswith("apikey_"):
        return {"type": "api_actor", "api_key_id": actor}
    if _USER.fullmatch(actor):
        return {"type": "user_actor", "user_id": actor}
    return {"type": "session_actor", "session_id": actor}


def _versions(store_id: str, entries: Sequence[MemoryVersion]) -> list[_Version]:
    found = []
    for entry in entries:
        if entry.redacted_at is None and entry.operation == "renamed" and entry.size is None:
            continue  # the old side of a rename: the API records a rename once, at its new path
        operation = "deleted" if entry.operation == "deleted" else _OPERATIONS.get(entry.operation)
        if operation is None:
            continue
        material = entry.etag if entry.operation != "deleted" else "deleted:" + entry.version
        memory_id = None if entry.file_id is None else "mem_" + entry.file_id
        found.append(_Version(version_id(store_id, entry.path, material), entry, operation, memory_id))
    return found


def _history(store_id: str, memory: EncryptedMemory) -> list[_Version]:
    try:
        entries = memory.changes()
    except ConfigurationError:
        raise ApiError(
            400, "invalid_request_error", "This store keeps no versions: its bucket's versioning is not enabled."
        ) from None
    return _versions(store_id, entries)


class Versions:
    """The versions endpoints over one store's memory (as ``Memories`` for the memories)."""

    def _shape(
        self, store_id: str, version: _Version, content: str | None, full: bool, deleted_or_gone: bool
    ) -> dict[str, Any]:
        entry = version.entry
        redacted = entry.redacted_at is not None
        data = None if content is None else content.encode("utf-8")
        return {
            "type": "memory_version",
            "id": version.id,
            "memory_id": version.memory_id,
            "memory_store_id": store_id,
            "operation": version.operation,
            "created_at": _stamp(entry.at),
            "created_by": _actor(entry.actor),
            "path": None if redacted else api_path_of(entry.path),
            "content": content if full and not deleted_or_gone else None,
            "content_sha256": None if data is None else hashlib.sha256(data).hexdigest(),
            "content_size_bytes": None if data is None else len(data),
            "redacted_at": None if entry.redacted_at is None else _stamp(entry.redacted_at),
            "redacted_by": _actor(entry.redacted_by),
        }

    @staticmethod
    def _content(memory: EncryptedMemory, version: _Version) -> str | None:
        """The version's text: None for a deletion or a redacted version (one GET otherwise)."""
        entry = version.entry
        if version.operation == "deleted" or entry.redacted_at is not None:
            return None
        try:
            return memory.read_version(entry.path, entry.version)
        except VersionNotFoundError:  # redacted since the listing
            return None

    def _shaped(
        self, store_id: str, memory: EncryptedMemory, versions: Sequence[_Version], full: bool
    ) -> list[dict[str, Any]]:
        if not versions:
            return []
        with ThreadPoolExecutor(min(_READERS, len(versions))) as pool:
            contents = list(pool.map(lambda v: self._content(memory, v), versions))
        pairs = zip(versions, contents, strict=True)
        return [self._shape(store_id, v, text, full, v.operation == "deleted") for v, text in pairs]

    def _find(self, store_id: str, memory: EncryptedMemory, version_id_: str) -> _Version:
        if not isinstance(version_id_, str) or not version_id_.startswith("memver_"):
            raise not_found(f"No memory version with id {str(version_id_)[:80]!r}.")
        for version in _history(store_id, memory):
            if version.id == version_id_:
                return version
        raise not_found(f"No memory version with id {version_id_[:80]}.")

    # -- endpoints -------------------------------------------------------------------------
    def list(self, store_id: str, memory: EncryptedMemory, query: Sequence[tuple[str, str]]) -> dict[str, Any]:
        given = parameters(query, _LIST_PARAMETERS)
        full = full_view(given, "basic")
        limit = page_size(given, full)
        operation = given.get("operation")
        if operation is not None and operation not in ("created", "modified", "deleted"):
            raise invalid("operation: must be 'created', 'modified' or 'deleted'")
        since = moment("created_at[gte]", given.get("created_at[gte]"))
        until = moment("created_at[lte]", given.get("created_at[lte]"))
        after = decode_page(given["page"]) if "page" in given else None
        versions = [v for v in _history(store_id, memory) if _admits(v, given, operation, since, until)]
        if after is not None:
            ids = [v.id for v in versions]
            if after not in ids:
                raise invalid("page: not a page token this server gave (or its version is gone)")
            versions = versions[ids.index(after) + 1 :]
        page = versions[:limit]
        next_page = encode_page(page[-1].id) if len(versions) > limit else None
        return {"data": self._shaped(store_id, memory, page, full), "next_page": next_page}

    def retrieve(
        self, store_id: str, memory: EncryptedMemory, version_id_: str, query: Sequence[tuple[str, str]]
    ) -> dict[str, Any]:
        full = full_view(parameters(query, frozenset({"view"})), "full")
        return self._shaped(store_id, memory, [self._find(store_id, memory, version_id_)], full)[0]

    def redact(self, store_id: str, memory: EncryptedMemory, version_id_: str) -> dict[str, Any]:
        version = self._find(store_id, memory, version_id_)
        entry = version.entry
        if entry.redacted_at is None:
            if version.operation == "deleted":
                raise invalid("A deletion has no content to redact.")
            try:
                memory.redact(entry.path, entry.version)
            except ConfigurationError:
                raise ApiError(
                    409,
                    "conflict_error",
                    f"Version {version_id_} holds what a memory of this store holds now (its current "
                    "version, or the same text elsewhere): change or delete that memory first, then redact.",
                ) from None
            except VersionNotFoundError:
                pass  # redacted meanwhile: answered as it is now
            version = self._find(store_id, memory, version_id_)
        return self._shaped(store_id, memory, [version], False)[0]


def _admits(
    version: _Version,
    given: Mapping[str, str],
    operation: str | None,
    since: datetime.datetime | None,
    until: datetime.datetime | None,
) -> bool:
    entry = version.entry
    actor = entry.actor or ""
    return (
        ("memory_id" not in given or version.memory_id == given["memory_id"])
        and (operation is None or version.operation == operation)
        and ("api_key_id" not in given or (actor.startswith("apikey_") and actor == given["api_key_id"]))
        and ("session_id" not in given or (_actor(actor) or {}).get("session_id") == given["session_id"])
        and "service_account_id" not in given  # no service accounts here: none of theirs
        and (since is None or entry.at >= since)
        and (until is None or entry.at <= until)
    )
