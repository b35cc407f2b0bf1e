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

Every request is answered, also one that is not JSON-RPC: stdin is read here, one line (one
message) at a time and at most :data:`MAX_MESSAGE_BYTES` of it, and a line that is not valid
UTF-8 or JSON gets a JSON-RPC ``-32700`` Parse error, a line of JSON that is no valid message
(a scalar, a batch, a request without ``jsonrpc``, with an id that is neither a string nor an
integer, ...) or a longer line gets ``-32600`` Invalid Request. The error carries the request's
id when it can be read from the line (see :func:`~s3memory.mcp_server.jsonrpc.request_id_in`), ``null``
otherwise; the line is logged (without its content) and the server goes on with the next one.
Blank lines are no messages and are skipped. Valid messages go on to the mcp package's server,
as with its own stdio transport, which still writes stdout. What a line is, message or
refusal, is decided in ``_jsonrpc``; reading stdin and serving are here.

Arguments that fail a tool's input schema (a missing parameter, ``view_range`` as a string,
``insert_line`` as ``"abc"``, a path that is a number) are answered as the memory tool answers
such input, an ``isError`` result in its words (``Error: Missing required parameter `path` for
command `view`.``, ``Error: Invalid `insert_line` parameter: 'abc'. It should be an
integer.``), never with pydantic's text and link: the mcp package's ``MCPServer.call_tool``
reports a failed validation as a ``ToolError`` caused by the ``ValidationError``, and
:func:`_invalid_arguments` words it from the tool's schema (see :func:`build_server`).

History (see ``s3memory._history.listing``) is served too, read-only: ``memory_history`` (a file's
versions), ``memory_show_version`` (one version's text) and ``memory_log`` (the changes under a
directory), one line per version; ``memory_restore`` only when the server is started with
``allow_restore`` (``s3memory mcp --allow-restore``, or ``S3MEMORY_MCP_ALLOW_RESTORE=1``).
The model gets no tool to redact. :func:`parse_time` reads their times, and the CLI's.

``mcp`` is an optional extra (``pip install -e '.[mcp]'`` in the checkout): it is imported only inside
the functions below, so importing this module never fails and never loads it. stdout is the
transport; the server writes logs to stderr only. The memory is opened on the first tool
call (so the handshake is quick and a bad setting reaches the model as a tool error), and
every command runs in a worker thread because :class:`EncryptedMemory` blocks on I/O.

What the client shows the model, each tool's description and each parameter's, is
``s3memory._tool_words``' (the words every face shares); the instructions too.
"""

import functools
import logging
import os
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, BinaryIO

from .._config import Settings
from .._core.commands import COMMANDS
from .._core.protocol import Memory
from .._errors import ConfigurationError, InvalidCommandError, answer_for_model
from .._history.text import history_text as _history_text
from .._history.text import iso_time as iso_time  # the tests and the CLI's JSON read times so
from .._history.text import one_line as _one_line
from .._history.text import parse_time as parse_time
from .._history.text import version_line
from .._render import short_repr
from .._search.query import DEFAULT_LIMIT, MAX_LIMIT
from .._tool_words import (
    COMMAND_DESCRIPTIONS as COMMAND_DESCRIPTIONS,  # public: what each command's tool says, for servers of one's own
)
from .._tool_words import (
    FILE_HELP,
    HISTORY_TOOL_DESCRIPTIONS,
    INSTRUCTIONS,
    SEARCH_TOOL_DESCRIPTION,
    SEARCH_TOOL_NAME,
    VERSION_HELP,
    log_parameter_descriptions,
    search_parameter_descriptions,
)
from .._tool_words import (
    PARAMETER_DESCRIPTIONS as PARAMETER_DESCRIPTIONS,  # public, as COMMAND_DESCRIPTIONS
)
from .._tool_words import (
    PARAMETER_TYPES as PARAMETER_TYPES,  # public, as COMMAND_DESCRIPTIONS
)
from .jsonrpc import refusal, too_large, triage
from .jsonrpc import request_id_in as request_id_in  # reads the id a refusal carries (see jsonrpc)

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectSendStream
    from mcp.server.mcpserver import MCPServer
    from mcp.shared.message import SessionMessage
    from mcp.types import CallToolResult

log = logging.getLogger("s3memory")

MISSING_MCP = (
    "the MCP server needs the mcp package: pip install -e '.[mcp]' in the s3memory checkout (s3memory is not on PyPI)"
)

MAX_MESSAGE_BYTES = 2 * 1024 * 1024
"""The longest message the server reads: one line of stdin, without its newline, in bytes.

