"""AWS Lambda: one agent turn with an encrypted, per-user memory, isolated by AWS itself.

The user is whoever the API's JWT authorizer verified, never the model nor the request
body. An HTTP API (payload 2.0: ``requestContext.authorizer.jwt.claims``) or a REST API with
a Cognito authorizer (payload 1.0: ``requestContext.authorizer.claims``) both work: the
token's ``sub`` and ``iss`` claims become the user id through
``s3memory.user_id_for_subject`` (``u-`` and 32 base32 characters), since identity
providers' subjects (``auth0|abc123``, emails, long ids) are often not valid user ids. With
S3MEMORY_SUBJECT_KEY_SECRET_ARN set, that map is keyed (HMAC) by the secret, so user ids
reveal nothing about subjects to bucket readers; the key must then never change (see the
example's README).

The function's own role may touch neither the bucket nor the key: per user, it assumes the
memory role (MEMORY_ROLE_ARN) with the session tag ``s3memory-user=<user id>``, and the
tool's S3 and KMS clients use that session's credentials. The memory role's policy names
the tenant as ``${aws:PrincipalTag/s3memory-user}``, so AWS refuses any request of this
invocation for another user's prefix or KMS encryption context (see s3memory._admin.policy and
policies/). The scoped clients are cached per user for 10 minutes (the credentials last
15), so a warm container calls STS once per user per 10 minutes.

Everything at module scope survives between invocations of a warm container: the AWS
clients, the scoped clients, the Messages API client, and the ``KeyCache`` holding each
user's unwrapped tenant key for 15 minutes (shared by all users' tools: its entries are keyed
by tenant), so a warm invocation makes zero KMS calls. The S3 and KMS clients are
s3memory's (``s3memory.s3_client``, ``kms_client``): S3's hot requests go through awscrt,
which the package installs (s3memory's ``fast`` extra). Context editing clears old tool
results as the conversation grows, but never the memory tool's: what Claude saved stays
reachable.

A cold start pays only for what the request uses: ``import handler`` loads s3memory's core,
Powertools and botocore's exceptions; each client is made on first use; the Anthropic SDK
(most of a cold start's imports) is imported on the first model call, after the identity and
body checks, so a refused request never loads it.

Requests: ``POST`` a JSON object with ``prompt`` (a non-empty string) or ``messages`` (a
Messages API conversation ending with a user turn). Answers: ``200 {"reply": text}``, or
``{"error": {"code", "message"}}`` with 400 (bad body, or a conversation the model API
refused), 401 (no verified identity), 500 (a deployment problem), 502 (the model API
failed), 503 (the model API or the memory store is overloaded or throttling: retry later;
``Retry-After`` when known) or 504 (the model API timed out). Every refusal is logged once,
as JSON (AWS Lambda Powertools), with its code and the user id, never the prompt, the
reply, memory paths or the token's subject; each request adds one ``Requests`` metric
(dimension ``Outcome``).

Shared stores (MEMORY_MOUNTS) appear under /memories/{name}/ beside each user's own, and
the model gets a ``memory_search`` tool beside the memory tool and a system-prompt block
naming the stores (``s3memory.memory_stores_prompt``).

Environment (set by template.json): MEMORY_BUCKET, MEMORY_KMS_KEY_ID, MEMORY_ROLE_ARN, MEMORY_MOUNTS,
ANTHROPIC_MODEL, ANTHROPIC_API_KEY_SECRET_ARN (or ANTHROPIC_API_KEY, for a local run; read
once per container), S3MEMORY_SUBJECT_KEY_SECRET_ARN (optional), POWERTOOLS_SERVICE_NAME and
POWERTOOLS_METRICS_NAMESPACE. Without MEMORY_ROLE_ARN (a local run) the function's own
credentials are used.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent, APIGatewayProxyEventV2
from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as AWSConnectionError

from s3memory import (
    ConfigurationError,
    KeyCache,
    Mount,
    S3MemoryError,
    assume_role_request,
    kms_client,
    memory_stores_prompt,
    open_memory,
    s3_client,
    user_id_for_subject,
)

if TYPE_CHECKING:  # its module imports the Anthropic SDK, which memory_tool_for loads on first use
    from s3memory import S3MemoryTool

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME", "s3memory-agent"))
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "s3memory"))

# Seconds, not botocore's 60 s defaults: a request to S3, KMS or STS takes milliseconds, and
# one that hangs must fail (after 3 attempts) well inside the function's 30 s.
CONNECT_SECONDS, READ_SECONDS, MAX_ATTEMPTS = 2, 5, 3
# The AWS clients, each made on first use and kept for the container's life.
_OWN: tuple[Any, Any] | None = None  # S3 and KMS with the function's own credentials
_STS: Any = None
_SECRETS: Any = None
KEYS = KeyCache(ttl_seconds=900)
SESSION_SECONDS = 900  # what each assumed session lasts
SCOPED_TTL_SECONDS = 600  # reuse a session this long: an invocation (timeout 30 s) never outlives it
MAX_SCOPED_USERS = 64
_SCOPED: OrderedDict[str, tuple[float, Any, Any]] = OrderedDict()  # user -> (expires, s3, kms)
CONTEXT_MANAGEMENT = {
    "edits": [
        {
            "type": "clear_tool_uses_20250919",
            "trigger": {"type": "input_tokens", "value": 30000},
            "keep": {"type": "tool_uses", "value": 3},
            "exclude_tools": ["memory"],  # never clear what the memory tool returned
        }
    ]
}
DEFAULT_MODEL = "claude-sonnet-5-5"
MODEL_TIMEOUT_SECONDS = 25.0  # at most, each Messages request; the turn's deadline may allow less
MODEL_MAX_RETRIES = 0  # a retry would outlive the turn: the caller may retry (503 says when)
# The whole turn, every Messages request and tool call of it, ends this long before API
# Gateway (30 s) or the function's timeout, whichever is sooner, so that the function still
# answers 504 itself, logs it once and counts it.
TURN_SECONDS = 27.0
ANSWER_MARGIN_SECONDS = 2.0
_TURN_DEADLINE: float | None = None  # time.monotonic() when this invocation's turn must end
MAX_PROMPT_CHARS = 100_000
MAX_MESSAGES = 100
_ANTHROPIC: Any = None
_SUBJECT_KEY: bytes | None = None
_SUBJECT_KEY_LOADED = False
NO_IDENTITY = "no verified identity: send a bearer token from the identity provider"
# Throttling codes of STS and Secrets Manager (S3 and KMS errors reach the model, not us).
_THROTTLING = {"Throttling", "ThrottlingException", "RequestLimitExceeded", "ServiceUnavailable", "InternalFailure"}


class Refusal(Exception):
    """A request that ends in an error answer: ``status``, a stable ``code`` and a message
    for the caller, and ``details`` for the log (never content, paths or subjects)."""

    def __init__(self, status: int, code: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details


def own_clients() -> tuple[Any, Any]:
    """S3 and KMS clients with the function's own credentials, for a run without
    MEMORY_ROLE_ARN (a local one): s3memory's, whose timeouts and retries are those above."""
    global _OWN
    if _OWN is None:
        timeouts = {"connect_timeout": CONNECT_SECONDS, "timeout": READ_SECONDS}
        _OWN = s3_client(**timeouts), kms_client(**timeouts)
    return _OWN


