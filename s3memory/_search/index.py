"""The sealed search index: the text of every file of one tenant, in one object, kept fresh
from the listing's ETags (what ``_search`` searches; ``EncryptedMemory.search`` wires them).

**Why one sealed object.** Search runs in the client: the bucket never sees the query or a
hit. An inverted index of keyed term tags would show which terms are looked up (the objects
read), and a GET per hit would show which files matched; one sealed object read whole shows
neither, and holding the text lets snippets and line numbers come from memory.

**The object.** ``{prefix}{tenant}/.s3memory/index/v1`` (``TenantLayout.index_key``), sealed
like a record stored as a body (``_records``): an envelope with a fresh data key from the
tenant's keyring, bound to the name ``s3memory-internal:index/v1``, which no memory path can
have (every one starts with ``/memories``), so the index never opens as a file, nor a file
as the index, nor one tenant's or deployment's index as another's. The plaintext is JSON,
``{"v": 1, "files": [{"k": object key, "e": ETag, "t": text or null, "f", "a", "c"}]}`` (null:
a file that does not open, not tried again until it changes; ``f``, ``a``, ``c``: the
version's file id, time, and the time of the file's first version, from its provenance, which
the memory-store API's ids and times need; absent from entries older code wrote, which
``with_provenance`` reads again), **never compressed**: beside a secret,
text an attacker influenced would turn a compressed size into a CRIME-style oracle. At most
:data:`MAX_INDEX_BYTES` of plaintext: a larger tenant is searched from this process's memory
and its index is not written.

**Refresh** (:func:`current_files`), in round trips:

1. Concurrently: the LIST of the tenant's files, and a HEAD of the index if this process
   holds a snapshot of it (:data:`PROCESS_INDEX_CACHE`), else a GET (opened at once); on a
   cold process also the tenant key (and the names key).
2. A GET of every listed file whose (key, ETag) the snapshot lacks (64 at once); in KMS mode
   beside them the ``GenerateDataKey`` of the write-back.
3. Only if something changed since the index this process last wrote or adopted: the
   index written back, ``If-Match`` the ETag seen in step 1 (``If-None-Match: *`` if there
   was none). Losing that race is not an error (logged): a snapshot built from the listing
   is complete whichever index won.

ETag equality is the only freshness test: entries the listing does not show are dropped,
and an entry is used only where the listing shows the very object (key and ETag) it was
read from, so an index that opens but is stale (or another store's under the same keys)
shows nothing that is not there. When the HEAD finds an index another process wrote, this
process keeps its own snapshot (it is as good, against the listing), reads what that lacks,
and adopts the index without writing: the next cold process to read it finds what it lacks
and writes it, and two warm processes never take turns rewriting it. An index that does not
open, or is malformed, is discarded (logged, its contents never shown) and rebuilt. A
write-back that fails for any reason (radosgw refuses ``If-Match`` on versioned buckets)
never fails the search; it is retried after :data:`WRITE_RETRY_SECONDS`.

Budget: warm with nothing changed, 1 round trip (LIST + HEAD); with files changed, at most 3
(in KMS mode, files another process wrote cost a KMS ``Decrypt`` each after their GET: 4).
A first build reads every file, 64 at a time. Never an access marker. A read-only mount
refreshes with ``write_back=False``: it writes nothing and generates no key.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass

from .._crypto import envelope
from .._crypto.files import SealedFiles
from .._crypto.keyring import Keyring
from .._crypto.provenance import Provenance
from .._errors import (
    ForeignObjectError,
    IntegrityError,
    InvalidCommandError,
    ObjectTooLargeError,
    PreconditionFailedError,
    S3MemoryError,
    StorageError,
    TenantKeyError,
)
from .._layout import TenantLayout
from .._paths import MemoryPath
from .._roundtrip import Pending, RoundTrip
from ..stores import ObjectInfo, ObjectStore, StoredObject

log = logging.getLogger("s3memory")
_FILE_ID = re.compile(r"[0-9a-f]{32}")

INDEX_VERSION = 1
#: What the index's data key is bound to: not a memory path (those start with /memories).
INDEX_NAME = "s3memory-internal:index/v1"
#: The most plaintext an index holds (and the most of one that is read).
MAX_INDEX_BYTES = 16 * 1024 * 1024
#: Files read at once when (re)building an index: a first build of 1,000 takes 16 waves.
READ_WORKERS = 64
#: What the process keeps of every tenant's snapshots, in bytes of text (LRU beyond).
DEFAULT_CACHE_BYTES = 64 * 1024 * 1024
#: After a write-back failed for another reason than a lost race, how long not to try again.
WRITE_RETRY_SECONDS = 300.0
_ENTRY_OVERHEAD = 128  # bytes a snapshot entry costs beside its text and key, roughly


@dataclass(frozen=True)
class IndexedFile:
    """One file of the store, as of the refresh that returned it.

    ``path`` is store-relative (``/memories/a.md``, however the store is mounted); ``size``
    and ``sha256`` are of the UTF-8 text; ``last_modified`` is the listing's (seconds since
    the epoch), which the bucket could forge: it is not authenticated.
    """

    path: MemoryPath
    key: str
    etag: str
    size: int
    sha256: str
    last_modified: float
    text: str
    #: From the version's sealed provenance (None: it has none, or the index was written by a
    #: version of s3memory that did not keep it and ``with_provenance`` was not asked for):
    #: the file's id (kept across edits and renames), the version's time (µs), and the time
    #: of the file's first version (None where provenance does not say: a file whose first
    #: version predates ``born``, edited since).
    file_id: str | None = None
    at_us: int | None = None
    created_us: int | None = None


@dataclass(frozen=True)
class _Provenance:
    """What an entry keeps of its version's provenance (see ``IndexedFile``)."""

    file_id: str | None
    at_us: int | None
    created_us: int | None
    known: bool = True  # False: read from an index written before entries kept provenance


