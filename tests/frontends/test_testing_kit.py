"""The pytest plugin ``s3memory.testing``, used exactly as a user's test suite would use it.

No import of the plugin here: its fixtures resolve because installing s3memory registers
it through the ``pytest11`` entry point.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from anthropic.lib.tools import ToolError

from s3memory import EncryptedMemory, InMemoryStore, S3MemoryTool
from s3memory.testing import TEST_BUCKET, TEST_MASTER_KEY, MockBucket, ObjectStoreContract

CREATE = {"command": "create", "path": "/memories/a.md", "file_text": "hi"}


def keys(bucket: MockBucket) -> list[str]:
    listing = bucket.s3_client.list_objects_v2(Bucket=bucket.name)
    return sorted(o["Key"] for o in listing.get("Contents", []))


def test_the_plugin_is_registered_through_its_entry_point(pytestconfig: pytest.Config) -> None:
    plugin = pytestconfig.pluginmanager.get_plugin("s3memory")
    assert plugin is not None
    assert plugin.__name__ == "s3memory.testing"


def test_bucket_is_an_empty_moto_bucket_with_a_kms_key(s3memory_bucket: MockBucket) -> None:
    assert s3memory_bucket.name == TEST_BUCKET
    assert keys(s3memory_bucket) == []
    key = s3memory_bucket.kms_client.describe_key(KeyId=s3memory_bucket.kms_key_id)["KeyMetadata"]
    assert key["Enabled"]
    assert "AWS_PROFILE" not in os.environ  # fake credentials only (moto sets its own)


def test_tool_creates_and_views_on_the_bucket(s3memory_tool: S3MemoryTool, s3memory_bucket: MockBucket) -> None:
    assert s3memory_tool.call(CREATE) == "File created successfully at: /memories/a.md"
    assert "1\thi" in s3memory_tool.call({"command": "view", "path": "/memories/a.md"})
    assert keys(s3memory_bucket) == ["alice/.s3memory/tenant-key", "alice/memories/a.md"]
    stored = s3memory_bucket.s3_client.get_object(Bucket=s3memory_bucket.name, Key="alice/memories/a.md")
    assert b"hi" not in stored["Body"].read()
    assert stored["Metadata"]["x-amz-w"] == "02"  # a data key wrapped by the tenant key


def test_users_are_isolated(s3memory_tool_factory: Callable[..., S3MemoryTool], s3memory_bucket: MockBucket) -> None:
    alice, bob = s3memory_tool_factory("alice"), s3memory_tool_factory(user_id="bob")
    alice.call({"command": "create", "path": "/memories/secret.md", "file_text": "alice's secret"})
    bob.call(CREATE)
    assert "secret" not in bob.call({"command": "view", "path": "/memories"})
    with pytest.raises(ToolError, match="does not exist"):
        bob.call({"command": "view", "path": "/memories/secret.md"})
    assert sorted(k.split("/")[0] for k in keys(s3memory_bucket)) == ["alice"] * 2 + ["bob"] * 2
    # A second tool for alice (with its own key cache) sees her memory.
    assert "alice's secret" in s3memory_tool_factory("alice").call({"command": "view", "path": "/memories/secret.md"})


def test_kms_mode_uses_the_moto_key(
    s3memory_tool_factory: Callable[..., S3MemoryTool], s3memory_bucket: MockBucket
) -> None:
    tool = s3memory_tool_factory(key_mode="kms")
    tool.call(CREATE)
    assert "1\thi" in tool.call({"command": "view", "path": "/memories/a.md"})
    assert keys(s3memory_bucket) == ["alice/memories/a.md"]  # no tenant key in KMS mode
    stored = s3memory_bucket.s3_client.head_object(Bucket=s3memory_bucket.name, Key="alice/memories/a.md")
    assert stored["Metadata"]["x-amz-w"] == "12"  # kms+context


def test_tenant_mode_with_a_kms_master_key(
    s3memory_tool_factory: Callable[..., S3MemoryTool], s3memory_bucket: MockBucket
) -> None:
    tool = s3memory_tool_factory(kms_key_id=s3memory_bucket.kms_key_id)
    tool.call(CREATE)
    assert keys(s3memory_bucket) == ["alice/.s3memory/tenant-key", "alice/memories/a.md"]
    # The tenant key is wrapped by KMS, so the fixed local master key cannot open it.
    with pytest.raises(ToolError):
        s3memory_tool_factory(master_key=TEST_MASTER_KEY).call({"command": "view", "path": "/memories/a.md"})


def test_factory_passes_options_through(s3memory_tool_factory: Callable[..., S3MemoryTool]) -> None:
    store = InMemoryStore()
    tool = s3memory_tool_factory("carol", store=store, prefix="tests/")
    tool.call(CREATE)
    assert tool.memory.store is store
    assert tool.memory.layout.tenant == "carol"
    with pytest.raises(ToolError, match="does not exist"):  # the bucket's carol is someone else
        s3memory_tool_factory("carol").call({"command": "view", "path": "/memories/a.md"})


def test_in_memory_fixture(s3memory_memory: EncryptedMemory) -> None:
    assert isinstance(s3memory_memory.store, InMemoryStore)
    assert s3memory_memory.create("/memories/a.md", "hi") == "File created successfully at: /memories/a.md"
    assert "1\thi" in s3memory_memory.execute({"command": "view", "path": "/memories/a.md"})


@pytest.mark.slow  # a subprocess
def test_import_s3memory_does_not_load_the_plugin_or_moto() -> None:
    code = (
        "import sys, s3memory; "
        "print(sorted(k for k in ('s3memory.testing', 'moto', 'pytest') if k in sys.modules)); "
        "import s3memory.testing; "
        "print(sorted(k for k in ('moto', 'boto3', 'botocore', 'anthropic') if k in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", "[]"]


USER_TESTS = """
import os

