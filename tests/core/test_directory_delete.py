"""A directory delete overlaps each page of its listing with the deletes of the page before:
pages + 1 round trips, not twice the pages. A fault between pages leaves the rest in place and a
record of what went; the same delete issued again finishes the job."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import BUCKET, MASTER_KEY

from s3memory import KeyCache, StorageError, open_memory
from s3memory.stores import InMemoryStore, ObjectInfo


class SmallPages(InMemoryStore):
    """Pages of ``page_size`` keys, as S3 pages 1,000; counts round trips (batches, since a
    local store runs each round trip inline in one batch) and logs calls per round trip."""

    def __init__(self, page_size: int) -> None:
        super().__init__(versioned=True)
        self.page_size = page_size
        self.round_trips: list[list[str]] = []
        self.fail_delete_at: int | None = None  # the n-th delete call (from 1) raises

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        self.round_trips.append([])
        with super().batch():
            yield

    def _log(self, what: str) -> None:
        if self.round_trips:
            self.round_trips[-1].append(what)

    def list_pages(self, prefix: str) -> Iterator[tuple[list[ObjectInfo], bool]]:
        listed = list(self.list(prefix))
        for start in range(0, max(len(listed), 1), self.page_size):
            self._log("list")
            more = start + self.page_size < len(listed)
            yield listed[start : start + self.page_size], more

    def delete(self, keys: Any, *, if_match: Any = None) -> None:
        self._log(f"delete {len(keys)}")
        deletes = sum(1 for trip in self.round_trips for call in trip if call.startswith("delete"))
        if deletes == self.fail_delete_at:
            raise StorageError("Error: Memory storage failed during delete_objects: injected")
        super().delete(keys, if_match=if_match)


def seeded(store: SmallPages, count: int) -> Any:
    memory = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    for i in range(count):
        memory.create(f"/memories/dir/f{i:02d}.md", f"file {i}\n")
    memory.create("/memories/warm.md", "x")
    memory.delete("/memories/warm.md")  # the history key is made and cached
    store.round_trips.clear()
    return memory


def deleted_paths(memory: Any) -> list[str]:
    return sorted(v.path for v in memory.changes("/memories/dir", operation="deleted"))


def test_each_page_goes_beside_the_deletes_of_the_one_before() -> None:
    store = SmallPages(page_size=3)
    memory = seeded(store, 10)
    assert memory.delete("/memories/dir") == "Successfully deleted /memories/dir"
    calls = [sorted(trip) for trip in store.round_trips if trip]
    assert calls == [
        ["list"],
        ["delete 3", "list"],
        ["delete 3", "list"],
        ["delete 3", "list"],
        ["delete 1"],
    ]
    assert "/memories/dir" not in memory.view("/memories")
    assert deleted_paths(memory) == [f"/memories/dir/f{i:02d}.md" for i in range(10)]


def test_a_fault_between_pages_leaves_the_rest_and_records_what_went() -> None:
    store = SmallPages(page_size=3)
    memory = seeded(store, 10)
    store.fail_delete_at = 2  # the second page's delete fails
    with pytest.raises(StorageError):
        memory.delete("/memories/dir")
    left = [line.rsplit("/", 1)[1] for line in memory.view("/memories/dir").splitlines()[2:]]
    assert left == [f"f{i:02d}.md" for i in range(3, 10)]  # the failed page, and pages 3 and 4 never sent
    # the record names the page whose delete was done, and nothing that is still there
    assert deleted_paths(memory) == [f"/memories/dir/f{i:02d}.md" for i in range(3)]
    store.fail_delete_at = None
    assert memory.delete("/memories/dir") == "Successfully deleted /memories/dir"
    assert "/memories/dir" not in memory.view("/memories")


@pytest.mark.slow  # thousands of keys on moto, paced by threads
def test_on_s3_a_page_of_1000_is_deleted_before_the_third_page_is_listed(s3_client: Any) -> None:
    s3_client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    memory = open_memory(user_id="alice", bucket=BUCKET, s3_client=s3_client, master_key=MASTER_KEY)
    memory.create("/memories/big/f0000.md", "one file, copied raw below\n")
    listed = s3_client.list_objects_v2(Bucket=BUCKET, Prefix="alice/memories/big/")["Contents"]
    (source,) = [item["Key"] for item in listed]
    for i in range(1, 2001):
        s3_client.copy_object(Bucket=BUCKET, Key=source.replace("f0000", f"f{i:04d}"), CopySource=f"{BUCKET}/{source}")
    order: list[str] = []
    s3_client.meta.events.register("before-call.s3", lambda model, **_: order.append(model.name))
    assert memory.delete("/memories/big") == "Successfully deleted /memories/big"
    lists = [i for i, name in enumerate(order) if name == "ListObjectsV2"]
    deletes = [i for i, name in enumerate(order) if name == "DeleteObjects"]
    assert len(lists) == 3 and len(deletes) == 3
    assert deletes[0] < lists[2]  # pipelined: not every LIST before the first delete
    assert s3_client.list_objects_v2(Bucket=BUCKET, Prefix="alice/memories/big/").get("KeyCount") == 0
