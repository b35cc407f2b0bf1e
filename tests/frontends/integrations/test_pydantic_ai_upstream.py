"""pydantic-ai's own tests of its ``MemoryTool``, as behaviours of s3memory's ``S3Memory``.

pydantic-ai-slim's sdist ships no tests, so these are not run from it: each test here is our
own, asserting on ``S3Memory`` (per-run users, as a server builds it) what the upstream test
named in its docstring asserts on ``NativeTool(MemoryTool())`` plus a hand-written ``memory``
function tool (``pydantic-ai/tests/models/test_anthropic.py`` in pydantic/pydantic-ai). The upstream tests,
run ad hoc with ``S3Memory`` in place of theirs, are reported in docs/guides/pydantic-ai.md.
Claude is the real ``AnthropicModel`` on a fake Messages endpoint; no network, no API key.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from helpers import MASTER_KEY
from helpers.fake_messages_api import MessagesAPI, use

pytest.importorskip("pydantic_ai")
pytest.importorskip("anthropic")

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.capabilities import NativeTool
from pydantic_ai.exceptions import UserError
from pydantic_ai.models import Model
from pydantic_ai.native_tools import MemoryTool
from pydantic_ai.output import NativeOutput
from pydantic_ai.usage import UsageLimits

from s3memory import InMemoryStore, KeyCache, open_memory
from s3memory.integrations.pydantic_ai import S3Memory

pytestmark = pytest.mark.usefixtures("close_the_event_loop_run_sync_leaves")

NATIVE = {"name": "memory", "type": "memory_20250818"}
BETA = "context-management-2025-06-27"


class Endpoint(MessagesAPI):
    """The fake Messages endpoint, also answering ``/v1/messages/count_tokens``."""

    def __init__(self, script: list[list[dict[str, Any]]]) -> None:
        super().__init__(script)
        self.counted: list[tuple[dict[str, str], dict[str, Any]]] = []

    def __call__(self, request: Any) -> Any:
        import httpx2

        if request.url.path.endswith("/count_tokens"):
            self.counted.append((dict(request.headers), json.loads(request.content)))
            return httpx2.Response(200, json={"input_tokens": 10}, request=request)
        return super().__call__(request)


def claude(api: MessagesAPI, name: str = "claude-scripted", **settings: Any) -> Model:
    import httpx2
    from anthropic import AsyncAnthropic
    from pydantic_ai.models.anthropic import AnthropicModel, AnthropicModelSettings
    from pydantic_ai.providers.anthropic import AnthropicProvider

    client = AsyncAnthropic(
        api_key="test-key", http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(api)), max_retries=0
    )
    provider = AnthropicProvider(anthropic_client=client)
    return AnthropicModel(name, provider=provider, settings=AnthropicModelSettings(**settings))


def per_user_memory(**seed: str) -> tuple[S3Memory, InMemoryStore]:
    """A capability for every user (no user_id), and alice's memory holding ``seed``."""
    store = InMemoryStore()
    alice = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    for name, text in seed.items():
        alice.create(f"/memories/{name}", text)
    return S3Memory(store=store, master_key=MASTER_KEY, key_cache=KeyCache()), store


def test_the_memory_tool_answers_claude_from_the_users_memory() -> None:
    """Mirrors ``test_anthropic_memory_tool``: Claude, given the native ``memory_20250818`` tool,
    views ``/memories``; the local tool answers (not an error) and Claude's answer is the run's
    output. Its first half (a native ``MemoryTool`` without a ``memory`` tool is refused with
    "Native `MemoryTool` requires a 'memory' tool to be defined.") is shown as what S3Memory
    spares: the capability brings both."""
    api = MessagesAPI(
        [
            [{"type": "text", "text": "Let me check my memory."}, use("t1", command="view", path="/memories/home.md")],
            [{"type": "text", "text": "According to my memory, you live in **Mexico City**."}],
        ]
    )
    bare = Agent(claude(api, extra_headers={"anthropic-beta": "context-1m-2025-08-07"}))
    with pytest.raises(UserError, match=re.escape("Native `MemoryTool` requires a 'memory' tool to be defined.")):
        bare.run_sync("Where do I live?", toolsets=[], capabilities=[NativeTool(MemoryTool())])
    assert api.requests == []

    capability, _ = per_user_memory(**{"home.md": "The user lives in Mexico City.\n"})
    agent = Agent(claude(api, extra_headers={"anthropic-beta": "context-1m-2025-08-07"}), capabilities=[capability])
    result = agent.run_sync("Where do I live?", deps="alice")
    assert result.output == "According to my memory, you live in **Mexico City**."
    for headers, body in api.requests:
        assert body["tools"] == [NATIVE]
        assert sorted(headers["anthropic-beta"].split(",")) == sorted([BETA, "context-1m-2025-08-07"])
    (block,) = api.tool_results(1)
    assert (block["tool_use_id"], block["is_error"]) == ("t1", False)
    content = block["content"]
    text = content if isinstance(content, str) else "".join(part["text"] for part in content)
    assert "The user lives in Mexico City." in text


def test_the_memory_beta_merges_with_custom_betas_and_native_output() -> None:
    """Mirrors ``test_beta_header_merge_builtin_tools_and_native_output``: the memory tool's beta
    is sent with the client's custom ones (none lost), with structured native output."""

    class CityLocation(BaseModel):
        """A city and its country."""

        city: str
        country: str

    api = MessagesAPI([[{"type": "text", "text": '{"city": "Mexico City", "country": "Mexico"}'}]])
    # a model whose profile has native structured output
    model = claude(api, "claude-sonnet-4-6", extra_headers={"anthropic-beta": "custom-feature-1, custom-feature-2"})
    capability, _ = per_user_memory()
    agent = Agent(model, capabilities=[capability], output_type=NativeOutput(CityLocation))
    result = agent.run_sync("What is the capital of France?", deps="alice")
    assert result.output == CityLocation(city="Mexico City", country="Mexico")
    ((headers, body),) = api.requests
    assert sorted(headers["anthropic-beta"].split(",")) == [BETA, "custom-feature-1", "custom-feature-2"]
    assert body["tools"] == [NATIVE]


def test_count_tokens_keeps_the_memory_tool_and_its_beta() -> None:
    """Mirrors ``test_anthropic_count_tokens_omits_native_tools`` (its memory half; the other,
    server tools dropped from ``count_tokens``, is about pydantic-ai's server tools and fails
    upstream on 2.68 with pydantic-ai's own memory tool too) and
    ``test_anthropic_count_tokens_keeps_memory_tool``: the token count includes the memory
    tool's definition and beta."""

    api = Endpoint([[{"type": "text", "text": "hello world"}]])
    agent = Agent(claude(api), capabilities=[per_user_memory()[0]])

    @agent.tool_plain
    def lookup() -> str:  # pragma: no cover - never called
        return "lookup result"

    limits = UsageLimits(input_tokens_limit=20, count_tokens_before_request=True)
    assert agent.run_sync("hello", usage_limits=limits, deps="alice").output == "hello world"
    ((headers, counted),) = api.counted
    assert [tool["name"] for tool in counted["tools"]] == ["lookup", "memory"]
    assert NATIVE in counted["tools"]
    assert BETA in headers["anthropic-beta"].split(",")
    ((_, sent),) = api.requests
    assert NATIVE in sent["tools"]
