"""The memory-store API's requests and answers, free of any web framework.

The API's logic (``api``) takes a :class:`Request` and gives a :class:`Response`; a face
(the ASGI app in ``app``, later a Lambda handler) turns its framework's request into one and
the answer back. Errors are :class:`ApiError`, answered with the Anthropic API's error body::

    {"type": "error", "error": {"type": "not_found_error", "message": "..."}, "request_id": "req_..."}

Every 4xx answer carries ``x-should-retry: false``: the SDK retries a 409 (and 408, 429)
unless told not to, and a failed precondition or a taken path is never worth retrying.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: The largest request body read (a memory's content is at most 102,400 bytes of UTF-8; as
#: JSON, escaped, up to 6 bytes a byte: the bound leaves room for that and the other fields).
MAX_BODY_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Request:
    """One HTTP request: ``headers`` with lowercased names; ``query`` in the order sent."""

    method: str
    path: str
    query: Sequence[tuple[str, str]] = ()
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""

    def json(self) -> dict[str, Any]:
        """The body as a JSON object; :class:`ApiError` 400 if it is not one."""
        if not self.body:
            return {}
        try:
            document = json.loads(self.body)
        except (ValueError, RecursionError):
            raise ApiError(400, "invalid_request_error", "The request body is not valid JSON.") from None
        if not isinstance(document, dict):
            raise ApiError(400, "invalid_request_error", "The request body must be a JSON object.")
        return document


@dataclass
class Response:
    """One answer: ``body`` is JSON (None: no body)."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)

    def encoded(self) -> bytes:
        return b"" if self.body is None else json.dumps(self.body, ensure_ascii=False, separators=(",", ":")).encode()


class ApiError(Exception):
    """An answer with the API's error body: ``status``, the error's ``type`` (one of the
    SDK's ``ErrorType``), and a message for the caller."""

    def __init__(self, status: int, error_type: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message

    def response(self, request_id: str) -> Response:
        return error_response(self.status, self.error_type, self.message, request_id)


def new_request_id() -> str:
    return "req_" + os.urandom(12).hex()


def error_response(status: int, error_type: str, message: str, request_id: str) -> Response:
    body = {"type": "error", "error": {"type": error_type, "message": message}, "request_id": request_id}
    return Response(status, body, {"request-id": request_id, "x-should-retry": "false"})


def not_found(what: str) -> ApiError:
    return ApiError(404, "not_found_error", what)


def invalid(message: str) -> ApiError:
    return ApiError(400, "invalid_request_error", message)
