"""Per-tenant key documents, and what wraps them: the one home of their format and storage.

A tenant has up to two **key documents**, each one small JSON object under its internal
prefix (``{prefix}{tenant}/.s3memory/``), holding a random key wrapped by the deployment's
**master key** (a local 32-byte key, or a KMS key):

- ``tenant-key``: the tenant key, which wraps every data key in tenant-key mode (and, after
  a rotation, the retired keys objects may still use, and the kept keys old versions of
  objects may still use);
- ``names-key``: the AES-SIV key that seals file names (``encrypt_names=True``).

The format: ``{"v", "kid", "wrapper", "wrapped"}`` and, for the tenant key during a
rotation, ``"retired": [{"kid", "wrapped", "retired_at"}]``, JSON with sorted keys. Each key
is wrapped under :func:`key_document_context` (tenant, purpose, key id, and from version 2
the deployment's prefix). Version 1 (s3memory 0.1) is still read; version 2 is written.

Version 3 (written only by a tenant key document that holds them) adds **kept keys**:
``"kept": [{"kid", "wrapped", "retired_at", "kept_since"}]``, former tenant keys whose
rotation is complete (no current object uses them) but which older versions of objects, in a
store that keeps versions, may still use (``kept_since``: when the rotation finished, the
last moment an object version under the key was written or became noncurrent). Its keys are
wrapped exactly as in version 2. It has its own version number so that a release that does
not know kept keys refuses the document instead of dropping them while rewriting it (which
would strand every old version under them); a document without kept keys is still written
as version 2, readable by every release since 0.2.

Here, once: the parser (:func:`parse_key_document`), the bounded read, the unwrap, the
first-writer-wins creation with ``If-None-Match: *`` that refuses to start a new key beside
existing files (:class:`KeyDocumentSlot`), the cache they live in (:class:`KeyCache`), and the
re-wrap under a new master key (:func:`rewrapped_document`). ``_keys.TenantKeyring`` and
``_names.NameCipher`` say what their document holds; ``_lifecycle`` rotates and re-wraps.

Longer than most modules on purpose: everything the most sensitive stored format depends on
(its cache, the master keys that wrap it, the format, its storage) is in this one file, so
that reviewing it means reading one file.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

from .._errors import (
    ConfigurationError,
    IntegrityError,
    ObjectTooLargeError,
    PreconditionFailedError,
    StorageAccessDeniedError,
    TenantKeyError,
)
from .._layout import KEY_DOCUMENT_SUFFIX
from ..stores import ObjectStore, StoredObject
from .envelope import CONTEXT_PREFIX, CONTEXT_TENANT, canonical_json, deployment_name

T = TypeVar("T")

# Key documents of version 1 wrap their keys under a context without the deployment;
# version 2, what s3memory writes now, adds ``s3memory:prefix``. Version 3 is version 2 with
# kept keys (a tenant key document that has any); its keys are wrapped as in version 2. All
# three are read.
KEY_DOCUMENT_VERSION = 2
KEPT_KEYS_VERSION = 3
KEY_DOCUMENT_VERSIONS = (1, 2, 3)
CONTEXT_KEY_ID = "s3memory:kid"
CONTEXT_PURPOSE = "s3memory:purpose"
GCM_NONCE_BYTES = 12
# What a malformed key document can raise while it is parsed (JSON, base64, numbers, nesting).
KEY_DOCUMENT_ERRORS = (ValueError, KeyError, TypeError, AttributeError, RecursionError, OverflowError, binascii.Error)
# A key document is a few hundred bytes (a tenant key with 16 retired keys: under 4 KiB;
# with 64 kept keys wrapped by KMS: under 40 KiB).
MAX_KEY_DOCUMENT_BYTES = 64 * 1024


# --- the cache ------------------------------------------------------------------------------


class KeyCache:
    """A small thread-safe LRU with a time-to-live, for tenant keys and KMS data keys.

    Share one across tool instances (e.g. at module scope in a Lambda) so a warm container
    does not fetch a tenant's key again for every invocation. Entries are plaintext keys:
    the cache lives in process memory only.
    """

    def __init__(self, *, ttl_seconds: float = 900.0, max_entries: int = 4096) -> None:
        self.ttl_seconds = ttl_seconds
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            expires, value = entry
            if expires < time.monotonic():
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return value

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._entries[key] = (time.monotonic() + self.ttl_seconds, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def discard(self, key: Hashable) -> None:
        """Forget one entry (e.g. the key of an erased tenant)."""
        with self._lock:
            self._entries.pop(key, None)

    def discard_matching(self, predicate: Callable[[Hashable], bool]) -> int:
        """Forget every entry whose cache key satisfies ``predicate``; return how many."""
        with self._lock:
            doomed = [key for key in self._entries if predicate(key)]
            for key in doomed:
                del self._entries[key]
            return len(doomed)


_PROCESS_KEY_CACHE = KeyCache()


def process_key_cache() -> KeyCache:
    """The cache tools use when none is given: one per process, so a warm Lambda reuses it."""
    return _PROCESS_KEY_CACHE


# --- master keys: what wraps a tenant's key documents ------------------------------------


class MasterKey(ABC):
    """Wraps the per-tenant key. ``kind`` is recorded in the tenant key object."""

    kind: str

    @property
    @abstractmethod
    def fingerprint(self) -> str:
        """A non-secret identity, so caches never mix keys of different masters."""

    @abstractmethod
    def wrap(self, key: bytes, context: dict[str, str]) -> bytes: ...

    @abstractmethod
    def unwrap(self, wrapped: bytes, context: dict[str, str]) -> bytes: ...


def generate_master_key() -> bytes:
    """A new random 32-byte master key. Keep it secret; losing it loses every memory."""
    return os.urandom(32)


class LocalMasterKey(MasterKey):
    """A 32-byte secret held by the application (AES-256-GCM key wrap)."""

    kind = "local"

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, (bytes, bytearray)) or len(key) != 32:
            raise ConfigurationError("master_key must be exactly 32 bytes (use s3memory.generate_master_key())")
        if len(set(key)) == 1:
            raise ConfigurationError("master_key must be random bytes, not a repeated byte")
        self._key = bytes(key)

    @property
    def fingerprint(self) -> str:
        return "local:" + hashlib.sha256(b"s3memory master key id\n" + self._key).hexdigest()[:32]

    def wrap(self, key: bytes, context: dict[str, str]) -> bytes:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        nonce = os.urandom(GCM_NONCE_BYTES)
        return nonce + AESGCM(self._key).encrypt(nonce, key, canonical_json(context).encode())

    def unwrap(self, wrapped: bytes, context: dict[str, str]) -> bytes:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        try:
            nonce, ciphertext = wrapped[:GCM_NONCE_BYTES], wrapped[GCM_NONCE_BYTES:]
            return AESGCM(self._key).decrypt(nonce, ciphertext, canonical_json(context).encode())
        except (InvalidTag, ValueError):
            raise IntegrityError() from None


class KmsMasterKey(MasterKey):
    """An AWS KMS key wraps the tenant key (``Encrypt``/``Decrypt`` with the tenant as context)."""

    kind = "kms"

    def __init__(self, kms_client: Any, key_id: str) -> None:
        if not isinstance(key_id, str) or not key_id:
            raise ConfigurationError("kms_key_id must be a non-empty string")
        self._kms = kms_client
        self.key_id = key_id

    @property
    def fingerprint(self) -> str:
        return "kms:" + self.key_id

    def wrap(self, key: bytes, context: dict[str, str]) -> bytes:
        response = kms_call(self._kms, "encrypt", KeyId=self.key_id, Plaintext=key, EncryptionContext=context)
        return bytes(response["CiphertextBlob"])

    def unwrap(self, wrapped: bytes, context: dict[str, str]) -> bytes:
        response = kms_call(self._kms, "decrypt", KeyId=self.key_id, CiphertextBlob=wrapped, EncryptionContext=context)
        return bytes(response["Plaintext"])


def kms_call(client: Any, operation: str, **kwargs: Any) -> Any:
    from botocore.exceptions import BotoCoreError, ClientError

    from .._aws.errors import map_aws_error

    try:
        return getattr(client, operation)(**kwargs)
    except (ClientError, BotoCoreError) as exc:
        raise map_aws_error(exc, f"kms:{operation}", client) from exc


# --- key documents --------------------------------------------------------------------------


def key_document_context(tenant: str, purpose: str, key_id: str, *, prefix: str, version: int) -> dict[str, str]:
    """The context a master key wraps a tenant's internal key under (tenant key, names key),
    as the key document's ``version`` defines it (version 1 has no deployment)."""
    context = {CONTEXT_TENANT: tenant, CONTEXT_PURPOSE: purpose, CONTEXT_KEY_ID: key_id}
    if version >= 2:
        context[CONTEXT_PREFIX] = deployment_name(prefix)
    return context


