"""The LangChain middleware (s3memory.integrations.langchain) driven by real LangChain agents.

Every agent is ``langchain.agents.create_agent``. The model is either a scripted fake chat
model that records what it was sent, or the real ``ChatAnthropic`` whose HTTP requests are
answered in-process (httpx2's transport patched), so what goes on the wire is checked
without network or API key.
"""

from __future__ import annotations

import asyncio
import importlib.util
import io
import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import BUCKET, MASTER_KEY, REPO
from helpers.fake_messages_api import MessagesAPI, use

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain.tools import ToolRuntime
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field, SecretStr

from s3memory import (
    ConfigurationError,
    EncryptedMemory,
    InMemoryStore,
    InvalidPathError,
    KeyCache,
    Mount,
    MountedMemory,
    NoUserError,
    PathExistsError,
    PreconditionFailedError,
    ThreadUserError,
    UserMemories,
    memory_stores_prompt,
    open_memory,
)
from s3memory.integrations._common import MEMORY_TOOL_DESCRIPTION
from s3memory.integrations.langchain import (
    MEMORY_INPUT_SCHEMA,
    NATIVE_MEMORY_TOOL,
    S3ClaudeMemoryMiddleware,
    memory_tool,
)
from s3memory.stores import DelegatingStore, ObjectStore

WRITES = {"put", "copy", "delete", "delete_version", "purge", "put_tags"}


class Recording(DelegatingStore):
    """Every request's verb, and the thread it ran on."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.requests: list[str] = []
        self.threads: set[int] = set()

    def _call(self, verb: str, perform: Callable[[], Any]) -> Any:
        self.requests.append(verb)
        self.threads.add(threading.get_ident())
        return perform()


class ScriptedChatModel(GenericFakeChatModel):
    """GenericFakeChatModel (which refuses ``bind_tools``, as create_agent calls it) that
    accepts tools and records the tools bound and every message list it was sent."""

    bound: list[list[Any]] = Field(default_factory=list)
    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        self.bound.append(list(tools))
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        result: ChatResult = super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
        return result


def call(i: int, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": "memory", "args": args, "id": f"c{i}", "type": "tool_call"}])


def scripted(*turns: AIMessage) -> ScriptedChatModel:
    return ScriptedChatModel(messages=iter([*turns, AIMessage(content="done")]))


def run(
    middleware: AgentMiddleware[Any, Any, Any], model: Any, *, system_prompt: str | SystemMessage | None = None
) -> list[ToolMessage]:
    """One agent run; the tool results, in order."""
    agent = create_agent(model, tools=[], middleware=[middleware], system_prompt=system_prompt)
    out = agent.invoke({"messages": [HumanMessage("remember")]})
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


@pytest.fixture
def store() -> Recording:
    return Recording(InMemoryStore())


@pytest.fixture
def memory(store: Recording) -> EncryptedMemory:
    return open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())


# -- the six commands ----------------------------------------------------------------------


def test_all_six_commands_with_the_fields_claude_sends(memory: EncryptedMemory) -> None:
    """rename with old_path/new_path and insert with insert_text: the two inputs the stock
    middleware cannot take (see test_the_stock_middleware_fails_on_claudes_rename_and_insert)."""
    model = scripted(
        call(1, command="view", path="/memories"),
        call(2, command="create", path="/memories/prefs.md", file_text="tea: green\ncoffee: no\n"),
        call(3, command="str_replace", path="/memories/prefs.md", old_str="green", new_str="oolong"),
        call(4, command="insert", path="/memories/prefs.md", insert_line=1, insert_text="milk: no\n"),
        call(5, command="rename", old_path="/memories/prefs.md", new_path="/memories/tea.md"),
        call(6, command="view", path="/memories/tea.md", view_range=[2, 3]),
        call(7, command="create", path="/memories/scratch/todo.md", file_text="x\n"),
        call(8, command="delete", path="/memories/scratch"),
    )
    results = run(S3ClaudeMemoryMiddleware(memory), model)
    assert [m.status for m in results] == ["success"] * 8
    assert [m.tool_call_id for m in results] == [f"c{i}" for i in range(1, 9)]
    assert results[0].text.endswith("0B\t/memories")
    assert results[1].content == "File created successfully at: /memories/prefs.md"
    assert results[3].content == "The file /memories/prefs.md has been edited."
    assert results[4].content == "Successfully renamed /memories/prefs.md to /memories/tea.md"
    assert results[5].content == (
        "Here's the content of /memories/tea.md with line numbers:\n     2\tmilk: no\n     3\tcoffee: no"
    )
    assert results[7].content == "Successfully deleted /memories/scratch"
    assert memory.read_text("/memories/tea.md") == "tea: oolong\nmilk: no\ncoffee: no\n"
    assert [e.path for e in memory.list_files()] == ["/memories/tea.md"]
    # each answer went back to the model: its last request carries all eight
    assert [m.content for m in model.seen[-1] if isinstance(m, ToolMessage)] == [m.content for m in results]


def test_any_chat_model_gets_the_function_tool_with_the_protocol(memory: EncryptedMemory) -> None:
    model = scripted(call(1, command="view", path="/memories"))
    run(S3ClaudeMemoryMiddleware(memory), model, system_prompt="Be brief.")
    assert model.bound and all(tools == model.bound[0] for tools in model.bound)  # every model call
    (bound,) = model.bound[0]
    assert isinstance(bound, BaseTool)
    function = convert_to_openai_tool(bound)["function"]
    assert function["name"] == "memory"
    assert function["description"] == MEMORY_TOOL_DESCRIPTION
    parameters = function["parameters"]
    assert parameters["required"] == ["command"]
    assert parameters["properties"] == MEMORY_INPUT_SCHEMA["properties"]
    assert parameters["properties"]["command"]["enum"] == [
        "view",
        "create",
        "str_replace",
        "insert",
        "delete",
        "rename",
    ]
    # nothing appended to the system prompt: the tool's description carries the protocol
    assert model.seen[0][0] == SystemMessage(content="Be brief.")


def test_the_function_tool_alone_answers_a_tool_call(memory: EncryptedMemory) -> None:
    """Outside the middleware (any LangChain agent or ToolNode): a tool call in, a ToolMessage out."""
    memory.create("/memories/a.md", "hi\n")
    tool_ = memory_tool(memory)
    assert tool_.args_schema == MEMORY_INPUT_SCHEMA

    def invoke(**args: Any) -> Any:
        return tool_.invoke({"type": "tool_call", "id": "t1", "name": "memory", "args": args})

    with pytest.raises(InvalidPathError) as outside:
        memory.view("/etc/passwd")
    refused = invoke(command="view", path="/etc/passwd")
    assert isinstance(refused, ToolMessage) and refused.status == "error"
    assert refused.content == str(outside.value)
    viewed = invoke(command="view", path="/memories/a.md")
    assert isinstance(viewed, ToolMessage) and viewed.status == "success"
    assert viewed.content == memory.view("/memories/a.md")


class RacingEdits(DelegatingStore):
    """The first three conditional writes wait until all three are ready, so that the three
    edits have read the same version: two lose the compare-and-swap and must re-try."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.ready = threading.Barrier(3, timeout=10)
        self.waiting = 0
        self.lost = 0
        self.lock = threading.Lock()

    def put(self, key: str, body: bytes, metadata: Mapping[str, str], **conditions: Any) -> str:
        if conditions.get("if_match") is not None:
            with self.lock:
                self.waiting += 1
                wait = self.waiting <= 3
            if wait:
                self.ready.wait()
        try:
            return super().put(key, body, metadata, **conditions)
        except PreconditionFailedError:
            with self.lock:
                self.lost += 1
            raise


