"""Key lifecycle: rotate a tenant's key, re-wrap it under a new master key, expire old
versions, erase a tenant.

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
   intents and the search index; not the key documents) is listed, then, concurrently, HEAD and, if
   its key id is not the current one, its data key is unwrapped with the retired key and
   wrapped with the new one, and the object is copied onto itself with the new metadata
   (``CopyObject``, ``MetadataDirective=REPLACE``, ``x-amz-copy-source-if-match`` the HEAD's
   ETag): the body is not transferred and stays byte-identical. A copy that loses a race
   (the file was edited or deleted since the HEAD) re-reads that file, up to three times.
3. Settle: the retired keys leave the current objects' keys (a PUT conditional on its
   ETag), but only when a whole pass found nothing left to re-wrap and ``retire_after``
   seconds have passed since the rotation started. They become **kept keys**
   (``"kept": [{"kid", "wrapped", "retired_at", "kept_since"}]``, document version 3): the
   versions the re-wrap replaced, and every older version, are still wrapped under them,
   and history reads and restores those. A kept key leaves the document at a later
   rotation (or :func:`expire_noncurrent_versions`) once both the store's retention of
   noncurrent versions (``noncurrent_days``, 30 as the lifecycle rule, plus
   :data:`EXPIRY_GRACE_DAYS` for S3's asynchronous expiry) has passed since ``kept_since``,
   and a listing of every version of the tenant (one ``ListObjectVersions`` per 1,000, a
   HEAD of each noncurrent version written before ``kept_since``) finds none under it. In a
   store that keeps no versions the listing is made at once, and the key leaves at once.
   The time only saves requests: the listing decides, so a version the store keeps longer
   than said keeps its key, and a key is never dropped while a version needs it (a listing
   that fails keeps every key). Keys whose versions expired cost nothing but their line in
   the document; at most :data:`~s3memory._crypto.keyring.MAX_KEPT_KEYS` are kept (a rotation
   beyond that refuses to start). The wait is what makes dropping safe with other processes about:
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
keys may be dropped, by a verifying pass (a LIST, a HEAD per object); one PUT to settle,
and, when a kept key is due (or the store keeps no versions: ``GetBucketVersioning``, once),
the version listing described in step 3.

What rotation does not do: the data keys are the same, so anyone who already holds both
the old tenant key and an object's metadata from before the rotation (a backup, an old
version in a versioned bucket) can still decrypt that object; and the document keeps the
old key itself while old versions are kept. To make data unreadable, erase it.

**Expiring old versions** (:func:`expire_noncurrent_versions`): what the bucket lifecycle
rule of ``s3memory policy`` does on S3, for stores without one (the in-memory and local
directory stores keep every version until deleted): every version noncurrent for
``noncurrent_days`` is deleted, and each delete marker left with nothing under it; then the
kept keys no version needs leave the document, as above.

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

Longer than most modules, and kept whole: the four operations act on the same two things
(the tenant key document and every object and version wrapped under it), share the request
counting, the resumable re-wrap of objects and the check of which keys versions still need,
and their crash-safety arguments (above) only hold read together: each must leave the
others a state they can resume from.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .._crypto import envelope
from .._crypto.keydocs import CONTEXT_KEY_ID, get_key_document, is_key_document_cache_key, rewrapped_document
from .._crypto.keyring import MAX_KEPT_KEYS, RetiredKey, TenantKeyring, TenantKeys
from .._crypto.master import LocalMasterKey, MasterKey
from .._errors import (
    ConfigurationError,
    ForeignObjectError,
    IntegrityError,
    PreconditionFailedError,
    S3MemoryError,
    StorageError,
    TenantKeyError,
)
from .._layout import KEY_DOCUMENT_SUFFIX, TENANT_KEY, TenantLayout
from .._search import index as _index
from ..stores import DelegatingStore, ObjectStore, ObjectVersion

log = logging.getLogger("s3memory")

if TYPE_CHECKING:
    from .._core.memory import EncryptedMemory

DEFAULT_RETIRE_AFTER = 900.0  # the default KeyCache time-to-live
REWRAP_ATTEMPTS = 3  # per object and pass, when its copy loses a race
MAX_PASSES = 3  # re-wrap passes per run (the later ones only verify, normally)
_PAGE = 1000  # keys per LIST page and per DeleteObjects
_TENANT_KEY_METADATA = {"s3memory": TENANT_KEY}
DAY = 86400.0
#: The retention of noncurrent versions that rotation assumes unless told: the lifecycle rule
#: ``s3memory policy`` emits (``lifecycle_configuration``), and ``expire_noncurrent_versions``.
DEFAULT_NONCURRENT_DAYS = 30
#: S3 expires noncurrent versions asynchronously, a day or so after they are due: a kept key
#: is looked at again this many days after its versions' retention, not before.
EXPIRY_GRACE_DAYS = 2
#: How far the store's clock (a version's last-modified time) may be behind ours (``kept_since``).
CLOCK_MARGIN = 3600.0


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
        kept: the former keys the document keeps for older versions of objects (see
            :class:`KeptKey`), after the run.
        dropped: ids of the keys this run removed from the document (retired keys where
            no version needs them, and kept keys whose versions are gone).
        retire_not_before: when the retired keys may become kept keys (seconds since the
            epoch), if any remain retired.
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
    kept: list[KeptKey] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    retire_not_before: float | None = None
    passes: int = 0
    requests: dict[str, int] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """True once no retired key is left: every current object is under the current key
        (older versions may still use kept keys)."""
        return not self.retired


@dataclass(frozen=True)
class KeptKey:
    """A former tenant key the document keeps, after its rotation completed, because older
    versions of objects (in a store that keeps versions) may still be wrapped under it.

    Attributes:
        kid: the key's id.
        retired_at: when a rotation replaced it (seconds since the epoch).
        kept_since: when that rotation completed: no version under the key was written, or
            became noncurrent, after it.
        until: when its versions are due to be gone, with the retention the run was given
            (``kept_since`` + ``noncurrent_days`` + :data:`EXPIRY_GRACE_DAYS`); ``None``
            with ``noncurrent_days=None`` (versions kept until deleted). The key leaves the
            document at the first rotation or :func:`expire_noncurrent_versions` after that
            which finds no version under it; a version still there keeps it.
    """

    kid: str
    retired_at: float
    kept_since: float
    until: float | None


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
        elif verb in ("head_version", "delete_version"):
            self._count(verb.upper().replace("_", "-"))
        result = perform()
        if verb == "list":
            self._count("LIST", _pages(len(result)))
        elif verb == "list_versions":
            self._count("LIST-VERSIONS", _pages(len(result)))
        elif verb == "purge":
            self._count("LIST-VERSIONS", _pages(result))
            self._count("DELETE-MANY", math.ceil(result / _PAGE))
        return result

    def delete(self, keys: Sequence[str], *, if_match: Mapping[str, str] | None = None) -> None:
        self._count("DELETE-MANY", math.ceil(len(keys) / _PAGE))
        super().delete(keys, if_match=if_match)


def _clock(now: float | None) -> Callable[[], float]:
    """The time to judge by: ``now`` if given (tests, and callers with their own clock)."""
    if now is None:
        return time.time
    if isinstance(now, bool) or not isinstance(now, (int, float)) or not math.isfinite(now):
        raise ConfigurationError(f"now must be seconds since the epoch, not {now!r}")
    return lambda: float(now)


def _noncurrent_days(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"noncurrent_days must be a positive whole number of days, not {value!r}")
    return value


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
    noncurrent_days: int | None = DEFAULT_NONCURRENT_DAYS,
    progress: Callable[[int, int], None] | None = None,
    now: float | None = None,
) -> RotationReport:
    """Rotate the tenant key of ``memory``'s user: a new key wraps every data key.

    Resumable: if interrupted, or if the retired key may not be dropped yet (see
    ``retire_after``), run it again; it resumes the rotation under way rather than start
    another. See the module docstring for the steps, the guarantees and the request count.

    Args:
        memory: the user's memory (tenant-key mode, local or KMS master key).
        workers: objects re-wrapped concurrently.
        retire_after: seconds after the rotation started before the retired key may leave
            the current objects' keys (become a kept key, or leave the document); at least
            the ``ttl_seconds`` of every :class:`~s3memory.KeyCache` serving this user
            (default: 900, or this memory's cache TTL if longer).
        noncurrent_days: how long the store keeps noncurrent versions (the bucket's
            ``NoncurrentVersionExpiration``, 30 days as ``s3memory policy`` sets it, or
            what :func:`expire_noncurrent_versions` is run with); ``None`` if they are kept
            until deleted. It says when a kept key is looked at again (its ``until``); a
            key leaves the document only once a listing finds no version under it, so a
            wrong value costs requests or keeps a key longer, and never strands a version.
        progress: called with ``(done, total)`` as each object of a pass is checked (a
            verifying pass, if there is one, counts from 0 again).
        now: the time (seconds since the epoch) to stamp and judge by, instead of the clock.

    Raises:
        ConfigurationError: in ``key_mode="kms"`` (use KMS key rotation), or bad arguments.
        TenantKeyError: also when the document already keeps :data:`~s3memory._crypto.keyring.MAX_KEPT_KEYS`
            keys for old versions (expire those versions first).
        TenantKeyError: the user has no tenant key, or it does not unwrap.
        StorageError: the store failed part-way; every file is still readable, and running
            the rotation again finishes it.
    """
    memory.gate.writable("rotate the key of", memory.files.shown_root)
    keyring = _tenant_keyring(memory, "rotate")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigurationError("workers must be a positive integer")
    if retire_after is None:
        retire_after = max(DEFAULT_RETIRE_AFTER, keyring.key_cache.ttl_seconds)
    elif isinstance(retire_after, bool) or not isinstance(retire_after, (int, float)) or not retire_after >= 0:
        raise ConfigurationError("retire_after must be a number of seconds, 0 or more")
    if noncurrent_days is not None:
        noncurrent_days = _noncurrent_days(noncurrent_days)
    clock = _clock(now)
    store = _CountingStore(memory.store)
    layout = memory.layout
    try:
        keys, started = _begin_rotation(store, keyring, clock())
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
                if retire_after and clock() < report.retire_not_before:
                    break  # a later run drops them (0: now, whatever the clock that started the rotation said)
                if outcome.counts["rewrapped"] or outcome.counts["raced"]:
                    continue  # a verifying pass first: something may have written under the old key meanwhile
                before = {r.kid for r in (*keys.retired, *keys.kept)}
                keys = _settle(store, layout, keyring, keys, pool, now=clock(), noncurrent_days=noncurrent_days)
                report.dropped = sorted(before - {r.kid for r in (*keys.retired, *keys.kept)})
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
    report.kept = kept_keys(keys, noncurrent_days)
    if not report.retired:
        report.retire_not_before = None
    report.requests = dict(store.counts)
    log.info(
        "rotated a tenant key to kid %s: %d objects re-wrapped in %d passes, %d retired and %d kept keys left",
        report.kid,
        report.rewrapped,
        report.passes,
        len(report.retired),
        len(report.kept),
    )
    return report


def _begin_rotation(store: ObjectStore, keyring: TenantKeyring, now: float) -> tuple[TenantKeys, bool]:
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
        if len(keys.kept) >= MAX_KEPT_KEYS:
            raise TenantKeyError(
                f"Error: The tenant key document already keeps {len(keys.kept)} former keys for old versions "
                "of files, the most it holds: expire old versions (the bucket's lifecycle rule, or "
                "expire_noncurrent_versions), then rotate again; the keys leave as their versions go."
            )
        rotated = keyring.rotated(keys, now=now)
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


def _settle(
    store: ObjectStore,
    layout: TenantLayout,
    keyring: TenantKeyring,
    keys: TenantKeys,
    pool: ThreadPoolExecutor,
    *,
    now: float,
    noncurrent_days: int | None,
) -> TenantKeys:
    """``keys`` with its retired keys kept (since ``now``) and the kept keys no version needs
    any more dropped (see :func:`_needed`), stored (conditionally) and cached; or, if the
    document changed meanwhile, whatever it holds now."""
    kept = [*keys.kept, *(replace(r, kept_since=now) for r in keys.retired)]
    kept = _needed(store, layout, kept, pool, now=now, noncurrent_days=noncurrent_days)
    settled = keys.evolve(retired=(), kept=kept)
    if settled.kept:
        settled = keyring.upgraded(settled)  # a version 1 document: its keys wrapped as version 2's
    return _store_keys(store, keyring, keys, settled) or settled


def _store_keys(store: ObjectStore, keyring: TenantKeyring, keys: TenantKeys, new: TenantKeys) -> TenantKeys | None:
    """Store ``new`` over ``keys`` (conditional on its ETag) and cache it; ``None`` if nothing
    changed. If the document changed meanwhile, what it holds now (cached), unchanged."""
    if new.document() == keys.document():
        return None
    try:
        etag = store.put(keyring.object_key, new.document(), _TENANT_KEY_METADATA, if_match=keys.etag)
    except PreconditionFailedError:
        stored = get_key_document(store, keyring.object_key, what="tenant key")
        if stored is None:
            raise TenantKeyError(
                "Error: The tenant key document disappeared during the rotation (was this user erased?)."
            ) from None
        current = keyring.open_document(stored)
        keyring.install(current)
        return current
    stored_keys = new.evolve(etag=etag)
    keyring.install(stored_keys)
    return stored_keys


def _needed(
    store: ObjectStore,
    layout: TenantLayout,
    kept: Sequence[RetiredKey],
    pool: ThreadPoolExecutor,
    *,
    now: float,
    noncurrent_days: int | None,
) -> list[RetiredKey]:
    """The kept keys that versions may still need.

    A kept key is looked at once the store's retention has passed since its rotation
    completed (at once if the store keeps no versions): then one listing of every version
    of the tenant's objects, and a HEAD of each noncurrent version old enough to be under
    it (written before ``kept_since``, give or take :data:`CLOCK_MARGIN`), tell whether one
    still names it. Keys not due, or still named, or that could not be checked, stay."""
    try:
        versioned = store.keeps_versions()
    except S3MemoryError:
        versioned = True  # cannot tell: as if it kept versions
    due = [r for r in kept if not versioned or _is_due(r, noncurrent_days, now)]
    if not due:
        return list(kept)
    try:
        named = _kids_of_old_versions(store, layout, due, pool)
    except S3MemoryError as exc:
        log.warning("kept %d former tenant keys: the versions that may use them could not be listed: %s", len(due), exc)
        return list(kept)
    return [r for r in kept if r not in due or r.kid in named]


def _is_due(key: RetiredKey, noncurrent_days: int | None, now: float) -> bool:
    until = _until(key, noncurrent_days)
    return until is not None and now >= until


def _until(key: RetiredKey, noncurrent_days: int | None) -> float | None:
    if noncurrent_days is None or key.kept_since is None:
        return None
    return key.kept_since + (noncurrent_days + EXPIRY_GRACE_DAYS) * DAY


def kept_keys(keys: TenantKeys, noncurrent_days: int | None) -> list[KeptKey]:
    """What a report says of ``keys``' kept keys."""
    return [KeptKey(r.kid, r.retired_at, r.kept_since or r.retired_at, _until(r, noncurrent_days)) for r in keys.kept]


def _kids_of_old_versions(
    store: ObjectStore, layout: TenantLayout, due: Sequence[RetiredKey], pool: ThreadPoolExecutor
) -> set[str]:
    """The key ids among ``due``'s that a noncurrent version of the tenant's objects (not a
    key document) still names. Current versions are under the current key already."""
    wanted = {r.kid for r in due}
    horizon = max(r.kept_since or r.retired_at for r in due) + CLOCK_MARGIN
    old = [
        version
        for prefix in layout.owned_prefixes
        for version in store.list_versions(prefix)
        if not version.is_latest
        and not version.is_delete_marker
        and version.last_modified < horizon
        and layout.key_document_purpose(version.key) is None
    ]
    named: set[str] = set()
    for kid in pool.map(lambda version: _kid_of_version(store, version), old):
        if kid in wanted:
            named.add(kid)
    return named


def _kid_of_version(store: ObjectStore, version: ObjectVersion) -> str | None:
    info = store.head_version(version.key, version.version_id)
    if info is None:
        return None  # deleted meanwhile
    try:
        header = envelope.parse_header(info.metadata)
    except (ForeignObjectError, IntegrityError):
        return None
    kid = header.wrapped_key.context.get(CONTEXT_KEY_ID)
    return kid if isinstance(kid, str) else None


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
            # Records sealed in their names are under the history key, never rotated.
            if layout.key_document_purpose(info.key) is None and not layout.is_sealed_name_record(info.key)
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


# --- retention of old versions --------------------------------------------------------------


@dataclass
class VersionExpiryReport:
    """What :func:`expire_noncurrent_versions` did.

    Attributes:
        tenant: the user.
        versions_deleted: noncurrent versions and delete markers deleted for good.
        kept: the former tenant keys the document still keeps for older versions.
        dropped: ids of the kept keys removed from the document (no version needs them).
        requests: store requests made, by kind.
    """

    tenant: str
    versions_deleted: int = 0
    kept: list[KeptKey] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    requests: dict[str, int] = field(default_factory=dict)


def expire_noncurrent_versions(
    memory: EncryptedMemory,
    *,
    noncurrent_days: int = DEFAULT_NONCURRENT_DAYS,
    now: float | None = None,
    workers: int = 16,
) -> VersionExpiryReport:
    """Do for ``memory``'s user what the bucket lifecycle rule of ``s3memory policy`` does on
    S3: delete for good every version that has been noncurrent (replaced, or deleted) for
    ``noncurrent_days``, and every delete marker left with no version under it; then drop
    the former tenant keys no version needs any more (as rotation does).

    For stores without lifecycle rules: the in-memory store and the local directory (the
    embedded default), which keep every version until it is deleted, and S3-compatible
    stores without lifecycle support. Current versions are never touched, nor history's
    records while their object is current. A version's age is counted from when the next
    one was written, as S3 counts ``NoncurrentDays`` (from the store's last-modified times).
    Requests: one version listing per 1,000 versions of each of the tenant's two prefixes,
    one delete per version deleted; on S3 it needs ``s3:DeleteObjectVersion``.

    Raises:
        ConfigurationError: a bad ``noncurrent_days`` or ``now``.
        StorageError: a request failed; what was deleted stays deleted, running it again
            finishes the job.
    """
    memory.gate.writable("expire versions of", memory.files.shown_root)
    days = _noncurrent_days(noncurrent_days)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigurationError("workers must be a positive integer")
    moment = _clock(now)()
    layout = memory.layout
    store = _CountingStore(memory.store)
    report = VersionExpiryReport(tenant=layout.tenant)
    for prefix in layout.owned_prefixes:
        doomed = _expired_versions(store.list_versions(prefix), cutoff=moment - days * DAY)
        for version in doomed:
            store.delete_version(version.key, version.version_id)
            report.versions_deleted += 1
    keyring = memory.keyring
    if isinstance(keyring, TenantKeyring):
        stored = get_key_document(store, keyring.object_key, what="tenant key")
        if stored is not None:
            keys = keyring.open_document(stored)
            if keys.kept:
                with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="s3memory-expire") as pool:
                    kept = _needed(store, layout, keys.kept, pool, now=moment, noncurrent_days=days)
                settled = _store_keys(store, keyring, keys, keys.evolve(kept=kept)) or keys
                report.dropped = sorted({r.kid for r in keys.kept} - {r.kid for r in settled.kept})
                keys = settled
            report.kept = kept_keys(keys, days)
    report.requests = dict(store.counts)
    log.info("expired %d noncurrent versions of a tenant", report.versions_deleted)
    return report


