"""The SDK adapters: construction contract, ToolError mapping, async, and the real tool runner."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError
from helpers import BUCKET, MASTER_KEY
from helpers.fake_messages_api import scripted_client, text_of

from s3memory import AsyncS3MemoryTool, ConfigurationError, InMemoryStore, KeyCache, S3MemoryTool


@pytest.mark.slow  # a subprocess
def test_import_does_not_load_anthropic_boto3_or_the_cli_libraries() -> None:
    code = (
        "import sys, s3memory; "
        "from s3memory import open_memory, InMemoryStore; "
        "m = open_memory(user_id='u', store=InMemoryStore(), master_key=bytes(range(32))); "
        "m.create('/memories/a', 'x'); m.view('/memories'); "
        "heavy = ('anthropic', 'boto3', 'botocore', 'moto', 'click', 'rich', 'mcp', 's3memory.stores._localdir'); "
        "print(sorted(k for k in heavy if k in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_construction_contract_with_master_key(s3_client: Any) -> None:
    tool = S3MemoryTool(bucket=BUCKET, user_id="alice", s3_client=s3_client, master_key=MASTER_KEY)
    assert isinstance(tool, BetaAbstractMemoryTool)
    assert tool.to_dict() == {"type": "memory_20250818", "name": "memory"}
    assert tool.call({"command": "create", "path": "/memories/a.md", "file_text": "hi"}) == (
        "File created successfully at: /memories/a.md"
    )
    assert "1\thi" in tool.call({"command": "view", "path": "/memories/a.md"})
    keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket=BUCKET)["Contents"]]
    assert sorted(keys) == ["alice/.s3memory/tenant-key", "alice/memories/a.md"]


def test_construction_contract_with_kms(s3_client: Any, kms_client: Any, kms_key_id: str) -> None:
    tool = S3MemoryTool(
        bucket=BUCKET, user_id="alice", s3_client=s3_client, kms_key_id=kms_key_id, kms_client=kms_client
    )
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "hi"})
    assert tool.call({"command": "view", "path": "/memories"}).endswith("2B\t/memories/a.md")


@pytest.mark.parametrize(
    "options",
    [
        {"user_id": ""},
        {"user_id": "/"},
        {"user_id": ".."},
        {"user_id": "a\nb"},
        {"user_id": "x" * 129},
        {"user_id": "alice", "master_key": b"short"},
        {"user_id": "alice", "master_key": "0" * 32},
    ],
)
def test_construction_refuses_bad_options(options: dict[str, Any]) -> None:
    options.setdefault("master_key", MASTER_KEY)
    with pytest.raises(ConfigurationError):
        S3MemoryTool(store=InMemoryStore(), **options)


def test_errors_reach_the_model_as_tool_errors() -> None:
    tool = S3MemoryTool(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())
    with pytest.raises(ToolError) as info:
        tool.call({"command": "view", "path": "/memories/missing"})
    assert str(info.value) == "The path /memories/missing does not exist. Please provide a valid path."
    for bad in [
        None,
        [],
        {"command": "view", "path": None},
        {"command": 3},
        {"command": "view", "path": "/etc/passwd"},
    ]:
        with pytest.raises(ToolError) as info:
            tool.call(bad)
        # A path outside /memories is refused in the SDK reference's words.
        assert str(info.value).startswith(("Error:", "Path must start with /memories, got: /etc/passwd"))


def test_unexpected_exceptions_become_generic_tool_errors(caplog: pytest.LogCaptureFixture) -> None:
    class ExplodingStore(InMemoryStore):
        def list(self, prefix: str, *, limit: int | None = None) -> Any:
            raise RuntimeError("secret internal detail")

    tool = S3MemoryTool(user_id="alice", store=ExplodingStore(), master_key=MASTER_KEY, key_cache=KeyCache())
    with pytest.raises(ToolError) as info:
        tool.call({"command": "view", "path": "/memories"})
    assert str(info.value) == "Error: The memory backend failed unexpectedly (RuntimeError)."
    assert "secret internal detail" not in str(info.value)
    assert "unexpected error in the s3memory backend" in caplog.text


def test_typed_command_methods() -> None:
    from anthropic.types.beta import BetaMemoryTool20250818CreateCommand, BetaMemoryTool20250818ViewCommand

    tool = S3MemoryTool(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())
    create = BetaMemoryTool20250818CreateCommand(command="create", path="/memories/t", file_text="a\nb")
    assert tool.create(create) == "File created successfully at: /memories/t"
    view = BetaMemoryTool20250818ViewCommand(command="view", path="/memories/t", view_range=[2, -1])
    assert tool.view(view) == "Here's the content of /memories/t with line numbers:\n     2\tb"


def test_async_tool() -> None:
    import anyio

    tool = AsyncS3MemoryTool(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())
    assert isinstance(tool, BetaAsyncAbstractMemoryTool)

    async def scenario() -> None:
        assert await tool.call({"command": "create", "path": "/memories/a", "file_text": "x"}) == (
            "File created successfully at: /memories/a"
        )
        assert (await tool.call({"command": "view", "path": "/memories"})).endswith("1B\t/memories/a")
        with pytest.raises(ToolError):
            await tool.call({"command": "create", "path": "/memories/a", "file_text": "x"})

    anyio.run(scenario)


def test_tool_runner_round_trip(s3_client: Any) -> None:
    """The SDK's real tool runner drives our tool: tool_use in, tool_result (and is_error) out."""
    from anthropic import Anthropic

    script = [
        [{"type": "tool_use", "id": "t1", "name": "memory", "input": {"command": "view", "path": "/memories"}}],
        [
            {
                "type": "tool_use",
                "id": "t2",
                "name": "memory",
                "input": {"command": "create", "path": "/memories/prefs.md", "file_text": "likes tea\n"},
            },
            {"type": "tool_use", "id": "t3", "name": "memory", "input": {"command": "view", "path": "/memories/../x"}},
        ],
        [{"type": "text", "text": "Noted."}],
    ]
    seen: list[dict[str, Any]] = []
    client = Anthropic(api_key="test-key", http_client=scripted_client(script, seen), max_retries=0)
    tool = S3MemoryTool(bucket=BUCKET, user_id="alice", s3_client=s3_client, master_key=MASTER_KEY)
    runner = client.beta.messages.tool_runner(
        model="claude-scripted", max_tokens=100, tools=[tool], messages=[{"role": "user", "content": "remember: tea"}]
    )
    final = runner.until_done()
    assert final.content[0].text == "Noted."  # type: ignore[union-attr]
    assert seen[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    results = [block for block in seen[2]["messages"][-1]["content"] if block["type"] == "tool_result"]
    by_id = {r["tool_use_id"]: r for r in results}
    assert text_of(by_id["t2"]["content"]) == "File created successfully at: /memories/prefs.md"
    assert not by_id["t2"].get("is_error")
    assert by_id["t3"]["is_error"] is True
    assert "directory traversal" in text_of(by_id["t3"]["content"])
    first_result = seen[1]["messages"][-1]["content"][0]
    assert text_of(first_result["content"]).endswith("0B\t/memories")
    assert "likes tea" in tool.call({"command": "view", "path": "/memories/prefs.md"})
