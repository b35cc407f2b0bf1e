"""The README's promises: its first two commands, and CI running the second verbatim."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parent.parent


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


def test_security_policy_exists() -> None:
    text = (ROOT / "SECURITY.md").read_text()
    assert "replay" in text.lower()


def test_readme_documents_every_setting_and_cli_command() -> None:
    from s3memory._config import ENVIRONMENT
    from s3memory.cli import cli

    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("## Configuration") : readme.index("## Performance")]
    for name, (variable, _) in ENVIRONMENT.items():
        assert f"`{variable}`" in table, variable
        assert f"`--{name.replace('_', '-')}`" in table, name
    cli_section = readme[readme.index("## The CLI") : readme.index("## AWS Lambda")]
    examples = [line.split() for line in cli_section.splitlines() if line.startswith("s3memory ")]
    shown = {word for words in examples for word in words}
    assert set(cli.commands) - shown == {"demo", "mcp"}  # which have their own sections
