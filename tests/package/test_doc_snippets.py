"""The snippets in the docs run as tests: every ```python block of README.md and
docs/**/*.md, and every shell block of ``s3memory`` commands, is a test of its own, named by
its page and the line of its opening fence (``test_a_snippet_runs[docs/features/history.md:18]``),
unless the line just above that fence marks it otherwise.

The markers (an HTML comment alone on the line just above the fence; neither GitHub nor the
site shows it):

- none: the block is a whole program. A ```python block runs alone, in a fresh namespace.
  A shell block (```bash, ```console, ```sh, ```shell) must be ``s3memory`` commands and
  nothing else (in ```console, the lines after a ``$ `` prompt; the others are output):
  they run in order, in process (click's CliRunner on ``s3memory.cli.cli``), and each must
  exit 0. A shell block that runs anything else must be marked ``skip``.
- ``<!-- test: skip (REASON) -->``: not run, for REASON, which is required: it needs a real
  AWS account, installs packages, starts other programs, is a list of commands to read
  rather than a script, or is a fragment that is not a program on its own (say of what).
- ``<!-- test: given NAME, NAME -->``: a fragment of the reader's program that uses names
  the rest of it defines (a memory, a client, a key's ARN): the test defines each NAME as
  ``GIVEN`` says, then runs the block as it is. Each NAME is one of ``GIVEN``'s, and the
  block uses it and does not bind it. Python blocks only.
- ``<!-- test: continue -->``: the next part of one program written across a page (a
  quickstart in steps): the block runs after the page's previous block, in its namespace
  and on the same files (working directory and ``S3MEMORY_HOME``), so a shell block can go
  on from a Python one and the other way round. That block must run too (not be skipped).
  The test of each part runs the parts before it first, each under its own page and lines,
  so a failure still names the part at fault.

Every block runs in the same world (``world``): moto's mock of AWS (fake credentials,
us-east-1) with the buckets the docs name (``DOC_BUCKETS``) and a KMS key under
``DOC_KEY_ALIAS``; ``anthropic.Anthropic`` talking to a fake Messages endpoint, where a
scripted model views /memories, creates a file and answers (``SCRIPT``; each memory call it
makes must succeed); a fake ``ANTHROPIC_API_KEY`` and an ``ANTHROPIC_BASE_URL`` that
refuses connections, so no client the test did not replace reaches the network; a fresh
temporary directory as the working directory and the embedded default's ``S3MEMORY_HOME``,
every other ``S3MEMORY_*`` variable unset. A block that defines ``test_*`` functions (a test
of the reader's) then calls each with the pytest fixtures it names (the s3memory plugin's).
A block that imports a package of an optional extra that is not installed (``OPTIONAL``;
the framework extras need Python 3.11) skips. A Python block is compiled under its page's
path and line numbers, so a traceback points into the Markdown.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers import REGION, REPO
from helpers.cli import ENV_NAMES

PYTHON = frozenset({"python", "py", "python3"})
SHELL = frozenset({"bash", "console", "sh", "shell"})
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<lang>[\w+-]*)[^`]*$")
MARKER = re.compile(r"^ *<!-- test: (?P<what>.*?) -->$")
MARKERS = "skip (REASON), given NAME, ... or continue"

DOC_BUCKETS = ("my-bucket", "my-memory-bucket")
DOC_KEY_ALIAS = "alias/agent-memory"
SCRIPT: list[list[dict[str, Any]]] = [  # what the scripted model answers, one turn a request
    [{"type": "tool_use", "id": "toolu_1", "name": "memory", "input": {"command": "view", "path": "/memories"}}],
    [
        {
            "type": "tool_use",
            "id": "toolu_2",
            "name": "memory",
            "input": {"command": "create", "path": "/memories/preferences.md", "file_text": "Prefers green tea.\n"},
        }
    ],
    [{"type": "text", "text": "Noted: you prefer green tea."}],
]
# A package an extra installs (pyproject.toml) -> that extra.
OPTIONAL = {
    "awscrt": "fast",
    "mcp": "mcp",
    "claude_agent_sdk": "agent-sdk",
    "opentelemetry": "otel",
    "deepagents": "deepagents",
    "langchain": "langchain",
    "langchain_anthropic": "langchain",
    "pydantic_ai": "pydantic-ai",
    "strands": "strands",
    "moto": "testing",
}


# -- the blocks --------------------------------------------------------------------------------
@dataclass
class Block:
    page: str  # relative to the repository
    line: int  # of the opening fence, from 1
    kind: str  # "python" or "shell"
    lang: str  # as the fence names it
    source: str
    marker: str | None = None  # what the marker says
    skip: str | None = None
    given: tuple[str, ...] = ()
    previous: Block | None = None  # the part of the program it goes on from
    errors: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def parts(self) -> list[Block]:
        """The program's parts up to this one, the first first."""
        return [*(self.previous.parts() if self.previous else []), self]


