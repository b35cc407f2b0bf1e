"""Mounts: other users' stores shown under /memories/{name}/, read-only or read-write.

On the in-memory store, the local directory store and moto (tenant and KMS-per-object key
modes), each through a store that records every request, so "refused before any request"
and "nothing written" are observed, not assumed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers import BUCKET, MASTER_KEY, store_matrix

from s3memory import (
    AccessLog,
    ConfigurationError,
    EncryptedMemory,
    ForeignObjectError,
    InMemoryStore,
    IntegrityError,
    InvalidCommandError,
    InvalidPathError,
    KeyCache,
    LocalDirStore,
    MemoryAdmin,
    Mount,
    MountedMemory,
    PathExistsError,
    PathNotFoundError,
    ReadOnlyMountError,
    S3MemoryError,
    S3Store,
    open_memory,
)
from s3memory.stores import DelegatingStore, ObjectStore

WRITES = {"put", "copy", "delete", "delete_version", "purge", "put_tags"}


class Recording(DelegatingStore):
    """Every request, by verb and key where there is one."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.requests: list[str] = []

    def _call(self, verb: str, perform: Callable[[], Any]) -> Any:
        self.requests.append(verb)
        return perform()


FLAVOURS = ["inmemory", "localdir", "s3-tenant", "s3-kms"]


