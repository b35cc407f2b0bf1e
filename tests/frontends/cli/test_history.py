"""History from the command line: ``history``, ``show``, ``restore``, ``redact`` and ``log`` on
the embedded default (a local store that keeps versions), through ``main`` as the console
script runs it: each answer, each refusal with its exit status and its one line, and what
the bucket chose (paths, actors, notes, version ids) printed escaped."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import MASTER_KEY
from helpers.cli import ENV_NAMES

from s3memory import EncryptedMemory, MemoryVersion, Settings, open_memory
from s3memory.cli import EXIT_CONFIGURATION, EXIT_REFUSED, EXIT_STORAGE, EXIT_USAGE, main
from s3memory.stores import LocalDirStore


@dataclass(frozen=True)
class Run:
    status: int
    out: str
    err: str


Cli = Callable[..., Run]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("S3MEMORY_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def s3memory(home: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    """``s3memory ARGV...`` in process: (exit status, stdout, stderr)."""

    def run(*argv: str) -> Run:
        status = main(list(argv))
        out, err = capsys.readouterr()
        return Run(status, out, err)

    return run


def versions(s3memory: Cli, path: str) -> list[dict[str, Any]]:
    result = s3memory("history", path, "--json")
    assert (result.status, result.err) == (0, "")
    document = json.loads(result.out)
    assert isinstance(document, list)
    return document


def refused(result: Run, status: int, message: str) -> None:
    """One line on stderr, exactly ``message``; nothing on stdout."""
    assert (result.status, result.out, result.err) == (status, "", message + "\n")


@pytest.fixture
def edited(s3memory: Cli) -> Cli:
    """/memories/a.md created, edited and renamed to /memories/b.md, then deleted."""
    assert s3memory("create", "/memories/a.md", "one\n").status == 0
    assert s3memory("str-replace", "/memories/a.md", "one", "two").status == 0
    assert s3memory("rename", "/memories/a.md", "/memories/b.md").status == 0
    assert s3memory("delete", "/memories/b.md").status == 0
    return s3memory


def rows(out: str) -> list[list[str]]:
    """A table's rows (header and summary left out), each split into words."""
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["when", "(UTC)", "operation", "actor"]
    return [line.split() for line in lines[1:-1]]


# -- history ---------------------------------------------------------------------------------
def test_history_follows_a_file_through_edit_rename_and_delete(edited: Cli) -> None:
    result = edited("history", "/memories/b.md")
    assert (result.status, result.err) == (0, "")
    header, *_, summary = result.out.splitlines()
    assert header.split() == ["when", "(UTC)", "operation", "actor", "path", "size", "version", "verified"]
    assert summary == "4 version(s)"
    table = rows(result.out)
    # newest first: when (two words), operation, actor, path, size, version, verified and note
    assert [row[2:6] for row in table] == [
        ["deleted", "cli", "/memories/b.md", "-"],
        ["renamed", "cli", "/memories/b.md", "4B"],
        ["modified", "cli", "/memories/a.md", "4B"],
        ["created", "cli", "/memories/a.md", "4B"],
    ]
    assert [row[7:] for row in table] == [["✓"], ["✓", "renamed", "from", "/memories/a.md"], ["✓"], ["✓"]]
    listed = versions(edited, "/memories/b.md")
    assert [row[6] for row in table] == [entry["version"] for entry in listed]  # whole, never cut
    for row in table:
        datetime.datetime.strptime(" ".join(row[:2]), "%Y-%m-%d %H:%M:%S")

    old = edited("history", "/memories/a.md")  # the old path: one file, no path column
    assert old.status == 0 and "path" not in old.out.splitlines()[0]
    assert [row[2:5] + row[6:] for row in rows(old.out)] == [
        ["renamed", "cli", "-", "✓", "renamed", "to", "/memories/b.md"],
        ["modified", "cli", "4B", "✓"],
        ["created", "cli", "4B", "✓"],
    ]


def test_history_json_is_a_list_with_iso_times(edited: Cli) -> None:
    listed = versions(edited, "/memories/b.md")
    assert [e["operation"] for e in listed] == ["deleted", "renamed", "modified", "created"]
    assert {tuple(sorted(e)) for e in listed} == {
        ("actor", "at", "bytes", "current", "file_id", "finding", "note", "operation", "path", "verified", "version")
    }
    assert [e["bytes"] for e in listed] == [None, 4, 4, 4]
    assert {e["actor"] for e in listed} == {"cli"} and all(e["verified"] for e in listed)
    assert not any(e["current"] for e in listed)  # deleted
    assert listed[1]["note"] == "renamed from /memories/a.md" and len({e["file_id"] for e in listed}) == 1
    times = [datetime.datetime.fromisoformat(e["at"].replace("Z", "+00:00")) for e in listed]
    assert all(e["at"].endswith("Z") for e in listed) and times == sorted(times, reverse=True)
    assert all(t.utcoffset() == datetime.timedelta(0) for t in times)


