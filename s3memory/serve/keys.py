"""The server's API keys: scoped to stores and to reading or writing, stored only as hashes.

A key is ``s3m_<kid>_<secret>``: ``kid`` 16 random lowercase hex digits, ``secret`` 43
characters of base64url, 32 random bytes. Its id, ``apikey_<kid>``, is what the versions it
writes record as their actor and what the API calls ``api_key_id``. Each key is one file of
the registry tenant (:data:`~s3memory.serve.registry.REGISTRY_TENANT`), encrypted like
every memory file, at ``/memories/keys/<kid>.json``::

    {"v": 1, "id": "apikey_<kid>", "name": "ci", "created_at": "...", "revoked_at": null,
     "access": "read_write", "stores": null, "secret_sha256": "<64 hex digits>"}

``stores`` null: every store; else the ids of the stores it may reach. Only the SHA-256 of
the secret is stored, never the secret: the secret is 256 random bits, so its hash can be
neither reversed nor guessed, and a slow hash (bcrypt, scrypt), made for passwords that can
be guessed, would add only time to every request. The key is shown once, by :meth:`KeyRing.create`.

What a key may do (:class:`Principal`):

- an unscoped read-write key: everything, stores included (create, list all, retrieve,
  update, archive, delete);
- an unscoped read-only key: list and retrieve every store, read every store's memories
  and versions; no change anywhere;
- a scoped key: list (only its stores) and retrieve its stores, read their memories and
  versions, and with read-write create, change, delete and redact there; never create,
  update, archive or delete a store. A store outside its scope is answered as one that does
  not exist (404), so a key learns nothing of the stores it may not reach.

**Cache.** A successful read of a key's record is kept in the process for at most
:data:`CACHE_SECONDS` (30 s; at most :data:`CACHE_ENTRIES` keys), so a request does not
pay a GET for its key. A revocation therefore takes effect at once in the process that
revoked it, and within 30 s in every other (a server's ``serve-key revoke`` from the CLI).
"""

from __future__ import annotations

import base64
import builtins
import datetime
import hashlib
import hmac
import json
import logging
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from .._admin.manage import MemoryAdmin, NotExists, Precondition, Sha256
from .._core.memory import EncryptedMemory
from .._errors import ConfigurationError, InvalidCommandError, PathNotFoundError, PreconditionFailedError
from .._search.index import current_files
from .http import ApiError
from .registry import REGISTRY_TENANT, is_store_id, stamp

log = logging.getLogger(__name__)

Access: TypeAlias = Literal["read_write", "read_only"]
ACCESS_LEVELS: tuple[Access, ...] = ("read_write", "read_only")
KEY_PREFIX = "s3m_"
KEY_ID_PREFIX = "apikey_"
KEYS_DIRECTORY = "keys"
RECORD_VERSION = 1
MAX_NAME_CHARS = 100
#: Bounds a record's size (and so a GET's); a wider reach is an unscoped key.
MAX_STORES = 100
CACHE_SECONDS = 30.0
CACHE_ENTRIES = 1024
#: Tries of a revocation against concurrent ones: a lost race means another change landed.
CHANGE_ATTEMPTS = 5

