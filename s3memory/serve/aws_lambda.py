"""The memory-store API on AWS Lambda, behind an API Gateway HTTP API and its JWT authorizer.

:func:`handler_for` turns an API into a Lambda handler for HTTP API events (payload format
2.0); :func:`handler` is the one the example's template names
(``s3memory.serve.aws_lambda.handler``), built on the first event from ``S3MEMORY_*``
variables (``Settings.from_environment``) and kept for the container's life, so the S3 and
KMS clients and the key cache serve every later invocation.

**Who is asking.** API Gateway has already verified the caller's token (signature, issuer,
audience, expiry); no key is checked here. The actor each version records is the token's
``sub`` and ``iss`` claims mapped by :func:`s3memory.user_id_for_subject` (``u-`` and 32
base32 characters, since a subject may be any string): the user id the example's agent
function gives the same person. With ``S3MEMORY_SUBJECT_KEY_SECRET_ARN`` the map is keyed
by that secret (read once per container), as the agent function's is. An event without
those claims is answered 401: it did not come through the authorizer.

**What it may do** comes from the token's scopes (the ``scope`` claim, space-separated, or
``scp``, a list: what OAuth access tokens carry): ``memory_stores:write`` reads and writes
every store and manages stores; ``memory_stores:read`` reads every store. A token with
neither is 403 ``permission_error``: the authorizer admits the chat app's users too, who
must not reach every store.

**Requests.** ``rawPath`` as routed (an HTTP API delivers it decoded, as an ASGI server
does; a named stage's ``/stage`` prefix is dropped), ``rawQueryString`` parsed to pairs in
the order sent, headers lowercased, the body decoded from base64 when API Gateway sent it
so. A body over ``MAX_BODY_BYTES`` is 413 ``request_too_large``. An answer larger than
Lambda can return (6 MB, as the runtime encodes it) is a 500 that says to ask for less,
rather than API Gateway's bare 500.

Each request is one log line on ``s3memory.serve`` at INFO, as the ASGI face writes it:
method, path, status, milliseconds, request id; never the query, a header, the body, the
token's claims or the actor.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol
from urllib.parse import parse_qsl

from .._config import Settings
from .._errors import ConfigurationError
from .._identity import user_id_for_subject
from .._render import never_raw
from .http import MAX_BODY_BYTES, ApiError, Request, Response, error_response, new_request_id
from .keys import Principal

__all__ = [
    "MAX_ANSWER_BYTES",
    "SUBJECT_KEY_VARIABLE",
    "LambdaHandler",
    "VouchedAPI",
    "build_lambda_api",
    "handler",
    "handler_for",
    "read_subject_key",
]

log = logging.getLogger("s3memory.serve")

#: A Lambda handler: the event and the context in, the HTTP API's answer out.
LambdaHandler = Callable[[Any, Any], dict[str, Any]]
#: What a synchronous invocation may answer (Lambda's 6 MB), measured as the runtime sends it.
MAX_ANSWER_BYTES = 6 * 1024 * 1024
#: The Secrets Manager secret (its ARN) that keys the subject-to-actor map, if any.
SUBJECT_KEY_VARIABLE = "S3MEMORY_SUBJECT_KEY_SECRET_ARN"
NO_IDENTITY = "No verified identity: call through the API's JWT authorizer with a bearer token."
SERVER_ERROR_MESSAGE = "The server failed to answer the request; the operator's log has the details."
MISCONFIGURED = "The server is misconfigured; the operator's log says how."
_LOGGED_PATH_CHARS = 256
# Secrets Manager's answers that may pass on a retry (the SDK retries a 503).
_PASSING = {"ThrottlingException", "Throttling", "RequestLimitExceeded", "InternalServiceError", "ServiceUnavailable"}


WRITE_SCOPE = "memory_stores:write"
READ_SCOPE = "memory_stores:read"
NO_SCOPE = f"The token has neither the {WRITE_SCOPE} nor the {READ_SCOPE} scope."


class VouchedAPI(Protocol):
    """What this face serves: the memory-store API, given each request with the caller the
    face vouches for as ``principal`` (no key is checked then; None: check the key as usual)."""

    def handle(self, request: Request, *, principal: Principal | None = None) -> Response: ...


def handler_for(api: VouchedAPI, *, subject_key: bytes | None = None) -> LambdaHandler:
    """A Lambda handler answering HTTP API (payload 2.0) events with ``api``, each request
    acting as its token's subject (keyed by ``subject_key``, if given: see the module).

    Raises:
        ConfigurationError: ``subject_key`` is shorter than 16 bytes.
    """
    if subject_key is not None:
        user_id_for_subject("-", key=subject_key)  # refuses a short key now, not on every request

    def handle(event: Any, context: Any) -> dict[str, Any]:
        started = time.perf_counter()
        method, path = _method(event), _path(event)
        try:
            caller = _principal(event, subject_key)
            request = Request(method, path, _query(event), _headers(event), _body(event))
        except ApiError as error:
            answer = error.response(new_request_id())
        else:
            answer = _answer(api, request, caller)
        result = _lambda_answer(answer)
        _log_request(method, path, result["statusCode"], started, result["headers"]["request-id"])
        return result

    return handle


# -- the event --------------------------------------------------------------------------------
def _context(event: Any) -> Mapping[str, Any]:
    context = event.get("requestContext") if isinstance(event, Mapping) else None
    return context if isinstance(context, Mapping) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _method(event: Any) -> str:
    http = _context(event).get("http")
    return _text(http.get("method") if isinstance(http, Mapping) else None).upper() or "-"


def _path(event: Any) -> str:
    path = _text(event.get("rawPath") if isinstance(event, Mapping) else None) or "/"
    stage = _text(_context(event).get("stage"))
    # A named stage (not $default) is the first segment of the invoke URL's path, and of rawPath.
    if stage and stage != "$default" and (path == f"/{stage}" or path.startswith(f"/{stage}/")):
        path = path[len(stage) + 1 :] or "/"
    return path


def _principal(event: Any, subject_key: bytes | None) -> Principal:
    """The caller of the token API Gateway verified (401 if the event has no such token),
    with what its scopes allow (403 if nothing)."""
    actor = _actor(event, subject_key)
    claims = _claims(event)
    granted = claims.get("scope", claims.get("scp", ""))
    scopes = set(granted.split()) if isinstance(granted, str) else set(granted if isinstance(granted, list) else ())
    if WRITE_SCOPE in scopes:
        return Principal(actor, "read_write", None)
    if READ_SCOPE in scopes:
        return Principal(actor, "read_only", None)
    raise ApiError(403, "permission_error", NO_SCOPE)


def _claims(event: Any) -> Mapping[str, Any]:
    claims: Any = _context(event).get("authorizer")
    for name in ("jwt", "claims"):
        claims = claims.get(name) if isinstance(claims, Mapping) else None
    return claims if isinstance(claims, Mapping) else {}


def _actor(event: Any, subject_key: bytes | None) -> str:
    """The actor of the token API Gateway verified: 401 if the event has no such token."""
    if not isinstance(event, Mapping) or event.get("version") != "2.0":
        # Not an HTTP API's payload 2.0: the integration is not the template's.
        log.error("not an API Gateway HTTP API event (payload format 2.0): check the integration")
        raise ApiError(500, "api_error", MISCONFIGURED)
    claims: Any = _context(event).get("authorizer")
    for name in ("jwt", "claims"):
        claims = claims.get(name) if isinstance(claims, Mapping) else None
    subject = claims.get("sub") if isinstance(claims, Mapping) else None
    issuer = claims.get("iss", "") if isinstance(claims, Mapping) else ""
    if not isinstance(subject, str) or not subject or not isinstance(issuer, str):
        raise ApiError(401, "authentication_error", NO_IDENTITY)
    return user_id_for_subject(subject, issuer=issuer, key=subject_key)


def _query(event: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    # As Starlette parses a query for the ASGI face: blank values kept, repeats in order.
    return tuple(parse_qsl(_text(event.get("rawQueryString")), keep_blank_values=True))


def _headers(event: Mapping[str, Any]) -> dict[str, str]:
    # API Gateway has already joined a repeated header's values with commas.
    given = event.get("headers")
    if not isinstance(given, Mapping):
        return {}
    return {str(name).lower(): value for name, value in given.items() if isinstance(value, str)}


def _body(event: Mapping[str, Any]) -> bytes:
    text = _text(event.get("body"))
    if event.get("isBase64Encoded") is True:
        # Four characters of base64 per three bytes: a text this long is over the limit decoded.
        if len(text) > (MAX_BODY_BYTES + 2) // 3 * 4:
            raise _too_large()
        try:
            body = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise ApiError(400, "invalid_request_error", "The request body is not valid base64.") from None
    else:
        if len(text) > MAX_BODY_BYTES:  # at least one byte a character
            raise _too_large()
        body = text.encode("utf-8", "surrogatepass")  # the bytes sent, whatever they are
    if len(body) > MAX_BODY_BYTES:
        raise _too_large()
    return body


def _too_large() -> ApiError:
    return ApiError(413, "request_too_large", f"The request body is larger than the limit of {MAX_BODY_BYTES} bytes.")


# -- the answer -------------------------------------------------------------------------------
def _answer(api: VouchedAPI, request: Request, caller: Principal) -> Response:
    try:
        return api.handle(request, principal=caller)
    except ApiError as error:  # the API answers its own errors; one that escapes still is one
        return error.response(new_request_id())
    except Exception:
        log.error(
            "%s %s: unexpected error answering the request", request.method, _loggable(request.path), exc_info=True
        )
        return error_response(500, "api_error", SERVER_ERROR_MESSAGE, new_request_id())


def _lambda_answer(answer: Response) -> dict[str, Any]:
    """The HTTP API's answer: status, headers (a request id always), the JSON body as text."""
    headers = {name.lower(): value for name, value in answer.headers.items()}
    headers["request-id"] = headers.get("request-id") or new_request_id()
    body = answer.encoded().decode("utf-8", "surrogatepass")
    if answer.body is not None:
        headers.setdefault("content-type", "application/json")
    result = {"statusCode": answer.status, "headers": headers, "body": body, "isBase64Encoded": False}
    # The runtime sends the answer as ASCII JSON: up to 12 bytes a character. Measured only
    # when it could be over, since measuring is encoding it once more.
    if len(body) * 12 > MAX_ANSWER_BYTES and len(json.dumps(result)) > MAX_ANSWER_BYTES:
        message = (
            f"The answer is larger than AWS Lambda can return ({MAX_ANSWER_BYTES} bytes): "
            "ask for fewer items (limit) or the basic view."
        )
        refused = error_response(500, "api_error", message, headers["request-id"])
        return _lambda_answer(refused)  # the same every time: never worth retrying (x-should-retry: false)
    return result


