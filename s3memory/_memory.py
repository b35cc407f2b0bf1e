"""Layer 5: the six memory commands, with the contract's exact strings, over a store.

:class:`EncryptedMemory` knows the memory tool's rules (what a directory is, what each
command answers) and nothing of AWS: it talks to an :class:`ObjectStore` for bytes and to
a :class:`Keyring` for data keys, and seals every file with ``_envelope``.

Directories are not objects: they are the prefixes of files, so an empty directory cannot
exist. A file and a directory of one name never coexist: every write checks.
Independent requests of one command are issued concurrently (see ``_parallel``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import random
import reprlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, TypeVar

from . import _envelope as envelope
from ._errors import (
    ConfigurationError,
    EditError,
    ForeignObjectError,
    IntegrityError,
    InvalidCommandError,
    InvalidPathError,
    LimitExceededError,
    NotADirectoryConflict,
    ObjectTooLargeError,
    PathExistsError,
    PathNotFoundError,
    PreconditionFailedError,
    S3MemoryError,
    StorageUnavailableError,
    TenantKeyError,
)
from ._keydocs import NAMES_KEY, process_key_cache
from ._keys import Keyring
from ._names import looks_sealed
from ._paths import DEFAULT_MAX_PATH_BYTES, MAX_S3_KEY_BYTES, MemoryPath, TenantLayout, parse_path
from .stores import ObjectInfo, ObjectStore, StoredObject

T = TypeVar("T")

log = logging.getLogger("s3memory")

ENCRYPTED_NAMES_EXPECTED = (
    "Error: This memory was written with encrypted names, so its files cannot be listed or read without "
    "them: open it with encrypt_names=True (the CLI's --encrypt-names, S3MEMORY_ENCRYPT_NAMES=1)."
)


MAX_LINES = 999_999
ACCESS_MARKERS = "access/"  # under the tenant's internal prefix
ACCESS_MARKER_TAGS = {"s3memory": "access"}  # a bucket lifecycle rule expires markers by this tag
LINE_NUMBER_WIDTH = 6
COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")
# Internal records are sealed for names no memory path can have (every memory path starts
# with /memories), so a memory file moved onto a record's key never opens as a record.
INTERNAL_RECORD_NAME = "s3memory-internal:"
MAX_INTENT_BYTES = 16 * 1024 * 1024  # a rename's record lists one ETag per file moved
MAX_ECHOED_CHARS = 1_000  # of the model's own old_str, quoted back in an error
MAX_LISTED_LINES = 100  # line numbers named in a "multiple occurrences" error


@dataclass(frozen=True)
class Limits:
    """Bounds enforced before anything is written.

    Attributes:
        max_file_bytes: largest file, in UTF-8 bytes (the managed memory stores use 100 KB).
        max_path_bytes: longest path under ``/memories``, in UTF-8 bytes.
        edit_attempts: how often an edit that lost a race is re-read and re-applied.
        max_workers: concurrent requests one command may issue.
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
    max_workers: int = 16
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


