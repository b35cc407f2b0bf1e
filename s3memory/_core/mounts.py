"""Memory stores mounted beside the user's own: one tree under ``/memories`` for the model.

A mount is another tenant's store (its own tenant id, keys and history) shown at
``/memories/{name}/``, ``read_only`` or ``read_write``: shared reference material beside
each user's own learnings, as Managed Agents memory stores attach up to 8 stores to a
session. Nothing about a mount is written into the bucket: the mounted store reads the same
whether it is mounted or opened directly.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from .. import _render as render
from .. import _telemetry
from .._crypto.files import plaintext_size
from .._errors import (
    ConfigurationError,
    InvalidCommandError,
    InvalidPathError,
    PathExistsError,
    S3MemoryError,
)
from .._history.entries import MemoryVersion
from .._paths import ROOT, MemoryPath, parse_path, validate_tenant
from .._search.query import DEFAULT_LIMIT, SearchResult
from ..stores import ObjectInfo
from .beyond import search, search_answer
from .commands import run_command
from .memory import EncryptedMemory, FileEntry

T = TypeVar("T")
log = logging.getLogger("s3memory")

Access = Literal["read_only", "read_write"]
ACCESS_MODES: tuple[Access, ...] = ("read_only", "read_write")
MAX_MOUNTS = 8
MAX_DESCRIPTION_CHARS = 1_024
MAX_INSTRUCTIONS_CHARS = 4_096  # the managed stores' per-session ``prompt``
_MOUNT_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


@dataclass(frozen=True)
class Mount:
    """One memory store mounted at ``/memories/{name}/``.

    Attributes:
        name: the mount point's directory name: lowercase ASCII letters, digits, ``. _ -``,
            starting with a letter or digit, at most 64 characters.
        user_id: the mounted store's tenant id (its own keys, history and quota).
        access: ``"read_only"`` (the default: a shared store is reference material) or
            ``"read_write"``. Read-only is checked here before any request, and enforced by
            AWS with the statements of ``s3memory policy --read-only-mount``.
        description: what the store holds, for the model (at most 1,024 characters).
        instructions: how to use it this session (at most 4,096 characters, as the managed
            stores' ``prompt``); see :func:`s3memory.memory_stores_prompt`.
        encrypt_names: whether the mounted store seals its names; ``None``: as the user's own.
    """

    name: str
    user_id: str
    access: Access = "read_only"
    description: str = ""
    instructions: str = ""
    encrypt_names: bool | None = None

    def __post_init__(self) -> None:
        # node_modules: ``view`` hides it, so the model would never see the mount.
        if not isinstance(self.name, str) or not _MOUNT_NAME.fullmatch(self.name) or self.name == "node_modules":
            raise ConfigurationError(
                f"mount name {self.name!r} must be 1-64 lowercase ASCII letters, digits, '.', '_' or '-', "
                "starting with a letter or digit"
            )
        validate_tenant(self.user_id)
        if self.access not in ACCESS_MODES:
            raise ConfigurationError(f"mount {self.name}: access must be 'read_only' or 'read_write'")
        for field, limit in (("description", MAX_DESCRIPTION_CHARS), ("instructions", MAX_INSTRUCTIONS_CHARS)):
            value = getattr(self, field)
            if not isinstance(value, str):
                raise ConfigurationError(f"mount {self.name}: {field} must be a string")
            if len(value) > limit:
                raise ConfigurationError(f"mount {self.name}: {field} is over {limit:,} characters")
        if self.encrypt_names is not None and not isinstance(self.encrypt_names, bool):
            raise ConfigurationError(f"mount {self.name}: encrypt_names must be True, False or None")

    @property
    def read_only(self) -> bool:
        return self.access == "read_only"

    @property
    def path(self) -> str:
        """The mount point as the model sees it, with the trailing slash."""
        return f"/memories/{self.name}/"


def folded_name(segment: str) -> str:
    """A first path segment as compared with the mount names: NFKC, case-folded, NFKC again
    (Unicode's NFKC_Casefold but for ignorables, which no path holds), so that ``Standards``,
    ``STANDARDS``, the full-width letters and ``\u017ftandards`` (long s) all read as ``standards``."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", segment).casefold())


def shadowed_by(paths: Iterable[str], mounts: Iterable[Mount]) -> dict[str, list[str]]:
    """The paths of the user's own store (as shown: ``/memories/team/x``) that a mount hides,
    by mount name: those whose first segment is the mount's name, or reads as it
    (:func:`folded_name`). Pure: from a listing already made."""
    names = {folded_name(mount.name): mount.name for mount in mounts}
    hidden: dict[str, list[str]] = {}
    for path in paths:
        parts = path.split("/")
        name = names.get(folded_name(parts[2])) if len(parts) > 3 else None
        if name is not None:
            hidden.setdefault(name, []).append(path)
    return hidden


