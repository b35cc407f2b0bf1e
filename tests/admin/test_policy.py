"""The IAM, KMS and lifecycle documents of s3memory._admin.policy: their shape, their refusals, and
what they allow, judged by a small policy evaluator against requests s3memory really makes."""

from __future__ import annotations

import inspect
import json
import re
import string
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest
from helpers import BUCKET, REGION
from hypothesis import example, given, settings
from hypothesis import strategies as st

from s3memory import ConfigurationError, KeyCache, Mount, S3MemoryError, open_memory
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
from s3memory._crypto.envelope import CONTEXT_PATH, CONTEXT_PREFIX, CONTEXT_TENANT, KMS_RESERVED_CONTEXT_KEY
from s3memory._crypto.keydocs import CONTEXT_KEY_ID, CONTEXT_PURPOSE
from s3memory._paths import RESERVED_SEGMENT, validate_tenant
from s3memory.stores import S3Store

ACCOUNT = "123456789012"
MEMORY_ROLE = f"arn:aws:iam::{ACCOUNT}:role/s3memory-memory"
AGENT_ROLE = f"arn:aws:iam::{ACCOUNT}:role/s3memory-agent"
OTHER_ROLE = f"arn:aws:iam::{ACCOUNT}:role/someone-else"
ROOT = f"arn:aws:iam::{ACCOUNT}:root"
KEY_ARN = f"arn:aws:kms:us-east-1:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
BUCKET_ARN = f"arn:aws:s3:::{BUCKET}"
TAG_KEY = f"aws:PrincipalTag/{DEFAULT_TAG}"


# --- a tiny IAM policy evaluator --------------------------------------------------------
#
# Enough of https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html
# for these documents: an explicit Deny wins, else any Allow allows, else denied. Action
# and Resource wildcards (* and ?; actions case-insensitive), ${...} policy variables from
# the request context (an element whose variable is missing matches nothing), Principal
# {"AWS": ...} for resource and trust policies, and the condition operators the documents
# use: StringEquals, StringEqualsIgnoreCase, StringLike, Bool, Null, with ForAllValues: /
# ForAnyValue: and the IfExists suffix (true when the key is absent). Condition keys are
# case-insensitive, as in IAM (kms:EncryptionContext:S3MEMORY:PATH is
# kms:EncryptionContext:s3memory:path); values are not. An operator it does not know fails
# the test, so it never silently allows.


@dataclass
class Request:
    action: str
    resource: str = "*"
    context: dict[str, Any] = field(default_factory=dict)
    principal: str | None = None


_VARIABLE = re.compile(r"\$\{([^}]*)\}")


_ABSENT = object()


def lookup(context: dict[str, Any], key: str) -> Any:
    """The value of a condition key in the request context (keys are case-insensitive)."""
    found = [value for name, value in context.items() if name.lower() == key.lower()]
    assert len(found) <= 1, f"the request context spells {key} twice"
    return found[0] if found else _ABSENT


def substitute(text: str, context: dict[str, Any]) -> str | None:
    missing = False

    def value(match: re.Match[str]) -> str:
        nonlocal missing
        found = lookup(context, match.group(1))
        if not isinstance(found, str):
            missing = True
            return ""
        return found

    result = _VARIABLE.sub(value, text)
    return None if missing else result


def wildcard(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.DOTALL | (re.IGNORECASE if ignore_case else 0)) is not None


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def compare(operator: str, expected: str, actual: str) -> bool:
    if operator == "StringEquals":
        return expected == actual
    if operator == "StringEqualsIgnoreCase":
        return expected.lower() == actual.lower()
    if operator == "StringLike":
        return wildcard(expected, actual)
    if operator == "Bool":
        return expected.lower() == actual.lower()
    raise AssertionError(f"the evaluator does not know the operator {operator}")


def condition_holds(operator: str, key: str, expected: Any, context: dict[str, Any]) -> bool:
    qualifier, _, operator = operator.rpartition(":")
    if_exists = operator.endswith("IfExists")
    operator = operator.removesuffix("IfExists")
    found = lookup(context, key)
    if operator == "Null":
        assert not if_exists
        return (found is _ABSENT) == (str(expected).lower() == "true")
    if found is _ABSENT:
        # ...IfExists: true without the key; ForAllValues: vacuously true; else false.
        return if_exists or qualifier == "ForAllValues"
    wanted = [substitute(value, context) for value in as_list(expected)]

    def matches(actual: str) -> bool:
        return any(value is not None and compare(operator, value, actual) for value in wanted)

    actual = as_list(found)
    if qualifier == "ForAllValues":
        return all(matches(a) for a in actual)
    if qualifier == "ForAnyValue":
        return any(matches(a) for a in actual)
    assert qualifier == "" and len(actual) == 1, (qualifier, key)
    return matches(actual[0])


def applies(statement: dict[str, Any], request: Request) -> bool:
    if "Principal" in statement:
        principals = as_list(statement["Principal"]["AWS"])
        if "*" not in principals and request.principal not in principals:
            return False
    if not any(wildcard(a, request.action, ignore_case=True) for a in as_list(statement["Action"])):
        return False
    if "Resource" in statement:
        patterns = [substitute(r, request.context) for r in as_list(statement["Resource"])]
        if not any(p is not None and wildcard(p, request.resource) for p in patterns):
            return False
    return all(
        condition_holds(operator, key, expected, request.context)
        for operator, block in statement.get("Condition", {}).items()
        for key, expected in block.items()
    )


def decide(policy: dict[str, Any], request: Request) -> str:
    """ "Deny" (explicit), "Allow", or "ImplicitDeny"."""
    assert policy["Version"] == "2012-10-17"
    effects = {s["Effect"] for s in policy["Statement"] if applies(s, request)}
    return "Deny" if "Deny" in effects else "Allow" if "Allow" in effects else "ImplicitDeny"


def allowed(policy: dict[str, Any], request: Request) -> bool:
    return decide(policy, request) == "Allow"


def session(user: str | None, **extra: Any) -> dict[str, Any]:
    """The request context of a memory-role session tagged with ``user``, over TLS."""
    context: dict[str, Any] = {"aws:SecureTransport": "true", **extra}
    if user is not None:
        context[TAG_KEY] = user
    return context


def obj(key: str) -> str:
    return f"{BUCKET_ARN}/{key}"


def test_the_evaluator_on_the_conditions_the_documents_use() -> None:
    """The evaluator itself, on what the trust policy and the KMS statements rely on."""
    key = "kms:EncryptionContext:s3memory:prefix"
    assert condition_holds("StringEqualsIfExists", key, "app/", {})  # absent: true
    assert condition_holds("StringEqualsIfExists", key, "app/", {key: "app/"})
    assert not condition_holds("StringEqualsIfExists", key, "app/", {key: "other/"})
    assert not condition_holds("StringEqualsIfExists", key, "app/", {"kms:EncryptionContext:S3MEMORY:Prefix": "x/"})
    assert not condition_holds("StringEquals", key, "app/", {})  # absent: false
    assert not condition_holds("StringEquals", key, "app/", {key: "APP/"})  # values keep their case
    assert condition_holds("StringEquals", key, "app/", {"KMS:encryptioncontext:S3MEMORY:PREFIX": "app/"})
    assert condition_holds("StringLike", "k", "???*", {"k": "abc"})
    assert not condition_holds("StringLike", "k", "???*", {"k": "ab"})
    assert condition_holds("StringLike", "k", "?*", {"k": "a"}) and not condition_holds(
        "StringLike", "k", "?*", {"k": ""}
    )
    assert condition_holds("StringLike", "k", ["x", "*/*"], {"k": "a/b"})  # any of the values
    assert not condition_holds("StringLike", "k", ["x", "*/*"], {"k": "ab"})
    assert condition_holds("StringLike", "k", ".*", {"k": ".a"}) and not condition_holds(
        "StringLike", "k", ".*", {"k": "a."}
    )
    assert condition_holds("StringLike", "k", "memories", {"k": "memories"})
    assert not condition_holds("StringLike", "k", "memories", {"k": "memories2"})
    assert not condition_holds("StringLike", "k", "*/*", {})
    assert condition_holds("Null", "k", "true", {}) and not condition_holds("Null", "k", "true", {"k": "v"})
    assert condition_holds("ForAllValues:StringEquals", "k", ["a"], {})  # vacuously
    assert not condition_holds("ForAllValues:StringEquals", "k", ["a"], {"k": ["a", "b"]})
    assert condition_holds("StringEqualsIgnoreCase", "k", "memories", {"k": "MeMories"})
    assert not condition_holds("StringEqualsIgnoreCase", "k", "memories", {"k": "memories2"})
    assert not condition_holds("StringEqualsIgnoreCase", "k", "memories", {})
    for unknown in ("StringNotLike", "NumericLessThan", "StringNotEqualsIgnoreCase"):
        with pytest.raises(AssertionError):
            condition_holds(unknown, "k", "x", {"k": "x"})
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": "x:Do", "Condition": {"StringLike": {"k": "?*"}}},
            {"Effect": "Deny", "Action": "x:Do", "Condition": {"StringLike": {"k": ["*/*", ".*"]}}},
        ],
    }
    assert [decide(policy, Request("x:Do", context={"k": v})) for v in ("a", "a/b", ".a", "")] == [
        "Allow",
        "Deny",
        "Deny",
        "ImplicitDeny",
    ]
    assert decide(policy, Request("x:Do")) == "ImplicitDeny"


# --- the evaluator on the documents --------------------------------------------------------


