"""One version of a file: read it, restore it, redact it (``EncryptedMemory.read_version``,
``restore``, ``redact``; the entries come from ``_history``).

A version is found through the file's history, so that one from before a rename (stored
under the old path's key, bound to the old path) is read where it is. Restoring writes its
text back as the newest version with compare-and-swap. Redacting removes the version's text,
not one version: every stored version of the tenant that yields it (a rename's copy at
another path, a restore of it, a key rotation's re-wrap, the same text written again), every
held write made on it (``_quarantine``), and every version of the search index (``_index``),
after a sealed record about each version removed has kept who made it and when; refused if
the text is still some file's current content (:func:`redact`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Protocol

from .._crypto import envelope
from .._crypto.files import SealedFiles
from .._crypto.provenance import Provenance
from .._errors import (
    ConfigurationError,
    ForeignObjectError,
    IntegrityError,
    NotADirectoryConflict,
    ObjectTooLargeError,
    PathExistsError,
    PreconditionFailedError,
    VersionNotFoundError,
)
from .._paths import MemoryPath, parse_path
from ..stores import ObjectInfo, ObjectVersion, StoredObject
from . import records as _records
from .entries import MemoryVersion
from .listing import history, own_versions, require_versions


def _find(files: SealedFiles, path: MemoryPath, version: str) -> MemoryVersion:
    for entry in history(files, path):
        if entry.version == version:
            if entry.note.startswith("redacted"):
                raise VersionNotFoundError(
                    f"Error: Version {version} of {entry.path} was redacted: its content is gone for good."
                )
            if entry.size is None:
                raise VersionNotFoundError(
                    f"Error: Version {version} of {entry.path} is a {entry.operation}, not content."
                )
            return entry
    raise VersionNotFoundError(f"Error: {path.display} has no version {version!r}.")


def _get(files: SealedFiles, key: str, version: str) -> StoredObject | None:
    return files.store.get_version(key, version, max_bytes=files.max_file_bytes + envelope.TAG_BYTES)


def _located(
    files: SealedFiles, path: MemoryPath, version: str, found_here: StoredObject | None
) -> tuple[MemoryPath, StoredObject]:
    """Where ``version`` is stored and what: at ``path``'s own key (fetched already, the
    common case), else found through the history (a version from before a rename), else
    :class:`VersionNotFoundError` saying why (redacted, a deletion, or none)."""
    if found_here is not None:
        return path, found_here
    entry = _find(files, path, version)
    where = parse_path(entry.path)
    stored = _get(files, files.layout.key_for(where), version)
    if stored is None:
        raise VersionNotFoundError(f"Error: {path.display} has no version {version!r}.")
    return where, stored


def _opened(files: SealedFiles, where: MemoryPath, stored: StoredObject, version: str) -> tuple[str, Provenance | None]:
    key = files.layout.key_for(where)
    plaintext, data_key = files.decrypt_with_key(where.display, where.display, bytes(stored.body), stored.metadata)
    try:
        text = plaintext.decode("utf-8")
    except UnicodeDecodeError:
        raise VersionNotFoundError(f"Error: Version {version} of {where.display} is not UTF-8 text.") from None
    return text, files.provenance_in(stored.metadata, key, data_key)


def _checked(path: MemoryPath, version: object) -> str:
    if not isinstance(version, str) or not version or len(version) > 1024:
        raise VersionNotFoundError(f"Error: {path.display} has no version {str(version)[:100]!r}.")
    return version


def read_version(files: SealedFiles, path: MemoryPath, version: str) -> str:
    """The text of ``version`` of ``path``: one GET, or its history first for a version from
    before a rename."""
    require_versions(files)
    version = _checked(path, version)
    where, stored = _located(files, path, version, _get(files, files.layout.key_for(path), version))
    return _opened(files, where, stored, version)[0]


def restore(files: SealedFiles, path: MemoryPath, version: str) -> str:
    """Write ``version``'s text back at ``path`` as a new version, compare-and-swap: two round
    trips (the version, the current file and a data key; then the conditional PUT)."""
    require_versions(files)
    version = _checked(path, version)
    key = files.layout.key_for(path)
    rt = files.round_trip()
    found = rt.submit(_get, files, key, version)
    current = rt.submit(files.store.head, key)
    new_key = rt.submit(files.keyring.generate, files.binding(path))
    is_dir = rt.submit(files.has_objects_under, path)
    records = rt.submit(_records.sealer, files, [path])
    ancestor_heads = files.head_ancestors(rt, path)
    rt.wait()
    where, stored = _located(files, path, version, found.result())
    # The same shape rules as create: never a file beside a directory of one name, or below a file.
    if current.result() is None and is_dir.result():
        raise PathExistsError(f"Error: Cannot restore {path.display}: it is a directory now")
    for ancestor, above in zip(path.ancestors(), ancestor_heads, strict=True):
        if above.result() is not None:
            raise NotADirectoryConflict(
                f"Error: Cannot restore {path.display}: {ancestor.display} is a file, not a directory"
            )
    text, restored = _opened(files, where, stored, version)
    head = current.result()
    data_key, wrapped = new_key.result()
    body, metadata = envelope.seal(text.encode("utf-8"), data_key, wrapped)
    # The file at the path goes on: after its current version, or after its last one before
    # it was deleted; a path that never had one takes the restored version's file.
    follows = _provenance_of(files, path, key, head) if head is not None else _last_provenance(files, path, key)
    metadata, provenance = files.stamped(metadata, key, "restored", data_key, follows=follows or restored)
    # Round trip 2: the conditional write, and beside it its record.
    rt = files.round_trip()
    if head is None:
        rt.submit(files.store.put, key, body, metadata, if_none_match=True)
    else:
        rt.submit(files.store.put, key, body, metadata, if_match=head.etag)
    rt.submit(records.result().write_beside, _records.version_record(path, provenance, body))
    try:
        rt.wait()
    except PreconditionFailedError:
        raise PreconditionFailedError(
            f"Error: {path.display} changed while it was being restored; nothing was written. Try again."
        ) from None
    return f"Restored {path.display} to version {version}"


def _provenance_of(files: SealedFiles, path: MemoryPath, key: str, head: ObjectInfo | None) -> Provenance | None:
    return None if head is None else files.provenance_of(path.display, key, head.metadata)[0]


def _last_provenance(files: SealedFiles, path: MemoryPath, key: str) -> Provenance | None:
    """The provenance of the newest version at ``key`` that is not a delete marker."""
    for version in own_versions(files, key):
        if not version.is_delete_marker:
            return _provenance_of(files, path, key, files.store.head_version(key, version.version_id))
    return None


# -- redaction: the content, wherever it is stored ----------------------------------------------
@dataclass(frozen=True)
class _Content:
    """What identifies the text of the version being redacted: its body (and size), and the
    SHA-256 of its plaintext when it opens (None: a version that does not open, or too large
    to read, is matched by its body alone: by ETag when even the body could not be read)."""

    size: int
    etag: str
    body: bytes | None
    digest: str | None


@dataclass(frozen=True)
class _Removed:
    """One stored version that yields the text: where, which, and its own provenance."""

    path: MemoryPath
    version: ObjectVersion
    provenance: Provenance | None


def _read_content(files: SealedFiles, where: MemoryPath, key: str, version: str) -> tuple[_Content, Provenance | None]:
    """Round trip 1's GET of the version itself: its content, and its provenance for the record."""
    try:
        stored = _get(files, key, version)
    except ObjectTooLargeError:
        head = files.store.head_version(key, version)
        if head is None:
            raise VersionNotFoundError(f"Error: {where.display} has no version {version!r}.") from None
        return _Content(head.size, _records.bare_etag(head.etag), None, None), _provenance_of(files, where, key, head)
    if stored is None:
        raise VersionNotFoundError(f"Error: {where.display} has no version {version!r}.")
    body = bytes(stored.body)
    try:
        plaintext, data_key = files.decrypt_with_key(where.display, where.display, body, stored.metadata)
    except (IntegrityError, ForeignObjectError):  # tampered with: redacted all the same, by its body
        return _Content(len(body), _records.bare_etag(stored.etag), body, None), None
    digest = hashlib.sha256(plaintext).hexdigest()
    content = _Content(len(body), _records.bare_etag(stored.etag), body, digest)
    return content, files.provenance_in(stored.metadata, key, data_key)


