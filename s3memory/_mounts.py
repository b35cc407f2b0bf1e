"""Memory stores mounted beside the user's own: one tree under ``/memories`` for the model.

A mount is another tenant's store (its own tenant id, keys and history) shown at
``/memories/{name}/``, ``read_only`` or ``read_write``: shared reference material beside
each user's own learnings, as Managed Agents memory stores attach up to 8 stores to a
session. Nothing about a mount is written into the bucket: the mounted store reads the same
whether it is mounted or opened directly.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from . import _render as render
from ._entries import MemoryVersion
from ._errors import ConfigurationError, InvalidCommandError, PathExistsError
from ._files import plaintext_size
from ._memory import EncryptedMemory, FileEntry, run_command, search, search_answer
from ._paths import ROOT, MemoryPath, parse_path, validate_tenant
from ._search import DEFAULT_LIMIT, SearchResult
from .stores import ObjectInfo

T = TypeVar("T")

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
    names, tenants = [m.name for m in checked], [m.user_id for m in checked]
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
    whose first segment is a mount name is shadowed: not shown and not reachable here.

    Refused before any request: a change touching a ``read_only`` mount
    (:class:`~s3memory.ReadOnlyMountError`); deleting or renaming a mount point, or renaming
    onto one; a rename from one store to another (a rename is a server-side copy under one
    tenant's keys, with one tenant's intent record to finish it after a fault; across two
    tenants neither holds; create the file at the new path and delete the old one instead).
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
        futures = [self._executor().submit(call, memory) for _, memory in self.stores()]
        return [future.result() for future in futures]

    # -- routing ---------------------------------------------------------------------------
    def route(self, path: object) -> tuple[Mount | None, EncryptedMemory, MemoryPath]:
        """The store ``path`` is in (``None``: the own store) and its whole parsed path.

        Raises:
            InvalidPathError: ``path`` is not a valid path under ``/memories``.
        """
        parsed = parse_path(path, max_path_bytes=self.limits.max_path_bytes)
        if parsed.parts and parsed.parts[0] in self.mounted:
            mount, memory = self.mounted[parsed.parts[0]]
            return mount, memory, parsed
        return None, self.own, parsed

    def _mount_point(self, mount: Mount | None, parsed: MemoryPath) -> bool:
        return mount is not None and len(parsed.parts) == 1

    def is_shadowed(self, shown_path: str) -> bool:
        """Whether a path of the own store (as shown: ``/memories/team/x``) lies under a mount's name."""
        parts = shown_path.split("/")
        return len(parts) > 2 and parts[2] in self.mounted

    def _all_files(self) -> list[tuple[MemoryPath, ObjectInfo]]:
        """Every file of every store as shown in the tree (own files under a mount name left out)."""
        root = MemoryPath("")
        listings = self.each_store(lambda memory: memory.files.files_under(root))
        merged = [(path, info) for path, info in listings[0] if not self.is_shadowed(path.display)]
        for name, listing in zip(self.mounted, listings[1:], strict=True):
            merged.extend((MemoryPath(f"{name}/{path.relative}"), info) for path, info in listing)
        return merged

    # -- the six commands ---------------------------------------------------------------------
    def execute(self, command: object) -> str:
        """As :meth:`EncryptedMemory.execute`, over the whole tree."""
        return run_command(self, command)

    def view(self, path: str, view_range: object = None) -> str:
        _, memory, parsed = self.route(path)
        if not parsed.is_root:
            return memory.view(path, view_range)
        sizes = [(file_path, plaintext_size(info)) for file_path, info in self._all_files()]
        return render.directory_view(parsed, sizes, self.limits.max_view_chars, extra_dirs=self.mounted)

    def create(self, path: str, file_text: object) -> str:
        memory = self.route(path)[1]
        memory._writable("create", path)  # before any request, even one the command would make first
        return memory.create(path, file_text)

    def str_replace(self, path: str, old_str: object, new_str: object) -> str:
        memory = self.route(path)[1]
        memory._writable("edit", path)
        return memory.str_replace(path, old_str, new_str)

    def write_text(self, path: str, text: object) -> str:
        """As :meth:`EncryptedMemory.write_text`, in whichever store ``path`` is."""
        mount, memory, parsed = self.route(path)
        memory._writable("write", path)
        if self._mount_point(mount, parsed):
            raise PathExistsError(f"Error: Cannot write {path}: it is a directory")
        return memory.write_text(path, text)

    def replace_all(self, path: str, old_str: object, new_str: object) -> int:
        """As :meth:`EncryptedMemory.replace_all`, in whichever store ``path`` is."""
        memory = self.route(path)[1]
        memory._writable("edit", path)
        return memory.replace_all(path, old_str, new_str)

    def insert(self, path: str, insert_line: object, insert_text: object) -> str:
        memory = self.route(path)[1]
        memory._writable("edit", path)
        return memory.insert(path, insert_line, insert_text)

    def delete(self, path: str) -> str:
        mount, memory, parsed = self.route(path)
        memory._writable("delete", path)
        if self._mount_point(mount, parsed):
            raise InvalidCommandError(f"Error: Cannot delete {path}: it is the mount point of a memory store")
        return memory.delete(path)

    def rename(self, old_path: str, new_path: str, *, progress: Callable[[int, int], None] | None = None) -> str:
        old_mount, memory, old = self.route(old_path)
        new_mount, new_memory, new = self.route(new_path)
        shown = f"{old_path} to {new_path}"
        memory._writable("rename", shown)
        new_memory._writable("rename", shown)
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
            return memory.list_files(path)
        return sorted(FileEntry(p.display, plaintext_size(info)) for p, info in self._all_files())

    # -- search -----------------------------------------------------------------------------
    def search_corpus(self, path_prefix: str | None = None) -> list[tuple[str, str]]:
        """As :meth:`EncryptedMemory.search_corpus`: inside a mount, that store; at the root,
        every store at once (own files shadowed by a mount left out)."""
        if path_prefix is not None:
            _, memory, parsed = self.route(path_prefix)
            if not parsed.is_root:
                return memory.search_corpus(path_prefix)
        corpora = self.each_store(lambda memory: memory.search_corpus())
        own = [(path, text) for path, text in corpora[0] if not self.is_shadowed(path)]
        return own + [document for corpus in corpora[1:] for document in corpus]

    def search(
        self, query: object, path_prefix: str | None = None, limit: object = DEFAULT_LIMIT
    ) -> list[SearchResult]:
        """As :meth:`EncryptedMemory.search`, over the user's store and every mount."""
        return search(self, query, path_prefix, limit)[0]

    def search_answer(self, query: object, path_prefix: str | None = None, limit: object = DEFAULT_LIMIT) -> str:
        """As :meth:`EncryptedMemory.search_answer`, over the user's store and every mount."""
        return search_answer(self, query, path_prefix, limit)

    def shadowed(self) -> list[str]:
        """Files of the own store hidden by a mount point of the same name."""
        files = self.own.files.files_under(MemoryPath(""))
        return sorted(p.display for p, _ in files if self.is_shadowed(p.display))

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
