"""History entries: a key's versions, their provenance and the records about them, turned
into :class:`MemoryVersion` entries (pure: ``_history`` makes the requests).

The rules, oldest version first: a version's provenance says who made it and how; one that
names a version already seen, or not the one before it, is out of sequence (a replay or a
splice); the same version copied in place (a key rotation's re-wrap) is one entry; a delete
marker is told by the record that names the version before it (by ETag, each record once);
a redaction keeps the entry of the version it destroyed, from the record.
"""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .._crypto import envelope
from .._crypto.provenance import NO_PROVENANCE, Provenance
from ..stores import ObjectVersion
from .records import bare_etag

Opened = tuple[Provenance | None, str]  # a version's provenance, or why there is none


@dataclass(frozen=True)
class MemoryVersion:
    """One entry of a file's history, or of the store-wide feed of changes.

    ``version`` is the id to pass to ``read_version``, ``restore`` and ``redact`` (the store's
    version id; for a deletion, its delete marker's). ``actor`` is None when no record says
    who (written before history was kept, or outside s3memory). ``verified`` is True when
    the provenance is present, authentic and in sequence; ``note`` says why not, or what
    else there is to know (renamed from or to, redacted by whom). ``finding`` is what the
    instruction screen found in the write (``instruction_policy="flag"``: kinds and lines,
    never the text), or that a reviewer approved it; None for most writes.
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
    finding: str | None = None
    #: The stored version's ETag (bare; "" for a deletion). A redacted version keeps it, and
    #: says when and by whom it was redacted.
    etag: str = ""
    redacted_at: datetime.datetime | None = None
    redacted_by: str | None = None


def _when(us: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(us / 1_000_000, tz=datetime.timezone.utc)


# -- provenance from records -------------------------------------------------------------------
def _provenance(op: str, record: Mapping[str, Any], fields: Mapping[str, Any]) -> Provenance | None:
    """The provenance a record gives a version, if its fields are well formed."""
    try:
        return Provenance.from_record(
            {
                "v": 1,
                "op": op,
                "at": record.get("at"),
                "by": record.get("by"),
                "file": fields.get("file"),
                "rev": fields.get("rev"),
                "prev": fields.get("prev"),
                **({"finding": fields["finding"]} if "finding" in fields else {}),
            }
        )
    except ValueError:
        return None


class VersionClaims:
    """The provenance records give versions, by (path, ETag): a new version's record, and a
    rename's entry for each copy. Only an unambiguous pairing is made; any other version is
    read by its own provenance (a HEAD), which cannot be mistaken:

    - a version with the ETag of the version just before it (no delete marker between) is
      that version copied in place (a key rotation's re-wrap, or a copy by the bucket);
    - a (path, ETag) that more than one record names (a body renamed away and back), or that
      more versions have than records name it (a replayed copy), pairs none of its versions.
    """

    def __init__(self, records: Sequence[Mapping[str, Any]]) -> None:
        found: dict[tuple[str, str], list[Provenance]] = {}
        for record in records:
            op, etag = record.get("op"), record.get("etag")
            if op in ("created", "modified", "restored") and isinstance(etag, str) and "files" not in record:
                made = _provenance(str(op), record, record)
                if made is not None:
                    found.setdefault((str(record.get("path")), etag), []).append(made)
            elif op == "renamed" and isinstance(record.get("files"), list):
                for entry in record["files"]:
                    if isinstance(entry, dict) and isinstance(entry.get("etag"), str) and "rev" in entry:
                        made = _provenance("renamed", record, entry)
                        if made is not None:
                            found.setdefault((str(entry.get("to")), entry["etag"]), []).append(made)
        self._found = found

    def assign(
        self, path: str, versions: Sequence[ObjectVersion]
    ) -> tuple[dict[tuple[str, str], Opened], list[ObjectVersion]]:
        """The provenance of each version of ``path`` (newest first, as listed) a record
        gives, and the versions none does (to read with a HEAD)."""
        opened: dict[tuple[str, str], Opened] = {}
        unclaimed: list[ObjectVersion] = []
        etags = Counter(bare_etag(v.etag) for v in versions if not v.is_delete_marker)
        previous = ""
        for version in reversed(versions):
            if version.is_delete_marker:
                previous = ""
                continue
            etag = bare_etag(version.etag)
            waiting = self._found.get((path, etag), [])
            if etag != previous and len(waiting) == 1 and etags[etag] == 1:
                opened[(version.key, version.version_id)] = (waiting[0], "")
            else:
                unclaimed.append(version)
            previous = etag
        return opened, unclaimed


# -- one key's versions, as entries ------------------------------------------------------------
class EntryBuilder:
    """Turns the versions of one key (and the records about it) into history entries."""

    def __init__(self, records: Sequence[Mapping[str, Any]]) -> None:
        self.records = records
        # A redacted version is gone from the store; the one after it still names it.
        self.redacted_revs = {
            str(r["original"].get("rev"))
            for r in records
            if r.get("op") == "redacted" and isinstance(r.get("original"), dict)
        }
        # ... and a deletion's record names the version before the delete marker by its ETag:
        # (the redacted version's own time, its ETag), per path.
        self.redacted_etags: dict[str, list[tuple[int, str]]] = {}
        for r in records:
            original = r.get("original")
            if r.get("op") == "redacted" and r.get("etag") and isinstance(original, dict):
                at = original.get("at")
                moment = at if isinstance(at, int) else 0
                self.redacted_etags.setdefault(str(r.get("path")), []).append((moment, str(r["etag"])))
        # Each (record, file) explains at most one delete marker: a replayed version deleted
        # again is not the same deletion.
        self._used: set[tuple[int, str, str]] = set()
        # The deletions and renames that removed each (path, ETag), for :meth:`_record_for`.
        self._removals: dict[tuple[str, str], list[tuple[int, Mapping[str, Any], Mapping[str, Any]]]] = {}
        for index, record in enumerate(records):
            if record.get("op") in ("deleted", "renamed") and isinstance(record.get("files"), list):
                for entry in record["files"]:
                    if isinstance(entry, dict) and isinstance(entry.get("path"), str):
                        where = (entry["path"], bare_etag(str(entry.get("etag"))))
                        self._removals.setdefault(where, []).append((index, record, entry))

    def _record_for(self, path: str, etag: str) -> Mapping[str, Any] | None:
        """The deletion or rename that removed the version of ``path`` with ``etag``."""
        found: dict[str, Any] | None = None
        use = None
        for index, record, entry in self._removals.get((path, bare_etag(etag)), []):
            if (index, path, bare_etag(etag)) in self._used:
                continue
            if found is None or record.get("at", 0) > found.get("at", 0):
                found, use = {**record, "file_entry": entry}, (index, path, bare_etag(etag))
        if use is not None:
            self._used.add(use)
        return found

    def entries(
        self, path: str, key: str, versions: Sequence[ObjectVersion], opened: Mapping[tuple[str, str], Opened]
    ) -> list[MemoryVersion]:
        """The entries of one key, oldest first, from its versions (newest first, as listed)."""
        out: list[MemoryVersion] = []
        seen: set[str] = set()
        last: Provenance | None = None
        last_etag = ""
        after_marker = False
        for version in reversed(versions):  # oldest first
            if version.is_delete_marker:
                out.append(self._removal(path, version, last_etag, last))
                last_etag, after_marker = "", True
                continue
            provenance, problem = opened.get((key, version.version_id), (None, NO_PROVENANCE))
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
                etag=bare_etag(version.etag),
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
                    finding=provenance.finding,
                )
                if last is not None and provenance.rev == last.rev and out and not after_marker:
                    # The same version copied again (a key rotation re-wraps in place).
                    out[-1] = replace(
                        out[-1], version=version.version_id, current=version.is_latest, etag=bare_etag(version.etag)
                    )
                    last_etag = version.etag
                    continue
                problem = self._out_of_sequence(provenance, last, seen, after_marker=after_marker)
                if problem:  # shown when the store wrote it (its clock may have only seconds), in order
                    stored = _when(version.last_modified * 1_000_000)
                    at = max(stored, out[-1].at) if out else stored
                    entry = replace(entry, verified=False, note=problem, at=at)
                elif provenance.op == "renamed":
                    moved = self._rename_into(path, provenance.at_us)
                    entry = replace(
                        entry, note=f"renamed from {moved}" if moved else "renamed (no record of from where)"
                    )
                seen.add(provenance.rev)
            out.append(entry)
            last, last_etag, after_marker = provenance, version.etag, False
        return out

    def _out_of_sequence(
        self, provenance: Provenance, last: Provenance | None, seen: set[str], *, after_marker: bool
    ) -> str:
        if provenance.rev in seen:
            return "out of sequence: a copy of an earlier version (replayed)"
        if provenance.rev in self.redacted_revs:
            return "out of sequence: a copy of a redacted version (replayed)"
        if provenance.op == "created" and last is not None and not after_marker:
            return "out of sequence: a new file's version over an existing one (replayed)"
        if provenance.op not in ("modified", "restored"):
            return ""
        expected = None if last is None else last.rev
        if provenance.prev != expected and provenance.prev not in self.redacted_revs:
            return "out of sequence: it does not follow the version before it"
        return ""

    def _rename_into(self, path: str, at_us: int) -> str | None:
        """Where the rename that made a version came from: of the renames into ``path``, the
        one recorded nearest the copy's own time ``at_us`` (a path may be renamed into twice)."""
        candidates = [
            (abs(int(record.get("at", 0)) - at_us), str(entry.get("path")))
            for record in self.records
            if record.get("op") == "renamed"
            for entry in record.get("files", [])
            if isinstance(entry, dict) and entry.get("to") == path
        ]
        return min(candidates)[1] if candidates else None

    def _removal(self, path: str, marker: ObjectVersion, etag: str, last: Provenance | None) -> MemoryVersion:
        record = self._record_for(path, etag) if etag else None
        if record is None:  # the version it removed may have been redacted since
            after = 0 if last is None else last.at_us
            before = int(marker.last_modified * 1_000_000) + 1_000_000  # the store's clock may have seconds only
            # The oldest redacted version whose deletion is not yet told (markers come in order).
            for _, tag in sorted((at, tag) for at, tag in self.redacted_etags.get(path, []) if after <= at <= before):
                record = self._record_for(path, tag)
                if record is not None:
                    break
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
        """The entry of each version of ``path`` a redaction removed (each once, however many
        times it was redacted: a redaction whose deletes failed is run again)."""
        out: dict[str, MemoryVersion] = {}
        for record in self.records:
            if record.get("op") == "redacted" and record.get("path") == path:
                original = record.get("original") or {}
                note = f"redacted by {record.get('by')} at {_when(record.get('at', 0)).isoformat()}"
                source = self.redacted_rename_source(path, record)
                if source is not None:
                    note += f" (renamed from {source})"
                out.setdefault(
                    str(record.get("version")),
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
                        note,
                        etag=bare_etag(str(record.get("etag") or "")),
                        redacted_at=_when(record.get("at", 0)),
                        redacted_by=None if record.get("by") is None else str(record.get("by")),
                    ),
                )
        return list(out.values())

    def redacted_sources(self, path: str) -> dict[str, str]:
        """Where each version of ``path`` a redaction removed came from, by version id, for
        those a rename made (what :meth:`redactions` notes)."""
        found: dict[str, str] = {}
        for record in self.records:
            if record.get("op") == "redacted" and record.get("path") == path:
                source = self.redacted_rename_source(path, record)
                if source is not None:
                    found.setdefault(str(record.get("version")), source)
        return found

    def redacted_rename_source(self, path: str, record: Mapping[str, Any]) -> str | None:
        """Where the version a redaction ``record`` removed came from, if a rename made it:
        its history goes on there, as the copy's did."""
        original = record.get("original")
        if not isinstance(original, dict) or original.get("op") != "renamed":
            return None
        at = original.get("at")
        return self._rename_into(path, at) if isinstance(at, int) and not isinstance(at, bool) else None