_UNKNOWN = _Provenance(None, None, None, known=False)
_NONE = _Provenance(None, None, None)  # a version with no provenance that opens


@dataclass(frozen=True)
class _Entry:
    """What the index holds of one object: its ETag (bare) and text (None: it did not open),
    and its provenance's ids and times (``_UNKNOWN`` if the index that held it did not say)."""

    etag: str
    text: str | None
    size: int = 0
    sha256: str = ""
    provenance: _Provenance = _UNKNOWN


def _bare(etag: str) -> str:
    return etag.strip('"')


def _entry(etag: str, text: str | None, provenance: _Provenance = _UNKNOWN) -> _Entry:
    if text is None:
        return _Entry(_bare(etag), None, provenance=provenance)
    data = text.encode("utf-8")  # UnicodeEncodeError (a ValueError) for a lone surrogate
    return _Entry(_bare(etag), text, len(data), hashlib.sha256(data).hexdigest(), provenance)


def _provenance_of(provenance: Provenance | None) -> _Provenance:
    if provenance is None:
        return _NONE
    born = provenance.born_us
    if born is None and provenance.op == "created":
        born = provenance.at_us  # a first version written before provenance kept its birth
    return _Provenance(provenance.file, provenance.at_us, born)


def _weight(entries: Mapping[str, _Entry]) -> int:
    return sum(e.size + len(k) + _ENTRY_OVERHEAD for k, e in entries.items())


# -- the process cache ---------------------------------------------------------------------
@dataclass(frozen=True)
class _Cached:
    """A snapshot this process holds, the index's ETag it is paired with (None: there was no
    index; "": unknown, after a lost race), and until when not to try writing it.
    ``unwritten``: the snapshot is newer than that index and is to be written back, under
    this data key, in the next refresh's first round trip (a deferred write-back)."""

    etag: str | None
    entries: Mapping[str, _Entry]
    weight: int
    retry_after: float = 0.0
    unwritten: tuple[bytes, envelope.WrappedKey] | None = None


