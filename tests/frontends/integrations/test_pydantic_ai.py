"""The pydantic-ai adapter (s3memory.integrations.pydantic_ai) driven by real pydantic-ai agents.

The model is pydantic-ai's ``FunctionModel`` playing scripted tool calls, or a real model
class whose HTTP requests are answered in-process: ``AnthropicModel`` on an ``AsyncAnthropic``
client with an ``httpx2.MockTransport`` (a fake Messages endpoint serving server-sent events,
as pydantic-ai streams every Anthropic request), and ``GoogleModel`` the same way for a model
without Claude's native tool. No network, no API key.
"""

from __future__ import annotations

import asyncio
import importlib.util
import io
import json
import logging
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from unittest.mock import ANY

import pytest
from helpers import BUCKET, MASTER_KEY, REPO
from helpers.fake_messages_api import MessagesAPI, use

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability, NativeTool
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.native_tools import MemoryTool
from pydantic_ai.settings import ModelSettings
from pydantic_ai.toolsets import AbstractToolset

from s3memory import (
    ConfigurationError,
    EditError,
    EncryptedMemory,
    InMemoryStore,
    InvalidPathError,
    KeyCache,
    Mount,
    MountedMemory,
    NoUserError,
    PathExistsError,
    UserMemories,
    memory_stores_prompt,
    open_memory,
)
from s3memory.integrations._common import MEMORY_TOOL_DESCRIPTION
from s3memory.integrations.pydantic_ai import MEMORY_INPUT_SCHEMA, S3Memory, memory_toolset, user_id_of_deps
from s3memory.stores import DelegatingStore, ObjectStore

WRITES = {"put", "copy", "delete", "delete_version", "purge", "put_tags"}
NATIVE = {"name": "memory", "type": "memory_20250818"}
BETA = "context-management-2025-06-27"


pytestmark = pytest.mark.usefixtures("close_the_event_loop_run_sync_leaves")


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


@pytest.fixture
def store() -> Recording:
    return Recording(InMemoryStore())


@pytest.fixture
def memory(store: Recording) -> EncryptedMemory:
    return open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())


class Script:
    """A ``FunctionModel`` function: each turn the memory tool calls of one response (several
    in one response run in parallel), then "done". Records what the model was given."""

    def __init__(self, *turns: Mapping[str, Any] | list[Mapping[str, Any]]) -> None:
        self.turns = [turn if isinstance(turn, list) else [turn] for turn in turns]
        self.infos: list[AgentInfo] = []
        self.seen: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.infos.append(info)
        self.seen.append(list(messages))
        step = len(self.infos) - 1
        if step == len(self.turns):
            return ModelResponse(parts=[TextPart("done")])
        calls = self.turns[step]
        return ModelResponse(
            parts=[ToolCallPart("memory", dict(args), tool_call_id=f"c{step}.{i}") for i, args in enumerate(calls)]
        )


def results(run_messages: list[ModelMessage]) -> list[ToolReturnPart]:
    """The tool results of a run, in order."""
    return [part for message in run_messages for part in message.parts if isinstance(part, ToolReturnPart)]


def run(
    script: Script,
    *,
    capabilities: list[AbstractCapability[Any]] | None = None,
    toolsets: list[AbstractToolset[Any]] | None = None,
    retries: int = 0,
) -> list[ToolReturnPart]:
    """One agent run on the scripted model (retries=0: a failure that spent a retry would end it)."""
    agent = Agent(FunctionModel(script), capabilities=capabilities, toolsets=toolsets, retries=retries)
    return results(agent.run_sync("remember").all_messages())


def texts(parts: list[ToolReturnPart]) -> list[str]:
    return [part.model_response_str(wrap_if_error=False) for part in parts]


# -- the six commands ----------------------------------------------------------------------


