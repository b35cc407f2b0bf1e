"""Interchange with Managed Agents memory stores: ``export/import --format managed``.

The pure reading and writing of the JSON Lines shape (``_interchange``), then the commands:
the hand-written export imported and exported again byte for byte, a tree moved between two
tenants without loss on every store flavour, a Hypothesis round trip, one test per bad input,
the page and array forms, and the folder format left as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from helpers import DATA_DIR, examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from s3memory import EncryptedMemory, InvalidPathError, Settings
from s3memory._admin.interchange import (
    MANAGED_MAX_BYTES,
    ManagedMemory,
    format_managed,
    managed_path,
    memory_path,
    read_managed,
)
from s3memory._admin.manage import MemoryAdmin
from s3memory.cli import EXIT_REFUSED, EXIT_USAGE, cli

DATA = DATA_DIR
EXPORT = (DATA / "managed_export.jsonl").read_bytes()
PAGE = (DATA / "managed_page.json").read_bytes()
BIG = "0123456789abcde\n" * 6_400  # exactly 100 KiB (102,400 bytes): the limit of a memory, here and in a managed store


def line(path: object, content: object, **extra: Any) -> bytes:
    record: dict[str, Any] = {"path": path, "content": content}
    record.update(extra)
    return json.dumps(record, ensure_ascii=False).encode("utf-8")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def with_big(export: bytes) -> bytes:
    """The hand-written export with the 100 KiB memory, in its sorted place."""
    memories = [ManagedMemory(managed_path(m.path), m.content) for m in read_managed(export).memories]
    return format_managed([*memories, ManagedMemory("/big/exactly-100KiB.txt", BIG)])


# -- the pure part: reading and writing the shape ---------------------------------------------
def test_the_hand_written_export_reads_and_writes_back_byte_for_byte() -> None:
    found = read_managed(EXPORT)
    assert (found.refused, found.redacted, found.records) == ([], [], 8)
    assert [m.where for m in found.memories] == [f"line {n}" for n in range(1, 9)]
    by_path = {m.path: m.content for m in found.memories}
    assert by_path["/memories/empty.md"] == ""
    assert by_path["/memories/windows/crlf.txt"] == "line one\r\nline two\r\n"
    assert by_path["/memories/code/tabs.py"] == "def f():\n\treturn 1\n\n"
    assert by_path["/memories/preferences/formatting.md"] == "Always use tabs, not spaces."  # no final newline
    assert by_path["/memories/notes/日本語.md"].endswith("🎉\n")
    assert "\u202eevil\u202c" in by_path["/memories/notes/inert.md"]
    again = format_managed(ManagedMemory(managed_path(p), c) for p, c in by_path.items())
    assert again == EXPORT
    for raw in EXPORT.splitlines():  # the fixture is what it says: checked independently
        record = json.loads(raw)
        assert record["content_sha256"] == sha(record["content"])
        assert record["size_bytes"] == len(record["content"].encode("utf-8"))
        assert list(record) == ["path", "content", "content_sha256", "size_bytes"]


def test_the_export_is_sorted_utf8_one_memory_a_line() -> None:
    memories = [ManagedMemory("/b.md", "b"), ManagedMemory("/a/z.md", "日本"), ManagedMemory("/a.md", "")]
    data = format_managed(memories)
    assert data.decode("utf-8") == (
        '{"path": "/a.md", "content": "", "content_sha256": "' + sha("") + '", "size_bytes": 0}\n'
        '{"path": "/a/z.md", "content": "日本", "content_sha256": "' + sha("日本") + '", "size_bytes": 6}\n'
        '{"path": "/b.md", "content": "b", "content_sha256": "' + sha("b") + '", "size_bytes": 1}\n'
    )
    assert format_managed([]) == b""


def test_what_could_act_on_a_terminal_is_written_as_escapes() -> None:
    text = "bidi \u202e zero\u200b sep\u2028 del\x7f c1\x9b esc\x1b bom\ufeff tag\U000e0041 soft\u00ad ok é 🎉"
    data = format_managed([ManagedMemory("/x.md", text)])
    shown = data.decode("utf-8")
    assert all(unicodedata.category(c) not in ("Cc", "Cf", "Zl", "Zp") for c in shown.rstrip("\n"))
    assert "\\udb40\\udc41" in shown and "é 🎉" in shown  # an astral one as a surrogate pair; text kept
    assert read_managed(data).memories[0].content == text  # the same JSON


def test_the_file_may_lack_its_final_newline_use_crlf_or_begin_with_a_bom() -> None:
    expected = read_managed(EXPORT).memories
    for variant in (EXPORT.rstrip(b"\n"), EXPORT.replace(b"\n", b"\r\n"), b"\xef\xbb\xbf" + EXPORT, EXPORT + b"\n\n"):
        found = read_managed(variant)
        assert (found.memories, found.refused) == (expected, [])


def test_a_page_and_an_array_are_read_too() -> None:
    page = read_managed(PAGE)
    assert page.refused == [] and [m.where for m in page.memories] == ["item 1", "item 2", "item 3"]
    assert [m.path for m in page.memories] == [
        "/memories/formatting_standards.md",
        "/memories/notes/日本語.md",
        "/memories/preferences/formatting.md",
    ]
    array = read_managed(json.dumps(json.loads(PAGE)["data"]).encode())
    assert array.memories == page.memories
    one_line_page = read_managed(json.dumps(json.loads(PAGE)).encode())
    assert one_line_page.memories == page.memories


def test_unknown_fields_are_ignored_and_checks_are_optional() -> None:
    data = b"\n".join(
        [
            line("/a.md", "a", id="mem_1", type="memory", created_at="2026-04-01T00:00:00Z", metadata={"k": 1}),
            line("/b.md", "b"),  # no sha, no size
            line("/c.md", "c", content_sha256=sha("c").upper(), content_size_bytes=1),  # the versions' name
        ]
    )
    found = read_managed(data)
    assert found.refused == [] and [m.content for m in found.memories] == ["a", "b", "c"]


def test_a_redacted_memory_is_counted_and_skipped() -> None:
    found = read_managed(line("/a.md", "a") + b"\n" + line("/gone.md", None, content_sha256=None) + b"\n")
    assert [m.path for m in found.memories] == ["/memories/a.md"]
    assert (found.redacted, found.refused, found.records) == (["line 2"], [], 2)


def test_paths_are_rooted_at_the_store_and_may_go_below_another_directory() -> None:
    assert memory_path("/x.md").display == "/memories/x.md"
    assert memory_path("/memories/x.md").display == "/memories/memories/x.md"  # not special-cased
    assert memory_path("/x.md", "/memories/team/").display == "/memories/team/x.md"
    assert memory_path("/cafe\u0301.md").display == "/memories/caf\u00e9.md"  # NFC, as every path is stored
    assert managed_path("/memories/team/a/b.md", "/memories/team") == "/a/b.md"
    with pytest.raises(ValueError, match="not below"):
        managed_path("/memories/other.md", "/memories/team")
    for bad in ("x.md", "/", "/d/", "/../x", "/a//b", 3):
        with pytest.raises(InvalidPathError):
            memory_path(bad)


GOOD = line("/good.md", "kept")

BAD_INPUTS: list[tuple[str, bytes, str]] = [
    (
        "bad JSON",
        b'{"path": "/x.md", "content": ',
        r"^Error: not valid JSON \(Expecting value at column 30\); skipped$",
    ),
    ("not UTF-8", b'{"path": "/x.md", "content": "\xff"}', r"^Error: not UTF-8 text; skipped$"),
    ("not an object", b'["/x.md", "text"]', r"^Error: not a JSON object; skipped$"),
    ("no path", b'{"content": "x"}', r'^Error: no "path"; skipped$'),
    ("path not a string", line(3, "x"), r'^Error: "path" is not a string; skipped$'),
    ("relative path", line("x.md", "x"), r"^Error: Invalid path x\.md: a memory's path starts with '/'"),
    ("a directory", line("/d/", "x"), r"names a file; skipped$"),
    ("traversal", line("/../etc/passwd", "x"), r"would escape /memories directory"),
    ("control in path", line("/a\u202eb.md", "x"), r"control and invisible characters are not allowed; skipped$"),
    ("path too long", line("/" + "a" * 600, "x"), r"is longer than"),
    ("no content", b'{"path": "/x.md"}', r'/memories/x\.md has no "content"'),
    ("content not text", line("/x.md", 7), r'^Error: /memories/x\.md: "content" is not a string; skipped$'),
    ("lone surrogate", b'{"path": "/x.md", "content": "\\ud800"}', r"not valid Unicode \(a lone surrogate\)"),
    (
        "sha mismatch",
        line("/x.md", "x", content_sha256=sha("y")),
        r"content_sha256 does not match the content; skipped$",
    ),
    ("sha not hex", line("/x.md", "x", content_sha256="abc"), r'"content_sha256" is not 64 hexadecimal digits'),
    ("size mismatch", line("/x.md", "é", size_bytes=1), r"size_bytes is 1 but the content has 2 bytes; skipped$"),
    ("size not a number", line("/x.md", "x", size_bytes=True), r'"size_bytes" is not a whole number'),
    ("size as text", line("/x.md", "x", size_bytes="1"), r'"size_bytes" is not a whole number'),
]


@pytest.mark.parametrize(("data", "message"), [b[1:] for b in BAD_INPUTS], ids=[b[0] for b in BAD_INPUTS])
def test_each_bad_line_is_refused_by_number_and_the_others_still_read(data: bytes, message: str) -> None:
    found = read_managed(GOOD + b"\n" + data + b"\n" + GOOD.replace(b"good", b"also"))
    assert [m.path for m in found.memories] == ["/memories/good.md", "/memories/also.md"]
    assert [r.where for r in found.refused] == ["line 2"]
    assert found.refused[0].message.startswith("Error: ") and found.refused[0].message.endswith("; skipped")
    assert re.search(message, found.refused[0].message), found.refused[0].message
    assert found.records == 3


@pytest.mark.parametrize(
    ("first", "second", "message"),
    [
        ("/x.md", "/x.md", r"^Error: /memories/x\.md is also at line 1; skipped$"),
        ("/caf\u00e9.md", "/cafe\u0301.md", r"^Error: /memories/café\.md is also at line 1; skipped$"),
        ("/a", "/a/b.md", r"^Error: /memories/a/b\.md needs /memories/a to be a directory, but line 1 is a memory"),
        ("/a/b.md", "/a", r"^Error: /memories/a is a directory of the memory at line 1; skipped$"),
    ],
    ids=["duplicate", "duplicate once normalized", "file then directory", "directory then file"],
)
def test_a_later_line_that_conflicts_with_an_earlier_one_is_refused(first: str, second: str, message: str) -> None:
    found = read_managed(line(first, "1") + b"\n" + line(second, "2"))
    assert [m.content for m in found.memories] == ["1"]
    assert [r.where for r in found.refused] == ["line 2"]
    assert re.search(message, found.refused[0].message), found.refused[0].message


def test_a_broken_array_is_one_refusal_where_it_breaks() -> None:
    found = read_managed(b'[\n  {"path": "/a.md", "content": "a"},\n  oops\n]')
    assert found.memories == [] and [r.where for r in found.refused] == ["line 3"]
    assert read_managed(b"").records == 0 and read_managed(b"\n \n").records == 0


_SEGMENT = st.text(st.characters(codec="utf-8", categories=("L", "N")), min_size=1, max_size=12)
_TREE = st.dictionaries(
    st.lists(_SEGMENT, min_size=1, max_size=3).map(lambda parts: "/" + "/".join(parts)),
    st.text(st.characters(codec="utf-8"), max_size=200),
    max_size=8,
)


def _valid(tree: dict[str, str]) -> dict[str, str]:
    """``tree`` less the paths the memory tool refuses or that clash (file and directory, NFC)."""
    kept: dict[str, str] = {}
    for path, content in tree.items():
        try:
            memory_path(path)
        except InvalidPathError:
            continue
        normal = unicodedata.normalize("NFC", path)
        if any(normal == k or normal.startswith(k + "/") or k.startswith(normal + "/") for k in kept):
            continue
        kept[normal] = content
    return kept


@settings(max_examples=examples(200), deadline=None)
@given(_TREE)
def test_any_valid_tree_round_trips_through_the_shape(tree: dict[str, str]) -> None:
    tree = _valid(tree)
    data = format_managed(ManagedMemory(p, c) for p, c in tree.items())
    found = read_managed(data)
    assert found.refused == [] and found.redacted == []
    assert {managed_path(m.path): m.content for m in found.memories} == tree
    assert [managed_path(m.path) for m in found.memories] == sorted(tree)
    assert format_managed(ManagedMemory(managed_path(m.path), m.content) for m in found.memories) == data


# -- the commands ---------------------------------------------------------------------------------
@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in [n for n in os.environ if n.startswith("S3MEMORY_") and not n.startswith("S3MEMORY_TEST_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("S3MEMORY_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def run(*argv: str, stdin: bytes | str | None = None) -> Result:
    return CliRunner().invoke(cli, list(argv), input=stdin, catch_exceptions=False)


def test_import_then_export_gives_the_hand_written_file_back(home: Path, tmp_path: Path) -> None:
    source = tmp_path / "managed.jsonl"
    source.write_bytes(with_big(EXPORT))
    imported = run("import", "--format", "managed", str(source))
    assert (imported.exit_code, imported.stderr) == (0, "")
    assert imported.stdout == "imported: 9 of 9 memories\n"
    assert own().read_text("/memories/windows/crlf.txt") == "line one\r\nline two\r\n"
    out = tmp_path / "out.jsonl"
    exported = run("export", "--format", "managed", str(out))
    assert exported.exit_code == 0
    assert exported.stdout == f"exported to {out}: 9 of 9 memories\n"
    assert exported.stderr == ""  # exactly 102,400 bytes: what a managed store accepts, no more
    assert out.read_bytes() == with_big(EXPORT)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def test_the_variants_and_the_page_import_the_same_memories(home: Path, tmp_path: Path) -> None:
    variant = tmp_path / "crlf.jsonl"
    variant.write_bytes(EXPORT.replace(b"\n", b"\r\n").rstrip(b"\r\n"))
    assert run("import", "--format", "managed", str(variant)).exit_code == 0
    assert run("export", "--format", "managed").stdout_bytes == EXPORT  # no FILE: standard output
    page = run("import", "--format", "managed", "-", "--to", "/memories/page", stdin=PAGE)
    assert (page.exit_code, page.stdout) == (0, "imported: 3 of 3 memories\n")
    again = run("export", "--format", "managed", "-", "--from", "/memories/page").stdout_bytes
    assert again == format_managed(ManagedMemory(managed_path(m.path), m.content) for m in read_managed(PAGE).memories)


def test_import_keeps_what_exists_unless_replace(home: Path, tmp_path: Path) -> None:
    run("create", "/memories/empty.md", "mine\n")
    source = tmp_path / "m.jsonl"
    source.write_bytes(EXPORT)
    first = run("import", "--format", "managed", str(source))
    assert (first.exit_code, first.stderr) == (0, "")
    assert first.stdout == "imported: 7 of 8 memories, 1 already existed (kept)\n"
    assert run("cat", "/memories/empty.md").stdout == "mine\n"
    verbose = run("-v", "import", "--format", "managed", str(source))
    assert verbose.stdout == "imported: 0 of 8 memories, 8 already existed (kept)\n"
    assert verbose.stderr.count(": already existed (kept)\n") == 8
    replaced = run("import", "--format", "managed", str(source), "--replace")
    assert (replaced.exit_code, replaced.stdout) == (0, "imported: 8 of 8 memories\n")
    assert run("cat", "/memories/empty.md").stdout == ""


def test_each_refused_line_is_one_line_of_output_and_the_others_are_imported(home: Path, tmp_path: Path) -> None:
    secret = "aws_secret_access_key = " + "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    source = tmp_path / "m.jsonl"
    source.write_bytes(
        b"\n".join(
            [
                line("/a.md", "a"),
                b"not json",
                line("/b.md", "b", content_sha256=sha("other")),
                line("/gone.md", None),
                line("/creds.md", secret),
                line("/a.md", "again"),
                line("/big.md", "x" * (100 * 1024 + 1)),
                line("/c.md", "c"),
            ]
        )
    )
    result = run("import", "--format", "managed", str(source))
    assert result.exit_code == EXIT_REFUSED
    assert result.stdout == "imported: 2 of 8 memories, 1 redacted (skipped), 5 failed\n"
    errors = result.stderr.splitlines()
    assert [e.split(":", 1)[0] for e in errors] == ["line 2", "line 3", "line 5", "line 6", "line 7"], errors
    assert "not valid JSON" in errors[0] and "content_sha256 does not match" in errors[1]
    assert "wJalrXUtnFEMI" not in result.stderr  # the guard names the kind, never the secret
    assert "is also at line 1" in errors[3]
    assert [e.path for e in own().list_files()] == ["/memories/a.md", "/memories/c.md"]
    document = json.loads(run("--json", "import", "--format", "managed", str(source), "--replace").stdout)
    assert document["memories"] == 8 and document["imported"] == 2 and document["redacted"] == ["line 4"]
    assert [(f["at"], f["path"], f["status"]) for f in document["failed"]] == [
        ("line 2", None, EXIT_REFUSED),
        ("line 3", "/memories/b.md", EXIT_REFUSED),
        ("line 5", "/memories/creds.md", EXIT_REFUSED),
        ("line 6", "/memories/a.md", EXIT_REFUSED),
        ("line 7", "/memories/big.md", EXIT_REFUSED),
    ]


def own() -> EncryptedMemory:
    """The memory the commands act on."""
    return Settings.from_environment(None).open()


def test_export_never_overwrites_without_force(home: Path, tmp_path: Path) -> None:
    run("create", "/memories/a.md", "a")
    out = tmp_path / "out.jsonl"
    out.write_text("precious\n")
    refused = run("export", "--format", "managed", str(out))
    assert refused.exit_code == EXIT_REFUSED and "exists (use --force to overwrite)" in refused.stderr
    assert out.read_text() == "precious\n"
    forced = run("export", "--format", "managed", str(out), "--force")
    assert forced.exit_code == 0 and out.read_bytes() == format_managed([ManagedMemory("/a.md", "a")])
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    link = tmp_path / "link.jsonl"
    link.symlink_to(tmp_path / "elsewhere.jsonl")
    assert run("export", "--format", "managed", str(link)).exit_code == EXIT_REFUSED
    assert not (tmp_path / "elsewhere.jsonl").exists()  # never written through a symlink


def test_export_json_and_standard_output(home: Path, tmp_path: Path) -> None:
    run("create", "/memories/big.md", BIG)
    run("create", "/memories/small.md", "s")
    out = tmp_path / "out.jsonl"
    document = json.loads(run("export", "--format", "managed", str(out), "--json").stdout)
    assert document == {
        "file": str(out),
        "format": "managed",
        "from": "/memories",
        "memories": 2,
        "exported": 2,
        "failed": [],
    }
    piped = run("export", "--format", "managed", "-")
    assert piped.stdout_bytes == out.read_bytes()
    assert piped.stderr.endswith("exported: 2 of 2 memories\n")  # stdout holds the export alone
    assert run("export", "--format", "managed", "-", "--json").exit_code == EXIT_USAGE


def test_the_command_lines_of_each_format(home: Path, tmp_path: Path) -> None:
    missing = run("import", "--format", "managed")
    assert missing.exit_code == EXIT_USAGE and "Missing argument 'FILE'" in missing.stderr
    absent = run("import", "--format", "managed", str(tmp_path / "nope.jsonl"))
    assert absent.exit_code == EXIT_USAGE and "does not exist" in absent.stderr
    folder = run("import", "--format", "managed", str(tmp_path))
    assert folder.exit_code == EXIT_USAGE and "is a directory" in folder.stderr
    assert run("export", "--format", "managed", str(tmp_path)).exit_code == EXIT_USAGE
    assert run("import", "--format", "zip", "x").exit_code == EXIT_USAGE
    replace = run("import", str(tmp_path), "--replace")
    assert replace.exit_code == EXIT_USAGE and "--replace is for --format managed" in replace.stderr
    # the folder format is the default, as before
    assert "Missing argument 'DIRECTORY'" in run("import").stderr
    assert "Missing argument 'DIRECTORY'" in run("export").stderr
    assert run("export", str(tmp_path / "folder"), "--format", "folder").exit_code == 0
    bad_base = run("import", "--format", "managed", "-", "--to", "/elsewhere", stdin=EXPORT)
    assert bad_base.exit_code == EXIT_REFUSED and "Path must start with /memories" in bad_base.stderr
    assert own().list_files() == []


def test_help_describes_both_formats(home: Path) -> None:
    for command in ("import", "export"):
        out = run(command, "--help").stdout
        assert f" {command} [OPTIONS] DIRECTORY|FILE\n" in out
        assert "--format [folder|managed]" in out


# -- a tree moved between tenants on every store ---------------------------------------------------
STORES = ["inmemory", "localdir", "s3-tenant-local", "s3-tenant-kms", "s3-kms"]


@pytest.mark.parametrize("encrypt_names", [False, True], ids=["names", "sealed-names"])
@pytest.mark.parametrize("store", STORES)
def test_a_tree_moves_to_a_fresh_tenant_without_loss(
    store: str,
    encrypt_names: bool,
    make_memory: Callable[..., EncryptedMemory],
    home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Exported from alice, imported into bob, exported again: the same bytes."""

    def open_memory(self: Settings, *, actor: str = "cli") -> EncryptedMemory:
        return make_memory(store, user_id=self.user, encrypt_names=encrypt_names)

    monkeypatch.setattr(Settings, "open_tree", open_memory)
    alice = make_memory(store, user_id="alice", encrypt_names=encrypt_names)
    for memory in read_managed(with_big(EXPORT)).memories:
        alice.create(memory.path, memory.content)
    first, second = tmp_path / "alice.jsonl", tmp_path / "bob.jsonl"
    assert run("--user", "alice", "export", "--format", "managed", str(first)).exit_code == 0
    assert first.read_bytes() == with_big(EXPORT)
    assert run("--user", "bob", "import", "--format", "managed", str(first)).exit_code == 0
    assert run("--user", "bob", "export", "--format", "managed", str(second)).exit_code == 0
    assert second.read_bytes() == first.read_bytes()
    bob = make_memory(store, user_id="bob", encrypt_names=encrypt_names)
    assert [(e.path, e.size) for e in bob.list_files()] == [(e.path, e.size) for e in alice.list_files()]
    exported = {"/memories" + r["path"]: r["content_sha256"] for r in map(json.loads, first.read_bytes().splitlines())}
    assert {info.path: info.sha256 for info in MemoryAdmin(bob).list()} == exported


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=_TREE)
def test_any_valid_tree_round_trips_through_a_memory(
    tree: dict[str, str], make_memory: Callable[..., EncryptedMemory], home: Path, tmp_path: Path
) -> None:
    """format, import into a fresh tenant, export: the same bytes (the in-memory store)."""
    import uuid

    tree = {p: c for p, c in _valid(tree).items() if len(c.encode("utf-8")) <= MANAGED_MAX_BYTES}
    data = format_managed(ManagedMemory(p, c) for p, c in tree.items())
    user = f"u{uuid.uuid4().hex[:12]}"
    patch = pytest.MonkeyPatch()
    patch.setattr(
        Settings,
        "open_tree",
        lambda self, actor="cli": make_memory("inmemory", user_id=user, sensitive_data="allow"),
    )
    try:
        imported = run("import", "--format", "managed", "-", stdin=data)
        assert imported.exit_code == 0, imported.stderr
        exported = run("export", "--format", "managed", "-")
    finally:
        patch.undo()
    assert exported.stdout_bytes == data


