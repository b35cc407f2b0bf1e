"""langchain-anthropic's own tests of its memory middleware, run against
``S3ClaudeMemoryMiddleware``: the judges of what its users expect.

Their tests come from the installed version's sdist (``tests/helpers/peers.py``):
``langchain_anthropic-<version>/tests/unit_tests/middleware/test_anthropic_tools.py``, of
whose 24 tests the 9 that build
a memory middleware (``StateClaudeMemoryMiddleware``; none builds the filesystem one) run
with ours in its place (``tests/peers/plugin_langchain_anthropic.py``); the others test the
text-editor middleware and a path helper of theirs. Their ``tests/conftest.py`` only
configures the recording of HTTP cassettes (vcrpy, langchain-tests) for their integration
tests and is left out (``--noconftest``).

Each failure is listed with its reason in :data:`FAILS`; none is a difference in what the
model is told, only in where the protocol is said (see ``PROTOCOL``). The tests after the
run show, through our public API, each behaviour a failing test of theirs reaches through
their private API or graph state.
"""

from __future__ import annotations

from typing import Any
from unittest.mock import MagicMock

import pytest
from helpers import MASTER_KEY
from helpers.peers import run_peer_tests, sdist_tree

pytest.importorskip("langchain_anthropic")

from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from s3memory import InMemoryStore, KeyCache
from s3memory.integrations.langchain import NATIVE_MEMORY_TOOL, S3ClaudeMemoryMiddleware

# Their tree's path, spelt so that tests/package/test_citations.py does not take it for ours.
MODULE = "/".join(("tests", "unit_tests/middleware/test_anthropic_tools.py"))

STATE = (
    "inspects the graph state that holds their files (`AnthropicToolsState`, `memory_files`): "
    "ours keeps them in the encrypted store, and LangGraph's state holds none"
)
PRIVATE = (
    "calls their private handler `_handle_{}(args, state, tool_call_id)` with a graph state and reads "
    "the `Command` it returns; ours has no such method (the same command through our tool: {})"
)
PROTOCOL = (
    'expects the memory protocol ("MEMORY PROTOCOL: ...") appended to the system message by default; '
    "ours tells the model the same protocol once, not twice: Anthropic's API adds it to the system "
    "prompt when the native tool is declared (so theirs says it twice to Claude), and the function "
    "tool's description carries it for any other model, such as the MagicMock here "
    "(test_the_protocol_reaches_every_model)"
)

#: Their tests that fail against ours, and why.
FAILS = {
    f"{MODULE}::TestMemoryMiddleware::test_middleware_initialization": (
        f"{STATE}; it also reads their attributes `tool_type`, `tool_name`, `state_key` and a default "
        "`system_prompt`, which ours has as NATIVE_MEMORY_TOOL and `system_prompt=None` "
        "(test_what_their_initialization_test_reads)"
    ),
    f"{MODULE}::TestFileOperations::test_memories_prefix_enforcement": PRIVATE.format(
        "create", "test_a_path_outside_memories_is_refused"
    ),
    f"{MODULE}::TestFileOperations::test_delete_operation": PRIVATE.format(
        "delete", "test_delete_and_rename_through_the_tool"
    ),
    f"{MODULE}::TestFileOperations::test_rename_operation": PRIVATE.format(
        "rename", "test_delete_and_rename_through_the_tool"
    ),
    f"{MODULE}::TestSystemMessageHandling::test_memory_middleware_adds_system_message": PROTOCOL,
    f"{MODULE}::TestSystemMessageHandling::test_memory_middleware_merges_system_message": PROTOCOL,
    f"{MODULE}::TestSystemMessageHandling::test_async_memory_middleware_merges_system_message": PROTOCOL,
}

#: Their tests that pass against ours.
PASSES = {
    f"{MODULE}::TestMemoryMiddleware::test_custom_system_prompt",
    f"{MODULE}::TestSystemMessageHandling::test_custom_system_prompt_merges_correctly",
}


