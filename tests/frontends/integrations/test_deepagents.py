"""The deepagents backend (s3memory.integrations.deepagents), alone and in real deep agents.

The protocol table runs through deepagents' own ``CompositeBackend`` (the paths as the agent
sees them: ``/memories/...``), on every store flavour of ``conftest.memory`` (in-memory,
local directory, moto S3 in three key modes). The agents are ``create_deep_agent`` with a
scripted chat model that records what it was sent; everything is offline.
"""

from __future__ import annotations

import asyncio
import importlib.util
import io
import itertools
import logging
import sys
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import BUCKET, MASTER_KEY, REPO

pytest.importorskip("deepagents")

from deepagents import create_deep_agent
from deepagents.backends import CompositeBackend, FilesystemBackend, StateBackend
from deepagents.backends.protocol import BackendProtocol
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from s3memory import (
    ConfigurationError,
    EncryptedMemory,
    InMemoryStore,
    KeyCache,
    Mount,
    MountedMemory,
    NoUserError,
    ThreadUserError,
    UserMemories,
    open_memory,
)
from s3memory.integrations.deepagents import (
    MEMORIES_ROUTE,
    S3MemoryBackend,
    ThreadUserMiddleware,
    deep_agent_backend,
)
from s3memory.stores import DelegatingStore

EXAMPLE = REPO / "examples" / "deepagents_memory.py"
# What the guard refuses (s3memory._screening.secret_patterns: 40 base64 characters after "aws_secret_access_key").
AWS_SECRET = "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
GUARD_REFUSAL = (
    "Error: The text contains what looks like an AWS secret access key (line 1); memory files must not hold "
    "secrets. Nothing was written. Remove the secret or describe it without its value."
)
AGENTS_MD = "# Memory\n- the user is Alice\n- she drinks tea\n"


# -- a scripted deep agent ----------------------------------------------------------------------


