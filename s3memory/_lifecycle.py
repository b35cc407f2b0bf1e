"""Key lifecycle: rotate a tenant's key, re-wrap it under a new master key, erase a tenant.

**Rotation** (:func:`rotate_tenant_key`, tenant-key mode). A data key never changes (the
bodies stay as they are); what changes is the tenant key that wraps it. One run:

1. Start: the tenant key document ``{tenant}/.s3memory/tenant-key`` gets a new current key,
   and the old one moves to its ``retired`` list (``{"kid", "wrapped", "retired_at"}``,
   still wrapped by the master key), in one PUT conditional on the document's ETag. From
   then on every process that reads the document wraps new data keys under the new key;
   an object names its key (``s3memory:kid`` in ``x-amz-m``), and readers look it up among
   the current and retired keys, reading the document again once if the id is unknown to
   them (a process that cached the document before the rotation).
   If the document already has retired keys, a rotation is under way: the run resumes it
   and does not start another.
2. Re-wrap: every object of the tenant (memory files and internal records such as rename
   intents; not the key documents) is listed, then, concurrently, HEAD and, if
   its key id is not the current one, its data key is unwrapped with the retired key and
   wrapped with the new one, and the object is copied onto itself with the new metadata
   (``CopyObject``, ``MetadataDirective=REPLACE``, ``x-amz-copy-source-if-match`` the HEAD's
   ETag): the body is not transferred and stays byte-identical. A copy that loses a race
   (the file was edited or deleted since the HEAD) re-reads that file, up to three times.
3. Drop: the retired keys leave the document (a PUT conditional on its ETag), but only when
   a whole pass found nothing left to re-wrap and ``retire_after`` seconds have passed since
   the rotation started. The wait is what makes dropping safe with other processes about:
   a process that cached the document before the rotation keeps wrapping new data keys
   under the old key until its :class:`~s3memory.KeyCache` entry expires (15 minutes by
   default), and an edit that read a file before its copy writes the file back under the
   key it read. A run started later (``rotate_tenant_key`` again) re-wraps what those wrote
   and then drops the keys. Pass ``retire_after=0`` when no other process can hold the old
   document (e.g. a single-process deployment, or all of them restarted).

At every instant every file is readable: an object is either under a key the document
holds, or being copied (the old or the new object, never half of one). Interrupted at any
point, the next run finishes the job. Requests: one GET and one PUT of the document to
start (one KMS ``Encrypt`` with a KMS master key, plus a ``Decrypt`` of the retired key by
each process that needs it), then per 1,000 objects one LIST, per object one HEAD and, if
it is not current yet, one COPY; a pass that re-wrapped anything is followed, when the
keys may be dropped, by a verifying pass (a LIST, a HEAD per object); one PUT to drop.

What rotation does not do: the data keys are the same, so anyone who already holds both
the old tenant key and an object's metadata from before the rotation (a backup, an old
version in a versioned bucket) can still decrypt that object. To make data unreadable,
erase it.

In KMS-per-object mode (``key_mode="kms"``) there is no tenant key: each data key is
wrapped by KMS itself, and rotating is KMS's own automatic key rotation, which keeps the
old key material so nothing needs re-wrapping.

**Re-wrapping under a new master key** (:func:`rewrap_tenant_key`): every key document of
the tenant (``.s3memory/*-key``: the tenant key and, with encrypted names, the names key)
is unwrapped with the memory's master key and wrapped with the new one; one LIST of the
internal prefix, then a GET and a conditional PUT per document. Nothing else changes.

**Erasure** (:func:`erase_tenant`, crypto-shredding). Step 1 destroys every version of
every key document of the tenant (``{tenant}/.s3memory/*-key``: ``ListObjectVersions``, then
``DeleteObjects`` with version ids) and evicts them from this process's key cache. From
then on no copy of the tenant's data decrypts with anything the system holds, wherever it
is (old versions, backups), even if step 2 fails. Step 2 deletes every object of the
tenant, under ``{prefix}{tenant}/memories/`` and ``{prefix}{tenant}/.s3memory/`` (the only
two prefixes a tenant owns, see ``TenantLayout``), every version and delete marker. Both
end in ``/``, so ``alice`` never touches ``alice2``, and a user ``app`` of a deployment
without a prefix never touches a deployment whose prefix is ``app/``. Running it
again finishes an interrupted erasure. Requests: per 1,000 object versions one
``ListObjectVersions`` and one ``DeleteObjects``, for step 1 (the key documents) and for
step 2 (everything else). Other processes that cached the tenant key keep it until their
cache entry expires. In KMS-per-object mode there is no per-tenant key to destroy: the
objects are deleted (every version), but the data is not crypto-shredded (any copy stays
decryptable by whoever may use the KMS key under the tenant's encryption context); the
report says ``shredded=False``.

Longer than most modules, and kept whole: the three operations act on the same two things
(the tenant key document and every object wrapped under it), share the request counting
and the resumable re-wrap of objects, and their crash-safety arguments (above) only hold
read together: each must leave the others a state they can resume from.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import _envelope as envelope
from ._errors import (
    ConfigurationError,
    ForeignObjectError,
    IntegrityError,
    PreconditionFailedError,
    S3MemoryError,
    StorageError,
    TenantKeyError,
)
from ._keydocs import (
    CONTEXT_KEY_ID,
    LocalMasterKey,
    MasterKey,
    get_key_document,
    is_key_document_cache_key,
    rewrapped_document,
)
from ._keys import TenantKeyring, TenantKeys
from ._layout import KEY_DOCUMENT_SUFFIX, TENANT_KEY, TenantLayout
from .stores import DelegatingStore, ObjectStore

log = logging.getLogger("s3memory")

if TYPE_CHECKING:
    from ._memory import EncryptedMemory

DEFAULT_RETIRE_AFTER = 900.0  # the default KeyCache time-to-live
REWRAP_ATTEMPTS = 3  # per object and pass, when its copy loses a race
MAX_PASSES = 3  # re-wrap passes per run (the later ones only verify, normally)
_PAGE = 1000  # keys per LIST page and per DeleteObjects
_TENANT_KEY_METADATA = {"s3memory": TENANT_KEY}


@dataclass
class RotationReport:
    """What one run of :func:`rotate_tenant_key` did.

    Attributes:
        tenant: the user.
        kid: the id of the current tenant key after the run.
        started: True if this run retired the previous key; False if it resumed a rotation
            that an earlier run started.
        rewrapped: objects whose data key this run re-wrapped (metadata-only copies).
        already_current: objects found under the current key by the first pass.
        raced: objects that changed under every attempt to copy them (left for a later run).
        skipped: objects the tenant key does not wrap (not s3memory envelopes, e.g. access
            markers; KMS-wrapped), or deleted meanwhile.
        unreadable: keys of objects whose data key does not unwrap (tampered with, or under
            a key the document no longer has): they were unreadable before and stay so.
        retired: ids of the retired keys still in the document (empty: rotation complete).
        dropped: ids of the retired keys this run removed from the document.
        retire_not_before: when the retired keys may be dropped (seconds since the epoch),
            if any remain.
        passes: re-wrap passes made.
        requests: store requests made, by kind (LIST counted per page of 1,000 keys).
    """

    tenant: str
    kid: str
    started: bool
    rewrapped: int = 0
    already_current: int = 0
    raced: int = 0
    skipped: int = 0
    unreadable: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    retire_not_before: float | None = None
    passes: int = 0
    requests: dict[str, int] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """True once no retired key is left: every object is under the current key."""
        return not self.retired


@dataclass
class MasterRewrapReport:
    """What :func:`rewrap_tenant_key` did: the key documents re-wrapped (or found done)."""

    tenant: str
    wrapper: str
    rewrapped: list[str] = field(default_factory=list)
    already_done: list[str] = field(default_factory=list)
    requests: dict[str, int] = field(default_factory=dict)


@dataclass
class ErasureReport:
    """What :func:`erase_tenant` did.

    Attributes:
        tenant: the user.
        shredded: True in tenant-key mode: the tenant's keys are destroyed, so no copy of its
            data (old versions, backups) decrypts any more. False in KMS-per-object mode,
            where there is no per-tenant key: the objects are deleted, but a copy kept
            elsewhere stays decryptable with the KMS key.
        key_versions_destroyed: versions of key documents deleted in step 1.
        versions_deleted: object versions (and delete markers) deleted in step 2.
        requests: store requests made, by kind (per page of 1,000 versions).
    """

    tenant: str
    shredded: bool
    key_versions_destroyed: int = 0
    versions_deleted: int = 0
    requests: dict[str, int] = field(default_factory=dict)


# --- plumbing -----------------------------------------------------------------------------


def _pages(count: int) -> int:
    return max(1, math.ceil(count / _PAGE))


class _CountingStore(DelegatingStore):
    """Delegates to a store, counting the requests each call makes (approximately for
    ``purge``: one listing and one batch delete per 1,000 versions)."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _count(self, kind: str, n: int = 1) -> None:
        with self._lock:
            self.counts[kind] += n

    def _call(self, verb: str, perform: Callable[[], Any]) -> Any:
        if verb in ("get", "head", "put", "copy"):
            self._count(verb.upper())
        result = perform()
        if verb == "list":
            self._count("LIST", _pages(len(result)))
        elif verb == "purge":
            self._count("LIST-VERSIONS", _pages(result))
            self._count("DELETE-MANY", math.ceil(result / _PAGE))
        return result

    def delete(self, keys: Sequence[str], *, if_match: Mapping[str, str] | None = None) -> None:
        self._count("DELETE-MANY", math.ceil(len(keys) / _PAGE))
        super().delete(keys, if_match=if_match)