@dataclass(frozen=True)
class KeyDocument:
    """A stored key document ``{"v", "kid", "wrapper", "wrapped", ...}``, parsed."""

    fields: dict[str, Any]
    version: int
    kid: str
    wrapper: str
    wrapped: bytes


def parse_key_document(body: bytes, *, what: str) -> KeyDocument:
    """Parse a stored key document of any readable version. TenantKeyError if it is malformed."""
    corrupt = f"Error: The {what} of this memory failed its integrity check."
    try:
        document = json.loads(body)
        found, key_id, kind = document["v"], document["kid"], document["wrapper"]
        wrapped = base64.b64decode(document["wrapped"], validate=True)
    except KEY_DOCUMENT_ERRORS:
        raise TenantKeyError(corrupt) from None
    # Exactly an int (3.0 and True compare equal to versions); version 3 is written only
    # with kept keys, so a version 3 without them is not a document s3memory wrote.
    if type(found) is not int or found not in KEY_DOCUMENT_VERSIONS:
        raise TenantKeyError(corrupt)
    if found == KEPT_KEYS_VERSION and not document.get("kept"):
        raise TenantKeyError(corrupt)
    if not isinstance(key_id, str) or not isinstance(kind, str):
        raise TenantKeyError(corrupt)
    return KeyDocument(document, found, key_id, kind, wrapped)


