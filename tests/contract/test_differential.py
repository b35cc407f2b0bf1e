"""Differential test: our EncryptedMemory against the SDK's reference implementation.

Hypothesis generates random sequences of the six memory commands over a small alphabet of
paths and texts. Each sequence runs on a fresh ``BetaLocalFilesystemMemoryTool`` (a fresh
temporary directory) and on a fresh ``EncryptedMemory`` (in memory, in a local directory
store, and on S3 via moto), and every answer is compared.

What must agree, and the documented differences, accounted for precisely:

* A success on both sides must return the same string, except for directory listings:
  (1) the header differs (``excluding hidden items and node_modules:`` in ours, as the
  documentation says, ``excluding hidden items:`` in the reference), and a directory's size
  differs (the reference shows the file system's size of the directory inode, ours the
  total plaintext bytes under it). Each side's header is checked exactly; the entries, their
  order, every path and every file size are compared exactly; each of our directory sizes
  is checked against the total size of the files under that directory in the reference
  (hidden files included); the reference's directory sizes are ignored.
  (5) Viewing a directory through a path with a trailing ``/`` (``/memories/d/``): the
  reference echoes the path as given and so prints ``/memories/d//x.md``; ours shows the
  canonical ``/memories/d/x.md``. The reference's paths are rewritten from the given to the
  canonical spelling before the exact comparison; nothing else is changed.
  (6) ``node_modules``: the documentation leaves it out of listings, the reference shows
  it. The reference's entries with a ``node_modules`` segment below the listed directory
  are dropped before the comparison (viewing ``/memories/node_modules`` itself lists it on
  both sides).
* (2) Our directories are implicit (key prefixes), so an empty directory cannot exist in
  ours. After every command, empty directories (other than the root) are removed from the
  reference's temporary directory, so both models hold the same tree.
* (3) Error strings differ in places. When the reference fails (``ToolError`` or a raw OS
  exception), ours must fail too, with an ``S3MemoryError`` (a clear error, never a raw
  exception). Ours raising anything that is not an ``S3MemoryError`` is always a failure.
  Except path refusals: where the reference refuses a path (outside ``/memories``, or
  escaping it with ``..``), ours must refuse it with an ``InvalidPathError`` whose message
  is the reference's exact text followed by the rule that was broken (`` (...)`` or
  ``: ...``). A few such paths are in the alphabet.
* (4) Deliberate contract deviations, where the reference succeeds and ours refuses. These
  inputs are generated but run on ours only, and ours must refuse them with the specific
  error; the reference is not run, so the two states stay equal: ``/memoriesX...`` paths,
  ``..`` and ``.`` segments that stay inside, look-alikes of ``/`` and ``.`` in a name
  (``InvalidPathError``), an empty ``old_str`` (``EditError``). Creating a file under a
  file and renaming a directory into itself are generated freely: the reference raises a
  raw OS exception for them, so rule (3) applies. Each deviation also has a deterministic
  test below that pins the reference's behaviour and ours.
* ``view_range``: pairs ``[start, end]`` with start in 0..n+1 and end in -1..n+2, where
  n is the number of lines (``len(text.split("\n"))``). The contract accepts
  ``1 <= start <= n`` and ``end == -1`` or ``end >= start``; for those the answers are
  compared exactly. For any other range on a file, the reference silently clamps (start 0
  shows from line 1; start > n or end < start gives no lines) while ours must refuse it
  with ``InvalidCommandError``. On a directory both ignore ``view_range``.

After every sequence the whole state is compared: the set of files (hidden ones included)
and each file's full ``view`` (which determines its content exactly).
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from anthropic.lib.tools import ToolError
from anthropic.lib.tools._beta_builtin_memory_tool import _format_file_size as reference_format_size
from anthropic.tools.memory import BetaLocalFilesystemMemoryTool
from helpers import examples, use_fake_aws_credentials
from hypothesis import event, given, settings
from hypothesis import strategies as st

from s3memory import (
    EditError,
    EncryptedMemory,
    InMemoryStore,
    InvalidCommandError,
    InvalidPathError,
    KeyCache,
    LocalDirStore,
    MemoryPath,
    NotADirectoryConflict,
    PathExistsError,
    S3MemoryError,
    open_memory,
)

MASTER_KEY = bytes(range(32))
REGION = "us-east-1"
# The reference fsyncs every write; on a RAM file system that costs nothing.
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None

# Files and directories at depths 1-4, hidden names (a hidden file or directory at the top,
# a hidden file inside a directory), a non-ASCII name (NFC), node_modules, the root, and
# two trailing-slash spellings.
# (The root comes late: hypothesis draws the first element more often than the others.)
PATHS = [
    "/memories/a",
    "/memories/b.txt",
    "/memories/d/x.md",
    "/memories/d",
    "/memories/d/",
    "/memories",
    "/memories/",
    "/memories/d/.g",
    "/memories/d/e",
    "/memories/d/e/y",
    "/memories/d/e/f/z",
    "/memories/.h",
    "/memories/.h/k",
    "/memories/d/ü",
    "/memories/node_modules/p",
]
# Deviation (4): the reference accepts these (as /memories/X..., as /memories/a, or as a
# name that displays as a path or as another name), ours refuses them.
FOREIGN_PATHS = [
    "/memoriesX",
    "/memoriesX/a",
    "/memories/d/../a",
    "/memories/./a",
    "/memories/d\u2215x.md",
    "/memories/a\uff0emd",
]
# Difference (3): both refuse these, ours in the reference's words (plus the rule broken).
REFUSED_PATHS = [
    "/notes.md",
    "/etc/passwd",
    "../x",
    "memories/a",
    "/memories/..",
    "/memories/../x",
    "/memories/d/../../x",
]

# Text pieces: line breaks of every kind (LF, CR, CRLF, U+2028, which is not a line break
# for either side), multi-byte UTF-8 (2, 3 and 4 bytes), tabs and spaces, and short
# repeated pieces so that an old_str occurs 0, 1 or several times; a long piece so that
# sizes cross 1K (``1.2K``, ``2K``).
TOKENS = ["a", "b", "ab", "a\n", "\n", "\r", "\r\n", " ", "\t", "é", "日本", "😀", "\u2028", "z" * 700]

LISTING_PREFIX = "Here're the files and directories up to 2 levels deep in "
REFERENCE_HEADER = LISTING_PREFIX + "{}, excluding hidden items:"
OUR_HEADER = LISTING_PREFIX + "{}, excluding hidden items and node_modules:"


# -- strategies ------------------------------------------------------------------------
# Commands are drawn one at a time against the reference's current tree (``st.data()``),
# so that most of them hit something: paths lean towards existing files and directories,
# old_str towards substrings of the file, insert_line and view_range towards the file's
# line count (each including values just out of range).
def _pieces(min_size: int, max_size: int) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(TOKENS), min_size=min_size, max_size=max_size).map("".join)


texts = _pieces(0, 8)


@dataclass
class _Tree:
    """The reference's tree, read from disk before each command."""

    files: dict[str, str]  # /memories path -> content
    dirs: list[str]  # /memories paths of the directories below the root

    @classmethod
    def read(cls, root: Path) -> _Tree:
        files, dirs = {}, []
        for dirpath, dirnames, filenames in os.walk(root):
            for name in filenames:
                files[_memory_path(root, Path(dirpath) / name)] = (Path(dirpath) / name).read_bytes().decode("utf-8")
            dirs.extend(_memory_path(root, Path(dirpath) / name) for name in dirnames)
        return cls(files, sorted(dirs))