class IndexCache:
    """Snapshots of indexes, least recently used evicted beyond ``max_bytes`` of text.

    Keyed by the store's identity, the index's key and the keyring's identity (a memory
    opened with another master key never reads what this one decrypted). Plaintext, like
    the unwrapped keys of a ``KeyCache``: the process's own memory, never written anywhere.
    """

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[Hashable, _Cached] = OrderedDict()
        self._used = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> _Cached | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: Hashable, value: _Cached) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._used -= old.weight
            if value.weight > self.max_bytes:
                return  # larger than the whole cache: searched from this call's reads only
            self._items[key] = value
            self._used += value.weight
            while self._used > self.max_bytes:
                _, evicted = self._items.popitem(last=False)
                self._used -= evicted.weight

    def discard_matching(self, predicate: Callable[[Hashable], bool]) -> None:
        with self._lock:
            for key in [k for k in self._items if predicate(k)]:
                self._used -= self._items.pop(key).weight

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._used = 0

    def __len__(self) -> int:
        return len(self._items)


PROCESS_INDEX_CACHE = IndexCache()


def _keyring_identity(keyring: Keyring) -> str:
    master = getattr(keyring, "master", None)
    if master is not None:
        return f"tenant:{master.fingerprint}"
    key_id = getattr(keyring, "key_id", None)
    return f"kms:{key_id}" if isinstance(key_id, str) else f"keyring:{id(keyring)}"


def _cache_key(files: SealedFiles) -> tuple[str, str, str]:
    return (files.store.identity, files.layout.index_key, _keyring_identity(files.keyring))


def forget(store: ObjectStore, layout: TenantLayout) -> None:
    """Drop what this process holds of the tenant's index (after the tenant was erased)."""
    where = (store.identity, layout.index_key)
    PROCESS_INDEX_CACHE.discard_matching(lambda key: isinstance(key, tuple) and key[:2] == where)


# -- the stored index ----------------------------------------------------------------------
def index_binding(layout: TenantLayout) -> dict[str, str]:
    """What the index's data key is bound to: this deployment and tenant, and its own name."""
    return envelope.binding_context(layout.tenant, INDEX_NAME, prefix=layout.prefix)


def encode_index(entries: Mapping[str, _Entry]) -> bytes:
    """The plaintext of an index (keys in order; never compressed: see the module docstring)."""
    listed = [_encoded_entry(key, entry) for key, entry in sorted(entries.items())]
    return json.dumps({"v": INDEX_VERSION, "files": listed}, ensure_ascii=False, separators=(",", ":")).encode()


def _encoded_entry(key: str, entry: _Entry) -> dict[str, object]:
    encoded: dict[str, object] = {"k": key, "e": entry.etag, "t": entry.text}
    if entry.provenance.known:
        p = entry.provenance
        encoded.update({"f": p.file_id, "a": p.at_us, "c": p.created_us})
    return encoded


def _decoded_provenance(item: Mapping[str, object]) -> _Provenance:
    """An entry's provenance fields (optional: an index written before them has none, and
    readers before them ignore them); ValueError if present and malformed."""
    if "f" not in item:
        return _UNKNOWN
    file_id, at, created = item.get("f"), item.get("a"), item.get("c")
    if not (file_id is None or (isinstance(file_id, str) and _FILE_ID.fullmatch(file_id))):
        raise ValueError("a malformed entry")
    for moment in (at, created):
        if not (moment is None or (isinstance(moment, int) and not isinstance(moment, bool))):
            raise ValueError("a malformed entry")
    if file_id is None:
        return _NONE
    return _Provenance(file_id, at, created)  # type: ignore[arg-type]  # checked above


def decode_index(plaintext: bytes, layout: TenantLayout) -> dict[str, _Entry]:
    """The entries of an index's plaintext; ValueError if it is not one this version wrote."""
    try:
        document = json.loads(plaintext)
    except RecursionError:
        raise ValueError("index too deeply nested") from None
    if not isinstance(document, dict) or document.get("v") != INDEX_VERSION:
        raise ValueError("not an index of version 1")
    listed = document.get("files")
    if not isinstance(listed, list):
        raise ValueError("no files")
    entries: dict[str, _Entry] = {}
    for item in listed:
        if not isinstance(item, dict):
            raise ValueError("an entry is not an object")
        key, etag, text = item.get("k"), item.get("e"), item.get("t")
        if (
            not isinstance(key, str)
            or not key.startswith(layout.memory_prefix)
            or key in entries
            or not isinstance(etag, str)
            or not etag
            or not (text is None or isinstance(text, str))
        ):
            raise ValueError("a malformed entry")
        entries[key] = _entry(etag, text, _decoded_provenance(item))
    return entries


