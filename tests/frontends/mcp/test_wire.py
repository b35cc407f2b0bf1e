"""``s3memory mcp`` on a hostile or broken wire: the server process is driven with raw
bytes on stdin. Every line that is not a valid JSON-RPC message is answered
(-32700 Parse error, -32600 Invalid Request; with the request's id when it can be read,
``null`` otherwise), the server keeps serving after it, an overlong line is refused without
being held in memory, and stdout carries nothing but protocol. Every wait has a timeout, so a
server that does not answer fails the test instead of hanging it."""

from __future__ import annotations

import io
import json
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from helpers import examples
from helpers.mcp import server_environment
from hypothesis import given, settings
from hypothesis import strategies as st

from s3memory import mcp_server
from s3memory.mcp_server import MAX_MESSAGE_BYTES, _read_stdin
from s3memory.mcp_server import request_id_in as _request_id

SERVER = [sys.executable, "-W", "error", "-m", "s3memory.mcp_server"]
PARSE_ERROR, INVALID_REQUEST = -32700, -32600
TIMEOUT = 20.0  # seconds for one answer (a cold start on a loaded CI runner included)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class RawServer:
    """``s3memory.mcp_server`` in a subprocess, spoken to in raw bytes.

    A daemon thread moves stdout lines into a queue, so every read can time out; stderr goes to
    a file (a pipe nobody reads could fill up and block the server).
    """

    def __init__(self, home: Path) -> None:
        self.errlog = home.parent / f"{home.name}-stderr.log"
        self._err = self.errlog.open("wb")
        self.process = subprocess.Popen(
            SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, env=server_environment(home)
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        assert self.process.stdout is not None
        self._pump_thread = threading.Thread(target=self._pump, args=(self.process.stdout,), daemon=True)
        self._pump_thread.start()

    def _pump(self, stdout: IO[bytes]) -> None:
        for line in stdout:
            self.lines.put(line)
        self.lines.put(b"")  # EOF

    def send_bytes(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_bytes(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    def receive(self, timeout: float = TIMEOUT) -> dict[str, Any]:
        """The next message on stdout; every stdout line must be one JSON-RPC object."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no answer within {timeout} s (the server hangs)") from None
        assert line, "the server closed stdout"
        assert line.endswith(b"\n")
        message = json.loads(line)
        assert isinstance(message, dict) and message["jsonrpc"] == "2.0", line[:200]
        return message

    def nothing_more(self, timeout: float = 1.0) -> None:
        with pytest.raises(queue.Empty):
            line = self.lines.get(timeout=timeout)
            raise AssertionError(f"unexpected output: {line[:200]!r}")

    def initialize(self) -> None:
        self.send(
            {
                "id": "init",
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            }
        )
        answer = self.receive()
        assert answer["id"] == "init" and answer["result"]["serverInfo"]["name"] == "s3memory", answer
        self.send({"method": "notifications/initialized"})

    def call(self, request_id: int | str, tool: str, **arguments: Any) -> tuple[bool, str]:
        """A ``tools/call`` that must be the very next answer: (is_error, text)."""
        self.send({"id": request_id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
        answer = self.receive()
        assert answer["id"] == request_id, answer
        [block] = answer["result"]["content"]
        return answer["result"]["isError"], block["text"]

    def close(self) -> str:
        """Close stdin (the client leaves); the server must exit cleanly. Its stderr."""
        try:
            assert self.process.stdin is not None
            self.process.stdin.close()
            assert self.process.wait(timeout=TIMEOUT) == 0
        finally:
            self.shutdown()
        assert self.lines.get(timeout=TIMEOUT) == b""  # nothing was left unread on stdout
        stderr = self.errlog.read_text(errors="replace")
        assert "Traceback" not in stderr, stderr
        return stderr

    def shutdown(self) -> None:
        """Kill the server if it still runs and release the pipes (idempotent)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._pump_thread.join(timeout=TIMEOUT)  # stdout is at EOF once the process is gone
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            self.process.stdin.close()
        except BrokenPipeError:
            pass
        self.process.stdout.close()
        self._err.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RawServer]:
    raw = RawServer(tmp_path / "home")
    try:
        yield raw
    finally:
        raw.shutdown()


def request(request_id: object, method: object = "tools/list", **extra: object) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, **extra}).encode()


