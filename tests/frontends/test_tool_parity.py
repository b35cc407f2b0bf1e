"""The SDK tools do what the SDK's own local tool does: clear_all_memory, and options that a
type checker sees."""

from __future__ import annotations

import inspect
import typing

import pytest

from s3memory import (
    AsyncS3MemoryTool,
    InMemoryStore,
    MemoryOptions,
    S3MemoryTool,
    generate_master_key,
    open_memory,
)


def test_clear_all_memory_deletes_every_file_of_this_user_only() -> None:
    store, key = InMemoryStore(), generate_master_key()
    alice = S3MemoryTool(user_id="alice", store=store, master_key=key)
    bob = S3MemoryTool(user_id="bob", store=store, master_key=key)
    for path in ("/memories/a.md", "/memories/d/b.md", "/memories/d/e/c.md"):
        alice.memory.create(path, "x")
    bob.memory.create("/memories/mine.md", "bob's")
    assert alice.clear_all_memory() == "All memory cleared"
    assert alice.memory.view("/memories") == (
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and "
        "node_modules:\n0B\t/memories"
    )
    assert bob.memory.read_text("/memories/mine.md") == "bob's"
    assert alice.memory.create("/memories/again.md", "y")  # the keys stayed: usable at once
    assert alice.clear_all_memory() == "All memory cleared"  # and again, on an empty memory


def test_async_clear_all_memory() -> None:
    import anyio

    tool = AsyncS3MemoryTool(user_id="alice", store=InMemoryStore(), master_key=generate_master_key())
    tool.memory.create("/memories/a.md", "x")
    assert anyio.run(tool.clear_all_memory) == "All memory cleared"
    assert not tool.memory.list_files()


def test_the_tools_options_are_open_memorys() -> None:
    """``**options: Unpack[MemoryOptions]``, and MemoryOptions never drifts from open_memory
    (but for ``mounts``: a tool over mounted stores takes ``memory=``, a ``MountedMemory``)."""
    parameters = inspect.signature(open_memory).parameters
    hints = typing.get_type_hints(MemoryOptions)
    assert set(hints) == set(parameters) - {"mounts"}
    for tool in (S3MemoryTool, AsyncS3MemoryTool):
        options = inspect.signature(tool.__init__).parameters["options"]
        assert options.kind is inspect.Parameter.VAR_KEYWORD
        assert "Unpack[MemoryOptions]" in str(options.annotation)


def test_a_tool_without_user_id_says_so() -> None:
    with pytest.raises(TypeError, match="give user_id="):
        S3MemoryTool(store=InMemoryStore())
