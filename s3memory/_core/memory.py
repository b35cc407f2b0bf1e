"""The six memory commands, with the contract's exact strings, over a store.

:class:`EncryptedMemory` knows the memory tool's rules (what a directory is, what each
command answers) and nothing of AWS: it talks to an :class:`ObjectStore` for bytes and to
a :class:`Keyring` for data keys, through the tenant's sealed files (``_crypto.files``).

Directories are not objects: they are the prefixes of files, so an empty directory cannot
exist. A file and a directory of one name never coexist: every write checks.
Independent requests of one command are issued concurrently, in one round trip
(``_roundtrip.RoundTrip``).

The class is the public face; the work is split by concern around it: the checks every
command passes first (the path, read-only, the screens, the quota) are the store's
``gate``; how a write lands (create, the compare-and-swap edit, the edit commands' text
operations) is ``writes``; delete is ``deletion``, rename ``rename``; the dispatch of a
tool-use input is ``commands``; history, search and review are the base classes of
``beyond``; the text of the answers is ``_render``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from .. import _render as render
from .. import _telemetry
from .._crypto.files import SealedFiles, plaintext_size
from .._crypto.historykey import HistoryKey
from .._crypto.keyring import Keyring
from .._crypto.provenance import DEFAULT_ACTOR, validate_actor
from .._errors import (
    ConfigurationError,
    InvalidCommandError,
    PathExistsError,
    PathNotFoundError,
    PreconditionFailedError,
)
from .._layout import TenantLayout
from .._paths import ROOT, parse_path
from ..stores import ObjectStore
from . import deletion, writes
from . import rename as _rename
from .access import PROCESS_ACCESS_LOG, AccessLog, record_access
from .beyond import HistoryMethods, ReviewMethods, SearchMethods
from .commands import run_command
from .gate import Gate
from .limits import Limits
from .quarantine import InstructionPolicy, policy_check

log = logging.getLogger("s3memory")


@dataclass(frozen=True, order=True)
class FileEntry:
    """One stored file: its path under /memories and its plaintext size in bytes."""

    path: str
    size: int


class EncryptedMemory(HistoryMethods, SearchMethods, ReviewMethods):
    """The memory tool's six commands over an encrypted object store, for one tenant.

    Each method takes the model's arguments and returns the string for the model, or raises
    an :class:`~s3memory.S3MemoryError` whose message is the string for the model.

    Not atomic: a recursive ``rename`` or ``delete`` of a directory is many requests. Rename
    copies every file before deleting any source, so a failure part-way leaves each file at
    its old path, its new path, or both; nothing is lost.

    ``screen_text`` sees every text the model asks to write (``file_text``, ``new_str``,
    ``insert_text``) before anything is written, and returns it (possibly redacted) or
    raises: the sensitive-data guard. With ``screen_edit`` (``SecretGuard.screen_edit``),
    an edit screens the whole resulting file instead, against the file before the edit, so
    a secret completed across two edits is caught and one the file already held is not
    reported again. ``track_access`` records, at most once a day per file and
    ``access_log`` (by default one log shared by the whole process), that a file was read
    (see ``_expiry``). ``instruction_policy`` (``"allow"``: none) then screens what a write
    adds for instructions to a future session, just before the write: ``"flag"`` records a
    finding, ``"quarantine"`` holds the write for review (:meth:`pending`, :meth:`approve`).

    Every command may also raise what the store and the keys raise: a
    :class:`~s3memory.StorageError` (access denied, bucket missing, unavailable) and
    :class:`~s3memory.TenantKeyError`; and :class:`~s3memory.ConfigurationError` when a
    memory written with encrypted names is opened without them. The Raises sections of the
    methods name only what is particular to each.
    """

    def __init__(
        self,
        *,
        store: ObjectStore,
        layout: TenantLayout,
        keyring: Keyring,
        limits: Limits | None = None,
        screen_text: Callable[[str], str] | None = None,
        screen_edit: Callable[[str, str], str] | None = None,
        track_access: bool = False,
        access_log: AccessLog | None = None,
        actor: str = DEFAULT_ACTOR,
        history_key: HistoryKey | None = None,
        instruction_policy: InstructionPolicy = "allow",
        shown_root: str = ROOT,
        read_only: bool = False,
    ) -> None:
        self.limits = limits or Limits()
        if shown_root != ROOT:
            mount_point = parse_path(shown_root)
            if len(mount_point.parts) != 1 or mount_point.display != shown_root:
                raise ConfigurationError("shown_root must be /memories or /memories/{name}")
        self.files = SealedFiles(
            store,
            layout,
            keyring,
            max_file_bytes=self.limits.max_file_bytes,
            max_workers=self.limits.max_workers,
            actor=validate_actor(actor),
            history_key=history_key,
            shown_root=shown_root,
        )
        self.gate = Gate(
            self.files,
            self.limits,
            screen_text=screen_text,
            screen_edit=screen_edit,
            instructions=policy_check(instruction_policy),
            read_only=read_only,
        )
        self.track_access = track_access
        self.access_log: AccessLog = PROCESS_ACCESS_LOG if access_log is None else access_log

    @property
    def store(self) -> ObjectStore:
        return self.files.store

    @property
    def layout(self) -> TenantLayout:
        return self.files.layout

    @property
    def keyring(self) -> Keyring:
        return self.files.keyring

    @property
    def read_only(self) -> bool:
        """Whether this store is mounted read-only: every change is refused."""
        return self.gate.read_only

    # -- plumbing ----------------------------------------------------------------------
    def close(self) -> None:
        """Stop the worker threads (they are also stopped at interpreter exit)."""
        self.files.close()

    # -- dispatch ----------------------------------------------------------------------
    def execute(self, command: object) -> str:
        """Run one tool-use input (``{"command": "view", "path": ...}``) and return the answer.

        Raises:
            InvalidCommandError: the input is not an object, names no known command, or
                lacks a required parameter.
            S3MemoryError: whatever the command raises (see each command).
        """
        return run_command(self, command)

    # -- view --------------------------------------------------------------------------
    @_telemetry.traced("view", _telemetry.SEARCH)
    def view(self, path: str, view_range: object = None) -> str:
        """A directory listing (two levels, sizes), or a file with line numbers.

        Raises:
            InvalidPathError: ``path`` is not a valid path under ``/memories``.
            PathNotFoundError: nothing is at ``path``.
            InvalidCommandError: a bad ``view_range``, or the file is not UTF-8 text.
            LimitExceededError: the file has over 999,999 lines.
            ObjectTooLargeError: the stored file is over ``Limits.max_file_bytes``.
            IntegrityError: the file fails its integrity check.
            ForeignObjectError: the object at ``path`` was not written by s3memory.
        """
        parsed = self.gate.parse(path)
        if not parsed.is_root and not self.files.names_ready():
            raise self.files.not_found(f"The path {path} does not exist. Please provide a valid path.")
        # One request in the common case: a path written as a directory ("/memories/d/")
        # is listed first, anything else is fetched as a file first.
        files = self.files.sizes_under(parsed) if parsed.is_root or path.endswith("/") else []
        if not files and not parsed.is_root:
            file = self.files.read(parsed, path)
            if file is not None:
                answer = render.file_view(path, file.text, view_range, self.limits.max_view_chars)
                if self.track_access:
                    # After the read, not beside it: a marker for a path that turns out not to
                    # exist would let the model create objects past the quota by viewing made-up paths.
                    record_access(self.store, self.layout, self.access_log, self.layout.key_for(parsed))
                return answer
            if not path.endswith("/"):
                files = self.files.sizes_under(parsed)
            if not files:
                raise self.files.not_found(f"The path {path} does not exist. Please provide a valid path.")
        return render.directory_view(parsed, files, self.limits.max_view_chars, shown_as=self.files.shown(parsed))

    # -- beyond the tool: what the CLI and MCP server need ---------------------------
    @_telemetry.traced("read_text", _telemetry.SEARCH, records=1)
    def read_text(self, path: str) -> str:
        """A file's whole text, without line numbers (one GET).

        Raises:
            InvalidPathError: ``path`` is not a valid path under ``/memories``.
            PathNotFoundError: nothing is at ``path``.
            InvalidCommandError: ``path`` is a directory, or the file is not UTF-8 text.
            ObjectTooLargeError: the stored file is over ``Limits.max_file_bytes``.
            IntegrityError: the file fails its integrity check.
            ForeignObjectError: the object at ``path`` was not written by s3memory.
        """
        parsed = self.gate.parse(path)
        if not parsed.is_root and not self.files.names_ready():
            raise self.files.not_found(f"The path {path} does not exist. Please provide a valid path.")
        file = self.files.read(parsed, path)
        if file is not None:
            return file.text
        if not parsed.is_root and not self.files.has_objects_under(parsed):
            raise self.files.not_found(f"The path {path} does not exist. Please provide a valid path.")
        raise InvalidCommandError(f"Error: {path} is a directory, not a file")

    @_telemetry.traced("list_files", _telemetry.SEARCH, records=len)
    def list_files(self, path: str = "/memories") -> list[FileEntry]:
        """Every file at or below ``path``, hidden ones included, sorted by path.

        Raises:
            InvalidPathError: ``path`` is not a valid path under ``/memories``.
            PathNotFoundError: nothing is at or below ``path``.
        """
        parsed = self.gate.parse(path)
        if not parsed.is_root and not self.files.names_ready():
            raise self.files.not_found(f"The path {path} does not exist. Please provide a valid path.")
        files = self.files.files_under(parsed)
        if not files and not parsed.is_root:
            head = self.store.head(self.layout.key_for(parsed))
            if head is None:
                raise self.files.not_found(f"The path {path} does not exist. Please provide a valid path.")
            files = [(parsed, head)]
        return sorted(FileEntry(self.files.shown(p), plaintext_size(info)) for p, info in files)

    # -- create ------------------------------------------------------------------------
    @_telemetry.traced("create", _telemetry.CREATE, records=1)
    def create(self, path: str, file_text: object) -> str:
        """Create a new file; never overwrites. Parent directories come into being.

        Raises:
            InvalidPathError: ``path`` is not a valid path under ``/memories``.
            InvalidCommandError: ``file_text`` is not a string, or not valid Unicode.
            SensitiveDataError: the guard (``screen_text``) found a secret in ``file_text``.
            WriteHeldError: the text reads like instructions to a future session and was
                held for review (``instruction_policy="quarantine"``); nothing was written.
            PathExistsError: a file or a directory is already at ``path``.
            NotADirectoryConflict: an ancestor of ``path`` is a file.
            LimitExceededError: the file, or the user's quota, would be over its limit.
        """
        return writes.create(self.files, self.gate, path, file_text)

    @_telemetry.traced("write_text", _telemetry.UPSERT, records=1)
    def write_text(self, path: str, text: object) -> str:
        """Create the file, or replace the whole text of the one at ``path``: the upsert of
        frameworks whose write tool overwrites (deepagents' ``write_file``). Beyond the six
        commands, under their rules: a create when nothing is there (2 round trips), else a
        compare-and-swap edit (2 more), re-tried if the file appears or vanishes meanwhile.
        A replaced file is screened as an edit is. :meth:`MemoryAdmin.write` is the
        management API's counterpart, with preconditions.

        Raises:
            PathExistsError: a directory is at ``path``.
            The rest as :meth:`create` and :meth:`str_replace`.
        """
        if not isinstance(text, str):
            raise InvalidCommandError("Error: `text` must be a string.")
        parsed = self.gate.parse(path)
        self.gate.writable("write", path)
        replacement: str | None = None  # screened once, and only if a file is to be replaced
        for _ in range(self.limits.edit_attempts):
            try:
                return self.create(path, text)
            except PathExistsError:
                pass  # a file to replace, or a directory
            if replacement is None:
                replacement = self.gate.screen_inserted(text)
            new_text = replacement
            try:
                return writes.edit(
                    self.files,
                    self.gate,
                    path,
                    f"Error: The path {path} does not exist",
                    lambda _old: (new_text, None),  # noqa: B023 (called within this iteration)
                    lambda _written, _: f"The file {path} has been overwritten.",
                )
            except PathNotFoundError:
                if parsed.is_root or self.files.has_objects_under(parsed):
                    raise PathExistsError(f"Error: Cannot write {path}: it is a directory") from None
                # The file was deleted between the two: create it again.
        raise PreconditionFailedError(
            f"Error: {path} is being changed by others at the same time; the write was not applied. Try again."
        )

    # -- edits (compare-and-swap, see writes) ------------------------------------------
    @_telemetry.traced("str_replace", _telemetry.UPDATE, records=1)
    def str_replace(self, path: str, old_str: object, new_str: object) -> str:
        """Replace the one occurrence of ``old_str``; answer with a numbered snippet.

        Raises:
            InvalidPathError: ``path`` is not a valid path under ``/memories``.
            InvalidCommandError: ``old_str`` or ``new_str`` is not a string.
            EditError: ``old_str`` is empty, missing from the file, or not unique.
            PathNotFoundError: no file is at ``path``.
            SensitiveDataError: the guard found a secret in ``new_str`` (or the edited file).
            WriteHeldError: held for review, as for :meth:`create`.
            LimitExceededError: the file, or the user's quota, would be over its limit.
            PreconditionFailedError: the file kept changing under concurrent edits (after
                ``Limits.edit_attempts`` tries); nothing was written.
            IntegrityError, ForeignObjectError, ObjectTooLargeError: as for :meth:`view`.
        """
        old, new = writes.check_replacement(old_str, new_str)
        replacement = self.gate.screen_inserted(new)
        max_chars = self.limits.max_view_chars
        return writes.edit(
            self.files,
            self.gate,
            path,
            f"Error: The path {path} does not exist. Please provide a valid path.",
            lambda content: writes.replace_once(content, old, replacement, path, max_chars),
            lambda written, changed_line: render.edit_snippet(written, changed_line, max_chars),
        )

    @_telemetry.traced("replace_all", _telemetry.UPDATE, records=1)
    def replace_all(self, path: str, old_str: object, new_str: object) -> int:
        """Replace every occurrence of ``old_str`` (non-overlapping, left to right) in one
        compare-and-swap edit; how many were replaced. Beyond the six commands: for agent
        frameworks whose edit tool offers it (deepagents' ``replace_all``).

        Raises:
            EditError: ``old_str`` is empty or missing from the file.
            The rest as :meth:`str_replace`.
        """
        old, new = writes.check_replacement(old_str, new_str)
        replacement = self.gate.screen_inserted(new)
        return writes.edit(
            self.files,
            self.gate,
            path,
            f"Error: The path {path} does not exist. Please provide a valid path.",
            lambda content: writes.replace_every(content, old, replacement, path),
            lambda _, count: count,
        )

    @_telemetry.traced("insert", _telemetry.UPDATE, records=1)
    def insert(self, path: str, insert_line: object, insert_text: object) -> str:
        """Insert ``insert_text`` after line ``insert_line`` (0 = at the top).

        Raises:
            InvalidPathError: ``path`` is not a valid path under ``/memories``.
            InvalidCommandError: ``insert_line`` is not an integer or ``insert_text`` not a string.
            EditError: ``insert_line`` is outside ``[0, lines of the file]``.
            PathNotFoundError: no file is at ``path``.
            SensitiveDataError: the guard found a secret in ``insert_text`` (or the edited file).
            WriteHeldError: held for review, as for :meth:`create`.
            LimitExceededError: the file, or the user's quota, would be over its limit.
            PreconditionFailedError: the file kept changing under concurrent edits (after
                ``Limits.edit_attempts`` tries); nothing was written.
            IntegrityError, ForeignObjectError, ObjectTooLargeError: as for :meth:`view`.
        """
        line, text = writes.check_insertion(insert_line, insert_text)
        inserted = self.gate.screen_inserted(text)
        return writes.edit(
            self.files,
            self.gate,
            path,
            f"Error: The path {path} does not exist",
            lambda content: (writes.insert_after(content, line, inserted), None),
            lambda _written, _: f"The file {path} has been edited.",
        )

    # -- delete ------------------------------------------------------------------------
    @_telemetry.traced("delete", _telemetry.DELETE)
    def delete(self, path: str) -> str:
        """Delete a file, or a directory with everything under it.

        Not atomic: a directory's files go in batches of 1,000 (one request each), each
        batch beside the request for the next page of the listing, so 10,000 files are 11
        round trips, not 20. A fault stops it where it is: the files already deleted stay
        deleted, and a record says who deleted them.

        Raises:
            InvalidPathError: ``path`` is not a valid path under ``/memories``.
            InvalidCommandError: ``path`` is ``/memories`` itself.
            PathNotFoundError: nothing is at ``path``.
        """
        return deletion.delete(self.files, self.gate, path)

    @_telemetry.traced("clear_all", _telemetry.DELETE)
    def clear_all(self) -> str:
        """Delete every memory file of this user (``/memories`` stays, empty); the user's
        keys stay, so the memory is at once usable again. Not a crypto-shredding erasure:
        for that (keys, records and old versions too) see :func:`s3memory.erase_tenant`.

        Raises:
            StorageError: the store refused or failed a LIST or a delete; files deleted
                before the failure stay deleted.
        """
        return deletion.clear_all(self.files, self.gate)

    # -- rename ------------------------------------------------------------------------
    @_telemetry.traced("rename", _telemetry.UPDATE)
    def rename(self, old_path: str, new_path: str, *, progress: Callable[[int, int], None] | None = None) -> str:
        """Move a file or a directory (with everything under it); never overwrites.

        ``progress(done, total)``, if given, is called (from worker threads, one call at a
        time) as each file's copy lands.

        Copy-then-delete: every file is copied (server-side, its data key re-wrapped for the
        new path, ``If-None-Match: *`` on the destination) before any source is deleted, and
        sources are deleted only if unchanged since their copy. Once the checks pass, an
        encrypted intent record (under the tenant's ``.s3memory/intents/``) lists the ETags of
        the files being moved; if the rename fails part-way, issuing it again finds the
        record and finishes the job, accepting at the destination only copies of those files.
        The protocol is ``s3memory._core.rename``.

        Raises:
            InvalidPathError: a path is not valid under ``/memories``, or a moved file's new
                path would be too long (nothing was changed).
            InvalidCommandError: ``old_path`` is ``/memories``, or ``new_path`` is inside it.
            PathNotFoundError: nothing is at ``old_path``.
            PathExistsError: something other than this rename's own copies is at ``new_path``.
            NotADirectoryConflict: an ancestor of ``new_path`` is a file.
            PreconditionFailedError: the same rename is running elsewhere, or files changed
                while being moved (nothing is lost; issue the rename again to finish it).
        """
        old, new = self.gate.parse(old_path), self.gate.parse(new_path)
        self.gate.writable("rename", f"{old_path} to {new_path}")
        finding = self.gate.rename_verdict(new, new_path)
        return _rename.rename(
            self.files,
            old,
            new,
            (old_path, new_path),
            max_path_bytes=self.limits.max_path_bytes,
            progress=progress,
            finding=finding,
        )