def open_index(files: SealedFiles, stored: StoredObject) -> dict[str, _Entry]:
    """The entries of a stored index. IntegrityError (or ForeignObjectError) if it does not
    open as this tenant's index in this deployment; ValueError if it opens but is malformed."""
    header = envelope.parse_header(stored.metadata)
    data_key = files.keyring.unwrap(header.wrapped_key, index_binding(files.layout))
    return decode_index(envelope.open_body(bytes(stored.body), data_key, header), files.layout)


def seal_index(
    files: SealedFiles, plaintext: bytes, key: tuple[bytes, envelope.WrappedKey] | None = None
) -> tuple[bytes, dict[str, str]]:
    """(body, metadata) of an index, under a fresh data key (``key``: one generated already)."""
    data_key, wrapped = key if key is not None else files.keyring.generate(index_binding(files.layout))
    return envelope.seal(plaintext, data_key, wrapped)


@dataclass(frozen=True)
class _Found:
    """What step 1 found of the stored index."""

    state: str  # "same", "other" (another process wrote it), "missing", "discarded", "unusable"
    etag: str | None
    entries: Mapping[str, _Entry]


def _fetched_index(files: SealedFiles) -> _Found:
    """GET and open the index (a cold process)."""
    try:
        stored = files.store.get(files.layout.index_key, max_bytes=MAX_INDEX_BYTES + envelope.TAG_BYTES)
    except ObjectTooLargeError:
        # Never written so large by s3memory: planted. Replaced, conditionally on its ETag.
        log.warning("the search index is larger than %d bytes: not read, and rebuilt", MAX_INDEX_BYTES)
        try:
            planted = files.store.head(files.layout.index_key)
        except StorageError:
            planted = None
        return _Found("unusable", None, {}) if planted is None else _Found("discarded", planted.etag, {})
    except StorageError as exc:
        log.warning("the search index could not be read (%s): searching without it", type(exc).__name__)
        return _Found("unusable", None, {})
    if stored is None:
        return _Found("missing", None, {})
    try:
        return _Found("same", stored.etag, open_index(files, stored))
    except TenantKeyError:
        raise  # not about the index: no file would open either
    except (IntegrityError, ForeignObjectError, ValueError) as exc:
        # Another tenant's, another deployment's or store's, tampered with, or malformed:
        # its contents are never used, and it is replaced (conditionally on its ETag).
        log.warning("the search index did not open as this user's (%s): rebuilding it", type(exc).__name__)
        return _Found("discarded", stored.etag, {})


def _headed_index(files: SealedFiles, cached: _Cached) -> _Found:
    """HEAD the index (a warm process): is it still the one this process's snapshot pairs with?"""
    try:
        info = files.store.head(files.layout.index_key)
    except StorageError as exc:
        log.warning("the search index could not be looked at (%s): searching without it", type(exc).__name__)
        return _Found("unusable", cached.etag, cached.entries)
    if info is None:
        return _Found("missing", None, cached.entries)
    same = cached.etag is not None and _bare(info.etag) == _bare(cached.etag)
    return _Found("same" if same else "other", info.etag, cached.entries)


# -- reading files -------------------------------------------------------------------------
def _read_file(files: SealedFiles, path: MemoryPath, info: ObjectInfo) -> _Entry | None:
    """The entry of one listed file, read now; None if it was deleted since the listing.
    A file that does not open is an entry without text (logged), not an error."""
    try:
        stored = files.store.get(info.key, max_bytes=files.max_file_bytes + envelope.TAG_BYTES)
    except ObjectTooLargeError:
        log.warning("a file larger than the file size limit was left out of search")
        return _Entry(_bare(info.etag), None, provenance=_NONE)
    if stored is None:
        return None
    try:
        opened = files.opened(path, path.display, stored)
    except TenantKeyError:
        raise
    except (IntegrityError, ForeignObjectError, InvalidCommandError) as exc:
        log.warning("a file that does not open was left out of search (%s)", type(exc).__name__)
        return _Entry(_bare(stored.etag), None, provenance=_NONE)
    assert opened is not None
    provenance = files.provenance_in(opened.metadata, info.key, opened.data_key)
    return _entry(stored.etag, opened.text, _provenance_of(provenance))


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _read_pool() -> ThreadPoolExecutor:
    """The pool that reads files, its threads all started on first use: an executor starts a
    thread per task only while none has finished, so grown lazily it stays at the size of its
    first waves (a third of 64 in practice) and a wave of 50 would take three round trips."""
    global _POOL
    if _POOL is None:
        with _POOL_LOCK:
            if _POOL is None:
                pool = ThreadPoolExecutor(max_workers=READ_WORKERS, thread_name_prefix="s3memory-index")
                everyone = threading.Barrier(READ_WORKERS)
                # None finishes before all have started, so each submit starts a thread.
                wait([pool.submit(everyone.wait) for _ in range(READ_WORKERS)])
                _POOL = pool
    return _POOL


