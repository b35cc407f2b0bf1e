"""The clients users are told to share (``s3memory.s3_client``, ``s3memory.kms_client``), and
which HTTP stack a client sends object requests with (``describe_s3_client``, shown by
``s3memory info`` and ``--debug``): the fast path wherever the docs lead."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import BUCKET, REGION, use_fake_aws_credentials
from helpers.cli import ENV_NAMES

import s3memory
from s3memory import ConfigurationError, Settings, describe_s3_client, generate_master_key, open_memory
from s3memory._aws.crt import CrtS3Client
from s3memory.cli import cli

# A closed port: building a client sends nothing, so nothing listens there.
NOWHERE = "http://127.0.0.1:9"


@pytest.fixture
def fake_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    use_fake_aws_credentials(monkeypatch)


def test_one_client_per_settings_is_shared(fake_credentials: None) -> None:
    first = s3memory.s3_client(region_name=REGION, endpoint_url=NOWHERE)
    assert s3memory.s3_client(region_name=REGION, endpoint_url=NOWHERE) is first
    assert s3memory.s3_client(region_name=REGION, endpoint_url=NOWHERE, timeout=5) is first  # the default, spelled out
    assert s3memory.s3_client(region_name=REGION, endpoint_url=NOWHERE, timeout=2) is not first
    assert s3memory.s3_client(region_name="eu-west-1", endpoint_url=NOWHERE) is not first
    kms = s3memory.kms_client(region_name=REGION, endpoint_url=NOWHERE)
    assert s3memory.kms_client(region_name=REGION, endpoint_url=NOWHERE) is kms and kms is not first
    assert kms.meta.service_model.service_name == "kms"


def test_the_fast_client_stands_in_when_awscrt_is_installed(fake_credentials: None) -> None:
    client = s3memory.s3_client(region_name=REGION, endpoint_url=NOWHERE)
    assert isinstance(client, CrtS3Client)
    assert describe_s3_client(client)[0] == "awscrt"
    # memories opened with no client share it: one connection pool for every memory
    memory = open_memory(user_id="alice", bucket=BUCKET, master_key=generate_master_key())
    assert memory.store.client is s3memory.s3_client()  # type: ignore[attr-defined]


def test_a_changed_aws_environment_makes_new_clients(fake_credentials: None, monkeypatch: pytest.MonkeyPatch) -> None:
    before = s3memory.s3_client(region_name=REGION, endpoint_url=NOWHERE)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "another-key")
    after = s3memory.s3_client(region_name=REGION, endpoint_url=NOWHERE)
    assert after is not before
    assert after._client._get_credentials().access_key == "another-key"


def test_explicit_credentials_make_a_new_client_each_call(fake_credentials: None) -> None:
    session = {"aws_access_key_id": "scoped", "aws_secret_access_key": "secret", "aws_session_token": "token"}
    first = s3memory.s3_client(region_name=REGION, endpoint_url=NOWHERE, **session)
    second = s3memory.s3_client(region_name=REGION, endpoint_url=NOWHERE, **session)
    assert first is not second
    assert first._client._get_credentials().access_key == "scoped"


def test_timeouts_are_the_clients(fake_credentials: None) -> None:
    client = s3memory.s3_client(region_name=REGION, endpoint_url=NOWHERE, timeout=5, connect_timeout=2)
    config = client.meta.config
    assert (config.connect_timeout, config.read_timeout) == (2, 5)
    with pytest.raises(ConfigurationError, match=r"^connect_timeout must be"):
        s3memory.kms_client(region_name=REGION, connect_timeout=0)


def test_a_client_behind_a_mock_is_botocores_and_says_why(aws: None) -> None:
    client = s3memory.s3_client(region_name=REGION)
    kind, why = describe_s3_client(client)
    assert kind == "botocore" and "a mock intercepting its requests" in why


def test_without_awscrt_the_reason_names_the_extra(fake_credentials: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "awscrt.http", None)  # import awscrt.http now fails
    client = s3memory.s3_client(region_name=REGION, endpoint_url=NOWHERE, timeout=3)
    assert describe_s3_client(client) == (
        "botocore",
        "awscrt is not installed (the fast extra: pip install 's3memory[fast]')",
    )


def test_a_stand_in_client_is_neither(fake_credentials: None) -> None:
    assert describe_s3_client(object()) == ("other", "a client of the application's (object)")


def test_the_cli_gets_the_fast_client_and_debug_says_so(
    fake_credentials: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings.from_environment(
        {"S3MEMORY_BUCKET": BUCKET, "S3MEMORY_ENDPOINT_URL": NOWHERE, "S3MEMORY_HOME": str(tmp_path)}
    )
    with caplog.at_level(logging.DEBUG, logger="s3memory"):
        memory = settings.open()
    assert isinstance(memory.store.client, CrtS3Client)  # type: ignore[attr-defined]
    assert "S3 client: awscrt (the fast extra" in caplog.text


def test_info_names_the_s3_client(aws: None, s3_client: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("S3MEMORY_HOME", str(tmp_path))
    shown = CliRunner().invoke(cli, ["--bucket", BUCKET, "--user", "alice", "info", "--json"])
    assert shown.exit_code == 0, shown.output
    described = json.loads(shown.stdout)["s3_client"]
    assert described["kind"] == "botocore" and "mock" in described["why"]  # moto intercepts: botocore's
    table = CliRunner().invoke(cli, ["--bucket", BUCKET, "--user", "alice", "info"])
    assert "S3 client" in table.stdout and "botocore:" in table.stdout
    local = CliRunner().invoke(cli, ["--user", "alice", "info", "--json"])
    assert json.loads(local.stdout)["s3_client"] is None