def _memory_path(root: Path, disk_path: Path) -> str:
    return "/memories/" + disk_path.relative_to(root).as_posix()


def _draw_path(data: st.DataObject, existing: list[str]) -> str:
    """Nearly two times in three one of ``existing`` (if any), one in 26 a path only ours
    refuses, one in 26 a path both refuse, else any path of the alphabet."""
    kind = data.draw(st.integers(0, 25))
    if kind == 25:
        return data.draw(st.sampled_from(FOREIGN_PATHS))
    if kind == 24:
        return data.draw(st.sampled_from(REFUSED_PATHS))
    if kind < 16 and existing:
        return data.draw(st.sampled_from(existing))
    return data.draw(st.sampled_from(PATHS))


def _draw_old_str(data: st.DataObject, content: str | None) -> str:
    """One in 12 empty (deviation 4); two in three a substring of the file (so it occurs
    once or several times); else a short text that may not occur at all."""
    kind = data.draw(st.integers(0, 11))
    if kind == 11:
        return ""
    if kind >= 3 and content:
        start = data.draw(st.integers(0, len(content) - 1))
        length = data.draw(st.integers(1, min(4, len(content) - start)))
        return content[start : start + length]
    return data.draw(_pieces(1, 3))


def _draw_command(data: st.DataObject, tree: _Tree) -> dict[str, Any]:
    files, entries = sorted(tree.files), sorted(tree.files) + tree.dirs
    free = [p for p in PATHS if _canonical(p) not in entries and _canonical(p) != "/memories"]
    name = data.draw(st.sampled_from(["create", "create", "view", "str_replace", "insert", "delete", "rename"]))
    if name == "create":
        return {"command": name, "path": _draw_path(data, free), "file_text": data.draw(texts)}
    if name == "view":
        cmd: dict[str, Any] = {"command": name, "path": _draw_path(data, entries)}
        n = len(tree.files.get(cmd["path"], "").split("\n"))
        if data.draw(st.booleans()):
            cmd["view_range"] = [data.draw(st.integers(0, n + 1)), data.draw(st.integers(-1, n + 2))]
        return cmd
    if name == "str_replace":
        path = _draw_path(data, files)
        old = _draw_old_str(data, tree.files.get(path))
        return {"command": name, "path": path, "old_str": old, "new_str": data.draw(texts)}
    if name == "insert":
        path = _draw_path(data, files)
        lines = tree.files.get(path, "").split("\n")
        n = len(lines) - (lines[-1] == "")  # as insert counts them
        line = data.draw(st.integers(-1, n + 1))
        return {"command": name, "path": path, "insert_line": line, "insert_text": data.draw(texts)}
    if name == "delete":
        return {"command": name, "path": _draw_path(data, entries)}
    return {"command": name, "old_path": _draw_path(data, entries), "new_path": _draw_path(data, free)}


