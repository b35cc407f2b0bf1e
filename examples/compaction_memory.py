"""Compaction with memory: what the summary drops, the encrypted memory keeps.

A long agent run outgrows its context. The SDK's tool runner compacts it on request: after
the current turn (its tool calls included), ``runner.compact_before_next_turn()`` asks the
API for a summary and replaces the whole history with it (a message whose ``stop_reason`` is
``"compaction"``). This example schedules that when a turn's context passes a token
threshold, counted as ``input + cache_creation + cache_read + output`` tokens, and tells
the model, in its system prompt, to save what matters to /memories before it is summarised
away. After the compaction the model views its memory and carries on from what it saved.

    python examples/compaction_memory.py               # offline: a scripted model
    ANTHROPIC_API_KEY=... python examples/compaction_memory.py --threshold 6000

Without ``ANTHROPIC_API_KEY`` (or with ``--scripted``) a scripted model answers, as in
``s3memory demo``: a fake Messages endpoint handed to the real ``anthropic`` client through
an httpx transport, so the real tool runner, its compaction request and the memory tool
all run offline. The memory is the embedded default (a local directory store and a local
master key) in a throwaway directory.

The context-editing docs describe ``compaction_control={"enabled": True,
"context_token_threshold": N}`` in ``tool_runner()``; the ``anthropic`` SDK this project is
tested with (2.12) has no such parameter and compacts with ``compact_before_next_turn()``,
under the ``compact-2026-09-04`` beta (sent by :func:`run`), so the threshold is checked here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from anthropic import Anthropic
from anthropic.types.beta import BetaCompactionConfigParam, BetaUsage

from s3memory import LocalDirStore, S3MemoryTool, generate_master_key

MODEL = os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-5-5")
COMPACTION_BETA = "compact-2026-09-04"
#: Compact once a turn's context passes this many tokens (the SDK docs suggest 50k to 150k
#: for real work; the example's task is small, so the default is low).
THRESHOLD = 3_000

SYSTEM = """\
You work on long tasks whose context is compacted: when it grows too large, the whole \
conversation so far is replaced by a short summary. Details that are only in the \
conversation are lost then. So save what matters (facts, decisions, progress) to your \
memory directory, /memories, as soon as you learn it, before it can be compacted away. \
After a compaction, view /memories and continue from what you saved."""

#: What the summary is asked for: where to pick up, pointing at the memory for the details.
COMPACTION: BetaCompactionConfigParam = {
    "type": "summarize",
    "instructions": (
        "Summarize the task and where it stands in a few lines. Name the /memories files that hold "
        "the details instead of repeating them: they survive the compaction."
    ),
}

INCIDENT_LOG = "\n".join(
    [
        "09:02 alert: payments API error rate 38% (threshold 5%)",
        *(f"09:{minute:02d} health check: node-{minute % 7} ok, p99 {200 + 3 * minute} ms" for minute in range(3, 30)),
        "09:30 found: the payments gateway's TLS certificate expired at 09:00 UTC",
        "09:30 the certificate was last rotated by hand, in 2024; nothing alerts on expiry",
        "09:31 mitigated: a new certificate deployed, error rate back to 0.2%",
        "09:40 follow-up agreed: automate certificate rotation and alert 30 days before expiry (owner: Priya)",
    ]
)
PROMPT = (
    "Here is the on-call log of incident INC-4711. Record what matters, draft the timeline, "
    f"then give me the postmortem's summary in two sentences.\n\n{INCIDENT_LOG}"
)
FACTS = (
    "# INC-4711\n"
    "- root cause: the payments gateway's TLS certificate expired (09:00 UTC), rotated by hand since 2024\n"
    "- impact: payments API errors up to 38%, 09:00-09:31 UTC\n"
    "- follow-up: automate certificate rotation, alert 30 days before expiry (owner: Priya)\n"
)
TIMELINE = "# INC-4711 timeline\n" + "".join(
    f"- 09:{minute:02d} UTC: {event}\n"
    for minute, event in [
        (0, "the payments gateway's certificate expires; TLS handshakes start failing"),
        (2, "the error-rate alert fires (38%)"),
        *(
            (minute, f"node-{minute % 7} passes its health check: the nodes are fine, the handshake is not")
            for minute in range(3, 30)
        ),
        (30, "the expired certificate is found"),
        (30, "no expiry alert exists: the certificate was rotated by hand in 2024"),
        (31, "a new certificate is deployed; the error rate falls to 0.2%"),
        (40, "follow-up agreed: automated rotation and an expiry alert (owner: Priya)"),
    ]
)


def context_tokens(usage: BetaUsage) -> int:
    """A turn's context as the SDK docs count it for compaction."""
    return (
        usage.input_tokens
        + (usage.cache_creation_input_tokens or 0)
        + (usage.cache_read_input_tokens or 0)
        + usage.output_tokens
    )


