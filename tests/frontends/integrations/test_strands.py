"""s3memory.integrations.strands: the ``memory`` tool and ``S3MemoryStore`` through a real
``strands.Agent`` and ``MemoryManager``.

The model is a scripted ``strands.models.Model`` (after strands' own test fixture
``mocked_model_provider.py``, which its wheel does not ship): it streams the events of the
turns it is given and records what each call was sent. One test runs Strands' real
``AnthropicModel`` against a fake Messages endpoint (``httpx2.MockTransport``). All offline.
"""

from __future__ import annotations

import asyncio
import importlib.util
import io
import json
import logging
import re
import threading
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any

import pytest
from helpers import BUCKET, MASTER_KEY, REPO
from helpers.fake_messages_api import MessagesAPI, use

pytest.importorskip("strands")

from strands import Agent
from strands.memory import ExtractionResult, InvocationTrigger, MemoryManager
from strands.models import Model

from s3memory import (
    ConfigurationError,
    EncryptedMemory,
    InMemoryStore,
    KeyCache,
    Mount,
    MountedMemory,
    NoUserError,
    PathNotFoundError,
    SensitiveDataError,
    UserMemories,
    open_memory,
)
from s3memory.integrations._common import MEMORY_TOOL_DESCRIPTION
from s3memory.integrations.strands import MEMORY_INPUT_SCHEMA, S3MemoryStore, memory_tool
from s3memory.stores import DelegatingStore

Turn = list[dict[str, Any]]
NOTE_PATH = re.compile(r"^/memories/notes/\d{8}T\d{6}Z-[0-9a-f]{8}\.md$")


class ScriptedModel(Model):
    """Streams each turn's blocks (``{"text": ...}`` or ``{"name", "id", "input"}``), or what a
    function of the messages returns; ``seen`` holds every call's messages (a JSON copy), tool
    names and system prompt."""

    def __init__(self, turns: list[Turn | Callable[[list[dict[str, Any]]], Turn]]) -> None:
        self.turns = list(turns)
        self.seen: list[dict[str, Any]] = []

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    async def structured_output(self, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        raise NotImplementedError
        yield

    async def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any
    ) -> AsyncGenerator[Any, None]:
        self.seen.append(
            {
                "messages": json.loads(json.dumps(messages)),
                "tools": {spec["name"]: spec for spec in tool_specs or []},
                "system": system_prompt,
            }
        )
        turn = self.turns.pop(0)
        blocks = turn(messages) if callable(turn) else turn
        yield {"messageStart": {"role": "assistant"}}
        for block in blocks:
            if "text" in block:
                yield {"contentBlockStart": {"start": {}}}
                yield {"contentBlockDelta": {"delta": {"text": block["text"]}}}
            else:
                yield {"contentBlockStart": {"start": {"toolUse": {"name": block["name"], "toolUseId": block["id"]}}}}
                yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(block["input"])}}}}
            yield {"contentBlockStop": {}}
        stop = "tool_use" if any("name" in block for block in blocks) else "end_turn"
        yield {"messageStop": {"stopReason": stop}}


def call(call_id: str, name: str = "memory", **tool_input: Any) -> Turn:
    return [{"name": name, "id": call_id, "input": tool_input}]


DONE: Turn = [{"text": "done"}]


def results(agent: Agent) -> dict[str, tuple[str, str]]:
    """Each tool result of the run by tool use id: (status, text)."""
    found = {}
    for message in agent.messages:
        for block in message["content"]:
            if "toolResult" in block:
                result = block["toolResult"]
                text = "".join(part.get("text", "") for part in result["content"])
                found[result["toolUseId"]] = (result["status"], text)
    return found


def run(tools: list[Any] | None, turns: list[Any], prompt: str = "go", **agent_options: Any) -> tuple[Agent, Any]:
    model = ScriptedModel(turns)
    agent = Agent(model=model, tools=tools, callback_handler=None, **agent_options)
    agent(prompt)
    assert not model.turns, "the script was not played to its end"
    return agent, model


@pytest.fixture
def memory() -> EncryptedMemory:
    return open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())


def error_of(action: Callable[[], object]) -> str:
    """s3memory's own text for what ``action`` raises."""
    with pytest.raises(Exception) as caught:
        action()
    return str(caught.value)


# -- the memory tool ---------------------------------------------------------------------------


def test_the_six_commands_through_an_agent(memory: EncryptedMemory) -> None:
    agent, model = run(
        [memory_tool(memory)],
        [
            call("c1", command="create", path="/memories/tea.md", file_text="- oolong\n- no milk\n"),
            call("c2", command="str_replace", path="/memories/tea.md", old_str="oolong", new_str="sencha"),
            call("c3", command="insert", path="/memories/tea.md", insert_line=0, insert_text="# Tea"),
            call("c4", command="view", path="/memories/tea.md", view_range=[1, 2]),
            call("c5", command="rename", old_path="/memories/tea.md", new_path="/memories/prefs/tea.md"),
            call("c6", command="create", path="/memories/scratch.md", file_text="tmp\n"),
            call("c7", command="delete", path="/memories/scratch.md"),
            call("c8", command="view", path="/memories"),
            DONE,
        ],
    )
    answers = results(agent)
    assert all(status == "success" for status, _ in answers.values()), answers
    assert answers["c1"][1] == "File created successfully at: /memories/tea.md"
    assert (
        answers["c4"][1] == "Here's the content of /memories/tea.md with line numbers:\n     1\t# Tea\n     2\t- sencha"
    )
    assert "/memories/prefs/tea.md" in answers["c8"][1] and "scratch" not in answers["c8"][1]
    assert memory.read_text("/memories/prefs/tea.md") == "# Tea\n- sencha\n- no milk\n"
    assert [entry.path for entry in memory.list_files()] == ["/memories/prefs/tea.md"]
    # What the model is told: the memory protocol, and Claude's fields with only command required.
    spec = model.seen[0]["tools"]["memory"]
    assert spec["description"] == MEMORY_TOOL_DESCRIPTION
    assert spec["inputSchema"]["json"] == MEMORY_INPUT_SCHEMA
    assert set(MEMORY_INPUT_SCHEMA["properties"]) == {
        "command",
        "path",
        "file_text",
        "old_str",
        "new_str",
        "insert_line",
        "insert_text",
        "view_range",
        "old_path",
        "new_path",
    }
    assert MEMORY_INPUT_SCHEMA["required"] == ["command"]


