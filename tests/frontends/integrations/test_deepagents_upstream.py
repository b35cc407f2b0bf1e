"""deepagents' own backend tests, as behaviours of ``S3MemoryBackend``.

deepagents' sdist has no tests, so its backend tests (``libs/deepagents/tests/unit_tests/
backends/``: ``test_store_backend*.py``, ``test_composite_backend*.py``,
``test_glob_semantics.py``) were run ad hoc against ``S3MemoryBackend`` in place of
``StoreBackend`` (docs/guides/deepagents.md gives the numbers and each failure's reason).
This module asserts the same behaviours with our own code, each test naming the upstream
tests it mirrors. Most are differential: the same calls on deepagents' ``StoreBackend`` (on
a LangGraph ``InMemoryStore``) and on ours, whose answers must be equal, error strings
included; so a deepagents release that changes its words fails here. What differs on purpose
is asserted beside StoreBackend's answer in ``test_documented_differences``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any, TypedDict

import pytest
from helpers import BUCKET, MASTER_KEY

pytest.importorskip("deepagents")

from deepagents.backends import CompositeBackend, StoreBackend
from deepagents.backends.protocol import BackendProtocol
from langgraph.graph import END, START, StateGraph
from langgraph.store.memory import InMemoryStore as GraphStore

from s3memory import ConfigurationError, InMemoryStore, KeyCache, NoUserError, open_memory
from s3memory.integrations.deepagents import S3MemoryBackend, deep_agent_backend

#: Files both backends start with (dot directories: the glob contract's dot rules).
FILES = {
    "/notes.md": "tea: green\nmilk: no\nsugar: no\n",
    "/docs/readme.md": "hello store\n",
    "/docs/sub/deep.md": "deep (nested)\n",
    "/code.py": "def __init__(self):\n    x = a^2 * y  # api.key [a-z]\n",
    "/foo.txt": "foo bar foo baz",
    "/ab.txt": "ab ab",
    "/.hidden/x.py": "x\n",
    "/.github/workflows/ci.yml": "name: ci\n",
}


def theirs() -> StoreBackend:
    return StoreBackend(store=GraphStore(), namespace=lambda _runtime: ("filesystem",))


def ours() -> S3MemoryBackend:
    return S3MemoryBackend(
        open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())
    )


def filled(backend: BackendProtocol, files: dict[str, str] = FILES) -> BackendProtocol:
    for path, text in files.items():
        assert backend.write(path, text).error is None
    return backend


def shape(result: Any) -> Any:
    """A result as both backends can agree on it: without timestamps (s3memory keeps none it
    could show), a directory entry as its path alone."""
    if isinstance(result, (list, tuple)):
        return [shape(item) for item in result]
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        fields = {field.name: shape(getattr(result, field.name)) for field in dataclasses.fields(result)}
        if fields.get("matches"):  # StoreBackend's order is its store's (grep) or newest first (glob)
            fields["matches"] = sorted(fields["matches"], key=lambda match: (match["path"], match.get("line", 0)))
        return fields
    if isinstance(result, dict):
        if result.get("is_dir"):
            return {"path": result["path"], "is_dir": True}
        return {key: shape(value) for key, value in result.items() if key not in ("modified_at", "created_at")}
    return result


Call = Callable[[Any], Any]


def capped(result: Any) -> tuple[int, bool]:
    """How many matches a capped grep kept, and whether it says so (which ones: the order)."""
    return len(result.matches), result.truncated


#: (id, the upstream tests it mirrors, the calls). Each runs on a fresh pair filled with FILES.
CASES: list[tuple[str, str, Call]] = [
    # read
    ("read-missing", "test_store_backend_async_errors", lambda b: b.read("/nope.md")),
    ("read-directory", "test_composite_backend_ls_nested_directories", lambda b: b.read("/docs")),
    ("read", "test_store_backend_crud_and_search", lambda b: b.read("/docs/readme.md")),
    ("read-window", "test_store_backend_read_surfaces_pagination_metadata", lambda b: b.read("/notes.md", 1, 2)),
    (
        "read-limit-0",
        "test_store_backend_read_non_positive_limit_returns_empty_read",
        lambda b: b.read("/notes.md", 0, 0),
    ),
    (
        "read-limit-<0",
        "test_store_backend_read_non_positive_limit_returns_empty_read",
        lambda b: b.read("/notes.md", 0, -3),
    ),
    (
        "read-offset-<0",
        "test_store_backend_read_negative_offset_starts_at_first_line",
        lambda b: b.read("/notes.md", -1, 2),
    ),
    ("read-past-end", "test_store_backend_aread_with_offset_and_limit", lambda b: b.read("/notes.md", 10, 5)),
    # write
    ("write-new", "test_store_backend_crud_and_search", lambda b: (b.write("/new/a.md", "x"), b.read("/new/a.md"))),
    (
        "write-over",
        "test_store_backend_write_overwrites_existing_file",
        lambda b: (b.write("/foo.txt", "new"), b.read("/foo.txt")),
    ),
    # edit: every refusal in deepagents' words
    ("edit-missing", "test_store_backend_async_errors", lambda b: b.edit("/nope.md", "a", "b")),
    ("edit-directory", "test_store_backend_async_errors", lambda b: b.edit("/docs", "a", "b")),
    (
        "edit-repeated",
        "test_store_backend_aedit_replace_all",
        lambda b: (b.edit("/foo.txt", "foo", "qux"), b.read("/foo.txt")),
    ),
    (
        "edit-all",
        "test_store_backend_aedit_replace_all",
        lambda b: (b.edit("/foo.txt", "foo", "q", True), b.read("/foo.txt")),
    ),
    (
        "edit-unique",
        "test_store_backend_aedit_replace_all",
        lambda b: (b.edit("/foo.txt", "bar", "xyz"), b.read("/foo.txt")),
    ),
    ("edit-absent", "test_store_backend_crud_and_search", lambda b: b.edit("/notes.md", "coffee", "tea")),
    ("edit-all-absent", "test_store_backend_aedit_replace_all", lambda b: b.edit("/notes.md", "coffee", "tea", True)),
    ("edit-empty", "test_store_backend_crud_and_search", lambda b: b.edit("/notes.md", "", "x")),
    ("edit-eof-newline", "test_store_backend_crud_and_search", lambda b: b.edit("/foo.txt", "baz\n", "q")),
    ("edit-eof-newline-repeated", "test_store_backend_crud_and_search", lambda b: b.edit("/ab.txt", "ab\n", "q")),
    # delete
    ("delete", "test_store_backend_delete", lambda b: (b.delete("/notes.md"), b.read("/notes.md"))),
    ("delete-directory", "test_store_backend_delete_directory_recursive", lambda b: (b.delete("/docs"), b.ls("/"))),
    ("delete-missing", "test_store_backend_delete_missing_returns_error", lambda b: b.delete("/nope.md")),
    ("delete-twice", "test_store_backend_adelete", lambda b: (b.delete("/foo.txt"), b.delete("/foo.txt"))),
    (
        "delete-wildcard",
        "test_store_backend_delete_wildcard_missing_does_not_match_files",
        lambda b: (b.delete("/*"), b.ls("/")),
    ),
    # ls
    ("ls-root", "test_store_backend_ls_nested_directories", lambda b: b.ls("/")),
    ("ls-dir", "test_store_backend_ls_nested_directories", lambda b: b.ls("/docs")),
    ("ls-slash", "test_store_backend_ls_trailing_slash", lambda b: b.ls("/docs/")),
    ("ls-missing", "test_store_backend_ls_nested_directories", lambda b: b.ls("/nowhere")),
    # grep: literal, by path, by glob, capped
    *(
        (f"grep-{pattern}", "test_store_backend_grep_literal_search_special_chars", lambda b, p=pattern: b.grep(p, "/"))
        for pattern in ("def __init__(", "a^2", "x * y", "api.key", "[a-z]", "[invalid", "no such text")
    ),
    ("grep-path", "test_store_backend_crud_and_search", lambda b: b.grep("e", "/docs")),
    ("grep-glob", "test_store_backend_agrep_with_glob", lambda b: b.grep("e", "/", glob="*.md")),
    ("grep-missing-path", "test_composite_grep_empty_results", lambda b: b.grep("e", "/nowhere")),
    ("grep-capped", "test_grep_max_count_enforced_across_routes", lambda b: capped(b.grep("o", "/", max_count=2))),
    # glob: the shared contract (bare patterns at any depth, `**`, anchoring, dot rules, braces)
    *(
        (f"glob-{pattern}@{path}", "TestStoreBackendGlobMatrix::test_matrix", lambda b, p=pattern, q=path: b.glob(p, q))
        for pattern, path in [
            ("*.py", "/"),
            ("**/*.py", "/"),
            ("*.md", "/"),
            ("docs/*.md", "/"),
            ("docs/**/*.md", "/"),
            ("/*.md", "/"),
            ("*.yml", "/"),
            ("**/*.yml", "/"),
            (".github/**/*.yml", "/"),
            (".*", "/"),
            ("*", "/"),
            ("*.md", "/docs"),
            ("notes.md/**", "/"),
            ("*.{md,py}", "/"),
            ("../*.md", "/"),
            ("*.md", "/nowhere"),
        ]
    ),
    # download and upload
    ("download", "test_store_backend_aupload_adownload", lambda b: b.download_files(["/notes.md", "/nope.md"])),
    (
        "upload",
        "test_store_backend_aupload_adownload",
        lambda b: (b.upload_files([("/up/a.txt", b"Binary content 1"), ("/up/b.bin", b"2")]), b.read("/up/b.bin")),
    ),
    # the a* methods
    ("aread-missing", "test_store_backend_async_errors", lambda b: asyncio.run(b.aread("/nope.md"))),
    ("aedit-missing", "test_store_backend_async_errors", lambda b: asyncio.run(b.aedit("/nope.md", "a", "b"))),
    ("aedit-repeated", "test_store_backend_aedit_replace_all", lambda b: asyncio.run(b.aedit("/foo.txt", "foo", "q"))),
    ("adelete-missing", "test_store_backend_adelete", lambda b: asyncio.run(b.adelete("/nope.md"))),
    ("als", "test_store_backend_als_nested_directories", lambda b: asyncio.run(b.als("/docs/"))),
    ("aglob", "test_store_backend_aglob_patterns", lambda b: asyncio.run(b.aglob("**/*.md", "/"))),
    ("agrep", "test_store_backend_agrep_invalid_regex", lambda b: asyncio.run(b.agrep("[invalid", "/"))),
]


@pytest.mark.parametrize(("mirrors", "calls"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_answers_as_store_backend(mirrors: str, calls: Call) -> None:
    """The same calls, the same answers (errors word for word) as deepagents' StoreBackend."""
    expected = shape(calls(filled(theirs())))
    assert shape(calls(filled(ours()))) == expected, mirrors


