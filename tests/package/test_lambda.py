"""The AWS Lambda example (examples/lambda): its handler, its template and its build.

The handler runs against moto (S3, KMS, STS, Secrets Manager) and a fake Messages endpoint
(httpx2.MockTransport); the template is checked as SAM transforms it (aws-sam-translator)
and with cfn-lint; the package is built the way ``sam build`` builds it (the Makefile,
from a scratch copy) and imported by a fresh interpreter that sees nothing else.
"""

from __future__ import annotations

import base64
import copy
import importlib.util
import io
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from helpers import BUCKET, REGION, REPO

from s3memory import S3MemoryError
from s3memory._identity import user_id_for_subject

LAMBDA_DIR = REPO / "examples" / "lambda"
TEMPLATE = LAMBDA_DIR / "template.json"
MEMORY_ROLE_ARN = "arn:aws:iam::123456789012:role/s3memory-memory"
SERVICE = "s3memory-agent"
ISSUER = "https://example.auth0.com/"
SUBJECT = "auth0|abc123"  # refused as a user id: "|" is not allowed
PROMPT = "I prefer green tea, remember it"


def load_handler() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_lambda_handler", LAMBDA_DIR / "handler.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class FakeContext:
    """What Powertools reads from a LambdaContext."""

    function_name: str = "AgentFunction"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:AgentFunction"
    aws_request_id: str = "c0ffee00-0000-4000-8000-000000000000"
    remaining_ms: int = 30_000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def v2_event(claims: dict[str, Any] | None, body: Any, *, encode: bool = False) -> dict[str, Any]:
    """An HTTP API (payload 2.0) event, as API Gateway sends it after its JWT authorizer."""
    context: dict[str, Any] = {
        "accountId": "123456789012",
        "apiId": "api",
        "http": {"method": "POST", "path": "/chat", "protocol": "HTTP/1.1", "sourceIp": "192.0.2.1", "userAgent": "t"},
        "requestId": "req-v2",
        "routeKey": "POST /chat",
        "stage": "$default",
    }
    if claims is not None:
        context["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
    if encode and isinstance(body, str):
        body = base64.b64encode(body.encode()).decode()
    return {
        "version": "2.0",
        "routeKey": "POST /chat",
        "rawPath": "/chat",
        "rawQueryString": "",
        "headers": {"content-type": "application/json"},
        "requestContext": context,
        "body": body,
        "isBase64Encoded": encode,
    }


def v1_event(claims: dict[str, Any] | None, body: Any) -> dict[str, Any]:
    """A REST API (payload 1.0) event with a Cognito user pool authorizer."""
    context: dict[str, Any] = {"requestId": "req-v1", "resourcePath": "/chat", "httpMethod": "POST", "stage": "prod"}
    if claims is not None:
        context["authorizer"] = {"claims": claims}
    return {
        "resource": "/chat",
        "path": "/chat",
        "httpMethod": "POST",
        "headers": {"Content-Type": "application/json"},
        "requestContext": context,
        "body": body,
        "isBase64Encoded": False,
    }


def message(content: list[dict[str, Any]]) -> dict[str, Any]:
    stop = "tool_use" if content[0]["type"] == "tool_use" else "end_turn"
    return {
        "id": "msg",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


SAVE_THEN_REPLY = [
    [
        {
            "type": "tool_use",
            "id": "t1",
            "name": "memory",
            "input": {"command": "create", "path": "/memories/prefs.md", "file_text": "green tea\n"},
        }
    ],
    [{"type": "text", "text": "Saved."}],
]


@dataclass
class FakeMessagesAPI:
    """The Messages endpoint: each request gets the next scripted answer, which is an
    assistant content list, an ``(status, error_type, headers)`` error, or an exception."""

    script: list[Any] = field(default_factory=lambda: list(SAVE_THEN_REPLY))
    requests: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, request: Any) -> Any:
        import httpx2

        self.requests.append(json.loads(request.content))
        answer = self.script[len(self.requests) - 1]
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, tuple):
            status, error_type, headers = answer
            body = {"type": "error", "error": {"type": error_type, "message": "upstream-detail-never-shown"}}
            return httpx2.Response(status, json=body, headers={"request-id": "req_upstream", **headers})
        return httpx2.Response(200, json=message(answer))


@dataclass
class Lambda:
    handler: ModuleType
    api: FakeMessagesAPI
    s3: Any
    log: io.StringIO  # what Powertools writes: the function's CloudWatch log
    assumed: list[dict[str, Any]]

    def invoke(self, event: Any, context: FakeContext | None = None) -> tuple[int, dict[str, Any], dict[str, str]]:
        response = self.handler.handler(event, context or FakeContext())
        assert set(response) == {"statusCode", "headers", "body"}
        assert response["headers"]["Content-Type"] == "application/json"
        return response["statusCode"], json.loads(response["body"]), response["headers"]

    def records(self) -> list[dict[str, Any]]:
        """The log records, as the JSON lines Powertools writes."""
        return [json.loads(line) for line in self.log.getvalue().splitlines()]

    def keys(self) -> list[str]:
        return sorted(o["Key"] for o in self.s3.list_objects_v2(Bucket=BUCKET).get("Contents", []))


def record_assume_role(handler: ModuleType) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        calls.append(dict(params))

    handler.sts().meta.events.register("before-parameter-build.sts.AssumeRole", record)
    return calls


@pytest.fixture
def make_lambda(aws: None, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Lambda]:
    """``make_lambda(script=..., with_role=True)``: the handler with a bucket, a KMS key, the
    memory role and a fake Messages API (the SDK does not retry, so errors come at once)."""
    import boto3
    import httpx2
    from anthropic import Anthropic

    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=BUCKET)
    key_arn = boto3.client("kms", region_name=REGION).create_key()["KeyMetadata"]["Arn"]
    monkeypatch.setenv("MEMORY_BUCKET", BUCKET)
    monkeypatch.setenv("MEMORY_KMS_KEY_ID", key_arn)
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY_SECRET_ARN", "S3MEMORY_SUBJECT_KEY_SECRET_ARN"):
        monkeypatch.delenv(name, raising=False)

    def make(script: list[Any] | None = None, *, with_role: bool = True) -> Lambda:
        if with_role:
            monkeypatch.setenv("MEMORY_ROLE_ARN", MEMORY_ROLE_ARN)
        else:
            monkeypatch.delenv("MEMORY_ROLE_ARN", raising=False)
        handler = load_handler()
        # Powertools' JSON handler (one per process, made by the first Logger) writes here now;
        # not setStream, which would flush the stream of an earlier test, closed by now.
        log = io.StringIO()
        logging.getLogger(SERVICE).powertools_handler.stream = log  # type: ignore[attr-defined]
        api = FakeMessagesAPI() if script is None else FakeMessagesAPI(script=script)
        http = handler.model_http_client(httpx2.MockTransport(api))  # with the turn's deadline
        handler._ANTHROPIC = Anthropic(api_key="k", http_client=http, max_retries=handler.MODEL_MAX_RETRIES)
        return Lambda(handler, api, s3, log, record_assume_role(handler))

    return make