def check_mounts(mounts: object, own_user_id: str) -> tuple[Mount, ...]:
    """The mounts, validated together: at most 8, distinct names and tenants, never the
    user's own tenant (mounting it read-only would be a read-only view of a writable store).

    Raises:
        ConfigurationError: any of the above, or an item that is not a :class:`Mount`.
    """
    if isinstance(mounts, (str, bytes)) or not hasattr(mounts, "__iter__"):
        raise ConfigurationError("mounts must be a list of s3memory.Mount")
    checked = tuple(mounts)
    for mount in checked:
        if not isinstance(mount, Mount):
            raise ConfigurationError("mounts must be a list of s3memory.Mount")
    if len(checked) > MAX_MOUNTS:
        raise ConfigurationError(f"at most {MAX_MOUNTS} memory stores can be mounted, not {len(checked)}")
    names, tenants = [folded_name(m.name) for m in checked], [m.user_id for m in checked]
    if len(set(names)) != len(names):
        raise ConfigurationError("two mounts have the same name")
    if len(set(tenants)) != len(tenants):
        raise ConfigurationError("two mounts show the same user_id's store")
    if own_user_id in tenants:
        raise ConfigurationError("the user's own store cannot also be mounted")
    return checked


class MountedMemory:
    """The user's own store at ``/memories`` with other stores mounted below it: one tree
    for the model, the six commands routed by the first path segment.

    Each store keeps its own tenant, keys, history and quota; a mounted store's objects are
    read only with its own keys, so nothing of one store opens as another's. ``view`` of
    ``/memories`` lists every store in one round trip (the stores' listings concurrently)
    and shows each mount point as a directory, also when empty. A file of the own store
    whose first segment is a mount name, or reads as one (``Team``, full-width ``TEAM``:
    compared by :func:`folded_name`), is shadowed: not shown and not reachable here; ``view``
    of ``/memories`` says how many there are (:meth:`shadowing_mounts` asks for each mount).

    Refused before any request: a path whose first segment reads as a mount's name without
    being it (no writable twin beside a read-only store, no second spelling of a mount); a
    change touching a ``read_only`` mount (:class:`~s3memory.ReadOnlyMountError`); deleting
    or renaming a mount point, or renaming onto one; a rename from one store to another (a
    rename is a server-side copy under one tenant's keys, with one tenant's intent record to
    finish it after a fault; across two tenants neither holds; create the file at the new
    path and delete the old one instead).
    """

    def __init__(self, own: EncryptedMemory, mounted: Sequence[tuple[Mount, EncryptedMemory]]) -> None:
        """Prefer :func:`s3memory.open_memory` with ``mounts=``, which opens each store as its
        mount says. Built by hand, each store must be the one its mount names.

        Raises:
            ConfigurationError: the mounts do not pass :func:`check_mounts`, or a store is not
                its mount's tenant, mount point or access.
        """
        check_mounts([mount for mount, _ in mounted], own.layout.tenant)
        if own.files.shown_root != ROOT or own.read_only:
            raise ConfigurationError("the user's own store must be opened at /memories, writable")
        for mount, memory in mounted:
            if (memory.layout.tenant, memory.files.shown_root, memory.read_only) != (
                mount.user_id,
                mount.path.rstrip("/"),
                mount.read_only,
            ):
                raise ConfigurationError(
                    f"mount {mount.name}: the store must be user {mount.user_id}'s, opened at "
                    f"{mount.path.rstrip('/')} with read_only={mount.read_only} (use open_memory(mounts=...))"
                )
        self.own = own
        self.mounted: dict[str, tuple[Mount, EncryptedMemory]] = {mount.name: (mount, m) for mount, m in mounted}
        self._folded = {folded_name(name): name for name in self.mounted}
        self.limits = own.limits
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    @property
    def mounts(self) -> tuple[Mount, ...]:
        return tuple(mount for mount, _ in self.mounted.values())

    def stores(self) -> list[tuple[Mount | None, EncryptedMemory]]:
        """The own store (``None``) and every mounted one."""
        return [(None, self.own), *self.mounted.values()]

    def close(self) -> None:
        for _, memory in self.stores():
            memory.close()
        with self._pool_lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False)
                self._pool = None

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=len(self.mounted) + 1, thread_name_prefix="s3memory-mounts")
            return self._pool

    def each_store(self, call: Callable[[EncryptedMemory], T]) -> list[T]:
        """``call`` on every store at once (own first); each store runs its own requests on
        its own workers, so a call may issue round trips of its own without deadlock."""
        return self.at_once([functools.partial(call, memory) for _, memory in self.stores()])

    def at_once(self, calls: Sequence[Callable[[], T]]) -> list[T]:
        """The calls on the tree's workers, their requests counted as one round trip of the
        current command's span (if one records)."""
        counted = _telemetry.fork()
        bound = [counted.bind(call) for call in calls] if counted is not None else list(calls)
        futures = [self._executor().submit(call) for call in bound]
        results = [future.result() for future in futures]
        if counted is not None:
            counted.join()
        return results

    # -- routing ---------------------------------------------------------------------------
    def route(self, path: object) -> tuple[Mount | None, EncryptedMemory, MemoryPath]:
        """The store ``path`` is in (``None``: the own store) and its whole parsed path.

        Raises:
            InvalidPathError: ``path`` is not a valid path under ``/memories``.
        """
        parsed = parse_path(path, max_path_bytes=self.limits.max_path_bytes)
        if parsed.parts:
            first = parsed.parts[0]
            if first in self.mounted:
                mount, memory = self.mounted[first]
                return mount, memory, parsed
            name = self._folded.get(folded_name(first))
            if name is not None:
                raise InvalidPathError(
                    f"Error: Cannot use {parsed.display}: /memories/{first} reads as /memories/{name}, where a "
                    f"memory store is mounted; use /memories/{name}/ for that store, another name for your own files"
                )
        return None, self.own, parsed

    def _mount_point(self, mount: Mount | None, parsed: MemoryPath) -> bool:
        return mount is not None and len(parsed.parts) == 1

    def is_shadowed(self, shown_path: str) -> bool:
        """Whether a path of the own store (as shown: ``/memories/team/x``) lies under a
        mount's name, or a name that reads as one (:func:`folded_name`)."""
        parts = shown_path.split("/")
        return len(parts) > 2 and folded_name(parts[2]) in self._folded

    def _all_files(self) -> tuple[list[tuple[MemoryPath, ObjectInfo]], dict[str, list[str]]]:
        """Every file of every store as shown in the tree (own files under a mount's name left
        out), and those left out by mount name."""
        root = MemoryPath("")
        listings = self.each_store(lambda memory: memory.files.files_under(root))
        merged = [(path, info) for path, info in listings[0] if not self.is_shadowed(path.display)]
        hidden = shadowed_by((path.display for path, _ in listings[0]), self.mounts)
        for name, listing in zip(self.mounted, listings[1:], strict=True):
            merged.extend((MemoryPath(f"{name}/{path.relative}"), info) for path, info in listing)
        return merged, hidden

    # -- the six commands ---------------------------------------------------------------------
    def execute(self, command: object) -> str:
        """As :meth:`EncryptedMemory.execute`, over the whole tree."""
        return run_command(self, command)

    def view(self, path: str, view_range: object = None) -> str:
        _, memory, parsed = self.route(path)
        if not parsed.is_root:
            return memory.view(path, view_range)  # that store's span
        return self._view_root(parsed)

    @_telemetry.traced("view", _telemetry.SEARCH)
    def _view_root(self, parsed: MemoryPath) -> str:
        """``view /memories``: every store's files, and a word on own files a mount hides."""
        files, hidden = self._all_files()
        sizes = [(file_path, plaintext_size(info)) for file_path, info in files]
        listing = render.directory_view(parsed, sizes, self.limits.max_view_chars, extra_dirs=self.mounted)
        return listing + shadow_notice(hidden)

    def create(self, path: str, file_text: object) -> str:
        memory = self.route(path)[1]
        memory.gate.writable("create", path)  # before any request, even one the command would make first
        return memory.create(path, file_text)

    def str_replace(self, path: str, old_str: object, new_str: object) -> str:
        memory = self.route(path)[1]
        memory.gate.writable("edit", path)
        return memory.str_replace(path, old_str, new_str)

    def write_text(self, path: str, text: object) -> str:
        """As :meth:`EncryptedMemory.write_text`, in whichever store ``path`` is."""
        mount, memory, parsed = self.route(path)
        memory.gate.writable("write", path)
        if self._mount_point(mount, parsed):
            raise PathExistsError(f"Error: Cannot write {path}: it is a directory")
        return memory.write_text(path, text)

    def replace_all(self, path: str, old_str: object, new_str: object) -> int:
        """As :meth:`EncryptedMemory.replace_all`, in whichever store ``path`` is."""
        memory = self.route(path)[1]
        memory.gate.writable("edit", path)
        return memory.replace_all(path, old_str, new_str)

    def insert(self, path: str, insert_line: object, insert_text: object) -> str:
        memory = self.route(path)[1]
        memory.gate.writable("edit", path)
        return memory.insert(path, insert_line, insert_text)

    def delete(self, path: str) -> str:
        mount, memory, parsed = self.route(path)
        memory.gate.writable("delete", path)
        if self._mount_point(mount, parsed):
            raise InvalidCommandError(f"Error: Cannot delete {path}: it is the mount point of a memory store")
        return memory.delete(path)

    def rename(self, old_path: str, new_path: str, *, progress: Callable[[int, int], None] | None = None) -> str:
        old_mount, memory, old = self.route(old_path)
        new_mount, new_memory, new = self.route(new_path)
        shown = f"{old_path} to {new_path}"
        memory.gate.writable("rename", shown)
        new_memory.gate.writable("rename", shown)
        if self._mount_point(old_mount, old):
            raise InvalidCommandError(f"Error: Cannot rename {old_path}: it is the mount point of a memory store")
        if self._mount_point(new_mount, new) or new.is_root:
            raise PathExistsError(f"Error: The destination {new_path} already exists")
        if old.is_root:
            return self.own.rename(old_path, new_path, progress=progress)  # refused, in the contract's words
        if old_mount != new_mount:
            stores = " and ".join("/memories" if m is None else f"/memories/{m.name}" for m in (old_mount, new_mount))
            raise InvalidCommandError(
                f"Error: Cannot rename {shown}: they are in different memory stores ({stores}); "
                "create the file at the new path and delete the old one instead"
            )
        return memory.rename(old_path, new_path, progress=progress)

    # -- beyond the tool ---------------------------------------------------------------------
    def read_text(self, path: str) -> str:
        """As :meth:`EncryptedMemory.read_text`, in whichever store ``path`` is."""
        return self.route(path)[1].read_text(path)

    def list_files(self, path: str = ROOT) -> list[FileEntry]:
        """As :meth:`EncryptedMemory.list_files`; at the root, every store's files."""
        _, memory, parsed = self.route(path)
        if not parsed.is_root:
            return memory.list_files(path)  # that store's span
        return self._list_root()

    @_telemetry.traced("list_files", _telemetry.SEARCH, records=len)
    def _list_root(self) -> list[FileEntry]:
        return sorted(FileEntry(p.display, plaintext_size(info)) for p, info in self._all_files()[0])

    # -- search -----------------------------------------------------------------------------
    def search_corpus(self, path_prefix: str | None = None) -> list[tuple[str, str]]:
        """As :meth:`EncryptedMemory.search_corpus`: inside a mount, that store; at the root,
        every store at once (own files shadowed by a mount left out)."""
        if path_prefix is not None:
            _, memory, parsed = self.route(path_prefix)
            if not parsed.is_root:
                _telemetry.note_store(memory)  # that store's, not the own one the span began with
                return memory.search_corpus(path_prefix)
        corpora = self.each_store(lambda memory: memory.search_corpus())
        own = [(path, text) for path, text in corpora[0] if not self.is_shadowed(path)]
        return own + [document for corpus in corpora[1:] for document in corpus]

    # One span each, as over one store: search_corpus of a store makes none.
    @_telemetry.traced("search", _telemetry.SEARCH, records=len)
    def search(
        self, query: object, path_prefix: str | None = None, limit: object = DEFAULT_LIMIT
    ) -> list[SearchResult]:
        """As :meth:`EncryptedMemory.search`, over the user's store and every mount."""
        return search(self, query, path_prefix, limit)[0]

    @_telemetry.traced("search", _telemetry.SEARCH)
    def search_answer(self, query: object, path_prefix: str | None = None, limit: object = DEFAULT_LIMIT) -> str:
        """As :meth:`EncryptedMemory.search_answer`, over the user's store and every mount."""
        return search_answer(self, query, path_prefix, limit)

    def shadowed(self) -> list[str]:
        """Files of the own store hidden by a mount (its name, or one that reads as it): a
        listing of the whole own store. :meth:`shadowing_mounts` is cheaper."""
        files = self.own.files.files_under(MemoryPath(""))
        return sorted(p.display for p, _ in files if self.is_shadowed(p.display))

    def shadowing_mounts(self) -> list[Mount]:
        """The mounts under whose exact name the user's own store has files (hidden in this
        tree): one LIST of at most one key per mount, all at once (one round trip; none
        without mounts). A name that only reads as a mount's (``Team/``) is not looked for
        here: :meth:`shadowed` and ``view /memories`` find those too."""
        if not self.mounted or not self.own.files.names_ready():
            return []
        has_files = self.own.files.has_objects_under
        found = self.at_once([functools.partial(has_files, MemoryPath(name)) for name in self.mounted])
        return [mount for mount, hides in zip(self.mounts, found, strict=True) if hides]

    def clear_all(self) -> str:
        """Delete every file of the user's own store; mounted stores are left as they are."""
        return self.own.clear_all()

    # -- history: of the user's own store --------------------------------------------------
    def _own_history(self, path: str) -> EncryptedMemory:
        """The own store, for history of ``path``; a mounted store's history is read by
        opening that store directly (its records name its own paths, not the mounted ones)."""
        mount, _, _ = self.route(path)
        if mount is not None:
            raise InvalidCommandError(
                f"Error: The history of {path} is kept by the memory store mounted at /memories/{mount.name}; "
                "history here covers the user's own store only"
            )
        return self.own

    def history(self, path: str) -> list[MemoryVersion]:
        """:meth:`EncryptedMemory.history` of a file of the user's own store."""
        return self._own_history(path).history(path)

    def read_version(self, path: str, version: str) -> str:
        """:meth:`EncryptedMemory.read_version` of a file of the user's own store."""
        return self._own_history(path).read_version(path, version)

    def restore(self, path: str, version: str) -> str:
        """:meth:`EncryptedMemory.restore` of a file of the user's own store."""
        return self._own_history(path).restore(path, version)

    def changes(self, path_prefix: str = ROOT, **filters: Any) -> list[MemoryVersion]:
        """:meth:`EncryptedMemory.changes` of the user's own store."""
        return self._own_history(path_prefix).changes(path_prefix, **filters)