def test_error_strings_are_deepagents_own() -> None:
    """Each error the model can meet in deepagents' words, spelled out (the differential test
    above proves them equal to StoreBackend's; this one shows them)."""
    backend = filled(ours())
    assert backend.read("/nope.md").error == "File '/nope.md' not found"  # read_file adds "Error: "
    assert backend.read("/docs").error == "File '/docs' not found"
    assert backend.edit("/nope.md", "a", "b").error == "Error: File '/nope.md' not found"
    assert backend.edit("/foo.txt", "foo", "q").error == (
        "Error: String 'foo' appears 2 times in file. Use replace_all=True to replace all instances, "
        "or provide a more specific string with surrounding context."
    )
    assert backend.edit("/notes.md", "coffee", "x").error == "Error: String not found in file: 'coffee'"
    assert backend.edit("/notes.md", "", "x").error == (
        "Error: old_string cannot be empty. Provide the exact text to replace."
    )
    assert backend.edit("/foo.txt", "baz\n", "q").error == (
        "Error: old_string ends with a newline, but the file does not end with a newline. Retry with the "
        "trailing newline removed from old_string (and from new_string if it also ends with a newline)."
    )
    assert backend.delete("/nope.md").error == "Error: File '/nope.md' not found"
    assert backend.glob("../*.md", "/").error == "Path traversal not allowed in glob pattern '../*.md'"
    assert backend.download_files(["/nope.md"])[0].error == "file_not_found"
    # under deep_agent_backend's route the path is the backend's, as for StoreBackend there
    routed = deep_agent_backend(ours().memory, default=theirs())
    assert routed.read("/memories/nope.md").error == "File '/nope.md' not found"
    assert routed.delete("/memories/ghost.txt").error == "Error: File '/ghost.txt' not found"