def read_page(page: str, text: str) -> tuple[list[Block], list[str]]:
    """The Python and shell blocks of a page (a block's marker mistakes are in its
    ``errors``), and the page's markers that are not just above one."""
    lines = text.splitlines()
    blocks: list[Block] = []
    stray: list[str] = []
    markers: set[int] = set()
    number = 0
    while number < len(lines):
        opening = FENCE.match(lines[number])
        if not opening:
            number += 1
            continue
        indent, fence, lang = opening["indent"], opening["fence"], opening["lang"].lower()
        closing = re.compile(rf"^ {{0,{len(indent) + 3}}}{re.escape(fence)}\s*$")
        end = number + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        body = "\n".join(line.removeprefix(indent) for line in lines[number + 1 : end]) + "\n"
        marker = MARKER.match(lines[number - 1]) if number else None
        kind = "python" if lang in PYTHON else "shell" if lang in SHELL else None
        if kind is not None:
            block = Block(page, number + 1, kind, lang, body, marker["what"] if marker else None)
            read_marker(block, blocks)
            blocks.append(block)
            markers.add(number - 1)
        number = end + 1
    for index, line in enumerate(lines):
        if line.lstrip().startswith("<!-- test") and index not in markers:
            stray.append(f"{page}:{index + 1}: {line.strip()!r} is not just above a ```python or shell block")
    return blocks, stray


def read_marker(block: Block, before: list[Block]) -> None:
    """Fill in ``block``'s plan from its marker (``before``: the page's earlier blocks)."""
    what = block.marker
    if what is None:
        if block.kind == "shell":
            others = [command for _, command in shell_commands(block) if command.split()[0] != "s3memory"]
            if others:
                block.errors.append(f"runs {others[0]!r}, not s3memory: mark it <!-- test: skip (REASON) -->")
    elif skip := re.fullmatch(r"skip \((.*\S.*)\)", what):
        block.skip = skip.group(1).strip()
    elif given := re.fullmatch(r"given (\w+(?:, \w+)*)", what):
        block.given = tuple(given.group(1).split(", "))
        if block.kind != "python":
            block.errors.append("only a Python block is given names")
        if unknown := [name for name in block.given if name not in GIVEN]:
            block.errors.append(f"given {', '.join(unknown)}: GIVEN has {', '.join(GIVEN)}")
        read, bound = names_of(block.source) if block.kind == "python" else (set(), set())
        for name in block.given:
            if name not in read or name in bound:
                block.errors.append(f"given {name}, which the block does not use, or binds itself")
    elif what == "continue":
        if not before:
            block.errors.append("continue: it is the page's first block")
        elif before[-1].skip is not None:
            block.errors.append(f"continue: {before[-1].where} is skipped")
        else:
            block.previous = before[-1]
    else:
        block.errors.append(f"unknown marker {what!r}: {MARKERS} (see tests/package/test_doc_snippets.py)")


def names_of(source: str) -> tuple[set[str], set[str]]:
    """The names a Python block reads, and those it binds (assigns, imports, defines)."""
    read: set[str] = set()
    bound: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
    return read, bound


