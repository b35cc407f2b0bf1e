"""The contract's text (``s3memory._render``), without a store: against the SDK's reference
tool (``BetaLocalFilesystemMemoryTool``, on a temporary directory) where it answers the same,
and against the exact strings of the contract where ours deliberately differs (the listing's
header, directory sizes, the truncation notices). ``tests/contract/test_differential.py`` does the
same through whole command sequences; this pins each function on its own."""

from __future__ import annotations

from pathlib import Path

import pytest
from anthropic.lib.tools import ToolError
from anthropic.lib.tools._beta_builtin_memory_tool import _format_file_size as reference_format_size
from anthropic.tools.memory import BetaLocalFilesystemMemoryTool

from s3memory import InvalidCommandError, LimitExceededError, parse_path
from s3memory._render import (
    directory_view,
    edit_snippet,
    excerpt,
    file_view,
    format_size,
    multiple_occurrences,
    number_lines,
    short_repr,
)

UNLIMITED = 10**9  # max_view_chars that never cuts
TEXT = "first\nsecond\n\tindented\nfourth\nfifth\nsixth\n"


@pytest.fixture
def reference(tmp_path: Path) -> BetaLocalFilesystemMemoryTool:
    return BetaLocalFilesystemMemoryTool(base_path=str(tmp_path))


@pytest.mark.parametrize(
    "size", [0, 1, 512, 1023, 1024, 1536, 4096, 10_000, 1024**2, 1_258_291, 1024**3, 3 * 1024**3, 5 * 1024**4]
)
def test_format_size_is_the_references(size: int) -> None:
    assert format_size(size) == reference_format_size(size)


@pytest.mark.parametrize("view_range", [None, [1, -1], [2, 4], [3, 3], [5, -1], [7, 7], (2, 3)])
def test_a_file_view_is_the_references(reference: BetaLocalFilesystemMemoryTool, view_range: object) -> None:
    reference.call({"command": "create", "path": "/memories/notes.txt", "file_text": TEXT})
    command: dict[str, object] = {"command": "view", "path": "/memories/notes.txt"}
    if isinstance(view_range, (list, tuple)):
        command["view_range"] = list(view_range)
    assert file_view("/memories/notes.txt", TEXT, view_range, UNLIMITED) == reference.call(command)


def test_a_file_view_in_the_contracts_words() -> None:
    assert file_view("/memories/notes.txt", "Hello World\nThis is line two", None, UNLIMITED) == (
        "Here's the content of /memories/notes.txt with line numbers:\n     1\tHello World\n     2\tThis is line two"
    )
    assert number_lines(["a", "b"], 9) == "     9\ta\n    10\tb"


@pytest.mark.parametrize(
    ("view_range", "why"),
    [([0, 2], "1 <= start <= 7"), ([8, -1], "1 <= start <= 7"), ([3, 2], "end >= start"), ([1], "two integers")],
)
def test_a_range_outside_the_file_is_refused(view_range: object, why: str) -> None:
    with pytest.raises(InvalidCommandError, match=why):
        file_view("/memories/notes.txt", TEXT, view_range, UNLIMITED)


def test_too_many_lines_in_the_contracts_words() -> None:
    with pytest.raises(LimitExceededError) as refused:
        file_view("/memories/big.txt", "\n" * 999_999, None, UNLIMITED)
    assert str(refused.value) == "File /memories/big.txt exceeds maximum line limit of 999,999 lines."


def test_a_long_file_is_cut_at_a_line_with_a_paging_notice() -> None:
    text = "\n".join(f"line {n:03d} " + "x" * 40 for n in range(1, 201))
    answer = file_view("/memories/long.md", text, None, 1_000)
    header, *lines, notice = answer.split("\n")
    assert header == "Here's the content of /memories/long.md with line numbers:"
    assert lines == [f"{n:>6}\tline {n:03d} " + "x" * 40 for n in range(1, len(lines) + 1)]
    last = len(lines)
    assert notice == (
        f"[Output truncated at 1,000 characters: showing lines 1-{last} of 200. "
        f"Call view again with view_range=[{last + 1}, {2 * last}] to read on.]"
    )
    assert len(answer) <= 1_000