def test_all_six_commands_with_the_fields_claude_sends(memory: EncryptedMemory) -> None:
    script = Script(
        {"command": "view", "path": "/memories"},
        {"command": "create", "path": "/memories/notes/todo.md", "file_text": "- tests\n- docs\n"},
        {"command": "str_replace", "path": "/memories/notes/todo.md", "old_str": "docs", "new_str": "README"},
        {"command": "insert", "path": "/memories/notes/todo.md", "insert_line": 0, "insert_text": "# todo\n"},
        {"command": "view", "path": "/memories/notes/todo.md", "view_range": [2, 3]},
        {"command": "rename", "old_path": "/memories/notes/todo.md", "new_path": "/memories/todo.md"},
        {"command": "create", "path": "/memories/scratch/tmp.md", "file_text": "x\n"},
        {"command": "delete", "path": "/memories/scratch"},
    )
    parts = run(script, capabilities=[S3Memory(memory)])
    assert [part.outcome for part in parts] == ["success"] * 8
    assert texts(parts) == [
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and "
        "node_modules:\n0B\t/memories",
        "File created successfully at: /memories/notes/todo.md",
        "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
        "     1\t- tests\n     2\t- README\n     3\t",
        "The file /memories/notes/todo.md has been edited.",
        "Here's the content of /memories/notes/todo.md with line numbers:\n     2\t- tests\n     3\t- README",
        "Successfully renamed /memories/notes/todo.md to /memories/todo.md",
        "File created successfully at: /memories/scratch/tmp.md",
        "Successfully deleted /memories/scratch",
    ]
    assert memory.read_text("/memories/todo.md") == "# todo\n- tests\n- README\n"
    assert [entry.path for entry in memory.list_files()] == ["/memories/todo.md"]
    # each answer went back to the model as the tool's result
    assert texts(results(script.seen[-1])) == texts(parts)


def test_the_tool_the_model_is_given(memory: EncryptedMemory) -> None:
    script = Script()
    run(script, capabilities=[S3Memory(memory)])
    (tool,) = script.infos[0].function_tools
    assert tool.name == "memory"
    assert tool.description == MEMORY_TOOL_DESCRIPTION
    assert tool.parameters_json_schema == MEMORY_INPUT_SCHEMA
    assert tool.parameters_json_schema["required"] == ["command"]
    # the native flag, optional: a model without Claude's tool keeps the function tool
    assert script.infos[0].model_request_parameters.native_tools == [MemoryTool(optional=True)]

    script = Script()
    run(script, capabilities=[S3Memory(memory, native=False)])
    assert [t.name for t in script.infos[0].function_tools] == ["memory"]
    assert script.infos[0].model_request_parameters.native_tools == []

    script = Script({"command": "create", "path": "/memories/a.md", "file_text": "a\n"})
    assert texts(run(script, toolsets=[memory_toolset(memory)])) == ["File created successfully at: /memories/a.md"]
    assert script.infos[0].model_request_parameters.native_tools == []


# -- errors ----------------------------------------------------------------------------------


def test_refusals_reach_the_model_as_failed_results_and_write_nothing(
    memory: EncryptedMemory, store: Recording
) -> None:
    memory.create("/memories/a.md", "one\n")
    with pytest.raises(PathExistsError) as exists:
        memory.create("/memories/a.md", "two\n")
    with pytest.raises(InvalidPathError) as outside:
        memory.create("/etc/passwd", "x")
    with pytest.raises(InvalidPathError) as traversal:
        memory.create("/memories/../x", "x")
    with pytest.raises(EditError) as absent:
        memory.str_replace("/memories/a.md", "absent", "y")
    store.requests.clear()
    script = Script(
        {"command": "create", "path": "/memories/a.md", "file_text": "two\n"},
        {"command": "create", "path": "/etc/passwd", "file_text": "x"},
        {"command": "create", "path": "/memories/../x", "file_text": "x"},
        {"command": "str_replace", "path": "/memories/a.md", "old_str": "absent", "new_str": "y"},
        {"command": "insert", "path": "/memories/a.md", "insert_line": "two", "insert_text": "x"},
        {"command": "shred", "path": "/memories/a.md"},
        {"command": "rename", "path": "/memories/a.md", "new_path": "/memories/b.md"},
    )
    # retries=0: seven failures in a row end the run only if a ToolFailed spent a retry
    parts = run(script, capabilities=[S3Memory(memory)], retries=0)
    assert [part.outcome for part in parts] == ["failed"] * 7
    assert texts(parts) == [
        str(exists.value),
        str(outside.value),
        str(traversal.value),
        str(absent.value),
        "Error: `insert_line` must be an integer.",
        "Error: Unknown command 'shred'. Use one of: view, create, str_replace, insert, delete, rename.",
        "Error: Missing required parameter `old_path` for command `rename`.",
    ]
    assert texts(parts)[:2] == [
        "Error: File /memories/a.md already exists",
        "Path must start with /memories, got: /etc/passwd (a path is /memories or starts with /memories/)",
    ]
    assert not any("try again" in text for text in texts(parts))  # ModelRetry's wording, not ToolFailed's
    assert not [verb for verb in store.requests if verb in WRITES]
    assert memory.read_text("/memories/a.md") == "one\n"
    assert [entry.path for entry in memory.list_files()] == ["/memories/a.md"]