def assert_logs_reveal_nothing(lam: Lambda, capsys: pytest.CaptureFixture[str], *secrets: str) -> None:
    text = lam.log.getvalue() + capsys.readouterr().out
    for secret in (SUBJECT, "abc123", PROMPT, "green tea", "prefs.md", "upstream-detail-never-shown", *secrets):
        assert secret not in text


# --- the handler ---------------------------------------------------------------------


def test_a_shared_read_only_store_is_mounted_and_searchable(
    make_lambda: Callable[..., Lambda], monkeypatch: pytest.MonkeyPatch
) -> None:
    """MEMORY_MOUNTS: the shared store under /memories/standards/, named in the system
    prompt, searched with memory_search, and refused for writing."""
    import os

    from s3memory import open_memory

    mounts = [{"name": "standards", "user_id": "standards", "description": "House style."}]
    monkeypatch.setenv("MEMORY_MOUNTS", json.dumps(mounts))
    script = [
        [{"type": "tool_use", "id": "s1", "name": "memory_search", "input": {"query": "oxford comma"}}],
        [
            {
                "type": "tool_use",
                "id": "c1",
                "name": "memory",
                "input": {"command": "create", "path": "/memories/standards/x.md", "file_text": "x"},
            }
        ],
        [{"type": "text", "text": "Use it."}],
    ]
    lam = make_lambda(script, with_role=False)
    writer = open_memory(
        user_id="standards", bucket=BUCKET, s3_client=lam.s3, kms_key_id=os.environ["MEMORY_KMS_KEY_ID"]
    )
    writer.create("/memories/style.md", "Always use the Oxford comma.\n")
    event = v2_event({"sub": SUBJECT, "iss": ISSUER}, json.dumps({"prompt": "Comma rules?"}))
    assert lam.invoke(event)[:2] == (200, {"reply": "Use it."})
    first = lam.api.requests[0]
    assert [tool["name"] for tool in first["tools"]] == ["memory", "memory_search"]
    assert 'path="/memories/standards/" access="read_only" name="standards"' in first["system"]

    def text(block: dict[str, Any]) -> str:
        content = block["content"]
        return content if isinstance(content, str) else "".join(part["text"] for part in content)

    searched = lam.api.requests[1]["messages"][-1]["content"][0]
    assert text(searched).splitlines()[1:] == [
        "/memories/standards/style.md",
        "     1\tAlways use the Oxford comma.",
    ]
    refused = lam.api.requests[2]["messages"][-1]["content"][0]
    assert refused["is_error"] is True
    assert text(refused) == "Error: Cannot create /memories/standards/x.md: /memories/standards is mounted read-only"
    assert not [key for key in lam.keys() if key.startswith("standards/memories/x")]


@pytest.mark.parametrize("with_role", [True, False], ids=["memory-role", "own-credentials"])
def test_http_api_event_runs_an_agent_turn_for_the_verified_user(
    make_lambda: Callable[..., Lambda], capsys: pytest.CaptureFixture[str], with_role: bool
) -> None:
    """A v2 (HTTP API JWT) event: the memory lands under the user id mapped from the token's
    issuer and subject, through a session of the memory role tagged with that id."""
    lam = make_lambda(with_role=with_role)
    event = v2_event({"sub": SUBJECT, "iss": ISSUER, "aud": "client"}, json.dumps({"prompt": PROMPT}))
    assert lam.invoke(event) == (200, {"reply": "Saved."}, {"Content-Type": "application/json"})
    user = user_id_for_subject(SUBJECT, issuer=ISSUER)
    assert lam.keys() == [f"{user}/.s3memory/tenant-key", f"{user}/memories/prefs.md"]
    # context editing is on, and never clears the memory tool's results; the model is ANTHROPIC_MODEL's default
    first = lam.api.requests[0]
    assert first["model"] == "claude-sonnet-5-5"
    assert first["messages"] == [{"role": "user", "content": PROMPT}]
    edits = first["context_management"]["edits"]
    assert edits[0]["type"] == "clear_tool_uses_20250919" and edits[0]["exclude_tools"] == ["memory"]
    if with_role:
        assert lam.assumed == [
            {
                "RoleArn": MEMORY_ROLE_ARN,
                "RoleSessionName": f"s3memory-{user}",
                "DurationSeconds": 900,
                "Tags": [{"Key": "s3memory-user", "Value": user}],
            }
        ]
    else:
        assert lam.assumed == []
    (record,) = lam.records()
    assert (record["level"], record["message"], record["user_id"]) == ("INFO", "turn completed", user)
    assert record["correlation_id"] == "req-v2"
    assert_logs_reveal_nothing(lam, capsys)


