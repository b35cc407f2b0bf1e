"""A pytest plugin with fixtures for testing code that uses s3memory.

Installing s3memory registers this plugin (entry point ``pytest11``), so the fixtures are
available in every test suite without any import. The fixtures that mock AWS need moto:
``pip install 's3memory[testing]'`` (or ``moto[s3,kms]``); without it those tests are skipped,
and the in-memory fixture still works. Example::

    def test_remembers(s3memory_tool):
        s3memory_tool.call({"command": "create", "path": "/memories/a.md", "file_text": "hi"})
        assert "hi" in s3memory_tool.call({"command": "view", "path": "/memories/a.md"})

    def test_users_are_isolated(s3memory_tool_factory):
        alice, bob = s3memory_tool_factory("alice"), s3memory_tool_factory("bob")
        alice.call({"command": "create", "path": "/memories/a.md", "file_text": "secret"})
        assert "secret" not in bob.call({"command": "view", "path": "/memories"})

    def test_kms_mode(s3memory_tool_factory, s3memory_bucket):
        tool = s3memory_tool_factory(key_mode="kms")  # uses s3memory_bucket.kms_key_id
        ...

Fixtures (all function-scoped): ``s3memory_bucket``, ``s3memory_tool_factory``,
``s3memory_tool`` (need moto) and ``s3memory_memory`` (no AWS at all, the fastest).

If plugin autoloading is off (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``), enable it with
``-p s3memory.testing`` or ``pytest_plugins = ["s3memory.testing"]`` in a top-level
``conftest.py``; disable it with ``-p no:s3memory``.

The store contract
------------------

:class:`ObjectStoreContract` is the contract of :class:`~s3memory.stores.ObjectStore` as a
class of pytest tests, the suite every store of s3memory passes. An author of a new store
runs it by subclassing it (under a name pytest collects) with a ``store`` fixture that
returns a fresh, empty store, and declares in ``lacks`` what the store cannot do (names
from :data:`STORE_CAPABILITIES`, each with its reason): those tests become expected
failures. Example::

    import pytest
    from s3memory.stores import DelegatingStore, InMemoryStore
    from s3memory.testing import ObjectStoreContract

    class TestCountingStore(ObjectStoreContract):
        @pytest.fixture
        def store(self):
            return DelegatingStore(InMemoryStore())

    class TestMyBucketStore(ObjectStoreContract):
        lacks = {"copy_if_none_match": "the service has no conditional copy"}

        @pytest.fixture
        def store(self, my_empty_bucket):
            return MyBucketStore(my_empty_bucket)

Helpers for a suite's own AWS fixtures: :func:`use_fake_aws_credentials` and
:func:`make_moto_requests_atomic` (both take a ``pytest.MonkeyPatch``), as
``s3memory_bucket`` uses them.

This module imports only pytest, the standard library and s3memory's core: moto, boto3
and anthropic are imported inside the fixtures and helpers that need them, so merely having
the plugin registered (or importing :class:`ObjectStoreContract`) costs nothing and never
fails.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from ._errors import ObjectTooLargeError, PreconditionFailedError
from ._factory import open_memory
from ._keydocs import KeyCache
from ._memory import EncryptedMemory
from .stores import InMemoryStore, ObjectStore

if TYPE_CHECKING:
    from ._tool import S3MemoryTool

__all__ = [
    "STORE_CAPABILITIES",
    "TEST_BUCKET",
    "TEST_MASTER_KEY",
    "TEST_REGION",
    "MockBucket",
    "ObjectStoreContract",
    "make_moto_requests_atomic",
    "use_fake_aws_credentials",
]

TEST_BUCKET = "s3memory-test-bucket"
"""The name of the bucket ``s3memory_bucket`` creates."""

TEST_REGION = "us-east-1"
"""The region of the mocked clients."""

TEST_MASTER_KEY = bytes(range(32))
"""The fixed master key of the fixtures' tools and memories. For tests only: never use it."""

_MOTO_MISSING = "the s3memory_bucket fixture needs moto: pip install 's3memory[testing]' (or 'moto[s3,kms]')"

_FAKE_AWS_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_DEFAULT_REGION": TEST_REGION,
    "AWS_EC2_METADATA_DISABLED": "true",
}
_REAL_AWS_ENVIRONMENT = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")

# moto stores a PUT's body before its metadata, so a concurrent GET can see an object
# without its metadata (s3memory runs independent requests in parallel); real S3 requests
# are atomic. Reentrant, in case a handler calls back into a mocked client.
_MOTO_REQUEST_LOCK = threading.RLock()


