"""Other projects' tests, run against s3memory's adapters: the judges of what a framework's
users expect of a backend.

A framework's tests come from its source distribution on PyPI (the version installed),
downloaded once by ``pip download`` and unpacked under ``.peer-tests/`` in the repository
(ignored by git; ``S3MEMORY_PEER_TESTS`` moves it). Nothing of theirs is copied into this
repository. :func:`run_peer_tests` runs chosen test files in a pytest of their own (a
subprocess, in the unpacked tree, with their conftest files) with a plugin of ours loaded
first, which puts the adapter where their tests build the framework's own class, and
answers each test's outcome. Where PyPI cannot be reached the peer tests are skipped,
except under ``CI``, where that fails them.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

import pytest

from helpers import REPO

PEER_CACHE = Path(os.environ.get("S3MEMORY_PEER_TESTS") or REPO / ".peer-tests")


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One process at a time (pytest-xdist's workers may all ask for the same sdist)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def sdist_tree(distribution: str) -> Path:
    """The unpacked source distribution of the installed version of ``distribution``."""
    version = metadata.version(distribution)
    target = PEER_CACHE / f"{distribution}-{version}"
    done = target / ".unpacked"
    with _locked(PEER_CACHE / f".{distribution}.lock"):
        if done.exists():
            return _single_root(target)
        with tempfile.TemporaryDirectory() as download:
            fetched = subprocess.run(
                [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                 f"{distribution}=={version}", "-d", download],
                capture_output=True, text=True, timeout=300, check=False,
            )  # fmt: skip
            archives = sorted(Path(download).glob("*.tar.gz"))
            if fetched.returncode != 0 or not archives:
                why = f"the sdist of {distribution}=={version} could not be downloaded: {fetched.stderr[-400:]}"
                if os.environ.get("CI"):
                    pytest.fail(why)
                pytest.skip(why)
            target.mkdir(parents=True, exist_ok=True)
            with tarfile.open(archives[0]) as archive:
                archive.extractall(target, filter="data")  # "data": no links or paths out of target
        done.touch()
    return _single_root(target)


def _single_root(target: Path) -> Path:
    (root,) = [child for child in target.iterdir() if child.is_dir()]
    return root


def run_peer_tests(
    root: Path,
    tests: Sequence[str],
    *,
    plugin: str,
    extra_args: Sequence[str] = (),
    timeout: float = 600,
) -> dict[str, str]:
    """Run ``tests`` (paths or node ids, relative to ``root``) with pytest in ``root``, our
    ``plugin`` module (importable from ``tests/``) loaded first; answers each test's node
    id (as ``path::name``, parameters included) and outcome: ``passed``, ``failed``,
    ``error`` or ``skipped``."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.xml"
        environment = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), str(root)]),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        environment.pop("PYTEST_XDIST_WORKER", None)
        environment.pop("PYTEST_ADDOPTS", None)
        completed = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", plugin, "-p", "no:cacheprovider", "-p", "no:randomly",
             "-o", "addopts=", "--rootdir", str(root), "--junitxml", str(report), *extra_args, *tests],
            cwd=root, env=environment, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
        if not report.exists():
            raise AssertionError(f"the peer tests did not run:\n{completed.stdout[-3000:]}\n{completed.stderr[-3000:]}")
        return _outcomes(report)


def _outcomes(report: Path) -> dict[str, str]:
    outcomes: dict[str, str] = {}
    for case in ElementTree.parse(report).iter("testcase"):
        module = case.get("classname", "")
        parts = module.split(".")
        # junit's classname is the dotted module path, then the class if any.
        path = "/".join(part for part in parts if part and not part[0].isupper()) + ".py"
        classes = [part for part in parts if part and part[0].isupper()]
        node = "::".join([path, *classes, case.get("name", "")])
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = "failed" if child.tag == "failure" else child.tag
        outcomes[node] = outcome
    return outcomes
