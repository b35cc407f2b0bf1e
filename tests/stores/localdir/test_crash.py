"""The local store killed between any two steps of a write, copy or delete.

A child process opens the store, then runs one operation with the calls that change or
sync the tree (``replace``, ``rename``, ``link``, ``unlink``, ``mkdir``, ``rmdir``, ``utime``,
``fsync`` and ``syncfs``) counted, and ``os._exit(1)`` at the ``k``-th: the process dies
there as a crash would stop it, with no ``finally`` run. For every ``k`` until the operation
runs through, the parent reopens the store and checks that each key is as before or as
after (never missing, never corrupt) and that its versions list consistently and read.

This tests atomicity at every step. Durability across a power cut (which fsyncs make an
acknowledged write survive) is argued in ``s3memory.stores._localdir.batch``'s docstring.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from s3memory import LocalDirStore

pytestmark = pytest.mark.slow  # a child process killed at every step

CHILD = textwrap.dedent(
    """
    import os, sys
    from s3memory.stores import LocalDirStore
    from s3memory.stores._localdir import batch as _localbatch

    root, operation, step = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = LocalDirStore(root)
    calls = 0

    def dying(real):
        def call(*args, **kwargs):
            global calls
            calls += 1
            if calls == step:
                os._exit(1)
            return real(*args, **kwargs)
        return call

    for name in ("replace", "rename", "link", "unlink", "mkdir", "rmdir", "utime", "fsync"):
        setattr(os, name, dying(getattr(os, name)))
    _localbatch._syncfs = dying(_localbatch._syncfs)
    exec(operation)
    os._exit(0)
    """
)

History = list[bytes | None]  # a key's bodies, newest first (None: a delete marker)


def bodies(store: LocalDirStore, key: str) -> History:
    """``key``'s history, after checking that it lists consistently and every version reads."""
    listed = list(store.list_versions(key))
    listed = [v for v in listed if v.key == key]
    if listed:
        assert [v.is_latest for v in listed] == [True] + [False] * (len(listed) - 1)
    assert len({v.version_id for v in listed}) == len(listed)
    found: History = []
    for version in listed:
        got = store.get_version(key, version.version_id)
        assert (got is None) == version.is_delete_marker
        found.append(None if got is None else got.body)
    current = store.get(key)  # never corrupt: a read of the current object does not raise
    assert (None if current is None else current.body) == (found[0] if found else None)
    return found


# name, set-up, the operation (run in the child), and each key's histories before and after
Case = tuple[str, Callable[[LocalDirStore], None], str, dict[str, tuple[History, History]]]


def _two_versions(store: LocalDirStore) -> None:
    store.put("t/a", b"v1", {"n": "1"})
    store.put("t/a", b"v2", {"n": "2"})
    store.put("t/b", b"b1", {})


CASES: list[Case] = [
    (
        "overwrite",
        _two_versions,
        "store.put('t/a', b'v3', {'n': '3'})",
        {"t/a": ([b"v2", b"v1"], [b"v3", b"v2", b"v1"])},
    ),
    ("create", _two_versions, "store.put('t/new/c', b'c1', {})", {"t/new/c": ([], [b"c1"])}),
    (
        "copy-over",
        _two_versions,
        "store.copy('t/a', 't/b', metadata={'m': '1'})",
        {"t/a": ([b"v2", b"v1"], [b"v2", b"v1"]), "t/b": ([b"b1"], [b"v2", b"b1"])},
    ),
    (
        "delete",
        _two_versions,
        "store.delete(['t/a', 't/b'])",
        {"t/a": ([b"v2", b"v1"], [None, b"v2", b"v1"]), "t/b": ([b"b1"], [None, b"b1"])},
    ),
    (
        "copy-many",  # the files synced at once, then placed in order
        _two_versions,
        "store.copy_many([('t/a', 't/m/a', {}, None, True), ('t/b', 't/m/b', {}, None, True),"
        " ('t/b', 't/a', {}, None, False)])",
        {
            "t/m/a": ([], [b"v2"]),
            "t/m/b": ([], [b"b1"]),
            "t/a": ([b"v2", b"v1"], [b"b1", b"v2", b"v1"]),
            "t/b": ([b"b1"], [b"b1"]),
        },
    ),
    (
        "batch",  # one round trip's writes: the directories synced once, at the end
        _two_versions,
        "with store.batch():\n"
        "    store.put('t/a', b'v3', {})\n"
        "    store.copy('t/b', 't/d/b', metadata={})\n"
        "    store.put('t/e', b'e1', {})\n",
        {
            "t/a": ([b"v2", b"v1"], [b"v3", b"v2", b"v1"]),
            "t/d/b": ([], [b"b1"]),
            "t/e": ([], [b"e1"]),
            "t/b": ([b"b1"], [b"b1"]),
        },
    ),
    (
        "unique-beside-a-write",  # a history record's file, left to the batch's syncfs
        _two_versions,
        "with store.batch():\n    store.put('t/a', b'v3', {})\n    store.put_unique('t/r/1', b'r1', {})\n",
        {"t/a": ([b"v2", b"v1"], [b"v3", b"v2", b"v1"]), "t/r/1": ([], [b"r1"])},
    ),
]


@pytest.mark.parametrize(("setup", "operation", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_crash_between_any_two_steps_leaves_each_object_old_or_new(
    tmp_path: Path, setup: Callable[[LocalDirStore], None], operation: str, expected: dict[str, tuple[History, History]]
) -> None:
    step = 0
    while True:
        step += 1
        root = tmp_path / f"store{step}"
        setup(LocalDirStore(root))
        child = subprocess.run(
            [sys.executable, "-c", CHILD, str(root), operation, str(step)], capture_output=True, timeout=60
        )
        assert child.returncode in (0, 1), child.stderr.decode()
        assert not child.stderr, child.stderr.decode()
        reopened = LocalDirStore(root)
        for key, (before, after) in expected.items():
            found = bodies(reopened, key)
            assert found in (before, after), (step, key, found)
            if child.returncode == 0:
                assert found == after, (step, key, found)
        for info in reopened.list("t/"):  # no corrupt file is left where a listing finds it
            assert reopened.get(info.key) is not None
        reopened.put("t/a", b"next", {})  # and the store goes on working
        assert bodies(reopened, "t/a")[0] == b"next"
        if child.returncode == 0:
            break  # the operation ran through without reaching this step
    assert step > 3