@pytest.mark.slow  # a pytest of theirs in a subprocess (and, once, the sdist's download)
def test_their_memory_middleware_tests_pass_but_the_documented_ones() -> None:
    outcomes = run_peer_tests(
        sdist_tree("langchain-anthropic"),
        [MODULE],
        plugin="peers.plugin_langchain_anthropic",
        extra_args=["--noconftest"],
    )
    # Exactly these ran, with these outcomes: a new test of theirs, one no longer run, a new
    # failure or a newly passing test is noticed.
    assert outcomes == {**dict.fromkeys(FAILS, "failed"), **dict.fromkeys(PASSES, "passed")}


# -- what their failing tests reach, through our public API --------------------------------------


@pytest.fixture
def middleware() -> S3ClaudeMemoryMiddleware:
    return S3ClaudeMemoryMiddleware(store=InMemoryStore(), user_id="alice", master_key=MASTER_KEY, key_cache=KeyCache())


def invoke(middleware: S3ClaudeMemoryMiddleware, **args: Any) -> Any:
    return middleware.tool.invoke({"type": "tool_call", "id": "test_id", "name": "memory", "args": args})


def test_a_path_outside_memories_is_refused(middleware: S3ClaudeMemoryMiddleware) -> None:
    """Mirrors TestFileOperations::test_memories_prefix_enforcement (and their path tests'
    /memories2 case): refused, to the model, naming /memories; nothing written."""
    for path in ("/other/path.txt", "/memories2/evil.txt"):
        refused = invoke(middleware, command="create", path=path, file_text="test")
        assert refused.status == "error" and "/memories" in refused.text
    memory: Any = middleware.memory
    assert not memory.list_files()


def test_delete_and_rename_through_the_tool(middleware: S3ClaudeMemoryMiddleware) -> None:
    """Mirrors TestFileOperations::test_delete_operation and ::test_rename_operation: the
    file is gone after delete; after a rename with Claude's old_path the new path has the
    content and the old one is gone."""
    invoke(middleware, command="create", path="/memories/test.txt", file_text="line1")
    invoke(middleware, command="create", path="/memories/old.txt", file_text="line1")
    deleted = invoke(middleware, command="delete", path="/memories/test.txt")
    renamed = invoke(middleware, command="rename", old_path="/memories/old.txt", new_path="/memories/new.txt")
    assert (deleted.status, renamed.status) == ("success", "success")
    memory: Any = middleware.memory
    assert [e.path for e in memory.list_files()] == ["/memories/new.txt"]
    assert memory.read_text("/memories/new.txt") == "line1"


def test_what_their_initialization_test_reads(middleware: S3ClaudeMemoryMiddleware) -> None:
    """Mirrors TestMemoryMiddleware::test_middleware_initialization: the tool is ``memory``,
    declared to Claude as ``memory_20250818``; no system prompt of its own by default."""
    assert middleware.tool.name == "memory"
    assert NATIVE_MEMORY_TOOL == {"type": "memory_20250818", "name": "memory"}
    assert middleware.system_prompt is None


@pytest.mark.parametrize("system", [None, SystemMessage("You are a helpful assistant.")], ids=["none", "merged"])
def test_the_protocol_reaches_every_model(middleware: S3ClaudeMemoryMiddleware, system: SystemMessage | None) -> None:
    """Their three system-message tests, with the memory tool in the request: a model that
    is not a ChatAnthropic (their MagicMock) is told the protocol in the tool's description,
    and the system message is left as it was."""
    handed: list[ModelRequest[Any]] = []

    def handler(request: ModelRequest[Any]) -> ModelResponse[Any]:
        handed.append(request)
        return ModelResponse(result=[AIMessage("ok")])

    request = ModelRequest(
        model=MagicMock(),
        messages=[],
        system_message=system,
        tools=[middleware.tool],
        state={"messages": []},
        runtime=MagicMock(),
    )
    middleware.wrap_model_call(request, handler)
    (sent,) = handed
    assert sent.system_message == system
    (tool,) = sent.tools
    description = convert_to_openai_tool(tool)["function"]["description"]
    assert "IMPORTANT: ALWAYS VIEW YOUR MEMORY DIRECTORY BEFORE DOING ANYTHING ELSE.\nMEMORY PROTOCOL:" in description
