"""Bulk operations report progress, for the CLI's bars: rename and key rotation."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from s3memory import InMemoryStore, PathExistsError, generate_master_key, open_memory, rotate_tenant_key


def recorder() -> tuple[list[tuple[int, int]], Callable[[int, int], None]]:
    calls: list[tuple[int, int]] = []
    lock = threading.Lock()

    def progress(done: int, total: int) -> None:
        with lock:
            calls.append((done, total))

    return calls, progress


def test_rename_reports_each_copied_file() -> None:
    memory = open_memory(user_id="alice", store=InMemoryStore(), master_key=generate_master_key())
    for i in range(40):
        memory.create(f"/memories/d/{i}.md", str(i))
    calls, progress = recorder()
    assert memory.rename("/memories/d", "/memories/e", progress=progress) == (
        "Successfully renamed /memories/d to /memories/e"
    )
    assert sorted(calls) == [(n, 40) for n in range(1, 41)]
    calls.clear()
    memory.rename("/memories/e/0.md", "/memories/zero.md", progress=progress)
    assert calls == [(1, 1)]


def test_a_refused_rename_reports_nothing() -> None:
    memory = open_memory(user_id="alice", store=InMemoryStore(), master_key=generate_master_key())
    calls, progress = recorder()
    memory.create("/memories/a.md", "a")
    memory.create("/memories/b.md", "b")
    with pytest.raises(PathExistsError):
        memory.rename("/memories/a.md", "/memories/b.md", progress=progress)
    assert calls == []


def test_rotation_reports_each_object_of_each_pass() -> None:
    memory = open_memory(user_id="alice", store=InMemoryStore(), master_key=generate_master_key())
    for i in range(25):
        memory.create(f"/memories/{i}.md", str(i))
    calls, progress = recorder()
    report = rotate_tenant_key(memory, retire_after=0, progress=progress)
    assert report.rewrapped == 25
    assert calls[:25] == [(n, 25) for n in range(1, 26)]  # in order, from the calling thread
    assert len(calls) == 25 * report.passes
