"""History: every version of a memory file and who made it; the store-wide feed of changes.

Built on the store's versions (a versioned S3 bucket; the in-memory and local stores keep
versions too) and on sealed provenance: each version's own metadata says who wrote it, how
and when (``_provenance``), and every change leaves a record sealed in its key name
(``_records``), which tells deletions, renames and redactions too.

:func:`history` of a path is one round of requests: the versions of its key, beside the
listings of the records about it and its directories. A second round (each at most
``max_workers`` requests at once) only for what the names do not tell: a HEAD of each
version no record pairs with, a GET of each record stored as a body. A file that came from a
rename takes one more round per rename, to follow it back to where it was. :func:`changes`
is the same over every key under a prefix, with every record listed in 16 parts. Each
entry says whether its provenance is ``verified``: present, authentic, and in sequence
(a version that claims to follow another than the one before it is a replay or a splice).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from .._crypto.files import SealedFiles
from .._crypto.provenance import NO_PROVENANCE, OPERATIONS
from .._errors import ConfigurationError
from .._paths import MemoryPath, parse_path
from ..stores import ObjectVersion
from . import records as _records
from .entries import EntryBuilder, MemoryVersion, Opened, VersionClaims

MAX_RENAME_HOPS = 16  # how many (path, file) pairs a history follows a file through, at most

NO_VERSIONS = (
    "Error: This memory's store keeps no versions, so it has no history (on S3, turn on bucket "
    "versioning: aws s3api put-bucket-versioning --bucket BUCKET --versioning-configuration Status=Enabled). "
    "Everything else works without it."
)


# -- queries -----------------------------------------------------------------------------------
def require_versions(files: SealedFiles) -> None:
    if not files.store.keeps_versions():
        raise ConfigurationError(NO_VERSIONS)


def own_versions(files: SealedFiles, key: str) -> list[ObjectVersion]:
    return [v for v in files.store.list_versions(key) if v.key == key]


def _versions_under(files: SealedFiles, prefix: str) -> list[ObjectVersion]:
    return list(files.store.list_versions(prefix))


def _open_one(files: SealedFiles, path: str, version: ObjectVersion) -> Opened:
    """A HEAD of one version, and its provenance opened with its data key."""
    head = files.store.head_version(version.key, version.version_id)
    return (None, NO_PROVENANCE) if head is None else files.provenance_of(path, version.key, head.metadata)


def _own_entries(files: SealedFiles, path: MemoryPath) -> tuple[list[MemoryVersion], dict[str, str]]:
    """The entries of the key of ``path`` alone, oldest first: one round of requests, and a
    second only for versions no listed record tells (a HEAD each) and records stored as bodies.
    Beside them, where each redacted version a rename made came from (by version id)."""
    key = files.layout.key_for(path)
    rt = files.round_trip()
    listed = rt.submit(own_versions, files, key)
    # Records about the path and each directory above it (the root's too: clearing a memory).
    record_lists = [
        rt.submit(_records.listed, files, files.layout.history_records_prefix(_records.path_tag(files, about.display)))
        for about in [path, *path.ancestors(), MemoryPath("")]
    ]
    history_key = rt.submit(_records.history_key_for_reading, files)
    rt.wait()
    versions = listed.result()
    refs = [ref for pending in record_lists for ref in pending.result()]
    builder, opened = _told(files, history_key.result(), refs, {key: (path, versions)})
    entries = builder.entries(path.display, key, versions, opened)
    listed_ids = {v.version_id for v in versions}
    # A redaction whose delete failed left its version: that version is the entry, not the record.
    redacted = [e for e in builder.redactions(path.display) if e.version not in listed_ids]
    return entries + redacted, builder.redacted_sources(path.display)


def _told(
    files: SealedFiles,
    history_key: bytes | None,
    refs: Sequence[tuple[str, str]],
    keys: Mapping[str, tuple[MemoryPath, Sequence[ObjectVersion]]],
) -> tuple[EntryBuilder, dict[tuple[str, str], Opened]]:
    """What the listed records (``refs``) and, where they do not, the versions themselves
    say of the versions of ``keys`` (key: its path and its versions, newest first): the
    entry builder, and each version's provenance (round two only if anything needs it)."""
    found = _records.opened_names(files, history_key, refs)
    claims = VersionClaims(_records.unique(found.records))
    opened: dict[tuple[str, str], Opened] = {}
    unclaimed: list[tuple[str, ObjectVersion]] = []
    for path, versions in keys.values():
        told, untold = claims.assign(path.display, versions)
        opened.update(told)
        unclaimed += [(path.display, version) for version in untold]
    records = found.records + _read_more(files, found.bodies, unclaimed, opened)
    return EntryBuilder(_records.unique(records)), opened


def _read_more(
    files: SealedFiles,
    bodies: Sequence[tuple[str, str]],
    unclaimed: Sequence[tuple[str, ObjectVersion]],
    opened: dict[tuple[str, str], Opened],
) -> list[dict[str, Any]]:
    """Round two: the records stored as bodies, and a HEAD of each version no record told
    (its provenance added to ``opened``); nothing if neither."""
    if not bodies and not unclaimed:
        return []
    # Every request its own task of one round trip (tasks that open round trips of their own
    # would wait for threads their parents hold: with ``max_workers=1``, for ever).
    rt = files.round_trip()
    heads = {(v.key, v.version_id): rt.submit(_open_one, files, path, v) for path, v in unclaimed}
    records = [rt.submit(_records.read_one, files, key, version_id) for key, version_id in bodies]
    rt.wait()
    opened.update({found: head.result() for found, head in heads.items()})
    return [record for record in (r.result() for r in records) if record is not None]


