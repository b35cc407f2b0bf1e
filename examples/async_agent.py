"""The async flavour: ``AsyncS3MemoryTool`` with ``AsyncAnthropic``'s tool runner.

    export S3MEMORY_BUCKET=my-bucket S3MEMORY_KMS_KEY_ID=alias/memory
    python examples/async_agent.py alice "Remember: I like tea"

Each memory command runs in a worker thread, so the event loop is never blocked by S3.
"""

from __future__ import annotations

import asyncio
import os
import sys

from anthropic import AsyncAnthropic

from s3memory import AsyncS3MemoryTool, kms_client, s3_client


async def main(user_id: str, prompt: str) -> None:
    tool = AsyncS3MemoryTool(
        bucket=os.environ["S3MEMORY_BUCKET"],
        user_id=user_id,
        s3_client=s3_client(),  # shared per process; awscrt with the fast extra
        kms_key_id=os.environ["S3MEMORY_KMS_KEY_ID"],
        kms_client=kms_client(),
    )
    runner = AsyncAnthropic().beta.messages.tool_runner(
        model=os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-5-5"),
        max_tokens=2048,
        tools=[tool],
        messages=[{"role": "user", "content": prompt}],
    )
    async for message in runner:
        for block in message.content:
            if block.type == "text":
                print(block.text)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
