"""The clients s3memory builds (``s3memory._aws.clients``: fast timestamps, checksums only where S3
requires one) and ``S3Store.delete``'s concurrent ``DeleteObjects`` batches, on moto.

The tuning is measured by ``bench/run.py``; here only what must hold: the same answers as
botocore's defaults, clients of others untouched, and the same errors as before."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest
from helpers import BUCKET, REGION

from s3memory import PreconditionFailedError, S3Store, StorageAccessDeniedError, StorageError
from s3memory._aws.clients import client_config, new_client, parse_timestamp, tune_session, tuned_session
from s3memory.stores._s3 import DELETE_WORKERS

# -- timestamps ----------------------------------------------------------------------------

FAST = [
    "2026-01-01T00:00:00.000Z",  # S3's LastModified in LIST and COPY answers
    "2026-01-01T00:00:00Z",
    "1999-12-31T23:59:59.123456Z",
    "2026-06-30T12:34:56.5Z",  # 1, 2, 4 and 5 digits: Python 3.10's fromisoformat refuses them
    "2026-06-30T12:34:56.25Z",
    "2026-06-30T12:34:56.1234Z",
    "2026-06-30T12:34:56.12345Z",
    "Thu, 01 Jan 2026 00:00:00 GMT",  # S3's Last-Modified header in HEAD and GET answers
    "Mon, 29 Feb 2016 23:59:59 GMT",
]
FALLBACK = [
    "2026-01-01T00:00:00.1234567Z",
    "2026-01-01T01:00:00+01:00",
    "2026-01-01T00:00:00",
    "2026-01-01 00:00:00Z",
    "Thursday, 01-Jan-26 00:00:00 GMT",
    1767225600,
    1767225600.5,
    "1767225600",
]


def botocores(value: object) -> datetime:
    from botocore.utils import parse_timestamp as default

    return default(value)  # type: ignore[no-any-return]


@pytest.mark.parametrize("value", FAST + FALLBACK)
def test_timestamps_parse_as_botocore_parses_them(value: object) -> None:
    got, expected = parse_timestamp(value), botocores(value)
    # (botocore's zone is tzlocal() where the local zone is UTC, tzutc() elsewhere: equal)
    assert got == expected and got.utcoffset() == expected.utcoffset()


@pytest.mark.parametrize("value", ["2026-02-30T00:00:00.000Z", "Thu, 31 Apr 2026 00:00:00 GMT", "soon", ""])
def test_an_invalid_timestamp_fails_as_in_botocore(value: str) -> None:
    with pytest.raises(ValueError) as expected:
        botocores(value)
    with pytest.raises(ValueError) as got:
        parse_timestamp(value)
    assert str(got.value) == str(expected.value)


@pytest.fixture
def no_dateutil(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """dateutil's parser refuses to run; the values it was asked for are recorded."""
    import dateutil.parser

    asked: list[object] = []

    def refuse(value: object, *args: Any, **kwargs: Any) -> None:
        asked.append(value)
        raise AssertionError(f"dateutil parsed {value!r}")

    monkeypatch.setattr(dateutil.parser, "parse", refuse)
    return asked


@pytest.mark.parametrize("value", FAST)
def test_the_forms_s3_sends_are_parsed_without_dateutil(value: str, no_dateutil: list[object]) -> None:
    assert parse_timestamp(value).tzinfo is not None
    assert no_dateutil == []


# -- the clients s3memory builds ------------------------------------------------------------


@pytest.fixture(autouse=True)
def _fresh_session(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test gets s3memory's session anew (moto's fake credentials of this test)."""
    import s3memory._aws.clients

    monkeypatch.setattr(s3memory._aws.clients, "_session", None)
    yield


@pytest.fixture
def seeded(s3_client: Any) -> Any:
    for i in range(3):
        s3_client.put_object(Bucket=BUCKET, Key=f"t/{i}", Body=b"x" * i)
    return s3_client


@pytest.fixture
def botocore_parsed(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The values botocore's default timestamp parser is given by clients' response parsers."""
    import botocore.parsers

    default = botocore.parsers.DEFAULT_TIMESTAMP_PARSER
    given: list[object] = []

    def recording(value: object) -> Any:
        given.append(value)
        return default(value)

    monkeypatch.setattr(botocore.parsers, "DEFAULT_TIMESTAMP_PARSER", recording)
    return given