class ScriptedChatModel(GenericFakeChatModel):
    """GenericFakeChatModel (which refuses ``bind_tools``, as create_deep_agent calls it)
    that accepts tools and records every message list it was sent."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)
    tools: list[Any] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        self.tools = list(tools)
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        result: ChatResult = super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
        return result


CALL_IDS = itertools.count(1)


def call(name: str, **args: Any) -> AIMessage:
    """One model turn calling one tool (a turn each, so that the calls run in this order)."""
    tool_call = {"name": name, "args": args, "id": f"c{next(CALL_IDS)}", "type": "tool_call"}
    return AIMessage(content="", tool_calls=[tool_call])


def agent_for(backend: BackendProtocol, *turns: AIMessage, memory: list[str] | None = None) -> tuple[Any, Any]:
    model = ScriptedChatModel(messages=iter([*turns, AIMessage(content="done")]))
    return create_deep_agent(model=model, backend=backend, memory=memory), model


def tool_results(out: dict[str, Any]) -> list[tuple[str | None, str, str]]:
    """(tool, status, text) of each tool result, in order."""
    return [(m.name, m.status, m.text) for m in out["messages"] if isinstance(m, ToolMessage)]


def run(
    backend: BackendProtocol, *turns: AIMessage, memory: list[str] | None = None
) -> list[tuple[str | None, str, str]]:
    agent, _ = agent_for(backend, *turns, memory=memory)
    return tool_results(agent.invoke({"messages": [{"role": "user", "content": "remember"}]}))


@pytest.fixture
def mem() -> EncryptedMemory:
    return open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())


# -- the protocol, method by method -----------------------------------------------------------


def check_protocol(memory: EncryptedMemory | MountedMemory, tmp_path: Path) -> None:
    """Every method through a CompositeBackend, as the agent's tools call it, and what the
    encrypted memory holds after each change. The default backend is a directory."""
    scratch = tmp_path / "default"  # the localdir flavour's store is tmp_path / "store"
    scratch.mkdir()
    backend = deep_agent_backend(memory, default=FilesystemBackend(root_dir=scratch, virtual_mode=True))
    tea = "/memories/notes/tea.md"

    # write: create, then overwrite (parents come into being)
    assert backend.write("/memories/AGENTS.md", AGENTS_MD).path == "/memories/AGENTS.md"
    assert backend.write(tea, "tea: green\n").path == tea
    written = backend.write(tea, "tea: green\nmilk: no\nsugar: no\n")
    assert (written.error, written.path) == (None, tea)
    assert memory.read_text(tea) == "tea: green\nmilk: no\nsugar: no\n"

    # edit: unique; not unique (deepagents' refusal, with its replace_all hint); every occurrence; absent
    refused = backend.edit(tea, "no", "never")
    assert refused.path is None
    assert refused.error == (
        "Error: String 'no' appears 2 times in file. Use replace_all=True to replace all instances, "
        "or provide a more specific string with surrounding context."
    )
    assert backend.edit(tea, "no", "never", replace_all=True).occurrences == 2
    edited = backend.edit(tea, "green", "oolong")
    assert (edited.error, edited.path, edited.occurrences) == (None, tea, 1)
    assert memory.read_text(tea) == "tea: oolong\nmilk: never\nsugar: never\n"
    size = len("tea: oolong\nmilk: never\nsugar: never\n")
    assert backend.edit(tea, "coffee", "x").error == "Error: String not found in file: 'coffee'"
    assert backend.edit("/memories/nope.md", "a", "b").error == "Error: File '/nope.md' not found"

    # read: a window, raw (the middleware numbers the lines)
    window = backend.read(tea, offset=1, limit=1)
    assert window.error is None and window.file_data == {"content": "milk: never\n", "encoding": "utf-8"}
    assert (window.start_line, window.end_line, window.total_lines, window.next_offset) == (2, 2, 3, 2)
    assert backend.read(tea).file_data == {"content": memory.read_text(tea), "encoding": "utf-8"}
    # deepagents' words, without "Error: " (the read_file tool puts one before it); the path is
    # the backend's, below the route, as for deepagents' own backends in a CompositeBackend
    assert backend.read("/memories/notes").error == "File '/notes' not found"  # a directory, as StoreBackend
    assert backend.read("/memories/nope.md").error == "File '/nope.md' not found"

    # ls: direct children, directories with a slash; a missing directory is empty; a file is no directory
    assert backend.ls("/memories").entries == [
        {"path": "/memories/AGENTS.md", "is_dir": False, "size": len(AGENTS_MD)},
        {"path": "/memories/notes/", "is_dir": True},
    ]
    assert backend.ls("/memories/").entries == backend.ls("/memories").entries
    assert backend.ls("/memories/notes").entries == [{"path": tea, "is_dir": False, "size": size}]
    assert backend.ls("/memories/nope") == backend.ls("/memories/nope/")
    assert backend.ls("/memories/nope").entries == []
    assert backend.ls(tea).error == "Path '/notes/tea.md': not_a_directory"

    # grep: literal, every file under the path, glob-filtered, capped
    assert backend.grep("never", path="/memories").matches == [
        {"path": tea, "line": 2, "text": "milk: never"},
        {"path": tea, "line": 3, "text": "sugar: never"},
    ]
    assert [m["path"] for m in backend.grep("e", path="/memories", glob="AGENTS.*").matches or []] == [
        "/memories/AGENTS.md"
    ] * 3
    capped = backend.grep("never", path="/memories/notes", max_count=1)
    assert (capped.matches, capped.truncated) == ([{"path": tea, "line": 2, "text": "milk: never"}], True)
    assert backend.grep("never", path=tea) == backend.grep("never", path="/memories")  # a file's path: that file
    assert backend.grep("nev.r", path="/memories").matches == []  # not a regex
    assert backend.grep("never", path="/memories/nowhere").matches == []

    # glob: the protocol's contract (a bare pattern at any depth, `**`, anchoring, braces)
    def globbed(pattern: str, path: str | None = "/memories") -> list[str]:
        result = backend.glob(pattern, path)
        assert result.error is None, result.error
        return [info["path"] for info in result.matches or []]

    assert globbed("*.md") == ["/memories/AGENTS.md", tea]
    assert globbed("**/*.md") == ["/memories/AGENTS.md", tea]
    assert globbed("/*.md") == ["/memories/AGENTS.md"]
    assert globbed("notes/*.{md,txt}") == [tea]
    assert globbed("*.md", "/memories/notes") == [tea]
    assert globbed("*.txt") == []
    assert globbed("*.md", "/memories/nope") == []
    assert backend.glob("*.md", "/memories").matches == [
        {"path": "/memories/AGENTS.md", "is_dir": False, "size": len(AGENTS_MD)},
        {"path": tea, "is_dir": False, "size": size},
    ]
    assert backend.glob("../*.md", "/memories").error == "Path traversal not allowed in glob pattern '../*.md'"

    # download (what memory=["/memories/AGENTS.md"] reads) and upload, with the protocol's codes
    downloads = backend.download_files(
        ["/memories/AGENTS.md", "/memories/nope.md", "/memories/notes", "/memories/../x"]
    )
    assert [(d.path, d.content, d.error) for d in downloads] == [
        ("/memories/AGENTS.md", AGENTS_MD.encode(), None),
        ("/memories/nope.md", None, "file_not_found"),
        ("/memories/notes", None, "is_directory"),
        ("/memories/../x", None, "invalid_path"),
    ]
    uploads = backend.upload_files(
        [
            ("/memories/up/hello.txt", "héllo\n".encode()),
            ("/memories/logo.png", b"\x89PNG\r\n\x1a\n\xff"),
            ("/memories/notes", b"x"),
            ("/memories/keys.md", AWS_SECRET.encode()),
            ("/memories/../x", b"x"),
        ]
    )
    assert [(u.path, u.error) for u in uploads] == [
        ("/memories/up/hello.txt", None),
        ("/memories/logo.png", "permission_denied"),
        ("/memories/notes", "is_directory"),
        ("/memories/keys.md", GUARD_REFUSAL),
        ("/memories/../x", "invalid_path"),
    ]
    assert memory.read_text("/memories/up/hello.txt") == "héllo\n"

    # delete: a directory with everything in it; then nothing is there
    deleted = backend.delete("/memories/notes")
    assert (deleted.error, deleted.path) == (None, "/memories/notes")
    assert backend.delete("/memories/notes").error == "Error: File '/notes' not found"
    assert backend.delete("/memories").error == "Error: Cannot delete the /memories directory itself"

    # paths outside /memories/ go to the default backend, never to the store
    assert backend.write("/scratch.md", "draft\n").path == "/scratch.md"
    assert (scratch / "scratch.md").read_text() == "draft\n"
    assert [f.path for f in memory.list_files()] == ["/memories/AGENTS.md", "/memories/up/hello.txt"]
    # the composite's root lists the default backend's files and the route
    assert [e["path"] for e in backend.ls("/").entries or []] == ["/memories/", "/scratch.md"]
    # and searches both
    assert [m["path"] for m in backend.glob("*.md").matches or []] == ["/memories/AGENTS.md", "/scratch.md"]
    assert [m["path"] for m in backend.grep("draft").matches or []] == ["/scratch.md"]
    assert [m["path"] for m in backend.grep("Alice").matches or []] == ["/memories/AGENTS.md"]


def test_protocol(memory: EncryptedMemory, tmp_path: Path) -> None:
    """On every store flavour (conftest: in-memory, local directory, moto S3 x3)."""
    check_protocol(memory, tmp_path)


def test_protocol_on_moto_s3_opened_from_options(s3_client: Any, tmp_path: Path) -> None:
    """The backend built from open_memory's options, as a user on S3 writes it."""
    backend = S3MemoryBackend(bucket=BUCKET, s3_client=s3_client, user_id="bob", master_key=MASTER_KEY)
    check_protocol(backend.memory, tmp_path)
    # it was S3: the tenant's objects are in the bucket, and none holds the text
    keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket=BUCKET)["Contents"]]
    assert keys and all(key.startswith("bob/") for key in keys)
    bodies = [s3_client.get_object(Bucket=BUCKET, Key=key)["Body"].read() for key in keys]
    assert not any(b"Alice" in body for body in bodies)