def _loggable(path: str) -> str:
    """The path for a log line: bounded, with what could forge or hide a line escaped."""
    shown = "".join(f"\\u{ord(char):04x}" if never_raw(char) or char == "\\" else char for char in path)
    return shown if len(shown) <= _LOGGED_PATH_CHARS else shown[:_LOGGED_PATH_CHARS] + "..."


def _log_request(method: str, path: str, status: int, started: float, request_id: str) -> None:
    milliseconds = (time.perf_counter() - started) * 1000
    log.info("%s %s %d %.1fms %s", _loggable(method), _loggable(path), status, milliseconds, request_id)


# -- the function the template names ------------------------------------------------------------
def build_lambda_api(environ: Mapping[str, str] | None = None) -> VouchedAPI:
    """The API over the stores ``S3MEMORY_*`` variables say where to keep.

    Raises:
        ConfigurationError: a setting is wrong (the message names its variable).
    """
    from .api import build_api

    settings = Settings.from_environment(environ)
    # Every caller is vouched for by the authorizer: no key is served. An unguessable one
    # stands in for none, so that a request with no actor can never pass the key check.
    return build_api(settings, serve_key=secrets.token_urlsafe(32))


def read_subject_key(environ: Mapping[str, str] | None = None) -> bytes | None:
    """The key of the subject-to-actor map: the secret ``S3MEMORY_SUBJECT_KEY_SECRET_ARN``
    names (its text as UTF-8, or its binary), or None when unset.

    Raises:
        botocore.exceptions.ClientError, BotoCoreError: Secrets Manager refused or failed.
    """
    arn = (os.environ if environ is None else environ).get(SUBJECT_KEY_VARIABLE)
    if not arn:
        return None
    from .._aws.clients import new_client

    secret = new_client("secretsmanager").get_secret_value(SecretId=arn)
    text = secret.get("SecretString")
    return text.encode() if text is not None else bytes(secret["SecretBinary"])


