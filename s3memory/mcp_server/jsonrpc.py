"""One line of the MCP server's stdin: the JSON-RPC message it holds, or the refusals.

:mod:`s3memory.mcp_server` reads stdin one line at a time; :func:`triage` tells it what a
line is (a message to pass on to the mcp package's server, error responses that refuse the
line, or neither for a blank line), and :func:`too_large` refuses a line that is too long.
:func:`request_id_in` reads the id that a refusal carries, also from a line no parser accepts,
in time linear in the line and without recursion. The module docstring of
:mod:`s3memory.mcp_server` says which line gets which answer.

As there, ``mcp`` (an optional extra) is imported only inside the functions, so importing
this module never fails and never loads it.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.types import JSONRPCError, JSONRPCMessage, RequestId

_ID_SCAN_CHARS = 64 * 1024  # request_id_in looks only this far into a line


_JSON_SPACE = re.compile(r"[ \t\n\r]*")
_STRING_OR_BRACKET = re.compile(r'["\[\]{}]')
_SCALARS = json.JSONDecoder()  # used on scalars only: raw_decode never recurses on those


def _skip_space(text: str, index: int) -> int:
    match = _JSON_SPACE.match(text, index)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def _skip_container(text: str, index: int) -> int:
    """The index after the array or object that starts at ``text[index]``, in a loop (no recursion).

    Lenient (brackets are counted, not matched): only :func:`request_id_in` uses it.

    Raises:
        ValueError: the text ends before the container (or a string in it) does.
    """
    depth = 0
    while match := _STRING_OR_BRACKET.search(text, index):
        char = match.group()
        if char == '"':
            _, index = _SCALARS.raw_decode(text, match.start())
            continue
        index = match.end()
        depth += 1 if char in "[{" else -1
        if depth == 0:
            return index
    raise ValueError("unterminated container")


def _valid_id(value: object) -> RequestId | None:
    """``value`` if it can be a request's id (a string or an integer, not a boolean), else None."""
    return value if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)) else None


def request_id_in(text: str) -> RequestId | None:
    """The id of the JSON-RPC request that ``text`` holds, also where a parser gives up on it; or None.

    Reads the members of the top-level object only, in time linear in the text and without
    recursion (a nested value is skipped by counting its brackets), so it also reads a message
    that is truncated, cut at :data:`~s3memory.mcp_server.MAX_MESSAGE_BYTES`, nested too
    deeply or followed by garbage, as far as its top level is sound; and looks no further
    than ``_ID_SCAN_CHARS`` characters. An id counts only once it is followed by ``,`` or
    ``}`` (a number cut short is no id), only if it is a string or an integer, and only if the
    object has a ``method`` member too: that makes it a request, while the id of a *response*
    (which has none) is one of the client's own ids and must never be answered.
    """
    text = text[:_ID_SCAN_CHARS]
    found: object = None
    is_request = False
    try:
        index = _skip_space(text, 0)
        if text[index] != "{":
            return None
        index = _skip_space(text, index + 1)
        while text[index] != "}":
            if text[index] != '"':
                break
            key, index = _SCALARS.raw_decode(text, index)
            index = _skip_space(text, index)
            if text[index] != ":":
                break
            index = _skip_space(text, index + 1)
            if text[index] in "[{":
                value, index = None, _skip_container(text, index)
            else:
                value, index = _SCALARS.raw_decode(text, index)
            index = _skip_space(text, index)
            if text[index] not in ",}":
                break
            if key == "id":
                found = value
            is_request = is_request or key == "method"
            if text[index] == ",":
                index = _skip_space(text, index + 1)
    except (ValueError, IndexError):  # the text ends or breaks off (json.JSONDecodeError is a ValueError)
        pass
    return _valid_id(found) if is_request else None


def refusal(code: int, message: str, request_id: RequestId | None) -> JSONRPCError:
    from mcp.types import ErrorData, JSONRPCError

    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))


def triage(line: bytes) -> tuple[JSONRPCMessage | None, list[JSONRPCError]]:
    """The message on one line of stdin, or the error responses that refuse the line.

    Neither for a blank line, which is no message. A batch (MCP has none since 2025-06-18) is
    refused as a whole, with one refusal for each request in it (a client that still sends
    batches waits on those ids), or one with a ``null`` id if it holds no request.
    """
    from mcp.types import INVALID_REQUEST, PARSE_ERROR, JSONRPCNotification, jsonrpc_message_adapter
    from pydantic import ValidationError
    from pydantic_core import from_json

    if not line.strip():
        return None, []
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        request_id = request_id_in(line.decode("utf-8", "replace"))
        return None, [refusal(PARSE_ERROR, "Parse error: the message is not valid UTF-8", request_id)]
    try:
        message = jsonrpc_message_adapter.validate_json(text, by_name=False)  # as the mcp package's stdio does
        # a member "id" that is neither a string nor an integer: pydantic read a notification
        if not (isinstance(message, JSONRPCNotification) and "id" in from_json(text)):
            return message, []
    except ValidationError as exc:
        if any(error["type"] == "json_invalid" for error in exc.errors(include_url=False, include_input=False)):
            reason = "Parse error: the message is not valid JSON (or is nested too deeply)"
            return None, [refusal(PARSE_ERROR, reason, request_id_in(text))]
        parsed = from_json(text)  # valid JSON, as pydantic has just found
        if isinstance(parsed, list):
            reason = "Invalid Request: JSON-RPC batches are not supported; send one message per line"
            ids = [_valid_id(item.get("id")) for item in parsed if isinstance(item, dict) and "method" in item]
            refusals = [refusal(INVALID_REQUEST, reason, request_id) for request_id in ids if request_id is not None]
            return None, refusals or [refusal(INVALID_REQUEST, reason, None)]
    reason = "Invalid Request: not a valid JSON-RPC 2.0 request, notification or response"
    return None, [refusal(INVALID_REQUEST, reason, request_id_in(text))]


def too_large(start: bytes, max_message_bytes: int) -> JSONRPCError:
    """The refusal of a line longer than ``max_message_bytes`` that begins with ``start``."""
    from mcp.types import INVALID_REQUEST

    reason = f"Invalid Request: the message is larger than {max_message_bytes:,} bytes, the most this server reads"
    return refusal(INVALID_REQUEST, reason, request_id_in(start[:_ID_SCAN_CHARS].decode("utf-8", "replace")))
