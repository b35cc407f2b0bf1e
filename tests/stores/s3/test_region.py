"""Which AWS region the configured memory uses: ``--region``/``S3MEMORY_REGION``, then
``AWS_REGION``, then ``AWS_DEFAULT_REGION``, then the AWS profile's region; with a bucket and
none of them, a configuration error that says where to set one (CLI exit status 3, one line;
a tool error over MCP). Offline: fake credentials, a temporary AWS config file, and moto
catching any request that would otherwise leave the machine."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import use_fake_aws_credentials

from s3memory import ConfigurationError
from s3memory._config import Settings
from s3memory.cli import EXIT_CONFIGURATION, cli

BUCKET = "region-test-bucket"
KMS_KEY = "alias/region-test"
NO_REGION = (
    "no AWS region for the S3 bucket: set one with --region or S3MEMORY_REGION, AWS_REGION, "
    "AWS_DEFAULT_REGION, or region = ... in the AWS profile 'default' of {config}"
)


@pytest.fixture
def aws_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Fake credentials, no region anywhere, an AWS config file of the test's own, and moto
    answering any request (none is expected: these tests only build clients)."""
    from moto import mock_aws

    use_fake_aws_credentials(monkeypatch)
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name in ("S3MEMORY_REGION", "S3MEMORY_BUCKET", "S3MEMORY_KMS_KEY_ID", "S3MEMORY_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "aws-config"
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    monkeypatch.setenv("S3MEMORY_HOME", str(tmp_path / "home"))
    monkeypatch.setattr("boto3.DEFAULT_SESSION", None)  # read this configuration, not an earlier test's
    with mock_aws():
        yield config


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Every AWS client s3memory builds from now on (from its own tuned session), by service name."""
    from s3memory._aws import clients as _aws

    built: dict[str, Any] = {}
    real = _aws.new_client

    def spy(service: str, *args: Any, **kwargs: Any) -> Any:
        built[service] = real(service, *args, **kwargs)
        return built[service]

    monkeypatch.setattr(_aws, "new_client", spy)
    return built


def regions_used(clients: dict[str, Any], **settings: Any) -> tuple[str, str]:
    """The regions of the S3 and the KMS client that the settings open the memory with."""
    clients.clear()
    Settings.from_environment(bucket=BUCKET, kms_key_id=KMS_KEY, **settings).open().close()
    return clients["s3"].meta.region_name, clients["kms"].meta.region_name


def test_each_source_of_the_region_wins_in_the_documented_order(
    aws_config: Path, clients: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    aws_config.write_text("[default]\nregion = eu-north-1\n[profile dev]\nregion = ap-southeast-2\n")
    monkeypatch.setenv("AWS_PROFILE", "dev")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ca-central-1")
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    monkeypatch.setenv("S3MEMORY_REGION", "sa-east-1")
    assert regions_used(clients, region="us-west-1") == ("us-west-1", "us-west-1")  # --region
    assert regions_used(clients) == ("sa-east-1", "sa-east-1")
    monkeypatch.delenv("S3MEMORY_REGION")
    assert regions_used(clients) == ("eu-west-3", "eu-west-3")
    monkeypatch.delenv("AWS_REGION")
    assert regions_used(clients) == ("ca-central-1", "ca-central-1")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    assert regions_used(clients) == ("ap-southeast-2", "ap-southeast-2")  # the profile's
    monkeypatch.delenv("AWS_PROFILE")
    assert regions_used(clients) == ("eu-north-1", "eu-north-1")  # the default profile's


def test_an_empty_variable_is_no_region(
    aws_config: Path, clients: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("S3MEMORY_REGION", "")
    monkeypatch.setenv("AWS_REGION", "")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-central-1")
    assert regions_used(clients) == ("eu-central-1", "eu-central-1")


def test_the_cli_reads_aws_region(aws_config: Path, clients: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The common case: Lambda and most shells set AWS_REGION, which botocore ignores."""
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    result = CliRunner().invoke(cli, ["--bucket", BUCKET, "--kms-key-id", KMS_KEY, "info"], catch_exceptions=False)
    assert clients["s3"].meta.region_name == clients["kms"].meta.region_name == "eu-west-1", result.stderr


def test_no_region_with_a_bucket_is_a_clear_configuration_error(aws_config: Path) -> None:
    for extra in ([], ["--kms-key-id", KMS_KEY]):
        result = CliRunner().invoke(cli, ["--bucket", BUCKET, *extra, "view"], catch_exceptions=False)
        assert (result.exit_code, result.stdout) == (EXIT_CONFIGURATION, "")
        assert result.stderr == "Error: " + NO_REGION.format(config=aws_config) + "\n"


def test_the_error_names_the_profile_in_use(aws_config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    aws_config.write_text("[profile dev]\noutput = json\n")
    monkeypatch.setenv("AWS_PROFILE", "dev")
    with pytest.raises(ConfigurationError) as info:
        Settings(bucket=BUCKET).open()
    assert str(info.value) == NO_REGION.format(config=aws_config).replace("'default'", "'dev'")


def test_a_profile_that_does_not_exist_is_a_configuration_error(
    aws_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    aws_config.write_text("[profile dev]\nregion = eu-west-1\n")
    monkeypatch.setenv("AWS_PROFILE", "dve")
    credentials = aws_config.parent / "aws-credentials"
    for region in ([], ["--region", "eu-west-1"]):  # read for the region, or for the credentials
        result = CliRunner().invoke(cli, ["--bucket", BUCKET, *region, "view"], catch_exceptions=False)
        assert (result.exit_code, result.stdout) == (EXIT_CONFIGURATION, "")
        assert (
            result.stderr
            == f"Error: the AWS profile 'dve' (AWS_PROFILE) is in neither {aws_config} nor {credentials}\n"
        )


def test_a_malformed_region_is_a_configuration_error(aws_config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "eu west 1")
    result = CliRunner().invoke(cli, ["--bucket", BUCKET, "view"], catch_exceptions=False)
    assert (result.exit_code, result.stdout) == (EXIT_CONFIGURATION, "")
    assert result.stderr == "Error: the AWS region 'eu west 1' (from AWS_REGION) is not a valid region name\n"


def test_a_custom_endpoint_without_a_region_signs_for_us_east_1(aws_config: Path, clients: dict[str, Any]) -> None:
    """S3-compatible servers (radosgw, MinIO, LocalStack) take us-east-1, botocore's own
    default for S3; an explicit region still wins."""
    endpoint = "http://127.0.0.1:9"  # never contacted: only the clients are built
    assert regions_used(clients, endpoint_url=endpoint) == ("us-east-1", "us-east-1")
    assert clients["s3"].meta.endpoint_url == clients["kms"].meta.endpoint_url == endpoint
    assert regions_used(clients, endpoint_url=endpoint, region="eu-west-2") == ("eu-west-2", "eu-west-2")


def test_the_embedded_default_needs_no_region(aws_config: Path, clients: dict[str, Any]) -> None:
    result = CliRunner().invoke(cli, ["create", "/memories/a.md", "x"], catch_exceptions=False)
    assert (result.exit_code, result.stderr) == (0, "")
    assert clients == {}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_no_region_reaches_the_mcp_client_as_a_configuration_error(aws_config: Path) -> None:
    from mcp import Client
    from mcp.types import TextContent

    from s3memory.mcp_server import build_server

    async with Client(build_server(Settings.from_environment(bucket=BUCKET).open)) as client:
        result = await client.call_tool("view", {"path": "/memories"})
    assert result.is_error
    [block] = result.content
    assert isinstance(block, TextContent)
    assert block.text == NO_REGION.format(config=aws_config)
