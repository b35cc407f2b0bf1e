"""Strands Agents with s3memory: an agent that remembers a user across conversations, encrypted at rest.

``S3MemoryStore`` is a Strands memory store over an encrypted s3memory memory. Strands'
``MemoryManager`` gives the agent its ``search_memory`` and ``add_memory`` tools, the store adds
the ``memory`` tool (Claude's six memory commands), and at each user turn the manager
injects into the model's input what the memory holds about the user's message. Two conversations with the same
user: in the first the user says how they take their tea and the agent saves it; the second
starts with no history at all, and the answer comes from the memory.

    pip install -e '.[strands]'   # in the s3memory checkout: it is not on PyPI
    python examples/strands_memory.py                 # offline: a scripted model
    ANTHROPIC_API_KEY=... python examples/strands_memory.py

With ``ANTHROPIC_API_KEY`` the model is Strands' ``AnthropicModel`` (Claude, ``ANTHROPIC_MODEL``);
any other Strands model provider takes the same store, Bedrock included. Without it (or with
``--scripted``) a scripted model plays Claude's turns through the same agent, manager and
memory. The memory is the embedded default (a local directory store and a local master key)
in a throwaway directory; at the end the example checks that no file on disk holds the
plaintext.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any, TextIO

from strands import Agent
from strands.memory import MemoryManager
from strands.models import Model

from s3memory import LocalDirStore, generate_master_key
from s3memory.integrations.strands import S3MemoryStore

MODEL = os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-5-5")
SYSTEM = (
    "You are a concise personal assistant. Save what the user asks you to remember with add_memory; "
    "what your memory holds about their message is shown to you in a <memory> block."
)
CONVERSATIONS = [
    "I drink oolong tea, no milk. Please remember that.",
    "Order me a tea, the way I like it.",
]


def converse(model: Model, store: S3MemoryStore, prompt: str, out: TextIO) -> None:
    """One conversation, from an empty history: what was injected, and what was said."""
    print(f"\nuser: {prompt}", file=out)
    # What the manager will inject into the model's input (the store ranks by shared words).
    for entry in asyncio.run(store.search(prompt)):
        print(f"  [injected from {(entry.metadata or {}).get('path')}] {entry.content}", file=out)
    manager = MemoryManager(stores=[store], add_tool_config=True)
    agent = Agent(model=model, system_prompt=SYSTEM, memory_manager=manager, callback_handler=None)
    agent(prompt)
    for message in agent.messages[1:]:
        for block in message["content"]:
            if "toolUse" in block:
                print(f"  {block['toolUse']['name']} <- {json.dumps(block['toolUse']['input'])}", file=out)
            elif "toolResult" in block:
                result = block["toolResult"]
                status = " (error)" if result["status"] == "error" else ""
                text = "".join(part.get("text", "") for part in result["content"])
                print(f"  ->{status} {text}".replace("\n", "\n    "), file=out)
            elif block.get("text", "").strip():
                print(f"assistant: {block['text']}", file=out)


# --- The scripted model -------------------------------------------------------------------

Turn = list[dict[str, Any]]


def _call(call_id: str, name: str, **tool_input: Any) -> Turn:
    return [{"toolUse": {"toolUseId": call_id, "name": name, "input": tool_input}}]


def _answer_from_memory(messages: list[dict[str, Any]]) -> Turn:
    """The second conversation's answer: from the <memory> block injected into the user's turn."""
    injected = "".join(block.get("text", "") for block in messages[0]["content"])
    entry = injected.split('<entry source="s3memory">', 1)[1].split("</entry>", 1)[0]
    return [{"text": f"Ordered. From my memory: {entry}"}]


#: Each turn: content blocks, or a function of the messages the model was sent.
SCRIPT: list[Turn | Callable[[list[dict[str, Any]]], Turn]] = [
    # the first conversation
    _call("a1", "add_memory", entries=["The user drinks oolong tea, no milk."]),
    _call("a2", "memory", command="view", path="/memories"),
    [{"text": "Noted: oolong, no milk."}],
    # the second: no history, only what the manager injects from the memory
    _answer_from_memory,
]


class ScriptedModel(Model):
    """A Strands model that plays :data:`SCRIPT`, one turn a call, as a stream of events."""

    def __init__(self, turns: list[Turn | Callable[[list[dict[str, Any]]], Turn]]) -> None:
        self.turns = list(turns)

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    async def structured_output(self, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        raise NotImplementedError
        yield

    async def stream(self, messages: Any, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        turn = self.turns.pop(0)
        blocks = turn(messages) if callable(turn) else turn
        yield {"messageStart": {"role": "assistant"}}
        for block in blocks:
            if "toolUse" in block:
                use = block["toolUse"]
                yield {
                    "contentBlockStart": {"start": {"toolUse": {"name": use["name"], "toolUseId": use["toolUseId"]}}}
                }
                yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(use["input"])}}}}
            else:
                yield {"contentBlockStart": {"start": {}}}
                yield {"contentBlockDelta": {"delta": {"text": block["text"]}}}
            yield {"contentBlockStop": {}}
        stop = "tool_use" if any("toolUse" in block for block in blocks) else "end_turn"
        yield {"messageStop": {"stopReason": stop}}


def main(argv: list[str] | None = None, out: TextIO | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--scripted", action="store_true", help="the scripted model, even with ANTHROPIC_API_KEY")
    args = parser.parse_args(argv)
    out = out or sys.stdout
    api_key = None if args.scripted else os.environ.get("ANTHROPIC_API_KEY")
    with tempfile.TemporaryDirectory(prefix="s3memory-strands-") as home:
        store = S3MemoryStore(user_id="alice", store=LocalDirStore(Path(home)), master_key=generate_master_key())
        model: Model
        if api_key:
            from strands.models.anthropic import AnthropicModel

            model = AnthropicModel(model_id=MODEL, max_tokens=1024, client_args={"api_key": api_key})
            print(f"Claude ({MODEL}) through Strands' AnthropicModel; memory in {home}", file=out)
        else:
            model = ScriptedModel(SCRIPT)
            print(f"a SCRIPTED model (set ANTHROPIC_API_KEY to talk to Claude); memory in {home}", file=out)
        for prompt in CONVERSATIONS:
            converse(model, store, prompt, out)
        print("\nThe memory, decrypted:", file=out)
        for entry in store.memory.list_files():
            print(f"{entry.path}: {store.memory.read_text(entry.path)}", end="", file=out)
        files = [path for path in Path(home).rglob("*") if path.is_file()]
        leaked = [str(path) for path in files if b"oolong" in path.read_bytes()]
        print(f"{len(files)} files on disk; those holding the plaintext: {', '.join(leaked) or 'none'}", file=out)
        store.memory.close()


if __name__ == "__main__":
    main()
