"""Benchmark: ``s3memory serve`` per endpoint: S3 requests, KMS calls, round trips, latency.

    python bench/serve.py                       # 50 memories of 4 versions, 5 repetitions, 20 ms
    python bench/serve.py --memories 500 --repetitions 3
    python bench/serve.py --json                # the figures as JSON on stdout, no table
    python bench/serve.py --json figures.json   # the table, and the figures to this file
    python bench/serve.py --check-moto          # also cross-check the request counts against moto

The API's own figures: each endpoint is ``MemoryStoreAPI.handle(Request(...))`` called
directly, no HTTP server, over a memory-store API built as ``build_api`` builds it (one
``UserMemories`` on a bucket, tenant-key mode, the KMS key cached), with the S3 client
s3memory builds for itself (``measure.library_s3_client``). The bucket is ``fakeaws.py``'s
in-process S3 with versioning added here (:class:`VersionedFakeS3`: the versions endpoints
need a bucket that keeps versions), and ``fakeaws.Network`` in front of it: every request
sleeps one round-trip time in botocore's ``before-send``, requests from different threads
overlap, and the round trips are the longest chain of requests that did not overlap, as
``run.py`` counts them.

A warm process: one store of ``--memories`` memories (in 5 top-level folders, every 7th one
folder deeper), each edited ``--edits`` times, seeded through the API with the network
off. Each endpoint then runs once unmeasured (caches warm) and ``--repetitions`` times
measured; before each call, what it needs is prepared with the network off (a memory to
delete, a version to redact) and the search index is brought up to date with a listing, so
that a call pays for itself and not for the writes before it (the row "retrieve, index 1
write behind" shows what the first reader after a write pays). Requests are per call (the
same on every repetition, or each set is shown); latency and client CPU (``time.process_time``:
every thread of this process, the fake's answers included) are medians.
"""

from __future__ import annotations

import argparse
import bisect
import datetime
import itertools
import json
import os
import platform
import statistics
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fakeaws import _S3_NS, FakeKMS, FakeS3, Network, _Object, _response, _s3_error
from measure import BUCKET, KMS_KEY, REGION, Sample, library_s3_client, measure, plain_clients

#: Verbs as the table shows them (botocore's operation names otherwise).
VERBS = {
    "GetObject": "GET",
    "PutObject": "PUT",
    "HeadObject": "HEAD",
    "ListObjectsV2": "LIST",
    "ListObjectVersions": "LIST-VERSIONS",
    "CopyObject": "COPY",
    "DeleteObjects": "DELETE-MANY",
    "DeleteObject": "DELETE",
    "GetBucketVersioning": "GET-VERSIONING",
}
SERVE_KEY = "bench-serve-key-" + "k" * 32
TOPICS = 5
WRONG_SHA256 = "0" * 64


# -- a versioned bucket ----------------------------------------------------------------------
@dataclass
class _Version:
    id: str
    obj: _Object | None  # None: a delete marker
    ms: int  # LastModified, in milliseconds since the epoch


