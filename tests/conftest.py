"""Shared fixtures: moto-backed S3 and KMS, and one memory per backend flavour.

Every test that takes ``memory`` runs against each flavour: the in-memory store, the
local directory store, and S3 (moto) in tenant-key mode with a local master key, in
tenant-key mode with a KMS master key, and in KMS-per-object mode (and a real radosgw
when one runs).

Tiers: the default run (README's ``python -m pytest -q -n auto``) leaves out the tests
marked ``slow`` (subprocesses, crashes, a fault at every step, end-to-end runs of other
programs, the radosgw flavour, heavy hypothesis, anything timed by the wall clock, the rest
of each sampled matrix); ``-m slow`` runs them. Of the flavours, the default run keeps
``inmemory``, ``localdir`` and one moto flavour (``s3-tenant-local``); the other two moto
flavours differ from it only in how keys are wrapped, which ``tests/crypto/test_keyrings.py``
tests once per keyring in the default run, and go to the slow tier with radosgw
(``SLOW_FLAVOURS``). The same rule holds for the flavour lists
modules write themselves (``pytest_collection_modifyitems`` below).

Hypothesis profiles: ``dev`` (the default: fewer examples) and ``ci`` (more), chosen by the
environment variable ``HYPOTHESIS_PROFILE``. A test that names its own budget writes
``@settings(max_examples=examples(N))`` (``helpers.examples``): all N under ``ci``, at most the
``dev`` profile's count otherwise.

Built on the shipped plugin, ``s3memory.testing`` (loaded in this session through its
``pytest11`` entry point, as in a user's): its constants, fake credentials and moto
request serializer, so the suite tests the kit users get rather than a copy of it. What test
modules import comes from the ``helpers`` package (tests/helpers/), never from here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers import (
    BUCKET,
    CI_EXAMPLES,
    DEV_EXAMPLES,
    FLAVOURS,
    MASTER_KEY,
    REGION,
    RGW_ENDPOINT,
    SLOW_FLAVOURS,
    flavour_params,
    make_moto_requests_atomic,
    use_fake_aws_credentials,
)
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from s3memory import EncryptedMemory, InMemoryStore, KeyCache, LocalDirStore, open_memory
from s3memory._crypto.cache import process_key_cache

# Hypothesis: `dev` for a developer's run (README's command), `ci` for CI's (HYPOTHESIS_PROFILE=ci).
# No deadline in either: a loaded machine must not turn a slow example into a failure.
hypothesis_settings.register_profile("dev", max_examples=DEV_EXAMPLES, deadline=None)
hypothesis_settings.register_profile(
    "ci", max_examples=CI_EXAMPLES, deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or "dev")


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


_SESSIONS: list[Any] = []


def _session() -> Any:
    import boto3

    if not _SESSIONS:
        _SESSIONS.append(boto3.session.Session())
    return _SESSIONS[0]


@pytest.fixture
def s3_client(aws: None) -> Any:
    client = _session().client("s3", region_name=REGION)
    client.create_bucket(Bucket=BUCKET)
    return client


@pytest.fixture
def kms_client(aws: None) -> Any:
    return _session().client("kms", region_name=REGION)


@pytest.fixture
def kms_key_id(kms_client: Any) -> str:
    return str(kms_client.create_key(Description="s3memory test key")["KeyMetadata"]["Arn"])


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


@pytest.fixture(params=flavour_params(FLAVOURS))
def flavour(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def memory(make_memory: Callable[..., EncryptedMemory], flavour: str) -> EncryptedMemory:
    return make_memory(flavour)


def pytest_configure(config: pytest.Config) -> None:
    # Never let a test talk to real AWS, whatever the developer's shell has configured.
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    config.addinivalue_line("markers", "slow: the slow tier, left out of the default run (run it with -m slow)")


# The name a module gives the moto flavour with a local master key ("s3-tenant" in test_mounts).
MOTO_DEFAULT_FLAVOURS = frozenset({"s3-tenant-local", "s3-tenant"})
# ObjectStoreContract's tests at scale (thousands of objects, pages and batches): in the default
# tier on the in-memory stores, where they take milliseconds; on every other store, slow.
CONTRACT_AT_SCALE = frozenset(
    {
        "test_list_pages_beyond_one_thousand",
        "test_versions_page_beyond_one_thousand",
        "test_delete_more_than_one_batch",
        "test_purge_more_than_one_batch",
    }
)


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Flavours written in a module's own parameter lists follow the fixture's rule:

    - every test on radosgw is slow: those that take ``rgw_client`` and those parametrized
      with the "rgw" flavour;
    - a test parametrized over "s3-tenant-local" and also over "s3-tenant-kms" or "s3-kms"
      runs the latter two in the slow tier only (a test whose one moto flavour is a KMS one
      keeps it in the default tier);
    - the store contract's tests at scale (``CONTRACT_AT_SCALE``) are slow but on the
      in-memory stores.
    """
    moto_default: set[tuple[str, str]] = set()  # (test, parameter) pairs that run on s3-tenant-local
    for item in items:
        for name, value in _flavour_params(item):
            if value in MOTO_DEFAULT_FLAVOURS:
                moto_default.add((_test_of(item), name))
    for item in items:
        on_rgw = "rgw_client" in getattr(item, "fixturenames", ())
        for name, value in _flavour_params(item):
            on_rgw = on_rgw or value == "rgw"
            if value in SLOW_FLAVOURS and (_test_of(item), name) in moto_default:
                item.add_marker(pytest.mark.slow)
        at_scale = getattr(item, "originalname", "") in CONTRACT_AT_SCALE and "InMemory" not in _class_of(item)
        if on_rgw or at_scale:
            item.add_marker(pytest.mark.slow)


def _flavour_params(item: pytest.Item) -> list[tuple[str, str]]:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return []
    return [(name, value) for name, value in callspec.params.items() if isinstance(value, str) and value in _NAMES]


_NAMES = frozenset(FLAVOURS) | MOTO_DEFAULT_FLAVOURS


def _class_of(item: pytest.Item) -> str:
    cls = getattr(item, "cls", None)
    return cls.__name__ if cls is not None else ""


def _test_of(item: pytest.Item) -> str:
    return item.nodeid.partition("[")[0]
