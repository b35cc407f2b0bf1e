"""The six memory commands, with the contract's exact strings, over a store.

:class:`EncryptedMemory` knows the memory tool's rules (what a directory is, what each
command answers) and nothing of AWS: it talks to an :class:`ObjectStore` for bytes and to
a :class:`Keyring` for data keys, and seals every file with ``_envelope``.

Directories are not objects: they are the prefixes of files, so an empty directory cannot
exist. A file and a directory of one name never coexist: every write checks.
Independent requests of one command are issued concurrently, in one round trip
(``_roundtrip.RoundTrip``).

Split by concern: the sealed files of one tenant (binding, reading, listing, round trips)
are ``_files``; the text of the answers is ``_render`` (pure); the rename protocol and its
intent record are ``_rename``; access markers are ``_access``; history is ``_history``,
``_versions`` and ``_records``; writes held for review are ``_quarantine``. What is left here
is the dispatch, the commands, screening, the quota and the public methods that delegate
history and review: about 400 lines of code; the module is longer than 400 lines by its
docstrings (the Raises sections of eighteen public methods), kept whole because
``EncryptedMemory`` is the public face users read.
"""

from __future__ import annotations

import datetime
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from .. import _render as render
from .. import _telemetry
from .._crypto import envelope
from .._crypto.files import SealedFiles, plaintext_size
from .._crypto.historykey import HistoryKey
from .._crypto.keyring import Keyring
from .._crypto.provenance import DEFAULT_ACTOR, validate_actor
from .._errors import (
    ConfigurationError,
    EditError,
    InvalidCommandError,
    InvalidPathError,
    LimitExceededError,
    NotADirectoryConflict,
    PathExistsError,
    PathNotFoundError,
    PreconditionFailedError,
    ReadOnlyMountError,
    S3MemoryError,
    VersionNotFoundError,
)
from .._history import listing as _history
from .._history import records as _records
from .._history import versions as _versions
from .._history.entries import MemoryVersion
from .._layout import TenantLayout
from .._paths import DEFAULT_MAX_PATH_BYTES, ROOT, MemoryPath, parse_path
from .._roundtrip import Pending
from .._search.query import (
    DEFAULT_LIMIT,
    SearchResult,
    check_limit,
    parse_query,
    render_results,
    search_texts,
)
from ..stores import ObjectInfo, ObjectStore
from . import quarantine as _quarantine
from . import rename as _rename
from .access import PROCESS_ACCESS_LOG, AccessLog, record_access
from .name_screen import refuse_secret_names
from .quarantine import InstructionPolicy, PendingWrite, policy_check

T = TypeVar("T")
R = TypeVar("R")

log = logging.getLogger("s3memory")

COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")
_REQUIRED: dict[str, tuple[str, ...]] = {
    "view": ("path",),
    "create": ("path", "file_text"),
    "str_replace": ("path", "old_str", "new_str"),
    "insert": ("path", "insert_line", "insert_text"),
    "delete": ("path",),
    "rename": ("old_path", "new_path"),
}