@pytest.mark.parametrize("arguments", ["[1, 2]", '"view"', "null"])
def test_arguments_that_are_not_an_object_get_a_retry_prompt_not_a_crash(
    memory: EncryptedMemory, arguments: str
) -> None:
    """A model other than Claude may send any JSON; pydantic-ai asks it again, as for a typed tool."""
    turns: list[ModelMessage] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turns.append(messages[-1])
        if len(turns) == 1:
            return ModelResponse(parts=[ToolCallPart("memory", arguments, tool_call_id="c0")])
        if len(turns) == 2:
            call = {"command": "create", "path": "/memories/a.md", "file_text": "x"}
            return ModelResponse(parts=[ToolCallPart("memory", call, tool_call_id="c1")])
        return ModelResponse(parts=[TextPart("done")])

    Agent(FunctionModel(model), capabilities=[S3Memory(memory)], retries=1).run_sync("remember")
    (retry,) = turns[1].parts
    assert isinstance(retry, ToolReturnPart) and retry.outcome == "retried"
    assert retry.content == [{"type": "dict_type", "loc": [], "msg": "Input should be an object", "input": ANY}]
    assert memory.read_text("/memories/a.md") == "x"


class Failing(DelegatingStore):
    """A store that fails in a way s3memory does not expect, with a message that must not leak."""

    def _call(self, verb: str, perform: Callable[[], Any]) -> Any:
        raise RuntimeError("connection to 10.0.0.7 reset while reading alice/secret-plans.md")


def test_an_unexpected_backend_failure_gives_the_generic_message(caplog: pytest.LogCaptureFixture) -> None:
    memory = open_memory(user_id="alice", store=Failing(InMemoryStore()), master_key=MASTER_KEY, key_cache=KeyCache())
    with caplog.at_level(logging.ERROR, logger="s3memory"):
        (part,) = run(Script({"command": "view", "path": "/memories"}), capabilities=[S3Memory(memory)])
    assert part.outcome == "failed"
    assert texts([part]) == ["Error: The memory backend failed unexpectedly (RuntimeError)."]
    assert "Traceback" not in part.model_response_str() and "secret-plans" not in part.model_response_str()
    assert any(r.exc_info and "secret-plans" in str(r.exc_info[1]) for r in caplog.records)  # logged, not shown


# -- parallel calls ----------------------------------------------------------------------------


class Racing(DelegatingStore):
    """Holds each write of a ``.md`` file until ``parties`` writes are under way at once."""

    def __init__(self, inner: ObjectStore, parties: int) -> None:
        super().__init__(inner)
        self.barrier = threading.Barrier(parties)
        self.armed = False
        self.threads: set[int] = set()

    def put(self, key: str, body: bytes, metadata: Mapping[str, str], **options: Any) -> str:
        if self.armed and key.endswith(".md"):
            self.threads.add(threading.get_ident())
            self.barrier.wait(timeout=10)  # broken (and the test failed) if the calls ran one by one
        return self.inner.put(key, body, metadata, **options)


