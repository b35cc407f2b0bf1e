"""Encrypted names (``open_memory(encrypt_names=True)``): the bucket's keys show no file
names, and the six commands answer exactly as they do with names in clear.

- the same script of commands gives identical answers with and without encrypted names, on
  every flavour, and a fresh process (empty key cache) reads everything back;
- no key in the store contains a name; every key fits in 1,024 bytes; too-long paths are
  refused before any request, with a message saying why;
- a segment is bound to its tenant and parent: equal names seal differently elsewhere, a
  key moved to another directory or tenant, or tampered with, is no file at all;
- the names key is created once, by a write or the first path-naming command, and
  concurrent first writers agree on it; it is never created over existing files;
- property: for random valid paths, the key opens to the same path and lies below the key
  prefix of every ancestor directory (hypothesis, 300 + 200 examples).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from helpers import BUCKET, MASTER_KEY, examples
from helpers.meter import Meter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from s3memory import (
    ConfigurationError,
    EncryptedMemory,
    InMemoryStore,
    InvalidPathError,
    KeyCache,
    MemoryPath,
    PathNotFoundError,
    S3MemoryError,
    TenantKeyError,
    open_memory,
    parse_path,
)
from s3memory._crypto.names import MAX_NAME_BYTES, sealed_segment_length
from s3memory._layout import NAMES_KEY as NAMES_KEY_OBJECT
from s3memory._paths import MAX_S3_KEY_BYTES

FLAVOURS = ["inmemory", "localdir", "s3-tenant-local", "s3-tenant-kms", "s3-kms", "rgw"]
NAMES_KEY = f"alice/.s3memory/{NAMES_KEY_OBJECT}"

# (command, arguments): creates, views of the root, directories and files, edits, renames of
# a file and of directories, deletes, and the errors each command can answer with.
SCRIPT: list[tuple[str, tuple[Any, ...]]] = [
    ("view", ("/memories",)),
    ("view", ("/memories/projects",)),
    ("create", ("/memories/projects/alpha-dir/notes.md", "line one\nline two\nline three\n")),
    ("create", ("/memories/projects/alpha-dir/todo-list.txt", "buy milk\n")),
    ("create", ("/memories/projects/beta-dir/specification.md", "spec " * 100)),
    ("create", ("/memories/projects/beta-dir/deeper/nested/leaf-file.md", "leaf")),
    ("create", ("/memories/journal/2025-01-01.md", "hello")),
    ("create", ("/memories/café/日本語メモ.md", "unicode")),
    ("create", ("/memories/.hidden/secret-file.md", "hidden")),
    ("create", ("/memories/node_modules/package.js", "js")),
    ("create", ("/memories/top-level.md", "x" * 1500)),
    ("view", ("/memories",)),
    ("view", ("/memories/projects",)),
    ("view", ("/memories/projects/",)),
    ("view", ("/memories/projects/beta-dir/deeper",)),
    ("view", ("/memories/projects/alpha-dir/notes.md",)),
    ("view", ("/memories/projects/alpha-dir/notes.md", [2, 3])),
    ("view", ("/memories/café/日本語メモ.md",)),
    ("view", ("/memories/nonexistent",)),
    ("view", ("/memories/nonexistent/",)),
    ("create", ("/memories/projects/alpha-dir/notes.md", "again")),
    ("create", ("/memories/projects/alpha-dir", "a directory")),
    ("create", ("/memories/projects/alpha-dir/notes.md/child.md", "under a file")),
    ("str_replace", ("/memories/projects/alpha-dir/notes.md", "line two", "line 2")),
    ("str_replace", ("/memories/projects/alpha-dir/notes.md", "absent", "x")),
    ("str_replace", ("/memories/projects/missing.md", "a", "b")),
    ("insert", ("/memories/projects/alpha-dir/todo-list.txt", 0, "# todo")),
    ("insert", ("/memories/projects/alpha-dir/todo-list.txt", 99, "x")),
    ("insert", ("/memories/projects/missing.md", 0, "x")),
    ("view", ("/memories/projects/alpha-dir/todo-list.txt",)),
    ("rename", ("/memories/projects/alpha-dir/todo-list.txt", "/memories/projects/beta-dir/moved-todo.txt")),
    ("rename", ("/memories/projects/beta-dir", "/memories/archive/old-beta")),
    ("rename", ("/memories/projects", "/memories/work-stuff")),
    ("rename", ("/memories/journal", "/memories/work-stuff")),
    ("rename", ("/memories/missing-dir", "/memories/elsewhere")),
    ("rename", ("/memories/top-level.md", "/memories/archive/old-beta/specification.md/x")),
    ("view", ("/memories",)),
    ("view", ("/memories/archive/old-beta",)),
    ("view", ("/memories/archive/old-beta/moved-todo.txt",)),
    ("view", ("/memories/archive/old-beta/deeper/nested/leaf-file.md",)),
    ("view", ("/memories/work-stuff/alpha-dir/notes.md",)),
    ("view", ("/memories/projects/alpha-dir/notes.md",)),
    ("delete", ("/memories/archive/old-beta/deeper",)),
    ("delete", ("/memories/journal",)),
    ("delete", ("/memories/journal",)),
    ("delete", ("/memories/work-stuff/alpha-dir/notes.md",)),
    ("view", ("/memories",)),
]
# Every name the script uses: none may appear in any key of the store.
NAMES = sorted(
    {
        part
        for _, args in SCRIPT
        for arg in args
        if isinstance(arg, str) and arg.startswith("/memories/")
        for part in parse_path(arg).parts
    }
    - {"x"}
)


def run_script(memory: EncryptedMemory) -> list[str]:
    answers = []
    for command, args in SCRIPT:
        try:
            answers.append(getattr(memory, command)(*args))
        except S3MemoryError as error:
            answers.append(f"{type(error).__name__}: {error}")
    return answers


def all_keys(memory: EncryptedMemory) -> list[str]:
    return sorted(info.key for info in memory.store.list(""))


def reference_answers() -> list[str]:
    return run_script(open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache()))


@pytest.fixture(scope="module")
def expected() -> list[str]:
    return reference_answers()


# -- the commands ------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_six_commands_answer_as_without_encrypted_names(
    make_memory: Callable[..., EncryptedMemory], flavour: str, expected: list[str]
) -> None:
    memory = make_memory(flavour, encrypt_names=True)
    assert run_script(memory) == expected
    # Every kind of answer was exercised, errors included.
    assert any("Successfully renamed /memories/projects/beta-dir" in a for a in expected)
    assert any(a.startswith("PathExistsError") for a in expected)
    assert any(a.startswith("NotADirectoryConflict") for a in expected)

    keys = all_keys(memory)
    assert NAMES_KEY in keys
    for key in keys:
        assert len(key.encode("utf-8")) <= MAX_S3_KEY_BYTES
        for name in NAMES:
            assert name not in key, (name, key)

    # A fresh process (nothing cached) on the same store reads everything back.
    fresh = make_memory(flavour, encrypt_names=True)
    reference = open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())
    run_script(reference)
    assert fresh.list_files() == reference.list_files()
    for entry in reference.list_files():
        assert fresh.read_text(entry.path) == reference.read_text(entry.path)
    assert fresh.view("/memories") == reference.view("/memories")


@pytest.mark.parametrize("flavour", ["inmemory", "localdir", "s3-tenant-local"])
def test_keys_are_sealed_segment_by_segment(make_memory: Callable[..., EncryptedMemory], flavour: str) -> None:
    memory = make_memory(flavour, encrypt_names=True)
    memory.create("/memories/projects/alpha-dir/notes.md", "x")
    (key,) = (k for k in all_keys(memory) if k.startswith("alice/memories/"))
    segments = key.removeprefix("alice/memories/").split("/")
    assert [len(s) for s in segments] == [sealed_segment_length(len(n)) for n in ("projects", "alpha-dir", "notes.md")]
    assert all(set(s) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") for s in segments)
    # A directory is the key prefix of its subtree, and only of its subtree.
    layout = memory.layout
    assert key.startswith(layout.dir_prefix(MemoryPath("projects/alpha-dir")))
    assert key.startswith(layout.dir_prefix(MemoryPath("projects")))
    assert not key.startswith(layout.dir_prefix(MemoryPath("projects/alpha-dirbet")))
    assert layout.dir_prefix(MemoryPath("")) == "alice/memories/"
    assert layout.path_for_key(key) == MemoryPath("projects/alpha-dir/notes.md")


def test_plain_layout_is_unchanged(make_memory: Callable[..., EncryptedMemory]) -> None:
    memory = make_memory("inmemory")
    assert memory.layout.names is None
    memory.create("/memories/a/b.md", "x")
    internal = [key for key in all_keys(memory) if memory.layout.is_history_record(key)]
    assert len(internal) == 1  # the creation's history record (the store keeps versions)
    assert [key for key in all_keys(memory) if key not in internal] == [
        "alice/.s3memory/history-key",
        "alice/.s3memory/tenant-key",
        "alice/memories/a/b.md",
    ]


# -- binding: tenant and parent ------------------------------------------------------------


def test_equal_names_seal_differently_under_other_parents_and_tenants(
    make_memory: Callable[..., EncryptedMemory],
) -> None:
    alice = with_names_key(make_memory("inmemory", encrypt_names=True))
    bob = with_names_key(make_memory("inmemory", user_id="bob", encrypt_names=True))
    in_a = alice.layout.key_for(MemoryPath("a/notes.md")).split("/")
    in_b = alice.layout.key_for(MemoryPath("b/notes.md")).split("/")
    at_top = alice.layout.key_for(MemoryPath("notes.md")).split("/")
    assert in_a[-1] != in_b[-1] and in_a[-1] != at_top[-1] and in_b[-1] != at_top[-1]
    bobs = bob.layout.key_for(MemoryPath("a/notes.md")).split("/")
    assert set(bobs[2:]).isdisjoint(in_a[2:])
    # Deterministic: the same name under the same parent, from another process, seals the same.
    again = make_memory("inmemory", encrypt_names=True)
    assert again.layout.key_for(MemoryPath("a/notes.md")).split("/") == in_a


@pytest.mark.parametrize("flavour", ["inmemory", "localdir", "s3-tenant-local", "s3-kms"])
def test_a_key_moved_to_another_directory_or_tenant_is_no_file(
    make_memory: Callable[..., EncryptedMemory], flavour: str
) -> None:
    alice = make_memory(flavour, encrypt_names=True)
    alice.create("/memories/a/secret.md", "secret")
    alice.create("/memories/b/other.md", "other")
    before_b = alice.view("/memories/b")
    secret_key = alice.layout.key_for(MemoryPath("a/secret.md"))
    stored = alice.store.get(secret_key)
    assert stored is not None

    # Into another directory of the same tenant, under its own sealed name.
    moved = alice.layout.dir_prefix(MemoryPath("b")) + secret_key.rsplit("/", 1)[1]
    alice.store.put(moved, stored.body, stored.metadata)
    assert alice.layout.path_for_key(moved) is None
    assert alice.view("/memories/b") == before_b
    assert [e.path for e in alice.list_files()] == ["/memories/a/secret.md", "/memories/b/other.md"]
    with pytest.raises(PathNotFoundError):
        alice.view("/memories/b/secret.md")

    # Into another tenant, segments unchanged.
    bob = make_memory(flavour, user_id="bob", encrypt_names=True)
    bob.create("/memories/mine.md", "bob's")
    copied = "bob/" + secret_key.removeprefix("alice/")
    bob.store.put(copied, stored.body, stored.metadata)
    assert bob.layout.path_for_key(copied) is None
    assert [e.path for e in bob.list_files()] == ["/memories/mine.md"]

    # Tampered: one character of a segment changed, or segments swapped.
    prefix, last = secret_key.rsplit("/", 1)
    tampered = prefix + "/" + ("B" if last[0] == "A" else "A") + last[1:]
    assert alice.layout.path_for_key(tampered) is None
    first, second = secret_key.removeprefix("alice/memories/").split("/")
    assert alice.layout.path_for_key(f"alice/memories/{second}/{first}") is None
    # Keys that are not sealed segments at all.
    for foreign in ["alice/memories/a/secret.md", "alice/memories/" + "A" * 43]:
        alice.store.put(foreign, stored.body, stored.metadata)
        assert alice.layout.path_for_key(foreign) is None
    assert alice.layout.path_for_key(f"alice/memories/{first}/") is None
    assert alice.layout.path_for_key("alice/memories/") is None
    assert [e.path for e in alice.list_files()] == ["/memories/a/secret.md", "/memories/b/other.md"]


def test_a_non_canonical_spelling_of_a_segment_is_no_file(make_memory: Callable[..., EncryptedMemory]) -> None:
    memory = with_names_key(make_memory("inmemory", encrypt_names=True))
    key = memory.layout.key_for(MemoryPath("notes.md"))
    segment = key.rsplit("/", 1)[1]
    assert len(segment) == 43  # 32 bytes: the last character carries 4 bits, then 2 zero bits
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    stray = alphabet[alphabet.index(segment[-1]) ^ 1]  # a stray low bit: decodes to the same bytes
    assert memory.layout.path_for_key(key[:-1] + stray) is None
    assert memory.layout.path_for_key(key + "=") is None
    # The standard alphabet's "+" for "-" decodes to the same bytes too.
    names = (f"n{i}.md" for i in range(1000))
    dashed = next(k for k in (memory.layout.key_for(MemoryPath(n)) for n in names) if "-" in k.rsplit("/", 1)[1])
    assert memory.layout.path_for_key(dashed.replace("-", "+")) is None
    assert memory.layout.path_for_key(dashed) is not None


# -- limits ----------------------------------------------------------------------------------


def test_segment_length_arithmetic() -> None:
    assert [sealed_segment_length(n) for n in (0, 1, 15, 16, 31, 32, 47, 48, 159)] == [
        43,
        43,
        43,
        64,
        64,
        86,
        86,
        107,
        235,
    ]
    assert MAX_NAME_BYTES == 159
    assert sealed_segment_length(160) == 256  # one more byte and a segment is no longer a file name


def test_too_long_paths_are_refused_with_a_clear_error(make_memory: Callable[..., EncryptedMemory]) -> None:
    plain = make_memory("inmemory")
    memory = make_memory("localdir", encrypt_names=True)
    # 23 levels of one-letter names: 45 bytes in clear, 23 * 44 - 1 + 15 = 1,026 bytes sealed.
    deep = "/memories/" + "/".join("d" * 23)
    plain.create(deep, "fits in clear")
    with pytest.raises(InvalidPathError) as info:
        memory.create(deep, "too long sealed")
    message = str(info.value)
    assert message.startswith("Error: Invalid path") and "once its names are encrypted" in message
    assert "1,026 bytes, at most 1,024" in message
    for call in (
        lambda: memory.view(deep),
        lambda: memory.view(deep + "/"),
        lambda: memory.str_replace(deep, "a", "b"),
        lambda: memory.insert(deep, 0, "x"),
        lambda: memory.delete(deep),
        lambda: memory.rename("/memories/x", deep),
    ):
        with pytest.raises(InvalidPathError):
            call()
    # 22 levels fit.
    fits = "/memories/" + "/".join("d" * 22)
    memory.create(fits, "fits")
    assert memory.view(fits).endswith("\tfits")
    assert len(memory.layout.key_for(parse_path(fits)).encode()) == 22 * 44 - 1 + len("alice/memories/")

    # A name over 159 bytes (fine in clear, up to 255).
    long_name = "/memories/" + "n" * 160
    plain.create(long_name, "fits in clear")
    with pytest.raises(InvalidPathError) as info:
        memory.create(long_name, "x")
    assert "longer than 159 bytes" in str(info.value)
    memory.create("/memories/" + "n" * 159, "the longest name")
    assert all(len(segment) <= 255 for key in all_keys(memory) for segment in key.split("/"))


def test_a_rename_that_would_make_a_descendant_key_too_long_changes_nothing(
    make_memory: Callable[..., EncryptedMemory],
) -> None:
    memory = make_memory("inmemory", encrypt_names=True)
    # d/ + 20 one-letter levels + a 20-byte file name: 15 + 21 * 44 + 64 = 1,003 bytes.
    leaf = "/memories/d/" + "/".join("s" * 20) + "/" + "f" * 20
    memory.create(leaf, "leaf")
    assert len(memory.layout.key_for(parse_path(leaf)).encode()) == 1003
    before = {info.key: info.etag for info in memory.store.list("")}
    with pytest.raises(InvalidPathError) as info:
        memory.rename("/memories/d", "/memories/" + "e" * 32)  # +43 bytes: 1,046
    assert "would be too long. Nothing was changed." in str(info.value)
    assert {info.key: info.etag for info in memory.store.list("")} == before
    memory.rename("/memories/d", "/memories/" + "e" * 16)  # +21 bytes: exactly 1,024
    renamed = "/memories/" + "e" * 16 + leaf.removeprefix("/memories/d")
    assert memory.view(renamed).endswith("\tleaf")
    assert max(len(info.key.encode()) for info in memory.store.list("")) == MAX_S3_KEY_BYTES


# -- the names key -------------------------------------------------------------------------


def test_reads_of_an_empty_memory_answer_does_not_exist(make_memory: Callable[..., EncryptedMemory]) -> None:
    memory = make_memory("inmemory", encrypt_names=True)
    assert memory.view("/memories").endswith("\n0B\t/memories")
    assert all_keys(memory) == []  # listing the root needs no names key
    with pytest.raises(PathNotFoundError) as info:
        memory.view("/memories/notes.md")
    assert str(info.value) == "The path /memories/notes.md does not exist. Please provide a valid path."
    # Naming a path created nothing: computing a key never creates the names key, the
    # first create does (and nothing else).
    assert all_keys(memory) == []
    memory.create("/memories/notes.md", "x")
    assert NAMES_KEY in all_keys(memory)
    document = json.loads(memory.store.get(NAMES_KEY).body)  # type: ignore[union-attr]
    assert sorted(document) == ["kid", "v", "wrapped", "wrapper"]
    assert document["v"] == 2 and document["wrapper"] == "local"


@pytest.mark.parametrize("flavour", ["inmemory", "localdir", "s3-tenant-local", "s3-tenant-kms", "s3-kms"])
def test_concurrent_first_writers_agree_on_one_names_key(
    make_memory: Callable[..., EncryptedMemory], flavour: str
) -> None:
    count = 8
    agents = [make_memory(flavour, encrypt_names=True) for _ in range(count)]
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            barrier.wait()
            agents[i].create(f"/memories/shared/file-{i}.md", str(i))
        except BaseException as exc:  # asserted on below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len({agent.layout.names.names_key() for agent in agents}) == 1  # type: ignore[union-attr]
    reader = make_memory(flavour, encrypt_names=True)
    assert [e.path for e in reader.list_files()] == [f"/memories/shared/file-{i}.md" for i in range(count)]
    sealed_dirs = {key.split("/")[2] for key in all_keys(reader) if key.startswith("alice/memories/")}
    assert len(sealed_dirs) == 1


def test_a_memory_with_names_in_clear_is_refused_not_hidden(make_memory: Callable[..., EncryptedMemory]) -> None:
    make_memory("inmemory").create("/memories/notes.md", "in clear")
    memory = make_memory("inmemory", encrypt_names=True)
    for call in (lambda: memory.view("/memories"), lambda: memory.create("/memories/new.md", "x")):
        with pytest.raises(TenantKeyError) as info:
            call()
        assert "no names key" in str(info.value)
    assert NAMES_KEY not in all_keys(memory)


def test_the_names_key_needs_the_right_master_key(make_memory: Callable[..., EncryptedMemory]) -> None:
    make_memory("inmemory", encrypt_names=True).create("/memories/a.md", "x")
    store = make_memory("inmemory").store
    other = open_memory(
        user_id="alice", store=store, master_key=bytes(range(1, 33)), key_cache=KeyCache(), encrypt_names=True
    )
    with pytest.raises(TenantKeyError) as info:
        other.view("/memories")
    assert "names key of this memory could not be unwrapped" in str(info.value)
    # Tampered with: one character of the wrapped key changed.
    document = json.loads(store.get(NAMES_KEY).body)  # type: ignore[union-attr]
    document["wrapped"] = ("B" if document["wrapped"][0] == "A" else "A") + document["wrapped"][1:]
    store.put(NAMES_KEY, json.dumps(document).encode(), {})
    with pytest.raises(TenantKeyError):
        make_memory("inmemory", encrypt_names=True).view("/memories")
    store.put(NAMES_KEY, b"not json", {})
    with pytest.raises(TenantKeyError) as info:
        make_memory("inmemory", encrypt_names=True).view("/memories")
    assert "failed its integrity check" in str(info.value)


def test_a_kms_wrapped_names_key_is_refused_by_a_local_master(make_memory: Callable[..., EncryptedMemory]) -> None:
    kms_memory = make_memory("s3-kms", encrypt_names=True)
    kms_memory.create("/memories/a.md", "x")
    assert json.loads(kms_memory.store.get(NAMES_KEY).body)["wrapper"] == "kms"  # type: ignore[union-attr]
    local = make_memory("s3-tenant-local", encrypt_names=True)
    with pytest.raises(ConfigurationError):
        local.view("/memories")


def test_encrypt_names_must_be_a_bool() -> None:
    with pytest.raises(ConfigurationError):
        open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, encrypt_names="yes")  # type: ignore[arg-type]


# -- requests --------------------------------------------------------------------------------


def test_request_cost_cold_and_warm(s3_client: Any) -> None:
    def fresh() -> EncryptedMemory:
        return open_memory(
            user_id="alice",
            bucket=BUCKET,
            s3_client=s3_client,
            master_key=MASTER_KEY,
            key_cache=KeyCache(),
            encrypt_names=True,
        )

    meter = Meter(s3_client)
    memory = fresh()
    memory.create("/memories/d/a.md", "1\n")
    # The first command naming a path in a new tenant: the names key (GET, LIST, PUT), the
    # tenant key (a GET alongside, then a GET, a LIST that finds no files and a PUT in the
    # write), then the command's own (a HEAD of the path, the LIST under it, the PUT); the
    # names key's PUT answered whether the bucket keeps versions (it does not, so no record).
    assert meter.take() == {
        "GetObject": 3,
        "ListObjectsV2": 3,
        "PutObject": 3,
        "HeadObject": 2,
    }
    memory.view("/memories/d/a.md")
    assert meter.take() == {"GetObject": 1}  # warm: no request for names
    memory.str_replace("/memories/d/a.md", "1", "2")
    assert meter.take() == {"GetObject": 1, "PutObject": 1}
    memory.view("/memories")
    assert meter.take() == {"ListObjectsV2": 1}

    cold = fresh()
    cold.view("/memories/d/a.md")  # names key and tenant key in one round trip, then the file
    assert meter.take() == {"GetObject": 3}
    cold = fresh()
    cold.view("/memories")  # a listing needs the names key, not the tenant key
    assert meter.take() == {"ListObjectsV2": 1, "GetObject": 1}


# -- property: keys open to their paths, and directories are prefixes ------------------------


def _valid_path(parts: list[str]) -> MemoryPath | None:
    try:
        path = parse_path("/memories/" + "/".join(parts))
    except InvalidPathError:
        return None
    # At most 5 names of at most 60 bytes (after NFC): 5 * 108 + 15 bytes, within any limit.
    return path if all(len(part.encode()) <= 60 for part in path.parts) else None


_NAME = st.text(
    alphabet=st.characters(codec="utf-8", categories=["L", "N", "M", "P", "S", "Zs"], exclude_characters="/\\%"),
    min_size=1,
    max_size=25,
)
_PATH = st.lists(_NAME, min_size=1, max_size=5).map(_valid_path).filter(lambda path: path is not None)


@pytest.fixture(scope="module")
def sealed_memory() -> EncryptedMemory:
    memory = open_memory(
        user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache(), encrypt_names=True
    )
    return with_names_key(memory)


def with_names_key(memory: EncryptedMemory) -> EncryptedMemory:
    """``memory`` once its tenant has a names key: computing a key never creates one (the
    first create does), so a test that computes keys of a new tenant creates it first."""
    assert memory.layout.names is not None
    memory.layout.names.key_exists(create=True)
    return memory


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=_PATH)
def test_property_keys_open_to_their_paths(sealed_memory: EncryptedMemory, path: MemoryPath) -> None:
    layout = sealed_memory.layout
    key = layout.key_for(path)
    assert layout.path_for_key(key) == path
    assert len(key.encode()) <= MAX_S3_KEY_BYTES
    for directory in [MemoryPath(""), *path.ancestors()]:
        assert key.startswith(layout.dir_prefix(directory))
    assert not key.startswith(layout.dir_prefix(path))
    assert key.count("/") == 2 + len(path.parts) - 1


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=_PATH, second=_PATH)
def test_property_a_prefix_is_exactly_a_subtree(
    sealed_memory: EncryptedMemory, first: MemoryPath, second: MemoryPath
) -> None:
    layout = sealed_memory.layout
    key_1, key_2 = layout.key_for(first), layout.key_for(second)
    assert (key_1 == key_2) == (first == second)
    below = second != first and second.is_within(first)
    assert key_2.startswith(layout.dir_prefix(first)) == below


def test_the_metadata_does_not_confirm_a_guessed_name(make_memory: Callable[..., EncryptedMemory]) -> None:
    """Objects bind to their path; with encrypted names the binding is keyed, so the bucket's
    metadata cannot be checked against a guessed path's plain SHA-256."""
    import hashlib

    from s3memory._crypto.envelope import parse_header

    sealed = make_memory("inmemory", encrypt_names=True)
    plain = make_memory("inmemory", "bob")
    guess = "/memories/h2/diagnosis.md"
    guessed_hash = hashlib.sha256(guess.encode()).hexdigest()
    for memory in (sealed, plain):
        memory.create(guess, "private")
        memory.rename(guess, "/memories/h2/renamed.md")
        memory.rename("/memories/h2/renamed.md", guess)
    metadata_of = {
        m: [dict(m.store.get(i.key).metadata) for i in m.store.list(m.layout.memory_prefix)] for m in (sealed, plain)
    }  # type: ignore[union-attr]
    assert any(guessed_hash in json.dumps(md) for md in metadata_of[plain])  # the plain layout binds sha256(path)
    assert not any(guessed_hash in json.dumps(md) for md in metadata_of[sealed])
    assert sealed.read_text(guess) == "private"
    for metadata in metadata_of[sealed]:
        assert parse_header(metadata)  # still a well-formed V3 object