def test_tool(s3memory_tool):
    s3memory_tool.call({"command": "create", "path": "/memories/a.md", "file_text": "hi"})

def test_environment_is_restored():
    assert os.environ["AWS_PROFILE"] == "users-own-profile"
    assert os.environ["AWS_ACCESS_KEY_ID"] == "users-own-key"

def test_memory(s3memory_memory):
    s3memory_memory.create("/memories/a.md", "hi")
"""


@pytest.mark.slow  # a pytest subprocess
@pytest.mark.parametrize("moto_installed", [True, False], ids=["with-moto", "without-moto"])
def test_a_users_suite(tmp_path: Path, moto_installed: bool) -> None:
    """A foreign project picks the plugin up; without moto, the AWS fixtures skip cleanly."""
    (tmp_path / "test_user.py").write_text(textwrap.dedent(USER_TESTS))
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
    env: dict[str, Any] = {
        **os.environ,
        "AWS_PROFILE": "users-own-profile",
        "AWS_ACCESS_KEY_ID": "users-own-key",
    }
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    if not moto_installed:
        shadow = tmp_path / "shadow" / "moto"
        shadow.mkdir(parents=True)
        (shadow / "__init__.py").write_text('raise ModuleNotFoundError("No module named \'moto\'", name="moto")\n')
        env["PYTHONPATH"] = os.pathsep.join([str(shadow.parent), env.get("PYTHONPATH", "")])
    # -p no:asyncio: pytest-asyncio (in the dev extra, for tests/peers) warns at startup about
    # its own unset option, an error under this suite's filterwarnings; the plugin is not ours.
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-rs", "-p", "no:cacheprovider", "-p", "no:asyncio", "test_user.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    if moto_installed:
        assert "3 passed" in result.stdout
    else:
        assert "2 passed, 1 skipped" in result.stdout
        assert "pip install -e '.[testing]'" in result.stdout


def test_the_projects_conftest_is_built_on_the_plugin() -> None:
    """One implementation of the kit: the suite's own fixtures use what users get."""
    import conftest

    import s3memory.testing as kit

    assert conftest.use_fake_aws_credentials is kit.use_fake_aws_credentials
    assert conftest.make_moto_requests_atomic is kit.make_moto_requests_atomic
    assert (conftest.BUCKET, conftest.REGION, conftest.MASTER_KEY) == (
        kit.TEST_BUCKET,
        kit.TEST_REGION,
        kit.TEST_MASTER_KEY,
    )


