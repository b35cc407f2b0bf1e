"""A fast in-process S3 and KMS for the benchmark, and a simulated network in front of it.

Why not moto: moto spends about 3 ms of CPU per request (response serialization) under
the GIL, so a 1,000-file rename measures moto (2,000 requests = 6 s), not the algorithm.
This responder answers the few operations s3memory and the official S3 Encryption Client
use, in well under a millisecond, with S3's conditional semantics (If-None-Match,
If-Match, CopySourceIfMatch). It plugs into a boto3 client exactly as moto does: a
``before-send`` handler that returns the response, so botocore still signs, serializes
and parses every request as it would against AWS. The benchmark cross-checks its request
counts against moto (``run.py --check-moto``). Correctness is tested on moto, never here.

``Network`` sleeps one round-trip time per request inside that handler, so requests issued
from different threads overlap as they would over a real network, and records each
request's interval so the benchmark can count sequential round trips. With ``http=True`` it
answers nothing: the requests go over real HTTP to ``httpfake.py`` (which sleeps the round
trip server-side), and each request's interval runs from ``before-send`` to the response.

Each bucket keeps its keys sorted (``_Bucket``), so a LIST page costs its own size and not
a sort of the whole bucket: at 100,000 keys the fake must not be what the scale run measures.
"""

from __future__ import annotations

import base64
import bisect
import hashlib
import json
import os
import threading
import time
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape

from botocore.awsrequest import AWSResponse

_S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
_DATE = "2026-01-01T00:00:00.000Z"