def test_parallel_calls_run_at_once_off_the_event_loop_and_one_create_wins() -> None:
    store = Racing(InMemoryStore(), parties=3)
    memory = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    memory.create("/memories/warm.md", "the tenant key exists\n")
    store.armed = True
    script = Script(
        [
            {"command": "create", "path": "/memories/same.md", "file_text": "first\n"},
            {"command": "create", "path": "/memories/same.md", "file_text": "second\n"},
            {"command": "create", "path": "/memories/other.md", "file_text": "other\n"},
        ]
    )
    agent = Agent(FunctionModel(script), capabilities=[S3Memory(memory)])

    async def main() -> list[ToolReturnPart]:
        return results((await agent.run("remember")).all_messages())

    parts = asyncio.run(main())
    assert len(store.threads) == 3 and threading.get_ident() not in store.threads
    outcomes = {part.tool_call_id: (part.outcome, texts([part])[0]) for part in parts}
    assert outcomes["c0.2"] == ("success", "File created successfully at: /memories/other.md")
    same = sorted([outcomes["c0.0"], outcomes["c0.1"]])
    assert same == [
        ("failed", "Error: File /memories/same.md already exists"),
        ("success", "File created successfully at: /memories/same.md"),
    ]
    winner = "first\n" if outcomes["c0.0"][0] == "success" else "second\n"
    assert memory.read_text("/memories/same.md") == winner


# -- Claude on the wire (the real AnthropicModel) ----------------------------------------------


WIRE_SCRIPT = [
    [
        use("t1", command="create", path="/memories/a.md", file_text="hi\n"),
        use("t2", command="view", path="/memories/nope.md"),
    ],
    [use("t3", command="create", path="/memories/a.md", file_text="again\n")],
    [{"type": "text", "text": "Saved."}],
]


def claude(api: MessagesAPI) -> Model:
    import httpx2
    from anthropic import AsyncAnthropic
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    client = AsyncAnthropic(
        api_key="test-key", http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(api)), max_retries=0
    )
    # Not a real model name: the anthropic SDK warns about deprecated ones.
    return AnthropicModel("claude-scripted", provider=AnthropicProvider(anthropic_client=client))


def result_text(block: dict[str, Any]) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "".join(part["text"] for part in content)


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "sse"])
def test_claude_gets_its_native_memory_tool_and_is_error(memory: EncryptedMemory, streamed: bool) -> None:
    api = MessagesAPI(WIRE_SCRIPT)
    agent = Agent(claude(api), capabilities=[S3Memory(memory)], retries=0)
    # The SDK refuses (before sending) a non-streaming request with this many max_tokens; pydantic-ai streams it.
    settings: ModelSettings = {"max_tokens": 32_000} if streamed else {}
    assert agent.run_sync("remember hi", model_settings=settings).output == "Saved."
    assert len(api.requests) == 3
    assert [bool(body.get("stream")) for _, body in api.requests] == [streamed] * len(api.requests)
    for headers, body in api.requests:
        assert body["tools"] == [NATIVE]
        assert BETA in headers["anthropic-beta"].split(",")
        assert "system" not in body  # the API adds the memory protocol for the native tool
    first = api.tool_results(1)
    assert [(b["tool_use_id"], b["is_error"], result_text(b)) for b in first] == [
        ("t1", False, "File created successfully at: /memories/a.md"),
        ("t2", True, "The path /memories/nope.md does not exist. Please provide a valid path."),
    ]
    (again,) = api.tool_results(2)[2:]
    assert (again["is_error"], result_text(again)) == (True, "Error: File /memories/a.md already exists")
    assert memory.read_text("/memories/a.md") == "hi\n"


def test_native_false_sends_claude_the_function_tool(memory: EncryptedMemory) -> None:
    api = MessagesAPI(WIRE_SCRIPT)
    Agent(claude(api), capabilities=[S3Memory(memory, native=False)], retries=0).run_sync("remember hi")
    for headers, body in api.requests:
        (tool,) = body["tools"]
        assert tool["name"] == "memory" and "type" not in tool
        assert tool["description"] == MEMORY_TOOL_DESCRIPTION
        assert tool["input_schema"]["properties"] == MEMORY_INPUT_SCHEMA["properties"]
        assert tool["input_schema"]["required"] == ["command"]
        assert BETA not in headers.get("anthropic-beta", "")
    assert [b["is_error"] for b in api.tool_results(2)] == [False, True, True]