def test_the_commands_on_s3_as_configured(home: Path, tmp_path: Path, s3_client: Any) -> None:
    """moto, through the settings the commands are given (no store swapped in)."""
    from helpers import BUCKET

    base = ["--bucket", BUCKET, "--region", "us-east-1"]
    source, copy = tmp_path / "in.jsonl", tmp_path / "copy.jsonl"
    source.write_bytes(with_big(EXPORT))
    assert run(*base, "--user", "carol", "import", "--format", "managed", str(source)).exit_code == 0
    assert run(*base, "--user", "carol", "export", "--format", "managed", str(copy)).exit_code == 0
    assert copy.read_bytes() == source.read_bytes()
    moved = run(*base, "--user", "dave", "import", "--format", "managed", "-", stdin=copy.read_bytes())
    assert (moved.exit_code, moved.stdout) == (0, "imported: 9 of 9 memories\n")
    assert run(*base, "--user", "dave", "export", "--format", "managed").stdout_bytes == source.read_bytes()
    keys = {o["Key"].split("/")[0] for o in s3_client.list_objects_v2(Bucket=BUCKET)["Contents"]}
    assert keys == {"carol", "dave"}


def test_a_memory_with_a_data_field_is_a_memory_not_a_page() -> None:
    found = read_managed(b'{"path": "/p.md", "content": "x", "data": []}')
    assert [m.path for m in found.memories] == ["/memories/p.md"] and found.refused == []


def test_every_s3memory_file_fits_a_managed_memory() -> None:
    """What lets export promise that each memory fits: the SDK's 102,400-byte limit is the
    size limit of every s3memory file (``export --format managed`` warns of nothing)."""
    from s3memory import Limits

    assert MANAGED_MAX_BYTES == Limits().max_file_bytes == 102_400
