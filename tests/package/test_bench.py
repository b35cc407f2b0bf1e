"""The benchmark must not rot: a small run, with the moto cross-check of request counts."""

from __future__ import annotations

import asyncio
import csv
import sys
import warnings
from pathlib import Path

import pytest
from helpers import REPO

pytestmark = pytest.mark.slow  # benchmark runs

BENCH = REPO / "bench"


def _rows(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    with open(path / "latest.csv") as f:
        return {(r["backend"], r["command"]): r for r in csv.DictReader(f)}


SMALL = ["--rtt-ms", "1", "--files", "12", "--agent-files", "2", "--repeat", "1", "--no-cold-start", "--no-extras"]


def test_benchmark_small_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import run

    try:
        assert run.main([*SMALL, "--out", str(tmp_path), "--check-moto", "--scale", "30"]) == 0
    finally:
        sys.modules.pop("run", None)
    out = capsys.readouterr().out
    assert "moto cross-check: identical S3 request and KMS call counts on all 11 commands" in out
    by_key = _rows(tmp_path)
    assert len(by_key) == 5 * 11
    # the budget, in requests: a warm view of a file is one GET and no KMS call
    assert by_key[("s3memory (tenant key)", "view file")]["s3_detail"] == "GET 1"
    assert by_key[("s3memory (tenant key)", "view file")]["kms_calls"] == "0"
    assert by_key[("s3memory (tenant key)", "str_replace")]["s3_detail"] == "GET 1, PUT 1"
    # (PUT 1: the intent record; the bench's bucket keeps no versions, so no history record)
    assert by_key[("s3memory (KMS per object)", "rename dir (12 files)")]["s3_detail"] == (
        "COPY 12, DELETE-MANY 1, GET 1, HEAD 14, LIST 2, PUT 1"
    )
    # the obvious approach pays a KMS call per read and per write
    assert by_key[("obvious (S3EC + KMS, sequential)", "str_replace")]["kms_calls"] == "2"
    # the embedded default is in the table, and makes no requests
    assert by_key[("embedded default (LocalDirStore)", "create")]["s3_requests"] == "0"
    report = (tmp_path / "latest.md").read_text()
    assert report.startswith("Simulated network: 1 ms per request, in process")
    assert "| embedded ÷ SDK local |" in report and "Issue 29 targets:" in report
    # the scale rows: 30 files on the in-process S3 and on both local stores
    for store in ("in-process S3", "embedded default", "SDK local"):
        for command in ("view /memories", "rename dir", "delete dir"):
            assert f"| {store} | {command} (30 files) |" in report


def test_benchmark_over_http_counts_what_in_process_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real-HTTP mode: the same requests and KMS calls per command as in process (the
    counting is the client's in both), and a client CPU figure for every command."""
    monkeypatch.syspath_prepend(str(BENCH))
    import run

    try:
        assert run.main([*SMALL, "--out", str(tmp_path / "in-process")]) == 0
        assert run.main([*SMALL, "--out", str(tmp_path / "http"), "--http"]) == 0
    finally:
        sys.modules.pop("run", None)
    capsys.readouterr()
    in_process, http = _rows(tmp_path / "in-process"), _rows(tmp_path / "http")
    assert in_process.keys() == http.keys() and len(http) == 5 * 11
    for key, row in http.items():
        assert (row["s3_detail"], row["kms_calls"]) == (in_process[key]["s3_detail"], in_process[key]["kms_calls"])
        assert float(row["cpu_ms"]) >= 0
    # a directory rename runs botocore in this process: its CPU is counted, per request too
    rename = http[("s3memory (tenant key)", "rename dir (12 files)")]
    assert float(rename["cpu_ms"]) > 0
    report = (tmp_path / "http" / "latest.md").read_text()
    assert report.startswith("Simulated network: 1 ms per request, over real HTTP/1.1")
    assert "ms/req)" in report


def test_cold_start_helpers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first command in a fresh process runs against the HTTP fake, and importing
    s3memory loads neither boto3, botocore nor anthropic."""
    monkeypatch.syspath_prepend(str(BENCH))
    for name, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    import httpfake
    import run

    try:
        with httpfake.serve(0.0) as server:
            first = run.first_command(server)
        seconds, loaded = run.import_check()
    finally:
        sys.modules.pop("run", None)
    assert first["loaded by import s3memory"] == "-"
    assert set(first) >= {"import s3memory", "total"}
    assert loaded == [] and seconds > 0


def test_the_clis_rename_runs_in_a_new_process_and_moves_every_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """bench/cli_rename.py, small: ``s3memory rename`` in a fresh process against the HTTP
    fake, back and forth; every file arrives (the bench would time a failing command)."""
    monkeypatch.syspath_prepend(str(BENCH))
    for name, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    import cli_rename
    import httpfake

    with httpfake.serve(0.0) as server:
        result = cli_rename.measure(server, 0.0, files=5, runs=3)  # big -> archive -> big -> archive
        memory = cli_rename.http_memory(server.endpoint, cli_rename.USER)
        listing = memory.view("/memories")
        memory.close()
    assert result["files"] == 5 and result["seconds"] > 0 and result["cpu"] > 0
    assert "/memories/archive/note-0004.md" in listing and "/memories/big/" not in listing


def test_every_target_row_says_what_would_measure_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that measured nothing renders every issue-29 row as not measured, naming the
    flag that measures it, and none as met."""
    monkeypatch.syspath_prepend(str(BENCH))
    import run

    try:
        rows = run.targets(run.Results(rtt=0.02, files=12, http=False, workers=64), run.TENANT, run.EMBEDDED, run.SDK)
    finally:
        sys.modules.pop("run", None)
    assert len(rows) == 7 and all(row.met is None for row in rows)
    assert all(row.measured.startswith("not measured (") for row in rows)


def test_search_benchmark_holds_the_budget(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """bench/search.py, small: a warm search with nothing changed is one round trip, with
    files changed at most three, in both key modes."""
    import re

    monkeypatch.syspath_prepend(str(BENCH))
    import search

    try:
        assert search.main(["--rtt-ms", "50", "--files", "120"]) == 0  # 50 ms: scheduling jitter stays small beside it
    finally:
        sys.modules.pop("search", None)
        sys.modules.pop("history", None)
    out = capsys.readouterr().out
    trips = {
        (match.group(1), match.group(2)): int(match.group(3))
        for match in re.finditer(r"^(tenant|kms)\s+(.+?)\s+(\d+) RT ", out, flags=re.MULTILINE)
    }
    assert len(trips) == 2 * 10
    for mode in ("tenant", "kms"):
        assert trips[(mode, "warm, nothing changed")] == 1
        assert trips[(mode, "8 stores, warm, nothing changed")] == 1
        assert trips[(mode, "warm, 10 files changed by this process")] <= 3
        assert trips[(mode, "warm, index replaced by another process (10 changed)")] <= 3
        assert trips[(mode, "read-only mount, 10 changed (no write-back)")] <= 3
        assert trips[(mode, "cold process, index current")] <= 2  # the tenant key or the index's data key: KMS
    for scenario in ("warm, 1 file changed by another process", "warm, 50 files changed by another process"):
        assert trips[("tenant", scenario)] <= 3
        assert trips[("kms", scenario)] <= 3  # the write-back deferred to the next search
    # Without the index, every file is read: 120 GETs in two waves of 64.
    assert trips[("tenant", "baseline: read every file, no index")] >= 3
    assert "within budget" in out


def test_the_adapters_bench_runs_every_framework_and_checks_each_answer(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """bench/adapters.py: each request's answer is checked to be its own user's (and only its),
    so a small run that ends well is a run of every framework's many-user pattern."""
    monkeypatch.syspath_prepend(str(BENCH))
    import adapters

    try:
        assert adapters.main(["--requests", "2", "--rounds", "1"]) == 0
    finally:
        sys.modules.pop("adapters", None)
    out = capsys.readouterr().out
    for framework in ("langchain", "pydantic-ai", "strands", "strands-tool", "deepagents"):
        assert f"| {framework} | InMemoryStore |" in out
    assert "skipped" not in out
    # and no framework's event loop is left open for a later test's asyncio.run to drop
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            left = asyncio.get_event_loop_policy().get_event_loop()
        except RuntimeError:
            left = None
    assert left is None or left.is_closed()


def test_the_transport_bench_measures_each_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    """``bench/transport.py``: a row per HTTP stack and load, each HEAD answered."""
    monkeypatch.syspath_prepend(str(BENCH))
    for name, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}.items():
        monkeypatch.setenv(name, value)
    import httpfake
    import transport

    with httpfake.serve(0.0) as server:
        rows = transport.measure(server, requests=20)
    import importlib.util

    stacks = {"botocore", "awscrt"} if importlib.util.find_spec("awscrt") else {"botocore"}
    assert {(row["client"], row["threads"]) for row in rows} == {(s, t) for s in stacks for t in (1, 64)}
    assert all(row["cpu"] > 0 and row["wall"] > 0 for row in rows)
