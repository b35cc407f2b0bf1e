"""The CLI against hostile names, folders and destinations.

Names reach the CLI from the model (through the path parser), from whoever can write to the
bucket, from the file names of a folder being imported and from error messages; none may
ever be taken for rich markup or reach the terminal as a control sequence.
"""

from __future__ import annotations

import itertools
import os
import re
import stat
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from helpers import examples
from helpers.cli import ENV_NAMES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import s3memory.cli as cli_module
import s3memory.cli.bulk as cli_bulk_module
from s3memory import EncryptedMemory, InvalidPathError, S3MemoryError, Settings, StorageError
from s3memory._core.memory import FileEntry
from s3memory._paths import parse_path
from s3memory.cli import EXIT_REFUSED, EXIT_STORAGE, cli, printable

LIMIT = 100 * 1024  # Limits.max_file_bytes, the default the CLI's memory uses


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("S3MEMORY_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))  # never the developer's own memory
    return tmp_path / "home"


@pytest.fixture
def umask_zero() -> Iterator[None]:
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def run(*argv: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(argv), input=stdin, catch_exceptions=False)


def fake_listing(monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> None:
    """The memory lists and reads ``files``: names a bucket writer (or a future source) could supply."""
    entries = sorted(FileEntry(path, len(text.encode())) for path, text in files.items())
    monkeypatch.setattr(EncryptedMemory, "list_files", lambda self, path="/memories": entries)
    monkeypatch.setattr(EncryptedMemory, "read_text", lambda self, path: files[path])


# -- the renderer ---------------------------------------------------------------------------
_ESCAPE = re.compile(r"\\(?:(\\)|([nrt])|x([0-9a-f]{2})|u([0-9a-f]{4})|U([0-9a-f]{8}))")
_SHORT = {"n": "\n", "r": "\r", "t": "\t"}


def unescape(shown: str) -> str:
    """The inverse of ``printable(..., name=True)``; fails on a backslash that starts no escape."""

    def one(match: re.Match[str]) -> str:
        backslash, short, *hexes = match.groups()
        if backslash:
            return "\\"
        if short:
            return _SHORT[short]
        return chr(int(next(h for h in hexes if h), 16))

    assert "\\" not in _ESCAPE.sub("", shown), shown
    return _ESCAPE.sub(one, shown)


def inert(text: str, *, keep: str = "\n") -> bool:
    """No control, format (bidi, zero-width), separator or surrogate character outside ``keep``."""
    return not any(ch not in keep and unicodedata.category(ch) in {"Cc", "Cf", "Cs", "Zl", "Zp"} for ch in text)


HOSTILE = st.sampled_from(
    [
        "[",
        "]",
        "[/]",
        "[bold]",
        "[/bold]",
        "[link=http://x]",
        ":warning:",
        "\x1b",
        "\x1b[2J",
        "\x1b[31m",
        "\x1b]0;title\x07",
        "\x1b]8;;http://evil\x1b\\",
        "\x9b31m",
        "\x90",
        "\x85",
        "\x7f",
        "\x00",
        "\r",
        "\n",
        "\t",
        "\u202e",
        "\u2066",
        "\u200b",
        "\u200d",
        "\ufeff",
        "\u2028",
        "\u00a0",
        "\U000e0041",
        "\udcff",
        "\\",
        "\\x1b",
        "\\\\",
        " ",
    ]
)
HOSTILE_TEXT = st.lists(st.one_of(HOSTILE, st.text(max_size=3)), max_size=8).map("".join)


@pytest.mark.slow  # heavy hypothesis
@given(HOSTILE_TEXT)
@settings(max_examples=examples(500))
def test_a_rendered_name_is_inert_printable_and_recoverable(name: str) -> None:
    shown = printable(name, name=True)
    assert shown.isprintable()  # no control, format, separator (but ' ') or surrogate character
    assert unescape(shown) == name  # so distinct names are always shown distinctly


@given(HOSTILE_TEXT)
@settings(max_examples=examples(500))
def test_rendered_text_keeps_lines_and_tabs_and_nothing_else(text: str) -> None:
    shown = printable(text, lines=True)
    assert inert(shown, keep="\n\t")
    assert shown.count("\n") == text.count("\n") and shown.count("\t") == text.count("\t")
    if inert(text, keep="\n\t"):
        assert shown == text  # what needs no escaping is printed exactly
    message = printable(text)
    assert inert(message, keep="") and "\n" not in message  # an error message stays one line


def test_the_escapes_are_python_s() -> None:
    assert printable("a\x1b]0;t\x07\u202e\U000e0041\\b", name=True) == "a\\x1b]0;t\\x07\\u202e\\U000e0041\\\\b"
    assert printable("a\\b\tc\r\n", lines=True) == "a\\b\tc\\r\n"
    assert printable("[bold]x[/]") == "[bold]x[/]"  # markup is not escaped: it is never interpreted


# -- names are never markup, never terminal control -----------------------------------------
def test_ls_shows_markup_names_literally(home: Path) -> None:
    names = ["/memories/[bold]x.md", "/memories/y[/]", "/memories/[/bold]", "/memories/:warning:.md", "/memories/z.md"]
    for name in names:
        assert run("create", name, "1").exit_code == 0
    children = ["/memories/:warning:.md", "/memories/[/", "/memories/[bold]x.md", "/memories/y[/", "/memories/z.md"]
    for argv, shown in ((["ls", "-r"], sorted(names)), (["ls"], children)):
        result = run(*argv)
        assert result.exit_code == 0, result.output
        assert [line.split()[-1] for line in result.stdout.splitlines()[1:-1]] == shown
    view = run("view").stdout  # the tool's answer, untouched
    assert all(f"\t{name}\n" in view for name in names)


def test_ls_escapes_names_from_elsewhere(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hostile = "/memories/a\x1b]0;pwned\x07\u202eb\x9b2J\u200b"
    fake_listing(monkeypatch, {hostile: "x", "/memories/plain.md": "y"})
    result = run("ls", "-r")
    assert result.exit_code == 0
    assert inert(result.output)
    assert "/memories/a\\x1b]0;pwned\\x07\\u202eb\\x9b2J\\u200b" in result.stdout


def test_import_failure_lines_and_progress_escape_names(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_module.Invocation, "progress", True)  # as on a terminal
    source = tmp_path / "in"
    source.mkdir()
    (source / "a\x1b]0;pwned\x07.md").write_text("x")
    (source / "[bold]b.md").write_text("y")
    result = run("import", str(source), "--to", "/memories/x[/bold]")
    assert result.exit_code == EXIT_REFUSED
    assert inert(result.output)
    assert "/memories/x[/bold]/a\\x1b]0;pwned\\x07.md: Error: Invalid path" in result.stderr
    assert "importing into /memories/x[/bold]" in result.stderr  # the progress bar, not markup
    assert run("cat", "/memories/x[/bold]/[bold]b.md").stdout == "y"


def test_errors_are_one_inert_line(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(self: EncryptedMemory, path: str) -> str:
        raise StorageError("Error: the store said \x1b[31mno\x1b[0m\nfor /memories/\u202ex")

    monkeypatch.setattr(EncryptedMemory, "read_text", fail)
    result = run("cat", "/memories/a.md")
    assert result.exit_code == EXIT_STORAGE
    assert result.stderr == "Error: the store said \\x1b[31mno\\x1b[0m\\nfor /memories/\\u202ex\n"


def test_tool_answers_are_exact_but_never_terminal_control(home: Path) -> None:
    text = "tab\there\n\x1b]0;title\x07\x1b[2J\x9b31m\r\u202egnp.exe\u200b [bold]\\x\n"
    assert run("create", "/memories/t.md", text).exit_code == 0
    shown = "tab\there\n\\x1b]0;title\\x07\\x1b[2J\\x9b31m\\r\\u202egnp.exe\\u200b [bold]\\x\n"
    assert run("cat", "/memories/t.md").stdout == shown
    view = run("view", "/memories/t.md").stdout
    assert inert(view, keep="\n\t") and "     2\t\\x1b]0;title\\x07" in view


def test_rotate_key_expire_info_and_demo_escape_what_they_print(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import s3memory._admin.expiry
    import s3memory._admin.lifecycle
    import s3memory.cli.demo

    evil = "\x1b]8;;http://evil\x07[bold]x\u202e"
    escaped = "\\x1b]8;;http://evil\\x07[bold]x\\u202e"
    report = s3memory._admin.lifecycle.RotationReport(
        tenant="default", kid=f"k{evil}", started=True, unreadable=[f"default/memories/{evil}"], retired=[evil]
    )
    monkeypatch.setattr(s3memory._admin.lifecycle, "rotate_tenant_key", lambda memory, retire_after, progress: report)
    rotated = run("rotate-key")
    assert rotated.exit_code == 0 and inert(rotated.output)
    assert f"tenant key k{escaped}:" in rotated.stdout and f"old key(s) {escaped} kept" in rotated.stdout
    assert f"default/memories/{escaped}: does not unwrap" in rotated.stderr

    stale = s3memory._admin.expiry.StaleMemory(f"/memories/{evil}", 1, 0.0)
    expired = s3memory._admin.expiry.ExpiryReport(stale=[stale], kept_changed=[f"/memories/{evil}"])
    monkeypatch.setattr(s3memory._admin.expiry, "expire_memories", lambda memory, **_: expired)
    result = run("expire", "--days", "1")
    assert result.exit_code == 0 and inert(result.output, keep="\n\t")
    assert result.stdout.endswith(f"\t1B\t/memories/{escaped}\n")
    assert f"/memories/{escaped}: written meanwhile; kept" in result.stderr

    monkeypatch.setenv("S3MEMORY_HOME", str(tmp_path / "h\x1b]0;t\x07[bold]x\u202e"))
    info = run("info")
    assert info.exit_code == 0 and inert(info.output)
    assert "h\\x1b]0;t\\x07[bold]x\\u202e/master.key" in info.stdout

    def demo(out: Any, api_key: str | None) -> None:
        print(f"assistant: {evil}", file=out)

    monkeypatch.setattr(s3memory.cli.demo, "run_demo", demo)
    assert run("demo").stdout == f"assistant: {escaped}\n"


def test_policy_out_that_cannot_be_written_is_one_line(home: Path, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("in the way")
    roles = ["--memory-role-arn", "arn:aws:iam::123456789012:role/m", "--agent-role-arn"]
    roles += ["arn:aws:iam::123456789012:role/a", "--out", str(tmp_path / "file" / "p")]
    result = run("--bucket", "my-bucket", "policy", *roles)
    assert result.exit_code == EXIT_REFUSED
    assert result.stderr.startswith(f"Error: cannot write {tmp_path}/file/p/") and result.stderr.count("\n") == 1


_counter = itertools.count()
_NAME_CHARS = st.sampled_from(
    ["[", "]", "/", ":", " ", "\u00a0", "=", "@", "a", "b", "é", "ß", "字", "😀", "bold", "red"]
)


@given(st.lists(st.lists(_NAME_CHARS, min_size=1, max_size=12).map("".join), min_size=1, max_size=3))
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_ls_shows_every_name_the_parser_accepts_as_it_is(home: Path, names: list[str]) -> None:
    paths = set()
    for name in names:
        try:
            paths.add(parse_path(f"/memories/{name}").display)
        except InvalidPathError:
            continue
    user = f"u{next(_counter)}"
    memory = Settings.from_environment(dict(os.environ), user=user).open()
    created = set()
    try:
        for path in sorted(paths):
            try:
                memory.create(path, "x")
            except S3MemoryError:  # a name that is a file and a directory at once: not this test's point
                continue
            created.add(path)
    finally:
        memory.close()
    result = run("--user", user, "ls", "-r")
    assert result.exit_code in (0, EXIT_REFUSED), result.output
    assert inert(result.output)
    for path in created:
        assert printable(path, name=True) in result.stdout


@given(st.lists(HOSTILE_TEXT, min_size=1, max_size=4, unique=True))
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_ls_never_raises_and_names_stay_distinct(home: Path, monkeypatch: pytest.MonkeyPatch, names: list[str]) -> None:
    with monkeypatch.context() as patch:
        fake_listing(patch, {f"/memories/{name}": "x" for name in names})
        result = run("ls", "-r")
    assert result.exit_code == 0
    assert inert(result.output)
    rows = result.stdout.splitlines()[1:-1]
    assert len(rows) == len(names)
    for name in names:
        assert printable(f"/memories/{name}", name=True) in result.stdout


# -- import of a hostile folder -------------------------------------------------------------
def test_import_refuses_oversized_files_without_reading_them(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "in"
    source.mkdir()
    (source / "ok.md").write_text("fine\n")
    (source / "limit.md").write_bytes(b"x" * LIMIT)
    (source / "big.md").write_bytes(b"x" * (LIMIT + 1))
    with open(source / "sparse.md", "wb") as sparse:
        sparse.truncate(3 * 1024**3)  # 3 GB of nothing: read whole, it kills the process
    read = 0
    real_read = os.read

    def counting_read(fd: int, size: int) -> bytes:
        nonlocal read
        data = real_read(fd, size)
        read += len(data)
        return data

    with monkeypatch.context() as patch:
        patch.setattr(os, "read", counting_read)
        result = run("import", str(source))
    assert result.exit_code == EXIT_REFUSED
    assert result.stdout == "imported: 2 of 4 file(s), 2 failed\n"
    assert "/memories/big.md: Error: larger than the 102,400-byte limit; skipped" in result.stderr
    assert "/memories/sparse.md: Error: larger than the 102,400-byte limit; skipped" in result.stderr
    assert read <= len("fine\n") + LIMIT + (LIMIT + 1)  # never more than limit + 1 bytes of a file
    assert run("cat", "/memories/limit.md").stdout == "x" * LIMIT


def test_import_reports_non_regular_files(home: Path, tmp_path: Path) -> None:
    source = tmp_path / "in"
    source.mkdir()
    (source / "ok.md").write_text("fine\n")
    os.mkfifo(source / "fifo.md")  # opened for reading without a writer, it would block
    result = run("import", str(source))
    assert result.exit_code == EXIT_REFUSED
    assert "/memories/fifo.md: Error: not a regular file; skipped" in result.stderr
    assert result.stdout == "imported: 1 of 2 file(s), 1 failed\n"


@pytest.mark.parametrize("swapped", ["a.md", "sub"])
def test_import_never_follows_a_symlink_swapped_in_after_the_walk(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swapped: str
) -> None:
    source, outside = tmp_path / "in", tmp_path / "outside"
    (source / "sub").mkdir(parents=True)
    outside.mkdir()
    (source / "a.md").write_text("inside a\n")
    (source / "sub" / "b.md").write_text("inside b\n")
    (source / "c.md").write_text("kept\n")
    (outside / "a.md").write_text("OUTSIDE SECRET\n")
    (outside / "b.md").write_text("OUTSIDE SECRET\n")
    opened: list[tuple[int, int]] = []
    real_open, real_bulk = os.open, cli_bulk_module._bulk

    def recording_open(*args: Any, **kwargs: Any) -> int:
        fd = real_open(*args, **kwargs)
        info = os.fstat(fd)
        opened.append((info.st_dev, info.st_ino))
        return fd

    def swap_then_bulk(*args: Any, **kwargs: Any) -> Any:
        victim = source / swapped
        if victim.is_dir():
            (victim / "b.md").unlink()
            victim.rmdir()
            victim.symlink_to(outside, target_is_directory=True)
        else:
            victim.unlink()
            victim.symlink_to(outside / "a.md")
        patch.setattr(os, "open", recording_open)
        return real_bulk(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(cli_bulk_module, "_bulk", swap_then_bulk)
        result = run("import", str(source))
    assert result.exit_code == EXIT_REFUSED
    assert "Traceback" not in result.output and "OUTSIDE" not in result.output
    shown = "/memories/a.md" if swapped == "a.md" else "/memories/sub/b.md"
    assert f"{shown}: Error: " in result.stderr and "symlink" in result.stderr
    assert run("cat", shown).exit_code == EXIT_REFUSED
    assert run("cat", "/memories/c.md").stdout == "kept\n"
    secrets = {(os.stat(p).st_dev, os.stat(p).st_ino) for p in (outside / "a.md", outside / "b.md")}
    assert not secrets & set(opened)  # the target outside the folder was never opened


# -- export ---------------------------------------------------------------------------------
def test_export_reports_name_conflicts_and_goes_on(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A file and a folder of the same name (a bucket writer can store both), and a local
    # folder where a file goes.
    fake_listing(monkeypatch, {"/memories/a": "A", "/memories/a/b": "B", "/memories/c.md": "C", "/memories/d.md": "D"})
    target = tmp_path / "out"
    (target / "d.md").mkdir(parents=True)
    for extra in ([], ["--force"]):
        result = run("export", str(target), *extra)
        assert result.exit_code == EXIT_REFUSED
        assert "Traceback" not in result.output
        assert result.stdout == f"exported to {target}: 2 of 4 file(s), 2 failed\n"
        lines = result.stderr.splitlines()
        assert any(line.startswith("/memories/d.md: Error: ") and "folder" in line for line in lines)
        assert any(line.startswith(("/memories/a: Error: ", "/memories/a/b: Error: ")) for line in lines)
        assert (target / "c.md").read_text() == "C" and (target / "d.md").is_dir()


def test_export_writes_private_files_whatever_the_umask(home: Path, tmp_path: Path, umask_zero: None) -> None:
    run("create", "/memories/a.md", "secret\n")
    run("create", "/memories/d/e/f.md", "secret\n")
    target = tmp_path / "out"
    result = run("export", str(target))
    assert result.exit_code == 0, result.output
    for path in (target, target / "d", target / "d" / "e"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    for path in (target / "a.md", target / "d" / "e" / "f.md"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert run("export", str(target), "--force").exit_code == 0
    assert stat.S_IMODE((target / "a.md").stat().st_mode) == 0o600


def test_export_never_writes_through_a_planted_symlink(home: Path, tmp_path: Path) -> None:
    run("create", "/memories/a.md", "A\n")
    run("create", "/memories/b.md", "B\n")
    run("create", "/memories/sub/x.md", "X\n")
    target, outside = tmp_path / "out", tmp_path / "outside"
    (target / "inner").mkdir(parents=True)
    outside.mkdir()
    (target / "inner" / "victim.md").write_text("victim\n")
    (outside / "victim.md").write_text("victim\n")
    (target / "a.md").symlink_to(target / "inner" / "victim.md")
    (target / "b.md").symlink_to(outside / "victim.md")
    (target / "sub").symlink_to(outside, target_is_directory=True)

    descriptors = len(os.listdir("/proc/self/fd")) if Path("/proc/self/fd").is_dir() else None
    refused = run("export", str(target))
    assert refused.exit_code == EXIT_REFUSED and "Traceback" not in refused.output
    assert refused.stdout.endswith("0 of 3 file(s), 3 failed\n")
    assert "/memories/a.md: Error: " in refused.stderr and "exists (use --force" in refused.stderr

    forced = run("export", str(target), "--force")
    assert forced.exit_code == EXIT_REFUSED and "Traceback" not in forced.output
    assert forced.stdout.endswith("2 of 3 file(s), 1 failed\n")
    assert "/memories/sub/x.md: Error: " in forced.stderr and "symlink" in forced.stderr
    for name, text in (("a.md", "A\n"), ("b.md", "B\n")):  # the links were replaced, not followed
        assert not (target / name).is_symlink() and (target / name).read_text() == text
    assert (target / "inner" / "victim.md").read_text() == "victim\n"
    assert (outside / "victim.md").read_text() == "victim\n"
    assert sorted(p.name for p in outside.iterdir()) == ["victim.md"]
    if descriptors is not None:
        assert len(os.listdir("/proc/self/fd")) == descriptors  # every folder and file closed, failures included


def test_export_force_replaces_files_atomically(home: Path, tmp_path: Path) -> None:
    run("create", "/memories/a.md", "new\n")
    target = tmp_path / "out"
    target.mkdir()
    (target / "a.md").write_text("old\n")
    before = (target / "a.md").stat().st_ino
    assert run("export", str(target), "--force").exit_code == 0
    assert (target / "a.md").read_text() == "new\n"
    assert (target / "a.md").stat().st_ino != before  # a new file renamed over, never truncated in place
    assert sorted(p.name for p in target.iterdir()) == ["a.md"]  # no temporary file left behind


def test_export_exit_status_is_the_worst_failure(home: Path, tmp_path: Path) -> None:
    run("create", "/memories/a.md", "original\n")
    run("create", "/memories/b.md", "fine\n")
    (stored,) = [p for p in (home / "store").rglob("*") if p.is_file() and "a.md" in p.name and "meta" not in p.name]
    data = bytearray(stored.read_bytes())
    data[-1] ^= 1
    stored.write_bytes(bytes(data))
    target = tmp_path / "out"
    result = run("export", str(target))
    assert result.exit_code == EXIT_STORAGE
    assert "/memories/a.md: Error: " in result.stderr and "integrity" in result.stderr
    assert (target / "b.md").read_text() == "fine\n" and not (target / "a.md").exists()


def test_an_unexpected_failure_is_one_line_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def broken(self: Settings) -> None:
        raise RuntimeError("no region\x1b[2J here")

    monkeypatch.setenv("S3MEMORY_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("S3MEMORY_USER", "alice")
    monkeypatch.setattr(Settings, "open_tree", broken)
    assert cli_module.main(["view"]) == cli_module.EXIT_UNEXPECTED
    captured = capsys.readouterr()
    assert captured.err == "Error: s3memory failed unexpectedly (RuntimeError: no region\\x1b[2J here)\n"
    assert "Traceback" not in captured.err + captured.out