def test_errors_reach_the_model_with_s3memorys_text_and_write_nothing(memory: EncryptedMemory) -> None:
    memory.create("/memories/tea.md", "oolong\n")
    agent, model = run(
        [memory_tool(memory)],
        [
            call("e1", command="create", path="/memories/tea.md", file_text="sencha\n"),
            call("e2", command="create", path="/memories/../x", file_text="x\n"),
            call("e3", command="view", path="/memories/none.md"),
            call("e4", command="str_replace", path="/memories/tea.md", old_str="matcha", new_str="x"),
            call("e5", command="explode"),
            call("e6", command="create", path="/memories/key.md", file_text="AKIAIOSFODNN7EXAMPLE\n"),
            [{"name": "memory", "id": "e7", "input": [1, 2]}],
            DONE,
        ],
    )
    answers = results(agent)
    assert {status for status, _ in answers.values()} == {"error"}
    assert answers["e1"][1] == error_of(lambda: memory.create("/memories/tea.md", "sencha\n"))
    assert answers["e1"][1] == "Error: File /memories/tea.md already exists"
    assert answers["e2"][1] == error_of(lambda: memory.create("/memories/../x", "x\n"))
    assert answers["e2"][1].startswith("Path /memories/../x would escape /memories directory")
    assert answers["e3"][1] == "The path /memories/none.md does not exist. Please provide a valid path."
    assert answers["e4"][1] == error_of(lambda: memory.str_replace("/memories/tea.md", "matcha", "x"))
    assert answers["e5"][1].startswith("Error: Unknown command 'explode'.")
    assert answers["e6"][1] == error_of(lambda: memory.create("/memories/key.md", "AKIAIOSFODNN7EXAMPLE\n"))
    assert "AWS access key" in answers["e6"][1]
    assert answers["e7"][1] == "Error: The tool input must be an object with a `command` field."
    # The error text is what the model gets next, as a tool result with status "error".
    sent = model.seen[1]["messages"][-1]["content"][0]["toolResult"]
    assert sent["status"] == "error" and sent["content"] == [{"text": answers["e1"][1]}]
    assert memory.read_text("/memories/tea.md") == "oolong\n"
    assert [entry.path for entry in memory.list_files()] == ["/memories/tea.md"]


def test_an_unexpected_backend_failure_gives_the_generic_message(
    memory: EncryptedMemory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: Any, **kwargs: Any) -> str:
        raise KeyError("s3://secret-bucket/tenants/alice")

    monkeypatch.setattr(memory, "view", broken)
    with caplog.at_level(logging.ERROR, logger="s3memory"):
        agent, _ = run([memory_tool(memory)], [call("u1", command="view", path="/memories"), DONE])
    status, text = results(agent)["u1"]
    assert (status, text) == ("error", "Error: The memory backend failed unexpectedly (KeyError).")
    assert "Traceback" not in text and "secret-bucket" not in text
    assert "unexpected error in the s3memory backend" in caplog.text  # logged for the operator


def test_the_memory_runs_off_the_event_loop(memory: EncryptedMemory, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[bool, str]] = []
    execute = memory.execute

    def spy(command: object) -> str:
        try:
            asyncio.get_running_loop()
            on_loop = True
        except RuntimeError:
            on_loop = False
        seen.append((on_loop, threading.current_thread().name))
        return execute(command)

    monkeypatch.setattr(memory, "execute", spy)

    async def main() -> Any:
        model = ScriptedModel([call("t1", command="view", path="/memories"), DONE])
        agent = Agent(model=model, tools=[memory_tool(memory)], callback_handler=None)
        return await agent.invoke_async("go")

    asyncio.run(main())
    assert len(seen) == 1
    on_loop, thread = seen[0]
    assert not on_loop and thread != threading.main_thread().name


def test_memory_tool_takes_open_memory_options_or_a_memory_not_both(memory: EncryptedMemory) -> None:
    store = InMemoryStore()
    agent, _ = run(
        [memory_tool(user_id="bob", store=store, master_key=MASTER_KEY)],
        [call("o1", command="create", path="/memories/a.md", file_text="a\n"), DONE],
    )
    assert results(agent)["o1"][0] == "success"
    assert open_memory(user_id="bob", store=store, master_key=MASTER_KEY).read_text("/memories/a.md") == "a\n"
    with pytest.raises(TypeError):
        memory_tool(memory, user_id="bob")
    with pytest.raises(TypeError, match="user_id_from is for a tool that serves many users"):
        memory_tool(memory, user_id_from=lambda state: "bob")
    with pytest.raises(ConfigurationError, match="give bucket"):
        memory_tool()  # without user_id: a tool of many users, which still needs its store


