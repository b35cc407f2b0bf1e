"""The shape of the documents s3memory._admin.policy generates (the memory role's policy, the
key policy, the trust and agent policies, the bucket's lifecycle and all of them as one
deployment), that moto's S3, IAM and KMS accept them, and the inputs they refuse. What the
documents allow is judged in test_policy_isolation.py, test_policy_trust.py and
test_policy_read_only_mounts.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import pytest
from helpers import BUCKET
from helpers.iam import (
    ACCOUNT,
    AGENT_ROLE,
    BUCKET_ARN,
    KEY_ARN,
    MEMORY_ROLE,
    ROOT,
    TAG_KEY,
    as_list,
    sids,
)

from s3memory import ConfigurationError
from s3memory._admin.policy import (
    DEFAULT_TAG,
    PRINCIPAL_TAG_TENANT,
    agent_role_policy,
    assume_role_request,
    deployment_documents,
    iam_policy,
    kms_key_policy,
    lifecycle_configuration,
    principal_tag,
    session_tags,
    trust_policy,
)

# --- structure ------------------------------------------------------------------------


def test_the_role_policy_statements() -> None:
    role_policy = iam_policy(bucket=BUCKET, kms_key_arn=KEY_ARN)
    assert role_policy["Version"] == "2012-10-17"
    assert sids(role_policy) == [
        "TenantObjects",
        "ListTenantPrefix",
        "TenantWrappedKeys",
        "TenantWrappedKeysRead",
        "BucketVersioning",
        "DenyInsecureTransport",
        "DenyUntaggedSessions",
    ]
    objects, listing, kms, kms_read, versioning, tls, untagged = role_policy["Statement"]
    assert objects == {
        "Sid": "TenantObjects",
        "Effect": "Allow",
        "Action": ["s3:GetObject", "s3:GetObjectVersion", "s3:PutObject", "s3:PutObjectTagging", "s3:DeleteObject"],
        "Resource": [
            f"{BUCKET_ARN}/{PRINCIPAL_TAG_TENANT}/memories/*",
            f"{BUCKET_ARN}/{PRINCIPAL_TAG_TENANT}/.s3memory/*",
        ],
    }
    assert versioning == {
        "Sid": "BucketVersioning",
        "Effect": "Allow",
        "Action": "s3:GetBucketVersioning",
        "Resource": BUCKET_ARN,
    }
    erase = iam_policy(bucket=BUCKET, kms_key_arn=KEY_ARN, allow_erase=True)["Statement"]
    assert [s for s in erase if s["Sid"] != "EraseTenantVersions"] == role_policy["Statement"]
    (erasing,) = [s for s in erase if s["Sid"] == "EraseTenantVersions"]
    assert erasing == {
        "Sid": "EraseTenantVersions",
        "Effect": "Allow",
        "Action": "s3:DeleteObjectVersion",
        "Resource": objects["Resource"],
    }
    assert listing["Action"] == ["s3:ListBucket", "s3:ListBucketVersions"] and listing["Resource"] == BUCKET_ARN
    assert listing["Condition"] == {
        "StringLike": {"s3:prefix": [f"{PRINCIPAL_TAG_TENANT}/memories/*", f"{PRINCIPAL_TAG_TENANT}/.s3memory/*"]}
    }
    context_keys = {
        "ForAllValues:StringEquals": {
            "kms:EncryptionContextKeys": ["s3memory:tenant", "s3memory:prefix", "s3memory:purpose", "s3memory:kid"]
        }
    }
    tenant_and_purpose = {
        "kms:EncryptionContext:s3memory:tenant": PRINCIPAL_TAG_TENANT,
        "kms:EncryptionContext:s3memory:purpose": ["tenant-key", "names-key", "history-key"],
    }
    # Wrapping a key needs this deployment in the context; unwrapping needs it when present.
    assert kms["Resource"] == KEY_ARN and kms["Action"] == ["kms:Encrypt"]
    assert kms["Condition"] == {
        "StringEquals": {**tenant_and_purpose, "kms:EncryptionContext:s3memory:prefix": "/"},
        **context_keys,
    }
    assert kms_read["Resource"] == KEY_ARN and kms_read["Action"] == ["kms:Decrypt"]
    assert kms_read["Condition"] == {
        "StringEquals": tenant_and_purpose,
        "StringEqualsIfExists": {"kms:EncryptionContext:s3memory:prefix": "/"},
        **context_keys,
    }
    assert tls["Effect"] == "Deny" and tls["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert tls["Resource"] == [BUCKET_ARN, f"{BUCKET_ARN}/*"]
    assert untagged["Effect"] == "Deny" and untagged["Condition"] == {"Null": {TAG_KEY: "true"}}
    for statement in role_policy["Statement"]:
        if statement["Effect"] == "Allow":
            assert "*" not in as_list(statement["Resource"])
            assert not any(a.endswith("*") for a in as_list(statement["Action"]))


def test_the_kms_mode_role_policy_asks_for_data_keys() -> None:
    policy = iam_policy(bucket=BUCKET, kms_key_arn=KEY_ARN, key_mode="kms")
    assert sids(policy)[2:6] == ["TenantDataKeys", "TenantDataKeysRead", "TenantWrappedKeys", "TenantWrappedKeysRead"]
    data, data_read = policy["Statement"][2:4]
    assert data["Action"] == ["kms:GenerateDataKey", "kms:Encrypt"] and data["Resource"] == KEY_ARN
    assert data_read["Action"] == ["kms:Decrypt"] and data_read["Resource"] == KEY_ARN
    tenant_and_suite = {
        "kms:EncryptionContext:s3memory:tenant": PRINCIPAL_TAG_TENANT,
        "kms:EncryptionContext:aws:x-amz-cek-alg": "115",
    }
    assert data["Condition"]["StringEquals"] == {**tenant_and_suite, "kms:EncryptionContext:s3memory:prefix": "/"}
    assert "StringEqualsIfExists" not in data["Condition"]
    assert data_read["Condition"]["StringEquals"] == tenant_and_suite
    assert data_read["Condition"]["StringEqualsIfExists"] == {"kms:EncryptionContext:s3memory:prefix": "/"}
    assert data_read["Condition"]["ForAllValues:StringEquals"] == data["Condition"]["ForAllValues:StringEquals"]
    assert data["Condition"]["ForAllValues:StringEquals"] == {
        "kms:EncryptionContextKeys": ["s3memory:tenant", "s3memory:prefix", "s3memory:path", "aws:x-amz-cek-alg"]
    }
    nested = iam_policy(bucket=BUCKET, prefix="a/b/", kms_key_arn=KEY_ARN, key_mode="kms")
    making, reading, wrapping, unwrapping = nested["Statement"][2:6]
    for statement in (making, wrapping):
        assert statement["Condition"]["StringEquals"]["kms:EncryptionContext:s3memory:prefix"] == "a/b/"
    for statement in (reading, unwrapping):
        assert statement["Condition"]["StringEqualsIfExists"] == {"kms:EncryptionContext:s3memory:prefix": "a/b/"}
    assert policy["Statement"][4:6] == iam_policy(bucket=BUCKET, kms_key_arn=KEY_ARN)["Statement"][2:4]


def test_without_a_key_the_role_policy_has_no_kms_grant() -> None:
    policy = iam_policy(bucket=BUCKET)
    assert not {"TenantWrappedKeys", "TenantDataKeys"} & set(sids(policy))
    assert not any(
        a.startswith("kms:") for s in policy["Statement"] if s["Effect"] == "Allow" for a in as_list(s["Action"])
    )


def test_other_tags_and_partitions() -> None:
    policy = iam_policy(bucket=BUCKET, tenant=principal_tag("team/user"), partition="aws-cn")
    assert policy["Statement"][0]["Resource"] == [
        f"arn:aws-cn:s3:::{BUCKET}/${{aws:PrincipalTag/team/user}}/memories/*",
        f"arn:aws-cn:s3:::{BUCKET}/${{aws:PrincipalTag/team/user}}/.s3memory/*",
    ]
    assert policy["Statement"][-1]["Condition"] == {"Null": {"aws:PrincipalTag/team/user": "true"}}


def test_the_key_policy_statements() -> None:
    policy = kms_key_policy(account_id=ACCOUNT, user_role_arn=MEMORY_ROLE)
    assert sids(policy) == ["KeyAdministration", "TenantWrappedKeys", "TenantWrappedKeysRead"]
    admin, use, use_read = policy["Statement"]
    assert admin["Principal"] == {"AWS": ROOT} and "Condition" not in admin
    assert not any(a in admin["Action"] for a in ("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:*"))
    assert use["Principal"] == {"AWS": MEMORY_ROLE} and use["Action"] == ["kms:Encrypt"]
    assert use_read["Principal"] == {"AWS": MEMORY_ROLE} and use_read["Action"] == ["kms:Decrypt"]
    for statement in (use, use_read):
        assert statement["Condition"]["StringEquals"]["kms:EncryptionContext:s3memory:tenant"] == PRINCIPAL_TAG_TENANT
        (role_statement,) = [
            s for s in iam_policy(bucket=BUCKET, kms_key_arn=KEY_ARN)["Statement"] if s["Sid"] == statement["Sid"]
        ]
        assert statement == {**role_statement, "Principal": {"AWS": MEMORY_ROLE}, "Resource": "*"}  # same condition
    both = kms_key_policy(account_id=ACCOUNT, user_role_arn=MEMORY_ROLE, key_mode="kms")
    assert sids(both) == [
        "KeyAdministration",
        "TenantDataKeys",
        "TenantDataKeysRead",
        "TenantWrappedKeys",
        "TenantWrappedKeysRead",
    ]
    nested = kms_key_policy(account_id=ACCOUNT, user_role_arn=MEMORY_ROLE, key_mode="kms", prefix="app/")
    role_kms = iam_policy(bucket=BUCKET, prefix="app/", kms_key_arn=KEY_ARN, key_mode="kms")["Statement"][2:6]
    assert nested["Statement"][1:] == [{**s, "Principal": {"AWS": MEMORY_ROLE}, "Resource": "*"} for s in role_kms]


def test_the_trust_and_agent_policies() -> None:
    trust = trust_policy(agent_role_arn=AGENT_ROLE)
    assert [s["Action"] for s in trust["Statement"]] == [
        "sts:AssumeRole",
        "sts:TagSession",
        ["sts:AssumeRole", "sts:TagSession"],
        ["sts:AssumeRole", "sts:TagSession"],
    ]
    assert [s["Effect"] for s in trust["Statement"]] == ["Allow", "Allow", "Deny", "Deny"]
    assert all(s["Principal"] == {"AWS": AGENT_ROLE} for s in trust["Statement"])
    request_tag = f"aws:RequestTag/{DEFAULT_TAG}"
    assert trust["Statement"][0]["Condition"] == {"StringLike": {request_tag: "?*"}}
    assert trust["Statement"][1]["Condition"] == {
        "StringLike": {request_tag: "?*"},
        "ForAllValues:StringEquals": {"aws:TagKeys": [DEFAULT_TAG]},
    }
    assert trust["Statement"][2]["Condition"] == {
        "StringLike": {request_tag: ["*:*", "*/*", "* *", ".*", "_*", "@*", "+*", "=*", "-*", "?" * 129 + "*"]}
    }
    assert trust["Statement"][3]["Condition"] == {"StringEqualsIgnoreCase": {request_tag: "memories"}}
    assert agent_role_policy(memory_role_arn=MEMORY_ROLE)["Statement"] == [
        {
            "Sid": "AssumeMemoryRoleAsTheUser",
            "Effect": "Allow",
            "Action": ["sts:AssumeRole", "sts:TagSession"],
            "Resource": MEMORY_ROLE,
        }
    ]


def test_session_tags_and_the_assume_role_request() -> None:
    assert session_tags("user-42") == [{"Key": "s3memory-user", "Value": "user-42"}]
    assert assume_role_request(role_arn=MEMORY_ROLE, user_id="user-42") == {
        "RoleArn": MEMORY_ROLE,
        "RoleSessionName": "s3memory-user-42",
        "DurationSeconds": 900,
        "Tags": [{"Key": "s3memory-user", "Value": "user-42"}],
    }
    long_user = "u" * 128
    request = assume_role_request(role_arn=MEMORY_ROLE, user_id=long_user)
    assert re.fullmatch(r"[\w+=,.@-]{2,64}", request["RoleSessionName"])
    assert request["Tags"][0]["Value"] == long_user  # the tag carries the whole id
    for bad in ("", "../bob", "a/b", "*", "a b", "memories"):
        with pytest.raises(ConfigurationError):
            session_tags(bad)
    with pytest.raises(ConfigurationError):
        assume_role_request(role_arn=MEMORY_ROLE, user_id="alice", duration_seconds=60)
    with pytest.raises(ConfigurationError):
        assume_role_request(role_arn="arn:aws:iam::123456789012:user/alice", user_id="alice")


def test_the_lifecycle_rules() -> None:
    config = lifecycle_configuration()
    old, markers = config["Rules"]
    assert old["Filter"] == {"Prefix": ""} and old["Status"] == "Enabled"
    assert old["NoncurrentVersionExpiration"] == {"NoncurrentDays": 30}
    assert old["Expiration"] == {"ExpiredObjectDeleteMarker": True}
    assert old["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"] >= 1
    assert markers["Filter"] == {"Tag": {"Key": "s3memory", "Value": "access"}}
    assert markers["Expiration"] == {"Days": 400}
    scoped = lifecycle_configuration(prefix="app/", noncurrent_days=7, access_marker_days=90)
    old, markers = scoped["Rules"]
    assert old["Filter"] == {"Prefix": "app/"} and old["NoncurrentVersionExpiration"] == {"NoncurrentDays": 7}
    assert markers["Filter"] == {"And": {"Prefix": "app/", "Tags": [{"Key": "s3memory", "Value": "access"}]}}
    assert markers["Expiration"] == {"Days": 90}


@pytest.mark.parametrize("prefix", ["", "app/"])
def test_s3_accepts_the_lifecycle_configuration(s3_client: Any, prefix: str) -> None:
    """botocore validates the shape; moto stores it."""
    s3_client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    config = lifecycle_configuration(prefix=prefix)
    s3_client.put_bucket_lifecycle_configuration(Bucket=BUCKET, LifecycleConfiguration=config)
    stored = s3_client.get_bucket_lifecycle_configuration(Bucket=BUCKET)["Rules"]
    assert [rule["ID"] for rule in stored] == ["s3memory-old-versions", "s3memory-access-markers"]


@pytest.mark.parametrize("mounts", [(), ("T", "standards")])
@pytest.mark.parametrize("mode", ["tenant", "kms"])
def test_iam_and_kms_accept_the_documents(aws: None, mounts: tuple[str, ...], mode: str) -> None:
    """moto's IAM checks policy grammar (Version, Effect, Action and Condition shapes)."""
    import boto3

    iam = boto3.client("iam", region_name="us-east-1")
    lambda_trust = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
    agent = iam.create_role(RoleName="s3memory-agent", AssumeRolePolicyDocument=json.dumps(lambda_trust))
    documents = deployment_documents(
        bucket=BUCKET,
        memory_role_arn=MEMORY_ROLE,
        agent_role_arn=agent["Role"]["Arn"],
        kms_key_arn=KEY_ARN,
        key_mode=mode,
        read_only_mounts=mounts,
    )
    iam.create_role(
        RoleName="s3memory-memory", AssumeRolePolicyDocument=json.dumps(documents["memory-role-trust-policy"])
    )
    for name in ("memory-role-policy", "agent-role-policy"):
        iam.create_policy(PolicyName=name, PolicyDocument=json.dumps(documents[name]))
    kms = boto3.client("kms", region_name="us-east-1")
    kms.create_key(Policy=json.dumps(documents["kms-key-policy"]))


