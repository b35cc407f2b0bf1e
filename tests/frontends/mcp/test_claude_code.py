"""Claude Code and the Agent SDK: examples/claude_code/.mcp.json and examples/agent_sdk_memory.py.

The ``.mcp.json`` is read as Claude Code reads it (``${VAR}`` and ``${VAR:-default}``
expanded from the environment), its command is started and spoken to over stdio with the
mcp package's client. Where the Claude Code CLI is at hand (the ``claude-agent-sdk`` wheel
bundles it), Claude Code itself runs in a copy of the example project, and the Agent SDK
runs an agent with the in-process memory tools, both against a fake Messages API on
localhost that scripts the model: create a memory file, then view it. No network.
"""

from __future__ import annotations

import http.server
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from helpers import REPO
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, TextContent

from s3memory import InMemoryStore, Settings, generate_master_key, open_memory

EXAMPLES = REPO / "examples"
PROJECT = EXAMPLES / "claude_code"
VENV_BIN = Path(sys.executable).parent
MEMORY_TOOLS = {"view", "create", "str_replace", "insert", "delete", "rename"}
FILE = "/memories/claude-code.md"
TEXT = "the launch is on Friday\n"
VIEWED = f"Here's the content of {FILE} with line numbers:\n     1\tthe launch is on Friday\n     2\t"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def expand(value: str, environ: Mapping[str, str]) -> str:
    """A ``.mcp.json`` value as Claude Code expands it: ``${VAR}``, ``${VAR:-default}``."""

    def variable(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(3)
        if environ.get(name):
            return environ[name]
        if default is None:
            raise KeyError(f"{name} is not set and has no default")
        return default

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}", variable, value)


def memory_server_config() -> dict[str, Any]:
    config = json.loads((PROJECT / ".mcp.json").read_text())
    assert set(config) == {"mcpServers"} and set(config["mcpServers"]) == {"memory"}
    server: dict[str, Any] = config["mcpServers"]["memory"]
    assert server["type"] == "stdio"
    assert isinstance(server["command"], str) and all(isinstance(arg, str) for arg in server["args"])
    assert all(isinstance(name, str) and isinstance(value, str) for name, value in server["env"].items())
    return server


def path_with_venv() -> str:
    """PATH with this venv's bin first: where an activated venv (or pipx) puts ``s3memory``."""
    return f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', os.defpath)}"


def test_the_project_config_is_claude_codes_format_and_names_s3memory_mcp() -> None:
    server = memory_server_config()
    assert (server["command"], server["args"]) == ("s3memory", ["mcp"])
    assert expand(server["env"]["S3MEMORY_USER"], {"USER": "ci-user"}) == "ci-user"
    assert expand(server["env"]["S3MEMORY_USER"], {}) == "local"  # no $USER: the CLI's default user
    settings = json.loads((PROJECT / ".claude" / "settings.json").read_text())
    assert settings == {"enabledMcpjsonServers": ["memory"], "permissions": {"allow": ["mcp__memory"]}}


def test_the_readme_shows_the_project_config_verbatim() -> None:
    page = (EXAMPLES.parent / "docs" / "guides" / "claude-code.md").read_text()
    block = re.search(r"```json\n(.*?)```", page, re.S)
    assert block is not None and block.group(1) == (PROJECT / ".mcp.json").read_text()


async def call(client: Client, tool: str, **arguments: Any) -> tuple[bool, str]:
    result = await client.call_tool(tool, arguments)
    assert isinstance(result, CallToolResult)
    [block] = result.content
    assert isinstance(block, TextContent)
    return bool(result.is_error), block.text


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_configured_command_serves_the_memory_over_stdio(tmp_path: Path) -> None:
    server = memory_server_config()
    environ = {name: value for name, value in os.environ.items() if not name.startswith("S3MEMORY_")}
    environ.update(PATH=path_with_venv(), USER="ci-user")
    command = shutil.which(expand(server["command"], environ), path=environ["PATH"])
    assert command is not None and Path(command) == VENV_BIN / "s3memory"
    env = {**environ, **{name: expand(value, environ) for name, value in server["env"].items()}}
    env["S3MEMORY_HOME"] = str(tmp_path / "home")
    parameters = StdioServerParameters(command=command, args=[expand(arg, environ) for arg in server["args"]], env=env)
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with Client(stdio_client(parameters, errlog=errlog)) as client:  # the handshake Claude Code speaks
            assert client.server_info is not None and client.server_info.name == "s3memory"
            assert MEMORY_TOOLS <= {tool.name for tool in (await client.list_tools()).tools}
            assert await call(client, "create", path=FILE, file_text=TEXT) == (
                False,
                f"File created successfully at: {FILE}",
            )
            assert await call(client, "view", path=FILE) == (False, VIEWED)
            assert await call(client, "delete", path="/memories/nothing.md") == (
                True,
                "Error: The path /memories/nothing.md does not exist",
            )
    stderr = (tmp_path / "stderr.log").read_text()
    assert "s3memory: serving the memory of ci-user" in stderr and "Traceback" not in stderr
    # The memory of the user the config names, in the embedded default under S3MEMORY_HOME.
    memory = Settings.from_environment({"S3MEMORY_HOME": str(tmp_path / "home"), "S3MEMORY_USER": "ci-user"}).open()
    assert memory.view(FILE) == VIEWED
    memory.close()