@pytest.fixture(params=FLAVOURS)
def stores(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[tuple[Recording, dict[str, Any]]]:
    """A recording store and the key options of one flavour."""
    flavour = request.param
    options: dict[str, Any] = {"master_key": MASTER_KEY}
    if flavour == "inmemory":
        inner: ObjectStore = InMemoryStore()
    elif flavour == "localdir":
        inner = LocalDirStore(tmp_path / "store")
    else:
        s3 = request.getfixturevalue("s3_client")
        inner = S3Store(BUCKET, s3)
        if flavour == "s3-kms":
            options = {
                "key_mode": "kms",
                "kms_key_id": request.getfixturevalue("kms_key_id"),
                "kms_client": request.getfixturevalue("kms_client"),
            }
    yield Recording(inner), options


def _seed(store: ObjectStore, options: dict[str, Any], user_id: str, files: dict[str, str]) -> None:
    writer = open_memory(user_id=user_id, store=store, key_cache=KeyCache(), **options)
    for path, text in files.items():
        writer.create(path, text)
    writer.close()


MOUNTS = [
    Mount("standards", "org-standards", description="Coding standards", instructions="Follow them."),
    Mount("team", "team-7", access="read_write", description="The team's shared notes"),
]


def _mounted(store: ObjectStore, options: dict[str, Any], mounts: list[Mount] = MOUNTS) -> MountedMemory:
    return open_memory(user_id="alice", store=store, key_cache=KeyCache(), mounts=mounts, **options)


@pytest.fixture
def seeded(stores: tuple[Recording, dict[str, Any]]) -> tuple[Recording, dict[str, Any], MountedMemory]:
    store, options = stores
    _seed(store, options, "org-standards", {"/memories/style.md": "Use tabs.\n", "/memories/py/typing.md": "mypy\n"})
    _seed(store, options, "team-7", {"/memories/plan.md": "Ship it.\n"})
    _seed(store, options, "alice", {"/memories/me.md": "likes tea\n"})
    return store, options, _mounted(store, options)


def test_the_model_sees_one_tree_with_every_store(seeded: tuple[Recording, dict[str, Any], MountedMemory]) -> None:
    _, _, memory = seeded
    assert memory.view("/memories") == (
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n"
        "34B\t/memories\n"
        "10B\t/memories/me.md\n"
        "15B\t/memories/standards/\n"
        "5B\t/memories/standards/py/\n"
        "10B\t/memories/standards/style.md\n"
        "9B\t/memories/team/\n"
        "9B\t/memories/team/plan.md"
    )
    assert memory.view("/memories/") == memory.view("/memories")
    assert memory.view("/memories/standards/style.md") == (
        "Here's the content of /memories/standards/style.md with line numbers:\n     1\tUse tabs.\n     2\t"
    )
    assert memory.view("/memories/standards") == (
        "Here're the files and directories up to 2 levels deep in /memories/standards, excluding hidden items "
        "and node_modules:\n"
        "15B\t/memories/standards\n"
        "5B\t/memories/standards/py/\n"
        "5B\t/memories/standards/py/typing.md\n"
        "10B\t/memories/standards/style.md"
    )
    assert memory.read_text("/memories/team/plan.md") == "Ship it.\n"
    assert [e.path for e in memory.list_files()] == [
        "/memories/me.md",
        "/memories/standards/py/typing.md",
        "/memories/standards/style.md",
        "/memories/team/plan.md",
    ]
    assert [e.path for e in memory.list_files("/memories/standards/py")] == ["/memories/standards/py/typing.md"]


def test_sizes_of_the_root_view_total_every_store(seeded: tuple[Recording, dict[str, Any], MountedMemory]) -> None:
    _, _, memory = seeded
    lines = dict(line.split("\t")[::-1] for line in memory.view("/memories").splitlines()[1:])
    assert lines["/memories/standards/"] == "15B"  # "Use tabs.\n" + "mypy\n"
    assert lines["/memories/team/"] == "9B"
    assert lines["/memories"] == "34B"


def test_an_empty_mount_shows_as_an_empty_directory(stores: tuple[Recording, dict[str, Any]]) -> None:
    store, options = stores
    memory = _mounted(store, options)
    lines = memory.view("/memories").splitlines()[1:]
    assert lines == ["0B\t/memories", "0B\t/memories/standards/", "0B\t/memories/team/"]
    assert memory.view("/memories/standards").splitlines()[1:] == ["0B\t/memories/standards"]
    assert not [verb for verb in store.requests if verb in WRITES]  # reading an empty store makes nothing


READ_ONLY_COMMANDS: list[tuple[dict[str, Any], str]] = [
    (
        {"command": "create", "path": "/memories/standards/new.md", "file_text": "x"},
        "create /memories/standards/new.md",
    ),
    ({"command": "create", "path": "/memories/standards", "file_text": "x"}, "create /memories/standards"),
    (
        {"command": "str_replace", "path": "/memories/standards/style.md", "old_str": "tabs", "new_str": "spaces"},
        "edit /memories/standards/style.md",
    ),
    (
        {"command": "insert", "path": "/memories/standards/style.md", "insert_line": 0, "insert_text": "x"},
        "edit /memories/standards/style.md",
    ),
    (
        {"command": "str_replace", "path": "/memories/standards/gone.md", "old_str": "a", "new_str": "b"},
        "edit /memories/standards/gone.md",
    ),
    ({"command": "delete", "path": "/memories/standards/style.md"}, "delete /memories/standards/style.md"),
    ({"command": "delete", "path": "/memories/standards/py"}, "delete /memories/standards/py"),
    ({"command": "delete", "path": "/memories/standards"}, "delete /memories/standards"),
    (
        {"command": "rename", "old_path": "/memories/standards/style.md", "new_path": "/memories/standards/s.md"},
        "rename /memories/standards/style.md to /memories/standards/s.md",
    ),
    (
        {"command": "rename", "old_path": "/memories/standards/style.md", "new_path": "/memories/mine.md"},
        "rename /memories/standards/style.md to /memories/mine.md",
    ),
    (
        {"command": "rename", "old_path": "/memories/me.md", "new_path": "/memories/standards/me.md"},
        "rename /memories/me.md to /memories/standards/me.md",
    ),
    (
        {"command": "rename", "old_path": "/memories/standards", "new_path": "/memories/std"},
        "rename /memories/standards to /memories/std",
    ),
]


# Each refused command by name ("create0", ...). The refusal comes before any request, whatever
# the store: every command on every store in CI; in the default tier every command on the local
# stores and on S3 one of each verb.
READ_ONLY_CASES = {f"{case[0]['command']}{i}": case for i, case in enumerate(READ_ONLY_COMMANDS)}


@pytest.mark.parametrize(
    ("stores", "case"),
    store_matrix(FLAVOURS, READ_ONLY_CASES, {"create0", "str_replace2", "insert3", "delete6", "rename9"}),
    indirect=["stores"],
)
def test_a_read_only_mount_refuses_every_change_before_any_request(
    seeded: tuple[Recording, dict[str, Any], MountedMemory], case: str
) -> None:
    command, refused = READ_ONLY_CASES[case]
    store, _, memory = seeded
    before = {k: store.inner.get(k) for k in [i.key for i in store.inner.list("")]}
    store.requests.clear()
    with pytest.raises(ReadOnlyMountError) as raised:
        memory.execute(command)
    assert str(raised.value) == f"Error: Cannot {refused}: /memories/standards is mounted read-only"
    assert isinstance(raised.value, InvalidCommandError)
    assert store.requests == []
    after = {k: store.inner.get(k) for k in [i.key for i in store.inner.list("")]}
    assert after.keys() == before.keys()
    assert all(after[k].body == before[k].body for k in after)  # type: ignore[union-attr]


def test_reading_a_read_only_mount_writes_nothing(seeded: tuple[Recording, dict[str, Any], MountedMemory]) -> None:
    store, options, _ = seeded
    memory = open_memory(
        user_id="alice",
        store=store,
        key_cache=KeyCache(),
        mounts=MOUNTS,
        track_access=True,
        access_log=AccessLog(),
        **options,
    )
    store.requests.clear()
    memory.view("/memories/standards/style.md")
    memory.view("/memories/standards/py/typing.md")
    memory.view("/memories")
    with pytest.raises(PathNotFoundError):
        memory.view("/memories/standards/nothing.md")
    assert not [verb for verb in store.requests if verb in WRITES]
    memory.view("/memories/me.md")  # the own store still records its reads
    assert "put" in store.requests


def test_a_read_write_mount_takes_every_command(seeded: tuple[Recording, dict[str, Any], MountedMemory]) -> None:
    _, options, memory = seeded
    assert memory.create("/memories/team/new.md", "hello\n") == "File created successfully at: /memories/team/new.md"
    assert memory.str_replace("/memories/team/new.md", "hello", "hi").startswith("The memory file has been edited.")
    assert memory.insert("/memories/team/new.md", 1, "more\n") == "The file /memories/team/new.md has been edited."
    assert memory.rename("/memories/team/new.md", "/memories/team/d/n.md") == (
        "Successfully renamed /memories/team/new.md to /memories/team/d/n.md"
    )
    assert memory.view("/memories/team/d/n.md").endswith("     1\thi\n     2\tmore\n     3\t")
    assert memory.delete("/memories/team/d") == "Successfully deleted /memories/team/d"
    # written into team-7's own store, at its own paths: it reads the same opened directly
    team = open_memory(user_id="team-7", store=memory.own.store, key_cache=KeyCache(), **options)
    assert team.list_files() and [e.path for e in team.list_files()] == ["/memories/plan.md"]


def test_contract_strings_name_the_path_the_model_gave(seeded: tuple[Recording, dict[str, Any], MountedMemory]) -> None:
    _, _, memory = seeded
    with pytest.raises(PathExistsError, match=r"^Error: File /memories/team/plan.md already exists$"):
        memory.create("/memories/team/plan.md", "x")
    with pytest.raises(PathExistsError, match=r"^Error: File /memories/team already exists$"):
        memory.create("/memories/team", "x")
    with pytest.raises(
        S3MemoryError, match=r"^Error: Cannot create /memories/team/plan.md/x: /memories/team/plan.md is a file"
    ):
        memory.create("/memories/team/plan.md/x", "x")
    with pytest.raises(PathNotFoundError, match=r"^The path /memories/team/none does not exist"):
        memory.view("/memories/team/none")
    with pytest.raises(PathNotFoundError, match=r"^Error: The path /memories/team/none does not exist$"):
        memory.delete("/memories/team/none")
    memory.create("/memories/team/other.md", "x")
    with pytest.raises(PathExistsError, match=r"^Error: The destination /memories/team/plan.md already exists$"):
        memory.rename("/memories/team/other.md", "/memories/team/plan.md")


def test_mount_points_cannot_be_deleted_renamed_or_replaced(
    seeded: tuple[Recording, dict[str, Any], MountedMemory],
) -> None:
    store, _, memory = seeded
    store.requests.clear()
    with pytest.raises(
        InvalidCommandError, match=r"^Error: Cannot delete /memories/team: it is the mount point of a memory store$"
    ):
        memory.delete("/memories/team")
    with pytest.raises(InvalidCommandError, match=r"^Error: Cannot rename /memories/team/: it is the mount point"):
        memory.rename("/memories/team/", "/memories/crew")
    with pytest.raises(PathExistsError, match=r"^Error: The destination /memories/team already exists$"):
        memory.rename("/memories/me.md", "/memories/team")
    assert store.requests == []
    with pytest.raises(PathExistsError):
        memory.create("/memories/team", "x")


def test_a_rename_across_stores_is_refused_and_nothing_moves(
    seeded: tuple[Recording, dict[str, Any], MountedMemory],
) -> None:
    store, _, memory = seeded
    store.requests.clear()
    with pytest.raises(InvalidCommandError) as raised:
        memory.rename("/memories/me.md", "/memories/team/me.md")
    assert str(raised.value) == (
        "Error: Cannot rename /memories/me.md to /memories/team/me.md: they are in different memory stores "
        "(/memories and /memories/team); create the file at the new path and delete the old one instead"
    )
    with pytest.raises(InvalidCommandError, match="different memory stores"):
        memory.rename("/memories/team/plan.md", "/memories/plan.md")
    assert store.requests == []
    assert memory.read_text("/memories/me.md") == "likes tea\n"


def test_a_mounts_objects_never_open_as_another_mounts(seeded: tuple[Recording, dict[str, Any], MountedMemory]) -> None:
    """A bucket writer copies a file of the shared store into the team's store and the
    user's own: each store opens only objects sealed for it."""
    store, _, memory = seeded
    standards = memory.mounted["standards"][1]
    team = memory.mounted["team"][1]
    source = standards.layout.key_for(standards.gate.parse("/memories/standards/style.md"))
    planted = store.inner.get(source)
    assert planted is not None
    for target, path in [(team, "/memories/team/style.md"), (memory.own, "/memories/style.md")]:
        key = target.layout.key_for(target.gate.parse(path))
        store.inner.put(key, planted.body, planted.metadata)
        with pytest.raises((IntegrityError, ForeignObjectError)):
            memory.view(path)
    # and the other way round: the own file planted into the shared store
    own_key = memory.own.layout.key_for(memory.own.gate.parse("/memories/me.md"))
    mine = store.inner.get(own_key)
    assert mine is not None
    planted_key = standards.layout.key_for(standards.gate.parse("/memories/standards/me.md"))
    store.inner.put(planted_key, mine.body, mine.metadata)
    with pytest.raises((IntegrityError, ForeignObjectError)):
        memory.view("/memories/standards/me.md")


def test_own_files_under_a_mount_name_are_shadowed_and_reported(stores: tuple[Recording, dict[str, Any]]) -> None:
    store, options = stores
    _seed(store, options, "alice", {"/memories/team/old.md": "mine\n", "/memories/keep.md": "k\n"})
    _seed(store, options, "team-7", {"/memories/plan.md": "Ship it.\n"})
    memory = _mounted(store, options)
    assert memory.shadowed() == ["/memories/team/old.md"]
    assert "old.md" not in memory.view("/memories")
    assert [e.path for e in memory.list_files()] == ["/memories/keep.md", "/memories/team/plan.md"]
    with pytest.raises(PathNotFoundError):
        memory.view("/memories/team/old.md")


# Case variants, full-width letters (NFKC) and the long s (case folding) of both mounts.
TWINS = ["Standards", "STANDARDS", "\uff53\uff54\uff41\uff4e\uff44\uff41\uff52\uff44\uff53", "\u017ftandards", "Team"]


@pytest.mark.parametrize("twin", TWINS)
def test_no_name_reading_as_a_mount_is_a_second_store(
    seeded: tuple[Recording, dict[str, Any], MountedMemory], twin: str
) -> None:
    """No writable twin of a read-only mount: every path the router checks is refused."""
    store, _, memory = seeded
    store.requests.clear()
    path, directory = f"/memories/{twin}/x.md", f"/memories/{twin}"
    attempts: list[Callable[[], object]] = [
        lambda: memory.create(path, "x"),
        lambda: memory.write_text(path, "x"),
        lambda: memory.str_replace(path, "a", "b"),
        lambda: memory.replace_all(path, "a", "b"),
        lambda: memory.insert(path, 0, "x"),
        lambda: memory.delete(directory),
        lambda: memory.rename("/memories/me.md", path),
        lambda: memory.rename("/memories/me.md", directory),
        lambda: memory.rename(path, "/memories/elsewhere.md"),
        lambda: memory.view(path),
        lambda: memory.read_text(path),
        lambda: memory.list_files(directory),
        lambda: memory.search("x", path_prefix=directory),
        lambda: memory.history(path),
        lambda: MemoryAdmin(memory).write(path, "x"),
    ]
    for attempt in attempts:
        with pytest.raises(
            InvalidPathError, match=r"reads as /memories/(standards|team), where a memory store is mounted"
        ):
            attempt()
    assert store.requests == []  # refused before any request
    assert memory.view("/memories/standards/style.md").endswith("1\tUse tabs.\n     2\t")


def test_own_files_under_a_name_reading_as_a_mount_are_shadowed_and_said(
    stores: tuple[Recording, dict[str, Any]],
) -> None:
    store, options = stores
    fullwidth = "\uff34\uff25\uff21\uff2d"  # TEAM
    files = {
        "/memories/team/old.md": "tabs\n",
        "/memories/Team/b.md": "tabs\n",
        f"/memories/{fullwidth}/c.md": "tabs\n",
        "/memories/keep.md": "k\n",
    }
    _seed(store, options, "alice", files)  # the own store alone takes them
    _seed(store, options, "team-7", {"/memories/plan.md": "Ship it.\n"})
    memory = _mounted(store, options)
    assert memory.shadowed() == sorted(set(files) - {"/memories/keep.md"})
    tree = memory.view("/memories")
    assert tree.endswith(
        "9B\t/memories/team/plan.md\n\nNote: files of your own store under a mounted store's name are hidden "
        "while it is mounted, and cannot be read or changed here: 3 files under /memories/Team/, /memories/team/, "
        f"/memories/{fullwidth}/ (mount /memories/team/)."
    )
    assert [e.path for e in memory.list_files()] == ["/memories/keep.md", "/memories/team/plan.md"]
    assert memory.search("tabs") == []
    store.requests.clear()
    assert memory.shadowing_mounts() == [MOUNTS[1]]  # the exact name; the twins show in view and shadowed()
    assert store.requests == ["list", "list"]  # at most one key under each mount's name, at once
    alone = _mounted(store, options, [MOUNTS[0]])
    store.requests.clear()
    assert alone.shadowing_mounts() == []
    assert "Note:" not in alone.view("/memories")


def test_clear_all_clears_only_the_users_own_store(seeded: tuple[Recording, dict[str, Any], MountedMemory]) -> None:
    _, _, memory = seeded
    assert memory.clear_all() == "All memory cleared"
    assert [e.path for e in memory.list_files()] == [
        "/memories/standards/py/typing.md",
        "/memories/standards/style.md",
        "/memories/team/plan.md",
    ]


def test_validation_errors_come_before_routing(stores: tuple[Recording, dict[str, Any]]) -> None:
    store, options = stores
    memory = _mounted(store, options)
    for bad in ["/memories/../x", "/etc/passwd", "/memories/standards/../../x", "/memories/standards//x"]:
        with pytest.raises(InvalidCommandError):
            memory.view(bad)
        with pytest.raises(InvalidCommandError):
            memory.create(bad, "x")
    assert store.requests == []


def test_mounts_are_checked_when_opened() -> None:
    store = InMemoryStore()

    def opened(mounts: list[Mount]) -> None:
        open_memory(user_id="alice", store=store, master_key=MASTER_KEY, mounts=mounts)

    with pytest.raises(ConfigurationError, match="at most 8"):
        opened([Mount(f"m{i}", f"t{i}") for i in range(9)])
    opened([Mount(f"m{i}", f"t{i}") for i in range(8)])
    with pytest.raises(ConfigurationError, match="same name"):
        opened([Mount("a", "t1"), Mount("a", "t2")])
    with pytest.raises(ConfigurationError, match="same user_id"):
        opened([Mount("a", "t1"), Mount("b", "t1")])
    with pytest.raises(ConfigurationError, match="own store"):
        opened([Mount("a", "alice")])
    with pytest.raises(ConfigurationError, match=r"s3memory\.Mount"):
        opened(["team"])  # type: ignore[list-item]
    for name in ["", ".hidden", "Team", "a/b", "node_modules", "x" * 65, "-a", "é"]:
        with pytest.raises(ConfigurationError, match="mount name"):
            Mount(name, "t1")
    with pytest.raises(ConfigurationError):
        Mount("a", "../bob")
    with pytest.raises(ConfigurationError, match="access"):
        Mount("a", "t1", access="write")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="instructions is over 4,096"):
        Mount("a", "t1", instructions="x" * 4097)
    assert Mount("a", "t1", instructions="x" * 4096).read_only
    with pytest.raises(ConfigurationError, match="description is over 1,024"):
        Mount("a", "t1", description="x" * 1025)