def test_deployment_documents() -> None:
    documents = deployment_documents(
        bucket=BUCKET, memory_role_arn=MEMORY_ROLE, agent_role_arn=AGENT_ROLE, kms_key_arn=KEY_ARN
    )
    assert list(documents) == [
        "memory-role-policy",
        "memory-role-trust-policy",
        "agent-role-policy",
        "kms-key-policy",
        "bucket-lifecycle",
    ]
    assert documents["memory-role-policy"] == iam_policy(bucket=BUCKET, kms_key_arn=KEY_ARN)
    assert documents["kms-key-policy"] == kms_key_policy(account_id=ACCOUNT, user_role_arn=MEMORY_ROLE)
    nested = deployment_documents(
        bucket=BUCKET, memory_role_arn=MEMORY_ROLE, agent_role_arn=AGENT_ROLE, kms_key_arn=KEY_ARN, prefix="app/"
    )
    assert nested["kms-key-policy"] == kms_key_policy(account_id=ACCOUNT, user_role_arn=MEMORY_ROLE, prefix="app/")
    assert nested["memory-role-policy"] == iam_policy(bucket=BUCKET, prefix="app/", kms_key_arn=KEY_ARN)
    assert documents["memory-role-trust-policy"] == trust_policy(agent_role_arn=AGENT_ROLE)
    assert documents["bucket-lifecycle"] == lifecycle_configuration()
    json.dumps(documents)  # JSON-ready
    local = deployment_documents(bucket=BUCKET, memory_role_arn=MEMORY_ROLE, agent_role_arn=AGENT_ROLE, use_kms=False)
    assert "kms-key-policy" not in local and "TenantWrappedKeys" not in sids(local["memory-role-policy"])
    erase = deployment_documents(
        bucket=BUCKET,
        memory_role_arn=MEMORY_ROLE,
        agent_role_arn=AGENT_ROLE,
        allow_erase=True,
        tag="tenant",
        prefix="p/",
    )
    assert "EraseTenantVersions" in sids(erase["memory-role-policy"])
    assert erase["memory-role-policy"]["Statement"][0]["Resource"] == [
        f"{BUCKET_ARN}/p/${{aws:PrincipalTag/tenant}}/memories/*",
        f"{BUCKET_ARN}/p/${{aws:PrincipalTag/tenant}}/.s3memory/*",
    ]
    assert erase["memory-role-trust-policy"]["Statement"][1]["Condition"]["ForAllValues:StringEquals"] == {
        "aws:TagKeys": ["tenant"]
    }


