"""The store contract (``s3memory.testing.ObjectStoreContract``) on every store s3memory
ships: in-memory and local directory (each keeping versions, and not), S3 on moto (a
versioned bucket, and one never versioned), a real radosgw (when one runs) and a
``DelegatingStore``; then what is particular to one store.

A store that cannot pass a test declares it in ``lacks``; it never gets a copy of its own.
The test still runs, as a strict expected failure: should it pass, the declaration is stale
and the test fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest
from helpers import BUCKET
from helpers.buckets import remove_every_version

from s3memory import InMemoryStore, LocalDirStore, ObjectStore, S3Store, StorageError
from s3memory.stores import DelegatingStore
from s3memory.testing import ObjectStoreContract

NO_VERSIONS = "it keeps only the current version of each object"
MOTO_GAPS: dict[str, str] = {
    "copy_if_match": "moto ignores CopySourceIfMatch (real S3 honours it)",
    "copy_if_none_match": "moto ignores If-None-Match on CopyObject (real S3 honours it)",
    "delete_if_match": "moto ignores the ETag condition in DeleteObjects (real S3 honours it)",
}


class TestInMemoryStore(ObjectStoreContract):
    @pytest.fixture
    def store(self) -> ObjectStore:
        return InMemoryStore()


class TestUnversionedInMemoryStore(ObjectStoreContract):
    lacks: ClassVar[Mapping[str, str]] = {"versions": NO_VERSIONS + " (versioned=False)"}

    @pytest.fixture
    def store(self) -> ObjectStore:
        return InMemoryStore(versioned=False)


class TestLocalDirStore(ObjectStoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> ObjectStore:
        return LocalDirStore(tmp_path / "store")


class TestUnversionedLocalDirStore(ObjectStoreContract):
    lacks: ClassVar[Mapping[str, str]] = {"versions": NO_VERSIONS + " (versioned=False)"}

    @pytest.fixture
    def store(self, tmp_path: Path) -> ObjectStore:
        return LocalDirStore(tmp_path / "store", versioned=False)


class TestDelegatingStore(ObjectStoreContract):
    """The base of the test doubles that count requests or inject faults forwards every verb."""

    @pytest.fixture
    def store(self) -> ObjectStore:
        return DelegatingStore(InMemoryStore())


class TestS3Store(ObjectStoreContract):
    """On moto, a bucket without versioning."""

    lacks: ClassVar[Mapping[str, str]] = {**MOTO_GAPS, "versions": "the bucket's versioning is not enabled"}

    @pytest.fixture
    def store(self, s3_client: Any) -> ObjectStore:
        return S3Store(BUCKET, s3_client)


class TestVersionedS3Store(ObjectStoreContract):
    """On moto, a versioned bucket."""

    lacks: ClassVar[Mapping[str, str]] = MOTO_GAPS

    @pytest.fixture
    def store(self, s3_client: Any) -> ObjectStore:
        s3_client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        return S3Store(BUCKET, s3_client)


class TestRadosgwStore(ObjectStoreContract):
    """On Ceph radosgw, a real S3 server (skipped unless S3MEMORY_TEST_S3_ENDPOINT is set).

    radosgw 16 refuses every ``If-Match`` PUT on a versioned bucket (412) and ignores
    ``If-None-Match`` there, so the tests of versions (``test_versions_...``, which need no
    precondition) get a versioned bucket, and the others an unversioned one."""

    lacks: ClassVar[Mapping[str, str]] = {
        "copy_if_match": "radosgw 16 reads x-amz-copy-if-match, not x-amz-copy-source-if-match (ceph tracker 40808)",
        "copy_if_none_match": "radosgw 16 ignores If-None-Match on CopyObject",
        "delete_if_match": "radosgw 16 ignores the ETag condition in DeleteObjects",
    }

    @pytest.fixture
    def store(self, rgw_client: Any, request: pytest.FixtureRequest) -> Iterator[ObjectStore]:
        bucket = rgw_client.s3memory_test_bucket
        if request.function.__name__.startswith("test_versions_"):
            rgw_client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        yield S3Store(bucket, rgw_client)
        remove_every_version(rgw_client, bucket)  # rgw_client's own clean-up removes current objects only


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


@pytest.mark.slow  # a pytest subprocess
def test_a_stale_declaration_of_a_gap_fails(tmp_path: Path) -> None:
    """A store declaring a capability it has: the test of that capability runs, passes, and
    so fails as a strict expected failure, whose report says the declaration is stale; the
    other tests are untouched."""
    (tmp_path / "test_stale.py").write_text(STALE_DECLARATION)
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
    env = {name: value for name, value in os.environ.items() if name != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-v",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:asyncio",
            "-p",
            "no:randomly",
            "test_stale.py",
        ],
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
    from helpers import BUCKET, MASTER_KEY

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


# --- versions: what is particular to one store ------------------------------------------------


def test_s3_keeps_versions_is_the_buckets_versioning_asked_once(s3_client: Any) -> None:
    asked: list[str] = []
    s3_client.meta.events.register("before-call.s3.GetBucketVersioning", lambda **_: asked.append("asked"))
    store = S3Store(BUCKET, s3_client)
    assert store.keeps_versions() is False and store.keeps_versions() is False and len(asked) == 1
    s3_client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    assert store.keeps_versions() is False  # the answer is kept for the store's life
    assert S3Store(BUCKET, s3_client).keeps_versions() is True
    s3_client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Suspended"})
    assert S3Store(BUCKET, s3_client).keeps_versions() is False
    assert len(asked) == 3


def test_s3_version_calls_on_a_missing_bucket_are_mapped(aws: Any) -> None:
    import boto3

    from s3memory import BucketNotFoundError

    store = S3Store("no-such-bucket-here", boto3.client("s3", region_name="us-east-1"))
    for call in (
        store.keeps_versions,
        lambda: list(store.list_versions("t/")),
        lambda: S3Store("no-such-bucket-here", store.client).get_version("t/a", "x"),
    ):
        with pytest.raises(BucketNotFoundError):
            call()


def test_s3_lists_versions_in_order_across_pages(s3_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages of one to four entries (moto's MaxKeys default): a page may start inside a key's
    history, between a version and a delete marker of the same second."""
    s3_client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    store = S3Store(BUCKET, s3_client)
    made: list[tuple[str, bool, str]] = []
    for key, steps in (("t/a", "1-23-4--5"), ("t/b", "1"), ("t/c", "12-")):
        for step in steps:
            if step == "-":
                store.delete([key])
                made.append((key, True, ""))
            else:
                made.append((key, False, store.put(key, step.encode(), {})))
    expected = [entry for key in ("t/a", "t/b", "t/c") for entry in reversed([m for m in made if m[0] == key])]
    for page in (1, 2, 3, 4):
        monkeypatch.setenv("MOTO_S3_DEFAULT_MAX_KEYS", str(page))
        assert [(v.key, v.is_delete_marker, v.etag) for v in store.list_versions("t/")] == expected, page
        for limit in (1, 5, 9, 20):
            listed = [(v.key, v.is_delete_marker, v.etag) for v in store.list_versions("t/", limit=limit)]
            assert listed == expected[:limit], (page, limit)


