"""What the tests share, imported as ``helpers`` (``pythonpath = ["tests"]`` in pyproject.toml):
the test bucket, region and master key (those of the shipped plugin, ``s3memory.testing``),
the backend flavours and which of them are slow, and the repository's folders. Modules beside
this one hold the rest: ``fakekms`` (a deterministic KMS), ``fake_messages_api`` (a scripted
Messages endpoint), ``meter`` (counting requests), ``path_rules`` and ``path_strategies`` (the
path oracles and hypothesis strategies), ``fuzzing`` (the fuzzers' budget, settings, oracles
and sealed-file rigs), ``cli`` and ``mcp`` (the front ends' environments), ``buckets``
(cleaning up a real bucket), ``iam`` (an IAM policy evaluator and the requests it judges),
``localdir`` (the local store's object files, written by hand)."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from s3memory.testing import (
    TEST_BUCKET,
    TEST_MASTER_KEY,
    TEST_REGION,
    make_moto_requests_atomic,
    use_fake_aws_credentials,
)

__all__ = [
    "BENCH_DIR",
    "BUCKET",
    "DATA_DIR",
    "DOCS_DIR",
    "EXAMPLES_DIR",
    "FLAVOURS",
    "LOCAL_FLAVOURS",
    "MASTER_KEY",
    "REGION",
    "REPO",
    "RGW_ENDPOINT",
    "SLOW_FLAVOURS",
    "VECTORS_DIR",
    "examples",
    "flavour_params",
    "make_moto_requests_atomic",
    "sampled",
    "store_matrix",
    "use_fake_aws_credentials",
]

BUCKET = TEST_BUCKET
REGION = TEST_REGION
MASTER_KEY = TEST_MASTER_KEY

# The repository's folders, wherever a test module sits below tests/.
REPO = Path(__file__).resolve().parents[2]
DATA_DIR = REPO / "tests" / "data"  # corpora, kept byte for byte
VECTORS_DIR = REPO / "tests" / "vectors"  # the frozen test vectors of every stored format
EXAMPLES_DIR = REPO / "examples"
DOCS_DIR = REPO / "docs"
BENCH_DIR = REPO / "bench"

# Hypothesis: CI's profile (HYPOTHESIS_PROFILE=ci) runs every property test's whole budget; a
# developer's run (the dev profile, README's command) at most DEV_EXAMPLES examples each.
CI_PROFILE = os.environ.get("HYPOTHESIS_PROFILE") == "ci"
DEV_EXAMPLES = 20
CI_EXAMPLES = 100  # for a test that names no budget of its own


def examples(budget: int) -> int:
    """A property test's ``max_examples``: its whole ``budget`` under CI's profile, at most
    the dev profile's count in a developer's run."""
    return budget if CI_PROFILE else min(budget, DEV_EXAMPLES)


# A real S3 implementation (Ceph radosgw, started by scripts/radosgw.sh in CI), if any.
RGW_ENDPOINT = os.environ.get("S3MEMORY_TEST_S3_ENDPOINT")

FLAVOURS = ["inmemory", "localdir", "s3-tenant-local", "s3-tenant-kms", "s3-kms", "rgw"]
# In the slow tier only: two moto flavours that differ from "s3-tenant-local" only in how keys
# are wrapped (tests/crypto/test_keyrings.py covers each keyring in the default tier), and the
# real server.
SLOW_FLAVOURS = frozenset({"s3-tenant-kms", "s3-kms", "rgw"})
LOCAL_FLAVOURS = frozenset({"inmemory", "localdir"})


def flavour_params(flavours: list[str]) -> list[Any]:
    """``flavours`` as parameters, those of ``SLOW_FLAVOURS`` marked ``slow``."""
    return [pytest.param(f, marks=pytest.mark.slow) if f in SLOW_FLAVOURS else f for f in flavours]


def store_matrix(flavours: Iterable[str], cases: Iterable[str], on_s3_by_default: Collection[str]) -> list[Any]:
    """(flavour, case) parameters for every flavour and case, for what is decided above the
    store (a tampered object, a refused command): the whole matrix runs on the in-memory and
    local stores in the default tier, and on S3 (moto, radosgw) the cases of
    ``on_s3_by_default``, the others in the slow tier."""
    cases = sorted(cases)
    assert set(on_s3_by_default) <= set(cases), set(on_s3_by_default) - set(cases)
    return [
        pytest.param(flavour, case, marks=pytest.mark.slow)
        if flavour not in LOCAL_FLAVOURS and case not in on_s3_by_default
        else pytest.param(flavour, case)
        for flavour in flavours
        for case in cases
    ]


def sampled(values: Sequence[Any], ids: Sequence[str], by_default: Collection[str]) -> list[Any]:
    """``values`` as parameters named ``ids``: those named in ``by_default`` run in the default
    tier, the others in the slow tier (a matrix whose every row CI runs)."""
    assert set(by_default) <= set(ids), set(by_default) - set(ids)
    return [
        pytest.param(value, id=name) if name in by_default else pytest.param(value, id=name, marks=pytest.mark.slow)
        for value, name in zip(values, ids, strict=True)
    ]
