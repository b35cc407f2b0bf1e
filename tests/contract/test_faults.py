"""Faults at every step of a recursive rename and delete: nothing is lost, and the same
command issued again finishes the job.

A botocore ``before-call`` hook raises a connection error at the k-th call of one S3
operation (after botocore's retries would have given up), for every k the command makes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError
from helpers import BUCKET, MASTER_KEY

from s3memory import KeyCache, PathNotFoundError, S3MemoryError, open_memory

FILES = {
    f"/memories/src/{sub}f{i:02d}.md": f"file {sub}{i}\nsecond line {i}\n" for sub in ("", "deep/") for i in range(12)
}
OPERATIONS = ["HeadObject", "ListObjectsV2", "GetObject", "PutObject", "CopyObject", "DeleteObjects"]


class FaultInjector:
    def __init__(self, client: Any) -> None:
        self.calls: Counter[str] = Counter()
        self.fail_at: tuple[str, int] | None = None
        self.injected = 0
        client.meta.events.register("before-call.s3", self._maybe_fail)

    def _maybe_fail(self, model: Any, **_: Any) -> None:
        self.calls[model.name] += 1
        if self.fail_at == (model.name, self.calls[model.name]):
            self.injected += 1
            raise EndpointConnectionError(endpoint_url="https://s3.fault.invalid")

    def arm(self, operation: str, k: int) -> None:
        self.calls.clear()
        self.fail_at = (operation, k)

    def disarm(self) -> None:
        self.fail_at = None


def contents(memory: Any, paths: list[str]) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for path in paths:
        try:
            lines = memory.view(path).split("\n")[1:]
            found[path] = "\n".join(line.split("\t", 1)[1] for line in lines)
        except PathNotFoundError:
            found[path] = None
    return found


def seeded_memory(s3_client: Any, user_id: str) -> Any:
    """A fresh memory holding FILES, with a cold key cache, in a bucket that keeps versions
    (so that every change also writes its history record, and faults hit those too)."""
    s3_client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    memory = open_memory(
        user_id=user_id, bucket=BUCKET, s3_client=s3_client, master_key=MASTER_KEY, key_cache=KeyCache()
    )
    for path, text in FILES.items():
        memory.create(path, text)
    return memory


def calls_of(command: str, s3_client: Any) -> Counter[str]:
    """How many calls of each operation a fault-free run of the command makes."""
    memory = seeded_memory(s3_client, "probe")
    injector = FaultInjector(s3_client)
    injector.calls.clear()
    getattr(memory, command)(*(["/memories/src", "/memories/dst"] if command == "rename" else ["/memories/src"]))
    counts = Counter(injector.calls)
    s3_client.meta.events.unregister("before-call.s3", injector._maybe_fail)
    return counts


def scenarios(command: str) -> list[tuple[str, int]]:
    # A fault-free rename of 24 files: HEAD 2+24, LIST 2, GET 1, PUT 1 (the intent record) + 2
    # (the history record, under the old and the new path: bodies, as it names 24 copies),
    # COPY 24, DeleteObjects 1; a delete puts its history record beside its DeleteObjects.
    budget = {
        "rename": {
            "HeadObject": 26,
            "ListObjectsV2": 2,
            "GetObject": 1,
            "PutObject": 1 + 2,
            "CopyObject": 24,
            "DeleteObjects": 1,
        },
        "delete": {"HeadObject": 1, "ListObjectsV2": 1, "DeleteObjects": 1, "PutObject": 1},
    }[command]
    return [(op, k) for op in OPERATIONS for k in range(1, budget.get(op, 0) + 1)]


def test_fault_free_budget_matches_the_scenarios(s3_client: Any) -> None:
    for command in ("rename", "delete"):
        expected = Counter({op: k for op, k in Counter(op for op, _ in scenarios(command)).items()})
        assert calls_of(command, s3_client) == expected


@pytest.mark.slow  # a fault at every step
@pytest.mark.parametrize(("operation", "k"), scenarios("rename"))
def test_rename_survives_a_fault_at_every_step(s3_client: Any, operation: str, k: int) -> None:
    memory = seeded_memory(s3_client, "alice")
    injector = FaultInjector(s3_client)
    injector.arm(operation, k)
    finished = False
    try:
        memory.rename("/memories/src", "/memories/dst")
        finished = True  # a fault in the history record beside the last round trip only
    except S3MemoryError:
        pass  # a clear error is allowed; a raw exception would fail the test here
    assert injector.injected == 1
    assert not finished or (operation, k) in (("PutObject", 2), ("PutObject", 3))
    injector.disarm()

    # Every file is readable, unchanged, at its old path, its new path, or both.
    moved = {path: path.replace("/memories/src/", "/memories/dst/") for path in FILES}
    old = contents(memory, list(moved))
    new = contents(memory, list(moved.values()))
    for path, text in FILES.items():
        assert text in (old[path], new[moved[path]]), path
        assert old[path] in (None, text) and new[moved[path]] in (None, text), path

    # The same rename again finishes the job.
    if not finished:
        assert memory.rename("/memories/src", "/memories/dst") == "Successfully renamed /memories/src to /memories/dst"
    assert contents(memory, list(moved.values())) == {moved[p]: t for p, t in FILES.items()}
    assert all(v is None for v in contents(memory, list(FILES)).values())
    internal = [o.key for o in memory.store.list("alice/.s3memory/") if "/history/" not in o.key]
    assert internal == ["alice/.s3memory/history-key", "alice/.s3memory/tenant-key"], (
        "the intent record is gone once the rename is done"
    )


@pytest.mark.slow  # a fault at every step
@pytest.mark.parametrize(("operation", "k"), scenarios("delete"))
def test_delete_survives_a_fault_and_finishes_when_repeated(s3_client: Any, operation: str, k: int) -> None:
    memory = seeded_memory(s3_client, "alice")
    injector = FaultInjector(s3_client)
    injector.arm(operation, k)
    if operation == "PutObject":  # the history record: the delete stands, and says so
        assert memory.delete("/memories/src") == "Successfully deleted /memories/src"
        assert injector.injected == 1
        assert all(v is None for v in contents(memory, list(FILES)).values())
        return
    with pytest.raises(S3MemoryError) as info:
        memory.delete("/memories/src")
    assert str(info.value).startswith("Error: Memory storage failed during")
    injector.disarm()
    assert memory.delete("/memories/src") == "Successfully deleted /memories/src"
    assert all(v is None for v in contents(memory, list(FILES)).values())


def test_rename_never_overwrites_a_file_created_meanwhile(s3_client: Any) -> None:
    """An interrupted rename, then someone else writes into the destination: resuming the
    rename refuses rather than overwrite that file."""
    memory = seeded_memory(s3_client, "alice")
    injector = FaultInjector(s3_client)
    injector.arm("CopyObject", 5)
    with pytest.raises(S3MemoryError):
        memory.rename("/memories/src", "/memories/dst")
    injector.disarm()
    uncopied = [p for p, t in contents(memory, [p.replace("/src/", "/dst/") for p in FILES]).items() if t is None]
    memory.create(uncopied[0], "someone else's file")
    with pytest.raises(S3MemoryError) as info:
        memory.rename("/memories/src", "/memories/dst")
    assert str(info.value) == "Error: The destination /memories/dst already exists"
    assert contents(memory, [uncopied[0]])[uncopied[0]] == "someone else's file"
    source = uncopied[0].replace("/dst/", "/src/")
    assert contents(memory, [source])[source] == FILES[source]
