"""``s3memory demo``: an agent in two sessions, remembering through the SDK's tool runner.

With ``ANTHROPIC_API_KEY`` set it talks to Claude (``ANTHROPIC_MODEL`` picks the model).
Without it, or with ``s3memory demo --scripted``, a scripted model answers instead: a fake
Messages endpoint handed to the real ``anthropic`` client through an httpx transport, so the
real tool-runner loop, tool_use / tool_result round trips and ``is_error`` results all run
offline. Either way the memory is the embedded default (a local directory store and a local
master key) in a throwaway directory, and the demo ends
by showing a stored object as the bucket sees it, beside its decryption.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, TextIO

from .._crypto.master import generate_master_key
from .._paths import parse_path

DEFAULT_MODEL = "claude-sonnet-5-5"
#: Seconds per request to the API (the SDK's own default is ten minutes), two retries.
API_TIMEOUT = 60.0


class DemoAPIError(Exception):
    """The Anthropic API failed: ``str()`` says what, in one line, and suggests --scripted.
    ``configuration`` is True when the key or the model was refused (a setting to fix),
    False when the API could not be reached or failed."""

    def __init__(self, message: str, *, configuration: bool) -> None:
        super().__init__(message)
        self.configuration = configuration


def model() -> str:
    """The model the demo asks for: ``ANTHROPIC_MODEL``, else :data:`DEFAULT_MODEL`."""
    return os.environ.get("ANTHROPIC_MODEL") or DEFAULT_MODEL


def explain_api_error(error: Exception, *, base_url: str, model_name: str) -> DemoAPIError | None:
    """What an ``anthropic`` exception means for someone running the demo; None if it is not one."""
    import anthropic

    hint = "; or run the offline demo: s3memory demo --scripted"
    if isinstance(error, anthropic.APIConnectionError):  # APITimeoutError included
        what = "timed out" if isinstance(error, anthropic.APITimeoutError) else "could not be reached"
        return DemoAPIError(
            f"the Anthropic API at {base_url} {what} (check the network or ANTHROPIC_BASE_URL){hint}",
            configuration=False,
        )
    if not isinstance(error, anthropic.APIStatusError):
        return None
    said = _api_message(error)
    if isinstance(error, anthropic.AuthenticationError):
        return DemoAPIError(f"the Anthropic API refused ANTHROPIC_API_KEY (401: {said}){hint}", configuration=True)
    if isinstance(error, anthropic.PermissionDeniedError):
        return DemoAPIError(
            f"the Anthropic API refused ANTHROPIC_API_KEY access (403: {said}){hint}", configuration=True
        )
    if isinstance(error, (anthropic.NotFoundError, anthropic.BadRequestError)):
        return DemoAPIError(
            f"the Anthropic API refused the request for model {model_name!r} (ANTHROPIC_MODEL; "
            f"{error.status_code}: {said}){hint}",
            configuration=True,
        )
    return DemoAPIError(
        f"the Anthropic API at {base_url} failed ({error.status_code}: {said}); try again later{hint}",
        configuration=False,
    )


def _api_message(error: Any) -> str:
    """The API's own words from an error body, bounded (the body is the server's choice)."""
    body = getattr(error, "body", None)
    said = body.get("error", {}).get("message") if isinstance(body, dict) else None
    if not isinstance(said, str) or not said:
        said = type(error).__name__
    return said if len(said) <= 200 else said[:197] + "..."


SESSIONS = [
    "Hi! I'm Ada. I drink green tea, never coffee, and I like short answers. Please remember that.",
    "Good morning. What do I like to drink? Also note that I now live in Lisbon.",
]

# What the scripted model says in each turn: a list of content blocks per request.
SCRIPT: list[list[list[dict[str, Any]]]] = [
    [  # session 1
        [{"type": "tool_use", "id": "s1a", "name": "memory", "input": {"command": "view", "path": "/memories"}}],
        [
            {"type": "text", "text": "Nothing stored yet. I'll note your preferences."},
            {
                "type": "tool_use",
                "id": "s1b",
                "name": "memory",
                "input": {
                    "command": "create",
                    "path": "/memories/user/profile.md",
                    "file_text": "# Ada\n- drinks: green tea, never coffee\n- style: short answers\n",
                },
            },
        ],
        [{"type": "text", "text": "Noted, Ada: green tea, short answers."}],
    ],
    [  # session 2: a new conversation; only the memory carries over
        [{"type": "tool_use", "id": "s2a", "name": "memory", "input": {"command": "view", "path": "/memories"}}],
        [
            {
                "type": "tool_use",
                "id": "s2b",
                "name": "memory",
                "input": {"command": "view", "path": "/memories/user/profile.md"},
            }
        ],
        [
            {
                "type": "tool_use",
                "id": "s2c",
                "name": "memory",
                "input": {"command": "view", "path": "/memories/../../etc/passwd"},
            }
        ],
        [
            {
                "type": "tool_use",
                "id": "s2d",
                "name": "memory",
                "input": {
                    "command": "insert",
                    "path": "/memories/user/profile.md",
                    "insert_line": 3,
                    "insert_text": "- lives in: Lisbon",
                },
            }
        ],
        [{"type": "text", "text": "Green tea, never coffee. And I've noted that you live in Lisbon now."}],
    ],
]


def _scripted_http_client(session: int) -> Any:
    """An httpx client whose transport plays the scripted model for one session."""
    import httpx2

    turns = iter(SCRIPT[session])

    def handler(request: httpx2.Request) -> httpx2.Response:
        content = next(turns)
        stop = "tool_use" if any(block["type"] == "tool_use" for block in content) else "end_turn"
        message = {
            "id": f"msg_scripted_{session}",
            "type": "message",
            "role": "assistant",
            "model": "scripted",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return httpx2.Response(200, json=message)

    return httpx2.Client(transport=httpx2.MockTransport(handler))


class OutputClosed(BaseException):
    """The demo's output was closed (``| head``) while the tool runner was calling the tool.

    A BaseException: the runner turns any Exception of a tool into a tool error, and logs it
    with its traceback; this one must stop the demo instead."""


def _logging_tool(base: type, out: TextIO) -> Any:
    """The memory tool, printing each call the model makes and what it gets back."""

    def say(text: str) -> None:
        try:
            print(text, file=out)
        except BrokenPipeError:
            raise OutputClosed from None

    class LoggingTool(base):  # type: ignore[misc]
        def call(self, input: object) -> str:
            say(f"  memory <- {json.dumps(input, ensure_ascii=False)}")
            try:
                result = str(super().call(input))
            except Exception as error:
                say(f"  memory -> [is_error] {error}")
                raise
            say("  memory -> " + result.replace("\n", "\n             "))
            return result

    return LoggingTool


def run_demo(out: TextIO, *, api_key: str | None = None) -> None:
    """Two sessions, printed to ``out``: with ``api_key`` against Claude, else the scripted model.

    Raises:
        DemoAPIError: the API refused the key or the model, could not be reached, or failed.
    """
    from anthropic import Anthropic

    from ..integrations.anthropic import S3MemoryTool
    from ..stores import LocalDirStore

    scripted = not api_key
    chosen = model()
    with tempfile.TemporaryDirectory(prefix="s3memory-demo-") as home:
        store = LocalDirStore(Path(home) / "store")
        tool = _logging_tool(S3MemoryTool, out)(user_id="ada", store=store, master_key=generate_master_key())
        who = "a SCRIPTED model (set ANTHROPIC_API_KEY to talk to Claude)" if scripted else f"Claude ({chosen})"
        print(f"s3memory demo: {who}; memory in {home} (local store, local master key)", file=out)
        for session, prompt in enumerate(SESSIONS):
            print(f"\n=== session {session + 1}: a new conversation ===\nuser: {prompt}", file=out)
            if scripted:
                client = Anthropic(api_key="scripted", http_client=_scripted_http_client(session), max_retries=0)
            else:
                client = Anthropic(api_key=api_key, timeout=API_TIMEOUT)
            runner = client.beta.messages.tool_runner(
                model=chosen if not scripted else "scripted",
                max_tokens=1024,
                tools=[tool],
                messages=[{"role": "user", "content": prompt}],
            )
            try:
                for message in runner:
                    for block in message.content:
                        if block.type == "text" and block.text.strip():
                            print(f"assistant: {block.text}", file=out)
            except Exception as error:
                explained = explain_api_error(error, base_url=str(client.base_url), model_name=chosen)
                if explained is None:
                    raise
                raise explained from None

        memory = tool.memory
        print("\n=== what the bucket holds ===", file=out)
        records = []  # history records: long sealed names, no body; shown as one line
        for info in store.list(""):
            if info.key.startswith(memory.layout.history_prefix):
                records.append(info)
                continue
            print(f"  {info.key}  ({info.size} bytes)", file=out)
        if records:
            print(
                f"  {memory.layout.history_prefix}...  ({len(records)} history records: who changed what, "
                f"sealed in their names under the history key; {sum(r.size for r in records)} bytes)",
                file=out,
            )
        key = memory.layout.key_for(parse_path("/memories/user/profile.md"))
        stored = store.get(key)
        if stored is not None:
            print(f"\n--- {key}: raw, as anyone who can read the bucket sees it ---", file=out)
            for name, value in sorted(stored.metadata.items()):
                print(f"  x-amz-meta-{name}: {value}", file=out)
            print(f"  body ({len(stored.body)} bytes = plaintext + 16-byte tag): {stored.body.hex()}", file=out)
            print("--- decrypted by s3memory for user 'ada' ---", file=out)
            print(memory.view("/memories/user/profile.md").split("\n", 1)[1], file=out)
        memory.close()
