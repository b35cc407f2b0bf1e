"""Every test file the repository cites exists, and so does every test it names.

README.md, SECURITY.md, the docs, the package's docstrings, the examples and the tests point
readers at the tests that show a claim (``tests/core/test_paths.py``,
``tests/contract/test_stores.py::TestS3Store``). When tests move, a citation that still names
the old place sends a reviewer nowhere; this test finds it. The CHANGELOG is history and may
name files as they were.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from helpers import REPO

CITATION = re.compile(r"(?<![\w/.-])(tests/[\w/.-]+\.(?:py|json|md))(?:::(\w+))?")
CITING = re.compile(r"\.(py|md|yml|toml|json|txt|sh)$|(^|/)run$")
NOT_CITING = ("CHANGELOG.md", "tests/data/", "tests/package/test_citations.py")  # the last: its examples


def citing_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    names = [name for name in listed.splitlines() if CITING.search(name) and not name.startswith(NOT_CITING)]
    return [REPO / name for name in names if (REPO / name).is_file()]


def broken_citations(text: str, root: Path) -> list[str]:
    """The citations in ``text`` of a test file missing under ``root``, or of a name (after
    ``::``) that its file does not define."""
    broken = []
    for match in CITATION.finditer(text):
        path, name = root / match.group(1), match.group(2)
        if not path.is_file():
            broken.append(match.group(0))
        elif name and not re.search(rf"\b(def|class)\s+{name}\b|^{name}\s*=", path.read_text(encoding="utf-8"), re.M):
            broken.append(match.group(0))
    return broken


def test_every_cited_test_exists() -> None:
    broken = {
        str(path.relative_to(REPO)): found
        for path in citing_files()
        if (found := broken_citations(path.read_text(encoding="utf-8", errors="replace"), REPO))
    }
    assert broken == {}


def test_a_citation_of_a_moved_file_or_a_missing_test_is_found(tmp_path: Path) -> None:
    (tmp_path / "tests" / "core").mkdir(parents=True)
    (tmp_path / "tests" / "core" / "test_paths.py").write_text("def test_refused_paths():\n    pass\n")
    text = (
        "See tests/core/test_paths.py, tests/core/test_paths.py::test_refused_paths, "
        "tests/test_paths.py (moved) and tests/core/test_paths.py::test_gone."
    )
    assert broken_citations(text, tmp_path) == ["tests/test_paths.py", "tests/core/test_paths.py::test_gone"]