def test_one_turns_edits_of_one_file_all_land() -> None:
    """LangGraph runs a turn's tool calls concurrently; each edit is a compare-and-swap, so
    edits of the same file made in one turn are all applied."""
    store = RacingEdits(InMemoryStore())
    memory = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    memory.create("/memories/a.md", "one\ntwo\nthree\n")
    edits = [
        {"command": "str_replace", "path": "/memories/a.md", "old_str": "one", "new_str": "ONE"},
        {"command": "str_replace", "path": "/memories/a.md", "old_str": "two", "new_str": "TWO"},
        {"command": "insert", "path": "/memories/a.md", "insert_line": 3, "insert_text": "four"},
        {"command": "view", "path": "/memories"},
    ]
    turn = AIMessage(
        content="",
        tool_calls=[{"name": "memory", "args": a, "id": f"c{i}", "type": "tool_call"} for i, a in enumerate(edits)],
    )
    results = run(S3ClaudeMemoryMiddleware(memory), scripted(turn))
    assert [m.status for m in results] == ["success"] * 4
    assert memory.read_text("/memories/a.md") == "ONE\nTWO\nthree\nfour\n"
    assert store.lost >= 2  # the race happened (a re-try may lose again), and the re-tries made up for it


class SlowWrites(DelegatingStore):
    delay = 0.0

    def _call(self, verb: str, perform: Callable[[], Any]) -> Any:
        if verb == "put":
            time.sleep(self.delay)
        return perform()


@pytest.mark.slow  # the order of two calls set by a sleep
def test_one_turns_calls_are_not_ordered() -> None:
    """The gap the module docstring names: a call that needs an earlier one of the same turn
    can run first (here the create's write is slowed down), and the model sees its error."""
    store = SlowWrites(InMemoryStore())
    memory = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    memory.create("/memories/a.md", "one\n")  # the tenant key is made
    store.delay = 0.3
    calls = [
        {"command": "create", "path": "/memories/b.md", "file_text": "two\n"},
        {"command": "rename", "old_path": "/memories/b.md", "new_path": "/memories/c.md"},
    ]
    turn = AIMessage(
        content="",
        tool_calls=[{"name": "memory", "args": a, "id": f"c{i}", "type": "tool_call"} for i, a in enumerate(calls)],
    )
    created, renamed = run(S3ClaudeMemoryMiddleware(memory), scripted(turn))
    assert created.status == "success"
    assert renamed.status == "error"
    assert renamed.text == "Error: The path /memories/b.md does not exist"
    assert memory.read_text("/memories/b.md") == "two\n"


