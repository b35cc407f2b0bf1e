"""Examples must not rot: each is imported; the offline ones are run."""

from __future__ import annotations

import importlib.util
import json
import runpy
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import BUCKET

EXAMPLES_DIR = Path(__file__).parent.parent / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.rglob("*.py"))


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(EXAMPLES_DIR)))
def test_example_imports(path: Path, aws: None) -> None:
    load(path)


def test_local_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(EXAMPLES_DIR / "local_memory.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "File created successfully at: /memories/todo.md" in out
    assert "     2\t- run the tests" in out


def test_lambda_handler_runs_an_agent_turn_for_the_request_user(aws: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The handler with a scripted model: the memory lands under the authorizer's user."""
    import boto3
    import httpx2
    from anthropic import Anthropic

    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    key_arn = boto3.client("kms", region_name="us-east-1").create_key()["KeyMetadata"]["Arn"]
    monkeypatch.setenv("MEMORY_BUCKET", BUCKET)
    monkeypatch.setenv("MEMORY_KMS_KEY_ID", key_arn)
    handler = load(EXAMPLES_DIR / "lambda" / "handler.py")

    requests: list[dict[str, Any]] = []
    turns = [
        [
            {
                "type": "tool_use",
                "id": "t1",
                "name": "memory",
                "input": {"command": "create", "path": "/memories/prefs.md", "file_text": "tea\n"},
            }
        ],
        [{"type": "text", "text": "Saved."}],
    ]

    def messages_api(request: httpx2.Request) -> httpx2.Response:
        requests.append(json.loads(request.content))
        content = turns[len(requests) - 1]
        stop = "tool_use" if content[0]["type"] == "tool_use" else "end_turn"
        return httpx2.Response(
            200,
            json={
                "id": "m",
                "type": "message",
                "role": "assistant",
                "model": "m",
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        )

    handler._ANTHROPIC = Anthropic(api_key="k", http_client=httpx2.Client(transport=httpx2.MockTransport(messages_api)))
    event = {"requestContext": {"authorizer": {"claims": {"sub": "user-42"}}}, "body": json.dumps({"prompt": "tea"})}
    assert handler.handler(event, None) == {"statusCode": 200, "body": json.dumps({"reply": "Saved."})}
    # context editing is on, and it never clears the memory tool's results
    edits = requests[0]["context_management"]["edits"]
    assert edits[0]["type"] == "clear_tool_uses_20250919" and edits[0]["exclude_tools"] == ["memory"]
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"])
    assert keys == ["user-42/.s3memory/tenant-key", "user-42/memories/prefs.md"]


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return json.loads((EXAMPLES_DIR / "lambda" / "template.json").read_text())


def resources(template: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r["Properties"] for r in template["Resources"].values() if r["Type"] == kind]


def test_template_bucket_is_versioned_encrypted_and_private(template: dict[str, Any]) -> None:
    (bucket,) = resources(template, "AWS::S3::Bucket")
    assert bucket["VersioningConfiguration"] == {"Status": "Enabled"}
    default = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]
    assert default["SSEAlgorithm"] == "aws:kms"
    assert all(bucket["PublicAccessBlockConfiguration"].values()) and len(bucket["PublicAccessBlockConfiguration"]) == 4
    (policy,) = resources(template, "AWS::S3::BucketPolicy")
    assert policy["PolicyDocument"]["Statement"][0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_template_role_is_least_privilege(template: dict[str, Any]) -> None:
    (role,) = resources(template, "AWS::IAM::Role")
    statements = [s for p in role["Policies"] for s in p["PolicyDocument"]["Statement"]]
    actions = {a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert actions == {
        "s3:GetObject",
        "s3:PutObject",
        "s3:DeleteObject",
        "s3:ListBucket",
        "secretsmanager:GetSecretValue",
    }
    assert all(s["Effect"] == "Allow" and s["Resource"] != "*" for s in statements)
    (key,) = resources(template, "AWS::KMS::Key")
    assert key["EnableKeyRotation"] is True
    grants = [s for s in key["KeyPolicy"]["Statement"] if s["Sid"] == "FunctionWrapsTenantKeysOnly"]
    assert grants[0]["Principal"] == {"AWS": {"Fn::GetAtt": ["AgentRole", "Arn"]}}
    assert sorted(grants[0]["Action"]) == ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"]
    assert "kms:EncryptionContext:s3memory:tenant" in grants[0]["Condition"]["StringLike"]


def test_template_function_is_wired_to_bucket_and_key(template: dict[str, Any]) -> None:
    (function,) = resources(template, "AWS::Serverless::Function")
    variables = function["Environment"]["Variables"]
    assert variables["MEMORY_BUCKET"] == {"Ref": "MemoryBucket"}
    assert variables["MEMORY_KMS_KEY_ID"] == {"Fn::GetAtt": ["MemoryKey", "Arn"]}
    assert function["Handler"] == "handler.handler" and function["Role"] == {"Fn::GetAtt": ["AgentRole", "Arn"]}


def test_multi_tenant_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(EXAMPLES_DIR / "multi_tenant.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "     1\tbob's shopping list" in out and "alice's secret plan" not in out
    assert "directory traversal" in out
    assert "'alice/memories/notes.md'" in out and "'bob/memories/notes.md'" in out