_SECRET_BYTES = 32
_TOKEN = re.compile(r"s3m_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
_KEY_ID = re.compile(r"apikey_([0-9a-f]{16})")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_SHOWN_CHARS = 80


# -- who is asking ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Principal:
    """The key a request was made with, and what it may do (see the module docstring)."""

    key_id: str
    access: Access
    stores: frozenset[str] | None  # None: every store

    @classmethod
    def full(cls, key_id: str) -> Principal:
        """A key with full access to every store (the server's ``S3MEMORY_SERVE_KEY``)."""
        return cls(key_id, "read_write", None)

    def may_read(self, store_id: str) -> bool:
        return self.stores is None or store_id in self.stores

    def may_write(self, store_id: str) -> bool:
        return self.access == "read_write" and self.may_read(store_id)

    @property
    def may_manage_stores(self) -> bool:
        """Whether it may create, update, archive and delete stores."""
        return self.access == "read_write" and self.stores is None

    def require_read(self, store_id: str) -> None:
        """404 (as for a store that does not exist) if the store is out of its scope."""
        if not self.may_read(store_id):
            shown = store_id if len(store_id) <= _SHOWN_CHARS else store_id[:_SHOWN_CHARS] + "..."
            raise ApiError(404, "not_found_error", f"No memory store with id {shown}.")

    def require_write(self, store_id: str) -> None:
        """404 out of its scope; 403 if it may only read."""
        self.require_read(store_id)
        if not self.may_write(store_id):
            raise ApiError(403, "permission_error", f"The API key {self.key_id} may only read.")

    def require_manage(self) -> None:
        """403 unless it may create, update, archive and delete stores."""
        if not self.may_manage_stores:
            raise ApiError(
                403,
                "permission_error",
                f"The API key {self.key_id} may not create, update, archive or delete memory stores "
                "(only a read-write key for every store may).",
            )


# -- validation ------------------------------------------------------------------------------


def check_name(name: object) -> str:
    """``name`` if it can name a key: 1 to 100 printable characters, not only spaces."""
    if not isinstance(name, str):
        raise ConfigurationError("an API key's name must be a string")
    if not 1 <= len(name) <= MAX_NAME_CHARS or not name.strip():
        raise ConfigurationError(f"an API key's name must be 1 to {MAX_NAME_CHARS} characters, not {len(name)}")
    if not name.isprintable():
        raise ConfigurationError("an API key's name must be printable: no control, format or separator characters")
    return name


def check_access(access: object) -> Access:
    """``access`` if it is ``"read_write"`` or ``"read_only"``."""
    for level in ACCESS_LEVELS:
        if access == level:
            return level
    raise ConfigurationError(f"an API key's access must be read_write or read_only, not {str(access)[:40]!r}")


def check_stores(stores: Iterable[str] | None) -> builtins.list[str] | None:
    """The store ids a key may reach, sorted and without repeats; None (every store) as is."""
    if stores is None:
        return None
    if isinstance(stores, (str, bytes)):
        raise ConfigurationError("an API key's stores must be a list of memory store ids, not one string")
    given = builtins.list(stores)
    if not given:
        raise ConfigurationError("an API key's stores must name at least one memory store (none: every store)")
    for store_id in given:
        if not is_store_id(store_id):
            shown = str(store_id)[:_SHOWN_CHARS]
            raise ConfigurationError(f"{shown!r} is not a memory store id (memstore_ and 26 characters a-z, 2-7)")
    unique = sorted(set(given))
    if len(unique) > MAX_STORES:
        raise ConfigurationError(f"an API key may name at most {MAX_STORES} stores, not {len(unique)}")
    return unique


def kid_of(key_id: object) -> str:
    """The kid of ``key_id`` (``apikey_<kid>``)."""
    match = _KEY_ID.fullmatch(key_id) if isinstance(key_id, str) else None
    if match is not None:
        return match[1]
    if isinstance(key_id, str) and key_id.startswith(KEY_PREFIX):  # a key pasted for its id: never echoed
        token = _TOKEN.fullmatch(key_id)
        named = f": its id is {KEY_ID_PREFIX}{token[1]}" if token else ""
        raise ConfigurationError(f"that is an API key, not an API key id (apikey_ and 16 hexadecimal digits){named}")
    shown = str(key_id)[:_SHOWN_CHARS]
    raise ConfigurationError(f"{shown!r} is not an API key id (apikey_ and 16 hexadecimal digits)")


# -- records ---------------------------------------------------------------------------------


def _record_path(kid: str) -> str:
    return f"/memories/{KEYS_DIRECTORY}/{kid}.json"


def _secret_sha256(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def _parsed_record(text: str, kid: str) -> dict[str, Any] | None:
    """The record in ``text``, or None if it is not one of this format for ``kid``."""
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(record, dict):
        return None
    stores = record.get("stores")
    valid = (
        record.get("v") == RECORD_VERSION
        and record.get("id") == KEY_ID_PREFIX + kid
        and isinstance(record.get("name"), str)
        and isinstance(record.get("created_at"), str)
        and isinstance(record.get("revoked_at"), (str, type(None)))
        and record.get("access") in ACCESS_LEVELS
        and (stores is None or (isinstance(stores, list) and bool(stores) and all(map(is_store_id, stores))))
        and isinstance(record.get("secret_sha256"), str)
        and _SHA256_HEX.fullmatch(record["secret_sha256"]) is not None
    )
    return record if valid else None


def public(record: Mapping[str, Any]) -> dict[str, Any]:
    """What may be shown of a key: its record without the format's version or the hash."""
    return {
        "id": record["id"],
        "name": record["name"],
        "access": record["access"],
        "stores": None if record["stores"] is None else builtins.list(record["stores"]),
        "created_at": record["created_at"],
        "revoked_at": record["revoked_at"],
    }


def _principal(record: Mapping[str, Any]) -> Principal:
    stores = record["stores"]
    return Principal(record["id"], record["access"], None if stores is None else frozenset(stores))


@dataclass(frozen=True)
class _Cached:
    principal: Principal
    secret_sha256: bytes
    expires: float


class KeyRing:
    """The API keys in the registry tenant (see the module docstring).

    Args:
        open_tenant: the memory of a user id, as :class:`~s3memory.serve.registry.StoreRegistry`
            takes it; called once, here, with ``REGISTRY_TENANT``. Not closed here.
        clock: seconds, for the cache's expiry (``time.monotonic``; a test's own).

    Storage errors (``StorageError`` and the like) go through, from every method.
    """

    def __init__(
        self, open_tenant: Callable[[str], EncryptedMemory], *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._registry = open_tenant(REGISTRY_TENANT)
        self._admin = MemoryAdmin(self._registry)
        self._clock = clock
        self._cache: OrderedDict[str, _Cached] = OrderedDict()
        self._lock = threading.Lock()

    def create(
        self, name: str, *, access: Access = "read_write", stores: Iterable[str] | None = None
    ) -> tuple[dict[str, Any], str]:
        """A new key: its record as :func:`public` shows it, and the key itself, which is
        not stored and cannot be shown again.

        Raises:
            ConfigurationError: a bad name, access or store id; or a name the registry's
                sensitive-data guard refused.
        """
        checked_name, checked_access = check_name(name), check_access(access)
        checked_stores = check_stores(stores)
        for _ in range(CHANGE_ATTEMPTS):
            kid = secrets.token_hex(8)
            secret = base64.urlsafe_b64encode(secrets.token_bytes(_SECRET_BYTES)).decode("ascii").rstrip("=")
            record = {
                "v": RECORD_VERSION,
                "id": KEY_ID_PREFIX + kid,
                "name": checked_name,
                "created_at": stamp(datetime.datetime.now(datetime.timezone.utc)),
                "revoked_at": None,
                "access": checked_access,
                "stores": checked_stores,
                "secret_sha256": _secret_sha256(secret),
            }
            try:
                stored = self._write(kid, record, NotExists())
            except PreconditionFailedError:
                continue  # the kid is taken (64 random bits: all but never)
            return public(stored), f"{KEY_PREFIX}{kid}_{secret}"
        raise ConfigurationError("could not find a free API key id; try again")  # pragma: no cover - 2**-64 a try

    def list(self) -> builtins.list[dict[str, Any]]:
        """Every key, revoked ones too, oldest first, as :func:`public` shows them; a record
        that does not parse is left out (and logged)."""
        found = []
        for file in current_files(self._registry.files, write_back=not self._registry.read_only):
            parts = file.path.parts
            if len(parts) != 2 or parts[0] != KEYS_DIRECTORY or not parts[1].endswith(".json"):
                continue
            record = _parsed_record(file.text, parts[1].removesuffix(".json"))
            if record is None:
                log.error("an API key's record does not parse; it is left out")
                continue
            found.append(public(record))
        return sorted(found, key=lambda record: (record["created_at"], record["id"]))

    def revoke(self, key_id: str) -> dict[str, Any]:
        """Revoke the key for good (at once in this process, within ``CACHE_SECONDS`` in
        others); a revoked key is returned unchanged.

        Raises:
            ConfigurationError: ``key_id`` is not an API key id, or its record is unreadable.
            PathNotFoundError: no key has that id.
        """
        kid = kid_of(key_id)
        try:
            for _ in range(CHANGE_ATTEMPTS):
                record, sha256 = self._read(kid)
                if record is None:
                    raise ConfigurationError(f"the record of API key {key_id} is unreadable")
                if record["revoked_at"] is not None:
                    return public(record)
                revoked = {**record, "revoked_at": stamp(datetime.datetime.now(datetime.timezone.utc))}
                try:
                    return public(self._write(kid, revoked, Sha256(sha256)))
                except PreconditionFailedError:
                    continue  # changed since read: read again
            raise PreconditionFailedError(f"Error: API key {key_id} kept changing; it was not revoked. Try again.")
        finally:
            with self._lock:
                self._cache.pop(kid, None)

    def authenticate(self, token: str) -> Principal | None:
        """The key ``token`` is, if it is a valid key not revoked; None if it is malformed,
        unknown, revoked or its secret is wrong. The hashes are compared in constant time;
        a key's record is read at most once per ``CACHE_SECONDS``."""
        match = _TOKEN.fullmatch(token) if isinstance(token, str) else None
        if match is None:
            return None
        kid, given = match[1], hashlib.sha256(match[2].encode("ascii")).digest()
        now = self._clock()
        with self._lock:
            cached = self._cache.get(kid)
            if cached is not None and cached.expires <= now:
                del self._cache[kid]
                cached = None
        if cached is None:
            cached = self._fetch(kid, now)
            if cached is None:
                return None
        return cached.principal if hmac.compare_digest(given, cached.secret_sha256) else None

    # -- records -----------------------------------------------------------------------------
    def _fetch(self, kid: str, now: float) -> _Cached | None:
        """The key's live record, read and cached; None if there is none, it is revoked or
        unreadable (none of which is cached: a key created since is known at once)."""
        try:
            record, _ = self._read(kid)
        except PathNotFoundError:
            return None
        except InvalidCommandError:  # a directory at the record's path: not a key
            log.error("an API key's record is not a file; the key is refused")
            return None
        if record is None:
            log.error("an API key's record does not parse; the key is refused")
            return None
        if record["revoked_at"] is not None:
            return None
        cached = _Cached(_principal(record), bytes.fromhex(record["secret_sha256"]), now + CACHE_SECONDS)
        with self._lock:
            self._cache[kid] = cached
            self._cache.move_to_end(kid)
            while len(self._cache) > CACHE_ENTRIES:
                self._cache.popitem(last=False)
        return cached

    def _read(self, kid: str) -> tuple[dict[str, Any] | None, str]:
        """The key's record (None: unreadable) and the SHA-256 of its text.

        Raises:
            PathNotFoundError: no key has this kid.
        """
        try:
            text, info = self._admin.read(_record_path(kid))
        except PathNotFoundError:
            raise PathNotFoundError(f"Error: No API key with id {KEY_ID_PREFIX}{kid}.") from None
        return _parsed_record(text, kid), info.sha256

    def _write(self, kid: str, record: dict[str, Any], precondition: Precondition) -> dict[str, Any]:
        """Write ``record``; what was stored (a guard that redacts may change it)."""
        text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        try:
            info = self._admin.write(_record_path(kid), text, precondition=precondition)
        except InvalidCommandError as error:  # the sensitive-data guard or the instruction policy
            raise ConfigurationError(f"the API key's name was refused: {error}") from None
        if info.sha256 == hashlib.sha256(text.encode("utf-8")).hexdigest():
            return record
        stored, _ = self._read(kid)
        if stored is None:
            raise ConfigurationError(f"the record of API key {record['id']} was changed by the guard beyond reading")
        return stored
