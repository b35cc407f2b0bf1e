"""A small model of AWS's policy evaluation, enough to judge the documents of
``s3memory._admin.policy`` (the memory role's policy, the key policy, the trust policy and the
agent role's policy) against the requests s3memory makes. The tests that use it are
``tests/admin/test_policy_isolation.py`` (alice, bob and other deployments),
``tests/admin/test_policy_trust.py`` (who may assume the memory role, tagged as whom) and
``tests/admin/test_policy_read_only_mounts.py``; ``tests/admin/test_policy_documents.py``
checks the documents' shape, and ``test_the_evaluator_on_the_conditions_the_documents_use``
(in the isolation tests) checks this module.

What it models, after
https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html,
for one policy at a time: an explicit Deny wins, else any Allow allows, else the request is
denied (:func:`decide` tells an explicit Deny from an implicit one). Action and Resource
wildcards (``*`` and ``?``; actions case-insensitive); ``${...}`` policy variables from the
request context (an element whose variable is missing matches nothing); ``Principal``
``{"AWS": ...}`` of key and trust policies; and the condition operators the documents use:
StringEquals, StringEqualsIgnoreCase, StringLike, Bool, Null, with the ``ForAllValues:`` and
``ForAnyValue:`` qualifiers and the ``IfExists`` suffix (true when the key is absent).
Condition keys are case-insensitive, as in IAM (``kms:EncryptionContext:S3MEMORY:PATH`` is
``kms:EncryptionContext:s3memory:path``); values are not. An operator it does not know fails
the test, so it never silently allows.

What it does not model: how several policies combine (a KMS call needs the role policy and
the key policy, so :func:`judge` asks both; a test asks each document itself); NotAction,
NotResource and NotPrincipal; principals other than ``{"AWS": ...}``, which match the
request's principal ARN exactly or by ``"*"`` (an account's root ARN stands for itself, not
for every principal of the account that IAM allows, as it does in a real key policy);
policy variables with defaults and the ``${*}``, ``${?}``, ``${$}`` escapes; numeric, date,
IP address, ARN and negated operators; permission boundaries, session policies, service
control policies, KMS grants, bucket policies and ACLs.

It also says which authorisations a call needs: :func:`iam_requests` maps one S3 or KMS call
to the IAM actions and resources S3 and KMS check for it (HeadObject is s3:GetObject, a copy
reads its source and writes its destination, DeleteObjects deletes each key, a version's
read or delete is the ...Version action); :func:`record_requests` records the calls boto3
clients make and :func:`judge` decides each for a memory-role session tagged with a user;
:func:`sts_requests` and :func:`may_assume` do the same for ``sts.assume_role``. A request's
context holds only the condition keys the documents read: aws:SecureTransport,
aws:PrincipalTag/<tag>, s3:prefix, kms:EncryptionContext:<key>, kms:EncryptionContextKeys,
aws:RequestTag/<tag> and aws:TagKeys."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from helpers import BUCKET
from s3memory import ConfigurationError
from s3memory._admin.policy import DEFAULT_TAG, agent_role_policy, session_tags, trust_policy
from s3memory._crypto.envelope import CONTEXT_PATH, CONTEXT_PREFIX, CONTEXT_TENANT, KMS_RESERVED_CONTEXT_KEY
from s3memory._crypto.keydocs import CONTEXT_KEY_ID, CONTEXT_PURPOSE

__all__ = [
    "ACCOUNT",
    "AGENT_ROLE",
    "BUCKET_ARN",
    "BUCKET_WIDE",
    "KEY_ARN",
    "MEMORY_ROLE",
    "OBJECT_ACTIONS",
    "OTHER_ROLE",
    "ROOT",
    "SHAPES",
    "TAG_KEY",
    "Request",
    "allowed",
    "applies",
    "as_list",
    "code_accepts",
    "condition_holds",
    "decide",
    "iam_requests",
    "judge",
    "kms_context",
    "kms_request",
    "lookup",
    "may_assume",
    "obj",
    "record_requests",
    "session",
    "sids",
    "sts_requests",
    "substitute",
    "tagged",
    "wildcard",
]

# The account the tests deploy into: its roles, its key and the test bucket.
ACCOUNT = "123456789012"
MEMORY_ROLE = f"arn:aws:iam::{ACCOUNT}:role/s3memory-memory"
AGENT_ROLE = f"arn:aws:iam::{ACCOUNT}:role/s3memory-agent"
OTHER_ROLE = f"arn:aws:iam::{ACCOUNT}:role/someone-else"
ROOT = f"arn:aws:iam::{ACCOUNT}:root"
KEY_ARN = f"arn:aws:kms:us-east-1:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
BUCKET_ARN = f"arn:aws:s3:::{BUCKET}"
TAG_KEY = f"aws:PrincipalTag/{DEFAULT_TAG}"


# --- the evaluator ----------------------------------------------------------------------


@dataclass
class Request:
    """One authorisation IAM checks: an action on a resource, with the request context (the
    condition keys) and, for a key or trust policy, the caller's principal ARN."""

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
    """``text`` with its ``${...}`` policy variables replaced from the context; None if one is
    missing (the element then matches nothing)."""
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
    """Whether ``value`` matches ``pattern``, where ``*`` is any run of characters and ``?`` one."""
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
    """Whether a statement's principal, action, resource and every condition match."""
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


