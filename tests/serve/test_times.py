"""A memory's created_at is its first version's time through edits and renames; updated_at its latest."""

from __future__ import annotations

import json
from typing import Any

from helpers import MASTER_KEY

from s3memory import InMemoryStore, UserMemories
from s3memory.serve.api import MemoryStoreAPI
from s3memory.serve.http import Request

KEY = "c" * 40


def test_created_at_survives_edits_and_renames_and_updated_at_moves() -> None:
    users = UserMemories(store=InMemoryStore(), master_key=MASTER_KEY)
    api = MemoryStoreAPI(lambda user, actor: users.open(user, actor=actor), key=KEY)  # type: ignore[arg-type,return-value]

    def call(method: str, path: str, body: Any = None) -> Any:
        data = b"" if body is None else json.dumps(body).encode()
        answer = api.handle(Request(method, path, (), {"x-api-key": KEY}, data))
        assert answer.status == 200, answer.body
        return answer.body

    store = call("POST", "/v1/memory_stores", {"name": "s"})["id"]
    made = call("POST", f"/v1/memory_stores/{store}/memories", {"path": "/a.md", "content": "one"})
    assert made["created_at"] == made["updated_at"]
    memory = f"/v1/memory_stores/{store}/memories/{made['id']}"
    edited = call("POST", memory, {"content": "two"})
    moved = call("POST", memory, {"path": "/b/c.md"})
    for later in (edited, moved, call("GET", memory)):
        assert later["created_at"] == made["created_at"]
    assert made["updated_at"] < edited["updated_at"] < moved["updated_at"]
    (listed,) = call("GET", f"/v1/memory_stores/{store}/memories")["data"]
    assert (listed["created_at"], listed["updated_at"]) == (made["created_at"], moved["updated_at"])