# -- the reference side --------------------------------------------------------------
def _prune_empty_dirs(root: Path) -> None:
    """Difference (2): remove every empty directory below ``root`` (bottom-up)."""
    for dirpath, _dirnames, _filenames in os.walk(root, topdown=False):
        if Path(dirpath) != root and not os.listdir(dirpath):
            os.rmdir(dirpath)


def _disk_path(root: Path, path: str) -> Path:
    rest = path[len("/memories") :].strip("/")
    return root / rest if rest else root


def _bytes_under(directory: Path) -> int:
    return sum((Path(dirpath) / name).stat().st_size for dirpath, _dirs, names in os.walk(directory) for name in names)


def _our_files(memory: EncryptedMemory) -> list[str]:
    found = []
    for info in memory.store.list(memory.layout.dir_prefix(MemoryPath(""))):
        path = memory.layout.path_for_key(info.key)
        assert path is not None, f"our store holds a key no path maps to: {info.key!r}"
        found.append(path.display)
    return sorted(found)


# -- running and comparing -------------------------------------------------------------
Outcome = tuple[bool, Any]  # (succeeded, answer or exception)


def _run(call: Callable[[], Any]) -> Outcome:
    try:
        return True, call()
    except Exception as exc:  # every failure is inspected by the caller
        return False, exc


def _describe(outcome: Outcome) -> str:
    ok, value = outcome
    return f"-> {value!r}" if ok else f"!! {type(value).__name__}: {value}"


def _deviation(cmd: dict[str, Any]) -> type[S3MemoryError] | None:
    """Deviation (4): the error ours must raise for an input the reference would accept."""
    if cmd["command"] == "str_replace" and cmd["old_str"] == "":
        return EditError  # checked before the path
    for key in ("path", "old_path", "new_path"):
        if key in cmd and cmd[key] in FOREIGN_PATHS:
            return InvalidPathError
    return None


def _assert_refused_in_the_reference_words(theirs: ToolError, ours: BaseException, log: str) -> None:
    """Difference (3) for paths: ours says exactly what the reference says, then why."""
    expected = theirs.content
    assert isinstance(expected, str)
    assert isinstance(ours, InvalidPathError), f"ours must refuse the path with InvalidPathError\n{log}"
    message = str(ours)
    assert message.startswith(expected), f"ours {message!r} does not start with the reference's {expected!r}\n{log}"
    assert message[len(expected) :].startswith((" (", ": ")), f"{message!r}: no rule after the reference's words\n{log}"