def sids(policy: dict[str, Any]) -> list[str]:
    """The Sids of a policy's statements, in order."""
    return [statement["Sid"] for statement in policy["Statement"]]


# --- requests -------------------------------------------------------------------------


def session(user: str | None, **extra: Any) -> dict[str, Any]:
    """The request context of a memory-role session tagged with ``user``, over TLS."""
    context: dict[str, Any] = {"aws:SecureTransport": "true", **extra}
    if user is not None:
        context[TAG_KEY] = user
    return context


def obj(key: str) -> str:
    """The ARN of an object of the test bucket."""
    return f"{BUCKET_ARN}/{key}"


# The object actions the role policy grants a session on its own tenant's objects.
OBJECT_ACTIONS = ["s3:GetObject", "s3:GetObjectVersion", "s3:PutObject", "s3:DeleteObject", "s3:PutObjectTagging"]

# The encryption contexts of each key mode: a tenant's wrapped keys, or a data key per object.
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


def kms_request(action: str, encryption_context: dict[str, str], user: str | None, principal: str) -> Request:
    """A KMS call on the key under ``encryption_context``, by ``principal`` in a session tagged ``user``."""
    context = session(user, **{f"kms:EncryptionContext:{k}": v for k, v in encryption_context.items()})
    context["kms:EncryptionContextKeys"] = list(encryption_context)
    return Request(action, KEY_ARN, context, principal)


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
    """An ``sts.assume_role`` request for the memory role passing ``tags`` (key, value)."""
    return {"RoleArn": MEMORY_ROLE, "Tags": [{"Key": key, "Value": value} for key, value in tags]}


def code_accepts(value: str) -> bool:
    """Whether s3memory itself would tag a session with ``value`` (session_tags, which
    assume_role_request uses): the code's gate, beside the trust policy's."""
    try:
        session_tags(value)
    except ConfigurationError:
        return False
    return True


# --- the requests s3memory really makes -------------------------------------------------


def iam_requests(service: str, operation: str, params: dict[str, Any], key_arn: str) -> list[Request]:
    """The IAM authorisations one API call needs (per the S3 and KMS authorisation docs),
    with no session yet: :func:`judge` adds the session's context and principal."""
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
    raise AssertionError(f"s3memory made a request this module does not map to IAM actions: {operation}")


def record_requests(s3_client: Any, kms_client: Any) -> list[tuple[str, str, dict[str, Any]]]:
    """A list that fills, from now on, with every call the clients make, as (service,
    operation, parameters), before botocore builds the request."""
    recorded: list[tuple[str, str, dict[str, Any]]] = []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        recorded.append((model.service_model.endpoint_prefix, model.name, dict(params)))

    s3_client.meta.events.register("before-parameter-build.s3", record)
    kms_client.meta.events.register("before-parameter-build.kms", record)
    return recorded


# Requests about the bucket itself, the same for every tenant: allowed to any user's session.
BUCKET_WIDE = {"s3:GetBucketVersioning"}


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