def run(
    client: Anthropic,
    tool: S3MemoryTool,
    *,
    model: str = MODEL,
    threshold: int = THRESHOLD,
    out: TextIO | None = None,
) -> str:
    """One agent run on ``PROMPT``, compacting when the context passes ``threshold`` tokens.

    Prints each step to ``out``; returns the final answer's text.
    """

    def say(text: str) -> None:
        if out is not None:
            print(text, file=out)

    runner = client.beta.messages.tool_runner(
        model=model,
        max_tokens=2048,
        system=SYSTEM,
        tools=[tool],
        messages=[{"role": "user", "content": PROMPT}],
        betas=[COMPACTION_BETA],
    )
    answer = ""
    for message in runner:
        if message.stop_reason == "compaction":
            summary = "".join(block.content or "" for block in message.content if block.type == "compaction")
            say(f"[compacted: the history is now this summary]\n  {summary}")
            continue
        for block in message.content:
            if block.type == "text" and block.text.strip():
                answer = block.text
                say(f"assistant: {block.text}")
            elif block.type == "tool_use":
                say(f"  memory <- {json.dumps(block.input, ensure_ascii=False)[:120]}")
        tokens = context_tokens(message.usage)
        say(f"  (context: {tokens} tokens)")
        # Only while the loop goes on: a compaction after the final answer would be wasted.
        if message.stop_reason == "tool_use" and tokens > threshold:
            say(f"[{tokens} tokens > {threshold}: compacting after this turn's tool calls]")
            runner.compact_before_next_turn(COMPACTION)
    return answer


# --- The scripted model -------------------------------------------------------------------


def _tool_use(call_id: str, **command: Any) -> list[dict[str, Any]]:
    return [{"type": "tool_use", "id": call_id, "name": "memory", "input": command}]


def _last_tool_result(context: list[dict[str, Any]]) -> str:
    """The text of the last tool result the model was sent."""
    for message in reversed(context):
        content = message["content"]
        for block in reversed(content if isinstance(content, list) else []):
            if block.get("type") == "tool_result":
                result = block.get("content", "")
                return result if isinstance(result, str) else "".join(part.get("text", "") for part in result)
    return ""


