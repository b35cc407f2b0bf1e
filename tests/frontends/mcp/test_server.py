"""``s3memory.mcp_server`` as a client sees it: the server is spawned as a subprocess and
driven over stdio with the mcp package's own client, on the embedded default in tmp_path."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from helpers import MASTER_KEY
from helpers.mcp import server_environment
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, TextContent

from s3memory import ConfigurationError, EncryptedMemory, InMemoryStore, PathNotFoundError, open_memory
from s3memory._config import Settings
from s3memory.mcp_server import build_server
from s3memory.stores import ObjectInfo

SERVER = [sys.executable, "-W", "error", "-m", "s3memory.mcp_server"]
TOOLS = {
    "view": ["path"],
    "create": ["file_text", "path"],
    "str_replace": ["new_str", "old_str", "path"],
    "insert": ["insert_line", "insert_text", "path"],
    "delete": ["path"],
    "rename": ["new_path", "old_path"],
    "memory_search": ["query"],
    # history, read-only (memory_restore only with allow_restore: tests/frontends/mcp/test_history.py)
    "memory_history": ["path"],
    "memory_show_version": ["path", "version"],
    "memory_log": [],
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def connect(home: Path, *, mode: str = "legacy") -> AsyncIterator[Client]:
    """A client session with a fresh server process; its stderr is checked when it ends.

    ``legacy`` is the initialize handshake that Claude Code and Claude Desktop speak today.
    """
    parameters = StdioServerParameters(command=SERVER[0], args=SERVER[1:], env=server_environment(home))
    errlog = home.parent / f"{home.name}-stderr.log"
    with errlog.open("a") as err:
        async with Client(stdio_client(parameters, errlog=err), mode=mode) as client:
            yield client
    stderr = errlog.read_text()
    assert "Traceback" not in stderr and "Warning" not in stderr, stderr


async def call(client: Client, tool: str, **arguments: Any) -> tuple[bool, str]:
    """(is_error, text) of one tool call; every answer is exactly one text block."""
    result = await client.call_tool(tool, arguments)
    assert isinstance(result, CallToolResult)
    assert result.structured_content is None
    [block] = result.content
    assert isinstance(block, TextContent)
    return bool(result.is_error), block.text


def ok(text: str) -> tuple[bool, str]:
    return False, text


def error(text: str) -> tuple[bool, str]:
    return True, text


@pytest.mark.slow  # the server over stdio
@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_six_tools_with_their_schemas_and_the_instructions(tmp_path: Path, mode: str) -> None:
    async with connect(tmp_path, mode=mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert client.server_info is not None and client.server_info.name == "s3memory"
        instructions = client.instructions or ""
    assert "/memories" in instructions and "ALWAYS VIEW YOUR MEMORY DIRECTORY" in instructions
    assert sorted(tools) == sorted(TOOLS)
    for name, tool in tools.items():
        schema = tool.input_schema
        assert sorted(schema.get("required", [])) == TOOLS[name], name
        assert tool.description, name
        assert tool.output_schema is None, name  # plain text, the memory tool's strings
        for parameter in schema["properties"].values():
            assert parameter.get("description"), name
    view = tools["view"].input_schema["properties"]
    assert set(view) == {"path", "view_range"}
    assert {"type": "array", "items": {"type": "integer"}} in view["view_range"]["anyOf"]
    assert tools["insert"].input_schema["properties"]["insert_line"]["type"] == "integer"
    assert tools["view"].annotations is not None and tools["view"].annotations.read_only_hint is True
    assert tools["delete"].annotations is not None and tools["delete"].annotations.destructive_hint is True


@pytest.mark.slow  # the server over stdio
@pytest.mark.anyio
async def test_round_trip_with_the_contract_strings(tmp_path: Path) -> None:
    async with connect(tmp_path) as client:
        assert await call(client, "create", path="/memories/n.md", file_text="alpha\nbeta\n") == ok(
            "File created successfully at: /memories/n.md"
        )
        assert await call(client, "view", path="/memories/n.md") == ok(
            "Here's the content of /memories/n.md with line numbers:\n     1\talpha\n     2\tbeta\n     3\t"
        )
        assert await call(client, "view", path="/memories/n.md", view_range=[2, -1]) == ok(
            "Here's the content of /memories/n.md with line numbers:\n     2\tbeta\n     3\t"
        )
        assert await call(client, "str_replace", path="/memories/n.md", old_str="beta", new_str="gamma") == ok(
            "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
            "     1\talpha\n     2\tgamma\n     3\t"
        )
        assert await call(client, "insert", path="/memories/n.md", insert_line=0, insert_text="top") == ok(
            "The file /memories/n.md has been edited."
        )
        assert await call(client, "view", path="/memories/n.md") == ok(
            "Here's the content of /memories/n.md with line numbers:\n"
            "     1\ttop\n     2\talpha\n     3\tgamma\n     4\t"
        )
        assert await call(client, "rename", old_path="/memories/n.md", new_path="/memories/d/n.md") == ok(
            "Successfully renamed /memories/n.md to /memories/d/n.md"
        )
        assert await call(client, "view", path="/memories") == ok(
            "Here're the files and directories up to 2 levels deep in /memories, "
            "excluding hidden items and node_modules:\n"
            "16B\t/memories\n16B\t/memories/d/\n16B\t/memories/d/n.md"
        )
        assert await call(client, "delete", path="/memories/d") == ok("Successfully deleted /memories/d")
        assert await call(client, "view", path="/memories/d/n.md") == error(
            "The path /memories/d/n.md does not exist. Please provide a valid path."
        )


@pytest.mark.slow  # the server over stdio
@pytest.mark.anyio
async def test_errors_are_tool_errors_and_the_server_keeps_serving(tmp_path: Path) -> None:
    async with connect(tmp_path) as client:
        assert await call(client, "view", path="/memories/missing.md") == error(
            "The path /memories/missing.md does not exist. Please provide a valid path."
        )
        assert await call(client, "view", path="/memories/../x") == error(
            "Path /memories/../x would escape /memories directory: '..' segments (directory traversal) are not allowed"
        )
        assert await call(client, "create", path="/memories/a.md", file_text="one") == ok(
            "File created successfully at: /memories/a.md"
        )
        assert await call(client, "create", path="/memories/a.md", file_text="two") == error(
            "Error: File /memories/a.md already exists"
        )
        assert await call(client, "str_replace", path="/memories/a.md", old_str="zzz", new_str="y") == error(
            "No replacement was performed, old_str `zzz` did not appear verbatim in /memories/a.md."
        )
        assert await call(client, "insert", path="/memories/a.md", insert_line=9, insert_text="x") == error(
            "Error: Invalid `insert_line` parameter: 9. It should be within the range of lines of the file: [0, 1]"
        )
        assert await call(client, "delete", path="/memories") == error(
            "Error: Cannot delete the /memories directory itself"
        )
        # arguments that fail the input schema: a tool error in the memory tool's words
        assert await call(client, "insert", path="/memories/a.md", insert_line="x", insert_text="y") == error(
            "Error: Invalid `insert_line` parameter: 'x'. It should be an integer."
        )
        # ... and after all that the server still answers
        assert await call(client, "view", path="/memories/a.md") == ok(
            "Here's the content of /memories/a.md with line numbers:\n     1\tone"
        )


#: Arguments that fail a tool's input schema, and the answer: the memory tool's words
#: (s3memory._core.memory.run_command's for a missing parameter, _render's "Invalid `x` parameter"
#: otherwise), never pydantic's text or its link.
WRONGLY_TYPED: list[tuple[str, dict[str, Any], str]] = [
    (
        "view",
        {"path": "/memories/a.md", "view_range": "1,2"},
        "Error: Invalid `view_range` parameter: '1,2'. It should be a list of integers.",
    ),
    (
        "view",
        {"path": "/memories/a.md", "view_range": [1, "x"]},
        "Error: Invalid `view_range` parameter: [1, 'x']. It should be a list of integers.",
    ),
    (
        "view",
        {"path": "/memories/a.md", "view_range": [1.5, 2]},
        "Error: Invalid `view_range` parameter: [1.5, 2]. It should be a list of integers.",
    ),
    (
        "insert",
        {"path": "/memories/a.md", "insert_line": "abc", "insert_text": "x"},
        "Error: Invalid `insert_line` parameter: 'abc'. It should be an integer.",
    ),
    ("view", {"path": 5}, "Error: Invalid `path` parameter: 5. It should be a string."),
    ("view", {}, "Error: Missing required parameter `path` for command `view`."),
    ("create", {"path": None, "file_text": "x"}, "Error: Missing required parameter `path` for command `create`."),
    (
        "create",
        {"path": "/memories/b.md", "file_text": {"a": 1}},
        "Error: Invalid `file_text` parameter: {'a': 1}. It should be a string.",
    ),
    (
        "str_replace",
        {"path": "/memories/a.md"},
        "Error: Missing required parameter `old_str` for command `str_replace`.\n"
        "Error: Missing required parameter `new_str` for command `str_replace`.",
    ),
    (
        "rename",
        {"old_path": ["/memories/a.md"], "new_path": "/memories/b.md"},
        "Error: Invalid `old_path` parameter: ['/memories/a.md']. It should be a string.",
    ),
    (
        "memory_search",
        {"query": "a", "path_prefix": 7},
        "Error: Invalid `path_prefix` parameter: 7. It should be a string.",
    ),
    (
        "memory_log",
        {"limit": "many"},
        "Error: Invalid `limit` parameter: 'many'. It should be an integer.",
    ),
    (
        "memory_show_version",
        {"path": "/memories/a.md"},
        "Error: Missing required parameter `version` for tool `memory_show_version`.",
    ),
]


@pytest.mark.anyio
async def test_wrongly_typed_arguments_are_answered_in_the_tools_words() -> None:
    """In process: every argument that fails the input schema, also a missing one, is an
    ``isError`` result in the memory tool's words, and nothing is run or written."""
    memory = open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY)
    memory.create("/memories/a.md", "one\n")
    async with Client(build_server(lambda: memory)) as client:
        for tool, arguments, answer in WRONGLY_TYPED:
            is_error, text = await call(client, tool, **arguments)
            assert (is_error, text) == (True, answer), (tool, arguments)
            assert "pydantic" not in text and "http" not in text and "validation error" not in text
        # the long value of a wrong type is shown short, on one line
        is_error, text = await call(client, "create", path=["x" * 10_000], file_text="x")
        assert is_error and len(text) < 200 and "\n" not in text, text
    assert memory.read_text("/memories/a.md") == "one\n" and [f.path for f in memory.list_files()] == ["/memories/a.md"]