def sts() -> Any:
    """The STS client: boto3 is imported on the first AssumeRole, not at init."""
    global _STS
    if _STS is None:
        _STS = boto3_client("sts")
    return _STS


def secrets() -> Any:
    """The Secrets Manager client, made on the first secret read."""
    global _SECRETS
    if _SECRETS is None:
        _SECRETS = boto3_client("secretsmanager")
    return _SECRETS


def boto3_client(service: str) -> Any:
    """A boto3 client with the timeouts and retries above."""
    import boto3
    from botocore.config import Config

    retries = {"mode": "standard", "total_max_attempts": MAX_ATTEMPTS}
    return boto3.client(
        service, config=Config(connect_timeout=CONNECT_SECONDS, read_timeout=READ_SECONDS, retries=retries)
    )


def clients_for(user_id: str) -> tuple[Any, Any]:
    """S3 and KMS clients whose every request AWS authorises as ``user_id`` only."""
    role_arn = os.environ.get("MEMORY_ROLE_ARN")
    if not role_arn:
        return own_clients()
    now = time.monotonic()
    cached = _SCOPED.get(user_id)
    if cached is not None and cached[0] > now:
        _SCOPED.move_to_end(user_id)
        return cached[1], cached[2]
    request = assume_role_request(role_arn=role_arn, user_id=user_id, duration_seconds=SESSION_SECONDS)
    credentials = sts().assume_role(**request)["Credentials"]
    session = {
        "aws_access_key_id": credentials["AccessKeyId"],
        "aws_secret_access_key": credentials["SecretAccessKey"],
        "aws_session_token": credentials["SessionToken"],
        "connect_timeout": CONNECT_SECONDS,
        "timeout": READ_SECONDS,
    }
    s3, kms = s3_client(**session), kms_client(**session)  # with credentials: new clients, not shared
    _SCOPED[user_id] = (now + SCOPED_TTL_SECONDS, s3, kms)
    _SCOPED.move_to_end(user_id)
    while len(_SCOPED) > MAX_SCOPED_USERS:
        _SCOPED.popitem(last=False)
    return s3, kms


