"""The management API: what application code does to a memory beside the model's six
commands (seeding a store, review workflows, imports), as Managed Agents memory stores offer
it: writes with preconditions, conditional deletes, listings with content hashes.

:class:`MemoryAdmin` wraps an :class:`~s3memory.EncryptedMemory` and goes through the same
rules as the model's commands: the path limits, ``Limits.max_file_bytes``, the user's quota,
the sensitive-data guard, the instruction policy (under ``"quarantine"`` a write is held for
review and :class:`~s3memory.WriteHeldError` raised, as for the model), a read-only mount's
refusal, and a history record beside every change, made as the memory's actor.

Preconditions are compare-and-swap on the store, never a read followed by a blind write:

- ``NotExists()``: the write is a create, ``If-None-Match: *``. Of concurrent creators
  exactly one wins; the others get :class:`~s3memory.PreconditionFailedError`.
- ``Sha256(hex)``: the file is read, decrypted and hashed (SHA-256 of its UTF-8 text); then
  written ``If-Match`` the ETag read. Of concurrent writers holding the same hash exactly one
  wins; a lost race is not retried (the caller re-reads and decides).
- none: an upsert, ``If-Match`` the ETag read (``If-None-Match`` for a new file), re-read and
  retried up to ``Limits.edit_attempts`` times when it loses a race.

Content hashes in :meth:`MemoryAdmin.list` come from the sealed search index (``_index``),
which holds each file's text: at most 3 round trips warm, one when nothing changed. No
hash is ever stored in clear beside a file (it would confirm a guessed content).
"""

from __future__ import annotations

import builtins
import datetime
import functools
import hashlib
import random
import re
import time
from dataclasses import dataclass
from typing import TypeAlias

from .. import _telemetry
from .._core import writes
from .._core.memory import EncryptedMemory
from .._core.mounts import Mount, MountedMemory
from .._crypto import envelope
from .._crypto.files import TextFile
from .._errors import (
    ConfigurationError,
    InvalidCommandError,
    NotADirectoryConflict,
    PathExistsError,
    PreconditionFailedError,
    S3MemoryError,
)
from .._history import records as _records
from .._history.records import Sealer
from .._paths import ROOT, MemoryPath
from .._roundtrip import Pending
from .._search import index as _index
from ..stores import ObjectInfo

_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class NotExists:
    """Write only if nothing (no file, no directory) is at the path: ``If-None-Match: *``."""


@dataclass(frozen=True)
class Sha256:
    """Write (or delete) only if the file's content has this SHA-256: 64 lowercase hex
    digits, of the file's UTF-8 text, as ``MemoryInfo.sha256`` and the managed stores'
    ``content_sha256`` give it.

    Raises:
        InvalidCommandError: ``hex`` is not 64 lowercase hexadecimal characters (a malformed
            request, as a malformed path is; like it, also a ``ValueError``).
    """

    hex: str

    def __post_init__(self) -> None:
        if not isinstance(self.hex, str) or not _SHA256_HEX.fullmatch(self.hex):
            shown = repr(self.hex) if not isinstance(self.hex, str) or len(self.hex) <= 80 else repr(self.hex[:80])
            raise InvalidCommandError(f"Error: content_sha256 must be 64 lowercase hexadecimal characters, not {shown}")


Precondition: TypeAlias = NotExists | Sha256


@dataclass(frozen=True)
class MemoryInfo:
    """One file: its path (canonical, as the model sees it), its size and the SHA-256 of its
    UTF-8 text, and when it was last written.

    ``updated_at`` is the store's ``LastModified`` (UTC). It is **not authenticated**: the
    bucket (or whoever may write it) could forge it, unlike path, size and hash, which come
    from decrypted content. ``None`` where it is not known: after :meth:`MemoryAdmin.write`
    (a PUT's answer does not say), or from a store whose reads do not give it.
    """

    path: str
    size: int
    sha256: str
    updated_at: datetime.datetime | None
    #: From the version's sealed provenance, where known (None: a version written outside
    #: s3memory or before provenance, a read that does not open it): the file's id, kept
    #: across edits and renames; the version's time (µs since the epoch, authenticated);
    #: the time of the file's first version (None where its provenance does not say).
    #: ``etag``: the stored version's.
    file_id: str | None = None
    changed_us: int | None = None
    created_us: int | None = None
    etag: str | None = None


