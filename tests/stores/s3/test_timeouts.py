"""A hung S3 or KMS endpoint fails within the configured timeout, naming the endpoint.

The endpoint is a socket on 127.0.0.1 that accepts connections (the kernel completes the
handshake) and never answers: what a stuck proxy or a black-holed service looks like.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from helpers import use_fake_aws_credentials

from s3memory import ConfigurationError, StorageUnavailableError, generate_master_key, open_memory
from s3memory._aws.clients import DEFAULT_TIMEOUT_SECONDS, client_config
from s3memory._config import Settings
from s3memory.cli import EXIT_STORAGE, cli


@pytest.fixture
def hung_endpoint() -> Iterator[str]:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)  # never accepted, never answered
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


@pytest.fixture(autouse=True)
def fake_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    use_fake_aws_credentials(monkeypatch)
    for name in ("AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.slow  # wall clock
def test_a_hung_s3_endpoint_fails_within_the_timeout_and_names_it(hung_endpoint: str) -> None:
    memory = Settings(bucket="memory", endpoint_url=hung_endpoint, timeout=0.3).open()
    started = time.monotonic()
    with pytest.raises(StorageUnavailableError) as info:
        memory.view("/memories")
    elapsed = time.monotonic() - started
    # three attempts of 0.3 s, and the standard mode's jittered backoff (at most 1 s, then 2 s)
    assert 0.9 <= elapsed < 0.9 + 3 + 2, elapsed
    assert str(info.value) == (
        f"Error: Memory storage failed during list_objects_v2: had no answer from {hung_endpoint} "
        "within 0.3 s after 3 attempts; try again."
    )


@pytest.mark.slow  # wall clock
def test_the_default_timeout_suits_a_lambda(hung_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seconds, not botocore's 60 s per attempt; AWS_MAX_ATTEMPTS is honoured (it was not)."""
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    memory = Settings(bucket="memory", endpoint_url=hung_endpoint).open()
    started = time.monotonic()
    with pytest.raises(StorageUnavailableError, match=f"within {DEFAULT_TIMEOUT_SECONDS:g} s after 1 attempt;"):
        memory.read_text("/memories/a.md")
    assert DEFAULT_TIMEOUT_SECONDS <= time.monotonic() - started < DEFAULT_TIMEOUT_SECONDS + 3


@pytest.mark.slow  # wall clock
def test_a_hung_kms_endpoint_fails_within_the_timeout(hung_endpoint: str) -> None:
    from s3memory import InMemoryStore

    memory = open_memory(
        user_id="alice", store=InMemoryStore(), kms_key_id="alias/memory", kms_client=_kms_client(hung_endpoint, 0.2)
    )
    started = time.monotonic()
    with pytest.raises(StorageUnavailableError, match=f"kms:encrypt: had no answer from {hung_endpoint} within 0.2 s"):
        memory.create("/memories/a.md", "x")
    assert time.monotonic() - started < 0.6 + 3 + 2


def _kms_client(endpoint: str, timeout: float) -> object:
    from s3memory._aws.clients import new_client

    return new_client("kms", region_name="us-east-1", endpoint_url=endpoint, timeout=timeout)


def test_open_memory_builds_its_clients_with_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    memory = open_memory(user_id="alice", bucket="memory", master_key=generate_master_key(), timeout=2.5)
    config = memory.store.client.meta.config  # type: ignore[attr-defined]
    assert (config.connect_timeout, config.read_timeout) == (2.5, 2.5)
    assert config.retries == {"mode": "standard", "total_max_attempts": 3}
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "7")
    monkeypatch.setenv("AWS_RETRY_MODE", "adaptive")
    assert client_config().retries == {}  # botocore then takes both from the environment


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "inf", "soon", "3601"])
def test_a_bad_timeout_is_a_configuration_error_naming_the_setting(bad: str) -> None:
    with pytest.raises(ConfigurationError, match=r"^--timeout \(S3MEMORY_TIMEOUT\) must be"):
        Settings.from_environment({"S3MEMORY_TIMEOUT": bad})
    value: object = bad if bad == "soon" else float(bad)
    with pytest.raises(ConfigurationError, match=r"^timeout must be"):
        open_memory(user_id="alice", bucket="memory", master_key=generate_master_key(), timeout=value)  # type: ignore[arg-type]


@pytest.mark.slow  # wall clock
def test_the_cli_takes_the_timeout_from_the_environment(
    hung_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    monkeypatch.setenv("S3MEMORY_TIMEOUT", "0.2")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    started = time.monotonic()
    result = CliRunner().invoke(cli, ["--bucket", "memory", "--endpoint-url", hung_endpoint, "view"])
    assert time.monotonic() - started < 3
    assert (result.exit_code, result.stdout) == (EXIT_STORAGE, "")
    assert result.stderr == (
        f"Error: Memory storage failed during list_objects_v2: had no answer from {hung_endpoint} "
        "within 0.2 s after 1 attempt; try again.\n"
    )


def test_the_endpoint_is_named_without_its_credentials() -> None:
    """An endpoint URL may carry user:password@ (some S3-compatible servers): never echoed."""
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    closed = port.getsockname()[1]
    port.close()  # nothing listens there: connection refused at once
    memory = Settings(bucket="memory", endpoint_url=f"http://user:hunter2@127.0.0.1:{closed}", timeout=0.5).open()
    with pytest.raises(StorageUnavailableError) as info:
        memory.view("/memories")
    assert f"http://127.0.0.1:{closed} could not be reached" in str(info.value)
    assert "hunter2" not in str(info.value) and "user:" not in str(info.value)
