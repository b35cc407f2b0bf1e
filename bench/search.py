"""Benchmark: search's round trips and latency over 1,000 files (issue 15's budget).

    python bench/search.py                     # 20 ms per request, 1,000 files of 1-3 KiB
    python bench/search.py --rtt-ms 5 --files 200 --modes tenant

The pattern of ``history.py``: the in-memory store behind a simulated network (every request
sleeps one round-trip time, requests from different threads overlap, a listing costs one
request per page of 1,000), and a KMS in process behind the same network, so that what is
measured is the algorithm's round trips, not botocore's CPU (about 0.7 ms a request under
one GIL, which would stagger a wave of 50 GETs over two round trips; ``run.py`` measures
through botocore). Both key modes: the tenant key (wrapped by KMS) and one KMS data key per
object. Seeding is not measured. Each scenario is one search (``_index.current_files``, then
``_search.search_texts`` for two words); "another process" is a memory with a key cache and an
index cache of its own. Prints requests by verb, sequential round trips and latency.

Budget: a warm search with nothing changed in 1 round trip; with files changed in at most 3.
In KMS mode a file another process wrote costs a KMS ``Decrypt`` after its GET (its data key
is not in this process's cache), so a warm process defers the write-back to its next
search's first round trip (a cold one writes at once): the scenarios run in order, so a
deferred PUT shows up in the next one's requests. The baseline reads every file, as a
search without an index must.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from history import SlowStore, round_trips

from s3memory import EncryptedMemory, InMemoryStore, KeyCache, Limits, open_memory
from s3memory._crypto.envelope import canonical_json
from s3memory._search import index
from s3memory._search.query import parse_query, search_texts

KMS_KEY = "arn:aws:kms:us-east-1:111122223333:key/bench"
WORDS = (
    "tea coffee meeting deadline project budget design review python rust lambda bucket policy "
    "customer invoice travel berlin tokyo preference concise summary weekly standup release "
    "migration incident postmortem latency cache index search vector garden recipe"
).split()
#: Round trips allowed: (tenant mode, KMS mode); None: not budgeted.
BUDGETS: dict[str, tuple[int, int] | None] = {
    "warm, nothing changed": (1, 1),
    "warm, 1 file changed by another process": (3, 3),
    "warm, 50 files changed by another process": (3, 3),
    "warm, 10 files changed by this process": (3, 3),
    "warm, index replaced by another process (10 changed)": (3, 3),
    "read-only mount, 10 changed (no write-back)": (2, 3),
    "8 stores, warm, nothing changed": (1, 1),
    "cold process, index current": (2, 2),
}


class SlowKms:
    """KMS in process: GenerateDataKey, Encrypt and Decrypt with the encryption context as
    AAD (a blob under another context is refused as KMS refuses it); each call is one request
    on ``store``'s simulated network."""

    def __init__(self, store: SlowStore) -> None:
        self.store = store
        self.key = hashlib.sha256(b"bench kms").digest()

    def _request(self, verb: str, perform: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        if not self.store.recording:
            return perform()
        start = time.perf_counter()
        time.sleep(self.store.rtt)
        result = perform()
        with self.store._lock:
            self.store.intervals.append((start, time.perf_counter(), verb))
        return result

    def _seal(self, plaintext: bytes, context: dict[str, str]) -> bytes:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        nonce = os.urandom(12)
        return nonce + AESGCM(self.key).encrypt(nonce, plaintext, canonical_json(context).encode())

    def generate_data_key(self, *, KeyId: str, KeySpec: str, EncryptionContext: dict[str, str]) -> dict[str, Any]:
        def perform() -> dict[str, Any]:
            key = os.urandom(32)
            return {"KeyId": KeyId, "Plaintext": key, "CiphertextBlob": self._seal(key, EncryptionContext)}

        return self._request("kms:GenerateDataKey", perform)

    def encrypt(self, *, KeyId: str, Plaintext: bytes, EncryptionContext: dict[str, str]) -> dict[str, Any]:
        return self._request(
            "kms:Encrypt", lambda: {"KeyId": KeyId, "CiphertextBlob": self._seal(Plaintext, EncryptionContext)}
        )

    def decrypt(self, *, KeyId: str, CiphertextBlob: bytes, EncryptionContext: dict[str, str]) -> dict[str, Any]:
        def perform() -> dict[str, Any]:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            aad = canonical_json(EncryptionContext).encode()
            return {
                "KeyId": KeyId,
                "Plaintext": AESGCM(self.key).decrypt(CiphertextBlob[:12], CiphertextBlob[12:], aad),
            }

        return self._request("kms:Decrypt", perform)


@dataclass
class Row:
    mode: str
    scenario: str
    verbs: Counter[str]
    round_trips: int
    seconds: float
    budget: int | None

    def line(self) -> str:
        detail = ", ".join(f"{verb.upper() if ':' not in verb else verb} {n}" for verb, n in sorted(self.verbs.items()))
        over = "" if self.budget is None or self.round_trips <= self.budget else f"  OVER BUDGET ({self.budget})"
        timing = f"{self.round_trips:>3} RT {self.seconds * 1000:>7.0f} ms"
        return f"{self.mode:<7} {self.scenario:<53} {timing}   {detail}{over}"


def text_of(rng: random.Random, n: int) -> str:
    """1-3 KiB of words, in lines."""
    size = rng.randint(1024, 3072)
    lines, length = [f"# note {n}"], 0
    while length < size:
        line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14)))
        lines.append(line)
        length += len(line) + 1
    return "\n".join(lines) + "\n"


