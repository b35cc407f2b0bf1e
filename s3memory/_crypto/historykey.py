"""The history key: what seals the provenance that history lists, in record names.

History must read the provenance of a file's 1,000 versions in two round trips, but a
version's own provenance (``_provenance``, in its metadata) takes a HEAD per version to read,
and S3 listings return no metadata. What a listing does return is key names. So each change
also leaves a record (``_records``) whose **name** carries its provenance, sealed under this
key: one LIST page reads a thousand of them, and opening them is local CPU.

The key is a random 256-bit AES-GCM key per tenant, stored like the names key as a key
document at ``{prefix}{tenant}/.s3memory/history-key`` (``{"v": 2, "kid", "wrapper",
"wrapped"}``), wrapped by the master key (local, or KMS in either key mode) under the
context ``{s3memory:tenant, s3memory:purpose=history-key, s3memory:kid, s3memory:prefix}``.
It is loaded on first use (one GET, alongside the command's first round trip; plus a KMS
``Decrypt`` with a KMS master) and cached in the :class:`KeyCache`; the first write that finds
none creates it (``If-None-Match: *``: concurrent first writers agree). A write makes the new
key alongside its first round trip but stores its document only just before the first record
sealed under it (``key(create=True, defer=True)``, then :meth:`HistoryKey.committed`): a
command refused in between (a restore of a missing version, an edit of a missing file)
leaves no key document. Unlike the names key,
it may be created beside existing files: files written before it have no listable records,
and history reads their provenance from each version's metadata instead (a HEAD each). But
it is never created again where records sealed under it exist: a document deleted or
overwritten by a bucket writer is found again among its earlier versions (only the master
key can have wrapped it), and if none opens, records are written as bodies rather than
under a new key that would leave the old records (the only account of deletions and
renames) unreadable. A version's own provenance stays the authority (``read_version`` and
``restore`` open it).

Crypto-shredding deletes it with the tenant's other documents; a master-key re-wrap
re-wraps it like them. It is never rotated: records are write-once, and re-sealing their
names would mean copying every record.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from .._errors import ObjectTooLargeError, PreconditionFailedError, TenantKeyError
from .._layout import HISTORY_KEY
from ..stores import ObjectStore
from .cache import KeyCache
from .keydocs import (
    KEY_DOCUMENT_VERSION,
    MAX_KEY_DOCUMENT_BYTES,
    KeyDocumentSlot,
    key_document_body,
    parse_key_document,
)
from .master import MasterKey

log = logging.getLogger("s3memory")

HISTORY_KEY_BYTES = 32
_MAX_PENDING = 16  # keys made for commands that were then refused are dropped beyond this
_MAX_DOCUMENT_BYTES = MAX_KEY_DOCUMENT_BYTES


class HistoryKey:
    """One tenant's history key (see the module docstring)."""

    def __init__(
        self,
        *,
        store: ObjectStore,
        tenant: str,
        key_object: str,
        master: MasterKey,
        cache: KeyCache,
        store_identity: str,
        records_prefix: str,
        is_sealed_record: Callable[[str], bool],
        prefix: str = "",
    ) -> None:
        self._records_prefix = records_prefix
        self._is_sealed_record = is_sealed_record
        # Keys made by key(create=True, defer=True) and not stored yet, with their documents.
        self._pending: dict[bytes, bytes] = {}
        self._resolved: dict[bytes, bytes] = {}  # a pending key, stored: the key stored for it
        self._pending_lock = threading.Lock()
        self.document = KeyDocumentSlot(
            store=store,
            tenant=tenant,
            purpose=HISTORY_KEY,
            object_key=key_object,
            master=master,
            cache=cache,
            store_identity=store_identity,
            prefix=prefix,
        )

    def versioned(self) -> bool:
        """Whether the store keeps versions (records are worth writing only then), as the
        store knows it now: an S3 store learns it from each write's answer, and asks once
        before its first write (``S3Store.keeps_versions``). Nothing is remembered here, nor
        process-wide: versioning turned on is seen by the next write, and a new bucket of a
        former bucket's name is never taken for it."""
        return self.document.store.keeps_versions()

    def key(self, *, create: bool, defer: bool = False) -> bytes | None:
        """The tenant's history key: cached, else read; with ``create``, created if the tenant
        has none. None if it has none (and not ``create``), or if the stored one does not
        open (tampered with, or wrapped by another master key: history then reads each
        version's own provenance, so nothing is lost but speed; logged).

        With ``defer`` (and ``create``), a tenant without one gets a new key made and wrapped
        now (so the round trip that asks makes the GET, LIST and master-key wrap alongside
        its others) but not stored: :meth:`committed` stores it, called just before the
        first record sealed under it is written. A command that is refused after asking
        leaves no key document."""
        cached = self.document.cache.get(self.document.cache_key)
        if isinstance(cached, bytes):
            return cached
        try:
            if create and defer:
                return self._loaded_or_pending()
            return self.document.cached(self._load_or_create if create else self._load_or_fail)
        except _NoHistoryKey:
            return None
        except TenantKeyError as exc:
            log.warning("the history key does not open (%s); history reads each version instead", exc)
            return None

    def committed(self, key: bytes) -> bytes:
        """``key`` once stored: a key :meth:`key` made with ``defer`` is stored now
        (``If-None-Match: *``) unless this process stored or loaded one meanwhile; if another
        writer stored one first, that one (records must be sealed under the stored key). Any
        other key is returned as it is."""
        with self._pending_lock:
            resolved = self._resolved.get(key)
            pending = self._pending.get(key)
        if resolved is not None:
            return resolved
        if pending is None:
            return key
        stored = self.document.cached(lambda: self._store_pending(key, pending))
        with self._pending_lock:
            self._pending.pop(key, None)
            while len(self._resolved) >= _MAX_PENDING:
                self._resolved.pop(next(iter(self._resolved)))
            self._resolved[key] = stored
        return stored

    def commit_pending(self) -> None:
        """Store the keys :meth:`key` made with ``defer`` and not stored yet: called by a write
        about to land (``SealedFiles.stamped``), so that the key document lands before the
        object whose record it seals, as when it was stored in the command's first round trip."""
        with self._pending_lock:
            keys = list(self._pending)
        for key in keys:
            self.committed(key)

    def _loaded_or_pending(self) -> bytes:
        key = self._current()
        if isinstance(key, bytes):
            self.document.remember(key)
            return key
        if key is _MISSING and not self._records_exist():  # a new tenant (one empty LIST)
            new_key, body = self._new()
            with self._pending_lock:
                while len(self._pending) >= _MAX_PENDING:  # refused commands' keys: forgotten
                    self._pending.pop(next(iter(self._pending)))
                self._pending[new_key] = body
            return new_key
        recovered = self._recovered(key)
        if recovered is None:
            raise TenantKeyError("Error: The history key of this memory is missing, but records sealed under it exist.")
        self.document.remember(recovered)
        return recovered

    def _store_pending(self, key: bytes, body: bytes) -> bytes:
        try:
            self.document.put_new(body)
        except PreconditionFailedError:
            found = self._load_or_none()  # another writer was first: theirs, so both agree
            if found is None:
                raise
            return found
        log.info("created a history key (wrapped by %s)", self.document.master.kind)
        return key

    def _new(self) -> tuple[bytes, bytes]:
        """A new history key and its document (wrapped by the master key), not stored."""
        key_id, key = os.urandom(8).hex(), os.urandom(HISTORY_KEY_BYTES)
        master = self.document.master
        wrapped = master.wrap(key, self.document.context(key_id, KEY_DOCUMENT_VERSION))
        return key, key_document_body(kid=key_id, wrapper=master.kind, wrapped=wrapped, version=KEY_DOCUMENT_VERSION)

    def _load_or_fail(self) -> bytes:
        key = self._current()
        if isinstance(key, bytes):
            return key
        key = self._recovered(key)
        if key is None:
            raise _NoHistoryKey
        return key

    def _load_or_create(self) -> bytes:
        key = self._current()
        if isinstance(key, bytes):
            return key
        if key is _MISSING and not self._records_exist():  # a new tenant (one empty LIST)
            return self._create()
        # Its document is gone or spoiled, and records sealed under it exist: a new key would
        # leave them (the only account of deletions and renames) unreadable.
        recovered = self._recovered(key)
        if recovered is None:
            raise TenantKeyError("Error: The history key of this memory is missing, but records sealed under it exist.")
        return recovered

    def _create(self) -> bytes:
        key_id, key = os.urandom(8).hex(), os.urandom(HISTORY_KEY_BYTES)
        master = self.document.master

        def body() -> bytes:
            wrapped = master.wrap(key, self.document.context(key_id, KEY_DOCUMENT_VERSION))
            return key_document_body(kid=key_id, wrapper=master.kind, wrapped=wrapped, version=KEY_DOCUMENT_VERSION)

        found, _ = self.document.create(body, self._load_or_none, files_prefix=None, missing="")
        if found is not None:
            return found
        log.info("created a history key (kid %s, wrapped by %s)", key_id, master.kind)
        return key

    def _load_or_none(self) -> bytes | None:
        key = self._current()
        return key if isinstance(key, bytes) else None

    def _records_exist(self) -> bool:
        """Whether any record sealed in its name exists (a listing of the records, once, when
        the tenant has no history key document: on a new tenant, one empty page)."""
        return any(self._is_sealed_record(info.key) for info in self.document.store.list(self._records_prefix))

    def _current(self) -> bytes | object:
        """The key of the current document; else :data:`_MISSING` (no document) or the body
        of one that does not open (tampered with)."""
        stored = self.document.read()
        if stored is None:
            return _MISSING
        try:
            return self._opened(stored.body)
        except TenantKeyError:
            return bytes(stored.body).decode("latin-1")

    def _recovered(self, current: object) -> bytes | None:
        """The key of the newest earlier version of the document that opens: one deleted or
        overwritten by whoever may write the bucket (but not delete versions) is found again,
        as only the master key can have wrapped it. None if none does."""
        for version in self.document.store.list_versions(self.document.object_key):
            if version.key != self.document.object_key or version.is_delete_marker:
                continue
            try:
                earlier = self.document.store.get_version(
                    version.key, version.version_id, max_bytes=_MAX_DOCUMENT_BYTES
                )
            except ObjectTooLargeError:
                continue
            if earlier is None or bytes(earlier.body).decode("latin-1") == current:
                continue
            try:
                key = self._opened(earlier.body)
            except TenantKeyError:
                continue
            log.warning("the history key document was deleted or replaced; its earlier version is used")
            return key
        return None

    def _opened(self, body: bytes) -> bytes:
        parsed = parse_key_document(body, what="history key")
        return self.document.unwrap(parsed, parsed.wrapped, parsed.kid, size=HISTORY_KEY_BYTES)


_MISSING = object()


class _NoHistoryKey(Exception):
    """The tenant has no history key yet (nothing is cached for it)."""