def test_rest_api_cognito_event_runs_an_agent_turn(
    make_lambda: Callable[..., Lambda], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A v1 (REST API, Cognito authorizer) event: ``claims.sub``; ANTHROPIC_MODEL picks the model."""
    monkeypatch.setenv("ANTHROPIC_MODEL", "claude-test-model")
    lam = make_lambda()
    sub, iss = "8f1c6a2e-5b1d-4f3a-9c3e-1a2b3c4d5e6f", "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Pool"
    status, body, _ = lam.invoke(v1_event({"sub": sub, "iss": iss, "token_use": "id"}, json.dumps({"prompt": PROMPT})))
    assert (status, body) == (200, {"reply": "Saved."})
    assert f"{user_id_for_subject(sub, issuer=iss)}/memories/prefs.md" in lam.keys()
    assert lam.api.requests[0]["model"] == "claude-test-model"


def test_base64_body_and_a_conversation_are_accepted(make_lambda: Callable[..., Lambda]) -> None:
    lam = make_lambda(script=[[{"type": "text", "text": "Hello again."}]])
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": [{"type": "text", "text": "again"}]},
    ]
    event = v2_event({"sub": "s", "iss": ISSUER}, json.dumps({"messages": messages}), encode=True)
    assert lam.invoke(event)[:2] == (200, {"reply": "Hello again."})
    assert lam.api.requests[0]["messages"] == messages


def test_a_keyed_subject_map_reads_its_key_from_secrets_manager(
    make_lambda: Callable[..., Lambda], monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3

    secret = "k" * 44
    arn = boto3.client("secretsmanager", region_name=REGION).create_secret(Name="subject-key", SecretString=secret)
    monkeypatch.setenv("S3MEMORY_SUBJECT_KEY_SECRET_ARN", arn["ARN"])
    lam = make_lambda()
    event = v2_event({"sub": SUBJECT, "iss": ISSUER}, json.dumps({"prompt": PROMPT}))
    assert lam.invoke(event)[0] == 200
    keyed = user_id_for_subject(SUBJECT, issuer=ISSUER, key=secret.encode())
    assert keyed != user_id_for_subject(SUBJECT, issuer=ISSUER)
    assert lam.keys() == [f"{keyed}/.s3memory/tenant-key", f"{keyed}/memories/prefs.md"]


def test_distinct_issuers_never_share_a_memory(make_lambda: Callable[..., Lambda]) -> None:
    lam = make_lambda(script=[*SAVE_THEN_REPLY, *SAVE_THEN_REPLY])
    for issuer in (ISSUER, "https://other.example/"):
        assert lam.invoke(v2_event({"sub": "42", "iss": issuer}, json.dumps({"prompt": PROMPT})))[0] == 200
    assert len({key.split("/")[0] for key in lam.keys()}) == 2


def refusal(status: int, code: str) -> Callable[[tuple[int, dict[str, Any], dict[str, str]]], None]:
    def check(result: tuple[int, dict[str, Any], dict[str, str]]) -> None:
        got_status, body, _ = result
        assert (got_status, body["error"]["code"]) == (status, code)
        assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}
        assert "Traceback" not in body["error"]["message"]

    return check


def assert_logged_once(lam: Lambda, code: str, status: int) -> dict[str, Any]:
    (record,) = lam.records()
    assert record["level"] == ("ERROR" if status >= 500 else "WARNING")
    assert (record["error"], record["status"]) == (code, status)
    assert "exception" not in record  # no traceback, whose messages could hold content
    return record


CLAIMS = {"sub": SUBJECT, "iss": ISSUER}
GOOD_BODY = json.dumps({"prompt": PROMPT})
NO_IDENTITY = {
    "no authorizer (v2)": v2_event(None, GOOD_BODY),
    "no authorizer (v1)": v1_event(None, GOOD_BODY),
    "authorizer without jwt (v2)": {**v2_event(None, GOOD_BODY), "requestContext": {"authorizer": {"lambda": {}}}},
    "jwt without claims (v2)": {**v2_event(None, GOOD_BODY), "requestContext": {"authorizer": {"jwt": {}}}},
    "claims are null (v1)": v1_event(None, GOOD_BODY) | {"requestContext": {"authorizer": {"claims": None}}},
    "authorizer not an object (v2)": {**v2_event(None, GOOD_BODY), "requestContext": {"authorizer": "x"}},
    "claims without sub (v2)": v2_event({"iss": ISSUER}, GOOD_BODY),
    "claims without sub (v1)": v1_event({"iss": ISSUER, "email": "a@example.com"}, GOOD_BODY),
    "empty sub": v2_event({"sub": "", "iss": ISSUER}, GOOD_BODY),
    "sub not a string": v2_event({"sub": 42, "iss": ISSUER}, GOOD_BODY),
    "iss not a string": v1_event({"sub": "s", "iss": ["x"]}, GOOD_BODY),
    "no requestContext": {"body": GOOD_BODY},
    "not an API Gateway event": ["not", "an", "event"],
    "a string": "hello",
}


@pytest.mark.slow  # a matrix of 14 cold handlers
@pytest.mark.parametrize("event", NO_IDENTITY.values(), ids=NO_IDENTITY.keys())
def test_a_request_without_a_verified_identity_is_401(
    make_lambda: Callable[..., Lambda], capsys: pytest.CaptureFixture[str], event: Any
) -> None:
    lam = make_lambda()
    result = lam.invoke(event)
    refusal(401, "unauthenticated")(result)
    assert lam.api.requests == [] and lam.assumed == [] and lam.keys() == []
    assert "user_id" not in assert_logged_once(lam, "unauthenticated", 401)
    assert_logs_reveal_nothing(lam, capsys)


BAD_BODIES: dict[str, tuple[Any, str, str]] = {
    "not JSON": ("I prefer green tea", "invalid_json", "not valid JSON"),
    "truncated JSON": ('{"prompt": "green tea', "invalid_json", "not valid JSON"),
    "no body": (None, "invalid_body", "JSON object"),
    "empty body": ("", "invalid_body", "JSON object"),
    "a JSON list": ('["green tea"]', "invalid_body", "JSON object"),
    "a JSON string": ('"green tea"', "invalid_body", "JSON object"),
    "JSON null": ("null", "invalid_body", "JSON object"),
    "no prompt": ("{}", "invalid_body", "prompt must be a non-empty string"),
    "null prompt": ('{"prompt": null}', "invalid_body", "prompt must be a non-empty string"),
    "empty prompt": ('{"prompt": ""}', "invalid_body", "prompt must be a non-empty string"),
    "blank prompt": ('{"prompt": " \\n\\t"}', "invalid_body", "prompt must be a non-empty string"),
    "numeric prompt": ('{"prompt": 42}', "invalid_body", "prompt must be a non-empty string"),
    "object prompt": ('{"prompt": {"text": "green tea"}}', "invalid_body", "prompt must be a non-empty string"),
    "huge prompt": (json.dumps({"prompt": "x" * 100_001}), "invalid_body", "at most 100,000 characters"),
    "prompt and messages": (
        json.dumps({"prompt": "green tea", "messages": [{"role": "user", "content": "x"}]}),
        "invalid_body",
        "either prompt or messages",
    ),
    "messages not a list": ('{"messages": "green tea"}', "invalid_body", "messages must be a list"),
    "no messages": ('{"messages": []}', "invalid_body", "messages must be a list"),
    "a message not an object": ('{"messages": ["green tea"]}', "invalid_body", "each message"),
    "a system message": ('{"messages": [{"role": "system", "content": "x"}]}', "invalid_body", "each message"),
    "empty content": ('{"messages": [{"role": "user", "content": ""}]}', "invalid_body", "each message"),
    "numeric content": ('{"messages": [{"role": "user", "content": 1}]}', "invalid_body", "each message"),
    "ends with the assistant": (
        '{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}',
        "invalid_body",
        "last message",
    ),
}


@pytest.mark.slow  # a matrix of 44 cold handlers
@pytest.mark.parametrize(("body", "code", "words"), BAD_BODIES.values(), ids=BAD_BODIES.keys())
@pytest.mark.parametrize("make_event", [v2_event, v1_event], ids=["v2", "v1"])
def test_a_bad_body_is_400(
    make_lambda: Callable[..., Lambda],
    capsys: pytest.CaptureFixture[str],
    make_event: Callable[..., dict[str, Any]],
    body: Any,
    code: str,
    words: str,
) -> None:
    lam = make_lambda()
    result = lam.invoke(make_event(CLAIMS, body))
    refusal(400, code)(result)
    assert words in result[1]["error"]["message"]
    assert lam.api.requests == [] and lam.keys() == []
    record = assert_logged_once(lam, code, 400)
    assert record["user_id"] == user_id_for_subject(SUBJECT, issuer=ISSUER)
    assert_logs_reveal_nothing(lam, capsys)


@pytest.mark.parametrize(
    "body",
    [
        {**v2_event(CLAIMS, "not base64!"), "isBase64Encoded": True},
        {**v2_event(CLAIMS, base64.b64encode(b"\xff\xfe{").decode()), "isBase64Encoded": True},
        {**v2_event(CLAIMS, None), "body": {"prompt": "an object, not a string"}},
    ],
    ids=["bad base64", "not UTF-8", "not a string"],
)
def test_an_undecodable_body_is_400(make_lambda: Callable[..., Lambda], body: dict[str, Any]) -> None:
    lam = make_lambda()
    refusal(400, "invalid_json")(lam.invoke(body))
    assert_logged_once(lam, "invalid_json", 400)


def api_error(status: int, error_type: str, **headers: str) -> tuple[int, str, dict[str, str]]:
    return (status, error_type, headers)


MODEL_FAILURES: dict[str, tuple[Any, int, str]] = {
    "overloaded (529)": (api_error(529, "overloaded_error"), 503, "model_overloaded"),
    "rate limited (429)": (api_error(429, "rate_limit_error", **{"retry-after": "7"}), 503, "model_rate_limited"),
    "unavailable (503)": (api_error(503, "api_error"), 503, "model_overloaded"),
    "internal error (500)": (api_error(500, "api_error"), 502, "model_error"),
    "bad API key (401)": (api_error(401, "authentication_error"), 502, "model_error"),
    "no such model (404)": (api_error(404, "not_found_error"), 502, "model_error"),
    "invalid request (400)": (api_error(400, "invalid_request_error"), 400, "model_rejected_request"),
    "too large (413)": (api_error(413, "request_too_large"), 400, "model_rejected_request"),
    "connection refused": ("connect", 502, "model_unreachable"),
    "timed out": ("timeout", 504, "model_timeout"),
}


@pytest.mark.slow  # a matrix of 20 cold handlers
@pytest.mark.parametrize(("failure", "status", "code"), MODEL_FAILURES.values(), ids=MODEL_FAILURES.keys())
@pytest.mark.parametrize("on_turn", [0, 1], ids=["first-request", "after-a-tool-call"])
def test_a_model_api_failure_is_a_clear_error(
    make_lambda: Callable[..., Lambda],
    capsys: pytest.CaptureFixture[str],
    failure: Any,
    status: int,
    code: str,
    on_turn: int,
) -> None:
    import httpx2

    if failure == "connect":
        failure = httpx2.ConnectError("connection refused")
    elif failure == "timeout":
        failure = httpx2.ReadTimeout("timed out")
    lam = make_lambda(script=[*SAVE_THEN_REPLY[:on_turn], failure])
    result = lam.invoke(v2_event(CLAIMS, GOOD_BODY))
    refusal(status, code)(result)
    record = assert_logged_once(lam, code, status)
    if isinstance(failure, tuple):
        assert (record["upstream_status"], record["upstream_request_id"]) == (failure[0], "req_upstream")
    assert result[2].get("Retry-After") == ("7" if code == "model_rate_limited" else None)
    assert_logs_reveal_nothing(lam, capsys)


def throttled() -> Exception:
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}, "AssumeRole")


def unreachable() -> Exception:
    from botocore.exceptions import EndpointConnectionError

    return EndpointConnectionError(endpoint_url="https://sts.us-east-1.amazonaws.com")


def read_timeout() -> Exception:
    from botocore.exceptions import ReadTimeoutError

    return ReadTimeoutError(endpoint_url="https://sts.us-east-1.amazonaws.com")


def denied() -> Exception:
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": "AccessDenied", "Message": "not authorized"}}, "AssumeRole")


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (throttled, 503, "memory_unavailable"),
        (unreachable, 503, "memory_unavailable"),
        (read_timeout, 503, "memory_unavailable"),
        (denied, 500, "misconfigured"),
    ],
    ids=["throttled", "unreachable", "timed-out", "access-denied"],
)
def test_memory_role_failures_are_503_when_they_may_pass(
    make_lambda: Callable[..., Lambda],
    monkeypatch: pytest.MonkeyPatch,
    error: Callable[[], Exception],
    status: int,
    code: str,
) -> None:
    lam = make_lambda()

    def assume_role(**_: Any) -> Any:
        raise error()

    monkeypatch.setattr(lam.handler.sts(), "assume_role", assume_role)
    refusal(status, code)(lam.invoke(v2_event(CLAIMS, GOOD_BODY)))
    assert lam.api.requests == []
    assert assert_logged_once(lam, code, status)["dependency"] == "the memory role"


def test_a_missing_api_key_secret_is_a_deployment_problem(
    make_lambda: Callable[..., Lambda], monkeypatch: pytest.MonkeyPatch
) -> None:
    lam = make_lambda()
    lam.handler._ANTHROPIC = None
    monkeypatch.setenv("ANTHROPIC_API_KEY_SECRET_ARN", "arn:aws:secretsmanager:us-east-1:123456789012:secret:gone")
    refusal(500, "misconfigured")(lam.invoke(v2_event(CLAIMS, GOOD_BODY)))
    record = assert_logged_once(lam, "misconfigured", 500)
    assert record["aws_error_code"] == "ResourceNotFoundException"


def test_a_throttled_subject_key_secret_is_503(
    make_lambda: Callable[..., Lambda], monkeypatch: pytest.MonkeyPatch
) -> None:
    lam = make_lambda()
    monkeypatch.setenv("S3MEMORY_SUBJECT_KEY_SECRET_ARN", "arn:aws:secretsmanager:us-east-1:123456789012:secret:k")

    def get_secret_value(**_: Any) -> Any:
        raise throttled()

    monkeypatch.setattr(lam.handler.secrets(), "get_secret_value", get_secret_value)
    refusal(503, "memory_unavailable")(lam.invoke(v2_event(CLAIMS, GOOD_BODY)))
    assert lam.keys() == [] and lam.api.requests == []
    assert_logged_once(lam, "memory_unavailable", 503)


def test_a_short_subject_key_is_a_deployment_problem(
    make_lambda: Callable[..., Lambda], monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3

    arn = boto3.client("secretsmanager", region_name=REGION).create_secret(Name="short", SecretString="short")["ARN"]
    monkeypatch.setenv("S3MEMORY_SUBJECT_KEY_SECRET_ARN", arn)
    lam = make_lambda()
    refusal(500, "misconfigured")(lam.invoke(v2_event(CLAIMS, GOOD_BODY)))
    assert_logged_once(lam, "misconfigured", 500)


@pytest.mark.parametrize(
    "mounts", ["not json", '{"name": "x"}', '[{"name": "Bad Name", "user_id": "s"}]', '[{"name": "s"}]']
)
def test_bad_memory_mounts_are_a_deployment_problem(
    make_lambda: Callable[..., Lambda], monkeypatch: pytest.MonkeyPatch, mounts: str
) -> None:
    monkeypatch.setenv("MEMORY_MOUNTS", mounts)
    lam = make_lambda()  # the module loads: a bad setting is no cold-start crash
    refusal(500, "misconfigured")(lam.invoke(v2_event(CLAIMS, GOOD_BODY)))
    record = assert_logged_once(lam, "misconfigured", 500)
    assert record["error_type"] == "ConfigurationError"


def test_a_bug_is_500_with_one_log_line_and_no_detail(
    make_lambda: Callable[..., Lambda], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lam = make_lambda()

    def broken(user_id: str) -> Any:
        raise RuntimeError("a message holding /memories/prefs.md and green tea")

    monkeypatch.setattr(lam.handler, "memory_tool_for", broken)
    status, body, _ = lam.invoke(v2_event(CLAIMS, GOOD_BODY))
    assert (status, body) == (500, {"error": {"code": "internal_error", "message": "the service failed unexpectedly"}})
    record = assert_logged_once(lam, "internal_error", 500)
    assert record["error_type"] == "RuntimeError" and record["at"].startswith("broken:")
    assert_logs_reveal_nothing(lam, capsys)


def test_each_request_emits_one_metric_by_outcome(
    make_lambda: Callable[..., Lambda], capsys: pytest.CaptureFixture[str]
) -> None:
    lam = make_lambda(script=[api_error(529, "overloaded_error")])
    lam.invoke(v2_event(CLAIMS, GOOD_BODY))
    lam.invoke(v2_event(None, GOOD_BODY))
    blobs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert [(b["Outcome"], b["Requests"]) for b in blobs] == [("model_overloaded", [1.0]), ("unauthenticated", [1.0])]
    assert all(b["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "s3memory" for b in blobs)


def test_clients_have_lambda_sized_timeouts(
    make_lambda: Callable[..., Lambda], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each client is made on first use, then kept: the function's own S3 and KMS clients
    (s3memory's), STS and Secrets Manager (boto3's), and each user's scoped S3 and KMS."""
    lam = make_lambda()
    handler = lam.handler
    scoped = handler.clients_for("alice")
    clients = [*handler.own_clients(), handler.sts(), handler.secrets(), *scoped]
    for client in clients:
        config = client.meta.config  # an awscrt-wrapped S3 client forwards meta to botocore's
        assert (config.connect_timeout, config.read_timeout) == (2, 5)
        assert config.retries == {"mode": "standard", "total_max_attempts": 3}
    assert [*handler.own_clients(), handler.sts(), handler.secrets(), *handler.clients_for("alice")] == clients
    assert len(lam.assumed) == 1
    # the Messages API client: built once, key from the environment or Secrets Manager
    lam.handler._ANTHROPIC = None
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    client = lam.handler.anthropic_client()
    assert (client.api_key, client.timeout, client.max_retries) == ("sk-test", 25.0, 0)
    assert lam.handler.anthropic_client() is client


def test_the_api_key_is_read_from_secrets_manager_once(
    make_lambda: Callable[..., Lambda], monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3

    arn = boto3.client("secretsmanager", region_name=REGION).create_secret(Name="k", SecretString="sk-secret")["ARN"]
    monkeypatch.setenv("ANTHROPIC_API_KEY_SECRET_ARN", arn)
    lam = make_lambda()
    lam.handler._ANTHROPIC = None
    calls: list[str] = []
    lam.handler.secrets().meta.events.register(
        "before-call.secrets-manager.GetSecretValue", lambda **_: calls.append("x")
    )
    assert lam.handler.anthropic_client().api_key == "sk-secret"
    lam.handler.anthropic_client()
    assert calls == ["x"]


def test_a_warm_invocation_reuses_the_clients_and_the_tenant_key(make_lambda: Callable[..., Lambda]) -> None:
    """The second turn of a warm container, for the same user: no AssumeRole, no KMS call
    (the tenant key is in the shared KeyCache), and the same clients."""
    lam = make_lambda(script=[*SAVE_THEN_REPLY, [{"type": "text", "text": "Still here."}]])
    s3, kms = lam.handler.clients_for(user_id_for_subject(SUBJECT, issuer=ISSUER))  # what the turns will use
    kms_calls: list[str] = []
    kms.meta.events.register("before-call.kms", lambda model, **_: kms_calls.append(model.name))
    assert lam.invoke(v2_event(CLAIMS, GOOD_BODY))[0] == 200
    first = list(kms_calls)
    assert first  # the new tenant's key, wrapped by KMS
    assert lam.invoke(v2_event(CLAIMS, GOOD_BODY))[:2] == (200, {"reply": "Still here."})
    assert kms_calls == first and len(lam.assumed) == 1
    assert lam.handler.clients_for(user_id_for_subject(SUBJECT, issuer=ISSUER)) == (s3, kms)


def test_one_scoped_session_is_cached_per_user(
    make_lambda: Callable[..., Lambda], monkeypatch: pytest.MonkeyPatch
) -> None:
    lam = make_lambda()
    handler, assumed = lam.handler, lam.assumed
    alice_s3, alice_kms = handler.clients_for("alice")
    assert handler.clients_for("alice") == (alice_s3, alice_kms)  # warm: no second AssumeRole
    bob_s3, _ = handler.clients_for("bob")
    assert [call["Tags"] for call in assumed] == [
        [{"Key": "s3memory-user", "Value": "alice"}],
        [{"Key": "s3memory-user", "Value": "bob"}],
    ]
    own = handler.own_clients()[0]._get_credentials().access_key
    assert len({own, alice_s3._get_credentials().access_key, bob_s3._get_credentials().access_key}) == 3
    assert alice_kms._get_credentials().access_key == alice_s3._get_credentials().access_key
    tools = [handler.memory_tool_for("alice"), handler.memory_tool_for("bob")]
    assert len(assumed) == 2 and all(tool is not None for tool in tools)
    monkeypatch.setattr(handler, "SCOPED_TTL_SECONDS", 0)  # sessions expire: assumed again
    handler._SCOPED.clear()
    handler.clients_for("alice")
    handler.clients_for("alice")
    assert len(assumed) == 4
    monkeypatch.setattr(handler, "SCOPED_TTL_SECONDS", 600)
    monkeypatch.setattr(handler, "MAX_SCOPED_USERS", 2)
    for user in ("u1", "u2", "u3"):
        handler.clients_for(user)
    assert list(handler._SCOPED) == ["u2", "u3"]  # bounded, least recently used first out
    with pytest.raises(S3MemoryError):
        handler.clients_for("../bob")  # a user id that could leave the prefix never reaches STS


# --- the template --------------------------------------------------------------------

PARAMETERS = {
    "AnthropicApiKeySecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:anthropic",
    "JwtIssuer": ISSUER,
    "JwtAudience": ["client-id"],
}


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return dict(json.loads(TEMPLATE.read_text()))


def sam_transform(template: dict[str, Any]) -> dict[str, Any]:
    """What CloudFormation deploys: the template through the SAM transform, after
    ``sam package`` has replaced each function's CodeUri by an S3 location."""
    pytest.importorskip("samtranslator", reason="the dev extra installs aws-sam-translator")
    from samtranslator.translator.transform import transform

    packaged = copy.deepcopy(template)
    for resource in packaged["Resources"].values():
        if resource["Type"] == "AWS::Serverless::Function":
            resource["Properties"]["CodeUri"] = "s3://artifacts/package.zip"

    class NoManagedPolicies:
        def load(self) -> dict[str, str]:
            return {}

    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    return dict(transform(packaged, dict(PARAMETERS), NoManagedPolicies()))


def test_the_chat_route_requires_the_jwt_authorizer(template: dict[str, Any]) -> None:
    deployed = sam_transform(template)
    apis = {n: r["Properties"] for n, r in deployed["Resources"].items() if r["Type"] == "AWS::ApiGatewayV2::Api"}
    assert set(apis) == {"ChatApi"}  # an HTTP API, and no other API in front of the function
    assert not [r for r in deployed["Resources"].values() if r["Type"] == "AWS::ApiGatewayV2::Route"]
    openapi = apis["ChatApi"]["Body"]
    operations = [(path, verb, op) for path, ops in openapi["paths"].items() for verb, op in ops.items()]
    # beside /chat, /v1/memory_stores (MemoryStoreApiFunction: tests/serve/test_aws_lambda.py)
    assert ("/chat", "post") in [(path, verb) for path, verb, _ in operations]
    assert all(op["security"] == [{"OidcAuthorizer": []}] for _, _, op in operations)  # no route without a token
    (chat,) = [op for path, verb, op in operations if (path, verb) == ("/chat", "post")]
    assert "${AgentFunction.Arn}" in chat["x-amazon-apigateway-integration"]["uri"]["Fn::Sub"]
    assert chat["x-amazon-apigateway-integration"]["payloadFormatVersion"] == "2.0"  # what the handler reads
    scheme = openapi["components"]["securitySchemes"]["OidcAuthorizer"]["x-amazon-apigateway-authorizer"]
    assert scheme == {
        "type": "jwt",
        "identitySource": "$request.header.Authorization",
        "jwtConfiguration": {"issuer": {"Ref": "JwtIssuer"}, "audience": {"Ref": "JwtAudience"}},
    }
    # issuer and audience are required parameters: no default that would accept someone else's tokens
    assert (
        "Default" not in template["Parameters"]["JwtIssuer"] and "Default" not in template["Parameters"]["JwtAudience"]
    )


@pytest.mark.slow  # cfn-lint and the SAM transform
def test_the_template_passes_cfn_lint_before_and_after_the_sam_transform(template: dict[str, Any]) -> None:
    pytest.importorskip("cfnlint", reason="the dev extra installs cfn-lint")
    from cfnlint.api import ManualArgs, lint

    for document in (template, sam_transform(template)):
        matches = lint(json.dumps(document), config=ManualArgs(regions=[REGION]))
        assert [str(m) for m in matches] == []


@pytest.mark.slow  # cfn-lint
def test_cfn_lint_would_catch_a_broken_template(template: dict[str, Any]) -> None:
    """The lint test can fail: an unknown property and an invalid runtime are reported."""
    pytest.importorskip("cfnlint", reason="the dev extra installs cfn-lint")
    from cfnlint.api import ManualArgs, lint

    broken = copy.deepcopy(template)
    broken["Resources"]["ChatApi"]["Properties"]["Auth"]["Unknown"] = True
    assert lint(json.dumps(broken), config=ManualArgs(regions=[REGION]))
    broken = sam_transform(template)
    broken["Resources"]["AgentFunction"]["Properties"]["Runtime"] = "python2.1"
    assert lint(json.dumps(broken), config=ManualArgs(regions=[REGION]))


def test_the_function_is_configured_as_the_handler_expects(template: dict[str, Any]) -> None:
    function = template["Resources"]["AgentFunction"]
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["ANTHROPIC_MODEL"] == {"Ref": "AnthropicModel"} and "MODEL" not in variables
    assert variables["S3MEMORY_SUBJECT_KEY_SECRET_ARN"] == {"Ref": "SubjectKeySecretArn"}
    assert template["Parameters"]["SubjectKeySecretArn"]["Default"] == ""  # unkeyed unless chosen
    assert function["Metadata"] == {"BuildMethod": "makefile"}
    (event,) = function["Properties"]["Events"].values()
    assert event["Type"] == "HttpApi" and event["Properties"]["Auth"] == {"Authorizer": "OidcAuthorizer"}
    # the function may run as long as API Gateway waits (30 s); the turn's deadline is shorter
    # (see test_the_turn_ends_in_time_to_answer_504_itself)
    assert function["Properties"]["Timeout"] == 30


def makefile_default(name: str) -> str:
    for line in (LAMBDA_DIR / "Makefile").read_text().splitlines():
        if line.startswith(f"{name} ?= "):
            return line.split("?=", 1)[1].strip()
    raise AssertionError(f"{name} has no default in the Makefile")


def test_the_makefile_builds_for_the_template_runtime_and_architecture(template: dict[str, Any]) -> None:
    function = template["Resources"]["AgentFunction"]["Properties"]
    assert function["Runtime"] == "python" + makefile_default("LAMBDA_PYTHON")
    (architecture,) = function["Architectures"]
    machine = {"arm64": "aarch64", "x86_64": "x86_64"}[architecture]
    assert makefile_default("LAMBDA_PLATFORM") == f"manylinux2014_{machine}"


# --- the build -----------------------------------------------------------------------


def sam_build(template_file: Path, logical_id: str, artifacts: Path, scratch: Path, env: dict[str, str]) -> None:
    """Build one function as ``sam build`` does (aws-lambda-builders): copy its CodeUri to a
    scratch directory, then either run the Makefile's ``build-<id>`` target there with
    ARTIFACTS_DIR set (``Metadata: BuildMethod: makefile``), or, for the python-pip
    workflow, take the source and install requirements.txt if there is one."""
    template = json.loads(template_file.read_text())
    resource = template["Resources"][logical_id]
    source = (template_file.parent / resource["Properties"]["CodeUri"]).resolve()
    shutil.copytree(source, scratch, ignore=shutil.ignore_patterns(".aws-sam", ".git"))
    artifacts.mkdir()
    if resource.get("Metadata", {}).get("BuildMethod") == "makefile":
        command = ["make", "--makefile", str(source / "Makefile"), f"build-{logical_id}"]
        subprocess.run(command, cwd=scratch, env={**env, "ARTIFACTS_DIR": str(artifacts)}, check=True, timeout=600)
        return
    shutil.copytree(scratch, artifacts, dirs_exist_ok=True)
    if (scratch / "requirements.txt").exists():
        pip = [sys.executable, "-m", "pip", "install", "-q", "--target", str(artifacts)]
        subprocess.run([*pip, "-r", str(scratch / "requirements.txt")], env=env, check=True, timeout=600)


IMPORT_FROM_BUILD = """
import importlib.util, json, sys
build = sys.argv[1]
sys.path.insert(0, build)
def loaded():
    return sorted({"anthropic", "boto3"} & set(sys.modules))
import handler
class Context:
    function_name, memory_limit_in_mb, aws_request_id = "f", 128, "r"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:f"
    def get_remaining_time_in_millis(self):
        return 30000
response = handler.handler({"version": "2.0", "requestContext": {}}, Context())
cold = loaded()
import anthropic, awscrt, boto3, s3memory, aws_lambda_powertools
for module in (handler, anthropic, awscrt, boto3, s3memory, aws_lambda_powertools):
    assert module.__file__.startswith(build), module.__file__
left_out = ("click", "rich", "pygments", "s3memory.cli")
print(json.dumps({
    "response": response,
    "loaded by a cold refusal": cold,
    "s3 client": s3memory.describe_s3_client(handler.own_clients()[0])[0],
    "left out": [name for name in left_out if importlib.util.find_spec(name) is None],
    "cache tag": sys.implementation.cache_tag,
}))
"""


def lambda_python(env: dict[str, str]) -> str | None:
    """The interpreter the Makefile compiles with (``make lambda-python``), or None."""
    command = ["make", "--silent", "--makefile", str(LAMBDA_DIR / "Makefile"), "lambda-python"]
    found = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    return found.stdout.strip() if found.returncode == 0 else None


def assert_compiled_for(build: Path, cache_tag: str) -> None:
    """Every module has its bytecode for ``cache_tag``, unchecked-hash (never compared with
    its source, whose mtime a zip keeps to 2 s), and there is no other bytecode."""
    sources = list(build.rglob("*.py"))
    assert sources and not [
        p for p in sources if not (p.parent / "__pycache__" / f"{p.stem}.{cache_tag}.pyc").is_file()
    ]
    compiled = list(build.rglob("*.pyc"))
    assert len(compiled) == len(sources) and {p.name.split(".")[-2] for p in compiled} == {cache_tag}
    flags = {int.from_bytes(p.read_bytes()[4:8], "little") for p in compiled}
    assert flags == {0b01}  # PEP 552: hash-based, check_source off


def assert_holds_what_the_function_needs(build: Path) -> None:
    """awscrt (the fast extra) is there; the command line is not: s3memory's, click, and
    rich with its own dependencies."""
    assert (build / "awscrt").is_dir() and (build / "s3memory" / "_identity.py").is_file()
    command_line = ("click", "rich", "pygments", "markdown_it", "mdurl", "bin", "s3memory/cli")
    assert not [name for name in command_line if (build / name).exists()]
    assert not (build / "s3memory" / "__main__.py").exists()


@pytest.mark.slow  # sam build and a subprocess
@pytest.mark.skipif(sys.platform != "linux", reason="the package holds Linux wheels")
@pytest.mark.skipif(shutil.which("make") is None, reason="sam build runs make: install make")
def test_the_package_sam_builds_imports_with_nothing_else_on_the_path(tmp_path: Path) -> None:
    """Built for this interpreter and machine (LAMBDA_PYTHON, LAMBDA_PLATFORM, as a developer
    would to try it locally), the package holds s3memory and every dependency: a fresh
    interpreter without site-packages imports the handler from it and answers a request,
    without loading the Anthropic SDK or boto3 for a refusal; its S3 client goes through
    awscrt."""
    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "LAMBDA_PYTHON": f"{sys.version_info.major}.{sys.version_info.minor}",
        "LAMBDA_PLATFORM": f"manylinux2014_{platform.machine()}",
        "LAMBDA_COMPILER": sys.executable,
    }
    started = time.monotonic()
    sam_build(TEMPLATE, "AgentFunction", tmp_path / "build", tmp_path / "scratch", env)
    print(f"built in {time.monotonic() - started:.1f} s")
    bare = {
        "PATH": os.environ.get("PATH", ""),
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "testing",  # awscrt signs with them; the test sends nothing
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    # -B: nothing written beside the package, as on Lambda's read-only /var/task
    command = [sys.executable, "-I", "-S", "-B", "-c", IMPORT_FROM_BUILD, str(tmp_path / "build")]
    result = subprocess.run(command, cwd=tmp_path, env=bare, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    seen = json.loads(result.stdout.splitlines()[-1])
    response = seen.pop("response")
    assert response["statusCode"] == 401 and json.loads(response["body"])["error"]["code"] == "unauthenticated"
    assert seen == {
        "loaded by a cold refusal": [],
        "s3 client": "awscrt",
        "left out": ["click", "rich", "pygments", "s3memory.cli"],
        "cache tag": sys.implementation.cache_tag,
    }
    assert_compiled_for(tmp_path / "build", sys.implementation.cache_tag)
    assert_holds_what_the_function_needs(tmp_path / "build")


@pytest.mark.slow  # sam build, a subprocess
@pytest.mark.skipif(shutil.which("make") is None, reason="sam build runs make: install make")
def test_the_default_build_targets_the_lambda_runtime(tmp_path: Path, template: dict[str, Any]) -> None:
    """Without overrides, whatever Python runs the build, the wheels are the template's
    runtime and architecture (CPython 3.12 on arm64), and so is the bytecode, compiled by a
    CPython 3.12 of this machine's: what Lambda will load."""
    env = {**os.environ, "PYTHON": sys.executable}
    for name in ("LAMBDA_PYTHON", "LAMBDA_PLATFORM", "LAMBDA_COMPILER"):
        env.pop(name, None)
    python = makefile_default("LAMBDA_PYTHON")
    if lambda_python(env) is None:
        pytest.skip(f"no CPython {python} here to compile the bytecode with (make lambda-python says how)")
    sam_build(TEMPLATE, "AgentFunction", tmp_path / "build", tmp_path / "scratch", env)
    build = tmp_path / "build"
    assert (build / "handler.py").read_text() == (LAMBDA_DIR / "handler.py").read_text()
    extensions = {p.name for p in build.rglob("*.so")}
    tag, machine = "cpython-" + python.replace(".", ""), "aarch64"
    assert extensions and all(f"-{machine}-" in name or ".abi3." in name for name in extensions)
    assert any(f"{tag}-{machine}" in name for name in extensions)  # pydantic-core, for 3.12
    assert_compiled_for(build, tag)  # /var/task is read-only: without it, each cold start compiles
    assert_holds_what_the_function_needs(build)
    assert sum(p.stat().st_size for p in build.rglob("*") if p.is_file()) < 250 * 2**20  # Lambda's unzipped limit


class SlowMessagesAPI(FakeMessagesAPI):
    """Answers after ``delay`` seconds, and records the timeout each request was given."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay
        self.timeouts: list[float] = []

    def __call__(self, request: Any) -> Any:
        self.timeouts.append(request.extensions["timeout"]["read"])
        time.sleep(self.delay)
        return super().__call__(request)


def test_each_model_request_gets_at_most_what_is_left_of_the_turn(make_lambda: Callable[..., Lambda]) -> None:
    lam = make_lambda()
    lam.api = api = SlowMessagesAPI(delay=0.0)
    lam.handler._ANTHROPIC = _client_for(lam, api)
    status, _, _ = lam.invoke(
        v2_event({"sub": SUBJECT, "iss": ISSUER}, json.dumps({"prompt": PROMPT})), FakeContext(remaining_ms=12_000)
    )  # 10 s left for the turn
    assert status == 200 and len(api.timeouts) == 2
    assert all(0 < timeout <= 10 for timeout in api.timeouts)  # not the client's 25 s
    assert api.timeouts[1] <= api.timeouts[0]


# The second case's first request takes the whole turn (2 s): it is sent whatever a loaded
# machine makes of the cold start before it (with 0.4 s left it once was not), and the next
# one never is.
@pytest.mark.slow  # wall clock
@pytest.mark.parametrize(("remaining_ms", "delay", "requests"), [(2_000, 0.0, 0), (4_000, 2.0, 1)])
def test_the_turn_ends_in_time_to_answer_504_itself(
    make_lambda: Callable[..., Lambda], remaining_ms: int, delay: float, requests: int
) -> None:
    """No time left (or none left after a slow first request and its tool call): the function
    answers 504 itself, logged once, before the platform would cut it off without a word."""
    lam = make_lambda()
    api = SlowMessagesAPI(delay=delay)
    lam.handler._ANTHROPIC = _client_for(lam, api)
    started = time.monotonic()
    status, body, _ = lam.invoke(
        v2_event({"sub": SUBJECT, "iss": ISSUER}, json.dumps({"prompt": PROMPT})),
        FakeContext(remaining_ms=remaining_ms),
    )
    assert time.monotonic() - started < remaining_ms / 1000
    assert (status, body["error"]["code"]) == (504, "model_timeout")
    assert len(api.requests) == requests  # the spent turn sent no request at all
    [record] = lam.records()
    assert (record["level"], record["error"], record["status"]) == ("ERROR", "model_timeout", 504)


def _client_for(lam: Lambda, api: FakeMessagesAPI) -> Any:
    import httpx2
    from anthropic import Anthropic

    http = lam.handler.model_http_client(httpx2.MockTransport(api))
    return Anthropic(api_key="k", http_client=http, max_retries=lam.handler.MODEL_MAX_RETRIES)