@dataclass(frozen=True)
class Limits:
    """Bounds enforced before anything is written.

    Attributes:
        max_file_bytes: largest file, in UTF-8 bytes (the managed memory stores use 100 KB).
        max_path_bytes: longest path under ``/memories``, in UTF-8 bytes.
        edit_attempts: how often an edit that lost a race is re-read and re-applied.
        max_workers: concurrent requests one command may issue; 32, the connection pool
            of the clients s3memory builds (a client of yours with a smaller pool opens
            connections beyond it and closes them after each request).
        max_view_chars: longest ``view`` answer, in characters; a longer file is cut at a
            line boundary with a notice telling Claude to page with ``view_range``.
        max_tenant_bytes, max_tenant_files: the user's quota (plaintext bytes, files), or
            ``None`` for none. Checked before anything is written, from a listing of the
            user's files made alongside the command's other first requests; concurrent
            writers can together overshoot it by their own writes.
    """

    max_file_bytes: int = 100 * 1024
    max_path_bytes: int = DEFAULT_MAX_PATH_BYTES
    edit_attempts: int = 6
    max_workers: int = 32
    max_view_chars: int = 16_000
    max_tenant_bytes: int | None = None
    max_tenant_files: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_file_bytes", "max_path_bytes", "edit_attempts", "max_workers", "max_view_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"Limits.{name} must be a positive integer")
        for name in ("max_tenant_bytes", "max_tenant_files"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigurationError(f"Limits.{name} must be a positive integer or None")

    @property
    def has_quota(self) -> bool:
        return self.max_tenant_bytes is not None or self.max_tenant_files is not None


@dataclass(frozen=True, order=True)
class FileEntry:
    """One stored file: its path under /memories and its plaintext size in bytes."""

    path: str
    size: int


class MemoryCommands(Protocol):
    """The six commands, as :class:`EncryptedMemory` and ``MountedMemory`` both offer them."""

    def view(self, path: str, view_range: object = None) -> str: ...
    def create(self, path: str, file_text: object) -> str: ...
    def str_replace(self, path: str, old_str: object, new_str: object) -> str: ...
    def insert(self, path: str, insert_line: object, insert_text: object) -> str: ...
    def delete(self, path: str) -> str: ...
    def rename(self, old_path: str, new_path: str) -> str: ...


def run_command(memory: MemoryCommands, command: object) -> str:
    """Check one tool-use input (``{"command": "view", "path": ...}``) and run it on ``memory``."""
    if not isinstance(command, Mapping):
        raise InvalidCommandError("Error: The tool input must be an object with a `command` field.")
    name = command.get("command")
    if not isinstance(name, str) or name not in _REQUIRED:
        raise InvalidCommandError(
            f"Error: Unknown command {render.short_repr(name)}. Use one of: {', '.join(COMMANDS)}."
        )
    for parameter in _REQUIRED[name]:
        if command.get(parameter) is None:
            raise InvalidCommandError(f"Error: Missing required parameter `{parameter}` for command `{name}`.")
    if name == "view":
        return memory.view(command["path"], command.get("view_range"))
    if name == "create":
        return memory.create(command["path"], command["file_text"])
    if name == "str_replace":
        return memory.str_replace(command["path"], command["old_str"], command["new_str"])
    if name == "insert":
        return memory.insert(command["path"], command["insert_line"], command["insert_text"])
    if name == "delete":
        return memory.delete(command["path"])
    return memory.rename(command["old_path"], command["new_path"])


class SearchCorpus(Protocol):
    """What search reads: every file's (path as shown, text) at or below a path."""

    limits: Limits

    def search_corpus(self, path_prefix: str | None = None) -> list[tuple[str, str]]: ...


def search(
    memory: SearchCorpus, query: object, path_prefix: str | None, limit: object
) -> tuple[list[SearchResult], int]:
    """The best matches of ``query`` under ``path_prefix`` and how many files were searched;
    the query and the limit are checked before any request."""
    parsed_query, checked_limit = parse_query(query), check_limit(limit)
    corpus = memory.search_corpus(path_prefix)
    return search_texts(corpus, parsed_query, limit=checked_limit), len(corpus)


def search_answer(memory: SearchCorpus, query: object, path_prefix: str | None, limit: object) -> str:
    """The ``memory_search`` tool's answer (``_search.render_results``)."""
    results, searched = search(memory, query, path_prefix, limit)
    shown_prefix = ROOT if path_prefix is None else path_prefix
    return render_results(
        str(query), results, searched=searched, path_prefix=shown_prefix, max_chars=memory.limits.max_view_chars
    )


def _split_lines_for_insert(text: str) -> list[str]:
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _not_verbatim(old_str: str, path: str) -> EditError:
    return EditError(
        f"No replacement was performed, old_str `{render.excerpt(old_str)}` did not appear verbatim in {path}."
    )


def _succeeded(pending: Pending[Any]) -> bool:
    try:
        pending.result()
    except Exception:
        return False
    return True


class EncryptedMemory:
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
        self.read_only = read_only
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
        self.screen_text = screen_text
        self.screen_edit = screen_edit
        self.track_access = track_access
        self.instructions = policy_check(instruction_policy)
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

    # -- plumbing ----------------------------------------------------------------------
    def close(self) -> None:
        """Stop the worker threads (they are also stopped at interpreter exit)."""
        self.files.close()

    def _parse(self, path: object) -> MemoryPath:
        parsed = parse_path(path, max_path_bytes=self.limits.max_path_bytes)
        if self.files.shown_root == ROOT:
            return parsed
        # A mounted store: the model's path is below the mount point; the store's own path
        # is what follows it (the router sends only paths below this mount).
        mount_name = self.files.shown_root[len(ROOT) + 1 :]
        if not parsed.parts or parsed.parts[0] != mount_name:
            raise InvalidPathError(f"Error: The path {path} is not in the memory store at {self.files.shown_root}")
        return MemoryPath("/".join(parsed.parts[1:]))

    def _writable(self, verb: str, shown_paths: str) -> None:
        """Refuse, before any request, a change to a store mounted read-only (defence in
        depth behind the IAM policy of ``s3memory policy --read-only-mount``)."""
        if self.read_only:
            raise ReadOnlyMountError(
                f"Error: Cannot {verb} {shown_paths}: {self.files.shown_root} is mounted read-only"
            )

    def _screen(self, text: str) -> str:
        return text if self.screen_text is None else self.screen_text(text)

    def _screen_new_file(self, parsed: MemoryPath, text: str) -> str:
        """A new file's text, screened, after its names (``_name_screen``): a secret in a
        name is refused whatever the guard would do with one in the text."""
        refuse_secret_names(self.screen_text, parsed)
        return self._screen(text)

    def _screen_inserted(self, text: str) -> str:
        """The inserted text, screened on its own unless the whole result will be."""
        return text if self.screen_edit is not None else self._screen(text)

    def _check_instructions(self, parsed: MemoryPath, path: str, before: str | None, after: str) -> str | None:
        """The instruction policy's verdict on a write about to be made (``_quarantine``): None,
        or the finding to record with it (``flag``); a held write raises ``WriteHeldError``."""
        return None if self.instructions is None else self.instructions.verdict(self.files, parsed, path, before, after)

    def _tenant_usage(self) -> tuple[int, int] | None:
        """(files, plaintext bytes) of the user, if a quota is set (one LIST per 1,000 files)."""
        if not self.limits.has_quota:
            return None
        infos = list(self.store.list(self.layout.memory_prefix))
        return len(infos), sum(plaintext_size(info) for info in infos)

    def _check_quota(self, usage: tuple[int, int] | None, shown_path: str, *, files: int, grow: int) -> None:
        if usage is None:
            return
        count, size = usage
        limit_files, limit_bytes = self.limits.max_tenant_files, self.limits.max_tenant_bytes
        if files and limit_files is not None and count + files > limit_files:
            over = f"{count + files:,} files, over its quota of {limit_files:,}"
        elif grow > 0 and limit_bytes is not None and size + grow > limit_bytes:
            over = f"{size + grow:,} bytes, over its quota of {limit_bytes:,}"
        else:
            return
        raise LimitExceededError(
            f"Error: Writing {shown_path} would make this memory hold {over}. Nothing was written; "
            "delete or condense memories you no longer need first."
        )

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
        parsed = self._parse(path)
        if not parsed.is_root and not self.files.names_ready():
            raise self.files.not_found(f"The path {path} does not exist. Please provide a valid path.")
        # One request in the common case: a path written as a directory ("/memories/d/")
        # is listed first, anything else is fetched as a file first.
        files = self.files.files_under(parsed) if parsed.is_root or path.endswith("/") else []
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
                files = self.files.files_under(parsed)
            if not files:
                raise self.files.not_found(f"The path {path} does not exist. Please provide a valid path.")
        sizes = [(file_path, plaintext_size(info)) for file_path, info in files]
        return render.directory_view(parsed, sizes, self.limits.max_view_chars, shown_as=self.files.shown(parsed))

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
        parsed = self._parse(path)
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
        parsed = self._parse(path)
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
        parsed = self._parse(path)
        self._writable("create", path)
        if not isinstance(file_text, str):
            raise InvalidCommandError("Error: `file_text` must be a string.")
        if parsed.is_root:
            raise PathExistsError(f"Error: File {path} already exists")
        text = self._screen_new_file(parsed, file_text)
        data = self.files.encode(text, path)
        self.files.names_ready(create=True)  # the one command that may create the names key
        key = self.layout.key_for(parsed)
        # Round trip 1, concurrently: is it a directory? a file? is an ancestor a file? a data
        # key, the history key (cached once made), and the user's usage if a quota is set.
        rt = self.files.round_trip()
        is_dir = rt.submit(self.files.has_objects_under, parsed)
        # A file already there is found now, so that the record beside the write (round
        # trip 2) is left only by a creator that loses a race, never by a plain refusal.
        existing = rt.submit(self.store.head, key)
        new_key = rt.submit(self.keyring.generate, self.files.binding(parsed))
        usage = rt.submit(self._tenant_usage)
        rt.submit(self.files.check_names_choice)  # once per process: no request when warm
        records = rt.submit(_records.sealer, self.files, [parsed])
        ancestor_heads = self.files.head_ancestors(rt, parsed)
        rt.wait()
        if is_dir.result() or existing.result() is not None:
            raise PathExistsError(f"Error: File {path} already exists")
        self._check_quota(usage.result(), path, files=1, grow=len(data))
        for ancestor, head in zip(parsed.ancestors(), ancestor_heads, strict=True):
            if head.result() is not None:
                raise NotADirectoryConflict(
                    f"Error: Cannot create {path}: {self.files.shown(ancestor)} is a file, not a directory"
                )
        finding = self._check_instructions(parsed, path, None, text)  # a held write raises WriteHeldError
        data_key, wrapped = new_key.result()
        body, metadata = envelope.seal(data, data_key, wrapped)
        metadata, provenance = self.files.stamped(metadata, key, "created", data_key, finding=finding)
        # Round trip 2: the conditional write (of concurrent creators exactly one wins), and
        # beside it the record of who wrote it (one of a loser pairs with no version).
        rt = self.files.round_trip()
        rt.submit(self.store.put, key, body, metadata, if_none_match=True)
        rt.submit(records.result().write_beside, _records.version_record(parsed, provenance, body))
        try:
            rt.wait()
        except PreconditionFailedError:
            if not self._landed(parsed, path, data_key):
                raise PathExistsError(f"Error: File {path} already exists") from None
        return f"File created successfully at: {path}"

    def _landed(self, parsed: MemoryPath, path: str, data_key: bytes) -> bool:
        """After a 412: whether the file at ``path`` is the version this call just wrote. A
        client that re-sends a conditional PUT whose answer was lost (a connection reset
        after S3 applied it) gets 412 for its own write, which must not count as a lost
        race. Each version has a fresh data key, so the key tells whose version it is."""
        try:
            current = self.files.read(parsed, path)
        except S3MemoryError:
            return False
        return current is not None and current.data_key == data_key

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
        parsed = self._parse(path)
        self._writable("write", path)
        replacement: str | None = None  # screened once, and only if a file is to be replaced
        for _ in range(self.limits.edit_attempts):
            try:
                return self.create(path, text)
            except PathExistsError:
                pass  # a file to replace, or a directory
            if replacement is None:
                replacement = self._screen_inserted(text)
            new_text = replacement
            try:
                return self._edit(
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

    # -- edits (compare-and-swap) ------------------------------------------------------
    def _edit(
        self,
        path: str,
        missing_message: str,
        apply: Callable[[str], tuple[str, T]],
        answer: Callable[[str, T], R],
    ) -> R:
        """Read, apply, screen, write back with If-Match; on a lost race re-read and re-apply.

        ``apply`` turns the file's text into the new text and what the answer needs;
        ``answer`` words the result from the text as written (after any redaction).
        """
        parsed = self._parse(path)
        self._writable("edit", path)
        if parsed.is_root or not self.files.names_ready():
            raise self.files.not_found(missing_message)
        binding = self.files.binding(parsed)
        written: tuple[bytes, R] | None = None  # the last attempt's data key and answer
        for attempt in range(self.limits.edit_attempts):
            # In the read's round trip: the quota's listing (edits add no file, so only a
            # byte quota needs it), and a KMS data key (a request).
            rt = self.files.round_trip()
            stored = self.files.fetch(rt, parsed, path)
            usage = rt.submit(self._tenant_usage) if self.limits.max_tenant_bytes is not None else None
            fresh_key = rt.submit(self.keyring.generate, binding) if self.keyring.generates_remotely else None
            records = rt.submit(_records.sealer, self.files, [parsed])
            rt.wait()
            file = self.files.opened(parsed, path, stored.result())
            if written is not None and file is not None and file.data_key == written[0]:
                return written[1]  # the "lost" race was our own write, re-sent (see _landed)
            if file is None:
                raise self.files.not_found(missing_message)
            new_text, detail = apply(file.text)
            if self.screen_edit is not None:
                new_text = self.screen_edit(file.text, new_text)
            data = self.files.encode(new_text, path)
            grow = len(data) - len(file.text.encode())
            self._check_quota(None if usage is None else usage.result(), path, files=0, grow=grow)
            finding = self._check_instructions(parsed, path, file.text, new_text)  # held: WriteHeldError
            # A fresh data key for every version (a local one in tenant-key mode): no two
            # versions of a file share a key, so none can be spliced onto another's metadata.
            data_key, wrapped = self.keyring.generate(binding) if fresh_key is None else fresh_key.result()
            body, metadata = envelope.seal(data, data_key, wrapped)
            key = self.layout.key_for(parsed)
            follows = self.files.provenance_in(file.metadata, key, file.data_key)
            metadata, provenance = self.files.stamped(
                metadata, key, "modified", data_key, follows=follows, finding=finding
            )
            rt = self.files.round_trip()
            rt.submit(self.store.put, key, body, metadata, if_match=file.etag)
            rt.submit(records.result().write_beside, _records.version_record(parsed, provenance, body))
            try:
                rt.wait()
                return answer(new_text, detail)
            except PreconditionFailedError:
                written = (data_key, answer(new_text, detail))
                time.sleep(random.uniform(0, 0.02 * 2**attempt))
        if written is not None and self._landed(parsed, path, written[0]):
            return written[1]
        # Contention, not unavailability: the store answered every request.
        raise PreconditionFailedError(
            f"Error: {path} is being changed by others at the same time; the edit was not applied. Try again."
        )

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
        if not isinstance(old_str, str) or not isinstance(new_str, str):
            raise InvalidCommandError("Error: `old_str` and `new_str` must be strings.")
        if old_str == "":
            raise EditError("Error: `old_str` must not be empty.")
        replacement = self._screen_inserted(new_str)
        max_chars = self.limits.max_view_chars

        def apply(content: str) -> tuple[str, int]:
            count = content.count(old_str)  # non-overlapping, as the reference counts
            if count == 0:
                raise _not_verbatim(old_str, path)
            if count > 1:
                raise EditError(render.multiple_occurrences(old_str, content, count, max_chars))
            position = content.find(old_str)
            changed_line = content.count("\n", 0, position)
            return content[:position] + replacement + content[position + len(old_str) :], changed_line

        def answer(written: str, changed_line: int) -> str:
            return render.edit_snippet(written, changed_line, max_chars)

        return self._edit(path, f"Error: The path {path} does not exist. Please provide a valid path.", apply, answer)

    @_telemetry.traced("replace_all", _telemetry.UPDATE, records=1)
    def replace_all(self, path: str, old_str: object, new_str: object) -> int:
        """Replace every occurrence of ``old_str`` (non-overlapping, left to right) in one
        compare-and-swap edit; how many were replaced. Beyond the six commands: for agent
        frameworks whose edit tool offers it (deepagents' ``replace_all``).

        Raises:
            EditError: ``old_str`` is empty or missing from the file.
            The rest as :meth:`str_replace`.
        """
        if not isinstance(old_str, str) or not isinstance(new_str, str):
            raise InvalidCommandError("Error: `old_str` and `new_str` must be strings.")
        if old_str == "":
            raise EditError("Error: `old_str` must not be empty.")
        replacement = self._screen_inserted(new_str)

        def apply(content: str) -> tuple[str, int]:
            count = content.count(old_str)
            if count == 0:
                raise _not_verbatim(old_str, path)
            return content.replace(old_str, replacement), count

        return self._edit(
            path, f"Error: The path {path} does not exist. Please provide a valid path.", apply, lambda _, n: n
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
        if isinstance(insert_line, bool) or not isinstance(insert_line, int):
            raise InvalidCommandError("Error: `insert_line` must be an integer.")
        if not isinstance(insert_text, str):
            raise InvalidCommandError("Error: `insert_text` must be a string.")
        inserted = self._screen_inserted(insert_text)

        def apply(content: str) -> tuple[str, None]:
            lines = _split_lines_for_insert(content)
            if not 0 <= insert_line <= len(lines):
                raise EditError(
                    f"Error: Invalid `insert_line` parameter: {render.short_repr(insert_line)}. It should be within "
                    f"the range of lines of the file: [0, {len(lines)}]"
                )
            lines.insert(insert_line, inserted.rstrip("\n"))
            new_content = "\n".join(lines)
            if not new_content.endswith("\n"):
                new_content += "\n"
            return new_content, None

        return self._edit(
            path,
            f"Error: The path {path} does not exist",
            apply,
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
        parsed = self._parse(path)
        self._writable("delete", path)
        if parsed.is_root:
            raise InvalidCommandError(f"Error: Cannot delete the {self.files.shown_root} directory itself")
        if not self.files.names_ready():
            raise self.files.not_found(f"Error: The path {path} does not exist")
        key = self.layout.key_for(parsed)
        pages = self.store.list_pages(self.layout.dir_prefix(parsed))

        def next_page() -> tuple[list[ObjectInfo], bool]:
            return next(pages, ([], False))

        rt = self.files.round_trip()
        head, first = rt.submit(self.store.head, key), rt.submit(next_page)
        # The history key too (cached after the first use), so no round trip waits on it.
        records = rt.submit(_records.sealer, self.files, [parsed])
        rt.wait()
        (page, more), found = first.result(), head.result()
        if found is None and not page:
            raise self.files.not_found(f"Error: The path {path} does not exist")
        deleted: list[ObjectInfo] = []
        while more:  # this page's deletes beside the next page's LIST
            rt = self.files.round_trip()
            gone = rt.submit(self.store.delete, [info.key for info in page])
            following = rt.submit(next_page)
            try:
                rt.wait()
            except Exception:
                # Recorded: the pages whose deletes were done (a failed one may be partly
                # gone; history then reads those versions' own provenance).
                deleted += page if _succeeded(gone) else []
                if deleted:
                    records.result().write_beside(self._deleted_record(parsed, deleted))
                raise
            deleted += page
            page, more = following.result()
        # The last deletes, and beside them the record of who deleted what.
        last = [*page, *([found] if found is not None else [])]
        deleted += last
        rt = self.files.round_trip()
        rt.submit(self.store.delete, [info.key for info in last])
        rt.submit(records.result().write_beside, self._deleted_record(parsed, deleted))
        rt.wait()
        log.info("deleted %d objects", len(deleted))
        return f"Successfully deleted {path}"

    def _deleted_record(self, parsed: MemoryPath, deleted: list[ObjectInfo]) -> dict[str, object]:
        return {"op": "deleted", "path": parsed.display, "files": _records.listed_files(self.files, deleted)}

    @_telemetry.traced("clear_all", _telemetry.DELETE)
    def clear_all(self) -> str:
        """Delete every memory file of this user (``/memories`` stays, empty); the user's
        keys stay, so the memory is at once usable again. Not a crypto-shredding erasure:
        for that (keys, records and old versions too) see :func:`s3memory.erase_tenant`.

        Raises:
            StorageError: the store refused or failed a LIST or a delete; files deleted
                before the failure stay deleted.
        """
        self._writable("clear", self.files.shown_root)
        infos = list(self.store.list(self.layout.memory_prefix))
        keys = [info.key for info in infos]
        if keys:
            # With them, the search index, which holds their text (rebuilt by the next search).
            self.store.delete([*keys, self.layout.index_key])
            from .._search import index as _index

            _index.forget(self.store, self.layout)
            # Who cleared it, for history: one record about the whole memory (the root).
            record = {"op": "deleted", "path": "/memories", "files": _records.listed_files(self.files, infos)}
            _records.sealer(self.files, [MemoryPath("")]).write_beside(record)
        log.info("cleared the memory of one tenant: %d objects deleted", len(keys))
        return "All memory cleared"

    # -- history (beyond the six commands, which never see it) ---------------------------
    @_telemetry.traced("history", _telemetry.SEARCH, records=len)
    def history(self, path: str) -> list[MemoryVersion]:
        """Every version of the file at ``path``, newest first: also of a deleted file, and
        from before it was renamed here. One round of requests (listings, whose record names
        hold the provenance), one more per rename followed, and a second round (at most
        ``Limits.max_workers`` requests at once) only for versions no record tells, a HEAD
        each (see ``_history``).

        Raises:
            InvalidPathError: ``path`` is not a valid file path under ``/memories``.
            ConfigurationError: the store keeps no versions (bucket versioning is off).
        """
        parsed = self._file_path(path)
        if not self.files.names_ready():
            return []
        return _history.history(self.files, parsed)

    @_telemetry.traced("read_version", _telemetry.SEARCH, records=1)
    def read_version(self, path: str, version: str) -> str:
        """The text of one version of ``path`` (an id from :meth:`history`).

        Raises:
            VersionNotFoundError: ``path`` has no such version, or it was redacted.
            InvalidPathError, ConfigurationError: as for :meth:`history`.
            IntegrityError: the version fails its integrity check.
        """
        parsed = self._file_path(path)
        if not self.files.names_ready():
            raise VersionNotFoundError(f"Error: {self.files.shown(parsed)} has no version {version!r}.")
        return _versions.read_version(self.files, parsed, version)

    @_telemetry.traced("restore", _telemetry.UPDATE, records=1)
    def restore(self, path: str, version: str) -> str:
        """Write ``version`` of ``path`` back as its newest version (compare-and-swap:
        ``PreconditionFailedError`` if the file changes meanwhile); a deleted file comes back.

        Raises:
            VersionNotFoundError, InvalidPathError, ConfigurationError, IntegrityError: as
                for :meth:`read_version`.
            PathExistsError: a directory is at ``path`` now.
            NotADirectoryConflict: an ancestor of ``path`` is a file now.
            PreconditionFailedError: the file changed while it was being restored.
        """
        parsed = self._file_path(path)
        self._writable("restore", path)
        if not self.files.names_ready():
            raise VersionNotFoundError(f"Error: {self.files.shown(parsed)} has no version {version!r}.")
        return _versions.restore(self.files, parsed, version)

    @_telemetry.traced("redact", _telemetry.UPDATE, records=1)
    def redact(self, path: str, version: str) -> str:
        """Delete the text of one earlier version of ``path`` for good (leaked secrets,
        personal data, deletion requests), wherever the user's memory stores it: every
        version with the same text at any path, the writes held for review made on it and the
        search index. History entries stay, saying who made each and when, and who redacted it.

        Raises:
            VersionNotFoundError, InvalidPathError: as for :meth:`read_version`.
            ConfigurationError: the text is the current content of a file (this one or
                another: edit or delete it first), or the store keeps no versions.
        """
        parsed = self._file_path(path)
        self._writable("redact", path)
        if not self.files.names_ready():
            raise VersionNotFoundError(f"Error: {self.files.shown(parsed)} has no version {version!r}.")
        return _versions.redact(self.files, parsed, version, held_writes=_quarantine)

    @_telemetry.traced("changes", _telemetry.SEARCH, records=len)
    def changes(
        self,
        path_prefix: str = "/memories",
        *,
        operation: str | None = None,
        actor: str | None = None,
        since: datetime.datetime | None = None,
        until: datetime.datetime | None = None,
    ) -> list[MemoryVersion]:
        """Every change under ``path_prefix`` (a directory), newest first, optionally only of
        one ``operation`` (created, modified, renamed, restored, deleted, redacted), by one
        ``actor``, or between ``since`` and ``until`` (aware datetimes). Round trips as
        :meth:`history`, with every record listed in 16 parts at once.

        Raises:
            InvalidPathError: ``path_prefix`` is not a valid path under ``/memories``.
            ConfigurationError: a bad ``operation``, or the store keeps no versions.
        """
        parsed = self._parse(path_prefix)
        if not self.files.names_ready():
            return []
        return _history.changes(
            self.files, directory=parsed, operation=operation, actor=actor, since=since, until=until
        )

    # -- search (beyond the six commands: the optional memory_search tool) ----------------
    def search_corpus(self, path_prefix: str | None = None) -> list[tuple[str, str]]:
        """(path as shown, text) of every file at or below ``path_prefix`` (the whole store by
        default), from the sealed search index (``_index``): one round trip when nothing
        changed since this process last looked, at most three otherwise. A read-only store's
        index is refreshed in this process only, never written back.

        Raises:
            InvalidPathError: ``path_prefix`` is not a valid path under ``/memories``.
        """
        directory = self._parse(self.files.shown_root if path_prefix is None else path_prefix)
        if not self.files.names_ready():
            return []
        from .._search import index as _index

        indexed = _index.current_files(self.files, write_back=not self.read_only)
        return [(self.files.shown(f.path), f.text) for f in indexed if f.path.is_within(directory)]

    @_telemetry.traced("search", _telemetry.SEARCH, records=len)
    def search(
        self, query: object, path_prefix: str | None = None, limit: object = DEFAULT_LIMIT
    ) -> list[SearchResult]:
        """The files under ``path_prefix`` whose text contains every word (or ``"quoted
        phrase"``) of ``query``, case-insensitively, best first, at most ``limit`` (1 to 100),
        each with up to three matching lines (number, snippet); see ``_search``. Client-side:
        the store sees a listing and the sealed index object, never the query or the hits.

        Raises:
            InvalidCommandError: the query is empty or over 1,000 characters, or a bad ``limit``.
            InvalidPathError: ``path_prefix`` is not a valid path under ``/memories``.
        """
        return search(self, query, path_prefix, limit)[0]

    @_telemetry.traced("search", _telemetry.SEARCH)
    def search_answer(self, query: object, path_prefix: str | None = None, limit: object = DEFAULT_LIMIT) -> str:
        """:meth:`search` as the ``memory_search`` tool answers it: the matching files, their
        lines numbered as ``view`` numbers them, or ``No matches for "query" under /memories.``"""
        return search_answer(self, query, path_prefix, limit)

    # -- review of held writes (beyond the six commands, which never see them) ------------
    def pending(self) -> list[PendingWrite]:
        """The writes held for review (``instruction_policy="quarantine"``), oldest first. A
        pending object that does not open (tampered with, planted, moved) is left out."""
        return _quarantine.pending(self.files)

    def approve(self, pending_id: str) -> str:
        """Apply a held write as the file's newest version, then remove it from the queue;
        only onto the file it was held against (compare-and-swap), as this memory's actor.

        Raises:
            PathNotFoundError: no pending write has this id, or the file it edits is gone.
            IntegrityError: the pending write does not open; it is never applied.
            EditError, PathExistsError: the file changed (or was created) since; nothing was written.
            SensitiveDataError, LimitExceededError, NotADirectoryConflict: as for :meth:`create`.
        """
        self._writable("approve", pending_id)
        return _quarantine.approve(self, pending_id)

    def reject(self, pending_id: str) -> str:
        """Remove a held write without applying it (also one that does not open).

        Raises:
            PathNotFoundError: no pending write has this id.
        """
        self._writable("reject", pending_id)
        return _quarantine.reject(self.files, pending_id)

    def _file_path(self, path: str) -> MemoryPath:
        parsed = self._parse(path)
        if parsed.is_root:
            raise InvalidPathError(f"Error: {self.files.shown_root} is a directory, not a file")
        return parsed

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
        old, new = self._parse(old_path), self._parse(new_path)
        self._writable("rename", f"{old_path} to {new_path}")
        refuse_secret_names(self.screen_text, new)
        finding = None if self.instructions is None else self.instructions.rename_verdict(new, new_path)
        return _rename.rename(
            self.files,
            old,
            new,
            (old_path, new_path),
            max_path_bytes=self.limits.max_path_bytes,
            progress=progress,
            finding=finding,
        )
