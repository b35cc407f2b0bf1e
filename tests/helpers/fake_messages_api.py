"""A fake Anthropic Messages endpoint for the adapters' wire tests (no network): each request
gets the next scripted content blocks, as JSON or, for a streamed request, as server-sent
events. Hand it to ``httpx2.MockTransport``, or patch httpx2's transports to call it."""

from __future__ import annotations

import json
from typing import Any


def use(tool_id: str, **tool_input: Any) -> dict[str, Any]:
    """A ``tool_use`` block of the memory tool."""
    return {"type": "tool_use", "id": tool_id, "name": "memory", "input": tool_input}


def message(content: list[dict[str, Any]], number: int = 1) -> dict[str, Any]:
    """One Messages API response."""
    stop = "tool_use" if any(block["type"] == "tool_use" for block in content) else "end_turn"
    return {
        "id": f"msg_{number}",
        "type": "message",
        "role": "assistant",
        "model": "claude-scripted",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


def sse(content: list[dict[str, Any]]) -> bytes:
    """One Messages API response as the server-sent events of a stream."""
    stop = message(content)["stop_reason"]
    start_message = {**message([]), "stop_reason": None}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start_message}]
    for index, block in enumerate(content):
        start: dict[str, Any]
        if block["type"] == "text":
            start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        else:
            arguments = json.dumps(block["input"])
            start, delta = {**block, "input": {}}, {"type": "input_json_delta", "partial_json": arguments}
        events += [
            {"type": "content_block_start", "index": index, "content_block": start},
            {"type": "content_block_delta", "index": index, "delta": delta},
            {"type": "content_block_stop", "index": index},
        ]
    events += [
        {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
    ]
    return "".join(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n" for event in events).encode()


class MessagesAPI:
    """Answers each request with the next turn of ``script``; records (headers, body)."""

    def __init__(self, script: list[list[dict[str, Any]]]) -> None:
        self.script = script
        self.requests: list[tuple[dict[str, str], dict[str, Any]]] = []

    def __call__(self, request: Any) -> Any:
        import httpx2

        body = json.loads(request.content)
        self.requests.append((dict(request.headers), body))
        content = self.script[len(self.requests) - 1]
        if body.get("stream"):
            return httpx2.Response(
                200, headers={"content-type": "text/event-stream"}, content=sse(content), request=request
            )
        return httpx2.Response(200, json=message(content, len(self.requests)), request=request)

    def tool_results(self, turn: int) -> list[dict[str, Any]]:
        """The ``tool_result`` blocks request ``turn`` carried."""
        _, body = self.requests[turn]
        blocks = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]
        return [b for b in blocks if b["type"] == "tool_result"]


def scripted_client(script: list[list[dict[str, Any]]], seen: list[dict[str, Any]]) -> Any:
    """An ``httpx2.Client`` on a fake Messages endpoint: each request gets the next scripted
    content, and its body is appended to ``seen``."""
    import httpx2

    def handler(request: Any) -> Any:
        seen.append(json.loads(request.content))
        return httpx2.Response(200, json=message(script[len(seen) - 1], len(seen)))

    return httpx2.Client(transport=httpx2.MockTransport(handler))


def text_of(content: Any) -> str:
    """A tool result's content as text (a string, or its text blocks joined)."""
    return content if isinstance(content, str) else "".join(block["text"] for block in content)
