"""Strands' own ``FileMemoryStore`` tests with :class:`~s3memory.integrations.strands.S3MemoryStore`
in its place: a pytest plugin loaded first in their test run (``-p peers.plugin_strands``,
see ``helpers.peers``).

Their test module builds its store as ``FileMemoryStore(name=..., storage=..., ...)``; after
collection, this plugin rebinds that name in each collected module to
:func:`file_memory_store`, which builds an ``S3MemoryStore`` with the same settings on
s3memory's :class:`~s3memory.InMemoryStore` and the test master key. A ``FileMemoryStore``
keeps its entries under ``memory/<name>/`` of its Strands ``Storage``; the stand-in keeps them
in the memory of the user ``<name>`` of one s3memory store per Strands ``Storage`` object, so
two stores on one storage are two users of one bucket, as theirs are two namespaces of one
backend. Nothing of the Strands ``Storage`` is used: reads of it by their tests find nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import MASTER_KEY

from s3memory import InMemoryStore, KeyCache
from s3memory.integrations.strands import S3MemoryStore

# One s3memory store (and key cache) per Strands storage object, the object kept so that
# its id is not reused while the test runs.
_BACKENDS: dict[int, tuple[object, InMemoryStore, KeyCache]] = {}


def file_memory_store(*, name: str, storage: object = None, **config: Any) -> S3MemoryStore:
    """``FileMemoryStore(**config)`` as an ``S3MemoryStore``: ``name``, ``description``,
    ``writable``, ``max_search_results`` and ``extraction`` passed on as they are."""
    if storage is None:
        storage = object()
    _, backend, cache = _BACKENDS.setdefault(id(storage), (storage, InMemoryStore(), KeyCache()))
    return S3MemoryStore(
        user_id=name,
        store=backend,
        master_key=MASTER_KEY,
        key_cache=cache,
        name=name,
        description=config.get("description"),
        max_search_results=config.get("max_search_results"),
        writable=config.get("writable"),
        extraction=config.get("extraction"),
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and hasattr(module, "FileMemoryStore"):
            module.FileMemoryStore = file_memory_store


@pytest.fixture(autouse=True)
def _fresh_backends() -> Any:
    """Each test starts with no s3memory store of an earlier test's storage."""
    _BACKENDS.clear()
    yield
    _BACKENDS.clear()
