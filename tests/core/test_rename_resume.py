"""Resuming a rename whose source changed shape since the attempt that was interrupted.

Found by tests/contract/test_stateful.py: an attempt at renaming ``d`` to ``h/k.md`` copied
``d/e/e/z.md`` and failed before deleting anything; then ``d/e`` became a file. Re-issued, the
rename resumed over its own old copy and left a file ``h/k.md/e`` beside a directory
``h/k.md/e/`` (a file and a directory of one name). Now it refuses, and nothing is lost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest

from s3memory import InMemoryStore, PathExistsError, StorageUnavailableError, generate_master_key, open_memory
from s3memory.stores import DelegatingStore

T = TypeVar("T")


class FailingDeletes(DelegatingStore):
    """Deletes fail while ``failing``: a rename then stops after its copies, record left."""

    failing = True

    def _call(self, verb: str, perform: Callable[[], T]) -> T:
        if verb == "delete" and self.failing:
            raise StorageUnavailableError("Error: Memory storage failed during delete_objects: try again.")
        return perform()


@pytest.mark.parametrize("encrypt_names", [False, True])
def test_a_leftover_copy_in_the_way_refuses_the_resumed_rename(encrypt_names: bool) -> None:
    store = FailingDeletes(InMemoryStore())
    memory = open_memory(user_id="alice", store=store, master_key=generate_master_key(), encrypt_names=encrypt_names)
    memory.create("/memories/d/e/e/z.md", "deep")
    memory.create("/memories/d/z.md", "top")
    with pytest.raises(StorageUnavailableError):
        memory.rename("/memories/d", "/memories/h/k.md")  # copied, then failed: the record stays
    store.failing = False
    memory.delete("/memories/d/e")
    memory.create("/memories/d/e", "now a file")
    with pytest.raises(PathExistsError, match=r"^Error: The destination /memories/h/k.md already exists$"):
        memory.rename("/memories/d", "/memories/h/k.md")
    # nothing lost, nothing half-moved: the sources as they are, the old copies as they were
    assert memory.read_text("/memories/d/e") == "now a file"
    assert memory.read_text("/memories/d/z.md") == "top"
    assert memory.read_text("/memories/h/k.md/e/e/z.md") == "deep"
    assert not any(entry.path == "/memories/h/k.md/e" for entry in memory.list_files())


def test_a_leftover_copy_out_of_the_way_is_kept_and_the_rename_finishes() -> None:
    """Resuming over the attempt's own copies still works when they fit the shape."""
    store = FailingDeletes(InMemoryStore())
    memory = open_memory(user_id="alice", store=store, master_key=generate_master_key())
    memory.create("/memories/d/a.md", "a")
    memory.create("/memories/d/b.md", "b")
    with pytest.raises(StorageUnavailableError):
        memory.rename("/memories/d", "/memories/n")
    store.failing = False
    assert memory.rename("/memories/d", "/memories/n") == "Successfully renamed /memories/d to /memories/n"
    assert sorted(entry.path for entry in memory.list_files()) == ["/memories/n/a.md", "/memories/n/b.md"]