_MOUNTS: list[Mount] | None = None


def shared_stores() -> list[Mount]:
    """The stores every user sees beside their own (MEMORY_MOUNTS: a JSON list of
    ``{"name", "user_id", "access", "description", "instructions"}``), read once per
    container; read-only ones are enforced by the memory role's policy (``s3memory policy
    --read-only-mount``). A bad value is a ConfigurationError: every request answers 500
    ``misconfigured``, logged with that error type."""
    global _MOUNTS
    if _MOUNTS is None:
        try:
            listed = json.loads(os.environ.get("MEMORY_MOUNTS") or "[]")
            _MOUNTS = [Mount(**item) for item in listed]
        except (ValueError, TypeError) as exc:  # not JSON, not a list of objects, a field Mount refuses
            raise ConfigurationError(f"MEMORY_MOUNTS: {exc}") from None
    return _MOUNTS


def memory_tool_for(user_id: str) -> S3MemoryTool:
    """Cheap to build: no request until the first command; keys come from the shared cache.
    The first call imports the Anthropic SDK, on which the tool is built."""
    s3, kms = clients_for(user_id)
    memory = open_memory(
        bucket=os.environ["MEMORY_BUCKET"],
        user_id=user_id,
        s3_client=s3,
        kms_key_id=os.environ["MEMORY_KMS_KEY_ID"],
        kms_client=kms,
        key_cache=KEYS,
        track_access=True,  # one PUT per file per day, so `s3memory expire` can find unused memories
        mounts=shared_stores(),
    )
    from s3memory import S3MemoryTool

    return S3MemoryTool(memory=memory)


def anthropic_client() -> Any:
    global _ANTHROPIC
    if _ANTHROPIC is None:  # imported on first use: a refused request never pays for it
        from anthropic import Anthropic

        api_key = os.environ.get("ANTHROPIC_API_KEY")
        if not api_key and os.environ.get("ANTHROPIC_API_KEY_SECRET_ARN"):
            api_key = secrets().get_secret_value(SecretId=os.environ["ANTHROPIC_API_KEY_SECRET_ARN"])["SecretString"]
        _ANTHROPIC = Anthropic(
            api_key=api_key,
            http_client=model_http_client(),
            timeout=MODEL_TIMEOUT_SECONDS,
            max_retries=MODEL_MAX_RETRIES,
        )
    return _ANTHROPIC


def model_http_client(transport: Any = None) -> Any:
    """The Messages API's HTTP client: each request may take only what is left of the turn."""
    import httpx2

    class TurnDeadline(httpx2.BaseTransport):
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def handle_request(self, request: Any) -> Any:
            if _TURN_DEADLINE is not None:
                left = _TURN_DEADLINE - time.monotonic()
                if left <= 0:
                    raise httpx2.ReadTimeout("the turn's time is spent", request=request)
                asked = request.extensions.get("timeout") or {}
                request.extensions["timeout"] = {
                    phase: left if asked.get(phase) is None else min(asked[phase], left)
                    for phase in ("connect", "read", "write", "pool")
                }
            return self.inner.handle_request(request)

        def close(self) -> None:
            self.inner.close()

    return httpx2.Client(transport=TurnDeadline(transport if transport is not None else httpx2.HTTPTransport()))


def subject_key() -> bytes | None:
    """The key of the subject-to-user-id map (the secret's text as UTF-8, or its binary), or
    None: unkeyed. Read once per container."""
    global _SUBJECT_KEY, _SUBJECT_KEY_LOADED
    if not _SUBJECT_KEY_LOADED:
        arn = os.environ.get("S3MEMORY_SUBJECT_KEY_SECRET_ARN")
        if arn:
            secret = secrets().get_secret_value(SecretId=arn)
            text = secret.get("SecretString")
            _SUBJECT_KEY = text.encode() if text is not None else bytes(secret["SecretBinary"])
        _SUBJECT_KEY_LOADED = True
    return _SUBJECT_KEY


