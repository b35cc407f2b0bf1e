"""The awscrt client's own connections (``s3memory._aws.crt_http``): kept alive and reused as
urllib3 reuses botocore's, never reused once the server closed them, and a 200 whose body is
an error or cut short read as botocore reads it (retried, then botocore's error)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from helpers import REGION
from helpers.canned_http import CannedServer, serving

from s3memory import S3Store, StorageError
from s3memory._aws.clients import new_client
from s3memory.testing import use_fake_aws_credentials

pytest.importorskip("awscrt", reason="awscrt is not installed (pip install 's3memory[fast]')")

from s3memory._aws.crt import CrtS3Client


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[CannedServer]:
    use_fake_aws_credentials(monkeypatch)
    with serving() as served:
        yield served


def _clients(server: CannedServer) -> tuple[Any, CrtS3Client]:
    boto = new_client("s3", region_name=REGION, endpoint_url=server.endpoint, timeout=2)
    crt = CrtS3Client(boto)
    crt._sleep = lambda _: None  # type: ignore[method-assign]  # no backoff between attempts
    return boto, crt


def test_requests_one_after_another_share_one_connection(server: CannedServer) -> None:
    _, crt = _clients(server)
    for _ in range(5):
        crt.head_object(Bucket="bkt", Key="t/k")
    assert (len(server.requests), server.connections) == (5, 1)


def test_concurrent_requests_each_get_a_connection_and_then_share_them(server: CannedServer) -> None:
    _, crt = _clients(server)
    gate = threading.Barrier(4)

    def head(_: int) -> None:
        gate.wait(timeout=5)  # all four in flight together
        crt.head_object(Bucket="bkt", Key="t/k")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(head, range(4)))
    made = server.connections
    assert 1 <= made <= 4
    for _ in range(8):
        crt.head_object(Bucket="bkt", Key="t/k")
    assert server.connections == made  # the idle ones were reused


def test_a_connection_the_server_closed_is_not_reused(server: CannedServer) -> None:
    """S3 closes a keep-alive connection with ``Connection: close`` (or when idle): the next
    request goes on a new connection, and is sent once."""
    _, crt = _clients(server)
    server.reply = lambda method, path: (200, {"Connection": "close"}, b"")
    crt.head_object(Bucket="bkt", Key="t/k")
    server.reply = lambda method, path: (200, {}, b"")
    answer = crt.head_object(Bucket="bkt", Key="t/k")
    assert answer["ResponseMetadata"]["RetryAttempts"] == 0
    assert (len(server.requests), server.connections) == (2, 2)


_ERROR = b"<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>"
_LISTING = b'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><IsTruncated>false</IsTruncated>'


@pytest.mark.parametrize("body", [_ERROR, _LISTING], ids=["an-error", "cut-short"])
def test_a_listing_answered_200_with_an_error_is_retried_as_botocore_retries_it(
    server: CannedServer, body: bytes
) -> None:
    boto, crt = _clients(server)
    server.reply = lambda method, path: (200, {"Content-Type": "application/xml"}, body)
    outcomes = []
    for client in (boto, crt):
        server.requests.clear()
        with pytest.raises(Exception) as raised:
            client.list_objects_v2(Bucket="bkt", Prefix="t/")
        response = getattr(raised.value, "response", {})
        outcomes.append((len(server.requests), type(raised.value).__name__, response.get("Error")))
    assert outcomes[0] == outcomes[1]
    assert outcomes[1][0] == 3  # the standard mode's attempts
    with pytest.raises(StorageError):  # as on botocore (a 500 without a code is not named "unavailable")
        list(S3Store("bkt", crt).list("t/"))


def test_a_delete_answered_200_with_an_error_is_not_taken_for_success(server: CannedServer) -> None:
    boto, crt = _clients(server)
    server.reply = lambda method, path: (200, {"Content-Type": "application/xml"}, _ERROR)
    for client in (boto, crt):
        with pytest.raises(Exception, match="InternalError"):
            client.delete_objects(Bucket="bkt", Delete={"Objects": [{"Key": "t/a"}]})


def test_a_get_whose_range_the_server_ignores_is_not_held_in_memory(
    server: CannedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that answers a GET's ``Range`` with the whole object: past the part and its
    slack, the answer is cut off and the GET goes to botocore, whose stream ``S3Store``
    stops reading one byte past its bound."""
    from s3memory import ObjectTooLargeError
    from s3memory._aws import crt as crt_module

    monkeypatch.setattr(crt_module, "GET_PART_BYTES", 1024)
    monkeypatch.setattr(crt_module, "_ANSWER_SLACK_BYTES", 1024)
    big = b"x" * (4 * 1024 * 1024)
    server.reply = lambda method, path: (200, {"ETag": '"e"'}, big)
    _, crt = _clients(server)
    kept: list[int] = []
    real = crt_module._Answer.on_body

    def on_body(self: Any, chunk: bytes, **kwargs: Any) -> None:
        real(self, chunk, **kwargs)
        kept.append(sum(map(len, self.body)))

    monkeypatch.setattr(crt_module._Answer, "on_body", on_body)
    seen: list[str] = []
    crt.meta.events.register("before-call.s3.GetObject", lambda **_: seen.append("boto3"))
    with pytest.raises(ObjectTooLargeError):
        S3Store("bkt", crt).get("t/k", max_bytes=10_000)
    assert seen == ["boto3"]  # after the awscrt attempt was cut off
    assert kept and max(kept) <= 2048


def test_an_oversized_answer_to_another_verb_is_an_error_not_a_traceback(
    server: CannedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from s3memory._aws import crt as crt_module

    monkeypatch.setattr(crt_module, "GET_PART_BYTES", 1024)
    monkeypatch.setattr(crt_module, "_ANSWER_SLACK_BYTES", 1024)
    server.reply = lambda method, path: (200, {}, _LISTING + b"<Contents/>" * 100_000)
    _, crt = _clients(server)
    with pytest.raises(StorageError):
        list(S3Store("bkt", crt).list("t/"))