def _renamed_from(entry: MemoryVersion, redacted_sources: Mapping[str, str]) -> MemoryPath | None:
    """Where the rename that made ``entry`` came from: its note says, or for a redacted copy
    the rename's record (``redacted_sources``), so its file's history goes on from there."""
    if entry.operation != "renamed":
        return None
    if entry.note.startswith("renamed from "):
        source = entry.note.removeprefix("renamed from ")
    elif entry.size is None and entry.version in redacted_sources:
        source = redacted_sources[entry.version]
    else:
        return None
    try:
        return parse_path(source)
    except ValueError:
        return None


def _path_entries(files: SealedFiles, path: MemoryPath) -> list[MemoryVersion]:
    """The entries of ``path`` (every file that lived there), and of each file renamed into it
    at every path it lived at before: each (path, file) read once, at most
    :data:`MAX_RENAME_HOPS` of them. A rename is told once, by its arrival."""
    cache: dict[str, tuple[list[MemoryVersion], dict[str, str]]] = {}

    def entries_of(where: MemoryPath) -> list[MemoryVersion]:
        if where.display not in cache:
            cache[where.display] = _own_entries(files, where)
        return cache[where.display][0]

    def renamed_from(entry: MemoryVersion) -> MemoryPath | None:
        return _renamed_from(entry, cache[entry.path][1])

    collected = list(entries_of(path))
    pending = [(source, e.file_id) for e in collected if (source := renamed_from(e)) is not None]
    followed: set[tuple[str, str | None]] = set()
    while pending and len(followed) < MAX_RENAME_HOPS:
        source, file_id = pending.pop()
        if (source.display, file_id) in followed:
            continue
        followed.add((source.display, file_id))
        for entry in entries_of(source):
            if entry.file_id == file_id:
                collected.append(entry)
                earlier = renamed_from(entry)
                if earlier is not None:
                    pending.append((earlier, file_id))
    included = set(cache)
    unique: dict[tuple[str, str, str], MemoryVersion] = {}
    for entry in collected:
        departed_to = entry.note.removeprefix("renamed to ") if entry.note.startswith("renamed to ") else None
        if departed_to is not None and departed_to in included:
            continue  # its arrival there says it
        unique.setdefault((entry.path, entry.version, entry.note), entry)
    return list(unique.values())


def history(files: SealedFiles, path: MemoryPath) -> list[MemoryVersion]:
    """Every version of the file at ``path`` (also a deleted one), newest first."""
    require_versions(files)
    return _newest_first(_path_entries(files, path))


def _newest_first(entries: Sequence[MemoryVersion]) -> list[MemoryVersion]:
    """By time, newest first; entries of one millisecond in the reverse of their order."""
    return [e for _, e in sorted(enumerate(entries), key=lambda item: (item[1].at, item[0]), reverse=True)]


def changes(
    files: SealedFiles,
    *,
    directory: MemoryPath,
    operation: str | None = None,
    actor: str | None = None,
    since: datetime.datetime | None = None,
    until: datetime.datetime | None = None,
) -> list[MemoryVersion]:
    """Every change under ``directory``, newest first, filtered (see ``EncryptedMemory.changes``)."""
    require_versions(files)
    for name, moment in (("since", since), ("until", until)):
        if moment is not None and (not isinstance(moment, datetime.datetime) or moment.tzinfo is None):
            raise ConfigurationError(f"{name} must be an aware datetime (with a time zone), not {moment!r}")
    if operation is not None and operation not in OPERATIONS:
        raise ConfigurationError(f"operation must be one of {', '.join(OPERATIONS)}, not {operation!r}")
    rt = files.round_trip()
    listed = rt.submit(_versions_under, files, files.layout.dir_prefix(directory))
    record_parts = _records.list_everywhere(files, rt)
    history_key = rt.submit(_records.history_key_for_reading, files)
    rt.wait()
    by_key: dict[str, list[ObjectVersion]] = {}
    for version in listed.result():
        by_key.setdefault(version.key, []).append(version)
    shown = {key: (path, by_key[key]) for key in by_key if (path := files.layout.path_for_key(key)) is not None}
    refs = [ref for part in record_parts for ref in part.result()]
    builder, opened = _told(files, history_key.result(), refs, shown)
    entries: list[MemoryVersion] = []
    for key, (path, versions) in shown.items():
        entries += builder.entries(path.display, key, versions, opened)
    redacted = {str(record.get("path")) for record in builder.records if record.get("op") == "redacted"}
    for path_shown in sorted(redacted):
        if directory.is_root or path_shown == directory.display or path_shown.startswith(directory.display + "/"):
            entries += builder.redactions(path_shown)
    return _newest_first(
        [
            e
            for e in entries
            if (operation is None or e.operation == operation)
            and (actor is None or e.actor == actor)
            and (since is None or e.at >= since)
            and (until is None or e.at <= until)
        ]
    )