def test_a_path_never_written_has_no_history(s3memory: Cli) -> None:
    s3memory("create", "/memories/other.md", "x")
    message = "Error: The path /memories/never.md has no history: nothing was ever written there."
    refused(s3memory("history", "/memories/never.md"), EXIT_REFUSED, message)
    refused(s3memory("history", "/memories/never.md", "--json"), EXIT_REFUSED, message)
    refused(
        s3memory("show", "/memories/never.md", "--version", "abc"),
        EXIT_REFUSED,
        "Error: /memories/never.md has no version 'abc'.",
    )
    refused(s3memory("history", "/memories"), EXIT_REFUSED, "Error: /memories is a directory, not a file")
    refused(
        s3memory("history", "/memories/../etc/passwd"),
        EXIT_REFUSED,
        "Error: Path /memories/../etc/passwd would escape /memories directory: "
        "'..' segments (directory traversal) are not allowed",
    )


# -- show, restore ---------------------------------------------------------------------------
def test_show_prints_a_version_as_cat_does(edited: Cli) -> None:
    listed = versions(edited, "/memories/b.md")
    created, modified = listed[3]["version"], listed[2]["version"]
    assert edited("show", "/memories/b.md", "--version", created) == Run(0, "one\n", "")
    assert edited("show", "/memories/b.md", "--version", modified) == Run(0, "two\n", "")
    shown = edited("show", "/memories/b.md", "--version", created, "--json")
    assert json.loads(shown.out) == {"path": "/memories/b.md", "version": created, "text": "one\n"}
    refused(
        edited("show", "/memories/b.md", "--version", listed[0]["version"]),
        EXIT_REFUSED,
        f"Error: Version {listed[0]['version']} of /memories/b.md is a deleted, not content.",
    )
    refused(
        edited("show", "/memories/b.md", "--version", "nope"),
        EXIT_REFUSED,
        "Error: /memories/b.md has no version 'nope'.",
    )
    missing = edited("show", "/memories/b.md")
    assert missing.status == EXIT_USAGE and "Missing option '--version'" in missing.err


def test_restore_brings_a_deleted_file_back_as_a_new_version(edited: Cli) -> None:
    created = versions(edited, "/memories/b.md")[3]["version"]
    assert edited("restore", "/memories/b.md", created) == Run(0, f"Restored /memories/b.md to version {created}\n", "")
    assert edited("cat", "/memories/b.md").out == "one\n"
    newest = versions(edited, "/memories/b.md")[0]
    assert (newest["operation"], newest["actor"], newest["current"], newest["verified"]) == (
        "restored",
        "cli",
        True,
        True,
    )
    modified = versions(edited, "/memories/b.md")[3]["version"]
    assert edited("-q", "restore", "/memories/b.md", modified) == Run(0, "", "")  # a confirmation: dropped
    assert edited("cat", "/memories/b.md").out == "two\n"
    refused(edited("restore", "/memories/b.md", "nope"), EXIT_REFUSED, "Error: /memories/b.md has no version 'nope'.")
    usage = edited("restore", "/memories/b.md", created, "--json")
    assert usage.status == EXIT_USAGE and "--json is not supported by restore" in usage.err


