"""The benchmark must not rot: a small run, with the moto cross-check of request counts."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parent.parent / "bench"


def test_benchmark_small_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import run

    assert run.main(["--rtt-ms", "1", "--files", "12", "--out", str(tmp_path), "--check-moto", "--no-cold-start"]) == 0
    out = capsys.readouterr().out
    assert "moto cross-check: identical S3 request and KMS call counts on all 11 commands" in out
    with open(tmp_path / "latest.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 * 11
    by_key = {(r["backend"], r["command"]): r for r in rows}
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
    assert (tmp_path / "latest.md").read_text().startswith("Simulated network: 1 ms per request")
    sys.modules.pop("run", None)


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
