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
