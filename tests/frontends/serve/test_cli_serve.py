"""``s3memory serve`` through click's CliRunner, with the API and the server replaced: the
key's rules, the options and their variables, errors as one line and an exit status, the
request lines on stderr."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from helpers.cli import ENV_NAMES

import s3memory.serve.app as app_module
from s3memory import ConfigurationError, EncryptedMemory, Settings, UserMemories
from s3memory.cli import EXIT_CONFIGURATION, EXIT_INTERRUPTED, EXIT_REFUSED, EXIT_USAGE, cli
from s3memory.cli.output import LOG_HANDLER
from s3memory.serve.keys import KeyRing

KEY = "k" * 31 + "!"  # 32 characters, the least accepted
SERVE_NAMES = ("S3MEMORY_SERVE_KEY", "S3MEMORY_SERVE_HOST", "S3MEMORY_SERVE_PORT")


class FakeApi:
    def __init__(self) -> None:
        self.closed = 0

    def handle(self, request: object) -> object:  # pragma: no cover - the server is replaced
        raise AssertionError("not served")

    def close(self) -> None:
        self.closed += 1


class Calls:
    """What the replaced ``build_api`` and ``serve`` were called with; what they do."""

    def __init__(self) -> None:
        self.built: list[tuple[Settings, str]] = []
        self.served: list[tuple[Any, str, int]] = []
        self.api = FakeApi()
        self.build_error: BaseException | None = None
        self.serve_error: BaseException | None = None

    def build_api(self, settings: Settings, *, serve_key: str) -> FakeApi:
        self.built.append((settings, serve_key))
        if self.build_error is not None:
            raise self.build_error
        return self.api

    def serve(self, api: Any, *, host: str, port: int) -> None:
        self.served.append((api, host, port))
        logging.getLogger("s3memory.serve").info("GET /v1/memory_stores 200 1.0ms req_logged")
        if self.serve_error is not None:
            raise self.serve_error


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Calls:
    for name in (*ENV_NAMES, *SERVE_NAMES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("S3MEMORY_HOME", str(tmp_path / "home"))
    recorded = Calls()
    # A module of its own in place of serve.api: the command imports it when it runs.
    fake_api_module = types.ModuleType("s3memory.serve.api")
    fake_api_module.build_api = recorded.build_api  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "s3memory.serve.api", fake_api_module)
    monkeypatch.setattr(app_module, "serve", recorded.serve)
    return recorded


def run(*argv: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(argv), env=env, catch_exceptions=False)


def test_the_key_from_the_environment_reaches_the_api_and_the_server_serves_it(calls: Calls) -> None:
    result = run("serve", env={"S3MEMORY_SERVE_KEY": KEY})
    assert result.exit_code == 0, result.output
    [(settings, serve_key)] = calls.built
    assert isinstance(settings, Settings) and serve_key == KEY
    assert calls.served == [(calls.api, "127.0.0.1", 8000)]
    assert calls.api.closed == 1
    assert KEY not in result.output


def test_the_settings_are_the_commands_as_for_every_other(calls: Calls) -> None:
    assert run("serve", "--user", "alice", env={"S3MEMORY_SERVE_KEY": KEY}).exit_code == 0
    assert run("--user", "bob", "serve", env={"S3MEMORY_SERVE_KEY": KEY}).exit_code == 0
    assert [settings.user for settings, _ in calls.built] == ["alice", "bob"]


@pytest.mark.parametrize(("key", "state"), [(None, "is not set"), ("", "is not set"), ("s" * 31, "has 31 characters")])
def test_a_missing_or_short_key_is_a_configuration_error(calls: Calls, key: str | None, state: str) -> None:
    result = run("serve", env={} if key is None else {"S3MEMORY_SERVE_KEY": key})
    assert result.exit_code == EXIT_CONFIGURATION
    assert result.stdout == ""
    assert result.stderr.startswith(f"Error: S3MEMORY_SERVE_KEY {state}: set it to a secret of at least 32 characters")
    assert result.stderr.count("\n") == 1
    if key:
        assert key not in result.stderr
    assert calls.built == [] and calls.served == []


def test_the_key_is_never_a_flag(calls: Calls) -> None:
    assert run("serve", "--key", KEY).exit_code == EXIT_USAGE
    assert "S3MEMORY_SERVE_KEY" in run("serve", "--help").stdout
    assert calls.built == []


def test_host_and_port_from_options_or_their_variables(calls: Calls) -> None:
    env = {"S3MEMORY_SERVE_KEY": KEY, "S3MEMORY_SERVE_HOST": "0.0.0.0", "S3MEMORY_SERVE_PORT": "9001"}
    assert run("serve", env=env).exit_code == 0
    assert run("serve", "--host", "::1", "--port", "0", env=env).exit_code == 0
    assert [(host, port) for _, host, port in calls.served] == [("0.0.0.0", 9001), ("::1", 0)]


@pytest.mark.parametrize("port", ["65536", "-1", "http"])
def test_a_bad_port_is_a_usage_error(calls: Calls, port: str) -> None:
    result = run("serve", "--port", port, env={"S3MEMORY_SERVE_KEY": KEY})
    assert result.exit_code == EXIT_USAGE
    assert calls.served == []


def test_a_bad_setting_is_a_configuration_error_naming_it(calls: Calls) -> None:
    result = run("serve", "--user", "../evil", env={"S3MEMORY_SERVE_KEY": KEY})
    assert result.exit_code == EXIT_CONFIGURATION
    assert result.stderr.startswith("Error: --user (S3MEMORY_USER) '../evil' is not allowed")
    assert calls.built == []


@pytest.mark.parametrize("failing", ["build", "serve"])
def test_a_configuration_error_of_the_api_or_the_server_is_one_line_and_exit_3(calls: Calls, failing: str) -> None:
    error = ConfigurationError("cannot listen on 127.0.0.1:8000: Address already in use")
    if failing == "build":
        calls.build_error = error
    else:
        calls.serve_error = error
    result = run("serve", env={"S3MEMORY_SERVE_KEY": KEY})
    assert result.exit_code == EXIT_CONFIGURATION
    assert result.stderr.endswith("Error: cannot listen on 127.0.0.1:8000: Address already in use\n")
    assert "Traceback" not in result.output
    assert calls.api.closed == (1 if failing == "serve" else 0)


def test_ctrl_c_ends_with_130_and_the_api_closed(calls: Calls) -> None:
    calls.serve_error = KeyboardInterrupt()
    result = run("serve", env={"S3MEMORY_SERVE_KEY": KEY})
    assert result.exit_code == EXIT_INTERRUPTED
    assert "Interrupted: serve stopped" in result.stderr
    assert calls.api.closed == 1


def test_request_lines_are_shown_on_stderr_unless_quiet(calls: Calls) -> None:
    shown = run("serve", env={"S3MEMORY_SERVE_KEY": KEY})
    assert "s3memory: info: GET /v1/memory_stores 200 1.0ms req_logged\n" in shown.stderr
    assert shown.stdout == ""
    quiet = run("serve", "--quiet", env={"S3MEMORY_SERVE_KEY": KEY})
    assert quiet.exit_code == 0 and "req_logged" not in quiet.stderr
    verbose = run("serve", "--verbose", env={"S3MEMORY_SERVE_KEY": KEY})
    assert verbose.stderr.count("req_logged") == 1  # once, through the library's own handler
    logger = logging.getLogger("s3memory.serve")
    assert LOG_HANDLER not in logger.handlers and logger.level == logging.NOTSET  # left as found


def test_the_group_lists_serve(calls: Calls) -> None:
    assert "serve" in run("--help").stdout


# -- serve-key -------------------------------------------------------------------------------
# On the embedded default, for real: the keys are written to S3MEMORY_HOME and read back by
# a KeyRing over the same settings, as a server would read them.

STORE_A = "memstore_" + "a" * 26
STORE_B = "memstore_" + "b" * 26
CREATED_KEY = re.compile(r"s3m_[0-9a-f]{16}_[A-Za-z0-9_-]{43}\n")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], KeyRing]]:
    """The embedded default in tmp_path; a function giving a KeyRing over it (a server's view)."""
    for name in (*ENV_NAMES, *SERVE_NAMES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("S3MEMORY_HOME", str(tmp_path / "home"))
    opened: list[Any] = []

    def ring() -> KeyRing:
        memories = UserMemories(**Settings.from_environment(None).memory_options())

        def open_tenant(user_id: str) -> EncryptedMemory:
            memory = memories.open(user_id)
            assert isinstance(memory, EncryptedMemory)
            opened.append(memory)
            return memory

        return KeyRing(open_tenant)

    yield ring
    for memory in opened:
        memory.close()


def listed(*argv: str) -> list[dict[str, Any]]:
    result = run("serve-key", "list", "--json", *argv)
    assert result.exit_code == 0, result.output
    keys: list[dict[str, Any]] = json.loads(result.stdout)["keys"]
    return keys


def test_create_prints_the_key_alone_on_stdout_and_a_server_accepts_it(home: Callable[[], KeyRing]) -> None:
    result = run("serve-key", "create", "ci bot")
    assert result.exit_code == 0, result.output
    assert CREATED_KEY.fullmatch(result.stdout)
    [record] = listed()
    assert record["name"] == "ci bot" and record["access"] == "read_write" and record["stores"] is None
    assert result.stderr.startswith(f"created {record['id']} (ci bot): read_write, every store;")
    assert "shown only now" in result.stderr
    principal = home().authenticate(result.stdout.strip())
    assert principal is not None and principal.key_id == record["id"] and principal.may_manage_stores


def test_create_a_scoped_read_only_key_as_json(home: Callable[[], KeyRing]) -> None:
    result = run("serve-key", "create", "reader", "--read-only", "--store", STORE_B, "--store", STORE_A, "--json")
    assert result.exit_code == 0, result.output
    created = json.loads(result.stdout)
    assert created.keys() == {"key", "id", "name", "access", "stores", "created_at", "revoked_at"}
    assert (created["name"], created["access"], created["stores"]) == ("reader", "read_only", [STORE_A, STORE_B])
    principal = home().authenticate(created["key"])
    assert principal is not None
    assert (
        principal.may_read(STORE_A)
        and not principal.may_write(STORE_A)
        and not principal.may_read("memstore_" + "c" * 26)
    )


def test_create_quiet_prints_only_the_key(home: Callable[[], KeyRing]) -> None:
    result = run("serve-key", "create", "quiet one", "--quiet")
    assert result.exit_code == 0
    assert CREATED_KEY.fullmatch(result.stdout) and result.stderr == ""


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("",), "Invalid value for 'NAME': an API key's name must be 1 to 100 characters"),
        (("n" * 101,), "must be 1 to 100 characters, not 101"),
        (("a\x1bb",), "must be printable"),
        (("n", "--store", "memstore_short"), "Invalid value for '--store': 'memstore_short' is not a memory store id"),
        (("n", "--store", "memstore-registry"), "is not a memory store id"),
        (("n", "--read-only", "--access", "admin"), "No such option '--access'"),
        ((), "Missing argument 'NAME'"),
    ],
)
def test_create_refuses_bad_arguments_as_usage_errors_and_creates_nothing(
    home: Callable[[], KeyRing], argv: tuple[str, ...], message: str
) -> None:
    result = run("serve-key", "create", *argv)
    assert result.exit_code == EXIT_USAGE
    assert message in result.stderr and "\x1b" not in result.stderr
    assert result.stdout == ""
    assert listed() == []


