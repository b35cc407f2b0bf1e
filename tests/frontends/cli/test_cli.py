"""The CLI through click's CliRunner: the six commands, the conveniences, exit statuses, help."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from helpers import BUCKET
from helpers.cli import ENV_NAMES

from s3memory import Settings
from s3memory.cli import EXIT_CONFIGURATION, EXIT_REFUSED, EXIT_STORAGE, EXIT_USAGE, cli, main


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("S3MEMORY_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def run(*argv: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(argv), input=stdin, catch_exceptions=False)


def test_six_commands_on_the_embedded_default(home: Path) -> None:
    result = run("create", "/memories/n.md", "alpha\nbeta\n")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "File created successfully at: /memories/n.md\n", "")
    assert run("view", "/memories/n.md", "--range", "2", "-1").stdout == (
        "Here's the content of /memories/n.md with line numbers:\n     2\tbeta\n     3\t\n"
    )
    assert run("str-replace", "/memories/n.md", "beta", "gamma").exit_code == 0
    assert run("insert", "/memories/n.md", "0", "top").stdout == "The file /memories/n.md has been edited.\n"
    assert run("rename", "/memories/n.md", "/memories/d/n.md").exit_code == 0
    listing = run("view")  # PATH defaults to /memories
    assert listing.exit_code == 0 and listing.stdout.endswith("16B\t/memories/d/\n16B\t/memories/d/n.md\n")
    assert run("cat", "/memories/d/n.md").stdout == "top\nalpha\ngamma\n"
    assert run("delete", "/memories/d").stdout == "Successfully deleted /memories/d\n"
    assert stat.S_IMODE((home / "master.key").stat().st_mode) == 0o600
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    # memory files on disk are ciphertext
    run("create", "/memories/secret.md", "alpha-plaintext")
    assert not any(b"alpha-plaintext" in p.read_bytes() for p in (home / "store").rglob("*") if p.is_file())


def test_create_reads_standard_input(home: Path) -> None:
    assert run("create", "/memories/s.md", stdin="from stdin\n").exit_code == 0
    assert run("cat", "/memories/s.md").stdout == "from stdin\n"


@pytest.mark.parametrize(
    ("argv", "status", "message"),
    [
        (["view", "/memories/none"], EXIT_REFUSED, "Error: The path /memories/none does not exist."),
        (
            ["cat", "/memories/../etc/passwd"],
            EXIT_REFUSED,
            "Error: Path /memories/../etc/passwd would escape /memories directory: "
            "'..' segments (directory traversal) are not allowed",
        ),
        (["insert", "/memories/none", "0", "x"], EXIT_REFUSED, "Error: The path /memories/none does not exist\n"),
        (["--user", "../evil", "view"], EXIT_CONFIGURATION, "Error: --user (S3MEMORY_USER) '../evil' is not allowed"),
        (["--key-mode", "kms", "view"], EXIT_CONFIGURATION, "Error: "),
        (["frobnicate"], EXIT_USAGE, "No such command 'frobnicate'"),
        (["insert", "/memories/x", "one", "text"], EXIT_USAGE, "'one' is not a valid integer"),
    ],
)
def test_errors_give_a_message_and_an_exit_status(home: Path, argv: list[str], status: int, message: str) -> None:
    result = run(*argv)
    assert result.exit_code == status
    assert result.stdout == ""
    assert message in result.stderr
    assert "Traceback" not in result.output
    assert not (home.parent / "evil").exists() and not (home.parent.parent / "etc").exists()


def test_refusals_leave_the_memory_unchanged(home: Path) -> None:
    run("create", "/memories/a.md", "first\n")
    result = run("create", "/memories/a.md", "second\n")
    assert (result.exit_code, result.stderr) == (EXIT_REFUSED, "Error: File /memories/a.md already exists\n")
    assert run("cat", "/memories/a.md").stdout == "first\n"
    result = run("cat", "/memories")
    assert (result.exit_code, result.stderr) == (EXIT_REFUSED, "Error: /memories is a directory, not a file\n")


def test_bad_master_key_file_is_a_configuration_error(home: Path) -> None:
    home.mkdir(parents=True)
    (home / "master.key").write_text("not base64!!\n")
    (home / "master.key").chmod(0o600)
    result = run("view")
    assert result.exit_code == EXIT_CONFIGURATION and "is not base64" in result.stderr


def test_a_tampered_file_is_a_storage_failure(home: Path) -> None:
    run("create", "/memories/a.md", "original\n")
    (stored,) = [p for p in (home / "store").rglob("*") if p.is_file() and "a.md" in p.name and "meta" not in p.name]
    data = bytearray(stored.read_bytes())
    data[-1] ^= 1
    stored.write_bytes(bytes(data))
    result = run("cat", "/memories/a.md")
    assert result.exit_code == EXIT_STORAGE
    assert "failed its integrity check" in result.stderr and "original" not in result.output


def test_users_are_isolated_by_flag_and_environment(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert run("--user", "alice", "create", "/memories/a.md", "alice's").exit_code == 0
    monkeypatch.setenv("S3MEMORY_USER", "bob")
    assert run("view", "/memories/a.md").exit_code == EXIT_REFUSED
    assert run("--user", "alice", "cat", "/memories/a.md").stdout == "alice's"


def test_ls_lists_children_or_every_file(home: Path) -> None:
    run("create", "/memories/top.md", "12345")
    run("create", "/memories/dir/a.md", "123")
    run("create", "/memories/dir/deep/b.md", "1234567")
    run("create", "/memories/.hidden", "1")
    children = run("ls")
    rows = [line.split() for line in children.stdout.splitlines()[1:-1]]
    assert rows == [["1B", "1", "/memories/.hidden"], ["10B", "10", "/memories/dir/"], ["5B", "5", "/memories/top.md"]]
    assert children.stdout.splitlines()[-1] == "4 file(s), 16B"
    recursive = run("ls", "-r", "/memories/dir")
    assert [line.split()[-1] for line in recursive.stdout.splitlines()[1:-1]] == [
        "/memories/dir/a.md",
        "/memories/dir/deep/b.md",
    ]
    assert run("ls", "/memories/top.md").stdout.splitlines()[1].split() == ["5B", "5", "/memories/top.md"]
    missing = run("ls", "/memories/none")
    assert missing.exit_code == EXIT_REFUSED and "does not exist" in missing.stderr


def test_import_then_export_round_trips_a_tree(home: Path, tmp_path: Path) -> None:
    source = tmp_path / "notes"
    (source / "sub" / "deeper").mkdir(parents=True)
    (source / "a.md").write_text("alpha\n")
    (source / "sub" / "b.md").write_text("béta ✓\n")
    (source / "sub" / "deeper" / "c.txt").write_text("")
    (source / ".git").mkdir()
    (source / ".git" / "config").write_text("hidden directory: skipped")
    (source / ".env").write_text("hidden file: skipped")
    (source / "link.md").symlink_to(tmp_path / "outside.md")
    (tmp_path / "outside.md").write_text("symlinks are not followed")

    result = run("import", str(source), "--to", "/memories/notes")
    assert result.exit_code == 0, result.output
    assert result.stdout == "imported: 3 of 3 file(s)\n"
    assert result.stderr == ""  # no progress bar: stderr is not a terminal
    listed = run("ls", "-r").stdout
    assert "/memories/notes/sub/deeper/c.txt" in listed and ".git" not in listed and "link" not in listed

    target = tmp_path / "export"
    result = run("export", str(target), "--from", "/memories/notes")
    assert (result.exit_code, result.stdout) == (0, f"exported to {target}: 3 of 3 file(s)\n")
    exported = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    assert exported == ["a.md", "sub/b.md", "sub/deeper/c.txt"]
    for name in exported:
        assert (target / name).read_bytes() == (source / name).read_bytes()


def test_import_never_overwrites_and_reports_each_failure(home: Path, tmp_path: Path) -> None:
    source = tmp_path / "notes"
    source.mkdir()
    (source / "a.md").write_text("new\n")
    (source / "b.md").write_text("b\n")
    (source / "binary.bin").write_bytes(b"\xff\xfe\x00")
    run("create", "/memories/a.md", "kept\n")
    result = run("import", str(source))
    assert result.exit_code == EXIT_REFUSED  # the binary file
    assert result.stdout == "imported: 1 of 3 file(s), 1 already existed (kept), 1 not UTF-8 text (skipped)\n"
    assert result.stderr == "/memories/binary.bin: Error: not UTF-8 text; skipped\n"  # the existing one: counted only
    assert run("cat", "/memories/a.md").stdout == "kept\n"
    assert run("cat", "/memories/b.md").stdout == "b\n"
    assert run("import", str(tmp_path / "missing")).exit_code == EXIT_USAGE


def test_import_again_skips_what_exists_quietly(home: Path, tmp_path: Path) -> None:
    source = tmp_path / "notes"
    source.mkdir()
    for index in range(30):
        (source / f"n{index:02}.md").write_text(f"note {index}\n")
    assert run("import", str(source)).exit_code == 0
    (source / "new.md").write_text("new\n")
    again = run("import", str(source))
    assert (again.exit_code, again.stderr) == (0, "")
    assert again.stdout == "imported: 1 of 31 file(s), 30 already existed (kept)\n"
    listed = run("-v", "import", str(source))  # --verbose names them
    assert listed.exit_code == 0 and listed.stderr.count(": already existed (kept)\n") == 31


def test_export_refuses_to_overwrite_without_force(home: Path, tmp_path: Path) -> None:
    run("create", "/memories/a.md", "from memory\n")
    target = tmp_path / "out"
    target.mkdir()
    (target / "a.md").write_text("local\n")
    result = run("export", str(target))
    assert result.exit_code == EXIT_REFUSED and "exists (use --force to overwrite)" in result.stderr
    assert (target / "a.md").read_text() == "local\n"
    assert run("export", str(target), "--force").exit_code == 0
    assert (target / "a.md").read_text() == "from memory\n"


def test_info_describes_the_tenant(home: Path) -> None:
    run("--user", "ada", "create", "/memories/a.md", "x" * 2048)
    run("--user", "ada", "create", "/memories/d/b.md", "yz")
    out = run("--user", "ada", "info").stdout
    fields = dict(line.split(None, 1) for line in out.splitlines() if line[:1].strip())
    assert fields["user"].strip() == "ada"
    assert fields["store"].strip() == str(home / "store")
    assert fields["files"].strip() == "2" and fields["directories"].strip() == "1"
    assert fields["size"].strip() == "2.0K (2,050 bytes of plaintext)"
    assert "local master key" in out


def test_s3_mode(home: Path, s3_client: Any, kms_key_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    base = ["--bucket", BUCKET, "--user", "bob", "--region", "us-east-1"]
    assert run(*base, "create", "/memories/x", "1").exit_code == 0
    assert run(*base, "--kms-key-id", kms_key_id, "--user", "carol", "create", "/memories/y", "2").exit_code == 0
    keys = sorted(o["Key"] for o in s3_client.list_objects_v2(Bucket=BUCKET)["Contents"])
    assert keys == ["bob/.s3memory/tenant-key", "bob/memories/x", "carol/.s3memory/tenant-key", "carol/memories/y"]
    assert run(*base, "view").stdout.endswith("1B\t/memories/x\n")
    # the same settings from the environment
    monkeypatch.setenv("S3MEMORY_BUCKET", BUCKET)
    monkeypatch.setenv("S3MEMORY_REGION", "us-east-1")
    monkeypatch.setenv("S3MEMORY_USER", "carol")
    monkeypatch.setenv("S3MEMORY_KMS_KEY_ID", kms_key_id)
    assert run("cat", "/memories/y").stdout == "2"
    assert f"s3://{BUCKET}/" in run("info").stdout
    # a missing bucket is a storage failure, with AWS's reason in words
    result = run("--bucket", "no-such-bucket", "view")
    assert result.exit_code == EXIT_STORAGE and result.stderr.startswith("Error: ")


def test_settings_from_environment_and_overrides() -> None:
    env = {"S3MEMORY_USER": "u1", "S3MEMORY_HOME": "~/x", "S3MEMORY_KEY_MODE": "kms", "S3MEMORY_PREFIX": ""}
    settings = Settings.from_environment(env, user="u2")
    assert settings.user == "u2" and settings.key_mode == "kms" and settings.prefix == ""
    assert settings.home == Path("~/x").expanduser()
    with pytest.raises(ValueError, match=r"--key-mode \(S3MEMORY_KEY_MODE\) must be 'tenant' or 'kms'"):
        Settings.from_environment({"S3MEMORY_KEY_MODE": "plain"})


def test_help_shows_examples_environment_and_exit_statuses(home: Path) -> None:
    out = run("--help").stdout
    for needle in ("s3memory import ./notes", "s3memory mcp", "S3MEMORY_BUCKET", "S3MEMORY_KEY_MODE", "Exit status"):
        assert needle in out
    for command in ("view", "create", "str-replace", "insert", "delete", "rename", "ls", "cat", "import", "export"):
        assert f"  {command} " in out
        assert run(command, "--help").exit_code == 0
    assert "--range START END" in run("view", "--help").stdout


def test_main_returns_the_exit_status(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["create", "/memories/m.md", "x"]) == 0
    assert main(["view", "/memories/none"]) == EXIT_REFUSED
    assert main(["--no-such-option"]) == EXIT_USAGE
    assert "does not exist" in capsys.readouterr().err


def test_demo_runs_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two sessions through the SDK's real tool runner against the scripted model."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    result = run("demo")
    assert result.exit_code == 0
    out = result.stdout
    assert "a SCRIPTED model (set ANTHROPIC_API_KEY to talk to Claude)" in out
    assert "=== session 2: a new conversation ===" in out
    assert "memory -> File created successfully at: /memories/user/profile.md" in out
    # session 2 reads what session 1 wrote, through a fresh conversation
    assert "     2\t- drinks: green tea, never coffee" in out
    assert "memory -> [is_error] Path /memories/../../etc/passwd would escape /memories directory" in out
    assert "assistant: Green tea, never coffee." in out
    raw, decrypted = out.split("--- decrypted by s3memory for user 'ada' ---")
    assert "x-amz-meta-x-amz-c: 115" in raw and "green tea" not in raw.split("=== what the bucket holds ===")[1]
    assert "     4\t- lives in: Lisbon" in decrypted


def test_governance_commands(home: Path, tmp_path: Path) -> None:
    run("create", "/memories/a.md", "alpha\n")
    expired = run("expire", "--days", "0")
    assert expired.exit_code == 0 and expired.stdout.rstrip().endswith("\t6B\t/memories/a.md")
    assert "found 1 memory file(s) not accessed for 0 day(s)" in expired.stderr
    assert run("expire", "--days", "30").stdout == ""  # just written: fresh
    rotated = run("rotate-key", "--retire-after", "0")
    assert rotated.exit_code == 0, rotated.output
    assert "1 file(s) re-wrapped" in rotated.stdout and "rotation complete" in rotated.stdout
    # The embedded default keeps versions: the old key stays for the version from before.
    assert "kept for older versions, until about 20" in rotated.stdout
    assert run("cat", "/memories/a.md").stdout == "alpha\n"
    refused = run("erase-user")
    assert refused.exit_code == EXIT_USAGE and "cannot be undone; add --yes" in refused.stderr
    assert run("cat", "/memories/a.md").exit_code == 0
    erased = run("erase-user", "--yes")
    assert erased.exit_code == 0 and "keys destroyed (crypto-shredded)" in erased.stdout
    assert not [p for p in (home / "store").rglob("*") if p.is_file() and p.name != ".lock"]
    assert run("cat", "/memories/a.md").exit_code == EXIT_REFUSED


def test_sensitive_data_and_encrypted_names_flags(home: Path) -> None:
    key = "AKIA" + "IOSFODNN7EXAMPLE"
    refused = run("create", "/memories/k.md", f"key {key}")
    assert refused.exit_code == EXIT_REFUSED and "AWS access key" in refused.stderr and key not in refused.output
    assert run("--sensitive-data", "redact", "create", "/memories/k.md", f"key {key}").exit_code == 0
    assert run("cat", "/memories/k.md").stdout == "key [REDACTED: AWS access key]"
    assert run("--user", "nina", "--encrypt-names", "create", "/memories/secret-plan.md", "x").exit_code == 0
    assert not any("secret-plan" in str(p) for p in (home / "store").rglob("*"))
    assert run("--user", "nina", "--encrypt-names", "cat", "/memories/secret-plan.md").stdout == "x"


def test_policy_prints_the_deployment_documents(home: Path, tmp_path: Path) -> None:
    import json

    roles = ["--memory-role-arn", "arn:aws:iam::123456789012:role/memory", "--agent-role-arn"]
    roles.append("arn:aws:iam::123456789012:role/agent")
    printed = run("--bucket", "my-bucket", "--prefix", "app/", "policy", *roles)
    assert printed.exit_code == 0, printed.output
    documents = json.loads(printed.stdout)
    assert set(documents) == {
        "memory-role-policy",
        "memory-role-trust-policy",
        "agent-role-policy",
        "kms-key-policy",
        "bucket-lifecycle",
    }
    assert "arn:aws:s3:::my-bucket/app/${aws:PrincipalTag/s3memory-user}/memories/*" in printed.stdout
    written = run("--bucket", "my-bucket", "policy", *roles, "--no-kms", "--out", str(tmp_path / "p"))
    assert written.exit_code == 0 and "kms-key-policy" not in written.stdout
    assert json.loads((tmp_path / "p" / "memory-role-policy.json").read_text())["Version"] == "2012-10-17"
    assert run("policy", *roles).exit_code == EXIT_CONFIGURATION  # no bucket
    bad = run("--bucket", "my-bucket", "policy", "--memory-role-arn", "nope", "--agent-role-arn", "nope2")
    assert bad.exit_code == EXIT_CONFIGURATION and bad.stderr.startswith("Error")


# -- the command line's conventions ------------------------------------------------------------
def test_json_output_of_every_bulk_and_listing_command(home: Path, tmp_path: Path) -> None:
    import json

    source = tmp_path / "notes"
    (source / "d").mkdir(parents=True)
    (source / "a.md").write_text("alpha\n")
    (source / "d" / "b.md").write_text("béta\n")
    (source / "blob.bin").write_bytes(b"\xff")
    init = json.loads(run("init", "--json").stdout)
    assert init == {"master_key_file": str(home / "master.key"), "created": True, "kms_key_id": None}
    imported = run("--json", "import", str(source))
    assert imported.exit_code == EXIT_REFUSED and imported.stderr == ""  # the binary file, reported in the JSON
    document = json.loads(imported.stdout)
    assert document == {
        "directory": str(source),
        "to": "/memories",
        "files": 3,
        "imported": 2,
        "already_existed": [],
        "not_text": ["/memories/blob.bin"],
        "failed": [{"path": "/memories/blob.bin", "error": "Error: not UTF-8 text; skipped", "status": EXIT_REFUSED}],
    }
    again = json.loads(run("import", str(source), "--json").stdout)  # --json after the command too
    assert again["already_existed"] == ["/memories/a.md", "/memories/d/b.md"] and again["imported"] == 0
    listing = json.loads(run("ls", "--json").stdout)
    assert listing == {
        "path": "/memories",
        "recursive": False,
        "files": 2,
        "bytes": 12,
        "entries": [
            {"path": "/memories/a.md", "type": "file", "bytes": 6},
            {"path": "/memories/d", "type": "directory", "bytes": 6},
        ],
    }
    assert [e["path"] for e in json.loads(run("ls", "-r", "--json").stdout)["entries"]] == [
        "/memories/a.md",
        "/memories/d/b.md",
    ]
    info = json.loads(run("info", "--json").stdout)
    assert info["user"] == "local" and info["files"] == 2 and info["directories"] == 1 and info["bytes"] == 12
    assert info["master_key_file"] == str(home / "master.key") and info["key_mode"] == "tenant"
    exported = json.loads(run("export", str(tmp_path / "out"), "--json").stdout)
    assert exported == {
        "directory": str(tmp_path / "out"),
        "from": "/memories",
        "files": 2,
        "exported": 2,
        "failed": [],
    }
    expired = json.loads(run("expire", "--days", "0", "--json").stdout)
    assert [s["path"] for s in expired["stale"]] == ["/memories/a.md", "/memories/d/b.md"]
    assert expired["deleted"] == [] and expired["stale"][0]["last_access"].endswith("Z")
    rotated = json.loads(run("rotate-key", "--retire-after", "0", "--json").stdout)
    assert rotated["rewrapped"] == 2 and rotated["complete"] is True and rotated["user"] == "local"


def test_json_output_is_inert_and_exact(home: Path) -> None:
    import json

    name = "/memories/a\u00a0b [bold]é\u4e2d.md"
    run("create", name, "x")
    out = run("ls", "-r", "--json").stdout
    assert out.isascii()  # every non-ASCII character is a \\u escape
    assert json.loads(out)["entries"][0]["path"] == name


def test_quiet_keeps_only_errors_and_requested_output(home: Path, tmp_path: Path) -> None:
    assert run("-q", "create", "/memories/a.md", "x\n").stdout == ""
    assert run("create", "/memories/b.md", "y\n", "--quiet").stdout == ""
    assert "     1\tx\n" in run("-q", "view", "/memories/a.md").stdout  # asked for: shown
    assert run("-q", "cat", "/memories/a.md").stdout == "x\n"
    source = tmp_path / "in"
    source.mkdir()
    (source / "c.md").write_text("z")
    (source / "bad.bin").write_bytes(b"\xff")
    quiet = run("-q", "import", str(source))
    assert quiet.exit_code == EXIT_REFUSED and quiet.stdout == ""
    assert quiet.stderr == "/memories/bad.bin: Error: not UTF-8 text; skipped\n"  # errors are still shown
    refused = run("-q", "create", "/memories/a.md", "again")
    assert refused.exit_code == EXIT_REFUSED and "already exists" in refused.stderr


def test_verbose_and_debug_log_the_library_to_stderr(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import logging

    opened = Settings.open_tree  # what the six commands open

    def open_and_log(self: Settings) -> Any:
        logging.getLogger("s3memory.store").info("opened \x1b[2J")
        logging.getLogger("s3memory.store").debug("detail")
        return opened(self)

    monkeypatch.setattr(Settings, "open_tree", open_and_log)
    assert run("view").stderr == ""
    verbose = run("view", "-v")
    assert verbose.exit_code == 0 and verbose.stderr == "s3memory: info: opened \\x1b[2J\n"
    debug = run("--debug", "view")
    assert debug.stderr == "s3memory: info: opened \\x1b[2J\ns3memory: debug: detail\n"
    assert run("view").stderr == ""  # the next run without -v logs nothing again


def test_init_creates_the_key_once_where_the_settings_say(home: Path, tmp_path: Path) -> None:
    created = run("init")
    assert created.exit_code == 0 and created.stdout.startswith(f"created the master key file {home}/master.key")
    key = (home / "master.key").read_bytes()
    assert stat.S_IMODE((home / "master.key").stat().st_mode) == 0o600
    again = run("init")
    assert again.stdout == f"the master key file {home}/master.key already exists; kept\n"
    assert (home / "master.key").read_bytes() == key
    explicit = tmp_path / "keys" / "team.key"
    missing = run("--master-key-file", str(explicit), "view")
    assert missing.exit_code == EXIT_CONFIGURATION and "s3memory init" in missing.stderr  # never a silent new key
    assert not explicit.exists()
    explicit.parent.mkdir(mode=0o700)
    assert run("init", "--master-key-file", str(explicit)).exit_code == 0
    assert run("--master-key-file", str(explicit), "create", "/memories/a.md", "x").exit_code == 0
    kms = run("--bucket", "my-bucket", "--kms-key-id", "alias/m", "init")
    assert kms.exit_code == 0 and kms.stdout.startswith("nothing to create: the KMS key alias/m wraps the keys")


def test_mcp_reports_a_bad_setting_to_the_client(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import s3memory.mcp_server

    calls: list[tuple[Any, Any]] = []
    monkeypatch.setattr(
        s3memory.mcp_server,
        "serve_stdio",
        lambda settings, configuration_error=None: calls.append((settings, configuration_error)),
    )
    assert run("--key-mode", "plain", "mcp").exit_code == 0
    assert run("mcp", "--timeout", "soon").exit_code == 0  # after the command too
    (none, bad_mode), (none_again, bad_timeout) = calls
    assert none is None and none_again is None
    assert "--key-mode (S3MEMORY_KEY_MODE)" in str(bad_mode) and "plain" in str(bad_mode)
    assert "--timeout (S3MEMORY_TIMEOUT)" in str(bad_timeout) and "soon" in str(bad_timeout)
    calls.clear()
    assert run("mcp", "--user", "alice").exit_code == 0
    ((settings, error),) = calls
    assert settings.user == "alice" and error is None


def test_progress_bars_are_drawn_only_on_a_terminal(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import s3memory.cli as cli_module
    from s3memory import EncryptedMemory

    seen: list[object] = []
    rename = EncryptedMemory.rename

    def spy(self: EncryptedMemory, old: str, new: str, *, progress: Any = None) -> str:
        seen.append(progress)
        return rename(self, old, new, progress=progress)

    monkeypatch.setattr(EncryptedMemory, "rename", spy)
    for index in range(3):
        run("create", f"/memories/d/{index}.md", "x")
    assert run("rename", "/memories/d", "/memories/e").stdout == "Successfully renamed /memories/d to /memories/e\n"
    assert seen == [None]  # stderr is not a terminal here
    monkeypatch.setattr(cli_module.sys.stderr, "isatty", lambda: True, raising=False)
    state = cli_module.Invocation()
    assert state.progress
    state.quiet = True
    assert not state.progress
    state.quiet, state.json = False, True
    assert not state.progress
    monkeypatch.setattr(cli_module.Invocation, "progress", True)
    moved = run("rename", "/memories/e", "/memories/f")
    assert moved.stdout == "Successfully renamed /memories/e to /memories/f\n"  # the answer alone on stdout
    assert callable(seen[-1])


def test_help_says_only_what_is_true(home: Path) -> None:
    out = run("--help").stdout
    for needle in (
        "--key-mode [tenant|kms]",
        "--sensitive-data [refuse|redact|allow]",
        "--timeout SECONDS",
        "S3MEMORY_TIMEOUT",
        "--track-access / --no-track-access",
        "the variable takes 1 or 0",
        "_S3MEMORY_COMPLETE=bash_source s3memory",
        "130 interrupted",
        "141 the output was closed",
        "may also follow the command",
    ):
        assert needle in " ".join(out.split()) or needle in out, needle
    assert run("demo", "--help").stdout.count("--scripted") >= 2
    assert "--json" in run("ls", "--help").stdout and "--json" not in run("view", "--help").stdout
    # the flags take no value: the variable takes 1 or 0
    assert run("--track-access", "view").exit_code == 0
    assert run("--track-access", "1", "view").exit_code == EXIT_USAGE  # "1" is taken for a command


@pytest.mark.slow  # subprocesses
def test_shell_completion_works_as_documented(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "_S3MEMORY_COMPLETE": "bash_source"}
    env.update({k: v for k, v in os.environ.items() if k == "PYTHONPATH"})
    script = subprocess.run(
        [sys.executable, "-c", "from s3memory.cli import main; main()"], env=env, capture_output=True, text=True
    )
    assert "complete -o nosort -F _s3memory_completion s3memory" in script.stdout
    env.update({"_S3MEMORY_COMPLETE": "bash_complete", "COMP_WORDS": "s3memory i", "COMP_CWORD": "1"})
    words = subprocess.run(
        [sys.executable, "-c", "from s3memory.cli import main; main()"], env=env, capture_output=True, text=True
    )
    assert sorted(words.stdout.split()) == ["plain,import", "plain,info", "plain,init", "plain,insert"]


def test_the_demo_model_has_one_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    import s3memory.cli.demo as demo

    monkeypatch.delenv("ANTHROPIC_MODEL", raising=False)
    monkeypatch.setenv("S3MEMORY_DEMO_MODEL", "ignored")
    monkeypatch.setenv("MODEL", "ignored")
    assert demo.model() == demo.DEFAULT_MODEL
    monkeypatch.setenv("ANTHROPIC_MODEL", "claude-x")
    assert demo.model() == "claude-x"
    source = (Path(demo.__file__).read_text(), Path(demo.__file__).with_name("__init__.py").read_text())
    assert not any("S3MEMORY_DEMO_MODEL" in text for text in source)


def test_demo_scripted_never_calls_the_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-would-fail")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    result = run("demo", "--scripted")
    assert result.exit_code == 0 and "a SCRIPTED model" in result.stdout


@pytest.mark.slow  # a subprocess
def test_mcp_with_a_bad_setting_still_answers_and_says_what_is_wrong(tmp_path: Path) -> None:
    """Before, a bad setting killed `s3memory mcp` before the handshake: the client saw nothing."""
    import json
    import os
    import subprocess
    import sys

    pytest.importorskip("mcp")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "S3MEMORY_KEY_MODE": "plain"}
    env.update({k: v for k, v in os.environ.items() if k == "PYTHONPATH"})
    server = subprocess.Popen(
        [sys.executable, "-m", "s3memory", "mcp"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stdin is not None and server.stdout is not None

    def send(message: dict[str, Any]) -> None:
        server.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")  # type: ignore[union-attr]
        server.stdin.flush()  # type: ignore[union-attr]

    try:
        client = {"name": "t", "version": "1"}
        send(
            {
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client},
            }
        )
        assert json.loads(server.stdout.readline())["result"]["serverInfo"]["name"] == "s3memory"
        send({"method": "notifications/initialized"})
        send({"id": 2, "method": "tools/call", "params": {"name": "view", "arguments": {"path": "/memories"}}})
        answer = json.loads(server.stdout.readline())["result"]
        assert answer["isError"] is True
        assert "--key-mode (S3MEMORY_KEY_MODE)" in answer["content"][0]["text"]
    finally:
        server.stdin.close()
        server.wait(timeout=10)
        server.stdout.close()
        assert server.stderr is not None
        server.stderr.close()


def test_mounts_in_the_cli(home: Path, tmp_path: Path) -> None:
    """--mounts: the six commands, cat, ls, search, import and export see the whole tree; a
    read-only mount refuses every change (exit 1) and writes nothing."""
    assert run("--user", "std", "create", "/memories/style.md", "Use tabs.\n").exit_code == 0
    read_only = '[{"name": "standards", "user_id": "std"}]'
    writable = '[{"name": "standards", "user_id": "std", "access": "read_write"}]'
    listing = run("--user", "alice", "--mounts", read_only, "view")
    assert listing.stdout.splitlines()[1:] == [
        "10B\t/memories",
        "10B\t/memories/standards/",
        "10B\t/memories/standards/style.md",
    ]
    refused = run("--user", "alice", "--mounts", read_only, "create", "/memories/standards/x.md", "x")
    assert (refused.exit_code, refused.stderr) == (
        1,
        "Error: Cannot create /memories/standards/x.md: /memories/standards is mounted read-only\n",
    )
    found = run("--user", "alice", "--mounts", read_only, "search", "TABS")
    assert (
        found.stdout
        == 'Found 1 file matching "TABS" (searched 1 file):\n/memories/standards/style.md\n     1\tUse tabs.\n'
    )
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "rule.md").write_text("rule one\n")
    refused_import = run("--user", "alice", "--mounts", read_only, "import", str(docs), "--to", "/memories/standards")
    assert refused_import.exit_code == 1 and "mounted read-only" in refused_import.stderr
    imported = run("--user", "alice", "--mounts", writable, "import", str(docs), "--to", "/memories/standards")
    assert imported.exit_code == 0
    assert run("--user", "std", "cat", "/memories/rule.md").stdout == "rule one\n"  # in the mounted store itself
    exported = run(
        "--user", "alice", "--mounts", read_only, "export", "--format", "managed", "-", "--from", "/memories/standards"
    )
    assert [json.loads(line)["path"] for line in exported.stdout.splitlines()] == ["/rule.md", "/style.md"]
    bad = run("--user", "alice", "--mounts", '[{"name": "Standards", "user_id": "std"}]', "view")
    assert bad.exit_code == 3 and "--mounts (S3MEMORY_MOUNTS): mount name 'Standards'" in bad.stderr


def test_the_cli_says_when_a_mount_hides_the_users_own_files(home: Path) -> None:
    assert run("--user", "std", "create", "/memories/style.md", "Use tabs.\n").exit_code == 0
    assert run("--user", "alice", "create", "/memories/standards/mine.md", "mine\n").exit_code == 0
    assert run("--user", "alice", "create", "/memories/Standards/twin.md", "twin\n").exit_code == 0  # no mounts
    mounts = '[{"name": "standards", "user_id": "std"}]'
    listing = run("--user", "alice", "--mounts", mounts, "ls", "-r")
    assert listing.exit_code == 0 and "mine.md" not in listing.stdout
    assert listing.stderr == (
        "s3memory: warning: files of your own store under /memories/standards/ are hidden by the memory store "
        "mounted there; run without --mounts (S3MEMORY_MOUNTS) to see them\n"
    )
    info = run("--user", "alice", "--mounts", mounts, "info", "--json")
    assert json.loads(info.stdout)["hidden_by_mounts"] == {"standards": 2}  # the twin too: info lists every file
    shown = run("--user", "alice", "--mounts", mounts, "info").stdout
    assert "2 file(s) under /memories/standards/ or a name reading as it, by that mount" in shown
    assert json.loads(run("--user", "alice", "info", "--json").stdout)["hidden_by_mounts"] == {}
    assert run("--user", "alice", "ls").stderr == ""
    twin = run("--user", "alice", "--mounts", mounts, "create", "/memories/STANDARDS/x.md", "x")
    assert twin.exit_code == 1 and "reads as /memories/standards, where a memory store is mounted" in twin.stderr
