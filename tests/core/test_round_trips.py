"""Requests per command, counted at the boto3 client (deterministic, so asserted exactly).

The budget is in DESIGN.md ("Round trips: the budget"). Latency is for bench/, not tests.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import BUCKET, MASTER_KEY
from helpers.meter import Meter

from s3memory import KeyCache, open_memory


@pytest.fixture
def tenant_mode(s3_client: Any, kms_client: Any, kms_key_id: str) -> tuple[Any, Meter]:
    """A memory in a bucket that keeps versions, as the Lambda template makes it: every
    change also leaves its history record, beside it in the same round trip."""
    s3_client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    memory = open_memory(
        user_id="alice",
        bucket=BUCKET,
        s3_client=s3_client,
        kms_key_id=kms_key_id,
        kms_client=kms_client,
        key_cache=KeyCache(),
    )
    return memory, Meter(s3_client, kms_client)


def test_first_command_creates_the_tenant_key_once(tenant_mode: tuple[Any, Meter]) -> None:
    memory, meter = tenant_mode
    memory.create("/memories/a.md", "x")
    # The command's LIST, and before the key is created a LIST that finds no files (a key
    # document missing beside files is refused, never silently replaced); once per process,
    # alongside, a HEAD that finds no names key (a memory written with encrypted names is
    # refused when opened without them); whether the bucket keeps versions (once per store,
    # before its first write: later writes' answers say so); the history key, looked for and
    # created like the tenant key (a GET, a LIST that finds no record sealed under an earlier
    # one, a KMS Encrypt; its PUT just before the first record sealed under it); a HEAD of the
    # path (a file there is refused before anything is written); the file's PUT (the tenant
    # key's just before it) and beside it its history record's.
    assert meter.take() == {
        "ListObjectsV2": 3,
        "GetObject": 2,
        "PutObject": 4,
        "Encrypt": 2,
        "HeadObject": 2,
        "GetBucketVersioning": 1,
    }
    memory.create("/memories/b.md", "x")
    assert meter.take() == {"ListObjectsV2": 1, "HeadObject": 1, "PutObject": 2}


def test_a_cold_process_unwraps_the_tenant_key_with_one_kms_call(
    s3_client: Any, kms_client: Any, kms_key_id: str
) -> None:
    options = {
        "user_id": "alice",
        "bucket": BUCKET,
        "s3_client": s3_client,
        "kms_key_id": kms_key_id,
        "kms_client": kms_client,
    }
    open_memory(key_cache=KeyCache(), **options).create("/memories/a.md", "x")
    meter = Meter(s3_client, kms_client)
    cold = open_memory(key_cache=KeyCache(), **options)
    cold.view("/memories/a.md")
    assert meter.take() == {"GetObject": 2, "Decrypt": 1}
    cold.view("/memories/a.md")
    assert meter.take() == {"GetObject": 1}


def test_warm_tenant_mode_request_budget(tenant_mode: tuple[Any, Meter]) -> None:
    memory, meter = tenant_mode
    memory.create("/memories/warmup", "x")
    memory.create("/memories/d/x.md", "1\n2\n")
    meter.take()

    memory.view("/memories/d/x.md")
    assert meter.take() == {"GetObject": 1}
    memory.view("/memories")
    assert meter.take() == {"ListObjectsV2": 1}
    memory.view("/memories/d")
    assert meter.take() == {"GetObject": 1, "ListObjectsV2": 1}
    memory.view("/memories/d/")  # written as a directory: listed first, one request
    assert meter.take() == {"ListObjectsV2": 1}
    # a directory check, a HEAD of the path and two ancestor checks, concurrently; then the
    # file and its history record, concurrently
    memory.create("/memories/d/e/f.md", "x")
    assert meter.take() == {"ListObjectsV2": 1, "HeadObject": 3, "PutObject": 2}
    memory.str_replace("/memories/d/x.md", "1", "one")
    assert meter.take() == {"GetObject": 1, "PutObject": 2}
    memory.insert("/memories/d/x.md", 0, "zero")
    assert meter.take() == {"GetObject": 1, "PutObject": 2}
    # checks and a look for an unfinished attempt (GET); the copy (one file writes no intent
    # record); the source's DeleteObjects, and beside it the history record under the old
    # and the new path (two PUTs)
    memory.rename("/memories/d/x.md", "/memories/y.md")
    assert meter.take() == {
        "HeadObject": 2,
        "ListObjectsV2": 2,
        "GetObject": 1,
        "PutObject": 2,
        "CopyObject": 1,
        "DeleteObjects": 1,
    }
    memory.delete("/memories/y.md")  # and beside the delete, its history record
    assert meter.take() == {"HeadObject": 1, "ListObjectsV2": 1, "DeleteObjects": 1, "PutObject": 1}


def test_rename_and_delete_of_a_directory_scale_per_file(tenant_mode: tuple[Any, Meter]) -> None:
    memory, meter = tenant_mode
    for i in range(25):
        memory.create(f"/memories/big/f{i:02d}.md", str(i))
    meter.take()
    memory.rename("/memories/big", "/memories/moved")
    # the source key itself, the listing, destination checks; then per file HEAD + COPY
    assert meter.take() == {
        "HeadObject": 2 + 25,
        "ListObjectsV2": 2,
        "GetObject": 1,
        "PutObject": 1 + 2,  # the intent record; one history record each under old and new
        "CopyObject": 25,
        "DeleteObjects": 1,
    }
    memory.delete("/memories/moved")  # one history record for the directory, not one per file
    assert meter.take() == {"HeadObject": 1, "ListObjectsV2": 1, "DeleteObjects": 1, "PutObject": 1}


def test_kms_per_object_mode_data_key_requests(s3_client: Any, kms_client: Any, kms_key_id: str) -> None:
    options = {"user_id": "alice", "bucket": BUCKET, "s3_client": s3_client, "kms_client": kms_client}
    memory = open_memory(kms_key_id=kms_key_id, key_mode="kms", key_cache=KeyCache(), **options)
    meter = Meter(s3_client, kms_client)
    memory.create("/memories/a.md", "x")
    # alongside, once per key cache lifetime a HEAD that finds no names key, and once per store
    # whether the bucket keeps versions (it does not: no history record, no history key); a HEAD of the path
    assert meter.take() == {
        "ListObjectsV2": 1,
        "GenerateDataKey": 1,
        "PutObject": 1,
        "HeadObject": 2,
        "GetBucketVersioning": 1,
    }
    memory.create("/memories/b.md", "x")
    assert meter.take() == {"ListObjectsV2": 1, "GenerateDataKey": 1, "PutObject": 1, "HeadObject": 1}
    # Every version gets a data key of its own (none can be spliced onto another's metadata):
    # the edit's GenerateDataKey goes alongside its GET, and the read needs no Decrypt (the
    # key was cached at creation).
    memory.str_replace("/memories/a.md", "x", "y")
    assert meter.take() == {"GetObject": 1, "GenerateDataKey": 1, "PutObject": 1}
    memory.view("/memories/a.md")
    assert meter.take() == {"GetObject": 1}
    cold = open_memory(kms_key_id=kms_key_id, key_mode="kms", key_cache=KeyCache(), **options)
    cold.view("/memories/a.md")
    assert meter.take() == {"GetObject": 1, "Decrypt": 1}
    cold.view("/memories/a.md")
    assert meter.take() == {"GetObject": 1}


def test_local_master_key_mode_never_calls_kms(s3_client: Any, kms_client: Any) -> None:
    memory = open_memory(
        user_id="alice", bucket=BUCKET, s3_client=s3_client, master_key=MASTER_KEY, key_cache=KeyCache()
    )
    meter = Meter(s3_client, kms_client)
    memory.create("/memories/a.md", "x")
    memory.view("/memories/a.md")
    calls = meter.take()
    assert not {"Encrypt", "Decrypt", "GenerateDataKey"} & calls.keys()


def test_history_requests(s3_client: Any, kms_client: Any, kms_key_id: str) -> None:
    """``history``: one round trip lists the versions of the key and the records about the path
    and each of its directories, whose names hold each version's provenance."""
    s3_client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    memory = open_memory(
        user_id="alice", bucket=BUCKET, s3_client=s3_client, master_key=MASTER_KEY, key_cache=KeyCache()
    )
    memory.create("/memories/d/a.md", "1\n")
    for n in range(2, 5):
        memory.str_replace("/memories/d/a.md", str(n - 1), str(n))
    memory.delete("/memories/d/a.md")
    meter = Meter(s3_client, kms_client)
    entries = memory.history("/memories/d/a.md")
    assert [e.operation for e in entries] == ["deleted", "modified", "modified", "modified", "created"]
    # One round trip: the versions of the key, and the records of the path, of /memories/d
    # and of /memories (the records are sealed in their names: no HEAD, no GET). Whether the
    # bucket keeps versions was asked once, by the first write.
    assert meter.take() == {"ListObjectVersions": 1 + 3}
    memory.history("/memories/d/a.md")
    assert meter.take() == {"ListObjectVersions": 1 + 3}
    # restore: the version, the current file, the shape checks create makes (a directory
    # there? a file above?) and a data key (local here); then the PUT. The file was deleted,
    # so its last version before that is looked up too (for its file id).
    oldest = entries[-1].version
    memory.restore("/memories/d/a.md", oldest)
    assert meter.take() == {
        "GetObject": 1,
        "HeadObject": 1 + 1 + 1,
        "ListObjectsV2": 1,
        "ListObjectVersions": 1,
        "PutObject": 2,  # the file and, beside it, its history record
    }
    memory.restore("/memories/d/a.md", entries[1].version)  # over a current version: two round trips
    assert meter.take() == {"GetObject": 1, "HeadObject": 2, "ListObjectsV2": 1, "PutObject": 2}