def test_without_mounts_open_memory_is_unchanged() -> None:
    memory = open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY)
    assert isinstance(memory, EncryptedMemory)
    empty = open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, mounts=[])
    assert isinstance(empty, MountedMemory)
    empty.create("/memories/a.md", "x")
    assert empty.view("/memories").splitlines()[1:] == ["1B\t/memories", "1B\t/memories/a.md"]


def test_a_mounted_store_uses_its_own_names_choice(stores: tuple[Recording, dict[str, Any]]) -> None:
    store, options = stores
    writer = open_memory(user_id="sealed-team", store=store, key_cache=KeyCache(), encrypt_names=True, **options)
    writer.create("/memories/secret-plan.md", "x\n")
    memory = _mounted(store, options, [Mount("sealed", "sealed-team", encrypt_names=True)])
    assert memory.read_text("/memories/sealed/secret-plan.md") == "x\n"
    assert not any("secret-plan" in info.key for info in store.inner.list(""))


# -- the management API and history over the tree --------------------------------------------
def test_the_management_api_routes_to_the_mounted_stores(
    seeded: tuple[Recording, dict[str, Any], MountedMemory],
) -> None:
    import hashlib

    from s3memory import MemoryAdmin, NotExists, PreconditionFailedError, Sha256

    store, _, memory = seeded
    admin = MemoryAdmin(memory)
    listed = admin.list()
    assert [(i.path, i.size) for i in listed] == [
        ("/memories/me.md", 10),
        ("/memories/standards/py/typing.md", 5),
        ("/memories/standards/style.md", 10),
        ("/memories/team/plan.md", 9),
    ]
    assert listed[2].sha256 == hashlib.sha256(b"Use tabs.\n").hexdigest()
    assert [i.path for i in admin.list("/memories/", depth=0)] == ["/memories/me.md"]
    assert [i.path for i in admin.list("/memories/", depth=1)] == [
        "/memories/me.md",
        "/memories/standards/style.md",
        "/memories/team/plan.md",
    ]
    assert [i.path for i in admin.list("/memories/st")] == [
        "/memories/standards/py/typing.md",
        "/memories/standards/style.md",
    ]
    assert [i.path for i in admin.list("/memories/standards/py/")] == ["/memories/standards/py/typing.md"]
    assert [i.path for i in admin.list("/memories/team")] == ["/memories/team/plan.md"]
    text, info = admin.read("/memories/standards/style.md")
    assert (text, info.path) == ("Use tabs.\n", "/memories/standards/style.md")
    written = admin.write("/memories/team/new.md", "fresh\n", precondition=NotExists())
    assert written.path == "/memories/team/new.md"
    assert memory.read_text("/memories/team/new.md") == "fresh\n"
    with pytest.raises(PreconditionFailedError):
        admin.write("/memories/team/new.md", "again\n", precondition=NotExists())
    store.requests.clear()
    for change in (
        lambda: admin.write("/memories/standards/style.md", "x", precondition=Sha256(info.sha256)),
        lambda: admin.write("/memories/standards/new.md", "x"),
        lambda: admin.delete("/memories/standards/style.md"),
    ):
        with pytest.raises(ReadOnlyMountError, match=r"/memories/standards is mounted read-only$"):
            change()
    assert store.requests == []