def _tenant_keyring(memory: EncryptedMemory, doing: str) -> TenantKeyring:
    keyring = memory.keyring
    if not isinstance(keyring, TenantKeyring):
        raise ConfigurationError(
            f'Error: Cannot {doing} the tenant key of user {memory.layout.tenant!r}: it uses key_mode="kms", '
            "where there is no tenant key; each file's data key is wrapped by the KMS key itself. "
            "Rotate that with KMS automatic key rotation (EnableKeyRotation): KMS keeps the old key "
            "material, so existing files stay readable and nothing needs re-wrapping."
        )
    return keyring


def _restated(exc: S3MemoryError, message: str) -> S3MemoryError:
    """``exc``'s kind of error with a message that says where the operation stands."""
    if isinstance(exc, StorageError):
        return type(exc)(message)
    return exc  # a key or configuration problem says what it needs to already


# --- rotation -------------------------------------------------------------------------------


@dataclass
class _Pass:
    counts: Counter[str] = field(default_factory=Counter)
    unreadable: list[str] = field(default_factory=list)
    errors: list[S3MemoryError] = field(default_factory=list)


def rotate_tenant_key(
    memory: EncryptedMemory,
    *,
    workers: int = 16,
    retire_after: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RotationReport:
    """Rotate the tenant key of ``memory``'s user: a new key wraps every data key.

    Resumable: if interrupted, or if the retired key may not be dropped yet (see
    ``retire_after``), run it again; it resumes the rotation under way rather than start
    another. See the module docstring for the steps, the guarantees and the request count.

    Args:
        memory: the user's memory (tenant-key mode, local or KMS master key).
        workers: objects re-wrapped concurrently.
        retire_after: seconds after the rotation started before the retired key may leave
            the document; at least the ``ttl_seconds`` of every :class:`~s3memory.KeyCache`
            serving this user (default: 900, or this memory's cache TTL if longer).
        progress: called with ``(done, total)`` as each object of a pass is checked (a
            verifying pass, if there is one, counts from 0 again).

    Raises:
        ConfigurationError: in ``key_mode="kms"`` (use KMS key rotation), or bad arguments.
        TenantKeyError: the user has no tenant key, or it does not unwrap.
        StorageError: the store failed part-way; every file is still readable, and running
            the rotation again finishes it.
    """
    keyring = _tenant_keyring(memory, "rotate")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigurationError("workers must be a positive integer")
    if retire_after is None:
        retire_after = max(DEFAULT_RETIRE_AFTER, keyring.key_cache.ttl_seconds)
    elif isinstance(retire_after, bool) or not isinstance(retire_after, (int, float)) or not retire_after >= 0:
        raise ConfigurationError("retire_after must be a number of seconds, 0 or more")
    store = _CountingStore(memory.store)
    layout = memory.layout
    try:
        keys, started = _begin_rotation(store, keyring)
    except StorageError as exc:
        raise _restated(
            exc, f"Error: The rotation of the tenant key of user {layout.tenant!r} could not start: {exc} Run it again."
        ) from exc
    report = RotationReport(tenant=layout.tenant, kid=keys.kid, started=started)
    try:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="s3memory-rotate") as pool:
            for number in range(1, MAX_PASSES + 1):
                outcome = _rewrap_pass(store, layout, keyring, keys.kid, pool, progress)
                report.passes = number
                report.rewrapped += outcome.counts["rewrapped"]
                if number == 1:
                    report.already_current = outcome.counts["current"]
                report.raced, report.skipped = outcome.counts["raced"], outcome.counts["skipped"]
                report.unreadable = sorted(outcome.unreadable)
                if outcome.errors:
                    raise outcome.errors[0]
                if not keys.retired:
                    break
                report.retire_not_before = max(r.retired_at for r in keys.retired) + retire_after
                if retire_after and time.time() < report.retire_not_before:
                    break  # a later run drops them (0: now, whatever the clock that started the rotation said)
                if outcome.counts["rewrapped"] or outcome.counts["raced"]:
                    continue  # a verifying pass first: something may have written under the old key meanwhile
                before = {r.kid for r in keys.retired}
                keys = _drop_retired(store, keyring, keys)
                report.dropped = sorted(before - {r.kid for r in keys.retired})
                break
    except S3MemoryError as exc:
        raise _restated(
            exc,
            f"Error: The rotation of the tenant key of user {layout.tenant!r} was interrupted "
            f"({report.rewrapped} files re-wrapped so far): {exc} Every file is still readable (the key "
            "document keeps the retired key); run the rotation again to finish it.",
        ) from exc
    report.kid = keys.kid
    report.retired = [r.kid for r in keys.retired]
    if not report.retired:
        report.retire_not_before = None
    report.requests = dict(store.counts)
    log.info(
        "rotated a tenant key to kid %s: %d objects re-wrapped in %d passes, %d retired keys left",
        report.kid,
        report.rewrapped,
        report.passes,
        len(report.retired),
    )
    return report


