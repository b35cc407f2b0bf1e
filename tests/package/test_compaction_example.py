"""examples/compaction_memory.py: the SDK's real tool runner compacts the conversation, and
what the summary drops survives in the encrypted memory.

The model is the example's scripted one behind ``httpx2.MockTransport`` (no network); the
tool runner, its compaction request and the memory tool are the real ones.
"""

from __future__ import annotations

import importlib.util
import io
import json
import re
from types import ModuleType
from typing import Any

import pytest
from helpers import REPO

from s3memory import InMemoryStore, S3MemoryTool, generate_master_key, open_memory

EXAMPLE = REPO / "examples" / "compaction_memory.py"
FACTS_PATH = "/memories/incidents/INC-4711.md"
TIMELINE_PATH = "/memories/incidents/INC-4711-timeline.md"


@pytest.fixture(scope="module")
def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_compaction_memory", EXAMPLE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tool_results(message: dict[str, Any]) -> dict[str, str]:
    """The text of each tool result in a message, by tool_use id."""
    results = {}
    for block in message["content"] if isinstance(message["content"], list) else []:
        if block["type"] == "tool_result":
            content = block["content"]
            results[block["tool_use_id"]] = (
                content if isinstance(content, str) else "".join(part["text"] for part in content)
            )
    return results


def test_compaction_replaces_the_history_and_the_memory_brings_the_facts_back(example: ModuleType) -> None:
    store, key = InMemoryStore(), generate_master_key()
    tool = S3MemoryTool(user_id="oncall", store=store, master_key=key)
    api = example.ScriptedMessagesAPI()
    out = io.StringIO()

    answer = example.run(example.scripted_client(api), tool, model="scripted", out=out)

    # Five model turns and one compaction request, every one with the compaction beta.
    assert [bool(body.get("compaction")) for body in api.requests] == [False, False, False, True, False, False]
    assert all(example.COMPACTION_BETA in betas.split(",") for betas in api.betas)
    assert all(
        body["tools"] == [{"type": "memory_20250818", "name": "memory"}] for body in api.requests if "tools" in body
    )

    # The compaction was asked for once the third turn's context passed the threshold, with
    # the whole history: the log, and the results of both writes to memory (saved before).
    compaction = api.requests[3]
    assert compaction["compaction"] == example.COMPACTION
    assert compaction["thread"] == {"type": "create"}  # the whole history, not a continuation
    assert "context_management" not in compaction
    history = compaction["messages"]
    assert history == api.contexts[3]
    assert history[0] == {"role": "user", "content": example.PROMPT}
    written = {**tool_results(history[4]), **tool_results(history[6])}
    assert written == {
        "c2": f"File created successfully at: {FACTS_PATH}",
        "c3": f"File created successfully at: {TIMELINE_PATH}",
    }
    # The context each turn reported: under the threshold twice, over it on the third turn,
    # and smaller after the compaction.
    tokens = [int(n) for n in re.findall(r"\(context: (\d+) tokens\)", out.getvalue())]
    assert len(tokens) == 5
    assert tokens[0] <= tokens[1] <= example.THRESHOLD < tokens[2] and tokens[3] < tokens[2]
    assert f"[{tokens[2]} tokens > {example.THRESHOLD}: compacting after this turn's tool calls]" in out.getvalue()

    # The runner replaced the history with the compaction block: the next request starts a
    # new thread with it alone, and nothing of the log is in the model's context any more.
    after = api.requests[4]
    assert after["thread"] == {"type": "create"}
    assert after["messages"] == [{"role": "assistant", "content": [{"type": "compaction", "content": example.SUMMARY}]}]
    assert "Priya" not in json.dumps(api.contexts[4]) and "09:02" not in json.dumps(api.contexts[4])
    assert f"[compacted: the history is now this summary]\n  {example.SUMMARY}" in out.getvalue()

    # The model then viewed its memory, and the request after that carried what it had saved
    # before the compaction, decrypted by s3memory.
    assert api.requests[5]["thread"]["type"] == "continue"
    [view_result] = tool_results(api.requests[5]["messages"][-1]).values()
    assert view_result == f"Here's the content of {FACTS_PATH} with line numbers:\n" + "".join(
        f"{number:6d}\t{line}\n" for number, line in enumerate(example.FACTS.split("\n"), 1)
    ).removesuffix("\n")
    assert "owner: Priya" in view_result
    assert answer.startswith("Postmortem, from my notes: root cause: the payments gateway's TLS certificate expired")
    assert "follow-up: automate certificate rotation, alert 30 days before expiry (owner: Priya)" in answer

    # The store holds both files encrypted; a fresh memory with the same key reads them back.
    raw = b"".join(stored.body for info in store.list("") if (stored := store.get(info.key)) is not None)
    assert raw and b"Priya" not in raw and b"INC-4711" not in raw
    fresh = open_memory(user_id="oncall", store=store, master_key=key)
    assert fresh.view(FACTS_PATH) == view_result
    assert fresh.view(TIMELINE_PATH).count("\t- 09:") == example.TIMELINE.count("- 09:")
    fresh.close()
    tool.memory.close()


def test_below_the_threshold_nothing_is_compacted(example: ModuleType) -> None:
    tool = S3MemoryTool(user_id="oncall", store=InMemoryStore(), master_key=generate_master_key())
    api = example.ScriptedMessagesAPI()
    answer = example.run(example.scripted_client(api), tool, model="scripted", threshold=10**9)
    assert len(api.requests) == 5 and not any(body.get("compaction") for body in api.requests)
    assert all(body["thread"]["type"] == "continue" for body in api.requests[1:])
    assert "Priya" in json.dumps(api.contexts[-1][0])  # the log is still in the context
    assert "owner: Priya" in answer
    tool.memory.close()


def test_the_example_runs_offline(example: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    out = io.StringIO()
    example.main([], out=out)
    text = out.getvalue()
    assert text.startswith("a SCRIPTED model")
    assert "[compacted: the history is now this summary]" in text
    assert "assistant: Postmortem, from my notes: root cause:" in text
    listing = text[text.index("What survived the compaction") :]
    assert f"\t{FACTS_PATH}\n" in listing and f"\t{TIMELINE_PATH}\n" in listing
