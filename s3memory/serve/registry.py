"""The memory stores (``/v1/memory_stores``): create, retrieve, update, list, archive, delete.

A store is a tenant: its id (``memstore_`` and 26 lowercase base32 characters, 128 random
bits) is the s3memory user id its memories live under, so nothing of one store is reachable
through another's id. What the API says of a store (name, description, metadata, times)
lives in one reserved tenant, :data:`REGISTRY_TENANT`, one JSON file per store at
``/memories/stores/<id>.json``, encrypted like every memory file::

    {"v": 1, "id": "memstore_...", "name": "...", "description": "", "metadata": {},
     "created_at": "2026-11-28T13:03:00.123456Z", "updated_at": "...", "archived_at": null}

``REGISTRY_TENANT`` has a hyphen where every store id has an underscore, so no store can
ever be it. Changes to a record are compare-and-swap (``Sha256`` of the record read), retried
on a lost race, so concurrent updates all land; a create is ``NotExists``. A listing reads
every record from the registry's sealed search index (at most 3 round trips).

What is written goes through the registry tenant's memory as ``open_tenant`` made it,
screens included: under ``sensitive_data="refuse"`` a name holding what looks like a secret
is refused (400); under ``"redact"`` it is stored redacted, and answered as stored.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import datetime
import hashlib
import json
import logging
import os
import random
import re
import time
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._admin.lifecycle import erase_tenant
from .._admin.manage import MemoryAdmin, NotExists, Precondition, Sha256
from .._core.memory import EncryptedMemory
from .._errors import InvalidCommandError, PathNotFoundError, PreconditionFailedError
from .._search.index import current_files
from .http import ApiError, invalid, not_found
from .query import moment, parameters

log = logging.getLogger(__name__)

#: The tenant holding every store's record; not a store id (a hyphen, not an underscore).
REGISTRY_TENANT = "memstore-registry"
STORE_ID_PREFIX = "memstore_"
STORE_ID = re.compile(r"memstore_[a-z2-7]{26}")
RECORD_VERSION = 1
RECORDS_DIRECTORY = "stores"

MAX_NAME_CHARS = 255
MAX_DESCRIPTION_CHARS = 1024
MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY_CHARS = 64
MAX_METADATA_VALUE_CHARS = 512
DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
#: Tries of one change against concurrent ones: each lost race means another change landed,
#: so N concurrent changers all land within N tries.
CHANGE_ATTEMPTS = 10

_CREATE_FIELDS = frozenset({"name", "description", "metadata"})
_UPDATE_FIELDS = _CREATE_FIELDS
_LIST_PARAMETERS = frozenset({"limit", "page", "include_archived", "created_at[gte]", "created_at[lte]"})
_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")
_SHOWN_ID_CHARS = 80


def new_store_id() -> str:
    """A fresh store id: ``memstore_`` and 128 random bits in lowercase base32 (26 characters)."""
    return STORE_ID_PREFIX + base64.b32encode(os.urandom(16)).decode("ascii").rstrip("=").lower()


def is_store_id(value: object) -> bool:
    return isinstance(value, str) and STORE_ID.fullmatch(value) is not None


def stamp(moment: datetime.datetime) -> str:
    """RFC 3339 in UTC with microseconds and ``Z``: fixed width, so strings sort as times
    (``isoformat`` pads the year to 4 digits; ``strftime("%Y")`` does not everywhere)."""
    utc = moment.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return utc.isoformat(timespec="microseconds") + "Z"


def _now() -> str:
    return stamp(datetime.datetime.now(datetime.timezone.utc))


def _record_path(store_id: str) -> str:
    return f"/memories/{RECORDS_DIRECTORY}/{store_id}.json"


def _shown(store_id: object) -> str:
    text = store_id if isinstance(store_id, str) else repr(store_id)
    return text if len(text) <= _SHOWN_ID_CHARS else text[:_SHOWN_ID_CHARS] + "..."


def _no_store(store_id: object) -> ApiError:
    return not_found(f"No memory store with id {_shown(store_id)}.")


def public(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record in the API's ``memory_store`` shape."""
    return {
        "type": "memory_store",
        "id": record["id"],
        "name": record["name"],
        "description": record["description"],
        "metadata": dict(record["metadata"]),
        "created_at": record["created_at"],
        "updated_at": record["updated_at"],
        "archived_at": record["archived_at"],
    }


# -- validation ------------------------------------------------------------------------------


