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
none creates it (``If-None-Match: *``: concurrent first writers agree). Unlike the names key,
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
from collections.abc import Callable

from ._errors import ObjectTooLargeError, StorageAccessDeniedError, TenantKeyError
from ._keydocs import (
    KEY_DOCUMENT_VERSION,
    MAX_KEY_DOCUMENT_BYTES,
    KeyCache,
    KeyDocumentSlot,
    MasterKey,
    key_document_body,
    parse_key_document,
)
from ._layout import HISTORY_KEY
from .stores import ObjectStore

log = logging.getLogger("s3memory")

HISTORY_KEY_BYTES = 32
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
        """Whether the store keeps versions (records are worth writing only then): asked once
        per store, and remembered in the key cache (a Lambda function builds a store per
        invocation, but keeps its key cache)."""
        cache_key = ("bucket-versioning", self.document.cache_key[1])
        known = self.document.cache.get(cache_key)
        if isinstance(known, bool):
            return known
        try:
            versioned = self.document.store.keeps_versions()
        except StorageAccessDeniedError:
            # A role without s3:GetBucketVersioning: no history either. Remembered, so that
            # every write does not ask (and log) again.
            self.document.cache.put(cache_key, False)
            raise
        self.document.cache.put(cache_key, versioned)
        return versioned

    def key(self, *, create: bool) -> bytes | None:
        """The tenant's history key: cached, else read; with ``create``, created if the tenant
        has none. None if it has none (and not ``create``), or if the stored one does not
        open (tampered with, or wrapped by another master key: history then reads each
        version's own provenance, so nothing is lost but speed; logged)."""
        cached = self.document.cache.get(self.document.cache_key)
        if isinstance(cached, bytes):
            return cached
        try:
            return self.document.cached(self._load_or_create if create else self._load_or_fail)
        except _NoHistoryKey:
            return None
        except TenantKeyError as exc:
            log.warning("the history key does not open (%s); history reads each version instead", exc)
            return None

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