# -- errors ----------------------------------------------------------------------------------


def test_refusals_reach_the_model_as_errors_and_write_nothing(memory: EncryptedMemory, store: Recording) -> None:
    memory.create("/memories/a.md", "one\n")
    with pytest.raises(PathExistsError) as exists:
        memory.create("/memories/a.md", "two\n")
    with pytest.raises(InvalidPathError) as outside:
        memory.create("/memories/../etc/passwd", "x")
    store.requests.clear()
    model = scripted(
        call(1, command="create", path="/memories/a.md", file_text="two\n"),
        call(2, command="create", path="/memories/../etc/passwd", file_text="x"),
        call(3, command="str_replace", path="/memories/a.md", old_str="absent", new_str="y"),
        call(4, command="insert", path="/memories/a.md", insert_line="two", insert_text="x"),
        call(5, command="shred", path="/memories/a.md"),
        call(6, command="rename", path="/memories/a.md", new_path="/memories/b.md"),
    )
    results = run(S3ClaudeMemoryMiddleware(memory), model)
    assert [m.status for m in results] == ["error"] * 6
    assert results[0].content == str(exists.value) == "Error: File /memories/a.md already exists"
    assert results[1].content == str(outside.value)
    assert "/memories/a.md" in results[2].content and "did not appear verbatim" in results[2].content
    assert results[3].content == "Error: `insert_line` must be an integer."
    assert results[4].text.startswith("Error: Unknown command 'shred'.")
    assert results[5].content == "Error: Missing required parameter `old_path` for command `rename`."
    assert not [verb for verb in store.requests if verb in WRITES]
    assert memory.read_text("/memories/a.md") == "one\n"
    assert [m.status for m in model.seen[-1] if isinstance(m, ToolMessage)] == ["error"] * 6


class Failing(DelegatingStore):
    """A store that fails in a way s3memory does not expect, with a message that must not leak."""

    def _call(self, verb: str, perform: Callable[[], Any]) -> Any:
        raise RuntimeError("connection to 10.0.0.7 reset while reading alice/secret-plans.md")


def test_an_unexpected_backend_failure_gives_the_generic_message(caplog: pytest.LogCaptureFixture) -> None:
    memory = open_memory(user_id="alice", store=Failing(InMemoryStore()), master_key=MASTER_KEY, key_cache=KeyCache())
    with caplog.at_level(logging.ERROR, logger="s3memory"):
        (result,) = run(S3ClaudeMemoryMiddleware(memory), scripted(call(1, command="view", path="/memories")))
    assert result.status == "error"
    assert result.content == "Error: The memory backend failed unexpectedly (RuntimeError)."
    assert any(r.exc_info and "secret-plans" in str(r.exc_info[1]) for r in caplog.records)  # logged, not shown


# -- the native tool on the wire (the real ChatAnthropic) -----------------------------------


WIRE_SCRIPT = [
    [use("t1", command="create", path="/memories/a.md", file_text="hi\n")],
    [use("t2", command="create", path="/memories/a.md", file_text="again\n")],
    [{"type": "text", "text": "Saved."}],
]


@pytest.fixture
def messages_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[list[list[dict[str, Any]]]], MessagesAPI]]:
    """Answers every request of the anthropic client (httpx2 underneath) in-process."""
    pytest.importorskip("langchain_anthropic")
    import httpx2

    apis: list[MessagesAPI] = []

    def handle(transport: Any, request: Any) -> Any:
        return apis[-1](request)

    async def ahandle(transport: Any, request: Any) -> Any:
        return apis[-1](request)

    monkeypatch.setattr(httpx2.HTTPTransport, "handle_request", handle)
    monkeypatch.setattr(httpx2.AsyncHTTPTransport, "handle_async_request", ahandle)

    def make(script: list[list[dict[str, Any]]]) -> MessagesAPI:
        apis.append(MessagesAPI(script))
        return apis[-1]

    yield make


def chat_anthropic() -> Any:
    from langchain_anthropic import ChatAnthropic

    # Not a real model name: the anthropic SDK warns about deprecated ones.
    return ChatAnthropic(model_name="claude-scripted", api_key=SecretStr("test-key"), max_retries=0)  # type: ignore[call-arg]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_claude_gets_its_native_memory_tool(
    messages_api: Callable[..., MessagesAPI], memory: EncryptedMemory, asynchronous: bool
) -> None:
    api = messages_api(WIRE_SCRIPT)
    agent = create_agent(
        chat_anthropic(), tools=[], middleware=[S3ClaudeMemoryMiddleware(memory)], system_prompt="Be brief."
    )
    question: Any = {"messages": [HumanMessage("remember hi")]}
    out = asyncio.run(agent.ainvoke(question)) if asynchronous else agent.invoke(question)
    assert out["messages"][-1].content == "Saved."
    assert len(api.requests) == 3
    for headers, body in api.requests:
        assert body["tools"] == [NATIVE_MEMORY_TOOL] == [{"type": "memory_20250818", "name": "memory"}]
        assert "context-management-2025-06-27" in headers["anthropic-beta"]
        # the API adds the memory protocol for the native tool: nothing appended here
        assert body["system"] == "Be brief."
    assert [(r["tool_use_id"], r["is_error"], r["content"]) for r in api.tool_results(2)] == [
        ("t1", False, "File created successfully at: /memories/a.md"),
        ("t2", True, "Error: File /memories/a.md already exists"),
    ]
    assert memory.read_text("/memories/a.md") == "hi\n"


