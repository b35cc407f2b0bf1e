"""The CLI's environment in tests."""

from __future__ import annotations

__all__ = ["ENV_NAMES"]

# Every S3MEMORY_* variable the CLI reads: a test clears them all, so a developer's shell
# never chooses the store a test writes to.
ENV_NAMES = (
    "S3MEMORY_HOME",
    "S3MEMORY_STORE_DIR",
    "S3MEMORY_MASTER_KEY_FILE",
    "S3MEMORY_USER",
    "S3MEMORY_BUCKET",
    "S3MEMORY_PREFIX",
    "S3MEMORY_KMS_KEY_ID",
    "S3MEMORY_KEY_MODE",
    "S3MEMORY_ENDPOINT_URL",
    "S3MEMORY_REGION",
    "S3MEMORY_SENSITIVE_DATA",
    "S3MEMORY_TRACK_ACCESS",
    "S3MEMORY_ENCRYPT_NAMES",
    "S3MEMORY_INSTRUCTION_POLICY",
)
