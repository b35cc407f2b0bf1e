"""The docs' promises: the README's first two commands (and CI running the second verbatim),
its links, and the manual under docs/: it builds with ``mkdocs build --strict`` and names every
setting, command, public name and error. Its snippets run in test_doc_snippets.py."""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

ROOT = REPO
DOCS = ROOT / "docs"


def readme_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block, "README.md must start with a bash block of commands"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_readme_starts_with_two_commands() -> None:
    commands = readme_commands()
    assert len(commands) == 2
    assert commands[0].endswith("s3memory demo")
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert readme_commands()[1] in ci


def test_readme_stays_a_landing_page() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


def test_security_policy_exists() -> None:
    text = (ROOT / "SECURITY.md").read_text()
    assert "replay" in text.lower()


def test_the_docs_document_every_setting_and_cli_command() -> None:
    from s3memory._config import ENVIRONMENT
    from s3memory.cli import cli

    table = (DOCS / "configuration.md").read_text()
    for name, (variable, _) in ENVIRONMENT.items():
        assert f"`{variable}`" in table, variable
        assert f"`--{name.replace('_', '-')}`" in table, name
    cli_page = (DOCS / "cli.md").read_text()
    examples = [line.split() for line in cli_page.splitlines() if line.startswith("s3memory ")]
    shown = {word for words in examples for word in words}
    assert set(cli.commands) - shown == {"demo", "mcp", "serve", "serve-key"}  # which have their own pages


# -- links -------------------------------------------------------------------------------------
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def github_anchor(heading: str) -> str:
    """The anchor GitHub (and MkDocs' default slugify, for these headings) gives a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    outside_fences = re.sub(r"```.*?```", "", markdown, flags=re.S)
    return {github_anchor(m.group(1)) for m in re.finditer(r"^#{1,6} +(.+)$", outside_fences, re.M)}


def test_every_relative_link_in_the_readme_resolves() -> None:
    readme = (ROOT / "README.md").read_text()
    targets = [t for t in LINK.findall(readme) if not re.match(r"[a-z]+:", t)]
    assert targets, "README.md links into docs/"
    for target in targets:
        path, _, anchor = target.partition("#")
        file = (ROOT / path) if path else ROOT / "README.md"
        assert file.exists(), f"README.md links to {target}, which does not exist"
        if anchor:
            assert file.suffix == ".md", target
            assert anchor in anchors(file.read_text()), f"README.md links to {target}: no such heading"


def test_the_link_checks_find_a_broken_link() -> None:
    assert "missing" not in anchors("# Present\n```\n# missing\n```\n")
    assert github_anchor("Mounts: shared stores beside the user's own") == "mounts-shared-stores-beside-the-users-own"


# -- the site ----------------------------------------------------------------------------------
def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed: pip install 'mkdocs-material>=9.5' 'mkdocstrings[python]>=0.26'")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-5000:]
    assert (tmp_path / "site" / "reference" / "api" / "index.html").exists()


def test_the_api_reference_names_every_public_name() -> None:
    import s3memory

    pages = (DOCS / "reference" / "api.md").read_text() + (DOCS / "reference" / "errors.md").read_text()
    documented = set(re.findall(r"^::: s3memory\.(\w+)$", pages, re.M))
    assert documented == set(s3memory.__all__)


def error_tree() -> dict[str, str]:
    """Each class of the tree drawn in docs/reference/errors.md -> its parent in the drawing."""
    text = (DOCS / "reference" / "errors.md").read_text()
    drawing = re.search(r"```\n(S3MemoryError\n.*?)```", text, re.S)
    assert drawing, "docs/reference/errors.md draws the tree in a plain code block"
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in drawing.group(1).splitlines():
        match = re.match(r"^([│ ]*)(?:[├└]── )?(\w+)", line)
        assert match, line
        depth = len(match.group(1)) // 4 + (1 if "──" in line else 0)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack:
            parents[match.group(2)] = stack[-1][1]
        stack.append((depth, match.group(2)))
    return parents


def test_the_error_tree_in_the_docs_is_the_classes() -> None:
    import s3memory

    loaded = vars(s3memory)  # not getattr: that would import the SDK for S3MemoryTool
    errors = {
        name: loaded[name]
        for name in s3memory.__all__
        if inspect.isclass(loaded.get(name)) and issubclass(loaded[name], BaseException)
    }
    tree = error_tree()
    assert set(tree) | {"S3MemoryError"} == set(errors)
    for name, parent in tree.items():
        assert errors[name].__bases__[0].__name__ == parent, name