def _canonical(path: str) -> str:
    """Difference (5): the spelling ours shows a directory path with (one trailing / off)."""
    return path[:-1] if path.endswith("/") else path


def _parse_listing(answer: str, header: str, shown: str, canonical: str, log: str) -> list[tuple[str, str]]:
    """``(size, path)`` per line, with ``shown`` (the path as given) rewritten as ``canonical``."""
    first, *lines = answer.split("\n")
    assert first == header, f"listing header {first!r} != {header!r}\n{log}"
    entries = []
    for index, line in enumerate(lines):
        size, sep, path = line.partition("\t")
        assert sep, f"listing line without a tab: {line!r}\n{log}"
        if index == 0:
            assert path == shown, f"listing's first line is {path!r}, not {shown!r}\n{log}"
            path = canonical
        else:
            assert path.startswith(shown + "/"), f"listing line {path!r} not under {shown!r}\n{log}"
            path = canonical + "/" + path[len(shown) + 1 :]
        entries.append((size, path))
    return entries


def _compare_listing(path: str, theirs: str, ours: str, root: Path, log: str) -> None:
    canonical = _canonical(path)
    ref_entries = [
        (size, entry)
        for size, entry in _parse_listing(theirs, REFERENCE_HEADER.format(path), path, canonical, log)
        if "node_modules" not in entry[len(canonical) :].split("/")  # difference (6)
    ]
    our_entries = _parse_listing(ours, OUR_HEADER.format(canonical), canonical, canonical, log)
    # Same entries in the same order, every path exact.
    assert [p for _, p in our_entries] == [p for _, p in ref_entries], (
        f"listings differ\nreference: {theirs!r}\nours:      {ours!r}\n{log}"
    )
    for index, ((ref_size, entry), (our_size, _)) in enumerate(zip(ref_entries, our_entries, strict=True)):
        if index == 0 or entry.endswith("/"):
            # Difference (1): ours shows the total plaintext bytes under the directory.
            expected = reference_format_size(_bytes_under(_disk_path(root, entry)))
            assert our_size == expected, f"size of directory {entry}: ours {our_size}, expected {expected}\n{log}"
        else:
            assert our_size == ref_size, f"size of file {entry}: ours {our_size}, reference {ref_size}\n{log}"


def _view_range_refused(cmd: dict[str, Any], root: Path) -> bool:
    """True if ``cmd`` is a view of a file with a range the contract does not accept."""
    view_range = cmd.get("view_range") if cmd["command"] == "view" else None
    if view_range is None:
        return False
    target = _disk_path(root, cmd["path"])
    if not target.is_file():
        return False  # a directory ignores view_range; a missing path fails on both
    n = len(target.read_bytes().decode("utf-8").split("\n"))
    start, end = view_range
    return not (1 <= start <= n and (end == -1 or end >= start))