def get_key_document(store: ObjectStore, key: str, *, what: str) -> StoredObject | None:
    """A stored key document, read with a size bound (a huge object there is a corrupt document)."""
    try:
        return store.get(key, max_bytes=MAX_KEY_DOCUMENT_BYTES)
    except ObjectTooLargeError:
        raise TenantKeyError(f"Error: The {what} of this memory failed its integrity check.") from None


def key_found_beside_files(
    store: ObjectStore, files_prefix: str, load: Callable[[], T | None], missing: str
) -> T | None:
    """Before a tenant's key is created: ``None`` if the tenant has no files (a new key may be
    made); else the key as ``load`` finds it now (a concurrent first writer may have created
    both meanwhile), or ``TenantKeyError(missing)``. A new key beside existing files would
    orphan them for good if the old document came back, or hide what a writer deleted it to hide."""
    if not any(True for _ in store.list(files_prefix, limit=1)):
        return None
    found = load()
    if found is None:
        raise TenantKeyError(missing)
    return found


def unwrap_key_document_key(
    master: MasterKey, kind: str, wrapped: bytes, context: dict[str, str], *, size: int, what: str
) -> bytes:
    """The key a document holds, unwrapped by ``master`` (which must be of the document's
    ``kind``). ConfigurationError for the wrong kind of master key, TenantKeyError otherwise."""
    if kind != master.kind:
        raise ConfigurationError(
            f"Error: This memory's {what} is wrapped by a {kind!r} master key, "
            f"but the tool was configured with a {master.kind!r} one."
        )
    try:
        key = master.unwrap(wrapped, context)
    except IntegrityError:
        raise TenantKeyError(
            f"Error: The {what} of this memory could not be unwrapped: wrong master key, "
            "or the key object was tampered with."
        ) from None
    if len(key) != size:
        raise TenantKeyError(f"Error: The {what} of this memory failed its integrity check.")
    return key