DEEP = b"[" * 100_000 + b"]" * 100_000
VIEW = b'{"name":"view","arguments":{"path":"/memories"}}'

# (line without its newline, the code, the id of the answer)
BAD_LINES = {
    "bad JSON": (b"{not json", PARSE_ERROR, None),
    "truncated request": (b'{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":', PARSE_ERROR, 14),
    "trailing garbage": (request(15) + b" x", PARSE_ERROR, 15),
    "invalid UTF-8": (b"\xff\xfe\xfd", PARSE_ERROR, None),
    "invalid UTF-8 in a request": (
        b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"view","arguments":{"path":"/memories/\xff"}}}',
        PARSE_ERROR,
        9,
    ),
    "NUL byte": (b"\x00", PARSE_ERROR, None),
    "100,000 nested arrays": (DEEP, PARSE_ERROR, None),
    "deep params": (b'{"jsonrpc":"2.0","id":8,"method":"tools/call","params":' + DEEP + b"}", PARSE_ERROR, 8),
    "id of 5,000 digits": (b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"tools/list"}', PARSE_ERROR, None),
    "a scalar": (b"42", INVALID_REQUEST, None),
    "a string": (b'"tools/list"', INVALID_REQUEST, None),
    "null": (b"null", INVALID_REQUEST, None),
    "an empty object": (b"{}", INVALID_REQUEST, None),
    "an empty batch": (b"[]", INVALID_REQUEST, None),
    "a batch of scalars": (b"[1, 2]", INVALID_REQUEST, None),
    "params not an object": (request(10, params=[1]), INVALID_REQUEST, 10),
    "jsonrpc 1.0": (b'{"jsonrpc":"1.0","id":11,"method":"tools/list"}', INVALID_REQUEST, 11),
    "no jsonrpc member": (b'{"id":"twelve","method":"tools/list"}', INVALID_REQUEST, "twelve"),
    "method not a string": (request("m", method=7), INVALID_REQUEST, "m"),
    "id null": (request(None), INVALID_REQUEST, None),
    "id a float": (request(1.5), INVALID_REQUEST, None),
    "id true": (request(True), INVALID_REQUEST, None),
    "id an object": (request({"n": 1}), INVALID_REQUEST, None),
    "a notification with array params": (
        b'{"jsonrpc":"2.0","method":"notifications/initialized","params":[1]}',
        INVALID_REQUEST,
        None,
    ),
    # a broken *response* carries the client's own id space: never answered with its id
    "a broken response": (b'{"jsonrpc":"2.0","id":5,"result":"not an object"}', INVALID_REQUEST, None),
}


def assert_error(answer: dict[str, Any], code: int, request_id: object) -> None:
    assert set(answer) == {"jsonrpc", "id", "error"}, answer
    assert answer["id"] == request_id and type(answer["id"]) is type(request_id), answer
    assert answer["error"]["code"] == code, answer
    assert isinstance(answer["error"]["message"], str) and answer["error"]["message"], answer


@pytest.mark.slow  # the server over stdio
@pytest.mark.parametrize("name", list(BAD_LINES))
def test_a_bad_line_is_answered_and_the_server_keeps_serving(server: RawServer, name: str) -> None:
    line, code, request_id = BAD_LINES[name]
    server.initialize()
    server.send_bytes(line + b"\n")
    assert_error(server.receive(), code, request_id)
    assert server.call(1, "create", path="/memories/after.md", file_text="still here") == (
        False,
        "File created successfully at: /memories/after.md",
    )
    assert "refused a JSON-RPC message" in server.close()


@pytest.mark.slow  # the server over stdio
def test_every_bad_line_in_one_session_before_and_after_the_handshake(server: RawServer) -> None:
    """All of them, back to back on one connection, the first before ``initialize``."""
    lines = list(BAD_LINES.values())
    server.send_bytes(lines[0][0] + b"\n")
    assert_error(server.receive(), lines[0][1], lines[0][2])
    server.initialize()
    server.send_bytes(b"".join(line + b"\n" for line, _, _ in lines))
    for _, code, request_id in lines:
        assert_error(server.receive(), code, request_id)
    assert server.call(2, "view", path="/memories")[0] is False
    server.close()


