"""History: every version of a memory file and who made it; the store-wide feed of changes.

Built on the store's versions (a versioned S3 bucket; the in-memory and local stores keep
versions too) and on sealed provenance (``_provenance``): each version's own metadata says
who wrote it, how and when; deletions, renames and redactions leave a sealed record.

:func:`history` of a path, in two round trips: (1) the versions of its key, beside the
listings of the records about it and its directories; (2) a HEAD of each version, beside a
GET of each record. A file that came from a rename takes two more per rename, to follow it
back to where it was. :func:`changes` is the same over every key under a prefix. Each
entry says whether its provenance is ``verified``: present, authentic, and in sequence
(a version that claims to follow another than the one before it is a replay or a splice).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from . import _envelope as envelope
from . import _records
from ._errors import (
    ConfigurationError,
    ForeignObjectError,
    IntegrityError,
)
from ._files import SealedFiles
from ._paths import MemoryPath, parse_path
from ._provenance import OPERATIONS, PROVENANCE_METADATA, Provenance, open_provenance
from ._records import bare_etag
from .stores import ObjectVersion

_NO_PROVENANCE = "no provenance (written before history was kept, or outside s3memory)"
Opened = tuple[Provenance | None, str]  # a version's provenance, or why there is none

MAX_RENAME_HOPS = 16  # how far back a history follows a file through renames

NO_VERSIONS = (
    "Error: This memory's store keeps no versions, so it has no history (on S3, turn on bucket "
    "versioning: aws s3api put-bucket-versioning --bucket BUCKET --versioning-configuration Status=Enabled). "
    "Everything else works without it."
)


@dataclass(frozen=True)
class MemoryVersion:
    """One entry of a file's history, or of the store-wide feed of changes.

    ``version`` is the id to pass to ``read_version``, ``restore`` and ``redact`` (the store's
    version id; for a deletion, its delete marker's). ``actor`` is None when no record says
    who (written before history was kept, or outside s3memory). ``verified`` is True when
    the provenance is present, authentic and in sequence; ``note`` says why not, or what
    else there is to know (renamed from or to, redacted by whom).
    """

    path: str
    version: str
    operation: str
    actor: str | None
    at: datetime.datetime
    size: int | None
    file_id: str | None
    current: bool
    verified: bool
    note: str = ""


def _when(us: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(us / 1_000_000, tz=datetime.timezone.utc)


# -- one key's versions, as entries ------------------------------------------------------------
class _Builder:
    """Turns the versions of one key (and the records about it) into history entries."""

    def __init__(self, files: SealedFiles, records: Sequence[Mapping[str, Any]]) -> None:
        self.files = files
        self.records = records
        # A redacted version is gone from the store; the one after it still names it.
        self.redacted_revs = {
            str(r["original"].get("rev"))
            for r in records
            if r.get("op") == "redacted" and isinstance(r.get("original"), dict)
        }
        # ... and a deletion's record names the version before the delete marker by its ETag.
        self.redacted_etags: dict[str, list[str]] = {}
        for r in records:
            if r.get("op") == "redacted" and r.get("etag"):
                self.redacted_etags.setdefault(str(r.get("path")), []).append(str(r["etag"]))

    def _record_for(self, path: str, etag: str) -> Mapping[str, Any] | None:
        """The deletion or rename that removed the version of ``path`` with ``etag``."""
        found = None
        for record in self.records:
            if record.get("op") in ("deleted", "renamed"):
                for entry in record.get("files", []):
                    if isinstance(entry, dict) and entry.get("path") == path and entry.get("etag") == bare_etag(etag):
                        if found is None or record.get("at", 0) > found.get("at", 0):
                            found = {**record, "file_entry": entry}
        return found

    def entries(
        self, path: str, key: str, versions: Sequence[ObjectVersion], opened: Mapping[tuple[str, str], Opened]
    ) -> list[MemoryVersion]:
        """The entries of one key, oldest first, from its versions (newest first, as listed)."""
        out: list[MemoryVersion] = []
        seen: set[str] = set()
        last: Provenance | None = None
        last_etag = ""
        for version in reversed(versions):  # oldest first
            if version.is_delete_marker:
                out.append(self._removal(path, version, last_etag, last))
                last_etag = ""
                continue
            provenance, problem = opened.get((key, version.version_id), (None, _NO_PROVENANCE))
            size = max(0, version.size - envelope.TAG_BYTES)
            entry = MemoryVersion(
                path,
                version.version_id,
                "modified",
                None,
                _when(version.last_modified * 1_000_000),
                size,
                None,
                version.is_latest,
                False,
            )
            if provenance is None:  # when the store wrote it (perhaps to the second only), in order
                entry = replace(entry, note=problem, at=max(entry.at, out[-1].at) if out else entry.at)
            else:
                entry = replace(
                    entry,
                    operation=provenance.op,
                    actor=provenance.actor,
                    at=_when(provenance.at_us),
                    file_id=provenance.file,
                    verified=True,
                )
                if last is not None and provenance.rev == last.rev and out:
                    # The same version copied again (a key rotation re-wraps in place).
                    out[-1] = replace(out[-1], version=version.version_id, current=version.is_latest)
                    last_etag = version.etag
                    continue
                problem = self._out_of_sequence(provenance, last, seen)
                if problem:  # shown when the store wrote it (its clock may have only seconds), in order
                    stored = _when(version.last_modified * 1_000_000)
                    at = max(stored, out[-1].at) if out else stored
                    entry = replace(entry, verified=False, note=problem, at=at)
                elif provenance.op == "renamed":
                    moved = self._rename_into(path, provenance)
                    entry = replace(
                        entry, note=f"renamed from {moved}" if moved else "renamed (no record of from where)"
                    )
                seen.add(provenance.rev)
            out.append(entry)
            last, last_etag = provenance, version.etag
        return out

    def _out_of_sequence(self, provenance: Provenance, last: Provenance | None, seen: set[str]) -> str:
        if provenance.rev in seen:
            return "out of sequence: a copy of an earlier version (replayed)"
        if provenance.op not in ("modified", "restored"):
            return ""
        expected = None if last is None else last.rev
        if provenance.prev != expected and provenance.prev not in self.redacted_revs:
            return "out of sequence: it does not follow the version before it"
        return ""

    def _rename_into(self, path: str, provenance: Provenance) -> str | None:
        """Where the rename that made this version came from: of the renames into ``path``,
        the one recorded nearest the copy's own time (a path may be renamed into twice)."""
        candidates = [
            (abs(int(record.get("at", 0)) - provenance.at_us), str(entry.get("path")))
            for record in self.records
            if record.get("op") == "renamed"
            for entry in record.get("files", [])
            if isinstance(entry, dict) and entry.get("to") == path
        ]
        return min(candidates)[1] if candidates else None

    def _removal(self, path: str, marker: ObjectVersion, etag: str, last: Provenance | None) -> MemoryVersion:
        record = self._record_for(path, etag) if etag else None
        for redacted in self.redacted_etags.get(path, []) if record is None else []:
            record = record or self._record_for(path, redacted)  # the version it removed was redacted since
        when = _when(marker.last_modified * 1_000_000)
        file_id = None if last is None else last.file
        if record is None:
            return MemoryVersion(
                path,
                marker.version_id,
                "deleted",
                None,
                when,
                None,
                file_id,
                False,
                False,
                "no record of who deleted it",
            )
        note = f"renamed to {record['file_entry'].get('to')}" if record["op"] == "renamed" else ""
        return MemoryVersion(
            path,
            marker.version_id,
            str(record["op"]),
            str(record.get("by")),
            _when(record.get("at", 0)),
            None,
            file_id,
            False,
            True,
            note,
        )

    def redactions(self, path: str) -> list[MemoryVersion]:
        out = []
        for record in self.records:
            if record.get("op") == "redacted" and record.get("path") == path:
                original = record.get("original") or {}
                out.append(
                    MemoryVersion(
                        path,
                        str(record.get("version")),
                        str(original.get("op", "modified")),
                        original.get("by"),
                        _when(original.get("at", record.get("at", 0))),
                        None,
                        original.get("file"),
                        False,
                        True,
                        f"redacted by {record.get('by')} at {_when(record.get('at', 0)).isoformat()}",
                    )
                )
        return out


# -- queries -----------------------------------------------------------------------------------
def require_versions(files: SealedFiles) -> None:
    if not files.store.keeps_versions():
        raise ConfigurationError(NO_VERSIONS)


def own_versions(files: SealedFiles, key: str) -> list[ObjectVersion]:
    return [v for v in files.store.list_versions(key) if v.key == key]


def _keys_under(files: SealedFiles, prefix: str) -> list[str]:
    return [info.key for info in files.store.list(prefix)]


def _versions_under(files: SealedFiles, prefix: str) -> list[ObjectVersion]:
    return list(files.store.list_versions(prefix))


def _open_one(files: SealedFiles, path: str, version: ObjectVersion) -> Opened:
    """A HEAD of one version, and its provenance opened with its data key."""
    head = files.store.head_version(version.key, version.version_id)
    if head is None or PROVENANCE_METADATA not in head.metadata:
        return None, _NO_PROVENANCE
    try:
        data_key = files.data_key_of(path, head.metadata)
    except (IntegrityError, ForeignObjectError):
        return None, "provenance cannot be opened: the version's data key does not unwrap here"
    try:
        return open_provenance(data_key, head.metadata, version.key), ""
    except (LookupError, IntegrityError):
        return None, "provenance failed its integrity check (forged, or moved here)"


def _opened(files: SealedFiles, versions: Iterable[tuple[str, ObjectVersion]]) -> dict[tuple[str, str], Opened]:
    """Each version's provenance, concurrently (one round trip; in KMS mode each branch also
    unwraps the version's data key)."""
    rt = files.round_trip()
    pending = {(v.key, v.version_id): rt.submit(_open_one, files, path, v) for path, v in versions}
    rt.wait()
    return {found: opened.result() for found, opened in pending.items()}


def _path_entries(files: SealedFiles, path: MemoryPath, *, hops: int = 0) -> list[MemoryVersion]:
    """The entries of ``path``, oldest first, and of the files renamed into it before."""
    key = files.layout.key_for(path)
    rt = files.round_trip()
    listed = rt.submit(own_versions, files, key)
    record_lists = [
        rt.submit(_keys_under, files, files.layout.history_records_prefix(_records.path_tag(files, about.display)))
        for about in [path, *path.ancestors()]
    ]
    rt.wait()
    versions = listed.result()
    record_keys = [found for pending in record_lists for found in pending.result()]
    rt = files.round_trip()
    opened = rt.submit(_opened, files, [(path.display, v) for v in versions if not v.is_delete_marker])
    records = rt.submit(_records.read, files, record_keys)
    rt.wait()
    builder = _Builder(files, records.result())
    entries = builder.entries(path.display, key, versions, opened.result()) + builder.redactions(path.display)
    earlier: list[MemoryVersion] = []
    for entry in entries:
        if entry.operation == "renamed" and entry.note.startswith("renamed from ") and hops < MAX_RENAME_HOPS:
            try:
                source = parse_path(entry.note.removeprefix("renamed from "))
            except ValueError:
                continue
            before = _path_entries(files, source, hops=hops + 1)
            # The file's versions there; its leaving is this entry's arrival, said once.
            arrival = f"renamed to {path.display}"
            earlier += [e for e in before if e.file_id == entry.file_id and e.note != arrival]
    return earlier + entries


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
    if operation is not None and operation not in OPERATIONS:
        raise ConfigurationError(f"operation must be one of {', '.join(OPERATIONS)}, not {operation!r}")
    rt = files.round_trip()
    listed = rt.submit(_versions_under, files, files.layout.dir_prefix(directory))
    record_keys = rt.submit(_keys_under, files, files.layout.history_prefix)
    rt.wait()
    by_key: dict[str, list[ObjectVersion]] = {}
    for version in listed.result():
        by_key.setdefault(version.key, []).append(version)
    paths = {key: files.layout.path_for_key(key) for key in by_key}
    shown = [(path.display, v) for key, path in paths.items() if path is not None for v in by_key[key]]
    rt = files.round_trip()
    opened = rt.submit(_opened, files, [(name, v) for name, v in shown if not v.is_delete_marker])
    records = rt.submit(_records.read, files, record_keys.result())
    rt.wait()
    builder = _Builder(files, records.result())
    entries: list[MemoryVersion] = []
    for key, path in paths.items():
        if path is not None:
            entries += builder.entries(path.display, key, by_key[key], opened.result())
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
