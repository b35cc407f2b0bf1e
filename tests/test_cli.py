"""The basic CLI on the embedded default (local store + local master key) and on S3 (moto)."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest
from conftest import BUCKET

from s3memory.cli import main


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in (
        "S3MEMORY_STORE_DIR",
        "S3MEMORY_MASTER_KEY_FILE",
        "S3MEMORY_USER",
        "S3MEMORY_BUCKET",
        "S3MEMORY_KMS_KEY_ID",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("S3MEMORY_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_six_commands_on_the_embedded_default(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "create", "/memories/n.md", "alpha\nbeta\n") == (
        0,
        "File created successfully at: /memories/n.md\n",
        "",
    )
    assert run(capsys, "view", "/memories/n.md", "--range", "2", "-1")[1] == (
        "Here's the content of /memories/n.md with line numbers:\n     2\tbeta\n     3\t\n"
    )
    assert run(capsys, "str-replace", "/memories/n.md", "beta", "gamma")[0] == 0
    assert run(capsys, "insert", "/memories/n.md", "0", "top")[1] == "The file /memories/n.md has been edited.\n"
    assert run(capsys, "rename", "/memories/n.md", "/memories/d/n.md")[0] == 0
    code, out, _ = run(capsys, "view", "/memories")
    assert code == 0 and out.endswith("16B\t/memories/d/\n16B\t/memories/d/n.md\n")
    assert run(capsys, "delete", "/memories/d")[1] == "Successfully deleted /memories/d\n"
    key_file = home / "master.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    # memory files on disk are ciphertext
    assert not any(b"alpha" in p.read_bytes() for p in (home / "store").rglob("*") if p.is_file())


def test_errors_exit_1_with_message(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "view", "/memories/none") == (
        1,
        "",
        "Error: The path /memories/none does not exist. Please provide a valid path.\n",
    )
    code, _, err = run(capsys, "--user", "../evil", "view", "/memories")
    assert code == 1 and err.startswith("Error: user_id '../evil' is not allowed")
    assert not (home.parent / "evil").exists()


def test_create_reads_standard_input(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("from stdin\n"))
    assert run(capsys, "create", "/memories/s.md")[0] == 0
    assert "1\tfrom stdin" in run(capsys, "view", "/memories/s.md")[1]


def test_bad_master_key_file(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home.mkdir(parents=True)
    (home / "master.key").write_text("not base64!!\n")
    code, _, err = run(capsys, "view", "/memories")
    assert code == 1 and "is not base64" in err


def test_usage_errors_exit_2(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["frobnicate"])
    assert info.value.code == 2


def test_s3_mode(home: Path, capsys: pytest.CaptureFixture[str], s3_client: Any, kms_key_id: str) -> None:
    base = ["--bucket", BUCKET, "--user", "bob", "--region", "us-east-1"]
    assert run(capsys, *base, "create", "/memories/x", "1")[0] == 0
    assert run(capsys, *base, "--kms-key-id", kms_key_id, "--user", "carol", "create", "/memories/y", "2")[0] == 0
    keys = sorted(o["Key"] for o in s3_client.list_objects_v2(Bucket=BUCKET)["Contents"])
    assert keys == ["bob/.s3memory/tenant-key", "bob/memories/x", "carol/.s3memory/tenant-key", "carol/memories/y"]
    assert run(capsys, *base, "view", "/memories")[1].endswith("1B\t/memories/x\n")


def test_demo_runs_offline(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Two sessions through the SDK's real tool runner against the scripted model."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    code, out, _ = run(capsys, "demo")
    assert code == 0
    assert "a SCRIPTED model (set ANTHROPIC_API_KEY to talk to Claude)" in out
    assert "=== session 2: a new conversation ===" in out
    assert "memory -> File created successfully at: /memories/user/profile.md" in out
    # session 2 reads what session 1 wrote, through a fresh conversation
    assert "     2\t- drinks: green tea, never coffee" in out
    assert "memory -> [is_error] Error: Invalid path '/memories/../../etc/passwd'" in out
    assert "assistant: Green tea, never coffee." in out
    raw, decrypted = out.split("--- decrypted by s3memory for user 'ada' ---")
    assert "x-amz-meta-x-amz-c: 115" in raw and "green tea" not in raw.split("=== what the bucket holds ===")[1]
    assert "     4\t- lives in: Lisbon" in decrypted