# -- S3MemoryStore with Strands' MemoryManager --------------------------------------------------


def test_add_memory_search_memory_and_injection(memory: EncryptedMemory) -> None:
    memory.create("/memories/prefs.md", "The user drinks oolong tea.\n")
    store = S3MemoryStore(memory)
    agent, model = run(
        None,
        [
            call("a1", "add_memory", entries=["The user's cat is called Miso."]),
            call("s1", "search_memory", query="what is my cat called?"),
            [{"text": "Miso."}],
        ],
        prompt="my cat is Miso; what tea do I drink?",
        memory_manager=MemoryManager(stores=[store], add_tool_config=True),
    )
    # One manager: its two tools and the store's memory tool.
    assert set(model.seen[0]["tools"]) == {"search_memory", "add_memory", "memory"}
    # Injection: the user's turn was searched (word overlap: "tea", "drink") and the hit folded
    # into the model's input, not into the durable history.
    first_input = model.seen[0]["messages"][0]["content"]
    assert first_input[0] == {"text": "my cat is Miso; what tea do I drink?"}
    assert '<entry source="s3memory">The user drinks oolong tea.</entry>' in first_input[1]["text"]
    assert agent.messages[0]["content"] == [{"text": "my cat is Miso; what tea do I drink?"}]
    # add_memory wrote one new file under /memories/notes/.
    answers = results(agent)
    assert answers["a1"] == ("success", '{"stored": 1}')
    (note,) = [entry.path for entry in memory.list_files("/memories/notes")]
    assert NOTE_PATH.match(note)
    assert memory.read_text(note) == "The user's cat is called Miso.\n"
    # search_memory found it, with its path.
    status, text = answers["s1"]
    assert status == "success"
    assert json.loads(text) == [
        {
            "content": "The user's cat is called Miso.",
            "store_name": "s3memory",
            "metadata": {"path": note, "score": 2},  # "cat" and "called"
        }
    ]


def test_an_add_with_a_secret_is_refused_and_nothing_is_written(memory: EncryptedMemory) -> None:
    store = S3MemoryStore(memory)
    secret = "The deploy key is AKIAIOSFODNN7EXAMPLE."
    agent, _ = run(
        None,
        [call("a1", "add_memory", entries=[secret]), DONE],
        memory_manager=MemoryManager(stores=[store], add_tool_config=True, injection=False),
    )
    status, text = results(agent)["a1"]
    refusal = error_of(lambda: memory.create("/memories/x.md", secret + "\n"))
    assert refusal.startswith("Error: The text contains what looks like an AWS access key")
    # Strands reports a failed add as an AggregateMemoryError tool error, with s3memory's text.
    assert status == "error"
    assert text == f"Error: AggregateMemoryError - MemoryManager: failed to add 1 of 1 entries: {refusal}"
    assert memory.list_files() == []
    # Called directly, the store raises s3memory's own error.
    with pytest.raises(SensitiveDataError):
        asyncio.run(store.add(secret))


def test_search_ranks_by_shared_words(memory: EncryptedMemory) -> None:
    memory.create("/memories/tea.md", "The user drinks oolong tea in the morning.\n")
    memory.create("/memories/coffee.md", "Coffee: never after noon.\n")
    memory.create("/memories/morning.md", "Morning standup at nine.\n")
    memory.create("/memories/pets/cat.md", "Miso the cat likes tuna.\n")
    memory.create("/memories/unrelated.md", "The quarterly report is due Friday.\n")
    store = S3MemoryStore(memory)
    query = "What tea should I drink in the morning?"
    # s3memory's own search needs every word, so a whole sentence finds nothing.
    assert memory.search(query) == []
    hits = asyncio.run(store.search(query))
    # Words, not stems: tea.md shares "tea" and "morning" ("drinks" is not "drink"), morning.md
    # "morning" (in its name and its text, counted once); the stop words ("what", "should",
    # "i", "in", "the") count for nothing, and files sharing no word are left out.
    assert [(hit.metadata or {}).get("path") for hit in hits] == ["/memories/tea.md", "/memories/morning.md"]
    assert [(hit.metadata or {}).get("score") for hit in hits] == [2, 1]
    assert hits[0].content == "The user drinks oolong tea in the morning."
    # The path's words count too (without /memories and the extension); ties by path.
    cat_hits = asyncio.run(store.search("pets coffee"))
    assert [(hit.metadata or {}).get("path") for hit in cat_hits] == ["/memories/coffee.md", "/memories/pets/cat.md"]
    # At most max_search_results, the caller's number first.
    assert len(asyncio.run(store.search("tea morning standup coffee tuna", {"max_search_results": 2}))) == 2
    assert len(asyncio.run(S3MemoryStore(memory, max_search_results=3).search("tea morning coffee tuna"))) == 3
    assert asyncio.run(store.search("the and of")) == []
    with pytest.raises(ValueError):
        asyncio.run(store.search("tea", {"max_search_results": 0}))


def test_long_entries_are_cut_with_a_pointer_to_the_file(memory: EncryptedMemory) -> None:
    memory.create("/memories/long.md", "tea\n" + "x" * 500 + "\n")
    (hit,) = asyncio.run(S3MemoryStore(memory, max_entry_chars=100).search("tea"))
    assert hit.content == "tea\n" + "x" * 96 + "\n[truncated: view /memories/long.md for the rest]"