def _same_text(files: SealedFiles, path: MemoryPath, version: ObjectVersion, content: _Content) -> _Removed | None:
    """Round trip 2's GET of one version of the same size: whether it yields the text (the
    same body: a rename's copy, a key rotation's re-wrap; or the same plaintext: a restore, a
    write of the same text), with its provenance if it does. A KMS ``Decrypt`` in KMS mode
    for a body that differs (unless cached)."""
    try:
        stored = files.store.get_version(version.key, version.version_id, max_bytes=content.size)
    except ObjectTooLargeError:
        stored = None
    if stored is None:
        same = content.body is None and _records.bare_etag(version.etag) == content.etag
        return _Removed(path, version, None) if same else None
    body = bytes(stored.body)
    if body == content.body or (content.body is None and _records.bare_etag(stored.etag) == content.etag):
        return _Removed(path, version, files.provenance_of(path.display, version.key, stored.metadata)[0])
    if content.digest is None:
        return None
    try:
        plaintext, data_key = files.decrypt_with_key(path.display, path.display, body, stored.metadata)
    except (IntegrityError, ForeignObjectError):
        return None  # does not open: it yields nothing
    if hashlib.sha256(plaintext).hexdigest() != content.digest:
        return None
    return _Removed(path, version, files.provenance_in(stored.metadata, version.key, data_key))


def _original(provenance: Provenance | None) -> dict[str, object] | None:
    if provenance is None:
        return None
    return {
        "op": provenance.op,
        "at": provenance.at_us,
        "by": provenance.actor,
        "file": provenance.file,
        "rev": provenance.rev,
    }


