"""Data governance in the commands: per-user quotas, capped views, access tracking and expiry."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import pytest
from helpers import BUCKET

from s3memory import EncryptedMemory, LimitExceededError, Limits
from s3memory._admin.expiry import SECONDS_PER_DAY, expire_memories
from s3memory._core.access import ACCESS_MARKERS, AccessLog
from s3memory.stores import InMemoryStore, ObjectStore

MakeMemory = Callable[..., EncryptedMemory]
DAY = SECONDS_PER_DAY


def stored_files(memory: EncryptedMemory) -> dict[str, bytes]:
    out = {}
    for info in memory.store.list(memory.layout.memory_prefix):
        stored = memory.store.get(info.key)
        assert stored is not None
        out[info.key] = stored.body
    return out


# -- quotas ---------------------------------------------------------------------------------
@pytest.mark.parametrize("flavour", ["inmemory", "s3-tenant-local"])
def test_file_quota_refuses_the_next_create_and_writes_nothing(make_memory: MakeMemory, flavour: str) -> None:
    memory = make_memory(flavour, limits=Limits(max_tenant_files=2))
    memory.create("/memories/a.md", "a")
    memory.create("/memories/d/b.md", "b")
    before = stored_files(memory)
    with pytest.raises(LimitExceededError) as refused:
        memory.create("/memories/c.md", "c")
    assert str(refused.value) == (
        "Error: Writing /memories/c.md would make this memory hold 3 files, over its quota of 2. "
        "Nothing was written; delete or condense memories you no longer need first."
    )
    assert stored_files(memory) == before
    memory.delete("/memories/a.md")  # room again
    assert memory.create("/memories/c.md", "c") == "File created successfully at: /memories/c.md"


@pytest.mark.parametrize("flavour", ["inmemory", "s3-tenant-local"])
def test_byte_quota_covers_creates_and_growing_edits(make_memory: MakeMemory, flavour: str) -> None:
    memory = make_memory(flavour, limits=Limits(max_tenant_bytes=100))
    memory.create("/memories/a.md", "x" * 60)
    with pytest.raises(LimitExceededError, match="would make this memory hold 101 bytes, over its quota of 100"):
        memory.create("/memories/b.md", "y" * 41)
    memory.create("/memories/b.md", "y" * 40)  # exactly the quota
    before = stored_files(memory)
    with pytest.raises(LimitExceededError, match="hold 101 bytes"):
        memory.str_replace("/memories/a.md", "x" * 60, "x" * 61)
    with pytest.raises(LimitExceededError):
        memory.insert("/memories/b.md", 0, "more")
    assert stored_files(memory) == before
    # shrinking is always allowed, even at the quota
    assert memory.str_replace("/memories/a.md", "x" * 60, "short").startswith("The memory file has been edited.")


def test_the_quota_is_per_user(make_memory: MakeMemory) -> None:
    alice = make_memory("inmemory", "alice", limits=Limits(max_tenant_files=1))
    bob = make_memory("inmemory", "bob", limits=Limits(max_tenant_files=1))
    alice.create("/memories/a.md", "a")
    assert bob.create("/memories/b.md", "b").startswith("File created")


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "10"])
def test_invalid_quota_is_a_configuration_error(bad: Any) -> None:
    from s3memory import ConfigurationError

    with pytest.raises(ConfigurationError, match="positive integer or None"):
        Limits(max_tenant_bytes=bad)
    with pytest.raises(ConfigurationError, match="positive integer"):
        Limits(max_view_chars=bad)


# -- capped views ---------------------------------------------------------------------------
def test_a_long_file_is_cut_at_a_line_with_a_paging_notice(make_memory: MakeMemory) -> None:
    memory = make_memory("inmemory", limits=Limits(max_view_chars=1_000))
    text = "\n".join(f"line {n:03d} " + "." * 40 for n in range(1, 201))
    memory.create("/memories/long.md", text)
    shown = memory.view("/memories/long.md")
    assert len(shown) <= 1_000
    body = shown.split("\n")[1:-1]
    last = len(body)
    assert body == [f"{n:>6}\tline {n:03d} " + "." * 40 for n in range(1, last + 1)]  # whole lines only
    assert shown.split("\n")[-1] == (
        f"[Output truncated at 1,000 characters: showing lines 1-{last} of 200. "
        f"Call view again with view_range=[{last + 1}, {2 * last}] to read on.]"
    )
    # following the notice pages through the whole file
    seen, start = [], 1
    while True:
        page = memory.view("/memories/long.md", [start, -1])
        lines = [line for line in page.split("\n")[1:] if not line.startswith("[Output truncated")]
        seen += [line.split("\t", 1)[1] for line in lines]
        if not page.endswith("to read on.]"):
            break
        start += len(lines)
    assert seen == text.split("\n")


def test_a_single_huge_line_is_cut_and_says_so(make_memory: MakeMemory) -> None:
    memory = make_memory("inmemory", limits=Limits(max_view_chars=1_000))
    memory.create("/memories/one.md", "z" * 5_000)
    shown = memory.view("/memories/one.md")
    assert len(shown) <= 1_000
    assert shown.endswith("[Output truncated: line 1 alone is longer than 1,000 characters and is cut.]")


def test_short_files_and_listings_are_untouched_by_the_cap(make_memory: MakeMemory) -> None:
    memory = make_memory("inmemory")
    memory.create("/memories/a.md", "hello\n")
    expected = "Here's the content of /memories/a.md with line numbers:\n     1\thello\n     2\t"
    assert memory.view("/memories/a.md") == expected


def test_a_long_listing_is_cut_with_a_notice(make_memory: MakeMemory) -> None:
    memory = make_memory("inmemory", limits=Limits(max_view_chars=1_000))
    for n in range(60):
        memory.create(f"/memories/notes/file-{n:02d}.md", "x")
    listing = memory.view("/memories")
    assert len(listing) <= 1_000
    kept = [line for line in listing.split("\n")[1:] if line.startswith(("1", "6"))]
    more = 2 + 60 - len(kept)  # root, notes/, 60 files
    assert listing.endswith(f"[Listing truncated: {more} more entries. View a subdirectory to see them.]")


# -- access tracking and expiry ---------------------------------------------------------------
class CountingStore(InMemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.puts: list[str] = []

    def put(self, key: str, body: bytes, metadata: Any, **kwargs: Any) -> str:
        self.puts.append(key)
        return super().put(key, body, metadata, **kwargs)


def open_tracked(store: ObjectStore, **options: Any) -> EncryptedMemory:
    from helpers import MASTER_KEY

    from s3memory import KeyCache, open_memory

    memory = open_memory(
        user_id="ada", store=store, master_key=MASTER_KEY, key_cache=KeyCache(), track_access=True, **options
    )
    memory.access_log = AccessLog()  # this memory's own log: no state shared with other tests
    return memory


def test_a_read_is_recorded_once_a_day_per_file() -> None:
    store = CountingStore()
    memory = open_tracked(store)
    memory.create("/memories/a.md", "a")
    memory.create("/memories/b.md", "b")
    store.puts.clear()
    for _ in range(3):
        memory.view("/memories/a.md")
        memory.view("/memories/b.md")
        memory.view("/memories")  # listings are not reads of a file
    markers = [key for key in store.puts if ACCESS_MARKERS in key]
    assert len(markers) == 2 and len(set(markers)) == 2 and store.puts == markers
    assert all(key.startswith("ada/.s3memory/access/") for key in markers)
    assert not any("a.md" in key or "b.md" in key for key in markers)  # names stay out of marker keys
    memory.view("/memories")
    assert memory.view("/memories").count("/memories/") == 2  # markers are internal: never listed


def test_without_tracking_a_read_writes_nothing(make_memory: MakeMemory) -> None:
    store = CountingStore()
    memory = open_tracked(store)
    memory.track_access = False
    memory.create("/memories/a.md", "a")
    store.puts.clear()
    memory.view("/memories/a.md")
    assert store.puts == []


def test_a_failing_marker_never_fails_the_read(caplog: Any) -> None:
    from s3memory import StorageAccessDeniedError

    class RefusingMarkers(InMemoryStore):
        def put(self, key: str, body: bytes, metadata: Any, **kwargs: Any) -> str:
            if ACCESS_MARKERS in key:
                raise StorageAccessDeniedError("Error: access denied")
            return super().put(key, body, metadata, **kwargs)

    memory = open_tracked(RefusingMarkers())
    memory.create("/memories/a.md", "a")
    assert memory.view("/memories/a.md").endswith("1\ta")
    assert "could not record an access" in caplog.text


def test_expiry_finds_deletes_and_keeps_what_was_used() -> None:
    store = InMemoryStore()
    memory = open_tracked(store)
    for name in ("read.md", "unread.md", "d/unread2.md"):
        memory.create(f"/memories/{name}", name)
    now = time.time()
    later = now + 40 * DAY
    # 40 days on, nothing was touched: all three are stale
    stale = expire_memories(memory, older_than_days=30, now=later).stale
    assert [s.path for s in stale] == ["/memories/d/unread2.md", "/memories/read.md", "/memories/unread.md"]
    assert {s.size for s in stale} == {len("read.md"), len("unread.md"), len("d/unread2.md")}
    # a read (recorded by its marker) keeps a file fresh; pretend the others were written long ago
    memory.view("/memories/read.md")
    for key, versions in list(store._versions.items()):  # the in-memory store's own clock, turned back
        if ACCESS_MARKERS not in key:
            latest = versions[-1]
            assert latest.stored is not None
            backdated = dataclasses.replace(latest.stored, last_modified=now - 40 * DAY)
            versions[-1] = dataclasses.replace(latest, stored=backdated, last_modified=now - 40 * DAY)
    report = expire_memories(memory, older_than_days=30, now=now)
    assert [s.path for s in report.stale] == ["/memories/d/unread2.md", "/memories/unread.md"]
    assert report.deleted == []  # listing only, for review
    assert memory.view("/memories/unread.md")  # still there (and now read: fresh)

    report = expire_memories(memory, older_than_days=30, delete=True, now=now)
    assert report.deleted == ["/memories/d/unread2.md"]
    assert sorted(memory.layout.path_for_key(i.key).display for i in store.list(memory.layout.memory_prefix)) == [  # type: ignore[union-attr]
        "/memories/read.md",
        "/memories/unread.md",
    ]


def test_expiry_keeps_files_written_after_the_listing_and_drops_orphan_markers(monkeypatch: pytest.MonkeyPatch) -> None:
    store = InMemoryStore()
    memory = open_tracked(store)
    memory.create("/memories/a.md", "a")
    memory.create("/memories/b.md", "b")
    memory.view("/memories/b.md")
    memory.rename("/memories/b.md", "/memories/c.md")  # b's marker is now an orphan
    original_delete = store.delete

    def edit_then_delete(keys: Any, *, if_match: Any = None) -> None:
        if if_match:  # the expiry's conditional delete: someone edits a.md just before it
            memory.insert("/memories/a.md", 0, "fresh")
        original_delete(keys, if_match=if_match)

    monkeypatch.setattr(store, "delete", edit_then_delete)
    report = expire_memories(memory, older_than_days=0, delete=True, now=time.time() + DAY)
    assert report.kept_changed == ["/memories/a.md"] and report.deleted == ["/memories/c.md"]
    markers = [i.key for i in store.list(memory.layout.internal_prefix + ACCESS_MARKERS)]
    assert markers == []  # the orphan and the deleted file's marker are gone
    assert report.markers_removed >= 1
    assert memory.read_text("/memories/a.md") == "fresh\na\n"


@pytest.mark.parametrize("bad", [-1, True, "30"])
def test_expiry_refuses_bad_ages(bad: Any) -> None:
    from s3memory import ConfigurationError

    with pytest.raises(ConfigurationError):
        expire_memories(open_tracked(InMemoryStore()), older_than_days=bad)


def test_last_modified_comes_from_every_store(make_memory: MakeMemory, flavour: str) -> None:
    memory = make_memory(flavour)
    before = time.time() - 5
    memory.create("/memories/a.md", "a")
    (info,) = list(memory.store.list(memory.layout.memory_prefix))
    assert before <= info.last_modified <= time.time() + 5


# -- the sensitive-data guard in the commands ---------------------------------------------------
AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"  # AWS's documented example key id, assembled at run time


@pytest.mark.parametrize("flavour", ["inmemory", "s3-tenant-local"])
def test_refuse_is_the_default_and_writes_nothing(make_memory: MakeMemory, flavour: str) -> None:
    from s3memory._screening.secrets import SensitiveDataError

    memory = make_memory(flavour)
    memory.create("/memories/a.md", "first line\n")
    before = stored_files(memory)
    attempts: list[Callable[[], str]] = [
        lambda: memory.create("/memories/b.md", f"deploy key: {AWS_KEY}\n"),
        lambda: memory.str_replace("/memories/a.md", "first", f"key {AWS_KEY}"),
        lambda: memory.insert("/memories/a.md", 1, f"{AWS_KEY}"),
    ]
    for attempt in attempts:
        with pytest.raises(SensitiveDataError) as refused:
            attempt()
        assert "AWS access key" in str(refused.value) and "Nothing was written" in str(refused.value)
        assert AWS_KEY[4:] not in str(refused.value)
    assert stored_files(memory) == before


def test_redact_replaces_the_secret_and_keeps_the_rest(make_memory: MakeMemory) -> None:
    memory = make_memory("inmemory", sensitive_data="redact")
    memory.create("/memories/a.md", f"deploy key: {AWS_KEY} (rotated monthly)\n")
    memory.insert("/memories/a.md", 1, f"old: {AWS_KEY}")
    assert memory.read_text("/memories/a.md") == (
        "deploy key: [REDACTED: AWS access key] (rotated monthly)\nold: [REDACTED: AWS access key]\n"
    )


def test_allow_and_custom_screens(make_memory: MakeMemory) -> None:
    memory = make_memory("inmemory", sensitive_data="allow")
    memory.create("/memories/a.md", AWS_KEY)
    assert memory.read_text("/memories/a.md") == AWS_KEY
    shouting = make_memory("inmemory", "bob", sensitive_data=lambda text: text.replace("quiet", "QUIET"))
    shouting.create("/memories/a.md", "quiet")
    assert shouting.read_text("/memories/a.md") == "QUIET"
    from s3memory import ConfigurationError

    with pytest.raises(ConfigurationError):
        make_memory("inmemory", sensitive_data="sometimes")


def test_the_model_gets_a_tool_error_naming_the_kind(s3memory_tool: Any) -> None:
    from anthropic.lib.tools import ToolError

    with pytest.raises(ToolError) as refused:
        s3memory_tool.call({"command": "create", "path": "/memories/k.md", "file_text": f"my key is {AWS_KEY}"})
    assert "AWS access key" in str(refused.value) and AWS_KEY not in str(refused.value)


def test_access_markers_are_tagged_for_the_lifecycle_rule(s3_client: Any) -> None:
    """The bucket lifecycle rule `s3memory policy` emits expires markers by their tag."""
    from helpers import BUCKET, MASTER_KEY

    from s3memory import KeyCache, lifecycle_configuration, open_memory

    memory = open_memory(
        user_id="ada",
        bucket=BUCKET,
        s3_client=s3_client,
        master_key=MASTER_KEY,
        key_cache=KeyCache(),
        track_access=True,
    )
    memory.access_log = AccessLog()
    memory.create("/memories/a.md", "a")
    memory.view("/memories/a.md")
    (marker,) = [o["Key"] for o in s3_client.list_objects_v2(Bucket=BUCKET, Prefix="ada/.s3memory/access/")["Contents"]]
    tags = {t["Key"]: t["Value"] for t in s3_client.get_object_tagging(Bucket=BUCKET, Key=marker)["TagSet"]}
    rules = lifecycle_configuration()["Rules"]
    tagged = [rule for rule in rules if "Tag" in rule.get("Filter", {})]
    assert len(tagged) == 1 and tags == {tagged[0]["Filter"]["Tag"]["Key"]: tagged[0]["Filter"]["Tag"]["Value"]}


def test_an_access_log_of_its_own_is_a_keyword_of_open_memory() -> None:
    """Two memories on one store with logs of their own each record the day's first read;
    with the shared default, the second memory's read is already known (one PUT a day)."""
    from s3memory import AccessLog, InMemoryStore, generate_master_key, open_memory

    store, key = InMemoryStore(), generate_master_key()
    options = {"user_id": "alice", "store": store, "master_key": key, "track_access": True}
    first = open_memory(**options, access_log=AccessLog())  # type: ignore[arg-type]
    first.create("/memories/a.md", "x")
    puts: list[str] = []
    original = store.put

    def counting_put(key: str, *args: object, **kwargs: object) -> str:
        puts.append(key)
        return original(key, *args, **kwargs)  # type: ignore[arg-type]

    store.put = counting_put  # type: ignore[method-assign]
    first.view("/memories/a.md")
    second = open_memory(**options, access_log=AccessLog())  # type: ignore[arg-type]
    second.view("/memories/a.md")
    first.view("/memories/a.md")
    assert len([k for k in puts if "/.s3memory/access/" in k]) == 2  # one per log, not per read


