"""Layer 3: where data keys come from, and how they are wrapped for storage.

Two keyrings, one interface (:class:`Keyring`):

- :class:`TenantKeyring` (fast mode, the default): one random 256-bit key per tenant,
  stored wrapped (by a local master key or by KMS) at ``{tenant}/.s3memory/tenant-key``,
  created with ``If-None-Match: *`` so concurrent first writers agree, and cached in
  process. Data keys are wrapped locally with AES-GCM under it (``x-amz-w`` = ``02``): once
  warm, zero KMS calls per command.
- :class:`KmsKeyring` (interoperable mode): one ``GenerateDataKey`` per new object with the
  binding as encryption context (``x-amz-w`` = ``12``), exactly as the official S3
  Encryption Client does, so it can read our objects and we can read its objects.

Both bind every data key to (tenant, virtual path): a wrapped key moved to another path or
tenant fails to unwrap.
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
from collections.abc import Hashable
from typing import Any

from ._envelope import (
    CONTEXT_TENANT,
    DATA_KEY_BYTES,
    KMS_RESERVED_CONTEXT_KEY,
    SUITE_ID,
    WRAP_AES_GCM,
    WRAP_KMS_CONTEXT,
    WrappedKey,
    canonical_json,
)
from ._errors import ConfigurationError, IntegrityError, PreconditionFailedError, TenantKeyError
from .stores import ObjectStore

TENANT_KEY_FORMAT_VERSION = 1
CONTEXT_KEY_ID = "s3memory:kid"
CONTEXT_PURPOSE = "s3memory:purpose"
# AAD of a locally wrapped data key: the V3 AES/GCM keyring's cipher name, then the
# material description, so the description (tenant, path, key id) is authenticated.
_WRAP_AAD_PREFIX = b"AES/GCM/NoPadding\n"
_GCM_NONCE_BYTES = 12


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


_PROCESS_KEY_CACHE = KeyCache()


def process_key_cache() -> KeyCache:
    """The cache tools use when none is given: one per process, so a warm Lambda reuses it."""
    return _PROCESS_KEY_CACHE


class Keyring(ABC):
    """Makes, wraps and unwraps data keys bound to a binding context (tenant + path)."""

    algorithm: str

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


# --- master keys: what wraps a tenant key ---------------------------------------------


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

        nonce = os.urandom(_GCM_NONCE_BYTES)
        return nonce + AESGCM(self._key).encrypt(nonce, key, canonical_json(context).encode())

    def unwrap(self, wrapped: bytes, context: dict[str, str]) -> bytes:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        try:
            nonce, ciphertext = wrapped[:_GCM_NONCE_BYTES], wrapped[_GCM_NONCE_BYTES:]
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
        response = _kms_call(self._kms, "encrypt", KeyId=self.key_id, Plaintext=key, EncryptionContext=context)
        return bytes(response["CiphertextBlob"])

    def unwrap(self, wrapped: bytes, context: dict[str, str]) -> bytes:
        response = _kms_call(self._kms, "decrypt", KeyId=self.key_id, CiphertextBlob=wrapped, EncryptionContext=context)
        return bytes(response["Plaintext"])


def _kms_call(client: Any, operation: str, **kwargs: Any) -> Any:
    from botocore.exceptions import BotoCoreError, ClientError

    from ._aws_errors import map_aws_error

    try:
        return getattr(client, operation)(**kwargs)
    except (ClientError, BotoCoreError) as exc:
        raise map_aws_error(exc, f"kms:{operation}") from exc


# --- tenant-key mode ----------------------------------------------------------------


class TenantKeyring(Keyring):
    """Data keys wrapped locally under the tenant's own key (which a master key wraps)."""

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
    ) -> None:
        self._store = store
        self._tenant = tenant
        self._object_key = tenant_key_object
        self._master = master
        self._cache = cache
        self._cache_key = ("tenant-key", store_identity, tenant_key_object, master.fingerprint)
        self._load_lock = threading.Lock()

    def _tenant_context(self, key_id: str) -> dict[str, str]:
        return {CONTEXT_TENANT: self._tenant, CONTEXT_PURPOSE: "tenant-key", CONTEXT_KEY_ID: key_id}

    def tenant_key(self, *, create: bool) -> tuple[str, bytes]:
        """(key id, key) of the tenant, from the cache or the store.

        Only a write may create the key (``create=True``): a read that finds no key fails
        instead, so a lost key object never silently turns into a new key that would make
        every existing file unreadable.
        """
        cached = self._cache.get(self._cache_key)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        with self._load_lock:
            cached = self._cache.get(self._cache_key)
            if cached is None:
                cached = self._load()
                if cached is None:
                    if not create:
                        raise TenantKeyError(
                            "Error: The encryption key of this memory is missing, so its files cannot be "
                            "decrypted (was this user erased?)."
                        )
                    cached = self._create()
                self._cache.put(self._cache_key, cached)
            return cached

    def is_warm(self) -> bool:
        return self._cache.get(self._cache_key) is not None

    def prepare(self) -> None:
        try:
            self.tenant_key(create=False)
        except TenantKeyError:
            pass  # reported by unwrap, if there turns out to be anything to unwrap

    def _load(self) -> tuple[str, bytes] | None:
        stored = self._store.get(self._object_key)
        if stored is None:
            return None
        try:
            document = json.loads(stored.body)
            version = document["v"]
            key_id, kind = document["kid"], document["wrapper"]
            wrapped = base64.b64decode(document["wrapped"], validate=True)
        except (ValueError, KeyError, TypeError, RecursionError, binascii.Error):
            raise TenantKeyError("Error: The tenant key of this memory failed its integrity check.") from None
        if version != TENANT_KEY_FORMAT_VERSION or not isinstance(key_id, str):
            raise TenantKeyError("Error: The tenant key of this memory failed its integrity check.")
        if kind != self._master.kind:
            raise ConfigurationError(
                f"Error: This memory's tenant key is wrapped by a {kind!r} master key, "
                f"but the tool was configured with a {self._master.kind!r} one."
            )
        try:
            key = self._master.unwrap(wrapped, self._tenant_context(key_id))
        except IntegrityError:
            raise TenantKeyError(
                "Error: The tenant key of this memory could not be unwrapped: wrong master key, "
                "or the key object was tampered with."
            ) from None
        if len(key) != DATA_KEY_BYTES:
            raise TenantKeyError("Error: The tenant key of this memory failed its integrity check.")
        return key_id, key

    def _create(self) -> tuple[str, bytes]:
        key_id = os.urandom(8).hex()
        key = os.urandom(DATA_KEY_BYTES)
        document = {
            "v": TENANT_KEY_FORMAT_VERSION,
            "kid": key_id,
            "wrapper": self._master.kind,
            "wrapped": base64.b64encode(self._master.wrap(key, self._tenant_context(key_id))).decode(),
        }
        body = json.dumps(document, sort_keys=True).encode()
        try:
            self._store.put(self._object_key, body, {"s3memory": "tenant-key"}, if_none_match=True)
        except PreconditionFailedError:
            # Another writer created it first: use theirs, so both agree.
            loaded = self._load()
            if loaded is None:
                raise
            return loaded
        return key_id, key

    def _description(self, binding: dict[str, str], key_id: str) -> dict[str, str]:
        return {**binding, CONTEXT_KEY_ID: key_id}

    def generate(self, binding: dict[str, str]) -> tuple[bytes, WrappedKey]:
        data_key = os.urandom(DATA_KEY_BYTES)
        return data_key, self.wrap(data_key, binding)

    def wrap(self, data_key: bytes, binding: dict[str, str]) -> WrappedKey:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        key_id, tenant_key = self.tenant_key(create=True)
        description = self._description(binding, key_id)
        nonce = os.urandom(_GCM_NONCE_BYTES)
        aad = _WRAP_AAD_PREFIX + canonical_json(description).encode()
        return WrappedKey(self.algorithm, nonce + AESGCM(tenant_key).encrypt(nonce, data_key, aad), description)

    def unwrap(self, wrapped: WrappedKey, binding: dict[str, str]) -> bytes:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if wrapped.algorithm != self.algorithm:
            raise IntegrityError()
        key_id, tenant_key = self.tenant_key(create=False)
        expected = self._description(binding, key_id)
        if wrapped.context != expected:
            raise IntegrityError()
        aad = _WRAP_AAD_PREFIX + canonical_json(expected).encode()
        nonce, ciphertext = wrapped.ciphertext[:_GCM_NONCE_BYTES], wrapped.ciphertext[_GCM_NONCE_BYTES:]
        try:
            return AESGCM(tenant_key).decrypt(nonce, ciphertext, aad)
        except (InvalidTag, ValueError):
            raise IntegrityError() from None


