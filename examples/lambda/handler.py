"""AWS Lambda: one agent turn with an encrypted, per-user memory.

The user is whoever the API Gateway authorizer says (``claims.sub``), never the model.
Everything at module scope survives between invocations of a warm container: the boto3
clients, and the ``KeyCache`` holding each user's unwrapped tenant key for 15 minutes, so
a warm invocation makes zero KMS calls. Context editing clears old tool results as the
conversation grows, but never the memory tool's: what Claude saved stays reachable.

Environment (set by template.json): MEMORY_BUCKET, MEMORY_KMS_KEY_ID, MODEL, and
ANTHROPIC_API_KEY_SECRET_ARN (the API key is read from Secrets Manager once per container).
Put an authorizer (e.g. Cognito) on the API so that ``claims.sub`` is the signed-in user.
"""

from __future__ import annotations

import json
import os
from typing import Any

import boto3

from s3memory import KeyCache, S3MemoryTool

S3 = boto3.client("s3")
KMS = boto3.client("kms")
KEYS = KeyCache(ttl_seconds=900)
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


def memory_tool_for(user_id: str) -> S3MemoryTool:
    """Cheap to build: no request until the first command; keys come from the shared cache."""
    return S3MemoryTool(
        bucket=os.environ["MEMORY_BUCKET"],
        user_id=user_id,
        s3_client=S3,
        kms_key_id=os.environ["MEMORY_KMS_KEY_ID"],
        kms_client=KMS,
        key_cache=KEYS,
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