@dataclass(frozen=True)
class MockBucket:
    """What ``s3memory_bucket`` yields: an empty moto bucket and a moto KMS key."""

    name: str
    """The bucket's name (``TEST_BUCKET``)."""
    s3_client: Any
    """A boto3 S3 client on the mocked bucket's region."""
    kms_client: Any
    """A boto3 KMS client on the same mock."""
    kms_key_id: str
    """The ARN of a symmetric KMS key created for this test."""
    region: str = TEST_REGION


def use_fake_aws_credentials(patch: pytest.MonkeyPatch) -> None:
    """Credentials that cannot reach AWS, whatever the shell has configured: fake keys, the
    test region, no instance metadata, and no profile or endpoint of the shell's (``patch``
    undoes it all)."""
    for name, value in _FAKE_AWS_ENVIRONMENT.items():
        patch.setenv(name, value)
    for name in _REAL_AWS_ENVIRONMENT:
        patch.delenv(name, raising=False)


def make_moto_requests_atomic(patch: pytest.MonkeyPatch) -> None:
    """Have moto handle one request at a time, in every thread (``patch`` undoes it).

    moto stores a PUT's body before its metadata, so a concurrent GET could see an object
    without its metadata; real S3 requests are atomic. Requests still interleave, as
    concurrent code needs. Needs moto.
    """
    from moto.core.botocore_stubber import BotocoreStubber

    handle = BotocoreStubber.__call__

    def atomic(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _MOTO_REQUEST_LOCK:
            return handle(self, *args, **kwargs)

    patch.setattr(BotocoreStubber, "__call__", atomic)


@pytest.fixture
def s3memory_bucket() -> Iterator[MockBucket]:
    """An empty S3 bucket and a KMS key, mocked by moto for the duration of one test.

    Every AWS call of the test, through any boto3 client, goes to moto (``moto.mock_aws``);
    fake credentials replace the shell's for the test (``AWS_PROFILE`` and the like are
    removed) and the environment is restored afterwards. Yields a :class:`MockBucket`
    (``name``, ``s3_client``, ``kms_client``, ``kms_key_id``, ``region``). Skipped if moto is
    not installed.
    """
    pytest.importorskip("moto", reason=_MOTO_MISSING)
    import boto3
    from moto import mock_aws

    with pytest.MonkeyPatch.context() as patch:
        use_fake_aws_credentials(patch)
        make_moto_requests_atomic(patch)
        with mock_aws():
            s3_client = boto3.client("s3", region_name=TEST_REGION)
            s3_client.create_bucket(Bucket=TEST_BUCKET)
            kms_client = boto3.client("kms", region_name=TEST_REGION)
            key = kms_client.create_key(Description="s3memory test key")
            yield MockBucket(
                name=TEST_BUCKET,
                s3_client=s3_client,
                kms_client=kms_client,
                kms_key_id=str(key["KeyMetadata"]["Arn"]),
            )


@pytest.fixture
def s3memory_tool_factory(s3memory_bucket: MockBucket) -> Iterator[Callable[..., S3MemoryTool]]:
    """``make(user_id="alice", **options) -> S3MemoryTool``: a tool on ``s3memory_bucket``.

    Every tool of a test shares the bucket, so tools for different users show the
    isolation, and two tools for one user see the same memory. ``options`` are those of
    :class:`~s3memory.S3MemoryTool` / :func:`~s3memory.open_memory`; defaults fill in what
    is not given:

    - ``bucket`` and ``s3_client``: the mocked bucket (unless ``store=`` is given);
    - ``master_key``: ``TEST_MASTER_KEY``, unless KMS is asked for: with
      ``key_mode="kms"`` or ``kms_key_id=...``, ``kms_key_id`` and ``kms_client`` default to
      the moto key and client instead;
    - ``key_cache``: a fresh :class:`~s3memory.KeyCache` per tool, so no key leaks from one
      tool (or test) to another through the process-wide cache.

    The tools' memories are closed after the test.
    """
    from ._tool import S3MemoryTool

    made: list[S3MemoryTool] = []

    def make(user_id: str = "alice", **options: Any) -> S3MemoryTool:
        if "memory" not in options:
            options.setdefault("key_cache", KeyCache())
            if "store" not in options:
                options.setdefault("bucket", s3memory_bucket.name)
                options.setdefault("s3_client", s3memory_bucket.s3_client)
            if options.get("key_mode") == "kms" or "kms_key_id" in options:
                options.setdefault("kms_key_id", s3memory_bucket.kms_key_id)
                options.setdefault("kms_client", s3memory_bucket.kms_client)
            else:
                options.setdefault("master_key", TEST_MASTER_KEY)
            options["user_id"] = user_id
        tool = S3MemoryTool(**options)
        made.append(tool)
        return tool

    yield make
    for tool in made:
        tool.memory.close()


@pytest.fixture
def s3memory_tool(s3memory_tool_factory: Callable[..., S3MemoryTool]) -> S3MemoryTool:
    """A ready :class:`~s3memory.S3MemoryTool` for user ``"alice"`` on ``s3memory_bucket``
    (tenant-key mode, ``TEST_MASTER_KEY``). Its objects: ``s3memory_bucket.s3_client``."""
    return s3memory_tool_factory("alice")


@pytest.fixture
def s3memory_memory() -> Iterator[EncryptedMemory]:
    """An :class:`~s3memory.EncryptedMemory` for user ``"alice"`` on a fresh
    :class:`~s3memory.InMemoryStore` (tenant-key mode, ``TEST_MASTER_KEY``).

    No AWS, no moto, no anthropic: the fastest way to exercise the memory commands
    (``memory.create(...)``, ``memory.view(...)``, ``memory.execute({...})``). The store is
    ``s3memory_memory.store``.
    """
    memory = open_memory(user_id="alice", store=InMemoryStore(), master_key=TEST_MASTER_KEY, key_cache=KeyCache())
    yield memory
    memory.close()


# -- the object store contract ------------------------------------------------------------

STORE_CAPABILITIES = frozenset({"copy_if_match", "copy_if_none_match", "delete_if_match"})
"""What an :class:`ObjectStoreContract` subclass may declare its store ``lacks``:

- ``copy_if_match``: ``copy(..., if_match=etag)`` refuses a source whose ETag differs;
- ``copy_if_none_match``: ``copy(..., if_none_match=True)`` refuses an existing destination;
- ``delete_if_match``: ``delete(keys, if_match={...})`` keeps an object whose ETag differs.
"""

_META = {"x-amz-c": "115", "x-amz-w": "02"}
_NO_SUCH_ETAG = '"0123456789abcdef0123456789abcdef"'


class ObjectStoreContract:
    """The contract of :class:`~s3memory.stores.ObjectStore`, as pytest tests to subclass.

    Every store s3memory ships passes it (``S3Store`` on moto and on radosgw 16 lacks the
    three capabilities, which those servers ignore; real S3 has them). Subclass it in a test module under a name pytest
    collects (``Test...``), define a ``store`` fixture returning a fresh, empty store, and
    list in ``lacks`` what the store cannot do (see :data:`STORE_CAPABILITIES`), each with
    the reason: those tests are then reported as expected failures, not run::

        import pytest
        from s3memory.testing import ObjectStoreContract

        class TestMyStore(ObjectStoreContract):
            lacks = {"delete_if_match": "the backend has no conditional delete"}

            @pytest.fixture
            def store(self, tmp_path):
                return MyStore(tmp_path)

    The tests use keys under ``t/``, ``t2/``, ``tt/`` and ``u/``, and write at most a few
    thousand small objects (listing and deleting more than one page of 1,000). This class
    has no ``Test`` prefix, so pytest never collects it by itself, nor where it is imported.
    """

    lacks: ClassVar[Mapping[str, str]] = {}
    """Capabilities (names in :data:`STORE_CAPABILITIES`) the store lacks, each with why."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not isinstance(cls.lacks, Mapping):
            raise TypeError(f"{cls.__name__}.lacks must map capability names to reasons, not {cls.lacks!r}")
        unknown = sorted(set(cls.lacks) - STORE_CAPABILITIES)
        if unknown:
            known = ", ".join(sorted(STORE_CAPABILITIES))
            raise TypeError(f"{cls.__name__}.lacks names unknown capabilities {unknown}; known: {known}")

    @pytest.fixture
    def store(self) -> ObjectStore:
        """Override: a fresh, empty store for one test."""
        raise NotImplementedError(
            f"{type(self).__name__} must define a `store` fixture returning a fresh, empty ObjectStore"
        )

    def unless_lacking(self, capability: str) -> None:
        """Mark the running test an expected failure (and stop it) if the store lacks ``capability``."""
        if capability not in STORE_CAPABILITIES:
            raise ValueError(f"unknown store capability {capability!r}")
        if capability in self.lacks:
            pytest.xfail(self.lacks[capability])

    # -- get, head, put -------------------------------------------------------------------

    def test_get_and_head_of_missing_key_are_none(self, store: ObjectStore) -> None:
        assert store.get("t/memories/nope") is None
        assert store.head("t/memories/nope") is None

    def test_put_get_head_round_trip(self, store: ObjectStore) -> None:
        etag = store.put("t/memories/a", b"\x00body\xff", _META)
        got = store.get("t/memories/a")
        assert got is not None
        assert got.body == b"\x00body\xff"
        assert dict(got.metadata) == _META
        assert got.etag == etag
        head = store.head("t/memories/a")
        assert head is not None
        assert (head.size, head.etag, dict(head.metadata)) == (6, etag, _META)

    def test_get_max_bytes_bounds_the_body(self, store: ObjectStore) -> None:
        store.put("t/k", b"0123456789", {})
        got = store.get("t/k", max_bytes=10)
        assert got is not None and got.body == b"0123456789"
        with pytest.raises(ObjectTooLargeError) as info:
            store.get("t/k", max_bytes=9)
        assert info.value.size in (10, None)  # None: the store could not tell before reading
        assert store.get("t/none", max_bytes=0) is None

    def test_put_if_none_match_refuses_existing(self, store: ObjectStore) -> None:
        store.put("t/k", b"one", {}, if_none_match=True)
        with pytest.raises(PreconditionFailedError):
            store.put("t/k", b"two", {}, if_none_match=True)
        got = store.get("t/k")
        assert got is not None and got.body == b"one"

    def test_put_if_match_is_compare_and_swap(self, store: ObjectStore) -> None:
        first = store.put("t/k", b"one", {})
        second = store.put("t/k", b"two", {}, if_match=first)
        assert second != first
        with pytest.raises(PreconditionFailedError):
            store.put("t/k", b"three", {}, if_match=first)
        got = store.get("t/k")
        assert got is not None and got.body == b"two"

    def test_put_if_match_on_missing_key_fails(self, store: ObjectStore) -> None:
        with pytest.raises(PreconditionFailedError):
            store.put("t/gone", b"x", {}, if_match=_NO_SUCH_ETAG)
        assert store.get("t/gone") is None

    def test_put_with_tags_stores_the_object(self, store: ObjectStore) -> None:
        store.put("t/k", b"tagged", {"a": "1"}, tags={"s3memory": "intent"})
        got = store.get("t/k")
        assert got is not None and got.body == b"tagged" and dict(got.metadata) == {"a": "1"}

    # -- copy ---------------------------------------------------------------------------------

    def test_copy_replaces_metadata_and_keeps_body(self, store: ObjectStore) -> None:
        etag = store.put("t/src", b"payload", {"a": "1"})
        store.copy("t/src", "t/dir/dst", metadata={"b": "2"}, if_match=etag)
        got = store.get("t/dir/dst")
        assert got is not None
        assert got.body == b"payload" and dict(got.metadata) == {"b": "2"}
        src = store.get("t/src")
        assert src is not None and dict(src.metadata) == {"a": "1"}

    def test_copy_of_missing_source_fails(self, store: ObjectStore) -> None:
        with pytest.raises(PreconditionFailedError):
            store.copy("t/none", "t/dst", metadata={})
        assert store.get("t/dst") is None

    def test_copy_source_if_match(self, store: ObjectStore) -> None:
        self.unless_lacking("copy_if_match")
        store.put("t/src", b"v1", {})
        with pytest.raises(PreconditionFailedError):
            store.copy("t/src", "t/dst", metadata={}, if_match=_NO_SUCH_ETAG)

    def test_copy_if_none_match_never_overwrites(self, store: ObjectStore) -> None:
        self.unless_lacking("copy_if_none_match")
        store.put("t/src", b"new", {})
        store.put("t/dst", b"theirs", {})
        with pytest.raises(PreconditionFailedError):
            store.copy("t/src", "t/dst", metadata={}, if_none_match=True)
        got = store.get("t/dst")
        assert got is not None and got.body == b"theirs"
        store.copy("t/src", "t/fresh", metadata={}, if_none_match=True)

    # -- list -----------------------------------------------------------------------------------

    def test_list_is_prefix_scoped_sorted_and_sized(self, store: ObjectStore) -> None:
        for key in ["t/m/b", "t/m/a/x", "t/m/a/y", "t/mm/z", "u/m/a"]:
            store.put(key, key.encode(), {})
        listed = list(store.list("t/m/"))
        assert [i.key for i in listed] == ["t/m/a/x", "t/m/a/y", "t/m/b"]
        assert [i.size for i in listed] == [7, 7, 5]
        assert [i.key for i in store.list("t/m/", limit=1)] == ["t/m/a/x"]
        assert list(store.list("t/nothing/")) == []

    def test_list_pages_beyond_one_thousand(self, store: ObjectStore) -> None:
        keys = [f"t/many/{i:05d}" for i in range(1005)]
        for key in keys:
            store.put(key, b"", {})
        assert [i.key for i in store.list("t/many/")] == keys

    # -- delete ---------------------------------------------------------------------------------

    def test_delete_many_and_missing(self, store: ObjectStore) -> None:
        for key in ["t/a", "t/d/b", "t/d/c"]:
            store.put(key, b"x", {})
        store.delete(["t/a", "t/d/b", "t/missing"])
        assert [i.key for i in store.list("t/")] == ["t/d/c"]
        store.delete([])
        store.delete(["t/d/c"])
        assert list(store.list("t/")) == []

    def test_delete_more_than_one_batch(self, store: ObjectStore) -> None:
        keys = [f"t/bulk/{i:05d}" for i in range(1001)]
        for key in keys:
            store.put(key, b"", {})
        store.delete(keys)
        assert list(store.list("t/bulk/")) == []

    def test_key_reused_as_directory_after_delete(self, store: ObjectStore) -> None:
        store.put("t/x/y", b"1", {})
        store.delete(["t/x/y"])
        store.put("t/x", b"2", {})
        got = store.get("t/x")
        assert got is not None and got.body == b"2"

    def test_conditional_delete_keeps_changed_objects(self, store: ObjectStore) -> None:
        self.unless_lacking("delete_if_match")
        first = store.put("t/a", b"v1", {})
        store.put("t/a", b"v2", {})  # changed since its ETag was read
        unchanged = store.put("t/b", b"b", {})
        with pytest.raises(PreconditionFailedError):
            store.delete(["t/a", "t/b"], if_match={"t/a": first, "t/b": unchanged})
        assert [i.key for i in store.list("t/")] == ["t/a"]

    # -- purge: every object (and version) under a prefix, for erasing a tenant ---------------

    def test_purge_is_prefix_scoped(self, store: ObjectStore) -> None:
        for key in ["t/a", "t/d/b", "t/.s3memory/tenant-key", "t2/a", "tt/a", "u/t/a"]:
            store.put(key, b"x", {})
        assert store.purge("t/") == 3
        assert [i.key for i in store.list("t/")] == []
        assert sorted(i.key for p in ("t2/", "tt/", "u/") for i in store.list(p)) == ["t2/a", "tt/a", "u/t/a"]
        assert store.purge("t/") == 0  # nothing left: not an error

    def test_purge_with_suffix_keeps_the_rest(self, store: ObjectStore) -> None:
        for key in ["t/.s3memory/tenant-key", "t/.s3memory/names-key", "t/.s3memory/intents/x", "t/memories/a-key"]:
            store.put(key, b"x", {})
        assert store.purge("t/.s3memory/", suffix="-key") == 2
        assert [i.key for i in store.list("t/")] == ["t/.s3memory/intents/x", "t/memories/a-key"]

    @pytest.mark.parametrize("prefix", ["", "t", "/t/", "t//", "t/a"])
    def test_purge_refuses_a_prefix_that_is_not_a_directory(self, store: ObjectStore, prefix: str) -> None:
        store.put("t/a", b"x", {})
        with pytest.raises(ValueError):
            store.purge(prefix)
        assert [i.key for i in store.list("t/")] == ["t/a"]

    def test_purge_more_than_one_batch(self, store: ObjectStore) -> None:
        keys = [f"t/bulk/{i:05d}" for i in range(1001)]
        for key in keys:
            store.put(key, b"", {})
        store.put("t/bulk-other", b"", {})
        assert store.purge("t/bulk/") == 1001
        assert [i.key for i in store.list("t/")] == ["t/bulk-other"]

    # -- identity ---------------------------------------------------------------------------------

    def test_identity_is_a_stable_string(self, store: ObjectStore) -> None:
        identity = store.identity
        assert isinstance(identity, str) and identity
        store.put("t/k", b"x", {})
        assert store.identity == identity