class _LostRace(Exception):
    """A conditional PUT found the file changed since it was read (internal)."""


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _when(seconds: float) -> datetime.datetime | None:
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc) if seconds > 0 else None


def _exists(path: str) -> PreconditionFailedError:
    return PreconditionFailedError(f"Error: Precondition failed: {path} already exists.", path=path)


def _content(path: str, expected: str, actual: str | None) -> PreconditionFailedError:
    return PreconditionFailedError(
        f"Error: Precondition failed: {path} does not have content_sha256 {expected}.",
        path=path,
        expected=expected,
        actual=actual,
    )


def listed_in(memory: EncryptedMemory, shown: str, depth: int | None) -> list[MemoryInfo]:
    """``MemoryAdmin.list`` in one store, whose paths ``shown`` and the results are as the
    memory shows them (below its mount point if mounted): a router lists each store below
    the prefix with it and merges."""
    if not isinstance(shown, str) or shown == ROOT or shown.endswith("/"):
        directory, tail = memory.gate.parse(shown), ""
    elif shown.rpartition("/")[2] in (".", ".."):  # the start of a name (".hidden"), not a segment
        directory, tail = memory.gate.parse(shown.rpartition("/")[0]), shown.rpartition("/")[2]
    else:  # validated whole, as a path: its last segment is the start of a name
        whole = memory.gate.parse(shown)
        directory, tail = MemoryPath("/".join(whole.parts[:-1])), whole.parts[-1]
    found = []
    for file in _index.current_files(memory.files, write_back=not memory.read_only):
        if not file.path.is_within(directory) or file.path == directory:
            continue
        below = file.path.parts[len(directory.parts) :]
        if not below[0].startswith(tail) or (depth is not None and len(below) - 1 > depth):
            continue
        found.append(
            MemoryInfo(
                memory.files.shown(file.path),
                file.size,
                file.sha256,
                _when(file.last_modified),
                file.file_id,
                file.at_us,
                file.created_us,
                file.etag,
            )
        )
    return found


def _routed_on(prefix: str) -> str:
    """The path a listing's prefix is routed by: without a last segment of ``.`` or ``..``,
    which start a hidden name there (``/memories/notes/.``), not a path segment."""
    if isinstance(prefix, str) and prefix.rpartition("/")[2] in (".", ".."):
        return prefix.rpartition("/")[0]
    return prefix


def _listed_in_tree(tree: MountedMemory, prefix: str, depth: int | None) -> builtins.list[MemoryInfo]:
    """``MemoryAdmin.list`` over a mounted tree: inside one mount, that store; else (a
    prefix in ``/memories`` itself) the own store's files, shadowed ones left out, and every
    mount whose files' paths start with the prefix, all stores listed at once."""
    routed_on = _routed_on(prefix)
    mount, store, parsed = tree.route(routed_on)
    if mount is not None and (len(parsed.parts) > 1 or prefix.endswith("/") or routed_on != prefix):
        return listed_in(store, prefix, depth)

    def in_store(entry: tuple[Mount | None, EncryptedMemory]) -> builtins.list[MemoryInfo]:
        mount, memory = entry
        if mount is None:
            return [i for i in listed_in(memory, prefix, depth) if not tree.is_shadowed(i.path)]
        if not (mount.path.startswith(prefix) or prefix.rstrip("/") == mount.path.rstrip("/")):
            return []  # e.g. the prefix /memories/te and the mount /memories/team/ match; /memories/x does not
        if depth == 0:
            return []  # a mount's files are one level below /memories at least
        return listed_in(memory, mount.path, None if depth is None else depth - 1)

    # On the tree's workers, every store's requests counted in this call's span.
    listings = tree.at_once([functools.partial(in_store, entry) for entry in tree.stores()])
    return sorted((info for listing in listings for info in listing), key=lambda info: info.path)


