"""Where data keys come from, and how they are wrapped for storage.

Two keyrings, one interface (:class:`Keyring`):

- :class:`TenantKeyring` (fast mode, the default): one random 256-bit key per tenant,
  stored wrapped (by a local master key or by KMS) at ``{tenant}/.s3memory/tenant-key``,
  created with ``If-None-Match: *`` so concurrent first writers agree, and cached in
  process. A tenant's first write makes it alongside its first round trip but stores it only
  when a data key wrapped under it is sealed into an object about to be written, so a command
  refused before it writes stores no key. Data keys are wrapped locally with AES-GCM under
  it (``x-amz-w`` = ``02``): once warm, zero KMS calls per command.
- :class:`KmsKeyring` (interoperable mode): one ``GenerateDataKey`` per write with the
  binding as encryption context (``x-amz-w`` = ``12``), exactly as the official S3
  Encryption Client does, so it can read our objects and we can read its objects.

Both bind every data key to (deployment, tenant, virtual path): a wrapped key moved to
another path, tenant or deployment fails to unwrap (see ``envelope.binding_context``).
The tenant key's document lives in ``keydocs``, the master keys in ``master``, the key
cache in ``cache``. The two keyrings share the ``Keyring`` interface and the wrapped-key
format, and ``TenantKeys`` (the opened document with its retired and kept keys) is the tenant
keyring's own state.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from .._errors import ConfigurationError, IntegrityError, PreconditionFailedError, TenantKeyError
from .._layout import TENANT_KEY
from ..stores import ObjectStore, StoredObject
from .cache import KeyCache
from .envelope import (
    CONTEXT_PREFIX,
    CONTEXT_TENANT,
    DATA_KEY_BYTES,
    KMS_RESERVED_CONTEXT_KEY,
    SUITE_ID,
    WRAP_AES_GCM,
    WRAP_KMS_CONTEXT,
    WrappedKey,
    canonical_json,
    deployment_name,
)
from .keydocs import (
    CONTEXT_KEY_ID,
    KEPT_KEYS_VERSION,
    KEY_DOCUMENT_ERRORS,
    KEY_DOCUMENT_VERSION,
    KeyDocument,
    KeyDocumentSlot,
    key_document_body,
    key_found_beside_files,
    parse_key_document,
)
from .master import GCM_NONCE_BYTES, MasterKey, kms_call

#: Events at INFO and DEBUG, never a key, a path or file content.
log = logging.getLogger("s3memory")

# AAD of a locally wrapped data key: the V3 AES/GCM keyring's cipher name, then the
# material description, so the description (tenant, path, key id) is authenticated.
_WRAP_AAD_PREFIX = b"AES/GCM/NoPadding\n"


class Keyring(ABC):
    """Makes, wraps and unwraps data keys bound to a binding context (deployment, tenant, path)."""

    algorithm: str
    #: True if :meth:`generate` makes a request (KMS), so callers send it alongside others.
    generates_remotely: bool = False

    def is_warm(self) -> bool:
        """True if unwrapping needs no request of its own (nothing to :meth:`prepare`)."""
        return True

    def prepare(self) -> None:  # noqa: B027 - optional hook
        """Fetch what unwrapping will need, so a caller can do it alongside another request."""

    @abstractmethod
    def generate(self, binding: dict[str, str]) -> tuple[bytes, WrappedKey]:
        """A fresh data key and its wrapped form for ``binding``."""

    @abstractmethod
    def wrap(self, data_key: bytes, binding: dict[str, str]) -> WrappedKey:
        """Wrap an existing data key for ``binding`` (used when a file is renamed)."""

    @abstractmethod
    def unwrap(self, wrapped: WrappedKey, binding: dict[str, str]) -> bytes:
        """The data key, if ``wrapped`` was made for exactly ``binding``; else IntegrityError."""

    def forget(self, tenant: str) -> None:  # noqa: B027 - optional hook
        """Drop every key of ``tenant`` this keyring cached (after the tenant was erased)."""

    @property
    def key_cache(self) -> KeyCache | None:
        """Where this keyring caches unwrapped keys, if anywhere."""
        return None


# --- tenant-key mode ----------------------------------------------------------------

MAX_RETIRED_KEYS = 16  # a rotation retires one key at a time; more means a corrupt document
# Each completed rotation keeps its retired key while old versions may use it; with versions
# kept forever they add up (one a rotation): 64 is years of monthly rotations, and under
# 40 KiB of document even wrapped by KMS. A rotation refuses to start beyond it.
MAX_KEPT_KEYS = 64
_MISSING_TENANT_KEY = (
    "Error: The encryption key of this memory is missing, so its files cannot be decrypted (was this user erased?)."
)
_CORRUPT_TENANT_KEY = "Error: The tenant key of this memory failed its integrity check."


@dataclass(frozen=True)
class RetiredKey:
    """A former tenant key, kept (wrapped) in the document while objects may still use it:
    a **retired** key while its rotation is under way (current objects may use it), a
    **kept** key (``kept_since`` set) once the rotation is complete, for as long as older
    versions of objects may use it."""

    kid: str
    wrapped: bytes
    retired_at: float  # seconds since the epoch, when a rotation replaced it
    kept_since: float | None = None  # when its rotation completed (kept keys only)


class TenantKeys:
    """A tenant key document, opened: the current key, which wraps every new data key, the
    retired keys that objects written before a rotation under way may still use, and the
    kept keys that older versions of objects may still use (each unwrapped by the master key
    on first use only, so a cold read costs one unwrap as before)."""

    def __init__(
        self,
        *,
        kid: str,
        key: bytes,
        wrapped: bytes,
        wrapper: str,
        unwrap_retired: Callable[[RetiredKey, int], bytes],
        retired: Iterable[RetiredKey] = (),
        kept: Iterable[RetiredKey] = (),
        etag: str = "",
        version: int = KEY_DOCUMENT_VERSION,
    ) -> None:
        self.version = version  # of the document: which context every key in it is wrapped under
        self.kid = kid
        self.key = key
        self.wrapped = wrapped
        self.wrapper = wrapper
        self.retired = tuple(retired)
        self.kept = tuple(kept)
        self.etag = etag  # of the stored document these keys came from ("" if not stored)
        self._unwrap_retired = unwrap_retired
        self._opened: dict[str, bytes] = {kid: key}
        self._lock = threading.Lock()

    def key_for(self, kid: str) -> bytes | None:
        """The key with id ``kid``, current, retired or kept; ``None`` if the document has none."""
        key = self._opened.get(kid)
        if key is not None:
            return key
        entry = next((r for r in (*self.retired, *self.kept) if r.kid == kid), None)
        if entry is None:
            return None
        with self._lock:
            key = self._opened.get(kid)
            if key is None:
                key = self._unwrap_retired(entry, self.version)
                self._opened[kid] = key
            return key

    def evolve(
        self,
        *,
        retired: Iterable[RetiredKey] | None = None,
        kept: Iterable[RetiredKey] | None = None,
        etag: str | None = None,
    ) -> TenantKeys:
        """The same current key with other retired or kept keys, or another ETag."""
        evolved = TenantKeys(
            kid=self.kid,
            key=self.key,
            wrapped=self.wrapped,
            wrapper=self.wrapper,
            unwrap_retired=self._unwrap_retired,
            retired=self.retired if retired is None else retired,
            kept=self.kept if kept is None else kept,
            etag=self.etag if etag is None else etag,
            version=self.version,
        )
        held = {r.kid for r in (*evolved.retired, *evolved.kept)}
        with self._lock:
            evolved._opened.update({kid: key for kid, key in self._opened.items() if kid in held})
        return evolved

    def document(self) -> bytes:
        """The stored form: ``{"v", "kid", "wrapper", "wrapped"}``; during a rotation,
        ``"retired": [{"kid", "wrapped", "retired_at"}]``; while old versions may need them,
        ``"kept": [{"kid", "wrapped", "retired_at", "kept_since"}]`` (every key wrapped by the
        master key). Version 3 if it has kept keys, else the version it was read as (1 or 2:
        version 3's keys are wrapped as version 2's)."""
        more: dict[str, Any] = {}
        if self.retired:
            more["retired"] = [
                {"kid": r.kid, "wrapped": base64.b64encode(r.wrapped).decode(), "retired_at": r.retired_at}
                for r in self.retired
            ]
        if self.kept:
            more["kept"] = [
                {
                    "kid": r.kid,
                    "wrapped": base64.b64encode(r.wrapped).decode(),
                    "retired_at": r.retired_at,
                    "kept_since": r.kept_since,
                }
                for r in self.kept
            ]
        if self.kept and self.version < KEY_DOCUMENT_VERSION:
            # Version 3 wraps as version 2 does: relabelling these keys would make them unreadable.
            raise ValueError("a version 1 document cannot keep keys: TenantKeyring.upgraded first")
        version = KEPT_KEYS_VERSION if self.kept else min(self.version, KEY_DOCUMENT_VERSION)
        return key_document_body(kid=self.kid, wrapper=self.wrapper, wrapped=self.wrapped, version=version, **more)


class TenantKeyring(Keyring):
    """Data keys wrapped locally under the tenant's own key (which a master key wraps).

    Each wrapped data key names the tenant key that wrapped it (``s3memory:kid`` in its
    material description). After a rotation (``s3memory._admin.lifecycle``) the document holds
    the new current key, the retired ones until no current object uses them, and then (as
    kept keys) until no version of an object uses them; a process whose
    cached document does not know an object's key id reads the document again, once.
    """

    algorithm = WRAP_AES_GCM

    def __init__(
        self,
        *,
        store: ObjectStore,
        tenant: str,
        tenant_key_object: str,
        master: MasterKey,
        cache: KeyCache,
        store_identity: str,
        prefix: str = "",
        files_prefix: str | None = None,
    ) -> None:
        self._files_prefix = files_prefix
        self.document = KeyDocumentSlot(
            store=store,
            tenant=tenant,
            purpose=TENANT_KEY,
            object_key=tenant_key_object,
            master=master,
            cache=cache,
            store_identity=store_identity,
            prefix=prefix,
        )

    @property
    def tenant(self) -> str:
        return self.document.tenant

    @property
    def object_key(self) -> str:
        """Where the tenant key document is stored."""
        return self.document.object_key

    @property
    def master(self) -> MasterKey:
        return self.document.master

    @property
    def key_cache(self) -> KeyCache:
        return self.document.cache

    def _tenant_context(self, key_id: str, version: int) -> dict[str, str]:
        return self.document.context(key_id, version)

    # -- the document, cached ---------------------------------------------------------
    def keys(self, *, create: bool) -> TenantKeys:
        """The tenant's keys, from the cache or the store.

        Only a write may create the key (``create=True``): a read that finds no key fails
        instead, so a lost key object never silently turns into a new key that would make
        every existing file unreadable.
        """

        def load_or_create() -> TenantKeys:
            loaded = self._load()
            if loaded is not None:
                return loaded
            if not create:
                raise TenantKeyError(_MISSING_TENANT_KEY)
            return self._create()

        return self.document.cached(load_or_create)

    def tenant_key(self, *, create: bool) -> tuple[str, bytes]:
        """(key id, key) of the tenant's current key, from the cache or the store."""
        keys = self.keys(create=create)
        return keys.kid, keys.key

    def reload(self, seen: TenantKeys | None) -> TenantKeys:
        """The document read again, unless another thread already did since ``seen`` was cached."""
        return self.document.refreshed(seen, self._load, _MISSING_TENANT_KEY)

    def install(self, keys: TenantKeys) -> None:
        """Cache ``keys`` as the tenant's document (after this process wrote it)."""
        self.document.remember(keys)

    def forget(self, tenant: str) -> None:
        if tenant == self.document.tenant:
            self.document.forget()

    def is_warm(self) -> bool:
        return self.document.is_cached()

    def prepare(self) -> None:
        try:
            self.keys(create=False)
        except TenantKeyError:
            pass  # reported by unwrap, if there turns out to be anything to unwrap

    # -- the document, stored ---------------------------------------------------------
    def _load(self) -> TenantKeys | None:
        stored = self.document.read()
        if stored is None:
            return None
        keys = self.open_document(stored)
        log.debug("loaded a tenant key document (kid %s, version %d)", keys.kid, keys.version)
        return keys

    def open_document(self, stored: StoredObject) -> TenantKeys:
        """Parse a stored tenant key document and unwrap its current key (retired keys are
        unwrapped when first needed). TenantKeyError if it is malformed or does not unwrap."""
        parsed = parse_key_document(stored.body, what="tenant key")
        key_id, version = parsed.kid, parsed.version
        try:
            listed = parsed.fields.get("retired", [])
            if not isinstance(listed, list) or len(listed) > MAX_RETIRED_KEYS:
                raise ValueError("retired keys")
            retired = [self._retired_entry(item) for item in listed]
            # Kept keys exist from version 3 on: a document of an older version that lists
            # them is not one s3memory wrote (and older releases would drop them).
            listed = parsed.fields.get("kept", [])
            if not isinstance(listed, list) or len(listed) > MAX_KEPT_KEYS or (listed and version < KEPT_KEYS_VERSION):
                raise ValueError("kept keys")
            kept = [self._retired_entry(item, kept=True) for item in listed]
        except KEY_DOCUMENT_ERRORS:
            raise TenantKeyError(_CORRUPT_TENANT_KEY) from None
        kids = [key_id, *(r.kid for r in (*retired, *kept))]
        if len(set(kids)) != len(kids):
            raise TenantKeyError(_CORRUPT_TENANT_KEY)
        return TenantKeys(
            kid=key_id,
            key=self.document.unwrap(parsed, parsed.wrapped, key_id, size=DATA_KEY_BYTES),
            wrapped=parsed.wrapped,
            wrapper=parsed.wrapper,
            unwrap_retired=self._unwrap_retired,
            retired=retired,
            kept=kept,
            etag=stored.etag,
            version=version,
        )

    @staticmethod
    def _retired_entry(item: object, *, kept: bool = False) -> RetiredKey:
        def seconds(value: object) -> float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError("retired key")
            return float(value)

        if not isinstance(item, dict):
            raise TypeError("retired key")
        kid = item["kid"]
        if not isinstance(kid, str):
            raise TypeError("retired key")
        wrapped = base64.b64decode(item["wrapped"], validate=True)
        return RetiredKey(kid, wrapped, seconds(item["retired_at"]), seconds(item["kept_since"]) if kept else None)

    def _unwrap_retired(self, entry: RetiredKey, version: int) -> bytes:
        # A retired key is wrapped like the current one, under its own id.
        document = KeyDocument({}, version, entry.kid, self.master.kind, entry.wrapped)
        return self.document.unwrap(document, entry.wrapped, entry.kid, size=DATA_KEY_BYTES)

    def new_keys(self, *, retired: Iterable[RetiredKey] = (), kept: Iterable[RetiredKey] = ()) -> TenantKeys:
        """A fresh random tenant key wrapped by the master key (not stored yet), in a
        document of the current version (``retired`` and ``kept`` must be wrapped for it)."""
        retired, kept = tuple(retired), tuple(kept)
        key_id = os.urandom(8).hex()
        while any(r.kid == key_id for r in (*retired, *kept)):
            key_id = os.urandom(8).hex()
        key = os.urandom(DATA_KEY_BYTES)
        return TenantKeys(
            kid=key_id,
            key=key,
            wrapped=self.master.wrap(key, self._tenant_context(key_id, KEY_DOCUMENT_VERSION)),
            wrapper=self.master.kind,
            unwrap_retired=self._unwrap_retired,
            retired=retired,
            kept=kept,
        )

    def upgraded(self, keys: TenantKeys) -> TenantKeys:
        """``keys`` as a document of the current version (every key wrapped again under that
        version's context), if it is of an older one: a version 1 document that comes to
        keep keys (version 3) must first be one whose keys are wrapped as version 2's."""
        if keys.version >= KEY_DOCUMENT_VERSION:
            return keys

        opened: dict[str, bytes] = {}
        for entry in (*keys.retired, *keys.kept):
            key = keys.key_for(entry.kid)  # unwrapped under the old context (or TenantKeyError)
            if key is None:  # pragma: no cover - a key of the document is always found
                raise TenantKeyError(_CORRUPT_TENANT_KEY)
            opened[entry.kid] = key

        def again(entry: RetiredKey) -> RetiredKey:
            context = self._tenant_context(entry.kid, KEY_DOCUMENT_VERSION)
            return replace(entry, wrapped=self.master.wrap(opened[entry.kid], context))

        upgraded = TenantKeys(
            kid=keys.kid,
            key=keys.key,
            wrapped=self.master.wrap(keys.key, self._tenant_context(keys.kid, KEY_DOCUMENT_VERSION)),
            wrapper=self.master.kind,
            unwrap_retired=self._unwrap_retired,
            retired=[again(r) for r in keys.retired],
            kept=[again(r) for r in keys.kept],
            etag=keys.etag,
        )
        upgraded._opened.update(opened)
        return upgraded

    def rotated(self, keys: TenantKeys, *, now: float) -> TenantKeys:
        """A new current key, with ``keys``' current key retired beside its retired ones
        (its kept keys stay kept).

        The result is a document of the current version: keys taken over from an older
        document are wrapped again under the current version's context (a version 1
        document has no kept keys).
        """
        retired = [*keys.retired, RetiredKey(keys.kid, keys.wrapped, now)]
        opened = {r.kid: keys.key_for(r.kid) for r in retired}
        if keys.version != KEY_DOCUMENT_VERSION:
            retired = [
                RetiredKey(
                    r.kid, self.master.wrap(key, self._tenant_context(r.kid, KEY_DOCUMENT_VERSION)), r.retired_at
                )
                for r in retired
                if (key := opened[r.kid]) is not None
            ]
        rotated = self.new_keys(retired=retired, kept=keys.kept)
        rotated._opened.update({kid: key for kid, key in opened.items() if key is not None})
        return rotated

    @property
    def _missing_beside_files(self) -> str:
        return (
            "Error: This memory has files but its encryption key is missing, so nothing can be written "
            "or read (was the key document deleted?). Restore "
            f"{self.object_key} from a backup or an earlier version, or finish erasing the user."
        )

    def _create(self) -> TenantKeys:
        made: list[TenantKeys] = []

        def body() -> bytes:
            made.append(self.new_keys())
            return made[0].document()

        found, etag = self.document.create(
            body, self._load, files_prefix=self._files_prefix, missing=self._missing_beside_files
        )
        if found is not None:
            log.info("another writer created this tenant's key first: using theirs (kid %s)", found.kid)
            return found
        log.info("created a tenant key (kid %s, wrapped by %s)", made[0].kid, made[0].wrapper)
        return made[0].evolve(etag=etag)

    def _store_new(self, keys: TenantKeys) -> TenantKeys:
        """Store ``keys`` (made by :meth:`new_keys` once a tenant was found to have neither a
        key document nor files) as its document, unless another writer was first: then theirs."""
        try:
            etag = self.document.put_new(keys.document())
        except PreconditionFailedError:
            found = self._load()
            if found is None:
                raise
            log.info("another writer created this tenant's key first: using theirs (kid %s)", found.kid)
            return found
        log.info("created a tenant key (kid %s, wrapped by %s)", keys.kid, keys.wrapper)
        return keys.evolve(etag=etag)

    # -- data keys --------------------------------------------------------------------
    def _description(self, binding: dict[str, str], key_id: str) -> dict[str, str]:
        return {**binding, CONTEXT_KEY_ID: key_id}

    def _key_for(self, key_id: str) -> bytes:
        keys = self.keys(create=False)
        key = keys.key_for(key_id)
        if key is None:
            # A key this process has not seen: the tenant key was rotated since it cached the
            # document. Read the document again (once); an unknown id is still unknown after.
            key = self.reload(keys).key_for(key_id)
            if key is None:
                raise IntegrityError()
        return key

    def generate(self, binding: dict[str, str]) -> tuple[bytes, WrappedKey]:
        """A fresh data key, wrapped under the tenant key. For a tenant without one, a new
        tenant key is made (and wrapped by the master key) now, but its document is stored
        only when the wrapped data key is first sealed into an object (see
        :class:`_WrappedOnSeal`): a command refused before it writes leaves no key document,
        and a new key wrapped by a mistaken master key is never stored by a command that fails."""
        data_key = os.urandom(DATA_KEY_BYTES)
        keys = self._keys_or_pending()
        if isinstance(keys, _PendingKeys):
            # Wrapped now under the new key (its nonce drawn now, as for a stored key); if
            # another writer stores a tenant key first, re-wrapped under theirs at the seal.
            made = self._wrapped(keys.keys, data_key, binding)

            def finish() -> WrappedKey:
                stored = self.document.cached(keys.stored)
                return made if stored.kid == keys.keys.kid else self._wrapped(stored, data_key, binding)

            return data_key, _WrappedOnSeal(finish)
        return data_key, self._wrapped(keys, data_key, binding)

    def wrap(self, data_key: bytes, binding: dict[str, str]) -> WrappedKey:
        return self._wrapped(self.keys(create=True), data_key, binding)

    def _keys_or_pending(self) -> TenantKeys | _PendingKeys:
        """The tenant's keys (cached or read); for a tenant without a document, a new key
        made with the checks a creation makes (no files without a key), not stored yet."""
        cached = self.document.cache.get(self.document.cache_key)
        if isinstance(cached, TenantKeys):
            return cached
        loaded = self._load()
        if loaded is not None:
            return self.document.cached(lambda: loaded)
        found = (
            key_found_beside_files(self.document.store, self._files_prefix, self._load, self._missing_beside_files)
            if self._files_prefix is not None
            else None
        )
        if found is not None:
            return self.document.cached(lambda: found)
        return _PendingKeys(self, self.new_keys())

    def _wrapped(self, keys: TenantKeys, data_key: bytes, binding: dict[str, str]) -> WrappedKey:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        key_id, tenant_key = keys.kid, keys.key
        description = self._description(binding, key_id)
        nonce = os.urandom(GCM_NONCE_BYTES)
        aad = _WRAP_AAD_PREFIX + canonical_json(description).encode()
        return WrappedKey(self.algorithm, nonce + AESGCM(tenant_key).encrypt(nonce, data_key, aad), description)

    def unwrap(self, wrapped: WrappedKey, binding: dict[str, str]) -> bytes:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        key_id = wrapped.context.get(CONTEXT_KEY_ID)
        if wrapped.algorithm != self.algorithm or not isinstance(key_id, str):
            raise IntegrityError()
        expected = self._description(binding, key_id)
        if wrapped.context != expected:
            raise IntegrityError()
        tenant_key = self._key_for(key_id)
        aad = _WRAP_AAD_PREFIX + canonical_json(expected).encode()
        nonce, ciphertext = wrapped.ciphertext[:GCM_NONCE_BYTES], wrapped.ciphertext[GCM_NONCE_BYTES:]
        try:
            return AESGCM(tenant_key).decrypt(nonce, ciphertext, aad)
        except (InvalidTag, ValueError):
            raise IntegrityError() from None

    def rewrap(self, wrapped: WrappedKey) -> WrappedKey:
        """``wrapped``'s data key wrapped under the current tenant key, for the same tenant and
        path (the description it was authenticated with, but the key id), bound to this
        deployment if it was not yet (binding version 1 becomes 2). IntegrityError if it does
        not unwrap: not this tenant's or deployment's, tampered with, or under a key the
        document no longer has."""
        binding = {k: v for k, v in wrapped.context.items() if k != CONTEXT_KEY_ID}
        deployment = deployment_name(self.document.prefix)
        if binding.get(CONTEXT_TENANT) != self.tenant or binding.get(CONTEXT_PREFIX, deployment) != deployment:
            raise IntegrityError()
        return self.wrap(self.unwrap(wrapped, binding), {**binding, CONTEXT_PREFIX: deployment})


