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
