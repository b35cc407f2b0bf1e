"""The store contract (``s3memory.testing.ObjectStoreContract``) on every store s3memory
ships: in-memory, local directory, S3 (moto), a real radosgw (when one runs) and a
``DelegatingStore``; then what is particular to one store.

A store that cannot pass a test declares it in ``lacks``; it never gets a copy of its own.
The test still runs, as a strict expected failure: should it pass, the declaration is stale
and the test fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest
from conftest import BUCKET

from s3memory import InMemoryStore, LocalDirStore, ObjectStore, S3Store, StorageError
from s3memory.stores import DelegatingStore
from s3memory.testing import ObjectStoreContract


class TestInMemoryStore(ObjectStoreContract):
    @pytest.fixture
    def store(self) -> ObjectStore:
        return InMemoryStore()


class TestLocalDirStore(ObjectStoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> ObjectStore:
        return LocalDirStore(tmp_path / "store")


class TestDelegatingStore(ObjectStoreContract):
    """The base of the test doubles that count requests or inject faults forwards every verb."""

    @pytest.fixture
    def store(self) -> ObjectStore:
        return DelegatingStore(InMemoryStore())


class S3Contract(ObjectStoreContract):
    """The contract, and what only S3 has: versions (not collected: no ``Test`` prefix)."""

    def test_purge_removes_every_version_and_delete_marker(self, store: ObjectStore) -> None:
        assert isinstance(store, S3Store)
        store.client.put_bucket_versioning(Bucket=store.bucket, VersioningConfiguration={"Status": "Enabled"})
        for body in (b"v1", b"v2", b"v3"):
            store.put("t/a", body, {})
            store.put("t2/a", body, {})
        store.put("t/b", b"b", {})
        store.delete(["t/b"])  # a delete marker over one version
        assert store.purge("t/") == 5  # three versions of t/a, one of t/b, one delete marker
        left = store.client.list_object_versions(Bucket=store.bucket, Prefix="t/")
        assert left.get("Versions", []) == [] and left.get("DeleteMarkers", []) == []
        others = store.client.list_object_versions(Bucket=store.bucket, Prefix="t2/")
        assert len(others["Versions"]) == 3
        assert store.purge("t2/") == 3  # leaves the bucket empty for the fixture's clean-up


class TestS3Store(S3Contract):
    """On moto."""

    lacks: ClassVar[Mapping[str, str]] = {
        "copy_if_match": "moto ignores CopySourceIfMatch (real S3 honours it)",
        "copy_if_none_match": "moto ignores If-None-Match on CopyObject (real S3 honours it)",
        "delete_if_match": "moto ignores the ETag condition in DeleteObjects (real S3 honours it)",
    }

    @pytest.fixture
    def store(self, s3_client: Any) -> ObjectStore:
        return S3Store(BUCKET, s3_client)


class TestRadosgwStore(S3Contract):
    """On Ceph radosgw, a real S3 server (skipped unless S3MEMORY_TEST_S3_ENDPOINT is set)."""

    lacks: ClassVar[Mapping[str, str]] = {
        "copy_if_match": "radosgw 16 reads x-amz-copy-if-match, not x-amz-copy-source-if-match (ceph tracker 40808)",
        "copy_if_none_match": "radosgw 16 ignores If-None-Match on CopyObject",
        "delete_if_match": "radosgw 16 ignores the ETag condition in DeleteObjects",
    }

    @pytest.fixture
    def store(self, rgw_client: Any) -> ObjectStore:
        return S3Store(rgw_client.s3memory_test_bucket, rgw_client)


# --- the contract's own ---------------------------------------------------------------------

STALE_DECLARATION = """
import pytest

from s3memory.stores import InMemoryStore
from s3memory.testing import ObjectStoreContract


class TestStale(ObjectStoreContract):
    lacks = {"delete_if_match": "declared, though the in-memory store has it"}

    @pytest.fixture
    def store(self):
        return InMemoryStore()
