"""Regenerate the example's policy documents from s3memory's policy functions.

    python examples/lambda/generate_policies.py

writes ``policies/*.json`` (the documents for the example values in ``EXAMPLE``: put your
own bucket and ARNs, or run ``s3memory policy``, for a deployment without SAM) and the
policy parts of ``template.json`` (the same documents, with the example values replaced by
CloudFormation references to the template's own bucket, roles and key).
``tests/package/test_examples.py`` checks that both match the functions, so they never drift.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from s3memory._admin.policy import deployment_documents

HERE = Path(__file__).parent
EXAMPLE: dict[str, Any] = {
    "bucket": "example-memory-bucket",
    "memory_role_arn": "arn:aws:iam::123456789012:role/s3memory-memory",
    "agent_role_arn": "arn:aws:iam::123456789012:role/s3memory-agent",
    "kms_key_arn": "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
    # One store mounted read-only by every user (Mount("standards", "standards")): every
    # session may read it, none may write it or be tagged as it. Its content is written by
    # another role, outside this template: iam_policy(tenant="standards"), plus its
    # kms_key_policy statements in the key policy. A template over several such stores would
    # need Fn::ForEach; regenerate with your list instead.
    "read_only_mounts": ["standards"],
}
# What each example value is in template.json.
RESOURCES = {
    EXAMPLE["kms_key_arn"]: {"Fn::GetAtt": ["MemoryKey", "Arn"]},
    EXAMPLE["memory_role_arn"]: {"Fn::GetAtt": ["MemoryRole", "Arn"]},
    EXAMPLE["agent_role_arn"]: {"Fn::GetAtt": ["AgentRole", "Arn"]},
}
SUBSTITUTIONS = {
    "arn:aws:": "arn:${AWS::Partition}:",
    EXAMPLE["bucket"]: "${MemoryBucket}",
    "123456789012": "${AWS::AccountId}",
}


def documents() -> dict[str, dict[str, Any]]:
    return deployment_documents(**EXAMPLE)


def to_cloudformation(value: Any) -> Any:
    """The example values in ``value`` as references to the template's resources."""
    if isinstance(value, dict):
        return {key: to_cloudformation(item) for key, item in value.items()}
    if isinstance(value, list):
        return [to_cloudformation(item) for item in value]
    if not isinstance(value, str):
        return value
    if value in RESOURCES:
        return RESOURCES[value]
    if not any(example in value for example in SUBSTITUTIONS):
        return value  # policy variables such as ${aws:PrincipalTag/...} stay literal outside Fn::Sub
    text = value.replace("${", "${!")  # inside Fn::Sub, a literal ${x} is written ${!x}
    for example, reference in SUBSTITUTIONS.items():
        text = text.replace(example, reference)
    return {"Fn::Sub": text}


# The template's parameter for how long noncurrent versions are kept (history, and what a
# key rotation keeps old keys for): the lifecycle rule refers to it, its default is the
# policy functions' default.
NONCURRENT_DAYS_PARAMETER = "NoncurrentVersionDays"


def cloudformation_lifecycle(configuration: dict[str, Any]) -> dict[str, Any]:
    """An S3 API ``LifecycleConfiguration`` in the shape of ``AWS::S3::Bucket``'s property,
    its noncurrent versions' retention the template's parameter."""
    rules = []
    for rule in configuration["Rules"]:
        out: dict[str, Any] = {"Id": rule["ID"], "Status": rule["Status"]}
        selection = rule["Filter"].get("And", rule["Filter"])
        if selection.get("Prefix"):
            out["Prefix"] = selection["Prefix"]
        tags = selection.get("Tags", [selection["Tag"]] if "Tag" in selection else [])
        if tags:
            out["TagFilters"] = tags
        expiration = rule.get("Expiration", {})
        if "Days" in expiration:
            out["ExpirationInDays"] = expiration["Days"]
        if expiration.get("ExpiredObjectDeleteMarker"):
            out["ExpiredObjectDeleteMarker"] = True
        if "NoncurrentVersionExpiration" in rule:
            out["NoncurrentVersionExpiration"] = {"NoncurrentDays": {"Ref": NONCURRENT_DAYS_PARAMETER}}
        if "AbortIncompleteMultipartUpload" in rule:
            out["AbortIncompleteMultipartUpload"] = rule["AbortIncompleteMultipartUpload"]
        rules.append(out)
    return {"Rules": rules}


def noncurrent_days(configuration: dict[str, Any]) -> int:
    """The retention of noncurrent versions in a ``LifecycleConfiguration``."""
    (days,) = {
        r["NoncurrentVersionExpiration"]["NoncurrentDays"]
        for r in configuration["Rules"]
        if "NoncurrentVersionExpiration" in r
    }
    return int(days)


def render_template(template: dict[str, Any]) -> dict[str, Any]:
    """``template`` with its policy documents, lifecycle rules and retention parameter regenerated."""
    docs = documents()
    template["Parameters"][NONCURRENT_DAYS_PARAMETER] = {
        "Type": "Number",
        "Default": noncurrent_days(docs["bucket-lifecycle"]),
        "MinValue": 1,
        "Description": (
            "Days the bucket keeps a memory's old versions after they are replaced or deleted (history, "
            "restore; the managed memory stores keep 30). Pass the same number to rotate_tenant_key "
            "(noncurrent_days) so it knows when old tenant keys may go"
        ),
    }
    resources = template["Resources"]
    resources["MemoryKey"]["Properties"]["KeyPolicy"] = to_cloudformation(docs["kms-key-policy"])
    resources["MemoryBucket"]["Properties"]["LifecycleConfiguration"] = cloudformation_lifecycle(
        docs["bucket-lifecycle"]
    )
    resources["MemoryRole"]["Properties"]["AssumeRolePolicyDocument"] = to_cloudformation(
        docs["memory-role-trust-policy"]
    )
    resources["MemoryRolePolicy"]["Properties"]["PolicyDocument"] = to_cloudformation(docs["memory-role-policy"])
    resources["AgentAssumesMemoryRole"]["Properties"]["PolicyDocument"] = to_cloudformation(docs["agent-role-policy"])
    return template


def dump(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2) + "\n"


def main() -> None:
    policies = HERE / "policies"
    policies.mkdir(exist_ok=True)
    for name, document in documents().items():
        (policies / f"{name}.json").write_text(dump(document))
    template_file = HERE / "template.json"
    template_file.write_text(dump(render_template(json.loads(template_file.read_text()))))
    print(f"wrote {policies}/*.json and {template_file}")


if __name__ == "__main__":
    main()