_HANDLER: LambdaHandler | None = None


def handler(event: Any, context: Any) -> dict[str, Any]:
    """The Lambda function's entry point: the API is built on the first event (again on the
    next one if that failed) and serves every later one."""
    global _HANDLER
    if _HANDLER is None:
        try:
            _HANDLER = handler_for(build_lambda_api(), subject_key=read_subject_key())
        except Exception as error:
            return _lambda_answer(_not_built(error))
    return _HANDLER(event, context)


def _not_built(error: Exception) -> Response:
    """The answer while the API cannot be built: 500 for a setting to fix, 503 while AWS
    throttles or cannot be reached (the SDK retries a 503)."""
    from botocore.exceptions import BotoCoreError, ClientError

    request_id = new_request_id()
    code = error.response.get("Error", {}).get("Code") if isinstance(error, ClientError) else None
    if isinstance(error, BotoCoreError) or code in _PASSING:
        log.warning("cannot read the subject key secret yet (%s)", code or type(error).__name__)
        answer = error_response(503, "overloaded_error", "The server is not ready; try again.", request_id)
        del answer.headers["x-should-retry"]
        return answer
    if isinstance(error, ClientError):  # refused: the ARN, or the role's permission to read it
        log.error("cannot read the subject key secret (%s): check %s and the role", code, SUBJECT_KEY_VARIABLE)
    elif isinstance(error, ConfigurationError):
        log.error("cannot serve the memory-store API: %s", error)
    else:
        log.error("cannot serve the memory-store API (%s)", type(error).__name__, exc_info=True)
        return error_response(500, "api_error", SERVER_ERROR_MESSAGE, request_id)
    return error_response(500, "api_error", MISCONFIGURED, request_id)