def key_document_body(*, kid: str, wrapper: str, wrapped: bytes, version: int, **more: Any) -> bytes:
    """The stored form of a key document: ``{"v", "kid", "wrapper", "wrapped"}`` and any
    ``more`` fields (a tenant key's ``retired`` and ``kept``), JSON with sorted keys."""
    document = {"v": version, "kid": kid, "wrapper": wrapper, "wrapped": base64.b64encode(wrapped).decode(), **more}
    return json.dumps(document, sort_keys=True).encode()


class KeyDocumentSlot:
    """One tenant's key document of one purpose, in one store, under one master key.

    Knows where it is stored and how its keys are wrapped; reads it (bounded), creates it
    (first writer wins), and caches what its owner makes of it: the owner
    (``TenantKeyring``, ``NameCipher``) parses the fields that are its own.
    """

    def __init__(
        self,
        *,
        store: ObjectStore,
        tenant: str,
        purpose: str,
        object_key: str,
        master: MasterKey,
        cache: KeyCache,
        store_identity: str,
        prefix: str = "",
    ) -> None:
        self.store = store
        self.tenant = tenant
        self.purpose = purpose
        self.object_key = object_key
        self.master = master
        self.cache = cache
        self.prefix = prefix
        self.cache_key = (purpose, store_identity, object_key, master.fingerprint)
        self._lock = threading.Lock()

    def context(self, key_id: str, version: int) -> dict[str, str]:
        return key_document_context(self.tenant, self.purpose, key_id, prefix=self.prefix, version=version)

    # -- cached ---------------------------------------------------------------------------
    def cached(self, produce: Callable[[], T]) -> T:
        """The cached value, else ``produce()``'s, cached (one producer at a time; an
        exception caches nothing)."""
        value = self.cache.get(self.cache_key)
        if value is not None:
            return value  # type: ignore[no-any-return]
        with self._lock:
            value = self.cache.get(self.cache_key)
            if value is None:
                value = produce()
                self.cache.put(self.cache_key, value)
            return value

    def refreshed(self, seen: object, load: Callable[[], T | None], missing: str) -> T:
        """``load()`` again and cache it, unless another thread already did since ``seen``
        was cached; TenantKeyError(``missing``) (and nothing cached) if it is gone."""
        with self._lock:
            value = self.cache.get(self.cache_key)
            if value is not None and value is not seen:
                return value  # type: ignore[no-any-return]
            loaded = load()
            if loaded is None:
                self.cache.discard(self.cache_key)
                raise TenantKeyError(missing)
            self.cache.put(self.cache_key, loaded)
            return loaded

    def remember(self, value: object) -> None:
        self.cache.put(self.cache_key, value)

    def forget(self) -> None:
        self.cache.discard(self.cache_key)

    def is_cached(self) -> bool:
        return self.cache.get(self.cache_key) is not None

    # -- stored ---------------------------------------------------------------------------
    def read(self) -> StoredObject | None:
        """The stored document, read with a size bound (a huge object there is a corrupt one)."""
        return get_key_document(self.store, self.object_key, what=self.purpose.replace("-", " "))

    def unwrap(self, document: KeyDocument, wrapped: bytes, key_id: str, *, size: int) -> bytes:
        """A key of ``document`` (its current one, or a retired one with its own id)."""
        return unwrap_key_document_key(
            self.master,
            document.wrapper,
            wrapped,
            self.context(key_id, document.version),
            size=size,
            what=self.purpose.replace("-", " "),
        )

    def create(
        self, make_body: Callable[[], bytes], load: Callable[[], T | None], *, files_prefix: str | None, missing: str
    ) -> tuple[T | None, str]:
        """Store a new document unless one exists: ``(None, its ETag)`` if ``make_body()``
        was stored, else ``(what load() finds, "")`` (another writer was first).

        With ``files_prefix``, first refuses (``TenantKeyError(missing)``) to start a new key
        beside existing files (see :func:`key_found_beside_files`). ``make_body`` (which may
        call KMS to wrap the new key) runs only once that check has passed."""
        if files_prefix is not None:
            found = key_found_beside_files(self.store, files_prefix, load, missing)
            if found is not None:
                return found, ""
        try:
            etag = self.put_new(make_body())
        except PreconditionFailedError:
            # Another writer created it first: use theirs, so both agree.
            loaded = load()
            if loaded is None:
                raise
            return loaded, ""
        return None, etag

    def put_new(self, body: bytes) -> str:
        """Store ``body`` if no document is there (``If-None-Match: *``); its ETag."""
        return self.store.put(self.object_key, body, {"s3memory": self.purpose}, if_none_match=True)