def _counted(count: int, what: str) -> str:
    return f"{count} {what}{'' if count == 1 else 's'}"


class HeldWrites(Protocol):
    """The writes held for review, as redaction must reach them (``_quarantine`` is one: it
    is passed in, so that history stays below the memory's rules)."""

    def held_versions(self, files: SealedFiles) -> list[ObjectVersion]: ...

    def holds_text(self, files: SealedFiles, version: ObjectVersion, digest: str) -> bool: ...


def redact(files: SealedFiles, path: MemoryPath, version: str, *, held_writes: HeldWrites) -> str:
    """Delete ``version``'s text for good wherever the tenant stores it; a record keeps who
    made each version removed and when.

    The text is identified by content, not by version: every stored version of every file of
    the tenant with the same body (a rename's copy, a key rotation's re-wrap) or the same
    plaintext (a restore of it, the same text written again), found among the versions of
    its size (AES-GCM adds a fixed 16 bytes); every stored version of a held write made on
    that text or that would leave it; and every version of the search index. Refused, with
    nothing removed, if that text is still some file's current content.

    Requests, beyond the history that finds the version: round trip 1, the version's GET,
    the LIST of every version of the tenant's files and of its held writes, and the history
    key; 2, a GET of each version of that size and of each held write's version; 3, a record
    per version removed; 4, the search index's versions, the held writes' and the copies'
    deleted; 5, the version itself (last, so that a failure leaves the redaction to be run
    again).
    """
    version = _checked(path, version)
    entry = _find(files, path, version)  # the history: refused there if the store keeps no versions
    if entry.current:
        raise ConfigurationError(
            f"Error: Version {version} is the current content of {entry.path}. Edit or delete the file "
            "first, then redact this version."
        )
    where = parse_path(entry.path)
    key = files.layout.key_for(where)
    # Round trip 1: the version, every version of the tenant's files and held writes, the history key.
    rt = files.round_trip()
    read = rt.submit(_read_content, files, where, key, version)
    listed = rt.submit(lambda: list(files.store.list_versions(files.layout.memory_prefix)))
    held = rt.submit(held_writes.held_versions, files)
    sealer = rt.submit(_records.sealer, files, [where])
    rt.wait()
    content, provenance = read.result()
    path_of = files.layout.path_reader()
    candidates = [
        (found, v)
        for v in listed.result()
        if not v.is_delete_marker
        and v.size == content.size
        and (v.key, v.version_id) != (key, version)
        and (found := path_of(v.key)) is not None
    ]
    # Round trip 2: each version of that size, and each held write's.
    rt = files.round_trip()
    same = [rt.submit(_same_text, files, p, v, content) for p, v in candidates]
    digest = content.digest
    holding = (
        [] if digest is None else [(v, rt.submit(held_writes.holds_text, files, v, digest)) for v in held.result()]
    )
    rt.wait()
    copies = [r for r in (pending.result() for pending in same) if r is not None]
    current = next((c for c in copies if c.version.is_latest), None)
    if current is not None:
        raise ConfigurationError(
            f"Error: The text of version {version} of {entry.path} is the current content of "
            f"{current.path.display}. Edit or delete that file first, then redact this version."
        )
    held_doomed = [v for v, pending in holding if pending.result()]
    # Round trip 3: the records first, so that who and when survive whatever happens next.
    records = sealer.result()
    removed = [(where, version, content.etag, provenance)] + [
        (c.path, c.version.version_id, _records.bare_etag(c.version.etag), c.provenance) for c in copies
    ]
    rt = files.round_trip()
    for at, version_id, etag, made in removed:
        record = {
            "op": "redacted",
            "path": at.display,
            "version": version_id,
            "etag": etag,
            "original": _original(made),
        }
        rt.submit(records.about(at).write, record)
    rt.wait()
    # Round trip 4: the search index holds the text of every file as it was when each of its
    # versions was written, this text perhaps among them: every version of it goes (it is
    # rebuilt lazily from the current files, none of which holds this text). Beside it the
    # held writes' versions and the copies.
    rt = files.round_trip()
    purged = rt.submit(files.store.purge, files.layout.index_prefix)
    for held_version in held_doomed:
        rt.submit(files.store.delete_version, held_version.key, held_version.version_id)
    for c in copies:
        rt.submit(files.store.delete_version, c.version.key, c.version.version_id)
    rt.wait()
    # Round trip 5: the version itself, last: until it is gone, the redaction can be run again.
    files.store.delete_version(key, version)
    paths = list(dict.fromkeys([where.display, *sorted({c.path.display for c in copies} - {where.display})]))
    shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
    return (
        f"Redacted version {version} of {entry.path}: removed {_counted(len(removed), 'stored version')} of its "
        f"text ({shown}), {_counted(len(held_doomed), 'held write')} and "
        f"{_counted(purged.result(), 'version')} of the search index"
    )
