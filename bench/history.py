"""Benchmark: history's round trips and latency (issue 14's budgets).

    python bench/history.py                 # 20 ms per request, 1,000 versions, 1,000 records
    python bench/history.py --rtt-ms 5 --versions 200 --records 200

The store is the in-memory one (it keeps versions) behind a simulated network: every
request sleeps one round-trip time, requests from different threads overlap, and each
request's interval is recorded (a listing costs one request per page of 1,000 entries, one
after the other, as on S3), so the sequential round trips (the longest chain of
requests that did not overlap) are counted as ``run.py`` counts them. Budgets: ``history``
of a file with up to 1,000 versions and ``changes`` over 1,000 records in at most 2 round
trips, ``restore`` in 2. Prints one line per operation: requests by verb, round trips,
latency. Provenance is read from the records' names (``_records``), so history needs no
request per version; a version no listed record tells costs a HEAD, and a round trip of the
code issues at most ``Limits.max_workers`` requests at once.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from s3memory import InMemoryStore, KeyCache, open_memory
from s3memory.stores import DelegatingStore

T = TypeVar("T")
PAGE = 1000  # entries per page of a LIST (S3's most)


class SlowStore(DelegatingStore):
    """Each request takes ``rtt`` seconds; intervals are recorded while ``recording``."""

    def __init__(self, inner: Any, rtt: float) -> None:
        super().__init__(inner)
        self.rtt = rtt
        self.recording = False
        self.intervals: list[tuple[float, float, str]] = []
        self._lock = threading.Lock()

    def _call(self, verb: str, perform: Callable[[], T]) -> T:
        if not self.recording or verb == "keeps_versions":  # the in-memory store answers it without a request
            return perform()
        if verb in ("list", "list_versions"):  # S3 answers 1,000 entries a page, page after page
            result = perform()
            for _ in range(max(1, -(-len(result) // PAGE))):  # type: ignore[arg-type]
                self._request(verb)
            return result
        start = time.perf_counter()
        time.sleep(self.rtt)
        result = perform()
        with self._lock:
            self.intervals.append((start, time.perf_counter(), verb))
        return result

    def _request(self, verb: str) -> None:
        start = time.perf_counter()
        time.sleep(self.rtt)
        with self._lock:
            self.intervals.append((start, time.perf_counter(), verb))


def round_trips(intervals: list[tuple[float, float, str]]) -> int:
    """The longest chain of requests each starting after the previous one ended."""
    chain: list[tuple[float, int]] = []  # (end, length of the longest chain ending here)
    best = 0
    for start, end, _ in sorted(intervals):
        length = 1 + max((n for finished, n in chain if finished <= start), default=0)
        chain.append((end, length))
        best = max(best, length)
    return best


def measure(store: SlowStore, name: str, action: Callable[[], Any]) -> tuple[str, int]:
    store.intervals.clear()
    store.recording = True
    start = time.perf_counter()
    action()
    elapsed = time.perf_counter() - start
    store.recording = False
    verbs = Counter(verb for _, _, verb in store.intervals)
    detail = ", ".join(f"{verb} {count}" for verb, count in sorted(verbs.items()))
    trips = round_trips(store.intervals)
    print(f"{name:<44} {trips:>3} RT  {elapsed * 1000:>7.0f} ms   {detail}")
    return name, trips


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rtt-ms", type=float, default=20.0)
    parser.add_argument("--versions", type=int, default=1000)
    parser.add_argument("--records", type=int, default=1000)
    args = parser.parse_args(argv)
    store = SlowStore(InMemoryStore(), args.rtt_ms / 1000)
    memory = open_memory(user_id="bench", store=store, master_key=os.urandom(32), key_cache=KeyCache(), actor="bench")
    memory.create("/memories/notes.md", "v0\n")
    for n in range(1, args.versions):
        memory.str_replace("/memories/notes.md", f"v{n - 1}", f"v{n}")
    for n in range(args.records):  # each delete leaves one record
        memory.create(f"/memories/tmp/{n}.md", "x")
        memory.delete(f"/memories/tmp/{n}.md")
    print(f"simulated network: {args.rtt_ms:g} ms per request; {args.versions} versions, {args.records} records\n")
    results = [
        measure(
            store, f"history of a file with {args.versions} versions", lambda: memory.history("/memories/notes.md")
        ),
        measure(store, f"changes over {args.records} records", lambda: memory.changes("/memories/tmp")),
    ]
    oldest = memory.history("/memories/notes.md")[-1].version
    results.append(measure(store, "restore", lambda: memory.restore("/memories/notes.md", oldest)))
    budget = {results[0][0]: 2, results[1][0]: 2, "restore": 2}
    over = [f"{name}: {trips} > {budget[name]}" for name, trips in results if trips > budget[name]]
    print("\nwithin budget" if not over else "\nover budget: " + "; ".join(over))
    print(f"(one round trip issues at most Limits.max_workers = {memory.limits.max_workers} requests at once)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
