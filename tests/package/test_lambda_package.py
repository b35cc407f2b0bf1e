"""The Lambda example's package (examples/lambda) and what its cold start loads.

The package holds s3memory's dependencies but the command line's, its ``fast`` extra and
Powertools: requirements.txt, kept in step with pyproject.toml here. ``import handler`` and
a refused request load neither the Anthropic SDK nor boto3 (checked in a fresh
interpreter). The Makefile compiles the package's bytecode with CPython of the target's
version only. The builds themselves are tested in test_lambda.py (slow tier).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

LAMBDA_DIR = REPO / "examples" / "lambda"
PACKAGE = REPO / "s3memory"
# What only the command line imports (rich brings pygments): the package leaves them out.
CLI_ONLY = {"click", "rich"}
HANDLER_ONLY = {"aws-lambda-powertools>=3.0,<4"}


def requirement_name(requirement: str) -> str:
    found = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert found, requirement
    return found.group().lower().replace("_", "-")


def test_the_function_needs_s3memory_dependencies_but_the_command_lines_and_the_fast_extra() -> None:
    """requirements.txt (what the Makefile installs beside the s3memory wheel, installed
    with --no-deps) is pyproject's dependencies less click and rich, plus the fast extra and
    Powertools, with the same bounds: a dependency added to s3memory fails this test until
    the function gets it too."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11's")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = {r for r in project["dependencies"] if requirement_name(r) not in CLI_ONLY}
    assert {requirement_name(r) for r in project["dependencies"]} >= CLI_ONLY  # else CLI_ONLY is stale
    lines = (LAMBDA_DIR / "requirements.txt").read_text().splitlines()
    listed = {line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")}
    assert listed == core | set(project["optional-dependencies"]["fast"]) | HANDLER_ONLY


def imported_modules(path: Path) -> set[str]:
    """The absolute names ``path`` (a module of s3memory) imports."""
    package = list(path.relative_to(REPO).with_suffix("").parts)[:-1]  # of a module or an __init__
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            names.add(module)
            names |= {f"{module}.{alias.name}" for alias in node.names}
    return names


def test_only_the_command_line_imports_click_and_rich() -> None:
    """What lets the package leave out click, rich (with pygments) and s3memory/cli: no
    other module of s3memory imports them."""
    command_line = {PACKAGE / "__main__.py", *(PACKAGE / "cli").rglob("*.py")}
    offenders = {}
    for path in sorted(set(PACKAGE.rglob("*.py")) - command_line):
        found = {
            name
            for name in imported_modules(path)
            if name.split(".")[0] in {*CLI_ONLY, "pygments"}
            or name == "s3memory.cli"
            or name.startswith("s3memory.cli.")
        }
        if found:
            offenders[str(path.relative_to(REPO))] = sorted(found)
    assert offenders == {}
    assert "s3memory.cli" in imported_modules(PACKAGE / "__main__.py")  # the resolver sees relative imports


COLD = """
import json, sys
sys.path.insert(0, sys.argv[1])
WATCHED = ("anthropic", "boto3", "s3memory.integrations.anthropic", "httpx2", "awscrt")
def loaded():
    return [name for name in WATCHED if name in sys.modules]
class Context:
    function_name, memory_limit_in_mb, aws_request_id = "f", 128, "r"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:f"
    def get_remaining_time_in_millis(self):
        return 30000
import handler
seen = {"import": loaded()}
unauthenticated = handler.handler({"version": "2.0", "requestContext": {}}, Context())
seen["401"] = loaded()
claims = {"authorizer": {"jwt": {"claims": {"sub": "s", "iss": "https://issuer.example/"}}}}
bad_body = handler.handler({"version": "2.0", "requestContext": claims, "body": "[]"}, Context())
seen["400"] = loaded()
seen["statuses"] = [unauthenticated["statusCode"], bad_body["statusCode"]]
print(json.dumps(seen))
"""


def test_import_and_refused_requests_load_neither_the_sdk_nor_boto3(tmp_path: Path) -> None:
    """A cold start pays for the Anthropic SDK on the first model call only, and for the
    AWS clients on first use: a fresh interpreter imports the handler and refuses a request
    without identity (401) and one with a bad body (400), having loaded none of them."""
    environment = {"PATH": os.environ.get("PATH", ""), "AWS_DEFAULT_REGION": "us-east-1"}
    command = [sys.executable, "-c", COLD, str(LAMBDA_DIR)]
    done = subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen == {"import": [], "401": [], "400": [], "statuses": [401, 400]}


def make_target(target: str, *variables: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = ["make", "--silent", "--makefile", str(LAMBDA_DIR / "Makefile"), target, *variables]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(shutil.which("make") is None, reason="sam build runs make: install make")
def test_the_bytecode_is_compiled_by_the_target_python_or_not_at_all(tmp_path: Path) -> None:
    """LAMBDA_COMPILER is used only if it is CPython LAMBDA_PYTHON; with none, the build
    fails before it downloads anything, and says how to get one."""
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    found = make_target("lambda-python", f"LAMBDA_PYTHON={running}", f"LAMBDA_COMPILER={sys.executable}", cwd=tmp_path)
    assert (found.returncode, found.stdout.strip()) == (0, sys.executable)
    other = make_target("lambda-python", "LAMBDA_PYTHON=3.99", f"LAMBDA_COMPILER={sys.executable}", cwd=tmp_path)
    assert other.returncode != 0 and other.stdout == ""
    assert "no CPython 3.99 to compile the package's bytecode with" in other.stderr
    artifacts = tmp_path / "package"
    artifacts.mkdir()
    build = make_target("build-AgentFunction", "LAMBDA_PYTHON=3.99", f"ARTIFACTS_DIR={artifacts}", cwd=tmp_path)
    assert build.returncode != 0 and "LAMBDA_COMPILER=/path/to/python3.99" in build.stderr
    assert list(artifacts.iterdir()) == []
