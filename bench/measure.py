"""What the bench's modes share: names, the clients, a store that seeds the fake directly,
and how one command is measured (wall, client CPU, requests, round trips, fsyncs, memory).

Client CPU is ``time.process_time()``: every thread of this process (s3memory's worker
pool included), never the HTTP fake's, which runs in another process. In the in-process
mode the fake's own CPU is part of it.
"""

from __future__ import annotations

import hashlib
import os
import resource
import threading
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from fakeaws import FakeS3, _Object

from s3memory import PreconditionFailedError
from s3memory.stores import ObjectInfo, ObjectStore, StoredObject

BUCKET = "bench-bucket"
REGION = "us-east-1"
KMS_KEY = "arn:aws:kms:us-east-1:111122223333:key/bench"
MASTER_KEY = bytes(range(1, 33))
SHORT = {
    "GetObject": "GET",
    "PutObject": "PUT",
    "HeadObject": "HEAD",
    "ListObjectsV2": "LIST",
    "CopyObject": "COPY",
    "DeleteObjects": "DELETE-MANY",
    "DeleteObject": "DELETE",
}


def body_of(i: int) -> str:
    return f"memory {i}: " + "x" * 200 + "\n"


@dataclass
class Sample:
    """One command, measured."""

    seconds: float
    cpu: float
    calls: Counter[str]
    round_trips: int
    fsyncs: int
    rss_mb: float  # the process's peak RSS so far (ru_maxrss): monotonic
    peak_mb: float | None = None  # tracemalloc's peak during the command, when traced

    @property
    def s3(self) -> Counter[str]:
        return Counter({k.split(":", 1)[1]: n for k, n in self.calls.items() if k.startswith("s3:")})

    @property
    def kms(self) -> int:
        return sum(n for k, n in self.calls.items() if k.startswith("kms:"))

    @property
    def requests(self) -> int:
        return sum(self.s3.values())

    @property
    def s3_text(self) -> str:
        return ", ".join(f"{SHORT.get(op, op)} {n}" for op, n in sorted(self.s3.items())) or "-"


class FsyncCounter:
    """Counts the calls that make writes durable, from every thread: ``os.fsync``,
    ``os.fdatasync``, and the local store's ``syncfs`` (one call that flushes the whole
    file system, used when a batch has several files). The library and the SDK call them by
    attribute, so wrapping the attributes sees them all."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def add(self) -> None:
        with self._lock:
            self.count += 1


@contextmanager
def counting_fsyncs() -> Iterator[FsyncCounter]:
    counter = FsyncCounter()
    patched: list[tuple[Any, str, Any]] = [(os, "fsync", None), (os, "fdatasync", None)]
    try:
        from s3memory.stores._localdir import batch as _localbatch

        if hasattr(_localbatch, "_syncfs"):  # private, and may change: counted while it exists
            patched.append((_localbatch, "_syncfs", None))
    except ImportError:
        pass
    patched = [(module, name, getattr(module, name)) for module, name, _ in patched if hasattr(module, name)]

    def counting(original: Any, syncfs: bool) -> Any:
        def call(*args: Any) -> Any:
            result = original(*args)
            if not syncfs or result:  # a syncfs that is not available returns False, syncs nothing
                counter.add()
            return result

        return call

    for module, name, original in patched:
        setattr(module, name, counting(original, name == "_syncfs"))
    try:
        yield counter
    finally:
        for module, name, original in patched:
            setattr(module, name, original)


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def measure(
    step: Callable[[], Any], network: Any = None, fsyncs: FsyncCounter | None = None, trace: bool = False
) -> Sample:
    if network is not None:
        network.take()
    fsyncs_before = fsyncs.count if fsyncs else 0
    if trace:
        tracemalloc.start()
    cpu, started = time.process_time(), time.perf_counter()
    step()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    peak = None
    if trace:
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    calls, round_trips = network.take() if network is not None else (Counter(), 0)
    fsynced = fsyncs.count - fsyncs_before if fsyncs else 0
    return Sample(seconds, cpu, calls, round_trips, fsynced, rss_mb(), peak)


#: Over HTTP, whether s3memory's client sends its hot verbs through awscrt when the
#: ``fast`` extra is installed, as ``default_s3_client`` does (``run.py --botocore``: not).
FAST_CLIENT = True


def library_s3_client(endpoint: str | None) -> Any:
    """The S3 client s3memory builds for itself (its timeouts, retries, pool and whatever
    tuning the library applies), so that the bench measures what users get. In process
    (``endpoint`` None) the fake answers from botocore's events, which awscrt's requests
    would go past: there it is botocore's client alone, as s3memory builds it."""
    from s3memory._aws.clients import new_client
    from s3memory._aws.crt import fast_client

    client = new_client("s3", region_name=REGION, endpoint_url=endpoint)
    return fast_client(client) if endpoint is not None and FAST_CLIENT else client