def test_paths_are_the_backends_below_the_route(mem: EncryptedMemory) -> None:
    """Called directly (not through the composite), the backend takes and answers paths
    below its route: "/" is /memories."""
    backend = S3MemoryBackend(mem)
    assert backend.write("/a/b.md", "x\n").path == "/a/b.md"
    assert mem.read_text("/memories/a/b.md") == "x\n"
    assert backend.ls("/").entries == [{"path": "/a/", "is_dir": True}]
    assert backend.glob("*.md").matches == [{"path": "/a/b.md", "is_dir": False, "size": 2}]
    assert backend.grep("x", "/a").matches == [{"path": "/a/b.md", "line": 1, "text": "x"}]
    assert backend.download_files(["/a/b.md"])[0].content == b"x\n"
    assert MEMORIES_ROUTE == "/memories/"


def test_decomposed_unicode_paths(mem: EncryptedMemory) -> None:
    """s3memory stores and shows paths in NFC; a directory named in NFD still lists and
    searches (the listing is compared in NFC)."""
    nfd = unicodedata.normalize("NFD", "/memories/café")
    backend = deep_agent_backend(mem)
    assert backend.write(f"{nfd}/menu.md", "x\n").error is None
    shown = unicodedata.normalize("NFC", f"{nfd}/menu.md")
    assert [f.path for f in mem.list_files()] == [shown]
    assert backend.ls(nfd).entries == [{"path": shown, "is_dir": False, "size": 2}]
    assert [m["path"] for m in backend.glob("*.md", nfd).matches or []] == [shown]
    assert [m["path"] for m in backend.grep("x", nfd).matches or []] == [shown]


def test_construction(mem: EncryptedMemory) -> None:
    assert S3MemoryBackend(mem).memory is mem
    from deepagents.backends.protocol import SandboxBackendProtocol

    assert not isinstance(S3MemoryBackend(mem), SandboxBackendProtocol)  # runs no commands
    with pytest.raises(TypeError, match="not both"):
        S3MemoryBackend(mem, user_id="alice")
    with pytest.raises(ConfigurationError, match="bucket"):
        S3MemoryBackend()  # no user: a backend of many users, but on no store
    with pytest.raises(TypeError, match="user_id_from= is for a backend of many users"):
        S3MemoryBackend(mem, user_id_from=lambda runtime: "alice")
    with pytest.raises(TypeError, match="user_id_from= is for a backend of many users"):
        deep_agent_backend(user_id="bob", store=InMemoryStore(), master_key=MASTER_KEY, user_id_from=lambda r: "x")
    composite = deep_agent_backend(mem)
    assert isinstance(composite, CompositeBackend) and isinstance(composite.default, StateBackend)
    ((route, routed),) = composite.routes.items()
    assert route == "/memories/" and isinstance(routed, S3MemoryBackend) and routed.memory is mem
    default = StateBackend()
    assert deep_agent_backend(mem, default=default).default is default
    built = deep_agent_backend(user_id="carol", store=InMemoryStore(), master_key=MASTER_KEY)
    routed = built.routes["/memories/"]
    assert isinstance(routed, S3MemoryBackend) and routed.memory.layout.tenant == "carol"  # type: ignore[union-attr]
    # memory= a UserMemories: each run's user, opened by it (here with an opener of one's own)
    store = InMemoryStore()
    opened: list[str] = []

    def opener(user_id: str) -> EncryptedMemory:
        opened.append(user_id)
        return open_memory(user_id=user_id, store=store, master_key=MASTER_KEY)

    agent, _ = agent_for(deep_agent_backend(UserMemories(opener)), call("ls", path="/memories"))
    agent.invoke({"messages": [{"role": "user", "content": "x"}]}, context={"user_id": "dora"})
    assert opened == ["dora"]


# -- errors ------------------------------------------------------------------------------------


def test_unexpected_failure_is_a_generic_line(mem: EncryptedMemory, caplog: pytest.LogCaptureFixture) -> None:
    """Anything but an s3memory error: a generic line in ``error`` (logged), never raised,
    never the exception's text."""
    backend = deep_agent_backend(mem)

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret detail /memories/private")

    for name in ("read_text", "list_files", "write_text", "str_replace", "replace_all", "delete", "search_corpus"):
        setattr(mem, name, boom)
    generic = "Error: The memory backend failed unexpectedly (RuntimeError)."
    with caplog.at_level(logging.ERROR, logger="s3memory"):
        errors = [
            backend.read("/memories/a.md").error,
            backend.ls("/memories").error,
            backend.glob("*", "/memories").error,
            backend.write("/memories/a.md", "x").error,
            backend.edit("/memories/a.md", "x", "y").error,
            backend.edit("/memories/a.md", "x", "y", replace_all=True).error,
            backend.delete("/memories/a.md").error,
            backend.grep("x", "/memories").error,
            backend.download_files(["/memories/a.md"])[0].error,
            backend.upload_files([("/memories/a.md", b"x")])[0].error,
        ]
    # read, ls and glob without the "Error: " their tools put before it
    assert errors == [generic.removeprefix("Error: ")] * 3 + [generic] * 7
    assert "secret detail" not in "".join(str(e) for e in errors)
    assert "secret detail" in caplog.text  # for the operator, in the log


