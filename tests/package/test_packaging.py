"""The package as it would be published: one version, a wheel of the package alone with its
license, a source release that can run its own tests."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from helpers import REPO

import s3memory

pytestmark = pytest.mark.slow  # builds the wheel and sdist in a subprocess

ROOT = REPO

pytest.importorskip("build", reason="the packaging test needs the dev extra's build and hatchling")


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    return out


def test_one_version_source(dist: Path) -> None:
    assert sorted(p.name for p in dist.iterdir()) == [
        f"s3memory-{s3memory.__version__}-py3-none-any.whl",
        f"s3memory-{s3memory.__version__}.tar.gz",
    ]
    assert f"## {s3memory.__version__}" in (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")


def test_the_wheel_holds_the_package_its_types_and_license(dist: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    package = {name for name in names if name.startswith("s3memory/")}
    sources = {str(p.relative_to(ROOT)) for p in (ROOT / "s3memory").rglob("*.py")}
    assert {name for name in package if name.endswith(".py")} == sources
    assert "s3memory/py.typed" in package
    info = f"s3memory-{s3memory.__version__}.dist-info"
    assert f"{info}/licenses/LICENSE" in names
    assert not [name for name in names if not name.startswith(("s3memory/", info))]
    metadata = zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode()
    assert f"Version: {s3memory.__version__}" in metadata and "License-Expression: Apache-2.0" in metadata


def test_the_sdist_can_run_its_tests_and_holds_nothing_private(dist: Path) -> None:
    (sdist,) = dist.glob("*.tar.gz")
    top = f"s3memory-{s3memory.__version__}/"
    names = {name.removeprefix(top) for name in tarfile.open(sdist).getnames()}
    for needed in ("pyproject.toml", "README.md", "SECURITY.md", "CHANGELOG.md", "LICENSE", "tests/conftest.py"):
        assert needed in names
    assert "docs/FORMAT.md" in names
    assert not [n for n in names if n.startswith((".ci/", ".venv/", "bench/")) or "__pycache__" in n]
