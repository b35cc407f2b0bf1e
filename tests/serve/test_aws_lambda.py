"""The memory-store API on AWS Lambda (``s3memory.serve.aws_lambda``) and its place in the
example's template (``examples/lambda/template.json``).

The handler is driven with synthetic API Gateway HTTP API events (payload format 2.0) over
an InMemoryStore-backed API; on moto, every S3 and KMS request the API makes through it is
judged against the template's policies for the function's role (``helpers.iam``); and the
template, through the SAM transform, routes ``/v1/memory_stores`` to the function behind
the JWT authorizer.

The face hands the API each caller as a ``Principal`` (``MemoryStoreAPI.handle(request,
principal=...)``): the token's subject as its actor, its scopes as its access.
"""

from __future__ import annotations

import base64
import copy
import importlib
import json
import logging
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers import BUCKET, EXAMPLES_DIR, MASTER_KEY, REGION
from helpers.iam import ACCOUNT, MEMORY_ROLE, TAG_KEY, allowed, iam_requests, record_requests

from s3memory import EncryptedMemory, InMemoryStore, KeyCache, UserMemories, user_id_for_subject
from s3memory._config import ENVIRONMENT, Settings
from s3memory._errors import ConfigurationError
from s3memory.serve import aws_lambda
from s3memory.serve.api import MemoryStoreAPI
from s3memory.serve.aws_lambda import MAX_ANSWER_BYTES, handler_for
from s3memory.serve.http import MAX_BODY_BYTES
from s3memory.serve.http import Request as ApiRequest
from s3memory.serve.http import Response as ApiResponse
from s3memory.serve.keys import Principal

KEY = "lambda-stand-in-key-" + "k" * 32
WRITE = "openid memory_stores:write"
ISSUER = "https://issuer.example.com/"
SUBJECT = "auth0|alice"
ACTOR = user_id_for_subject(SUBJECT, issuer=ISSUER)
LAMBDA_DIR = EXAMPLES_DIR / "lambda"
TEMPLATE = json.loads((LAMBDA_DIR / "template.json").read_text())
FUNCTION = TEMPLATE["Resources"]["MemoryStoreApiFunction"]
API_ROLE = f"arn:aws:iam::{ACCOUNT}:role/s3memory-memory-store-api"


def vouched_api(users: UserMemories) -> MemoryStoreAPI:
    """The API over ``users``' stores, as the function builds it (a key no caller has)."""

    def open_tenant(user_id: str, actor: str) -> EncryptedMemory:
        memory = users.open(user_id, actor=actor)
        assert isinstance(memory, EncryptedMemory)
        return memory

    return MemoryStoreAPI(open_tenant, key=KEY)


class Recorder:
    """An API that records what it is asked and answers ``answer`` (or raises ``error``)."""

    def __init__(self, answer: ApiResponse | None = None, error: Exception | None = None) -> None:
        self.calls: list[tuple[ApiRequest, str | None]] = []
        self.accesses: list[str] = []
        self.answer = answer or ApiResponse(200, {"ok": True})
        self.error = error

    def handle(self, request: ApiRequest, *, principal: Principal | None = None) -> ApiResponse:
        assert principal is not None and principal.stores is None
        self.calls.append((request, principal.key_id))
        self.accesses.append(principal.access)
        if self.error is not None:
            raise self.error
        return self.answer


def event(
    method: str,
    path: str,
    body: Any = None,
    *,
    raw: str | None = None,
    base64_encoded: bool = False,
    query: str = "",
    headers: dict[str, str] | None = None,
    claims: dict[str, Any] | None = None,
    stage: str = "$default",
) -> dict[str, Any]:
    """An HTTP API (payload 2.0) event as API Gateway sends it past its JWT authorizer: the
    ``body`` as JSON (base64 if ``base64_encoded``), or the ``raw`` text as it is."""
    text = raw  # as given: already base64 if base64_encoded says so
    if body is not None:
        text = json.dumps(body)
        text = base64.b64encode(text.encode()).decode() if base64_encoded else text
    given: dict[str, Any] = {
        "version": "2.0",
        "routeKey": f"ANY {path}",
        "rawPath": path,
        "rawQueryString": query,
        "headers": {"authorization": "Bearer eyJ.token.sig", "content-type": "application/json", **(headers or {})},
        "requestContext": {
            "http": {"method": method, "path": path},
            "stage": stage,
            "requestId": "apigw-request",
            "authorizer": {
                "jwt": {"claims": {"sub": SUBJECT, "iss": ISSUER, "scope": WRITE} if claims is None else claims}
            },
        },
        "isBase64Encoded": base64_encoded,
    }
    if text is not None:
        given["body"] = text
    return given