COMPOSITE_FILES = {"/memories/notes.md": "tea\n", "/memories/docs/a.md": "alpha\n", "/scratch.md": "tea draft\n"}

#: (id, the upstream tests it mirrors, the calls) on a CompositeBackend routing /memories/.
COMPOSITE_CASES: list[tuple[str, str, Call]] = [
    ("ls-root", "test_composite_state_backend_routes_and_search", lambda b: b.ls("/")),
    ("ls-route", "test_composite_backend_ls_nested_directories", lambda b: b.ls("/memories")),
    ("ls-route-slash", "test_composite_backend_ls_trailing_slash", lambda b: b.ls("/memories/")),
    ("read-missing", "test_composite_backend_store_to_store", lambda b: b.read("/memories/nope.md")),
    ("write-path", "test_write_result_path_restored_to_full_routed_path", lambda b: b.write("/memories/w.md", "w")),
    (
        "edit-path",
        "test_edit_result_path_restored_to_full_routed_path",
        lambda b: b.edit("/memories/notes.md", "tea", "x"),
    ),
    ("edit-missing", "test_composite_backend_store_to_store", lambda b: b.edit("/memories/nope.md", "a", "b")),
    ("delete-missing", "test_composite_delete_missing_returns_error", lambda b: b.delete("/memories/ghost.txt")),
    (
        "adelete-missing",
        "test_composite_adelete_missing_returns_error",
        lambda b: asyncio.run(b.adelete("/memories/g")),
    ),
    (
        "delete-dir",
        "test_composite_delete_directory_recurses_within_route",
        lambda b: (b.delete("/memories/docs"), b.ls("/")),
    ),
    ("grep-root", "test_composite_grep_with_path_none", lambda b: b.grep("tea")),
    ("grep-route", "test_composite_grep_targeting_specific_route", lambda b: b.grep("a", "/memories")),
    ("grep-nested", "test_composite_grep_nested_path_in_route", lambda b: b.grep("alpha", "/memories/docs")),
    ("grep-glob", "test_composite_grep_with_glob_in_specific_route", lambda b: b.grep("a", "/memories", glob="*.md")),
    ("glob-root", "test_composite_backend_glob_path_isolation", lambda b: b.glob("**/*.md", "/")),
    ("glob-anchored", "test_composite_root_glob_preserves_route_pattern_anchoring", lambda b: b.glob("/*.md", "/")),
    ("glob-route-pattern", "test_composite_glob_targeting_specific_route", lambda b: b.glob("/memories/**/*.md", "/")),
    ("glob-nested", "test_composite_glob_nested_path_in_route", lambda b: b.glob("*.md", "/memories/docs")),
    ("download", "test_composite_download_routing", lambda b: b.download_files(["/memories/notes.md", "/memories/x"])),
    (
        "upload",
        "test_composite_upload_routing",
        lambda b: (b.upload_files([("/memories/u.md", b"u")]), b.ls("/memories")),
    ),
]