# --- Claude Code itself, and the Agent SDK, against a fake Messages API ---------------------


def claude_cli() -> Path | None:
    """The Claude Code CLI the claude-agent-sdk wheel bundles, if it is installed."""
    try:
        import claude_agent_sdk
    except ImportError:
        return None
    bundled = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
    return bundled if bundled.is_file() else None


needs_cli = pytest.mark.skipif(claude_cli() is None, reason="needs claude-agent-sdk (it bundles the Claude Code CLI)")

#: How long Claude Code may wait for the memory server: a bound against a hang only (ms).
SERVER_WAIT_MS = "120000"

#: Claude Code without its updater, telemetry and tool search (which would defer MCP tools),
#: whose first turn waits for the MCP servers to be connected. By default a headless turn
#: (``-p``, or the Agent SDK's) waits about 2 s for servers still connecting and then starts
#: without their tools (``MCP_CONNECTION_NONBLOCKING`` is on): ``s3memory mcp``'s cold start
#: (a Python process importing mcp, pydantic and boto3) takes longer than that on a loaded
#: two-core machine, and the model was never offered the memory. These variables of the
#: bundled CLI make it wait for the connection itself, up to :data:`SERVER_WAIT_MS`.
QUIET = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "ENABLE_TOOL_SEARCH": "false",
    "MCP_CONNECTION_NONBLOCKING": "false",  # connect the servers before the first turn ...
    "CLAUDE_CODE_MCP_STARTUP_WAIT_MS": SERVER_WAIT_MS,  # ... and hold that turn until they are
    "MCP_CONNECT_TIMEOUT_MS": SERVER_WAIT_MS,
    "MCP_TIMEOUT": SERVER_WAIT_MS,  # a server's start-up
}


