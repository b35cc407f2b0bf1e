"""Every command, every documented string, every error path, on every backend flavour."""

from __future__ import annotations

import pytest

from s3memory import (
    EditError,
    EncryptedMemory,
    InvalidCommandError,
    LimitExceededError,
    NotADirectoryConflict,
    PathExistsError,
    PathNotFoundError,
    S3MemoryError,
    format_size,
)

LISTING_HEADER = "Here're the files and directories up to 2 levels deep in {}, excluding hidden items and node_modules:"


def file_view(path: str, *numbered: str) -> str:
    return f"Here's the content of {path} with line numbers:\n" + "\n".join(numbered)


def error_of(call, *args) -> S3MemoryError:  # type: ignore[no-untyped-def]
    with pytest.raises(S3MemoryError) as info:
        call(*args)
    return info.value


# -- view --------------------------------------------------------------------------------


def test_view_empty_root(memory: EncryptedMemory) -> None:
    assert memory.view("/memories") == LISTING_HEADER.format("/memories") + "\n0B\t/memories"


def test_view_listing_two_levels_sorted_with_plaintext_sizes(memory: EncryptedMemory) -> None:
    memory.create("/memories/b.txt", "x" * 1536)
    memory.create("/memories/a/one.md", "12345")
    memory.create("/memories/a/deep/two.md", "1234567")
    memory.create("/memories/a/deep/deeper/three.md", "123")
    memory.create("/memories/.hidden/secret.md", "hidden")
    memory.create("/memories/a/.dotfile", "dot")
    memory.create("/memories/node_modules/pkg.js", "js")
    expected = "\n".join(
        [
            LISTING_HEADER.format("/memories"),
            # the root's size: every file under it, hidden ones included (du semantics)
            f"{format_size(1536 + 5 + 7 + 3 + 6 + 3 + 2)}\t/memories",
            f"{format_size(5 + 7 + 3 + 3)}\t/memories/a/",
            "10B\t/memories/a/deep/",
            "5B\t/memories/a/one.md",
            "1.5K\t/memories/b.txt",
        ]
    )
    assert memory.view("/memories") == expected


def test_view_subdirectory_and_trailing_slash(memory: EncryptedMemory) -> None:
    memory.create("/memories/d/x.md", "abc")
    memory.create("/memories/d/e/y.md", "")
    listing = "\n".join(
        [
            LISTING_HEADER.format("/memories/d"),
            "3B\t/memories/d",
            "0B\t/memories/d/e/",
            "0B\t/memories/d/e/y.md",
            "3B\t/memories/d/x.md",
        ]
    )
    assert memory.view("/memories/d") == listing
    assert memory.view("/memories/d/") == listing


def test_view_does_not_mix_sibling_prefixes(memory: EncryptedMemory) -> None:
    memory.create("/memories/d/x", "1")
    memory.create("/memories/dd/y", "22")
    memory.create("/memories/d.txt", "333")
    assert memory.view("/memories/d").splitlines()[1:] == ["1B\t/memories/d", "1B\t/memories/d/x"]


def test_view_file_with_line_numbers(memory: EncryptedMemory) -> None:
    memory.create("/memories/notes.txt", "Hello World\nThis is line two")
    assert memory.view("/memories/notes.txt") == file_view(
        "/memories/notes.txt", "     1\tHello World", "     2\tThis is line two"
    )


def test_view_trailing_newline_is_an_empty_last_line(memory: EncryptedMemory) -> None:
    memory.create("/memories/n.txt", "a\n")
    assert memory.view("/memories/n.txt") == file_view("/memories/n.txt", "     1\ta", "     2\t")


def test_view_empty_file(memory: EncryptedMemory) -> None:
    memory.create("/memories/empty", "")
    assert memory.view("/memories/empty") == file_view("/memories/empty", "     1\t")


def test_view_range(memory: EncryptedMemory) -> None:
    memory.create("/memories/r.txt", "\n".join(f"line {i}" for i in range(1, 11)))
    assert memory.view("/memories/r.txt", [9, -1]) == file_view("/memories/r.txt", "     9\tline 9", "    10\tline 10")
    assert memory.view("/memories/r.txt", [2, 3]) == file_view("/memories/r.txt", "     2\tline 2", "     3\tline 3")
    assert memory.view("/memories/r.txt", [10, 10]) == file_view("/memories/r.txt", "    10\tline 10")
    assert memory.view("/memories/r.txt", [9, 99]) == file_view("/memories/r.txt", "     9\tline 9", "    10\tline 10")