def _answer_from_memory(context: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The final answer, from what the model read back from its memory after the compaction."""
    facts = [line.split("\t", 1)[-1] for line in _last_tool_result(context).splitlines() if "\t- " in line]
    text = "Postmortem, from my notes: " + "; ".join(fact.removeprefix("- ") for fact in facts) + "."
    return [{"type": "text", "text": text}]


#: The scripted model's turns: content blocks, or a function of the context it was sent.
SCRIPT: list[list[dict[str, Any]] | Callable[[list[dict[str, Any]]], list[dict[str, Any]]]] = [
    _tool_use("c1", command="view", path="/memories"),
    [
        {"type": "text", "text": "Saving the facts first."},
        *_tool_use("c2", command="create", path="/memories/incidents/INC-4711.md", file_text=FACTS),
    ],
    _tool_use("c3", command="create", path="/memories/incidents/INC-4711-timeline.md", file_text=TIMELINE),
    # compacted here: the model only has the summary, and views its memory
    _tool_use("c4", command="view", path="/memories/incidents/INC-4711.md"),
    _answer_from_memory,
]
SUMMARY = (
    "Writing the postmortem of incident INC-4711: the facts are saved in /memories/incidents/INC-4711.md "
    "and the timeline in /memories/incidents/INC-4711-timeline.md. Next: view the facts, then answer."
)
#: Tokens the scripted model counts for what every request carries besides its messages
#: (the memory tool's definition and the instructions the API adds for it).
OVERHEAD_TOKENS = 2_000


class ScriptedMessagesAPI:
    """A fake Messages endpoint playing :data:`SCRIPT`, for ``httpx2.MockTransport``.

    It keeps each reply's context, as the API does for message threads, to count a request's
    tokens (four characters a token) as the server would: the messages it continues from
    plus those sent. A request with ``compaction`` gets the summary as a ``compaction``
    block. ``requests`` records every request body, ``betas`` its ``anthropic-beta`` header.
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.betas: list[str] = []
        self.contexts: list[list[dict[str, Any]]] = []  # each request's whole context
        self._turns = iter(SCRIPT)
        self._threads: dict[str, list[dict[str, Any]]] = {}

    def __call__(self, request: Any) -> Any:
        import httpx2

        body = json.loads(request.content)
        self.requests.append(body)
        self.betas.append(request.headers.get("anthropic-beta", ""))
        thread = body.get("thread") or {}
        earlier = self._threads[thread["previous_message_id"]] if thread.get("type") == "continue" else []
        context = [*earlier, *body["messages"]]
        self.contexts.append(context)
        if body.get("compaction"):
            content: list[dict[str, Any]] = [{"type": "compaction", "content": SUMMARY}]
            stop = "compaction"
        else:
            turn = next(self._turns)
            content = turn(context) if callable(turn) else turn
            stop = "tool_use" if any(block["type"] == "tool_use" for block in content) else "end_turn"
        message_id = f"msg_scripted_{len(self.requests)}"
        self._threads[message_id] = [*context, {"role": "assistant", "content": content}]
        sent = json.dumps([body.get("system"), context])
        usage = {"input_tokens": OVERHEAD_TOKENS + len(sent) // 4, "output_tokens": len(json.dumps(content)) // 4}
        reply = {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": "scripted",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        return httpx2.Response(200, json=reply)


def scripted_client(api: ScriptedMessagesAPI) -> Anthropic:
    import httpx2

    return Anthropic(api_key="scripted", http_client=httpx2.Client(transport=httpx2.MockTransport(api)), max_retries=0)


def main(argv: list[str] | None = None, out: TextIO | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--scripted", action="store_true", help="the scripted model, even with ANTHROPIC_API_KEY")
    parser.add_argument("--threshold", type=int, default=THRESHOLD, help="compact past this many context tokens")
    args = parser.parse_args(argv)
    out = out or sys.stdout
    api_key = None if args.scripted else os.environ.get("ANTHROPIC_API_KEY")
    with tempfile.TemporaryDirectory(prefix="s3memory-compaction-") as home:
        tool = S3MemoryTool(user_id="oncall", store=LocalDirStore(Path(home)), master_key=generate_master_key())
        if api_key:
            print(f"Claude ({MODEL}); memory in {home}", file=out)
            run(Anthropic(api_key=api_key), tool, threshold=args.threshold, out=out)
        else:
            print(f"a SCRIPTED model (set ANTHROPIC_API_KEY to talk to Claude); memory in {home}", file=out)
            run(scripted_client(ScriptedMessagesAPI()), tool, model="scripted", threshold=args.threshold, out=out)
        print("\nWhat survived the compaction, in the encrypted memory:", file=out)
        print(tool.memory.view("/memories"), file=out)
        tool.memory.close()


if __name__ == "__main__":
    main()