# -- redact ----------------------------------------------------------------------------------
def test_redact_needs_yes_and_says_what_it_would_destroy(edited: Cli) -> None:
    listed = versions(edited, "/memories/b.md")
    modified = listed[2]
    when = datetime.datetime.fromisoformat(modified["at"].replace("Z", "+00:00")).strftime("%Y-%m-%d %H:%M:%S")
    asked = edited("redact", "/memories/b.md", modified["version"])
    refused(
        asked,
        EXIT_USAGE,
        f"Error: redact destroys the text of version {modified['version']} of /memories/a.md "
        f"(modified by cli at {when} UTC, 4B) for good, with every stored copy of it; its history entries stay. "
        "Add --yes to redact it",
    )
    assert edited("show", "/memories/b.md", "--version", modified["version"]).out == "two\n"  # untouched
    done = edited("redact", "/memories/b.md", modified["version"], "--yes")
    assert done == Run(
        0,
        f"Redacted version {modified['version']} of /memories/a.md: removed 2 stored versions of its text "
        "(/memories/a.md, /memories/b.md), 0 held writes and 0 versions of the search index\n",
        "",
    )
    refused(
        edited("show", "/memories/b.md", "--version", modified["version"]),
        EXIT_REFUSED,
        f"Error: Version {modified['version']} of /memories/a.md was redacted: its content is gone for good.",
    )
    after = {e["version"]: e for e in versions(edited, "/memories/b.md")}[modified["version"]]
    assert after["bytes"] is None and after["actor"] == "cli" and after["note"].startswith("redacted by cli at ")
    for confirmed in ([], ["--yes"]):  # gone already: refused either way
        result = edited("redact", "/memories/b.md", modified["version"], *confirmed)
        assert result.status == EXIT_REFUSED and "was redacted" in result.err
    refused(
        edited("redact", "/memories/b.md", "nope", "--yes"),
        EXIT_REFUSED,
        "Error: /memories/b.md has no version 'nope'.",
    )


def test_redact_removes_the_copy_a_rename_left(edited: Cli) -> None:
    """Failed before the fix: the rename's copy of the redacted version stayed readable."""
    deleted, copy, modified, _created = versions(edited, "/memories/b.md")
    assert (deleted["operation"], copy["operation"], copy["path"]) == ("deleted", "renamed", "/memories/b.md")
    assert edited("show", "/memories/b.md", "--version", copy["version"]).out == "two\n"
    done = edited("redact", "/memories/b.md", modified["version"], "--yes")
    assert done.status == 0 and done.err == "", done
    refused(
        edited("show", "/memories/b.md", "--version", copy["version"]),
        EXIT_REFUSED,
        f"Error: Version {copy['version']} of /memories/b.md was redacted: its content is gone for good.",
    )
    assert "removed 2 stored versions of its text (/memories/a.md, /memories/b.md)" in done.out


def test_the_current_version_is_never_redacted(s3memory: Cli) -> None:
    s3memory("create", "/memories/c.md", "current\n")
    [current] = versions(s3memory, "/memories/c.md")
    refused(
        s3memory("redact", "/memories/c.md", current["version"]),
        EXIT_REFUSED,
        f"Error: version {current['version']} of /memories/c.md is its current content: "
        "edit or delete the file first, then redact it",
    )
    refused(
        s3memory("redact", "/memories/c.md", current["version"], "--yes"),
        EXIT_REFUSED,
        f"Error: Version {current['version']} is the current content of /memories/c.md. "
        "Edit or delete the file first, then redact this version.",
    )
    assert s3memory("cat", "/memories/c.md").out == "current\n"


# -- log ---------------------------------------------------------------------------------------
@pytest.fixture
def two_actors(edited: Cli, home: Path) -> Cli:
    """``edited``, then /memories/d/n.md created by the application as session:bob."""
    bob = Settings(home=home).open(actor="session:bob")
    try:
        bob.create("/memories/d/n.md", "bob's\n")
    finally:
        bob.close()
    return edited


def logged(s3memory: Cli, *filters: str) -> list[dict[str, Any]]:
    result = s3memory("log", *filters, "--json")
    assert (result.status, result.err) == (0, ""), result
    document = json.loads(result.out)
    assert isinstance(document, list)
    return document


def test_log_is_every_change_newest_first(two_actors: Cli) -> None:
    everything = logged(two_actors)
    seen = [(e["operation"], e["path"], e["actor"]) for e in everything]
    assert seen[:2] + seen[4:] == [
        ("created", "/memories/d/n.md", "session:bob"),
        ("deleted", "/memories/b.md", "cli"),
        ("modified", "/memories/a.md", "cli"),
        ("created", "/memories/a.md", "cli"),
    ]
    # A rename's two sides (leaving a.md, arriving at b.md) are stamped a moment apart, either way.
    assert sorted(seen[2:4]) == [("renamed", "/memories/a.md", "cli"), ("renamed", "/memories/b.md", "cli")]
    table = two_actors("log")
    assert table.status == 0 and table.out.splitlines()[-1] == "6 change(s)"
    assert [row[2:5] for row in rows(table.out)] == [[e["operation"], e["actor"], e["path"]] for e in everything]
    assert [row[6] for row in rows(table.out)] == [e["version"] for e in everything]
    assert two_actors("-q", "log").out.splitlines()[-1].split()[2:5] == ["created", "cli", "/memories/a.md"]


