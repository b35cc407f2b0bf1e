"""Fixtures of the local store's tests: a fresh store, a directory outside it that planted
links point at (it must never change), and each way the store opens a directory several
names down (``resolving``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.localdir import META, object_file

from s3memory import LocalDirStore
from s3memory.stores._localdir import files as _localfiles


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside the store that planted links point at; it must never change."""
    top = tmp_path / "outside"
    (top / "dir" / "sub").mkdir(parents=True)
    (top / "obj").write_bytes(object_file(b"OUTSIDE-BODY", META))
    (top / "dir" / "obj").write_bytes(object_file(b"OUTSIDE-BODY", META))
    (top / "dir" / "sub" / "obj").write_bytes(object_file(b"OUTSIDE-BODY", META))
    return top


@pytest.fixture
def store(tmp_path: Path) -> LocalDirStore:
    return LocalDirStore(tmp_path / "store")


@pytest.fixture(params=["one call", "name by name"])
def resolving(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each way a directory several names down is opened: in one ``openat2`` call that
    follows no link (where the kernel has it), or name by name with ``O_NOFOLLOW`` (the
    way elsewhere, and the way back when a batch holds the parent)."""
    if request.param == "one call":
        if not _localfiles.can_open_beneath():
            pytest.skip("no openat2 here")
    else:
        monkeypatch.setattr(_localfiles, "_openat2", False)
    return str(request.param)