def test_list_shows_every_key_without_secrets_or_hashes(home: Callable[[], KeyRing]) -> None:
    empty = run("serve-key", "list")
    assert empty.exit_code == 0 and empty.stdout == ""
    assert "no API keys; create one with: s3memory serve-key create NAME" in empty.stderr
    keys = [
        run("serve-key", "create", name, *extra).stdout.strip()
        for name, *extra in (
            ("everything",),
            ("scoped", "--read-only", "--store", STORE_A),
        )
    ]
    result = run("serve-key", "list")
    assert result.exit_code == 0
    first, second = listed()
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"{first['id']}  read_write  {first['created_at']}  active ")
    assert lines[0].endswith("  every store  everything")
    assert lines[1].startswith(f"{second['id']}  read_only   {second['created_at']}  active ")
    assert lines[1].endswith(f"  {STORE_A}  scoped")
    json_output = run("serve-key", "list", "--json").stdout
    for key in keys:
        secret = key[len("s3m_0123456789abcdef_") :]
        for shown in (result.stdout + result.stderr, json_output):
            assert secret not in shown and hashlib.sha256(secret.encode()).hexdigest() not in shown
    assert all(record.keys() == {"id", "name", "access", "stores", "created_at", "revoked_at"} for record in listed())


def test_revoke_refuses_the_key_and_shows_in_the_list(home: Callable[[], KeyRing]) -> None:
    key = run("serve-key", "create", "to revoke", "--quiet").stdout.strip()
    [record] = listed()
    server = home()
    assert server.authenticate(key) is not None
    result = run("serve-key", "revoke", record["id"])
    assert result.exit_code == 0, result.output
    [revoked] = listed()
    assert revoked["revoked_at"] is not None
    assert result.stdout == (
        f"revoked {record['id']} (to revoke) at {revoked['revoked_at']}; "
        "a running server refuses it within 30 seconds\n"
    )
    assert home().authenticate(key) is None  # a server started now refuses it
    assert f"  {revoked['revoked_at']}  every store  to revoke" in run("serve-key", "list").stdout
    again = run("serve-key", "revoke", record["id"], "--json")
    assert again.exit_code == 0 and json.loads(again.stdout) == revoked  # unchanged