def test_log_filters(two_actors: Cli) -> None:
    everything = logged(two_actors)

    def only(*filters: str) -> list[tuple[str, str]]:
        return [(e["operation"], e["path"]) for e in logged(two_actors, *filters)]

    assert sorted(only("--operation", "renamed")) == [("renamed", "/memories/a.md"), ("renamed", "/memories/b.md")]
    assert only("--operation", "deleted") == [("deleted", "/memories/b.md")]
    assert only("--operation", "redacted") == []
    assert only("--actor", "session:bob") == [("created", "/memories/d/n.md")]
    assert len(only("--actor", "cli")) == 5 and only("--actor", "nobody") == []
    assert only("--path-prefix", "/memories/d") == [("created", "/memories/d/n.md")]
    assert logged(two_actors, "--limit", "2") == everything[:2]
    limited = two_actors("log", "--limit", "2")
    assert len(rows(limited.out)) == 2 and limited.out.splitlines()[-1] == "6 change(s), the newest 2 shown"
    # Times: ISO 8601; a date alone is its midnight UTC; a time without a zone is UTC.
    day = everything[-1]["at"][:10]
    assert logged(two_actors, "--since", day) == everything
    assert logged(two_actors, "--until", day) == []
    modified_at = everything[4]["at"]
    naive = modified_at.removesuffix("Z")
    assert logged(two_actors, "--since", naive) == everything[:5]
    assert logged(two_actors, "--since", modified_at) == everything[:5]
    assert logged(two_actors, "--until", naive) == everything[4:]
    shifted = (datetime.datetime.fromisoformat(naive) + datetime.timedelta(hours=2)).isoformat() + "+02:00"
    assert logged(two_actors, "--since", shifted, "--until", shifted) == [everything[4]]
    combined = logged(two_actors, "--actor", "cli", "--operation", "renamed", "--since", day, "--limit", "1")
    assert combined == everything[2:3]
    empty = two_actors("log", "--since", "2999-01-01")
    assert empty.status == 0 and empty.out.splitlines()[-1] == "0 change(s)"


@pytest.mark.parametrize(
    ("argv", "status", "message"),
    [
        (
            ["--since", "yesterday"],
            EXIT_USAGE,
            "Error: Invalid value for '--since': 'yesterday' is not an ISO-8601 time such as 2026-05-01, "
            "2026-05-01T09:30 or 2026-05-01T09:30:00+02:00 (without a zone: UTC) (see: s3memory log --help)",
        ),
        (["--until", "2026-02-30"], EXIT_USAGE, "Error: Invalid value for '--until': '2026-02-30' is not an ISO-8601"),
        (["--since", "2026-05-01T25:00"], EXIT_USAGE, "Error: Invalid value for '--since': '2026-05-01T25:00'"),
        (
            ["--since", "2026-05-02", "--until", "2026-05-01"],
            EXIT_USAGE,
            "Error: --since 2026-05-02T00:00:00+00:00 is after --until 2026-05-01T00:00:00+00:00: nothing can match",
        ),
        (["--operation", "edited"], EXIT_USAGE, "Error: Invalid value for '--operation': 'edited' is not one of"),
        (["--limit", "0"], EXIT_USAGE, "Error: Invalid value for '--limit': 0 is not in the range x>=1."),
        (["--limit", "many"], EXIT_USAGE, "Error: Invalid value for '--limit': 'many' is not a valid integer"),
        (
            ["--path-prefix", "/etc"],
            EXIT_REFUSED,
            "Error: Path must start with /memories, got: /etc (a path is /memories or starts with /memories/)",
        ),
        (["--path-prefix", "/memories/../x"], EXIT_REFUSED, "Error: Path /memories/../x would escape /memories"),
    ],
)
def test_bad_log_filters_are_refused_in_one_line(edited: Cli, argv: list[str], status: int, message: str) -> None:
    result = edited("log", *argv)
    assert (result.status, result.out) == (status, "")
    assert result.err.startswith(message) and result.err.count("\n") == 1, result.err
    assert "Traceback" not in result.err


