"""Examples must not rot: each is imported; the offline ones are run."""

from __future__ import annotations

import importlib.util
import json
import re
import runpy
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from helpers import REPO

EXAMPLES_DIR = REPO / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.rglob("*.py"))


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The framework an example needs, where the dev extra installs it only on Python 3.11+.
NEEDS_PYTHON_311 = {
    "deepagents_memory.py": "deepagents",
    "langchain_memory.py": "langchain",
    "pydantic_ai_memory.py": "pydantic_ai",
}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(EXAMPLES_DIR)))
def test_example_imports(path: Path, aws: None) -> None:
    if path.name in NEEDS_PYTHON_311 and sys.version_info < (3, 11):
        pytest.importorskip(NEEDS_PYTHON_311[path.name])
    load(path)


def test_local_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(EXAMPLES_DIR / "local_memory.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "File created successfully at: /memories/todo.md" in out
    assert "     2\t- run the tests" in out


# The Lambda handler, its build and its API: tests/package/test_lambda.py.


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return json.loads((EXAMPLES_DIR / "lambda" / "template.json").read_text())


def resources(template: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r["Properties"] for r in template["Resources"].values() if r["Type"] == kind]


def named(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {name: r["Properties"] for name, r in template["Resources"].items() if r["Type"] == kind}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_template_bucket_is_versioned_encrypted_and_private(template: dict[str, Any]) -> None:
    (bucket,) = resources(template, "AWS::S3::Bucket")
    assert bucket["VersioningConfiguration"] == {"Status": "Enabled"}
    default = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]
    # SSE-KMS with the AWS managed key: S3 would call the memory key with the caller's
    # permissions and a context (aws:s3:arn) that the tenant-scoped key policy refuses.
    assert default == {"SSEAlgorithm": "aws:kms"}
    assert all(bucket["PublicAccessBlockConfiguration"].values()) and len(bucket["PublicAccessBlockConfiguration"]) == 4
    (policy,) = resources(template, "AWS::S3::BucketPolicy")
    assert policy["PolicyDocument"]["Statement"][0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    old_versions, markers = bucket["LifecycleConfiguration"]["Rules"]
    # Old versions are kept for a parameter's days (30 by default, as the managed stores).
    assert old_versions["NoncurrentVersionExpiration"] == {"NoncurrentDays": {"Ref": "NoncurrentVersionDays"}}
    assert template["Parameters"]["NoncurrentVersionDays"]["Default"] == 30
    assert old_versions["ExpiredObjectDeleteMarker"] is True
    assert markers["TagFilters"] == [{"Key": "s3memory", "Value": "access"}] and markers["ExpirationInDays"] == 400


def role_statements(template: dict[str, Any], role: str) -> list[dict[str, Any]]:
    """Every statement of the role's inline policies and of the RolePolicy resources on it."""
    inline = named(template, "AWS::IAM::Role")[role].get("Policies", [])
    attached = [p for p in named(template, "AWS::IAM::RolePolicy").values() if p["RoleName"] == {"Ref": role}]
    return [s for p in inline + attached for s in p["PolicyDocument"]["Statement"]]


def test_template_roles_are_least_privilege(template: dict[str, Any]) -> None:
    roles = named(template, "AWS::IAM::Role")
    # MemoryStoreApiRole, the memory-store API's: tests/serve/test_aws_lambda.py
    assert set(roles) == {"AgentRole", "MemoryRole", "MemoryStoreApiRole"}
    # The function's own role: the API key, and assuming the memory role; no S3, no KMS.
    agent = role_statements(template, "AgentRole")
    assert {a for s in agent for a in as_list(s["Action"])} == {
        "secretsmanager:GetSecretValue",
        "sts:AssumeRole",
        "sts:TagSession",
    }
    assert all(s["Effect"] == "Allow" and s["Resource"] != "*" for s in agent)
    (assume,) = [s for s in agent if "sts:AssumeRole" in as_list(s["Action"])]
    assert assume["Resource"] == {"Fn::GetAtt": ["MemoryRole", "Arn"]}
    # The memory role: only the tagged user's objects, listing and KMS context; reading
    # history (versions, and whether the bucket keeps them) but never deleting a version;
    # and reading, never writing, the store mounted read-only (standards).
    memory = role_statements(template, "MemoryRole")
    read_only = [s for s in memory if s["Sid"].startswith("ReadOnlyMount")]
    assert {a for s in read_only for a in as_list(s["Action"])} == {"s3:GetObject", "s3:ListBucket", "kms:Decrypt"}
    grants = [s for s in memory if s["Effect"] == "Allow" and s not in read_only]
    assert {a for s in grants for a in as_list(s["Action"])} == {
        "s3:GetObject",
        "s3:GetObjectVersion",
        "s3:PutObject",
        "s3:PutObjectTagging",
        "s3:DeleteObject",
        "s3:ListBucket",
        "s3:ListBucketVersions",
        "s3:GetBucketVersioning",
        "kms:Encrypt",
        "kms:Decrypt",
    }
    tag = "${aws:PrincipalTag/s3memory-user}"
    for statement in grants:
        assert statement["Resource"] != "*"
        if statement["Action"] == "s3:GetBucketVersioning":  # the bucket's own setting, no user's data
            assert statement["Resource"] == {"Fn::Sub": "arn:${AWS::Partition}:s3:::${MemoryBucket}"}
            continue
        assert tag in json.dumps(statement).replace("${!", "${"), statement["Sid"]  # scoped to the user
    assert {s["Sid"] for s in memory if s["Effect"] == "Deny"} == {
        "DenyInsecureTransport",
        "DenyUntaggedSessions",
        "DenyWritesToReadOnlyMounts",
        "DenyKeyMakingForReadOnlyMounts",
    }
    trust = roles["MemoryRole"]["AssumeRolePolicyDocument"]["Statement"]
    assert all(s["Principal"] == {"AWS": {"Fn::GetAtt": ["AgentRole", "Arn"]}} for s in trust)
    (tagging,) = [s for s in trust if s["Action"] == "sts:TagSession"]
    assert tagging["Condition"]["ForAllValues:StringEquals"] == {"aws:TagKeys": ["s3memory-user"]}
    # The key: rotated; used only by the memory role, only under the user's context.
    key = named(template, "AWS::KMS::Key")["MemoryKey"]  # MemoryStoreKey: tests/serve/test_aws_lambda.py
    assert key["EnableKeyRotation"] is True
    uses = [
        s for s in key["KeyPolicy"]["Statement"] if any(a in as_list(s["Action"]) for a in ("kms:Decrypt", "kms:*"))
    ]
    memory_role = {"AWS": {"Fn::GetAtt": ["MemoryRole", "Arn"]}}
    assert [s["Principal"] for s in uses] == [memory_role, memory_role]
    assert all(s["Action"] == ["kms:Decrypt"] for s in uses)
    assert uses[0]["Condition"]["StringEquals"]["kms:EncryptionContext:s3memory:tenant"] == tag
    assert uses[1]["Condition"]["StringEquals"]["kms:EncryptionContext:s3memory:tenant"] == ["standards"]
    makes = [
        s for s in key["KeyPolicy"]["Statement"] if "kms:Encrypt" in as_list(s["Action"]) and s["Effect"] == "Allow"
    ]
    assert [s["Principal"] for s in makes] == [{"AWS": {"Fn::GetAtt": ["MemoryRole", "Arn"]}}]
    assert makes[0]["Condition"]["StringEquals"]["kms:EncryptionContext:s3memory:tenant"] == tag


def test_template_function_is_wired_to_bucket_key_and_memory_role(template: dict[str, Any]) -> None:
    function = named(template, "AWS::Serverless::Function")["AgentFunction"]
    variables = function["Environment"]["Variables"]
    assert variables["MEMORY_BUCKET"] == {"Ref": "MemoryBucket"}
    assert variables["MEMORY_KMS_KEY_ID"] == {"Fn::GetAtt": ["MemoryKey", "Arn"]}
    assert variables["MEMORY_ROLE_ARN"] == {"Fn::GetAtt": ["MemoryRole", "Arn"]}
    assert variables["ANTHROPIC_MODEL"] == {"Ref": "AnthropicModel"}
    assert function["Handler"] == "handler.handler" and function["Role"] == {"Fn::GetAtt": ["AgentRole", "Arn"]}
    # the function starts only once both roles have their permissions
    assert set(template["Resources"]["AgentFunction"]["DependsOn"]) == {"AgentAssumesMemoryRole", "MemoryRolePolicy"}


def references(value: Any) -> set[str]:
    """The resources and parameters a template fragment refers to."""
    if isinstance(value, list):
        return {name for item in value for name in references(item)}
    if not isinstance(value, dict):
        return set()
    if set(value) == {"Ref"}:
        return {value["Ref"]}
    if set(value) == {"Fn::GetAtt"}:
        return {value["Fn::GetAtt"][0]}
    if set(value) == {"Fn::Sub"}:
        return {m.split(".")[0] for m in re.findall(r"\$\{([^!}][^}]*)\}", value["Fn::Sub"])} - {
            name for name in re.findall(r"\$\{(AWS::[^}]*)\}", value["Fn::Sub"])
        }
    return {name for item in value.values() for name in references(item)}


def test_template_has_no_dependency_cycle(template: dict[str, Any]) -> None:
    resources_ = template["Resources"]
    known = set(resources_) | set(template["Parameters"])
    graph = {
        name: (references(r.get("Properties", {})) | set(as_list(r.get("DependsOn", [])))) & set(resources_)
        for name, r in resources_.items()
    }
    for name, r in resources_.items():
        pseudo = {ref for ref in references(r.get("Properties", {})) if ref.startswith("AWS::")}  # AWS::NoValue
        assert references(r.get("Properties", {})) - pseudo <= known, name
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"dependency cycle: {' -> '.join((*path, name))}"
        if name not in done:
            for dependency in graph[name]:
                visit(dependency, (*path, name))
            done.add(name)

    for name in graph:
        visit(name, ())


def resolve(value: Any, names: dict[str, str]) -> Any:
    """A template fragment with Ref, Fn::GetAtt and Fn::Sub replaced by ``names``."""
    if isinstance(value, list):
        return [resolve(item, names) for item in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"Ref"}:
        return names[value["Ref"]]
    if set(value) == {"Fn::GetAtt"}:
        return names[".".join(value["Fn::GetAtt"])]
    if set(value) == {"Fn::Sub"}:
        return re.sub(
            r"\$\{(!?)([^}]*)\}",
            lambda m: "${" + m[2] + "}" if m[1] else names[m[2]],
            value["Fn::Sub"],
        )
    return {key: resolve(item, names) for key, item in value.items()}


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    return load(EXAMPLES_DIR / "lambda" / "generate_policies.py")


def test_template_policies_are_the_policy_functions_documents(template: dict[str, Any], generator: ModuleType) -> None:
    """Resolved with the example values, the template's policies are exactly what
    s3memory._admin.policy generates: regenerate with examples/lambda/generate_policies.py."""
    from s3memory._admin.policy import deployment_documents, lifecycle_configuration

    example = generator.EXAMPLE
    names = {
        "AWS::Partition": "aws",
        "AWS::AccountId": "123456789012",
        "MemoryBucket": example["bucket"],
        "MemoryKey.Arn": example["kms_key_arn"],
        "MemoryRole.Arn": example["memory_role_arn"],
        "AgentRole.Arn": example["agent_role_arn"],
    }
    documents = deployment_documents(**example)
    properties = {name: r["Properties"] for name, r in template["Resources"].items()}
    assert resolve(properties["MemoryRolePolicy"]["PolicyDocument"], names) == documents["memory-role-policy"]
    assert resolve(properties["MemoryRole"]["AssumeRolePolicyDocument"], names) == documents["memory-role-trust-policy"]
    assert resolve(properties["AgentAssumesMemoryRole"]["PolicyDocument"], names) == documents["agent-role-policy"]
    assert resolve(properties["MemoryKey"]["KeyPolicy"], names) == documents["kms-key-policy"]
    lifecycle = properties["MemoryBucket"]["LifecycleConfiguration"]
    assert lifecycle == generator.cloudformation_lifecycle(lifecycle_configuration())
    assert generator.render_template(json.loads(json.dumps(template))) == template


def test_policy_files_are_the_policy_functions_documents(generator: ModuleType) -> None:
    from s3memory._admin.policy import deployment_documents

    documents = deployment_documents(**generator.EXAMPLE)
    files = {path.stem: path for path in (EXAMPLES_DIR / "lambda" / "policies").glob("*.json")}
    assert set(files) == set(documents)
    for name, document in documents.items():
        assert json.loads(files[name].read_text()) == document, f"regenerate {files[name]}"


def test_multi_tenant_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(EXAMPLES_DIR / "multi_tenant.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "     1\tbob's shopping list" in out and "alice's secret plan" not in out
    assert "directory traversal" in out
    assert "'alice/memories/notes.md'" in out and "'bob/memories/notes.md'" in out
