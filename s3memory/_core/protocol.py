"""``Memory``: what a front end may call on a memory, one user's store or a mounted tree.

:class:`~s3memory.EncryptedMemory` (one store) and :class:`~s3memory.MountedMemory` (the
user's store with others mounted below it) both satisfy it, and the faces (the SDK tools,
the MCP server, the command line, the framework adapters) take a ``Memory``, so what they may
call is written here once instead of being learnt from whichever class they hold.

Not in it, on purpose: the review of held writes (``pending``, ``approve``, ``reject``) and
``redact`` act on one store's own objects and are not routed through a tree (call them on
the user's :class:`~s3memory.EncryptedMemory`, ``tree.own``); the store, layout and keyring
are one store's; routing (``route``, ``stores``, ``shadowed``) is the tree's.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .._history.entries import MemoryVersion
    from .._search.query import SearchResult
    from .limits import Limits
    from .memory import FileEntry


class Memory(Protocol):
    """The six commands and what the faces add to them: conveniences, search, history."""

    limits: Limits

    # -- the memory tool's six commands, and one of them by its input ----------------------
    def execute(self, command: object) -> str: ...

    def view(self, path: str, view_range: object = None) -> str: ...

    def create(self, path: str, file_text: object) -> str: ...

    def str_replace(self, path: str, old_str: object, new_str: object) -> str: ...

    def insert(self, path: str, insert_line: object, insert_text: object) -> str: ...

    def delete(self, path: str) -> str: ...

    def rename(self, old_path: str, new_path: str, *, progress: Callable[[int, int], None] | None = None) -> str: ...

    # -- conveniences of the faces ---------------------------------------------------------
    def read_text(self, path: str) -> str: ...

    def list_files(self, path: str = ...) -> list[FileEntry]: ...

    def write_text(self, path: str, text: object) -> str: ...

    def replace_all(self, path: str, old_str: object, new_str: object) -> int: ...

    def clear_all(self) -> str: ...

    def close(self) -> None: ...

    # -- search ------------------------------------------------------------------------------
    def search(self, query: object, path_prefix: str | None = None, limit: object = ...) -> list[SearchResult]: ...

    def search_answer(self, query: object, path_prefix: str | None = None, limit: object = ...) -> str: ...

    def search_corpus(self, path_prefix: str | None = None) -> list[tuple[str, str]]: ...

    # -- history -----------------------------------------------------------------------------
    def history(self, path: str) -> list[MemoryVersion]: ...

    def read_version(self, path: str, version: str) -> str: ...

    def restore(self, path: str, version: str) -> str: ...

    def changes(
        self,
        path_prefix: str = ...,
        *,
        operation: str | None = None,
        actor: str | None = None,
        since: datetime.datetime | None = None,
        until: datetime.datetime | None = None,
    ) -> list[MemoryVersion]: ...