@pytest.mark.parametrize(("mirrors", "calls"), [c[1:] for c in COMPOSITE_CASES], ids=[c[0] for c in COMPOSITE_CASES])
def test_routed_answers_as_store_backend(mirrors: str, calls: Call) -> None:
    """deep_agent_backend (S3MemoryBackend at /memories/) answers as a CompositeBackend with a
    StoreBackend there; the default backend is a StoreBackend in both."""
    reference = CompositeBackend(default=theirs(), routes={"/memories/": theirs()})
    expected = shape(calls(filled(reference, COMPOSITE_FILES)))
    assert shape(calls(filled(deep_agent_backend(ours().memory, default=theirs()), COMPOSITE_FILES))) == expected, (
        mirrors
    )


def test_documented_differences() -> None:
    """What S3MemoryBackend answers otherwise on purpose (docs/guides/deepagents.md), beside
    StoreBackend's answer."""
    store, backend = filled(theirs()), filled(ours())
    # no timestamps (s3memory's listing has sizes, not times), so glob sorts by path, not newest first
    files_and_directories = [["is_dir", "path", "size"], ["is_dir", "path"]]
    assert [sorted(entry) for entry in backend.ls("/docs").entries or []] == files_and_directories
    assert [sorted(entry) for entry in store.ls("/docs").entries or []] == [
        ["is_dir", "modified_at", "path", "size"]
    ] * 2
    assert [m["path"] for m in backend.glob("*.md", "/docs").matches or []] == ["/docs/readme.md", "/docs/sub/deep.md"]
    # ls of a file: FilesystemBackend's not_a_directory, where StoreBackend lists nothing
    assert (store.ls("/notes.md").entries, backend.ls("/notes.md").error) == ([], "Path '/notes.md': not_a_directory")
    # download of a directory: the protocol's is_directory, where StoreBackend finds no key
    assert [r.error for r in (store.download_files(["/docs"])[0], backend.download_files(["/docs"])[0])] == [
        "file_not_found",
        "is_directory",
    ]
    # the root is not deleted (StoreBackend deletes every file)
    assert backend.delete("/").error == "Error: Cannot delete the /memories directory itself"
    assert (store.delete("/").error, store.ls("/").entries) == (None, [])
    # files are text: a name deepagents reads as binary, and bytes that are not UTF-8, are refused
    # (mirrors test_store_backend_reads_mkv_as_binary_without_slicing, which fails here)
    assert backend.write("/clip.mkv", "x").error == (
        "Error: /memories/clip.mkv: memory files are text, and a file named *.mkv would be read as binary; "
        "name it .md or .txt (the memory tool can rename it)"
    )
    assert backend.upload_files([("/raw.txt", b"\xff\xfe")])[0].error == "permission_denied"
    assert store.upload_files([("/raw.txt", b"\xff\xfe")])[0].error is None  # stored as base64


