"""Layer 3: where data keys come from, and how they are wrapped for storage.

Two keyrings, one interface (:class:`Keyring`):

- :class:`TenantKeyring` (fast mode, the default): one random 256-bit key per tenant,
  stored wrapped (by a local master key or by KMS) at ``{tenant}/.s3memory/tenant-key``,
  created with ``If-None-Match: *`` so concurrent first writers agree, and cached in
  process. Data keys are wrapped locally with AES-GCM under it (``x-amz-w`` = ``02``): once
  warm, zero KMS calls per command.
- :class:`KmsKeyring` (interoperable mode): one ``GenerateDataKey`` per write with the
  binding as encryption context (``x-amz-w`` = ``12``), exactly as the official S3
  Encryption Client does, so it can read our objects and we can read its objects.

Both bind every data key to (deployment, tenant, virtual path): a wrapped key moved to
another path, tenant or deployment fails to unwrap (see ``_envelope.binding_context``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import os
import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from ._envelope import (
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
from ._errors import ConfigurationError, IntegrityError, ObjectTooLargeError, PreconditionFailedError, TenantKeyError
from .stores import ObjectStore, StoredObject

#: Events at INFO and DEBUG, never a key, a path or file content.
log = logging.getLogger("s3memory")

T = TypeVar("T")

# Key documents (tenant key, names key) of version 1 wrap their keys under a context without
# the deployment; version 2, what s3memory writes now, adds ``s3memory:prefix``. Both are read.
KEY_DOCUMENT_VERSION = 2
KEY_DOCUMENT_VERSIONS = (1, 2)
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
        raise map_aws_error(exc, f"kms:{operation}", client) from exc


# --- tenant-key mode ----------------------------------------------------------------

MAX_RETIRED_KEYS = 16  # a rotation retires one key at a time; more means a corrupt document
_MISSING_TENANT_KEY = (
    "Error: The encryption key of this memory is missing, so its files cannot be decrypted (was this user erased?)."
)
_CORRUPT_TENANT_KEY = "Error: The tenant key of this memory failed its integrity check."


def key_document_context(tenant: str, purpose: str, key_id: str, *, prefix: str, version: int) -> dict[str, str]:
    """The context a master key wraps a tenant's internal key under (tenant key, names key),
    as the key document's ``version`` defines it (version 1 has no deployment)."""
    context = {CONTEXT_TENANT: tenant, CONTEXT_PURPOSE: purpose, CONTEXT_KEY_ID: key_id}
    if version >= 2:
        context[CONTEXT_PREFIX] = deployment_name(prefix)
    return context


# What a malformed key document can raise while it is parsed (JSON, base64, numbers, nesting).
KEY_DOCUMENT_ERRORS = (ValueError, KeyError, TypeError, AttributeError, RecursionError, OverflowError, binascii.Error)
# A key document is a few hundred bytes (a tenant key with 16 retired keys: under 4 KiB).
MAX_KEY_DOCUMENT_BYTES = 64 * 1024


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
    if isinstance(found, bool) or found not in KEY_DOCUMENT_VERSIONS:
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


@dataclass(frozen=True)
class RetiredKey:
    """A former tenant key, kept (wrapped) in the document while objects may still use it."""

    kid: str
    wrapped: bytes
    retired_at: float  # seconds since the epoch, when a rotation replaced it


class TenantKeys:
    """A tenant key document, opened: the current key, which wraps every new data key, and
    the retired keys that objects written before a rotation may still use (each unwrapped
    by the master key on first use only, so a cold read costs one unwrap as before)."""

    def __init__(
        self,
        *,
        kid: str,
        key: bytes,
        wrapped: bytes,
        wrapper: str,
        unwrap_retired: Callable[[RetiredKey, int], bytes],
        retired: Iterable[RetiredKey] = (),
        etag: str = "",
        version: int = KEY_DOCUMENT_VERSION,
    ) -> None:
        self.version = version  # of the document: which context every key in it is wrapped under
        self.kid = kid
        self.key = key
        self.wrapped = wrapped
        self.wrapper = wrapper
        self.retired = tuple(retired)
        self.etag = etag  # of the stored document these keys came from ("" if not stored)
        self._unwrap_retired = unwrap_retired
        self._opened: dict[str, bytes] = {kid: key}
        self._lock = threading.Lock()

    def key_for(self, kid: str) -> bytes | None:
        """The key with id ``kid``, current or retired; ``None`` if the document has none."""
        key = self._opened.get(kid)
        if key is not None:
            return key
        entry = next((r for r in self.retired if r.kid == kid), None)
        if entry is None:
            return None
        with self._lock:
            key = self._opened.get(kid)
            if key is None:
                key = self._unwrap_retired(entry, self.version)
                self._opened[kid] = key
            return key

    def evolve(self, *, retired: Iterable[RetiredKey] | None = None, etag: str | None = None) -> TenantKeys:
        """The same current key with other retired keys or another ETag."""
        evolved = TenantKeys(
            kid=self.kid,
            key=self.key,
            wrapped=self.wrapped,
            wrapper=self.wrapper,
            unwrap_retired=self._unwrap_retired,
            retired=self.retired if retired is None else retired,
            etag=self.etag if etag is None else etag,
            version=self.version,
        )
        kept = {r.kid for r in evolved.retired}
        with self._lock:
            evolved._opened.update({kid: key for kid, key in self._opened.items() if kid in kept})
        return evolved

    def document(self) -> bytes:
        """The stored form: ``{"v", "kid", "wrapper", "wrapped"}`` and, during a rotation,
        ``"retired": [{"kid", "wrapped", "retired_at"}]`` (every key wrapped by the master key)."""
        document: dict[str, Any] = {
            "v": self.version,
            "kid": self.kid,
            "wrapper": self.wrapper,
            "wrapped": base64.b64encode(self.wrapped).decode(),
        }
        if self.retired:
            document["retired"] = [
                {"kid": r.kid, "wrapped": base64.b64encode(r.wrapped).decode(), "retired_at": r.retired_at}
                for r in self.retired
            ]
        return json.dumps(document, sort_keys=True).encode()