def test_a_memory_written_with_encrypted_names_is_refused_without_them() -> None:
    """The other way round from the loader's refusal: opened without encrypt_names, a memory
    written with them said nothing, listed sealed names and failed every read."""
    from s3memory import ConfigurationError, InMemoryStore, KeyCache, generate_master_key, open_memory
    from s3memory._crypto.files import ENCRYPTED_NAMES_EXPECTED

    store, key = InMemoryStore(), generate_master_key()
    sealed = open_memory(user_id="alice", store=store, master_key=key, encrypt_names=True, key_cache=KeyCache())
    sealed.create("/memories/notes/a.md", "x")
    for command in (
        lambda memory: memory.view("/memories"),
        lambda memory: memory.view("/memories/notes"),
        lambda memory: memory.create("/memories/b.md", "y"),
        lambda memory: memory.list_files(),
    ):
        plain = open_memory(user_id="alice", store=store, master_key=key, key_cache=KeyCache())
        with pytest.raises(ConfigurationError) as info:
            command(plain)
        assert str(info.value) == ENCRYPTED_NAMES_EXPECTED
    assert [entry.path for entry in sealed.list_files()] == ["/memories/notes/a.md"]  # nothing written
    # the other tenant, without encrypted names, is unaffected
    bob = open_memory(user_id="bob", store=store, master_key=key, key_cache=KeyCache())
    assert bob.create("/memories/b.md", "y") == "File created successfully at: /memories/b.md"
    assert bob.view("/memories").endswith("/memories/b.md")


def test_a_plain_memory_opened_with_encrypted_names_says_how_to_open_it() -> None:
    from s3memory import InMemoryStore, KeyCache, TenantKeyError, generate_master_key, open_memory

    store, key = InMemoryStore(), generate_master_key()
    open_memory(user_id="alice", store=store, master_key=key).create("/memories/a.md", "x")
    sealed = open_memory(user_id="alice", store=store, master_key=key, encrypt_names=True, key_cache=KeyCache())
    with pytest.raises(TenantKeyError, match="open it without encrypt_names"):
        sealed.view("/memories")