def test_native_false_sends_claude_the_function_tool(
    messages_api: Callable[..., MessagesAPI], memory: EncryptedMemory
) -> None:
    api = messages_api(WIRE_SCRIPT)
    agent = create_agent(chat_anthropic(), tools=[], middleware=[S3ClaudeMemoryMiddleware(memory, native=False)])
    agent.invoke({"messages": [HumanMessage("remember hi")]})
    headers, body = api.requests[0]
    (sent,) = body["tools"]
    assert sent["name"] == "memory" and sent["description"] == MEMORY_TOOL_DESCRIPTION
    assert sent["input_schema"]["required"] == ["command"]
    assert sent["input_schema"]["properties"] == MEMORY_INPUT_SCHEMA["properties"]
    assert "context-management-2025-06-27" not in headers.get("anthropic-beta", "")
    assert [r["is_error"] for r in api.tool_results(2)] == [False, True]
    assert memory.read_text("/memories/a.md") == "hi\n"


def test_the_descriptor_replaces_the_tool_in_place_and_only_if_present(memory: EncryptedMemory) -> None:
    """What the middleware hands the next handler, for tools another middleware may have
    reordered or filtered out (a tool selector)."""
    from langchain.agents.middleware import ModelRequest, ModelResponse

    @tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    middleware = S3ClaudeMemoryMiddleware(memory)
    handed: list[Any] = []

    def handler(request: ModelRequest[Any]) -> ModelResponse[Any]:
        handed.append(request.tools)
        return ModelResponse(result=[AIMessage("ok")])

    claude = chat_anthropic()
    for tools in ([weather, middleware.tool], [middleware.tool, weather], [weather]):
        middleware.wrap_model_call(ModelRequest(model=claude, messages=[], tools=list(tools)), handler)
    assert handed == [[weather, NATIVE_MEMORY_TOOL], [NATIVE_MEMORY_TOOL, weather], [weather]]


# -- async ----------------------------------------------------------------------------------


def test_ainvoke_runs_the_tool_off_the_event_loop(memory: EncryptedMemory, store: Recording) -> None:
    model = scripted(
        call(1, command="create", path="/memories/a.md", file_text="hi\n"),
        call(2, command="view", path="/memories/a.md"),
    )
    agent = create_agent(model, tools=[], middleware=[S3ClaudeMemoryMiddleware(memory, system_prompt="Remember.")])

    async def main() -> tuple[dict[str, Any], int]:
        return await agent.ainvoke({"messages": [HumanMessage("x")]}), threading.get_ident()

    out, loop_thread = asyncio.run(main())
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.content for m in results] == [
        "File created successfully at: /memories/a.md",
        "Here's the content of /memories/a.md with line numbers:\n     1\thi\n     2\t",
    ]
    assert store.threads and loop_thread not in store.threads  # each command ran in a worker thread
    assert model.seen[0][0] == SystemMessage(content="Remember.")  # awrap_model_call appended it


# -- system_prompt ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("agent_prompt", "expected"),
    [
        (None, "Mounted stores."),
        ("Be brief.", "Be brief.\n\nMounted stores."),
        (
            SystemMessage(content=[{"type": "text", "text": "Be brief."}]),
            [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Mounted stores."}],
        ),
    ],
    ids=["none", "text", "blocks"],
)
def test_system_prompt_is_appended(
    memory: EncryptedMemory, agent_prompt: str | SystemMessage | None, expected: Any
) -> None:
    model = scripted()
    run(S3ClaudeMemoryMiddleware(memory, system_prompt="Mounted stores."), model, system_prompt=agent_prompt)
    assert model.seen[0][0] == SystemMessage(content=expected)


# -- mounts ----------------------------------------------------------------------------------