def run_differential(memory: EncryptedMemory, data: st.DataObject) -> None:
    """Draw 1-25 commands, run each on a fresh reference and on ``memory``; fail at the
    first difference."""
    with tempfile.TemporaryDirectory(dir=SCRATCH) as base:
        reference = BetaLocalFilesystemMemoryTool(base_path=base)
        root = reference.memory_root
        trace: list[str] = []
        for number in range(1, data.draw(st.integers(1, 25), label="number of commands") + 1):
            cmd = _draw_command(data, _Tree.read(root))
            log = "command sequence so far:\n" + "\n".join([*trace, f"{number}: {cmd!r}  <-- here"])
            refused = _deviation(cmd)
            if refused is not None:
                ours = _run(lambda cmd=cmd: memory.execute(cmd))
                trace.append(f"{number}: {cmd!r}\n    reference: not run (deviation)\n    ours: {_describe(ours)}")
                assert not ours[0] and isinstance(ours[1], refused), (
                    f"ours must refuse with {refused.__name__}, got {_describe(ours)}\n{log}"
                )
                continue

            range_refused = _view_range_refused(cmd, root)
            theirs = _run(lambda cmd=cmd: reference.call(cmd))
            _prune_empty_dirs(root)
            ours = _run(lambda cmd=cmd: memory.execute(cmd))
            trace.append(f"{number}: {cmd!r}\n    reference: {_describe(theirs)}\n    ours: {_describe(ours)}")
            log = "command sequence:\n" + "\n".join(trace) + "  <-- here"
            event(f"{cmd['command']}: reference {'ok' if theirs[0] else type(theirs[1]).__name__}")

            if not ours[0]:
                assert isinstance(ours[1], S3MemoryError), f"ours raised a raw exception\n{log}"
            if not theirs[0]:
                # Difference (3): any error on the reference side (ToolError or raw OS
                # exception) must be an error, with an S3MemoryError, on ours.
                assert isinstance(theirs[1], (ToolError, OSError)), f"reference raised oddly\n{log}"
                assert not ours[0], f"the reference failed, ours succeeded\n{log}"
                if isinstance(theirs[1], ToolError) and str(theirs[1].content).startswith("Path "):
                    event("path refused in the reference's words")
                    _assert_refused_in_the_reference_words(theirs[1], ours[1], log)
                continue
            if range_refused:
                assert not ours[0] and isinstance(ours[1], InvalidCommandError), (
                    f"ours must refuse a view_range outside the file\n{log}"
                )
                continue
            assert ours[0], f"the reference succeeded, ours failed\n{log}"
            if cmd["command"] == "view" and theirs[1].startswith(LISTING_PREFIX):
                event("view: directory listing compared")
                _compare_listing(cmd["path"], theirs[1], ours[1], root, log)
            else:
                assert ours[1] == theirs[1], f"answers differ\n{log}"

        # The whole state: the same files, each with the same content.
        log = "command sequence:\n" + "\n".join(trace)
        files = sorted(_Tree.read(root).files)
        assert _our_files(memory) == files, f"different files at the end\n{log}"
        for path in files:
            assert memory.execute({"command": "view", "path": path}) == reference.call(
                {"command": "view", "path": path}
            ), f"content of {path} differs at the end\n{log}"


# -- the memories under test -----------------------------------------------------------
def _fresh_inmemory() -> EncryptedMemory:
    return open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())


@pytest.mark.slow  # heavy hypothesis
@settings(max_examples=examples(250), deadline=None)
@given(data=st.data())
def test_differential_inmemory(data: st.DataObject) -> None:
    memory = _fresh_inmemory()
    try:
        run_differential(memory, data)
    finally:
        memory.close()


@pytest.mark.slow  # heavy hypothesis
@settings(max_examples=examples(40), deadline=None)
@given(data=st.data())
def test_differential_localdir(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory(dir=SCRATCH) as store_dir:
        memory = open_memory(
            user_id="alice", store=LocalDirStore(store_dir), master_key=MASTER_KEY, key_cache=KeyCache()
        )
        try:
            run_differential(memory, data)
        finally:
            memory.close()


@pytest.fixture(scope="module")
def moto_s3() -> Iterator[Any]:
    """One moto mock for the module (fixtures are not reset between hypothesis examples);
    each example gets its own bucket. Fake credentials, as conftest's ``aws`` fixture."""
    import boto3
    from moto import mock_aws

    with pytest.MonkeyPatch.context() as patch:
        use_fake_aws_credentials(patch)
        with mock_aws():
            yield boto3.client("s3", region_name=REGION)


@pytest.mark.slow  # heavy hypothesis on moto
@settings(max_examples=examples(30), deadline=None)
@given(data=st.data())
def test_differential_s3(moto_s3: Any, data: st.DataObject) -> None:
    bucket = f"diff-{uuid.uuid4().hex}"
    moto_s3.create_bucket(Bucket=bucket)
    memory = open_memory(user_id="alice", bucket=bucket, s3_client=moto_s3, master_key=MASTER_KEY, key_cache=KeyCache())
    try:
        run_differential(memory, data)
    finally:
        memory.close()


# -- the deliberate deviations, pinned -------------------------------------------------
@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[BetaLocalFilesystemMemoryTool, EncryptedMemory]]:
    memory = _fresh_inmemory()
    try:
        yield BetaLocalFilesystemMemoryTool(base_path=str(tmp_path)), memory
    finally:
        memory.close()