def test_add_makes_a_new_file_each_time_and_never_overwrites(memory: EncryptedMemory) -> None:
    store = S3MemoryStore(memory, directory="/memories/facts")
    first = asyncio.run(store.add("one", {"source": "test"}))
    second = asyncio.run(store.add("two\n"))
    assert first != second
    assert all(re.match(r"^/memories/facts/\d{8}T\d{6}Z-[0-9a-f]{8}\.md$", path) for path in (first, second))
    assert memory.read_text(first) == "one\n" and memory.read_text(second) == "two\n"
    # The same text again: not a second file (Strands may repeat an add), the first's path.
    assert asyncio.run(store.add("one")) == first
    assert len(memory.list_files()) == 2
    with pytest.raises(ConfigurationError):
        S3MemoryStore(memory, directory="/memories")
    with pytest.raises(ConfigurationError):
        S3MemoryStore(memory, directory="/memories/../etc")
    with pytest.raises(ValueError, match="not writable"):
        asyncio.run(S3MemoryStore(memory, writable=False).add("three"))


def test_an_entry_of_a_known_topic_is_merged_into_its_file(memory: EncryptedMemory) -> None:
    """As Strands' FileMemoryStore (its TestAdd::test_appends_new_facts_to_existing_entry and
    test_does_not_duplicate_when_new_entry_has_only_heading): one file per topic."""
    store = S3MemoryStore(memory, directory="/memories/facts")
    first = asyncio.run(store.add("# User preferences\n- drinks tea"))
    # The same topic however the heading is spelt (levels, case, punctuation): merged.
    assert asyncio.run(store.add("## user Preferences!\n- likes cats\n- drinks tea")) == first
    assert memory.read_text(first) == "# User preferences\n- drinks tea\n- likes cats\n"
    # The heading alone, or only known lines: nothing written (no new version).
    versions = len(memory.history(first))
    assert asyncio.run(store.add("# User preferences")) == first
    assert asyncio.run(store.add("# user preferences\n- likes cats")) == first
    assert len(memory.history(first)) == versions
    # Another topic, and an entry without one: files of their own.
    other = asyncio.run(store.add("# Project setup\n- uses uv"))
    untitled = asyncio.run(store.add("!!!\n- a line"))
    assert len({first, other, untitled}) == 3
    assert asyncio.run(store.add("???\n- another line")) not in {first, other, untitled}
    (hit, *_) = asyncio.run(store.search("cats tea preferences"))
    assert hit.metadata["path"] == first and "likes cats" in hit.content


def test_an_unexpected_failure_in_add_gives_the_generic_message(
    memory: EncryptedMemory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: Any, **kwargs: Any) -> str:
        raise KeyError("s3://secret-bucket/tenants/alice")

    monkeypatch.setattr(memory, "create", broken)
    with caplog.at_level(logging.ERROR, logger="s3memory"):
        agent, _ = run(
            None,
            [call("a1", "add_memory", entries=["a fact"]), DONE],
            memory_manager=MemoryManager(stores=[S3MemoryStore(memory)], add_tool_config=True, injection=False),
        )
    status, text = results(agent)["a1"]
    assert status == "error"
    assert text.endswith(": Error: The memory backend failed unexpectedly (KeyError).")
    assert "secret-bucket" not in text and "Traceback" not in text


def test_extraction_writes_each_extracted_fact_through_add(
    memory: EncryptedMemory, caplog: pytest.LogCaptureFixture
) -> None:
    class FixedExtractor:
        """Stands in for Strands' ModelExtractor (which would call the model)."""

        async def extract(self, messages: Any, context: Any = None) -> list[ExtractionResult]:
            return [
                ExtractionResult(content="The user is called Ada."),
                ExtractionResult(content="AKIAIOSFODNN7EXAMPLE"),
            ]

    extraction: Any = {"extractor": FixedExtractor(), "trigger": InvocationTrigger()}
    store = S3MemoryStore(memory, extraction=extraction)
    with caplog.at_level(logging.WARNING, logger="strands.memory.extraction"):
        run(None, [DONE], prompt="Hi, I'm Ada.", memory_manager=MemoryManager(stores=[store], injection=False))
    # The fact was stored once; the secret was refused by the guard, as any write is, so
    # Strands retried the batch (after the invocation, then at its flush): the fact was not
    # written again.
    (note,) = [entry.path for entry in memory.list_files()]
    assert memory.read_text(note) == "The user is called Ada.\n"
    assert caplog.text.count("failed to write 1 of 2 extracted entries") == 2
    # With sensitive_data="redact" the secret is written redacted, and the batch succeeds.
    redacting = open_memory(user_id="ada", store=InMemoryStore(), master_key=MASTER_KEY, sensitive_data="redact")
    store = S3MemoryStore(redacting, extraction=extraction)
    run(None, [DONE], prompt="Hi, I'm Ada.", memory_manager=MemoryManager(stores=[store], injection=False))
    texts = sorted(redacting.read_text(entry.path) for entry in redacting.list_files())
    assert texts == ["The user is called Ada.\n", "[REDACTED: AWS access key]\n"]


def test_one_memory_tool_per_agent(memory: EncryptedMemory) -> None:
    other = open_memory(user_id="bob", store=InMemoryStore(), master_key=MASTER_KEY)
    other.create("/memories/bob.md", "Bob's file\n")
    # Two tools named memory: refused, not one silently replacing the other.
    with pytest.raises(ValueError, match="'memory' already exists"):
        Agent(
            model=ScriptedModel([]),
            memory_manager=MemoryManager(stores=[S3MemoryStore(memory), S3MemoryStore(other, name="bob")]),
            callback_handler=None,
        )
    with pytest.raises(ValueError, match="'memory' already exists"):
        Agent(model=ScriptedModel([]), tools=[memory_tool(memory), memory_tool(other)], callback_handler=None)
    # tool=False: the second store is searched, and the memory tool is the first store's.
    stores = [S3MemoryStore(memory), S3MemoryStore(other, name="bob", tool=False)]
    agent, model = run(
        None,
        [call("v1", command="view", path="/memories/bob.md"), DONE],
        prompt="what is in Bob's file?",
        memory_manager=MemoryManager(stores=stores),
    )
    assert '<entry source="bob">Bob\'s file</entry>' in model.seen[0]["messages"][0]["content"][1]["text"]
    assert results(agent)["v1"] == ("error", "The path /memories/bob.md does not exist. Please provide a valid path.")


