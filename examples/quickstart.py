"""Quickstart: Claude with an encrypted S3 memory, through the SDK's tool runner.

Needs AWS credentials, a bucket, and ANTHROPIC_API_KEY:

    S3MEMORY_BUCKET=my-bucket python examples/quickstart.py alice "Remember that I prefer tea."

The memory is encrypted with a per-user key wrapped by a 32-byte master key read from
S3MEMORY_MASTER_KEY_B64 (base64); set S3MEMORY_KMS_KEY_ID instead to wrap it with KMS.
"""

from __future__ import annotations

import base64
import os
import sys

from anthropic import Anthropic

from s3memory import S3MemoryTool, kms_client, s3_client


def build_tool(user_id: str) -> S3MemoryTool:
    # s3memory's shared clients: one connection pool per process, awscrt with the fast extra
    options: dict[str, object] = {"bucket": os.environ["S3MEMORY_BUCKET"], "user_id": user_id, "s3_client": s3_client()}
    if os.environ.get("S3MEMORY_KMS_KEY_ID"):
        options["kms_key_id"] = os.environ["S3MEMORY_KMS_KEY_ID"]
        options["kms_client"] = kms_client()
    else:
        options["master_key"] = base64.b64decode(os.environ["S3MEMORY_MASTER_KEY_B64"])
    return S3MemoryTool(**options)  # type: ignore[arg-type]


def main() -> None:
    user_id, prompt = sys.argv[1], sys.argv[2]
    client = Anthropic()
    runner = client.beta.messages.tool_runner(
        model=os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-5-5"),
        max_tokens=2048,
        tools=[build_tool(user_id)],
        messages=[{"role": "user", "content": prompt}],
    )
    for message in runner:
        for block in message.content:
            if block.type == "text":
                print(block.text)


if __name__ == "__main__":
    main()