def _begin_rotation(store: ObjectStore, keyring: TenantKeyring) -> tuple[TenantKeys, bool]:
    """The document with a new current key (or the rotation already under way); cached."""
    for _ in range(REWRAP_ATTEMPTS):
        stored = get_key_document(store, keyring.object_key, what="tenant key")
        if stored is None:
            raise TenantKeyError(
                "Error: This memory has no tenant key, so there is nothing to rotate "
                "(was nothing ever written, or was this user erased?)."
            )
        keys = keyring.open_document(stored)  # also checks that our master key opens it
        if keys.retired:
            keyring.install(keys)
            return keys, False
        rotated = keyring.rotated(keys, now=time.time())
        try:
            etag = store.put(keyring.object_key, rotated.document(), _TENANT_KEY_METADATA, if_match=stored.etag)
        except PreconditionFailedError:
            continue  # someone changed the document meanwhile (another rotation starting?): read it again
        rotated = rotated.evolve(etag=etag)
        keyring.install(rotated)
        return rotated, True
    raise PreconditionFailedError(
        "Error: The tenant key document kept changing while the rotation tried to start; try again."
    )


def _drop_retired(store: ObjectStore, keyring: TenantKeyring, keys: TenantKeys) -> TenantKeys:
    """``keys`` without retired keys, stored (conditionally) and cached; or, if the document
    changed meanwhile, whatever it holds now."""
    dropped = keys.evolve(retired=())
    try:
        etag = store.put(keyring.object_key, dropped.document(), _TENANT_KEY_METADATA, if_match=keys.etag)
    except PreconditionFailedError:
        stored = get_key_document(store, keyring.object_key, what="tenant key")
        if stored is None:
            raise TenantKeyError(
                "Error: The tenant key document disappeared during the rotation (was this user erased?)."
            ) from None
        current = keyring.open_document(stored)
        keyring.install(current)
        return current
    dropped = dropped.evolve(etag=etag)
    keyring.install(dropped)
    return dropped


