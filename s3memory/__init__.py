"""s3memory: an encrypted S3 backend for Claude's memory tool (``memory_20250818``).

The core (paths, envelope, keys, stores, commands) imports neither ``anthropic`` nor
``boto3``; the SDK adapters ``S3MemoryTool`` and ``AsyncS3MemoryTool`` are loaded on first
use, so a Lambda that only executes memory commands does not pay for the SDK's import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._aws.clients import tune_session
from ._aws.shared import describe_s3_client, kms_client, s3_client
from ._config import Settings
from ._core.access import AccessLog
from ._core.limits import Limits
from ._core.memory import EncryptedMemory, FileEntry
from ._core.mountprompt import memory_stores_prompt
from ._core.mounts import Mount, MountedMemory
from ._core.protocol import Memory
from ._core.quarantine import PendingWrite, WriteHeldError
from ._crypto.cache import KeyCache
from ._crypto.envelope import WrappedKey, binding_context
from ._crypto.historykey import HistoryKey
from ._crypto.keyring import Keyring
from ._crypto.master import KmsMasterKey, LocalMasterKey, MasterKey, generate_master_key
from ._errors import (
    BucketNotFoundError,
    ConfigurationError,
    EditError,
    ForeignObjectError,
    IntegrityError,
    InvalidCommandError,
    InvalidPathError,
    LimitExceededError,
    NotADirectoryConflict,
    NoUserError,
    ObjectTooLargeError,
    PathExistsError,
    PathNotFoundError,
    PreconditionFailedError,
    ReadOnlyMountError,
    S3MemoryError,
    StorageAccessDeniedError,
    StorageError,
    StorageUnavailableError,
    TenantKeyError,
    ThreadUserError,
    VersionNotFoundError,
)
from ._factory import MemoryOptions, UserMemories, open_memory
from ._history.entries import MemoryVersion
from ._identity import user_id_for_subject
from ._layout import NameSealing, TenantLayout
from ._paths import MemoryPath, parse_path, validate_tenant
from ._render import format_size
from ._screening.findings import Finding
from ._screening.secrets import Detector, SecretGuard, SensitiveDataError
from ._search.query import SearchResult
from .stores import InMemoryStore, ObjectStore, S3Store

if TYPE_CHECKING:
    from ._admin.expiry import ExpiryReport, StaleMemory, expire_memories
    from ._admin.lifecycle import (
        ErasureReport,
        KeptKey,
        MasterRewrapReport,
        RotationReport,
        VersionExpiryReport,
        erase_tenant,
        expire_noncurrent_versions,
        rewrap_tenant_key,
        rotate_tenant_key,
    )
    from ._admin.manage import MemoryAdmin, MemoryInfo, NotExists, Sha256
    from ._admin.policy import (
        assume_role_request,
        deployment_documents,
        iam_policy,
        kms_key_policy,
        lifecycle_configuration,
    )
    from .integrations.anthropic import AsyncS3MemoryTool, S3MemoryTool
    from .stores import LocalDirStore

# Loaded on first use: a memory's commands never need them, and a Lambda cold start pays for
# every import (about 15 ms for these, with ``_search.index``, which only they load).
_LAZY = {
    **dict.fromkeys(("ExpiryReport", "StaleMemory", "expire_memories"), "._admin.expiry"),
    **dict.fromkeys(
        (
            "ErasureReport",
            "KeptKey",
            "MasterRewrapReport",
            "RotationReport",
            "VersionExpiryReport",
            "erase_tenant",
            "expire_noncurrent_versions",
            "rewrap_tenant_key",
            "rotate_tenant_key",
        ),
        "._admin.lifecycle",
    ),
    **dict.fromkeys(("MemoryAdmin", "MemoryInfo", "NotExists", "Sha256"), "._admin.manage"),
    **dict.fromkeys(
        (
            "assume_role_request",
            "deployment_documents",
            "iam_policy",
            "kms_key_policy",
            "lifecycle_configuration",
        ),
        "._admin.policy",
    ),
    "S3MemoryTool": ".integrations.anthropic",
    "AsyncS3MemoryTool": ".integrations.anthropic",
    "LocalDirStore": ".stores",  # the embedded default's store: a Lambda never loads it
}

__version__ = "0.1.0"

__all__ = [
    "AccessLog",
    "AsyncS3MemoryTool",
    "BucketNotFoundError",
    "ConfigurationError",
    "Detector",
    "EditError",
    "EncryptedMemory",
    "ErasureReport",
    "ExpiryReport",
    "FileEntry",
    "Finding",
    "ForeignObjectError",
    "HistoryKey",
    "InMemoryStore",
    "IntegrityError",
    "InvalidCommandError",
    "InvalidPathError",
    "KeptKey",
    "KeyCache",
    "Keyring",
    "KmsMasterKey",
    "LimitExceededError",
    "Limits",
    "LocalDirStore",
    "LocalMasterKey",
    "MasterKey",
    "MasterRewrapReport",
    "Memory",
    "MemoryAdmin",
    "MemoryInfo",
    "MemoryOptions",
    "MemoryPath",
    "MemoryVersion",
    "Mount",
    "MountedMemory",
    "NameSealing",
    "NoUserError",
    "NotADirectoryConflict",
    "NotExists",
    "ObjectStore",
    "ObjectTooLargeError",
    "PathExistsError",
    "PathNotFoundError",
    "PendingWrite",
    "PreconditionFailedError",
    "ReadOnlyMountError",
    "RotationReport",
    "S3MemoryError",
    "S3MemoryTool",
    "S3Store",
    "SearchResult",
    "SecretGuard",
    "SensitiveDataError",
    "Settings",
    "Sha256",
    "StaleMemory",
    "StorageAccessDeniedError",
    "StorageError",
    "StorageUnavailableError",
    "TenantKeyError",
    "TenantLayout",
    "ThreadUserError",
    "UserMemories",
    "VersionExpiryReport",
    "VersionNotFoundError",
    "WrappedKey",
    "WriteHeldError",
    "assume_role_request",
    "binding_context",
    "deployment_documents",
    "describe_s3_client",
    "erase_tenant",
    "expire_memories",
    "expire_noncurrent_versions",
    "format_size",
    "generate_master_key",
    "iam_policy",
    "kms_client",
    "kms_key_policy",
    "lifecycle_configuration",
    "memory_stores_prompt",
    "open_memory",
    "parse_path",
    "rewrap_tenant_key",
    "rotate_tenant_key",
    "s3_client",
    "tune_session",
    "user_id_for_subject",
    "validate_tenant",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 's3memory' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value