def test_fake_credentials_replace_the_shells_and_are_undone(monkeypatch: pytest.MonkeyPatch) -> None:
    from s3memory.testing import use_fake_aws_credentials

    shell = {"AWS_PROFILE": "mine", "AWS_ENDPOINT_URL": "https://example.invalid", "AWS_ACCESS_KEY_ID": "AKIAREAL"}
    for name, value in shell.items():
        monkeypatch.setenv(name, value)
    with pytest.MonkeyPatch.context() as patch:
        use_fake_aws_credentials(patch)
        assert "AWS_PROFILE" not in os.environ and "AWS_ENDPOINT_URL" not in os.environ
        assert os.environ["AWS_ACCESS_KEY_ID"] == "testing"
        assert os.environ["AWS_EC2_METADATA_DISABLED"] == "true"
    assert {name: os.environ.get(name) for name in shell} == shell


def test_a_store_contract_subclass_names_only_known_capabilities() -> None:
    with pytest.raises(TypeError, match="unknown capabilities \\['copy_if_mtach'\\]"):

        class TestTypo(ObjectStoreContract):
            lacks = {"copy_if_mtach": "a typo"}  # noqa: RUF012

    with pytest.raises(TypeError, match="must map capability names to reasons"):

        class TestSet(ObjectStoreContract):
            lacks = frozenset({"copy_if_match"})  # type: ignore[assignment]


USER_STORE_TESTS = """
import pytest

from s3memory.stores import DelegatingStore, InMemoryStore
from s3memory.testing import ObjectStoreContract


class CarelessStore(InMemoryStore):
    \"\"\"Ignores If-None-Match, on put and on copy.\"\"\"

    def put(self, key, body, metadata, *, if_none_match=False, if_match=None, tags=None):
        return super().put(key, body, metadata, if_match=if_match, tags=tags)

    def copy(self, source, destination, *, metadata, if_match=None, if_none_match=False):
        return super().copy(source, destination, metadata=metadata, if_match=if_match)


class TestMine(ObjectStoreContract):
    @pytest.fixture
    def store(self):
        return DelegatingStore(InMemoryStore())


class TestCareless(ObjectStoreContract):
    lacks = {"copy_if_none_match": "declared"}

    @pytest.fixture
    def store(self):
        return CarelessStore()
"""


@pytest.mark.slow  # a pytest subprocess
def test_a_users_store_runs_the_contract(tmp_path: Path) -> None:
    """Subclassing runs every test on the user's store; the base class is never collected;
    what is declared lacking is an expected failure, what is not is caught."""
    (tmp_path / "test_user_store.py").write_text(USER_STORE_TESTS)
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
            "test_user_store.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    outcomes: dict[str, dict[str, str]] = {}
    for line in result.stdout.splitlines():
        if line.startswith("test_user_store.py::"):
            test, outcome = line.split()[:2]
            _, cls, name = test.split("::")
            outcomes.setdefault(cls, {})[name] = outcome
    contract = sorted(name for name in dir(ObjectStoreContract) if name.startswith("test_"))
    assert sorted(outcomes) == ["TestCareless", "TestMine"]
    for cls in outcomes:  # every test, on each subclass (the parametrized one five times)
        assert sorted({name.split("[")[0] for name in outcomes[cls]}) == contract
    assert set(outcomes["TestMine"].values()) == {"PASSED"}
    assert {name: outcome for name, outcome in outcomes["TestCareless"].items() if outcome != "PASSED"} == {
        "test_put_if_none_match_refuses_existing": "FAILED",
        "test_copy_if_none_match_never_overwrites": "XFAIL",
    }