class RefusingVersionsClient:
    """A boto3 S3 client whose requests with a ``VersionId`` fail with one error (the codes
    S3 and radosgw answer where moto answers otherwise)."""

    def __init__(self, inner: Any, code: str, status: int) -> None:
        self._inner, self.meta, self.code, self.status = inner, inner.meta, code, status

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _refuse(self, operation: str, kwargs: dict[str, Any]) -> Any:
        from botocore.exceptions import ClientError

        if "VersionId" not in kwargs:
            return getattr(self._inner, operation)(**kwargs)
        error = {
            "Error": {"Code": self.code, "Message": "refused"},
            "ResponseMetadata": {"HTTPStatusCode": self.status},
        }
        raise ClientError(error, operation)  # type: ignore[arg-type]

    def get_object(self, **kwargs: Any) -> Any:
        return self._refuse("get_object", kwargs)

    def head_object(self, **kwargs: Any) -> Any:
        return self._refuse("head_object", kwargs)

    def delete_object(self, **kwargs: Any) -> Any:
        return self._refuse("delete_object", kwargs)


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("NoSuchVersion", 404),  # S3, moto
        ("NoSuchKey", 404),  # radosgw
        ("404", 404),  # a HEAD has no body
        ("MethodNotAllowed", 405),  # S3: the version is a delete marker
        ("405", 405),
        ("InvalidArgument", 400),  # S3: not a version id it makes
        ("400", 400),
    ],
)
def test_s3_no_such_version_is_none(s3_client: Any, code: str, status: int) -> None:
    s3_client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    store = S3Store(BUCKET, RefusingVersionsClient(s3_client, code, status))
    store.put("t/a", b"x", {})
    assert store.get_version("t/a", "v") is None and store.head_version("t/a", "v") is None
    store.delete_version("t/a", "v")