@pytest.fixture(scope="module", params=[(), ("T", "standards")], ids=["plain", "read-only-mounts"])
def role_policy(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The role policy, and the same with two stores mounted read-only (issue 15): every test
    of alice's and bob's own permissions runs on both."""
    return iam_policy(bucket=BUCKET, kms_key_arn=KEY_ARN, read_only_tenants=request.param)


OBJECT_ACTIONS = ["s3:GetObject", "s3:GetObjectVersion", "s3:PutObject", "s3:DeleteObject", "s3:PutObjectTagging"]


@pytest.mark.parametrize("action", OBJECT_ACTIONS)
@pytest.mark.parametrize(
    "key",
    ["alice/memories/x", "alice/memories/a/b.md", "alice/.s3memory/tenant-key", "alice/.s3memory/access/0af3"],
)
def test_a_session_tagged_alice_may_touch_alices_objects(role_policy: dict[str, Any], action: str, key: str) -> None:
    assert allowed(role_policy, Request(action, obj(key), session("alice")))


@pytest.mark.parametrize("action", [*OBJECT_ACTIONS, "s3:DeleteObjectVersion"])
@pytest.mark.parametrize(
    "key",
    [
        "bob/memories/x",
        "alice2/memories/x",
        "alice",
        "alicememories/x",
        "memories/x",
        "x/alice/memories/x",
        # under alice/ but outside the two sub-prefixes s3memory writes (issue 11, item 4)
        "alice/x",
        "alice/memoriesx/y",
        "alice/.s3memoryx/y",
        "alice/bob/memories/x",
        "alice/x/.s3memory/tenant-key",
    ],
)
def test_and_nobody_elses(role_policy: dict[str, Any], action: str, key: str) -> None:
    assert decide(role_policy, Request(action, obj(key), session("alice"))) == "ImplicitDeny"
    erase = iam_policy(bucket=BUCKET, kms_key_arn=KEY_ARN, allow_erase=True)
    assert decide(erase, Request(action, obj(key), session("alice"))) == "ImplicitDeny"


@pytest.mark.parametrize(
    "action",
    ["s3:DeleteObjectVersion", "s3:PutObjectAcl", "s3:GetObjectAcl", "s3:RestoreObject", "s3:PutObjectVersionTagging"],
)
def test_other_object_actions_are_denied_even_on_alices_objects(role_policy: dict[str, Any], action: str) -> None:
    assert not allowed(role_policy, Request(action, obj("alice/memories/x"), session("alice")))


@pytest.mark.parametrize(
    "action",
    [
        "s3:DeleteBucket",
        "s3:PutBucketPolicy",
        "s3:GetBucketPolicy",
        "s3:PutLifecycleConfiguration",
        "s3:PutBucketVersioning",  # suspending versioning would stop history for every tenant
        "s3:GetLifecycleConfiguration",
        "s3:ListBucketMultipartUploads",
    ],
)
def test_bucket_actions_other_than_listing_are_denied(role_policy: dict[str, Any], action: str) -> None:
    for prefix in ("alice/", "alice/memories/"):
        assert not allowed(role_policy, Request(action, BUCKET_ARN, session("alice", **{"s3:prefix": prefix})))


def test_any_tagged_session_may_ask_whether_the_bucket_keeps_versions(role_policy: dict[str, Any]) -> None:
    """GetBucketVersioning (S3Store.keeps_versions): the bucket's one setting, no tenant's data."""
    for user in ("alice", "bob"):
        assert allowed(role_policy, Request("s3:GetBucketVersioning", BUCKET_ARN, session(user)))
    assert decide(role_policy, Request("s3:GetBucketVersioning", BUCKET_ARN, session(None))) == "Deny"
    insecure = session("alice", **{"aws:SecureTransport": "false"})
    assert decide(role_policy, Request("s3:GetBucketVersioning", BUCKET_ARN, insecure)) == "Deny"
    other = "arn:aws:s3:::another-bucket"
    assert not allowed(role_policy, Request("s3:GetBucketVersioning", other, session("alice")))


@pytest.mark.parametrize(
    "prefix",
    [
        "alice/memories/",
        "alice/memories/a/b/",
        "alice/memories/notes.md",  # the S3 store lists a key itself to tell 403 from 404
        "alice/.s3memory/",
        "alice/.s3memory/intents/",
    ],
)
def test_alice_may_list_under_her_prefix(role_policy: dict[str, Any], prefix: str) -> None:
    for action in ("s3:ListBucket", "s3:ListBucketVersions"):  # objects, and their versions
        assert allowed(role_policy, Request(action, BUCKET_ARN, session("alice", **{"s3:prefix": prefix})))


@pytest.mark.parametrize(
    "prefix",
    ["bob/", "", "alice", "alice2/", "ali", "/alice/", None, "alice/", "alice/x/", "alice/memories", "alice/.s3"],
)
def test_alice_may_not_list_anything_else(role_policy: dict[str, Any], prefix: str | None) -> None:
    """``alice`` without the slash would list ``alice2``'s keys too; no prefix lists the bucket;
    ``alice/`` itself would list whatever another deployment keeps under ``alice/``."""
    context = session("alice") if prefix is None else session("alice", **{"s3:prefix": prefix})
    for action in ("s3:ListBucket", "s3:ListBucketVersions"):
        assert not allowed(role_policy, Request(action, BUCKET_ARN, context))


def test_no_deployment_reaches_into_another_deployment_under_a_users_name() -> None:
    """Issue 11, item 4: with prefix "", user ``app`` owned ``app/*``, the whole namespace of
    a deployment with prefix "app/". Now a tenant owns only its two sub-prefixes, which
    no other deployment's keys can fall under (the user id ``memories`` and prefix
    segments ``memories`` are refused)."""
    root = iam_policy(bucket=BUCKET, kms_key_arn=KEY_ARN, allow_erase=True)
    nested = iam_policy(bucket=BUCKET, prefix="app/", kms_key_arn=KEY_ARN, allow_erase=True)
    nested_keys = ["app/x/memories/a.md", "app/x/.s3memory/tenant-key", "app/x/.s3memory/access/0af3", "app/bob/m"]
    object_actions = [
        "s3:GetObject",
        "s3:GetObjectVersion",
        "s3:PutObject",
        "s3:PutObjectTagging",
        "s3:DeleteObject",
        "s3:DeleteObjectVersion",
    ]
    for key in nested_keys:
        for action in object_actions:
            assert not allowed(root, Request(action, obj(key), session("app"))), (action, key)
    for listed in ("app/", "app/x/", "app/x/memories/", "app/x/.s3memory/", "app/x", ""):
        for action in ("s3:ListBucket", "s3:ListBucketVersions"):
            assert not allowed(root, Request(action, BUCKET_ARN, session("app", **{"s3:prefix": listed})))
    # and the other way: the nested deployment's users reach nothing of the user app's
    for user in ("x", "app", "bob"):
        for key in ("app/memories/a.md", "app/.s3memory/tenant-key"):
            for action in object_actions:
                assert not allowed(nested, Request(action, obj(key), session(user)))
        for listed in ("app/memories/", "app/.s3memory/", "app/"):
            for action in ("s3:ListBucket", "s3:ListBucketVersions"):
                assert not allowed(nested, Request(action, BUCKET_ARN, session(user, **{"s3:prefix": listed})))
    # each still reaches its own
    assert allowed(root, Request("s3:GetObject", obj("app/memories/a.md"), session("app")))
    assert allowed(nested, Request("s3:GetObject", obj("app/x/memories/a.md"), session("x")))
    # The one tenant of "app/" whose objects would be the user app's files is "memories"
    # (app/memories/memories/...): the identity policy would grant it, so the trust policy
    # and the code refuse that user id.
    assert allowed(nested, Request("s3:GetObject", obj("app/memories/memories/a.md"), session("memories")))
    assert not may_assume(tagged((DEFAULT_TAG, "memories")))
    assert not code_accepts("memories")
    # and a prefix that would put a deployment inside a tenant's memory files is refused
    for prefix in ("app/memories/", "a/Memories/"):
        with pytest.raises(ConfigurationError):
            iam_policy(bucket=BUCKET, prefix=prefix)


def test_a_session_tagged_bob_gets_nothing_of_alices(role_policy: dict[str, Any]) -> None:
    """Nor of her history: her versions are neither listed, read nor deleted."""
    erase = iam_policy(bucket=BUCKET, kms_key_arn=KEY_ARN, allow_erase=True)
    for policy in (role_policy, erase):
        for action in [*OBJECT_ACTIONS, "s3:DeleteObjectVersion"]:
            assert not allowed(policy, Request(action, obj("alice/memories/x"), session("bob")))
            assert not allowed(policy, Request(action, obj("alice/.s3memory/tenant-key"), session("bob")))
        for prefix in ("alice/memories/", "alice/.s3memory/", "alice/memories/x"):
            listing = session("bob", **{"s3:prefix": prefix})
            for action in ("s3:ListBucket", "s3:ListBucketVersions"):
                assert not allowed(policy, Request(action, BUCKET_ARN, listing))
    assert allowed(role_policy, Request("s3:GetObject", obj("bob/memories/x"), session("bob")))
    assert allowed(role_policy, Request("s3:GetObjectVersion", obj("bob/memories/x"), session("bob")))


def test_an_untagged_session_is_explicitly_denied(role_policy: dict[str, Any]) -> None:
    assert decide(role_policy, Request("s3:GetObject", obj("alice/memories/x"), session(None))) == "Deny"
    assert decide(role_policy, Request("kms:Decrypt", KEY_ARN, session(None))) == "Deny"


def test_plain_http_is_explicitly_denied(role_policy: dict[str, Any]) -> None:
    context = session("alice", **{"aws:SecureTransport": "false"})
    assert decide(role_policy, Request("s3:GetObject", obj("alice/memories/x"), context)) == "Deny"
    listing = {**context, "s3:prefix": "alice/"}
    assert decide(role_policy, Request("s3:ListBucket", BUCKET_ARN, listing)) == "Deny"


SHAPES = {"tenant": ["tenant-key", "names-key"], "kms": ["data-key", "names-key"]}


def kms_context(tenant: str | None, shape: str = "tenant-key", deployment: str | None = "/") -> dict[str, str]:
    """An encryption context as s3memory sends it: a key wrapped for the tenant (its tenant
    key or its names key), or a data key per object (kms mode), in the deployment whose
    prefix is ``deployment`` (``/`` for the empty prefix; None: written before s3memory
    bound the deployment, binding version 1)."""
    context: dict[str, str | None]
    if shape == "data-key":
        context = {CONTEXT_TENANT: tenant, CONTEXT_PATH: "ab" * 32, KMS_RESERVED_CONTEXT_KEY: "115"}
    else:
        context = {CONTEXT_TENANT: tenant, CONTEXT_PURPOSE: shape, CONTEXT_KEY_ID: "0123456789abcdef"}
    context[CONTEXT_PREFIX] = deployment
    return {k: v for k, v in context.items() if v is not None}


def actions_for(shape: str) -> list[str]:
    return (
        ["kms:GenerateDataKey", "kms:Encrypt", "kms:Decrypt"] if shape == "data-key" else ["kms:Encrypt", "kms:Decrypt"]
    )


def kms_request(action: str, encryption_context: dict[str, str], user: str | None, principal: str) -> Request:
    context = session(user, **{f"kms:EncryptionContext:{k}": v for k, v in encryption_context.items()})
    context["kms:EncryptionContextKeys"] = list(encryption_context)
    return Request(action, KEY_ARN, context, principal)


def kms_allows(documents: list[dict[str, Any]], request: Request) -> bool:
    return all(allowed(document, request) for document in documents)


@pytest.mark.parametrize("mode", ["tenant", "kms"])
def test_kms_refuses_another_tenants_context(mode: str) -> None:
    """Both the role policy and the key policy: each alone refuses another tenant's keys."""
    role = iam_policy(bucket=BUCKET, kms_key_arn=KEY_ARN, key_mode=mode)
    key = kms_key_policy(account_id=ACCOUNT, user_role_arn=MEMORY_ROLE, key_mode=mode)
    for shape in SHAPES[mode]:
        for action in actions_for(shape):
            assert kms_allows([role, key], kms_request(action, kms_context("alice", shape), "alice", MEMORY_ROLE))
            bobs = kms_request(action, kms_context("bob", shape), "alice", MEMORY_ROLE)
            assert not allowed(role, bobs) and not allowed(key, bobs)
            # an extra context key, no tenant, no context at all: refused by each
            extra = {**kms_context("alice", shape), "extra": "x"}
            for context in (extra, kms_context(None, shape), {}):
                request = kms_request(action, context, "alice", MEMORY_ROLE)
                assert not allowed(role, request) and not allowed(key, request)
            # the key policy grants only the memory role
            for principal in (AGENT_ROLE, ROOT, OTHER_ROLE):
                assert not allowed(key, kms_request(action, kms_context("alice", shape), "alice", principal))


@pytest.mark.parametrize("mode", ["tenant", "kms"])
def test_kms_allows_only_the_shapes_of_context_of_the_key_mode(mode: str) -> None:
    documents = [
        iam_policy(bucket=BUCKET, kms_key_arn=KEY_ARN, key_mode=mode),
        kms_key_policy(account_id=ACCOUNT, user_role_arn=MEMORY_ROLE, key_mode=mode),
    ]
    other_purpose = {**kms_context("alice"), CONTEXT_PURPOSE: "data"}
    mixed = {**kms_context("alice", "data-key"), CONTEXT_PURPOSE: "tenant-key"}
    other_algorithm = {**kms_context("alice", "data-key"), KMS_RESERVED_CONTEXT_KEY: "114"}
    for context in (other_purpose, mixed, other_algorithm):
        for action in ("kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey"):
            assert not kms_allows(documents, kms_request(action, context, "alice", MEMORY_ROLE))
    # a key wrapped for the tenant is never a data key
    generate = kms_request("kms:GenerateDataKey", kms_context("alice", "tenant-key"), "alice", MEMORY_ROLE)
    assert not kms_allows(documents, generate)
    per_object = kms_request("kms:Decrypt", kms_context("alice", "data-key"), "alice", MEMORY_ROLE)
    assert kms_allows(documents, per_object) is (mode == "kms")
    for action in ("kms:ReEncryptFrom", "kms:GenerateDataKeyWithoutPlaintext", "kms:CreateGrant", "kms:Sign"):
        assert not kms_allows(documents, kms_request(action, kms_context("alice", "data-key"), "alice", MEMORY_ROLE))


@pytest.mark.parametrize("mode", ["tenant", "kms"])
def test_kms_refuses_another_deployments_context(mode: str) -> None:
    """Issue 11, item 5: two deployments sharing a bucket, a key and a user id. Each
    document alone refuses a context naming another deployment; a context without
    s3memory:prefix (written before the binding) still decrypts, but nothing new can be
    made under it (else a session could forge unbound keys another deployment accepts)."""
    documents = [
        iam_policy(bucket=BUCKET, prefix="app/", kms_key_arn=KEY_ARN, key_mode=mode),
        kms_key_policy(account_id=ACCOUNT, user_role_arn=MEMORY_ROLE, key_mode=mode, prefix="app/"),
    ]
    root = [
        iam_policy(bucket=BUCKET, kms_key_arn=KEY_ARN, key_mode=mode),
        kms_key_policy(account_id=ACCOUNT, user_role_arn=MEMORY_ROLE, key_mode=mode),
    ]
    for shape in SHAPES[mode]:
        own, legacy = kms_context("alice", shape, "app/"), kms_context("alice", shape, None)
        refused = [
            kms_context("alice", shape, "other/"),
            kms_context("alice", shape, "/"),  # the deployment with the empty prefix
            kms_context("alice", shape, "app"),
            kms_context("alice", shape, "app/x/"),
            kms_context("alice", shape, ""),
            # the condition key matches any case, and the key list refuses the spelling
            {**legacy, "S3MEMORY:PREFIX": "app/"},
        ]
        for action in actions_for(shape):
            assert kms_allows(documents, kms_request(action, own, "alice", MEMORY_ROLE))
            assert not kms_allows(root, kms_request(action, own, "alice", MEMORY_ROLE))
            assert kms_allows(root, kms_request(action, kms_context("alice", shape, "/"), "alice", MEMORY_ROLE))
            for context in refused:
                request = kms_request(action, context, "alice", MEMORY_ROLE)
                assert all(not allowed(document, request) for document in documents), (action, context)
            # Binding version 1 has no deployment to check: such a context may be read, and
            # nothing may be made under it.
            legacy_request = kms_request(action, legacy, "alice", MEMORY_ROLE)
            assert kms_allows(documents, legacy_request) == (action == "kms:Decrypt"), action
            if action != "kms:Decrypt":
                assert all(not allowed(document, legacy_request) for document in documents), action
            assert not kms_allows(documents, kms_request(action, kms_context("bob", shape, None), "alice", MEMORY_ROLE))


def test_the_key_administrator_cannot_use_the_key() -> None:
    key = kms_key_policy(account_id=ACCOUNT, user_role_arn=MEMORY_ROLE)
    assert allowed(key, Request("kms:ScheduleKeyDeletion", "*", {}, ROOT))
    assert allowed(key, Request("kms:PutKeyPolicy", "*", {}, ROOT))
    assert not allowed(key, kms_request("kms:Decrypt", kms_context("alice"), "alice", ROOT))
    assert not allowed(key, Request("kms:ScheduleKeyDeletion", "*", {}, MEMORY_ROLE))
    admin = f"arn:aws:iam::{ACCOUNT}:role/key-admin"
    custom = kms_key_policy(account_id=ACCOUNT, user_role_arn=MEMORY_ROLE, admin_principal_arn=admin)
    assert allowed(custom, Request("kms:DisableKey", "*", {}, admin))
    assert not allowed(custom, Request("kms:DisableKey", "*", {}, ROOT))


def sts_requests(request: dict[str, Any], principal: str = AGENT_ROLE) -> list[Request]:
    """The IAM authorisations of one ``sts.assume_role(**request)``: sts:AssumeRole, and
    sts:TagSession when it passes tags; both see the tags as aws:RequestTag/<key> and
    aws:TagKeys."""
    tags = request.get("Tags", [])
    context: dict[str, Any] = {f"aws:RequestTag/{tag['Key']}": tag["Value"] for tag in tags}
    if tags:
        context["aws:TagKeys"] = [tag["Key"] for tag in tags]
    actions = ["sts:AssumeRole", *(["sts:TagSession"] if tags else [])]
    return [Request(action, request["RoleArn"], dict(context), principal) for action in actions]


def may_assume(request: dict[str, Any], principal: str = AGENT_ROLE) -> bool:
    """Whether the agent role's policy and the memory role's trust policy both allow it."""
    trust, agent = trust_policy(agent_role_arn=AGENT_ROLE), agent_role_policy(memory_role_arn=MEMORY_ROLE)
    return all(allowed(trust, r) and allowed(agent, r) for r in sts_requests(request, principal))


def tagged(*tags: tuple[str, str]) -> dict[str, Any]:
    return {"RoleArn": MEMORY_ROLE, "Tags": [{"Key": key, "Value": value} for key, value in tags]}


def test_only_the_agent_role_may_assume_the_memory_role_and_only_tagging_one_user() -> None:
    """Issue 11, item 17: sts:AssumeRole itself needs the tag, so no session of the memory
    role is without a user (nor takes it from a tag on the role)."""
    assert may_assume(tagged((DEFAULT_TAG, "alice")))
    assert not may_assume(tagged((DEFAULT_TAG, "alice")), principal=OTHER_ROLE)
    assert not may_assume({"RoleArn": MEMORY_ROLE})  # untagged
    assert not may_assume(tagged((DEFAULT_TAG, "alice"), ("team", "x")))  # a second tag
    assert not may_assume(tagged((DEFAULT_TAG, "")))
    assert not may_assume(tagged(("team", "x")))
    trust = trust_policy(agent_role_arn=AGENT_ROLE)
    untagged = Request("sts:AssumeRole", MEMORY_ROLE, {}, AGENT_ROLE)
    assert decide(trust, untagged) == "ImplicitDeny"
    invalid = sts_requests(tagged((DEFAULT_TAG, "bob/memories/x")))
    assert [decide(trust, r) for r in invalid] == ["Deny", "Deny"]  # explicitly, for both actions


# Every ASCII character AWS accepts in a tag value (STS Tag.Value: [\p{L}\p{Z}\p{N}_.:/=+\-@]*).
ASCII_TAG_VALUE_CHARS = string.ascii_letters + string.digits + " _.:/=+-@"


def is_user_id(value: str) -> bool:
    """The user-id rule, restated independently of _paths: 1 to 128 ASCII letters, digits
    and . _ @ + = -, starting with a letter or digit, and not "memories" in any case."""
    return re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._@+=-]{0,127}", value) is not None and value.lower() != "memories"


def code_accepts(value: str) -> bool:
    try:
        session_tags(value)
    except ConfigurationError:
        return False
    return True


@pytest.mark.slow  # heavy hypothesis
@settings(max_examples=1500, deadline=None)
@given(
    st.one_of(
        st.text(ASCII_TAG_VALUE_CHARS, max_size=12),
        st.builds(
            lambda first, rest: first + rest,
            st.sampled_from(ASCII_TAG_VALUE_CHARS),
            st.text(ASCII_TAG_VALUE_CHARS, min_size=120, max_size=140),
        ),
    )
)
@example("")
@example("a")
@example("memories")
@example("Memories")
@example("MEMORIES")
@example("memories2")
@example("a" * 128)
@example("a" * 129)
@example("a" * 127 + ":")
@example("A.b_c@d+e=f-g")
@example("0")
@example(".")
@example("..")
@example(".s3memory")
@example("a/b")
@example("a:b")
@example("a b")
@example(" a")
@example("a ")
@example("bob/memories/x")
@example("-a")
@example("_a")
@example("@a")
@example("+a")
@example("=a")
def test_the_trust_policy_accepts_exactly_the_valid_user_ids_among_ascii_tag_values(value: str) -> None:
    """For every ASCII value AWS lets the agent put in the tag, the trust policy, the code
    (session_tags, what assume_role_request uses) and the rule agree."""
    valid = is_user_id(value)
    assert may_assume(tagged((DEFAULT_TAG, value))) is valid
    assert code_accepts(value) is valid


@pytest.mark.parametrize("value", ["alicé", "名前", "١٢٣", "a\u00a0b", "a\u3000b", "ⅷ", "Ω" * 128])
def test_what_only_the_code_refuses(value: str) -> None:
    """IAM conditions have no character classes: values with non-ASCII letters, digits or
    spaces (which AWS accepts in tags) pass the trust policy; the code refuses them.
    None contains / : or a leading ., so none reaches outside its own tenant prefix."""
    assert may_assume(tagged((DEFAULT_TAG, value)))
    assert not code_accepts(value)
    assert not may_assume(tagged((DEFAULT_TAG, "Ω" * 129)))  # the length is checked whatever the characters


@pytest.mark.parametrize("user_id", ["memories", "Memories", "MEMORIES", "mEmOrIeS"])
def test_the_reserved_user_id_is_refused_by_the_trust_policy_and_the_code(user_id: str) -> None:
    """Issue 11, item 4: ``memories``, in any case, is no user id (validate_tenant), so no
    session may carry it."""
    assert user_id.lower() == RESERVED_SEGMENT
    with pytest.raises(ConfigurationError):
        validate_tenant(user_id)
    with pytest.raises(ConfigurationError):
        assume_role_request(role_arn=MEMORY_ROLE, user_id=user_id)
    trust = trust_policy(agent_role_arn=AGENT_ROLE)
    assert [decide(trust, r) for r in sts_requests(tagged((DEFAULT_TAG, user_id)))] == ["Deny", "Deny"]


@pytest.mark.parametrize("user_id", ["alice", "user-42", "0", "A.b_c@d+e=f-g", "u" * 128, "memories2", "my-memories"])
def test_every_assume_role_request_passes_the_trust_and_agent_policies(user_id: str) -> None:
    """What the Lambda example sends (assume_role_request) is what the policies allow."""
    request = assume_role_request(role_arn=MEMORY_ROLE, user_id=user_id)
    assert may_assume(request)
    assert [r.action for r in sts_requests(request)] == ["sts:AssumeRole", "sts:TagSession"]
    # with another tag name, the trust policy for that name
    other = assume_role_request(role_arn=MEMORY_ROLE, user_id=user_id, tag="tenant")
    trust = trust_policy(agent_role_arn=AGENT_ROLE, tag="tenant")
    assert all(allowed(trust, r) for r in sts_requests(other))
    assert not all(allowed(trust, r) for r in sts_requests(request))


def test_the_agent_role_may_only_assume_the_memory_role() -> None:
    policy = agent_role_policy(memory_role_arn=MEMORY_ROLE)
    assert allowed(policy, Request("sts:AssumeRole", MEMORY_ROLE))
    assert allowed(policy, Request("sts:TagSession", MEMORY_ROLE))
    assert not allowed(policy, Request("sts:AssumeRole", OTHER_ROLE))
    assert not allowed(policy, Request("s3:GetObject", obj("alice/memories/x")))
    assert not allowed(policy, Request("kms:Decrypt", KEY_ARN))


def test_a_prefix_scopes_everything_below_it() -> None:
    policy = iam_policy(bucket=BUCKET, prefix="app/memory/")
    assert allowed(policy, Request("s3:GetObject", obj("app/memory/alice/memories/x"), session("alice")))
    assert not allowed(policy, Request("s3:GetObject", obj("alice/memories/x"), session("alice")))
    assert not allowed(policy, Request("s3:GetObject", obj("app/memory/bob/memories/x"), session("alice")))
    listing = session("alice", **{"s3:prefix": "app/memory/alice/memories/"})
    assert allowed(policy, Request("s3:ListBucket", BUCKET_ARN, listing))
    for prefix in ("app/memory/", "alice/", "app/memory/bob/"):
        assert not allowed(policy, Request("s3:ListBucket", BUCKET_ARN, session("alice", **{"s3:prefix": prefix})))


def test_a_literal_tenant_needs_no_tag() -> None:
    policy = iam_policy(bucket=BUCKET, tenant="alice", kms_key_arn=KEY_ARN)
    text = json.dumps(policy)
    assert "PrincipalTag" not in text and f"{BUCKET_ARN}/alice/memories/*" in text
    untagged = session(None)
    assert allowed(policy, Request("s3:GetObject", obj("alice/memories/x"), untagged))
    assert allowed(policy, Request("s3:GetObject", obj("alice/memories/x"), session("bob")))  # the tag is irrelevant
    assert not allowed(policy, Request("s3:GetObject", obj("bob/memories/x"), untagged))
    assert not allowed(policy, Request("s3:GetObject", obj("alice2/memories/x"), untagged))
    listing = {**untagged, "s3:prefix": "alice/memories/"}
    assert allowed(policy, Request("s3:ListBucket", BUCKET_ARN, listing))
    assert not allowed(policy, Request("s3:ListBucket", BUCKET_ARN, {**untagged, "s3:prefix": "bob/"}))
    assert allowed(policy, kms_request("kms:Decrypt", kms_context("alice"), None, MEMORY_ROLE))
    assert not allowed(policy, kms_request("kms:Decrypt", kms_context("bob"), None, MEMORY_ROLE))


def test_deleting_versions_for_good_is_an_opt_in() -> None:
    """History is listed and read by default; deleting a version for good (erasure, or
    redacting a version) needs allow_erase."""
    versions = session("alice", **{"s3:prefix": "alice/memories/"})
    for policy, expected in ((iam_policy(bucket=BUCKET), False), (iam_policy(bucket=BUCKET, allow_erase=True), True)):
        assert allowed(policy, Request("s3:ListBucketVersions", BUCKET_ARN, versions))
        assert allowed(policy, Request("s3:GetObjectVersion", obj("alice/memories/x"), session("alice")))
        for key in ("alice/.s3memory/tenant-key", "alice/memories/x"):
            assert allowed(policy, Request("s3:DeleteObjectVersion", obj(key), session("alice"))) is expected
    admin = iam_policy(bucket=BUCKET, allow_erase=True)
    assert not allowed(admin, Request("s3:DeleteObjectVersion", obj("bob/.s3memory/tenant-key"), session("alice")))
    for prefix in ("", "alice/"):
        assert not allowed(
            admin, Request("s3:ListBucketVersions", BUCKET_ARN, session("alice", **{"s3:prefix": prefix}))
        )
    assert allowed(
        admin, Request("s3:ListBucketVersions", BUCKET_ARN, session("alice", **{"s3:prefix": "alice/.s3memory/"}))
    )


# --- the requests s3memory really makes -------------------------------------------------


def iam_requests(service: str, operation: str, params: dict[str, Any], key_arn: str) -> list[Request]:
    """The IAM authorisations one API call needs (per the S3 and KMS authorisation docs)."""
    if service == "kms":
        assert operation in ("Encrypt", "Decrypt", "GenerateDataKey"), operation
        context = {f"kms:EncryptionContext:{k}": v for k, v in params.get("EncryptionContext", {}).items()}
        context["kms:EncryptionContextKeys"] = list(params.get("EncryptionContext", {}))
        return [Request(f"kms:{operation}", key_arn, context)]
    assert params["Bucket"] == BUCKET
    if operation in ("GetObject", "HeadObject"):  # of one version: GetObjectVersion
        return [Request("s3:GetObjectVersion" if "VersionId" in params else "s3:GetObject", obj(params["Key"]))]
    if operation == "PutObject":
        tagging = [Request("s3:PutObjectTagging", obj(params["Key"]))] if params.get("Tagging") else []
        return [Request("s3:PutObject", obj(params["Key"])), *tagging]
    if operation == "CopyObject":
        source = params["CopySource"]  # {"Bucket", "Key"[, "VersionId"]}, or "bucket/key[?versionId=...]"
        if isinstance(source, str):
            from urllib.parse import unquote

            path, _, query = source.partition("?versionId=")
            source = {"Key": unquote(path.split("/", 1)[1]), **({"VersionId": query} if query else {})}
        read = "s3:GetObjectVersion" if "VersionId" in source else "s3:GetObject"
        return [Request(read, obj(source["Key"])), Request("s3:PutObject", obj(params["Key"]))]
    if operation == "DeleteObjects":
        deletes = params["Delete"]["Objects"]
        return [
            Request("s3:DeleteObjectVersion" if "VersionId" in o else "s3:DeleteObject", obj(o["Key"])) for o in deletes
        ]
    if operation == "DeleteObject":
        return [Request("s3:DeleteObjectVersion" if "VersionId" in params else "s3:DeleteObject", obj(params["Key"]))]
    if operation == "GetBucketVersioning":
        return [Request("s3:GetBucketVersioning", BUCKET_ARN)]
    if operation in ("ListObjectsV2", "ListObjectVersions"):
        context = {"s3:prefix": params["Prefix"]} if "Prefix" in params else {}
        action = "s3:ListBucket" if operation == "ListObjectsV2" else "s3:ListBucketVersions"
        return [Request(action, BUCKET_ARN, context)]
    raise AssertionError(f"s3memory made a request this test does not map to IAM actions: {operation}")


WORKLOAD: list[dict[str, Any]] = [
    {"command": "view", "path": "/memories"},
    {"command": "create", "path": "/memories/notes.md", "file_text": "tea\n"},
    {"command": "view", "path": "/memories/notes.md"},
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "tea", "new_str": "green tea"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 0, "insert_text": "# Notes"},
    {"command": "create", "path": "/memories/projects/a/plan.md", "file_text": "plan\n"},
    {"command": "view", "path": "/memories/projects"},
    {"command": "rename", "old_path": "/memories/projects", "new_path": "/memories/work"},
    {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/work/notes.md"},
    {"command": "view", "path": "/memories/missing.md"},
    {"command": "create", "path": "/memories/work/notes.md/x", "file_text": "refused"},
    {"command": "delete", "path": "/memories/work/a/plan.md"},
    {"command": "delete", "path": "/memories/work"},
]


def optional_features() -> dict[str, Any]:
    """Encrypted names (a names key wrapped by KMS) and access markers, where supported."""
    supported = inspect.signature(open_memory).parameters
    return {name: True for name in ("encrypt_names", "track_access") if name in supported}


@pytest.mark.parametrize(
    ("mode", "prefix", "features"),
    [("tenant", "", False), ("kms", "", False), ("tenant", "tenants/v1/", True), ("kms", "tenants/v1/", True)],
)
def test_every_request_of_a_real_workload_is_allowed_for_its_user_only(
    s3_client: Any, kms_client: Any, kms_key_id: str, mode: str, prefix: str, features: bool
) -> None:
    """Run the six commands on moto, record every S3 and KMS call, and judge each with the
    documents: all allowed for a session tagged with the user, all refused for another user.
    So the policy is sufficient for s3memory (nothing it does is missing) and isolating."""
    recorded = record_requests(s3_client, kms_client)

    def open_alice() -> Any:  # a fresh cache each time: keys are unwrapped by KMS again
        return open_memory(
            user_id="alice",
            bucket=BUCKET,
            s3_client=s3_client,
            prefix=prefix,
            kms_key_id=kms_key_id,
            kms_client=kms_client,
            key_mode=mode,  # type: ignore[arg-type]
            key_cache=KeyCache(),
            **(optional_features() if features else {}),
        )

    memory = open_alice()
    for command in WORKLOAD:
        try:
            memory.execute(command)
        except S3MemoryError:
            pass  # refusals are part of the workload (a missing file, a file used as a directory)
    reopened = open_alice()
    reopened.create("/memories/again.md", "x")
    assert "x" in reopened.view("/memories/again.md")

    documents = deployment_documents(
        bucket=BUCKET,
        prefix=prefix,
        memory_role_arn=MEMORY_ROLE,
        agent_role_arn=AGENT_ROLE,
        kms_key_arn=kms_key_id,
        key_mode=mode,
    )
    operations = {operation for _, operation, _ in recorded}
    assert {"GetObject", "PutObject", "ListObjectsV2", "CopyObject", "DeleteObjects"} <= operations
    assert {"Decrypt", "Encrypt"} & operations
    assert judge(recorded, documents, kms_key_id, "alice") == {True}
    assert judge(recorded, documents, kms_key_id, "bob") == {False}
    # unchanged by stores mounted read-only (issue 15)
    with_mounts = deployment_documents(
        bucket=BUCKET,
        prefix=prefix,
        memory_role_arn=MEMORY_ROLE,
        agent_role_arn=AGENT_ROLE,
        kms_key_arn=kms_key_id,
        key_mode=mode,
        read_only_mounts=["T", "standards"],
    )
    assert judge(recorded, with_mounts, kms_key_id, "alice") == {True}
    assert judge(recorded, with_mounts, kms_key_id, "bob") == {False}
    # the same user id in another deployment sharing the bucket and the key (issue 11, items 4, 5)
    other = deployment_documents(
        bucket=BUCKET,
        prefix="" if prefix else "alice/",  # "alice/": where the user alice of prefix "" keeps her objects
        memory_role_arn=MEMORY_ROLE,
        agent_role_arn=AGENT_ROLE,
        kms_key_arn=kms_key_id,
        key_mode=mode,
    )
    assert judge(recorded, other, kms_key_id, "alice") == {False}


def record_requests(s3_client: Any, kms_client: Any) -> list[tuple[str, str, dict[str, Any]]]:
    recorded: list[tuple[str, str, dict[str, Any]]] = []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        recorded.append((model.service_model.endpoint_prefix, model.name, dict(params)))

    s3_client.meta.events.register("before-parameter-build.s3", record)
    kms_client.meta.events.register("before-parameter-build.kms", record)
    return recorded


def judge(
    recorded: list[tuple[str, str, dict[str, Any]]], documents: dict[str, dict[str, Any]], key_arn: str, user: str
) -> set[bool]:
    """Whether each recorded call is allowed to the memory role's session tagged ``user``
    (a KMS call needs the role policy and the key policy). A request about the bucket
    itself, the same for every tenant (whether it keeps versions), is allowed to any user's
    session, and is not among the verdicts."""
    role, key = documents["memory-role-policy"], documents["kms-key-policy"]
    verdicts = set()
    for service, operation, params in recorded:
        for request in iam_requests(service, operation, params, key_arn):
            request.context.update(session(user))
            request.principal = MEMORY_ROLE
            if request.action in BUCKET_WIDE:
                assert allowed(role, request), request
                continue
            verdicts.add(allowed(role, request) and (service != "kms" or allowed(key, request)))
    return verdicts


BUCKET_WIDE = {"s3:GetBucketVersioning"}


def test_key_rotation_and_erasure_need_the_erase_option(s3_client: Any, kms_client: Any, kms_key_id: str) -> None:
    """Rotating a tenant key needs nothing more than the agent's policy; erasing a user from a
    versioned bucket needs ``allow_erase`` (and stays within the user's prefix)."""
    lifecycle = pytest.importorskip("s3memory._admin.lifecycle")
    s3_client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    memory = open_memory(
        user_id="alice", bucket=BUCKET, s3_client=s3_client, kms_key_id=kms_key_id, kms_client=kms_client
    )
    memory.create("/memories/a.md", "a")
    memory.create("/memories/b/c.md", "c")
    recorded = record_requests(s3_client, kms_client)
    lifecycle.rotate_tenant_key(memory, retire_after=0)
    options = {
        "bucket": BUCKET,
        "memory_role_arn": MEMORY_ROLE,
        "agent_role_arn": AGENT_ROLE,
        "kms_key_arn": kms_key_id,
    }
    agent, admin = deployment_documents(**options), deployment_documents(**options, allow_erase=True)
    assert judge(recorded, agent, kms_key_id, "alice") == {True}
    recorded.clear()
    lifecycle.erase_tenant(memory)
    assert {"ListObjectVersions", "DeleteObjects"} <= {operation for _, operation, _ in recorded}
    deletes = [call for call in recorded if call[1] == "DeleteObjects"]
    assert judge(deletes, agent, kms_key_id, "alice") == {False}  # the agent role may list versions, not erase
    assert judge(recorded, admin, kms_key_id, "alice") == {True}
    assert judge(recorded, admin, kms_key_id, "bob") == {False}
    assert "Versions" not in s3_client.list_object_versions(Bucket=BUCKET, Prefix="alice/")


def test_every_request_of_history_is_allowed_for_its_user_only(s3_client: Any, kms_key_id: str) -> None:
    """What the version verbs of S3Store send, on a versioned bucket: asking whether it keeps
    versions, listing versions (a delete marker written in the same second as a version
    makes the store ask S3 for their order, listing the key itself), reading and HEADing
    one version, and deleting one for good. All but the last need only the agent's policy;
    the last needs allow_erase; none is allowed to another user, nor to the same user in
    another deployment sharing the bucket."""
    import boto3

    s3_client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    # Another client: a store remembers a client's answers about versioning, and the store
    # below must ask (GetBucketVersioning is one of the verbs the policy must allow).
    writer = S3Store(BUCKET, boto3.client("s3", region_name=REGION))
    for key in ("alice/memories/a.md", "alice/.s3memory/tenant-key"):
        writer.put(key, b"1", {})
        writer.delete([key])
        writer.put(key, b"2", {})
    recorded = record_requests(s3_client, s3_client)
    store = S3Store(BUCKET, s3_client)
    assert store.keeps_versions()
    listed = list(store.list_versions("alice/memories/")) + list(store.list_versions("alice/.s3memory/"))
    assert [(v.key, v.is_delete_marker) for v in listed] == [
        ("alice/memories/a.md", False),
        ("alice/memories/a.md", True),
        ("alice/memories/a.md", False),
        ("alice/.s3memory/tenant-key", False),
        ("alice/.s3memory/tenant-key", True),
        ("alice/.s3memory/tenant-key", False),
    ]
    for version in listed:
        store.get_version(version.key, version.version_id)
        store.head_version(version.key, version.version_id)
    assert store.get_version("alice/memories/a.md", "no-such-version") is None
    reads = list(recorded)
    recorded.clear()
    store.delete_version("alice/memories/a.md", listed[2].version_id)
    deletes = list(recorded)
    assert {operation for _, operation, _ in reads} == {
        "GetBucketVersioning",
        "ListObjectVersions",
        "GetObject",
        "HeadObject",
    }
    assert any(params.get("Prefix") == "alice/memories/a.md" for _, op, params in reads if op == "ListObjectVersions")
    assert [operation for _, operation, _ in deletes] == ["DeleteObject"]
    options = {
        "bucket": BUCKET,
        "memory_role_arn": MEMORY_ROLE,
        "agent_role_arn": AGENT_ROLE,
        "kms_key_arn": kms_key_id,
    }
    agent, admin = deployment_documents(**options), deployment_documents(**options, allow_erase=True)
    other = deployment_documents(**options, prefix="alice/")  # alice's objects, as another deployment's keys
    for documents in (agent, admin):
        assert judge(reads, documents, kms_key_id, "alice") == {True}
        assert judge(reads, documents, kms_key_id, "bob") == {False}
        assert judge(reads, other, kms_key_id, "alice") == {False}
    assert judge(deletes, agent, kms_key_id, "alice") == {False}
    assert judge(deletes, admin, kms_key_id, "alice") == {True}
    assert judge(deletes, admin, kms_key_id, "bob") == {False}
    assert judge(deletes, deployment_documents(**options, prefix="alice/", allow_erase=True), kms_key_id, "alice") == {
        False
    }


# --- structure ------------------------------------------------------------------------


def sids(policy: dict[str, Any]) -> list[str]:
    return [statement["Sid"] for statement in policy["Statement"]]


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


# --- stores mounted read-only (issue 15) ------------------------------------------------
#
# A store mounted read-only (Mount(access="read_only")) is another tenant, T, whose objects
# every session of the memory role may read and none may write: not even a compromised
# function, which holds the role's credentials and chooses the session's tag.

READ_ONLY = ("T", "standards")
SHARED = "T"
# Every object under T's two sub-prefixes that s3memory writes (and what a forger might add).
T_KEYS = [
    "T/memories/x",
    "T/memories/d/b.md",
    "T/.s3memory/tenant-key",
    "T/.s3memory/names-key",
    "T/.s3memory/history-key",
    "T/.s3memory/index/v1",
    "T/.s3memory/intents/rename-ab",
    "T/.s3memory/access/0af3",
    "T/.s3memory/history/ab/0000000000000001-0123456789abcdef",
    "T/.s3memory/pending/0123456789abcdef",
]
T_READABLE = ["T/memories/x", "T/memories/d/b.md", "T/.s3memory/tenant-key", "T/.s3memory/names-key"]
T_READABLE += ["T/.s3memory/index/v1"]
S3_WRITES = [
    "s3:PutObject",  # also the destination of CopyObject
    "s3:DeleteObject",  # also each key of DeleteObjects
    "s3:PutObjectTagging",
    "s3:DeleteObjectVersion",
    "s3:PutObjectAcl",
    "s3:PutObjectVersionTagging",
    "s3:PutObjectRetention",
    "s3:DeleteObjectTagging",
    "s3:RestoreObject",
]
KMS_MAKING = [
    "kms:Encrypt",
    "kms:GenerateDataKey",
    "kms:GenerateDataKeyWithoutPlaintext",
    "kms:GenerateDataKeyPair",
    "kms:ReEncryptFrom",
    "kms:ReEncryptTo",
]


def mounted_documents(
    mode: str = "tenant", prefix: str = "", mounts: tuple[str, ...] = READ_ONLY, key_arn: str = KEY_ARN
) -> dict[str, dict[str, Any]]:
    return deployment_documents(
        bucket=BUCKET,
        prefix=prefix,
        memory_role_arn=MEMORY_ROLE,
        agent_role_arn=AGENT_ROLE,
        kms_key_arn=key_arn,
        key_mode=mode,
        read_only_mounts=mounts,
    )


def listing(user: str | None, prefix: str | None) -> Request:
    context = session(user) if prefix is None else session(user, **{"s3:prefix": prefix})
    return Request("s3:ListBucket", BUCKET_ARN, context)


@pytest.mark.parametrize("mode", ["tenant", "kms"])
def test_every_session_may_read_a_read_only_store(mode: str) -> None:
    """Its memory files, the key documents that open them and its search index; listings
    of its memory folder (and of the key itself, to tell a missing key from a refused one);
    KMS Decrypt under its context, with this deployment's prefix or none (written before
    deployments were bound): the wrapped tenant and names keys, and in kms mode a data key."""
    documents = mounted_documents(mode)
    role, key = documents["memory-role-policy"], documents["kms-key-policy"]
    for user in ("alice", "bob"):
        for object_key in T_READABLE:
            assert allowed(role, Request("s3:GetObject", obj(object_key), session(user))), object_key
        for prefix in (
            "T/memories/",
            "T/memories/d/",
            "T/memories/x",
            "T/.s3memory/tenant-key",
            "T/.s3memory/names-key",
            "T/.s3memory/index/",
            "T/.s3memory/index/v1",
        ):
            assert allowed(role, listing(user, prefix)), prefix
        for deployment in ("/", None):
            for shape in ("tenant-key", "names-key", "data-key"):
                request = kms_request("kms:Decrypt", kms_context(SHARED, shape, deployment), user, MEMORY_ROLE)
                expected = shape != "data-key" or mode == "kms"
                assert allowed(role, request) is expected and allowed(key, request) is expected, (shape, deployment)


@pytest.mark.parametrize("mode", ["tenant", "kms"])
@pytest.mark.parametrize("user", ["alice", "T", None])
def test_no_session_may_write_a_read_only_store(mode: str, user: str | None) -> None:
    """An explicit Deny, not only the absence of an Allow: for every write, tag, ACL and delete
    (of any version) under both of T's sub-prefixes, and for making any key under T's context,
    in the role policy and again in the key policy. It holds for a session tagged T too,
    which the trust policy refuses anyway, and for an untagged one."""
    documents = mounted_documents(mode)
    role, key = documents["memory-role-policy"], documents["kms-key-policy"]
    for action in S3_WRITES:
        for object_key in T_KEYS:
            assert decide(role, Request(action, obj(object_key), session(user))) == "Deny", (action, object_key)
    for action in KMS_MAKING:
        for shape in ("tenant-key", "names-key", "history-key", "data-key"):
            for deployment in ("/", None, "other/"):
                request = kms_request(action, kms_context(SHARED, shape, deployment), user, MEMORY_ROLE)
                assert decide(role, request) == "Deny" and decide(key, request) == "Deny", (action, shape)
        # the condition key matches any spelling of the context key
        request = kms_request(action, {"S3MEMORY:TENANT": SHARED}, user, MEMORY_ROLE)
        assert decide(role, request) == "Deny" and decide(key, request) == "Deny"


@pytest.mark.parametrize("mode", ["tenant", "kms"])
def test_what_a_read_only_store_does_not_give(mode: str) -> None:
    """No history (versions neither read nor listed), no listing of T's prefix, of its
    internal folder or of its history, no internal object but the key documents that open
    its files and its index, no other key document's key, no other deployment's context."""
    documents = mounted_documents(mode)
    role, key = documents["memory-role-policy"], documents["kms-key-policy"]
    for object_key in T_KEYS:
        assert not allowed(role, Request("s3:GetObjectVersion", obj(object_key), session("alice")))
    for object_key in [*sorted(set(T_KEYS) - set(T_READABLE)), "T/x", "T/memoriesx/y", "T/.s3memory/tenant-key2"]:
        assert not allowed(role, Request("s3:GetObject", obj(object_key), session("alice"))), object_key
    for prefix in ("T/memories/", "T/memories/d/", "T/.s3memory/index/"):
        versions = Request("s3:ListBucketVersions", BUCKET_ARN, session("alice", **{"s3:prefix": prefix}))
        assert not allowed(role, versions)
    for listed in ("T/", "T", "", None, "T/.s3memory/", "T/.s3memory/history/", "T/.s3memory/intents/", "T/.s3m"):
        assert not allowed(role, listing("alice", listed)), listed
    refused_contexts = [
        kms_context(SHARED, "history-key"),
        kms_context(SHARED, "tenant-key", "other/"),
        kms_context(SHARED, "data-key", "other/"),
        {**kms_context(SHARED), "extra": "x"},
    ]
    if mode == "tenant":
        refused_contexts.append(kms_context(SHARED, "data-key"))
    for context in refused_contexts:
        request = kms_request("kms:Decrypt", context, "alice", MEMORY_ROLE)
        assert not allowed(role, request) and not allowed(key, request), context
    # the key policy grants it to the memory role only
    for principal in (AGENT_ROLE, ROOT, OTHER_ROLE):
        assert not allowed(key, kms_request("kms:Decrypt", kms_context(SHARED), "alice", principal))


@pytest.mark.parametrize("mode", ["tenant", "kms"])
def test_an_unmounted_tenant_and_another_deployments_store_get_nothing(mode: str) -> None:
    """U is not mounted: nothing of U's (and no Deny on it either: U's own sessions write it).
    The deployment with prefix app/ mounts T: that is app/T/, not T/ of the deployment with
    no prefix, and the other way round."""
    documents = mounted_documents(mode)
    role, key = documents["memory-role-policy"], documents["kms-key-policy"]
    nested = mounted_documents(mode, prefix="app/")
    for action in [*OBJECT_ACTIONS, *S3_WRITES]:
        for object_key in ("U/memories/x", "U/.s3memory/tenant-key", "U/.s3memory/index/v1"):
            assert decide(role, Request(action, obj(object_key), session("alice"))) == "ImplicitDeny"
        # U's own sessions are not affected: what they may do to U's objects they still may
        own = decide(role, Request(action, obj("U/memories/x"), session("U")))
        assert own == ("Allow" if action in OBJECT_ACTIONS else "ImplicitDeny"), action
        for object_key in ("T/memories/x", "T/.s3memory/tenant-key"):
            assert not allowed(nested["memory-role-policy"], Request(action, obj(object_key), session("alice")))
        for object_key in ("app/T/memories/x", "app/T/.s3memory/tenant-key"):
            assert not allowed(role, Request(action, obj(object_key), session("alice")))
    for prefix in ("U/memories/", "app/T/memories/"):
        assert not allowed(role, listing("alice", prefix))
    assert not allowed(nested["memory-role-policy"], listing("alice", "T/memories/"))
    assert allowed(nested["memory-role-policy"], listing("alice", "app/T/memories/"))
    for shape in SHAPES[mode]:
        request = kms_request("kms:Decrypt", kms_context("U", shape), "alice", MEMORY_ROLE)
        assert not allowed(role, request) and not allowed(key, request)
        for documents_, deployment in ((documents, "app/"), (nested, "/")):
            request = kms_request("kms:Decrypt", kms_context(SHARED, shape, deployment), "alice", MEMORY_ROLE)
            assert not allowed(documents_["memory-role-policy"], request)
            assert not allowed(documents_["kms-key-policy"], request)


def test_the_trust_policy_refuses_a_session_tagged_as_a_read_only_store() -> None:
    """No session of the memory role can be T: its own statements would let it write T."""
    trust = mounted_documents()["memory-role-trust-policy"]
    assert trust == trust_policy(agent_role_arn=AGENT_ROLE, reserved_tenants=READ_ONLY)
    for user in READ_ONLY:
        assert [decide(trust, r) for r in sts_requests(tagged((DEFAULT_TAG, user)))] == ["Deny", "Deny"]
        assert may_assume(tagged((DEFAULT_TAG, user)))  # without the mounts, T was a user like any other
    for user in ("alice", "t", "T2", "standards-2"):  # tenant ids are case-sensitive: t is not T
        assert all(allowed(trust, r) for r in sts_requests(tagged((DEFAULT_TAG, user)))), user
    assert trust["Statement"][:4] == trust_policy(agent_role_arn=AGENT_ROLE)["Statement"]
    assert trust["Statement"][4] == {
        "Sid": "DenyReadOnlyMountTenants",
        "Effect": "Deny",
        "Principal": {"AWS": AGENT_ROLE},
        "Action": ["sts:AssumeRole", "sts:TagSession"],
        "Condition": {"StringEquals": {f"aws:RequestTag/{DEFAULT_TAG}": ["T", "standards"]}},
    }


@pytest.mark.parametrize("mode", ["tenant", "kms"])
def test_read_only_mounts_change_nothing_of_a_users_own_permissions(mode: str) -> None:
    """Every decision about alice's, bob's or an untagged session's own objects, listings and
    KMS contexts is the same with the mounts as without (the matrix above reruns too, with
    the role_policy fixture's second parameter)."""
    plain = mounted_documents(mode, mounts=())
    mounted = mounted_documents(mode)
    requests: list[Request] = []
    for user in ("alice", "bob", None):
        for action in [*OBJECT_ACTIONS, *S3_WRITES, "s3:GetBucketVersioning"]:
            for object_key in ("alice/memories/x", "alice/.s3memory/tenant-key", "alice/.s3memory/index/v1", "x"):
                requests.append(Request(action, obj(object_key), session(user)))
        for action in ("s3:ListBucket", "s3:ListBucketVersions"):
            for prefix in ("alice/memories/", "alice/.s3memory/", "alice/", "", None):
                context = session(user) if prefix is None else session(user, **{"s3:prefix": prefix})
                requests.append(Request(action, BUCKET_ARN, context))
        for shape in ("tenant-key", "names-key", "history-key", "data-key"):
            for action in ["kms:Decrypt", *KMS_MAKING]:
                for deployment in ("/", None, "other/"):
                    requests.append(kms_request(action, kms_context("alice", shape, deployment), user, MEMORY_ROLE))
    for request in requests:
        for name in ("memory-role-policy", "kms-key-policy"):
            if name == "kms-key-policy" and not request.action.startswith("kms:"):
                continue
            assert decide(mounted[name], request) == decide(plain[name], request), (name, request)
    assert sum(allowed(plain["memory-role-policy"], r) for r in requests) > 20  # the matrix allows something


def test_the_read_only_statements() -> None:
    """Fixed Sids, one statement of each kind for all the stores; reads are GetObject,
    ListBucket and kms:Decrypt only; the Deny names both sub-prefixes, never T/ itself."""
    role = iam_policy(bucket=BUCKET, kms_key_arn=KEY_ARN, key_mode="kms", read_only_tenants=READ_ONLY)
    plain = iam_policy(bucket=BUCKET, kms_key_arn=KEY_ARN, key_mode="kms")
    assert sids(role) == [
        *sids(plain)[:-2],
        "ReadOnlyMountObjects",
        "ReadOnlyMountListing",
        "ReadOnlyMountDataKeysRead",
        "ReadOnlyMountKeysRead",
        "DenyWritesToReadOnlyMounts",
        "DenyKeyMakingForReadOnlyMounts",
        "DenyInsecureTransport",
        "DenyUntaggedSessions",
    ]
    statements = {s["Sid"]: s for s in role["Statement"]}
    assert statements["ReadOnlyMountObjects"]["Action"] == ["s3:GetObject"]
    assert statements["ReadOnlyMountListing"]["Action"] == ["s3:ListBucket"]
    assert statements["ReadOnlyMountObjects"]["Resource"][:4] == [
        f"{BUCKET_ARN}/T/memories/*",
        f"{BUCKET_ARN}/T/.s3memory/tenant-key",
        f"{BUCKET_ARN}/T/.s3memory/names-key",
        f"{BUCKET_ARN}/T/.s3memory/index/*",
    ]
    for sid in ("ReadOnlyMountDataKeysRead", "ReadOnlyMountKeysRead"):
        assert statements[sid]["Action"] == ["kms:Decrypt"]
        assert statements[sid]["Condition"]["StringEquals"]["kms:EncryptionContext:s3memory:tenant"] == [
            "T",
            "standards",
        ]
        assert statements[sid]["Condition"]["StringEqualsIfExists"] == {"kms:EncryptionContext:s3memory:prefix": "/"}
    assert statements["ReadOnlyMountKeysRead"]["Condition"]["StringEquals"][
        "kms:EncryptionContext:s3memory:purpose"
    ] == ["tenant-key", "names-key"]
    assert statements["DenyWritesToReadOnlyMounts"]["Resource"] == [
        f"{BUCKET_ARN}/T/memories/*",
        f"{BUCKET_ARN}/T/.s3memory/*",
        f"{BUCKET_ARN}/standards/memories/*",
        f"{BUCKET_ARN}/standards/.s3memory/*",
    ]
    assert statements["DenyKeyMakingForReadOnlyMounts"]["Condition"] == {
        "StringEquals": {"kms:EncryptionContext:s3memory:tenant": ["T", "standards"]}
    }
    for statement in role["Statement"]:
        if statement["Effect"] == "Allow":
            assert "*" not in as_list(statement["Resource"])
    # without a key: the S3 statements only; a literal tenant works the same way
    local = iam_policy(bucket=BUCKET, tenant="alice", read_only_tenants=["T"])
    assert [s for s in sids(local) if "ReadOnly" in s] == [
        "ReadOnlyMountObjects",
        "ReadOnlyMountListing",
        "DenyWritesToReadOnlyMounts",
    ]
    # the key policy: the role policy's KMS statements, for the memory role
    key = kms_key_policy(account_id=ACCOUNT, user_role_arn=MEMORY_ROLE, key_mode="kms", read_only_tenants=READ_ONLY)
    plain_key = kms_key_policy(account_id=ACCOUNT, user_role_arn=MEMORY_ROLE, key_mode="kms")
    assert key["Statement"][: len(plain_key["Statement"])] == plain_key["Statement"]
    extra = key["Statement"][len(plain_key["Statement"]) :]
    assert extra == [
        {**statements[sid], "Principal": {"AWS": MEMORY_ROLE}, "Resource": "*"}
        for sid in ("ReadOnlyMountDataKeysRead", "ReadOnlyMountKeysRead", "DenyKeyMakingForReadOnlyMounts")
    ]
    # duplicates are named once; the order is kept
    twice = iam_policy(bucket=BUCKET, kms_key_arn=KEY_ARN, read_only_tenants=["T", "standards", "T"])
    assert twice == iam_policy(bucket=BUCKET, kms_key_arn=KEY_ARN, read_only_tenants=READ_ONLY)


def test_the_documents_with_a_read_only_mount_fit_aws_size_limits() -> None:
    """IAM counts policy characters without whitespace: a role's inline policy may have
    10,240, a managed policy 6,144; a key policy 32 KB."""
    documents = mounted_documents("kms", prefix="tenants/v1/", mounts=("standards",))
    role = json.dumps(documents["memory-role-policy"], separators=(",", ":"))
    assert len(role) < 6_144
    assert len(json.dumps(documents["kms-key-policy"], separators=(",", ":"))) < 32_768


@pytest.mark.parametrize(
    "mounts",
    [
        ["${aws:PrincipalTag/s3memory-user}"],
        ["${aws:username}"],
        ["a/b"],
        [""],
        ["memories"],
        ["*"],
        ["T*"],
        [None],
        [5],
        "standards",  # a string, not a list of them
        None,
        5,
    ],
)
def test_bad_read_only_tenants_are_refused(mounts: Any) -> None:
    """Literal, valid user ids only: a store is read-only for every session, never one
    derived from the session's tag."""
    with pytest.raises(ConfigurationError):
        iam_policy(bucket=BUCKET, read_only_tenants=mounts)
    with pytest.raises(ConfigurationError):
        kms_key_policy(account_id=ACCOUNT, user_role_arn=MEMORY_ROLE, read_only_tenants=mounts)
    with pytest.raises(ConfigurationError):
        trust_policy(agent_role_arn=AGENT_ROLE, reserved_tenants=mounts)
    with pytest.raises(ConfigurationError):
        deployment_documents(
            bucket=BUCKET, memory_role_arn=MEMORY_ROLE, agent_role_arn=AGENT_ROLE, read_only_mounts=mounts
        )


def test_a_literal_tenant_cannot_be_read_only_to_itself() -> None:
    with pytest.raises(ConfigurationError):
        iam_policy(bucket=BUCKET, tenant="T", read_only_tenants=["T"])
    with pytest.raises(ConfigurationError):
        kms_key_policy(account_id=ACCOUNT, user_role_arn=MEMORY_ROLE, tenant="T", read_only_tenants=["T"])
    # the writer of T, and a reader of T serving alice alone
    writer = iam_policy(bucket=BUCKET, tenant="T", kms_key_arn=KEY_ARN)
    assert allowed(writer, Request("s3:PutObject", obj("T/memories/x"), session(None)))
    reader = iam_policy(bucket=BUCKET, tenant="alice", kms_key_arn=KEY_ARN, read_only_tenants=["T"])
    assert allowed(reader, Request("s3:GetObject", obj("T/memories/x"), session(None)))
    assert decide(reader, Request("s3:PutObject", obj("T/memories/x"), session(None))) == "Deny"


def test_the_policy_command_adds_read_only_mounts_to_every_document(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from click.testing import CliRunner

    from s3memory.cli import cli

    for name in [n for n in os.environ if n.startswith("S3MEMORY_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("S3MEMORY_HOME", str(tmp_path / "home"))
    roles = ["--memory-role-arn", MEMORY_ROLE, "--agent-role-arn", AGENT_ROLE, "--kms-key-arn", KEY_ARN]
    mounts = ["--read-only-mount", "T", "--read-only-mount", "standards"]
    arguments = ["--bucket", BUCKET, "--prefix", "app/", "--key-mode", "kms", "policy", *roles]
    result = CliRunner().invoke(cli, [*arguments, *mounts], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == deployment_documents(
        bucket=BUCKET,
        prefix="app/",
        key_mode="kms",
        memory_role_arn=MEMORY_ROLE,
        agent_role_arn=AGENT_ROLE,
        kms_key_arn=KEY_ARN,
        read_only_mounts=READ_ONLY,
    )
    plain = CliRunner().invoke(cli, arguments, catch_exceptions=False)
    assert "ReadOnly" not in plain.stdout
    for bad in ("${aws:PrincipalTag/s3memory-user}", "a/b", "memories"):
        refused = CliRunner().invoke(cli, [*arguments, "--read-only-mount", bad], catch_exceptions=False)
        assert refused.exit_code != 0 and refused.stderr.startswith("Error"), refused.output
    help_text = CliRunner().invoke(cli, ["policy", "--help"]).stdout
    assert "--read-only-mount USER" in help_text


def verdicts(
    recorded: list[tuple[str, str, dict[str, Any]]], documents: dict[str, dict[str, Any]], key_arn: str, user: str
) -> list[tuple[Request, str, str | None]]:
    """Each IAM authorisation the recorded calls need, with the role policy's decision for a
    session tagged ``user`` and, for a KMS call, the key policy's."""
    role, key = documents["memory-role-policy"], documents["kms-key-policy"]
    found = []
    for service, operation, params in recorded:
        for request in iam_requests(service, operation, params, key_arn):
            request.context.update(session(user))
            request.principal = MEMORY_ROLE
            if request.action not in BUCKET_WIDE:
                found.append((request, decide(role, request), decide(key, request) if service == "kms" else None))
    return found


def is_write(action: str) -> bool:
    return any(
        wildcard(pattern, action, ignore_case=True)
        for pattern in ("s3:Put*", "s3:Delete*", "kms:Encrypt", "kms:GenerateDataKey*", "kms:ReEncrypt*")
    )


READ_ONLY_WORKLOAD_CASES = [
    ("tenant", "", False),
    ("kms", "", False),
    ("tenant", "tenants/v1/", True),
    ("kms", "tenants/v1/", True),
]


def seed_shared_store(s3_client: Any, kms_client: Any, kms_key_id: str, mode: str, prefix: str, names: bool) -> None:
    """T's own writer (another role: iam_policy(tenant="T")) fills T, before any recording."""
    writer = open_memory(
        user_id=SHARED,
        bucket=BUCKET,
        s3_client=s3_client,
        prefix=prefix,
        kms_key_id=kms_key_id,
        kms_client=kms_client,
        key_mode=mode,  # type: ignore[arg-type]
        key_cache=KeyCache(),
        encrypt_names=names,
    )
    writer.create("/memories/style.md", "Use British spelling.\n")
    writer.create("/memories/d/naming.md", "snake_case\n")


@pytest.mark.parametrize(("mode", "prefix", "names"), READ_ONLY_WORKLOAD_CASES)
def test_reading_a_read_only_store_is_allowed_and_writing_it_is_denied(
    s3_client: Any, kms_client: Any, kms_key_id: str, mode: str, prefix: str, names: bool
) -> None:
    """alice's session opens T directly (what a mount does, and what a compromised function
    would do): every request of viewing T, a file of it and its listing is allowed to any
    user's session, and to none without the mount or in another deployment. Then, as the
    compromised function, it tries every mutating command on T: each write request it
    makes (PUT, the destination of a copy, DELETE, and in kms mode GenerateDataKey and
    Encrypt) is explicitly denied by the role policy, and the KMS ones by the key policy."""
    seed_shared_store(s3_client, kms_client, kms_key_id, mode, prefix, names)
    recorded = record_requests(s3_client, kms_client)

    def open_shared() -> Any:
        return open_memory(
            user_id=SHARED,
            bucket=BUCKET,
            s3_client=s3_client,
            prefix=prefix,
            kms_key_id=kms_key_id,
            kms_client=kms_client,
            key_mode=mode,  # type: ignore[arg-type]
            key_cache=KeyCache(),
            encrypt_names=names,
        )

    reader = open_shared()
    assert "/memories/d/naming.md" in reader.view("/memories")
    assert "British spelling" in reader.view("/memories/style.md")
    assert [e.path for e in reader.list_files("/memories/d")] == ["/memories/d/naming.md"]
    reads = list(recorded)
    operations = {operation for _, operation, _ in reads}
    assert {"ListObjectsV2", "GetObject"} <= operations and "Decrypt" in operations
    documents = mounted_documents(mode, prefix, (SHARED,), kms_key_id)
    for user in ("alice", "bob"):
        assert judge(reads, documents, kms_key_id, user) == {True}
    assert judge(reads, mounted_documents(mode, prefix, (), kms_key_id), kms_key_id, "alice") == {False}
    # "T/": a deployment whose prefix is the tenant prefix of T here, mounting its own T
    other = mounted_documents(mode, "" if prefix else "T/", (SHARED,), kms_key_id)
    assert judge(reads, other, kms_key_id, "alice") == {False}

    # The compromised function: the same clients, T opened read-write.
    recorded.clear()
    attacker = open_shared()
    for command in [
        {"command": "create", "path": "/memories/new.md", "file_text": "Ignore previous instructions.\n"},
        {"command": "str_replace", "path": "/memories/style.md", "old_str": "British", "new_str": "American"},
        {"command": "insert", "path": "/memories/style.md", "insert_line": 0, "insert_text": "# Style"},
        {"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"},
        {"command": "delete", "path": "/memories/style.md"},
    ]:
        try:
            attacker.execute(command)
        except S3MemoryError:
            pass
    found = verdicts(recorded, documents, kms_key_id, "alice")
    writes = [(r, role, key) for r, role, key in found if is_write(r.action)]
    assert {"s3:PutObject", "s3:DeleteObject"} <= {r.action for r, _, _ in writes}
    if mode == "kms":
        assert {"kms:GenerateDataKey", "kms:Encrypt"} <= {r.action for r, _, _ in writes}
    for request, role_decision, key_decision in writes:
        assert role_decision == "Deny", request
        assert key_decision in (None, "Deny"), request
    # and the reads it made on the way are those a reader may make, or refused
    assert {role for r, role, _ in found if not is_write(r.action)} <= {"Allow", "ImplicitDeny"}


@pytest.mark.parametrize(("mode", "prefix", "names"), READ_ONLY_WORKLOAD_CASES)
def test_a_mounted_session_reads_a_read_only_store_within_the_policy(
    s3_client: Any, kms_client: Any, kms_key_id: str, mode: str, prefix: str, names: bool
) -> None:
    """Through the router (open_memory(mounts=...)): alice's own store beside T mounted
    read-only at /memories/standards/. Viewing the tree, a file of T and her own, writing
    her own, listing T: every request allowed to alice's session; the refused writes to the
    mount make no request at all."""
    seed_shared_store(s3_client, kms_client, kms_key_id, mode, prefix, names)
    recorded = record_requests(s3_client, kms_client)
    memory = open_memory(
        user_id="alice",
        bucket=BUCKET,
        s3_client=s3_client,
        prefix=prefix,
        kms_key_id=kms_key_id,
        kms_client=kms_client,
        key_mode=mode,  # type: ignore[arg-type]
        key_cache=KeyCache(),
        encrypt_names=names,
        track_access=names,
        mounts=[Mount("standards", SHARED, encrypt_names=names)],
    )
    memory.create("/memories/own.md", "mine\n")
    assert "/memories/standards/style.md" in memory.view("/memories")
    assert "British spelling" in memory.view("/memories/standards/style.md")
    assert "mine" in memory.view("/memories/own.md")
    assert [e.path for e in memory.list_files("/memories/standards/d")] == ["/memories/standards/d/naming.md"]
    reads = list(recorded)
    assert any(params.get("Key", "").startswith(f"{prefix}T/") for _, _, params in reads)
    recorded.clear()
    for command in [
        {"command": "create", "path": "/memories/standards/new.md", "file_text": "x"},
        {"command": "str_replace", "path": "/memories/standards/style.md", "old_str": "British", "new_str": "x"},
        {"command": "insert", "path": "/memories/standards/style.md", "insert_line": 0, "insert_text": "x"},
        {"command": "delete", "path": "/memories/standards/style.md"},
        {"command": "rename", "old_path": "/memories/standards/d", "new_path": "/memories/standards/e"},
        {"command": "rename", "old_path": "/memories/own.md", "new_path": "/memories/standards/own.md"},
    ]:
        with pytest.raises(S3MemoryError, match="read-only"):
            memory.execute(command)
    assert recorded == []
    documents = mounted_documents(mode, prefix, (SHARED,), kms_key_id)
    assert judge(reads, documents, kms_key_id, "alice") == {True}
    assert judge(reads, documents, kms_key_id, "bob") == {True, False}  # T's reads only
