"""History records: what a delete, a rename or a redaction leaves, as it leaves no version.

One record per command and path it is about, at ``TenantLayout.history_record_key``: the
path's tag (SHA-256 of the path, or with encrypted names of its keyed tag, so the key shows
nothing the bucket does not already show), then the inverted time, so a listing returns the
newest first. A record is sealed like a file (an envelope, a fresh data key, bound to a
name no memory path can have and that includes the record's key: a record moved to another
key, or a file moved onto a record's key, does not open as one)::

    {"v": 1, "op": "deleted" | "renamed" | "redacted", "at", "by", "path", ...}

A record of removed files lists each one's path and ETag (``files``), so that history
matches it to the delete marker that follows exactly that version; a rename's entries also
say where each file went (``to``); a redaction says which version, and keeps that version's
own provenance (``original``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import _envelope as envelope
from ._errors import ForeignObjectError, IntegrityError, ObjectTooLargeError, S3MemoryError
from ._files import SealedFiles
from ._paths import MemoryPath
from ._provenance import OPERATIONS
from .stores import ObjectInfo

log = logging.getLogger("s3memory")

RECORD_VERSION = 1
RECORD_OPERATIONS = ("deleted", "renamed", "redacted")
MAX_RECORD_BYTES = 8 * 1024 * 1024  # a record of a directory's deletion lists every file
_RECORD_NAME = "s3memory-internal:history/"  # not a memory path: every memory path starts with /memories
_TAG_PREFIX = b"s3memory history tag\x00"


def bare_etag(etag: str) -> str:
    return etag.strip('"')


def path_tag(files: SealedFiles, shown: str) -> str:
    """What names the records about a path (see the module docstring)."""
    return hashlib.sha256(_TAG_PREFIX + files.path_name(shown).encode("utf-8")).hexdigest()[:32]


def record_name(files: SealedFiles, key: str) -> str:
    """The name a record at ``key`` is sealed for."""
    return _RECORD_NAME + key[len(files.layout.history_prefix) :]


def listed_files(files: SealedFiles, infos: Iterable[ObjectInfo]) -> list[dict[str, str]]:
    """What a record says of the files a command removes: each path and ETag."""
    listed = []
    for info in infos:
        path = files.layout.path_for_key(info.key)
        if path is not None:
            listed.append({"path": path.display, "etag": bare_etag(info.etag)})
    return listed


@dataclass(frozen=True)
class Prepared:
    """Where a record will go, made at ``at_us``, with its data key (made ahead, so that the
    write that follows is one request even when the data key comes from KMS)."""

    key: str
    at_us: int
    data_key: bytes
    wrapped: envelope.WrappedKey


def prepare(files: SealedFiles, about: Sequence[MemoryPath], *, at_us: int | None = None) -> list[Prepared]:
    at = int(time.time() * 1_000_000) if at_us is None else at_us
    prepared = []
    for path in about:
        key = files.layout.history_record_key(path_tag(files, path.display), at, os.urandom(8).hex())
        data_key, wrapped = files.keyring.generate(files.binding_of_name(record_name(files, key)))
        prepared.append(Prepared(key, at, data_key, wrapped))
    return prepared


def write(files: SealedFiles, prepared: Sequence[Prepared], record: Mapping[str, Any]) -> None:
    """Store ``record`` (with who and when) at each prepared place."""
    for place in prepared:
        full = {"v": RECORD_VERSION, **record, "at": place.at_us, "by": files.actor}
        body, metadata = envelope.seal(json.dumps(full, separators=(",", ":")).encode(), place.data_key, place.wrapped)
        files.store.put(place.key, body, metadata)


def write_beside(files: SealedFiles, prepared: Sequence[Prepared], record: Mapping[str, Any]) -> None:
    """:func:`write`, beside the change it records (a delete, a rename's last round trip): if
    the record fails, the change stands and is not reported as failed (issued again, it
    would find nothing to do); history then shows it without who made it. Logged."""
    try:
        write(files, prepared, record)
    except S3MemoryError as exc:
        log.warning("a history record could not be written (%s); the change it records was made", type(exc).__name__)


def write_now(files: SealedFiles, about: Sequence[MemoryPath], record: Mapping[str, Any]) -> None:
    write(files, prepare(files, about), record)


def rename_record(
    old: MemoryPath, new: MemoryPath, moved: Sequence[tuple[MemoryPath | None, MemoryPath | None, str]]
) -> dict[str, Any]:
    """The record of a rename. ``moved``: (source, target, the source's ETag) of each file
    copied (keys no valid path maps to have no path, and no history)."""
    files_moved = [
        {"path": s.display, "to": t.display, "etag": bare_etag(etag)}
        for s, t, etag in moved
        if s is not None and t is not None
    ]
    return {"op": "renamed", "path": old.display, "to": new.display, "files": files_moved}


def _read_one(files: SealedFiles, key: str, version_id: str) -> dict[str, Any] | None:
    try:
        stored = files.store.get_version(key, version_id, max_bytes=MAX_RECORD_BYTES)
    except ObjectTooLargeError:
        return None
    if stored is None:
        return None
    try:
        record = json.loads(files.decrypt(record_name(files, key), key, bytes(stored.body), stored.metadata))
    except (IntegrityError, ForeignObjectError, ValueError, RecursionError):
        return None  # tampered with, planted, or moved here: it grants nothing
    if not isinstance(record, dict) or record.get("v") != RECORD_VERSION or record.get("op") not in OPERATIONS:
        return None
    return record


def listed(files: SealedFiles, prefix: str) -> list[tuple[str, str]]:
    """(key, version id) of every record under ``prefix``: every version, so that a record
    deleted or overwritten since (by whoever may write the bucket but not delete versions)
    is still read."""
    return [(v.key, v.version_id) for v in files.store.list_versions(prefix) if not v.is_delete_marker]


def read(files: SealedFiles, refs: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """The records at ``refs`` (key, version id) that open, concurrently (one round trip; in
    KMS mode each also unwraps its data key); one event once, however many copies of it."""
    rt = files.round_trip()
    pending = [rt.submit(_read_one, files, key, version_id) for key, version_id in refs]
    rt.wait()
    unique: dict[str, dict[str, Any]] = {}
    for record in (p.result() for p in pending):
        if record is not None:
            unique.setdefault(json.dumps(record, sort_keys=True), record)
    return list(unique.values())