def _stamp(ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


class VersionedFakeS3(FakeS3):
    """``fakeaws.FakeS3`` with S3's versioning, for a bucket whose versioning is ``Enabled``
    (``PutBucketVersioning``): every write and copy adds a version (its ``x-amz-version-id``
    answered), a delete without a version id adds a delete marker, and versions are read,
    HEADed and deleted by ``versionId``, listed by ``ListObjectVersions`` (with its
    markers, pages and ``IsLatest``), as on S3. Versions of one key are a millisecond apart
    at least (one clock for the fake), so ``S3Store`` never meets a tie of a version and a
    delete marker, which costs extra listings on moto (second-resolution times) and almost
    never on S3. ``bench/serve.py --check-moto`` cross-checks its counts against moto."""

    def __init__(self) -> None:
        super().__init__(lock=threading.RLock())  # type: ignore[arg-type]  # the writes re-enter FakeS3
        self.versioned: set[str] = set()
        self.versions: dict[str, dict[str, list[_Version]]] = {}  # bucket: key: newest first
        self.ordered: dict[str, list[str]] = {}  # bucket: its keys with versions, sorted
        self._ids = itertools.count(1)
        self._last_ms = 0

    def _new_version(self, bucket: str, key: str, obj: _Object | None) -> _Version:
        self._last_ms = max(int(time.time() * 1000), self._last_ms + 1)
        version = _Version(f"{next(self._ids):08d}" + os.urandom(12).hex(), obj, self._last_ms)
        of_key = self.versions.setdefault(bucket, {}).setdefault(key, [])
        if not of_key:
            bisect.insort(self.ordered.setdefault(bucket, []), key)
        of_key.insert(0, version)
        return version

    def _remove_version(self, bucket: str, key: str, version_id: str) -> _Version | None:
        of_key = self.versions.get(bucket, {}).get(key, [])
        at = next((i for i, v in enumerate(of_key) if v.id == version_id), None)
        if at is None:
            return None
        removed = of_key.pop(at)
        if at == 0:  # the latest went: the one before it is current now, if it is an object
            current = of_key[0].obj if of_key else None
            if current is None:
                self.buckets[bucket].pop(key, None)
            else:
                self.buckets[bucket][key] = current
        if not of_key:
            del self.versions[bucket][key]
            keys = self.ordered[bucket]
            del keys[bisect.bisect_left(keys, key)]
        return removed

    def _delete_current(self, bucket: str, key: str) -> _Version:
        self.buckets[bucket].pop(key, None)
        return self._new_version(bucket, key, None)

    def respond(self, request: Any) -> Any:
        url = urlsplit(request.url)
        host = url.hostname or ""
        if ".s3." in host and host.endswith(".amazonaws.com"):
            bucket, raw_key = host.split(".s3.", 1)[0], url.path.lstrip("/")
        else:
            bucket, _, raw_key = url.path.lstrip("/").partition("/")
        key = unquote(raw_key)
        query = {name: values[0] for name, values in parse_qs(url.query, keep_blank_values=True).items()}
        method = request.method
        with self.lock:
            if not key and "versioning" in query:
                return self._versioning(request, bucket)
            if bucket not in self.versioned or bucket not in self.buckets:
                return super().respond(request)
            if method == "GET" and not key and "versions" in query:
                return self._list_versions(request, bucket, query)
            if method == "POST" and "delete" in query:
                return self._delete_many(request, self.buckets[bucket], request.body, bucket)
            version_id = query.get("versionId")
            if version_id is not None and method in ("GET", "HEAD"):
                return self._read_version(request, bucket, key, version_id)
            if method == "DELETE" and key:
                if version_id is not None:
                    removed = self._remove_version(bucket, key, version_id)
                    marker = "true" if removed is not None and removed.obj is None else "false"
                    return _response(request, 204, {"x-amz-version-id": version_id, "x-amz-delete-marker": marker})
                version = self._delete_current(bucket, key)
                return _response(request, 204, {"x-amz-version-id": version.id, "x-amz-delete-marker": "true"})
            answer = super().respond(request)
            if method == "PUT" and key and answer.status_code == 200:
                answer.headers["x-amz-version-id"] = self._new_version(bucket, key, self.buckets[bucket][key]).id
            return answer

    def _versioning(self, request: Any, bucket: str) -> Any:
        if bucket not in self.buckets:
            return _s3_error(request, 404, "NoSuchBucket")
        if request.method == "PUT":
            body = bytes(request.body or b"")
            if b"<Status>Enabled</Status>" in body:
                self.versioned.add(bucket)
            else:
                self.versioned.discard(bucket)  # (a suspended bucket: this fake keeps no versions then)
            return _response(request, 200, {})
        status = "<Status>Enabled</Status>" if bucket in self.versioned else ""
        answer = f'<VersioningConfiguration xmlns="{_S3_NS}">{status}</VersioningConfiguration>'
        return _response(request, 200, {"Content-Type": "application/xml"}, answer.encode())

    def _read_version(self, request: Any, bucket: str, key: str, version_id: str) -> Any:
        version = next((v for v in self.versions[bucket].get(key, []) if v.id == version_id), None)
        if version is None:
            return _s3_error(request, 404, "NoSuchVersion")
        if version.obj is None:
            return _s3_error(request, 405, "MethodNotAllowed")
        obj = version.obj
        headers = {
            "ETag": obj.etag,
            "Content-Length": str(len(obj.body)),
            "x-amz-version-id": version.id,
            "Last-Modified": datetime.datetime.fromtimestamp(version.ms / 1000, tz=datetime.timezone.utc).strftime(
                "%a, %d %b %Y %H:%M:%S GMT"
            ),
            **{f"x-amz-meta-{k}": v for k, v in obj.metadata.items()},
        }
        return _response(request, 200, headers, obj.body if request.method == "GET" else b"")

    def _delete_many(self, request: Any, objects: Any, body: bytes, bucket: str | None = None) -> Any:
        if bucket is None:
            return super()._delete_many(request, objects, body)
        for element in ET.fromstring(body):
            if not element.tag.endswith("Object"):
                continue
            fields = {child.tag.rpartition("}")[2]: child.text or "" for child in element}
            if "VersionId" in fields:
                self._remove_version(bucket, fields["Key"], fields["VersionId"])
            else:
                self._delete_current(bucket, fields["Key"])
        return _response(request, 200, {}, f'<DeleteResult xmlns="{_S3_NS}"></DeleteResult>'.encode())

    def _list_versions(self, request: Any, bucket: str, query: Mapping[str, str]) -> Any:
        prefix, key_marker = query.get("prefix", ""), query.get("key-marker", "")
        version_marker, most = query.get("version-id-marker", ""), int(query.get("max-keys", "1000"))
        keys = self.ordered.get(bucket, [])
        start = bisect.bisect_left(keys, max(prefix, key_marker))
        found: list[tuple[str, _Version, bool]] = []
        truncated = False
        for key in keys[start:]:
            if not key.startswith(prefix):
                break
            of_key = self.versions[bucket][key]
            skip = 0
            if key == key_marker:  # go on after the marker's version, or after the key's last one
                ids = [v.id for v in of_key]
                skip = ids.index(version_marker) + 1 if version_marker in ids else len(of_key)
            for at, version in enumerate(of_key[skip:], start=skip):
                if len(found) == most:
                    truncated = True
                    break
                found.append((key, version, at == 0))
            if truncated:
                break
        parts = [
            f'<ListVersionsResult xmlns="{_S3_NS}"><Name>{escape(bucket)}</Name><Prefix>{escape(prefix)}</Prefix>',
            f"<KeyMarker>{escape(key_marker)}</KeyMarker><VersionIdMarker>{escape(version_marker)}</VersionIdMarker>",
            f"<MaxKeys>{most}</MaxKeys><IsTruncated>{'true' if truncated else 'false'}</IsTruncated>",
        ]
        for key, version, latest in found:
            common = (
                f"<Key>{escape(key)}</Key><VersionId>{version.id}</VersionId>"
                f"<IsLatest>{'true' if latest else 'false'}</IsLatest><LastModified>{_stamp(version.ms)}</LastModified>"
            )
            if version.obj is None:
                parts.append(f"<DeleteMarker>{common}</DeleteMarker>")
            else:
                parts.append(
                    f"<Version>{common}<ETag>{escape(version.obj.etag)}</ETag><Size>{len(version.obj.body)}</Size>"
                    "<StorageClass>STANDARD</StorageClass></Version>"
                )
        if truncated:
            last_key, last, _ = found[-1]
            parts.append(f"<NextKeyMarker>{escape(last_key)}</NextKeyMarker>")
            parts.append(f"<NextVersionIdMarker>{last.id}</NextVersionIdMarker>")
        parts.append("</ListVersionsResult>")
        return _response(request, 200, {"Content-Type": "application/xml"}, "".join(parts).encode())


@contextmanager
def moto_in_milliseconds() -> Iterator[None]:
    """moto's S3 with versions a millisecond apart and listed to the millisecond, as this
    fake lists them (moto lists whole seconds: ties that cost ``S3Store`` extra listings)."""
    import moto.s3.models as models
    from moto.core.utils import iso_8601_datetime_with_milliseconds

    original: Callable[[], datetime.datetime] = getattr(models, "utcnow")  # noqa: B009  (not exported)
    last = [datetime.datetime.min]
    lock = threading.Lock()

    def ticking() -> datetime.datetime:
        with lock:
            last[0] = max(original(), last[0] + datetime.timedelta(milliseconds=1))
            return last[0]

    def listed(self: Any) -> str:
        return iso_8601_datetime_with_milliseconds(self.last_modified)

    saved = [(cls, cls.__dict__["last_modified_ISO8601"]) for cls in (models.FakeKey, models.FakeDeleteMarker)]
    setattr(models, "utcnow", ticking)  # noqa: B010
    for cls, _ in saved:
        cls.last_modified_ISO8601 = property(listed)  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        setattr(models, "utcnow", original)  # noqa: B010
        for cls, prop in saved:
            cls.last_modified_ISO8601 = prop  # type: ignore[method-assign]


# -- the server under measure ---------------------------------------------------------------
@dataclass
class Call:
    method: str
    path: str
    body: Any = None
    query: tuple[tuple[str, str], ...] = ()


@dataclass
class Endpoint:
    """One row: ``prepare(rep)`` sets up (network off) and gives the call to measure."""

    name: str
    prepare: Callable[[int], Call]
    status: int = 200
    settle: bool = True  # bring the index up to date before the call


@dataclass
class Row:
    endpoint: str
    status: int
    samples: list[Sample] = field(default_factory=list)

    def requests(self) -> list[dict[str, int]]:
        """Each distinct set of S3 requests (botocore's operation: count), in order of first seen."""
        seen: list[dict[str, int]] = []
        for sample in self.samples:
            counts = dict(sorted(sample.s3.items()))
            if counts not in seen:
                seen.append(counts)
        return seen

    def as_json(self) -> dict[str, Any]:
        return {
            "endpoint": self.endpoint,
            "status": self.status,
            "requests": self.requests(),
            "kms_calls": sorted({s.kms for s in self.samples}),
            "round_trips": [s.round_trips for s in self.samples],
            "ms": [round(s.seconds * 1000, 2) for s in self.samples],
            "median_ms": round(statistics.median(s.seconds for s in self.samples) * 1000, 2),
            "median_cpu_ms": round(statistics.median(s.cpu for s in self.samples) * 1000, 2),
        }


def verbs_text(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{VERBS.get(op, op)} {n}" for op, n in sorted(counts.items(), key=_verb_key)) or "-"


def _verb_key(item: tuple[str, int]) -> str:
    return VERBS.get(item[0], item[0])


def _content(i: int, revision: int) -> str:
    """Memory ``i``'s text at ``revision``: unique, of a length that varies as notes' do."""
    return f"Memory {i}, revision {revision}: the user's note.\n" + "words " * ((i * 13 + revision * 7) % 60)


def _path(i: int) -> str:
    deeper = "/details" if i % 7 == 6 else ""
    return f"/topic-{i % TOPICS}{deeper}/note-{i:04d}.md"


class ServeBench:
    """The API on a versioned bucket behind the simulated network, seeded and measured."""

    def __init__(self, memories: int, edits: int, rtt: float, use_moto: bool = False) -> None:
        from s3memory import EncryptedMemory, KeyCache, UserMemories
        from s3memory.serve.api import MemoryStoreAPI

        self.memories, self.edits = memories, edits
        self.network = Network(rtt=rtt, s3=None if use_moto else VersionedFakeS3(), kms=None if use_moto else FakeKMS())
        self.network.enabled = False
        s3 = self.network.attach(library_s3_client(None))
        kms = self.network.attach(plain_clients(None)[2])
        s3.create_bucket(Bucket=BUCKET)
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        key_id = kms.create_key()["KeyMetadata"]["Arn"] if use_moto else KMS_KEY
        users = UserMemories(bucket=BUCKET, s3_client=s3, kms_key_id=key_id, kms_client=kms, key_cache=KeyCache())

        def open_tenant(user_id: str, actor: str) -> EncryptedMemory:
            memory = users.open(user_id, actor=actor)
            assert isinstance(memory, EncryptedMemory)  # build_api refuses mounts likewise
            return memory

        self.api = MemoryStoreAPI(open_tenant, key=SERVE_KEY)
        self.store = ""
        self.ids: list[str] = []  # the seeded memories' ids, by number
        self.revisions: list[int] = []
        self._cursor = itertools.count()
        self._fresh = itertools.count()

    # -- calls -----------------------------------------------------------------------------
    def handle(self, call: Call) -> Any:
        from s3memory.serve.http import Request

        body = b"" if call.body is None else json.dumps(call.body).encode()
        return self.api.handle(Request(call.method, call.path, call.query, {"x-api-key": SERVE_KEY}, body))

    def call(self, method: str, path: str, body: Any = None, query: tuple[tuple[str, str], ...] = ()) -> Any:
        """An unmeasured call that must succeed: its answer's body."""
        answer = self.handle(Call(method, path, body, query))
        if answer.status != 200:
            raise SystemExit(f"setup call {method} {path} answered {answer.status}: {answer.body}")
        return answer.body

    @property
    def base(self) -> str:
        return f"/v1/memory_stores/{self.store}"

    def seed(self) -> None:
        self.store = self.call("POST", "/v1/memory_stores", {"name": "bench", "description": "the measured store"})[
            "id"
        ]
        for i in range(self.memories):
            self.ids.append(
                self.call("POST", self.base + "/memories", {"path": _path(i), "content": _content(i, 0)})["id"]
            )
            self.revisions.append(0)
        for revision in range(1, self.edits + 1):
            for i in range(self.memories):
                self.edit(i, revision)

    def edit(self, i: int, revision: int | None = None) -> None:
        self.revisions[i] = self.revisions[i] + 1 if revision is None else revision
        self.call("POST", f"{self.base}/memories/{self.ids[i]}", {"content": _content(i, self.revisions[i])})

    def settle(self) -> None:
        """Listings bring the memories' and the registry's search indexes up to date."""
        self.call("GET", self.base + "/memories", query=(("limit", "1"),))
        self.call("GET", "/v1/memory_stores", query=(("limit", "1"),))

    def target(self) -> int:
        """The next seeded memory to act on (in turn, so that repetitions touch different ones)."""
        return next(self._cursor) % self.memories

    def fresh_memory(self) -> dict[str, Any]:
        n = next(self._fresh)
        return dict(self.call("POST", self.base + "/memories", {"path": f"/scratch/{n}.md", "content": f"scratch {n}"}))

    def fresh_store(self, memories: int = 0) -> str:
        store = str(self.call("POST", "/v1/memory_stores", {"name": f"scratch {next(self._fresh)}"})["id"])
        for i in range(memories):
            self.call("POST", f"/v1/memory_stores/{store}/memories", {"path": _path(i), "content": _content(i, 0)})
        return store

    def old_version(self) -> str:
        """The oldest version of a seeded memory (one folder deep) that is neither its current
        one nor redacted."""
        for _ in range(self.memories):
            i = self.target()
            if _path(i).count("/") > 2:
                continue  # a deeper path lists one more folder's records: one depth for every row
            listed = self.call(
                "GET", self.base + "/memory_versions", query=(("memory_id", self.ids[i]), ("limit", "100"))
            )
            old = [v for v in listed["data"][1:] if v["redacted_at"] is None and v["operation"] != "deleted"]
            if old:
                return str(old[-1]["id"])
        raise SystemExit("no version left to redact: give more --memories or --edits")

    # -- the endpoints ---------------------------------------------------------------------
    def endpoints(self) -> list[Endpoint]:
        stores, base = "/v1/memory_stores", self.base
        one = f"{base}/memories/"

        def memory(rep: int) -> str:
            return one + self.ids[self.target()]

        def behind(rep: int) -> Call:
            self.edit(self.target())
            return Call("GET", memory(rep))

        def renamed(rep: int) -> Call:
            i = self.target()
            return Call("POST", one + self.ids[i], {"path": f"/renamed/{i}-{rep}-{next(self._fresh)}.md"})

        def both(rep: int) -> Call:
            i = self.target()
            self.revisions[i] += 1
            path = f"/renamed/{i}-{rep}-{next(self._fresh)}.md"
            return Call("POST", one + self.ids[i], {"path": path, "content": _content(i, self.revisions[i])})

        def content(rep: int) -> Call:
            i = self.target()
            self.revisions[i] += 1
            return Call("POST", one + self.ids[i], {"content": _content(i, self.revisions[i])})

        def failed_update(rep: int) -> Call:
            precondition = {"type": "content_sha256", "content_sha256": WRONG_SHA256}
            return Call("POST", memory(rep), {"content": "never written", "precondition": precondition})

        def a_version(rep: int) -> Call:
            listed = self.call("GET", base + "/memory_versions", query=(("limit", "100"),))["data"]
            listed = [v for v in listed if v["operation"] != "deleted"]  # a deletion has no content to read
            return Call("GET", f"{base}/memory_versions/{listed[(rep * 7 + 3) % len(listed)]['id']}")

        return [
            Endpoint("stores: create", lambda rep: Call("POST", stores, {"name": f"new store {rep}"})),
            Endpoint("stores: retrieve", lambda rep: Call("GET", base)),
            Endpoint("stores: update", lambda rep: Call("POST", base, {"description": f"revision {rep}"})),
            Endpoint("stores: list", lambda rep: Call("GET", stores)),
            Endpoint("stores: archive", lambda rep: Call("POST", f"{stores}/{self.fresh_store()}/archive")),
            Endpoint("stores: delete (empty)", lambda rep: Call("DELETE", f"{stores}/{self.fresh_store()}")),
            Endpoint("stores: delete (5 memories)", lambda rep: Call("DELETE", f"{stores}/{self.fresh_store(5)}")),
            Endpoint(
                "memories: create",
                lambda rep: Call(
                    "POST", base + "/memories", {"path": f"/new/{rep}-{next(self._fresh)}.md", "content": "new"}
                ),
            ),
            Endpoint("memories: retrieve", lambda rep: Call("GET", memory(rep))),
            Endpoint("memories: retrieve, index 1 write behind", behind, settle=False),
            Endpoint("memories: update content", content),
            Endpoint("memories: update path (rename)", renamed),
            Endpoint("memories: update path and content", both),
            Endpoint("memories: update, precondition fails", failed_update, status=409),
            Endpoint("memories: list", lambda rep: Call("GET", base + "/memories")),
            Endpoint("memories: list depth=1", lambda rep: Call("GET", base + "/memories", query=(("depth", "1"),))),
            Endpoint(
                "memories: list view=full", lambda rep: Call("GET", base + "/memories", query=(("view", "full"),))
            ),
            Endpoint("memories: delete", lambda rep: Call("DELETE", one + self.fresh_memory()["id"])),
            Endpoint(
                "memories: delete, precondition fails",
                lambda rep: Call("DELETE", memory(rep), query=(("expected_content_sha256", WRONG_SHA256),)),
                status=409,
            ),
            Endpoint("versions: list", lambda rep: Call("GET", base + "/memory_versions")),
            Endpoint(
                "versions: list memory_id=",
                lambda rep: Call("GET", base + "/memory_versions", query=(("memory_id", self.ids[0]),)),
            ),
            Endpoint("versions: retrieve", a_version),
            Endpoint(
                "versions: redact", lambda rep: Call("POST", f"{base}/memory_versions/{self.old_version()}/redact")
            ),
        ]

    def run(self, endpoint: Endpoint, repetitions: int) -> Row:
        row = Row(endpoint.name, endpoint.status)
        for rep in range(-1, repetitions):  # -1: once unmeasured, so that the process is warm for it
            self.network.enabled = False
            call = endpoint.prepare(rep)
            if endpoint.settle:
                self.settle()
            answers: list[Any] = []

            def step(call: Call = call, answers: list[Any] = answers) -> None:
                answers.append(self.handle(call))

            if rep < 0:
                step()
            else:
                self.network.enabled = True
                row.samples.append(measure(step, self.network))
                self.network.enabled = False
            if answers[0].status != endpoint.status:
                raise SystemExit(
                    f"{endpoint.name}: {call.method} {call.path} answered {answers[0].status}, "
                    f"not {endpoint.status}: {answers[0].body}"
                )
        return row


def run_all(memories: int, edits: int, repetitions: int, rtt: float, use_moto: bool = False) -> list[Row]:
    bench = ServeBench(memories, edits, rtt, use_moto)
    print(f"seeding {memories} memories, {edits} edits each ...", file=sys.stderr)
    bench.seed()
    rows = []
    for endpoint in bench.endpoints():
        print(f"  {endpoint.name} ...", file=sys.stderr)
        rows.append(bench.run(endpoint, repetitions))
    return rows


def cross_check_moto(memories: int, edits: int) -> str:
    """The workload on moto (versioned, times to the millisecond) and on the fake, once
    each with no round-trip time: the S3 requests and KMS calls must agree per endpoint."""
    from moto import mock_aws

    counts = []
    for use_moto in (False, True):
        with mock_aws() if use_moto else nullcontext(), moto_in_milliseconds() if use_moto else nullcontext():
            rows = run_all(memories, edits, 1, 0.0, use_moto)
        counts.append([(row.endpoint, row.requests(), sorted({s.kms for s in row.samples})) for row in rows])
    if counts[0] != counts[1]:
        differ = [f"{a[0]}: fake {a[1:]}, moto {b[1:]}" for a, b in zip(*counts, strict=True) if a != b]
        raise SystemExit("moto cross-check FAILED:\n" + "\n".join(differ))
    return f"moto cross-check: identical S3 request and KMS call counts on all {len(counts[0])} endpoints"


# -- output ------------------------------------------------------------------------------------
def machine() -> str:
    import botocore

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{datetime.date.today().isoformat()} on {os.cpu_count()} cores ({platform.system()} {platform.release()}, "
        f"{platform.machine()}), Python {platform.python_version()}, botocore {botocore.__version__}, "
        f"load average {load:.1f} at the start"
    )


def render(figures: Mapping[str, Any]) -> str:
    settings = figures["settings"]
    rtt = f"{settings['rtt_ms']:g} ms"
    lines = [
        f"`s3memory serve` per endpoint, MemoryStoreAPI.handle called directly (no HTTP): simulated network, "
        f"{rtt} per request, in process (the fake answers inside botocore, its bucket versioned); one store of "
        f"{settings['memories']} memories of {settings['edits'] + 1} versions each, tenant-key mode, warm; "
        f"median of {settings['repetitions']} calls (client CPU: every thread of the process, the fake's "
        f"included). Measured {figures['machine']}.",
        "",
        "| endpoint | S3 requests by verb | KMS | round trips | median | at RTT | client CPU |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in figures["rows"]:
        requests = " or ".join(verbs_text(counts) for counts in row["requests"])
        kms = "/".join(str(n) for n in row["kms_calls"])
        trips = sorted(set(row["round_trips"]))
        trip_text = str(trips[0]) if len(trips) == 1 else f"{trips[0]}-{trips[-1]}"
        status = "" if row["status"] == 200 else f" ({row['status']})"
        lines.append(
            f"| {row['endpoint']}{status} | {requests} | {kms} | {trip_text} | {row['median_ms']:.0f} ms | {rtt} "
            f"| {row['median_cpu_ms']:.0f} ms |"
        )
    if figures.get("moto"):
        lines += ["", figures["moto"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=50, help="memories in the measured store (default 50)")
    parser.add_argument("--edits", type=int, default=3, help="content edits of each memory when seeded (default 3)")
    parser.add_argument("--repetitions", type=int, default=5, help="measured calls per endpoint (default 5)")
    parser.add_argument("--rtt-ms", type=float, default=20.0, help="simulated round trip per request (default 20)")
    parser.add_argument(
        "--json",
        nargs="?",
        const="-",
        help="the figures as JSON: on stdout instead of the table, or (given a file) to that file as well",
    )
    parser.add_argument("--check-moto", action="store_true", help="cross-check the request counts against moto")
    args = parser.parse_args(argv)
    if args.memories < 1 or args.edits < 1 or args.repetitions < 1 or args.rtt_ms < 0:
        parser.error("--memories, --edits and --repetitions must be at least 1, --rtt-ms at least 0")
    for name, value in {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        os.environ.setdefault(name, value)
    started = time.perf_counter()
    figures: dict[str, Any] = {
        "settings": {
            "memories": args.memories,
            "edits": args.edits,
            "repetitions": args.repetitions,
            "rtt_ms": args.rtt_ms,
        },
        "machine": machine(),
    }
    rows = run_all(args.memories, args.edits, args.repetitions, args.rtt_ms / 1000)
    figures["rows"] = [row.as_json() for row in rows]
    if args.check_moto:
        print("the same on moto, and on the fake, with no round-trip time ...", file=sys.stderr)
        figures["moto"] = cross_check_moto(args.memories, args.edits)
    figures["seconds"] = round(time.perf_counter() - started, 1)
    if args.json == "-":
        print(json.dumps(figures, indent=2))
    else:
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
        print(render(figures))
    print(f"total {figures['seconds']:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
