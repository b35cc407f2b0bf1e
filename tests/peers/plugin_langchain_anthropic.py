"""A pytest plugin: langchain-anthropic's own tests of its memory middleware, run against
:class:`~s3memory.integrations.langchain.S3ClaudeMemoryMiddleware`.

Loaded first (``-p peers.plugin_langchain_anthropic``) in a pytest of their own, in the
unpacked sdist (see ``tests/helpers/peers.py``), it keeps the tests that build
``StateClaudeMemoryMiddleware`` or ``FilesystemClaudeMemoryMiddleware`` (their text-editor
and path-helper tests are not about the memory middleware) and, in those tests' modules,
puts in place of each class a function that takes its arguments and answers our
middleware: over an :class:`~s3memory.InMemoryStore` for the state-backed one, a
:class:`~s3memory.LocalDirStore` in ``root_path`` for the filesystem-backed one, under a
fixed test master key, for one user.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
from helpers import MASTER_KEY

from s3memory import InMemoryStore, KeyCache, LocalDirStore
from s3memory.integrations.langchain import S3ClaudeMemoryMiddleware
from s3memory.stores import ObjectStore

#: Their classes that a test must name to be run.
THEIRS = ("StateClaudeMemoryMiddleware", "FilesystemClaudeMemoryMiddleware")

#: What their middleware appends to the system message unless told otherwise.
_THEIR_DEFAULT = object()


def _ours(store: ObjectStore, system_prompt: Any, allowed_path_prefixes: Any) -> S3ClaudeMemoryMiddleware:
    if allowed_path_prefixes is not None and list(allowed_path_prefixes) != ["/memories"]:
        raise TypeError("S3ClaudeMemoryMiddleware keeps every path under /memories: no other allowed prefixes")
    # Their default prompt is the memory protocol, which ours leaves to the API (native tool)
    # and to the tool's description (function tool): see the expected failures.
    prompt = None if system_prompt is _THEIR_DEFAULT else system_prompt
    return S3ClaudeMemoryMiddleware(
        store=store, user_id="peer-tests", master_key=MASTER_KEY, key_cache=KeyCache(), system_prompt=prompt
    )


def state_memory(*, allowed_path_prefixes: Any = None, system_prompt: Any = _THEIR_DEFAULT) -> Any:
    """In place of ``StateClaudeMemoryMiddleware(...)``."""
    return _ours(InMemoryStore(), system_prompt, allowed_path_prefixes)


def filesystem_memory(
    *, root_path: str, allowed_prefixes: Any = None, max_file_size_mb: int = 10, system_prompt: Any = _THEIR_DEFAULT
) -> Any:
    """In place of ``FilesystemClaudeMemoryMiddleware(root_path=...)``."""
    return _ours(LocalDirStore(Path(root_path)), system_prompt, allowed_prefixes)


SUBSTITUTES = {"StateClaudeMemoryMiddleware": state_memory, "FilesystemClaudeMemoryMiddleware": filesystem_memory}


def _names_theirs(item: pytest.Item) -> bool:
    function = getattr(item, "function", None)
    return function is not None and any(name in inspect.getsource(function) for name in THEIRS)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    kept = [item for item in items if _names_theirs(item)]
    config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    items[:] = kept
    for module in {item.module for item in kept if isinstance(item, pytest.Function)}:
        for name, substitute in SUBSTITUTES.items():
            if hasattr(module, name):
                setattr(module, name, substitute)