@pytest.mark.slow  # the server over stdio
@pytest.mark.anyio
async def test_the_same_encrypted_store_as_the_library_and_per_user(tmp_path: Path) -> None:
    secret = "the launch code is 0000-SECRET"
    async with connect(tmp_path) as client:
        assert not (await call(client, "create", path="/memories/s.md", file_text=secret))[0]
    alice = Settings(home=tmp_path, user="alice").open()
    try:
        assert alice.view("/memories/s.md").endswith("     1\t" + secret)
        alice.create("/memories/from-library.md", "written directly")
    finally:
        alice.close()
    bob = Settings(home=tmp_path, user="bob").open()
    try:
        with pytest.raises(PathNotFoundError):
            bob.view("/memories/s.md")
        assert bob.view("/memories").endswith("\n0B\t/memories")
    finally:
        bob.close()
    async with connect(tmp_path) as client:  # a new server process reads what the library wrote
        assert await call(client, "view", path="/memories/from-library.md") == ok(
            "Here's the content of /memories/from-library.md with line numbers:\n     1\twritten directly"
        )
    stored = [p for p in (tmp_path / "store").rglob("*") if p.is_file()]
    assert stored
    for path in stored:
        data = path.read_bytes()
        assert b"SECRET" not in data and b"written directly" not in data, path