def shadow_notice(hidden: dict[str, list[str]]) -> str:
    """What ``view /memories`` adds when mounts hide own files (``""`` when none do): how
    many, and under which names, never which files."""
    if not hidden:
        return ""
    where = []
    for name, paths in sorted(hidden.items()):
        spellings = sorted({path.split("/")[2] for path in paths})
        shown = ", ".join(f"/memories/{spelling}/" for spelling in spellings)
        count = len(paths)
        where.append(f"{count:,} {'file' if count == 1 else 'files'} under {shown} (mount /memories/{name}/)")
    return (
        "\n\nNote: files of your own store under a mounted store's name are hidden while it is mounted, "
        "and cannot be read or changed here: " + "; ".join(where) + "."
    )


def notice_shadowing(memory: object) -> list[Mount]:
    """:meth:`MountedMemory.shadowing_mounts` of ``memory`` if it is one, else ``[]``; a
    failed request is logged and taken as none (the command it precedes will report it)."""
    if not isinstance(memory, MountedMemory):
        return []
    try:
        return memory.shadowing_mounts()
    except S3MemoryError as error:
        log.info("could not check for own files hidden by mounts: %s", type(error).__name__)
        return []


_MOUNT_FIELDS = {"name", "user_id", "access", "description", "instructions", "encrypt_names"}


