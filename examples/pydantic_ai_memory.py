"""pydantic-ai with s3memory: an agent that remembers a user across runs, encrypted at rest.

The ``S3Memory`` capability gives a pydantic-ai ``Agent`` Claude's memory tool over an
encrypted store. Two runs for the same user: in the first the user says how they take
their tea and the agent saves it; the second starts with no message history at all, and
the agent finds the answer in its memory.

    pip install -e '.[pydantic-ai]'   # in the s3memory checkout: it is not on PyPI
    python examples/pydantic_ai_memory.py                 # offline: a scripted model
    ANTHROPIC_API_KEY=... python examples/pydantic_ai_memory.py

With ``ANTHROPIC_API_KEY`` the model is pydantic-ai's ``AnthropicModel``, which declares
Claude's native memory tool (``memory_20250818``) in place of the function tool. Without it
(or with ``--scripted``) pydantic-ai's ``FunctionModel`` plays Claude's turns through the
same agent, capability and memory. The memory is the embedded default (a local directory
store and a local master key) in a throwaway directory; at the end the example checks that
no file on disk holds the plaintext.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

from s3memory import LocalDirStore, generate_master_key
from s3memory.integrations.pydantic_ai import S3Memory

MODEL = os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-5-5")
INSTRUCTIONS = "You are a concise personal assistant."
CONVERSATIONS = [
    "I drink oolong tea, no milk. Please remember that.",
    "Order me a tea, the way I like it.",
]


def converse(agent: Agent[None, str], prompt: str, out: TextIO) -> None:
    """One run, from an empty history: what the user, the agent and its tool said."""
    print(f"\nuser: {prompt}", file=out)
    result = agent.run_sync(prompt)
    for message in result.new_messages():
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                print(f"  memory <- {part.args_as_dict()}", file=out)
            elif isinstance(part, ToolReturnPart):
                status = " (error)" if part.outcome == "failed" else ""
                text = part.model_response_str(wrap_if_error=False)
                print(f"  memory ->{status} {text}".replace("\n", "\n    "), file=out)
            elif isinstance(part, TextPart) and part.content.strip():
                print(f"assistant: {part.content}", file=out)


# --- The scripted model -------------------------------------------------------------------


def _memory_call(call_id: str, **args: Any) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart("memory", args, tool_call_id=call_id)])


def _answer_from_memory(messages: list[ModelMessage]) -> ModelResponse:
    """The last turn of the second run: from what the memory tool just answered."""
    viewed = next(p.model_response_str() for m in reversed(messages) for p in m.parts if isinstance(p, ToolReturnPart))
    notes = [line.split("\t", 1)[1] for line in viewed.splitlines()[1:] if "\t" in line]
    tea = next(note.removeprefix("- tea: ") for note in notes if note.startswith("- tea: "))
    return ModelResponse(parts=[TextPart(f"Ordered: {tea[0].upper()}{tea[1:]}, as your notes say.")])


#: Each turn: a response, or a function of the messages the model was sent.
SCRIPT: list[ModelResponse | Callable[[list[ModelMessage]], ModelResponse]] = [
    # the first run
    _memory_call("a1", command="view", path="/memories"),
    _memory_call("a2", command="create", path="/memories/preferences.md", file_text="- tea: oolong, no milk\n"),
    ModelResponse(parts=[TextPart("Noted: oolong, no milk.")]),
    # the second: no history, only the memory
    _memory_call("b1", command="view", path="/memories"),
    _memory_call("b2", command="view", path="/memories/preferences.md"),
    _answer_from_memory,
]


def scripted_model() -> FunctionModel:
    """A ``FunctionModel`` that plays :data:`SCRIPT`, one turn a request."""
    turns = list(SCRIPT)

    def play(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = turns.pop(0)
        return turn(messages) if callable(turn) else turn

    return FunctionModel(play, model_name="scripted")


def main(argv: list[str] | None = None, out: TextIO | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--scripted", action="store_true", help="the scripted model, even with ANTHROPIC_API_KEY")
    args = parser.parse_args(argv)
    out = out or sys.stdout
    api_key = None if args.scripted else os.environ.get("ANTHROPIC_API_KEY")
    with tempfile.TemporaryDirectory(prefix="s3memory-pydantic-ai-") as home:
        memory = S3Memory(user_id="alice", store=LocalDirStore(Path(home)), master_key=generate_master_key())
        model: Model
        if api_key:
            from pydantic_ai.models.anthropic import AnthropicModel

            model = AnthropicModel(MODEL)  # the key from ANTHROPIC_API_KEY
            print(f"Claude ({MODEL}), its native memory tool; memory in {home}", file=out)
        else:
            model = scripted_model()
            print(f"a SCRIPTED model (set ANTHROPIC_API_KEY to talk to Claude); memory in {home}", file=out)
        agent = Agent(model, instructions=INSTRUCTIONS, capabilities=[memory])
        for prompt in CONVERSATIONS:
            converse(agent, prompt, out)
        print("\nThe memory, decrypted:", file=out)
        print(memory.memory.view("/memories"), file=out)
        files = [path for path in Path(home).rglob("*") if path.is_file()]
        leaked = [str(path) for path in files if b"oolong" in path.read_bytes()]
        print(f"{len(files)} files on disk; those holding the plaintext: {', '.join(leaked) or 'none'}", file=out)
        memory.memory.close()


if __name__ == "__main__":
    main()
