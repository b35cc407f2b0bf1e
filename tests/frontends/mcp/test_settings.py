"""A bad setting under the MCP server: the server still shakes hands and every tool call says
what is wrong, instead of a process that dies before the client hears anything."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers.mcp import server_environment
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, TextContent


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.slow  # the server over stdio
@pytest.mark.anyio
@pytest.mark.parametrize(
    "command",
    [["-m", "s3memory.mcp_server"], ["-m", "s3memory", "mcp"]],
    ids=["module", "cli"],
)
async def test_a_bad_setting_is_reported_to_the_client(tmp_path: Path, command: list[str]) -> None:
    env = server_environment(tmp_path / "home")
    env["S3MEMORY_KEY_MODE"] = "plain"
    parameters = StdioServerParameters(command=sys.executable, args=command, env=env)
    errlog = tmp_path / "stderr.log"
    with errlog.open("a") as err:
        async with Client(stdio_client(parameters, errlog=err)) as client:
            assert {tool.name for tool in (await client.list_tools()).tools} >= {"view", "create"}
            for tool, arguments in [
                ("view", {"path": "/memories"}),
                ("create", {"path": "/memories/a", "file_text": "x"}),
            ]:
                result = await client.call_tool(tool, arguments)
                assert isinstance(result, CallToolResult) and result.is_error
                [block] = result.content
                assert isinstance(block, TextContent)
                assert block.text == "--key-mode (S3MEMORY_KEY_MODE) must be 'tenant' or 'kms', not 'plain'"
    stderr = errlog.read_text()
    assert "Traceback" not in stderr
    assert "--key-mode (S3MEMORY_KEY_MODE) must be 'tenant' or 'kms', not 'plain'" in stderr
    assert not (tmp_path / "home").exists()  # nothing was created with half a configuration