def test_read_only_mount(mem: EncryptedMemory) -> None:
    """A MountedMemory as memory=: the mount is a directory of the tree, readable; a change
    under a read-only mount is refused (permission_denied where the protocol has codes)."""
    store = mem.store
    team = open_memory(user_id="team", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    team.create("/memories/handbook.md", "deploys on Tuesdays\n")
    mounted = open_memory(
        user_id="alice",
        store=store,
        master_key=MASTER_KEY,
        key_cache=KeyCache(),
        mounts=[Mount("team", "team"), Mount("scratch", "alice-scratch", access="read_write")],
    )
    backend = deep_agent_backend(mounted)
    # the mount points are directories, also when empty
    assert [e["path"] for e in backend.ls("/memories").entries or []] == ["/memories/scratch/", "/memories/team/"]
    assert backend.read("/memories/team/handbook.md").file_data == {
        "content": "deploys on Tuesdays\n",
        "encoding": "utf-8",
    }
    assert backend.grep("Tuesdays", "/memories").matches == [
        {"path": "/memories/team/handbook.md", "line": 1, "text": "deploys on Tuesdays"}
    ]
    assert backend.write("/memories/team/x.md", "x").error == (
        "Error: Cannot write /memories/team/x.md: /memories/team is mounted read-only"
    )
    assert backend.edit("/memories/team/handbook.md", "Tuesdays", "Fridays").error == (
        "Error: Cannot edit /memories/team/handbook.md: /memories/team is mounted read-only"
    )
    assert backend.delete("/memories/team/handbook.md").error == (
        "Error: Cannot delete /memories/team/handbook.md: /memories/team is mounted read-only"
    )
    assert backend.upload_files([("/memories/team/x.md", b"x")])[0].error == "permission_denied"
    assert team.read_text("/memories/handbook.md") == "deploys on Tuesdays\n"
    # a mount point is a directory
    assert backend.write("/memories/scratch", "x").error == "Error: Cannot write /memories/scratch: it is a directory"
    assert backend.upload_files([("/memories/scratch", b"x")])[0].error == "is_directory"
    assert backend.download_files(["/memories/team"])[0].error == "is_directory"
    # the writable mount and the own store take writes
    assert backend.write("/memories/scratch/a.md", "a\n").error is None
    assert backend.write("/memories/own.md", "b\n").error is None
    assert [f.path for f in mounted.list_files()] == [
        "/memories/own.md",
        "/memories/scratch/a.md",
        "/memories/team/handbook.md",
    ]


# -- in a deep agent ---------------------------------------------------------------------------


def test_deep_agent_works_on_the_encrypted_memory(mem: EncryptedMemory) -> None:
    """Every file tool under /memories/ lands in the encrypted memory; AGENTS.md reaches the
    system prompt; a path outside /memories/ stays in the graph state."""
    mem.create("/memories/AGENTS.md", AGENTS_MD)
    tea = "/memories/prefs/tea.md"
    agent, model = agent_for(
        deep_agent_backend(mem),
        call("write_file", file_path=tea, content="tea: green\nmilk: no\nsugar: no\n"),
        call("edit_file", file_path=tea, old_string="no", new_string="never", replace_all=True),
        call("edit_file", file_path=tea, old_string="green", new_string="oolong"),
        call("read_file", file_path=tea, offset=1, limit=1),
        call("ls", path="/memories"),
        call("grep", pattern="oolong", path="/memories"),
        call("glob", pattern="**/*.md", path="/memories"),
        call("write_file", file_path="/scratch/plan.md", content="draft\n"),
        call("write_file", file_path="/memories/old/x.md", content="x\n"),
        call("delete", file_path="/memories/old"),
        memory=["/memories/AGENTS.md"],
    )
    out = agent.invoke({"messages": [{"role": "user", "content": "remember that I drink oolong"}]})
    assert tool_results(out) == [
        ("write_file", "success", f"Updated file {tea}"),
        ("edit_file", "success", f"Successfully replaced 2 instance(s) of the string in '{tea}'"),
        ("edit_file", "success", f"Successfully replaced 1 instance(s) of the string in '{tea}'"),
        ("read_file", "success", "@@ lines 2-2 of 3 | next offset 2 @@\nmilk: never"),
        ("ls", "success", "['/memories/AGENTS.md', '/memories/prefs/']"),
        ("grep", "success", tea),
        ("glob", "success", f"['/memories/AGENTS.md', '{tea}']"),
        ("write_file", "success", "Updated file /scratch/plan.md"),
        ("write_file", "success", "Updated file /memories/old/x.md"),
        ("delete", "success", "Deleted /memories/old"),
    ]
    assert mem.read_text(tea) == "tea: oolong\nmilk: never\nsugar: never\n"
    assert [f.path for f in mem.list_files()] == ["/memories/AGENTS.md", tea]
    # /scratch went to the state backend (the conversation), not to the store
    assert set(out["files"]) == {"/scratch/plan.md"}
    # AGENTS.md, read through download_files, is in the system prompt of every model call
    system = model.seen[0][0]
    assert system.type == "system" and "- the user is Alice" in system.text
    assert "- the user is Alice" in model.seen[-1][0].text


def test_parallel_tool_calls_of_one_turn(mem: EncryptedMemory) -> None:
    """LangGraph runs one turn's tool calls concurrently (worker threads, one memory)."""
    mem.create("/memories/log.md", "a\na\na\n")
    calls = [
        *({"name": "write_file", "args": {"file_path": f"/memories/p/{i}.md", "content": f"{i}\n"}} for i in range(6)),
        {
            "name": "edit_file",
            "args": {"file_path": "/memories/log.md", "old_string": "a", "new_string": "b", "replace_all": True},
        },
        {"name": "read_file", "args": {"file_path": "/memories/log.md"}},
        {"name": "grep", "args": {"pattern": "a", "path": "/memories"}},
    ]
    turn = AIMessage(content="", tool_calls=[{**c, "id": f"p{i}", "type": "tool_call"} for i, c in enumerate(calls)])
    results = run(deep_agent_backend(mem), turn)
    assert [status for _, status, _ in results] == ["success"] * len(calls)
    assert [f.path for f in mem.list_files("/memories/p")] == [f"/memories/p/{i}.md" for i in range(6)]
    assert mem.read_text("/memories/log.md") == "b\nb\nb\n"


def test_deep_agent_sees_errors_as_error_results(mem: EncryptedMemory) -> None:
    mem.create("/memories/a.md", "one\none\n")
    results = run(
        deep_agent_backend(mem),
        call("write_file", file_path="/memories/keys.md", content=AWS_SECRET),
        call("read_file", file_path="/memories/missing.md"),
        call("edit_file", file_path="/memories/a.md", old_string="one", new_string="two"),
        call("edit_file", file_path="/memories/missing.md", old_string="one", new_string="two"),
        call("read_file", file_path="/memories/../etc/passwd"),
        call("delete", file_path="/memories/missing.md"),
        call("ls", path="/memories/a.md"),
    )
    assert results == [
        ("write_file", "error", GUARD_REFUSAL),
        ("read_file", "error", "Error: File '/missing.md' not found"),
        (
            "edit_file",
            "error",
            "Error: String 'one' appears 2 times in file. Use replace_all=True to replace all instances, "
            "or provide a more specific string with surrounding context.",
        ),
        ("edit_file", "error", "Error: File '/missing.md' not found"),
        # deepagents refuses traversal before any backend is asked (the backend refuses it too:
        # test_protocol's invalid_path, and the next test)
        ("read_file", "error", "Error: Path traversal not allowed: /memories/../etc/passwd"),
        ("delete", "error", "Error: File '/missing.md' not found"),
        ("ls", "error", "Error: Path '/a.md': not_a_directory"),
    ]
    assert [f.path for f in mem.list_files()] == ["/memories/a.md"]
    assert mem.read_text("/memories/a.md") == "one\none\n"


def test_names_deepagents_reads_as_binary_are_refused(mem: EncryptedMemory) -> None:
    """deepagents' read_file sends an image, PDF, audio or video name as base64 data: a memory
    file's text there would be invalid data in the conversation."""
    mem.create("/memories/scan.pdf", "made by the memory tool\n")
    results = run(
        deep_agent_backend(mem),
        call("write_file", file_path="/memories/photo.png", content="not an image"),
        call("read_file", file_path="/memories/scan.pdf"),
        call("write_file", file_path="/memories/notes.md", content="fine"),
    )
    refusal = "/memories/{0}: memory files are text, and a file named *{1} would be read as binary; " + (
        "name it .md or .txt (the memory tool can rename it)"
    )
    assert results == [
        ("write_file", "error", "Error: " + refusal.format("photo.png", ".png")),
        ("read_file", "error", "Error: " + refusal.format("scan.pdf", ".pdf")),
        ("write_file", "success", "Updated file /memories/notes.md"),
    ]
    (upload,) = deep_agent_backend(mem).upload_files([("/memories/clip.mp3", b"text")])
    assert upload.error == "permission_denied"
    assert [f.path for f in mem.list_files()] == ["/memories/notes.md", "/memories/scan.pdf"]


def test_escaping_paths_are_refused_by_s3memory(mem: EncryptedMemory) -> None:
    """A path that leaves /memories, handed to the backend past deepagents' own check."""
    backend = deep_agent_backend(mem)
    escape = "Path /memories/../x would escape /memories directory: '..' segments (directory traversal) are not allowed"
    assert backend.read("/memories/../x").error == escape
    assert backend.write("/memories/../x", "x").error == escape
    assert backend.edit("/memories/a/../../x", "x", "y").error == escape.replace(
        "/memories/../x", "/memories/a/../../x"
    )
    up = escape.replace("/memories/../x", "/memories/..")
    assert backend.ls("/memories/..").error == up
    assert backend.glob("*", "/memories/..").error == up
    assert backend.grep("x", "/memories/..").error == up
    assert backend.delete("/memories/..").error == up
    assert mem.list_files() == []


def refused(path: str, normal: str) -> str:
    """The refusal of ``path``, a spelling of ``normal`` (in /memories/) that the route misses."""
    return f"invalid_path: {path!r} is {normal!r} written another way; use {normal!r}"


#: Paths that name a file in /memories/ but do not begin with "/memories/" as written, so that
#: deepagents' CompositeBackend would route them to the default backend.
OTHER_SPELLINGS = [
    ("//memories/x.md", "/memories/x.md"),  # deepagents' validate_path keeps a leading "//"
    ("//memories", "/memories"),
    ("/./memories/x.md", "/memories/x.md"),
    ("/tmp/../memories/x.md", "/memories/x.md"),
    ("memories/x.md", "/memories/x.md"),
    ("\\\\memories\\x.md", "/memories/x.md"),
]


@pytest.mark.parametrize(("path", "normal"), OTHER_SPELLINGS)
def test_other_spellings_of_memories_are_refused_not_sent_elsewhere(
    mem: EncryptedMemory, tmp_path: Path, path: str, normal: str
) -> None:
    """Every method, sync and async, on a path whose normal form is in /memories/ but that the
    route misses as written: invalid_path, and neither backend touched (the bug: write_file of
    "//memories/x" said "Updated file" and wrote the conversation's state)."""
    scratch = tmp_path / "default"
    scratch.mkdir()
    backend = deep_agent_backend(mem, default=FilesystemBackend(root_dir=scratch, virtual_mode=True))
    bare, text = refused(path, normal), "Error: " + refused(path, normal)
    assert backend.write(path, "lost?").error == text
    assert backend.edit(path, "a", "b").error == text
    assert backend.delete(path).error == text
    assert backend.grep("x", path).error == text
    assert backend.ls(path).error == bare  # deepagents adds "Error: " to these three
    assert backend.read(path).error == bare
    assert backend.glob("*", path).error == bare
    assert [r.error for r in backend.upload_files([(path, b"x"), ("/memories/ok.md", b"ok")])] == [
        "invalid_path",
        None,
    ]
    assert [r.error for r in backend.download_files([path, "/memories/ok.md"])] == ["invalid_path", None]
    assert asyncio.run(backend.awrite(path, "lost?")).error == text
    assert asyncio.run(backend.aedit(path, "a", "b")).error == text
    assert asyncio.run(backend.adelete(path)).error == text
    assert asyncio.run(backend.agrep("x", path)).error == text
    assert asyncio.run(backend.als(path)).error == bare
    assert asyncio.run(backend.aread(path)).error == bare
    assert asyncio.run(backend.aglob("*", path)).error == bare
    assert [r.error for r in asyncio.run(backend.aupload_files([(path, b"x")]))] == ["invalid_path"]
    assert [r.error for r in asyncio.run(backend.adownload_files([path]))] == ["invalid_path"]
    assert list(scratch.iterdir()) == []
    assert [f.path for f in mem.list_files()] == ["/memories/ok.md"]
    # the route as written, and paths outside it, are unchanged
    assert backend.write("/memories/x.md", "kept").error is None
    assert backend.write("/memoriesX/a.md", "a").error is None
    assert backend.write("/b.md", "b").error is None
    assert sorted(p.name for p in scratch.iterdir()) == ["b.md", "memoriesX"]


def test_deep_agent_write_file_to_double_slash_memories_is_an_error(mem: EncryptedMemory) -> None:
    """The model's write_file("//memories/x.md") is an error result that names the path to use,
    and nothing is in the conversation's files either; the retry lands in the memory."""
    agent, _ = agent_for(
        deep_agent_backend(mem),
        call("write_file", file_path="//memories/x.md", content="remember this\n"),
        call("write_file", file_path="/memories/x.md", content="remember this\n"),
    )
    out = agent.invoke({"messages": [{"role": "user", "content": "remember"}]})
    assert tool_results(out) == [
        ("write_file", "error", "Error: " + refused("//memories/x.md", "/memories/x.md")),
        ("write_file", "success", "Updated file /memories/x.md"),
    ]
    assert not out.get("files")
    assert mem.read_text("/memories/x.md") == "remember this\n"


def test_deep_agent_without_agents_md(mem: EncryptedMemory) -> None:
    """memory=[...] naming a file not yet written: file_not_found, which deepagents skips."""
    agent, model = agent_for(deep_agent_backend(mem), memory=["/memories/AGENTS.md"])
    out = agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
    assert out["messages"][-1].text == "done"
    assert "<agent_memory>\n(No memory loaded)\n" in model.seen[0][0].text


def test_ainvoke(mem: EncryptedMemory) -> None:
    """The protocol's a* methods (the sync ones in a worker thread) under ainvoke."""
    mem.create("/memories/AGENTS.md", AGENTS_MD)
    agent, model = agent_for(
        deep_agent_backend(mem),
        call("write_file", file_path="/memories/x.md", content="alpha\nbeta\n"),
        call("edit_file", file_path="/memories/x.md", old_string="beta", new_string="gamma"),
        call("grep", pattern="gamma", path="/memories", output_mode="content"),
        call("glob", pattern="*.md", path="/memories"),
        call("ls", path="/memories"),
        call("read_file", file_path="/memories/x.md"),
        call("delete", file_path="/memories/x.md"),
        memory=["/memories/AGENTS.md"],
    )
    out = asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": "x"}]}))
    assert tool_results(out) == [
        ("write_file", "success", "Updated file /memories/x.md"),
        ("edit_file", "success", "Successfully replaced 1 instance(s) of the string in '/memories/x.md'"),
        ("grep", "success", "/memories/x.md:\n  2: gamma"),
        ("glob", "success", "['/memories/AGENTS.md', '/memories/x.md']"),
        ("ls", "success", "['/memories/AGENTS.md', '/memories/x.md']"),
        ("read_file", "success", "@@ lines 1-2 of 2 @@\nalpha\ngamma"),
        ("delete", "success", "Deleted /memories/x.md"),
    ]
    assert "- the user is Alice" in model.seen[0][0].text
    assert [f.path for f in mem.list_files()] == ["/memories/AGENTS.md"]


def test_deep_agent_on_moto_s3(s3_client: Any) -> None:
    """The whole loop on S3 (moto), the backend opened from options."""
    backend = deep_agent_backend(bucket=BUCKET, s3_client=s3_client, user_id="dave", master_key=MASTER_KEY)
    routed = backend.routes["/memories/"]
    assert isinstance(routed, S3MemoryBackend)
    routed.memory.create("/memories/AGENTS.md", AGENTS_MD)
    results = run(
        backend,
        call("write_file", file_path="/memories/todo.md", content="- call Bob\n"),
        call("edit_file", file_path="/memories/todo.md", old_string="Bob", new_string="Carol"),
        call("grep", pattern="Carol"),
        call("write_file", file_path="/memories/keys.md", content=AWS_SECRET),
        memory=["/memories/AGENTS.md"],
    )
    assert [status for _, status, _ in results] == ["success", "success", "success", "error"]
    assert results[2][2] == "/memories/todo.md"
    assert routed.memory.read_text("/memories/todo.md") == "- call Carol\n"
    assert [f.path for f in routed.memory.list_files()] == ["/memories/AGENTS.md", "/memories/todo.md"]


# -- many users through one agent ------------------------------------------------------------

REQUEST = {"messages": [{"role": "user", "content": "remember"}]}


@dataclass
class RunContext:
    """A typed run context, as a LangGraph ``context_schema`` would be."""

    user_id: str


def users_backend(store: InMemoryStore, **options: Any) -> CompositeBackend:
    """The backend of a server: no user_id, so each run's user."""
    return deep_agent_backend(store=store, master_key=MASTER_KEY, key_cache=KeyCache(), **options)


def memory_of(store: InMemoryStore, user_id: str) -> EncryptedMemory:
    return open_memory(user_id=user_id, store=store, master_key=MASTER_KEY, key_cache=KeyCache())


def test_two_users_through_one_agent_are_isolated() -> None:
    """One backend and one agent, built once (at module scope in a server), serve two users,
    each run's user named by its context (a mapping or an object with ``user_id``) or its
    config: each run reads and writes its user's memory only, AGENTS.md included."""
    store = InMemoryStore()
    memory_of(store, "alice").create("/memories/AGENTS.md", "- Alice drinks tea\n")
    memory_of(store, "bob").create("/memories/AGENTS.md", "- Bob drinks coffee\n")
    agent, model = agent_for(
        users_backend(store),
        call("write_file", file_path="/memories/notes.md", content="alice's note\n"),
        AIMessage(content="done"),
        call("read_file", file_path="/memories/notes.md"),
        call("write_file", file_path="/memories/notes.md", content="bob's note\n"),
        call("ls", path="/memories"),
        AIMessage(content="done"),
        call("read_file", file_path="/memories/notes.md"),
        call("grep", pattern="note"),
        memory=["/memories/AGENTS.md"],
    )
    first = agent.invoke(REQUEST, context={"user_id": "alice"})
    second = agent.invoke(REQUEST, context=RunContext("bob"))
    third = agent.invoke(REQUEST, config={"configurable": {"user_id": "alice"}})
    assert tool_results(first) == [("write_file", "success", "Updated file /memories/notes.md")]
    assert tool_results(second) == [
        ("read_file", "error", "Error: File '/notes.md' not found"),  # alice's note is not bob's
        ("write_file", "success", "Updated file /memories/notes.md"),
        ("ls", "success", "['/memories/AGENTS.md', '/memories/notes.md']"),
    ]
    assert tool_results(third) == [
        ("read_file", "success", "@@ lines 1-1 of 1 @@\nalice's note"),
        ("grep", "success", "/memories/notes.md"),
    ]
    assert memory_of(store, "alice").read_text("/memories/notes.md") == "alice's note\n"
    assert memory_of(store, "bob").read_text("/memories/notes.md") == "bob's note\n"
    # each run's system prompt holds its own user's AGENTS.md (runs of 2, 4 and 3 model calls)
    prompts = [model.seen[i][0].text for i in (0, 2, 6)]
    assert ["Alice drinks tea" in p for p in prompts] == [True, False, True]
    assert ["Bob drinks coffee" in p for p in prompts] == [False, True, False]


def test_context_names_the_user_before_config() -> None:
    store = InMemoryStore()
    agent, _ = agent_for(users_backend(store), call("write_file", file_path="/memories/x.md", content="x\n"))
    agent.invoke(REQUEST, context={"user_id": "bob"}, config={"configurable": {"user_id": "alice"}})
    assert [f.path for f in memory_of(store, "bob").list_files()] == ["/memories/x.md"]
    assert memory_of(store, "alice").list_files() == []


@pytest.mark.parametrize(
    "how",
    [
        {},
        {"context": {"user_id": ""}},
        {"context": {"user": "alice"}},
        {"context": RunContext("")},
        {"config": {"configurable": {"thread_id": "t1"}}},
    ],
    ids=["nothing", "empty", "other-key", "empty-attribute", "config-without-user"],
)
def test_a_run_naming_no_user_is_refused_to_the_caller(how: dict[str, Any]) -> None:
    """NoUserError reaches whoever called invoke (from the first tool call), never the model,
    and nothing is written."""
    store = InMemoryStore()
    agent, model = agent_for(users_backend(store), call("write_file", file_path="/memories/x.md", content="x\n"))
    with pytest.raises(NoUserError, match=r"pass context=\{'user_id': \.\.\.\} to agent\.invoke"):
        agent.invoke(REQUEST, **how)
    assert len(model.seen) == 1  # the turn that called the tool; no tool result went back
    assert list(store.list("")) == []


def test_a_run_naming_no_user_is_refused_on_ainvoke_and_before_the_model() -> None:
    """Under ainvoke too; and with memory=[AGENTS.md], before the first model call."""
    store = InMemoryStore()
    agent, model = agent_for(users_backend(store), memory=["/memories/AGENTS.md"])
    with pytest.raises(NoUserError):
        asyncio.run(agent.ainvoke(REQUEST))
    assert model.seen == []
    agent, model = agent_for(
        users_backend(store),
        call("ls", path="/memories"),
        call("write_file", file_path="/memories/x.md", content="x\n"),
    )
    with pytest.raises(NoUserError):
        asyncio.run(agent.ainvoke(REQUEST))
    assert len(model.seen) == 1
    # named, the same agent's async run works on that user's memory
    out = asyncio.run(agent.ainvoke(REQUEST, context={"user_id": "erin"}))
    assert tool_results(out) == [("write_file", "success", "Updated file /memories/x.md")]
    assert [f.path for f in memory_of(store, "erin").list_files()] == ["/memories/x.md"]


def thread_agent(backend: BackendProtocol, turns: int, *, guarded: bool) -> tuple[Any, ScriptedChatModel]:
    """A deep agent on a checkpointer (threads that outlive a run), answering ``turns`` runs."""
    from langgraph.checkpoint.memory import InMemorySaver

    model = ScriptedChatModel(messages=iter([AIMessage(content=f"answer {i}") for i in range(turns)]))
    agent = create_deep_agent(
        model=model,
        backend=backend,
        memory=["/memories/AGENTS.md"],
        checkpointer=InMemorySaver(),
        middleware=[ThreadUserMiddleware(backend)] if guarded else [],
    )
    return agent, model


THREAD = {"configurable": {"thread_id": "t1"}}


def test_without_the_thread_guard_a_shared_thread_shows_one_users_agents_md_to_another() -> None:
    """Why ThreadUserMiddleware exists: deepagents loads AGENTS.md once per thread, so on a
    thread started by alice, bob's run is shown alice's, and a run naming no user is never
    refused (no memory call is made)."""
    store = InMemoryStore()
    memory_of(store, "alice").create("/memories/AGENTS.md", "- Alice drinks tea\n")
    memory_of(store, "bob").create("/memories/AGENTS.md", "- Bob drinks coffee\n")
    agent, model = thread_agent(users_backend(store), 3, guarded=False)
    agent.invoke(REQUEST, config=THREAD, context={"user_id": "alice"})
    agent.invoke(REQUEST, config=THREAD, context={"user_id": "bob"})
    agent.invoke(REQUEST, config=THREAD)
    assert ["Alice drinks tea" in seen[0].text for seen in model.seen] == [True, True, True]


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
def test_a_thread_belongs_to_the_user_of_its_first_run(how: str) -> None:
    """With the guard, another user's run on the thread raises ThreadUserError and a run
    naming none NoUserError, both before any model call; the thread's user goes on, and
    bob's own thread is bob's. The thread's state keeps a digest, never the user id."""

    def run(agent: Any, **options: Any) -> None:
        if how == "invoke":
            agent.invoke(REQUEST, **options)
        else:
            asyncio.run(agent.ainvoke(REQUEST, **options))

    store = InMemoryStore()
    memory_of(store, "alice").create("/memories/AGENTS.md", "- Alice drinks tea\n")
    memory_of(store, "bob").create("/memories/AGENTS.md", "- Bob drinks coffee\n")
    backend = users_backend(store)
    agent, model = thread_agent(backend, 3, guarded=True)
    run(agent, config=THREAD, context={"user_id": "alice"})
    with pytest.raises(ThreadUserError, match="started by another user"):
        run(agent, config=THREAD, context={"user_id": "bob"})
    with pytest.raises(NoUserError, match="names no user"):
        run(agent, config=THREAD)
    assert len(model.seen) == 1
    run(agent, config=THREAD, context={"user_id": "alice"})
    run(agent, config={"configurable": {"thread_id": "t2"}}, context={"user_id": "bob"})
    assert [("Alice drinks tea" in seen[0].text, "Bob drinks coffee" in seen[0].text) for seen in model.seen] == [
        (True, False),
        (True, False),
        (False, True),
    ]
    state = agent.get_state(THREAD).values
    assert "alice" not in repr(state) and len(state["s3memory_thread_user"]) == 64


def test_the_thread_guard_checks_nothing_for_one_users_backend_and_wants_our_backend() -> None:
    store = InMemoryStore()
    backend = deep_agent_backend(store=store, user_id="alice", master_key=MASTER_KEY, key_cache=KeyCache())
    agent, model = thread_agent(backend, 2, guarded=True)
    agent.invoke(REQUEST, config=THREAD)
    agent.invoke(REQUEST, config=THREAD, context={"user_id": "bob"})  # one user's memory: the context is not read
    assert len(model.seen) == 2
    with pytest.raises(TypeError, match="deep_agent_backend"):
        ThreadUserMiddleware(StateBackend())


def test_the_model_cannot_choose_the_user() -> None:
    """The user is the run's, never the tool input's: no tool the model is given has a user
    field, a user_id the model adds to a call changes nothing, and no path reaches another
    user's memory."""
    store = InMemoryStore()
    memory_of(store, "alice").create("/memories/secret.md", "alice's secret\n")
    agent, model = agent_for(
        users_backend(store),
        call("read_file", file_path="/memories/secret.md", user_id="alice"),
        call("write_file", file_path="/memories/x.md", content="x\n", user_id="alice"),
        call("read_file", file_path="/memories/../alice/memories/secret.md"),
        call("grep", pattern="secret", path="/"),
    )
    out = agent.invoke(REQUEST, context={"user_id": "mallory"})
    assert tool_results(out) == [
        ("read_file", "error", "Error: File '/secret.md' not found"),
        ("write_file", "success", "Updated file /memories/x.md"),
        ("read_file", "error", "Error: Path traversal not allowed: /memories/../alice/memories/secret.md"),
        ("grep", "success", "No matches found"),
    ]
    assert [f.path for f in memory_of(store, "mallory").list_files()] == ["/memories/x.md"]
    assert [f.path for f in memory_of(store, "alice").list_files()] == ["/memories/secret.md"]
    fields = {
        name for tool in model.tools for name in convert_to_openai_tool(tool)["function"]["parameters"]["properties"]
    }
    assert {"file_path", "content", "old_string", "pattern"} <= fields
    assert not [name for name in fields if "user" in name or "tenant" in name]


def test_user_id_from_names_the_user() -> None:
    """``user_id_from`` overrides the default: here the run's context's ``tenant``. What it
    raises, and a user id s3memory refuses, reach the caller of invoke."""
    store = InMemoryStore()
    backend = users_backend(store, user_id_from=lambda runtime: runtime.context["tenant"])
    agent, _ = agent_for(
        backend,
        call("write_file", file_path="/memories/x.md", content="acme\n"),
        AIMessage(content="done"),
        call("ls", path="/memories"),  # the second run's only turn: it fails at this call
        call("ls", path="/memories"),  # and the third's
    )
    agent.invoke(REQUEST, context={"tenant": "acme", "user_id": "alice"})
    assert [f.path for f in memory_of(store, "acme").list_files()] == ["/memories/x.md"]
    assert memory_of(store, "alice").list_files() == []
    with pytest.raises(KeyError, match="tenant"):
        agent.invoke(REQUEST, context={"user_id": "alice"})
    with pytest.raises(ConfigurationError, match="is not allowed"):
        agent.invoke(REQUEST, context={"tenant": "../bob"})


@pytest.mark.parametrize("guarded", [False, True], ids=["plain", "thread-guard"])
def test_a_subagent_works_on_the_memory_of_the_run_user(guarded: bool) -> None:
    """The task tool's subagent runs inside the run: same context, same user (and, with the
    thread guard on a checkpointer, the thread's user)."""
    from langgraph.checkpoint.memory import InMemorySaver

    store = InMemoryStore()
    backend = users_backend(store)
    turns = [
        call("task", description="note that tea is green", subagent_type="general-purpose"),
        call("write_file", file_path="/memories/tea.md", content="green\n"),
        AIMessage(content="noted"),
        AIMessage(content="done"),
    ]
    agent = create_deep_agent(
        model=ScriptedChatModel(messages=iter(turns)),
        backend=backend,
        middleware=[ThreadUserMiddleware(backend)] if guarded else [],
        checkpointer=InMemorySaver() if guarded else None,
    )
    out = agent.invoke(REQUEST, context={"user_id": "alice"}, config=THREAD if guarded else None)
    assert tool_results(out) == [("task", "success", "noted")]
    assert memory_of(store, "alice").read_text("/memories/tea.md") == "green\n"


# -- the example -------------------------------------------------------------------------------


def test_example_runs_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    spec = importlib.util.spec_from_file_location("example_deepagents_memory", EXAMPLE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # pydantic resolves the fake model's annotations there
    spec.loader.exec_module(module)
    out = io.StringIO()
    module.main([], out=out)
    text = out.getvalue()
    assert "a SCRIPTED model" in text
    assert "  write_file -> Updated file /memories/AGENTS.md\n" in text
    assert "  write_file -> Updated file /scratch/order.md\n" in text
    # the first conversation kept its scratch note in its state; the second starts without it
    assert text.count("(the conversation's scratch files: ['/scratch/order.md'])") == 1
    assert text.count("(the conversation's scratch files: none)") == 1
    assert "  grep -> /memories/AGENTS.md\n" in text
    assert "assistant: Ordered: Oolong, no milk, as your notes say." in text
    assert "those holding the plaintext: none" in text
    assert "AGENTS.md" in text.split("The memory, decrypted:")[1]
    assert "order.md" not in text.split("The memory, decrypted:")[1]


class CountingGets(DelegatingStore):
    gets = 0

    def _call(self, verb: str, perform: Callable[[], Any]) -> Any:
        if verb == "get":
            self.gets += 1
        return perform()


def test_grep_reads_the_sealed_index_not_each_file() -> None:
    store = CountingGets(InMemoryStore())
    memory = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    for i in range(30):
        memory.create(f"/memories/f{i:02}.md", f"line {i}\nneedle {i}\n")
    backend = S3MemoryBackend(memory)
    backend.grep("needle")  # builds and writes the index
    store.gets = 0
    found = backend.grep("needle 7")
    assert [(m["path"], m["line"]) for m in found.matches or []] == [("/f07.md", 2)]
    assert store.gets == 0  # warm: a listing (and a HEAD of the index), never a GET per file
