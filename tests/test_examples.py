"""Examples must not rot: each is imported, and the offline one is run."""

from __future__ import annotations

import importlib.util
import runpy
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_imports(path: Path, aws: None) -> None:
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    assert spec and spec.loader
    spec.loader.exec_module(importlib.util.module_from_spec(spec))


def test_local_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(EXAMPLES[0].parent / "local_memory.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "File created successfully at: /memories/todo.md" in out
    assert "     2\t- run the tests" in out


def test_lambda_handler_uses_the_request_user(aws: None) -> None:
    import boto3
    from conftest import BUCKET

    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)
    key_id = boto3.client("kms", region_name="us-east-1").create_key()["KeyMetadata"]["KeyId"]
    spec = importlib.util.spec_from_file_location("lambda_example", EXAMPLES[0].parent / "lambda_handler.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.BUCKET, module.KMS_KEY_ID = BUCKET, key_id

    def event(sub: str, command: dict[str, object]) -> dict[str, object]:
        return {"requestContext": {"authorizer": {"claims": {"sub": sub}}}, "command": command}

    create = {"command": "create", "path": "/memories/a", "file_text": "x"}
    assert module.handler(event("alice", create), None) == {
        "ok": True,
        "result": "File created successfully at: /memories/a",
    }
    assert module.handler(event("bob", {"command": "view", "path": "/memories/a"}), None)["ok"] is False
    assert module.handler(event("alice", {"command": "view", "path": "/memories/a"}), None)["ok"] is True