def rewrapped_document(
    body: bytes, *, tenant: str, prefix: str, purpose: str, old: MasterKey, new: MasterKey
) -> bytes | None:
    """The document with every key in it wrapped by ``new``, as a document of the current
    version (bound to the deployment); None if it already is."""
    corrupt = TenantKeyError(f"Error: The {purpose} of this memory failed its integrity check.")
    document = parse_key_document(body, what=purpose).fields
    try:
        entries: list[dict[str, Any]] = [document, *document.get("retired", []), *document.get("kept", [])]
        wrapped = [(e["kid"], base64.b64decode(e["wrapped"], validate=True)) for e in entries]
        wrapper = document["wrapper"]
    except KEY_DOCUMENT_ERRORS:
        raise corrupt from None
    if not all(isinstance(kid, str) for kid, _ in wrapped):
        raise corrupt

    def context(kid: str, version: int) -> dict[str, str]:
        return key_document_context(tenant, purpose, kid, prefix=prefix, version=version)

    candidates = [m for m in (old, new) if m.kind == wrapper]
    for master in candidates:
        try:
            keys = [master.unwrap(blob, context(kid, document["v"])) for kid, blob in wrapped]
        except (IntegrityError, StorageAccessDeniedError):
            continue  # not this master key (KMS may answer "access denied" for a foreign ciphertext)
        if master is new and (old.kind != new.kind or old.fingerprint != new.fingerprint):
            return None  # already re-wrapped by an earlier run
        for entry, (kid, _), key in zip(entries, wrapped, keys, strict=True):
            entry["wrapped"] = base64.b64encode(new.wrap(key, context(kid, KEY_DOCUMENT_VERSION))).decode()
        # Version 3 only if it holds kept keys (both wrap under the same context).
        document["wrapper"] = new.kind
        document["v"] = KEPT_KEYS_VERSION if document.get("kept") else KEY_DOCUMENT_VERSION
        return json.dumps(document, sort_keys=True).encode()
    raise TenantKeyError(
        f"Error: The {purpose} of this memory could not be unwrapped by the old or the new master key."
    )


def is_key_document_cache_key(key: Hashable, internal_prefix: str) -> bool:
    """True for a cache entry about a key document under ``internal_prefix``: the document
    (``KeyDocumentSlot.cache_key``, any master) or what is known of it (``_memory`` caches
    that a names key is absent). Each such key names the document's object key third."""
    return (
        isinstance(key, tuple)
        and len(key) >= 3
        and isinstance(key[2], str)
        and key[2].startswith(internal_prefix)
        and key[2].endswith(KEY_DOCUMENT_SUFFIX)
    )