@pytest.mark.slow  # the server over stdio
def test_a_batch_is_refused_for_each_request_in_it(server: RawServer) -> None:
    """MCP has no batches (since 2025-06-18): each request in one gets -32600 with its id."""
    server.initialize()
    batch = [
        {"jsonrpc": "2.0", "id": 7, "method": "tools/list"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "seven", "method": "tools/call", "params": json.loads(VIEW)},
        {"jsonrpc": "2.0", "id": 70, "result": {}},  # a response: the client's id space
        3,
    ]
    server.send_bytes(json.dumps(batch).encode() + b"\n")
    first, second = server.receive(), server.receive()
    assert_error(first, INVALID_REQUEST, 7)
    assert_error(second, INVALID_REQUEST, "seven")
    assert "batch" in first["error"]["message"]
    server.nothing_more()
    assert server.call(3, "view", path="/memories")[0] is False
    server.close()


@pytest.mark.slow  # the server over stdio
def test_blank_lines_and_crlf_are_not_errors(server: RawServer) -> None:
    server.initialize()
    server.send_bytes(b"\n   \n\r\n")
    server.send_bytes(request(4, "tools/call", params=json.loads(VIEW)) + b"\r\n")
    answer = server.receive()
    assert answer["id"] == 4 and answer["result"]["isError"] is False, answer
    server.nothing_more()
    server.close()


@pytest.mark.slow  # the server over stdio
def test_valid_json_rpc_the_sdk_refuses_is_answered_by_it(server: RawServer) -> None:
    server.initialize()
    server.send_bytes(request(5, "no/such/method") + b"\n")
    assert_error(server.receive(), -32601, 5)
    server.send_bytes(request(6, "tools/call", params={"name": "view"}) + b"\n")
    answer = server.receive()  # no arguments: a tool error in the memory tool's words
    assert answer == {
        "jsonrpc": "2.0",
        "id": 6,
        "result": {
            "content": [{"type": "text", "text": "Error: Missing required parameter `path` for command `view`."}],
            "isError": True,
        },
    }, answer
    assert server.call(8, "view", path="/memories", view_range="1,2") == (
        True,
        "Error: Invalid `view_range` parameter: '1,2'. It should be a list of integers.",
    )
    assert server.call(7, "view", path="/memories")[0] is False
    server.close()


def padded(request_id: int, size: int) -> bytes:
    """A valid ``tools/call`` of exactly ``size`` bytes (JSON whitespace fills it up)."""
    head = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s' % (request_id, VIEW)
    return head + b" " * (size - len(head) - 1) + b"}"


@pytest.mark.slow  # the server over stdio
def test_the_largest_message_is_served_and_one_byte_more_is_refused(server: RawServer) -> None:
    server.initialize()
    server.send_bytes(padded(20, MAX_MESSAGE_BYTES) + b"\n")
    answer = server.receive()
    assert answer["id"] == 20 and answer["result"]["isError"] is False, answer
    server.send_bytes(padded(21, MAX_MESSAGE_BYTES + 1) + b"\n")
    answer = server.receive()
    assert_error(answer, INVALID_REQUEST, 21)
    assert f"{MAX_MESSAGE_BYTES:,} bytes" in answer["error"]["message"]
    assert server.call(22, "view", path="/memories")[0] is False
    assert "larger than" in server.close()


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


@pytest.mark.slow  # the server over stdio
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="peak RSS is read from /proc")
def test_a_50_mb_line_is_refused_without_holding_it(server: RawServer) -> None:
    """The line is consumed in bounded chunks: the peak RSS grows by far less than 50 MB."""
    server.initialize()
    assert server.call(30, "view", path="/memories")[0] is False
    before = peak_rss_kib(server.process.pid)
    head = b'{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"create","arguments":'
    head += b'{"path":"/memories/big.md","file_text":"'
    chunk = b"x" * (1 << 20)
    writer = threading.Thread(  # the pipe is smaller than the line: write while the server reads
        target=lambda: server.send_bytes(head + chunk * 50 + b'"}}}\n'), daemon=True
    )
    writer.start()
    answer = server.receive(timeout=60)
    writer.join(timeout=TIMEOUT)
    assert not writer.is_alive()
    assert_error(answer, INVALID_REQUEST, 31)
    growth_mb = (peak_rss_kib(server.process.pid) - before) / 1024
    assert growth_mb < 25, f"peak RSS grew by {growth_mb:.0f} MB"
    assert server.call(32, "view", path="/memories/big.md") == (
        True,
        "The path /memories/big.md does not exist. Please provide a valid path.",
    )
    server.close()