# --- refusals -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tenant",
    [
        "",
        "../bob",
        "a/b",
        "*",
        "alice*",
        "ali?e",
        ".",
        "-alice",
        "memories",
        "MeMoRiEs",
        "a" * 129,
        "${aws:username}",
        "${aws:PrincipalTag/}",
        "${aws:PrincipalTag/aws:user}",
        "${aws:PrincipalTag/a b}",
        "${aws:PrincipalTag/a}b",
        "${aws:PrincipalTag/a}/${aws:PrincipalTag/b}",
        "${aws:PrincipalTag/*}",
        "$alice",
        5,
        None,
    ],
)
def test_bad_tenants_are_refused(tenant: Any) -> None:
    with pytest.raises(ConfigurationError):
        iam_policy(bucket=BUCKET, tenant=tenant)
    with pytest.raises(ConfigurationError):
        kms_key_policy(account_id=ACCOUNT, user_role_arn=MEMORY_ROLE, tenant=tenant)


@pytest.mark.parametrize(
    "prefix", ["app", "/app/", "app//", "../", "./", "*/", "app/*/", "a b/", "app/memories/", "a/b/MEMORIES/", None]
)
def test_bad_prefixes_are_refused(prefix: Any) -> None:
    with pytest.raises(ConfigurationError):
        iam_policy(bucket=BUCKET, prefix=prefix)
    with pytest.raises(ConfigurationError):
        kms_key_policy(account_id=ACCOUNT, user_role_arn=MEMORY_ROLE, prefix=prefix)
    with pytest.raises(ConfigurationError):
        lifecycle_configuration(prefix=prefix)


