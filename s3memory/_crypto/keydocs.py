"""Per-tenant key documents: the one home of their format and storage.

A tenant has up to three **key documents**, each one small JSON object under its internal
prefix (``{prefix}{tenant}/.s3memory/``), holding a random key wrapped by the deployment's
**master key** (a local 32-byte key, or a KMS key):

- ``tenant-key``: the tenant key, which wraps every data key in tenant-key mode (and, after
  a rotation, the retired keys objects may still use, and the kept keys old versions of
  objects may still use);
- ``names-key``: the AES-SIV key that seals file names (``encrypt_names=True``);
- ``history-key``: the AES-GCM key that seals the provenance in history records' names.

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
existing files (:class:`KeyDocumentSlot`), and the re-wrap under a new master key
(:func:`rewrapped_document`). What wraps them is ``master``, the cache they live in
``cache``; ``keyring.TenantKeyring``, ``names.NameCipher`` and ``historykey.HistoryKey`` say
what their document holds, and ``keychain`` hands the three their slots;
``_admin.lifecycle`` rotates and re-wraps.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
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
from .cache import KeyCache
from .envelope import CONTEXT_PREFIX, CONTEXT_TENANT, deployment_name
from .master import MasterKey

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
# What a malformed key document can raise while it is parsed (JSON, base64, numbers, nesting).
KEY_DOCUMENT_ERRORS = (ValueError, KeyError, TypeError, AttributeError, RecursionError, OverflowError, binascii.Error)
# A key document is a few hundred bytes (a tenant key with 16 retired keys: under 4 KiB;
# with 64 kept keys wrapped by KMS: under 40 KiB).
MAX_KEY_DOCUMENT_BYTES = 64 * 1024


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