class _PendingKeys:
    """A new tenant key (made and wrapped by the master key, not stored): stored by the first
    seal of a data key wrapped under it, once, unless another writer stored one first."""

    def __init__(self, keyring: TenantKeyring, keys: TenantKeys) -> None:
        self._keyring = keyring
        self.keys = keys

    def stored(self) -> TenantKeys:
        return self._keyring._store_new(self.keys)


class _WrappedOnSeal(WrappedKey):
    """A wrapped data key whose wrapping is finished when it is first read: when the data key
    is sealed into an object about to be written (``envelope.seal`` reads it then). Reading it
    stores the tenant's new key document first (or takes the one another writer stored), so
    the key exists before any object sealed under it lands, and only on a path that writes."""

    def __init__(self, finish: Callable[[], WrappedKey]) -> None:  # not the dataclass's
        object.__setattr__(self, "_finish", finish)
        object.__setattr__(self, "_done", None)
        object.__setattr__(self, "_finish_lock", threading.Lock())

    def _finished(self) -> WrappedKey:
        with self._finish_lock:  # type: ignore[attr-defined]
            done: WrappedKey | None = self._done  # type: ignore[attr-defined]
            if done is None:
                done = self._finish()  # type: ignore[attr-defined]
                object.__setattr__(self, "_done", done)
            return done

    @property
    def algorithm(self) -> str:
        return WRAP_AES_GCM

    @property
    def ciphertext(self) -> bytes:
        return self._finished().ciphertext

    @property
    def context(self) -> dict[str, str]:
        return self._finished().context


