"""What a call of the local store asks of the kernel, and that asking less changes nothing.

- a directory several names down is opened in one call that follows no link (``openat2``,
  where the kernel has it), and a link anywhere on a key's way is never followed, whichever
  way the directory is opened, nor a link swapped in between two calls of a batch;
- a small object is read in one call (header, metadata and body), a large one header first;
  the file a write replaces is read in one call too;
- a write's file is written in one call, and whole when the kernel writes less at once;
- a history record (``put_unique``) never looks into the version area, and a write into a
  directory it made looks for nothing in its way there;
- temporary names are unique, and drawn anew in a forked child.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from helpers.localdir import META, RecordedOpens, snapshot

from s3memory import LocalDirStore, PreconditionFailedError, StorageError
from s3memory.stores._localdir import files as _localfiles

# --- directories ---------------------------------------------------------------------------


def test_a_directory_several_names_down_is_opened_in_one_call(store: LocalDirStore) -> None:
    if not _localfiles.can_open_beneath():
        pytest.skip("no openat2 here")
    store.put("t/a/b/c/obj", b"x", META)
    with RecordedOpens() as opened:
        got = store.get("t/a/b/c/obj")
    assert got is not None and got.body == b"x"
    assert opened.at_once == ["t/a/b/c"]
    assert opened.names == [str(store.root), "t/a/b/c", "obj"]  # the root, the directory, the file


def test_a_directory_the_batch_holds_the_parent_of_is_opened_by_name(store: LocalDirStore) -> None:
    store.put("t/a/b/one", b"1", {})
    store.put("t/a/b/c/two", b"2", {})
    with store.batch(), RecordedOpens() as opened:
        assert store.get("t/a/b/one") is not None
        assert store.get("t/a/b/c/two") is not None
    assert opened.names[-2:] == ["c", "two"]  # t/a/b is the batch's: c is opened from it


@pytest.mark.parametrize("linked", ["t", "t/a", "t/a/b"])
def test_a_link_anywhere_on_a_key_s_way_is_never_followed(
    store: LocalDirStore, outside: Path, resolving: str, linked: str
) -> None:
    before = snapshot(outside)
    store.put("t/a/b/real", b"real", {})
    store.put("t/a/b/real", b"again", {})  # a version kept
    moved = store.root / "moved"
    (store.root / linked).rename(moved)
    (store.root / linked).symlink_to(outside / "dir")
    assert store.get("t/a/b/sub/obj") is None and store.head("t/a/b/obj") is None
    assert list(store.list("t/")) == [] and list(store.list("t/a/b/")) == []
    with pytest.raises(StorageError, match="in the way"):
        store.put("t/a/b/sub/obj", b"x", {})
    with pytest.raises(PreconditionFailedError):
        store.copy("t/a/b/obj", "u/obj", metadata={})
    store.delete(["t/a/b/obj", "t/a/b/sub/obj"])
    assert store.purge("t/") == 1  # the version of t/a/b/real the version area holds; its file is out of reach
    (store.root / linked).unlink()
    moved.rename(store.root / linked)
    assert store.get("t/a/b/real") is not None  # not purged: its way was a link
    assert snapshot(outside) == before


def test_a_link_in_the_version_area_is_never_followed(store: LocalDirStore, outside: Path, resolving: str) -> None:
    before = snapshot(outside)
    store.put("t/a/b/obj", b"v1", {})
    (store.root / ".versions").mkdir(mode=0o700, exist_ok=True)
    (store.root / ".versions" / "t").symlink_to(outside / "dir")
    with pytest.raises(StorageError, match="in the way"):
        store.put("t/a/b/obj", b"v2", {})  # its version would be kept through the link
    got = store.get("t/a/b/obj")
    assert got is not None and got.body == b"v1"
    assert [v.key for v in store.list_versions("t/")] == ["t/a/b/obj"]
    assert snapshot(outside) == before


def test_a_directory_swapped_for_a_link_within_a_batch_is_not_followed(
    store: LocalDirStore, outside: Path, resolving: str
) -> None:
    """The batch holds ``t/a/b`` open from the first call; the second call, under the lock,
    finds it removed and opens the way again, which is now a link."""
    before = snapshot(outside)
    store.put("t/a/b/one", b"1", {})
    with store.batch():
        assert store.get("t/a/b/one") is not None
        (store.root / "t" / "a" / "b" / "one").unlink()
        (store.root / "t" / "a" / "b").rmdir()
        (store.root / "t" / "a" / "b").symlink_to(outside / "dir")
        with pytest.raises(StorageError, match="in the way"):
            store.put("t/a/b/obj", b"overwritten", {})
    assert snapshot(outside) == before


# --- reads and writes ----------------------------------------------------------------------


def test_a_small_object_is_read_in_one_call_and_a_large_one_header_first(
    store: LocalDirStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.put("t/small", b"s" * 1000, META)
    store.put("t/large", b"l" * 200_000, META)
    reads: list[tuple[int, int]] = []
    real_pread = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, at: reads.append((n, at)) or real_pread(fd, n, at))
    small = store.get("t/small")
    assert small is not None and small.body == b"s" * 1000 and small.metadata == META
    assert len(reads) == 1 and reads[0][1] == 0 and reads[0][0] == (store.root / "t" / "small").stat().st_size
    reads.clear()
    large = store.get("t/large")
    assert large is not None and large.body == b"l" * 200_000
    assert reads[0] == (33, 0) and sum(n for n, _ in reads) == (store.root / "t" / "large").stat().st_size


def test_a_write_reads_the_small_file_it_replaces_in_one_call(
    store: LocalDirStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.put("t/a", b"one", META)
    size = (store.root / "t" / "a").stat().st_size
    reads: list[int] = []
    real_pread = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, at: reads.append(n) or real_pread(fd, n, at))
    store.put("t/a", b"two", META)
    assert reads == [size]
    assert [v.size for v in store.list_versions("t/a")] == [3, 3]


def test_a_file_the_kernel_writes_in_parts_is_written_whole(
    store: LocalDirStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_writev = os.writev

    def short_writev(fd: int, parts: Sequence[bytes]) -> int:
        return real_writev(fd, [bytes(parts[0])[:7]])  # the first seven bytes only

    monkeypatch.setattr(os, "writev", short_writev)
    store.put("t/a", b"body" * 1000, META)
    store.put("t/b", b"", {})
    got = store.get("t/a")
    assert got is not None and got.body == b"body" * 1000 and got.metadata == META
    assert store.get("t/b") is not None


def test_a_history_record_never_looks_into_the_version_area(store: LocalDirStore) -> None:
    store.put("t/a", b"one", {})
    store.put("t/a", b"two", {})  # the version area exists
    with RecordedOpens() as opened:
        store.put_unique("t/.s3memory/history/tag/r1/r2", b"", {})
        store.put_unique("t/.s3memory/history/tag/r3/r4", b"", {})
    assert not [name for name in opened.names if ".versions" in name]
    assert [i.key for i in store.list("t/.s3memory/")] == [
        "t/.s3memory/history/tag/r1/r2",
        "t/.s3memory/history/tag/r3/r4",
    ]


def test_a_write_into_a_directory_it_made_looks_for_nothing_in_its_way(
    store: LocalDirStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    looked: list[str] = []
    real_stat = os.stat
    monkeypatch.setattr(os, "stat", lambda name, *a, **k: looked.append(str(name)) or real_stat(name, *a, **k))
    store.put("t/new/a", b"a", {})
    assert "a" not in looked
    store.put("t/new/b", b"b", {})  # into a directory there already: an empty one in the way is cleared
    assert "b" in looked
    (store.root / "t" / "new" / "c").mkdir(mode=0o700)  # an empty directory left where a key goes
    store.put("t/new/c", b"c", {})
    assert [i.key for i in store.list("t/")] == ["t/new/a", "t/new/b", "t/new/c"]


# --- temporary names -------------------------------------------------------------------------


CHILD = """
import os
from s3memory.stores._localdir.files import temporary_name
reader, writer = os.pipe()
before = temporary_name()
child = os.fork()
if child == 0:
    os.write(writer, temporary_name().encode())
    os._exit(0)
os.waitpid(child, 0)
print(before, os.read(reader, 100).decode(), temporary_name())
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks")
def test_temporary_names_are_unique_and_drawn_anew_in_a_forked_child() -> None:
    names = {_localfiles.temporary_name() for _ in range(1000)}
    assert len(names) == 1000 and all(len(name) == 32 for name in names)
    # In a process of its own: a fork of this one (threads and all) is not what is tested.
    run = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=True)
    before, in_child, after = run.stdout.split()
    assert in_child[:16] != before[:16] == after[:16]  # the child draws a prefix of its own
    assert int(after[16:], 16) == int(before[16:], 16) + 1
