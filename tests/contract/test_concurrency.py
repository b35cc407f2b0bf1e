"""Many agents of one user at once: compare-and-swap loses nothing, creates have one winner."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from s3memory import EncryptedMemory, Limits, PathExistsError

THREADS = 8
LINES_PER_THREAD = 5


def run_threads(count: int, work: Callable[[int], None]) -> list[BaseException]:
    errors: list[BaseException] = []
    barrier = threading.Barrier(count)

    def body(i: int) -> None:
        try:
            barrier.wait()
            work(i)
        except BaseException as exc:  # collected and asserted on below
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


@pytest.mark.parametrize("flavour", ["inmemory", "localdir", "s3-tenant-local", "s3-kms", "rgw"])
def test_concurrent_inserts_lose_no_line(make_memory, flavour: str) -> None:  # type: ignore[no-untyped-def]
    limits = Limits(edit_attempts=60)
    make_memory(flavour).create("/memories/log.md", "# log\n")
    agents: list[EncryptedMemory] = [make_memory(flavour, limits=limits) for _ in range(THREADS)]

    def work(i: int) -> None:
        for n in range(LINES_PER_THREAD):
            agents[i].insert("/memories/log.md", 1, f"agent {i} line {n}")

    assert run_threads(THREADS, work) == []
    lines = make_memory(flavour).view("/memories/log.md").splitlines()[1:]
    written = sorted(line.split("\t", 1)[1] for line in lines[1:-1])
    assert written == sorted(f"agent {i} line {n}" for i in range(THREADS) for n in range(LINES_PER_THREAD))


@pytest.mark.parametrize("flavour", ["inmemory", "localdir", "s3-tenant-local", "s3-kms", "rgw"])
def test_concurrent_str_replace_each_applies_once(make_memory, flavour: str) -> None:  # type: ignore[no-untyped-def]
    slots = "\n".join(f"slot {i}: empty" for i in range(THREADS)) + "\n"
    make_memory(flavour).create("/memories/slots.md", slots)
    agents = [make_memory(flavour, limits=Limits(edit_attempts=60)) for _ in range(THREADS)]
    errors = run_threads(
        THREADS, lambda i: agents[i].str_replace("/memories/slots.md", f"slot {i}: empty", f"slot {i}: agent {i}")
    )
    assert errors == []
    view = make_memory(flavour).view("/memories/slots.md")
    assert all(f"slot {i}: agent {i}" in view for i in range(THREADS))


@pytest.mark.parametrize("flavour", ["inmemory", "localdir", "s3-tenant-local", "s3-kms", "rgw"])
def test_concurrent_creates_have_exactly_one_winner(make_memory, flavour: str) -> None:  # type: ignore[no-untyped-def]
    agents = [make_memory(flavour) for _ in range(THREADS)]
    winners: list[int] = []
    errors = run_threads(
        THREADS, lambda i: winners.append(i) if agents[i].create("/memories/one.md", f"by {i}") else None
    )
    assert len(winners) == 1
    assert len(errors) == THREADS - 1
    assert all(
        isinstance(e, PathExistsError) and str(e) == "Error: File /memories/one.md already exists" for e in errors
    )
    assert make_memory(flavour).view("/memories/one.md").endswith(f"\tby {winners[0]}")


@pytest.mark.parametrize("flavour", ["inmemory", "s3-tenant-local", "s3-tenant-kms"])
def test_concurrent_first_writers_agree_on_one_tenant_key(make_memory, flavour: str) -> None:  # type: ignore[no-untyped-def]
    agents = [make_memory(flavour) for _ in range(THREADS)]
    assert run_threads(THREADS, lambda i: agents[i].create(f"/memories/f{i}.md", str(i))) == []
    reader = make_memory(flavour)
    for i in range(THREADS):
        assert reader.view(f"/memories/f{i}.md").endswith(f"\t{i}")


def test_an_edit_that_loses_every_race_writes_nothing_and_says_so() -> None:
    """Contention is a lost precondition, not an unavailable store: before each ``If-Match``
    PUT another writer edits the file, so after ``edit_attempts`` tries the edit gives up,
    and the file is as the other writer left it."""
    from s3memory import InMemoryStore, KeyCache, PreconditionFailedError, StorageUnavailableError, open_memory
    from s3memory.stores import DelegatingStore

    inner = InMemoryStore()
    options = {"user_id": "alice", "master_key": bytes(range(32)), "key_cache": KeyCache()}
    other = open_memory(store=inner, **options)  # type: ignore[arg-type]
    other.create("/memories/a.md", "one\n")
    between: list[int] = []

    class RacingStore(DelegatingStore):
        def put(self, key, body, metadata, *, if_match=None, if_none_match=False):  # type: ignore[no-untyped-def,override]
            if if_match is not None:  # the other writer gets there first, every time
                between.append(len(between))
                other.insert("/memories/a.md", 0, f"other {len(between)}")
            return self.inner.put(key, body, metadata, if_match=if_match, if_none_match=if_none_match)

    memory = open_memory(store=RacingStore(inner), limits=Limits(edit_attempts=3), **options)  # type: ignore[arg-type]
    with pytest.raises(PreconditionFailedError) as info:
        memory.str_replace("/memories/a.md", "one", "two")
    assert not isinstance(info.value, StorageUnavailableError)
    assert str(info.value) == (
        "Error: /memories/a.md is being changed by others at the same time; the edit was not applied. Try again."
    )
    assert len(between) == 3
    assert other.read_text("/memories/a.md") == "other 3\nother 2\nother 1\none\n"