def test_a_directory_view_lists_what_the_reference_lists(reference: BetaLocalFilesystemMemoryTool) -> None:
    files = {
        "/memories/a.md": "aaaa",
        "/memories/d/x.md": "x" * 1536,
        "/memories/d/e/deep.md": "too deep to show",
        "/memories/d/.hidden": "h",
        "/memories/.secret/s.md": "s",
        "/memories/z.txt": "",
    }
    for path, text in files.items():
        reference.call({"command": "create", "path": path, "file_text": text})
    ours = directory_view(
        parse_path("/memories"), [(parse_path(p), len(t.encode())) for p, t in files.items()], UNLIMITED
    ).split("\n")
    theirs = reference.call({"command": "view", "path": "/memories"}).split("\n")  # type: ignore[union-attr]
    # The documented differences: the header names node_modules, and a directory's size is the
    # total of its files (the reference shows the file system's size of the directory itself).
    assert ours[0] == theirs[0].replace("excluding hidden items:", "excluding hidden items and node_modules:")
    assert [line.split("\t")[1] for line in ours[1:]] == [line.split("\t")[1] for line in theirs[1:]]
    assert [line for line in ours[1:] if not line.endswith("/")][1:] == [
        line for line in theirs[1:] if not line.endswith("/")
    ][1:]
    assert ours[1:] == [
        "1.5K\t/memories",  # 4 + 1536 + 16 + 1 + 1 + 0 bytes, hidden files included
        "4B\t/memories/a.md",
        "1.5K\t/memories/d/",
        "16B\t/memories/d/e/",
        "1.5K\t/memories/d/x.md",
        "0B\t/memories/z.txt",
    ]


def test_a_long_listing_is_cut_with_a_notice() -> None:
    files = [(parse_path(f"/memories/file-{n:03d}.md"), 10) for n in range(100)]
    header, *lines, notice = directory_view(parse_path("/memories"), files, 1_000).split("\n")
    assert header == (
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:"
    )
    assert lines[0] == "1000B\t/memories" and lines[1] == "10B\t/memories/file-000.md"
    assert notice == f"[Listing truncated: {101 - len(lines)} more entries. View a subdirectory to see them.]"


def test_the_edit_snippet_is_the_references(reference: BetaLocalFilesystemMemoryTool) -> None:
    reference.call({"command": "create", "path": "/memories/n.md", "file_text": TEXT})
    theirs = reference.call({"command": "str_replace", "path": "/memories/n.md", "old_str": "fourth", "new_str": "4"})
    written = TEXT.replace("fourth", "4")
    assert edit_snippet(written, 3, UNLIMITED) == theirs


def test_multiple_occurrences_are_named_as_the_reference_names_them(reference: BetaLocalFilesystemMemoryTool) -> None:
    content = "x = 1\ny = 2\nx = 3\n\nx = 4\n"
    reference.call({"command": "create", "path": "/memories/n.md", "file_text": content})
    with pytest.raises(ToolError) as theirs:
        reference.call({"command": "str_replace", "path": "/memories/n.md", "old_str": "x =", "new_str": "z ="})
    assert multiple_occurrences("x =", content, content.count("x ="), UNLIMITED) == theirs.value.content


def test_model_supplied_values_are_echoed_bounded() -> None:
    assert excerpt("short") == "short"
    assert excerpt("a" * 1_005) == "a" * 1_000 + "... [5 more characters]"
    assert short_repr(10**5000).startswith("<an integer of about 5,")
    assert len(short_repr(list(range(10**4)))) < 100


@pytest.mark.parametrize(
    ("char", "escaped"),
    [
        ("\x1b", True),  # C0 control
        ("\x85", True),  # C1 control
        ("\u202e", True),  # bidi override (Cf)
        ("\u200b", True),  # zero-width space (Cf)
        ("\u2028", True),  # line separator
        ("\u2029", True),  # paragraph separator
        ("\ud800", True),  # lone surrogate
        ("a", False),
        ("é", False),
        ("日", False),
        (" ", False),
    ],
)
def test_one_rule_says_which_characters_are_never_shown_raw(char: str, escaped: bool) -> None:
    """The CLI, the MCP server, the mounts' prompt block and the managed export all ask it."""
    from s3memory._render import never_raw

    assert never_raw(char) is escaped
