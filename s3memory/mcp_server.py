"""``s3memory mcp``: the six memory commands as MCP tools over stdio, for one configured user.

Claude's memory tool (``memory_20250818``) is a client-side tool: the API asks, the
application executes. Claude Code and Claude Desktop do not execute it themselves, but they
do run MCP servers, so this module serves the same six commands (``view``, ``create``,
``str_replace``, ``insert``, ``delete``, ``rename``) with the same answers and error
strings over the Model Context Protocol, on the memory :class:`~s3memory._config.Settings`
describes (the ``S3MEMORY_*`` environment variables: the local embedded default, or S3).

Claude Desktop (``claude_desktop_config.json``) or a project's ``.mcp.json`` for Claude Code::

    {
      "mcpServers": {
        "memory": {
          "command": "s3memory",
          "args": ["mcp"],
          "env": {"S3MEMORY_USER": "alice", "S3MEMORY_BUCKET": "my-bucket", "S3MEMORY_KMS_KEY_ID": "alias/memory"}
        }
      }
    }

or ``claude mcp add memory -e S3MEMORY_USER=alice -- s3memory mcp``. Without a bucket the
memory is a local directory store with a local master key (``S3MEMORY_HOME``).

``mcp`` is an optional extra (``pip install 's3memory[mcp]'``): it is imported only inside
the functions below, so importing this module never fails and never loads it. stdout is the
transport; the server writes logs to stderr only. The memory is opened on the first tool
call (so the handshake is quick and a bad setting reaches the model as a tool error), and
every command runs in a worker thread because :class:`EncryptedMemory` blocks on I/O.
"""

import functools
import logging
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from ._config import Settings
from ._errors import ConfigurationError, S3MemoryError
from ._memory import EncryptedMemory

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp.types import CallToolResult

log = logging.getLogger("s3memory")

MISSING_MCP = "the MCP server needs the mcp package: pip install 's3memory[mcp]'"

INSTRUCTIONS = """\
These tools are your persistent memory: a directory, /memories, kept across conversations \
(encrypted at rest). Every path starts with /memories.

IMPORTANT: ALWAYS VIEW YOUR MEMORY DIRECTORY BEFORE DOING ANYTHING ELSE: call `view` with \
path "/memories" to check for earlier progress, then read the files that are relevant.

As you work, record status, progress and what you learned in memory files. ASSUME \
INTERRUPTION: your context window might be reset at any moment, so you risk losing any \
progress that is not recorded in your memory directory. Keep the directory organized: \
update and delete files rather than piling up new ones, and do not create files that \
nobody will read."""

PATH_HELP = "A path under /memories, e.g. /memories/notes.md (a directory: /memories/projects)."


def _require_mcp() -> None:
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(MISSING_MCP) from exc


def _answer(memory: Callable[[], EncryptedMemory], command: Callable[[EncryptedMemory], str]) -> "CallToolResult":
    """Run one command (in a worker thread); its string, or its error as an ``isError`` result.

    The result is built here rather than left to ``MCPServer``, which would prefix an error
    with "Error executing tool <name>: " and wrap a string in ``{"result": ...}`` as well.
    """
    from mcp.types import CallToolResult, TextContent

    try:
        text, is_error = command(memory()), False
    except S3MemoryError as exc:  # the contract's own strings, for the model
        text, is_error = str(exc), True
    except Exception as exc:  # never a traceback to the client; the log has it
        log.exception("unexpected error in the s3memory backend")
        text, is_error = f"Error: The memory backend failed unexpectedly ({type(exc).__name__}).", True
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=is_error)


class _Once:
    """``open_memory()`` on first use, from whichever worker thread gets there first.

    A failure is not remembered: the next call tries again (after the user fixed a setting).
    """

    def __init__(self, open_memory: Callable[[], EncryptedMemory]) -> None:
        self._open = open_memory
        self._memory: EncryptedMemory | None = None
        self._lock = threading.Lock()

    def __call__(self) -> EncryptedMemory:
        with self._lock:
            if self._memory is None:
                self._memory = self._open()
            return self._memory