def _expired_versions(listed: Iterable[ObjectVersion], *, cutoff: float) -> list[ObjectVersion]:
    """The versions (and delete markers) of ``listed`` (keys in order, each key's newest
    first) noncurrent since before ``cutoff``, then each delete marker left alone on top of
    none (S3's ``ExpiredObjectDeleteMarker``), in that order."""
    doomed: list[ObjectVersion] = []
    for _, group in itertools.groupby(listed, key=lambda version: version.key):
        versions = list(group)
        # A version became noncurrent when the next one (newer, listed just before it) was written.
        expired = [old for new, old in itertools.pairwise(versions) if new.last_modified < cutoff]
        doomed += expired
        if versions[0].is_delete_marker and len(expired) == len(versions) - 1:
            doomed.append(versions[0])
    return doomed


# --- a new master key ---------------------------------------------------------------------


def rewrap_tenant_key(memory: EncryptedMemory, new_master: MasterKey | bytes) -> MasterRewrapReport:
    """Re-wrap the user's key documents (tenant key, names key) under ``new_master``.

    ``new_master``: 32 random bytes (a local master key) or a ``MasterKey``
    (``s3memory.KmsMasterKey(kms_client, key_id)``). Nothing but the documents
    changes. Afterwards open the memory with the new master key; processes that still use
    the old one keep working until their cached keys expire, then fail with a clear error.
    Resumable: documents already under the new master key are left as they are.
    """
    memory.gate.writable("re-wrap the keys of", memory.files.shown_root)
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
    other key document cached under the same convention (the names key); and the text of
    its files this process holds for search."""
    layout = memory.layout
    memory.keyring.forget(layout.tenant)
    _index.forget(memory.store, layout)  # the plaintext snapshot of its search index
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
    memory.gate.writable("erase", memory.files.shown_root)
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