@pytest.mark.parametrize("bad", [[0, 2], [11, 12], [3, 2], [1], [1, 2, 3], "1-2", [1.0, 2], [True, 2]])
def test_view_range_invalid(memory: EncryptedMemory, bad: object) -> None:
    memory.create("/memories/r.txt", "\n".join(f"line {i}" for i in range(1, 11)))
    error = error_of(memory.view, "/memories/r.txt", bad)
    assert isinstance(error, InvalidCommandError)
    assert str(error).startswith("Error: Invalid `view_range` parameter")


def test_view_line_numbers_are_six_wide(memory: EncryptedMemory) -> None:
    memory.create("/memories/long.txt", "\n".join(str(i) for i in range(1, 1001)))
    view = memory.view("/memories/long.txt", [999, -1]).splitlines()
    assert view[1:] == ["   999\t999", "  1000\t1000"]


def test_view_missing(memory: EncryptedMemory) -> None:
    error = error_of(memory.view, "/memories/nope.txt")
    assert isinstance(error, PathNotFoundError)
    assert str(error) == "The path /memories/nope.txt does not exist. Please provide a valid path."


def test_view_over_line_limit(make_memory, flavour: str) -> None:  # type: ignore[no-untyped-def]
    from s3memory import Limits

    memory = make_memory(flavour, limits=Limits(max_file_bytes=4_000_000))
    memory.create("/memories/huge.txt", "\n" * 1_000_000)
    error = error_of(memory.view, "/memories/huge.txt")
    assert str(error) == "File /memories/huge.txt exceeds maximum line limit of 999,999 lines."


# -- create ------------------------------------------------------------------------------


def test_create(memory: EncryptedMemory) -> None:
    assert memory.create("/memories/a/b/c.md", "deep") == "File created successfully at: /memories/a/b/c.md"
    assert memory.view("/memories/a/b/c.md") == file_view("/memories/a/b/c.md", "     1\tdeep")


def test_create_never_overwrites(memory: EncryptedMemory) -> None:
    memory.create("/memories/a.md", "first")
    error = error_of(memory.create, "/memories/a.md", "second")
    assert isinstance(error, PathExistsError)
    assert str(error) == "Error: File /memories/a.md already exists"
    assert memory.view("/memories/a.md") == file_view("/memories/a.md", "     1\tfirst")


def test_create_on_a_directory(memory: EncryptedMemory) -> None:
    memory.create("/memories/d/x", "1")
    assert str(error_of(memory.create, "/memories/d", "x")) == "Error: File /memories/d already exists"
    assert str(error_of(memory.create, "/memories", "x")) == "Error: File /memories already exists"


def test_create_below_a_file(memory: EncryptedMemory) -> None:
    memory.create("/memories/f.txt", "1")
    error = error_of(memory.create, "/memories/f.txt/x", "2")
    assert isinstance(error, NotADirectoryConflict)
    assert str(error) == "Error: Cannot create /memories/f.txt/x: /memories/f.txt is a file, not a directory"
    error = error_of(memory.create, "/memories/f.txt/y/z", "2")
    assert isinstance(error, NotADirectoryConflict)
    assert [line.split("\t")[1] for line in memory.view("/memories").splitlines()[1:]] == [
        "/memories",
        "/memories/f.txt",
    ]


def test_create_unicode_content_round_trips(memory: EncryptedMemory) -> None:
    text = "Grüße 👋\r\nzweite Zeile\tmit Tab\n"
    memory.create("/memories/u.txt", text)
    assert memory.view("/memories/u.txt") == file_view(
        "/memories/u.txt", "     1\tGrüße 👋\r", "     2\tzweite Zeile\tmit Tab", "     3\t"
    )
    assert memory.view("/memories").splitlines()[-1] == f"{format_size(len(text.encode()))}\t/memories/u.txt"


