"""Expiry: find, and optionally delete, memories nobody has read or written for N days.

A write is visible in the object's own LastModified. A read is not, so with
``track_access=True`` the memory records it: the first read of a file per day and process
also PUTs an empty marker object, ``{tenant}/.s3memory/access/{sha256(key)[:32]}``, once
the read found the file (one extra request and round trip per file per day; a path that
does not exist gets no marker, so made-up paths create no objects). A
file's last access is the later of its LastModified and its marker's.

``expire_memories`` costs one LIST per 1,000 files and one per 1,000 markers, plus one
``DeleteObjects`` per 1,000 deletions. Deletions are conditional on the ETag listed, so a
file written meanwhile is kept.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from .._core.access import access_marker_key
from .._core.memory import EncryptedMemory
from .._crypto.files import plaintext_size
from .._errors import ConfigurationError, PreconditionFailedError
from .._history import records as _records
from .._paths import MemoryPath
from .._search import index as _index
from ..stores import ObjectInfo

log = logging.getLogger("s3memory")

SECONDS_PER_DAY = 86_400


@dataclass(frozen=True, order=True)
class StaleMemory:
    """A file not read or written since ``last_access`` (seconds since the epoch)."""

    path: str
    size: int
    last_access: float


@dataclass
class ExpiryReport:
    stale: list[StaleMemory] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    kept_changed: list[str] = field(default_factory=list)  # written after the listing: kept
    markers_removed: int = 0


def expire_memories(
    memory: EncryptedMemory, *, older_than_days: float, delete: bool = False, now: float | None = None
) -> ExpiryReport:
    """The user's files not accessed for ``older_than_days``; deleted if ``delete``.

    Without ``track_access`` on the writers' and readers' side, "accessed" means written.
    """
    if isinstance(older_than_days, bool) or not isinstance(older_than_days, (int, float)) or older_than_days < 0:
        raise ConfigurationError("older_than_days must be a non-negative number")
    if delete:
        memory.gate.writable("expire memories of", memory.files.shown_root)
    cutoff = (time.time() if now is None else now) - older_than_days * SECONDS_PER_DAY
    layout, store = memory.layout, memory.store
    markers_prefix = layout.access_markers_prefix
    rt = memory.files.round_trip()
    listed_files = rt.submit(lambda: list(store.list(layout.memory_prefix)))
    listed_markers = rt.submit(lambda: {info.key: info for info in store.list(markers_prefix)})
    rt.wait()
    files, markers = listed_files.result(), listed_markers.result()
    report = ExpiryReport()
    etags: dict[str, str] = {}  # object key -> ETag listed
    keys: dict[str, str] = {}  # path -> object key
    live_markers: set[str] = set()
    for info in files:
        path = layout.path_for_key(info.key)
        marker = access_marker_key(layout, info.key)
        live_markers.add(marker)
        read = markers[marker].last_modified if marker in markers else 0.0
        last_access = max(info.last_modified, read)
        if path is None or last_access >= cutoff:
            continue
        report.stale.append(StaleMemory(path.display, plaintext_size(info), last_access))
        etags[info.key] = info.etag
        keys[path.display] = info.key
    report.stale.sort()
    if not delete:
        return report
    doomed_markers = [access_marker_key(layout, key) for key in etags]
    orphans = [key for key in markers if key not in live_markers]  # files renamed or deleted since
    kept: set[str] = set()
    try:
        store.delete(list(etags), if_match=etags)
    except PreconditionFailedError:  # some were written meanwhile, and kept: which?
        kept = {info.key for info in store.list(layout.memory_prefix)} & etags.keys()
    for stale in report.stale:
        (report.kept_changed if keys[stale.path] in kept else report.deleted).append(stale.path)
    # Who deleted them, for history: one record about the whole memory (the root).
    gone = [ObjectInfo(key, 0, etag) for key, etag in etags.items() if key not in kept]
    if gone:
        record = {"op": "deleted", "path": "/memories", "files": _records.listed_files(memory.files, gone)}
        _records.sealer(memory.files, [MemoryPath("")]).write_beside(record)
    if gone:  # the search index holds their text: gone with them, rebuilt by the next search
        store.delete([layout.index_key])
        _index.forget(store, layout)
    gone_markers = [m for m in doomed_markers if m in markers] + orphans
    if gone_markers:
        store.delete(gone_markers)
    report.markers_removed = len(gone_markers)
    report.deleted.sort()
    log.info("expired memories: %d deleted, %d kept (changed meanwhile)", len(report.deleted), len(report.kept_changed))
    return report