def test_deviation_memoriesX_path(pair: tuple[BetaLocalFilesystemMemoryTool, EncryptedMemory]) -> None:
    reference, memory = pair
    # The reference maps /memoriesX/a to /memories/X/a.
    assert reference.call({"command": "create", "path": "/memoriesX/a", "file_text": "t"}).startswith("File created")
    assert (reference.memory_root / "X" / "a").read_text() == "t"
    with pytest.raises(InvalidPathError):
        memory.execute({"command": "create", "path": "/memoriesX/a", "file_text": "t"})
    assert _our_files(memory) == []


def test_deviation_empty_old_str(pair: tuple[BetaLocalFilesystemMemoryTool, EncryptedMemory]) -> None:
    reference, memory = pair
    for side in (reference.call, memory.execute):
        side({"command": "create", "path": "/memories/e", "file_text": ""})
    # The reference "replaces" the one empty string in an empty file.
    cmd = {"command": "str_replace", "path": "/memories/e", "old_str": "", "new_str": "new"}
    assert reference.call(cmd).startswith("The memory file has been edited.")
    assert (reference.memory_root / "e").read_text() == "new"
    with pytest.raises(EditError, match="must not be empty"):
        memory.execute(cmd)
    assert memory.execute({"command": "view", "path": "/memories/e"}).endswith("     1\t")


def test_deviation_create_under_a_file(pair: tuple[BetaLocalFilesystemMemoryTool, EncryptedMemory]) -> None:
    reference, memory = pair
    for side in (reference.call, memory.execute):
        side({"command": "create", "path": "/memories/f.txt", "file_text": "x"})
    cmd = {"command": "create", "path": "/memories/f.txt/x", "file_text": "y"}
    with pytest.raises(NotADirectoryError) as raw:
        reference.call(cmd)
    assert not isinstance(raw.value, ToolError)
    with pytest.raises(NotADirectoryConflict, match=r"/memories/f\.txt is a file"):
        memory.execute(cmd)


def test_deviation_rename_directory_into_itself(
    pair: tuple[BetaLocalFilesystemMemoryTool, EncryptedMemory],
) -> None:
    reference, memory = pair
    for side in (reference.call, memory.execute):
        side({"command": "create", "path": "/memories/d/x", "file_text": "x"})
    cmd = {"command": "rename", "old_path": "/memories/d", "new_path": "/memories/d/e/d"}
    with pytest.raises(OSError) as raw:
        reference.call(cmd)
    assert not isinstance(raw.value, ToolError)
    with pytest.raises(InvalidCommandError, match="into itself"):
        memory.execute(cmd)
    assert _our_files(memory) == ["/memories/d/x"]


def test_deviation_create_at_a_directory(pair: tuple[BetaLocalFilesystemMemoryTool, EncryptedMemory]) -> None:
    reference, memory = pair
    for side in (reference.call, memory.execute):
        side({"command": "create", "path": "/memories/d/x", "file_text": "x"})
    cmd = {"command": "create", "path": "/memories/d", "file_text": "y"}
    with pytest.raises(ToolError, match="already exists"):
        reference.call(cmd)
    with pytest.raises(PathExistsError) as ours:
        memory.execute(cmd)
    assert str(ours.value) == "Error: File /memories/d already exists"


def test_deviation_view_range_outside_the_file(
    pair: tuple[BetaLocalFilesystemMemoryTool, EncryptedMemory],
) -> None:
    reference, memory = pair
    for side in (reference.call, memory.execute):
        side({"command": "create", "path": "/memories/n", "file_text": "one\ntwo"})
    header = "Here's the content of /memories/n with line numbers:\n"
    for view_range, shown in (([0, 1], "     1\tone"), ([3, -1], ""), ([2, 1], "")):
        cmd = {"command": "view", "path": "/memories/n", "view_range": view_range}
        assert reference.call(cmd) == header + shown  # the reference clamps silently
        with pytest.raises(InvalidCommandError, match="view_range"):
            memory.execute(cmd)


