"""Shared fixtures: moto-backed S3 and KMS, and one memory per backend flavour.

Every test that takes ``memory`` runs against each flavour: the in-memory store, the
local directory store, and S3 (moto) in tenant-key mode with a local master key, in
tenant-key mode with a KMS master key, and in KMS-per-object mode (and a real radosgw
when one runs).

Built on the shipped plugin, ``s3memory.testing`` (loaded in this session through its
``pytest11`` entry point, as in a user's): its constants, fake credentials and moto
request serializer, so the suite tests the kit users get rather than a copy of it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from s3memory import EncryptedMemory, InMemoryStore, KeyCache, LocalDirStore, open_memory
from s3memory._crypto.cache import process_key_cache
from s3memory.testing import (
    TEST_BUCKET,
    TEST_MASTER_KEY,
    TEST_REGION,
    make_moto_requests_atomic,
    use_fake_aws_credentials,
)

# The plugin's (s3memory.testing), under the names the test modules import from here.
BUCKET = TEST_BUCKET
REGION = TEST_REGION
MASTER_KEY = TEST_MASTER_KEY

__all__ = ["BUCKET", "MASTER_KEY", "REGION", "RGW_ENDPOINT", "make_moto_requests_atomic", "use_fake_aws_credentials"]


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto's mock of every AWS service, with fake credentials."""
    from moto import mock_aws

    use_fake_aws_credentials(monkeypatch)
    make_moto_requests_atomic(monkeypatch)
    # A new mocked AWS: the process key cache must not remember the last test's bucket of the
    # same name (its keys, whose documents this bucket lacks).
    process_key_cache().clear()
    with mock_aws():
        yield


@pytest.fixture
def s3_client(aws: None) -> Any:
    import boto3

    client = boto3.client("s3", region_name=REGION)
    client.create_bucket(Bucket=BUCKET)
    return client


@pytest.fixture
def kms_client(aws: None) -> Any:
    import boto3

    return boto3.client("kms", region_name=REGION)


@pytest.fixture
def kms_key_id(kms_client: Any) -> str:
    return str(kms_client.create_key(Description="s3memory test key")["KeyMetadata"]["Arn"])


# A real S3 implementation (Ceph radosgw, started by scripts/radosgw.sh in CI), if any.
RGW_ENDPOINT = os.environ.get("S3MEMORY_TEST_S3_ENDPOINT")


@pytest.fixture
def rgw_client() -> Iterator[Any]:
    """An S3 client on radosgw with a fresh bucket (emptied and removed afterwards)."""
    if not RGW_ENDPOINT:
        pytest.skip("no real S3 server: set S3MEMORY_TEST_S3_ENDPOINT (see scripts/radosgw.sh)")
    import uuid

    import boto3
    from botocore.config import Config

    client = boto3.client(
        "s3",
        endpoint_url=RGW_ENDPOINT,
        region_name=REGION,
        aws_access_key_id=os.environ["S3MEMORY_TEST_S3_ACCESS_KEY"],
        aws_secret_access_key=os.environ["S3MEMORY_TEST_S3_SECRET_KEY"],
        config=Config(s3={"addressing_style": "path"}, retries={"mode": "standard"}, max_pool_connections=32),
    )
    bucket = f"t-{uuid.uuid4().hex[:20]}"
    client.create_bucket(Bucket=bucket)
    client.s3memory_test_bucket = bucket  # type: ignore[attr-defined]
    yield client
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
    client.delete_bucket(Bucket=bucket)


FLAVOURS = ["inmemory", "localdir", "s3-tenant-local", "s3-tenant-kms", "s3-kms", "rgw"]


@pytest.fixture
def make_memory(request: pytest.FixtureRequest, tmp_path: Any) -> Callable[..., EncryptedMemory]:
    """``make_memory(flavour, user_id="alice", **options)``: a fresh memory; every call with
    the same flavour in one test shares the same underlying bucket/store."""
    shared: dict[str, Any] = {}

    def make(flavour: str, user_id: str = "alice", **options: Any) -> EncryptedMemory:
        options.setdefault("key_cache", KeyCache())
        if flavour == "inmemory":
            store = shared.setdefault("inmemory", InMemoryStore())
            return open_memory(user_id=user_id, store=store, master_key=MASTER_KEY, **options)
        if flavour == "localdir":
            store = shared.setdefault("localdir", LocalDirStore(tmp_path / "store"))
            return open_memory(user_id=user_id, store=store, master_key=MASTER_KEY, **options)
        if flavour == "rgw":
            rgw = shared.get("rgw") or shared.setdefault("rgw", request.getfixturevalue("rgw_client"))
            bucket = rgw.s3memory_test_bucket
            return open_memory(user_id=user_id, bucket=bucket, s3_client=rgw, master_key=MASTER_KEY, **options)
        s3 = shared.get("s3") or shared.setdefault("s3", request.getfixturevalue("s3_client"))
        if flavour == "s3-tenant-local":
            return open_memory(user_id=user_id, bucket=BUCKET, s3_client=s3, master_key=MASTER_KEY, **options)
        kms = request.getfixturevalue("kms_client")
        key_id = request.getfixturevalue("kms_key_id")
        if flavour == "s3-tenant-kms":
            return open_memory(
                user_id=user_id, bucket=BUCKET, s3_client=s3, kms_key_id=key_id, kms_client=kms, **options
            )
        if flavour == "s3-kms":
            return open_memory(
                user_id=user_id,
                bucket=BUCKET,
                s3_client=s3,
                kms_key_id=key_id,
                kms_client=kms,
                key_mode="kms",
                **options,
            )
        raise ValueError(flavour)

    return make


@pytest.fixture(params=FLAVOURS)
def flavour(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def memory(make_memory: Callable[..., EncryptedMemory], flavour: str) -> EncryptedMemory:
    return make_memory(flavour)


def pytest_configure(config: pytest.Config) -> None:
    # Never let a test talk to real AWS, whatever the developer's shell has configured.
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