def verified_claims(event: Any) -> tuple[dict[str, Any], Any]:
    """The JWT claims API Gateway's authorizer verified, and the event as a Powertools data
    class: payload 2.0 (HTTP API) or 1.0 (REST API, Cognito authorizer)."""
    parsed: APIGatewayProxyEvent | APIGatewayProxyEventV2
    try:
        if event.get("version") == "2.0":
            parsed = APIGatewayProxyEventV2(event)
            claims = parsed.request_context.authorizer.jwt_claim
        else:
            parsed = APIGatewayProxyEvent(event)
            claims = parsed.request_context.authorizer.claims
    except (AttributeError, KeyError, TypeError):  # not an API Gateway event, or no authorizer
        claims = None
    if not isinstance(claims, dict) or not claims:
        raise Refusal(401, "unauthenticated", NO_IDENTITY)
    return claims, parsed


def user_id_from(claims: dict[str, Any]) -> str:
    subject, issuer = claims.get("sub"), claims.get("iss", "")
    if not isinstance(subject, str) or not subject or not isinstance(issuer, str):
        raise Refusal(401, "unauthenticated", NO_IDENTITY)
    try:
        key = subject_key()
    except (BotoCoreError, ClientError) as exc:
        raise aws_refusal(exc, "memory_unavailable", "the subject key secret") from exc
    try:
        return user_id_for_subject(subject, issuer=issuer, key=key)
    except S3MemoryError as exc:  # a subject-key secret under 16 bytes
        raise Refusal(500, "misconfigured", "the service is misconfigured", error_type=type(exc).__name__) from exc