def test_a_tuned_client_answers_as_a_default_one(
    seeded: Any, botocore_parsed: list[object], monkeypatch: pytest.MonkeyPatch
) -> None:
    tuned = new_client("s3", region_name=REGION)
    for client in (seeded, tuned):
        client.copy_object(Bucket=BUCKET, Key="t/copy", CopySource={"Bucket": BUCKET, "Key": "t/1"})
    botocore_parsed.clear()  # the default client's copy

    def answers(client: Any) -> list[datetime]:
        listed = [item["LastModified"] for item in client.list_objects_v2(Bucket=BUCKET)["Contents"]]
        head = client.head_object(Bucket=BUCKET, Key="t/1")["LastModified"]
        got = client.get_object(Bucket=BUCKET, Key="t/2")
        got["Body"].read()
        return [*listed, head, got["LastModified"]]

    actual = answers(tuned)
    assert botocore_parsed == []
    expected = answers(seeded)
    assert actual == expected and len(actual) == 6
    assert all(t.utcoffset() is not None and not t.utcoffset() for t in [*actual, *expected])  # aware, UTC
    # moto's own strings (ISO 8601 in bodies, HTTP dates in headers) take the fast path
    assert {str(v)[-1] for v in botocore_parsed} == {"Z", "T"}
    import dateutil.parser

    monkeypatch.setattr(dateutil.parser, "parse", None)
    assert [parse_timestamp(v) for v in botocore_parsed] == expected


def test_clients_of_others_keep_botocores_parser(seeded: Any, botocore_parsed: list[object]) -> None:
    """The tuning is registered on s3memory's own session only: boto3's default session,
    and any session of the application's, still parse with botocore's default."""
    import boto3
    import botocore.session

    new_client("s3", region_name=REGION).list_objects_v2(Bucket=BUCKET)
    assert botocore_parsed == []
    for client in (
        boto3.client("s3", region_name=REGION),
        boto3.Session().client("s3", region_name=REGION),
        botocore.session.Session().create_client("s3", region_name=REGION),
    ):
        asked = len(botocore_parsed)
        client.list_objects_v2(Bucket=BUCKET)
        assert len(botocore_parsed) == asked + 3


def test_an_application_can_tune_a_session_of_its_own(seeded: Any, botocore_parsed: list[object]) -> None:
    import boto3

    session = boto3.Session()
    tune_session(session)
    assert len(session.client("s3", region_name=REGION).list_objects_v2(Bucket=BUCKET)["Contents"]) == 3
    assert botocore_parsed == []


def test_the_session_is_reused_until_the_aws_environment_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    first = tuned_session()
    assert tuned_session() is first  # one credential resolution for the S3 and the KMS client
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "4")
    assert tuned_session() is not first


def test_checksums_go_only_where_s3_requires_one(s3_client: Any) -> None:
    from botocore.config import Config

    if "request_checksum_calculation" not in Config.OPTION_DEFAULTS:
        pytest.skip("botocore before 1.36 sends no default checksums")
    tuned = new_client("s3", region_name=REGION)
    sent: dict[str, dict[str, str]] = {}

    def record(request: Any, event_name: str, **_: Any) -> None:
        sent[event_name.split(".")[-1]] = {k.lower(): str(v) for k, v in request.headers.items()}

    s3_client.meta.events.register("before-send.s3", record)
    s3_client.put_object(Bucket=BUCKET, Key="t/a", Body=b"sealed")
    assert "x-amz-trailer" in sent["PutObject"]  # botocore's default CRC32, for contrast
    tuned.meta.events.register("before-send.s3", record)
    tuned.put_object(Bucket=BUCKET, Key="t/a", Body=b"sealed", Metadata={"m": "1"})
    tuned.get_object(Bucket=BUCKET, Key="t/a")["Body"].read()
    tuned.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": "t/a"}], "Quiet": True})
    put, get, delete = sent["PutObject"], sent["GetObject"], sent["DeleteObjects"]
    assert not [h for h in put if h.startswith("x-amz-checksum-") or h == "x-amz-trailer"]
    assert "aws-chunked" not in put.get("content-encoding", "")
    assert "x-amz-checksum-mode" not in get
    # S3 refuses a DeleteObjects without a checksum: botocore still sends one
    assert "content-md5" in delete or any(h.startswith("x-amz-checksum-") for h in delete)
    assert "Contents" not in s3_client.list_objects_v2(Bucket=BUCKET)  # and moto took it


