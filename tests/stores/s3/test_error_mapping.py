"""Every AWS error becomes an s3memory error from one table; nothing raw reaches the model."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
)
from helpers import BUCKET, MASTER_KEY

from s3memory import (
    BucketNotFoundError,
    IntegrityError,
    KeyCache,
    PreconditionFailedError,
    S3MemoryError,
    S3Store,
    StorageAccessDeniedError,
    StorageError,
    StorageUnavailableError,
    open_memory,
)
from s3memory._aws.errors import ERROR_TABLE, map_aws_error


def client_error(code: str, status: int = 400) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "Op")


@pytest.mark.parametrize("code", sorted(ERROR_TABLE))
def test_every_table_entry_maps_to_its_class(code: str) -> None:
    cls, text = ERROR_TABLE[code]
    error = map_aws_error(client_error(code), "get_object")
    assert type(error) is cls
    assert str(error) == f"Error: Memory storage failed during get_object: {text}."


@pytest.mark.parametrize(
    ("exc", "cls"),
    [
        (client_error("SomethingNew", 400), StorageError),
        (client_error("", 412), PreconditionFailedError),
        (client_error("AccessDenied", 403), StorageAccessDeniedError),
        (client_error("SlowDown", 503), StorageUnavailableError),
        (client_error("NoSuchBucket", 404), BucketNotFoundError),
        (client_error("InvalidCiphertextException"), IntegrityError),
        (NoCredentialsError(), StorageAccessDeniedError),
        (EndpointConnectionError(endpoint_url="https://x.invalid"), StorageUnavailableError),
        (ReadTimeoutError(endpoint_url="https://x.invalid"), StorageUnavailableError),
        (BotoCoreError(), StorageError),
    ],
)
def test_mapping_of_kinds(exc: BaseException, cls: type[S3MemoryError]) -> None:
    error = map_aws_error(exc, "put_object")
    assert type(error) is cls
    assert str(error).startswith("Error: Memory storage failed during put_object")
    assert "\n" not in str(error)


def test_unknown_codes_name_the_code_and_nothing_else() -> None:
    error = map_aws_error(client_error("WeirdThing"), "list_objects_v2")
    assert str(error) == "Error: Memory storage failed during list_objects_v2: the request failed (WeirdThing)."


def _failing(client: Any, operation: str, exc: BaseException) -> None:
    def fail(**_: Any) -> None:
        raise exc

    client.meta.events.register(f"before-call.s3.{operation}", fail)


S3_OPERATIONS = {
    "GetObject": lambda s: s.get("k"),
    "HeadObject": lambda s: s.head("k"),
    "PutObject": lambda s: s.put("k", b"x", {}),
    "CopyObject": lambda s: s.copy("k", "k2", metadata={}),
    "ListObjectsV2": lambda s: list(s.list("p/")),
    "DeleteObjects": lambda s: s.delete(["k"]),
}


@pytest.mark.parametrize("operation", sorted(S3_OPERATIONS))
@pytest.mark.parametrize(
    "exc",
    [client_error("AccessDenied", 403), client_error("SlowDown", 503), EndpointConnectionError(endpoint_url="u")],
    ids=["denied", "throttled", "network"],
)
def test_s3_store_never_leaks_botocore_errors(s3_client: Any, operation: str, exc: BaseException) -> None:
    # "k" exists: a 403 on reading a missing key means "missing" (see test_stores), not a refusal
    s3_client.put_object(Bucket=BUCKET, Key="k", Body=b"x")
    _failing(s3_client, operation, exc)
    with pytest.raises(S3MemoryError) as info:
        S3_OPERATIONS[operation](S3Store(BUCKET, s3_client))
    assert not isinstance(info.value, (ClientError, BotoCoreError))
    assert info.value.__cause__ is exc


def test_tool_reports_storage_failures_as_tool_errors(s3_client: Any) -> None:
    from anthropic.lib.tools import ToolError

    from s3memory import S3MemoryTool

    tool = S3MemoryTool(
        bucket=BUCKET, user_id="alice", s3_client=s3_client, master_key=MASTER_KEY, key_cache=KeyCache()
    )
    _failing(s3_client, "ListObjectsV2", client_error("AccessDenied", 403))
    with pytest.raises(ToolError) as info:
        tool.call({"command": "view", "path": "/memories"})
    assert str(info.value) == (
        "Error: Memory storage failed during list_objects_v2: access to the memory store was denied."
    )


def test_kms_failures_are_mapped(s3_client: Any, kms_client: Any, kms_key_id: str) -> None:
    memory = open_memory(
        user_id="alice",
        bucket=BUCKET,
        s3_client=s3_client,
        kms_key_id=kms_key_id,
        kms_client=kms_client,
        key_cache=KeyCache(),
    )

    def throttle(**_: Any) -> None:
        raise client_error("ThrottlingException", 400)

    kms_client.meta.events.register("before-call.kms.Encrypt", throttle)
    with pytest.raises(StorageUnavailableError) as info:
        memory.create("/memories/a.md", "x")
    assert str(info.value) == (
        "Error: Memory storage failed during kms:encrypt: requests are being throttled; try again shortly."
    )
    assert memory.view("/memories").endswith("0B\t/memories")  # nothing was written


def test_default_clients_retry_on_purpose(aws: None) -> None:
    from s3memory._factory import default_kms_client
    from s3memory.stores._s3 import default_s3_client

    for client in (default_s3_client(region_name="us-east-1"), default_kms_client()):
        retries = client.meta.config.retries
        assert retries["mode"] == "standard" and retries["total_max_attempts"] == 3


def test_missing_region_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from s3memory import ConfigurationError, InMemoryStore

    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    with pytest.raises(ConfigurationError, match="no AWS region for KMS"):
        open_memory(user_id="alice", store=InMemoryStore(), kms_key_id="alias/x")
