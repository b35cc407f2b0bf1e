"""Fixtures the framework adapters' test modules share."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator

import pytest


@pytest.fixture
def close_the_event_loop_run_sync_leaves() -> Iterator[None]:
    """pydantic-ai's ``Agent.run_sync`` makes a new event loop the thread's current one and
    leaves it open. The next ``asyncio.run`` (in this module or a later one) replaces it
    unclosed: a ResourceWarning, which ``filterwarnings = error`` pins on whatever test is
    running then. Modules that call ``run_sync`` use this fixture."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # get_event_loop() with no loop running
        try:
            loop = asyncio.get_event_loop_policy().get_event_loop()
        except RuntimeError:  # none set
            return
    if not loop.is_running():
        loop.close()
        asyncio.set_event_loop(None)