"""


def test_a_stale_declaration_of_a_gap_fails(tmp_path: Path) -> None:
    """A store declaring a capability it has: the test of that capability runs, passes, and
    so fails as a strict expected failure, whose report says the declaration is stale; the
    other tests are untouched."""
    (tmp_path / "test_stale.py").write_text(STALE_DECLARATION)
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
    env = {name: value for name, value in os.environ.items() if name != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-p", "no:randomly", "test_stale.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    outcomes = {
        line.split()[0].rsplit("::", 1)[1]: line.split()[1]
        for line in result.stdout.splitlines()
        if line.startswith("test_stale.py::TestStale::")
    }
    assert outcomes.pop("test_conditional_delete_keeps_changed_objects") == "FAILED", output
    assert outcomes and set(outcomes.values()) == {"PASSED"}, output
    assert (
        "[XPASS(strict)] the store lacks delete_if_match: declared, though the in-memory store has it "
        "(strict: should this test pass, the declaration in TestStale.lacks is stale)"
    ) in result.stdout, output


# --- one store's own ------------------------------------------------------------------------


def test_local_store_refuses_escaping_keys(tmp_path: Path) -> None:
    store = LocalDirStore(tmp_path / "store")
    for key in ["../evil", "t/../../evil", "/abs", "t//x", ".lock", "t/./x", "t/\x00"]:
        with pytest.raises(StorageError):
            store.put(key, b"x", {})
    assert not (tmp_path / "evil").exists()
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == [".tmp"]


def test_local_store_files_are_private(tmp_path: Path) -> None:
    store = LocalDirStore(tmp_path / "store")
    store.put("t/memories/a", b"x", {})
    assert (tmp_path / "store" / "t" / "memories" / "a").stat().st_mode & 0o077 == 0
    assert (tmp_path / "store" / "t").stat().st_mode & 0o077 == 0


def test_s3_errors_are_mapped(aws: Any) -> None:
    import boto3

    from s3memory import BucketNotFoundError

    store = S3Store("no-such-bucket-here", boto3.client("s3", region_name="us-east-1"))
    with pytest.raises(BucketNotFoundError) as info:
        store.put("k", b"x", {})
    assert str(info.value).startswith("Error: Memory storage failed during put_object")
    assert info.value.__cause__ is not None


def test_local_store_purges_corrupt_files(tmp_path: Path) -> None:
    store = LocalDirStore(tmp_path / "store")
    store.put("t/memories/a", b"x", {})
    (tmp_path / "store" / "t" / "memories" / "broken").write_bytes(b"not an object")
    assert [i.key for i in store.list("t/")] == ["t/memories/a"]  # a listing skips it ...
    assert store.purge("t/") == 2  # ... a purge does not
    assert not (tmp_path / "store" / "t").exists()


class PrefixScopedClient:
    """A boto3 S3 client as a role with ListBucket only under an ``s3:prefix`` condition
    sees S3: GET and HEAD of a missing key answer 403, not 404 (``deny_existing`` also
    refuses existing keys, as a role without GetObject would)."""

    def __init__(self, inner: Any, *, deny_existing: bool = False) -> None:
        self._inner, self.meta, self.deny_existing = inner, inner.meta, deny_existing

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _read(self, operation: str, **kwargs: Any) -> Any:
        from botocore.exceptions import ClientError

        refusal = {
            "Error": {"Code": "AccessDenied", "Message": "Access Denied"},
            "ResponseMetadata": {"HTTPStatusCode": 403},
        }
        try:
            response = getattr(self._inner, operation)(**kwargs)
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("NoSuchKey", "404"):
                raise ClientError(refusal, operation) from None  # type: ignore[arg-type]
            raise
        if self.deny_existing:
            raise ClientError(refusal, operation)  # type: ignore[arg-type]
        return response

    def get_object(self, **kwargs: Any) -> Any:
        return self._read("get_object", **kwargs)

    def head_object(self, **kwargs: Any) -> Any:
        return self._read("head_object", **kwargs)


def test_a_403_for_a_missing_key_reads_as_missing(s3_client: Any) -> None:
    from conftest import BUCKET, MASTER_KEY

    from s3memory import KeyCache, PathNotFoundError, StorageAccessDeniedError, open_memory
    from s3memory.stores import S3Store

    store = S3Store(BUCKET, PrefixScopedClient(s3_client))
    assert store.get("alice/memories/none") is None and store.head("alice/memories/none") is None
    memory = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    assert memory.create("/memories/a.md", "hi") == "File created successfully at: /memories/a.md"
    assert memory.read_text("/memories/a.md") == "hi"
    with pytest.raises(PathNotFoundError):
        memory.view("/memories/none.md")
    # a refusal of a key that exists stays a refusal
    refusing = S3Store(BUCKET, PrefixScopedClient(s3_client, deny_existing=True))
    with pytest.raises(StorageAccessDeniedError):
        refusing.get("alice/memories/a.md")
    with pytest.raises(StorageAccessDeniedError):
        refusing.head("alice/memories/a.md")