class TenantKeyring(Keyring):
    """Data keys wrapped locally under the tenant's own key (which a master key wraps).

    Each wrapped data key names the tenant key that wrapped it (``s3memory:kid`` in its
    material description). After a rotation (``s3memory._lifecycle``) the document holds
    the new current key and the retired ones until no object uses them; a process whose
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
        self._store = store
        self._tenant = tenant
        self._prefix = prefix
        self._files_prefix = files_prefix
        self._object_key = tenant_key_object
        self._master = master
        self._cache = cache
        self._cache_key = ("tenant-key", store_identity, tenant_key_object, master.fingerprint)
        self._load_lock = threading.Lock()

    @property
    def tenant(self) -> str:
        return self._tenant

    @property
    def object_key(self) -> str:
        """Where the tenant key document is stored."""
        return self._object_key

    @property
    def master(self) -> MasterKey:
        return self._master

    @property
    def key_cache(self) -> KeyCache:
        return self._cache

    def _tenant_context(self, key_id: str, version: int) -> dict[str, str]:
        return key_document_context(self._tenant, "tenant-key", key_id, prefix=self._prefix, version=version)

    # -- the document, cached ---------------------------------------------------------
    def keys(self, *, create: bool) -> TenantKeys:
        """The tenant's keys, from the cache or the store.

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
                        raise TenantKeyError(_MISSING_TENANT_KEY)
                    cached = self._create()
                self._cache.put(self._cache_key, cached)
            return cached

    def tenant_key(self, *, create: bool) -> tuple[str, bytes]:
        """(key id, key) of the tenant's current key, from the cache or the store."""
        keys = self.keys(create=create)
        return keys.kid, keys.key

    def reload(self, seen: TenantKeys | None) -> TenantKeys:
        """The document read again, unless another thread already did since ``seen`` was cached."""
        with self._load_lock:
            cached = self._cache.get(self._cache_key)
            if cached is not None and cached is not seen:
                return cached  # type: ignore[no-any-return]
            loaded = self._load()
            if loaded is None:
                self._cache.discard(self._cache_key)
                raise TenantKeyError(_MISSING_TENANT_KEY)
            self._cache.put(self._cache_key, loaded)
            return loaded

    def install(self, keys: TenantKeys) -> None:
        """Cache ``keys`` as the tenant's document (after this process wrote it)."""
        self._cache.put(self._cache_key, keys)

    def forget(self, tenant: str) -> None:
        if tenant == self._tenant:
            self._cache.discard(self._cache_key)

    def is_warm(self) -> bool:
        return self._cache.get(self._cache_key) is not None

    def prepare(self) -> None:
        try:
            self.keys(create=False)
        except TenantKeyError:
            pass  # reported by unwrap, if there turns out to be anything to unwrap

    # -- the document, stored ---------------------------------------------------------
    def _load(self) -> TenantKeys | None:
        stored = get_key_document(self._store, self._object_key, what="tenant key")
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
        except KEY_DOCUMENT_ERRORS:
            raise TenantKeyError(_CORRUPT_TENANT_KEY) from None
        kids = [key_id, *(r.kid for r in retired)]
        if len(set(kids)) != len(kids):
            raise TenantKeyError(_CORRUPT_TENANT_KEY)
        return TenantKeys(
            kid=key_id,
            key=self._unwrap_with_master(parsed.wrapped, key_id, version, kind=parsed.wrapper),
            wrapped=parsed.wrapped,
            wrapper=parsed.wrapper,
            unwrap_retired=self._unwrap_retired,
            retired=retired,
            etag=stored.etag,
            version=version,
        )

    @staticmethod
    def _retired_entry(item: object) -> RetiredKey:
        if not isinstance(item, dict):
            raise TypeError("retired key")
        kid, retired_at = item["kid"], item["retired_at"]
        if not isinstance(kid, str) or isinstance(retired_at, bool) or not isinstance(retired_at, (int, float)):
            raise TypeError("retired key")
        return RetiredKey(kid, base64.b64decode(item["wrapped"], validate=True), float(retired_at))

    def _unwrap_with_master(self, wrapped: bytes, key_id: str, version: int, *, kind: str | None = None) -> bytes:
        context = self._tenant_context(key_id, version)
        kind = self._master.kind if kind is None else kind
        return unwrap_key_document_key(self._master, kind, wrapped, context, size=DATA_KEY_BYTES, what="tenant key")

    def _unwrap_retired(self, entry: RetiredKey, version: int) -> bytes:
        return self._unwrap_with_master(entry.wrapped, entry.kid, version)

    def new_keys(self, *, retired: Iterable[RetiredKey] = ()) -> TenantKeys:
        """A fresh random tenant key wrapped by the master key (not stored yet), in a
        document of the current version (``retired`` must be wrapped for that version)."""
        retired = tuple(retired)
        key_id = os.urandom(8).hex()
        while any(r.kid == key_id for r in retired):
            key_id = os.urandom(8).hex()
        key = os.urandom(DATA_KEY_BYTES)
        return TenantKeys(
            kid=key_id,
            key=key,
            wrapped=self._master.wrap(key, self._tenant_context(key_id, KEY_DOCUMENT_VERSION)),
            wrapper=self._master.kind,
            unwrap_retired=self._unwrap_retired,
            retired=retired,
        )

    def rotated(self, keys: TenantKeys, *, now: float) -> TenantKeys:
        """A new current key, with ``keys``' current key retired beside its retired ones.

        The result is a document of the current version: keys taken over from an older
        document are wrapped again under the current version's context.
        """
        retired = [*keys.retired, RetiredKey(keys.kid, keys.wrapped, now)]
        opened = {r.kid: keys.key_for(r.kid) for r in retired}
        if keys.version != KEY_DOCUMENT_VERSION:
            retired = [
                RetiredKey(
                    r.kid, self._master.wrap(key, self._tenant_context(r.kid, KEY_DOCUMENT_VERSION)), r.retired_at
                )
                for r in retired
                if (key := opened[r.kid]) is not None
            ]
        rotated = self.new_keys(retired=retired)
        rotated._opened.update({kid: key for kid, key in opened.items() if key is not None})
        return rotated

    def _create(self) -> TenantKeys:
        if self._files_prefix is not None:
            missing = (
                "Error: This memory has files but its encryption key is missing, so nothing can be written "
                "or read (was the key document deleted?). Restore "
                f"{self._object_key} from a backup or an earlier version, or finish erasing the user."
            )
            loaded = key_found_beside_files(self._store, self._files_prefix, self._load, missing)
            if loaded is not None:
                return loaded
        keys = self.new_keys()
        try:
            etag = self._store.put(self._object_key, keys.document(), {"s3memory": "tenant-key"}, if_none_match=True)
        except PreconditionFailedError:
            # Another writer created it first: use theirs, so both agree.
            loaded = self._load()
            if loaded is None:
                raise
            log.info("another writer created this tenant's key first: using theirs (kid %s)", loaded.kid)
            return loaded
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

        key_id = wrapped.context.get(CONTEXT_KEY_ID)
        if wrapped.algorithm != self.algorithm or not isinstance(key_id, str):
            raise IntegrityError()
        expected = self._description(binding, key_id)
        if wrapped.context != expected:
            raise IntegrityError()
        tenant_key = self._key_for(key_id)
        aad = _WRAP_AAD_PREFIX + canonical_json(expected).encode()
        nonce, ciphertext = wrapped.ciphertext[:_GCM_NONCE_BYTES], wrapped.ciphertext[_GCM_NONCE_BYTES:]
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
        deployment = deployment_name(self._prefix)
        if binding.get(CONTEXT_TENANT) != self._tenant or binding.get(CONTEXT_PREFIX, deployment) != deployment:
            raise IntegrityError()
        return self.wrap(self.unwrap(wrapped, binding), {**binding, CONTEXT_PREFIX: deployment})


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
        response = _kms_call(
            self._kms, "decrypt", KeyId=self.key_id, CiphertextBlob=wrapped.ciphertext, EncryptionContext=context
        )
        data_key = bytes(response["Plaintext"])
        self._cache.put(cache_key, data_key)
        return data_key
