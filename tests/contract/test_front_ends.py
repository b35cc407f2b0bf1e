"""One command script through every front end: the same commands, the same answers.

The front ends are ``EncryptedMemory.execute``, ``S3MemoryTool.call``,
``AsyncS3MemoryTool.call``, the MCP server (in process, with the mcp package's client) and
the command line (``s3memory.cli.main``, in process). The script covers the six commands,
each succeeding and refused with the contract's error strings. A refusal is shown as each
front end shows one: ``S3MemoryError`` (``execute``), ``ToolError`` whose content is the
text (the tools), an ``isError`` result of one text block (MCP), one ``Error: ...`` line on
stderr and exit status 1 (the CLI, which prefixes "Error: " where the text has none).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from anthropic.lib.tools import ToolError

from s3memory import (
    AsyncS3MemoryTool,
    EncryptedMemory,
    InMemoryStore,
    KeyCache,
    S3MemoryError,
    S3MemoryTool,
    open_memory,
)
from s3memory.stores import ObjectInfo
from s3memory.testing import TEST_MASTER_KEY

Outcome = tuple[bool, str]  # (refused, text)


def answer(text: str) -> Outcome:
    return False, text


def refused(text: str) -> Outcome:
    return True, text


LISTING = (
    "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n"
)
NOTES = "Here's the content of /memories/notes.md with line numbers:\n"
EDITED = "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"

SCRIPT: list[tuple[dict[str, Any], Outcome]] = [
    # view: an empty memory, a file, a range, and what is refused
    ({"command": "view", "path": "/memories"}, answer(LISTING + "0B\t/memories")),
    (
        {"command": "create", "path": "/memories/notes.md", "file_text": "alpha\nbeta\ncafé ☕\n"},
        answer("File created successfully at: /memories/notes.md"),
    ),
    (
        {"command": "view", "path": "/memories/notes.md"},
        answer(NOTES + "     1\talpha\n     2\tbeta\n     3\tcafé ☕\n     4\t"),
    ),
    (
        {"command": "view", "path": "/memories/notes.md", "view_range": [2, -1]},
        answer(NOTES + "     2\tbeta\n     3\tcafé ☕\n     4\t"),
    ),
    (
        {"command": "view", "path": "/memories/notes.md", "view_range": [2, 2]},
        answer(NOTES + "     2\tbeta"),
    ),
    (
        {"command": "view", "path": "/memories/notes.md", "view_range": [5, 9]},
        refused(
            "Error: Invalid `view_range` parameter: [5, 9]. "
            "It should be [start, end] with 1 <= start <= 4, and end >= start or end == -1."
        ),
    ),
    (
        {"command": "view", "path": "/memories/none.md"},
        refused("The path /memories/none.md does not exist. Please provide a valid path."),
    ),
    (
        {"command": "view", "path": "/memories/../etc/passwd"},
        refused(
            "Path /memories/../etc/passwd would escape /memories directory: "
            "'..' segments (directory traversal) are not allowed"
        ),
    ),
    # create: never overwrites, only under /memories
    (
        {"command": "create", "path": "/memories/notes.md", "file_text": "again"},
        refused("Error: File /memories/notes.md already exists"),
    ),
    (
        {"command": "create", "path": "/elsewhere/a.md", "file_text": "x"},
        refused("Path must start with /memories, got: /elsewhere/a.md (a path is /memories or starts with /memories/)"),
    ),
    (
        {"command": "create", "path": "/memories/twice.md", "file_text": "same same"},
        answer("File created successfully at: /memories/twice.md"),
    ),
    # str_replace: exactly one occurrence
    (
        {"command": "str_replace", "path": "/memories/notes.md", "old_str": "beta", "new_str": "BETA"},
        answer(EDITED + "     1\talpha\n     2\tBETA\n     3\tcafé ☕\n     4\t"),
    ),
    (
        {"command": "str_replace", "path": "/memories/notes.md", "old_str": "delta", "new_str": "x"},
        refused("No replacement was performed, old_str `delta` did not appear verbatim in /memories/notes.md."),
    ),
    (
        {"command": "str_replace", "path": "/memories/twice.md", "old_str": "same", "new_str": "x"},
        refused(
            "No replacement was performed. Multiple occurrences of old_str `same` in lines: 1, 1. "
            "Please ensure it is unique"
        ),
    ),
    (
        {"command": "str_replace", "path": "/memories/none.md", "old_str": "a", "new_str": "b"},
        refused("Error: The path /memories/none.md does not exist. Please provide a valid path."),
    ),
    # insert: after a line, within the file
    (
        {"command": "insert", "path": "/memories/notes.md", "insert_line": 0, "insert_text": "# Notes"},
        answer("The file /memories/notes.md has been edited."),
    ),
    (
        {"command": "insert", "path": "/memories/notes.md", "insert_line": 99, "insert_text": "x"},
        refused(
            "Error: Invalid `insert_line` parameter: 99. It should be within the range of lines of the file: [0, 4]"
        ),
    ),
    (
        {"command": "insert", "path": "/memories/none.md", "insert_line": 0, "insert_text": "x"},
        refused("Error: The path /memories/none.md does not exist"),
    ),
    (
        {"command": "view", "path": "/memories/notes.md"},
        answer(NOTES + "     1\t# Notes\n     2\talpha\n     3\tBETA\n     4\tcafé ☕\n     5\t"),
    ),
    # rename: never overwrites
    (
        {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/d/notes.md"},
        answer("Successfully renamed /memories/notes.md to /memories/d/notes.md"),
    ),
    (
        {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/x.md"},
        refused("Error: The path /memories/notes.md does not exist"),
    ),
    (
        {"command": "rename", "old_path": "/memories/twice.md", "new_path": "/memories/d/notes.md"},
        refused("Error: The destination /memories/d/notes.md already exists"),
    ),
    (
        {"command": "view", "path": "/memories"},
        answer(LISTING + "38B\t/memories\n29B\t/memories/d/\n29B\t/memories/d/notes.md\n9B\t/memories/twice.md"),
    ),
    # delete: a file or a directory, never /memories itself
    (
        {"command": "delete", "path": "/memories/none.md"},
        refused("Error: The path /memories/none.md does not exist"),
    ),
    (
        {"command": "delete", "path": "/memories"},
        refused("Error: Cannot delete the /memories directory itself"),
    ),
    ({"command": "delete", "path": "/memories/d"}, answer("Successfully deleted /memories/d")),
    (
        {"command": "insert", "path": "/memories/d", "insert_line": 0, "insert_text": "x"},
        refused("Error: The path /memories/d does not exist"),
    ),
    ({"command": "view", "path": "/memories"}, answer(LISTING + "9B\t/memories\n9B\t/memories/twice.md")),
    ({"command": "delete", "path": "/memories/twice.md"}, answer("Successfully deleted /memories/twice.md")),
    ({"command": "view", "path": "/memories"}, answer(LISTING + "0B\t/memories")),
]

COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")


def fresh_memory() -> EncryptedMemory:
    return open_memory(user_id="alice", store=InMemoryStore(), master_key=TEST_MASTER_KEY, key_cache=KeyCache())


def arguments(command: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in command.items() if name != "command"}


# -- the front ends: each runs the whole script and reports what it showed ----------------------


def run_execute(script: list[dict[str, Any]], context: Context) -> list[Outcome]:
    outcomes: list[Outcome] = []
    memory = fresh_memory()
    try:
        for command in script:
            try:
                outcomes.append(answer(memory.execute(command)))
            except S3MemoryError as error:
                outcomes.append(refused(str(error)))
    finally:
        memory.close()
    return outcomes


def tool_refusal(error: ToolError) -> Outcome:
    """What the SDK's tool runner sends back (with ``is_error``): the error's ``content``."""
    assert isinstance(error.content, str)
    assert str(error) == error.content
    return refused(error.content)


def tool_outcome(call: Callable[[], str]) -> Outcome:
    try:
        text = call()
    except ToolError as error:
        return tool_refusal(error)
    assert isinstance(text, str)
    return answer(text)


def run_tool(script: list[dict[str, Any]], context: Context) -> list[Outcome]:
    tool = S3MemoryTool(memory=fresh_memory())
    try:
        return [tool_outcome(functools.partial(tool.call, command)) for command in script]
    finally:
        tool.memory.close()


def run_async_tool(script: list[dict[str, Any]], context: Context) -> list[Outcome]:
    tool = AsyncS3MemoryTool(memory=fresh_memory())

    async def drive() -> list[Outcome]:
        outcomes: list[Outcome] = []
        for command in script:
            try:
                outcomes.append(answer(await tool.call(command)))
            except ToolError as error:
                outcomes.append(tool_refusal(error))
        return outcomes

    try:
        return anyio.run(drive)
    finally:
        tool.memory.close()


def run_mcp(script: list[dict[str, Any]], context: Context) -> list[Outcome]:
    from mcp import Client
    from mcp.types import CallToolResult, TextContent

    from s3memory.mcp_server import build_server

    memory = fresh_memory()

    async def drive() -> list[Outcome]:
        outcomes: list[Outcome] = []
        async with Client(build_server(lambda: memory)) as client:
            for command in script:
                result = await client.call_tool(command["command"], arguments(command))
                assert isinstance(result, CallToolResult)
                assert result.structured_content is None
                [block] = result.content
                assert isinstance(block, TextContent)
                outcomes.append((bool(result.is_error), block.text))
        return outcomes

    try:
        return anyio.run(drive)
    finally:
        memory.close()


def cli_argv(command: dict[str, Any]) -> list[str]:
    """The command line for a command: its options, then ``--``, then its arguments."""
    name, options = command["command"], []
    if name == "view":
        positional = [command["path"]]
        if "view_range" in command:
            options = ["--range", *(str(n) for n in command["view_range"])]
    elif name == "create":
        positional = [command["path"], command["file_text"]]
    elif name == "str_replace":
        name, positional = "str-replace", [command["path"], command["old_str"], command["new_str"]]
    elif name == "insert":
        positional = [command["path"], str(command["insert_line"]), command["insert_text"]]
    elif name == "delete":
        positional = [command["path"]]
    else:
        positional = [command["old_path"], command["new_path"]]
    return [name, *options, "--", *positional]


def run_cli(script: list[dict[str, Any]], context: Context) -> list[Outcome]:
    from s3memory.cli import EXIT_REFUSED, main

    outcomes: list[Outcome] = []
    for command in script:
        status = main(cli_argv(command))
        out, err = context.capsys.readouterr()
        if status == 0:
            assert err == "" and out.endswith("\n"), (command, out, err)
            outcomes.append(answer(out[:-1]))
        else:
            assert (status, out) == (EXIT_REFUSED, ""), (command, status, out, err)
            assert err.endswith("\n") and err.count("\n") == 1 and err.startswith("Error: "), (command, err)
            outcomes.append(refused(err[:-1]))
    return outcomes


def as_cli_shows(outcome: Outcome) -> Outcome:
    """The CLI's error line starts with "Error: " even where the contract's text does not."""
    refused_, text = outcome
    return (refused_, text) if not refused_ or text.startswith("Error") else (True, f"Error: {text}")


@dataclass
class Context:
    capsys: pytest.CaptureFixture[str]


@dataclass(frozen=True)
class FrontEnd:
    run: Callable[[list[dict[str, Any]], Context], list[Outcome]]
    shows: Callable[[Outcome], Outcome] = lambda outcome: outcome


FRONT_ENDS = {
    "execute": FrontEnd(run_execute),
    "tool": FrontEnd(run_tool),
    "async-tool": FrontEnd(run_async_tool),
    "mcp": FrontEnd(run_mcp),
    "cli": FrontEnd(run_cli, as_cli_shows),
}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The CLI's embedded default in ``tmp_path``, with no other S3MEMORY_* setting."""
    import os

    for name in [name for name in os.environ if name.startswith("S3MEMORY_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("S3MEMORY_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("S3MEMORY_USER", "alice")
    return tmp_path / "home"


@pytest.mark.parametrize("front_end", list(FRONT_ENDS))
def test_every_front_end_answers_the_script_alike(
    front_end: str, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chosen = FRONT_ENDS[front_end]
    outcomes = chosen.run([command for command, _ in SCRIPT], Context(capsys))
    assert len(outcomes) == len(SCRIPT)
    for step, ((command, expected), got) in enumerate(zip(SCRIPT, outcomes, strict=True)):
        assert got == chosen.shows(expected), f"step {step}: {command}"
    if front_end == "cli":  # on the embedded default in tmp_path, nowhere else
        assert [path.name for path in home.iterdir() if path.is_dir()] == ["store"]


def test_the_script_covers_every_command_both_ways() -> None:
    assert {(command["command"], outcome[0]) for command, outcome in SCRIPT} == {
        (name, refused_) for name in COMMANDS for refused_ in (False, True)
    }


class BrokenStore(InMemoryStore):
    """Fails listing with something that is no StorageError."""

    def list(self, prefix: str, *, limit: int | None = None) -> Iterator[ObjectInfo]:
        raise RuntimeError("internal detail: s3://secret-bucket/key")


def test_an_unexpected_failure_reads_alike_on_the_tools_and_mcp(caplog: pytest.LogCaptureFixture) -> None:
    """No front end passes the details of a bug to the model; each logs them."""
    from mcp import Client

    from s3memory.mcp_server import build_server

    def broken() -> EncryptedMemory:
        return open_memory(user_id="alice", store=BrokenStore(), master_key=TEST_MASTER_KEY, key_cache=KeyCache())

    view = {"command": "view", "path": "/memories"}
    expected = refused("Error: The memory backend failed unexpectedly (RuntimeError).")
    assert tool_outcome(lambda: S3MemoryTool(memory=broken()).call(view)) == expected

    async def through_async_tool() -> Outcome:
        try:
            return answer(await AsyncS3MemoryTool(memory=broken()).call(view))
        except ToolError as error:
            return tool_refusal(error)

    async def through_mcp() -> Outcome:
        async with Client(build_server(broken)) as client:
            result = await client.call_tool("view", arguments(view))
            [block] = result.content
            return bool(result.is_error), getattr(block, "text", "")

    assert anyio.run(through_async_tool) == expected
    assert anyio.run(through_mcp) == expected
    logged = [record for record in caplog.records if record.getMessage() == "unexpected error in the s3memory backend"]
    assert len(logged) == 3 and all("internal detail" in str(record.exc_info) for record in logged)


def test_both_memory_classes_are_a_memory_as_the_faces_take_it() -> None:
    """``Memory`` (what a face may call) is what both classes offer; mypy checks the
    signatures, this the names, so that a method added to the protocol and not to a class
    fails here too."""
    import inspect

    from s3memory import EncryptedMemory, Memory, MountedMemory

    wanted = {name for name, _ in inspect.getmembers(Memory) if not name.startswith("_")} | {"limits"}
    for cls in (EncryptedMemory, MountedMemory):
        missing = sorted(name for name in wanted if name != "limits" and not callable(getattr(cls, name, None)))
        assert missing == [], cls.__name__
    assert "redact" not in wanted and "pending" not in wanted  # one store's own, on purpose