def test_history_is_of_the_users_own_store(stores: tuple[Recording, dict[str, Any]]) -> None:
    store, options = stores
    memory = _mounted(store, options)
    with pytest.raises(InvalidCommandError, match=r"kept by the memory store mounted at /memories/team;"):
        memory.history("/memories/team/plan.md")
    with pytest.raises(InvalidCommandError, match="mounted at /memories/standards"):
        memory.changes("/memories/standards")


# -- search over the tree, and an agent using it through the SDK's tool runner ----------------
def test_search_covers_every_store_and_nothing_shadowed(
    seeded: tuple[Recording, dict[str, Any], MountedMemory],
) -> None:
    store, options, memory = seeded
    _seed(store, options, "alice", {"/memories/team/ghost.md": "Use tabs, says the shadow.\n"})
    _seed(store, options, "bob", {"/memories/bob.md": "Use tabs too.\n"})  # another user, not mounted
    results = memory.search("tabs")
    assert [r.path for r in results] == ["/memories/standards/style.md"]
    assert results[0].lines == ((1, "Use tabs."),)
    assert [r.path for r in memory.search("ship", path_prefix="/memories/team/")] == ["/memories/team/plan.md"]
    assert memory.search("ship", path_prefix="/memories/standards") == []
    assert memory.search_answer("tea") == (
        'Found 1 file matching "tea" (searched 4 files):\n/memories/me.md\n     1\tlikes tea'
    )
    assert (
        memory.search_answer("nothing here", "/memories/team") == 'No matches for "nothing here" under /memories/team.'
    )
    store.requests.clear()
    for bad in ("", " ", "x" * 1001):
        with pytest.raises(InvalidCommandError):
            memory.search(bad)
    with pytest.raises(InvalidCommandError):
        memory.search("x", limit=0)
    assert store.requests == []  # refused before any request