def mounts_from_json(text: str) -> tuple[Mount, ...]:
    """Mounts from JSON (the CLI's and MCP server's ``S3MEMORY_MOUNTS``): a list of objects
    with ``name`` and ``user_id``, and optionally ``access``, ``description``,
    ``instructions`` and ``encrypt_names``.

    Raises:
        ConfigurationError: not JSON, not a list of such objects, an unknown field, or a
            mount that :class:`Mount` refuses.
    """
    import json

    try:
        document = json.loads(text)
    except ValueError as error:
        raise ConfigurationError(f"the mounts are not valid JSON ({error})") from None
    if not isinstance(document, list):
        raise ConfigurationError('the mounts must be a JSON list: [{"name": ..., "user_id": ...}, ...]')
    mounts = []
    for number, item in enumerate(document, 1):
        if not isinstance(item, dict):
            raise ConfigurationError(f"mount {number} must be a JSON object")
        unknown = sorted(set(item) - _MOUNT_FIELDS)
        if unknown:
            raise ConfigurationError(f"mount {number} has unknown field(s): {', '.join(map(repr, unknown))}")
        if not isinstance(item.get("name"), str) or not isinstance(item.get("user_id"), str):
            raise ConfigurationError(f"mount {number} needs a name and a user_id (strings)")
        mounts.append(Mount(**item))
    return tuple(mounts)
