"""The Claude Agent SDK (``claude-agent-sdk``) with s3memory: an agent with the same encrypted memory.

Two ways to give an agent the memory, both as MCP tools named ``mcp__memory__view``,
``mcp__memory__create``, ... :

- :func:`stdio_server`: Claude Code starts ``s3memory mcp``, the server a project's
  ``.mcp.json`` names (examples/claude_code/.mcp.json), configured by ``S3MEMORY_*``
  variables: the same memory as the CLI and Claude Code.
- :func:`in_process_server`: the six memory commands as an in-process SDK MCP server
  (``create_sdk_mcp_server``) over an :class:`~s3memory.EncryptedMemory` your application
  opened, for instance one per signed-in user of a service (``user_id`` from your auth
  layer, never from the model).

    pip install -e '.[agent-sdk]'   # in the s3memory checkout: it is not on PyPI
    python examples/agent_sdk_memory.py "Remember that I prefer green tea."             # stdio
    python examples/agent_sdk_memory.py --in-process "What do I like to drink?"

Running an agent (:func:`main`, ``query()``) needs the Claude Code CLI (the
``claude-agent-sdk`` wheel bundles it) and an ``ANTHROPIC_API_KEY`` or a Claude login: it
talks to Claude. Building the options and servers, and calling the in-process tools
(:func:`memory_tools`), need neither and work offline. tests/frontends/mcp/test_claude_code.py runs
agents both ways through the bundled CLI against a fake Messages API on localhost.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable
from typing import Any

import anyio.to_thread
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    McpSdkServerConfig,
    SdkMcpTool,
    TextBlock,
    ToolAnnotations,
    create_sdk_mcp_server,
    query,
    tool,
)
from claude_agent_sdk.types import McpStdioServerConfig

from s3memory import EncryptedMemory, S3MemoryError, Settings
from s3memory.mcp_server import COMMAND_DESCRIPTIONS, INSTRUCTIONS, PARAMETER_DESCRIPTIONS, PARAMETER_TYPES

SERVER = "memory"
#: Every tool of the memory server, allowed without asking (a server-wide permission rule).
ALLOWED = [f"mcp__{SERVER}"]


def _parameters(*names: str) -> dict[str, Any]:
    """The JSON schema of ``names``, each typed and described as ``s3memory mcp`` declares it."""
    return {name: {**PARAMETER_TYPES[name], "description": PARAMETER_DESCRIPTIONS[name]} for name in names}


def stdio_server(env: dict[str, str] | None = None) -> McpStdioServerConfig:
    """``s3memory mcp`` over stdio, as in ``.mcp.json``; ``env``: ``S3MEMORY_*`` settings
    (the rest of the environment is Claude Code's, which passes its own on)."""
    return {"type": "stdio", "command": "s3memory", "args": ["mcp"], "env": dict(env or {})}


def _answer(run: Callable[[], str]) -> dict[str, Any]:
    """A command's string, or its error as an ``is_error`` result, as ``s3memory mcp`` answers."""
    try:
        return {"content": [{"type": "text", "text": run()}]}
    except S3MemoryError as error:  # the memory tool's own error strings, for the model
        return {"content": [{"type": "text", "text": str(error)}], "is_error": True}


def memory_tools(memory: EncryptedMemory) -> list[SdkMcpTool[Any]]:
    """The six memory commands over ``memory``, as SDK MCP tools; each runs in a worker thread."""

    def command(
        name: str,
        properties: dict[str, Any],
        run: Callable[[dict[str, Any]], str],
        annotations: ToolAnnotations | None = None,
    ) -> SdkMcpTool[Any]:
        required = [key for key in properties if key != "view_range"]
        schema = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}

        async def handler(args: dict[str, Any]) -> dict[str, Any]:
            return await anyio.to_thread.run_sync(_answer, lambda: run(args))

        return tool(name, COMMAND_DESCRIPTIONS[name], schema, annotations=annotations)(handler)

    return [
        command(
            "view",
            _parameters("path", "view_range"),
            lambda a: memory.view(a["path"], a.get("view_range")),
            ToolAnnotations(read_only_hint=True, idempotent_hint=True),
        ),
        command(
            "create",
            _parameters("path", "file_text"),
            lambda a: memory.create(a["path"], a["file_text"]),
        ),
        command(
            "str_replace",
            _parameters("path", "old_str", "new_str"),
            lambda a: memory.str_replace(a["path"], a["old_str"], a["new_str"]),
        ),
        command(
            "insert",
            _parameters("path", "insert_line", "insert_text"),
            lambda a: memory.insert(a["path"], a["insert_line"], a["insert_text"]),
        ),
        command(
            "delete",
            _parameters("path"),
            lambda a: memory.delete(a["path"]),
            ToolAnnotations(destructive_hint=True),
        ),
        command(
            "rename",
            _parameters("old_path", "new_path"),
            lambda a: memory.rename(a["old_path"], a["new_path"]),
        ),
    ]


def in_process_server(memory: EncryptedMemory) -> McpSdkServerConfig:
    """The memory commands over ``memory`` as an in-process MCP server."""
    return create_sdk_mcp_server(SERVER, tools=memory_tools(memory))


def agent_options(server: McpStdioServerConfig | McpSdkServerConfig, **options: Any) -> ClaudeAgentOptions:
    """Options for an agent whose only tools are the memory's, allowed without asking, with
    the memory protocol appended to Claude Code's system prompt."""
    return ClaudeAgentOptions(
        mcp_servers={SERVER: server},
        tools=[],  # no built-in tools: no shell, no file edits
        allowed_tools=ALLOWED,
        system_prompt={"type": "preset", "preset": "claude_code", "append": INSTRUCTIONS},
        **options,
    )


async def ask(prompt: str, options: ClaudeAgentOptions) -> str:
    """Run the agent on ``prompt`` (this needs the Claude Code CLI and Claude); its last text."""
    answer = ""
    async for message in query(prompt=prompt, options=options):
        if isinstance(message, AssistantMessage):
            for block in message.content:
                if isinstance(block, TextBlock):
                    answer = block.text
    return answer


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="An agent with s3memory's encrypted memory.")
    parser.add_argument("prompt")
    parser.add_argument("--in-process", action="store_true", help="the memory tools in this process, not s3memory mcp")
    args = parser.parse_args(argv)
    user = os.environ.get("S3MEMORY_USER", "local")
    if args.in_process:
        # The settings s3memory mcp would read (the embedded default without S3MEMORY_BUCKET).
        memory = Settings.from_environment(user=user).open(actor="agent-sdk")
        try:
            print(asyncio.run(ask(args.prompt, agent_options(in_process_server(memory)))))
        finally:
            memory.close()
    else:
        print(asyncio.run(ask(args.prompt, agent_options(stdio_server({"S3MEMORY_USER": user})))))


if __name__ == "__main__":
    main(sys.argv[1:])