class Bench:
    def __init__(self, store: SlowStore, kms: SlowKms, mode: str, files: int) -> None:
        self.store, self.kms, self.mode, self.files = store, kms, mode, files
        self.user = f"{mode}-user"
        self.rng = random.Random(15)
        self.rows: list[Row] = []
        self.other_cache = index.IndexCache()  # the other process's
        self.memory = self.open()  # this process
        self.other = self.open()  # another process: its own key cache (and index cache)

    def open(self, user: str | None = None) -> EncryptedMemory:
        return open_memory(
            user_id=user or self.user,
            store=self.store,
            kms_key_id=KMS_KEY,
            kms_client=self.kms,
            key_mode=self.mode,  # type: ignore[arg-type]
            key_cache=KeyCache(),
            limits=Limits(max_workers=64),
        )

    def as_other_process(self, action: Callable[[], Any]) -> Any:
        ours = index.PROCESS_INDEX_CACHE
        index.PROCESS_INDEX_CACHE = self.other_cache
        try:
            return action()
        finally:
            index.PROCESS_INDEX_CACHE = ours

    def seed(self, memory: EncryptedMemory, count: int) -> None:
        for n in range(count):
            memory.create(f"/memories/notes/{n:04}.md", text_of(self.rng, n))

    def change(self, count: int, writer: EncryptedMemory | None = None) -> None:
        """``count`` files edited (by another process unless ``writer``), not measured."""
        for n in self.rng.sample(range(self.files), count):
            (writer or self.other).insert(f"/memories/notes/{n:04}.md", 0, f"edited {time.time_ns()}")

    def measure(self, scenario: str, action: Callable[[], Any]) -> Row:
        budgets = BUDGETS.get(scenario)
        budget = None if budgets is None else budgets[self.mode == "kms"]
        self.store.intervals.clear()
        # No collection in the measured window: a full collection (50-200 ms with moto and the
        # SDK loaded) delays one request past the next one's start and counts as a round trip.
        gc.collect()
        gc.disable()
        self.store.recording = True
        start = time.perf_counter()
        try:
            action()
        finally:
            seconds = time.perf_counter() - start
            self.store.recording = False
            gc.enable()
        verbs = Counter(verb for _, _, verb in self.store.intervals)
        row = Row(self.mode, scenario, verbs, round_trips(self.store.intervals), seconds, budget)
        self.rows.append(row)
        print(row.line(), flush=True)
        return row

    def run(self) -> list[Row]:
        query = parse_query("deadline budget")

        def search(target: EncryptedMemory = self.memory, *, write_back: bool = True) -> int:
            found = index.current_files(target.files, write_back=write_back)
            return len(search_texts(((f.path.display, f.text) for f in found), query))

        self.seed(self.memory, self.files)
        self.memory.view("/memories/notes/0000.md")  # this process's keys are warm; its index cache is not
        index.PROCESS_INDEX_CACHE.clear()
        self.measure(f"first build ({self.files} files)", search)
        self.measure("warm, nothing changed", search)
        self.change(1)
        self.measure("warm, 1 file changed by another process", search)
        self.change(50)
        self.measure("warm, 50 files changed by another process", search)
        self.change(10, writer=self.memory)
        self.measure("warm, 10 files changed by this process", search)
        self.change(10)
        self.as_other_process(lambda: search(self.other))
        self.measure("warm, index replaced by another process (10 changed)", search)
        reader = self.open()
        self.as_other_process(lambda: search(reader, write_back=False))
        self.change(10)
        self.measure(
            "read-only mount, 10 changed (no write-back)",
            lambda: self.as_other_process(lambda: search(reader, write_back=False)),
        )
        search()  # brings the index up to date (in KMS mode: this process's snapshot)
        search()  # and, in KMS mode, writes back what the one before deferred
        index.PROCESS_INDEX_CACHE.clear()
        self.measure("cold process, index current", lambda: search(self.open()))
        self.measure("baseline: read every file, no index", self.baseline)
        self.mounts(search)
        return self.rows

    def baseline(self) -> None:
        """A search without the index: the listing, then every file (64 at once)."""
        from concurrent.futures import ThreadPoolExecutor

        memory = self.memory
        files = memory.list_files()
        with ThreadPoolExecutor(64) as pool:
            texts = list(pool.map(lambda f: memory.read_text(f.path), files))
        assert len(texts) == len(files)

    def mounts(self, search: Callable[..., int]) -> None:
        """8 stores of 1/8 of the files each, refreshed concurrently as a mounted memory's
        search refreshes them: the budget is per store, the stores in parallel."""
        from concurrent.futures import ThreadPoolExecutor

        stores = [self.open(f"{self.user}-m{m}") for m in range(8)]
        for store in stores:
            self.seed(store, self.files // 8)
            search(store)

        def all_of_them() -> None:
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(search, stores))

        self.measure("8 stores, warm, nothing changed", all_of_them)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rtt-ms", type=float, default=20.0)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--modes", default="tenant,kms", help="key modes, comma-separated (tenant, kms)")
    args = parser.parse_args(argv)
    print(f"simulated network: {args.rtt_ms:g} ms per request; {args.files} files of 1-3 KiB\n")
    rows: list[Row] = []
    for mode in args.modes.split(","):
        store = SlowStore(InMemoryStore(versioned=False), args.rtt_ms / 1000)
        rows += Bench(store, SlowKms(store), mode, args.files).run()
        print()
    over = [row for row in rows if row.budget is not None and row.round_trips > row.budget]
    print("within budget" if not over else "over budget: " + "; ".join(f"{r.mode} {r.scenario}" for r in over))
    print(f"(a wave of reads is at most {index.READ_WORKERS} requests at once)")
    return 0 if not over else 1


if __name__ == "__main__":
    raise SystemExit(main())