def _text(field: str, value: object, *, least: int, most: int) -> str:
    """A string field of ``least`` to ``most`` characters of valid Unicode (no lone surrogate,
    which could not be stored as UTF-8)."""
    if not isinstance(value, str):
        raise invalid(f"{field}: must be a string.")
    if not least <= len(value) <= most:
        bounds = f"at most {most}" if least == 0 else f"{least} to {most}"
        raise invalid(f"{field}: must be {bounds} characters long, not {len(value)}.")
    if any(unicodedata.category(ch) == "Cs" for ch in value):
        raise invalid(f"{field}: must be valid Unicode text (it holds a lone surrogate).")
    return value


def _name(value: object) -> str:
    name = _text("name", value, least=1, most=MAX_NAME_CHARS)
    if any(unicodedata.category(ch) == "Cc" for ch in name):
        raise invalid("name: must not contain control characters.")
    return name


def _description(value: object) -> str:
    return _text("description", value, least=0, most=MAX_DESCRIPTION_CHARS)


def _metadata_key(key: object) -> str:
    if not isinstance(key, str):
        raise invalid("metadata: keys must be strings.")
    return _text(f"metadata key {key[:MAX_METADATA_KEY_CHARS]!r}", key, least=1, most=MAX_METADATA_KEY_CHARS)


def _metadata_value(key: str, value: object) -> str:
    return _text(f"metadata[{key!r}]", value, least=0, most=MAX_METADATA_VALUE_CHARS)


def _pair_count(count: int) -> None:
    if count > MAX_METADATA_PAIRS:
        raise invalid(f"metadata: may hold at most {MAX_METADATA_PAIRS} key-value pairs, not {count}.")