def _write_operation(precondition: object) -> str:
    """The conventions' name of a write: ``NotExists`` asks for a new record, ``Sha256`` for
    a change to a known one, none for either, whichever the store holds."""
    if isinstance(precondition, NotExists):
        return _telemetry.CREATE
    return _telemetry.UPDATE if isinstance(precondition, Sha256) else _telemetry.UPSERT


class MemoryAdmin:
    """The management API over one memory (see the module docstring), for application code.

    Every method may also raise what the model's commands raise for the same reason:
    ``InvalidPathError`` for a bad path, ``ReadOnlyMountError`` for a change to a store
    mounted read-only, ``StorageError``, ``TenantKeyError``, ``IntegrityError``. Messages name
    paths as the caller gave them. Reads here record no access markers (``track_access``):
    an application reviewing every file is not the model using them.
    """

    def __init__(self, memory: EncryptedMemory | MountedMemory) -> None:
        if not isinstance(memory, (EncryptedMemory, MountedMemory)):
            raise ConfigurationError("MemoryAdmin needs the memory open_memory(...) returns")
        self.memory = memory

    def _resolve(self, path: str) -> tuple[EncryptedMemory, str]:
        """The store ``path`` is in, and the path to give it (as the caller gave it)."""
        if isinstance(self.memory, MountedMemory):
            memory = self.memory.route(path)[1]
            _telemetry.note_store(memory)  # a mount's store, not the own one the span began with
            return memory, path
        return self.memory, path

    # -- write -----------------------------------------------------------------------------
    @_telemetry.traced("admin.write", lambda *_, precondition=None: _write_operation(precondition), records=1)
    def write(self, path: str, text: str, *, precondition: Precondition | None = None) -> MemoryInfo:
        """Create or replace the file at ``path`` with ``text``; what was written (the text
        after any redaction by the guard).

        A replaced file is screened as an edit is (``screen_edit(before, after)`` when the
        guard has it): a secret the file already held is not refused again.

        Raises:
            PreconditionFailedError: ``NotExists`` and a file or directory is at ``path``;
                ``Sha256(h)`` and the file is missing (``actual`` None), has another content
                (``actual`` its hash), or changed before the write landed (``actual`` what a
                read after the lost race found); no precondition, and the file kept changing
                under concurrent writers for ``Limits.edit_attempts`` tries. Nothing written.
            PathExistsError: no precondition, and ``path`` is a directory.
            NotADirectoryConflict: an ancestor of ``path`` is a file.
            InvalidCommandError: ``text`` is not a string, or a bad ``precondition``.
            SensitiveDataError: the guard found a secret in ``text``.
            WriteHeldError: held for review (``instruction_policy="quarantine"``).
            LimitExceededError: the file, or the user's quota, would be over its limit.
        """
        memory, shown = self._resolve(path)
        parsed = memory.gate.parse(shown)
        memory.gate.writable("write", shown)
        if not isinstance(text, str):
            raise InvalidCommandError("Error: `text` must be a string.")
        if precondition is not None and not isinstance(precondition, (NotExists, Sha256)):
            raise InvalidCommandError("Error: precondition must be NotExists(), Sha256(hex) or None.")
        memory.files.encode(text, shown)  # too large: refused before any request (again once screened)
        if parsed.is_root:
            if isinstance(precondition, NotExists):
                raise _exists(shown)
            if isinstance(precondition, Sha256):
                raise _content(shown, precondition.hex, None)
            raise PathExistsError(f"Error: Cannot write {shown}: it is a directory")
        if isinstance(precondition, NotExists):
            try:
                return self._create(memory, parsed, shown, text)
            except _LostRace:
                raise _exists(shown) from None
        attempts = memory.limits.edit_attempts if precondition is None else 1
        for attempt in range(attempts):
            try:
                return self._replace(memory, parsed, shown, text, precondition)
            except _LostRace:
                if precondition is not None:
                    raise _content(shown, precondition.hex, self._current_sha256(memory, parsed, shown)) from None
                time.sleep(random.uniform(0, 0.02 * 2**attempt))
        raise PreconditionFailedError(
            f"Error: {shown} is being changed by others at the same time; the write was not applied. Try again.",
            path=shown,
        )

    def _create(self, memory: EncryptedMemory, parsed: MemoryPath, shown: str, text: str) -> MemoryInfo:
        """``NotExists``: the model's create, with its own error."""
        files = memory.files
        text = memory.gate.screen_new_file(parsed, text)
        data = files.encode(text, shown)
        files.names_ready(create=True)
        rt = files.round_trip()
        is_dir = rt.submit(files.has_objects_under, parsed)
        existing = rt.submit(memory.store.head, memory.layout.key_for(parsed))
        new_key = rt.submit(memory.keyring.generate, files.binding(parsed))
        usage = rt.submit(memory.gate.tenant_usage)
        rt.submit(files.check_names_choice)
        records = rt.submit(_records.sealer, files, [parsed])
        ancestors = files.head_ancestors(rt, parsed)
        rt.wait()
        if is_dir.result() or existing.result() is not None:
            raise _exists(shown)
        self._check_new_file(memory, parsed, shown, usage.result(), ancestors, len(data))
        return self._commit(memory, parsed, shown, None, text, data, new_key.result(), records.result())

    def _replace(
        self, memory: EncryptedMemory, parsed: MemoryPath, shown: str, text: str, precondition: Sha256 | None
    ) -> MemoryInfo:
        """``Sha256`` or none: one attempt of read, check, compare-and-swap (``_LostRace``)."""
        files = memory.files
        if not files.names_ready(create=precondition is None):
            files.check_names_choice()
            assert precondition is not None
            raise _content(shown, precondition.hex, None)  # no names key yet: no file exists
        # Round trip 1: the file, a data key, the quota's listing, the history key; for a new
        # file what create asks (a directory there? a file above?).
        rt = files.round_trip()
        stored = files.fetch(rt, parsed, shown)
        new_key = rt.submit(memory.keyring.generate, files.binding(parsed))
        usage = rt.submit(memory.gate.tenant_usage)
        records = rt.submit(_records.sealer, files, [parsed])
        rt.submit(files.check_names_choice)
        is_dir = rt.submit(files.has_objects_under, parsed) if precondition is None else None
        ancestors = files.head_ancestors(rt, parsed) if precondition is None else []
        rt.wait()
        before = files.opened(parsed, shown, stored.result())
        if precondition is not None:
            actual = None if before is None else _digest(before.text.encode("utf-8"))
            if actual != precondition.hex:
                raise _content(shown, precondition.hex, actual)
        if before is None:
            if is_dir is not None and is_dir.result():
                raise PathExistsError(f"Error: Cannot write {shown}: it is a directory")
            text = memory.gate.screen_new_file(parsed, text)
        else:
            text = memory.gate.screen_replacement(before.text, text)
        data = files.encode(text, shown)
        if before is None:
            self._check_new_file(memory, parsed, shown, usage.result(), ancestors, len(data))
        else:
            grow = len(data) - len(before.text.encode("utf-8"))
            memory.gate.check_quota(usage.result(), shown, files=0, grow=grow)
        return self._commit(memory, parsed, shown, before, text, data, new_key.result(), records.result())

    @staticmethod
    def _check_new_file(
        memory: EncryptedMemory,
        parsed: MemoryPath,
        shown: str,
        usage: tuple[int, int] | None,
        ancestors: list[Pending[ObjectInfo | None]],
        size: int,
    ) -> None:
        memory.gate.check_quota(usage, shown, files=1, grow=size)
        for ancestor, head in zip(parsed.ancestors(), ancestors, strict=True):
            if head.result() is not None:
                raise NotADirectoryConflict(
                    f"Error: Cannot create {shown}: {memory.files.shown(ancestor)} is a file, not a directory"
                )

    @staticmethod
    def _commit(
        memory: EncryptedMemory,
        parsed: MemoryPath,
        shown: str,
        before: TextFile | None,
        text: str,
        data: bytes,
        new_key: tuple[bytes, envelope.WrappedKey],
        records: Sealer,
    ) -> MemoryInfo:
        """Screen for instructions, seal, stamp, and write conditionally with the record beside."""
        files = memory.files
        finding = memory.gate.instruction_verdict(parsed, shown, None if before is None else before.text, text)
        data_key, wrapped = new_key
        body, metadata = envelope.seal(data, data_key, wrapped)
        key = memory.layout.key_for(parsed)
        follows = None if before is None else files.provenance_in(before.metadata, key, before.data_key)
        op = "created" if before is None else "modified"
        metadata, provenance = files.stamped(metadata, key, op, data_key, follows=follows, finding=finding)
        rt = files.round_trip()
        if before is None:
            put = rt.submit(memory.store.put, key, body, metadata, if_none_match=True)
        else:
            put = rt.submit(memory.store.put, key, body, metadata, if_match=before.etag)
        rt.submit(records.write_beside, _records.version_record(parsed, provenance, body))
        try:
            rt.wait()
            etag: str | None = _records.bare_etag(put.result())
        except PreconditionFailedError:
            if not writes.landed(files, parsed, shown, data_key):  # else our own write, re-sent
                raise _LostRace from None
            etag = None  # the ETag of our own write, re-sent, is not in the answer that refused it
        created = provenance.born_us
        return MemoryInfo(
            files.shown(parsed), len(data), _digest(data), None, provenance.file, provenance.at_us, created, etag
        )

    @staticmethod
    def _current_sha256(memory: EncryptedMemory, parsed: MemoryPath, shown: str) -> str | None:
        """The hash of the file as it is now, after a lost race; None if gone or unreadable."""
        try:
            file = memory.files.read(parsed, shown)
        except S3MemoryError:
            return None
        return None if file is None else _digest(file.text.encode("utf-8"))

    # -- read ------------------------------------------------------------------------------
    @_telemetry.traced("admin.read", _telemetry.SEARCH, records=1)
    def read(self, path: str) -> tuple[str, MemoryInfo]:
        """The text of the file at ``path`` and its :class:`MemoryInfo` (one GET).

        Raises:
            PathNotFoundError: nothing is at ``path``.
            InvalidCommandError: ``path`` is a directory, or the file is not UTF-8 text.
            ObjectTooLargeError, IntegrityError, ForeignObjectError: as for ``view``.
        """
        memory, shown = self._resolve(path)
        parsed = memory.gate.parse(shown)
        files = memory.files
        missing = f"Error: The path {shown} does not exist."
        if parsed.is_root:
            raise InvalidCommandError(f"Error: {shown} is a directory, not a file")
        if not files.names_ready():
            raise files.not_found(missing)
        rt = files.round_trip()
        fetched = files.fetch(rt, parsed, shown)
        rt.wait()
        stored = fetched.result()
        file = files.opened(parsed, shown, stored)
        if stored is None or file is None:
            if files.has_objects_under(parsed):
                raise InvalidCommandError(f"Error: {shown} is a directory, not a file")
            raise files.not_found(missing)
        data = file.text.encode("utf-8")
        info = MemoryInfo(files.shown(parsed), len(data), _digest(data), _when(stored.last_modified))
        return file.text, info

    # -- delete ----------------------------------------------------------------------------
    @_telemetry.traced("admin.delete", _telemetry.DELETE, records=1)
    def delete(self, path: str, *, expected_sha256: str | None = None) -> None:
        """Delete the file at ``path``; with ``expected_sha256``, only if its content still
        has that hash (read, compare, then a delete ``If-Match`` the ETag read). A record of
        the deletion goes beside it, as for the model's ``delete``.

        Raises:
            InvalidCommandError: ``path`` is a directory (this deletes one file; the model's
                ``delete`` command removes directories), or a malformed ``expected_sha256``.
            PathNotFoundError: nothing is at ``path`` (without ``expected_sha256``).
            PreconditionFailedError: with ``expected_sha256``, the file is missing (``actual``
                None), has another content, or changed before the delete landed; nothing deleted.
        """
        memory, shown = self._resolve(path)
        parsed = memory.gate.parse(shown)
        memory.gate.writable("delete", shown)
        expected = None if expected_sha256 is None else Sha256(expected_sha256).hex
        files = memory.files
        not_a_file = f"Error: Cannot delete {shown}: it is a directory; MemoryAdmin.delete deletes one file"
        missing = f"Error: The path {shown} does not exist."
        if parsed.is_root:
            raise InvalidCommandError(not_a_file)
        if not files.names_ready():
            if expected is not None:
                files.check_names_choice()
                raise _content(shown, expected, None)
            raise files.not_found(missing)
        key = memory.layout.key_for(parsed)
        # Round trip 1: the file (its body only to hash it), a directory there?, the history key.
        rt = files.round_trip()
        fetched = files.fetch(rt, parsed, shown) if expected is not None else None
        headed = rt.submit(memory.store.head, key) if expected is None else None
        is_dir = rt.submit(files.has_objects_under, parsed)
        records = rt.submit(_records.sealer, files, [parsed])
        rt.wait()
        stored = None if fetched is None else fetched.result()
        info = headed.result() if headed is not None else None
        if stored is not None:
            info = ObjectInfo(key, len(stored.body), stored.etag)
        if info is None:
            if is_dir.result():
                raise InvalidCommandError(not_a_file)
            if expected is not None:
                files.check_names_choice()
                raise _content(shown, expected, None)
            raise files.not_found(missing)
        if expected is not None:
            file = files.opened(parsed, shown, stored)
            actual = None if file is None else _digest(file.text.encode("utf-8"))
            if actual != expected:
                raise _content(shown, expected, actual)
        # Round trip 2: the delete (conditional on the ETag read), and beside it its record.
        rt = files.round_trip()
        rt.submit(memory.store.delete, [key], if_match=None if expected is None else {key: info.etag})
        record = {"op": "deleted", "path": parsed.display, "files": _records.listed_files(files, [info])}
        rt.submit(records.result().write_beside, record)
        try:
            rt.wait()
        except PreconditionFailedError:
            if expected is None:
                raise
            raise _content(shown, expected, self._current_sha256(memory, parsed, shown)) from None

    # -- list ------------------------------------------------------------------------------
    @_telemetry.traced("admin.list", _telemetry.SEARCH, records=len)
    def list(self, path_prefix: str = ROOT + "/", *, depth: int | None = None) -> list[MemoryInfo]:
        """Every file whose path starts with ``path_prefix``, sorted by path; no contents.

        A prefix ending in ``/`` is a directory: ``/memories/notes/`` matches
        ``/memories/notes/a.md`` but not ``/memories/notes_backup/old.md``. Without it the
        prefix is a string prefix of the path: ``/memories/notes`` matches both, and
        ``/memories/notes.md``. ``depth`` counts directory levels below the prefix's
        directory (``/memories/notes/`` for the first, ``/memories/`` for the second): 0 for
        the files directly in it, None for every level.

        From the sealed search index (see the module docstring), which this refreshes (and
        writes back, unless the memory is read-only): at most 3 round trips warm.

        Raises:
            InvalidPathError: the prefix (up to its last ``/``) is not a path under ``/memories``.
            InvalidCommandError: ``depth`` is not None or an integer >= 0.
        """
        memory, _ = self._resolve(_routed_on(path_prefix))
        shown = path_prefix
        if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 0):
            raise InvalidCommandError("Error: `depth` must be None or an integer >= 0.")
        if isinstance(self.memory, MountedMemory):
            return _listed_in_tree(self.memory, shown, depth)
        return listed_in(memory, shown, depth)

    @_telemetry.traced("admin.reindex", "s3memory.reindex")
    def reindex(self) -> int:
        """Rebuild this process's view of the search index from the store and write it back
        if it was stale (``list`` and search then start warm); the number of files indexed.
        A read-only memory's index is refreshed in this process only."""
        stores = [m for _, m in self.memory.stores()] if isinstance(self.memory, MountedMemory) else [self.memory]
        indexed = 0
        for memory in stores:
            _index.forget(memory.store, memory.layout)
            indexed += len(_index.current_files(memory.files, write_back=not memory.read_only))
        return indexed