def test_an_agent_searches_a_shared_store_through_the_sdk_tool_runner(stores: tuple[Recording, dict[str, Any]]) -> None:
    """The SDK's real tool runner, offline: a per-user store and a read-only shared store;
    the scripted model searches, views the hit, and tries to write into the shared store."""
    from anthropic import Anthropic
    from helpers.fake_messages_api import scripted_client, text_of

    from s3memory import S3MemoryTool, memory_stores_prompt

    store, options = stores
    _seed(store, options, "org-standards", {"/memories/style.md": "Indent with tabs.\nWrap at 100 columns.\n"})
    memory = _mounted(store, options)
    tool = S3MemoryTool(memory=memory)

    def use(tool_id: str, name: str, **input: Any) -> dict[str, Any]:
        return {"type": "tool_use", "id": tool_id, "name": name, "input": input}

    script = [
        [use("s1", "memory_search", query="wrap columns")],
        [use("v1", "memory", command="view", path="/memories/standards/style.md")],
        [
            use("c1", "memory", command="create", path="/memories/standards/mine.md", file_text="x"),
            use("c2", "memory", command="create", path="/memories/style-notes.md", file_text="wrap at 100\n"),
        ],
        [use("s2", "memory_search", query="wrap", limit=5)],
        [{"type": "text", "text": "Done."}],
    ]
    seen: list[dict[str, Any]] = []
    client = Anthropic(api_key="test-key", http_client=scripted_client(script, seen), max_retries=0)
    runner = client.beta.messages.tool_runner(
        model="claude-scripted",
        max_tokens=100,
        system=memory_stores_prompt(memory, own_description="What you learned about this user."),
        tools=[tool, tool.search_tool()],
        messages=[{"role": "user", "content": "How wide may lines be?"}],
    )
    assert runner.until_done().content[0].text == "Done."  # type: ignore[union-attr]
    assert seen[0]["tools"][1]["name"] == "memory_search"
    assert seen[0]["tools"][1]["input_schema"]["required"] == ["query"]
    assert 'path="/memories/standards/" access="read_only"' in seen[0]["system"]

    def results(turn: int) -> dict[str, dict[str, Any]]:
        blocks = seen[turn]["messages"][-1]["content"]
        return {b["tool_use_id"]: b for b in blocks if b["type"] == "tool_result"}

    assert text_of(results(1)["s1"]["content"]) == (
        'Found 1 file matching "wrap columns" (searched 1 file):\n'
        "/memories/standards/style.md\n     2\tWrap at 100 columns."
    )
    assert "     2\tWrap at 100 columns." in text_of(results(2)["v1"]["content"])
    refused, created = results(3)["c1"], results(3)["c2"]
    assert refused["is_error"] is True
    assert text_of(refused["content"]) == (
        "Error: Cannot create /memories/standards/mine.md: /memories/standards is mounted read-only"
    )
    assert not created.get("is_error")
    assert text_of(results(4)["s2"]["content"]).splitlines()[1:] == [
        "/memories/standards/style.md",
        "     2\tWrap at 100 columns.",
        "/memories/style-notes.md",
        "     1\twrap at 100",
    ]


