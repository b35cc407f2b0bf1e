"""The SDK adapters: ``BetaAbstractMemoryTool`` subclasses over :class:`EncryptedMemory`.

This is the only module that imports ``anthropic``; ``import s3memory`` loads it lazily.
Every error leaves as ``ToolError`` (so the tool runner answers with ``is_error: true``):
s3memory's own errors with their contract strings, anything unexpected with a generic
message and a log entry, never a raw traceback to the model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from anthropic.lib.tools import (
    BetaAbstractMemoryTool,
    BetaAsyncAbstractMemoryTool,
    BetaAsyncFunctionTool,
    BetaFunctionTool,
    ToolError,
)
from anthropic.types.beta import (
    BetaCacheControlEphemeralParam,
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

from .._core.protocol import Memory
from .._errors import answer_for_model
from .._factory import MemoryOptions, memory_from
from .._search.query import DEFAULT_LIMIT, MAX_LIMIT
from .._tool_words import SEARCH_TOOL_DESCRIPTION as SEARCH_TOOL_DESCRIPTION
from .._tool_words import SEARCH_TOOL_NAME as SEARCH_TOOL_NAME
from .._tool_words import search_parameter_descriptions

if TYPE_CHECKING:
    from typing_extensions import Unpack


def _as_tool_error(call: Callable[[], str]) -> str:
    text, is_error = answer_for_model(call)
    if is_error:
        raise ToolError(text)
    return text


_SEARCH_PARAMETERS = search_parameter_descriptions(DEFAULT_LIMIT, MAX_LIMIT)
SEARCH_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": _SEARCH_PARAMETERS["query"]},
        "path_prefix": {"type": "string", "description": _SEARCH_PARAMETERS["path_prefix"]},
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": _SEARCH_PARAMETERS["limit"]},
    },
    "required": ["query"],
    "additionalProperties": False,
}


def search_tool(memory: Memory) -> BetaFunctionTool[Callable[..., str]]:
    """``memory_search``: a client tool beside the memory tool, for the SDK's tool runner."""

    def memory_search(query: str, path_prefix: str | None = None, limit: int = DEFAULT_LIMIT) -> str:
        return _as_tool_error(lambda: memory.search_answer(query, path_prefix, limit))

    return BetaFunctionTool(
        memory_search, name=SEARCH_TOOL_NAME, description=SEARCH_TOOL_DESCRIPTION, input_schema=SEARCH_INPUT_SCHEMA
    )


def async_search_tool(memory: Memory) -> BetaAsyncFunctionTool[Callable[..., Any]]:
    """``memory_search`` for the async tool runner (the search runs in a worker thread)."""

    async def memory_search(query: str, path_prefix: str | None = None, limit: int = DEFAULT_LIMIT) -> str:
        from anyio.to_thread import run_sync

        return await run_sync(lambda: _as_tool_error(lambda: memory.search_answer(query, path_prefix, limit)))

    return BetaAsyncFunctionTool(
        memory_search, name=SEARCH_TOOL_NAME, description=SEARCH_TOOL_DESCRIPTION, input_schema=SEARCH_INPUT_SCHEMA
    )


class S3MemoryTool(BetaAbstractMemoryTool):
    """Claude's memory tool over encrypted S3 objects, one isolated memory per user.

    Example::

        tool = S3MemoryTool(bucket="my-bucket", user_id="alice", s3_client=s3, master_key=key)
        runner = client.beta.messages.tool_runner(model=..., tools=[tool], messages=[...])

    Takes the options of :func:`s3memory.open_memory` (keyword-only), or ``memory=`` an
    already built :class:`EncryptedMemory`, or a :class:`MountedMemory` (the user's store with
    others mounted below it).
    """

    def __init__(
        self,
        *,
        memory: Memory | None = None,
        cache_control: BetaCacheControlEphemeralParam | None = None,
        **options: Unpack[MemoryOptions],
    ) -> None:
        super().__init__(cache_control=cache_control)
        self.memory = memory_from(memory, options)

    def call(self, input: object) -> str:
        return _as_tool_error(lambda: self.memory.execute(input))

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return _as_tool_error(lambda: self.memory.view(command.path, getattr(command, "view_range", None)))

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return _as_tool_error(lambda: self.memory.create(command.path, command.file_text))

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return _as_tool_error(lambda: self.memory.str_replace(command.path, command.old_str, command.new_str))

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return _as_tool_error(lambda: self.memory.insert(command.path, command.insert_line, command.insert_text))

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return _as_tool_error(lambda: self.memory.delete(command.path))

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return _as_tool_error(lambda: self.memory.rename(command.old_path, command.new_path))

    def clear_all_memory(self) -> str:
        """Delete every memory file of this user (the SDK's local tool does the same to its
        directory); see :meth:`EncryptedMemory.clear_all`."""
        return _as_tool_error(self.memory.clear_all)

    def search_tool(self) -> BetaFunctionTool[Callable[..., str]]:
        """The optional ``memory_search`` client tool over this tool's memory, to pass beside
        it: ``tools=[tool, tool.search_tool()]``. Full-text, client-side: the bucket never
        sees the query (see :meth:`EncryptedMemory.search`)."""
        return search_tool(self.memory)


class AsyncS3MemoryTool(BetaAsyncAbstractMemoryTool):
    """The async flavour: the same backend, each command run in a worker thread."""

    def __init__(
        self,
        *,
        memory: Memory | None = None,
        cache_control: BetaCacheControlEphemeralParam | None = None,
        **options: Unpack[MemoryOptions],
    ) -> None:
        super().__init__(cache_control=cache_control)
        self.memory = memory_from(memory, options)

    async def _run(self, call: Callable[[], str]) -> str:
        from anyio.to_thread import run_sync

        return await run_sync(lambda: _as_tool_error(call))

    async def call(self, input: object) -> str:
        return await self._run(lambda: self.memory.execute(input))

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return await self._run(lambda: self.memory.view(command.path, getattr(command, "view_range", None)))

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return await self._run(lambda: self.memory.create(command.path, command.file_text))

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return await self._run(lambda: self.memory.str_replace(command.path, command.old_str, command.new_str))

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return await self._run(lambda: self.memory.insert(command.path, command.insert_line, command.insert_text))

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return await self._run(lambda: self.memory.delete(command.path))

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return await self._run(lambda: self.memory.rename(command.old_path, command.new_path))

    async def clear_all_memory(self) -> str:
        """Delete every memory file of this user; see :meth:`EncryptedMemory.clear_all`."""
        return await self._run(self.memory.clear_all)

    def search_tool(self) -> BetaAsyncFunctionTool[Callable[..., Any]]:
        """The optional ``memory_search`` client tool, for the async tool runner."""
        return async_search_tool(self.memory)
