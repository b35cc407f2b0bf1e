"""The embedded default's master key file and data directory (``s3memory/_crypto/keyfile.py``,
reached through ``load_or_create_master_key``, ``Settings`` and the CLI).

- a created key is 0600 in 0700 directories, and reads back the same; so are the data home's
  directories the embedded default creates;
- a key another user owns or may read or write, a link at the key (dangling or not), and a
  key or data directory others may write to or another user owns are refused with
  ``ConfigurationError`` (the CLI: one error line, no traceback), never merely warned about;
- concurrent first uses agree on one key.
"""

from __future__ import annotations

import base64
import os
import stat
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from s3memory import ConfigurationError, Settings
from s3memory._config import load_or_create_master_key


def test_a_created_key_is_private_in_private_directories(tmp_path: Path) -> None:
    key = load_or_create_master_key(tmp_path / "a" / "b" / "master.key")
    assert len(key) == 32
    assert stat.S_IMODE((tmp_path / "a" / "b" / "master.key").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == stat.S_IMODE((tmp_path / "a" / "b").stat().st_mode) == 0o700
    assert load_or_create_master_key(tmp_path / "a" / "b" / "master.key") == key
    assert os.listdir(tmp_path / "a" / "b") == ["master.key"]


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o620, 0o602, 0o660], ids=oct)
def test_a_key_others_may_read_or_write_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "master.key"
    path.write_text(base64.b64encode(bytes(range(32))).decode())
    path.chmod(mode)
    with pytest.raises(ConfigurationError, match=r"readable or writable by other users; run: chmod 600"):
        load_or_create_master_key(path)


def test_a_key_owned_by_another_user_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "master.key"
    load_or_create_master_key(path)
    if os.geteuid() == 0:
        os.chown(path, 1, -1)  # planted by another user
    else:
        monkeypatch.setattr(os, "geteuid", lambda: path.stat().st_uid + 1)  # as another user sees it
    with pytest.raises(ConfigurationError, match=r"master key file .* is owned by another user"):
        load_or_create_master_key(path)


@pytest.mark.parametrize("target", ["dangling", "regular"])
def test_a_link_at_the_key_is_refused(tmp_path: Path, target: str) -> None:
    real = tmp_path / "real.key"
    if target == "regular":
        real.write_text(base64.b64encode(bytes(range(32))).decode())
        real.chmod(0o600)
    (tmp_path / "master.key").symlink_to(real)
    with pytest.raises(ConfigurationError, match="is a symbolic link"):
        load_or_create_master_key(tmp_path / "master.key")
    assert real.exists() == (target == "regular")  # nothing created through the link


def test_a_key_in_a_directory_others_may_write_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o777)  # pre-created world-writable, with a key planted in it
    (home / "master.key").write_text(base64.b64encode(bytes(range(32))).decode())
    (home / "master.key").chmod(0o600)
    with pytest.raises(ConfigurationError, match="writable by other users; run: chmod go-w"):
        load_or_create_master_key(home / "master.key")
    with pytest.raises(ConfigurationError, match=r"data directory .* writable by other users"):
        Settings(home=home).open()
    assert sorted(os.listdir(home)) == ["master.key"]  # no store was created in it


def test_a_data_home_not_ours_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setattr(os, "geteuid", lambda: home.stat().st_uid + 1)
    with pytest.raises(ConfigurationError, match=r"data directory .* owned by another user"):
        Settings(home=home).open()


def test_the_cli_refuses_an_unsafe_home_without_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from s3memory.cli import EXIT_CONFIGURATION, cli

    for name in list(os.environ):
        if name.startswith("S3MEMORY_"):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o777)
    monkeypatch.setenv("S3MEMORY_HOME", str(home))
    result = CliRunner().invoke(cli, ["view"])
    assert result.exit_code == EXIT_CONFIGURATION and "Traceback" not in result.output
    assert result.stderr.startswith("Error: the data directory") and "chmod go-w" in result.stderr


def test_the_embedded_default_creates_private_directories(tmp_path: Path) -> None:
    home = tmp_path / "xdg" / "s3memory"
    Settings(home=home).open().create("/memories/a.md", "x")
    for path in (tmp_path / "xdg", home, home / "store"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    assert stat.S_IMODE((home / "master.key").stat().st_mode) == 0o600


def test_concurrent_first_uses_agree_on_one_key(tmp_path: Path) -> None:
    path = tmp_path / "master.key"
    keys: list[bytes] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def first_use() -> None:
        start.wait()
        try:
            keys.append(load_or_create_master_key(path))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(keys) == 8 and len(set(keys)) == 1
    assert os.listdir(tmp_path) == ["master.key"]
