"""Fixtures of the local store's tests: a fresh store, and a directory outside it that planted
links point at (it must never change)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.localdir import META, object_file

from s3memory import LocalDirStore


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