# -- mounts ------------------------------------------------------------------------------------


@pytest.fixture
def mounted() -> MountedMemory:
    store, cache = InMemoryStore(), KeyCache()
    team = open_memory(user_id="team", store=store, master_key=MASTER_KEY, key_cache=cache)
    team.create("/memories/runbook.md", "Rotate the TLS certificate every 90 days.\n")
    return open_memory(
        user_id="alice",
        store=store,
        master_key=MASTER_KEY,
        key_cache=cache,
        mounts=[Mount(name="team", user_id="team", access="read_only")],
    )


def test_a_read_only_mount_gives_a_search_only_store(mounted: MountedMemory) -> None:
    _, team = mounted.mounted["team"]
    store = S3MemoryStore(team, name="team")
    assert store.writable is False and store.directory == "/memories/team/notes"
    (hit,) = asyncio.run(store.search("When do we rotate the certificate?"))
    assert (hit.metadata or {}).get("path") == "/memories/team/runbook.md"
    # A directory in the read-only mount, through the whole tree, is read-only too.
    assert S3MemoryStore(mounted, directory="/memories/team/notes").writable is False
    with pytest.raises(ConfigurationError, match="read-only"):
        S3MemoryStore(team, writable=True)
    # Strands then refuses an add tool with no writable store...
    with pytest.raises(ValueError, match="no writable stores"):
        MemoryManager(stores=[store], add_tool_config=True)
    # ...and the memory tool refuses writes there in s3memory's words.
    agent, _ = run(
        None,
        [call("w1", command="create", path="/memories/team/x.md", file_text="x\n"), DONE],
        prompt="certificate",
        memory_manager=MemoryManager(stores=[store]),
    )
    assert results(agent)["w1"] == (
        "error",
        "Error: Cannot create /memories/team/x.md: /memories/team is mounted read-only",
    )
    with pytest.raises(PathNotFoundError):
        mounted.read_text("/memories/team/x.md")


def test_a_mounted_memory_as_the_store(mounted: MountedMemory) -> None:
    store = S3MemoryStore(mounted)
    assert store.writable is True and store.directory == "/memories/notes"
    agent, model = run(
        None,
        [
            call("a1", "add_memory", entries=["Alice owns the certificate rotation."]),
            call("v1", command="view", path="/memories"),
            DONE,
        ],
        prompt="who rotates the certificate?",
        memory_manager=MemoryManager(stores=[store], add_tool_config=True),
    )
    # Injection searched the own store and the mount together.
    assert "Rotate the TLS certificate every 90 days." in model.seen[0]["messages"][0]["content"][1]["text"]
    (note,) = [entry.path for entry in mounted.own.list_files()]
    assert NOTE_PATH.match(note)
    assert mounted.read_text(note) == "Alice owns the certificate rotation.\n"
    status, listing = results(agent)["v1"]
    assert status == "success" and "/memories/team/runbook.md" in listing and note in listing
    hits = asyncio.run(store.search("certificate rotation"))
    assert [(hit.metadata or {}).get("path") for hit in hits] == [note, "/memories/team/runbook.md"]


# -- S3 and the wire ---------------------------------------------------------------------------


def test_on_s3(s3_client: Any) -> None:
    store = S3MemoryStore(bucket=BUCKET, s3_client=s3_client, user_id="carol", master_key=MASTER_KEY)
    agent, _ = run(
        None,
        [
            call("a1", "add_memory", entries=["Carol prefers window seats."]),
            call("c1", command="create", path="/memories/trips.md", file_text="Lisbon in May\n"),
            DONE,
        ],
        memory_manager=MemoryManager(stores=[store], add_tool_config=True, injection=False),
    )
    assert {status for status, _ in results(agent).values()} == {"success"}
    reopened = open_memory(bucket=BUCKET, s3_client=s3_client, user_id="carol", master_key=MASTER_KEY)
    assert reopened.read_text("/memories/trips.md") == "Lisbon in May\n"
    hits = asyncio.run(S3MemoryStore(reopened).search("Which seats does Carol like? window or aisle"))
    assert [hit.content for hit in hits] == ["Carol prefers window seats."]
    # Encrypted at rest: no object in the bucket holds the plaintext.
    for item in s3_client.list_objects_v2(Bucket=BUCKET)["Contents"]:
        body = s3_client.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read()
        assert b"window" not in body and b"Lisbon" not in body