2 MiB: above the largest call the memory can accept (``str_replace`` on a 100 KB file, with
two strings whose every byte JSON escapes as six characters, is about 1.2 MB), and small
enough that parsing one message stays bounded (the mcp package builds Python objects from a
message's arguments: some 60 times its size for a message of empty arrays). A longer line is
read on in chunks and dropped, never held whole, and answered with ``-32600`` Invalid
Request."""

_DISCARD_CHUNK = 1024 * 1024  # an overlong line is skipped this many bytes at a time

ALLOW_RESTORE_VARIABLE = "S3MEMORY_MCP_ALLOW_RESTORE"
LOG_LIMIT, MAX_LOG_LIMIT = 50, 1000  # memory_log's default number of changes, and its largest


def _require_mcp() -> None:
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(MISSING_MCP) from exc


def _answer(memory: Callable[[], Memory], command: Callable[[Memory], str]) -> "CallToolResult":
    """Run one command (in a worker thread); its string, or its error as an ``isError`` result.

    The result is built here rather than left to ``MCPServer``, which would prefix an error
    with "Error executing tool <name>: " and wrap a string in ``{"result": ...}`` as well.
    """
    from mcp.types import CallToolResult, TextContent

    text, is_error = answer_for_model(lambda: command(memory()))
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=is_error)


class _Once:
    """``open_memory()`` on first use, from whichever worker thread gets there first.

    A failure is not remembered: the next call tries again (after the user fixed a setting).
    """

    def __init__(self, open_memory: Callable[[], Memory]) -> None:
        self._open = open_memory
        self._memory: Memory | None = None
        self._lock = threading.Lock()

    def __call__(self) -> Memory:
        with self._lock:
            if self._memory is None:
                self._memory = self._open()
            return self._memory


# -- history, as text: the pure parts are _history.text ------------------------------------------
def _version_text(memory: Memory, path: str, version: str) -> str:
    text = memory.read_version(path, version)
    limit = memory.limits.max_view_chars
    head = f"Here's version {_one_line(version)} of {_one_line(path)}"
    if len(text) <= limit:
        return f"{head}:\n{text}"
    return (
        f"{head}, its first {limit} of {len(text)} characters (restore it to read the rest with "
        f"`view` and a view_range):\n{text[:limit]}"
    )


def _log_text(memory: Memory, path_prefix: str, limit: int, **filters: Any) -> str:
    if not 1 <= limit <= MAX_LOG_LIMIT:
        raise InvalidCommandError(f"Error: limit must be between 1 and {MAX_LOG_LIMIT}, not {limit}")
    for name in ("since", "until"):
        if filters[name] is not None:
            filters[name] = parse_time(filters[name], name)
    if filters["since"] is not None and filters["until"] is not None and filters["since"] > filters["until"]:
        raise InvalidCommandError("Error: since is after until: no change can match")
    entries = memory.changes(path_prefix, **filters)
    where = _one_line(path_prefix)
    if not entries:
        return f"No changes under {where} match."
    shown = entries[:limit]
    more = (
        f"; the newest {limit} shown: raise limit or narrow the filters for the others" if len(entries) > limit else ""
    )
    lines = "\n".join(version_line(e, with_path=True) for e in shown)
    return f"Changes under {where}, newest first ({len(entries)} change(s){more}):\n{lines}"


# -- arguments that fail a tool's input schema ---------------------------------------------------
_TYPE_WORDS = {  # a JSON schema type: (one, several)
    "string": ("a string", "strings"),
    "integer": ("an integer", "integers"),
    "number": ("a number", "numbers"),
    "boolean": ("true or false", "true or false values"),
    "object": ("an object", "objects"),
    "array": ("a list", "lists"),
}


def _type_words(schema: Mapping[str, Any], *, several: bool = False) -> str:
    """One JSON schema type in words: "a string", "a list of integers" (``several``: "strings")."""
    one, many = _TYPE_WORDS.get(str(schema.get("type")), ("a value of another type", "values of another type"))
    words = many if several else one
    items = schema.get("items")
    if schema.get("type") == "array" and isinstance(items, Mapping):
        words += f" of {_type_words(items, several=True)}"
    return words


def _expected(schema: Mapping[str, Any]) -> str:
    """What a parameter's JSON schema asks for, in words; null (the parameter left out) unsaid."""
    options = schema.get("anyOf", [schema])
    return " or ".join(_type_words(option) for option in options if option.get("type") != "null")


def _invalid_arguments(
    tool: str, schema: Mapping[str, Any], arguments: Mapping[str, Any], errors: Sequence[Mapping[str, Any]]
) -> str:
    """The answer to ``arguments`` that fail ``tool``'s input ``schema`` (pydantic's ``errors``),
    in the memory tool's words: one line for each parameter at fault, in the schema's order.

    A required parameter that is absent or null is missing, as ``run_command`` says it (the
    memory tool reads null as absent); any other a wrong value, shown short (``short_repr``),
    with the type the schema asks for. Nothing of pydantic's text is used but the names of
    the parameters at fault, which are the schema's own.
    """
    properties: Mapping[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    faulty = {str(error["loc"][0]) for error in errors if error.get("loc")}
    kind = "command" if tool in COMMANDS else "tool"
    lines = []
    for name in [*properties, *sorted(faulty - set(properties))]:
        if name not in faulty:
            continue
        value = arguments.get(name)
        if value is None and name in required:
            lines.append(f"Error: Missing required parameter `{name}` for {kind} `{tool}`.")
        else:
            expected = _expected(properties.get(name, {}))
            lines.append(f"Error: Invalid `{name}` parameter: {short_repr(value)}. It should be {expected}.")
    return "\n".join(lines) or f"Error: Invalid arguments for {kind} `{tool}`."


def allow_restore_from_environment(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``S3MEMORY_MCP_ALLOW_RESTORE`` turns on ``memory_restore`` (1 or 0; unset: off)."""
    value = (os.environ if environ is None else environ).get(ALLOW_RESTORE_VARIABLE, "")
    if value.lower() not in ("1", "0", "true", "false", "yes", "no", ""):
        raise ConfigurationError(f"{ALLOW_RESTORE_VARIABLE} must be 1 or 0, not {_one_line(repr(value))[:80]}")
    return value.lower() in ("1", "true", "yes")


def build_server(open_memory: Callable[[], Memory], *, allow_restore: bool = False) -> "MCPServer[Any]":
    """An MCP server with the six memory tools over the memory ``open_memory()`` returns, and the
    read-only history tools (``memory_restore`` too with ``allow_restore``).

    ``open_memory`` is called on the first tool call (and again on the next if it raised).
    Each tool answers with the exact string of the :class:`EncryptedMemory` method (the history
    tools: one line per version); an :class:`~s3memory.S3MemoryError` becomes a tool result
    with ``isError: true`` and the error's message as its text.

    Raises:
        ConfigurationError: the ``mcp`` package is not installed.
    """
    _require_mcp()
    import anyio.to_thread
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
    from mcp.types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
    from pydantic import Field, ValidationError

    from .. import __version__

    class Server(MCPServer[Any]):
        """``MCPServer``, but arguments that fail a tool's input schema are answered in the
        memory tool's words (:func:`_invalid_arguments`), not with pydantic's text.

        ``call_tool`` raises such a failure as a ``ToolError`` whose ``__cause__`` is the
        ``ValidationError`` (``Tool.run``, before the tool's function is called); nothing else
        does (a tool's own failure is an ``isError`` result of :func:`_answer`, and an exception
        it raised an ``UnexpectedToolError``).
        """

        async def call_tool(
            self, name: str, arguments: dict[str, Any], context: "Context[Any, Any] | None" = None
        ) -> "CallToolResult | InputRequiredResult":
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                invalid = exc.__cause__
                if isinstance(exc, UnexpectedToolError) or not isinstance(invalid, ValidationError):
                    raise
                schema = next((tool.input_schema for tool in await self.list_tools() if tool.name == name), {})
                errors = invalid.errors(include_url=False, include_context=False, include_input=False)
                text = _invalid_arguments(name, schema, arguments, errors)
                log.info(
                    "tool %r refused its arguments: %s", name, sorted({str(e["loc"][0]) for e in errors if e["loc"]})
                )
                return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)

    memory = _Once(open_memory)
    server: MCPServer[Any] = Server(
        name="s3memory",
        title="Encrypted memory",
        version=__version__,
        instructions=INSTRUCTIONS,
        log_level="WARNING",  # INFO would log each refused command, with the model's text, on stderr
    )

    async def run(command: Callable[[Memory], str]) -> CallToolResult:
        return await anyio.to_thread.run_sync(functools.partial(_answer, memory, command))

    # Annotations evaluated here, at definition (this module has no `from __future__ import
    # annotations`): MCPServer reads them, and with them the parameters' descriptions, from the
    # signatures. Every description, a tool's or a parameter's, is s3memory._tool_words'.
    said = PARAMETER_DESCRIPTIONS
    Path = Annotated[str, Field(description=said["path"])]

    @server.tool(
        description=COMMAND_DESCRIPTIONS["view"],
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
    )
    async def view(
        path: Path, view_range: Annotated[list[int] | None, Field(description=said["view_range"])] = None
    ) -> CallToolResult:
        return await run(lambda m: m.view(path, view_range))

    @server.tool(
        description=COMMAND_DESCRIPTIONS["create"],
        annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False),
    )
    async def create(path: Path, file_text: Annotated[str, Field(description=said["file_text"])]) -> CallToolResult:
        return await run(lambda m: m.create(path, file_text))

    @server.tool(
        description=COMMAND_DESCRIPTIONS["str_replace"],
        annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False),
    )
    async def str_replace(
        path: Path,
        old_str: Annotated[str, Field(description=said["old_str"])],
        new_str: Annotated[str, Field(description=said["new_str"])],
    ) -> CallToolResult:
        return await run(lambda m: m.str_replace(path, old_str, new_str))

    @server.tool(
        description=COMMAND_DESCRIPTIONS["insert"],
        annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False),
    )
    async def insert(
        path: Path,
        insert_line: Annotated[int, Field(description=said["insert_line"])],
        insert_text: Annotated[str, Field(description=said["insert_text"])],
    ) -> CallToolResult:
        return await run(lambda m: m.insert(path, insert_line, insert_text))

    @server.tool(
        description=COMMAND_DESCRIPTIONS["delete"],
        annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False),
    )
    async def delete(path: Path) -> CallToolResult:
        return await run(lambda m: m.delete(path))

    @server.tool(
        description=COMMAND_DESCRIPTIONS["rename"],
        annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False),
    )
    async def rename(
        old_path: Annotated[str, Field(description=said["old_path"])],
        new_path: Annotated[str, Field(description=said["new_path"])],
    ) -> CallToolResult:
        return await run(lambda m: m.rename(old_path, new_path))

    searched = search_parameter_descriptions(DEFAULT_LIMIT, MAX_LIMIT)

    @server.tool(
        name=SEARCH_TOOL_NAME,
        description=SEARCH_TOOL_DESCRIPTION,
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
    )
    async def memory_search(
        query: Annotated[str, Field(description=searched["query"])],
        path_prefix: Annotated[str | None, Field(description=searched["path_prefix"])] = None,
        limit: Annotated[int, Field(description=searched["limit"])] = DEFAULT_LIMIT,
    ) -> CallToolResult:
        return await run(lambda m: m.search_answer(query, path_prefix, limit))

    # -- history: read-only, and restore only when the operator allows it ----------------------
    File = Annotated[str, Field(description=FILE_HELP)]
    Version = Annotated[str, Field(description=VERSION_HELP)]
    reading = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

    @server.tool(description=HISTORY_TOOL_DESCRIPTIONS["memory_history"], annotations=reading)
    async def memory_history(path: File) -> CallToolResult:
        return await run(lambda m: _history_text(path, m.history(path)))

    @server.tool(description=HISTORY_TOOL_DESCRIPTIONS["memory_show_version"], annotations=reading)
    async def memory_show_version(path: File, version: Version) -> CallToolResult:
        return await run(lambda m: _version_text(m, path, version))

    logged = log_parameter_descriptions(MAX_LOG_LIMIT)

    @server.tool(description=HISTORY_TOOL_DESCRIPTIONS["memory_log"], annotations=reading)
    async def memory_log(
        path_prefix: Annotated[str, Field(description=logged["path_prefix"])] = "/memories",
        operation: Annotated[str | None, Field(description=logged["operation"])] = None,
        actor: Annotated[str | None, Field(description=logged["actor"])] = None,
        since: Annotated[str | None, Field(description=logged["since"])] = None,
        until: Annotated[str | None, Field(description=logged["until"])] = None,
        limit: Annotated[int, Field(description=logged["limit"])] = LOG_LIMIT,
    ) -> CallToolResult:
        filters = {"operation": operation, "actor": actor, "since": since, "until": until}
        return await run(lambda m: _log_text(m, path_prefix, limit, **filters))

    if allow_restore:

        @server.tool(
            description=HISTORY_TOOL_DESCRIPTIONS["memory_restore"],
            annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False),
        )
        async def memory_restore(path: File, version: Version) -> CallToolResult:
            return await run(lambda m: m.restore(path, version))

    return server


async def _read_stdin(
    stdin: BinaryIO,
    messages: "MemoryObjectSendStream[SessionMessage | Exception]",
    reply: "Callable[[SessionMessage], Awaitable[None]]",
    max_message_bytes: int,
) -> None:
    """Read ``stdin`` line by line until it ends: each message to ``messages``, each refusal to ``reply``.

    A line is read up to ``max_message_bytes`` (plus its newline); the rest of a longer one is
    read on in chunks and dropped. Ends, closing ``messages``, at the end of stdin or when the
    server no longer takes messages or answers.
    """
    import anyio
    import anyio.to_thread
    from mcp.shared.message import SessionMessage
    from mcp.types import INTERNAL_ERROR

    read = functools.partial(anyio.to_thread.run_sync, stdin.readline)
    async with messages:
        while line := await read(max_message_bytes + 1):
            if len(line) > max_message_bytes and not line.endswith(b"\n"):
                message, refusals = None, [too_large(line, max_message_bytes)]
                while (chunk := await read(_DISCARD_CHUNK)) and not chunk.endswith(b"\n"):
                    pass  # the rest of the line, dropped
            else:
                try:
                    message, refusals = triage(line)
                except Exception:  # a bug here must cost this line, not the connection
                    log.exception("could not read a JSON-RPC message")
                    message, refusals = (
                        None,
                        [refusal(INTERNAL_ERROR, "Internal error: could not read the message", None)],
                    )
            try:
                if refusals:
                    log.warning("refused a JSON-RPC message: %s", refusals[0].error.message)
                for refused in refusals:
                    await reply(SessionMessage(refused))
                if message is not None:
                    await messages.send(SessionMessage(message))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return  # the server has stopped


async def serve_stdio_async(server: "MCPServer[Any]", *, max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
    """Serve ``server`` over stdin/stdout until stdin ends, answering every line (see the module).

    What ``server.run("stdio")`` does, but stdin is read by :func:`_read_stdin`. The mcp
    package's stdio transport still owns stdout: it points file descriptor 1 at stderr while it
    serves (so nothing else reaches the wire) and writes every answer, the refusals too.
    """
    import io

    import anyio
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    messages, received = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    # mcp 2.x has no public handle on the low-level server; MCPServer.run_stdio_async uses it so.
    lowlevel = server._lowlevel_server
    async with stdio_server(stdin=anyio.wrap_file(io.StringIO())) as (no_input, write_stream):
        await no_input.aclose()  # the transport's own stdin reader got an empty file: it is done
        async with received, anyio.create_task_group() as tasks:
            tasks.start_soon(_read_stdin, sys.stdin.buffer, messages, write_stream.send, max_message_bytes)
            await lowlevel.run(received, write_stream, lowlevel.create_initialization_options())


def serve_stdio(
    settings: Settings | None,
    *,
    configuration_error: ConfigurationError | None = None,
    allow_restore: bool | None = None,
) -> None:
    """Serve ``settings``' memory over stdin/stdout until the client closes the connection.

    With ``configuration_error`` (the settings could not be read), the server still starts and
    answers the handshake, and every tool call answers with that error, so the client (and
    the model) sees what to fix instead of a server that died before it spoke.
    ``allow_restore`` offers the ``memory_restore`` tool; None: as ``S3MEMORY_MCP_ALLOW_RESTORE``
    says (a bad value is a configuration error, reported the same way).

    Raises:
        ConfigurationError: the ``mcp`` package is not installed.
    """
    if settings is None and configuration_error is None:
        raise TypeError("give the settings, or the configuration error that prevented them")
    if allow_restore is None:
        try:
            allow_restore = allow_restore_from_environment()
        except ConfigurationError as error:
            allow_restore, configuration_error = False, configuration_error or error
    opened: list[Memory] = []

    def open_memory() -> Memory:
        if configuration_error is not None or settings is None:
            raise configuration_error or ConfigurationError("no settings")
        memory = settings.open_tree(actor="mcp")
        opened.append(memory)
        return memory

    server = build_server(open_memory, allow_restore=allow_restore)
    import anyio

    if configuration_error is not None or settings is None:
        print(f"s3memory: the settings are wrong, every tool call will say so: {configuration_error}", file=sys.stderr)
    else:
        restore = " (memory_restore allowed)" if allow_restore else ""
        print(
            f"s3memory: serving the memory of {settings.user} at {settings.location} over stdio{restore}",
            file=sys.stderr,
        )
    try:
        anyio.run(serve_stdio_async, server)
    except KeyboardInterrupt:
        pass
    finally:
        for memory in opened:
            memory.close()


def main() -> None:
    """``python -m s3memory.mcp_server``: the settings from the environment only."""
    try:
        settings = Settings.from_environment()
    except ConfigurationError as error:
        serve_stdio(None, configuration_error=error)
    else:
        serve_stdio(settings)
