"""Reads of a store's memories check the store beside the read, not before it."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from helpers import MASTER_KEY

from s3memory import InMemoryStore, UserMemories
from s3memory.serve.api import MemoryStoreAPI
from s3memory.serve.http import Request
from s3memory.stores import DelegatingStore

KEY = "r" * 40
UNKNOWN = "memstore_" + "b" * 26


class Timed(DelegatingStore):
    """Each request takes 50 ms and is recorded with when it was in flight."""

    def __init__(self) -> None:
        super().__init__(InMemoryStore())
        self.spans: list[tuple[float, float, str]] = []
        self.writes: list[str] = []
        self.lock = threading.Lock()

    def _call(self, verb: str, perform: Any) -> Any:
        start = time.perf_counter()
        time.sleep(0.05)
        result = perform()
        with self.lock:
            self.spans.append((start, time.perf_counter(), verb))
            if verb in ("put", "copy", "delete"):
                self.writes.append(verb)
        return result


def _rig() -> tuple[MemoryStoreAPI, Timed]:
    store = Timed()
    users = UserMemories(store=store, master_key=MASTER_KEY)
    return MemoryStoreAPI(lambda user, actor: users.open(user, actor=actor), key=KEY), store  # type: ignore[arg-type,return-value]


def _call(api: MemoryStoreAPI, method: str, path: str, body: Any = None) -> Any:
    data = b"" if body is None else json.dumps(body).encode()
    return api.handle(Request(method, path, (), {"x-api-key": KEY}, data))


def _chain(spans: list[tuple[float, float, str]]) -> int:
    """The longest run of requests each sent after the one before it ended: the round trips."""
    chain: list[tuple[float, int]] = []
    for start, end, _ in sorted(spans):
        chain.append((end, 1 + max((n for finished, n in chain if finished <= start), default=0)))
    return max((n for _, n in chain), default=0)


def test_a_warm_retrieve_is_one_round_trip_the_store_record_beside_the_index() -> None:
    api, store = _rig()
    made = _call(api, "POST", "/v1/memory_stores", {"name": "s"}).body
    memory = _call(api, "POST", f"/v1/memory_stores/{made['id']}/memories", {"path": "/a.md", "content": "x"}).body
    path = f"/v1/memory_stores/{made['id']}/memories/{memory['id']}"
    assert _call(api, "GET", path).status == 200  # brings the index up to date
    store.spans.clear()
    assert _call(api, "GET", path).body["content"] == "x"
    assert _chain(store.spans) == 1, sorted(store.spans)


@pytest.mark.parametrize("suffix", ["/memories", "/memories/mem_" + "0" * 32, "/memory_versions"])
def test_reading_an_unknown_store_is_404_and_writes_nothing(suffix: str) -> None:
    api, store = _rig()
    answer = _call(api, "GET", f"/v1/memory_stores/{UNKNOWN}{suffix}")
    assert (answer.status, answer.body["error"]["message"]) == (404, f"No memory store with id {UNKNOWN}.")
    assert store.writes == []