class _Raw:
    """The raw-response object botocore reads a body from."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body

    def read(self, *_: Any) -> bytes:
        body, self._body = self._body, b""
        return body


def _response(request: Any, status: int, headers: dict[str, str], body: bytes = b"") -> AWSResponse:
    headers = {"x-amz-request-id": "fake", **headers}
    headers.setdefault("Content-Length", str(len(body)))
    return AWSResponse(request.url, status, headers, _Raw(body))


def _s3_error(request: Any, status: int, code: str) -> AWSResponse:
    body = f"<Error><Code>{code}</Code><Message>{code}</Message></Error>".encode()
    if request.method == "HEAD":
        body = b""
    return _response(request, status, {"Content-Type": "application/xml"}, body)


def _decode_aws_chunked(body: bytes) -> bytes:
    """botocore sends PutObject bodies as aws-chunked with a checksum trailer."""
    out, position = bytearray(), 0
    while True:
        line_end = body.index(b"\r\n", position)
        size = int(body[position:line_end].split(b";")[0], 16)
        if size == 0:
            return bytes(out)
        out += body[line_end + 2 : line_end + 2 + size]
        position = line_end + 2 + size + 2


@dataclass
class _Object:
    body: bytes
    metadata: dict[str, str]
    etag: str


class _Bucket(dict[str, _Object]):
    """A bucket's objects, with its keys also in a sorted list for listings.

    Deleted keys stay in the list (skipped when listed) until they are a majority, so a
    DeleteObjects of 1,000 keys does not shift a 100,000-key list 1,000 times. Fill it by
    item assignment only (``update``/``setdefault`` would bypass the list).
    """

    def __init__(self) -> None:
        super().__init__()
        self.order: list[str] = []
        self.stale = 0

    def __setitem__(self, key: str, value: _Object) -> None:
        if key not in self:
            at = bisect.bisect_left(self.order, key)
            if at < len(self.order) and self.order[at] == key:
                self.stale -= 1  # a deleted key written again: already in its place
            else:
                self.order.insert(at, key)
        super().__setitem__(key, value)

    def pop(self, key: str, *default: Any) -> Any:
        if key not in self:
            return super().pop(key, *default)
        value = super().pop(key)
        self.stale += 1
        if self.stale > 1000 and self.stale * 2 > len(self.order):
            self.order = [k for k in self.order if k in self]
            self.stale = 0
        return value

    def __delitem__(self, key: str) -> None:
        self.pop(key)

    def keys_after(self, prefix: str, start: str, most: int) -> list[str]:
        """Up to ``most`` live keys starting with ``prefix``, after ``start``, in order."""
        at = bisect.bisect_left(self.order, prefix)
        if start:
            at = max(at, bisect.bisect_right(self.order, start))
        found: list[str] = []
        order = self.order
        while at < len(order) and len(found) < most and order[at].startswith(prefix):
            if order[at] in self:
                found.append(order[at])
            at += 1
        return found


@dataclass
class FakeS3:
    """Buckets of objects, answering GetObject, HeadObject, PutObject, CopyObject,
    ListObjectsV2, DeleteObject, DeleteObjects and CreateBucket (path-style or virtual-hosted
    URLs: the library's own client, which the bench measures, uses the latter on AWS)."""

    buckets: dict[str, _Bucket] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def respond(self, request: Any) -> AWSResponse:
        url = urlsplit(request.url)
        host = url.hostname or ""
        if ".s3." in host and host.endswith(".amazonaws.com"):  # virtual-hosted: the bucket is in the host
            bucket, raw_key = host.split(".s3.", 1)[0], url.path.lstrip("/")
        else:
            bucket, _, raw_key = url.path.lstrip("/").partition("/")
        key = unquote(raw_key)
        query = parse_qs(url.query, keep_blank_values=True)
        headers = {k.lower(): v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
        with self.lock:
            if request.method == "PUT" and not key:
                self.buckets.setdefault(bucket, _Bucket())
                return _response(request, 200, {})
            objects = self.buckets.get(bucket)
            if objects is None:
                return _s3_error(request, 404, "NoSuchBucket")
            if request.method == "GET" and not key:
                return self._list(request, objects, query)
            if request.method == "POST" and "delete" in query:
                return self._delete_many(request, objects, request.body)
            if request.method in ("GET", "HEAD"):
                obj = objects.get(key)
                if obj is None:
                    return _s3_error(request, 404, "NoSuchKey")
                meta = {f"x-amz-meta-{k}": v for k, v in obj.metadata.items()}
                body = obj.body if request.method == "GET" else b""
                out = {"ETag": obj.etag, "Content-Length": str(len(obj.body)), **meta}
                return _response(request, 200, out, body)
            if request.method == "DELETE":
                objects.pop(key, None)
                return _response(request, 204, {})
            if request.method == "PUT":
                return self._put(request, objects, key, headers)
        return _s3_error(request, 400, "NotImplemented")

    def _put(self, request: Any, objects: _Bucket, key: str, headers: dict[str, str]) -> AWSResponse:
        current = objects.get(key)
        if headers.get("if-none-match") == "*" and current is not None:
            return _s3_error(request, 412, "PreconditionFailed")
        if "if-match" in headers and (current is None or current.etag.strip('"') != headers["if-match"].strip('"')):
            return _s3_error(request, 412 if current else 404, "PreconditionFailed" if current else "NoSuchKey")
        if "x-amz-copy-source" in headers:
            source_bucket, _, source_key = unquote(headers["x-amz-copy-source"]).lstrip("/").partition("/")
            source_objects = self.buckets.get(source_bucket)
            source = source_objects.get(source_key) if source_objects is not None else None
            if source is None:
                return _s3_error(request, 404, "NoSuchKey")
            if "if-none-match" in headers and key in objects:
                return _s3_error(request, 412, "PreconditionFailed")
            expected = headers.get("x-amz-copy-source-if-match", source.etag)
            if expected.strip('"') != source.etag.strip('"'):
                return _s3_error(request, 412, "PreconditionFailed")
            if headers.get("x-amz-metadata-directive") == "REPLACE":
                metadata = {k[11:]: v for k, v in headers.items() if k.startswith("x-amz-meta-")}
            else:
                metadata = dict(source.metadata)
            objects[key] = _Object(source.body, metadata, source.etag)
            result = f'<CopyObjectResult xmlns="{_S3_NS}"><LastModified>{_DATE}</LastModified>'
            result += f"<ETag>{escape(source.etag)}</ETag></CopyObjectResult>"
            return _response(request, 200, {}, result.encode())
        body = request.body or b""
        if hasattr(body, "read"):
            body = body.read()
        body = bytes(body)
        if "aws-chunked" in headers.get("content-encoding", ""):
            body = _decode_aws_chunked(body)
        etag = '"' + hashlib.md5(body, usedforsecurity=False).hexdigest() + '"'
        metadata = {k[11:]: v for k, v in headers.items() if k.startswith("x-amz-meta-")}
        objects[key] = _Object(body, metadata, etag)
        return _response(request, 200, {"ETag": etag})

    def _list(self, request: Any, objects: _Bucket, query: dict[str, list[str]]) -> AWSResponse:
        prefix = query.get("prefix", [""])[0]
        max_keys = int(query.get("max-keys", ["1000"])[0])
        start = query.get("continuation-token", [""])[0]
        keys = objects.keys_after(prefix, start, max_keys + 1)
        page, truncated = keys[:max_keys], len(keys) > max_keys
        parts = [f'<ListBucketResult xmlns="{_S3_NS}"><Prefix>{escape(prefix)}</Prefix>']
        parts.append(f"<KeyCount>{len(page)}</KeyCount><MaxKeys>{max_keys}</MaxKeys>")
        parts.append(f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>")
        for key in page:
            obj = objects[key]
            parts.append(
                f"<Contents><Key>{escape(key)}</Key><LastModified>{_DATE}</LastModified>"
                f"<ETag>{escape(obj.etag)}</ETag><Size>{len(obj.body)}</Size>"
                "<StorageClass>STANDARD</StorageClass></Contents>"
            )
        if truncated:
            parts.append(f"<NextContinuationToken>{escape(page[-1])}</NextContinuationToken>")
        parts.append("</ListBucketResult>")
        return _response(request, 200, {}, "".join(parts).encode())

    def _delete_many(self, request: Any, objects: _Bucket, body: bytes) -> AWSResponse:
        root = ET.fromstring(body)
        for element in root.iter():
            if element.tag.endswith("Key"):
                objects.pop(element.text or "", None)
        return _response(request, 200, {}, f'<DeleteResult xmlns="{_S3_NS}"></DeleteResult>'.encode())


@dataclass
class FakeKMS:
    """GenerateDataKey, Encrypt and Decrypt with encryption-context checks."""

    wrapped: dict[bytes, tuple[bytes, str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def respond(self, request: Any) -> AWSResponse:
        target = dict(request.headers).get("X-Amz-Target", b"")
        target = target.decode() if isinstance(target, bytes) else target
        operation = target.rpartition(".")[2]
        params = json.loads(request.body or b"{}")
        context = json.dumps(params.get("EncryptionContext", {}), sort_keys=True)
        key_id = params.get("KeyId", "fake")
        with self.lock:
            if operation in ("GenerateDataKey", "Encrypt"):
                plaintext = os.urandom(32) if operation == "GenerateDataKey" else base64.b64decode(params["Plaintext"])
                blob = os.urandom(48)
                self.wrapped[blob] = (plaintext, context)
                out = {"KeyId": key_id, "CiphertextBlob": base64.b64encode(blob).decode()}
                if operation == "GenerateDataKey":
                    out["Plaintext"] = base64.b64encode(plaintext).decode()
            elif operation == "Decrypt":
                found = self.wrapped.get(base64.b64decode(params["CiphertextBlob"]))
                if found is None or found[1] != context:
                    error = {"__type": "InvalidCiphertextException", "message": "bad ciphertext or context"}
                    return _response(
                        request, 400, {"Content-Type": "application/x-amz-json-1.1"}, json.dumps(error).encode()
                    )
                out = {"KeyId": key_id, "Plaintext": base64.b64encode(found[0]).decode()}
            else:
                error = {"__type": "UnsupportedOperationException", "message": operation}
                return _response(request, 400, {}, json.dumps(error).encode())
        return _response(request, 200, {"Content-Type": "application/x-amz-json-1.1"}, json.dumps(out).encode())


@dataclass
class Network:
    """A simulated network: ``rtt`` seconds per request, requests overlapping across threads.

    Attach it to boto3 clients; with ``s3``/``kms`` responders it also answers the requests.
    ``calls`` counts operations; ``intervals`` keeps when each request was in flight. With
    ``http=True`` it only watches: the clients send over HTTP and the server sleeps.
    """

    rtt: float = 0.020
    s3: FakeS3 | None = None
    kms: FakeKMS | None = None
    enabled: bool = True
    http: bool = False
    calls: Counter[str] = field(default_factory=Counter)
    intervals: list[tuple[float, float]] = field(default_factory=list)
    observed: int = 0  # requests s3memory's awscrt client reported (counted or not)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _sending: threading.local = field(default_factory=threading.local)

    def attach(self, client: Any) -> Any:
        service = client.meta.service_model.service_name
        events = client.meta.events
        events.register("before-call", self._count)
        if hasattr(client, "add_request_observer"):
            # s3memory's awscrt client reports its own requests. A handler at before-send
            # would make it leave every request to botocore (something intercepts them), so
            # the calls it leaves to botocore anyway are timed from before-call to after-call.
            client.add_request_observer(self._observed)
            events.register_last("before-call", self._sent)
            events.register("after-call", self._done)
            events.register("after-call-error", self._done)
        elif self.http:
            # Last, so that the interval starts when nothing but the socket write is left.
            events.register_last("before-send", self._sent)
            events.register("before-parse", self._received)
            events.register("response-received", self._done)
        else:
            events.register_first("before-send", self._send_s3 if service == "s3" else self._send_kms)
        return client

    def _count(self, model: Any, **_: Any) -> None:
        if self.enabled:
            with self.lock:
                self.calls[model.service_model.service_name + ":" + model.name] += 1

    def _observed(self, operation: str, started: float, ended: float) -> None:
        self.observed += 1
        if self.enabled:
            with self.lock:
                self.calls["s3:" + operation] += 1
                self.intervals.append((started, ended))

    def _sent(self, **_: Any) -> None:
        self._sending.start, self._sending.end = time.perf_counter(), None

    def _received(self, **_: Any) -> None:
        self._sending.end = time.perf_counter()  # before parsing: the round trip is over

    def _done(self, **_: Any) -> None:
        start = getattr(self._sending, "start", None)
        if self.enabled and start is not None:
            end = self._sending.end or time.perf_counter()  # a connection error: no parse
            with self.lock:
                self.intervals.append((start, end))
        self._sending.start = None

    def _wait(self) -> None:
        if self.enabled and self.rtt > 0:
            start = time.perf_counter()
            time.sleep(self.rtt)
            with self.lock:
                self.intervals.append((start, time.perf_counter()))

    def _send_s3(self, request: Any, **_: Any) -> AWSResponse | None:
        self._wait()
        return self.s3.respond(request) if self.s3 is not None else None

    def _send_kms(self, request: Any, **_: Any) -> AWSResponse | None:
        self._wait()
        return self.kms.respond(request) if self.kms is not None else None

    def take(self) -> tuple[Counter[str], int]:
        """The calls counted and the sequential round trips since the last take."""
        with self.lock:
            calls, intervals = self.calls, sorted(self.intervals, key=lambda i: i[1])
            self.calls, self.intervals = Counter(), []
        # The longest chain of requests that did not overlap in time: each had to wait for
        # the one before it, so that many round trips were paid one after another.
        chain, last_end = 0, float("-inf")
        for start, end in intervals:
            if start >= last_end:
                chain, last_end = chain + 1, end
        return calls, chain