def build_server(open_memory: Callable[[], EncryptedMemory]) -> "MCPServer[Any]":
    """An MCP server with the six memory tools over the memory ``open_memory()`` returns.

    ``open_memory`` is called on the first tool call (and again on the next if it raised).
    Each tool answers with the exact string of the :class:`EncryptedMemory` method; an
    :class:`~s3memory.S3MemoryError` becomes a tool result with ``isError: true`` and the
    error's message as its text.

    Raises:
        ConfigurationError: the ``mcp`` package is not installed.
    """
    _require_mcp()
    import anyio.to_thread
    from mcp.server.mcpserver import MCPServer
    from mcp.types import CallToolResult, ToolAnnotations
    from pydantic import Field

    from . import __version__

    memory = _Once(open_memory)
    server: MCPServer[Any] = MCPServer(
        name="s3memory",
        title="Encrypted memory",
        version=__version__,
        instructions=INSTRUCTIONS,
        log_level="WARNING",  # INFO would log each refused command, with the model's text, on stderr
    )

    async def run(command: Callable[[EncryptedMemory], str]) -> CallToolResult:
        return await anyio.to_thread.run_sync(functools.partial(_answer, memory, command))

    # Annotations evaluated here, at definition (this module has no `from __future__ import
    # annotations`): MCPServer reads them, and with them the descriptions, from the signatures.
    Path = Annotated[str, Field(description=PATH_HELP)]

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False))
    async def view(
        path: Path,
        view_range: Annotated[
            list[int] | None,
            Field(description="For a file only: [start, end], the lines to show (1-based; end -1: to the end)."),
        ] = None,
    ) -> CallToolResult:
        """Show a directory (its files and directories up to 2 levels deep, with sizes) or a file
        with line numbers. Start every task with `view` of /memories."""
        return await run(lambda m: m.view(path, view_range))

    @server.tool(annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False))
    async def create(
        path: Path,
        file_text: Annotated[str, Field(description="The content of the new file.")],
    ) -> CallToolResult:
        """Create a new file; parent directories come into being. Never overwrites: an existing
        path is an error (edit it with `str_replace` or `insert`, or `delete` it first)."""
        return await run(lambda m: m.create(path, file_text))

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
    async def str_replace(
        path: Path,
        old_str: Annotated[str, Field(description="The text to replace; it must occur exactly once in the file.")],
        new_str: Annotated[str, Field(description="The replacement text (may be empty).")],
    ) -> CallToolResult:
        """Replace the one occurrence of `old_str` in a file with `new_str`; answers with the
        changed lines."""
        return await run(lambda m: m.str_replace(path, old_str, new_str))

    @server.tool(annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False))
    async def insert(
        path: Path,
        insert_line: Annotated[int, Field(description="The line after which to insert; 0 inserts at the top.")],
        insert_text: Annotated[str, Field(description="The text to insert (one or more lines).")],
    ) -> CallToolResult:
        """Insert text into a file after line `insert_line`."""
        return await run(lambda m: m.insert(path, insert_line, insert_text))

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
    async def delete(path: Path) -> CallToolResult:
        """Delete a file, or a directory with everything under it."""
        return await run(lambda m: m.delete(path))

    @server.tool(annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False))
    async def rename(
        old_path: Annotated[str, Field(description="The file or directory to move, under /memories.")],
        new_path: Annotated[str, Field(description="Its new path under /memories; must not exist yet.")],
    ) -> CallToolResult:
        """Rename or move a file or a directory (with everything under it). Never overwrites."""
        return await run(lambda m: m.rename(old_path, new_path))

    return server


def serve_stdio(settings: Settings) -> None:
    """Serve ``settings``' memory over stdin/stdout until the client closes the connection.

    Raises:
        ConfigurationError: the ``mcp`` package is not installed.
    """
    opened: list[EncryptedMemory] = []

    def open_memory() -> EncryptedMemory:
        memory = settings.open()
        opened.append(memory)
        return memory

    server = build_server(open_memory)
    print(f"s3memory: serving the memory of {settings.user} at {settings.location} over stdio", file=sys.stderr)
    try:
        server.run("stdio")
    except KeyboardInterrupt:
        pass
    finally:
        for memory in opened:
            memory.close()


if __name__ == "__main__":
    serve_stdio(Settings.from_environment())
