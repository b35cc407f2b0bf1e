"""The awscrt client of ``S3Store``'s hot verbs (``s3memory._aws.crt``): the store
contract through it, the memory commands through it, and its answers and errors compared
with botocore's for the same request to the same server.

moto's in-process mock cannot see awscrt's sockets, so the tests run against moto's server
on a real port (one request at a time, as real S3 requests are atomic), against radosgw
when one runs (``S3MEMORY_TEST_S3_ENDPOINT``), and against a small server of canned answers
for what moto does not do (per-key ETag conditions of DeleteObjects, 403, a 412 on COPY).

Over 400 lines because the client's parity with botocore is checked verb by verb, error by
error and retry by retry here, next to the servers those checks need.
"""

from __future__ import annotations

import base64
import hashlib
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar
from urllib.parse import parse_qsl, urlsplit

import pytest
from helpers import MASTER_KEY, REGION, RGW_ENDPOINT
from helpers.canned_http import CannedServer, serving

from s3memory import (
    KeyCache,
    ObjectStore,
    ObjectTooLargeError,
    PreconditionFailedError,
    S3Store,
    StorageAccessDeniedError,
    StorageError,
    StorageUnavailableError,
    open_memory,
)
from s3memory._aws.clients import new_client, tuned_session
from s3memory._aws.errors import map_aws_error
from s3memory._crypto.cache import process_key_cache
from s3memory.testing import ObjectStoreContract, use_fake_aws_credentials

pytest.importorskip("awscrt", reason="awscrt is not installed (pip install 's3memory[fast]')")
_werkzeug_app = pytest.importorskip("moto.moto_server.werkzeug_app", reason="moto[server] is not installed")

from s3memory._aws import crt as _s3crt  # noqa: E402 - after the skips
from s3memory._aws.crt import CrtS3Client, fast_client  # noqa: E402

MOTO_GAPS: dict[str, str] = {  # as tests/contract/test_stores.py declares them for S3Store on moto
    "copy_if_match": "moto ignores CopySourceIfMatch (real S3 honours it)",
    "copy_if_none_match": "moto ignores If-None-Match on CopyObject (real S3 honours it)",
    "delete_if_match": "moto ignores the ETag condition in DeleteObjects (real S3 honours it)",
}
#: Keys S3 takes and a client must quote exactly: spaces, "+", "%", "~", UTF-8, dots, XML.
AWKWARD_KEYS = [
    "t/a b",
    "t/a+b",
    "t/100%",
    "t/~tilde",
    "t/ünï/ç😀",
    "t/a/../b",
    "t/a//b",
    "t/&<>\"'",
    "t/?#=*;:@$,!()[]",
    "t/dir/",
]


