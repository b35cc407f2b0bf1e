"""What the memory role's policy and the key policy let a session do, judged by the policy
evaluator of ``helpers.iam``: a session tagged alice reaches alice's objects, listings and
encryption contexts and nobody else's; another deployment sharing the bucket and the key is
another namespace; and every request s3memory really makes (the six commands, key rotation,
erasure, history) is allowed to its user's session only. Who may become alice is in
test_policy_trust.py, stores mounted read-only in test_policy_read_only_mounts.py."""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest
from helpers import BUCKET, REGION
from helpers.iam import (
    ACCOUNT,
    AGENT_ROLE,
    BUCKET_ARN,
    KEY_ARN,
    MEMORY_ROLE,
    OBJECT_ACTIONS,
    OTHER_ROLE,
    ROOT,
    SHAPES,
    Request,
    allowed,
    code_accepts,
    condition_holds,
    decide,
    judge,
    kms_context,
    kms_request,
    may_assume,
    obj,
    record_requests,
    session,
    tagged,
)

from s3memory import ConfigurationError, KeyCache, S3MemoryError, open_memory
from s3memory._admin.policy import DEFAULT_TAG, deployment_documents, iam_policy, kms_key_policy
from s3memory._crypto.envelope import KMS_RESERVED_CONTEXT_KEY
from s3memory._crypto.keydocs import CONTEXT_PURPOSE
from s3memory.stores import S3Store


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


# --- a session's own objects and listings ----------------------------------------------


@pytest.fixture(scope="module", params=[(), ("T", "standards")], ids=["plain", "read-only-mounts"])
def role_policy(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The role policy, and the same with two stores mounted read-only: every test of alice's
    and bob's own permissions runs on both (test_policy_read_only_mounts.py has the rest)."""
    return iam_policy(bucket=BUCKET, kms_key_arn=KEY_ARN, read_only_tenants=request.param)


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
        # under alice/ but outside the two sub-prefixes s3memory writes: a tenant owns only those
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
    """If a tenant owned all of its prefix, user ``app`` of the deployment with prefix ""
    would own ``app/*``, the whole namespace of a deployment with prefix "app/". A tenant
    owns only its two sub-prefixes, which no other deployment's keys can fall under (the
    user id ``memories`` and prefix segments ``memories`` are refused)."""
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


# --- KMS: a session's own encryption contexts -------------------------------------------


def actions_for(shape: str) -> list[str]:
    return (
        ["kms:GenerateDataKey", "kms:Encrypt", "kms:Decrypt"] if shape == "data-key" else ["kms:Encrypt", "kms:Decrypt"]
    )


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
    """Two deployments sharing a bucket, a key and a user id are kept apart. Each
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


# --- deployments with a prefix, a literal tenant, history ---------------------------------


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
    # unchanged by stores mounted read-only
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
    # the same user id in another deployment sharing the bucket and the key gets nothing
    other = deployment_documents(
        bucket=BUCKET,
        prefix="" if prefix else "alice/",  # "alice/": where the user alice of prefix "" keeps her objects
        memory_role_arn=MEMORY_ROLE,
        agent_role_arn=AGENT_ROLE,
        kms_key_arn=kms_key_id,
        key_mode=mode,
    )
    assert judge(recorded, other, kms_key_id, "alice") == {False}


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