def format_size(size: int) -> str:
    """Human-readable size, base 1024, formatted exactly as the SDK's reference does."""
    if size == 0:
        return "0B"
    units = ["B", "K", "M", "G"]
    index = min((size.bit_length() - 1) // 10, len(units) - 1)
    scaled = size / (1024**index)
    return f"{int(scaled)}{units[index]}" if scaled == int(scaled) else f"{scaled:.1f}{units[index]}"


def _number_lines(lines: Sequence[str], first: int) -> str:
    return "\n".join(f"{n:>{LINE_NUMBER_WIDTH}}\t{line}" for n, line in enumerate(lines, start=first))


class _ShortRepr(reprlib.Repr):
    """Renders a model-supplied value for an error message: bounded in size and depth, and
    never failing (``repr`` of an int of over 4,300 digits raises ValueError)."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxlist, self.maxtuple, self.maxdict, self.maxstring, self.maxother = 3, 6, 6, 4, 60, 60

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 64:
            return f"<an integer of about {int(x.bit_length() * 0.30103) + 1:,} digits>"
        return repr(x)


_short_repr = _ShortRepr().repr


def _excerpt(text: str, limit: int = MAX_ECHOED_CHARS) -> str:
    """``text``, or its beginning and how much was left out."""
    return text if len(text) <= limit else f"{text[:limit]}... [{len(text) - limit:,} more characters]"


def _line_numbers_of(content: str, needle: str, limit: int) -> list[int]:
    """The lines of the first ``limit`` occurrences of ``needle``, counted as ``str.count``
    counts them (not overlapping): one forward pass, however long the needle."""
    numbers: list[int] = []
    line, counted_to, start = 1, 0, 0
    while len(numbers) < limit and (position := content.find(needle, start)) != -1:
        line += content.count("\n", counted_to, position)
        counted_to = position
        numbers.append(line)
        start = position + len(needle)
    return numbers


def _split_lines_for_insert(text: str) -> list[str]:
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


@dataclass
class _File:
    """A decrypted file, with the ETag an edit writes it back against."""

    text: str
    etag: str


@dataclass(frozen=True)
class _Move:
    """One copy of a rename. ``source``/``target`` are None for keys no valid path maps to."""

    source_key: str
    target_key: str
    source: MemoryPath | None
    target: MemoryPath | None
    head: ObjectInfo | None


@dataclass(frozen=True, order=True)
class FileEntry:
    """One stored file: its path under /memories and its plaintext size in bytes."""

    path: str
    size: int


@dataclass
class _Node:
    size: int = 0
    children: dict[tuple[str, bool], _Node] = field(default_factory=dict)


def _bare(etag: str) -> str:
    """An ETag without its quotes (radosgw returns copy ETags unquoted)."""
    return etag.strip('"')


def _plaintext_size(info: ObjectInfo) -> int:
    """A V3 body is the plaintext plus a 16-byte GCM tag."""
    return max(0, info.size - envelope.TAG_BYTES)


def access_marker_key(layout: TenantLayout, key: str) -> str:
    """Where a read of ``key`` is recorded: an empty object whose LastModified is the day
    of the last read. Named by a hash of the object key, which the bucket already shows."""
    return f"{layout.internal_prefix}{ACCESS_MARKERS}{hashlib.sha256(key.encode()).hexdigest()[:32]}"


class _AccessLog:
    """Which markers this process already wrote today, so a file costs one PUT a day."""

    def __init__(self, max_entries: int = 100_000) -> None:
        self._day = ""
        self._seen: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._max_entries = max_entries

    def first_today(self, store: str, marker: str) -> bool:
        today = time.strftime("%Y-%m-%d", time.gmtime())
        with self._lock:
            if today != self._day or len(self._seen) >= self._max_entries:
                self._day, self._seen = today, set()
            if (store, marker) in self._seen:
                return False
            self._seen.add((store, marker))
            return True

    def forget(self, store: str, marker: str) -> None:
        with self._lock:
            self._seen.discard((store, marker))


_ACCESS_NOTED = _AccessLog()


def _is_hidden(name: str) -> bool:
    return name.startswith(".") or name == "node_modules"


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
    reported again. ``track_access`` records, at most once a day per file and process, that
    a file was read (see ``_expiry``).
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
    ) -> None:
        self.store = store
        self.layout = layout
        self.keyring = keyring
        self.limits = limits or Limits()
        self.screen_text = screen_text
        self.screen_edit = screen_edit
        self.track_access = track_access
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    # -- plumbing ----------------------------------------------------------------------
    def _parallel(self, *calls: Callable[[], Any]) -> list[Any]:
        """Run independent requests concurrently; raise the first error after all finish."""
        if len(calls) == 1:
            return [calls[0]()]
        if self._pool is None:
            with self._pool_lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=self.limits.max_workers, thread_name_prefix="s3memory")
        futures = [self._pool.submit(call) for call in calls]
        wait(futures)
        return [f.result() for f in futures]

    def close(self) -> None:
        """Stop the worker threads (they are also stopped at interpreter exit)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def _parse(self, path: object) -> MemoryPath:
        return parse_path(path, max_path_bytes=self.limits.max_path_bytes)

    def _path_name(self, shown: str) -> str:
        """What binding contexts hash for a path: the path itself, or with encrypted names a
        keyed tag of it (an unkeyed hash in the metadata would confirm guessed names)."""
        return shown if self.layout.names is None else self.layout.names.path_tag(shown)

    def _binding(self, path: MemoryPath) -> dict[str, str]:
        """What a file written now at ``path`` is bound to (binding version 2)."""
        return self._binding_of_name(path.display)

    def _binding_of_name(self, name: str, *, legacy: bool = False) -> dict[str, str]:
        prefix = None if legacy else self.layout.prefix
        return envelope.binding_context(self.layout.tenant, self._path_name(name), prefix=prefix)

    def _stored_binding(self, name: str, header: envelope.EnvelopeHeader) -> dict[str, str]:
        """What a stored object at ``name`` must be bound to, by the version its header
        claims: an object written before deployments were bound (s3memory 0.1) is still read."""
        return self._binding_of_name(name, legacy=envelope.is_unbound_legacy(header.wrapped_key.context))

    @property
    def _max_stored_file_bytes(self) -> int:
        return self.limits.max_file_bytes + envelope.TAG_BYTES

    def _encode(self, text: str, shown_path: str) -> bytes:
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidCommandError("Error: The text is not valid Unicode (it has lone surrogates)") from None
        if len(data) > self.limits.max_file_bytes:
            raise LimitExceededError(
                f"Error: File {shown_path} would be {len(data):,} bytes, over the limit of "
                f"{self.limits.max_file_bytes:,} bytes. Nothing was written; keep memory files "
                "small and split large content across several files."
            )
        return data

    def _decrypt(self, name: str, shown_path: str, body: bytes, metadata: Mapping[str, str]) -> bytes:
        """Open an object stored for ``name`` (a path's display form, or an internal record's name)."""
        try:
            header = envelope.parse_header(metadata)
            data_key = self.keyring.unwrap(header.wrapped_key, self._stored_binding(name, header))
            return envelope.open_body(body, data_key, header)
        except ForeignObjectError:
            raise ForeignObjectError(
                f"Error: The file {shown_path} was not written by s3memory (it is not encrypted) and cannot be read."
            ) from None
        except TenantKeyError:
            raise  # says what is wrong with the tenant key, which is not about this file
        except IntegrityError:
            # Opened without encrypted names, a file written with them fails its binding.
            self._check_names_choice()
            # Whatever failed (commitment, tag, context, KMS refusing the key): one message.
            raise IntegrityError(
                f"Error: The file {shown_path} failed its integrity check and cannot be read "
                "(it was modified, truncated, moved, or not written for this user)."
            ) from None

    def _read_file(
        self, path: MemoryPath, shown_path: str, *, alongside: Sequence[Callable[[], Any]] = ()
    ) -> _File | None:
        """Fetch and decrypt a file; ``alongside`` are other requests sent in the same round trip."""
        if path.is_root:
            return None
        key = self.layout.key_for(path)
        calls: list[Callable[[], Any]] = [functools.partial(self._get_file, key, shown_path)]
        if not self.keyring.is_warm():  # a cold process: fetch the tenant key alongside the object
            calls.append(self.keyring.prepare)
        stored = self._parallel(*calls, *alongside)[0]
        if stored is None:
            return None
        plaintext = self._decrypt(path.display, shown_path, stored.body, stored.metadata)
        try:
            text = plaintext.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidCommandError(f"Error: The file {shown_path} is not UTF-8 text and cannot be shown.") from None
        return _File(text, stored.etag)

    def _get_file(self, key: str, shown_path: str) -> StoredObject | None:
        # Bounded: a planted multi-gigabyte object is refused, not read into memory.
        try:
            return self.store.get(key, max_bytes=self._max_stored_file_bytes)
        except ObjectTooLargeError as exc:
            size = "" if exc.size is None else f" ({exc.size - envelope.TAG_BYTES:,} bytes)"
            raise ObjectTooLargeError(
                f"Error: The file {shown_path} is larger{size} than the limit of {self.limits.max_file_bytes:,} "
                "bytes and was not read (raise Limits.max_file_bytes to read it).",
                size=exc.size,
            ) from None

    def _files_under(self, directory: MemoryPath) -> list[tuple[MemoryPath, ObjectInfo]]:
        """Every valid file below ``directory``; keys no valid path maps to are skipped."""
        found = []
        sealed_looking = 0
        for info in self.store.list(self.layout.dir_prefix(directory)):
            path = self.layout.path_for_key(info.key)
            if path is not None:
                found.append((path, info))
                sealed_looking += self.layout.names is None and looks_sealed(path.relative)
        if found and sealed_looking == len(found):
            self._check_names_choice()  # every name looks like a sealed one: written with encrypted names?
        return found

    def _not_found(self, message: str) -> PathNotFoundError:
        """The error for a missing path; but a memory opened without the encrypted names it
        was written with misses every path, and that is the error to report."""
        self._check_names_choice()
        return PathNotFoundError(message)

    def _check_names_choice(self) -> None:
        """Refuse, with the fix, to use without encrypted names a memory written with them
        (its tenant has a names key): its files would show as sealed names, fail every read,
        and new files would be invisible to the memory opened as it should be. One HEAD per key
        cache lifetime and tenant; the other way round, the names key loader refuses."""
        if self.layout.names is not None:
            return
        # Remembered in the key cache, as long as a key would be (15 minutes by default).
        cache = self.keyring.key_cache or process_key_cache()
        names_key = self.layout.internal_prefix + NAMES_KEY
        marker = ("no names key", self.store.identity, names_key)
        if cache.get(marker):
            return
        if self.store.head(names_key) is not None:
            raise ConfigurationError(ENCRYPTED_NAMES_EXPECTED)
        cache.put(marker, True)

    def _has_objects_under(self, directory: MemoryPath) -> bool:
        return any(True for _ in self.store.list(self.layout.dir_prefix(directory), limit=1))

    def _head_ancestors(self, path: MemoryPath) -> list[Callable[[], ObjectInfo | None]]:
        return [functools.partial(self.store.head, self.layout.key_for(a)) for a in path.ancestors()]

    def _screen(self, text: str) -> str:
        return text if self.screen_text is None else self.screen_text(text)

    def _tenant_usage(self) -> tuple[int, int] | None:
        """(files, plaintext bytes) of the user, if a quota is set (one LIST per 1,000 files)."""
        if not self.limits.has_quota:
            return None
        infos = list(self.store.list(self.layout.memory_prefix))
        return len(infos), sum(_plaintext_size(info) for info in infos)

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

    def _note_access(self, key: str) -> None:
        """Record a read of ``key`` (a file that exists) today, if this process has not yet.

        After the read, not beside it: a marker for a path that turns out not to exist would
        let the model create objects past the quota by viewing made-up paths.
        """
        if not self.track_access:
            return
        marker = access_marker_key(self.layout, key)
        if not _ACCESS_NOTED.first_today(self.store.identity, marker):
            return
        try:
            self.store.put(marker, b"", {}, tags=ACCESS_MARKER_TAGS)
        except S3MemoryError as exc:  # bookkeeping must never fail a read
            _ACCESS_NOTED.forget(self.store.identity, marker)
            # Not the exception itself: its cause is botocore's, whose text has the request's URL,
            # and with it the tenant and the file name.
            log.warning("could not record an access to a file (expiry may count it unread): %s", type(exc).__name__)

    # -- dispatch ----------------------------------------------------------------------
    def execute(self, command: object) -> str:
        """Run one tool-use input (``{"command": "view", "path": ...}``) and return the answer."""
        if not isinstance(command, Mapping):
            raise InvalidCommandError("Error: The tool input must be an object with a `command` field.")
        name = command.get("command")
        required: dict[str, tuple[str, ...]] = {
            "view": ("path",),
            "create": ("path", "file_text"),
            "str_replace": ("path", "old_str", "new_str"),
            "insert": ("path", "insert_line", "insert_text"),
            "delete": ("path",),
            "rename": ("old_path", "new_path"),
        }
        if not isinstance(name, str) or name not in required:
            raise InvalidCommandError(f"Error: Unknown command {_short_repr(name)}. Use one of: {', '.join(COMMANDS)}.")
        for parameter in required[name]:
            if command.get(parameter) is None:
                raise InvalidCommandError(f"Error: Missing required parameter `{parameter}` for command `{name}`.")
        if name == "view":
            return self.view(command["path"], command.get("view_range"))
        if name == "create":
            return self.create(command["path"], command["file_text"])
        if name == "str_replace":
            return self.str_replace(command["path"], command["old_str"], command["new_str"])
        if name == "insert":
            return self.insert(command["path"], command["insert_line"], command["insert_text"])
        if name == "delete":
            return self.delete(command["path"])
        return self.rename(command["old_path"], command["new_path"])

    # -- view --------------------------------------------------------------------------
    def view(self, path: str, view_range: object = None) -> str:
        """A directory listing (two levels, sizes), or a file with line numbers."""
        parsed = self._parse(path)
        # One request in the common case: a path written as a directory ("/memories/d/")
        # is listed first, anything else is fetched as a file first.
        files = self._files_under(parsed) if parsed.is_root or path.endswith("/") else []
        if not files and not parsed.is_root:
            file = self._read_file(parsed, path)
            if file is not None:
                answer = self._show_file(path, file.text, view_range)
                self._note_access(self.layout.key_for(parsed))
                return answer
            if not path.endswith("/"):
                files = self._files_under(parsed)
            if not files:
                raise self._not_found(f"The path {path} does not exist. Please provide a valid path.")
        return self._show_directory(parsed, files)

    def _show_file(self, shown_path: str, text: str, view_range: object) -> str:
        lines = text.split("\n")
        if len(lines) > MAX_LINES:
            raise LimitExceededError(f"File {shown_path} exceeds maximum line limit of 999,999 lines.")
        first = 1
        if view_range is not None:
            if (
                not isinstance(view_range, (list, tuple))
                or len(view_range) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in view_range)
            ):
                raise InvalidCommandError(
                    f"Error: Invalid `view_range` parameter: {_short_repr(view_range)}. "
                    "It should be a list of two integers [start, end]."
                )
            start, end = view_range
            if not (1 <= start <= len(lines)) or (end != -1 and end < start):
                raise InvalidCommandError(
                    f"Error: Invalid `view_range` parameter: [{_short_repr(start)}, {_short_repr(end)}]. "
                    f"It should be [start, end] with 1 <= start <= {len(lines)}, and end >= start or end == -1."
                )
            total = len(lines)
            lines = lines[start - 1 : None if end == -1 else end]
            first = start
        header = f"Here's the content of {shown_path} with line numbers:\n"
        body = _number_lines(lines, first)
        if len(header) + len(body) <= self.limits.max_view_chars:
            return header + body
        return header + self._truncated_file(lines, first, total if view_range is not None else len(lines))

    def _truncated_file(self, lines: Sequence[str], first: int, total: int) -> str:
        """As many whole numbered lines as fit, then a notice saying how to page on."""
        budget = self.limits.max_view_chars - 400  # room for the header and the notice
        shown: list[str] = []
        used = 0
        for number, line in enumerate(lines, start=first):
            numbered = f"{number:>{LINE_NUMBER_WIDTH}}\t{line}"
            if used + len(numbered) + 1 > budget:
                if not shown:  # one line longer than the whole budget: show its beginning
                    shown.append(numbered[: max(budget, 0)])
                    note = f"line {number} alone is longer than {self.limits.max_view_chars:,} characters and is cut"
                    return "\n".join(shown) + f"\n[Output truncated: {note}.]"
                break
            shown.append(numbered)
            used += len(numbered) + 1
        last = first + len(shown) - 1
        step = max(len(shown), 1)
        return "\n".join(shown) + (
            f"\n[Output truncated at {self.limits.max_view_chars:,} characters: showing lines {first}-{last} "
            f"of {total}. Call view again with view_range=[{last + 1}, {min(total, last + step)}] to read on.]"
        )

    def _show_directory(self, directory: MemoryPath, files: list[tuple[MemoryPath, ObjectInfo]]) -> str:
        root = _Node()
        depth = len(directory.parts)
        for path, info in files:
            size = _plaintext_size(info)
            root.size += size
            names = path.parts[depth:]
            node = root
            for level, name in enumerate(names[:2]):
                is_dir = level < len(names) - 1
                node = node.children.setdefault((name, is_dir), _Node())
                node.size += size
        shown = directory.display
        lines = [f"{format_size(root.size)}\t{shown}"]
        for (name, is_dir), node in sorted(root.children.items()):
            if _is_hidden(name):
                continue
            lines.append(f"{format_size(node.size)}\t{shown}/{name}{'/' if is_dir else ''}")
            for (child, child_is_dir), grandchild in sorted(node.children.items()):
                if not _is_hidden(child):
                    suffix = "/" if child_is_dir else ""
                    lines.append(f"{format_size(grandchild.size)}\t{shown}/{name}/{child}{suffix}")
        header = (
            f"Here're the files and directories up to 2 levels deep in {shown}, "
            "excluding hidden items and node_modules:"
        )
        budget, kept, used = self.limits.max_view_chars - len(header) - 200, 0, 0
        while kept < len(lines) and used + len(lines[kept]) + 1 <= budget:
            used += len(lines[kept]) + 1
            kept += 1
        if kept < len(lines):
            notice = f"[Listing truncated: {len(lines) - kept} more entries. View a subdirectory to see them.]"
            lines = [*lines[:kept], notice]
        return header + "\n" + "\n".join(lines)

    # -- beyond the tool: what the CLI and MCP server need ---------------------------
    def read_text(self, path: str) -> str:
        """A file's whole text, without line numbers (one GET)."""
        parsed = self._parse(path)
        file = self._read_file(parsed, path)
        if file is not None:
            return file.text
        if not parsed.is_root and not self._has_objects_under(parsed):
            raise self._not_found(f"The path {path} does not exist. Please provide a valid path.")
        raise InvalidCommandError(f"Error: {path} is a directory, not a file")

    def list_files(self, path: str = "/memories") -> list[FileEntry]:
        """Every file at or below ``path``, hidden ones included, sorted by path."""
        parsed = self._parse(path)
        files = self._files_under(parsed)
        if not files and not parsed.is_root:
            head = self.store.head(self.layout.key_for(parsed))
            if head is None:
                raise self._not_found(f"The path {path} does not exist. Please provide a valid path.")
            files = [(parsed, head)]
        return sorted(FileEntry(p.display, _plaintext_size(info)) for p, info in files)

    # -- create ------------------------------------------------------------------------
    def create(self, path: str, file_text: object) -> str:
        """Create a new file; never overwrites. Parent directories come into being."""
        parsed = self._parse(path)
        if not isinstance(file_text, str):
            raise InvalidCommandError("Error: `file_text` must be a string.")
        if parsed.is_root:
            raise PathExistsError(f"Error: File {path} already exists")
        data = self._encode(self._screen(file_text), path)
        key = self.layout.key_for(parsed)
        binding = self._binding(parsed)
        # Round trip 1, concurrently: is it a directory? is an ancestor a file? a data key;
        # and the user's usage if a quota is set.
        is_dir, (data_key, wrapped), usage, _, *ancestor_heads = self._parallel(
            lambda: self._has_objects_under(parsed),
            lambda: self.keyring.generate(binding),
            self._tenant_usage,
            self._check_names_choice,  # once per process: no request when warm
            *self._head_ancestors(parsed),
        )
        if is_dir:
            raise PathExistsError(f"Error: File {path} already exists")
        self._check_quota(usage, path, files=1, grow=len(data))
        for ancestor, head in zip(parsed.ancestors(), ancestor_heads, strict=True):
            if head is not None:
                raise NotADirectoryConflict(
                    f"Error: Cannot create {path}: {ancestor.display} is a file, not a directory"
                )
        body, metadata = envelope.seal(data, data_key, wrapped)
        # Round trip 2: the conditional write; of concurrent creators exactly one wins.
        try:
            self.store.put(key, body, metadata, if_none_match=True)
        except PreconditionFailedError:
            raise PathExistsError(f"Error: File {path} already exists") from None
        return f"File created successfully at: {path}"

    # -- edits (compare-and-swap) ------------------------------------------------------
    def _edit(
        self,
        path: str,
        missing_message: str,
        apply: Callable[[str], tuple[str, T]],
        answer: Callable[[str, T], str],
    ) -> str:
        """Read, apply, screen, write back with If-Match; on a lost race re-read and re-apply.

        ``apply`` turns the file's text into the new text and what the answer needs;
        ``answer`` words the result from the text as written (after any redaction).
        """
        parsed = self._parse(path)
        binding = self._binding(parsed)
        for attempt in range(self.limits.edit_attempts):
            usage: tuple[int, int] | None = None
            fresh_key: tuple[bytes, envelope.WrappedKey] | None = None

            def fetch_usage() -> None:
                nonlocal usage
                usage = self._tenant_usage()

            def generate_key() -> None:
                nonlocal fresh_key
                fresh_key = self.keyring.generate(binding)

            # In the read's round trip: the quota's listing, and a KMS data key (a request).
            alongside: list[Callable[[], Any]] = []
            if self.limits.max_tenant_bytes is not None:
                alongside.append(fetch_usage)
            if self.keyring.generates_remotely:
                alongside.append(generate_key)
            file = self._read_file(parsed, path, alongside=alongside)
            if file is None:
                raise self._not_found(missing_message)
            new_text, detail = apply(file.text)
            if self.screen_edit is not None:
                new_text = self.screen_edit(file.text, new_text)
            data = self._encode(new_text, path)
            self._check_quota(usage, path, files=0, grow=len(data) - len(file.text.encode()))
            # A fresh data key for every version (a local one in tenant-key mode): no two
            # versions of a file share a key, so none can be spliced onto another's metadata.
            data_key, wrapped = fresh_key or self.keyring.generate(binding)
            body, metadata = envelope.seal(data, data_key, wrapped)
            try:
                self.store.put(self.layout.key_for(parsed), body, metadata, if_match=file.etag)
                return answer(new_text, detail)
            except PreconditionFailedError:
                time.sleep(random.uniform(0, 0.02 * 2**attempt))
        raise StorageUnavailableError(
            f"Error: {path} is being changed by others at the same time; the edit was not applied. Try again."
        )

    def _screen_inserted(self, text: str) -> str:
        """The inserted text, screened on its own unless the whole result will be."""
        return text if self.screen_edit is not None else self._screen(text)

    def _capped(self, answer: str, what: str) -> str:
        """An edit's answer within ``max_view_chars``, like every ``view``."""
        limit = self.limits.max_view_chars
        if len(answer) <= limit:
            return answer
        notice = f"\n[{what} truncated at {limit:,} characters: view the file to see the change.]"
        return answer[: max(limit - len(notice), 0)] + notice

    def str_replace(self, path: str, old_str: object, new_str: object) -> str:
        """Replace the one occurrence of ``old_str``; answer with a numbered snippet."""
        if not isinstance(old_str, str) or not isinstance(new_str, str):
            raise InvalidCommandError("Error: `old_str` and `new_str` must be strings.")
        if old_str == "":
            raise EditError("Error: `old_str` must not be empty.")
        replacement = self._screen_inserted(new_str)

        def apply(content: str) -> tuple[str, int]:
            count = content.count(old_str)  # non-overlapping, as the reference counts
            if count == 0:
                raise EditError(
                    f"No replacement was performed, old_str `{_excerpt(old_str)}` did not appear verbatim in {path}."
                )
            if count > 1:
                listed = ", ".join(map(str, _line_numbers_of(content, old_str, MAX_LISTED_LINES)))
                if count > MAX_LISTED_LINES:
                    listed += f", ... ({count:,} occurrences in all)"
                raise EditError(
                    self._capped(
                        f"No replacement was performed. Multiple occurrences of old_str `{_excerpt(old_str)}` "
                        f"in lines: {listed}. Please ensure it is unique",
                        "Error",
                    )
                )
            position = content.find(old_str)
            changed_line = content.count("\n", 0, position)
            return content[:position] + replacement + content[position + len(old_str) :], changed_line

        def answer(written: str, changed_line: int) -> str:
            new_lines = written.split("\n")
            first = max(0, changed_line - 2)
            last = min(len(new_lines), changed_line + 3)
            snippet = _number_lines(new_lines[first:last], first + 1)
            return self._capped(
                "The memory file has been edited. Here is the snippet showing the change "
                "(with line numbers):\n" + snippet,
                "Snippet",
            )

        return self._edit(path, f"Error: The path {path} does not exist. Please provide a valid path.", apply, answer)

    def insert(self, path: str, insert_line: object, insert_text: object) -> str:
        """Insert ``insert_text`` after line ``insert_line`` (0 = at the top)."""
        if isinstance(insert_line, bool) or not isinstance(insert_line, int):
            raise InvalidCommandError("Error: `insert_line` must be an integer.")
        if not isinstance(insert_text, str):
            raise InvalidCommandError("Error: `insert_text` must be a string.")
        inserted = self._screen_inserted(insert_text)

        def apply(content: str) -> tuple[str, None]:
            lines = _split_lines_for_insert(content)
            if not 0 <= insert_line <= len(lines):
                raise EditError(
                    f"Error: Invalid `insert_line` parameter: {_short_repr(insert_line)}. It should be within the "
                    f"range of lines of the file: [0, {len(lines)}]"
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
    def delete(self, path: str) -> str:
        """Delete a file, or a directory with everything under it."""
        parsed = self._parse(path)
        if parsed.is_root:
            raise InvalidCommandError("Error: Cannot delete the /memories directory itself")
        key = self.layout.key_for(parsed)
        head, under = self._parallel(
            lambda: self.store.head(key),
            lambda: list(self.store.list(self.layout.dir_prefix(parsed))),
        )
        if head is None and not under:
            raise self._not_found(f"Error: The path {path} does not exist")
        keys = [info.key for info in under] + ([key] if head is not None else [])
        self.store.delete(keys)
        log.info("deleted %d objects", len(keys))
        return f"Successfully deleted {path}"

    def clear_all(self) -> str:
        """Delete every memory file of this user (``/memories`` stays, empty); the user's
        keys stay, so the memory is at once usable again. Not a crypto-shredding erasure:
        for that (keys, records and old versions too) see :func:`s3memory.erase_tenant`."""
        keys = [info.key for info in self.store.list(self.layout.memory_prefix)]
        if keys:
            self.store.delete(keys)
        log.info("cleared the memory of one tenant: %d objects deleted", len(keys))
        return "All memory cleared"

    # -- rename ------------------------------------------------------------------------
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
        """
        old, new = self._parse(old_path), self._parse(new_path)
        if old.is_root:
            raise InvalidCommandError("Error: Cannot rename the /memories directory itself")
        if new.is_root or new == old:
            raise PathExistsError(f"Error: The destination {new_path} already exists")
        if new.is_within(old):
            raise InvalidCommandError(f"Error: Cannot move {old_path} into itself ({new_path})")
        old_key, new_key = self.layout.key_for(old), self.layout.key_for(new)
        intent_tag = hashlib.sha256(self._path_name(f"{old.display}\n{new.display}").encode()).hexdigest()
        intent_key = f"{self.layout.internal_prefix}intents/rename-{intent_tag[:40]}"
        # Round trip 1, concurrently: both sides, the new path's ancestors, and a record of
        # an unfinished earlier attempt at this very rename.
        old_head, old_under, new_head, new_under, (intent, stale_intent), *ancestor_heads = self._parallel(
            lambda: self.store.head(old_key),
            lambda: list(self.store.list(self.layout.dir_prefix(old))),
            lambda: self.store.head(new_key),
            lambda: list(self.store.list(self.layout.dir_prefix(new))),
            lambda: self._read_intent(intent_key),
            *self._head_ancestors(new),
        )
        at_destination = new_under + ([new_head] if new_head is not None else [])
        # Our own copies are the only thing allowed at the destination: none on a fresh
        # rename, copies of the recorded files when resuming one.
        ours: set[str] = set()
        if intent is not None:  # copies of the recorded versions, or of the sources as they are now
            ours = {_bare(etag) for etag in intent.get("etags", [])}
            ours |= {_bare(info.etag) for info in ([old_head] if old_head is not None else []) + old_under}
        only_ours = all(_bare(info.etag) in ours for info in at_destination)
        # ... and in the shape this rename makes: a file where a file goes, files below the
        # new path where a directory goes (a copy left by an abandoned attempt at moving a
        # directory must not end up below a file).
        if (old_head is not None and new_under) or (old_head is None and new_head is not None):
            only_ours = False
        if old_head is None and not old_under:
            if stale_intent is not None:
                self._remove_stale_intent(intent_key, stale_intent)
            if intent is not None:
                self.store.delete([intent_key])
                if at_destination and only_ours:  # finished earlier; only the record was left
                    return f"Successfully renamed {old_path} to {new_path}"
            raise self._not_found(f"Error: The path {old_path} does not exist")
        if not only_ours:
            raise PathExistsError(f"Error: The destination {new_path} already exists")
        for ancestor, head in zip(new.ancestors(), ancestor_heads, strict=True):
            if head is not None:
                raise NotADirectoryConflict(
                    f"Error: Cannot rename to {new_path}: {ancestor.display} is a file, not a directory"
                )
        moves = self._plan_moves(old, new, old_path, new_path, old_head, old_under)

        if intent is None:  # round trip 2: the record, before anything is copied
            if stale_intent is not None:
                self._remove_stale_intent(intent_key, stale_intent)
            sources = ([old_head] if old_head is not None else []) + old_under
            recorded = sorted({_bare(info.etag) for info in sources})
            self._write_intent(intent_key, {"op": "rename", "old": old.display, "new": new.display, "etags": recorded})
        present = {info.key for info in at_destination}  # all ours, as checked above
        copies = [functools.partial(self._move_copy, move, move.target_key in present) for move in moves]
        try:
            copied = self._parallel(*(_reporting(copies, progress) if progress is not None else copies))
        except PreconditionFailedError:
            raise PreconditionFailedError(
                f"Error: {old_path} or {new_path} changed while it was being renamed; nothing was lost. "
                "Issue the same rename again to finish it."
            ) from None
        etags = {source: etag for source, etag in copied if etag is not None}
        try:  # the sources (each only if unchanged since its copy) and, with them, the record
            self.store.delete([*etags, intent_key], if_match=etags)
        except PreconditionFailedError:
            raise PreconditionFailedError(
                f"Error: Some files under {old_path} were edited while being renamed. Their newer versions "
                f"were left at {old_path} and older copies are at {new_path}; nothing was lost."
            ) from None
        log.info("renamed: %d files moved%s", len(moves), " (an unfinished rename resumed)" if intent else "")
        return f"Successfully renamed {old_path} to {new_path}"

    @staticmethod
    def _intent_name(key: str) -> str:
        """The name an intent record is sealed for: not a memory path, so no file the model
        writes (``/memories/.s3memory/rename-...`` included) opens as a record when moved here."""
        return INTERNAL_RECORD_NAME + "intents/" + key.rsplit("/", 1)[1]

    def _write_intent(self, key: str, record: dict[str, Any]) -> None:
        data_key, wrapped = self.keyring.generate(self._binding_of_name(self._intent_name(key)))
        body, metadata = envelope.seal(json.dumps({"v": 1, **record}).encode(), data_key, wrapped)
        try:
            self.store.put(key, body, metadata, if_none_match=True)
        except PreconditionFailedError:
            raise PreconditionFailedError(
                "Error: The same rename is already running elsewhere; try again in a moment."
            ) from None

    def _read_intent(self, key: str) -> tuple[dict[str, Any] | None, str | None]:
        """(the record of an unfinished rename, None), or (None, the ETag of an object at the
        record's key that is no record), or (None, None). An unreadable object (sealed by an
        older version, tampered with, planted) grants nothing: the rename behaves as if
        fresh, and replaces it."""
        try:
            stored = self.store.get(key, max_bytes=MAX_INTENT_BYTES)
        except ObjectTooLargeError:
            head = self.store.head(key)
            return None, None if head is None else head.etag
        if stored is None:
            return None, None
        try:
            plaintext = self._decrypt(self._intent_name(key), key, stored.body, stored.metadata)
            record = json.loads(plaintext)
        except (IntegrityError, ForeignObjectError, ValueError, RecursionError):
            return None, stored.etag
        if isinstance(record, dict) and isinstance(record.get("etags"), list):
            return record, None
        return None, stored.etag

    def _remove_stale_intent(self, key: str, etag: str) -> None:
        try:
            self.store.delete([key], if_match={key: etag})
        except PreconditionFailedError:
            raise PreconditionFailedError(
                "Error: The same rename is already running elsewhere; try again in a moment."
            ) from None

    def _plan_moves(
        self,
        old: MemoryPath,
        new: MemoryPath,
        old_path: str,
        new_path: str,
        old_head: ObjectInfo | None,
        old_under: list[ObjectInfo],
    ) -> list[_Move]:
        """Every copy a rename makes; fails before any write if a target path would be too long."""
        moves = []
        if old_head is not None:
            moves.append(_Move(self.layout.key_for(old), self.layout.key_for(new), old, new, old_head))
        old_prefix, new_prefix = self.layout.dir_prefix(old), self.layout.dir_prefix(new)
        for info in old_under:
            suffix = info.key[len(old_prefix) :]
            source_path = self.layout.path_for_key(info.key)
            target_path = None
            if source_path is not None:
                target_path = new.child(source_path.relative[len(old.relative) + 1 :])
                too_long = len(target_path.relative.encode("utf-8")) > self.limits.max_path_bytes
                if too_long or len(self.layout.key_for_unchecked(target_path).encode("utf-8")) > MAX_S3_KEY_BYTES:
                    raise InvalidPathError(
                        f"Error: Cannot rename {old_path} to {new_path}: {target_path.display} would be "
                        "too long. Nothing was changed."
                    )
            # The layout's key, not new_prefix + suffix: with encrypted names a key's segments
            # depend on their parent path, so every key below a renamed directory changes.
            target_key = new_prefix + suffix if target_path is None else self.layout.key_for_unchecked(target_path)
            moves.append(_Move(info.key, target_key, source_path, target_path, None))
        return moves

    def _move_copy(self, move: _Move, target_is_ours: bool) -> tuple[str, str | None]:
        """Copy one source to its target; return (source key, the source ETag copied).

        ``target_is_ours``: the target holds a copy made by an interrupted attempt at this
        rename; it is kept if it is a copy of this very version, else replaced by it.
        """
        source_key, target_key, source, target = move.source_key, move.target_key, move.source, move.target
        info = move.head or self.store.head(source_key)
        if info is None:
            return source_key, None  # deleted concurrently: nothing to move
        if target_is_ours:
            existing = self.store.head(target_key)
            if existing is not None and _bare(existing.etag) == _bare(info.etag):
                return source_key, info.etag
        metadata: Mapping[str, str] = info.metadata
        if source is not None and target is not None:
            try:
                header = envelope.parse_header(info.metadata)
                data_key = self.keyring.unwrap(header.wrapped_key, self._stored_binding(source.display, header))
                rewrapped = self.keyring.wrap(data_key, self._binding(target))
                metadata = envelope.metadata_for(rewrapped, header.message_id, header.commitment)
            except (IntegrityError, ForeignObjectError):
                pass  # not readable here: move it unchanged, so nothing is lost
        self.store.copy(source_key, target_key, metadata=metadata, if_match=info.etag, if_none_match=not target_is_ours)
        return source_key, info.etag


def _reporting(calls: Sequence[Callable[[], T]], progress: Callable[[int, int], None]) -> list[Callable[[], T]]:
    """``calls``, each reporting ``progress(done, total)`` when it returns."""
    lock = threading.Lock()
    done = 0

    def reported(call: Callable[[], T]) -> T:
        nonlocal done
        result = call()
        with lock:
            done += 1
            progress(done, len(calls))
        return result

    return [functools.partial(reported, call) for call in calls]