# -- path refusals in the reference's words -----------------------------------------------
OUTSIDE_RULE = " (a path is /memories or starts with /memories/)"
ESCAPE_RULE = ": '..' segments (directory traversal) are not allowed"


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("/etc/passwd", OUTSIDE_RULE),
        ("../x", OUTSIDE_RULE),
        ("", OUTSIDE_RULE),
        ("memories/a", OUTSIDE_RULE),
        ("/memories/..", ESCAPE_RULE),
        ("/memories/../x", ESCAPE_RULE),
        ("/memories/a/../../x", ESCAPE_RULE),
        ("/memories/../../etc/passwd", ESCAPE_RULE),
        ("/memories/caf\u00e9/../../x", ESCAPE_RULE),
    ],
)
def test_path_refusals_in_the_reference_words(
    pair: tuple[BetaLocalFilesystemMemoryTool, EncryptedMemory], path: str, rule: str
) -> None:
    reference, memory = pair
    for cmd in (
        {"command": "view", "path": path},
        {"command": "create", "path": path, "file_text": "x"},
        {"command": "delete", "path": path},
        {"command": "rename", "old_path": path, "new_path": "/memories/new"},
    ):
        with pytest.raises(ToolError) as theirs:
            reference.call(cmd)
        # The reference's exact text: no "Error: " prefix, the path as given.
        assert theirs.value.content in (
            f"Path must start with /memories, got: {path}",
            f"Path {path} would escape /memories directory",
        )
        with pytest.raises(InvalidPathError) as ours:
            memory.execute(cmd)
        assert str(ours.value) == f"{theirs.value.content}{rule}"
    assert _our_files(memory) == []


def test_path_refusals_echo_unprintable_paths_escaped(
    pair: tuple[BetaLocalFilesystemMemoryTool, EncryptedMemory],
) -> None:
    """The one deliberate difference in those words: the reference echoes a path raw (here an
    ANSI escape sequence that would recolour a terminal), ours as its repr()."""
    reference, memory = pair
    for path, rule in (("/etc/\x1b[31mx", OUTSIDE_RULE), ("/memories/../\x1b[31mx", ESCAPE_RULE)):
        with pytest.raises(ToolError) as theirs:
            reference.call({"command": "view", "path": path})
        assert isinstance(theirs.value.content, str) and path in theirs.value.content
        with pytest.raises(InvalidPathError) as ours:
            memory.execute({"command": "view", "path": path})
        assert str(ours.value) == str(theirs.value.content).replace(path, repr(path)) + rule
        assert "\x1b" not in str(ours.value)


def test_deviation_dot_segments_that_stay_inside(pair: tuple[BetaLocalFilesystemMemoryTool, EncryptedMemory]) -> None:
    reference, memory = pair
    # The reference resolves these inside /memories and accepts them; ours refuses every
    # "." and ".." segment (the documentation: refuse "../" and other traversal patterns).
    assert reference.call({"command": "create", "path": "/memories/d/../a", "file_text": "t"}).startswith(
        "File created"
    )
    assert reference.call({"command": "create", "path": "/memories/./b", "file_text": "t"}).startswith("File created")
    assert sorted(p.name for p in reference.memory_root.iterdir()) == ["a", "b"]
    with pytest.raises(InvalidPathError) as ours:
        memory.execute({"command": "create", "path": "/memories/d/../a", "file_text": "t"})
    assert str(ours.value) == "Path /memories/d/../a would escape /memories directory" + ESCAPE_RULE
    with pytest.raises(InvalidPathError, match=r"'\.' segments are not allowed"):
        memory.execute({"command": "create", "path": "/memories/./b", "file_text": "t"})
    assert _our_files(memory) == []


def test_deviation_look_alike_names(pair: tuple[BetaLocalFilesystemMemoryTool, EncryptedMemory]) -> None:
    reference, memory = pair
    # The reference creates a file whose name displays as a path inside projects/ (and one
    # that displays as notes.md); ours refuses both.
    for path in ("/memories/projects\u2215plan.md", "/memories/notes\uff0emd"):
        assert reference.call({"command": "create", "path": path, "file_text": "t"}).startswith("File created")
        with pytest.raises(InvalidPathError, match=r"look-alikes of '/', '\\' and '\.' are not allowed"):
            memory.execute({"command": "create", "path": path, "file_text": "t"})
    assert sorted(p.name for p in reference.memory_root.iterdir()) == ["notes\uff0emd", "projects\u2215plan.md"]
    assert _our_files(memory) == []