class FakeMessagesAPI(http.server.ThreadingHTTPServer):
    """``POST /v1/messages`` on localhost, as a model that, given the memory server's tools,
    creates :data:`FILE`, then views it, then says what it got back; any other request gets
    a short text. Answers streamed requests as server-sent events. ``requests`` holds
    every request body."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def reply(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        tools = {tool.get("name") for tool in body.get("tools", [])}
        results = [
            block
            for message in body.get("messages", [])
            if message["role"] == "user" and isinstance(message["content"], list)
            for block in message["content"]
            if block.get("type") == "tool_result"
        ]
        if "mcp__memory__create" in tools and not results:
            command = {"name": "mcp__memory__create", "input": {"path": FILE, "file_text": TEXT}}
        elif "mcp__memory__view" in tools and len(results) == 1:
            command = {"name": "mcp__memory__view", "input": {"path": FILE}}
        else:
            return [{"type": "text", "text": "Done." if results else "OK"}]
        return [{"type": "tool_use", "id": f"toolu_{len(results) + 1:02d}", **command}]


class _Handler(http.server.BaseHTTPRequestHandler):
    server: FakeMessagesAPI

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(404)
        self.end_headers()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        if "count_tokens" in self.path:
            return self._json({"input_tokens": 100})
        self.server.requests.append(body)
        content = self.server.reply(body)
        stop = "tool_use" if content[0]["type"] == "tool_use" else "end_turn"
        message = {
            "id": f"msg_fake_{len(self.server.requests)}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "fake"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 10},
        }
        if not body.get("stream"):
            return self._json(message)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        self._event("message_start", {"message": {**message, "content": [], "stop_reason": None}})
        for index, block in enumerate(content):
            start: dict[str, Any]
            delta: dict[str, Any]
            if block["type"] == "text":
                start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
            else:
                start, delta = (
                    {**block, "input": {}},
                    {"type": "input_json_delta", "partial_json": json.dumps(block["input"])},
                )
            self._event("content_block_start", {"index": index, "content_block": start})
            self._event("content_block_delta", {"index": index, "delta": delta})
            self._event("content_block_stop", {"index": index})
        self._event(
            "message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 10}}
        )
        self._event("message_stop", {})

    def _event(self, name: str, data: dict[str, Any]) -> None:
        self.wfile.write(f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode())

    def _json(self, data: dict[str, Any]) -> None:
        payload = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def fake_api() -> Iterator[FakeMessagesAPI]:
    server = FakeMessagesAPI()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def tool_results(api: FakeMessagesAPI) -> list[tuple[bool, str]]:
    """(is_error, text) of each tool result in the last request that carried the memory's tools."""
    [*_, last] = [
        body for body in api.requests if "mcp__memory__view" in {t.get("name") for t in body.get("tools", [])}
    ]
    results = []
    for message in last["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result":
                content = block["content"]
                text = content if isinstance(content, str) else "".join(part["text"] for part in content)
                results.append((bool(block.get("is_error")), text))
    return results


def slow_start_bin(tmp_path: Path, seconds: float) -> Path:
    """A directory with an ``s3memory`` that waits ``seconds`` and then runs this venv's: a
    server whose start takes as long as a cold start can on a loaded machine."""
    directory = tmp_path / "slow-bin"
    directory.mkdir()
    wrapper = directory / "s3memory"
    wrapper.write_text(f'#!/bin/sh\nsleep {seconds}\nexec "{VENV_BIN / "s3memory"}" "$@"\n')
    wrapper.chmod(0o755)
    return directory


def run_claude_code(tmp_path: Path, fake_api: FakeMessagesAPI, *, path: str) -> None:
    """Claude Code, headless (``-p``), in a copy of the example project: the model creates
    :data:`FILE` and views it, and the memory holds it afterwards."""
    cli = claude_cli()
    assert cli is not None
    project = (tmp_path / "project").resolve()
    shutil.copytree(PROJECT, project)
    home = tmp_path / "home"
    home.mkdir()
    # The workspace trust a user gives on the first interactive run; with it the project's
    # .claude/settings.json applies: the server enabled, its tools allowed.
    (home / ".claude.json").write_text(json.dumps({"projects": {str(project): {"hasTrustDialogAccepted": True}}}))
    env = {
        "HOME": str(home),
        "PATH": path,
        "USER": "ci-user",
        "S3MEMORY_HOME": str(tmp_path / "memory"),
        "ANTHROPIC_BASE_URL": fake_api.url,
        "ANTHROPIC_API_KEY": "sk-ant-fake",
        **QUIET,
    }
    run = subprocess.run(
        [str(cli), "-p", "Remember that the launch is on Friday.", "--output-format", "json"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard only: nothing below depends on how long the turn took
    )
    assert run.returncode == 0, run.stdout + run.stderr
    first_tools = {tool.get("name") for tool in fake_api.requests[0].get("tools", [])}
    assert MEMORY_TOOLS <= {name.removeprefix("mcp__memory__") for name in first_tools}, (
        "Claude Code's first request did not carry the memory's tools: its turn started before "
        f"the server was connected ({sorted(first_tools)})"
    )
    assert json.loads(run.stdout)["result"] == "Done."
    assert tool_results(fake_api) == [(False, f"File created successfully at: {FILE}"), (False, VIEWED)]
    memory = Settings.from_environment({"S3MEMORY_HOME": str(tmp_path / "memory"), "S3MEMORY_USER": "ci-user"}).open()
    assert memory.view(FILE) == VIEWED
    memory.close()


@pytest.mark.slow
@needs_cli
def test_claude_code_runs_the_example_project_with_its_memory(tmp_path: Path, fake_api: FakeMessagesAPI) -> None:
    run_claude_code(tmp_path, fake_api, path=path_with_venv())


@pytest.mark.slow
@needs_cli
@pytest.mark.skipif(sys.platform == "win32", reason="the slow server is a shell script")
def test_claude_code_waits_for_a_memory_server_that_starts_slowly(tmp_path: Path, fake_api: FakeMessagesAPI) -> None:
    """A server whose start takes 5 s, as ``s3memory mcp``'s cold start can on a loaded
    two-core machine: Claude Code's headless turn waits for it to be connected (see
    :data:`QUIET`) instead of starting without its tools, which it does after 2 s by default."""
    slow = slow_start_bin(tmp_path, 5)
    run_claude_code(tmp_path, fake_api, path=f"{slow}{os.pathsep}{path_with_venv()}")


# --- examples/agent_sdk_memory.py -----------------------------------------------------------


@pytest.fixture(scope="module")
def agent_example() -> ModuleType:
    pytest.importorskip("claude_agent_sdk")
    spec = importlib.util.spec_from_file_location("example_agent_sdk_memory", EXAMPLES / "agent_sdk_memory.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_agent_sdk_stdio_server_is_the_mcp_json_one(agent_example: ModuleType) -> None:
    server = memory_server_config()
    config = agent_example.stdio_server({"S3MEMORY_USER": "alice"})
    assert config == {**server, "env": {"S3MEMORY_USER": "alice"}}
    options = agent_example.agent_options(config)
    assert options.mcp_servers == {"memory": config}
    assert options.allowed_tools == ["mcp__memory"] and options.tools == []
    assert "ALWAYS VIEW YOUR MEMORY DIRECTORY" in options.system_prompt["append"]


@pytest.mark.anyio
async def test_the_in_process_tools_answer_as_the_memory_tool(agent_example: ModuleType) -> None:
    store, key = InMemoryStore(), generate_master_key()
    memory = open_memory(user_id="alice", store=store, master_key=key)
    tools = {tool.name: tool for tool in agent_example.memory_tools(memory)}
    assert set(tools) == MEMORY_TOOLS
    assert tools["view"].annotations.read_only_hint is True
    assert tools["delete"].annotations.destructive_hint is True
    assert tools["view"].input_schema["required"] == ["path"]

    async def run(name: str, **arguments: Any) -> tuple[bool, str]:
        result = await tools[name].handler(arguments)
        [block] = result["content"]
        return bool(result.get("is_error")), block["text"]

    assert await run("create", path=FILE, file_text=TEXT) == (False, f"File created successfully at: {FILE}")
    assert await run("view", path=FILE) == (False, VIEWED)
    assert await run("str_replace", path=FILE, old_str="Friday", new_str="Monday") == (
        False,
        "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
        "     1\tthe launch is on Monday\n     2\t",
    )
    assert await run("insert", path=FILE, insert_line=0, insert_text="# Launch\n") == (
        False,
        f"The file {FILE} has been edited.",
    )
    assert await run("rename", old_path=FILE, new_path="/memories/launch.md") == (
        False,
        f"Successfully renamed {FILE} to /memories/launch.md",
    )
    is_error, text = await run("view", path="/memories/../etc")
    assert is_error and "directory traversal" in text
    assert await run("delete", path=FILE) == (True, f"Error: The path {FILE} does not exist")
    # Encrypted in the store; the same memory from another process reads it back.
    raw = b"".join(stored.body for info in store.list("") if (stored := store.get(info.key)) is not None)
    assert b"launch" not in raw
    again = open_memory(user_id="alice", store=store, master_key=key)
    assert again.view("/memories/launch.md").splitlines()[1:] == [
        "     1\t# Launch",
        "     2\tthe launch is on Monday",
        "     3\t",
    ]
    assert await run("delete", path="/memories/launch.md") == (False, "Successfully deleted /memories/launch.md")
    memory.close()
    again.close()
    server = agent_example.in_process_server(memory)
    assert server["type"] == "sdk" and server["name"] == "memory"


@pytest.mark.slow
@needs_cli
@pytest.mark.anyio
async def test_an_agent_sdk_agent_uses_the_in_process_memory(
    agent_example: ModuleType, tmp_path: Path, fake_api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "CLAUDE")):
            monkeypatch.delenv(name)
    store, key = InMemoryStore(), generate_master_key()
    memory = open_memory(user_id="alice", store=store, master_key=key)
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "ANTHROPIC_BASE_URL": fake_api.url, "ANTHROPIC_API_KEY": "sk-ant-fake", **QUIET}
    options = agent_example.agent_options(agent_example.in_process_server(memory), cwd=str(tmp_path), env=env)
    answer = await agent_example.ask("Remember that the launch is on Friday.", options)
    assert answer == "Done."
    assert tool_results(fake_api) == [(False, f"File created successfully at: {FILE}"), (False, VIEWED)]
    assert memory.view(FILE) == VIEWED
    memory.close()


@pytest.mark.slow
@needs_cli
@pytest.mark.anyio
async def test_an_agent_sdk_agent_uses_s3memory_mcp_over_stdio(
    agent_example: ModuleType, tmp_path: Path, fake_api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "CLAUDE", "S3MEMORY_")):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "HOME": str(home),
        "PATH": path_with_venv(),
        "ANTHROPIC_BASE_URL": fake_api.url,
        "ANTHROPIC_API_KEY": "sk-ant-fake",
        **QUIET,
    }
    server = agent_example.stdio_server({"S3MEMORY_USER": "bob", "S3MEMORY_HOME": str(tmp_path / "memory")})
    options = agent_example.agent_options(server, cwd=str(tmp_path), env=env)
    answer = await agent_example.ask("Remember that the launch is on Friday.", options)
    assert answer == "Done."
    assert tool_results(fake_api) == [(False, f"File created successfully at: {FILE}"), (False, VIEWED)]
    memory = Settings.from_environment({"S3MEMORY_HOME": str(tmp_path / "memory"), "S3MEMORY_USER": "bob"}).open()
    assert memory.view(FILE) == VIEWED
    memory.close()