# -- a model without Claude's native tool (the real GoogleModel) ---------------------------------


def gemini(answers: list[list[dict[str, Any]]], requests: list[dict[str, Any]]) -> Model:
    pytest.importorskip("google.genai")
    import httpx2
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider

    def handle(request: Any) -> Any:
        requests.append(json.loads(request.content))
        parts = answers[len(requests) - 1]
        candidate = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}
        usage = {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2}
        return httpx2.Response(200, json={"candidates": [candidate], "usageMetadata": usage})

    # A timeout given: pydantic-ai warns about httpx's default of 5 seconds.
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handle), timeout=60)
    return GoogleModel("gemini-2.5-flash", provider=GoogleProvider(api_key="test-key", http_client=client))


def test_a_model_without_the_native_tool_gets_the_function_tool(memory: EncryptedMemory) -> None:
    requests: list[dict[str, Any]] = []
    create = {"command": "create", "path": "/memories/g.md", "file_text": "g\n"}
    calls = [
        {"functionCall": {"name": "memory", "args": create}},
        {"functionCall": {"name": "memory", "args": {"command": "view", "path": "/etc/passwd"}}},
    ]
    model = gemini([calls, [{"text": "ok"}]], requests)
    assert Agent(model, capabilities=[S3Memory(memory)], retries=0).run_sync("remember").output == "ok"
    (declaration,) = [d for tool in requests[0]["tools"] for d in tool["functionDeclarations"]]
    assert declaration["name"] == "memory" and declaration["description"] == MEMORY_TOOL_DESCRIPTION
    parts = [part for content in requests[1]["contents"] for part in content["parts"]]
    responses = [part["functionResponse"]["response"] for part in parts if "functionResponse" in part]
    assert responses == [
        {"return_value": "File created successfully at: /memories/g.md"},
        {"error": "Path must start with /memories, got: /etc/passwd (a path is /memories or starts with /memories/)"},
    ]
    assert memory.read_text("/memories/g.md") == "g\n"


def test_why_the_native_flag_is_optional(memory: EncryptedMemory) -> None:
    """pydantic-ai refuses a required MemoryTool on such a model, and its hint
    (NativeOrLocalTool) does not fit: the native tool needs the local one."""
    model = gemini([], [])
    agent = Agent(model, toolsets=[memory_toolset(memory)], capabilities=[NativeTool(MemoryTool())])
    with pytest.raises(UserError, match=r"Native tool\(s\) \['MemoryTool'\] not supported by this model"):
        agent.run_sync("remember")


# -- mounts, instructions, S3, construction -------------------------------------------------------


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
    script = Script(
        {"command": "view", "path": "/memories/standards/style.md"},
        {"command": "create", "path": "/memories/standards/mine.md", "file_text": "x"},
        {"command": "str_replace", "path": "/memories/standards/style.md", "old_str": "tabs", "new_str": "spaces"},
        {"command": "create", "path": "/memories/mine.md", "file_text": "tabs, says the standard\n"},
    )
    parts = run(script, capabilities=[S3Memory(memory=mounted, instructions=memory_stores_prompt(mounted))])
    assert [part.outcome for part in parts] == ["success", "failed", "failed", "success"]
    assert "     1\tUse tabs." in texts(parts)[0]
    assert texts(parts)[1:3] == [
        "Error: Cannot create /memories/standards/mine.md: /memories/standards is mounted read-only",
        "Error: Cannot edit /memories/standards/style.md: /memories/standards is mounted read-only",
    ]
    assert 'path="/memories/standards/" access="read_only"' in script.infos[0].instructions  # type: ignore[operator]
    assert standards.read_text("/memories/style.md") == "Use tabs.\n"
    assert [e.path for e in standards.list_files()] == ["/memories/style.md"]
    assert mounted.read_text("/memories/mine.md") == "tabs, says the standard\n"