def test_strands_anthropic_model_sends_errors_as_is_error(memory: EncryptedMemory) -> None:
    httpx2 = pytest.importorskip("httpx2")
    pytest.importorskip("strands.models.anthropic")
    from strands.models.anthropic import AnthropicModel

    api = MessagesAPI(
        [
            [use("toolu_1", command="create", path="/memories/a.md", file_text="hi\n")],
            [use("toolu_2", command="view", path="/memories/none.md")],
            [{"type": "text", "text": "saved"}],
        ]
    )
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(api))
    model = AnthropicModel(
        client_args={"api_key": "test", "http_client": client}, model_id="claude-test", max_tokens=256
    )
    agent = Agent(model=model, tools=[memory_tool(memory)], callback_handler=None)
    assert str(agent("remember hi")).strip() == "saved"
    # A plain function tool on the wire (Strands cannot declare memory_20250818 for a client tool).
    (tool,) = api.requests[0][1]["tools"]
    assert tool["name"] == "memory" and "type" not in tool and tool["input_schema"] == MEMORY_INPUT_SCHEMA
    sent = api.tool_results(2)
    assert [(block["tool_use_id"], block["is_error"]) for block in sent] == [("toolu_1", False), ("toolu_2", True)]
    assert sent[1]["content"][0]["text"] == "The path /memories/none.md does not exist. Please provide a valid path."
    assert memory.read_text("/memories/a.md") == "hi\n"


# -- the example ----------------------------------------------------------------------------------


def test_the_example_runs_offline() -> None:
    path = REPO / "examples" / "strands_memory.py"
    spec = importlib.util.spec_from_file_location("example_strands_memory", path)
    assert spec and spec.loader
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    out = io.StringIO()
    example.main(["--scripted"], out=out)
    text = out.getvalue()
    assert 'add_memory <- {"entries": ["The user drinks oolong tea, no milk."]}' in text
    assert "] The user drinks oolong tea, no milk." in text  # injected into the second conversation
    assert "assistant: Ordered. From my memory: The user drinks oolong tea, no milk." in text
    assert re.search(r"^/memories/notes/\S+\.md: The user drinks oolong tea, no milk\.$", text, re.M)
    assert text.rstrip().endswith("those holding the plaintext: none")


# -- what the review found ---------------------------------------------------------------------


