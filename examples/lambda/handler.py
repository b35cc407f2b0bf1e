"""AWS Lambda: one agent turn with an encrypted, per-user memory, isolated by AWS itself.

The user is whoever the API Gateway authorizer says (``claims.sub``), never the model.
The function's own role may touch neither the bucket nor the key: per user, it assumes the
memory role (MEMORY_ROLE_ARN) with the session tag ``s3memory-user=<sub>``, and the tool's
S3 and KMS clients use that session's credentials. The memory role's policy names the
tenant as ``${aws:PrincipalTag/s3memory-user}``, so AWS refuses any request of this
invocation for another user's prefix or KMS encryption context (see s3memory._policy and
policies/). The scoped clients are cached per user for 10 minutes (the credentials last
15), so a warm container calls STS once per user per 10 minutes.

Everything at module scope survives between invocations of a warm container: the boto3
clients, the scoped clients, and the ``KeyCache`` holding each user's unwrapped tenant key
for 15 minutes (shared by all users' tools: its entries are keyed by tenant), so a warm
invocation makes zero KMS calls. Context editing clears old tool results as the
conversation grows, but never the memory tool's: what Claude saved stays reachable.

Environment (set by template.json): MEMORY_BUCKET, MEMORY_KMS_KEY_ID, MEMORY_ROLE_ARN,
MODEL, and ANTHROPIC_API_KEY_SECRET_ARN (the API key is read from Secrets Manager once per
container). Without MEMORY_ROLE_ARN (a local run) the function's own credentials are used.
Put an authorizer (e.g. Cognito) on the API so that ``claims.sub`` is the signed-in user.
"""

from __future__ import annotations

import json
import os
import time
from collections import OrderedDict
from typing import Any

import boto3
from botocore.config import Config

from s3memory import KeyCache, S3MemoryTool, assume_role_request

CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 3}, max_pool_connections=32)
S3 = boto3.client("s3", config=CONFIG)  # the function's own credentials: only without MEMORY_ROLE_ARN
KMS = boto3.client("kms", config=CONFIG)
STS = boto3.client("sts", config=CONFIG)
KEYS = KeyCache(ttl_seconds=900)
SESSION_SECONDS = 900  # what each assumed session lasts
SCOPED_TTL_SECONDS = 600  # reuse a session this long: an invocation (timeout 120 s) never outlives it
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
_ANTHROPIC: Any = None


def clients_for(user_id: str) -> tuple[Any, Any]:
    """S3 and KMS clients whose every request AWS authorises as ``user_id`` only."""
    role_arn = os.environ.get("MEMORY_ROLE_ARN")
    if not role_arn:
        return S3, KMS
    now = time.monotonic()
    cached = _SCOPED.get(user_id)
    if cached is not None and cached[0] > now:
        _SCOPED.move_to_end(user_id)
        return cached[1], cached[2]
    request = assume_role_request(role_arn=role_arn, user_id=user_id, duration_seconds=SESSION_SECONDS)
    credentials = STS.assume_role(**request)["Credentials"]
    session = {
        "aws_access_key_id": credentials["AccessKeyId"],
        "aws_secret_access_key": credentials["SecretAccessKey"],
        "aws_session_token": credentials["SessionToken"],
    }
    s3, kms = boto3.client("s3", config=CONFIG, **session), boto3.client("kms", config=CONFIG, **session)
    _SCOPED[user_id] = (now + SCOPED_TTL_SECONDS, s3, kms)
    _SCOPED.move_to_end(user_id)
    while len(_SCOPED) > MAX_SCOPED_USERS:
        _SCOPED.popitem(last=False)
    return s3, kms


def memory_tool_for(user_id: str) -> S3MemoryTool:
    """Cheap to build: no request until the first command; keys come from the shared cache."""
    s3, kms = clients_for(user_id)
    return S3MemoryTool(
        bucket=os.environ["MEMORY_BUCKET"],
        user_id=user_id,
        s3_client=s3,
        kms_key_id=os.environ["MEMORY_KMS_KEY_ID"],
        kms_client=kms,
        key_cache=KEYS,
        track_access=True,  # one PUT per file per day, so `s3memory expire` can find unused memories
    )


def anthropic_client() -> Any:
    global _ANTHROPIC
    if _ANTHROPIC is None:  # imported on first use: a memory-only invocation never pays for it
        from anthropic import Anthropic

        api_key = os.environ.get("ANTHROPIC_API_KEY")
        if not api_key and os.environ.get("ANTHROPIC_API_KEY_SECRET_ARN"):
            secrets = boto3.client("secretsmanager")
            api_key = secrets.get_secret_value(SecretId=os.environ["ANTHROPIC_API_KEY_SECRET_ARN"])["SecretString"]
        _ANTHROPIC = Anthropic(api_key=api_key)
    return _ANTHROPIC


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    user_id = event["requestContext"]["authorizer"]["claims"]["sub"]
    body = json.loads(event.get("body") or "{}")
    runner = anthropic_client().beta.messages.tool_runner(
        model=os.environ.get("MODEL", "claude-sonnet-5-5"),
        max_tokens=2048,
        tools=[memory_tool_for(user_id)],
        messages=body.get("messages") or [{"role": "user", "content": body.get("prompt", "")}],
        betas=["context-management-2025-06-27"],
        context_management=CONTEXT_MANAGEMENT,
    )
    final = runner.until_done()
    text = "".join(block.text for block in final.content if block.type == "text")
    return {"statusCode": 200, "body": json.dumps({"reply": text})}