def test_searching_a_read_only_mount_writes_nothing_there(
    seeded: tuple[Recording, dict[str, Any], MountedMemory],
) -> None:
    store, _, memory = seeded
    standards = memory.mounted["standards"][1]
    assert memory.search("tabs") and memory.search("mypy")
    assert store.inner.head(standards.layout.index_key) is None  # the read-only store's index: never written
    assert store.inner.head(memory.own.layout.index_key) is not None  # the user's own: written back


def test_the_async_search_tool() -> None:
    import anyio

    from s3memory import AsyncS3MemoryTool

    store = InMemoryStore()
    _seed(store, {"master_key": MASTER_KEY}, "org-standards", {"/memories/style.md": "Use tabs.\n"})
    memory = _mounted(store, {"master_key": MASTER_KEY}, [Mount("standards", "org-standards")])
    tool = AsyncS3MemoryTool(memory=memory).search_tool()
    assert tool.name == "memory_search" and tool.to_dict()["input_schema"]["required"] == ["query"]

    async def scenario() -> None:
        assert await tool.call({"query": "tabs"}) == (
            'Found 1 file matching "tabs" (searched 1 file):\n/memories/standards/style.md\n     1\tUse tabs.'
        )

    anyio.run(scenario)


def test_the_mounted_store_itself_refuses_every_change(seeded: tuple[Recording, dict[str, Any], MountedMemory]) -> None:
    """Defence in depth: the router refuses first, and the read-only store refuses too."""
    store, _, memory = seeded
    standards = memory.mounted["standards"][1]
    store.requests.clear()
    for change in (
        lambda: standards.create("/memories/standards/n.md", "x"),
        lambda: standards.delete("/memories/standards/style.md"),
        lambda: standards.rename("/memories/standards/style.md", "/memories/standards/s.md"),
        lambda: standards.restore("/memories/standards/style.md", "v1"),
        lambda: standards.redact("/memories/standards/style.md", "v1"),
        lambda: standards.approve("pending-1"),
        lambda: standards.reject("pending-1"),
        standards.clear_all,
    ):
        with pytest.raises(ReadOnlyMountError, match=r": /memories/standards is mounted read-only$"):
            change()
    assert store.requests == []