def test_create_over_size_limit_writes_nothing(memory: EncryptedMemory) -> None:
    error = error_of(memory.create, "/memories/big", "x" * (100 * 1024 + 1))
    assert isinstance(error, LimitExceededError)
    assert str(error).startswith("Error: File /memories/big would be 102,401 bytes, over the limit of 102,400 bytes.")
    assert memory.view("/memories").splitlines()[1:] == ["0B\t/memories"]
    memory.create("/memories/exact", "x" * (100 * 1024))


# -- str_replace ---------------------------------------------------------------------------


def test_str_replace_snippet(memory: EncryptedMemory) -> None:
    memory.create("/memories/p.txt", "l1\nl2\nl3\nFavorite color: blue\nl5\nl6\nl7\n")
    result = memory.str_replace("/memories/p.txt", "Favorite color: blue", "Favorite color: green")
    assert result == (
        "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
        "     2\tl2\n     3\tl3\n     4\tFavorite color: green\n     5\tl5\n     6\tl6"
    )
    assert "green" in memory.view("/memories/p.txt")


def test_str_replace_snippet_at_top_and_multiline(memory: EncryptedMemory) -> None:
    memory.create("/memories/p.txt", "a\nb\nc")
    result = memory.str_replace("/memories/p.txt", "a", "x\ny")
    assert result.splitlines()[1:] == ["     1\tx", "     2\ty", "     3\tb"]
    assert memory.view("/memories/p.txt").splitlines()[1:] == ["     1\tx", "     2\ty", "     3\tb", "     4\tc"]


def test_str_replace_not_found(memory: EncryptedMemory) -> None:
    memory.create("/memories/p.txt", "abc")
    error = error_of(memory.str_replace, "/memories/p.txt", "zzz", "y")
    assert isinstance(error, EditError)
    assert str(error) == "No replacement was performed, old_str `zzz` did not appear verbatim in /memories/p.txt."


def test_str_replace_multiple(memory: EncryptedMemory) -> None:
    memory.create("/memories/p.txt", "cat\ndog\ncat cat\n")
    error = error_of(memory.str_replace, "/memories/p.txt", "cat", "y")
    assert str(error) == (
        "No replacement was performed. Multiple occurrences of old_str `cat` in lines: 1, 3, 3. "
        "Please ensure it is unique"
    )
    assert memory.view("/memories/p.txt").splitlines()[1] == "     1\tcat"


def test_str_replace_missing_or_directory(memory: EncryptedMemory) -> None:
    memory.create("/memories/d/x", "1")
    for path in ["/memories/none.txt", "/memories/d", "/memories"]:
        error = error_of(memory.str_replace, path, "a", "b")
        assert isinstance(error, PathNotFoundError)
        assert str(error) == f"Error: The path {path} does not exist. Please provide a valid path."


def test_str_replace_empty_old_str_refused(memory: EncryptedMemory) -> None:
    memory.create("/memories/p.txt", "abc")
    assert str(error_of(memory.str_replace, "/memories/p.txt", "", "x")) == "Error: `old_str` must not be empty."


def test_str_replace_over_limit_leaves_file(make_memory, flavour: str) -> None:  # type: ignore[no-untyped-def]
    from s3memory import Limits

    memory = make_memory(flavour, limits=Limits(max_file_bytes=10))
    memory.create("/memories/p.txt", "abc")
    assert isinstance(error_of(memory.str_replace, "/memories/p.txt", "b", "b" * 20), LimitExceededError)
    assert memory.view("/memories/p.txt").splitlines()[1:] == ["     1\tabc"]


# -- insert --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "line", "text", "expected"),
    [
        ("a\nb\n", 0, "top\n", "top\na\nb\n"),
        ("a\nb\n", 1, "mid", "a\nmid\nb\n"),
        ("a\nb\n", 2, "end\n\n", "a\nb\nend\n"),
        ("a\nb", 2, "end", "a\nb\nend\n"),
        ("", 0, "only", "only\n"),
        ("x\r\ny\r\n", 1, "z", "x\r\nz\ny\r\n"),
    ],
)
def test_insert(memory: EncryptedMemory, content: str, line: int, text: str, expected: str) -> None:
    memory.create("/memories/t.txt", content)
    assert memory.insert("/memories/t.txt", line, text) == "The file /memories/t.txt has been edited."
    numbered = [f"{i:>6}\t{s}" for i, s in enumerate(expected.split("\n"), start=1)]
    assert memory.view("/memories/t.txt") == file_view("/memories/t.txt", *numbered)