def test_search_ranks_off_the_event_loop_and_tokenizes_only_what_changed(
    memory: EncryptedMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from s3memory.integrations import strands as adapter

    for i in range(3):
        memory.create(f"/memories/f{i}.md", f"tea number {i}\n")
    tokenized: list[tuple[str, bool]] = []
    real_tokenize = adapter.tokenize

    def spy(text: str) -> set[str]:
        try:
            asyncio.get_running_loop()
            on_loop = True
        except RuntimeError:
            on_loop = False
        tokenized.append((text, on_loop))
        return real_tokenize(text)

    monkeypatch.setattr(adapter, "tokenize", spy)
    store = S3MemoryStore(memory)
    assert len(asyncio.run(store.search("tea"))) == 3
    file_texts = [(text, on_loop) for text, on_loop in tokenized if text != "tea"]
    assert len(file_texts) == 6 and not any(on_loop for _, on_loop in file_texts)  # text and name of each
    tokenized.clear()
    memory.str_replace("/memories/f1.md", "number 1", "number one")
    assert len(asyncio.run(store.search("tea"))) == 3
    assert [text for text, _ in tokenized] == ["tea", "/f1", "tea number one\n"]  # the query, the changed file


def test_search_caps_the_number_of_results(memory: EncryptedMemory) -> None:
    for i in range(105):
        memory.create(f"/memories/f{i:03}.md", "tea\n")
    assert len(asyncio.run(S3MemoryStore(memory).search("tea", {"max_search_results": 10**6}))) == 100


@pytest.mark.parametrize("setting", ["max_search_results", "max_entry_chars"])
@pytest.mark.parametrize("value", [0, -1, True, 2.5])
def test_bad_limits_are_refused_at_construction(memory: EncryptedMemory, setting: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=f"{setting} must be a whole number of at least 1"):
        S3MemoryStore(memory, **{setting: value})  # type: ignore[arg-type]


def test_the_default_directory_is_never_a_shared_mount() -> None:
    store, cache = InMemoryStore(), KeyCache()
    tree = open_memory(
        user_id="alice",
        store=store,
        master_key=MASTER_KEY,
        key_cache=cache,
        mounts=[Mount(name="notes", user_id="team-notes", access="read_write")],
    )
    with pytest.raises(ConfigurationError, match=r"/memories/notes is a mounted store.*pass directory="):
        S3MemoryStore(tree)
    chosen = S3MemoryStore(tree, directory="/memories/mine")  # the user's own choice
    path = asyncio.run(chosen.add("Alice's appointment is on Tuesday."))
    assert path.startswith("/memories/mine/") and tree.own.read_text(path).startswith("Alice's")
    team = open_memory(user_id="team-notes", store=store, master_key=MASTER_KEY, key_cache=cache)
    assert team.list_files() == []  # nothing of Alice's in the shared store


class SlowPuts(DelegatingStore):
    """Each write takes a while, so that adds running at once overlap."""

    def _call(self, verb: str, perform: Callable[[], Any]) -> Any:
        if verb == "put":
            time.sleep(0.05)
        return perform()


def test_adds_of_one_text_at_once_write_one_file() -> None:
    memory = open_memory(user_id="alice", store=SlowPuts(InMemoryStore()), master_key=MASTER_KEY, key_cache=KeyCache())
    store = S3MemoryStore(memory)

    async def add_four() -> list[str]:
        return await asyncio.gather(*(store.add("The user drinks oolong.") for _ in range(4)))

    paths = asyncio.run(add_four())
    assert len(set(paths)) == 1
    assert [entry.path for entry in memory.list_files()] == paths[:1]


# -- many users through one agent ----------------------------------------------------------------


def users_store(store: InMemoryStore, **options: Any) -> S3MemoryStore:
    """A store of many users (no user_id) on ``store``."""
    return S3MemoryStore(store=store, master_key=MASTER_KEY, key_cache=KeyCache(), **options)


def memory_of(store: Any, user_id: str) -> EncryptedMemory:
    return open_memory(user_id=user_id, store=store, master_key=MASTER_KEY)


def test_two_users_through_one_agent_and_one_store_are_isolated() -> None:
    backend = InMemoryStore()
    store = users_store(backend)  # built once, as at module scope
    model = ScriptedModel(
        [
            call("a1", "add_memory", entries=["My cat is called Miso."]),
            call("a2", command="create", path="/memories/prefs.md", file_text="Alice drinks oolong.\n"),
            DONE,
            call("b1", "search_memory", query="what is my cat called?"),
            call("b2", command="view", path="/memories"),
            call("b3", "add_memory", entries=["My cat is called Rex."]),
            DONE,
            call("c1", "search_memory", query="cat called"),
            DONE,
        ]
    )
    manager = MemoryManager(stores=[store], add_tool_config=True)
    agent = Agent(model=model, memory_manager=manager, hooks=[store], callback_handler=None)

    def request(user_id: str, prompt: str) -> dict[str, tuple[str, str]]:
        agent.messages.clear()  # one agent, a new conversation per request
        agent(prompt, invocation_state={"user_id": user_id})
        return results(agent)

    alice = request("alice", "remember my cat")
    assert {status for status, _ in alice.values()} == {"success"}
    bob = request("bob", "what is my cat called?")
    # Bob's run: nothing of Alice's injected, found, listed, or used to skip his add.
    assert "<memory>" not in json.dumps(model.seen[3]["messages"])
    assert bob["b1"] == ("success", "[]")
    assert bob["b2"][0] == "success" and "prefs" not in bob["b2"][1] and "notes" not in bob["b2"][1]
    assert bob["b3"] == ("success", '{"stored": 1}')
    again = request("alice", "what is my cat called?")
    assert [hit["content"] for hit in json.loads(again["c1"][1])] == ["My cat is called Miso."]
    assert "Miso" in json.dumps(model.seen[-2]["messages"][0]) and "Rex" not in json.dumps(model.seen[-2])
    assert not model.turns
    texts: dict[str, list[str]] = {}
    for user in ("alice", "bob"):
        memory = memory_of(backend, user)
        texts[user] = sorted(memory.read_text(entry.path) for entry in memory.list_files())
    assert texts == {
        "alice": ["Alice drinks oolong.\n", "My cat is called Miso.\n"],
        "bob": ["My cat is called Rex.\n"],
    }


@pytest.mark.parametrize("state", [None, {}, {"user_id": ""}, {"user": "alice"}])
def test_a_run_naming_no_user_is_refused_before_the_model_is_called(state: dict[str, Any] | None) -> None:
    store = users_store(InMemoryStore())
    tool = memory_tool(store=InMemoryStore(), master_key=MASTER_KEY)
    agents = [
        Agent(model=ScriptedModel([]), memory_manager=MemoryManager(stores=[store]), hooks=[store]),
        Agent(model=ScriptedModel([]), tools=[tool], hooks=[tool]),
    ]
    for agent in agents:
        with pytest.raises(NoUserError, match=r"names no user.*invocation_state=\{'user_id': \.\.\.\}"):
            agent("hi", invocation_state=state)
        with pytest.raises(NoUserError):
            asyncio.run(agent.invoke_async("hi", invocation_state=state))
        assert agent.messages == []  # nothing sent, nothing added to the conversation
    # An invalid id is refused the same way, before the model is called.
    with pytest.raises(ConfigurationError):
        agents[0]("hi", invocation_state={"user_id": "../bob"})
    # Outside a run the store of many users has no user either.
    with pytest.raises(NoUserError):
        asyncio.run(store.search("tea"))
    with pytest.raises(NoUserError):
        asyncio.run(store.add("tea"))
    with pytest.raises(NoUserError):
        store.memory  # noqa: B018


def test_structured_output_names_its_user_in_the_call_not_the_deprecated_method() -> None:
    """``agent(prompt, structured_output_model=..., invocation_state=...)`` names the user as
    any run does; Strands' deprecated ``Agent.structured_output()`` hands the hooks an empty
    invocation state, so a store of many users refuses it (NoUserError), never guesses."""
    from pydantic import BaseModel

    class Answer(BaseModel):
        x: int

    store = users_store(InMemoryStore())
    model = ScriptedModel([call("s1", name="Answer", x=3)])
    agent = Agent(model=model, memory_manager=MemoryManager(stores=[store]), hooks=[store], callback_handler=None)
    result = agent("hi", structured_output_model=Answer, invocation_state={"user_id": "alice"})
    assert result.structured_output == Answer(x=3)
    with pytest.warns(DeprecationWarning), pytest.raises(NoUserError):
        agent.structured_output(Answer, "hi")
    assert len(model.seen) == 1  # nothing more was asked of the model


def test_an_agent_given_a_store_of_many_users_without_its_hooks_is_refused_when_built() -> None:
    store = users_store(InMemoryStore())
    with pytest.raises(ConfigurationError, match=r"hooks=\[store\]"):
        Agent(model=ScriptedModel([]), memory_manager=MemoryManager(stores=[store]))
    # With its hooks, any number of agents share the store; a store of one user needs none.
    for _ in range(2):
        Agent(model=ScriptedModel([]), memory_manager=MemoryManager(stores=[store]), hooks=[store])
    one = S3MemoryStore(store=InMemoryStore(), master_key=MASTER_KEY, user_id="alice")
    Agent(model=ScriptedModel([]), memory_manager=MemoryManager(stores=[one]))
    # A refused agent leaves nothing behind: the next agent, with its hooks, is built.
    with pytest.raises(ConfigurationError):
        Agent(model=ScriptedModel([]), memory_manager=MemoryManager(stores=[store]))
    Agent(model=ScriptedModel([]), memory_manager=MemoryManager(stores=[store]), hooks=[store])


def test_the_model_cannot_choose_the_user() -> None:
    backend = InMemoryStore()
    memory_of(backend, "bob").create("/memories/bob.md", "Bob's secret plan\n")
    tool = memory_tool(store=backend, master_key=MASTER_KEY)
    store = users_store(backend, tool=False)
    model = ScriptedModel(
        [
            call("t1", command="view", path="/memories/bob.md", user_id="bob"),
            call("t2", command="create", path="/memories/x.md", file_text="x\n", user_id="bob"),
            [{"name": "add_memory", "id": "t3", "input": {"entries": ["a fact"], "user_id": "bob"}}],
            call("t4", "search_memory", query="secret plan", user_id="bob"),
            DONE,
        ]
    )
    manager = MemoryManager(stores=[store], add_tool_config=True, injection=False)
    agent = Agent(model=model, tools=[tool], memory_manager=manager, hooks=[tool, store], callback_handler=None)
    agent("go", invocation_state={"user_id": "alice"})
    answers = results(agent)
    assert answers["t1"] == ("error", "The path /memories/bob.md does not exist. Please provide a valid path.")
    assert answers["t4"] == ("success", "[]")
    assert [entry.path for entry in memory_of(backend, "bob").list_files()] == ["/memories/bob.md"]
    assert "/memories/x.md" in [entry.path for entry in memory_of(backend, "alice").list_files()]


def test_user_id_from_reads_the_user_where_the_application_puts_it() -> None:
    backend = InMemoryStore()
    memories = UserMemories(store=backend, master_key=MASTER_KEY)
    store = S3MemoryStore(memories, user_id_from=lambda state: state["request"]["tenant"])
    model = ScriptedModel([call("a1", "add_memory", entries=["Prefers tea."]), DONE])
    agent = Agent(model=model, memory_manager=MemoryManager(stores=[store], add_tool_config=True), hooks=[store])
    agent("hi", invocation_state={"request": {"tenant": "carol"}, "user_id": "mallory"})
    carol = memory_of(backend, "carol")
    assert [carol.read_text(entry.path) for entry in carol.list_files()] == ["Prefers tea.\n"]
    assert memory_of(backend, "mallory").list_files() == []
    with pytest.raises(TypeError, match="user_id_from is for a store that serves many users"):
        S3MemoryStore(memory_of(backend, "carol"), user_id_from=lambda state: "carol")


def test_each_users_adds_are_one_at_a_time_and_their_own() -> None:
    backend = SlowPuts(InMemoryStore())
    store = S3MemoryStore(store=backend, master_key=MASTER_KEY, key_cache=KeyCache())
    adds = [call(f"a{i}", "add_memory", entries=["I drink oolong."] * 4) for i in range(2)]
    model = ScriptedModel([adds[0], DONE, adds[1], DONE])
    agent = Agent(model=model, memory_manager=MemoryManager(stores=[store], add_tool_config=True), hooks=[store])
    for user_id in ("alice", "bob"):  # the same text: each user gets one file of it
        agent.messages.clear()
        agent("note it", invocation_state={"user_id": user_id})
    for user_id in ("alice", "bob"):
        files = memory_of(backend, user_id).list_files()
        assert len(files) == 1 and NOTE_PATH.match(files[0].path)


def test_strands_defaults_and_what_a_store_of_many_users_refuses() -> None:
    backend = InMemoryStore()
    alice = memory_of(backend, "alice")
    for i in range(15):
        alice.create(f"/memories/tea{i:02}.md", f"tea number {i}\n")
    store = S3MemoryStore(alice)
    # FileMemoryStore's: no description, no number of the store's own; a search gives 10...
    assert (store.description, store.max_search_results) == (None, None)
    assert len(asyncio.run(store.search("tea"))) == 10
    # ...and through the manager, Strands' default of 3 (what the model is told as for theirs).
    model = ScriptedModel([call("s1", "search_memory", query="tea"), DONE])
    agent = Agent(model=model, memory_manager=MemoryManager(stores=[store], injection=False), hooks=[store])
    agent("go")  # a store of one user: its hooks do nothing, no user needed
    assert len(json.loads(results(agent)["s1"][1])) == 3
    assert "Available memory stores" not in model.seen[0]["tools"]["search_memory"]["description"]
    with pytest.raises(ConfigurationError, match="extraction needs a store of one user"):
        users_store(backend, extraction=True)


def test_concurrent_runs_of_many_users_on_one_store_stay_apart() -> None:
    store = users_store(InMemoryStore())

    async def one(user_id: str) -> list[str]:
        turns = [call("a", "add_memory", entries=[f"{user_id} likes tea"]), call("s", "search_memory", query="tea")]
        manager = MemoryManager(stores=[store], add_tool_config=True)
        agent = Agent(model=ScriptedModel([*turns, DONE]), memory_manager=manager, hooks=[store], callback_handler=None)
        await agent.invoke_async("go", invocation_state={"user_id": user_id})
        return [hit["content"] for hit in json.loads(results(agent)["s"][1])]

    async def all_at_once() -> list[list[str]]:
        return await asyncio.gather(*(one(f"user{i}") for i in range(6)))

    assert asyncio.run(all_at_once()) == [[f"user{i} likes tea"] for i in range(6)]