# -- a command that fails writes nothing ------------------------------------------------------
def _failing_commands(memory: EncryptedMemory) -> dict[str, Callable[[], object]]:
    missing = "/memories/missing.md"
    return {
        "view": lambda: memory.view(missing),
        "history": lambda: memory.history(missing),
        "read_version": lambda: memory.read_version(missing, "0123456789abcdef"),
        "restore": lambda: memory.restore(missing, "0123456789abcdef"),
        "redact": lambda: memory.redact(missing, "0123456789abcdef"),
        "delete": lambda: memory.delete(missing),
        "rename": lambda: memory.rename(missing, "/memories/elsewhere.md"),
        "str_replace": lambda: memory.str_replace(missing, "a", "b"),
        "insert": lambda: memory.insert(missing, 0, "b"),
        "create refused by the guard": lambda: memory.create(missing, "aws_access_key_id=AKIAIOSFODNN7EXAMPLE"),
    }


def _every_version(memory: EncryptedMemory) -> list[str]:
    return [f"{v.key}@{v.version_id}" for v in memory.store.list_versions("")]


@pytest.mark.parametrize("flavour", ["inmemory", "s3-tenant-local", "s3-tenant-kms", "s3-kms"])
@pytest.mark.parametrize("encrypt_names", [False, True])
def test_a_command_that_fails_leaves_a_new_user_as_it_found_them(
    make_memory: MakeMemory, flavour: str, encrypt_names: bool, request: pytest.FixtureRequest
) -> None:
    """Reads and refusals on a user with no keys yet make no key (tenant, history or names
    key) and no other object: keys are made by the first write."""
    if flavour != "inmemory":  # a bucket that keeps versions: the history key is at stake too
        request.getfixturevalue("s3_client").put_bucket_versioning(
            Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"}
        )
    memory = make_memory(flavour, encrypt_names=encrypt_names)
    assert memory.store.keeps_versions()
    for name, command in _failing_commands(memory).items():
        try:
            command()
        except Exception:  # each is refused in its own words: only the bucket matters here
            pass
        assert _every_version(memory) == [], name
    memory.create("/memories/a.md", "x")  # the first write makes what it needs
    assert memory.view("/memories/a.md").endswith("\tx")


def test_a_failed_restore_under_a_forgotten_kms_key_does_not_lock_the_user_out(
    make_memory: MakeMemory, s3_client: Any
) -> None:
    """The failed command was run with the local master key where the KMS one was meant: it
    stored no tenant or history key wrapped by the wrong master, so the right one works after."""
    s3_client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    wrong = make_memory("s3-tenant-local")
    with pytest.raises(Exception, match="no version"):
        wrong.restore("/memories/a.md", "0123456789abcdef")
    right = make_memory("s3-tenant-kms")
    right.create("/memories/a.md", "kept")
    right.rename("/memories/a.md", "/memories/b.md")
    assert right.view("/memories/b.md").endswith("\tkept")
    assert [v.operation for v in right.history("/memories/b.md")] == ["renamed", "created"]