@pytest.mark.parametrize("line", [-1, 3, 100])
def test_insert_invalid_line(memory: EncryptedMemory, line: int) -> None:
    memory.create("/memories/t.txt", "a\nb\n")
    error = error_of(memory.insert, "/memories/t.txt", line, "x")
    assert isinstance(error, EditError)
    assert str(error) == (
        f"Error: Invalid `insert_line` parameter: {line}. It should be within the range of lines of the file: [0, 2]"
    )


def test_insert_missing_or_directory(memory: EncryptedMemory) -> None:
    memory.create("/memories/d/x", "1")
    for path in ["/memories/none", "/memories/d", "/memories"]:
        error = error_of(memory.insert, path, 0, "x")
        assert isinstance(error, PathNotFoundError)
        assert str(error) == f"Error: The path {path} does not exist"


# -- delete --------------------------------------------------------------------------------


def test_delete_file(memory: EncryptedMemory) -> None:
    memory.create("/memories/a.txt", "1")
    memory.create("/memories/a.txt2", "2")
    assert memory.delete("/memories/a.txt") == "Successfully deleted /memories/a.txt"
    assert memory.view("/memories").splitlines()[2:] == ["1B\t/memories/a.txt2"]


def test_delete_directory_recursively(memory: EncryptedMemory) -> None:
    for i in range(30):
        memory.create(f"/memories/d/sub{i % 3}/f{i}.md", str(i))
    memory.create("/memories/d2/keep.md", "keep")
    assert memory.delete("/memories/d") == "Successfully deleted /memories/d"
    assert memory.view("/memories").splitlines()[1:] == [
        "4B\t/memories",
        "4B\t/memories/d2/",
        "4B\t/memories/d2/keep.md",
    ]
    assert isinstance(error_of(memory.view, "/memories/d"), PathNotFoundError)


def test_delete_missing_and_root(memory: EncryptedMemory) -> None:
    assert str(error_of(memory.delete, "/memories/nope")) == "Error: The path /memories/nope does not exist"
    assert str(error_of(memory.delete, "/memories")) == "Error: Cannot delete the /memories directory itself"
    assert str(error_of(memory.delete, "/memories/")) == "Error: Cannot delete the /memories directory itself"


# -- rename --------------------------------------------------------------------------------


def test_rename_file(memory: EncryptedMemory) -> None:
    memory.create("/memories/draft.txt", "v1\n")
    assert (
        memory.rename("/memories/draft.txt", "/memories/final/final.txt")
        == "Successfully renamed /memories/draft.txt to /memories/final/final.txt"
    )
    assert memory.view("/memories/final/final.txt") == file_view("/memories/final/final.txt", "     1\tv1", "     2\t")
    assert isinstance(error_of(memory.view, "/memories/draft.txt"), PathNotFoundError)
    # the moved file is still editable at its new path
    memory.str_replace("/memories/final/final.txt", "v1", "v2")
    assert "v2" in memory.view("/memories/final/final.txt")


def test_rename_directory_recursively(memory: EncryptedMemory) -> None:
    files = {f"/memories/proj/{d}/f{i}.md": f"content {d} {i}\n" for d in ("a", "b/c") for i in range(12)}
    for path, text in files.items():
        memory.create(path, text)
    memory.create("/memories/projX/other.md", "other")
    assert memory.rename("/memories/proj", "/memories/archive/2025") == (
        "Successfully renamed /memories/proj to /memories/archive/2025"
    )
    for path, text in files.items():
        new_path = path.replace("/memories/proj/", "/memories/archive/2025/")
        assert memory.view(new_path).splitlines()[1] == f"     1\t{text.rstrip()}"
        assert isinstance(error_of(memory.view, path), PathNotFoundError)
    assert memory.view("/memories/projX/other.md").splitlines()[1] == "     1\tother"