def test_on_s3_from_the_open_memory_options(s3_client: Any) -> None:
    capability = S3Memory(bucket=BUCKET, s3_client=s3_client, user_id="alice", master_key=MASTER_KEY)
    script = Script(
        {"command": "create", "path": "/memories/plan.md", "file_text": "launch on Tuesday\n"},
        {"command": "str_replace", "path": "/memories/plan.md", "old_str": "Tuesday", "new_str": "Friday"},
    )
    assert [part.outcome for part in run(script, capabilities=[capability])] == ["success", "success"]
    reopened = open_memory(user_id="alice", bucket=BUCKET, s3_client=s3_client, master_key=MASTER_KEY)
    assert reopened.read_text("/memories/plan.md") == "launch on Friday\n"
    bodies = [
        s3_client.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read()
        for o in s3_client.list_objects_v2(Bucket=BUCKET)["Contents"]
    ]
    assert bodies and not any(b"Friday" in body or b"Tuesday" in body for body in bodies)  # encrypted at rest


def test_memory_or_options_not_both_nor_neither(memory: EncryptedMemory) -> None:
    with pytest.raises(TypeError, match="not both"):
        S3Memory(memory, user_id="bob")
    with pytest.raises(ConfigurationError, match=r"give bucket=.* or store="):  # per user, but stored nowhere
        S3Memory()
    with pytest.raises(TypeError, match="user_id_from= names each run's user"):
        S3Memory(memory, user_id_from=user_id_of_deps)
    with pytest.raises(TypeError, match="user_id_from= names each run's user"):
        memory_toolset(user_id="bob", store=InMemoryStore(), master_key=MASTER_KEY, user_id_from=user_id_of_deps)
    with pytest.raises(TypeError, match="not both"):
        memory_toolset(memory, user_id="bob")
    assert S3Memory(memory).memory is memory
    toolset = memory_toolset(user_id="bob", store=InMemoryStore(), master_key=MASTER_KEY)
    assert list(toolset.tools) == ["memory"]
    assert S3Memory.get_serialization_name() is None  # not from agent specs: a memory is no spec value


def test_one_memory_tool_an_agent(memory: EncryptedMemory) -> None:
    with pytest.raises(UserError, match="conflicts with existing tool"):
        run(Script(), capabilities=[S3Memory(memory), S3Memory(memory)])


@pytest.mark.slow  # a subprocess
def test_import_s3memory_does_not_load_pydantic_ai() -> None:
    code = "import sys, s3memory; print('pydantic_ai' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


# -- many users, one agent: the run's user from its deps ----------------------------------------