@pytest.mark.parametrize(
    ("code", "status", "error"),
    [("InternalError", 500, "StorageUnavailableError"), ("NoSuchBucket", 404, "BucketNotFoundError")],
)
def test_s3_other_version_errors_are_raised(s3_client: Any, code: str, status: int, error: str) -> None:
    import s3memory

    s3_client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    store = S3Store(BUCKET, RefusingVersionsClient(s3_client, code, status))
    for call in (
        lambda: store.get_version("t/a", "v"),
        lambda: store.head_version("t/a", "v"),
        lambda: store.delete_version("t/a", "v"),
    ):
        with pytest.raises(getattr(s3memory, error)):
            call()


def test_s3_a_403_for_a_missing_version_reads_as_missing(s3_client: Any) -> None:
    """As for a missing key: a role that may list only its own prefix gets 403, not 404, for
    a version that does not exist; a listing of the key's versions tells the two apart."""
    from s3memory import StorageAccessDeniedError

    s3_client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    plain = S3Store(BUCKET, s3_client)
    plain.put("t/a", b"x", {})
    plain.put("t/ab", b"y", {})
    plain.delete(["t/a"])
    marker, version = (v for v in plain.list_versions("t/a") if v.key == "t/a")
    store = S3Store(BUCKET, RefusingVersionsClient(s3_client, "AccessDenied", 403))
    for version_id in ("no-such-version", marker.version_id, next(plain.list_versions("t/ab")).version_id):
        assert store.get_version("t/a", version_id) is None and store.head_version("t/a", version_id) is None
    with pytest.raises(StorageAccessDeniedError):
        store.get_version("t/a", version.version_id)
    with pytest.raises(StorageAccessDeniedError):
        store.head_version("t/a", version.version_id)
    with pytest.raises(StorageAccessDeniedError):
        store.delete_version("t/a", version.version_id)


def test_s3_sends_no_version_request_to_a_bucket_never_versioned(s3_client: Any) -> None:
    """There, the one version of a key is "null", the current object: read and deleted as
    such (moto would delete it for any VersionId)."""
    sent: list[dict[str, Any]] = []
    s3_client.meta.events.register("before-parameter-build.s3", lambda params, **_: sent.append(dict(params)))
    store = S3Store(BUCKET, s3_client)
    store.put("t/a", b"x", {})
    assert store.get_version("t/a", "other") is None and store.head_version("t/a", "other") is None
    store.delete_version("t/a", "other")
    got = store.get_version("t/a", "null")
    assert got is not None and got.body == b"x"
    assert not [params for params in sent if "VersionId" in params]
    store.delete_version("t/a", "null")
    assert store.get("t/a") is None


class RecordingStore(DelegatingStore):
    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.calls: list[tuple[str, Any]] = []

    def _call(self, verb: str, perform: Any) -> Any:
        result = perform()
        self.calls.append((verb, result))
        return result


def test_the_delegating_store_forwards_the_version_verbs_through_its_hook() -> None:
    inner = InMemoryStore()
    inner.put("t/a", b"1", {})
    inner.put("t/a", b"2", {})
    store = RecordingStore(inner)
    assert store.keeps_versions() is True
    newest, oldest = store.list_versions("t/", limit=2)
    got = store.get_version("t/a", oldest.version_id, max_bytes=1)
    assert got is not None and got.body == b"1"
    head = store.head_version("t/a", oldest.version_id)
    assert head is not None and head.size == 1
    store.delete_version("t/a", newest.version_id)
    assert [verb for verb, _ in store.calls] == [
        "keeps_versions",
        "list_versions",
        "get_version",
        "head_version",
        "delete_version",
    ]
    assert store.calls[1][1] == [newest, oldest]  # the listing, whole, inside the hook
    assert [v.version_id for v in inner.list_versions("t/")] == [oldest.version_id]
    assert DelegatingStore(InMemoryStore(versioned=False)).keeps_versions() is False