# --- KMS-per-object mode --------------------------------------------------------------


class KmsKeyring(Keyring):
    """One KMS data key per object, wrapped with the binding as encryption context.

    Decrypted data keys are cached by their wrapped bytes (bounded, with a TTL), so reading
    the same object again, or editing it, costs no KMS call.
    """

    algorithm = WRAP_KMS_CONTEXT

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
        response = _kms_call(
            self._kms, "generate_data_key", KeyId=self.key_id, KeySpec="AES_256", EncryptionContext=context
        )
        data_key, blob = bytes(response["Plaintext"]), bytes(response["CiphertextBlob"])
        self._cache.put(self._cache_key(blob, context), data_key)
        return data_key, WrappedKey(self.algorithm, blob, context)

    def wrap(self, data_key: bytes, binding: dict[str, str]) -> WrappedKey:
        context = self._kms_context(binding)
        response = _kms_call(self._kms, "encrypt", KeyId=self.key_id, Plaintext=data_key, EncryptionContext=context)
        blob = bytes(response["CiphertextBlob"])
        self._cache.put(self._cache_key(blob, context), data_key)
        return WrappedKey(self.algorithm, blob, context)

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
        response = _kms_call(
            self._kms, "decrypt", KeyId=self.key_id, CiphertextBlob=wrapped.ciphertext, EncryptionContext=context
        )
        data_key = bytes(response["Plaintext"])
        self._cache.put(cache_key, data_key)
        return data_key