def test_lifecycle_functions_refuse_a_read_only_store(seeded: tuple[Recording, dict[str, Any], MountedMemory]) -> None:
    from s3memory import (
        erase_tenant,
        expire_memories,
        expire_noncurrent_versions,
        rewrap_tenant_key,
        rotate_tenant_key,
    )

    store, _, memory = seeded
    standards = memory.mounted["standards"][1]
    store.requests.clear()
    for change in (
        lambda: expire_memories(standards, older_than_days=0, delete=True),
        lambda: rotate_tenant_key(standards),
        lambda: erase_tenant(standards),
        lambda: rewrap_tenant_key(standards, bytes(32)),
        lambda: expire_noncurrent_versions(standards),
    ):
        with pytest.raises(ReadOnlyMountError, match=r": /memories/standards is mounted read-only$"):
            change()
    assert store.requests == []
    assert len(expire_memories(standards, older_than_days=0).stale) == 2  # listing is reading


def test_a_router_built_by_hand_must_match_its_mounts() -> None:
    store = InMemoryStore()
    own = open_memory(user_id="alice", store=store, master_key=MASTER_KEY)
    team = open_memory(user_id="teamstore", store=store, master_key=MASTER_KEY)  # not opened as a mount
    with pytest.raises(ConfigurationError, match="opened at /memories/team with read_only=True"):
        MountedMemory(own, [(Mount("team", "teamstore"), team)])
    with pytest.raises(ConfigurationError, match="own store"):
        MountedMemory(own, [(Mount("me", "alice"), own)])


def test_a_rename_onto_or_of_the_root_keeps_the_contract_strings(
    seeded: tuple[Recording, dict[str, Any], MountedMemory],
) -> None:
    _, _, memory = seeded
    with pytest.raises(PathExistsError, match=r"^Error: The destination /memories already exists$"):
        memory.rename("/memories/team/plan.md", "/memories")
    with pytest.raises(InvalidCommandError, match=r"^Error: Cannot rename the /memories directory itself$"):
        memory.rename("/memories", "/memories/x")


def test_listing_hidden_names_through_the_tree() -> None:
    from s3memory import MemoryAdmin

    memory = open_memory(
        user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, mounts=[Mount("team", "t1", access="read_write")]
    )
    memory.create("/memories/.hidden", "x")
    memory.create("/memories/team/.h2", "y")
    memory.create("/memories/a", "z")
    admin = MemoryAdmin(memory)
    assert [i.path for i in admin.list("/memories/.")] == ["/memories/.hidden"]
    assert [i.path for i in admin.list("/memories/team/.")] == ["/memories/team/.h2"]
    assert [i.path for i in admin.list("/memories/t")] == ["/memories/team/.h2"]