def memory_of(store: ObjectStore, user_id: str) -> EncryptedMemory:
    memory = open_memory(user_id=user_id, store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    assert isinstance(memory, EncryptedMemory)
    return memory


@dataclass
class Request:
    """An application's deps object: the user is an attribute."""

    user_id: str | None
    locale: str = "en"


def notes_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A stateless scripted model (one instance serves every run): it writes the prompt to
    /memories/note.md, then views /memories, then answers with what the view showed."""
    prompt = str(messages[0].parts[-1].content)  # type: ignore[union-attr]
    done = results(messages)
    if not done:
        call = {"command": "create", "path": "/memories/note.md", "file_text": prompt + "\n"}
    elif len(done) == 1:
        call = {"command": "view", "path": "/memories"}
    else:
        return ModelResponse(parts=[TextPart(texts(done)[-1])])
    return ModelResponse(parts=[ToolCallPart("memory", call, tool_call_id=f"c{len(done)}")])


def test_one_agent_serves_many_users_each_named_by_the_runs_deps(store: Recording) -> None:
    capability = S3Memory(store=store, master_key=MASTER_KEY, key_cache=KeyCache())  # no user_id: per run
    assert isinstance(capability.memory, UserMemories)
    agent = Agent(FunctionModel(notes_model), capabilities=[capability], retries=0)
    # the three default places: deps itself (a str), deps["user_id"], deps.user_id
    for deps, user in [("alice", "alice"), ({"user_id": "bob"}, "bob"), (Request("carol"), "carol")]:
        result = agent.run_sync(f"{user} likes tea", deps=deps)
        assert [part.outcome for part in results(result.all_messages())] == ["success", "success"]
        assert result.output.endswith("/memories/note.md")  # the view: one file, this user's
    for user in ["alice", "bob", "carol"]:
        memory = memory_of(store, user)
        assert [entry.path for entry in memory.list_files()] == ["/memories/note.md"]
        assert memory.read_text("/memories/note.md") == f"{user} likes tea\n"
    # a later run reads its own user's file, never another's
    script = Script({"command": "view", "path": "/memories/note.md"})
    parts = results(Agent(FunctionModel(script), capabilities=[capability]).run_sync("?", deps="bob").all_messages())
    assert texts(parts) == [
        "Here's the content of /memories/note.md with line numbers:\n     1\tbob likes tea\n     2\t"
    ]


def test_async_runs_of_two_users_at_once_are_isolated(store: Recording) -> None:
    """Both runs are in flight together (each waits at a barrier for the other's first request)."""
    barrier = asyncio.Barrier(2)
    prompts: list[str] = []

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            prompts.append(str(messages[0].parts[-1].content))  # type: ignore[union-attr]
            await asyncio.wait_for(barrier.wait(), timeout=10)
        return notes_model(messages, info)

    agent = Agent(FunctionModel(model), capabilities=[S3Memory(store=store, master_key=MASTER_KEY)], retries=0)

    async def main() -> list[str]:
        runs = await asyncio.gather(
            agent.run("alice: oolong", deps={"user_id": "alice"}), agent.run("bob: coffee", deps=Request("bob"))
        )
        return [run.output for run in runs]

    outputs = asyncio.run(main())
    assert sorted(prompts) == ["alice: oolong", "bob: coffee"]
    assert all(output.endswith("\t/memories/note.md") for output in outputs)
    assert memory_of(store, "alice").read_text("/memories/note.md") == "alice: oolong\n"
    assert memory_of(store, "bob").read_text("/memories/note.md") == "bob: coffee\n"


@pytest.mark.parametrize(
    "deps",
    [None, "", {}, {"user_id": None}, {"user": "alice"}, Request(None), object()],
    ids=["None", "empty", "empty-mapping", "user_id-None", "other-key", "attribute-None", "object"],
)
def test_a_run_that_names_no_user_is_refused_before_the_model_is_asked(store: Recording, deps: object) -> None:
    script = Script({"command": "create", "path": "/memories/a.md", "file_text": "x"})
    agent = Agent(FunctionModel(script), capabilities=[S3Memory(store=store, master_key=MASTER_KEY)])
    store.requests.clear()
    with pytest.raises(NoUserError, match=r"names no user.*pass deps= to agent\.run"):
        agent.run_sync("remember", deps=deps)
    assert script.infos == []  # no model request: nothing the model could see or answer
    assert not [verb for verb in store.requests if verb in WRITES]


def test_a_toolset_alone_refuses_a_run_without_a_user_too(store: Recording) -> None:
    script = Script()
    agent = Agent(FunctionModel(script), toolsets=[memory_toolset(store=store, master_key=MASTER_KEY)])
    with pytest.raises(NoUserError):
        agent.run_sync("remember")
    assert script.infos == []
    assert agent.run_sync("remember", deps="alice").output == "done"


@pytest.mark.parametrize("user_id", ["../bob", "alice/../bob", "memories", "a" * 200, 42])
def test_an_invalid_user_id_is_refused_to_the_application(store: Recording, user_id: object) -> None:
    script = Script({"command": "create", "path": "/memories/a.md", "file_text": "x"})
    agent = Agent(FunctionModel(script), capabilities=[S3Memory(store=store, master_key=MASTER_KEY)])
    store.requests.clear()
    with pytest.raises(ConfigurationError, match="user_id") as refused:
        agent.run_sync("remember", deps={"user_id": user_id})
    assert not isinstance(refused.value, NoUserError)
    assert script.infos == [] and not [verb for verb in store.requests if verb in WRITES]


def test_the_model_cannot_choose_the_user(store: Recording) -> None:
    script = Script(
        {"command": "create", "path": "/memories/a.md", "file_text": "mine\n", "user_id": "bob"},
        {"command": "view", "path": "/memories", "user_id": "bob", "tenant": "bob"},
    )
    agent = Agent(FunctionModel(script), capabilities=[S3Memory(store=store, master_key=MASTER_KEY)])
    parts = results(agent.run_sync("remember", deps="alice").all_messages())
    assert [part.outcome for part in parts] == ["success", "success"]
    assert "user_id" not in script.infos[0].function_tools[0].parameters_json_schema["properties"]
    assert memory_of(store, "alice").read_text("/memories/a.md") == "mine\n"
    assert memory_of(store, "bob").list_files() == []


def test_user_id_from_reads_the_user_anywhere_in_the_run_context(store: Recording) -> None:
    @dataclass
    class Session:
        account: str
        user_id: str = "not-this-one"

    def account(ctx: RunContext[Session]) -> str:
        return ctx.deps.account

    capability = S3Memory(store=store, master_key=MASTER_KEY, user_id_from=account)
    script = Script({"command": "create", "path": "/memories/a.md", "file_text": "x"})
    Agent(FunctionModel(script), capabilities=[capability], deps_type=Session).run_sync("hi", deps=Session("dave"))
    assert memory_of(store, "dave").read_text("/memories/a.md") == "x"
    assert memory_of(store, "not-this-one").list_files() == []
    # the hook sees the whole context: a user id from a mapping in the metadata, say
    toolset = memory_toolset(UserMemories(store=store, master_key=MASTER_KEY), user_id_from=lambda ctx: "erin")
    Agent(
        FunctionModel(Script({"command": "create", "path": "/memories/e.md", "file_text": "e"})), toolsets=[toolset]
    ).run_sync("hi")
    assert memory_of(store, "erin").read_text("/memories/e.md") == "e"


def test_a_single_user_capability_ignores_deps(memory: EncryptedMemory, store: Recording) -> None:
    script = Script({"command": "create", "path": "/memories/a.md", "file_text": "x"})
    Agent(FunctionModel(script), capabilities=[S3Memory(memory)]).run_sync("hi", deps={"user_id": "bob"})
    assert memory.read_text("/memories/a.md") == "x"
    assert memory_of(store, "bob").list_files() == []
    Agent(FunctionModel(Script()), capabilities=[S3Memory(memory)]).run_sync("hi")  # no deps, no user needed


def test_claude_gets_the_native_tool_from_a_per_user_capability(store: Recording) -> None:
    api = MessagesAPI(WIRE_SCRIPT)
    agent = Agent(claude(api), capabilities=[S3Memory(store=store, master_key=MASTER_KEY)], retries=0)
    assert agent.run_sync("remember hi", deps="alice").output == "Saved."
    assert all(body["tools"] == [NATIVE] for _, body in api.requests)
    assert [b["is_error"] for b in api.tool_results(2)] == [False, True, True]
    assert memory_of(store, "alice").read_text("/memories/a.md") == "hi\n"


# -- the example -------------------------------------------------------------------------------


def test_the_example_runs_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    path = REPO / "examples" / "pydantic_ai_memory.py"
    spec = importlib.util.spec_from_file_location("example_pydantic_ai_memory", path)
    assert spec and spec.loader
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "must-not-be-used")  # --scripted wins
    out = io.StringIO()
    example.main(["--scripted"], out=out)
    text = out.getvalue()
    assert "a SCRIPTED model" in text
    assert "File created successfully at: /memories/preferences.md" in text
    assert "     1\t- tea: oolong, no milk" in text  # the second run read it back
    assert "assistant: Ordered: Oolong, no milk, as your notes say." in text
    assert "files on disk; those holding the plaintext: none" in text