@pytest.mark.anyio
async def test_the_memory_is_opened_once_and_a_failed_opening_is_retried() -> None:
    """In process: the tools open the memory on first use; a setting that fails is a tool error."""
    attempts: list[int] = []

    def open_once_configured() -> EncryptedMemory:
        attempts.append(1)
        if len(attempts) == 1:
            raise ConfigurationError("Error: the master key file /k must hold 32 bytes (base64)")
        return open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY)

    server = build_server(open_once_configured)
    assert attempts == []
    async with Client(server) as client:
        assert await call(client, "view", path="/memories") == error(
            "Error: the master key file /k must hold 32 bytes (base64)"
        )
        assert not (await call(client, "create", path="/memories/a.md", file_text="a"))[0]
        assert not (await call(client, "view", path="/memories/a.md"))[0]
    assert len(attempts) == 2


@pytest.mark.anyio
async def test_memory_search_over_the_mounted_tree() -> None:
    from s3memory import Mount

    store = InMemoryStore()
    shared = open_memory(user_id="org", store=store, master_key=MASTER_KEY)
    shared.create("/memories/style.md", "Indent with tabs.\n")

    def open_tree() -> Any:
        return open_memory(user_id="alice", store=store, master_key=MASTER_KEY, mounts=[Mount("standards", "org")])

    async with Client(build_server(open_tree)) as client:
        assert await call(client, "memory_search", query="TABS") == ok(
            'Found 1 file matching "TABS" (searched 1 file):\n/memories/standards/style.md\n     1\tIndent with tabs.'
        )
        assert await call(client, "memory_search", query="tabs", path_prefix="/memories/other") == ok(
            'No matches for "tabs" under /memories/other.'
        )
        assert await call(client, "memory_search", query="   ") == error(
            'Error: The query is empty. Give one or more words, or a "quoted phrase", to search for.'
        )
        assert await call(client, "create", path="/memories/standards/x.md", file_text="x") == error(
            "Error: Cannot create /memories/standards/x.md: /memories/standards is mounted read-only"
        )
        assert await call(client, "memory_history", path="/memories/standards/style.md") == error(
            "Error: The history of /memories/standards/style.md is kept by the memory store mounted at "
            "/memories/standards; history here covers the user's own store only"
        )