def _generated(files: SealedFiles) -> tuple[bytes, envelope.WrappedKey] | None:
    """A data key for the index's write-back, made beside the reads (KMS mode); None if KMS
    refused (the write-back is skipped, the search goes on)."""
    try:
        return files.keyring.generate(index_binding(files.layout))
    except S3MemoryError as exc:
        log.warning("no data key for the search index (%s): not written back", type(exc).__name__)
        return None


# -- the refresh ---------------------------------------------------------------------------
def current_files(files: SealedFiles, *, write_back: bool = True, with_provenance: bool = False) -> list[IndexedFile]:
    """Every file of the store as of this call's listing, sorted by path: from the sealed
    index object (one per tenant at ``layout.index_key``), refreshed from the listing's
    ETags, re-reading only changed files, and written back with compare-and-swap when
    something changed and ``write_back`` is True.

    Warm with nothing changed: 1 round trip (LIST + HEAD of the index); with changes at most
    3. Files that do not open (tampered with, not UTF-8, over the size limit) are left out.

    ``with_provenance``: also re-read the files whose entries came from an index written
    before entries kept provenance (once: the index written back keeps it).

    Raises what reading a file raises that is not about the file (``StorageError``,
    ``TenantKeyError``, ``ConfigurationError`` for a memory written with encrypted names);
    never because of the index, and never because writing it back failed.
    """
    layout = files.layout
    cache_key = _cache_key(files)
    cached = PROCESS_INDEX_CACHE.get(cache_key)
    now = time.monotonic()

    # Round trip 1: the listing, the index (HEAD when warm, GET when cold), the keys; and a
    # write-back deferred by the previous refresh (its data key made then), If-Match the
    # index it was read against, so that a newer index is never overwritten.
    rt = files.round_trip()
    listed = rt.submit(files.files_under, MemoryPath(""))
    found: Pending[_Found] = (
        rt.submit(_fetched_index, files) if cached is None else rt.submit(_headed_index, files, cached)
    )
    deferred: Pending[tuple[str | None, float]] | None = None
    if cached is not None and cached.unwritten is not None and write_back and cached.retry_after <= now:
        stale_index = _Found("same", cached.etag, cached.entries)
        deferred = rt.submit(_write_back, files, cached.entries, stale_index, None, now, made=cached.unwritten)
    if not files.keyring.is_warm():
        rt.submit(files.keyring.prepare)
    if layout.names is not None:
        rt.submit(files.names_ready)  # the names key, loaded beside the listing that needs it
    rt.wait()
    index = found.result()
    infos = listed.result()
    if deferred is not None and cached is not None:
        written, retry = deferred.result()
        if written and written != cached.etag:  # ours is the index now, whatever the HEAD beside it saw
            index = _Found("same", written, cached.entries)
        elif retry:
            cached = _Cached(cached.etag, cached.entries, cached.weight, retry)

    current: dict[str, _Entry] = {}
    stale: list[tuple[MemoryPath, ObjectInfo]] = []
    for path, info in infos:
        entry = index.entries.get(info.key)
        if (
            entry is not None
            and entry.etag == _bare(info.etag)
            and not (with_provenance and not entry.provenance.known)
        ):
            current[info.key] = entry
        else:
            stale.append((path, info))
    by_key = {info.key: (path, info) for path, info in infos}
    dropped = any(key not in by_key for key in index.entries)  # deleted since the index was written

    writable = write_back and index.state != "unusable" and (cached is None or cached.retry_after <= now)
    # Round trip 2: every file the snapshot lacks; in KMS mode, the write-back's data key.
    key_for_index: Pending[tuple[bytes, envelope.WrappedKey] | None] | None = None
    if stale:
        reading = RoundTrip(_read_pool)
        reads = [(info.key, reading.submit(_read_file, files, path, info)) for path, info in stale]
        if writable and files.keyring.generates_remotely and index.state != "other":
            key_for_index = reading.submit(_generated, files)
        reading.wait()
        for key, read in reads:
            entry = read.result()
            if entry is not None:
                current[key] = entry

    # An index another process wrote since this one's is adopted as it is, even if this
    # process read files it lacks: the next cold process to read it finds them missing and
    # writes it; two warm processes never take turns rewriting it.
    changed = bool(stale) or dropped
    wanted = (
        writable and bool(current) and (index.state in ("missing", "discarded") or (changed and index.state == "same"))
    )
    etag = index.etag
    retry_after = 0.0 if cached is None else cached.retry_after
    unwritten = None
    if wanted and key_for_index is not None and cached is not None and index.state == "same":
        # KMS per object, warm: the files read needed a KMS Decrypt after their GET, so
        # writing back now would be a fourth round trip. Written instead in the next
        # refresh's first round trip (a cold process, which may not search again, writes now).
        unwritten = key_for_index.result()
    elif wanted:
        etag, retry_after = _write_back(files, current, index, key_for_index, now)
    elif writable and not current and index.etag and index.state in ("same", "discarded"):
        # Every file is gone: so is the index, which held their text (an empty one is never written).
        try:
            files.store.delete([layout.index_key], if_match={layout.index_key: index.etag})
            etag = None
        except S3MemoryError as exc:
            log.warning("the search index of an empty memory could not be deleted (%s)", type(exc).__name__)
    PROCESS_INDEX_CACHE.put(cache_key, _Cached(etag, current, _weight(current), retry_after, unwritten))

    result = []
    for key, entry in current.items():
        if entry.text is None:
            continue
        path, info = by_key[key]
        p = entry.provenance
        result.append(
            IndexedFile(
                path,
                key,
                entry.etag,
                entry.size,
                entry.sha256,
                info.last_modified,
                entry.text,
                p.file_id,
                p.at_us,
                p.created_us,
            )
        )
    result.sort(key=lambda f: f.path)
    return result