def test_rename_errors(memory: EncryptedMemory) -> None:
    memory.create("/memories/a.txt", "a")
    memory.create("/memories/b.txt", "b")
    memory.create("/memories/d/x", "x")
    assert (
        str(error_of(memory.rename, "/memories/none", "/memories/z")) == "Error: The path /memories/none does not exist"
    )
    assert str(error_of(memory.rename, "/memories/a.txt", "/memories/b.txt")) == (
        "Error: The destination /memories/b.txt already exists"
    )
    assert (
        str(error_of(memory.rename, "/memories/a.txt", "/memories/d"))
        == "Error: The destination /memories/d already exists"
    )
    assert str(error_of(memory.rename, "/memories/a.txt", "/memories/a.txt")) == (
        "Error: The destination /memories/a.txt already exists"
    )
    assert (
        str(error_of(memory.rename, "/memories", "/memories/x"))
        == "Error: Cannot rename the /memories directory itself"
    )
    assert str(error_of(memory.rename, "/memories/d", "/memories/d/sub")) == (
        "Error: Cannot move /memories/d into itself (/memories/d/sub)"
    )
    error = error_of(memory.rename, "/memories/d", "/memories/a.txt/d")
    assert isinstance(error, NotADirectoryConflict)
    # nothing moved by any of the refusals
    assert [line.split("\t")[1] for line in memory.view("/memories").splitlines()[1:]] == [
        "/memories",
        "/memories/a.txt",
        "/memories/b.txt",
        "/memories/d/",
        "/memories/d/x",
    ]


# -- execute: the tool-use input as the model sends it -------------------------------------


def test_execute_dispatches_every_command(memory: EncryptedMemory) -> None:
    run = memory.execute
    assert (
        run({"command": "create", "path": "/memories/x", "file_text": "1\n2\n"})
        == "File created successfully at: /memories/x"
    )
    assert run({"command": "view", "path": "/memories/x", "view_range": [2, -1]}).endswith("     2\t2\n     3\t")
    assert run({"command": "str_replace", "path": "/memories/x", "old_str": "1", "new_str": "one"}).startswith(
        "The memory file has been edited."
    )
    assert run({"command": "insert", "path": "/memories/x", "insert_line": 0, "insert_text": "zero"}) == (
        "The file /memories/x has been edited."
    )
    assert run({"command": "rename", "old_path": "/memories/x", "new_path": "/memories/y"}) == (
        "Successfully renamed /memories/x to /memories/y"
    )
    assert run({"command": "delete", "path": "/memories/y"}) == "Successfully deleted /memories/y"


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("view /memories", "Error: The tool input must be an object with a `command` field."),
        ({}, "Error: Unknown command None. Use one of: view, create, str_replace, insert, delete, rename."),
        (
            {"command": "chmod", "path": "/memories"},
            "Error: Unknown command 'chmod'. Use one of: view, create, str_replace, insert, delete, rename.",
        ),
        ({"command": "view"}, "Error: Missing required parameter `path` for command `view`."),
        (
            {"command": "create", "path": "/memories/a"},
            "Error: Missing required parameter `file_text` for command `create`.",
        ),
        (
            {"command": "rename", "old_path": "/memories/a"},
            "Error: Missing required parameter `new_path` for command `rename`.",
        ),
        ({"command": "create", "path": 5, "file_text": "x"}, "Error: The path must be a string, got int"),
        ({"command": "create", "path": "/memories/a", "file_text": 5}, "Error: `file_text` must be a string."),
        (
            {"command": "insert", "path": "/memories/a", "insert_line": "1", "insert_text": "x"},
            "Error: `insert_line` must be an integer.",
        ),
    ],
)
def test_execute_refuses_malformed_input(memory: EncryptedMemory, command: object, message: str) -> None:
    error = error_of(memory.execute, command)
    assert isinstance(error, InvalidCommandError)
    assert str(error) == message


def test_format_size_matches_reference() -> None:
    from anthropic.lib.tools._beta_builtin_memory_tool import _format_file_size

    for size in [0, 1, 512, 1023, 1024, 1025, 1536, 4096, 10**6, 1048575, 1048576, 3 * 1024**3, 5 * 1024**4]:
        assert format_size(size) == _format_file_size(size)