def test_revoke_of_an_unknown_key_is_refused_and_a_malformed_id_is_a_usage_error(home: Callable[[], KeyRing]) -> None:
    unknown = run("serve-key", "revoke", "apikey_0123456789abcdef")
    assert unknown.exit_code == EXIT_REFUSED
    assert unknown.stderr == "Error: No API key with id apikey_0123456789abcdef.\n"
    malformed = run("serve-key", "revoke", "s3m_0123456789abcdef_" + "a" * 43)
    assert malformed.exit_code == EXIT_USAGE
    assert "that is an API key, not an API key id (apikey_ and 16 hexadecimal digits): its id is " in malformed.stderr
    assert "apikey_0123456789abcdef" in malformed.stderr
    assert "a" * 43 not in malformed.stderr  # a key pasted by mistake is never echoed
    other = run("serve-key", "revoke", "memstore_" + "a" * 26)
    assert other.exit_code == EXIT_USAGE
    assert f"'memstore_{'a' * 26}' is not an API key id" in other.stderr


def test_serve_key_takes_the_settings_as_every_command(home: Callable[[], KeyRing]) -> None:
    result = run("serve-key", "list", "--user", "../evil")
    assert result.exit_code == EXIT_CONFIGURATION
    assert result.stderr.startswith("Error: --user (S3MEMORY_USER) '../evil' is not allowed")
    assert run("--json", "serve-key", "list").stdout.strip() == '{\n  "keys": []\n}'


def test_the_group_lists_serve_key_and_its_commands(home: Callable[[], KeyRing]) -> None:
    assert "serve-key" in run("--help").stdout
    group_help = run("serve-key", "--help").stdout
    assert all(name in group_help for name in ("create", "list", "revoke"))


def test_the_cli_loads_no_module_of_the_server() -> None:
    code = "import sys, s3memory.cli; print(sorted(m for m in sys.modules if m.startswith('s3memory.serve')))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"
