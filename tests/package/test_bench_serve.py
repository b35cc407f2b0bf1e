"""bench/serve.py must not rot: a small run pins the S3 requests of every endpoint of
``s3memory serve``, cross-checked against moto, and the versioned fake answers as moto does."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from helpers import REPO

pytestmark = pytest.mark.slow  # benchmark runs

BENCH = REPO / "bench"
SMALL = ["--memories", "8", "--edits", "1", "--repetitions", "1", "--rtt-ms", "1"]

#: The S3 requests of each endpoint in the small run (8 memories of 2 versions, warm, the
#: index current): a change here is a change of the server's cost, to be looked at.
EXPECTED = {
    "stores: create": "HEAD 2, LIST 1, PUT 2",
    "stores: retrieve": "GET 1",
    "stores: update": "GET 2, PUT 2",
    "stores: list": "HEAD 1, LIST 1",
    "stores: archive": "GET 2, PUT 2",
    "stores: delete (empty)": "DELETE-MANY 1, GET 1, HEAD 1, LIST 1, LIST-VERSIONS 3, PUT 1",
    "stores: delete (5 memories)": "DELETE-MANY 4, GET 1, HEAD 1, LIST 1, LIST-VERSIONS 3, PUT 1",
    "memories: create": "GET 1, HEAD 2, LIST 1, PUT 2",
    "memories: retrieve": "GET 1, HEAD 1, LIST 1",
    "memories: retrieve, index 1 write behind": "GET 2, HEAD 1, LIST 1, PUT 1",
    "memories: update content": "GET 2, HEAD 1, LIST 1, PUT 2",
    "memories: update path (rename)": "COPY 1, DELETE-MANY 1, GET 3, HEAD 5, LIST 4, PUT 3",
    "memories: update path and content": "COPY 1, DELETE-MANY 1, GET 4, HEAD 5, LIST 4, PUT 5",
    "memories: update, precondition fails": "GET 1, HEAD 1, LIST 1",
    "memories: list": "GET 1, HEAD 1, LIST 1",
    "memories: list depth=1": "GET 1, HEAD 1, LIST 1",
    "memories: list view=full": "GET 1, HEAD 1, LIST 1",
    "memories: delete": "DELETE-MANY 1, GET 2, HEAD 1, LIST 2, PUT 1",
    "memories: delete, precondition fails": "GET 1, HEAD 1, LIST 1",
    "versions: list": "GET 19, LIST-VERSIONS 17",
    "versions: list memory_id=": "GET 4, LIST-VERSIONS 17",
    "versions: retrieve": "GET 2, LIST-VERSIONS 17",
    "versions: redact": "DELETE 1, DELETE-MANY 1, GET 2, LIST-VERSIONS 41, PUT 1",
}
REFUSED = {"memories: update, precondition fails", "memories: delete, precondition fails"}


@pytest.fixture
def serve_bench(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.syspath_prepend(str(BENCH))
    for name, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    import serve

    try:
        yield serve
    finally:
        sys.modules.pop("serve", None)


def test_every_endpoint_makes_the_requests_pinned_here_on_the_fake_and_on_moto(
    serve_bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    figures = tmp_path / "figures.json"
    assert serve_bench.main([*SMALL, "--json", str(figures), "--check-moto"]) == 0
    out = capsys.readouterr().out
    assert f"moto cross-check: identical S3 request and KMS call counts on all {len(EXPECTED)} endpoints" in out
    rows = {row["endpoint"]: row for row in json.loads(figures.read_text())["rows"]}
    assert list(rows) == list(EXPECTED)
    for endpoint, requests in EXPECTED.items():
        row = rows[endpoint]
        assert [serve_bench.verbs_text(counts) for counts in row["requests"]] == [requests], endpoint
        assert row["kms_calls"] == [0], endpoint  # warm, tenant-key mode: no KMS call anywhere
        assert row["status"] == (409 if endpoint in REFUSED else 200)
        assert len(row["round_trips"]) == len(row["ms"]) == 1
    # the table: the settings and machine line, then one row per endpoint
    assert out.startswith("`s3memory serve` per endpoint, MemoryStoreAPI.handle called directly (no HTTP)")
    assert "one store of 8 memories of 2 versions each" in out and "Python 3." in out
    assert "| endpoint | S3 requests by verb | KMS | round trips | median | at RTT | client CPU |" in out
    assert f"| memories: update, precondition fails (409) | {EXPECTED['memories: update, precondition fails']} |" in out
    assert f"| versions: redact | {EXPECTED['versions: redact']} | 0 |" in out


def test_json_alone_prints_the_figures_instead_of_the_table(
    serve_bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert serve_bench.main(["--memories", "6", "--edits", "1", "--repetitions", "2", "--rtt-ms", "0", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["settings"] == {"memories": 6, "edits": 1, "repetitions": 2, "rtt_ms": 0.0}
    assert [row["endpoint"] for row in figures["rows"]] == list(EXPECTED)
    assert all(len(row["ms"]) == 2 and row["median_ms"] >= 0 for row in figures["rows"])


def test_bad_settings_are_refused_with_a_message(serve_bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        serve_bench.main(["--repetitions", "0"])
    assert exit_.value.code == 2
    assert "--repetitions must be at least 1" in capsys.readouterr().err


# -- the versioned fake against moto ------------------------------------------------------------
def _exercise(client: Any, bucket: str) -> list[Any]:
    """Versions, delete markers, a version deleted, a copy; what S3 answers of them."""
    client.create_bucket(Bucket=bucket)
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    seen: list[Any] = [client.get_bucket_versioning(Bucket=bucket).get("Status")]
    ids = {}
    for n, (key, body) in enumerate([("a", b"a1"), ("a", b"a2"), ("a", b"a3"), ("b", b"b1"), ("c/d", b"d1")]):
        answer = client.put_object(Bucket=bucket, Key=key, Body=body)
        ids[n] = answer["VersionId"]
    marker = client.delete_object(Bucket=bucket, Key="b")
    seen.append(marker.get("DeleteMarker"))
    client.delete_object(Bucket=bucket, Key="a", VersionId=ids[2])  # the latest: a2 is current again
    seen.append(client.get_object(Bucket=bucket, Key="a")["Body"].read())
    seen.append(client.get_object(Bucket=bucket, Key="a", VersionId=ids[0])["Body"].read())
    client.copy_object(Bucket=bucket, Key="e", CopySource={"Bucket": bucket, "Key": "a"})
    client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "c/d"}, {"Key": "a", "VersionId": ids[0]}]})
    for version_id in (marker["VersionId"], ids[2]):  # a delete marker; a version deleted
        try:
            client.get_object(
                Bucket=bucket, Key="b" if version_id == marker["VersionId"] else "a", VersionId=version_id
            )
        except client.exceptions.ClientError as error:
            # S3 answers a delete marker's version 405 (moto 404): S3Store takes both as no version
            status = error.response["ResponseMetadata"]["HTTPStatusCode"]
            seen.append("no such version" if status in (404, 405) else (status, error.response["Error"]["Code"]))
    pages = client.get_paginator("list_object_versions").paginate(Bucket=bucket, PaginationConfig={"PageSize": 2})
    for page in pages:
        entries: list[tuple[Any, ...]] = [
            ("version", v["Key"], v["IsLatest"], v["ETag"], v["Size"]) for v in page.get("Versions", [])
        ]
        entries += [("marker", m["Key"], m["IsLatest"]) for m in page.get("DeleteMarkers", [])]
        seen.append(sorted(entries))
    current = client.list_objects_v2(Bucket=bucket).get("Contents", [])
    seen.append([(item["Key"], item["ETag"]) for item in current])
    return seen


def test_the_versioned_fake_answers_as_moto_does(serve_bench: ModuleType) -> None:
    from fakeaws import Network
    from measure import plain_clients
    from moto import mock_aws

    answers = []
    for use_moto in (False, True):
        with (
            mock_aws() if use_moto else nullcontext(),
            serve_bench.moto_in_milliseconds() if use_moto else nullcontext(),
        ):
            network = Network(rtt=0.0, s3=None if use_moto else serve_bench.VersionedFakeS3())
            answers.append(_exercise(network.attach(plain_clients(None)[0]), "versioned-bench"))
    fake, moto = answers
    assert fake == moto
    assert fake[:4] == ["Enabled", True, b"a2", b"a1"]
    assert fake[4:6] == ["no such version"] * 2
    assert len(fake) > 8  # pages of two entries, several of them