# -- what the core refuses, and stores without versions ----------------------------------------
def test_a_store_without_versions_says_so(s3memory: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = LocalDirStore(tmp_path / "plain", versioned=False)

    def unversioned(self: Settings, *, actor: str = "cli") -> EncryptedMemory:
        return open_memory(user_id="local", store=store, master_key=MASTER_KEY, actor=actor)

    monkeypatch.setattr(Settings, "open", unversioned)
    assert s3memory("create", "/memories/a.md", "x\n").status == 0
    assert s3memory("str-replace", "/memories/a.md", "x", "y").status == 0
    for argv in (
        ["history", "/memories/a.md"],
        ["history", "/memories/a.md", "--json"],
        ["show", "/memories/a.md", "--version", "abc"],
        ["restore", "/memories/a.md", "abc"],
        ["redact", "/memories/a.md", "abc"],
        ["redact", "/memories/a.md", "abc", "--yes"],
        ["log"],
        ["log", "--operation", "created", "--json"],
    ):
        result = s3memory(*argv)
        assert (result.status, result.out) == (EXIT_CONFIGURATION, ""), argv
        assert result.err.startswith("Error: This memory's store keeps no versions, so it has no history"), argv
        assert result.err.count("\n") == 1 and "put-bucket-versioning" in result.err
    assert s3memory("cat", "/memories/a.md").out == "y\n"  # everything else works


def test_a_tampered_version_is_a_storage_failure(edited: Cli, home: Path) -> None:
    created = versions(edited, "/memories/b.md")[3]["version"]
    for stored in (home / "store").rglob("*"):
        if stored.is_file() and "a.md" in str(stored.relative_to(home / "store")) and stored.stat().st_size > 16:
            data = bytearray(stored.read_bytes())
            data[-1] ^= 1
            stored.write_bytes(bytes(data))
    result = edited("show", "/memories/b.md", "--version", created)
    assert (result.status, result.out) == (EXIT_STORAGE, "") and result.err.startswith("Error")
    assert result.err.count("\n") == 1


# -- what the bucket chose, escaped --------------------------------------------------------------
EVIL = MemoryVersion(
    path="/memories/\x1b[31mred\u202e.md",
    version="v1\x1b]0;pwned\x07",
    operation="modified",
    actor="session:\x1b[2Jeve\\n",
    at=datetime.datetime(2026, 5, 1, 9, 30, tzinfo=datetime.timezone.utc),
    size=5,
    file_id="f",
    current=False,
    verified=False,
    note="out of sequence: \u200b[bold]not[/bold]\n",
)


def test_stored_text_is_printed_escaped(s3memory: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(EncryptedMemory, "history", lambda self, path: [EVIL])
    monkeypatch.setattr(EncryptedMemory, "changes", lambda self, path_prefix="/memories", **filters: [EVIL])
    for argv in (["history", "/memories/x.md"], ["log"]):
        result = s3memory(*argv)
        assert result.status == 0 and result.err == ""
        for raw in ("\x1b", "\x07", "\u202e", "\u200b"):
            assert raw not in result.out, (argv, raw)
        for escaped in (
            "/memories/\\x1b[31mred\\u202e.md",
            "v1\\x1b]0;pwned\\x07",
            "session:\\x1b[2Jeve\\\\n",  # the backslash of a name escaped too: never read as \n
            "✗ out of sequence: \\u200b[bold]not[/bold]\\n",  # markup shown, never applied
        ):
            assert escaped in result.out, (argv, escaped)
        assert "2026-05-01 09:30:00  modified" in result.out
    as_json = s3memory("log", "--json").out
    assert as_json.isascii() and json.loads(as_json)[0]["actor"] == EVIL.actor


def test_the_redact_refusal_escapes_what_it_quotes(s3memory: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(EncryptedMemory, "history", lambda self, path: [EVIL])
    monkeypatch.setattr(EncryptedMemory, "read_version", lambda self, path, version: "text\n")
    result = s3memory("redact", "/memories/x.md", EVIL.version)
    assert result.status == EXIT_USAGE and result.out == ""
    assert result.err == (
        "Error: redact destroys the text of version v1\\x1b]0;pwned\\x07 of /memories/\\x1b[31mred\\u202e.md "
        "(modified by session:\\x1b[2Jeve\\\\n at 2026-05-01 09:30:00 UTC, 5B) for good, with every stored copy "
        "of it; its history entries stay. Add --yes to redact it\n"
    )


def test_help_lists_the_history_commands(s3memory: Cli) -> None:
    out = s3memory("--help").out
    for command in ("history", "show", "restore", "redact", "log"):
        assert f"  {command} " in out, command
        assert s3memory(command, "--help").status == 0
    assert "s3memory log --actor mcp" in out and "history, show, log" in " ".join(out.split())
    assert "--json" in s3memory("log", "--help").out and "--json" not in s3memory("redact", "--help").out
    assert "--yes" in s3memory("redact", "--help").out
    assert "--allow-restore" in s3memory("mcp", "--help").out