def _write_back(
    files: SealedFiles,
    entries: Mapping[str, _Entry],
    index: _Found,
    key_for_index: Pending[tuple[bytes, envelope.WrappedKey] | None] | None,
    now: float,
    *,
    made: tuple[bytes, envelope.WrappedKey] | None = None,
) -> tuple[str | None, float]:
    """Round trip 3 (or a deferred one's 1): the index, compare-and-swap. The ETag to pair
    the snapshot with (the new one; "" if another writer won or it failed), and until when
    not to try again. ``made``: a data key generated earlier."""
    plaintext = encode_index(entries)
    if len(plaintext) > MAX_INDEX_BYTES:
        log.info("the search index would be over %d bytes: kept in this process only", MAX_INDEX_BYTES)
        return index.etag, 0.0
    try:
        if made is None and key_for_index is not None:
            made = key_for_index.result()
            if made is None:
                return index.etag, now + WRITE_RETRY_SECONDS
        body, metadata = seal_index(files, plaintext, made)
        key = files.layout.index_key
        if index.etag is None:
            etag = files.store.put(key, body, metadata, if_none_match=True)
        else:
            etag = files.store.put(key, body, metadata, if_match=index.etag)
    except PreconditionFailedError:
        log.info("another process wrote the search index first: keeping this process's snapshot")
        return "", 0.0
    except S3MemoryError as exc:
        # e.g. radosgw refusing If-Match on a versioned bucket, or a role that may not write it
        log.warning("the search index could not be written back (%s): searching goes on", type(exc).__name__)
        return "", now + WRITE_RETRY_SECONDS
    log.debug("wrote the search index back (%d entries)", len(entries))
    return etag, 0.0