@pytest.mark.anyio
async def test_an_unexpected_failure_reaches_the_client_without_its_details(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class BrokenStore(InMemoryStore):  # fails listing with something that is no StorageError
        def list(self, prefix: str, *, limit: int | None = None) -> Iterator[ObjectInfo]:
            raise RuntimeError("internal detail: s3://secret-bucket/key")

    def open_broken() -> EncryptedMemory:
        return open_memory(user_id="alice", store=BrokenStore(), master_key=MASTER_KEY)

    async with Client(build_server(open_broken)) as client:
        assert await call(client, "view", path="/memories") == error(
            "Error: The memory backend failed unexpectedly (RuntimeError)."
        )
        assert await call(client, "delete", path="/memories/a.md") == error(
            "Error: The memory backend failed unexpectedly (RuntimeError)."
        )
    assert "internal detail" in caplog.text  # logged (to stderr) for the operator, with its traceback


@pytest.mark.slow  # the server over stdio
def test_stdout_carries_only_the_protocol(tmp_path: Path) -> None:
    """Raw JSON-RPC: every stdout line is a protocol message, and closing stdin ends the server."""
    process = subprocess.Popen(
        SERVER,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=server_environment(tmp_path),
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None

    def send(message: dict[str, Any]) -> None:
        assert process.stdin is not None
        process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        process.stdin.flush()

    try:
        send(
            {
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "test", "version": "0"},
                },
            }
        )
        initialized = json.loads(process.stdout.readline())
        assert initialized["id"] == 1 and initialized["result"]["serverInfo"]["name"] == "s3memory"
        send({"method": "notifications/initialized"})
        arguments = {"path": "/memories/x.md", "file_text": "hi"}
        send({"id": 2, "method": "tools/call", "params": {"name": "create", "arguments": arguments}})
        created = json.loads(process.stdout.readline())
        assert created["id"] == 2 and created["result"]["isError"] is False
        text = "File created successfully at: /memories/x.md"
        assert created["result"]["content"] == [{"type": "text", "text": text}]
        stdout, stderr = process.communicate(timeout=10)  # closes stdin: the client is gone
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr
    assert stdout == ""
    assert "s3memory: serving the memory of alice at" in stderr and "Traceback" not in stderr


def run_python(code: str, tmp_path: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=server_environment(tmp_path),
        timeout=30,
        check=True,
    )
    return result.stdout.strip()


@pytest.mark.slow  # a subprocess
def test_importing_the_module_does_not_import_mcp(tmp_path: Path) -> None:
    loaded = run_python(
        """
        import sys
        import s3memory, s3memory.mcp_server
        print(sorted(m for m in sys.modules if m == "mcp" or m.startswith(("mcp.", "mcp_types"))))
        """,
        tmp_path,
    )
    assert loaded == "[]"


@pytest.mark.slow  # a subprocess
def test_without_mcp_serve_stdio_raises_configuration_error(tmp_path: Path) -> None:
    answer = run_python(
        """
        import sys
        sys.modules["mcp"] = None  # what an environment without the extra sees: ImportError
        from s3memory import ConfigurationError
        from s3memory._config import Settings
        from s3memory.mcp_server import build_server, serve_stdio
        for attempt in (lambda: serve_stdio(Settings.from_environment()), lambda: build_server(lambda: None)):
            try:
                attempt()
            except ConfigurationError as exc:
                print(exc)
        """,
        tmp_path,
    )
    hint = (
        "the MCP server needs the mcp package: pip install -e '.[mcp]' in the s3memory checkout "
        "(s3memory is not on PyPI)"
    )
    assert answer.splitlines() == [hint, hint]
    assert not (tmp_path / "store").exists() and not (tmp_path / "master.key").exists()