def _metadata(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        raise invalid("metadata: must be an object of string keys and string values.")
    _pair_count(len(value))
    return {_metadata_key(key): _metadata_value(key, item) for key, item in value.items()}


def _metadata_patch(value: object) -> dict[str, str | None]:
    """An update's metadata: a string adds or replaces its key, null removes it."""
    if not isinstance(value, dict):
        raise invalid("metadata: must be an object of string keys and string or null values.")
    return {_metadata_key(key): None if item is None else _metadata_value(key, item) for key, item in value.items()}


def _fields(body: object, allowed: frozenset[str]) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise invalid("The request body must be a JSON object.")
    extra = sorted(str(key) for key in body if key not in allowed)
    if extra:
        raise invalid(f"{extra[0]}: Extra inputs are not permitted.")
    return body


@dataclass(frozen=True)
class _Changes:
    """An update's request: None for what it leaves as it is."""

    name: str | None
    description: str | None
    metadata: dict[str, str | None] | None

    @classmethod
    def of(cls, body: object) -> _Changes:
        fields = _fields(body, _UPDATE_FIELDS)
        name, description, metadata = (fields.get(key) for key in ("name", "description", "metadata"))
        return cls(
            None if name is None else _name(name),
            None if description is None else _description(description),
            None if metadata is None else _metadata_patch(metadata),
        )

    def applied(self, record: Mapping[str, Any]) -> dict[str, Any] | None:
        """``record`` changed, or None if nothing would change."""
        metadata = dict(record["metadata"])
        for key, value in (self.metadata or {}).items():
            if value is None:
                metadata.pop(key, None)
            else:
                metadata[key] = value
        _pair_count(len(metadata))
        changed = {
            **record,
            "name": record["name"] if self.name is None else self.name,
            "description": record["description"] if self.description is None else self.description,
            "metadata": metadata,
        }
        if all(changed[key] == record[key] for key in ("name", "description", "metadata")):
            return None
        return {**changed, "updated_at": _now()}


# -- the listing's query ---------------------------------------------------------------------


@dataclass(frozen=True)
class _ListQuery:
    limit: int
    after: tuple[str, str] | None  # the cursor: the (created_at, id) of the last store shown
    include_archived: bool
    created_from: str | None
    created_until: str | None

    @classmethod
    def of(cls, query: Sequence[tuple[str, str]]) -> _ListQuery:
        given = parameters(query, _LIST_PARAMETERS)
        return cls(
            _limit(given.get("limit")),
            None if given.get("page") is None else _decode_cursor(given["page"]),
            _switch("include_archived", given.get("include_archived", "false")),
            _bound("created_at[gte]", given.get("created_at[gte]")),
            _bound("created_at[lte]", given.get("created_at[lte]")),
        )

    def admits(self, record: Mapping[str, Any]) -> bool:
        created = record["created_at"]
        return (
            (self.include_archived or record["archived_at"] is None)
            and (self.created_from is None or created >= self.created_from)
            and (self.created_until is None or created <= self.created_until)
            and (self.after is None or (created, record["id"]) < self.after)
        )


def _limit(text: str | None) -> int:
    if text is None:
        return DEFAULT_PAGE_SIZE
    if not re.fullmatch(r"[0-9]{1,4}", text) or not 1 <= int(text) <= MAX_PAGE_SIZE:
        raise invalid(f"limit: must be an integer from 1 to {MAX_PAGE_SIZE}, not {text[:20]!r}.")
    return int(text)


def _switch(field: str, text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise invalid(f"{field}: must be true or false, not {text[:20]!r}.")
    return text.lower() == "true"


def _bound(field: str, text: str | None) -> str | None:
    """An RFC 3339 time as the records' stamps."""
    parsed = moment(field, text)
    return None if parsed is None else stamp(parsed)


def _encode_cursor(record: Mapping[str, Any]) -> str:
    position = json.dumps([record["created_at"], record["id"]], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(position).decode("ascii").rstrip("=")


def _decode_cursor(text: str) -> tuple[str, str]:
    try:
        position = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, binascii.Error, RecursionError):
        position = None
    if (
        not isinstance(position, list)
        or len(position) != 2
        or not isinstance(position[0], str)
        or not _STAMP.fullmatch(position[0])
        or not is_store_id(position[1])
    ):
        raise invalid("page: not a next_page value this API gave.")
    return position[0], position[1]


# -- records ---------------------------------------------------------------------------------


def _parsed_record(text: str, store_id: str) -> dict[str, Any] | None:
    """The record in ``text``, or None if it is not one of this format for ``store_id``."""
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        return None
    strings = ("name", "description", "created_at", "updated_at")
    if (
        not isinstance(record, dict)
        or record.get("v") != RECORD_VERSION
        or record.get("id") != store_id
        or not all(isinstance(record.get(key), str) for key in strings)
        or "archived_at" not in record
        or not isinstance(record["archived_at"], (str, type(None)))
        or not isinstance(record.get("metadata"), dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in record["metadata"].items())
    ):
        return None
    return record


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class StoreRegistry:
    """The memory stores, over s3memory's encrypted tenants (see the module docstring).

    Methods take and give plain dicts in the API's JSON shapes, and raise :class:`ApiError`
    for what the caller did wrong (400 ``invalid_request_error`` naming the field, 404
    ``not_found_error``); what the storage raises (``StorageError`` and the like) goes
    through for the caller to answer.

    Args:
        open_tenant: the memory of a user id; called with :data:`REGISTRY_TENANT` once, here,
            and with a store's id to erase it. The memories it gives are not closed here.
    """

    def __init__(self, open_tenant: Callable[[str], EncryptedMemory]) -> None:
        self._open_tenant = open_tenant
        self._registry = open_tenant(REGISTRY_TENANT)
        self._admin = MemoryAdmin(self._registry)

    # -- the API -----------------------------------------------------------------------------
    def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """A new store, from ``{"name", "description"?, "metadata"?}``."""
        fields = _fields(body, _CREATE_FIELDS)
        if "name" not in fields:
            raise invalid("name: Field required.")
        name = _name(fields["name"])
        description = _description(fields.get("description", ""))
        metadata = _metadata(fields.get("metadata", {}))
        now = _now()
        record = {
            "v": RECORD_VERSION,
            "id": new_store_id(),
            "name": name,
            "description": description,
            "metadata": metadata,
            "created_at": now,
            "updated_at": now,
            "archived_at": None,
        }
        return public(self._write(record, NotExists()))

    def retrieve(self, store_id: str) -> dict[str, Any]:
        return public(self._read(store_id)[0])

    def require(self, store_id: str, *, writable: bool) -> dict[str, Any]:
        """The store, for a request on its memories: 404 if there is none; with ``writable``,
        400 if it is archived (its memories can be read and deleted, not created or changed)."""
        record = self._read(store_id)[0]
        if writable and record["archived_at"] is not None:
            raise invalid(f"The memory store {store_id} is archived: its memories can no longer be created or changed.")
        return public(record)

    def update(self, store_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Change name, description (``""`` clears it) or metadata (a patch: a key set to
        null is removed); a field left out or null stays. 400 if the store is archived."""
        changes = _Changes.of(body)

        def change(record: dict[str, Any]) -> dict[str, Any] | None:
            if record["archived_at"] is not None:
                raise invalid(f"The memory store {store_id} is archived: an archived store cannot be updated.")
            return changes.applied(record)

        return public(self._change(store_id, change))

    def archive(self, store_id: str) -> dict[str, Any]:
        """Archive the store for good; an archived store is returned unchanged."""

        def change(record: dict[str, Any]) -> dict[str, Any] | None:
            if record["archived_at"] is not None:
                return None
            now = _now()
            return {**record, "archived_at": now, "updated_at": now}

        return public(self._change(store_id, change))

    def delete(self, store_id: str) -> dict[str, Any]:
        """Erase the store's tenant (its keys destroyed, every object and version deleted),
        then its record. If the erasure fails, the error goes through and the record stays:
        the store is still there, and deleting it again finishes the job."""
        self._read(store_id)
        erase_tenant(self._open_tenant(store_id))
        try:
            self._admin.delete(_record_path(store_id))
        except PathNotFoundError:
            pass  # a concurrent delete of the same store removed it first: it is deleted
        return {"type": "memory_store_deleted", "id": store_id}

    def list(self, query: Sequence[tuple[str, str]], *, only: frozenset[str] | None = None) -> dict[str, Any]:
        """A page of stores, newest first (by ``created_at``, then id), from the query's
        ``limit``, ``page``, ``include_archived``, ``created_at[gte]``, ``created_at[lte]``;
        with ``only``, of those stores alone (a scoped key's), filtered before the page is cut."""
        wanted = _ListQuery.of(query)
        found = sorted(
            (record for record in self._records() if wanted.admits(record) and (only is None or record["id"] in only)),
            key=lambda record: (record["created_at"], record["id"]),
            reverse=True,
        )
        page = found[: wanted.limit]
        next_page = _encode_cursor(page[-1]) if len(found) > wanted.limit else None
        return {"data": [public(record) for record in page], "next_page": next_page}

    # -- records -----------------------------------------------------------------------------
    def _read(self, store_id: str) -> tuple[dict[str, Any], str]:
        """The store's record and the SHA-256 of its text; 404 if there is none."""
        if not is_store_id(store_id):
            raise _no_store(store_id)
        try:
            text, info = self._admin.read(_record_path(store_id))
        except PathNotFoundError:
            raise _no_store(store_id) from None
        record = _parsed_record(text, store_id)
        if record is None:
            log.error("the registry record of a memory store does not parse")
            raise ApiError(500, "api_error", f"The record of memory store {store_id} is unreadable.")
        return record, info.sha256

    def _write(self, record: dict[str, Any], precondition: Precondition) -> dict[str, Any]:
        """Write ``record``; what was stored (a guard that redacts changes it)."""
        text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        try:
            info = self._admin.write(_record_path(record["id"]), text, precondition=precondition)
        except InvalidCommandError as exc:  # the sensitive-data guard or the instruction policy
            raise invalid(f"The memory store's name, description or metadata was refused: {exc}") from None
        if info.sha256 == _digest(text):
            return record
        return self._read(record["id"])[0]

    def _change(self, store_id: str, change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> dict[str, Any]:
        """Compare-and-swap ``change`` (None: nothing to write) on the record, re-read and
        re-applied after each lost race."""
        for attempt in range(CHANGE_ATTEMPTS):
            record, sha256 = self._read(store_id)
            changed = change(record)
            if changed is None:
                return record
            try:
                return self._write(changed, Sha256(sha256))
            except PreconditionFailedError:
                time.sleep(random.uniform(0, 0.01 * 2 ** min(attempt, 5)))
        raise ApiError(
            409,
            "conflict_error",
            f"The memory store {store_id} is being changed by others at the same time; the change was not applied. "
            "Try again.",
        )

    def _records(self) -> builtins.list[dict[str, Any]]:
        """Every store's record, from the registry's sealed index; unreadable ones left out."""
        records = []
        for file in current_files(self._registry.files, write_back=not self._registry.read_only):
            parts = file.path.parts
            if len(parts) != 2 or parts[0] != RECORDS_DIRECTORY or not parts[1].endswith(".json"):
                continue
            store_id = parts[1].removesuffix(".json")
            record = _parsed_record(file.text, store_id) if is_store_id(store_id) else None
            if record is None:
                log.error("a registry record of a memory store does not parse; it is left out of listings")
                continue
            records.append(record)
        return records