def body_of(answer: dict[str, Any]) -> Any:
    return json.loads(answer["body"])


def error_type(answer: dict[str, Any]) -> str:
    return str(body_of(answer)["error"]["type"])


def in_memory_api() -> MemoryStoreAPI:
    return vouched_api(UserMemories(store=InMemoryStore(), master_key=MASTER_KEY))


# -- the handler over an in-memory API --------------------------------------------------------
def test_a_store_and_its_memories_round_trip_through_events() -> None:
    handle = handler_for(in_memory_api())
    created = handle(event("POST", "/v1/memory_stores", {"name": "notes"}), None)
    assert created["statusCode"] == 200 and created["isBase64Encoded"] is False
    assert created["headers"]["content-type"] == "application/json"
    assert created["headers"]["request-id"].startswith("req_")
    store = body_of(created)["id"]
    memories = f"/v1/memory_stores/{store}/memories"
    # the body as API Gateway sends a binary one: base64
    memory = body_of(
        handle(event("POST", memories, {"path": "/a/todo.md", "content": "tea\n"}, base64_encoded=True), None)
    )
    handle(event("POST", memories, {"path": "/b.md", "content": "b"}), None)
    listed = handle(event("GET", memories, query="path_prefix=%2Fa%2F&view=full"), None)
    assert [(m["path"], m.get("content")) for m in body_of(listed)["data"]] == [("/a/todo.md", "tea\n")]
    update = {"content": "green tea\n", "path": "/a/tea.md"}
    assert body_of(handle(event("POST", f"{memories}/{memory['id']}", update), None))["path"] == "/a/tea.md"
    retrieved = body_of(handle(event("GET", f"{memories}/{memory['id']}"), None))
    assert (retrieved["path"], retrieved["content"]) == ("/a/tea.md", "green tea\n")
    deleted = handle(event("DELETE", f"{memories}/{memory['id']}"), None)
    assert deleted["statusCode"] == 200
    assert handle(event("GET", f"{memories}/{memory['id']}"), None)["statusCode"] == 404
    # every version names the token's subject, mapped as the agent function maps it
    versions = body_of(handle(event("GET", f"/v1/memory_stores/{store}/memory_versions"), None))["data"]
    assert versions and {v["created_by"]["user_id"] for v in versions} == {ACTOR}
    assert handle(event("DELETE", f"/v1/memory_stores/{store}"), None)["statusCode"] == 200
    assert handle(event("GET", f"/v1/memory_stores/{store}"), None)["statusCode"] == 404


def test_the_request_is_what_the_event_says() -> None:
    api = Recorder()
    given = event(
        "post",
        "/v1/memory_stores/memstore_x/memories",
        raw='{"content": "caf\u00e9"}',
        query="path_prefix=%2Fa%2F&depth=&path_prefix=%2Fb%2F&view=full",
        headers={"X-Custom": "one, two", "Anthropic-Beta": "managed-agents"},
    )
    answer = handler_for(api)(given, None)
    assert answer["statusCode"] == 200 and body_of(answer) == {"ok": True}
    ((request, actor),) = api.calls
    assert (request.method, request.path) == ("POST", "/v1/memory_stores/memstore_x/memories")
    assert request.query == (("path_prefix", "/a/"), ("depth", ""), ("path_prefix", "/b/"), ("view", "full"))
    assert request.headers["x-custom"] == "one, two" and request.headers["anthropic-beta"] == "managed-agents"
    assert all(name == name.lower() for name in request.headers)
    assert request.body == '{"content": "caf\u00e9"}'.encode()
    assert actor == ACTOR


@pytest.mark.parametrize(
    ("stage", "raw_path", "routed"),
    [
        ("$default", "/v1/memory_stores", "/v1/memory_stores"),
        ("prod", "/prod/v1/memory_stores/memstore_x", "/v1/memory_stores/memstore_x"),
        ("prod", "/prod", "/"),
        ("prod", "/production/v1/memory_stores", "/production/v1/memory_stores"),  # not the stage's segment
        ("v1", "/v1/memory_stores", "/memory_stores"),  # a stage named v1 is served at /v1/v1/...
    ],
)
def test_a_named_stage_is_not_part_of_the_path(stage: str, raw_path: str, routed: str) -> None:
    api = Recorder()
    handler_for(api)(event("GET", raw_path, stage=stage), None)
    assert api.calls[0][0].path == routed