@pytest.mark.parametrize("tag", ["", "aws:user", "AWS:user", "a b", "a}", "a*", "ü", "x" * 129, 3])
def test_bad_tag_names_are_refused(tag: Any) -> None:
    with pytest.raises(ConfigurationError):
        principal_tag(tag)
    with pytest.raises(ConfigurationError):
        session_tags("alice", tag=tag)
    with pytest.raises(ConfigurationError):
        trust_policy(agent_role_arn=AGENT_ROLE, tag=tag)
    with pytest.raises(ConfigurationError):
        deployment_documents(bucket=BUCKET, memory_role_arn=MEMORY_ROLE, agent_role_arn=AGENT_ROLE, tag=tag)


@pytest.mark.parametrize(
    "bucket",
    [
        "",
        "ab",
        "a" * 64,
        "My-Bucket",
        "bucket_name",
        "-bucket",
        "bucket-",
        "a..b",
        "a.-b",
        "192.168.1.1",
        "xn--bucket",
        "bucket-s3alias",
        "bucket--ol-s3",
        "bucket/*",
        "*",
        "bucket?",
        None,
    ],
)
def test_bad_bucket_names_are_refused(bucket: Any) -> None:
    with pytest.raises(ConfigurationError):
        iam_policy(bucket=bucket)