def shell_commands(block: Block) -> Iterator[tuple[int, str]]:
    """Each command of a shell block with the page's line it starts on: a line ending in
    ``\\`` goes on on the next one; in ```console, commands follow a ``$ `` prompt (the other
    lines are their output); blank lines and comment lines are no commands."""
    start = 0
    words: list[str] = []  # of the command read so far
    for number, line in enumerate(block.source.splitlines(), start=block.line + 1):
        if not words:
            if block.lang == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            start = number
        words.append(line.strip().removesuffix("\\").strip())
        if not line.rstrip().endswith("\\"):
            yield start, " ".join(words)
            words = []
    if words:
        yield start, " ".join(words)


def missing_extra(block: Block) -> str | None:
    """The extra a Python block imports from that is not installed, if any."""
    if block.kind != "python":
        return None
    for node in ast.walk(ast.parse(block.source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules = [node.module]
        else:
            continue
        for top in (module.split(".")[0] for module in modules):
            if top in OPTIONAL and importlib.util.find_spec(top) is None:
                return OPTIONAL[top]
    return None


def every_block() -> tuple[list[Block], list[str]]:
    blocks: list[Block] = []
    stray: list[str] = []
    for page in sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")]):
        found, wrong = read_page(str(page.relative_to(REPO)), page.read_text())
        blocks += found
        stray += wrong
    return blocks, stray


# -- the world they run in ---------------------------------------------------------------------
@dataclass
class World:
    key_arn: str  # of the KMS key under DOC_KEY_ALIAS
    request: pytest.FixtureRequest
    conversations: list[list[dict[str, Any]]] = field(default_factory=list)  # each Anthropic()'s requests


@functools.cache
def aws_client(service: str) -> Any:
    """One client per service for the whole run (moto answers it while a mock is on)."""
    import boto3

    return boto3.client(service, region_name=REGION)


@pytest.fixture
def world(aws: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> World:
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("S3MEMORY_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # the discard port: refused
    monkeypatch.chdir(tmp_path)
    for bucket in DOC_BUCKETS:
        aws_client("s3").create_bucket(Bucket=bucket)
    key = aws_client("kms").create_key(Description="the docs' key")["KeyMetadata"]
    aws_client("kms").create_alias(AliasName=DOC_KEY_ALIAS, TargetKeyId=key["KeyId"])
    world = World(key_arn=str(key["Arn"]), request=request)

    import anthropic
    from helpers.fake_messages_api import scripted_client

    class ScriptedAnthropic(anthropic.Anthropic):
        """``Anthropic()`` on the fake endpoint: a conversation of its own."""

        def __init__(self, **options: Any) -> None:
            seen: list[dict[str, Any]] = []
            world.conversations.append(seen)
            super().__init__(**{**options, "http_client": scripted_client(SCRIPT, seen), "max_retries": 0})

    monkeypatch.setattr(anthropic, "Anthropic", ScriptedAnthropic)
    return world


def given_memory(namespace: dict[str, Any], world: World) -> Any:
    from s3memory import InMemoryStore, generate_master_key, open_memory

    return open_memory(user_id="alice", store=InMemoryStore(), master_key=generate_master_key())


def given_seen(namespace: dict[str, Any], world: World) -> Any:
    from s3memory import MemoryAdmin

    return MemoryAdmin(namespace["memory"]).write("/memories/drafts/old.md", "An old draft.\n")


def given_client(namespace: dict[str, Any], world: World) -> Any:
    import anthropic

    return anthropic.Anthropic()


def given_tool(namespace: dict[str, Any], world: World) -> Any:
    from s3memory import S3MemoryTool

    return S3MemoryTool(bucket=DOC_BUCKETS[0], user_id="alice", kms_key_id=DOC_KEY_ALIAS)


def given_model(namespace: dict[str, Any], world: World) -> Any:
    from strands.models.anthropic import AnthropicModel

    return AnthropicModel(model_id="claude-sonnet-5-5", max_tokens=2048)


# What a fragment may be given: name -> (what it is, how it is made, after the names before it).
GIVEN: dict[str, tuple[str, Callable[[dict[str, Any], World], Any]]] = {
    "memory": ("an EncryptedMemory of user alice on an InMemoryStore", given_memory),
    "seen": ("the MemoryInfo of /memories/drafts/old.md, written in `memory`", given_seen),
    "client": ("anthropic.Anthropic(): the fake Messages endpoint", given_client),
    "tool": (f"an S3MemoryTool of user alice on {DOC_BUCKETS[0]}, under {DOC_KEY_ALIAS}", given_tool),
    "task": ("what the user asks, a string", lambda namespace, world: "Remember that I prefer green tea."),
    "KEY_ARN": (f"the ARN of the KMS key {DOC_KEY_ALIAS}", lambda namespace, world: world.key_arn),
    "model": ("a Strands model of Claude (never called)", given_model),
}

BLOCKS, STRAY_MARKERS = every_block()


# -- running them ------------------------------------------------------------------------------
def run_python(block: Block, namespace: dict[str, Any], world: World) -> None:
    path = str(REPO / block.page)
    exec(compile("\n" * block.line + block.source, path, "exec"), namespace)  # the page's line numbers
    for name, value in list(namespace.items()):
        if name.startswith("test_") and inspect.isfunction(value) and value.__code__.co_filename == path:
            value(**{p: world.request.getfixturevalue(p) for p in inspect.signature(value).parameters})


def run_shell(block: Block) -> None:
    from click.testing import CliRunner

    from s3memory.cli import cli

    for line, command in shell_commands(block):
        words = shlex.split(command, comments=True)
        result = CliRunner().invoke(cli, words[1:], catch_exceptions=False)
        assert result.exit_code == 0, f"{block.page}:{line}: {command!r} exited {result.exit_code}:\n{result.output}"


def check_the_conversations(block: Block, world: World) -> None:
    """Every memory call the scripted model made succeeded."""
    for requests in world.conversations:
        for body in requests:
            for message in body["messages"]:
                content = message["content"] if isinstance(message["content"], list) else []
                for item in content:
                    failed = item.get("type") == "tool_result" and item.get("is_error")
                    assert not failed, f"{block.where}: the scripted model's memory call failed: {item}"


# -- the tests ---------------------------------------------------------------------------------
def params() -> list[Any]:
    """A parameter per block, named by page and line; those marked skip, skipped with their reason."""
    return [
        pytest.param(b, id=b.where, marks=[pytest.mark.skip(reason=f"{b.where}: {b.skip}")] if b.skip else [])
        for b in BLOCKS
    ]


@pytest.mark.parametrize("block", params())
def test_a_snippet_runs(block: Block, request: pytest.FixtureRequest) -> None:
    run(block, request)


def run(block: Block, request: pytest.FixtureRequest) -> dict[str, Any]:
    """Run ``block`` (after the parts of its program before it) in the world; its namespace."""
    assert not block.errors, f"{block.where}: " + "; ".join(block.errors)
    parts = block.parts()
    for part in parts:
        if extra := missing_extra(part):
            pytest.skip(f"{block.where}: needs the {extra} extra, which is not installed")
    world: World = request.getfixturevalue("world")
    namespace: dict[str, Any] = {"__name__": "__main__"}
    for name in parts[0].given:
        namespace[name] = GIVEN[name][1](namespace, world)
    for part in parts:
        if part.kind == "python":
            run_python(part, namespace, world)
        else:
            run_shell(part)
    check_the_conversations(block, world)
    return namespace


def test_a_program_in_parts_runs_in_one_namespace_and_one_home(request: pytest.FixtureRequest) -> None:
    page = (
        "```python\nfrom pathlib import Path\n\nnotes = Path('notes')\nnotes.mkdir()\n"
        "(notes / 'tea.md').write_text('Prefers green tea.\\n')\n```\n"
        "<!-- test: continue -->\n```console\n$ s3memory import ./notes --to /memories/notes\nImported...\n```\n"
        "<!-- test: continue -->\n```bash\ns3memory cat /memories/notes/tea.md  # the same home\n```\n"
        "<!-- test: continue -->\n```python\ntext = (notes / 'tea.md').read_text()  # the same namespace\n```\n"
    )
    blocks, _ = read_page("parts.md", page)
    assert [len(b.parts()) for b in blocks] == [1, 2, 3, 4]
    assert run(blocks[-1], request)["text"] == "Prefers green tea.\n"


def test_every_marker_is_well_formed() -> None:
    wrong = STRAY_MARKERS + [f"{block.where}: {error}" for block in BLOCKS for error in block.errors]
    assert not wrong, "\n".join(wrong)


def test_the_docs_run_most_of_their_snippets() -> None:
    running = [b for b in BLOCKS if b.skip is None]
    assert len(running) > len(BLOCKS) / 2
    assert {b.kind for b in running} == {"python", "shell"}
    assert any(b.page == "docs/getting-started.md" for b in running)


def test_the_marker_rules_catch_mistakes() -> None:
    page = (
        "<!-- test: run -->\n```python\nprint(1)\n```\n"  # 2: an unknown marker
        "<!-- test: skip () -->\n```python\nx = 1\n```\n"  # 6: no reason
        "<!-- test: skip (a real account) -->\n```python\nx = 1\n```\n"  # 10: fine
        "<!-- test: continue -->\n```python\nprint(x)\n```\n"  # 14: goes on from a skipped block
        "```bash\npip install s3memory\n```\n"  # 17: runs more than s3memory, unmarked
        "<!-- test: given memory -->\n```python\nmemory = 1\n```\n"  # 21: binds what it is given
        "<!-- test: given nothing -->\n```python\nnothing()\n```\n"  # 25: a name GIVEN lacks
        "<!-- test: skip (a real account) -->\n\n```python\nprint(2)\n```\n"  # 30: the marker is not just above
        "<!-- test: skip (never run anyway) -->\n```json\n{}\n```\n"  # a marker on a block never run
    )
    blocks, stray = read_page("page.md", page)
    assert [(b.line, bool(b.errors)) for b in blocks] == [
        (2, True),
        (6, True),
        (10, False),
        (14, True),
        (17, True),
        (21, True),
        (25, True),
        (30, False),
    ]
    assert sorted(s.split(":")[1] for s in stray) == ["28", "33"]
    good = (
        "```python\nx = 1\n```\n"
        "<!-- test: continue -->\n```console\n$ s3memory view\n/memories\n$ s3memory \\\n  ls -r  # all\n```\n"
    )
    (first, second), stray = read_page("good.md", good)
    assert not first.errors and not second.errors and not stray
    assert second.parts() == [first, second]
    assert list(shell_commands(second)) == [(6, "s3memory view"), (8, "s3memory ls -r  # all")]


# -- the count ---------------------------------------------------------------------------------
class SnippetCount:
    """A line at the end of pytest's summary: how many snippets ran and how many were skipped."""

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        outcomes: dict[str, list[str]] = {}
        for outcome in ("passed", "failed", "skipped", "error"):
            for report in terminalreporter.stats.get(outcome, []):
                where = getattr(report, "nodeid", "").partition("::test_a_snippet_runs[")[2]
                if where and (outcome != "passed" or report.when == "call"):
                    outcomes.setdefault(outcome, []).append(where[:-1])
        if outcomes:
            kinds = {b.where: b.kind for b in BLOCKS}
            ran = outcomes.get("passed", [])
            python = sum(kinds.get(where) == "python" for where in ran)
            counts = [f"{len(ran)} ran ({python} Python, {len(ran) - python} shell)"]
            counts += [f"{len(found)} {outcome}" for outcome, found in outcomes.items() if outcome != "passed"]
            terminalreporter.write_line("doc snippets: " + ", ".join(counts))


@pytest.fixture(autouse=True, scope="module")
def count_the_snippets(request: pytest.FixtureRequest) -> None:
    plugins = request.config.pluginmanager
    if not plugins.has_plugin("s3memory-doc-snippet-count"):
        plugins.register(SnippetCount(), "s3memory-doc-snippet-count")