def test_a_mounted_memory_and_its_read_only_store() -> None:
    store = InMemoryStore()
    standards = open_memory(user_id="org-standards", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    standards.create("/memories/style.md", "Use tabs.\n")
    mounted = open_memory(
        user_id="alice",
        store=store,
        master_key=MASTER_KEY,
        key_cache=KeyCache(),
        mounts=[Mount("standards", "org-standards", description="Coding standards")],
    )
    assert isinstance(mounted, MountedMemory)
    model = scripted(
        call(1, command="view", path="/memories/standards/style.md"),
        call(2, command="create", path="/memories/standards/mine.md", file_text="x"),
        call(3, command="str_replace", path="/memories/standards/style.md", old_str="tabs", new_str="spaces"),
        call(4, command="create", path="/memories/mine.md", file_text="tabs, says the standard\n"),
    )
    middleware = S3ClaudeMemoryMiddleware(memory=mounted, system_prompt=memory_stores_prompt(mounted))
    results = run(middleware, model)
    assert [m.status for m in results] == ["success", "error", "error", "success"]
    assert "     1\tUse tabs." in results[0].content
    assert results[1].content == (
        "Error: Cannot create /memories/standards/mine.md: /memories/standards is mounted read-only"
    )
    assert results[2].content == (
        "Error: Cannot edit /memories/standards/style.md: /memories/standards is mounted read-only"
    )
    assert 'path="/memories/standards/" access="read_only"' in model.seen[0][0].text
    assert standards.read_text("/memories/style.md") == "Use tabs.\n"
    assert [e.path for e in standards.list_files()] == ["/memories/style.md"]
    assert mounted.read_text("/memories/mine.md") == "tabs, says the standard\n"


# -- S3 (moto), built from open_memory's options -------------------------------------------


def test_on_s3_from_the_open_memory_options(s3_client: Any) -> None:
    middleware = S3ClaudeMemoryMiddleware(bucket=BUCKET, s3_client=s3_client, user_id="alice", master_key=MASTER_KEY)
    results = run(
        middleware,
        scripted(
            call(1, command="create", path="/memories/plan.md", file_text="launch on Tuesday\n"),
            call(2, command="str_replace", path="/memories/plan.md", old_str="Tuesday", new_str="Friday"),
        ),
    )
    assert [m.status for m in results] == ["success", "success"]
    reopened = open_memory(user_id="alice", bucket=BUCKET, s3_client=s3_client, master_key=MASTER_KEY)
    assert reopened.read_text("/memories/plan.md") == "launch on Friday\n"
    bodies = [
        s3_client.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read()
        for o in s3_client.list_objects_v2(Bucket=BUCKET)["Contents"]
    ]
    assert bodies and not any(b"Friday" in body for body in bodies)  # encrypted at rest


def test_memory_or_options_not_both_nor_neither(memory: EncryptedMemory) -> None:
    with pytest.raises(TypeError, match="not both"):
        S3ClaudeMemoryMiddleware(memory, user_id="bob")
    with pytest.raises(TypeError, match="not both"):
        S3ClaudeMemoryMiddleware(UserMemories(store=InMemoryStore(), master_key=MASTER_KEY), store=InMemoryStore())
    with pytest.raises(ConfigurationError, match=r"give bucket=\.\.\. .* or store=\.\.\."):
        S3ClaudeMemoryMiddleware()
    # A misspelt option is named, not taken for an option of open_memory.
    with pytest.raises(TypeError, match="unexpected keyword argument 'sytem_prompt'"):
        S3ClaudeMemoryMiddleware(memory, sytem_prompt="x")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'sytem_prompt'"):
        S3ClaudeMemoryMiddleware(store=InMemoryStore(), master_key=MASTER_KEY, sytem_prompt="x")  # type: ignore[call-arg]
    # user_id_from names each run's user: with one user's memory it would mean nothing.
    with pytest.raises(TypeError, match="user_id_from"):
        S3ClaudeMemoryMiddleware(memory, user_id_from=lambda runtime: "bob")
    with pytest.raises(TypeError, match="user_id_from"):
        memory_tool(store=InMemoryStore(), user_id="bob", master_key=MASTER_KEY, user_id_from=lambda runtime: "bob")
    tool = memory_tool(store=InMemoryStore(), user_id="bob", master_key=MASTER_KEY, key_cache=KeyCache())
    assert "File created" in tool.invoke({"command": "create", "path": "/memories/a.md", "file_text": "x"})


# -- many users through one agent ----------------------------------------------------------------


@dataclass
class Context:
    user_id: str


class ConversationModel(BaseChatModel):
    """A fake chat model with no state of its own, so that one agent serves concurrent runs:
    the run's first human message is its script (JSON: a list of turns, each a list of
    memory calls), and the n-th model call of a run answers its n-th turn, then "done"."""

    started: Any = None  # a threading.Barrier the first model call of each run waits at
    calls: list[str] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        return self

    @property
    def _llm_type(self) -> str:
        return "conversation"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        script = json.loads(next(m for m in messages if isinstance(m, HumanMessage)).text)
        turn = sum(isinstance(m, AIMessage) for m in messages)
        self.calls.append(script and script[0] and script[0][0].get("path"))
        if turn == 0 and self.started is not None:
            self.started.wait()  # every run is under way at once
        if turn < len(script):
            calls = [
                {"name": "memory", "args": a, "id": f"t{turn}.{i}", "type": "tool_call"}
                for i, a in enumerate(script[turn])
            ]
            message = AIMessage(content="", tool_calls=calls)  # type: ignore[arg-type]
        else:
            message = AIMessage(content="done")
        return ChatResult(generations=[ChatGeneration(message=message)])


def ask(*turns: list[dict[str, Any]]) -> dict[str, Any]:
    return {"messages": [HumanMessage(json.dumps(list(turns)))]}


def results(out: dict[str, Any]) -> list[str]:
    return [
        m.text if m.status == "success" else f"ERROR {m.text}" for m in out["messages"] if isinstance(m, ToolMessage)
    ]


def create(path: str, text: str) -> dict[str, Any]:
    return {"command": "create", "path": path, "file_text": text}


def view(path: str) -> dict[str, Any]:
    return {"command": "view", "path": path}


@pytest.fixture
def users(store: Recording) -> S3ClaudeMemoryMiddleware:
    """The middleware of a server: built once, with the store's options and no user_id."""
    return S3ClaudeMemoryMiddleware(store=store, master_key=MASTER_KEY, key_cache=KeyCache())


def memory_of(store: ObjectStore, user_id: str) -> EncryptedMemory:
    return open_memory(user_id=user_id, store=store, master_key=MASTER_KEY, key_cache=KeyCache())


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_one_agent_serves_two_users_each_in_their_own_memory(
    users: S3ClaudeMemoryMiddleware, store: Recording, asynchronous: bool
) -> None:
    assert isinstance(users.memory, UserMemories)
    agent = create_agent(ConversationModel(), tools=[], middleware=[users], context_schema=Context)

    def converse(user_id: str, *turns: list[dict[str, Any]]) -> list[str]:
        question: Any = ask(*turns)
        context = Context(user_id=user_id)
        if asynchronous:
            return results(asyncio.run(agent.ainvoke(question, context=context)))
        return results(agent.invoke(question, context=context))

    assert converse("alice", [create("/memories/notes.md", "alice: tea\n")]) == [
        "File created successfully at: /memories/notes.md"
    ]
    # bob sees none of alice's files, and his own file of the same name is his
    (bob_view,) = converse("bob", [view("/memories")])
    assert bob_view.endswith("0B\t/memories")
    assert converse("bob", [create("/memories/notes.md", "bob: coffee\n")], [view("/memories/notes.md")]) == [
        "File created successfully at: /memories/notes.md",
        "Here's the content of /memories/notes.md with line numbers:\n     1\tbob: coffee\n     2\t",
    ]
    (alice_read,) = converse("alice", [view("/memories/notes.md")])
    assert alice_read.endswith("     1\talice: tea\n     2\t")
    assert memory_of(store, "alice").read_text("/memories/notes.md") == "alice: tea\n"
    assert memory_of(store, "bob").read_text("/memories/notes.md") == "bob: coffee\n"


@pytest.mark.parametrize("how", ["threads", "ainvoke"])
def test_many_users_at_once_through_one_agent(users: S3ClaudeMemoryMiddleware, store: Recording, how: str) -> None:
    """Concurrent runs of one agent, one user each (in threads, or ``ainvoke`` gathered on one
    event loop): every run's first model call waits until all of them have started, so
    their memory calls overlap."""
    names = [f"user-{n}" for n in range(4)]
    model = ConversationModel(started=threading.Barrier(len(names), timeout=30))
    agent = create_agent(model, tools=[], middleware=[users], context_schema=Context)
    answers: dict[str, list[str]] = {}

    def question(user_id: str) -> Any:
        return ask([create(f"/memories/{user_id}.md", f"{user_id}\n")], [view("/memories")])

    def converse(user_id: str) -> None:
        answers[user_id] = results(agent.invoke(question(user_id), context=Context(user_id=user_id)))

    async def aconverse(user_id: str) -> None:
        answers[user_id] = results(await agent.ainvoke(question(user_id), context=Context(user_id=user_id)))

    async def gathered() -> None:
        await asyncio.gather(*(aconverse(name) for name in names))

    if how == "threads":
        threads = [threading.Thread(target=converse, args=(name,)) for name in names]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    else:
        asyncio.run(gathered())
    assert sorted(answers) == names
    for name in names:
        created, listed = answers[name]
        assert created == f"File created successfully at: /memories/{name}.md"
        assert [line.split("\t")[1] for line in listed.splitlines()[1:]] == ["/memories", f"/memories/{name}.md"]
        mine = memory_of(store, name)
        assert [e.path for e in mine.list_files()] == [f"/memories/{name}.md"]
        assert mine.read_text(f"/memories/{name}.md") == f"{name}\n"


class Account:
    """A context of the application's own: its user is ``account``, not ``user_id``."""

    def __init__(self, account: str) -> None:
        self.account = account


@pytest.mark.parametrize(
    "invoke_with",
    [
        pytest.param({"context": Context(user_id="carol")}, id="context-attribute"),
        pytest.param({"context": {"user_id": "carol"}}, id="context-mapping"),
        pytest.param({"config": {"configurable": {"user_id": "carol"}}}, id="configurable"),
        pytest.param(
            {"context": {"user_id": "carol"}, "config": {"configurable": {"user_id": "dave"}}}, id="context-first"
        ),
    ],
)
def test_where_a_run_names_its_user(
    users: S3ClaudeMemoryMiddleware, store: Recording, invoke_with: dict[str, Any]
) -> None:
    agent = create_agent(ConversationModel(), tools=[], middleware=[users])
    assert results(agent.invoke(ask([create("/memories/a.md", "x")]), **invoke_with)) == [
        "File created successfully at: /memories/a.md"
    ]
    assert [e.path for e in memory_of(store, "carol").list_files()] == ["/memories/a.md"]
    assert not memory_of(store, "dave").list_files()


def test_user_id_from_reads_the_user_elsewhere(store: Recording) -> None:
    seen: list[Any] = []

    def account_of(runtime: ToolRuntime[Any, Any]) -> str:
        seen.append(runtime)
        return str(runtime.context.account)

    middleware = S3ClaudeMemoryMiddleware(store=store, master_key=MASTER_KEY, user_id_from=account_of)
    agent = create_agent(ConversationModel(), tools=[], middleware=[middleware], context_schema=Account)
    out = agent.invoke(ask([create("/memories/a.md", "x")]), context=Account("erin"))
    assert results(out) == ["File created successfully at: /memories/a.md"]
    assert [e.path for e in memory_of(store, "erin").list_files()] == ["/memories/a.md"]
    # before each of the two model calls, and for the memory call (which has its id)
    assert all(isinstance(runtime, ToolRuntime) for runtime in seen)
    assert [runtime.tool_call_id for runtime in seen] == [None, "t0.0", None]
    with pytest.raises(NoUserError, match="user_id_from= found no user"):
        agent.invoke(ask([view("/memories")]), context=Account(""))


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_a_run_that_names_no_user_is_refused_before_the_model_is_called(
    users: S3ClaudeMemoryMiddleware, store: Recording, asynchronous: bool
) -> None:
    model = ConversationModel()
    agent = create_agent(model, tools=[], middleware=[users])
    question: Any = ask([create("/memories/a.md", "x")])
    for unnamed in ({}, {"context": {"user_id": ""}}, {"context": Context(user_id=None)}, {"config": {}}):  # type: ignore[arg-type]
        with pytest.raises(NoUserError, match=r"names no user.*context=\{'user_id': \.\.\.\}"):
            if asynchronous:
                asyncio.run(agent.ainvoke(question, **unnamed))
            else:
                agent.invoke(question, **unnamed)
    assert not model.calls
    assert not store.requests


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_a_thread_belongs_to_the_user_of_its_first_run(
    users: S3ClaudeMemoryMiddleware, store: Recording, asynchronous: bool
) -> None:
    """With a checkpointer, a thread's messages quote its user's memory: another user's run
    on it raises ThreadUserError, and a run naming none NoUserError, before the model is
    called; its own user goes on, and another thread is the other user's. The state keeps
    a digest of the user, not the id."""
    from langgraph.checkpoint.memory import InMemorySaver

    model = ConversationModel()
    agent = create_agent(model, tools=[], middleware=[users], checkpointer=InMemorySaver())
    memory_of(store, "alice").create("/memories/a.md", "alice: tea\n")
    thread = {"configurable": {"thread_id": "t1"}}

    def converse(**options: Any) -> list[str]:
        question: Any = ask([view("/memories/a.md")])
        if asynchronous:
            return results(asyncio.run(agent.ainvoke(question, **options)))
        return results(agent.invoke(question, **options))

    (alice_read,) = converse(config=thread, context={"user_id": "alice"})
    assert alice_read.endswith("     1\talice: tea\n     2\t")
    calls = len(model.calls)
    with pytest.raises(ThreadUserError, match="started by another user"):
        converse(config=thread, context={"user_id": "bob"})
    with pytest.raises(NoUserError, match="names no user"):
        converse(config=thread)
    assert len(model.calls) == calls
    converse(config=thread, context={"user_id": "alice"})  # alice's thread goes on
    assert converse(config={"configurable": {"thread_id": "t2"}}, context={"user_id": "bob"}) == [
        "ERROR The path /memories/a.md does not exist. Please provide a valid path."
    ]
    held = agent.get_state(thread).values["s3memory_thread_user"]
    assert len(held) == 64 and "alice" not in held


@pytest.mark.parametrize("user_id", ["../bob", "bob/alice", "Bob Smith", "memories", 42])
def test_an_invalid_user_id_is_refused(users: S3ClaudeMemoryMiddleware, store: Recording, user_id: object) -> None:
    model = ConversationModel()
    agent = create_agent(model, tools=[], middleware=[users])
    with pytest.raises(ConfigurationError, match="user_id"):
        agent.invoke(ask([create("/memories/a.md", "x")]), context={"user_id": user_id})
    assert not model.calls
    assert not store.requests


def test_the_model_cannot_choose_the_user(users: S3ClaudeMemoryMiddleware, store: Recording) -> None:
    """Fields the model adds to its tool input, named as the run's user is named, change
    nothing: the ``runtime`` LangGraph injects replaces the model's, and the rest is ignored."""
    agent = create_agent(ConversationModel(), tools=[], middleware=[users], context_schema=Context)
    bob = {"user_id": "bob", "context": {"user_id": "bob"}, "configurable": {"user_id": "bob"}}
    out = agent.invoke(
        ask([{**create("/memories/a.md", "alice's\n"), **bob, "runtime": {"context": {"user_id": "bob"}}}]),
        context=Context(user_id="alice"),
    )
    assert results(out) == ["File created successfully at: /memories/a.md"]
    assert memory_of(store, "alice").read_text("/memories/a.md") == "alice's\n"
    assert not memory_of(store, "bob").list_files()
    # Outside a LangGraph run no runtime is injected: what the caller passes is not one.
    with pytest.raises(NoUserError, match="LangGraph run"):
        users.tool.invoke({"command": "view", "path": "/memories", "runtime": {"context": {"user_id": "bob"}}})


def test_the_memory_tool_alone_serves_each_runs_user(store: Recording) -> None:
    """``memory_tool`` without user_id, in ``create_agent``'s tools: the user of each call's
    run; a run with none ends with NoUserError at the memory call, never told to the model."""
    tool_ = memory_tool(store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    model = ConversationModel()
    agent = create_agent(model, tools=[tool_])
    out = agent.invoke(ask([create("/memories/a.md", "x")]), context={"user_id": "frank"})
    assert results(out) == ["File created successfully at: /memories/a.md"]
    assert [e.path for e in memory_of(store, "frank").list_files()] == ["/memories/a.md"]
    model.calls.clear()
    with pytest.raises(NoUserError):
        agent.invoke(ask([view("/memories")]))
    assert len(model.calls) == 1  # the model asked for the memory, and heard nothing back


# -- why not the stock middleware --------------------------------------------------------------


@pytest.mark.parametrize("kind", ["State", "Filesystem"])
def test_the_stock_middleware_fails_on_claudes_rename_and_insert(kind: str, tmp_path: Path) -> None:
    """langchain-anthropic's memory middleware (1.7) given the fields Claude sends. If this
    fails, langchain-anthropic fixed it: update the module docstring and the README."""
    stock_middleware = pytest.importorskip("langchain_anthropic.middleware")

    def stock() -> Any:
        if kind == "State":
            return stock_middleware.StateClaudeMemoryMiddleware()
        return stock_middleware.FilesystemClaudeMemoryMiddleware(root_path=str(tmp_path))

    create = call(1, command="create", path="/memories/a.md", file_text="one\ntwo\n")
    renamed = call(2, command="rename", old_path="/memories/a.md", new_path="/memories/b.md")
    rename = run(stock(), scripted(create, renamed))
    assert rename[1].status == "error" and "path: Field required" in rename[1].text
    with pytest.raises(KeyError, match="new_str"):
        run(stock(), scripted(create, call(2, command="insert", path="/memories/a.md", insert_line=1, insert_text="x")))


# -- imports ---------------------------------------------------------------------------------


@pytest.mark.slow  # a subprocess
def test_imports_stay_lazy() -> None:
    """``import s3memory`` loads no LangChain; the middleware loads no langchain-anthropic
    (about a second), recognising ChatAnthropic only once the application has imported it."""
    import subprocess

    code = (
        "import sys, s3memory; before = sorted(m for m in sys.modules if m.startswith(('langchain', 'langgraph')));"
        "import s3memory.integrations.langchain; "
        "print(before, 'langchain_anthropic' in sys.modules, 'anthropic' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", "False", "False"]


# -- the example -------------------------------------------------------------------------------


def load_example(monkeypatch: pytest.MonkeyPatch) -> Any:
    path = REPO / "examples" / "langchain_memory.py"
    spec = importlib.util.spec_from_file_location("example_langchain_memory", path)
    assert spec and spec.loader
    example = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, example)  # pydantic resolves the fake model's annotations there
    spec.loader.exec_module(example)
    return example


def test_the_example_runs_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    example = load_example(monkeypatch)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "must-not-be-used")  # --scripted wins
    out = io.StringIO()
    example.main(["--scripted"], out=out)
    text = out.getvalue()
    assert "File created successfully at: /memories/preferences.md" in text
    assert "     1\t- tea: oolong, no milk" in text  # the second conversation read it back
    assert "assistant: Ordered: Oolong, no milk, as your notes say." in text
    assert "files on disk; those holding the plaintext: none" in text


def test_the_example_with_claude(monkeypatch: pytest.MonkeyPatch, messages_api: Callable[..., MessagesAPI]) -> None:
    """The example's ChatAnthropic path, against the fake Messages endpoint."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_MODEL", "claude-scripted")
    example = load_example(monkeypatch)
    api = messages_api(
        [
            [use("a1", command="view", path="/memories")],
            [use("a2", command="create", path="/memories/tea.md", file_text="oolong, no milk\n")],
            [{"type": "text", "text": "Noted."}],
            [use("b1", command="view", path="/memories/tea.md")],
            [{"type": "text", "text": "Oolong, no milk."}],
        ]
    )
    out = io.StringIO()
    example.main([], out=out)
    text = out.getvalue()
    assert "Claude (claude-scripted), its native memory tool" in text
    assert "assistant: Oolong, no milk." in text
    assert "files on disk; those holding the plaintext: none" in text
    assert all(body["tools"] == [NATIVE_MEMORY_TOOL] for _, body in api.requests)
    assert [m["role"] for m in api.requests[3][1]["messages"]] == ["user"]  # the second conversation starts afresh
    assert "     1\toolong, no milk" in api.tool_results(4)[0]["content"]
