"""One contract suite for every object store: in-memory, local directory, S3 (moto).

A store that cannot pass a test marks it; it never gets a copy of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import BUCKET

from s3memory import InMemoryStore, LocalDirStore, ObjectStore, PreconditionFailedError, S3Store, StorageError


@pytest.fixture(params=["inmemory", "localdir", "s3", "rgw"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ObjectStore]:
    if request.param == "inmemory":
        yield InMemoryStore()
    elif request.param == "localdir":
        yield LocalDirStore(tmp_path / "store")
    elif request.param == "rgw":  # Ceph radosgw, a real S3 server (skipped when not running)
        client = request.getfixturevalue("rgw_client")
        yield S3Store(client.s3memory_test_bucket, client)
    else:
        yield S3Store(BUCKET, request.getfixturevalue("s3_client"))


def lacks(request: pytest.FixtureRequest, backends: dict[str, str]) -> None:
    """Mark the test as an expected failure on backends that lack the feature."""
    backend = request.node.callspec.params["store"]
    if backend in backends:
        pytest.xfail(backends[backend])


META = {"x-amz-c": "115", "x-amz-w": "02"}


def test_get_and_head_of_missing_key_are_none(store: ObjectStore) -> None:
    assert store.get("t/memories/nope") is None
    assert store.head("t/memories/nope") is None


def test_put_get_head_round_trip(store: ObjectStore) -> None:
    etag = store.put("t/memories/a", b"\x00body\xff", META)
    got = store.get("t/memories/a")
    assert got is not None
    assert got.body == b"\x00body\xff"
    assert dict(got.metadata) == META
    assert got.etag == etag
    head = store.head("t/memories/a")
    assert head is not None
    assert (head.size, head.etag, dict(head.metadata)) == (6, etag, META)


def test_put_if_none_match_refuses_existing(store: ObjectStore) -> None:
    store.put("t/k", b"one", {}, if_none_match=True)
    with pytest.raises(PreconditionFailedError):
        store.put("t/k", b"two", {}, if_none_match=True)
    got = store.get("t/k")
    assert got is not None and got.body == b"one"


def test_put_if_match_is_compare_and_swap(store: ObjectStore) -> None:
    first = store.put("t/k", b"one", {})
    second = store.put("t/k", b"two", {}, if_match=first)
    assert second != first
    with pytest.raises(PreconditionFailedError):
        store.put("t/k", b"three", {}, if_match=first)
    got = store.get("t/k")
    assert got is not None and got.body == b"two"


def test_put_if_match_on_missing_key_fails(store: ObjectStore) -> None:
    with pytest.raises(PreconditionFailedError):
        store.put("t/gone", b"x", {}, if_match='"0123456789abcdef0123456789abcdef"')
    assert store.get("t/gone") is None


def test_copy_replaces_metadata_and_keeps_body(store: ObjectStore) -> None:
    etag = store.put("t/src", b"payload", {"a": "1"})
    store.copy("t/src", "t/dir/dst", metadata={"b": "2"}, if_match=etag)
    got = store.get("t/dir/dst")
    assert got is not None
    assert got.body == b"payload" and dict(got.metadata) == {"b": "2"}
    src = store.get("t/src")
    assert src is not None and dict(src.metadata) == {"a": "1"}


def test_copy_of_missing_source_fails(store: ObjectStore) -> None:
    with pytest.raises(PreconditionFailedError):
        store.copy("t/none", "t/dst", metadata={})
    assert store.get("t/dst") is None


def test_copy_source_if_match(store: ObjectStore, request: pytest.FixtureRequest) -> None:
    lacks(
        request,
        {
            "s3": "moto ignores CopySourceIfMatch (real S3 honours it)",
            "rgw": "radosgw 16 reads x-amz-copy-if-match, not x-amz-copy-source-if-match (ceph tracker 40808)",
        },
    )
    store.put("t/src", b"v1", {})
    with pytest.raises(PreconditionFailedError):
        store.copy("t/src", "t/dst", metadata={}, if_match='"0123456789abcdef0123456789abcdef"')


def test_list_is_prefix_scoped_sorted_and_sized(store: ObjectStore) -> None:
    for key in ["t/m/b", "t/m/a/x", "t/m/a/y", "t/mm/z", "u/m/a"]:
        store.put(key, key.encode(), {})
    listed = list(store.list("t/m/"))
    assert [i.key for i in listed] == ["t/m/a/x", "t/m/a/y", "t/m/b"]
    assert [i.size for i in listed] == [7, 7, 5]
    assert [i.key for i in store.list("t/m/", limit=1)] == ["t/m/a/x"]
    assert list(store.list("t/nothing/")) == []


def test_list_pages_beyond_one_thousand(store: ObjectStore, request: pytest.FixtureRequest) -> None:
    keys = [f"t/many/{i:05d}" for i in range(1005)]
    for key in keys:
        store.put(key, b"", {})
    assert [i.key for i in store.list("t/many/")] == keys


def test_delete_many_and_missing(store: ObjectStore) -> None:
    for key in ["t/a", "t/d/b", "t/d/c"]:
        store.put(key, b"x", {})
    store.delete(["t/a", "t/d/b", "t/missing"])
    assert [i.key for i in store.list("t/")] == ["t/d/c"]
    store.delete([])
    store.delete(["t/d/c"])
    assert list(store.list("t/")) == []


def test_delete_more_than_one_batch(store: ObjectStore) -> None:
    keys = [f"t/bulk/{i:05d}" for i in range(1001)]
    for key in keys:
        store.put(key, b"", {})
    store.delete(keys)
    assert list(store.list("t/bulk/")) == []


def test_key_reused_as_directory_after_delete(store: ObjectStore) -> None:
    store.put("t/x/y", b"1", {})
    store.delete(["t/x/y"])
    store.put("t/x", b"2", {})
    got = store.get("t/x")
    assert got is not None and got.body == b"2"


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


def test_copy_if_none_match_never_overwrites(store: ObjectStore, request: pytest.FixtureRequest) -> None:
    lacks(
        request,
        {
            "s3": "moto ignores If-None-Match on CopyObject (real S3 honours it)",
            "rgw": "radosgw 16 ignores If-None-Match on CopyObject",
        },
    )
    store.put("t/src", b"new", {})
    store.put("t/dst", b"theirs", {})
    with pytest.raises(PreconditionFailedError):
        store.copy("t/src", "t/dst", metadata={}, if_none_match=True)
    got = store.get("t/dst")
    assert got is not None and got.body == b"theirs"
    store.copy("t/src", "t/fresh", metadata={}, if_none_match=True)


def test_conditional_delete_keeps_changed_objects(store: ObjectStore, request: pytest.FixtureRequest) -> None:
    lacks(
        request,
        {
            "s3": "moto ignores the ETag condition in DeleteObjects (real S3 honours it)",
            "rgw": "radosgw 16 ignores the ETag condition in DeleteObjects",
        },
    )
    first = store.put("t/a", b"v1", {})
    store.put("t/a", b"v2", {})  # changed since its ETag was read
    unchanged = store.put("t/b", b"b", {})
    with pytest.raises(PreconditionFailedError):
        store.delete(["t/a", "t/b"], if_match={"t/a": first, "t/b": unchanged})
    assert [i.key for i in store.list("t/")] == ["t/a"]


# --- purge: every object (and version) under a prefix, for erasing a tenant --------------


def test_purge_is_prefix_scoped(store: ObjectStore) -> None:
    for key in ["t/a", "t/d/b", "t/.s3memory/tenant-key", "t2/a", "tt/a", "u/t/a"]:
        store.put(key, b"x", {})
    assert store.purge("t/") == 3
    assert [i.key for i in store.list("t/")] == []
    assert sorted(i.key for p in ("t2/", "tt/", "u/") for i in store.list(p)) == ["t2/a", "tt/a", "u/t/a"]
    assert store.purge("t/") == 0  # nothing left: not an error


def test_purge_with_suffix_keeps_the_rest(store: ObjectStore) -> None:
    for key in ["t/.s3memory/tenant-key", "t/.s3memory/names-key", "t/.s3memory/intents/x", "t/memories/a-key"]:
        store.put(key, b"x", {})
    assert store.purge("t/.s3memory/", suffix="-key") == 2
    assert [i.key for i in store.list("t/")] == ["t/.s3memory/intents/x", "t/memories/a-key"]


@pytest.mark.parametrize("prefix", ["", "t", "/t/", "t//", "t/a"])
def test_purge_refuses_a_prefix_that_is_not_a_directory(store: ObjectStore, prefix: str) -> None:
    store.put("t/a", b"x", {})
    with pytest.raises(ValueError):
        store.purge(prefix)
    assert [i.key for i in store.list("t/")] == ["t/a"]


def test_purge_more_than_one_batch(store: ObjectStore) -> None:
    keys = [f"t/bulk/{i:05d}" for i in range(1001)]
    for key in keys:
        store.put(key, b"", {})
    store.put("t/bulk-other", b"", {})
    assert store.purge("t/bulk/") == 1001
    assert [i.key for i in store.list("t/")] == ["t/bulk-other"]


def test_purge_removes_every_version_and_delete_marker(store: ObjectStore) -> None:
    if not isinstance(store, S3Store):
        pytest.skip("only S3 keeps versions")
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
