"""LangChain with s3memory: an agent that remembers a user across conversations, encrypted at rest.

``S3ClaudeMemoryMiddleware`` gives a ``langchain.agents.create_agent`` agent Claude's memory
tool over an encrypted store. Two conversations with the same user: in the first the user
says how they take their tea and the agent saves it; the second starts with no history at
all, and the agent finds the answer in its memory.

    pip install -e '.[langchain]'   # in the s3memory checkout: it is not on PyPI
    python examples/langchain_memory.py                 # offline: a scripted model
    ANTHROPIC_API_KEY=... python examples/langchain_memory.py

With ``ANTHROPIC_API_KEY`` the model is ``ChatAnthropic``, and the middleware declares Claude's
native memory tool (``memory_20250818``). Without it (or with ``--scripted``) a scripted chat
model plays Claude's turns through the same agent, middleware and memory; being no
``ChatAnthropic``, it gets the ``memory`` function tool, as any other provider's model would.
The memory is the embedded default (a local directory store and a local master key) in a
throwaway directory; at the end the example checks that no file on disk holds the word "oolong".
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from s3memory import LocalDirStore, generate_master_key
from s3memory.integrations.langchain import S3ClaudeMemoryMiddleware

MODEL = os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-5-5")
SYSTEM = "You are a concise personal assistant."
CONVERSATIONS = [
    "I drink oolong tea, no milk. Please remember that.",
    "Order me a tea, the way I like it.",
]


def converse(agent: Any, prompt: str, out: TextIO) -> None:
    """One conversation, from an empty history: what the user, the agent and its tool said."""
    print(f"\nuser: {prompt}", file=out)
    result = agent.invoke({"messages": [{"role": "user", "content": prompt}]})
    for message in result["messages"][1:]:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                print(f"  memory <- {call['args']}", file=out)
            if message.text.strip():
                print(f"assistant: {message.text}", file=out)
        elif isinstance(message, ToolMessage):
            status = " (error)" if message.status == "error" else ""
            print(f"  memory ->{status} {message.text}".replace("\n", "\n    "), file=out)


# --- The scripted model -------------------------------------------------------------------


def _memory_call(call_id: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"type": "tool_call", "id": call_id, "name": "memory", "args": args}])


def _answer_from_memory(messages: Sequence[BaseMessage]) -> AIMessage:
    """The last turn of the second conversation: from what the memory tool just answered."""
    viewed = next(m.text for m in reversed(messages) if isinstance(m, ToolMessage))
    notes = [line.split("\t", 1)[1] for line in viewed.splitlines()[1:] if "\t" in line]
    tea = next(note.removeprefix("- tea: ") for note in notes if note.startswith("- tea: "))
    return AIMessage(content=f"Ordered: {tea[0].upper()}{tea[1:]}, as your notes say.")


#: Each turn: a message, or a function of the messages the model was sent.
SCRIPT: list[AIMessage | Callable[[Sequence[BaseMessage]], AIMessage]] = [
    # the first conversation
    _memory_call("a1", command="view", path="/memories"),
    _memory_call("a2", command="create", path="/memories/preferences.md", file_text="- tea: oolong, no milk\n"),
    AIMessage(content="Noted: oolong, no milk."),
    # the second: no history, only the memory
    _memory_call("b1", command="view", path="/memories"),
    _memory_call("b2", command="view", path="/memories/preferences.md"),
    _answer_from_memory,
]


class ScriptedChatModel(BaseChatModel):
    """A chat model that plays :data:`SCRIPT`, one turn a call; it accepts any tools."""

    turns: list[Any]

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        turn = self.turns.pop(0)
        message = turn(messages) if callable(turn) else turn
        return ChatResult(generations=[ChatGeneration(message=message)])


def main(argv: list[str] | None = None, out: TextIO | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--scripted", action="store_true", help="the scripted model, even with ANTHROPIC_API_KEY")
    args = parser.parse_args(argv)
    out = out or sys.stdout
    api_key = None if args.scripted else os.environ.get("ANTHROPIC_API_KEY")
    with tempfile.TemporaryDirectory(prefix="s3memory-langchain-") as home:
        middleware = S3ClaudeMemoryMiddleware(
            user_id="alice", store=LocalDirStore(Path(home)), master_key=generate_master_key()
        )
        model: BaseChatModel
        if api_key:
            from langchain_anthropic import ChatAnthropic

            model = ChatAnthropic(model=MODEL)  # type: ignore[call-arg]  # the key from ANTHROPIC_API_KEY
            print(f"Claude ({MODEL}), its native memory tool; memory in {home}", file=out)
        else:
            model = ScriptedChatModel(turns=list(SCRIPT))
            print(f"a SCRIPTED model (set ANTHROPIC_API_KEY to talk to Claude); memory in {home}", file=out)
        agent = create_agent(model, tools=[], system_prompt=SYSTEM, middleware=[middleware])
        for prompt in CONVERSATIONS:
            converse(agent, prompt, out)
        print("\nThe memory, decrypted:", file=out)
        print(middleware.memory.view("/memories"), file=out)
        files = [path for path in Path(home).rglob("*") if path.is_file()]
        leaked = [str(path) for path in files if b"oolong" in path.read_bytes()]
        print(f"{len(files)} files on disk; those holding the plaintext: {', '.join(leaked) or 'none'}", file=out)
        middleware.memory.close()


if __name__ == "__main__":
    main()