def _rewrap_pass(
    store: ObjectStore,
    layout: TenantLayout,
    keyring: TenantKeyring,
    current_kid: str,
    pool: ThreadPoolExecutor,
    progress: Callable[[int, int], None] | None = None,
) -> _Pass:
    outcome = _Pass()
    try:
        keys = [
            info.key
            for prefix in layout.owned_prefixes
            for info in store.list(prefix)
            if layout.key_document_purpose(info.key) is None
        ]
    except S3MemoryError as exc:
        outcome.errors.append(exc)
        return outcome
    futures = [pool.submit(_rewrap_object, store, keyring, key, current_kid) for key in keys]
    for done, (key, future) in enumerate(zip(keys, futures, strict=True), start=1):
        try:
            result = future.result()
        except S3MemoryError as exc:
            outcome.errors.append(exc)
            continue
        finally:
            if progress is not None:
                progress(done, len(keys))
        outcome.counts[result] += 1
        if result == "unreadable":
            outcome.unreadable.append(key)
    return outcome


def _rewrap_object(store: ObjectStore, keyring: TenantKeyring, key: str, current_kid: str) -> str:
    """Bring one object under the current key; say what it took."""
    for _ in range(REWRAP_ATTEMPTS):
        info = store.head(key)
        if info is None:
            return "skipped"  # deleted meanwhile
        try:
            header = envelope.parse_header(info.metadata)
        except ForeignObjectError:
            return "skipped"
        except IntegrityError:
            return "unreadable"
        wrapped = header.wrapped_key
        if wrapped.algorithm != keyring.algorithm:
            return "skipped"
        if wrapped.context.get(CONTEXT_KEY_ID) == current_kid:
            return "current"
        try:
            rewrapped = keyring.rewrap(wrapped)
        except TenantKeyError:
            raise  # the document itself is the problem: stop, and say so
        except IntegrityError:
            return "unreadable"
        metadata = {**info.metadata, **envelope.metadata_for(rewrapped, header.message_id, header.commitment)}
        try:
            store.copy(key, key, metadata=metadata, if_match=info.etag)
        except PreconditionFailedError:
            continue  # edited or deleted since the HEAD: read it again
        return "rewrapped"
    return "raced"