# --- KMS-per-object mode --------------------------------------------------------------


class KmsKeyring(Keyring):
    """One KMS data key per version of an object, wrapped with the binding as encryption context.

    Decrypted data keys are cached by their wrapped bytes and context (bounded, with a TTL),
    so reading the same object again costs no KMS call; a write costs one
    ``GenerateDataKey`` (sent alongside the edit's read).
    """

    algorithm = WRAP_KMS_CONTEXT
    generates_remotely = True

    def __init__(self, *, kms_client: Any, key_id: str, cache: KeyCache) -> None:
        if not isinstance(key_id, str) or not key_id:
            raise ConfigurationError("kms_key_id must be a non-empty string")
        self._kms = kms_client
        self.key_id = key_id
        self._cache = cache

    @staticmethod
    def _kms_context(binding: dict[str, str]) -> dict[str, str]:
        return {**binding, KMS_RESERVED_CONTEXT_KEY: str(SUITE_ID)}

    def _cache_key(self, wrapped: bytes, context: dict[str, str]) -> tuple[str, ...]:
        # The context is part of the key: a wrapped key seen under one path must not be
        # served from the cache for another path (KMS would refuse that context).
        return ("kms-data-key", self.key_id, hashlib.sha256(wrapped).hexdigest(), canonical_json(context))

    def generate(self, binding: dict[str, str]) -> tuple[bytes, WrappedKey]:
        context = self._kms_context(binding)
        response = kms_call(
            self._kms, "generate_data_key", KeyId=self.key_id, KeySpec="AES_256", EncryptionContext=context
        )
        data_key, blob = bytes(response["Plaintext"]), bytes(response["CiphertextBlob"])
        self._cache.put(self._cache_key(blob, context), data_key)
        return data_key, WrappedKey(self.algorithm, blob, context)

    def wrap(self, data_key: bytes, binding: dict[str, str]) -> WrappedKey:
        context = self._kms_context(binding)
        response = kms_call(self._kms, "encrypt", KeyId=self.key_id, Plaintext=data_key, EncryptionContext=context)
        blob = bytes(response["CiphertextBlob"])
        self._cache.put(self._cache_key(blob, context), data_key)
        return WrappedKey(self.algorithm, blob, context)

    @property
    def key_cache(self) -> KeyCache:
        return self._cache

    def forget(self, tenant: str) -> None:
        def of_tenant(cache_key: Hashable) -> bool:
            if not (
                isinstance(cache_key, tuple) and len(cache_key) == 4 and cache_key[:2] == ("kms-data-key", self.key_id)
            ):
                return False
            try:
                return bool(json.loads(cache_key[3]).get(CONTEXT_TENANT) == tenant)
            except (ValueError, TypeError, AttributeError):
                return False

        self._cache.discard_matching(of_tenant)

    def unwrap(self, wrapped: WrappedKey, binding: dict[str, str]) -> bytes:
        context = self._kms_context(binding)
        # The stored context must be exactly ours: KMS checks the context we pass, and we
        # pass the expected one, so a copied object fails in KMS; this check fails it early.
        if wrapped.algorithm != self.algorithm or wrapped.context != context:
            raise IntegrityError()
        cache_key = self._cache_key(wrapped.ciphertext, context)
        cached = self._cache.get(cache_key)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        response = kms_call(
            self._kms, "decrypt", KeyId=self.key_id, CiphertextBlob=wrapped.ciphertext, EncryptionContext=context
        )
        data_key = bytes(response["Plaintext"])
        self._cache.put(cache_key, data_key)
        return data_key