# -- per-run users, where StoreBackend has per-run namespaces -----------------------------------


class State(TypedDict, total=False):
    text: str


def graph_calling(backend: BackendProtocol, step: Callable[[BackendProtocol], str]) -> Any:
    """A one-node LangGraph graph whose node calls the backend (as deepagents' tools do)."""

    def node(state: State) -> State:
        return {"text": step(backend)}

    return StateGraph(State).add_node("node", node).add_edge(START, "node").add_edge("node", END).compile()


def many_users() -> tuple[S3MemoryBackend, InMemoryStore]:
    store = InMemoryStore()
    return S3MemoryBackend(store=store, master_key=MASTER_KEY, key_cache=KeyCache()), store


def test_users_of_runs_are_isolated() -> None:
    """Mirrors test_store_backend_namespace_isolation, _namespace_user_scoped and
    _namespace_with_context: one backend, each run's user from its context, each user's files
    apart (StoreBackend: one namespace per user from its factory)."""
    backend, store = many_users()
    write = graph_calling(backend, lambda b: str(b.write("/notes.txt", "notes").path))
    read = graph_calling(backend, lambda b: str(b.read("/notes.txt").error or b.read("/notes.txt").file_data))
    write.invoke({}, context={"user_id": "alice"})
    assert read.invoke({}, context={"user_id": "alice"})["text"] == "{'content': 'notes', 'encoding': 'utf-8'}"
    assert read.invoke({}, context={"user_id": "bob"})["text"] == "File '/notes.txt' not found"
    alice = open_memory(user_id="alice", store=store, master_key=MASTER_KEY)
    assert [f.path for f in alice.list_files()] == ["/memories/notes.txt"]


def test_no_user_outside_a_run() -> None:
    """Mirrors test_store_backend_runtime_reading_factory_outside_graph: outside a graph run
    the backend of many users has no user (StoreBackend: a RuntimeError from its factory)."""
    backend, _ = many_users()
    with pytest.raises(NoUserError):
        backend.ls("/")
    with pytest.raises(NoUserError):
        asyncio.run(backend.aread("/x.md"))
    with pytest.raises(NoUserError):
        graph_calling(backend, lambda b: str(b.ls("/").entries)).invoke({})
    # deep_agent_backend's refusal of other spellings of /memories/ needs no user (no backend is touched)
    routed = deep_agent_backend(store=InMemoryStore(), master_key=MASTER_KEY)
    with pytest.raises(NoUserError):
        routed.write("/memories/x.md", "x")
    assert routed.write("//memories/x.md", "x").error == (
        "Error: invalid_path: '//memories/x.md' is '/memories/x.md' written another way; use '/memories/x.md'"
    )


def test_users_of_runs_on_s3_are_apart(s3_client: Any) -> None:
    """As test_store_backend_namespace_isolation, on S3 (moto): bucket= and no user, one store
    (one client) for every user, each user's objects under its own prefix."""
    backend = S3MemoryBackend(bucket=BUCKET, s3_client=s3_client, master_key=MASTER_KEY)
    write = graph_calling(backend, lambda b: str(b.write("/todo.md", "- call Bob\n").path))
    write.invoke({}, context={"user_id": "alice"})
    write.invoke({}, context={"user_id": "bob"})
    keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket=BUCKET)["Contents"]]
    assert {key.split("/", 1)[0] for key in keys} == {"alice", "bob"}
    alice = open_memory(user_id="alice", bucket=BUCKET, s3_client=s3_client, master_key=MASTER_KEY)
    assert alice.read_text("/memories/todo.md") == "- call Bob\n"


def test_a_user_id_that_is_no_tenant_is_refused() -> None:
    """Mirrors test_store_backend_rejects_wildcard_namespace: a user id with characters no
    key may hold is refused, to the caller (StoreBackend: ValueError for its namespace)."""
    backend, _ = many_users()
    with pytest.raises(ConfigurationError, match="is not allowed"):
        graph_calling(backend, lambda b: str(b.ls("/").entries)).invoke({}, context={"user_id": "*"})


def test_a_failing_user_id_from_propagates() -> None:
    """Mirrors test_store_backend_namespace_error_handling: what the hook raises reaches the caller."""

    def no_user(runtime: Any) -> str:
        raise KeyError("tenant")

    backend = S3MemoryBackend(store=InMemoryStore(), master_key=MASTER_KEY, user_id_from=no_user)
    with pytest.raises(KeyError, match="tenant"):
        graph_calling(backend, lambda b: str(b.ls("/").entries)).invoke({}, context={"user_id": "alice"})