def test_a_bad_base64_body_is_400() -> None:
    api = Recorder()
    answer = handler_for(api)(event("POST", "/v1/memory_stores", raw="not base64!", base64_encoded=True), None)
    assert answer["statusCode"] == 400 and error_type(answer) == "invalid_request_error"
    assert "base64" in body_of(answer)["error"]["message"] and not api.calls


@pytest.mark.parametrize(
    ("raw", "base64_encoded"),
    [
        ("x" * (MAX_BODY_BYTES + 1), False),
        ("\u00e9" * (MAX_BODY_BYTES // 2 + 1), False),  # few enough characters, too many bytes
        (base64.b64encode(b"x" * (MAX_BODY_BYTES + 1)).decode(), True),
        (base64.b64encode(b"x" * (MAX_BODY_BYTES * 2)).decode(), True),
    ],
    ids=["text", "utf-8", "base64", "base64-long"],
)
def test_a_body_over_the_limit_is_413(raw: str, base64_encoded: bool) -> None:
    api = Recorder()
    answer = handler_for(api)(event("POST", "/v1/memory_stores", raw=raw, base64_encoded=base64_encoded), None)
    assert answer["statusCode"] == 413 and error_type(answer) == "request_too_large"
    assert answer["headers"]["x-should-retry"] == "false" and not api.calls


@pytest.mark.parametrize("base64_encoded", [False, True])
def test_a_body_at_the_limit_is_passed_on(base64_encoded: bool) -> None:
    api = Recorder()
    raw = "x" * MAX_BODY_BYTES
    raw = base64.b64encode(raw.encode()).decode() if base64_encoded else raw
    answer = handler_for(api)(event("POST", "/v1/memory_stores", raw=raw, base64_encoded=base64_encoded), None)
    assert answer["statusCode"] == 200 and len(api.calls[0][0].body) == MAX_BODY_BYTES


def _without_authorizer(given: dict[str, Any]) -> None:
    del given["requestContext"]["authorizer"]


@pytest.mark.parametrize(
    "spoil",
    [
        _without_authorizer,
        lambda e: e["requestContext"]["authorizer"].pop("jwt"),
        lambda e: e["requestContext"]["authorizer"].update(jwt={"scopes": []}),
        lambda e: e["requestContext"]["authorizer"]["jwt"].update(claims={"iss": ISSUER}),
        lambda e: e["requestContext"]["authorizer"]["jwt"].update(claims={"sub": "", "iss": ISSUER}),
        lambda e: e["requestContext"]["authorizer"]["jwt"].update(claims={"sub": 42, "iss": ISSUER}),
        lambda e: e["requestContext"]["authorizer"]["jwt"].update(claims={"sub": SUBJECT, "iss": ["x"]}),
        lambda e: e.pop("requestContext"),
    ],
    ids=["no-authorizer", "no-jwt", "no-claims", "no-sub", "empty-sub", "number-sub", "list-iss", "no-context"],
)
def test_without_a_verified_subject_the_answer_is_401(spoil: Any) -> None:
    api = Recorder()
    given = event("GET", "/v1/memory_stores")
    spoil(given)
    answer = handler_for(api)(given, None)
    assert answer["statusCode"] == 401 and error_type(answer) == "authentication_error"
    assert answer["headers"]["x-should-retry"] == "false" and not api.calls


def test_the_actor_is_the_subject_mapped_as_the_agent_function_maps_it() -> None:
    api = Recorder()
    key = b"k" * 32
    odd = "urn:x|\u00e9 \n" + "s" * 300  # no actor as it stands: control character, too long
    for handle in (handler_for(api), handler_for(api, subject_key=key)):
        handle(event("GET", "/v1/memory_stores"), None)
        handle(
            event(
                "GET", "/v1/memory_stores", claims={"sub": SUBJECT, "iss": "https://other.example.com/", "scope": WRITE}
            ),
            None,
        )
        handle(event("GET", "/v1/memory_stores", claims={"sub": odd, "scope": WRITE}), None)
    actors = [actor for _, actor in api.calls]
    assert actors == [
        ACTOR,
        user_id_for_subject(SUBJECT, issuer="https://other.example.com/"),
        user_id_for_subject(odd),
        user_id_for_subject(SUBJECT, issuer=ISSUER, key=key),
        user_id_for_subject(SUBJECT, issuer="https://other.example.com/", key=key),
        user_id_for_subject(odd, key=key),
    ]
    assert len(set(actors)) == 6 and all(re.fullmatch(r"u-[a-z2-7]{32}", str(actor)) for actor in actors)


def test_a_short_subject_key_is_refused_when_the_handler_is_made() -> None:
    with pytest.raises(ConfigurationError, match="16 bytes"):
        handler_for(Recorder(), subject_key=b"short")


@pytest.mark.parametrize(
    "given",
    [
        {"httpMethod": "GET", "path": "/v1/memory_stores", "requestContext": {"authorizer": {"claims": {"sub": "a"}}}},
        {**event("GET", "/v1/memory_stores"), "version": "1.0"},
        None,
        ["not", "an", "event"],
    ],
    ids=["rest-api", "payload-1.0", "none", "list"],
)
def test_an_event_that_is_not_an_http_api_one_is_a_deployment_error(
    given: Any, caplog: pytest.LogCaptureFixture
) -> None:
    api = Recorder()
    with caplog.at_level(logging.ERROR, logger="s3memory.serve"):
        answer = handler_for(api)(given, None)
    assert answer["statusCode"] == 500 and error_type(answer) == "api_error" and not api.calls
    assert any("payload format 2.0" in r.getMessage() for r in caplog.records)


def test_an_unexpected_error_is_500_and_says_nothing_of_it() -> None:
    api = Recorder(error=RuntimeError("the content of /secret.md"))
    answer = handler_for(api)(event("GET", "/v1/memory_stores"), None)
    assert answer["statusCode"] == 500 and error_type(answer) == "api_error"
    assert "secret" not in answer["body"] and answer["headers"]["request-id"].startswith("req_")


def test_each_request_is_one_log_line_without_query_body_or_identity(caplog: pytest.LogCaptureFixture) -> None:
    handle = handler_for(Recorder(ApiResponse(200, {"ok": True}, {"request-id": "req_given"})))
    given = event(
        "POST", "/v1/memory_stores/memstore_x/memories", {"content": "private words"}, query="path_prefix=%2Fdiary%2F"
    )
    refused = event("GET", "/v1/memory_stores\n200 forged", claims={})
    with caplog.at_level(logging.INFO, logger="s3memory.serve"):
        handle(given, None)
        handle(refused, None)
    first, second = (r.getMessage() for r in caplog.records)
    assert re.fullmatch(r"POST /v1/memory_stores/memstore_x/memories 200 [0-9.]+ms req_given", first)
    assert re.fullmatch(r"GET /v1/memory_stores\\u000a200 forged 401 [0-9.]+ms req_[0-9a-f]+", second)
    for secret in ("diary", "private", SUBJECT, ACTOR, "eyJ"):
        assert secret not in first + second


def test_an_answer_too_large_for_lambda_is_a_clear_500() -> None:
    # Each control character is six characters of JSON, and the runtime escapes the backslash again.
    huge = Recorder(ApiResponse(200, {"data": "\x01" * (MAX_ANSWER_BYTES // 6)}))
    answer = handler_for(huge)(event("GET", "/v1/memory_stores"), None)
    assert answer["statusCode"] == 500 and "fewer items" in body_of(answer)["error"]["message"]
    assert answer["headers"]["x-should-retry"] == "false"  # the same answer every time
    fits = Recorder(ApiResponse(200, {"data": "x" * (MAX_ANSWER_BYTES - 1000)}))
    answer = handler_for(fits)(event("GET", "/v1/memory_stores"), None)
    assert answer["statusCode"] == 200 and len(json.dumps(answer)) <= MAX_ANSWER_BYTES


# -- the function the template names -----------------------------------------------------------
@pytest.fixture
def fresh_function(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A cold container: no API built yet, and only this test's ``S3MEMORY_*`` variables."""
    for name in [n for n in os.environ if n.startswith("S3MEMORY_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("S3MEMORY_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(aws_lambda, "_HANDLER", None)


@pytest.mark.usefixtures("fresh_function")
def test_the_function_builds_its_api_on_the_first_event_and_keeps_it() -> None:
    created = aws_lambda.handler(event("POST", "/v1/memory_stores", {"name": "notes"}), None)
    assert created["statusCode"] == 200, created["body"]
    listed = aws_lambda.handler(event("GET", "/v1/memory_stores"), None)
    assert [s["id"] for s in body_of(listed)["data"]] == [body_of(created)["id"]]


@pytest.mark.usefixtures("fresh_function")
def test_a_misconfigured_function_says_so_and_builds_again_on_the_next_event(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("S3MEMORY_MOUNTS", '[{"name": "shared", "user_id": "shared"}]')
    with caplog.at_level(logging.ERROR, logger="s3memory.serve"):
        answer = aws_lambda.handler(event("GET", "/v1/memory_stores"), None)
    assert answer["statusCode"] == 500 and body_of(answer)["error"]["message"] == aws_lambda.MISCONFIGURED
    assert answer["headers"]["x-should-retry"] == "false"
    assert any("S3MEMORY_MOUNTS" in r.getMessage() for r in caplog.records)
    api = Recorder()
    monkeypatch.setattr(aws_lambda, "build_lambda_api", lambda: api)
    assert aws_lambda.handler(event("GET", "/v1/memory_stores"), None)["statusCode"] == 200
    assert aws_lambda.handler(event("GET", "/v1/memory_stores"), None)["statusCode"] == 200
    assert len(api.calls) == 2


@pytest.mark.usefixtures("fresh_function", "aws")
def test_the_subject_key_is_read_from_secrets_manager_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3

    secrets = boto3.client("secretsmanager", region_name=REGION)
    arn = secrets.create_secret(Name="subject-key", SecretString="s" * 32)["ARN"]
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv(aws_lambda.SUBJECT_KEY_VARIABLE, arn)
    api = Recorder()
    monkeypatch.setattr(aws_lambda, "build_lambda_api", lambda: api)
    assert aws_lambda.handler(event("GET", "/v1/memory_stores"), None)["statusCode"] == 200
    secrets.delete_secret(SecretId=arn, ForceDeleteWithoutRecovery=True)  # a second read would fail
    assert aws_lambda.handler(event("GET", "/v1/memory_stores"), None)["statusCode"] == 200
    keyed = user_id_for_subject(SUBJECT, issuer=ISSUER, key=b"s" * 32)
    assert [actor for _, actor in api.calls] == [keyed, keyed]


@pytest.mark.parametrize(
    ("code", "status"),
    [("ThrottlingException", 503), ("AccessDeniedException", 500), ("ResourceNotFoundException", 500)],
)
@pytest.mark.usefixtures("fresh_function")
def test_a_subject_key_that_cannot_be_read_is_503_while_it_may_pass_else_500(
    monkeypatch: pytest.MonkeyPatch, code: str, status: int
) -> None:
    from botocore.exceptions import ClientError

    def refuse() -> bytes:
        raise ClientError({"Error": {"Code": code, "Message": "no"}}, "GetSecretValue")

    monkeypatch.setattr(aws_lambda, "build_lambda_api", Recorder)
    monkeypatch.setattr(aws_lambda, "read_subject_key", refuse)
    answer = aws_lambda.handler(event("GET", "/v1/memory_stores"), None)
    assert answer["statusCode"] == status
    # the SDK may retry what may pass, and nothing else
    assert answer["headers"].get("x-should-retry") == (None if status == 503 else "false")


# -- the template's policies, judged against what the API really asks of S3 and KMS ------------
def resolve(value: Any, names: dict[str, str]) -> Any:
    """A template fragment with Ref, Fn::GetAtt and Fn::Sub replaced by ``names``."""
    if isinstance(value, list):
        return [resolve(item, names) for item in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"Ref"}:
        return names[value["Ref"]]
    if set(value) == {"Fn::GetAtt"}:
        return names[".".join(value["Fn::GetAtt"])]
    if set(value) == {"Fn::Sub"}:
        return re.sub(r"\$\{(!?)([^}]*)\}", lambda m: "${" + m[2] + "}" if m[1] else names[m[2]], value["Fn::Sub"])
    return {key: resolve(item, names) for key, item in value.items()}


def deployed(key_arn: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The function role's policy, the memory stores' key policy and the agent's memory
    role policy, with the test's bucket, key and roles."""
    names = {
        "AWS::Partition": "aws",
        "AWS::AccountId": ACCOUNT,
        "MemoryBucket": BUCKET,
        "MemoryStoreKey.Arn": key_arn,
        "MemoryKey.Arn": key_arn,  # the same key: so only the policies keep the two apart
        "MemoryStoreApiRole.Arn": API_ROLE,
        "MemoryRole.Arn": MEMORY_ROLE,
    }
    properties = {name: r["Properties"] for name, r in TEMPLATE["Resources"].items()}
    role = resolve(properties["MemoryStoreApiRolePolicy"]["PolicyDocument"], names)
    key = resolve(properties["MemoryStoreKey"]["KeyPolicy"], names)
    memory_role = resolve(properties["MemoryRolePolicy"]["PolicyDocument"], names)
    return role, key, memory_role


def function_settings() -> dict[str, str]:
    variables = FUNCTION["Properties"]["Environment"]["Variables"]
    return {name: value for name, value in variables.items() if isinstance(value, str)}


def run_every_endpoint(handle: aws_lambda.LambdaHandler) -> None:
    def call(method: str, path: str, body: Any = None, query: str = "") -> Any:
        answer = handle(event(method, path, body, query=query), None)
        assert answer["statusCode"] == 200, (method, path, answer["body"])
        return body_of(answer)

    store = call("POST", "/v1/memory_stores", {"name": "notes"})["id"]
    call("GET", "/v1/memory_stores")
    call("POST", f"/v1/memory_stores/{store}", {"description": "the team's"})
    memories = f"/v1/memory_stores/{store}/memories"
    first = call("POST", memories, {"path": "/a/todo.md", "content": "tea\n"})
    call("POST", memories, {"path": "/b.md", "content": "b\n"})
    call("POST", f"{memories}/{first['id']}", {"content": "green tea\n", "path": "/a/tea.md"})
    call("GET", f"{memories}/{first['id']}")
    call("GET", memories, query="path_prefix=%2Fa%2F&view=full")
    versions = f"/v1/memory_stores/{store}/memory_versions"
    listed = call("GET", versions)["data"]
    old = next(v for v in listed if v["operation"] == "created" and v["memory_id"] == first["id"])
    call("GET", f"{versions}/{old['id']}")
    call("POST", f"{versions}/{old['id']}/redact")
    call("DELETE", f"{memories}/{first['id']}")
    call("POST", f"/v1/memory_stores/{store}/archive")
    call("DELETE", f"/v1/memory_stores/{store}")


def test_the_functions_role_allows_every_request_the_api_makes_and_no_other(
    s3_client: Any, kms_client: Any, kms_key_id: str
) -> None:
    """The whole API through the handler on moto, as the template configures it (its
    prefix, names encrypted, a KMS key): each S3 and KMS request is allowed by the
    function's role policy (and the key's policy); the same requests are refused in the
    bucket's other deployments, and to every session of the agent's memory role."""
    s3_client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    settings = Settings.from_environment({**function_settings(), "S3MEMORY_BUCKET": BUCKET})
    recorded = record_requests(s3_client, kms_client)
    users_options: dict[str, Any] = {
        "bucket": BUCKET,
        "s3_client": s3_client,
        "prefix": settings.prefix,
        "kms_key_id": kms_key_id,
        "kms_client": kms_client,
        "key_cache": KeyCache(),
        "encrypt_names": settings.encrypt_names,
    }
    users = UserMemories(**users_options)
    handle = handler_for(vouched_api(users))
    run_every_endpoint(handle)
    # A cold container (its key cache empty) reads a store: the keys are unwrapped again.
    kept = body_of(handle(event("POST", "/v1/memory_stores", {"name": "kept"}), None))["id"]
    handle(event("POST", f"/v1/memory_stores/{kept}/memories", {"path": "/x.md", "content": "x"}), None)
    cold = handler_for(vouched_api(UserMemories(**{**users_options, "key_cache": KeyCache()})))
    for path in ("memories", "memory_versions"):
        assert cold(event("GET", f"/v1/memory_stores/{kept}/{path}"), None)["statusCode"] == 200

    role, key, memory_role = deployed(kms_key_id)
    requests = [r for call in recorded for r in iam_requests(*call, kms_key_id)]
    actions = {r.action for r in requests}
    assert {"s3:DeleteObjectVersion", "s3:ListBucketVersions", "kms:Encrypt", "kms:Decrypt"} <= actions
    for request in requests:
        request.context["aws:SecureTransport"] = "true"
        request.principal = API_ROLE
        assert allowed(role, request), request
        if request.action.startswith("kms:"):
            assert allowed(key, request), request
    # Another deployment of the bucket (a user's memory: no prefix) is out of reach.
    for request in requests:
        if request.action.startswith("kms:"):
            moved = {**request.context, "kms:EncryptionContext:s3memory:prefix": "/"}
            assert not allowed(role, replace(request, context=moved)) and not allowed(
                key, replace(request, context=moved)
            )
        elif request.action != "s3:GetBucketVersioning":  # the bucket's setting, no tenant's data
            context = {k: v.replace(settings.prefix, "", 1) for k, v in request.context.items()}
            other = replace(request, resource=request.resource.replace(settings.prefix, "", 1), context=context)
            assert not allowed(role, other), other
    # No session of the agent's memory role, whatever its tag, reaches a store.
    under = f"{BUCKET}/{settings.prefix}"
    tenants = {r.resource.split(under, 1)[1].split("/")[0] for r in requests if under in r.resource}
    assert "memstore-registry" in tenants and any(t.startswith("memstore_") for t in tenants)
    for tag in ("memory-stores", "u-abc", *tenants):
        for request in requests:
            if request.action == "s3:GetBucketVersioning":
                continue
            agent = replace(request, context={**request.context, TAG_KEY: tag}, principal=MEMORY_ROLE)
            assert not allowed(memory_role, agent), agent
            assert not (request.action.startswith("kms:") and allowed(key, agent)), agent


# -- the template ------------------------------------------------------------------------------
PARAMETERS = {
    "AnthropicApiKeySecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:anthropic",
    "JwtIssuer": ISSUER,
    "JwtAudience": ["client-id"],
}


def sam_transform(template: dict[str, Any]) -> dict[str, Any]:
    """What CloudFormation deploys: every function's CodeUri an S3 location, as after ``sam package``."""
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


def test_the_api_is_routed_to_its_function_behind_the_jwt_authorizer() -> None:
    openapi = sam_transform(TEMPLATE)["Resources"]["ChatApi"]["Properties"]["Body"]
    routed = {}
    for path, operations in openapi["paths"].items():
        for verb, operation in operations.items():
            integration = operation["x-amazon-apigateway-integration"]
            function = re.search(r"\$\{(\w+)\.Arn\}", integration["uri"]["Fn::Sub"])
            assert function is not None
            routed[(path, verb)] = function[1]
            assert operation["security"] == [{"OidcAuthorizer": []}], path  # no route without a token
            assert integration["payloadFormatVersion"] == "2.0"  # what the handler reads
    assert routed == {
        ("/chat", "post"): "AgentFunction",
        ("/v1/memory_stores", "x-amazon-apigateway-any-method"): "MemoryStoreApiFunction",
        ("/v1/memory_stores/{proxy+}", "x-amazon-apigateway-any-method"): "MemoryStoreApiFunction",
    }


def test_the_function_runs_this_module_as_the_agent_function_is_built() -> None:
    properties = FUNCTION["Properties"]
    module, _, name = properties["Handler"].rpartition(".")
    assert getattr(importlib.import_module(module), name) is aws_lambda.handler
    agent = TEMPLATE["Resources"]["AgentFunction"]
    # the same package (the Makefile's): the same runtime, architecture and build
    for setting in ("Runtime", "Architectures", "CodeUri"):
        assert properties[setting] == agent["Properties"][setting]
    assert FUNCTION["Metadata"] == agent["Metadata"] == {"BuildMethod": "makefile"}
    assert properties["Timeout"] <= 30  # an HTTP API waits 30 s at most
    assert properties["Role"] == {"Fn::GetAtt": ["MemoryStoreApiRole", "Arn"]}
    assert FUNCTION["DependsOn"] == ["MemoryStoreApiRolePolicy"]  # starts with its permissions
    assert properties["LoggingConfig"]["ApplicationLogLevel"] == "INFO"  # the request lines


def test_the_functions_environment_is_settings_s3memory_reads() -> None:
    variables = FUNCTION["Properties"]["Environment"]["Variables"]
    known = {variable for variable, _ in ENVIRONMENT.values()}
    assert set(variables) - known == {aws_lambda.SUBJECT_KEY_VARIABLE}
    assert variables[aws_lambda.SUBJECT_KEY_VARIABLE] == {"Ref": "SubjectKeySecretArn"}  # as the agent's
    assert variables["S3MEMORY_BUCKET"] == {"Ref": "MemoryBucket"}
    assert variables["S3MEMORY_KMS_KEY_ID"] == {"Fn::GetAtt": ["MemoryStoreKey", "Arn"]}
    assert "S3MEMORY_SERVE_KEY" not in variables and "S3MEMORY_MOUNTS" not in variables
    settings = Settings.from_environment({**function_settings(), "S3MEMORY_BUCKET": BUCKET})
    assert settings.prefix == "memory-stores/" and settings.encrypt_names is True


def test_only_the_functions_role_uses_the_memory_stores_key() -> None:
    resources = TEMPLATE["Resources"]
    role = {"AWS": {"Fn::GetAtt": ["MemoryStoreApiRole", "Arn"]}}
    store_key = resources["MemoryStoreKey"]["Properties"]
    assert store_key["EnableKeyRotation"] is True
    uses = [s for s in store_key["KeyPolicy"]["Statement"] if s["Sid"] != "KeyAdministration"]
    assert [s["Principal"] for s in uses] == [role] and uses[0]["Action"] == ["kms:Encrypt", "kms:Decrypt"]
    assert "MemoryStoreApiRole" not in json.dumps(resources["MemoryKey"]) + json.dumps(resources["MemoryRole"])
    statements = resources["MemoryStoreApiRolePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert all(s["Resource"] != "*" for s in statements)


@pytest.mark.slow  # cfn-lint and the SAM transform
def test_the_template_passes_cfn_lint_before_and_after_the_sam_transform() -> None:
    pytest.importorskip("cfnlint", reason="the dev extra installs cfn-lint")
    from cfnlint.api import ManualArgs, lint

    for document in (TEMPLATE, sam_transform(TEMPLATE)):
        assert [str(m) for m in lint(json.dumps(document), config=ManualArgs(regions=[REGION]))] == []


def test_sam_build_has_a_recipe_for_each_function() -> None:
    makefile = (LAMBDA_DIR / "Makefile").read_text()
    for name, resource in TEMPLATE["Resources"].items():
        if resource["Type"] == "AWS::Serverless::Function":
            assert re.search(rf"^build-{name}:", makefile, re.M), name


# -- what the token's scopes allow -------------------------------------------------------------
def test_the_tokens_scopes_decide_what_it_may_do() -> None:
    api = in_memory_api()
    handle = handler_for(api)
    made = body_of(handle(event("POST", "/v1/memory_stores", {"name": "notes"}), None))["id"]
    reader = {"sub": SUBJECT, "iss": ISSUER, "scope": "memory_stores:read"}
    assert handle(event("GET", f"/v1/memory_stores/{made}", claims=reader), None)["statusCode"] == 200
    refused = handle(
        event("POST", f"/v1/memory_stores/{made}/memories", {"path": "/a.md", "content": "x"}, claims=reader), None
    )
    assert (refused["statusCode"], error_type(refused)) == (403, "permission_error")
    listed = {"sub": SUBJECT, "iss": ISSUER, "scp": ["memory_stores:write"]}  # a list, as some issuers send it
    assert (
        handle(
            event("POST", f"/v1/memory_stores/{made}/memories", {"path": "/a.md", "content": "x"}, claims=listed), None
        )["statusCode"]
        == 200
    )
    for claims in ({"sub": SUBJECT, "iss": ISSUER}, {"sub": SUBJECT, "iss": ISSUER, "scope": "openid chat"}):
        answer = handle(event("GET", "/v1/memory_stores", claims=claims), None)
        assert (answer["statusCode"], error_type(answer)) == (403, "permission_error")
        assert "memory_stores:write" in body_of(answer)["error"]["message"]


def test_versions_name_the_person_as_a_user_actor() -> None:
    handle = handler_for(in_memory_api())
    store = body_of(handle(event("POST", "/v1/memory_stores", {"name": "notes"}), None))["id"]
    handle(event("POST", f"/v1/memory_stores/{store}/memories", {"path": "/a.md", "content": "x"}), None)
    (version,) = body_of(handle(event("GET", f"/v1/memory_stores/{store}/memory_versions"), None))["data"]
    assert version["created_by"] == {"type": "user_actor", "user_id": ACTOR}
