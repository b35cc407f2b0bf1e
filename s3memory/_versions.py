"""One version of a file: read it, restore it, redact it (``EncryptedMemory.read_version``,
``restore``, ``redact``; the entries come from ``_history``).

A version is found through the file's history, so that one from before a rename (stored
under the old path's key, bound to the old path) is read where it is. Restoring writes its
text back as the newest version with compare-and-swap; redacting deletes its ciphertext for
good after a sealed record has kept who made it and when, and with it every version of the
search index (``_index``), which may hold that text too.
"""

from __future__ import annotations

from . import _envelope as envelope
from . import _records
from ._entries import MemoryVersion
from ._errors import (
    ConfigurationError,
    NotADirectoryConflict,
    PathExistsError,
    PreconditionFailedError,
    VersionNotFoundError,
)
from ._files import SealedFiles
from ._history import history, own_versions, require_versions
from ._paths import MemoryPath, parse_path
from ._provenance import Provenance
from .stores import ObjectInfo, StoredObject


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


def redact(files: SealedFiles, path: MemoryPath, version: str) -> str:
    """Delete ``version``'s content for good; a record keeps who made it and when."""
    entry = _find(files, path, version)
    if entry.current:
        raise ConfigurationError(
            f"Error: Version {version} is the current content of {entry.path}. Edit or delete the file "
            "first, then redact this version."
        )
    where = parse_path(entry.path)
    key = files.layout.key_for(where)
    original = None
    head = files.store.head_version(key, version)
    provenance = _provenance_of(files, where, key, head)
    if provenance is not None:
        original = {
            "op": provenance.op,
            "at": provenance.at_us,
            "by": provenance.actor,
            "file": provenance.file,
            "rev": provenance.rev,
        }
    etag = "" if head is None else _records.bare_etag(head.etag)  # what a deletion's record names it by
    # The record first, so that who and when survive whatever happens next.
    record = {"op": "redacted", "path": entry.path, "version": version, "etag": etag, "original": original}
    _records.sealer(files, [where]).write(record)
    # The search index holds the text of every file as it was when each index version was
    # written, this version's perhaps among them: every version of it goes first (it is
    # rebuilt lazily from the current files, which this version is not). Before the
    # version itself, so that a failure here leaves the redaction to be run again.
    files.store.purge(files.layout.index_prefix)
    files.store.delete_version(key, version)
    return f"Redacted version {version} of {entry.path}"
