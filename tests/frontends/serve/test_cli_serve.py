"""``s3memory serve`` through click's CliRunner, with the API and the server replaced: the
key's rules, the options and their variables, errors as one line and an exit status, the
request lines on stderr."""

from __future__ import annotations

import logging
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from helpers.cli import ENV_NAMES

import s3memory.serve.app as app_module
from s3memory import ConfigurationError, Settings
from s3memory.cli import EXIT_CONFIGURATION, EXIT_INTERRUPTED, EXIT_USAGE, cli
from s3memory.cli.output import LOG_HANDLER

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