def test_s3_a_write_answer_says_whether_the_bucket_keeps_versions(s3_client: Any) -> None:
    """Versioning turned on while a store is in use is seen by its next write (whose answer
    has a ``VersionId``), with no request of its own; ``GetBucketVersioning`` is asked only
    before a store's first write."""
    asked: list[str] = []
    s3_client.meta.events.register("before-call.s3.GetBucketVersioning", lambda **_: asked.append("asked"))
    store = S3Store(BUCKET, s3_client)
    assert store.keeps_versions() is False and len(asked) == 1
    s3_client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    store.put("t/a", b"1", {})
    assert store.keeps_versions() is True
    first = next(v.version_id for v in store.list_versions("t/a"))
    assert store.get_version("t/a", first) is not None  # a version id, read as one
    s3_client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Suspended"})
    store.put("t/a", b"2", {})
    assert store.keeps_versions() is False  # (moto drops older versions on suspension: not checked)
    assert len(asked) == 1


def test_s3_a_copy_answer_without_a_version_id_says_nothing_of_versioning(s3_client: Any) -> None:
    """radosgw 16 answers every CopyObject without a ``VersionId``, even in a versioned bucket:
    such an answer must not make the store believe the bucket keeps none (a rename's copies,
    answered in any order beside its PUTs, would flip it from one request to the next, and
    whether a change leaves history would depend on which answer came last). The next PUT
    still tells."""

    def answer_as_radosgw(parsed: dict[str, Any], **_: Any) -> None:
        parsed.pop("VersionId", None)

    s3_client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    store = S3Store(BUCKET, s3_client)
    store.put("t/a", b"1", {})
    assert store.keeps_versions() is True
    s3_client.meta.events.register("after-call.s3.CopyObject", answer_as_radosgw)
    store.copy("t/a", "t/b", metadata={})
    assert store.keeps_versions() is True and S3Store(BUCKET, s3_client).keeps_versions() is True
    s3_client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Suspended"})
    store.copy("t/a", "t/c", metadata={})
    assert store.keeps_versions() is True  # a copy's silence is not news
    store.put("t/a", b"2", {})
    assert store.keeps_versions() is False


def test_s3_history_starts_when_versioning_does_in_a_warm_process(s3_client: Any) -> None:
    """A memory kept open while its bucket's versioning is turned on writes history records
    from its next write on, not after a cache's lifetime."""
    from s3memory import open_memory

    memory = open_memory(user_id="alice", bucket=BUCKET, s3_client=s3_client, master_key=bytes(range(32)))
    memory.create("/memories/before.md", "x")
    s3_client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    memory.create("/memories/a.md", "x")  # its answer says the bucket keeps versions now
    memory.rename("/memories/a.md", "/memories/b.md")
    assert [v.operation for v in memory.history("/memories/b.md")] == ["renamed", "created"]


def test_s3_a_bucket_of_a_former_buckets_name_is_not_taken_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests that each make a bucket of one name (moto) in one process, with the process's key
    cache: what the first bucket answered is never taken for the second's versioning, so the
    second's history has its renames whatever ran before."""
    import boto3
    from moto import mock_aws

    from s3memory import open_memory
    from s3memory.testing import use_fake_aws_credentials

    use_fake_aws_credentials(monkeypatch)
    histories = []
    for versioned in (False, True):
        with mock_aws():
            client = boto3.client("s3", region_name="us-east-1")
            client.create_bucket(Bucket=BUCKET)
            if versioned:
                client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
            memory = open_memory(user_id="alice", bucket=BUCKET, s3_client=client, master_key=bytes(range(32)))
            memory.create("/memories/a.md", "x")
            if versioned:
                memory.rename("/memories/a.md", "/memories/b.md")
                histories.append([v.operation for v in memory.history("/memories/b.md")])
    assert histories == [["renamed", "created"]]