def test_good_bucket_names_are_accepted() -> None:
    for bucket in ("abc", "my.memory-bucket-1", "a" * 63, "0bucket9"):
        assert iam_policy(bucket=bucket)["Statement"][1]["Resource"] == f"arn:aws:s3:::{bucket}"


@pytest.mark.parametrize(
    "options",
    [
        {"kms_key_arn": "alias/agent-memory"},
        {"kms_key_arn": f"arn:aws:kms:us-east-1:{ACCOUNT}:alias/agent-memory"},
        {"kms_key_arn": "*"},
        {"kms_key_arn": KEY_ARN, "partition": "aws-cn"},
        {"key_mode": "both"},
        {"partition": "gcp"},
    ],
)
def test_bad_iam_options_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        iam_policy(bucket=BUCKET, **options)


@pytest.mark.parametrize(
    "options",
    [
        {"account_id": "12345"},
        {"user_role_arn": "arn:aws:iam::123456789012:role/*"},
        {"user_role_arn": "*"},
        {"admin_principal_arn": "arn:aws:iam::999999999999:root"},
        {"admin_principal_arn": MEMORY_ROLE},
        {"key_mode": "none"},
    ],
)
def test_bad_key_policy_options_are_refused(options: dict[str, Any]) -> None:
    arguments: dict[str, Any] = {"account_id": ACCOUNT, "user_role_arn": MEMORY_ROLE, **options}
    with pytest.raises(ConfigurationError):
        kms_key_policy(**arguments)


@pytest.mark.parametrize(
    "options",
    [
        {"agent_role_arn": MEMORY_ROLE},
        {"agent_role_arn": "arn:aws-cn:iam::123456789012:role/agent"},
        {"memory_role_arn": "arn:aws:iam::123456789012:user/alice"},
        {"kms_key_arn": KEY_ARN, "use_kms": False},
        {"noncurrent_days": 0},
        {"access_marker_days": -1},
        {"access_marker_days": True},
        {"noncurrent_days": 1.5},
    ],
)
def test_bad_deployment_options_are_refused(options: dict[str, Any]) -> None:
    arguments: dict[str, Any] = {
        "bucket": BUCKET,
        "memory_role_arn": MEMORY_ROLE,
        "agent_role_arn": AGENT_ROLE,
        **options,
    }
    with pytest.raises(ConfigurationError):
        deployment_documents(**arguments)


@pytest.mark.slow  # a subprocess
def test_the_module_imports_nothing_heavy() -> None:
    code = "import sys, s3memory._admin.policy; assert not {'boto3', 'botocore', 'anthropic'} & set(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)
