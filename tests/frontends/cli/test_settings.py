"""Settings as shipped: what a mistyped value does, and when a master key is created."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from s3memory import ConfigurationError
from s3memory._config import Settings, create_master_key, load_master_key


@pytest.fixture
def data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return tmp_path / "data" / "s3memory"


def test_the_default_key_is_created_on_first_use(data_home: Path) -> None:
    memory = Settings().open()
    memory.create("/memories/a.md", "x")
    assert (data_home / "master.key").stat().st_mode & 0o777 == 0o600
    assert Settings().open().read_text("/memories/a.md") == "x"  # the same key the next time


def test_a_mistyped_master_key_file_is_an_error_not_a_new_key(data_home: Path, tmp_path: Path) -> None:
    Settings().open().create("/memories/a.md", "x")
    typo = tmp_path / "mater.key"
    with pytest.raises(ConfigurationError) as info:
        Settings(master_key_file=typo).open()
    assert str(info.value) == (
        f"the master key file {typo} (--master-key-file (S3MEMORY_MASTER_KEY_FILE)) does not exist; "
        f"to create a new key there: s3memory init --master-key-file {typo}"
    )
    assert not os.path.lexists(typo)


def test_no_directory_is_created_for_an_explicit_key(tmp_path: Path, data_home: Path) -> None:
    missing = tmp_path / "no" / "such" / "dir" / "master.key"
    with pytest.raises(ConfigurationError, match="does not exist"):
        Settings(master_key_file=missing).open()
    with pytest.raises(ConfigurationError, match=r"directory of the master key file .* does not exist"):
        create_master_key(missing)
    assert not (tmp_path / "no").exists()


def test_create_master_key_on_request(tmp_path: Path, data_home: Path) -> None:
    path = tmp_path / "team.key"
    assert create_master_key(path) is True
    key = load_master_key(path)
    assert create_master_key(path) is False  # never replaced
    assert load_master_key(path) == key
    Settings(master_key_file=path).open().create("/memories/a.md", "x")
    assert Settings(master_key_file=path).open().read_text("/memories/a.md") == "x"


def test_create_master_key_never_replaces_an_unusable_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.key"
    path.write_text("not a key\n")
    path.chmod(0o600)
    with pytest.raises(ConfigurationError, match="is not base64"):
        create_master_key(path)
    assert path.read_text() == "not a key\n"


def test_the_default_home_is_created_by_create_master_key(data_home: Path) -> None:
    assert create_master_key(Settings().master_key_path) is True
    assert data_home.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize(
    ("bucket", "message"),
    [
        (
            "s3://my-bucket",
            "--bucket (S3MEMORY_BUCKET) takes the bucket's name, not a URL: 's3://my-bucket'; try --bucket my-bucket",
        ),
        (
            "S3://my-bucket/team/",
            "--bucket (S3MEMORY_BUCKET) takes the bucket's name, not a URL: 'S3://my-bucket/team/'; "
            "try --bucket my-bucket --prefix team/",
        ),
        ("my bucket", "--bucket (S3MEMORY_BUCKET) 'my bucket' is not a bucket name"),
        ("a", "--bucket (S3MEMORY_BUCKET) 'a' is not a bucket name"),
        ("-bucket", "--bucket (S3MEMORY_BUCKET) '-bucket' is not a bucket name"),
    ],
)
def test_a_bucket_that_is_not_a_bucket_name(bucket: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        Settings.from_environment({"S3MEMORY_BUCKET": bucket})
    assert str(info.value).startswith(message)


def test_an_access_point_arn_is_a_bucket() -> None:
    arn = "arn:aws:s3:us-east-1:123456789012:accesspoint/memory"
    assert Settings.from_environment({"S3MEMORY_BUCKET": arn}).bucket == arn


def test_a_prefix_or_kms_key_without_a_bucket_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"^--prefix \(S3MEMORY_PREFIX\) is a key prefix in a bucket"):
        Settings.from_environment({"S3MEMORY_PREFIX": "team/"})
    with pytest.raises(ConfigurationError, match=r"^--kms-key-id \(S3MEMORY_KMS_KEY_ID\) needs --bucket"):
        Settings.from_environment({"S3MEMORY_KMS_KEY_ID": "alias/x"})
    assert Settings.from_environment({"S3MEMORY_PREFIX": ""}).prefix == ""


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("S3MEMORY_KEY_MODE", "plain", "--key-mode (S3MEMORY_KEY_MODE) must be 'tenant' or 'kms', not 'plain'"),
        (
            "S3MEMORY_SENSITIVE_DATA",
            "warn",
            "--sensitive-data (S3MEMORY_SENSITIVE_DATA) must be 'refuse', 'redact' or 'allow', not 'warn'",
        ),
        ("S3MEMORY_TRACK_ACCESS", "maybe", "S3MEMORY_TRACK_ACCESS must be 1 or 0, not 'maybe'"),
        ("S3MEMORY_TIMEOUT", "fast", "--timeout (S3MEMORY_TIMEOUT) must be a number of seconds, not 'fast'"),
    ],
)
def test_bad_values_name_the_setting(variable: str, value: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        Settings.from_environment({variable: value})
    assert str(info.value) == message


def test_kms_key_mode_without_a_key_names_the_flags() -> None:
    settings = Settings.from_environment({"S3MEMORY_KEY_MODE": "kms", "S3MEMORY_BUCKET": "memory"})
    with pytest.raises(ConfigurationError, match=r"^--key-mode kms needs --kms-key-id \(S3MEMORY_KMS_KEY_ID\)$"):
        settings.open()


def test_a_long_hostile_value_is_quoted_and_cut() -> None:
    with pytest.raises(ConfigurationError) as info:
        Settings.from_environment({"S3MEMORY_KEY_MODE": "\x1b[31m" + "x" * 500})
    assert len(str(info.value)) < 200 and "\x1b" not in str(info.value)
