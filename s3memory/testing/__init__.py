"""A pytest plugin with fixtures for testing code that uses s3memory.

Installing s3memory registers this plugin (entry point ``pytest11``), so the fixtures are
available in every test suite without any import. The fixtures that mock AWS need moto:
the ``testing`` extra (``pip install -e '.[testing]'`` in the checkout) or ``moto[s3,kms]``;
without it those tests are skipped, and the in-memory fixture still works. Example::

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
from :data:`STORE_CAPABILITIES`, each with its reason): those tests become strict expected
failures, which still run and fail the suite if they pass (the declaration is then stale).
The contract lives in ``s3memory.testing.store_contract``; import it from here. Example::

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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from .._core.memory import EncryptedMemory
from .._crypto.cache import KeyCache
from .._factory import open_memory
from ..stores import InMemoryStore

if TYPE_CHECKING:
    from ..integrations.anthropic import S3MemoryTool

# The contract's asserts are rewritten as this plugin's are (``-p s3memory.testing`` marks
# only this module for pytest's assertion rewriting): registered before the import.
pytest.register_assert_rewrite("s3memory.testing.store_contract")
from .store_contract import (  # noqa: E402
    STORE_CAPABILITIES,
    ObjectStoreContract,
    StoreContractBase,
    StoreCopyContract,
    StoreDeleteContract,
    StoreListContract,
    StorePreconditionsContract,
    StoreReadWriteContract,
    StoreVersionsContract,
)

__all__ = [
    "STORE_CAPABILITIES",
    "TEST_BUCKET",
    "TEST_MASTER_KEY",
    "TEST_REGION",
    "MockBucket",
    "ObjectStoreContract",
    "StoreContractBase",
    "StoreCopyContract",
    "StoreDeleteContract",
    "StoreListContract",
    "StorePreconditionsContract",
    "StoreReadWriteContract",
    "StoreVersionsContract",
    "make_moto_requests_atomic",
    "use_fake_aws_credentials",
]

TEST_BUCKET = "s3memory-test-bucket"
"""The name of the bucket ``s3memory_bucket`` creates."""

TEST_REGION = "us-east-1"
"""The region of the mocked clients."""

TEST_MASTER_KEY = bytes(range(32))
"""The fixed master key of the fixtures' tools and memories. For tests only: never use it."""

_MOTO_MISSING = (
    "the s3memory_bucket fixture needs moto: pip install 'moto[s3,kms]' "
    "(or s3memory's testing extra, pip install -e '.[testing]' in its checkout)"
)

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
        from .._crypto.cache import process_key_cache

        # A new bucket under the last test's bucket name: nothing cached for that one (its
        # keys, whose documents this bucket lacks; its versioning) may be used for this one.
        process_key_cache().clear()
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
    from ..integrations.anthropic import S3MemoryTool

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
