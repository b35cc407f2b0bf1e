"""Provenance's ``born`` (since the memory-store API): kept across a file's changes, and
versions written before it (no ``born``) still read, their birth unknown."""

from __future__ import annotations

import os

import pytest
from helpers import MASTER_KEY

from s3memory import InMemoryStore, KeyCache, open_memory
from s3memory._crypto.provenance import Provenance, open_provenance, seal_provenance
from s3memory._search.index import current_files


def test_a_record_without_born_reads_as_an_unknown_birth() -> None:
    before = {"v": 1, "op": "modified", "at": 5, "by": "cli", "file": "f" * 32, "rev": "r" * 24, "prev": "p" * 24}
    provenance = Provenance.from_record(before)
    assert provenance.born_us is None and "born" not in provenance.record()
    key, metadata = os.urandom(32), {"x-amz-i": "message-id"}
    sealed = {**metadata, "s3memory-p": seal_provenance(provenance, key, metadata, "t/memories/a.md")}
    assert open_provenance(key, sealed, "t/memories/a.md") == provenance


@pytest.mark.parametrize("born", ["1", 1.5, True, [1]])
def test_a_born_that_is_not_an_integer_is_refused(born: object) -> None:
    record = {"v": 1, "op": "created", "at": 5, "by": "cli", "file": "f" * 32, "rev": "r" * 24, "prev": None}
    with pytest.raises(ValueError):
        Provenance.from_record({**record, "born": born})


def test_birth_is_kept_across_edits_renames_and_restores() -> None:
    memory = open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())
    memory.create("/memories/a.md", "one\n")
    (first,) = current_files(memory.files)
    memory.str_replace("/memories/a.md", "one", "two")
    memory.rename("/memories/a.md", "/memories/b.md")
    oldest = memory.history("/memories/b.md")[-1]
    memory.restore("/memories/b.md", oldest.version)
    (now,) = current_files(memory.files)
    assert now.file_id == first.file_id and now.at_us is not None and now.at_us > first.at_us  # type: ignore[operator]
    assert now.created_us == first.created_us == first.at_us


def test_a_file_whose_first_version_predates_birth_has_none_once_edited(monkeypatch: pytest.MonkeyPatch) -> None:
    """Written by an s3memory that did not record ``born``: its first version still gives its
    creation time (``op`` created); after an edit, nothing does (the API then says so)."""
    memory = open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())
    real = Provenance.record

    def without_born(self: Provenance) -> dict[str, object]:
        return {k: v for k, v in real(self).items() if k != "born"}

    monkeypatch.setattr(Provenance, "record", without_born)
    memory.create("/memories/a.md", "one\n")
    (created,) = current_files(memory.files)
    assert created.created_us == created.at_us
    memory.str_replace("/memories/a.md", "one", "two")
    monkeypatch.undo()
    memory.str_replace("/memories/a.md", "two", "three")  # today's code: follows a version without born
    (edited,) = current_files(memory.files)
    assert edited.file_id == created.file_id and edited.created_us is None