@pytest.mark.slow  # the server over stdio
def test_an_overlong_last_line_without_newline_is_answered_at_eof(server: RawServer) -> None:
    server.initialize()
    server.send_bytes(padded(40, MAX_MESSAGE_BYTES + 100))
    assert server.process.stdin is not None
    server.process.stdin.close()
    assert_error(server.receive(), INVALID_REQUEST, 40)
    assert server.process.wait(timeout=TIMEOUT) == 0
    server.shutdown()


# The id recovery (a scanner of the top level, without recursion) agrees with a JSON parser.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)
ids = st.integers() | st.text(max_size=10) | st.none() | st.booleans() | st.floats(allow_nan=False)


@settings(max_examples=examples(300), deadline=None)
@given(st.dictionaries(st.sampled_from(["jsonrpc", "method", "params", "x", "ïd"]), json_values), ids, st.booleans())
def test_the_recovered_id_is_the_one_a_parser_reads(members: dict[str, Any], request_id: Any, ascii: bool) -> None:
    message = {**members, "id": request_id}
    text = json.dumps(message, ensure_ascii=ascii)
    valid = isinstance(request_id, str) or (isinstance(request_id, int) and not isinstance(request_id, bool))
    expected = request_id if valid and "method" in message else None
    assert _request_id(text) == expected
    assert type(_request_id(text)) is type(expected)
    # truncated anywhere: the id is recovered only once it was read whole, never a wrong one
    for cut in range(0, len(text), max(1, len(text) // 7)):
        assert _request_id(text[:cut]) in (None, expected)


@pytest.mark.parametrize("text", ["", "{", "[1]", '{"id":1', '{"method":"x","id":[1]}', "{" + "[" * 10_000, "\ufffd"])
def test_id_recovery_gives_up_quietly(text: str) -> None:
    assert _request_id(text) is None


async def read_all(data: bytes, max_message_bytes: int = MAX_MESSAGE_BYTES) -> tuple[list[Any], list[dict[str, Any]]]:
    """In process: what ``_read_stdin`` makes of ``data``: (messages passed on, refusals as JSON)."""
    import anyio
    from mcp.shared.message import SessionMessage

    passed: list[Any] = []
    refused: list[dict[str, Any]] = []

    async def reply(message: SessionMessage) -> None:
        refused.append(json.loads(message.message.model_dump_json(by_alias=True, exclude_unset=True)))

    send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    async with anyio.create_task_group() as tasks, receive:
        tasks.start_soon(_read_stdin, io.BytesIO(data), send, reply, max_message_bytes)
        async for item in receive:
            assert isinstance(item, SessionMessage)
            passed.append(item.message)
    return passed, refused


@pytest.mark.anyio
async def test_the_reader_passes_valid_messages_on_and_refuses_the_rest() -> None:
    data = request(1) + b"\n" + b"{oops\n" + request(2) + b"\n\n" + b"x" * 100 + b"\n" + request(3)  # no last newline
    passed, refused = await read_all(data, max_message_bytes=64)
    assert [message.id for message in passed] == [1, 2, 3]
    assert [(error["id"], error["error"]["code"]) for error in refused] == [
        (None, PARSE_ERROR),
        (None, INVALID_REQUEST),
    ]
    assert (
        refused[1]["error"]["message"]
        == "Invalid Request: the message is larger than 64 bytes, the most this server reads"
    )


@pytest.mark.anyio
async def test_a_failure_while_reading_a_line_costs_that_line_only(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = mcp_server.triage

    def flaky(line: bytes) -> Any:
        if b"boom" in line:
            raise RuntimeError("a bug")
        return real(line)

    monkeypatch.setattr(mcp_server, "triage", flaky)
    passed, refused = await read_all(b'"boom"\n' + request(4) + b"\n")
    assert [message.id for message in passed] == [4]
    assert refused == [
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32603, "message": "Internal error: could not read the message"},
        }
    ]
    assert "a bug" in caplog.text