def conversation(parsed: Any) -> list[dict[str, Any]]:
    """The messages to send, from a body ``{"prompt": str}`` or ``{"messages": [...]}``."""
    try:
        body = parsed.json_body
    except (ValueError, TypeError, AttributeError):  # not JSON, bad base64, not UTF-8, not a string
        raise Refusal(400, "invalid_json", "the request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise Refusal(400, "invalid_body", 'the request body must be a JSON object: {"prompt": "..."}')
    prompt, messages = body.get("prompt"), body.get("messages")
    if prompt is not None and messages is not None:
        raise Refusal(400, "invalid_body", "send either prompt or messages, not both")
    if messages is not None:
        return checked_messages(messages)
    if not isinstance(prompt, str) or not prompt.strip():
        raise Refusal(400, "invalid_body", "prompt must be a non-empty string")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise Refusal(400, "invalid_body", f"prompt must be at most {MAX_PROMPT_CHARS:,} characters")
    return [{"role": "user", "content": prompt}]


def checked_messages(messages: Any) -> list[dict[str, Any]]:
    """The shape only: the model API checks the rest (and a refusal there is a 400 too)."""
    if not isinstance(messages, list) or not 1 <= len(messages) <= MAX_MESSAGES:
        raise Refusal(400, "invalid_body", f"messages must be a list of 1 to {MAX_MESSAGES} messages")
    for message in messages:
        if (
            not isinstance(message, dict)
            or message.get("role") not in ("user", "assistant")
            or not isinstance(message.get("content"), (str, list))
            or not message["content"]
        ):
            raise Refusal(
                400, "invalid_body", 'each message must be {"role": "user" or "assistant", "content": non-empty}'
            )
    if messages[-1]["role"] != "user":
        raise Refusal(400, "invalid_body", "the last message must be the user's")
    return messages


def aws_refusal(exc: BaseException, code: str, dependency: str) -> Refusal:
    """An STS or Secrets Manager failure: ``code`` (503) if it may pass, else a deployment problem."""
    aws_code = exc.response.get("Error", {}).get("Code", "") if isinstance(exc, ClientError) else ""
    details = {"error_type": type(exc).__name__, "aws_error_code": aws_code, "dependency": dependency}
    # throttled, or unreachable or timed out after botocore's retries
    if aws_code in _THROTTLING or isinstance(exc, (AWSConnectionError, HTTPClientError)):
        return Refusal(503, code, "a service this API needs is unavailable; try again shortly", **details)
    return Refusal(500, "misconfigured", "the service is misconfigured", **details)


def model_refusal(exc: Any) -> Refusal:
    """A Messages API failure (an ``anthropic.APIError``) as an answer to the caller."""
    import anthropic

    details: dict[str, Any] = {"error_type": type(exc).__name__}
    if isinstance(exc, anthropic.APITimeoutError):
        return Refusal(504, "model_timeout", "the model API did not answer in time; try again", **details)
    if isinstance(exc, anthropic.APIConnectionError):
        return Refusal(502, "model_unreachable", "the model API could not be reached", **details)
    if not isinstance(exc, anthropic.APIStatusError):
        return Refusal(502, "model_error", "the model API failed", **details)
    details.update(upstream_status=exc.status_code, upstream_request_id=exc.request_id)
    if exc.status_code in (429, 503, 529):
        code = "model_rate_limited" if exc.status_code == 429 else "model_overloaded"
        retry_after = exc.response.headers.get("retry-after")
        if retry_after and retry_after.isdigit():
            details["retry_after"] = retry_after
        return Refusal(503, code, "the model API is busy; try again shortly", **details)
    if exc.status_code in (400, 413):
        return Refusal(400, "model_rejected_request", "the model API refused this conversation as invalid", **details)
    return Refusal(502, "model_error", "the model API failed", **details)


def answer(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json", **(headers or {})},
        "body": json.dumps(body),
    }


def run_turn(event: Any) -> str:
    claims, parsed = verified_claims(event)
    user_id = user_id_from(claims)
    logger.append_keys(user_id=user_id)  # the mapped id only, never the token's subject
    messages = conversation(parsed)
    try:
        tool = memory_tool_for(user_id)
    except (BotoCoreError, ClientError) as exc:
        raise aws_refusal(exc, "memory_unavailable", "the memory role") from exc
    except S3MemoryError as exc:  # a bad bucket name, KMS key id or role ARN
        raise Refusal(500, "misconfigured", "the service is misconfigured", error_type=type(exc).__name__) from exc
    import anthropic

    try:
        client = anthropic_client()
    except (BotoCoreError, ClientError) as exc:
        raise aws_refusal(exc, "model_unavailable", "the API key secret") from exc
    except anthropic.AnthropicError as exc:  # no API key
        raise Refusal(500, "misconfigured", "the service is misconfigured", error_type=type(exc).__name__) from exc
    try:
        # The mounts' names, access and instructions, for the model (the tool's schema is fixed).
        mounts = shared_stores()
        stores = memory_stores_prompt(mounts, own_description="What you have learned about this user.")
        runner = client.beta.messages.tool_runner(
            model=os.environ.get("ANTHROPIC_MODEL", DEFAULT_MODEL),
            max_tokens=2048,
            **({"system": stores} if mounts else {}),
            tools=[tool, tool.search_tool()],
            messages=messages,
            betas=["context-management-2025-06-27"],
            context_management=CONTEXT_MANAGEMENT,
        )
        final = runner.until_done()
    except anthropic.APIError as exc:
        raise model_refusal(exc) from exc
    return "".join(block.text for block in final.content if block.type == "text")


@logger.inject_lambda_context(log_event=False, correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True)
@metrics.log_metrics
def handler(event: Any, context: Any) -> dict[str, Any]:
    global _TURN_DEADLINE
    remaining = context.get_remaining_time_in_millis() / 1000 - ANSWER_MARGIN_SECONDS
    _TURN_DEADLINE = time.monotonic() + min(TURN_SECONDS, remaining)
    try:
        reply = run_turn(event)
    except Refusal as refusal:
        outcome, response = refusal.code, refuse(refusal)
    except Exception as exc:  # a bug: one line for the log, never a traceback to the caller
        where = traceback.extract_tb(exc.__traceback__)[-1]  # where, not the message: it may hold content
        outcome = "internal_error"
        fields = {
            "error": outcome,
            "status": 500,
            "error_type": type(exc).__name__,
            "at": f"{where.name}:{where.lineno}",
        }
        logger.error("request failed", extra=fields)
        response = answer(500, {"error": {"code": outcome, "message": "the service failed unexpectedly"}})
    else:
        outcome, response = "ok", answer(200, {"reply": reply})
        logger.info("turn completed")
    metrics.add_dimension(name="Outcome", value=outcome)
    metrics.add_metric(name="Requests", unit=MetricUnit.Count, value=1)
    return response


def refuse(refusal: Refusal) -> dict[str, Any]:
    fields = {"error": refusal.code, "status": refusal.status, **refusal.details}
    if refusal.status >= 500:
        logger.error("request failed", extra=fields)
    else:
        logger.warning("request refused", extra=fields)
    headers = {"Retry-After": refusal.details["retry_after"]} if "retry_after" in refusal.details else None
    return answer(refusal.status, {"error": {"code": refusal.code, "message": refusal.message}}, headers)
