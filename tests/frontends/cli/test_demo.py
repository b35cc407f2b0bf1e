"""``s3memory demo``'s listing of the bucket: readable, with history's long record names grouped."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from s3memory.cli import cli


def test_the_demo_groups_history_records_into_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("S3MEMORY_HOME", str(tmp_path))
    result = CliRunner().invoke(cli, ["demo"])
    assert result.exit_code == 0, result.output
    listing = result.output.split("=== what the bucket holds ===")[1].split("\n---")[0]
    lines = [line for line in listing.splitlines() if line.strip()]
    assert all(len(line) < 140 for line in lines), lines
    assert "ada/memories/user/profile.md  (98 bytes)" in listing
    assert re.search(r"ada/\.s3memory/history/\.\.\.  \(2 history records: who changed what", listing)