# -- servers ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    """moto's server on 127.0.0.1 (a free port), handling one request at a time."""
    from werkzeug.serving import make_server

    app = _werkzeug_app.DomainDispatcherApplication(_werkzeug_app.create_backend_app)
    lock = threading.Lock()

    def atomic(environ: Any, start_response: Any) -> Any:
        with lock:  # moto stores a PUT's body before its metadata; S3 requests are atomic
            return app(environ, start_response)

    server = make_server("127.0.0.1", 0, atomic, threaded=True, request_handler=_werkzeug_app.MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join()


@pytest.fixture
def fake_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    use_fake_aws_credentials(monkeypatch)
    process_key_cache().clear()


@pytest.fixture
def boto(moto_endpoint: str, fake_aws: None) -> Any:
    """The boto3 client s3memory builds, on moto's server, with a fresh bucket of its own."""
    client = new_client("s3", region_name=REGION, endpoint_url=moto_endpoint)
    client.test_bucket = f"crt-{uuid.uuid4().hex[:16]}"
    client.create_bucket(Bucket=client.test_bucket)
    return client


@pytest.fixture
def crt(boto: Any) -> CrtS3Client:
    wrapped = fast_client(boto)
    assert isinstance(wrapped, CrtS3Client)
    return wrapped


@pytest.fixture
def canned(fake_aws: None) -> Iterator[CannedServer]:
    with serving() as server:
        yield server


def _canned_clients(server: CannedServer, *, timeout: float = 2) -> tuple[Any, CrtS3Client]:
    boto = new_client("s3", region_name=REGION, endpoint_url=server.endpoint, timeout=timeout)
    return boto, CrtS3Client(boto)


def _both(call: Callable[[Any], Any], boto: Any, crt: Any) -> tuple[Any, Any]:
    """``call`` on each client: its answer, or the ``ClientError``'s response and class."""
    out = []
    for client in (boto, crt):
        try:
            out.append(_comparable(call(client)))
        except Exception as exc:
            response = getattr(exc, "response", None)
            assert response is not None, repr(exc)
            out.append((type(exc).__name__, response["Error"], response["ResponseMetadata"]["HTTPStatusCode"]))
    return out[0], out[1]


def _comparable(response: Mapping[str, Any]) -> dict[str, Any]:
    """An answer without what differs from one request to the next (request ids, dates)."""
    out = {k: v for k, v in response.items() if k != "ResponseMetadata"}
    out["HTTPStatusCode"] = response["ResponseMetadata"]["HTTPStatusCode"]
    if "Body" in out:
        out["Body"] = out["Body"].read()
    return out


# -- the store contract ------------------------------------------------------------------------
class TestCrtS3StoreOnMotoServer(ObjectStoreContract):
    """On moto's server, a bucket without versioning."""

    lacks: ClassVar[Mapping[str, str]] = {**MOTO_GAPS, "versions": "the bucket's versioning is not enabled"}

    @pytest.fixture
    def store(self, crt: CrtS3Client) -> ObjectStore:
        return S3Store(crt.test_bucket, crt)


@pytest.mark.slow  # the hot verbs are the unversioned class's; the versions' own calls go to boto3
class TestVersionedCrtS3StoreOnMotoServer(ObjectStoreContract):
    """On moto's server, a versioned bucket (the versions' own calls go to boto3)."""

    lacks: ClassVar[Mapping[str, str]] = MOTO_GAPS

    @pytest.fixture
    def store(self, crt: CrtS3Client) -> ObjectStore:
        crt.put_bucket_versioning(Bucket=crt.test_bucket, VersioningConfiguration={"Status": "Enabled"})
        return S3Store(crt.test_bucket, crt)


class TestCrtS3StoreOnRadosgw(ObjectStoreContract):
    """On Ceph radosgw (skipped unless S3MEMORY_TEST_S3_ENDPOINT is set), as
    ``tests/contract/test_stores.py`` runs ``S3Store`` there: its gaps are radosgw 16's."""

    lacks: ClassVar[Mapping[str, str]] = {
        "copy_if_match": "radosgw 16 reads x-amz-copy-if-match, not x-amz-copy-source-if-match (ceph tracker 40808)",
        "copy_if_none_match": "radosgw 16 ignores If-None-Match on CopyObject",
        "delete_if_match": "radosgw 16 ignores the ETag condition in DeleteObjects",
    }

    @pytest.fixture
    def store(self, rgw_client: Any, request: pytest.FixtureRequest) -> Iterator[ObjectStore]:
        from helpers.buckets import remove_every_version

        bucket = rgw_client.s3memory_test_bucket
        if request.function.__name__.startswith("test_versions_"):
            rgw_client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        client = fast_client(rgw_client)
        assert isinstance(client, CrtS3Client)
        yield S3Store(bucket, client)
        remove_every_version(rgw_client, bucket)


# -- the client ----------------------------------------------------------------------------------
def test_fast_client_wraps_only_a_boto3_s3_client(boto: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    wrapped = fast_client(boto)
    assert isinstance(wrapped, CrtS3Client)
    assert fast_client(wrapped) is wrapped
    kms = new_client("kms", region_name=REGION)
    assert fast_client(kms) is kms
    other = object()
    assert fast_client(other) is other
    monkeypatch.setitem(sys.modules, "awscrt.http", None)  # as if awscrt were not installed
    assert fast_client(boto) is boto


def test_fast_client_leaves_what_awscrt_cannot_send_as_botocore_does(moto_endpoint: str, fake_aws: None) -> None:
    from botocore import UNSIGNED
    from botocore.config import Config

    unsigned = new_client("s3", region_name=REGION, endpoint_url=moto_endpoint)
    unsigned.meta.config.signature_version = UNSIGNED
    assert fast_client(unsigned) is unsigned
    import boto3

    proxied = boto3.client(
        "s3", region_name=REGION, endpoint_url=moto_endpoint, config=Config(proxies={"http": "http://proxy:3128"})
    )
    assert fast_client(proxied) is proxied


def test_other_attributes_are_the_boto3_clients(crt: CrtS3Client, boto: Any) -> None:
    assert crt.meta is boto.meta
    assert crt.exceptions is boto.exceptions
    assert "Status" not in crt.get_bucket_versioning(Bucket=boto.test_bucket)
    assert S3Store(boto.test_bucket, crt).identity == S3Store(boto.test_bucket, boto).identity


def test_a_buckets_url_is_the_one_botocore_sends_to(fake_aws: None) -> None:
    """Learnt from a request botocore builds and signs (answered before it is sent)."""
    seen: list[str] = []
    client = new_client("s3", region_name="eu-west-1")
    client.meta.events.register("before-call.s3.HeadObject", lambda **_: seen.append("HeadObject"))
    crt = fast_client(client)
    assert isinstance(crt, CrtS3Client)
    route = crt._route_for({"Bucket": "my-bucket", "Key": "k"}, frozenset({"Bucket", "Key"}))
    assert route == ("my-bucket.s3.eu-west-1.amazonaws.com", "/")
    route = crt._route_for({"Bucket": "my.bucket", "Key": "k"}, frozenset({"Bucket", "Key"}))
    assert route == ("s3.eu-west-1.amazonaws.com", "/my.bucket/")  # dots: path style, as botocore
    assert seen == ["HeadObject", "HeadObject"]  # once per bucket
    crt._route_for({"Bucket": "my-bucket", "Key": "k"}, frozenset({"Bucket", "Key"}))
    assert len(seen) == 2


@pytest.mark.slow  # a subprocess
def test_import_s3memory_does_not_import_awscrt() -> None:
    code = (
        "import sys, s3memory, s3memory.stores._s3, s3memory._aws.crt\n"
        "assert 'awscrt' not in sys.modules, sorted(m for m in sys.modules if m.startswith('awscrt'))"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize("key", AWKWARD_KEYS)
def test_each_verb_answers_as_botocore_does(crt: CrtS3Client, boto: Any, key: str) -> None:
    bucket = boto.test_bucket
    meta = {"x-amz-c": "115", "Mixed-Case": "Value with spaces"}
    # Written by one, read by the other, and each answer compared.
    assert (
        crt.put_object(Bucket=bucket, Key=key, Body=b"hello", Metadata=meta)["ETag"]
        == (boto.head_object(Bucket=bucket, Key=key)["ETag"])
    )
    boto_answer, crt_answer = _both(lambda c: c.head_object(Bucket=bucket, Key=key), boto, crt)
    assert crt_answer == boto_answer
    assert crt_answer["Metadata"] == {"x-amz-c": "115", "mixed-case": "Value with spaces"}
    assert crt_answer["LastModified"].utcoffset() is not None
    boto_answer, crt_answer = _both(lambda c: c.get_object(Bucket=bucket, Key=key), boto, crt)
    assert crt_answer == boto_answer
    assert crt_answer["Body"] == b"hello" and crt_answer["ContentLength"] == 5
    copied = crt.copy_object(
        Bucket=bucket,
        Key=key + ".copy",
        CopySource={"Bucket": bucket, "Key": key},
        MetadataDirective="REPLACE",
        Metadata={"a": "1"},
        CopySourceIfMatch=crt_answer["ETag"],
    )
    assert copied["CopyObjectResult"]["ETag"] == crt_answer["ETag"]
    assert boto.head_object(Bucket=bucket, Key=key + ".copy")["Metadata"] == {"a": "1"}
    for kwargs in ({"Prefix": key}, {"Prefix": "t/", "MaxKeys": 1}, {"Prefix": "t/", "Delimiter": "/"}):
        boto_answer, crt_answer = _both(lambda c, kw=kwargs: c.list_objects_v2(Bucket=bucket, **kw), boto, crt)
        for answer in (boto_answer, crt_answer):
            for item in answer.get("Contents", []):
                item.pop("LastModified")  # the copy's differs by the time of the request
        assert crt_answer == boto_answer
    answer = crt.list_objects_v2(Bucket=bucket, Prefix=key)
    assert [item["Key"] for item in answer["Contents"]] == [key, key + ".copy"]
    deleted = crt.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": key}, {"Key": key + ".copy"}]})
    assert sorted(item["Key"] for item in deleted["Deleted"]) == [key, key + ".copy"]
    assert "Contents" not in boto.list_objects_v2(Bucket=bucket, Prefix=key)


def test_errors_are_botocores(crt: CrtS3Client, boto: Any) -> None:
    bucket = boto.test_bucket
    boto.put_object(Bucket=bucket, Key="k", Body=b"x")
    calls: list[Callable[[Any], Any]] = [
        lambda c: c.head_object(Bucket=bucket, Key="missing"),
        lambda c: c.get_object(Bucket=bucket, Key="missing"),
        lambda c: c.put_object(Bucket=bucket, Key="k", Body=b"y", IfNoneMatch="*"),
        lambda c: c.copy_object(Bucket=bucket, Key="c", CopySource={"Bucket": bucket, "Key": "missing"}),
        lambda c: c.list_objects_v2(Bucket=bucket + "-missing"),
        lambda c: c.delete_objects(Bucket=bucket + "-missing", Delete={"Objects": [{"Key": "k"}]}),
    ]
    for call in calls:
        boto_answer, crt_answer = _both(call, boto, crt)
        assert crt_answer == boto_answer
        assert isinstance(crt_answer, tuple)  # an error, both times


def test_store_errors_through_the_client(crt: CrtS3Client) -> None:
    store = S3Store(crt.test_bucket, crt)
    assert store.get("t/missing") is None
    assert store.head("t/missing") is None
    store.put("t/k", b"body", {"a": "1"})
    with pytest.raises(PreconditionFailedError):
        store.put("t/k", b"other", {}, if_none_match=True)
    with pytest.raises(PreconditionFailedError):
        store.put("t/k", b"other", {}, if_match='"0123456789abcdef0123456789abcdef"')
    with pytest.raises(PreconditionFailedError):
        store.copy("t/missing", "t/c", metadata={})
    with pytest.raises(ObjectTooLargeError):
        store.get("t/k", max_bytes=3)
    missing = S3Store(crt.test_bucket + "-missing", crt)
    with pytest.raises(StorageError, match="does not exist"):
        missing.get("t/k")


def test_an_object_larger_than_a_part_is_read_by_boto3(crt: CrtS3Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """awscrt buffers a whole answer: a large object is left to botocore's stream, which
    ``S3Store`` stops reading one byte past its bound."""
    monkeypatch.setattr(_s3crt, "GET_PART_BYTES", 10)
    seen: list[str] = []
    crt.meta.events.register("before-call.s3.GetObject", lambda **_: seen.append("boto3"))
    store = S3Store(crt.test_bucket, crt)
    store.put("t/big", b"x" * 100, {"a": "1"})
    store.put("t/small", b"x" * 10, {})
    store.put("t/empty", b"", {})
    assert store.get("t/small") is not None and not seen
    got = store.get("t/big")
    assert got is not None and got.body == b"x" * 100 and got.metadata == {"a": "1"}
    assert seen == ["boto3"]
    with pytest.raises(ObjectTooLargeError):
        store.get("t/big", max_bytes=50)
    empty = store.get("t/empty")
    assert empty is not None and empty.body == b""


def test_requests_are_reported_to_observers(crt: CrtS3Client) -> None:
    seen: list[str] = []
    crt.add_request_observer(lambda operation, started, ended: seen.append(operation) if ended >= started else None)
    store = S3Store(crt.test_bucket, crt)
    store.put("t/k", b"x", {})
    store.head("t/k")
    store.get("t/nope")
    store.copy("t/k", "t/c", metadata={})
    list(store.list("t/"))
    store.delete(["t/k", "t/c"])
    assert seen == ["PutObject", "HeadObject", "GetObject", "CopyObject", "ListObjectsV2", "DeleteObjects"]


# -- against canned answers: what moto does not do ---------------------------------------------
def test_delete_objects_reports_per_key_errors_as_botocore_does(canned: CannedServer) -> None:
    boto, crt = _canned_clients(canned)
    result = (
        b'<?xml version="1.0" encoding="UTF-8"?>'
        b'<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        b"<Deleted><Key>t/gone</Key></Deleted>"
        b"<Deleted><Key>t/v</Key><VersionId>v1</VersionId><DeleteMarker>true</DeleteMarker>"
        b"<DeleteMarkerVersionId>v2</DeleteMarkerVersionId></Deleted>"
        b"<Error><Key>t/changed</Key><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions "
        b"you specified did not hold</Message></Error>"
        b"<Error><Key>t/a &amp; b</Key><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
        b"</DeleteResult>"
    )
    canned.reply = lambda method, path: (200, {"Content-Type": "application/xml"}, result)
    delete = {
        "Objects": [
            {"Key": "t/gone"},
            {"Key": "t/v", "VersionId": "v1"},
            {"Key": "t/changed", "ETag": '"0123456789abcdef0123456789abcdef"'},
            {"Key": "t/a & b", "ETag": "abc"},
        ],
        "Quiet": True,
    }
    boto_answer, crt_answer = _both(lambda c: c.delete_objects(Bucket="bkt", Delete=delete), boto, crt)
    assert crt_answer == boto_answer
    assert crt_answer["Errors"][0] == {
        "Key": "t/changed",
        "Code": "PreconditionFailed",
        "Message": "At least one of the pre-conditions you specified did not hold",
    }
    # The same document sent, with the checksum S3 requires.
    (_, boto_path, _, boto_body), (_, crt_path, crt_headers, crt_body) = canned.requests[-2:]
    assert urlsplit(crt_path).path == urlsplit(boto_path).path and "delete" in urlsplit(crt_path).query
    import xml.etree.ElementTree as ET

    assert [(e.tag, e.text) for e in ET.fromstring(crt_body).iter()] == [
        (e.tag, e.text) for e in ET.fromstring(boto_body).iter()
    ]
    assert crt_headers["content-md5"] == base64.b64encode(hashlib.md5(crt_body).digest()).decode()
    # And S3Store reads it: a lost race is PreconditionFailedError, a refusal a StorageError.
    store = S3Store("bkt", crt)
    with pytest.raises(StorageError, match=r"1 of 2 objects could not be deleted \(AccessDenied\)"):
        store.delete(["t/changed", "t/a & b"], if_match={"t/changed": '"0123"'})
    result = result.replace(b"AccessDenied", b"NoSuchKey")
    with pytest.raises(PreconditionFailedError, match="1 objects changed"):
        store.delete(["t/changed", "t/a & b"], if_match={"t/changed": '"0123"'})


def test_refusals_without_a_body_are_named_by_status_as_botocore_does(canned: CannedServer) -> None:
    boto, crt = _canned_clients(canned)
    for status in (403, 404, 412, 405, 400):
        canned.reply = lambda method, path, status=status: (status, {}, b"")
        boto_answer, crt_answer = _both(lambda c: c.head_object(Bucket="bkt", Key="k"), boto, crt)
        assert (
            crt_answer
            == boto_answer
            == ("ClientError", {"Code": str(status), "Message": crt_answer[1]["Message"]}, status)
        )
    # And s3memory reads them alike (a HEAD's 403 has no code to tell a refusal from a missing key).
    canned.reply = lambda method, path: (403, {}, b"")
    mapped = []
    for client in (boto, crt):
        with pytest.raises(Exception) as caught:
            client.head_object(Bucket="bkt", Key="k")
        error = map_aws_error(caught.value, "head_object", client)
        mapped.append((type(error), str(error)))
    assert mapped[0] == mapped[1]
    # A refusal with a body (GET) is named: access denied, checked with a LIST of the key.
    denied = b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
    canned.reply = lambda method, path: (403, {"Content-Type": "application/xml"}, denied)
    boto_answer, crt_answer = _both(lambda c: c.get_object(Bucket="bkt", Key="k"), boto, crt)
    assert crt_answer == boto_answer
    assert crt_answer[1:] == ({"Code": "AccessDenied", "Message": "Access Denied"}, 403)
    canned.requests.clear()
    with pytest.raises(StorageAccessDeniedError):
        S3Store("bkt", crt).get("t/k")
    assert [method for method, *_ in canned.requests] == ["GET", "GET"]  # the object, then the listing
    assert "list-type=2" in canned.requests[1][1]


def test_a_copy_whose_source_changed_is_a_lost_race(canned: CannedServer) -> None:
    boto, crt = _canned_clients(canned)
    refusal = (
        b"<Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did "
        b"not hold</Message><Condition>x-amz-copy-source-If-Match</Condition><RequestId>r</RequestId></Error>"
    )
    canned.reply = lambda method, path: (412, {"Content-Type": "application/xml"}, refusal)
    kwargs = {"Key": "t/b", "CopySource": {"Bucket": "bkt", "Key": "t/a b"}, "CopySourceIfMatch": '"abc"'}
    boto_answer, crt_answer = _both(lambda c: c.copy_object(Bucket="bkt", **kwargs), boto, crt)
    assert crt_answer == boto_answer
    assert crt_answer[1]["Condition"] == "x-amz-copy-source-If-Match"
    boto_headers, crt_headers = canned.requests[-2][2], canned.requests[-1][2]
    for header in ("x-amz-copy-source", "x-amz-copy-source-if-match"):
        assert crt_headers[header] == boto_headers[header]
    with pytest.raises(PreconditionFailedError):
        S3Store("bkt", crt).copy("t/a b", "t/b", metadata={}, if_match='"abc"')
    # A 200 whose body is an error (S3 may answer a COPY so): botocore's error, after retries.
    failure = b"<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>"
    canned.reply = lambda method, path: (200, {}, failure)
    with pytest.raises(StorageUnavailableError):
        S3Store("bkt", crt).copy("t/a", "t/b", metadata={})


@pytest.mark.parametrize(
    "result",
    [
        b'<?xml version="1.0" encoding="UTF-8"?>\n<CopyObjectResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        b"<LastModified>2026-11-28T07:48:28.000Z</LastModified><ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag>"
        b"<ChecksumCRC32>AAAAAA==</ChecksumCRC32><ChecksumType>FULL_OBJECT</ChecksumType></CopyObjectResult>",
        b'<CopyObjectResult>\n  <ETag>"a&amp;b"</ETag>\n  <LastModified>2026-11-28T07:48:28Z</LastModified>\n'
        b"</CopyObjectResult>",
        b"<CopyObjectResult><ETag>&#34;abc&#34;</ETag></CopyObjectResult>",  # a character reference
        b'<CopyObjectResult><ETag><![CDATA["abc"]]></ETag></CopyObjectResult>',
        b'<s3:CopyObjectResult xmlns:s3="http://s3.amazonaws.com/doc/2006-03-01/"><s3:ETag>"p"</s3:ETag>'
        b"</s3:CopyObjectResult>",
        b"<CopyObjectResult><LastModified>2026-11-28T07:48:28.000Z</LastModified></CopyObjectResult>",
    ],
    ids=["s3", "entities", "character-reference", "cdata", "prefixed", "no-etag"],
)
def test_a_copys_answer_is_read_as_botocore_reads_it(canned: CannedServer, result: bytes) -> None:
    """S3's usual answer is read without an XML parser; any other goes to one."""
    boto, crt = _canned_clients(canned)
    canned.reply = lambda method, path: (200, {"Content-Type": "application/xml"}, result)
    copy = lambda c: c.copy_object(Bucket="bkt", Key="t/b", CopySource={"Bucket": "bkt", "Key": "t/a"})  # noqa: E731
    boto_answer, crt_answer = _both(copy, boto, crt)
    assert crt_answer == boto_answer and "CopyObjectResult" in crt_answer


def test_requests_are_those_botocore_sends(canned: CannedServer) -> None:
    """The same paths, query parameters and headers S3 reads, for keys S3 is strict about."""
    boto, crt = _canned_clients(canned)
    listing = b'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><IsTruncated>false</IsTruncated></ListBucketResult>'
    canned.reply = lambda method, path: (200, {"ETag": '"e"'}, listing if method == "GET" else b"")
    calls: list[Callable[[Any], Any]] = []
    for key in AWKWARD_KEYS:
        calls += [
            lambda c, key=key: c.head_object(Bucket="bkt", Key=key),
            lambda c, key=key: c.put_object(
                Bucket="bkt", Key=key, Body=b"x", Metadata={"m": "v"}, IfMatch="abc", Tagging="a=b"
            ),
            lambda c, key=key: c.list_objects_v2(Bucket="bkt", Prefix=key, MaxKeys=7, ContinuationToken="a b+/="),
        ]
    compared = ("if-match", "if-none-match", "x-amz-meta-m", "x-amz-tagging", "content-length")
    for call in calls:
        call(boto)
        call(crt)
        (boto_method, boto_path, boto_headers, boto_body), (crt_method, crt_path, crt_headers, crt_body) = (
            canned.requests[-2:]
        )
        assert (crt_method, urlsplit(crt_path).path, crt_body) == (boto_method, urlsplit(boto_path).path, boto_body)
        assert sorted(parse_qsl(urlsplit(crt_path).query)) == sorted(parse_qsl(urlsplit(boto_path).query))
        assert {h: crt_headers.get(h) for h in compared} == {h: boto_headers.get(h) for h in compared}
        assert crt_headers["host"] == boto_headers["host"]
        assert "Credential=testing/" in crt_headers["authorization"]
        assert crt_headers["x-amz-security-token"] == "testing"  # the session token of the environment


# -- retries, as botocore's standard mode makes them ----------------------------------------------
_INTERNAL = b"<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>"


def _retry_metadata(response: Mapping[str, Any]) -> dict[str, Any]:
    metadata = response["ResponseMetadata"]
    return {name: metadata[name] for name in ("RetryAttempts", "MaxAttemptsReached") if name in metadata}


def _sleeps(crt: CrtS3Client) -> list[float]:
    """The backoffs ``crt`` takes between attempts, kept instead of slept."""
    slept: list[float] = []
    crt._sleep = slept.append  # type: ignore[method-assign]
    return slept


def _attempts_of(
    call: Callable[[Any], Any], answers: list[tuple[int, dict[str, str], bytes]], server: CannedServer, client: Any
) -> tuple[int, Any]:
    """How many requests ``call`` on ``client`` sent to ``server``, which gives ``answers``
    in turn (the last one again and again), and its answer or error."""
    replies = iter(answers)
    last = answers[-1]
    server.reply = lambda method, path: next(replies, last)
    server.requests.clear()
    try:
        outcome = call(client)
    except Exception as exc:
        outcome = exc
    return len(server.requests), outcome


def test_transient_failures_are_retried_as_botocore_retries_them(canned: CannedServer) -> None:
    """Three attempts (the standard mode's), each with the whole body, and the answer's
    ResponseMetadata counting them as botocore's does; observers see one request."""
    boto, crt = _canned_clients(canned)
    slept = _sleeps(crt)
    seen: list[str] = []
    crt.add_request_observer(lambda operation, *_: seen.append(operation))
    answers = [(500, {}, _INTERNAL), (503, {}, _INTERNAL), (200, {"ETag": '"e"'}, b"")]
    put = lambda c: c.put_object(Bucket="bkt", Key="t/k", Body=b"body" * 100, Metadata={"a": "1"})  # noqa: E731
    boto_sent, boto_answer = _attempts_of(put, answers, canned, boto)
    crt_sent, crt_answer = _attempts_of(put, answers, canned, crt)
    assert crt_sent == boto_sent == 3 and crt_answer["ETag"] == '"e"'
    assert [(method, body) for method, _, _, body in canned.requests] == [("PUT", b"body" * 100)] * 3
    assert (
        _retry_metadata(crt_answer) == _retry_metadata(boto_answer) == {"RetryAttempts": 2, "MaxAttemptsReached": True}
    )
    assert seen == ["PutObject"] and len(slept) == 2
    # Every attempt failed: botocore's error, counted as botocore counts it. (awscrt
    # reports any 5xx but a 503 as a 500, and a 503 as SlowDown, without the answer.)
    head = lambda c: c.head_object(Bucket="bkt", Key="t/k")  # noqa: E731
    (boto_sent, boto_error), (crt_sent, crt_error) = (
        _attempts_of(head, [(500, {}, b"")], canned, c) for c in (boto, crt)
    )
    assert crt_sent == boto_sent == 3
    assert crt_error.response["Error"] == boto_error.response["Error"]
    assert _retry_metadata(crt_error.response) == _retry_metadata(boto_error.response)
    canned.reply = lambda method, path: (500, {}, _INTERNAL)
    canned.requests.clear()
    with pytest.raises(StorageUnavailableError, match="internal error"):
        S3Store("bkt", crt).put("t/k", b"x", {})
    assert len(canned.requests) == 3


def test_throttling_is_retried_with_a_throttling_backoff(canned: CannedServer) -> None:
    """429, SlowDown, Throttling (awscrt's own retries left 429 and Throttling alone) and
    S3's RequestTimeout are retried, after botocore's backoff (full jitter, at most 20 s)."""
    _, crt = _canned_clients(canned)
    slept = _sleeps(crt)
    throttled = [
        (429, {}, b""),
        (503, {}, b"<Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message></Error>"),
        (400, {}, b"<Error><Code>Throttling</Code><Message>Rate exceeded</Message></Error>"),
        (400, {}, b"<Error><Code>RequestTimeout</Code><Message>Idle too long</Message></Error>"),
    ]
    get = lambda c: c.get_object(Bucket="bkt", Key="t/k")  # noqa: E731
    for answer in throttled:
        sent, outcome = _attempts_of(get, [answer, (200, {"ETag": '"e"'}, b"x")], canned, crt)
        assert sent == 2 and outcome["Body"].read() == b"x", answer
    assert len(slept) == 4 and all(0 <= delay <= 20 for delay in slept)


@pytest.mark.slow  # botocore's own backoff after throttling: up to a second per retry
def test_throttling_is_retried_as_botocore_retries_it(canned: CannedServer) -> None:
    boto, crt = _canned_clients(canned)
    _sleeps(crt)
    head = lambda c: c.head_object(Bucket="bkt", Key="t/k")  # noqa: E731
    for answers in ([(429, {}, b"")], [(429, {}, b""), (200, {}, b"")], [(503, {"x-amz-retry-after": "10"}, b"")]):
        (boto_sent, boto_outcome), (crt_sent, crt_outcome) = (
            _attempts_of(head, answers, canned, c) for c in (boto, crt)
        )
        assert crt_sent == boto_sent
        boto_response = getattr(boto_outcome, "response", boto_outcome)
        crt_response = getattr(crt_outcome, "response", crt_outcome)
        assert _retry_metadata(crt_response) == _retry_metadata(boto_response)


def test_a_refusal_is_not_retried(canned: CannedServer) -> None:
    boto, crt = _canned_clients(canned)
    slept = _sleeps(crt)
    refusals = [
        (400, {}, b"<Error><Code>InvalidArgument</Code><Message>No.</Message></Error>"),
        (403, {}, b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"),
        (404, {}, b"<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>"),
        (409, {}, b"<Error><Code>ConditionalRequestConflict</Code><Message>Conflict.</Message></Error>"),
        (412, {}, b"<Error><Code>PreconditionFailed</Code><Message>No.</Message></Error>"),
        (501, {}, b"<Error><Code>NotImplemented</Code><Message>No.</Message></Error>"),
    ]
    put = lambda c: c.put_object(Bucket="bkt", Key="t/k", Body=b"x", IfNoneMatch="*")  # noqa: E731
    for answer in refusals:
        (boto_sent, boto_error), (crt_sent, crt_error) = (_attempts_of(put, [answer], canned, c) for c in (boto, crt))
        assert crt_sent == boto_sent == 1, answer
        assert crt_error.response["Error"] == boto_error.response["Error"]
        assert _retry_metadata(crt_error.response) == _retry_metadata(boto_error.response) == {"RetryAttempts": 0}
    assert slept == []


# awscrt reports the exception of its credentials callback as unraisable, then fails the request.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_failure_to_get_credentials_is_not_retried(canned: CannedServer) -> None:
    """botocore signs before its first attempt: a failure to get credentials is raised at
    once, nothing sent."""
    from botocore.exceptions import CredentialRetrievalError

    _, crt = _canned_clients(canned)
    asked: list[int] = []

    class Expired:
        def get_frozen_credentials(self) -> Any:
            asked.append(1)
            raise CredentialRetrievalError(provider="sso", error_msg="the SSO session has expired")

    crt._credentials._credentials = Expired()
    with pytest.raises(CredentialRetrievalError, match="expired"):
        crt.head_object(Bucket="bkt", Key="t/k")
    assert canned.requests == [] and len(asked) == 1


@pytest.mark.parametrize(
    ("environment", "retries", "expected"),
    [
        ({"AWS_MAX_ATTEMPTS": "1"}, None, 1),
        ({"AWS_MAX_ATTEMPTS": "5"}, None, 5),
        ({}, {"mode": "standard", "total_max_attempts": 2}, 2),
        ({}, {"mode": "standard", "max_attempts": 3}, 4),  # retries, not attempts
    ],
)
def test_the_clients_attempts_are_honoured(
    canned: CannedServer,
    monkeypatch: pytest.MonkeyPatch,
    environment: dict[str, str],
    retries: dict[str, Any] | None,
    expected: int,
) -> None:
    from botocore.config import Config

    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    endpoint = f"http://127.0.0.1:{canned.server_port}"
    if retries is None:
        boto = new_client("s3", region_name=REGION, endpoint_url=endpoint, timeout=2)
    else:
        boto = tuned_session().create_client(
            "s3", region_name=REGION, endpoint_url=endpoint, config=Config(retries=retries)
        )
    crt = CrtS3Client(boto)
    slept = _sleeps(crt)
    head = lambda c: c.head_object(Bucket="bkt", Key="t/k")  # noqa: E731
    (boto_sent, boto_error), (crt_sent, crt_error) = (
        _attempts_of(head, [(503, {}, b"")], canned, c) for c in (boto, crt)
    )
    assert crt_sent == boto_sent == expected
    assert len(slept) == expected - 1
    assert _retry_metadata(crt_error.response) == _retry_metadata(boto_error.response)
    assert _retry_metadata(crt_error.response) == {"RetryAttempts": expected - 1, "MaxAttemptsReached": True}


@pytest.mark.slow  # 60 failing requests to each client
def test_retries_stop_when_the_clients_retry_quota_is_spent(canned: CannedServer) -> None:
    """botocore's circuit breaker: a client whose requests keep failing stops retrying.
    (A timeout costs the quota twice a failure's: a generous one, so that a busy machine's
    slow answer is not taken for one and the two clients' sequences stay comparable.)"""
    boto, crt = _canned_clients(canned, timeout=30)
    _sleeps(crt)
    head = lambda c: c.head_object(Bucket="bkt", Key="t/k")  # noqa: E731
    for client in (boto, crt):
        client.sent = [_attempts_of(head, [(500, {}, b"")], canned, client)[0] for _ in range(60)]
    assert crt.sent == boto.sent and crt.sent[-1] == 1  # no retry left


def test_an_attempts_bound_is_the_larger_timeout() -> None:
    """awscrt answers whole: an attempt cannot tell connecting from waiting, so it may take
    the larger of the two timeouts (and awscrt's connect timeout fails first)."""
    from s3memory._aws.crt_retry import CONNECT_SLACK_SECONDS, attempt_seconds

    assert attempt_seconds(5, 5) == 5 + CONNECT_SLACK_SECONDS
    assert attempt_seconds(1, 30) == 30
    assert attempt_seconds(60, 5) == 60 + CONNECT_SLACK_SECONDS


def test_a_redirect_is_left_to_botocore(canned: CannedServer) -> None:
    """A bucket in another region: botocore follows S3's redirect, so the call is its."""
    boto, crt = _canned_clients(canned)
    moved = b"<Error><Code>PermanentRedirect</Code><Message>Use the right endpoint.</Message></Error>"
    listing = b"<ListBucketResult><KeyCount>0</KeyCount><IsTruncated>false</IsTruncated></ListBucketResult>"

    def reply(method: str, path: str) -> tuple[int, dict[str, str], bytes]:
        from_botocore = "amz-sdk-invocation-id" in canned.requests[-1][2]
        return (200, {}, listing) if from_botocore else (301, {}, moved)

    canned.reply = reply
    seen: list[str] = []
    boto.meta.events.register("before-call.s3.ListObjectsV2", lambda **_: seen.append("boto3"))
    assert crt.list_objects_v2(Bucket="bkt")["KeyCount"] == 0
    assert seen == ["boto3"]
    assert len(canned.requests) == 2
    crt.list_objects_v2(Bucket="bkt")  # the bucket's calls are botocore's from now on
    assert seen == ["boto3", "boto3"]
    assert len(canned.requests) == 3


# -- failures to connect ---------------------------------------------------------------------
@pytest.mark.slow  # waits out the retries
def test_a_refused_connection_is_storage_unavailable(fake_aws: None) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    client = fast_client(new_client("s3", region_name=REGION, endpoint_url=f"http://127.0.0.1:{port}", timeout=1))
    assert isinstance(client, CrtS3Client)
    store = S3Store("bkt", client)
    for call in (lambda: store.get("t/k"), lambda: store.put("t/k", b"x", {}), lambda: store.delete(["t/k"])):
        with pytest.raises(StorageUnavailableError, match=f"http://127.0.0.1:{port} could not be reached"):
            call()


class _Silent:
    """A server that accepts connections, reads requests and never answers; counts them."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.requests = 0
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:  # closed
                return
            self.connections.append(connection)
            threading.Thread(target=self._read, args=(connection,), daemon=True).start()

    def _read(self, connection: socket.socket) -> None:
        pending = b""
        while data := _recv(connection):
            pending += data
            while b"\r\n\r\n" in pending:  # the end of a request's head (a HEAD has no body)
                pending = pending.partition(b"\r\n\r\n")[2]
                self.requests += 1

    def close(self) -> None:
        self.listener.close()
        for connection in self.connections:
            connection.close()


def _recv(connection: socket.socket) -> bytes:
    try:
        return connection.recv(65536)
    except OSError:
        return b""


@pytest.fixture
def silent(fake_aws: None) -> Iterator[_Silent]:
    server = _Silent()
    yield server
    server.close()


def test_a_server_that_never_answers_is_retried_as_botocore_retries_it(silent: _Silent) -> None:
    """Each attempt waits for its own timeout (awscrt's client waited, without retrying,
    for every attempt's timeouts and more), and is counted as botocore counts its own."""
    endpoint = f"http://127.0.0.1:{silent.port}"
    boto = new_client("s3", region_name=REGION, endpoint_url=endpoint, timeout=0.2)
    crt = fast_client(new_client("s3", region_name=REGION, endpoint_url=endpoint, timeout=0.2))
    assert isinstance(crt, CrtS3Client)
    sent = []
    for client in (boto, crt):
        silent.requests = 0
        with pytest.raises(
            StorageUnavailableError, match=f"had no answer from {endpoint} within 0.2 s after 3 attempts"
        ):
            S3Store("bkt", client).head("t/k")
        sent.append(silent.requests)
    assert sent == [3, 3]


@pytest.mark.slow  # timed: about 1.6 s per client
def test_a_server_that_never_answers_fails_as_soon_with_either_client(silent: _Silent) -> None:
    import time

    from s3memory._aws.crt_retry import CONNECT_SLACK_SECONDS

    endpoint = f"http://127.0.0.1:{silent.port}"
    boto = new_client("s3", region_name=REGION, endpoint_url=endpoint, timeout=0.5)
    took = []
    for client in (boto, fast_client(new_client("s3", region_name=REGION, endpoint_url=endpoint, timeout=0.5))):
        started = time.perf_counter()
        with pytest.raises(StorageUnavailableError):
            S3Store("bkt", client).head("t/k")
        took.append(time.perf_counter() - started)
    assert min(took) >= 3 * 0.5  # each of the 3 attempts waited for its timeout
    # Its attempts' timeouts and botocore's backoff after a timeout (under 0.05 + 0.1 s),
    # with a loaded machine's margin; awscrt's own retries took 3 x (0.5 + 0.5) + 3 = 6 s.
    assert took[1] < 3 * (0.5 + CONNECT_SLACK_SECONDS) + 0.15 + 1.5


# -- the memory through it -------------------------------------------------------------------------
def test_memory_commands_answer_as_with_botocore(boto: Any, crt: CrtS3Client) -> None:
    boto_bucket = boto.test_bucket
    crt_bucket = f"crt-{uuid.uuid4().hex[:16]}"
    boto.create_bucket(Bucket=crt_bucket)

    def session(client: Any, bucket: str) -> Any:
        return open_memory(
            user_id="alice", bucket=bucket, s3_client=client, master_key=MASTER_KEY, key_cache=KeyCache()
        )

    def commands(memory: Any) -> list[str]:
        out = [memory.view("/memories")]
        for i in range(12):
            out.append(memory.create(f"/memories/dir/n {i}+ü.md", f"line one {i}\nline two\n"))
        out += [
            memory.view("/memories/dir/n 3+ü.md"),
            memory.str_replace("/memories/dir/n 3+ü.md", "line two", "line 2"),
            memory.insert("/memories/dir/n 3+ü.md", 1, "inserted"),
            memory.view("/memories/dir/n 3+ü.md"),
            memory.delete("/memories/dir/n 4+ü.md"),
            memory.rename("/memories/dir", "/memories/moved"),
            memory.view("/memories"),
            memory.view("/memories/moved/n 3+ü.md"),
        ]
        return out

    with_boto = commands(session(boto, boto_bucket))
    with_crt = commands(session(crt, crt_bucket))
    assert with_crt == with_boto
    assert "inserted" in with_crt[-1]
    # What the fast client wrote, botocore reads, and the other way round.
    assert session(boto, crt_bucket).view("/memories/moved/n 3+ü.md") == with_crt[-1]
    assert session(crt, boto_bucket).view("/memories") == with_boto[-2]


@pytest.mark.skipif(not RGW_ENDPOINT, reason="no real S3 server: set S3MEMORY_TEST_S3_ENDPOINT")
def test_memory_commands_on_radosgw(rgw_client: Any) -> None:
    crt = fast_client(rgw_client)
    assert isinstance(crt, CrtS3Client)
    store = S3Store(rgw_client.s3memory_test_bucket, crt)
    store.put("t/empty", b"", {"a": "1"})  # radosgw refuses a range of it (416), as S3 does
    empty = store.get("t/empty")
    assert empty is not None and empty.body == b"" and empty.metadata == {"a": "1"}
    store.delete(["t/empty"])
    memory = open_memory(
        user_id="bob",
        bucket=rgw_client.s3memory_test_bucket,
        s3_client=crt,
        master_key=MASTER_KEY,
        key_cache=KeyCache(),
    )
    for i in range(5):
        memory.create(f"/memories/d/f {i}+%~.md", f"{i}\n")
    memory.str_replace("/memories/d/f 1+%~.md", "1", "one")
    memory.rename("/memories/d", "/memories/e")
    plain = open_memory(
        user_id="bob",
        bucket=rgw_client.s3memory_test_bucket,
        s3_client=rgw_client,
        master_key=MASTER_KEY,
        key_cache=KeyCache(),
    )
    assert "one" in plain.view("/memories/e/f 1+%~.md")
    assert plain.view("/memories") == memory.view("/memories")


# -- in-process mocks, and TLS ----------------------------------------------------------------------
def test_a_client_built_under_motos_mock_is_left_to_botocore(fake_aws: None) -> None:
    """moto answers in process, from botocore's events: awscrt would go past it to the
    network. So under the mock the default client is botocore's own, and works."""
    from moto import mock_aws

    from s3memory.stores._s3 import default_s3_client

    with mock_aws():
        client = default_s3_client(region_name=REGION)
        assert not isinstance(client, CrtS3Client)
        client.create_bucket(Bucket="mocked")
        memory = open_memory(user_id="alice", bucket="mocked", s3_client=client, master_key=MASTER_KEY)
        memory.create("/memories/a.md", "in the mock\n")
        assert "in the mock" in memory.view("/memories/a.md")
    # moto imported, no mock running: nothing intercepts
    assert isinstance(default_s3_client(region_name=REGION, endpoint_url="http://127.0.0.1:9"), CrtS3Client)


def test_an_applications_send_hook_keeps_the_client_botocores(boto: Any) -> None:
    boto.meta.events.register("before-send.s3", lambda **_: None)
    assert fast_client(boto) is boto


@pytest.fixture
def tls_server(tmp_path: Any, fake_aws: None) -> Iterator[tuple[CannedServer, str]]:
    """The canned server over TLS, its certificate (for 127.0.0.1) signed by a CA of its
    own; yields the server and the CA's file."""
    import datetime
    import ipaddress
    import ssl

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("s3memory test CA"))
        .issuer_name(name("s3memory test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_file, chain_file, key_file = tmp_path / "ca.pem", tmp_path / "server.pem", tmp_path / "server.key"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    chain_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(chain_file, key_file)
    server = CannedServer()
    # Each connection's handshake on its own handler thread, as a real server's: a client
    # that stops mid-handshake (awscrt refusing the certificate) must not hold up the next.
    server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    server.reply = lambda method, path: (200, {"ETag": '"abc"', "Last-Modified": "Tue, 24 Nov 2026 12:00:00 GMT"}, b"")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, str(ca_file)
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.mark.slow  # waits out the refused handshakes' retries
def test_tls_verifies_the_server_as_botocore_would(tls_server: tuple[CannedServer, str]) -> None:
    """An endpoint whose certificate no trusted CA signed is refused (never a silent
    unverified connection); the client's own CA bundle (``verify=path``) is honoured."""
    from s3memory._aws.clients import tuned_session

    server, ca_file = tls_server
    endpoint = f"https://127.0.0.1:{server.server_port}"
    untrusting = fast_client(new_client("s3", region_name=REGION, endpoint_url=endpoint, timeout=2))
    assert isinstance(untrusting, CrtS3Client)
    with pytest.raises(StorageUnavailableError):
        S3Store("bkt", untrusting).head("t/k")
    assert server.requests == []  # nothing got past the handshake
    trusting = tuned_session().create_client("s3", region_name=REGION, endpoint_url=endpoint, verify=ca_file)
    wrapped = fast_client(trusting)
    assert isinstance(wrapped, CrtS3Client)
    info = S3Store("bkt", wrapped).head("t/k")
    assert info is not None and info.etag == '"abc"'
    assert [(method, path) for method, path, _, _ in server.requests] == [("HEAD", "/bkt/t/k")]


def test_tls_takes_aws_ca_bundle_and_verify_false_as_botocore_does(
    tls_server: tuple[CannedServer, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from s3memory._aws.clients import tuned_session

    server, ca_file = tls_server
    endpoint = f"https://127.0.0.1:{server.server_port}"
    session = tuned_session()
    unverified = fast_client(session.create_client("s3", region_name=REGION, endpoint_url=endpoint, verify=False))
    assert isinstance(unverified, CrtS3Client) and S3Store("bkt", unverified).head("t/k") is not None
    monkeypatch.setenv("AWS_CA_BUNDLE", ca_file)  # a new session reads it, as boto3's would
    bundled = fast_client(new_client("s3", region_name=REGION, endpoint_url=endpoint, timeout=2))
    assert isinstance(bundled, CrtS3Client) and S3Store("bkt", bundled).head("t/k") is not None
    assert len(server.requests) == 2


def test_a_tls_context_is_made_once_per_verify(tls_server: tuple[CannedServer, str]) -> None:
    """Loading a trust store is most of a wrap's cost: each ``verify`` loads it once per
    process, and again only when its CA file changed on disk."""
    server, ca_file = tls_server
    endpoint = f"https://127.0.0.1:{server.server_port}"

    def wrapped() -> CrtS3Client:
        client = fast_client(
            tuned_session().create_client("s3", region_name=REGION, endpoint_url=endpoint, verify=ca_file)
        )
        assert isinstance(client, CrtS3Client) and S3Store("bkt", client).head("t/k") is not None
        return client

    def contexts() -> list[Any]:
        return [context for key, context in _s3crt._tls_contexts.items() if key[0] == ca_file]

    wrapped()
    first = contexts()
    wrapped()
    assert contexts() == first and len(first) == 1
    with open(ca_file, "a") as bundle:  # replaced on disk: read again, the old one dropped
        bundle.write("\n")
    wrapped()
    assert len(contexts()) == 1 and contexts()[0] is not first[0]


# -- what stays botocore's (review findings) -----------------------------------------------------
def test_a_mock_started_after_the_client_was_wrapped_still_gets_every_request(crt: CrtS3Client) -> None:
    """moto's mock started later: the six verbs go to it, as botocore's calls do, and
    nothing reaches the network (here, moto's server)."""
    from moto import mock_aws

    seen: list[str] = []
    crt.add_request_observer(lambda operation, *_: seen.append(operation))
    with mock_aws():
        crt.create_bucket(Bucket="in-the-mock")
        store = S3Store("in-the-mock", crt)
        store.put("t/k", b"mocked", {})
        assert store.get("t/k") is not None and [info.key for info in store.list("t/")] == ["t/k"]
    assert seen == []  # none went through awscrt, past the mock


def test_an_empty_key_or_non_ascii_metadata_is_refused_as_botocore_refuses_it(crt: CrtS3Client) -> None:
    from botocore.exceptions import ParamValidationError

    seen: list[str] = []
    crt.add_request_observer(lambda operation, *_: seen.append(operation))
    bucket = crt.test_bucket
    for call in (
        lambda: crt.head_object(Bucket=bucket, Key=""),
        lambda: crt.get_object(Bucket=bucket, Key=""),
        lambda: crt.put_object(Bucket=bucket, Key="", Body=b"x"),
        lambda: crt.copy_object(Bucket=bucket, Key="", CopySource={"Bucket": bucket, "Key": "k"}),
    ):
        with pytest.raises(ParamValidationError):
            call()
    with pytest.raises(Exception) as caught:
        crt.put_object(Bucket=bucket, Key="t/k", Body=b"x", Metadata={"name": "café"})
    assert "café" not in crt.list_objects_v2(Bucket=bucket).get("Contents", []) and caught.value is not None
    assert seen == ["ListObjectsV2"]  # only the listing above went through awscrt


def test_a_forked_child_uses_botocore(crt: CrtS3Client) -> None:
    """awscrt's threads stay in the parent: a child's request would wait for its deadline."""
    import os

    store = S3Store(crt.test_bucket, crt)
    store.put("t/k", b"before the fork", {})
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer through the pipe, never return into pytest
        try:
            found = store.get("t/k")
            os.write(writer, b"ok" if found is not None and found.body == b"before the fork" else b"wrong")
        finally:
            os._exit(0)
    os.close(writer)
    _, status = os.waitpid(pid, 0)
    assert os.read(reader, 16) == b"ok" and status == 0
    os.close(reader)
    assert store.get("t/k") is not None  # the parent's client still works


def test_a_head_answered_400_naming_another_region_is_left_to_botocore(canned: CannedServer) -> None:
    _, crt = _canned_clients(canned)

    def reply(method: str, path: str) -> tuple[int, dict[str, str], bytes]:
        signed_for = canned.requests[-1][2].get("authorization", "")
        if "/eu-west-1/" in signed_for:
            return 200, {"ETag": '"e"', "Last-Modified": "Tue, 24 Nov 2026 12:00:00 GMT"}, b""
        return 400, {"x-amz-bucket-region": "eu-west-1"}, b""

    canned.reply = reply
    assert S3Store("bkt", crt).head("k") is not None  # botocore followed it to eu-west-1


def test_an_empty_object_is_read_by_botocore_after_the_range_is_refused(canned: CannedServer) -> None:
    boto, crt = _canned_clients(canned)

    def reply(method: str, path: str) -> tuple[int, dict[str, str], bytes]:
        if "range" in canned.requests[-1][2]:
            return 416, {"Content-Type": "application/xml"}, b"<Error><Code>InvalidRange</Code></Error>"
        return 200, {"ETag": '"d41d8cd98f00b204e9800998ecf8427e"'}, b""

    canned.reply = reply
    seen: list[str] = []
    boto.meta.events.register("before-call.s3.GetObject", lambda **_: seen.append("boto3"))
    assert crt.get_object(Bucket="bkt", Key="k")["Body"].read() == b""
    assert seen == ["boto3"]  # a stream S3Store bounds, not a second unbounded awscrt GET


def test_over_plain_http_each_body_is_signed(canned: CannedServer) -> None:
    """Without TLS botocore signs the body's SHA-256; so does this client (else a body
    could be swapped under a valid signature)."""
    _, crt = _canned_clients(canned)
    canned.reply = lambda method, path: (200, {"ETag": '"e"'}, b"")
    crt.put_object(Bucket="bkt", Key="k", Body=b"signed body")
    assert canned.requests[-1][2]["x-amz-content-sha256"] == hashlib.sha256(b"signed body").hexdigest()


def test_a_client_that_cannot_be_wrapped_stays_botocores(
    moto_endpoint: str, fake_aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_CA_BUNDLE", "/nonexistent/ca.pem")
    client = new_client("s3", region_name=REGION, endpoint_url="https://127.0.0.1:1")
    assert fast_client(client) is client
    monkeypatch.delenv("AWS_CA_BUNDLE")
    again = new_client("s3", region_name=REGION, endpoint_url=moto_endpoint)
    first, second = fast_client(again), fast_client(again)  # the first's own hook is not a mock
    assert isinstance(first, CrtS3Client) and isinstance(second, CrtS3Client)