def test_the_environment_still_chooses_checksums(monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.config import Config

    if "request_checksum_calculation" not in Config.OPTION_DEFAULTS:
        pytest.skip("botocore before 1.36 has no checksum settings")
    config = client_config()
    assert (config.request_checksum_calculation, config.response_checksum_validation) == ("when_required",) * 2
    monkeypatch.setenv("AWS_REQUEST_CHECKSUM_CALCULATION", "when_supported")
    monkeypatch.setenv("AWS_RESPONSE_CHECKSUM_VALIDATION", "when_supported")
    config = client_config()
    # unset in Config, so botocore reads the variables
    assert (config.request_checksum_calculation, config.response_checksum_validation) == (None, None)


def test_parameter_validation_stays_on(aws: None) -> None:
    """Measured at 1-3 % of a request's CPU; without it an empty key would reach S3 as a
    request on the bucket itself (DELETE / is DeleteBucket)."""
    from botocore.exceptions import ParamValidationError

    client = new_client("s3", region_name=REGION)
    with pytest.raises(ParamValidationError):
        client.delete_object(Bucket=BUCKET, Key="")


@pytest.mark.slow  # a subprocess
def test_import_s3memory_loads_no_aws_sdk() -> None:
    code = (
        "import sys, s3memory, s3memory._aws.clients, s3memory.stores._s3\n"
        "loaded = sorted({m.split('.')[0] for m in sys.modules} & {'boto3', 'botocore', 'dateutil', 'anthropic'})\n"
        "print(','.join(loaded))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


# -- DeleteObjects batches, sent together ---------------------------------------------------


class BatchClient:
    """A boto3 S3 client whose ``delete_objects`` can be changed per batch: ``answer(keys,
    forward)`` gets the batch's keys and a function that sends a batch to moto."""

    def __init__(self, inner: Any, answer: Callable[[list[str], Callable[[list[str]], Any]], Any]) -> None:
        self._inner, self.meta, self._answer = inner, inner.meta, answer
        self.etags: dict[str, str] = {}  # the ETag condition each key was sent with

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def delete_objects(self, *, Bucket: str, Delete: dict[str, Any]) -> Any:
        objects = Delete["Objects"]
        self.etags.update({o["Key"]: o["ETag"] for o in objects if "ETag" in o})

        def forward(keys: list[str]) -> Any:
            kept = [o for o in objects if o["Key"] in keys]
            return self._inner.delete_objects(Bucket=Bucket, Delete={**Delete, "Objects": kept})

        return self._answer([o["Key"] for o in objects], forward)


def keys_in_batches(count: int) -> tuple[list[str], list[str]]:
    """``count`` keys, and the few of them that exist: the first and last of each batch."""
    keys = [f"t/bulk/{i:05d}" for i in range(count)]
    return keys, sorted({keys[i] for start in range(0, count, 1000) for i in (start, min(start + 999, count - 1))})


def left(client: Any) -> list[str]:
    return [item["Key"] for item in client.list_objects_v2(Bucket=BUCKET).get("Contents", [])]


@pytest.mark.slow  # thousands of keys on moto, paced by threads
def test_a_delete_of_2500_keys_is_3_delete_objects_in_flight_together(s3_client: Any) -> None:
    keys = [f"t/bulk/{i:05d}" for i in range(2500)]
    store = S3Store(BUCKET, s3_client)
    for key in keys:
        s3_client.put_object(Bucket=BUCKET, Key=key, Body=b"")
    together = threading.Barrier(3, timeout=30)  # passes only when 3 requests are in flight
    sizes: list[int] = []

    def count(params: dict[str, Any], **_: Any) -> None:
        sizes.append(len(params["Delete"]["Objects"]))
        together.wait()

    s3_client.meta.events.register("before-parameter-build.s3.DeleteObjects", count)
    store.delete(keys)
    assert sorted(sizes) == [500, 1000, 1000]
    assert left(s3_client) == []
    assert not [t for t in threading.enumerate() if t.name.startswith("s3memory-delete")]  # none left behind


@pytest.fixture(params=[1, DELETE_WORKERS], ids=["one-worker", "workers"])
def workers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """With one worker the batches after a failure have not started when it is raised:
    they must run all the same."""
    import s3memory.stores._s3

    monkeypatch.setattr(s3memory.stores._s3, "DELETE_WORKERS", request.param)
    return int(request.param)


def test_an_error_in_one_batch_lets_the_others_run_and_is_reported_as_before(s3_client: Any, workers: int) -> None:
    keys, present = keys_in_batches(2500)
    for key in present:
        s3_client.put_object(Bucket=BUCKET, Key=key, Body=b"")
    refused = keys[1000]

    def answer(batch: list[str], forward: Callable[[list[str]], Any]) -> Any:
        response = forward([k for k in batch if k != refused])
        if refused in batch:
            response["Errors"] = [{"Key": refused, "Code": "AccessDenied", "Message": "Access Denied"}]
        return response

    with pytest.raises(StorageError) as info:
        S3Store(BUCKET, BatchClient(s3_client, answer)).delete(keys)
    assert str(info.value) == (
        "Error: Memory storage failed during delete_objects: 1 of 1000 objects could not be deleted (AccessDenied)."
    )
    assert left(s3_client) == [refused]  # the batches after it ran too


def test_the_first_failure_in_key_order_is_raised(s3_client: Any, workers: int) -> None:
    """A refused request in batch 1 and an object S3 kept in batch 3: batch 1's error, as
    when the batches went one after another (and batches 2 and 3 are done)."""
    from botocore.exceptions import ClientError

    keys, present = keys_in_batches(2500)
    for key in present:
        s3_client.put_object(Bucket=BUCKET, Key=key, Body=b"")

    def answer(batch: list[str], forward: Callable[[list[str]], Any]) -> Any:
        if keys[0] in batch:
            refusal = {"Error": {"Code": "AccessDenied", "Message": "no"}, "ResponseMetadata": {"HTTPStatusCode": 403}}
            raise ClientError(refusal, "DeleteObjects")  # type: ignore[arg-type]
        response = forward([k for k in batch if k != keys[-1]])
        if keys[-1] in batch:
            response["Errors"] = [{"Key": keys[-1], "Code": "InternalError", "Message": "try again"}]
        return response

    with pytest.raises(StorageAccessDeniedError):
        S3Store(BUCKET, BatchClient(s3_client, answer)).delete(keys)
    assert left(s3_client) == [keys[0], keys[999], keys[-1]]


def test_objects_that_changed_are_counted_over_every_batch(s3_client: Any) -> None:
    """moto ignores a DeleteObjects ETag condition, so this client answers for S3: a key
    sent with the ETag ``"stale"`` changed since, and is kept."""
    keys, present = keys_in_batches(2500)
    for key in present:
        s3_client.put_object(Bucket=BUCKET, Key=key, Body=b"")
    stale = {keys[0]: '"stale"', keys[999]: '"stale"', keys[2000]: '"stale"', keys[1000]: '"fresh"'}
    client = BatchClient(s3_client, lambda batch, forward: None)

    def answer(batch: list[str], forward: Callable[[list[str]], Any]) -> Any:
        lost = [k for k in batch if client.etags.get(k) == '"stale"']
        response = forward([k for k in batch if k not in lost])
        response["Errors"] = [{"Key": k, "Code": "PreconditionFailed", "Message": "changed"} for k in lost]
        return response

    client._answer = answer
    with pytest.raises(PreconditionFailedError, match=r"^Error: 3 objects changed and were not deleted$"):
        S3Store(BUCKET, client).delete(keys, if_match=stale)
    assert client.etags == stale  # each key went with its own condition
    assert left(s3_client) == sorted(k for k, etag in stale.items() if etag == '"stale"')


def test_a_failure_outranks_objects_that_changed(s3_client: Any) -> None:
    keys, _ = keys_in_batches(2001)

    def answer(batch: list[str], forward: Callable[[list[str]], Any]) -> Any:
        response = forward(batch)
        code = "PreconditionFailed" if keys[0] in batch else "InternalError" if keys[-1] in batch else None
        if code:
            response["Errors"] = [{"Key": batch[0], "Code": code, "Message": code}]
        return response

    with pytest.raises(StorageError, match=r"1 of 1 objects could not be deleted \(InternalError\)\.$") as info:
        S3Store(BUCKET, BatchClient(s3_client, answer)).delete(keys, if_match={keys[0]: '"e"'})
    assert not isinstance(info.value, PreconditionFailedError)


@pytest.mark.slow  # a subprocess
def test_the_clients_s3memory_builds_do_not_import_boto3() -> None:
    """boto3 and s3transfer cost a cold start about 40 ms more than botocore alone, and the
    client is botocore's either way."""
    code = (
        "import sys; from s3memory.stores._s3 import default_s3_client; "
        "client = default_s3_client(region_name='us-east-1', endpoint_url='http://127.0.0.1:9'); "
        "client = getattr(client, '_client', client); "  # the fast extra's wrapper: its botocore client
        "print(type(client).__module__, sorted(m for m in ('boto3', 's3transfer') if m in sys.modules))"
    )
    environment = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "PATH": ""}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=environment)
    assert out.stdout.split() == ["botocore.client", "[]"]
