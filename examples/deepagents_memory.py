"""Deep Agents with s3memory: a deep agent whose /memories/ is an encrypted store.

``deep_agent_backend`` routes the agent's file tools: ``/memories/`` to the user's encrypted
memory (``S3MemoryBackend``), every other path to the conversation's state, as deepagents'
``StateBackend`` keeps it. ``memory=["/memories/AGENTS.md"]`` loads that file into the
system prompt at the start of each conversation. Two conversations with the same user: in
the first the user says how they take their tea, and the agent writes it to AGENTS.md (and
a scratch note outside /memories/, which the conversation forgets); the second starts with
no history, and the agent finds the answer in the AGENTS.md it was given.

    pip install -e '.[deepagents]'   # in the s3memory checkout: it is not on PyPI
    python examples/deepagents_memory.py                 # offline: a scripted model
    ANTHROPIC_API_KEY=... python examples/deepagents_memory.py
    python examples/deepagents_memory.py --bucket my-bucket --user-id alice --kms-key-id arn:aws:kms:...

With ``ANTHROPIC_API_KEY`` the model is Claude (``anthropic:`` through langchain-anthropic).
Without it (or with ``--scripted``) a scripted chat model plays the agent's turns through the
same deep agent, tools and memory. The memory is the embedded default (a local directory
store and a local master key) in a throwaway directory, and at the end the example checks
that no file on disk holds the word "oolong"; with ``--bucket`` it is the user's memory in
that S3 bucket instead (AWS credentials from the environment; each tenant key wrapped by
the KMS key), as in a Lambda function: the same code, only ``deep_agent_backend``'s options
change.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from deepagents import create_deep_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from s3memory import LocalDirStore, S3MemoryError, generate_master_key
from s3memory.integrations.deepagents import S3MemoryBackend, deep_agent_backend

MODEL = os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-5-5")
SYSTEM = """\
You are a concise personal assistant. Files under /memories/ are your long-term memory: they \
outlive this conversation, and /memories/AGENTS.md is shown to you at the start of each one. \
Keep what you learn about the user there. Every other path is scratch space for this \
conversation only."""
CONVERSATIONS = [
    "I drink oolong tea, no milk. Please remember that.",
    "Order me a tea, the way I like it.",
]


def converse(agent: Any, prompt: str, out: TextIO) -> None:
    """One conversation, from an empty history: what the user, the agent and its tools said."""
    print(f"\nuser: {prompt}", file=out)
    result = agent.invoke({"messages": [{"role": "user", "content": prompt}]})
    for message in result["messages"][1:]:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                print(f"  {call['name']} <- {call['args']}", file=out)
            if message.text.strip():
                print(f"assistant: {message.text}", file=out)
        elif isinstance(message, ToolMessage):
            status = " (error)" if message.status == "error" else ""
            print(f"  {message.name} ->{status} {message.text}".replace("\n", "\n    "), file=out)
    print(f"  (the conversation's scratch files: {sorted(result.get('files', {})) or 'none'})", file=out)


# --- The scripted model -------------------------------------------------------------------


def _tool_call(call_id: str, name: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"type": "tool_call", "id": call_id, "name": name, "args": args}])


def _answer_from_memory(messages: Sequence[BaseMessage]) -> AIMessage:
    """The last turn of the second conversation: from the AGENTS.md in its system prompt."""
    system = messages[0].text
    tea = next(line.removeprefix("- tea: ") for line in system.splitlines() if line.startswith("- tea: "))
    return AIMessage(content=f"Ordered: {tea[0].upper()}{tea[1:]}, as your notes say.")


#: Each turn: a message, or a function of the messages the model was sent.
SCRIPT: list[AIMessage | Callable[[Sequence[BaseMessage]], AIMessage]] = [
    # the first conversation
    _tool_call("a1", "ls", path="/memories"),
    _tool_call("a2", "write_file", file_path="/memories/AGENTS.md", content="# The user\n- tea: oolong, no milk\n"),
    _tool_call("a3", "write_file", file_path="/scratch/order.md", content="next order: oolong\n"),
    AIMessage(content="Noted: oolong, no milk."),
    # the second: no history, AGENTS.md in the system prompt
    _tool_call("b1", "grep", pattern="tea:", path="/memories"),
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


def main(argv: list[str] | None = None, out: TextIO | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--scripted", action="store_true", help="the scripted model, even with ANTHROPIC_API_KEY")
    parser.add_argument("--bucket", help="keep the memory in this S3 bucket (with --user-id and --kms-key-id)")
    parser.add_argument("--user-id", default="alice", help="whose memory (the tenant)")
    parser.add_argument("--kms-key-id", help="the KMS key that wraps each tenant key (with --bucket)")
    args = parser.parse_args(argv)
    if args.bucket and not args.kms_key_id:
        parser.error("--bucket needs --kms-key-id")
    out = out or sys.stdout
    api_key = None if args.scripted else os.environ.get("ANTHROPIC_API_KEY")
    with tempfile.TemporaryDirectory(prefix="s3memory-deepagents-") as home:
        if args.bucket:
            # On S3: the user's memory in the bucket, a default boto3 client, KMS-wrapped keys.
            backend = deep_agent_backend(bucket=args.bucket, user_id=args.user_id, kms_key_id=args.kms_key_id)
            where = f"s3://{args.bucket}/{args.user_id}/"
        else:
            backend = deep_agent_backend(
                user_id=args.user_id, store=LocalDirStore(Path(home)), master_key=generate_master_key()
            )
            where = home
        routed = backend.routes["/memories/"]
        assert isinstance(routed, S3MemoryBackend)
        memory = routed.memory
        model: str | BaseChatModel
        if api_key:
            model = f"anthropic:{MODEL}"
            print(f"Claude ({MODEL}); memory in {where}", file=out)
        else:
            model = ScriptedChatModel(turns=list(SCRIPT))
            print(f"a SCRIPTED model (set ANTHROPIC_API_KEY to talk to Claude); memory in {where}", file=out)
        agent = create_deep_agent(model=model, system_prompt=SYSTEM, backend=backend, memory=["/memories/AGENTS.md"])
        try:
            for prompt in CONVERSATIONS:
                converse(agent, prompt, out)
            print("\nThe memory, decrypted:", file=out)
            print(memory.view("/memories"), file=out)
        except (S3MemoryError, ValueError) as error:
            # The store unreachable or refusing (deepagents raises ValueError with s3memory's
            # text when AGENTS.md cannot be loaded): one line, not a traceback.
            print(f"Error: {error}".replace("Error: Error: ", "Error: "), file=sys.stderr)
            return 1
        if not args.bucket:
            files = [path for path in Path(home).rglob("*") if path.is_file()]
            leaked = [str(path) for path in files if b"oolong" in path.read_bytes()]
            print(f"{len(files)} files on disk; those holding the plaintext: {', '.join(leaked) or 'none'}", file=out)
        memory.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