# --- a new master key ---------------------------------------------------------------------


def rewrap_tenant_key(memory: EncryptedMemory, new_master: MasterKey | bytes) -> MasterRewrapReport:
    """Re-wrap the user's key documents (tenant key, names key) under ``new_master``.

    ``new_master``: 32 random bytes (a local master key) or a ``MasterKey``
    (``s3memory.KmsMasterKey(kms_client, key_id)``). Nothing but the documents
    changes. Afterwards open the memory with the new master key; processes that still use
    the old one keep working until their cached keys expire, then fail with a clear error.
    Resumable: documents already under the new master key are left as they are.
    """
    keyring = _tenant_keyring(memory, "re-wrap")
    new = LocalMasterKey(bytes(new_master)) if isinstance(new_master, (bytes, bytearray)) else new_master
    if not isinstance(new, MasterKey):
        raise ConfigurationError("new_master must be 32 random bytes or a MasterKey")
    old = keyring.master
    layout = memory.layout
    store = _CountingStore(memory.store)
    report = MasterRewrapReport(tenant=layout.tenant, wrapper=new.kind)
    purposes = {info.key: layout.key_document_purpose(info.key) for info in store.list(layout.internal_prefix)}
    for key, purpose in purposes.items():
        if purpose is None:
            continue
        stored = get_key_document(store, key, what=purpose)
        if stored is None:
            continue
        body = rewrapped_document(
            stored.body, tenant=layout.tenant, prefix=layout.prefix, purpose=purpose, old=old, new=new
        )
        if body is None:
            report.already_done.append(key)
            continue
        try:
            store.put(key, body, dict(stored.metadata), if_match=stored.etag)
        except PreconditionFailedError:
            raise PreconditionFailedError(
                f"Error: {key} changed while it was being re-wrapped; run the re-wrap again."
            ) from None
        report.rewrapped.append(key)
    report.requests = dict(store.counts)
    return report


# --- erasure --------------------------------------------------------------------------------


def _evict(memory: EncryptedMemory) -> None:
    """Forget the user's keys in this process: the tenant key (or KMS data keys) and any
    other key document cached under the same convention (the names key)."""
    layout = memory.layout
    memory.keyring.forget(layout.tenant)
    cache = memory.keyring.key_cache
    if cache is not None:
        cache.discard_matching(lambda key: is_key_document_cache_key(key, layout.internal_prefix))


def erase_tenant(memory: EncryptedMemory) -> ErasureReport:
    """Erase ``memory``'s user: destroy its keys (every version), then delete every object
    under the two prefixes it owns (every version). Resumable: run it again to finish. See the module
    docstring; in KMS-per-object mode the report says ``shredded=False``.

    Raises:
        StorageError: a request failed; the message says whether the keys are destroyed
            already (then nothing is readable any more) and that running again finishes.
    """
    layout = memory.layout
    store = _CountingStore(memory.store)
    shredded = isinstance(memory.keyring, TenantKeyring)
    report = ErasureReport(tenant=layout.tenant, shredded=shredded)
    try:
        report.key_versions_destroyed = store.purge(layout.internal_prefix, suffix=KEY_DOCUMENT_SUFFIX)
    except S3MemoryError as exc:
        raise _restated(
            exc,
            f"Error: Erasing user {layout.tenant!r} failed while destroying its keys: {exc} "
            "Its files may still be readable; run the erasure again.",
        ) from exc
    finally:
        _evict(memory)
    try:
        report.versions_deleted = sum(store.purge(prefix) for prefix in layout.owned_prefixes)
    except S3MemoryError as exc:
        done = (
            "Its keys are destroyed, so its files can no longer be decrypted, but"
            if shredded
            else "Its files are not encrypted under a key of their own (KMS mode), and"
        )
        raise _restated(
            exc,
            f"Error: Erasing user {layout.tenant!r} failed part-way: {done} deleting its objects "
            f"failed: {exc} Run the erasure again to finish it.",
        ) from exc
    finally:
        _evict(memory)
    report.requests = dict(store.counts)
    log.info("erased a tenant: %d requests", sum(report.requests.values()))
    return report