def http_memory(endpoint: str, user: str) -> Any:
    """A memory of ``user`` on the HTTP fake at ``endpoint``, through the clients s3memory
    builds (KMS: a plain client), with a key cache of its own; the bucket is created."""
    from s3memory import KeyCache, open_memory

    s3 = library_s3_client(endpoint)
    s3.create_bucket(Bucket=BUCKET)  # the fake's CreateBucket is idempotent
    return open_memory(
        user_id=user,
        bucket=BUCKET,
        s3_client=s3,
        kms_key_id=KMS_KEY,
        kms_client=plain_clients(endpoint)[2],
        key_cache=KeyCache(),
    )


def client_kind(client: Any) -> str:
    """Which client sends s3memory's hot requests: ``awscrt`` or ``botocore``."""
    return "awscrt" if hasattr(client, "add_request_observer") else "botocore"


def plain_clients(endpoint: str | None) -> tuple[Any, Any, Any]:
    """Plain boto3 clients (the obvious approach's two S3 clients, and KMS for everyone)."""
    import boto3
    from botocore.config import Config

    config = Config(s3={"addressing_style": "path"}, retries={"mode": "standard"}, max_pool_connections=64)
    s3 = boto3.client("s3", region_name=REGION, config=config, endpoint_url=endpoint)
    wrapped = boto3.client("s3", region_name=REGION, config=config, endpoint_url=endpoint)
    # A pool as large as s3memory's workers: KMS mode re-wraps a key per renamed file.
    kms_config = Config(retries={"mode": "standard"}, max_pool_connections=64)
    kms = boto3.client("kms", region_name=REGION, config=kms_config, endpoint_url=endpoint)
    return s3, wrapped, kms


class FakeS3Store(ObjectStore):
    """A bucket of the in-process fake as an s3memory store, without botocore.

    The bench seeds through it: files created by s3memory itself (each sealed for its own
    path, so a rename can re-wrap its key), at about 0.4 ms a file instead of 2.5 ms through
    botocore. At 100,000 files that is a minute instead of four.
    """

    def __init__(self, fake: FakeS3, bucket: str, identity: str | None = None) -> None:
        self.lock = fake.lock
        self.objects = fake.buckets[bucket]
        self._identity = identity or f"fake-s3:{id(fake)}/{bucket}"

    @property
    def identity(self) -> str:
        return self._identity

    def get(self, key: str, *, max_bytes: int | None = None) -> StoredObject | None:
        with self.lock:
            obj = self.objects.get(key)
        return None if obj is None else StoredObject(obj.body, obj.etag, dict(obj.metadata))

    def head(self, key: str) -> ObjectInfo | None:
        with self.lock:
            obj = self.objects.get(key)
        return None if obj is None else ObjectInfo(key, len(obj.body), obj.etag, dict(obj.metadata))

    def put(
        self,
        key: str,
        body: bytes,
        metadata: Mapping[str, str],
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> str:
        etag = '"' + hashlib.md5(body, usedforsecurity=False).hexdigest() + '"'
        with self.lock:
            current = self.objects.get(key)
            if (if_none_match and current is not None) or (
                if_match is not None and (current is None or current.etag != if_match)
            ):
                raise PreconditionFailedError("Error: precondition failed")
            self.objects[key] = _Object(bytes(body), dict(metadata), etag)
        return etag

    def copy(
        self,
        source: str,
        destination: str,
        *,
        metadata: Mapping[str, str],
        if_match: str | None = None,
        if_none_match: bool = False,
    ) -> str:
        with self.lock:
            current = self.objects.get(source)
            if current is None or (if_match is not None and current.etag != if_match):
                raise PreconditionFailedError("Error: the source changed")
            if if_none_match and destination in self.objects:
                raise PreconditionFailedError("Error: the destination exists")
            self.objects[destination] = _Object(current.body, dict(metadata), current.etag)
        return current.etag

    def list(self, prefix: str, *, limit: int | None = None) -> Iterator[ObjectInfo]:
        with self.lock:
            keys = self.objects.keys_after(prefix, "", limit if limit is not None else len(self.objects))
            found = [(key, self.objects[key]) for key in keys]
        for key, obj in found:
            yield ObjectInfo(key, len(obj.body), obj.etag)

    def delete(self, keys: Sequence[str], *, if_match: Mapping[str, str] | None = None) -> None:
        with self.lock:
            for key in keys:
                self.objects.pop(key, None)
