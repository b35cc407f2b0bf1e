"""AWS Lambda: one memory per user, clients and tenant keys reused while the container is warm.

The user comes from the request (your authorizer), never from the model. Everything built
at module scope survives between invocations of a warm container: the boto3 clients, and
the process-wide key cache that holds each tenant's unwrapped key for 15 minutes, so a warm
invocation makes zero KMS calls.
"""

from __future__ import annotations

import os
from typing import Any

import boto3

from s3memory import KeyCache, S3MemoryTool

S3 = boto3.client("s3")  # built once per container
KMS = boto3.client("kms")
KEYS = KeyCache(ttl_seconds=900)
BUCKET = os.environ.get("MEMORY_BUCKET", "")
KMS_KEY_ID = os.environ.get("MEMORY_KMS_KEY_ID", "")


def memory_tool_for(user_id: str) -> S3MemoryTool:
    # Cheap to build: no network until the first command, and the key cache is shared.
    return S3MemoryTool(
        bucket=BUCKET, user_id=user_id, s3_client=S3, kms_key_id=KMS_KEY_ID, kms_client=KMS, key_cache=KEYS
    )


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Execute one memory command for the authenticated user (e.g. from your agent loop)."""
    user_id = event["requestContext"]["authorizer"]["claims"]["sub"]
    tool = memory_tool_for(user_id)
    try:
        return {"ok": True, "result": tool.call(event["command"])}
    except Exception as error:  # ToolError: the message is safe to return to the model
        return {"ok": False, "result": str(error)}
