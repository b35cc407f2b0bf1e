"""Least-privilege AWS policy documents for an s3memory deployment: isolation AWS enforces.

s3memory already keeps tenants apart in code (validated user ids, per-tenant prefixes,
objects sealed to their deployment, tenant and path). These documents make AWS refuse
cross-tenant and cross-deployment access as well, so a bug, a confused caller or stolen
per-user credentials cannot reach another user's objects or keys. Pure functions
returning JSON-ready dicts; no AWS call, no dependency (``s3memory policy`` prints them).

How one Lambda function gets per-user credentials
-------------------------------------------------

Two roles:

- the **agent role** (the function's own execution role) may do nothing with the bucket
  or the key. It may only ``sts:AssumeRole`` the memory role, tagging the session
  (``sts:TagSession``) with the user id the API Gateway authorizer vouched for
  (``claims.sub``), never one the model chose: :func:`agent_role_policy`;
- the **memory role** trusts only the agent role, and only for sessions carrying exactly
  the tag ``s3memory-user`` with a value that passes the user-id checks IAM can express
  (:func:`trust_policy`). Its permissions (:func:`iam_policy`) name the tenant as the
  policy variable ``${aws:PrincipalTag/s3memory-user}``: S3 objects under the tenant's two
  sub-prefixes ``{prefix}{user}/memories/`` and ``{prefix}{user}/.s3memory/`` only, and
  their versions (history: listed and read; deleted for good only with ``allow_erase``),
  listings of those only, and KMS only with the encryption context ``s3memory:tenant``
  equal to the tag and ``s3memory:prefix``, when present, equal to the deployment's prefix.

Per invocation the function calls ``sts.assume_role(**assume_role_request(role_arn=...,
user_id=sub))`` (cached per user for a few minutes: the credentials last 15) and builds the
S3 and KMS clients of the tool from the returned credentials. Every S3 and KMS request of
that invocation is then authorised by AWS against that user's tag: a request for another
user's key prefix or another tenant's KMS context is refused by AWS itself, whatever the
code asks for. The KMS key policy (:func:`kms_key_policy`) repeats the encryption-context
condition, so the key refuses other tenants even to a principal whose IAM policy is too
broad; the key is administered by another principal that cannot use it.

Stores mounted read-only (``Mount(access="read_only")``, shared reference material) are
named by their literal user ids (``read_only_tenants`` / ``read_only_mounts``): every
session may read them, and explicit Denies, which no Allow undoes, keep every session from
writing or deleting their objects or making a KMS key under their context; the trust
policy refuses a session tagged as one. So even a compromised function, which chooses the
session's user, cannot write shared memory. Their content is written by another role.

What this does not defend: the agent role chooses the user, so code running as the agent
role (a compromised function) can still assume any user's session. Use
:func:`iam_policy` with a literal ``tenant`` for a process that serves a single user.

Longer than most modules, and kept whole: the documents are one deployment (the session
policy, the key policy, the trust policy and the bucket's lifecycle refer to one another's
tags, prefixes and contexts), built from one set of validated inputs, and reviewed
together against AWS's evaluation rules (``tests/admin/test_policy_isolation.py`` evaluates
them as one, with the evaluator of ``tests/helpers/iam.py``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

from .._core.access import ACCESS_MARKER_TAGS
from .._crypto.envelope import (
    CONTEXT_PATH,
    CONTEXT_PREFIX,
    CONTEXT_TENANT,
    KMS_RESERVED_CONTEXT_KEY,
    SUITE_ID,
    deployment_name,
)
from .._crypto.keydocs import CONTEXT_KEY_ID, CONTEXT_PURPOSE
from .._errors import ConfigurationError
from .._layout import (
    INTERNAL_FOLDER,
    KEY_DOCUMENT_PURPOSES,
    MEMORY_FOLDER,
    NAMES_KEY,
    TENANT_KEY,
    TenantLayout,
)
from .._paths import MAX_TENANT_LENGTH, RESERVED_SEGMENT, validate_prefix, validate_tenant

POLICY_VERSION = "2012-10-17"
DEFAULT_TAG = "s3memory-user"
"""The session tag (and principal tag) that names the user."""
PRINCIPAL_TAG_TENANT = "${aws:PrincipalTag/" + DEFAULT_TAG + "}"
((_MARKER_TAG_KEY, _MARKER_TAG_VALUE),) = ACCESS_MARKER_TAGS.items()
ACCESS_MARKER_TAG = {"Key": _MARKER_TAG_KEY, "Value": _MARKER_TAG_VALUE}
"""The object tag of access markers (``{user}/.s3memory/access/...``), expired by lifecycle."""
KEY_MODES = ("tenant", "kms")  # _factory's, again: importing it makes this module heavy (test_options)
SESSION_SECONDS = 900  # the shortest session STS grants

# The two shapes of encryption context s3memory sends to KMS (see _keys and _names):
# a key wrapped for the tenant (its tenant key in tenant mode, its names key in either
# mode): Encrypt/Decrypt with {tenant, prefix, purpose, kid}; and, in kms mode, a data key
# per object: GenerateDataKey/Encrypt (rename)/Decrypt with {tenant, prefix, path,
# aws:x-amz-cek-alg}. Objects and key documents written before the deployment was bound
# (binding version 1) lack s3memory:prefix: the policies accept its absence for Decrypt
# only, so no session can make new unbound keys that another deployment would accept.
_WRAPPED_KEY_ACTIONS = ["kms:Encrypt", "kms:Decrypt"]
_WRAPPED_KEY_CONTEXT = [CONTEXT_TENANT, CONTEXT_PREFIX, CONTEXT_PURPOSE, CONTEXT_KEY_ID]
_WRAPPED_KEY_PURPOSES = list(KEY_DOCUMENT_PURPOSES)
_DATA_KEY_ACTIONS = ["kms:GenerateDataKey", "kms:Encrypt", "kms:Decrypt"]
_DATA_KEY_CONTEXT = [CONTEXT_TENANT, CONTEXT_PREFIX, CONTEXT_PATH, KMS_RESERVED_CONTEXT_KEY]
# What s3memory writes under {prefix}{tenant}/, and so all a tenant's session may touch
# (_layout.TenantLayout): memory files and internal objects. No deployment's namespace can
# contain another's (the invariant of TenantLayout): no tenant id or prefix segment starts
# with ".", and "memories" is neither a tenant id nor a prefix segment after the first.
TENANT_SUBPREFIXES = (MEMORY_FOLDER, INTERNAL_FOLDER)
# What a session may read of a store mounted read-only (``Mount(access="read_only")``): its
# memory files, the key documents that open them (the tenant key; with encrypted names, the
# names key) and its sealed search index. Not its history, history key, intents, access
# markers or pending writes: a mount shows no history and records nothing.
READ_ONLY_KEY_DOCUMENTS = (TENANT_KEY, NAMES_KEY)
# What no session may do to a read-only store: any write, tag, ACL, retention or delete of
# an object or of one of its versions, and restoring an archived one.
_READ_ONLY_DENIED_S3_ACTIONS = ["s3:PutObject*", "s3:DeleteObject*", "s3:RestoreObject"]
# ... nor make a key under its tenant's encryption context (a data key, a wrapped key, or a
# ciphertext re-encrypted to it): what sealing a forged object for that store would need.
_READ_ONLY_DENIED_KMS_ACTIONS = ["kms:Encrypt", "kms:GenerateDataKey*", "kms:ReEncrypt*"]
_KEY_ADMIN_ACTIONS = [
    "kms:Create*",
    "kms:Describe*",
    "kms:Enable*",
    "kms:List*",
    "kms:Put*",
    "kms:Update*",
    "kms:Revoke*",
    "kms:Disable*",
    "kms:Get*",
    "kms:Delete*",
    "kms:TagResource",
    "kms:UntagResource",
    "kms:ScheduleKeyDeletion",
    "kms:CancelKeyDeletion",
]

# IAM tag keys allow more (Unicode letters, spaces); inside a policy variable keep to ASCII.
_TAG_RE = re.compile(r"[A-Za-z0-9_.:/=+@-]{1,128}")
_TAG_VARIABLE_RE = re.compile(r"\$\{aws:PrincipalTag/([^}]*)\}")
_PARTITION_RE = re.compile(r"aws(-[a-z]+)*")
_ACCOUNT_RE = re.compile(r"[0-9]{12}")
_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_IPV4_RE = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+")
_ROLE_ARN_RE = re.compile(r"arn:(aws(?:-[a-z]+)*):iam::([0-9]{12}):role/[A-Za-z0-9_+=,.@/-]{1,576}")
_ADMIN_ARN_RE = re.compile(r"arn:(aws(?:-[a-z]+)*):iam::([0-9]{12}):(?:root|(?:role|user)/[A-Za-z0-9_+=,.@/-]{1,576})")
_KMS_KEY_ARN_RE = re.compile(r"arn:(aws(?:-[a-z]+)*):kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]{1,64}")
_SESSION_NAME_MAX = 64

# What the trust policy can check of a tag value, IAM conditions having no regex. AWS
# accepts as a tag value up to 256 Unicode letters, digits and spaces and _ . : / = + - @
# (STS ``Tag.Value``: [\p{L}\p{Z}\p{N}_.:/=+\-@]*), so never * ? $ { } or a control
# character. A user id (_paths.validate_tenant) is 1 to 128 ASCII letters, digits and
# . _ @ + = -, starting with a letter or digit, and not "memories" in any case. The trust
# policy refuses every ASCII value that breaks that rule: StringLike one containing : / or
# a space, one starting with . _ @ + = -, one longer than 128 characters;
# StringEqualsIgnoreCase the reserved id; the Allow statements require a non-empty value.
# What it cannot express is "ASCII only": non-ASCII letters, digits and spaces are refused
# by the code alone.
_NOT_IN_USER_IDS = ":/ "  # in AWS tag values but never in a user id
_NOT_FIRST_IN_USER_IDS = "._@+=-"  # in user ids, but never first
_INVALID_USER_ID_PATTERNS = [
    *(f"*{c}*" for c in _NOT_IN_USER_IDS),
    *(f"{c}*" for c in _NOT_FIRST_IN_USER_IDS),
    "?" * (MAX_TENANT_LENGTH + 1) + "*",
]


# --- validation ---------------------------------------------------------------------


def validate_tag(tag: object) -> str:
    """An ASCII IAM tag key usable in ``${aws:PrincipalTag/...}``; not in the ``aws:`` namespace."""
    if not isinstance(tag, str) or not _TAG_RE.fullmatch(tag) or tag.lower().startswith("aws:"):
        raise ConfigurationError(
            f"tag {tag!r} is not allowed: use 1 to 128 ASCII letters, digits and _ . : / = + @ -, "
            "not starting with 'aws:'"
        )
    return tag


def principal_tag(tag: str = DEFAULT_TAG) -> str:
    """The policy variable ``${aws:PrincipalTag/<tag>}``: the tenant, as AWS knows it per request."""
    return "${aws:PrincipalTag/" + validate_tag(tag) + "}"


def _tenant(tenant: object) -> tuple[str, str | None]:
    """(the tenant as written in a policy, the tag name if it is a principal-tag variable)."""
    if isinstance(tenant, str) and tenant.startswith("${"):
        match = _TAG_VARIABLE_RE.fullmatch(tenant)
        if match is None:
            variable = "${aws:PrincipalTag/<tag>}"
            raise ConfigurationError(f"tenant {tenant!r} is not allowed: give a user id or {variable}")
        return tenant, validate_tag(match.group(1))
    return validate_tenant(tenant), None


def _bucket(bucket: object) -> str:
    """A general-purpose S3 bucket name (the rules S3 enforces at creation)."""
    if (
        not isinstance(bucket, str)
        or not _BUCKET_RE.fullmatch(bucket)
        or ".." in bucket
        or ".-" in bucket
        or "-." in bucket
        or _IPV4_RE.fullmatch(bucket)
        or bucket.startswith(("xn--", "sthree-", "amzn-s3-demo-"))
        or bucket.endswith(("-s3alias", "--ol-s3", "--x-s3", ".mrap"))
    ):
        raise ConfigurationError(f"bucket {bucket!r} is not a valid S3 bucket name")
    return bucket


def _partition(partition: object) -> str:
    if not isinstance(partition, str) or not _PARTITION_RE.fullmatch(partition):
        raise ConfigurationError(f"partition {partition!r} is not an AWS partition (aws, aws-cn, aws-us-gov...)")
    return partition


def _arn(value: object, pattern: re.Pattern[str], what: str) -> re.Match[str]:
    match = pattern.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ConfigurationError(f"{what} {value!r} is not a valid ARN")
    return match


def _key_mode(key_mode: object) -> str:
    if key_mode not in KEY_MODES:
        raise ConfigurationError(f"key_mode must be one of {', '.join(KEY_MODES)}, not {key_mode!r}")
    return str(key_mode)


def _read_only_tenants(tenants: object, *, what: str = "read_only_tenants") -> list[str]:
    """The literal user ids of stores mounted read-only: validated, in order, each once.

    A policy variable (``${aws:PrincipalTag/...}``) is refused: a store is read-only for
    every session, so it is named, never derived from the session.
    """
    if isinstance(tenants, (str, bytes)) or not isinstance(tenants, Iterable):
        raise ConfigurationError(f"{what} must be a list of user ids, not {tenants!r}")
    checked: list[str] = []
    for tenant in tenants:
        if isinstance(tenant, str) and "${" in tenant:
            raise ConfigurationError(
                f"{what}: {tenant!r} is a policy variable; a read-only store is named by its literal user id"
            )
        if validate_tenant(tenant) not in checked:
            checked.append(tenant)
    return checked


def _days(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{what} must be a positive whole number of days, not {value!r}")
    return value


# --- statements -----------------------------------------------------------------------


def _kms_statement(
    sid: str,
    actions: list[str],
    context_keys: list[str],
    fixed: dict[str, Any],
    tenant: str | list[str],
    prefix: str,
    resource: str,
    *,
    making: bool = True,
) -> list[dict[str, Any]]:
    """Two statements: making keys needs this deployment in the context; reading them needs
    it when present (it is absent in what was written before deployments were bound), so
    another deployment's objects and keys, under the same bucket, key and user id, are
    refused, and nothing new can be made unbound. Without ``making``, only the second
    (``{sid}Read``, ``kms:Decrypt``): what a read-only store's readers get."""
    deployment = {f"kms:EncryptionContext:{CONTEXT_PREFIX}": deployment_name(prefix)}
    context_shape = {"ForAllValues:StringEquals": {"kms:EncryptionContextKeys": list(context_keys)}}
    tenant_and_fixed = {f"kms:EncryptionContext:{CONTEXT_TENANT}": tenant, **fixed}
    makes = [action for action in actions if action != "kms:Decrypt"]
    statements = []
    if making:
        statements.append(
            {
                "Sid": sid,
                "Effect": "Allow",
                "Action": makes,
                "Resource": resource,
                "Condition": {"StringEquals": {**tenant_and_fixed, **deployment}, **context_shape},
            }
        )
    if "kms:Decrypt" in actions:
        statements.append(
            {
                "Sid": sid + "Read",
                "Effect": "Allow",
                "Action": ["kms:Decrypt"],
                "Resource": resource,
                "Condition": {
                    "StringEquals": tenant_and_fixed,
                    "StringEqualsIfExists": deployment,
                    **context_shape,
                },
            }
        )
    return statements


def _kms_statements(tenant: str, prefix: str, key_mode: str, resource: str) -> list[dict[str, Any]]:
    """KMS use only under this tenant's and deployment's encryption context, and only in
    the shapes s3memory sends."""
    wrapped = _kms_statement(
        "TenantWrappedKeys",
        _WRAPPED_KEY_ACTIONS,
        _WRAPPED_KEY_CONTEXT,
        {f"kms:EncryptionContext:{CONTEXT_PURPOSE}": list(_WRAPPED_KEY_PURPOSES)},
        tenant,
        prefix,
        resource,
    )
    if key_mode == "tenant":
        return wrapped
    data = _kms_statement(
        "TenantDataKeys",
        _DATA_KEY_ACTIONS,
        _DATA_KEY_CONTEXT,
        {f"kms:EncryptionContext:{KMS_RESERVED_CONTEXT_KEY}": str(SUITE_ID)},
        tenant,
        prefix,
        resource,
    )
    return [*data, *wrapped]


def _read_only_kms_statements(tenants: list[str], prefix: str, key_mode: str, resource: str) -> list[dict[str, Any]]:
    """For stores mounted read-only: ``kms:Decrypt`` only, under their tenants' and this
    deployment's context, in the shapes s3memory sends in ``key_mode`` (a key document's
    wrapped key: the tenant key or the names key; in kms mode, an object's data key, which
    is also the shape of the sealed search index's). Never Encrypt or GenerateDataKey."""
    wrapped = _kms_statement(
        "ReadOnlyMountKeys",
        ["kms:Decrypt"],
        _WRAPPED_KEY_CONTEXT,
        {f"kms:EncryptionContext:{CONTEXT_PURPOSE}": list(READ_ONLY_KEY_DOCUMENTS)},
        list(tenants),
        prefix,
        resource,
        making=False,
    )
    if key_mode == "tenant":
        return wrapped
    data = _kms_statement(
        "ReadOnlyMountDataKeys",
        ["kms:Decrypt"],
        _DATA_KEY_CONTEXT,
        {f"kms:EncryptionContext:{KMS_RESERVED_CONTEXT_KEY}": str(SUITE_ID)},
        list(tenants),
        prefix,
        resource,
        making=False,
    )
    return [*data, *wrapped]


def _read_only_kms_deny(tenants: list[str], resource: str) -> dict[str, Any]:
    """No key made under a read-only store's tenant context, in any deployment or shape."""
    return {
        "Sid": "DenyKeyMakingForReadOnlyMounts",
        "Effect": "Deny",
        "Action": list(_READ_ONLY_DENIED_KMS_ACTIONS),
        "Resource": resource,
        "Condition": {"StringEquals": {f"kms:EncryptionContext:{CONTEXT_TENANT}": list(tenants)}},
    }


def _read_only_s3_statements(
    tenants: list[str], prefix: str, bucket_arn: str
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Reading read-only stores' objects (two Allows), and writing or deleting them (a Deny).

    Each store is the :class:`TenantLayout` of its tenant in this deployment. The reads:
    ``s3:GetObject`` (also HEAD) of its memory files, of the key documents that open them
    and of its search index, never of a version; ``s3:ListBucket`` with ``s3:prefix`` at or
    under its memory folder, or exactly a key document or under the index folder (what the
    store lists to tell a missing object from a refused one, ``S3Store._missing_or_raise``).
    The Deny covers both sub-prefixes, never ``{prefix}{tenant}/`` itself, which could hold
    another deployment's objects.
    """
    layouts = [TenantLayout(tenant, prefix) for tenant in tenants]
    # The same patterns for both: "*" also matches nothing (the folder itself); a key
    # document is named exactly.
    readable = [
        key
        for layout in layouts
        for key in (
            f"{layout.memory_prefix}*",
            *(layout.key_document(purpose) for purpose in READ_ONLY_KEY_DOCUMENTS),
            f"{layout.index_prefix}*",
        )
    ]
    reads: list[dict[str, Any]] = [
        {
            "Sid": "ReadOnlyMountObjects",
            "Effect": "Allow",
            "Action": ["s3:GetObject"],
            "Resource": [f"{bucket_arn}/{key}" for key in readable],
        },
        {
            "Sid": "ReadOnlyMountListing",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": bucket_arn,
            "Condition": {"StringLike": {"s3:prefix": readable}},
        },
    ]
    deny: dict[str, Any] = {
        "Sid": "DenyWritesToReadOnlyMounts",
        "Effect": "Deny",
        "Action": list(_READ_ONLY_DENIED_S3_ACTIONS),
        "Resource": [f"{bucket_arn}/{owned}*" for layout in layouts for owned in layout.owned_prefixes],
    }
    return reads, deny


def _with_principal(statement: dict[str, Any], principal: str) -> dict[str, Any]:
    head = {"Sid": statement["Sid"], "Effect": statement["Effect"], "Principal": {"AWS": principal}}
    return {**head, **statement}


def iam_policy(
    *,
    bucket: str,
    prefix: str = "",
    kms_key_arn: str | None = None,
    tenant: str = PRINCIPAL_TAG_TENANT,
    key_mode: str = "tenant",
    allow_erase: bool = False,
    partition: str = "aws",
    read_only_tenants: Iterable[str] = (),
) -> dict[str, Any]:
    """The identity policy of the role s3memory runs as, scoped to one tenant.

    The tenant's objects are the two sub-prefixes s3memory writes,
    ``{prefix}{tenant}/memories/`` and ``{prefix}{tenant}/.s3memory/``: objects under
    them, and listings whose ``s3:prefix`` is one of them or lies below one. Nothing else
    under ``{prefix}{tenant}/`` (where another deployment's prefix could begin) is granted.
    History is granted as the objects are: reading a version (``s3:GetObjectVersion``) and
    listing versions (``s3:ListBucketVersions``) of those objects only, and whether the
    bucket keeps versions (``s3:GetBucketVersioning``, the bucket's one setting); deleting a
    version for good (``s3:DeleteObjectVersion``, to redact history or erase a user) only
    with ``allow_erase``.

    Args:
        bucket: the memory bucket.
        prefix: s3memory's key prefix (``""`` or ending in ``/``), as given to the tool.
        kms_key_arn: the KMS key (its key ARN, not an alias) if one wraps the keys; the
            statement lets the role use it only under the tenant's encryption context.
            Without it, no KMS permission (a local master key, or a key policy that grants
            the role directly, as :func:`kms_key_policy` does).
        tenant: a literal user id (a role for one user), or ``${aws:PrincipalTag/<tag>}``
            (one role for every user, each session tagged with its user).
        key_mode: as configured. ``"tenant"``: Encrypt/Decrypt of keys wrapped for the
            tenant (its tenant key, and its names key with ``encrypt_names``), context
            ``{s3memory:tenant, s3memory:prefix, s3memory:purpose, s3memory:kid}``.
            ``"kms"``: also GenerateDataKey/Encrypt/Decrypt of a data key per object,
            context ``{s3memory:tenant, s3memory:prefix, s3memory:path,
            aws:x-amz-cek-alg=115}``. ``s3memory:prefix`` is the deployment's prefix
            (``/`` for the empty one) when present; contexts without it (what s3memory
            wrote before it bound the deployment) are accepted too.
        allow_erase: also allow deleting object versions for good under the tenant's
            sub-prefixes: to erase a user from a versioned bucket, or to redact one version
            of a file from its history. A role with it can destroy the history that lets a
            user restore what was overwritten or deleted: for an administrative role, not
            for the role agents run as.
        partition: the AWS partition of the ARNs.
        read_only_tenants: literal user ids of stores mounted read-only
            (``Mount(access="read_only")``) in this deployment. Every session may read them
            (``s3:GetObject`` of their memory files, the tenant and names key documents and
            the search index under ``.s3memory/index/``; ``s3:ListBucket`` there; and, with
            ``kms_key_arn``, ``kms:Decrypt`` only, under their tenant's and this
            deployment's context), and is explicitly denied writing, tagging or deleting
            anything under their two sub-prefixes (any version) and making a key under their
            tenant's context (Encrypt, GenerateDataKey*, ReEncrypt*). No history, no
            listing of versions or of ``.s3memory/``. Each store is written by another role
            (this function with ``tenant="<its id>"``); pair this with
            :func:`trust_policy`'s ``reserved_tenants`` so that no session is tagged as one.

    Raises:
        ConfigurationError: for an invalid bucket name, prefix, tenant, tag name, key ARN,
            key mode or read-only tenant (or the policy's own literal tenant among them).
    """
    bucket = _bucket(bucket)
    prefix = validate_prefix(prefix)
    tenant, tag = _tenant(tenant)
    key_mode = _key_mode(key_mode)
    partition = _partition(partition)
    read_only = _read_only_tenants(read_only_tenants)
    if tenant in read_only:
        raise ConfigurationError(f"tenant {tenant!r} cannot be read-only to itself: its own role writes it")
    bucket_arn = f"arn:{partition}:s3:::{bucket}"
    tenant_prefixes = [f"{prefix}{tenant}/{sub}" for sub in TENANT_SUBPREFIXES]
    tenant_objects = [f"{bucket_arn}/{p}*" for p in tenant_prefixes]
    # "*" also matches nothing: each sub-prefix itself, and any prefix below it.
    list_condition = {"StringLike": {"s3:prefix": [f"{p}*" for p in tenant_prefixes]}}

    statements: list[dict[str, Any]] = [
        {
            # GetObject also authorises HeadObject and the source of CopyObject; PutObject the
            # destination of CopyObject; DeleteObject each key of DeleteObjects;
            # PutObjectTagging a PUT with tags (access markers); GetObjectVersion a GET or
            # HEAD of one version (history).
            "Sid": "TenantObjects",
            "Effect": "Allow",
            "Action": [
                "s3:GetObject",
                "s3:GetObjectVersion",
                "s3:PutObject",
                "s3:PutObjectTagging",
                "s3:DeleteObject",
            ],
            "Resource": tenant_objects,
        },
        {
            # ListBucketVersions: ListObjectVersions (history), under the same prefixes.
            "Sid": "ListTenantPrefix",
            "Effect": "Allow",
            "Action": ["s3:ListBucket", "s3:ListBucketVersions"],
            "Resource": bucket_arn,
            "Condition": list_condition,
        },
    ]
    if kms_key_arn is not None:
        key_partition = _arn(kms_key_arn, _KMS_KEY_ARN_RE, "kms_key_arn").group(1)
        if key_partition != partition:
            raise ConfigurationError(f"kms_key_arn {kms_key_arn!r} is not in the partition {partition!r}")
        statements += _kms_statements(tenant, prefix, key_mode, kms_key_arn)
    # Whether the bucket keeps versions (S3Store.keeps_versions): the bucket's setting, the
    # same for every tenant, and no tenant's data.
    statements.append(
        {"Sid": "BucketVersioning", "Effect": "Allow", "Action": "s3:GetBucketVersioning", "Resource": bucket_arn}
    )
    if allow_erase:
        statements.append(
            {
                # DeleteObject with a VersionId, and each versioned key of DeleteObjects.
                "Sid": "EraseTenantVersions",
                "Effect": "Allow",
                "Action": "s3:DeleteObjectVersion",
                "Resource": tenant_objects,
            }
        )
    if read_only:
        # Every session of the role, whoever it is tagged as: reads granted, writes denied.
        reads, denied_writes = _read_only_s3_statements(read_only, prefix, bucket_arn)
        statements += reads
        if kms_key_arn is not None:
            statements += _read_only_kms_statements(read_only, prefix, key_mode, kms_key_arn)
        statements.append(denied_writes)
        if kms_key_arn is not None:
            statements.append(_read_only_kms_deny(read_only, kms_key_arn))
    statements.append(
        {
            "Sid": "DenyInsecureTransport",
            "Effect": "Deny",
            "Action": "s3:*",
            "Resource": [bucket_arn, f"{bucket_arn}/*"],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }
    )
    if tag is not None:
        # Without the tag the variable matches nothing anyway; say so explicitly.
        statements.append(
            {
                "Sid": "DenyUntaggedSessions",
                "Effect": "Deny",
                "Action": ["s3:*", "kms:*"],
                "Resource": "*",
                "Condition": {"Null": {f"aws:PrincipalTag/{tag}": "true"}},
            }
        )
    return {"Version": POLICY_VERSION, "Statement": statements}


def kms_key_policy(
    *,
    account_id: str,
    user_role_arn: str,
    admin_principal_arn: str | None = None,
    tenant: str = PRINCIPAL_TAG_TENANT,
    key_mode: str = "tenant",
    prefix: str = "",
    read_only_tenants: Iterable[str] = (),
) -> dict[str, Any]:
    """The key policy of the KMS key that wraps s3memory's keys.

    The administrator (by default the account, ``arn:...:iam::{account_id}:root``, which
    lets IAM policies delegate administration) may manage the key but not use it; the
    memory role may use it only under the tenant's encryption context
    (``kms:EncryptionContext:s3memory:tenant``), under the deployment's
    (``kms:EncryptionContext:s3memory:prefix`` equal to ``prefix``, ``/`` for the empty
    one, when the context has it), and only in the shapes of context s3memory sends in
    ``key_mode`` (``kms:EncryptionContextKeys``, fixed purposes and algorithm; see
    :func:`iam_policy`). Nobody else may use it. This is what makes KMS itself refuse to
    unwrap another tenant's keys, or another deployment's. (An administrator can still
    change the policy or create grants: administering a key is, indirectly, the power to
    use it.) A key shared by deployments with different prefixes needs a statement per
    deployment (each role's, from this function with its prefix).

    With ``read_only_tenants`` (see :func:`iam_policy`), the memory role may also
    ``kms:Decrypt``, and only that, under those tenants' and this deployment's context, and
    is explicitly denied making a key under those tenants' context. The role that writes a
    read-only store needs its own statements in this policy (this function with its
    ``user_role_arn`` and ``tenant``): the Deny names only ``user_role_arn``.

    Raises:
        ConfigurationError: for an invalid account id, ARN, tenant, prefix, key mode or
            read-only tenant.
    """
    if not isinstance(account_id, str) or not _ACCOUNT_RE.fullmatch(account_id):
        raise ConfigurationError(f"account_id {account_id!r} must be 12 digits")
    partition = _arn(user_role_arn, _ROLE_ARN_RE, "user_role_arn").group(1)
    if admin_principal_arn is None:
        admin_principal_arn = f"arn:{partition}:iam::{account_id}:root"
    admin = _arn(admin_principal_arn, _ADMIN_ARN_RE, "admin_principal_arn")
    if admin.group(2) != account_id:
        raise ConfigurationError(f"admin_principal_arn {admin_principal_arn!r} is not in the account {account_id}")
    if admin_principal_arn == user_role_arn:
        raise ConfigurationError("the key's administrator and its user must be different principals")
    tenant, _ = _tenant(tenant)
    key_mode = _key_mode(key_mode)
    prefix = validate_prefix(prefix)
    read_only = _read_only_tenants(read_only_tenants)
    if tenant in read_only:
        raise ConfigurationError(f"tenant {tenant!r} cannot be read-only to itself: its own role writes it")
    read_only_statements = (
        [*_read_only_kms_statements(read_only, prefix, key_mode, "*"), _read_only_kms_deny(read_only, "*")]
        if read_only
        else []
    )
    return {
        "Version": POLICY_VERSION,
        "Statement": [
            {
                "Sid": "KeyAdministration",
                "Effect": "Allow",
                "Principal": {"AWS": admin_principal_arn},
                "Action": list(_KEY_ADMIN_ACTIONS),
                "Resource": "*",
            },
            *(
                _with_principal(statement, user_role_arn)
                for statement in [*_kms_statements(tenant, prefix, key_mode, "*"), *read_only_statements]
            ),
        ],
    }


# --- sessions: one role, a session per user --------------------------------------------


def session_tags(user_id: str, *, tag: str = DEFAULT_TAG) -> list[dict[str, str]]:
    """The ``Tags`` of ``sts.assume_role`` that make ``${aws:PrincipalTag/<tag>}`` the user."""
    return [{"Key": validate_tag(tag), "Value": validate_tenant(user_id)}]


def assume_role_request(
    *, role_arn: str, user_id: str, tag: str = DEFAULT_TAG, duration_seconds: int = SESSION_SECONDS
) -> dict[str, Any]:
    """Keyword arguments for ``sts.assume_role``: the memory role, as ``user_id``.

    The session name carries the user id too (it shows in CloudTrail), or a hash of it
    when it would exceed the 64 characters STS allows.
    """
    _arn(role_arn, _ROLE_ARN_RE, "role_arn")
    tags = session_tags(user_id, tag=tag)
    if isinstance(duration_seconds, bool) or not isinstance(duration_seconds, int) or duration_seconds < 900:
        raise ConfigurationError("duration_seconds must be a whole number of seconds, at least 900")
    name = f"s3memory-{user_id}"
    if len(name) > _SESSION_NAME_MAX:
        name = "s3memory-" + hashlib.sha256(user_id.encode()).hexdigest()[:32]
    return {"RoleArn": role_arn, "RoleSessionName": name, "DurationSeconds": duration_seconds, "Tags": tags}


def trust_policy(
    *, agent_role_arn: str, tag: str = DEFAULT_TAG, reserved_tenants: Iterable[str] = ()
) -> dict[str, Any]:
    """The memory role's trust policy: only the agent role, and only tagging one valid user.

    ``sts:AssumeRole`` and ``sts:TagSession`` are allowed only when the request sets the tag
    to a non-empty value, and ``sts:TagSession`` only when it sets no other tag, so every
    session of the memory role names exactly one user, set by the request itself (not by
    a tag on the role, which an untagged request would inherit). Both are denied when
    the value is not a user id as far as IAM conditions can tell: it contains ``:``, ``/``
    or a space, starts with one of ``. _ @ + = -``, is longer than 128 characters, or is
    the reserved ``memories`` in any case. With the characters AWS allows in a tag value,
    that leaves exactly the valid user ids plus values with non-ASCII letters, digits or
    spaces, which only the code (:func:`session_tags`, ``validate_tenant``) refuses.

    ``reserved_tenants`` (literal user ids: the stores mounted read-only, see
    :func:`iam_policy`) are denied too, exactly (tenant ids are case-sensitive), so no
    session of the memory role is tagged as a shared store: its own statements would let
    it write the store.
    """
    _arn(agent_role_arn, _ROLE_ARN_RE, "agent_role_arn")
    tag = validate_tag(tag)
    reserved = _read_only_tenants(reserved_tenants, what="reserved_tenants")
    principal = {"AWS": agent_role_arn}
    request_tag = f"aws:RequestTag/{tag}"
    reserved_statements: list[dict[str, Any]] = []
    if reserved:
        reserved_statements.append(
            {
                "Sid": "DenyReadOnlyMountTenants",
                "Effect": "Deny",
                "Principal": principal,
                "Action": ["sts:AssumeRole", "sts:TagSession"],
                "Condition": {"StringEquals": {request_tag: reserved}},
            }
        )
    return {
        "Version": POLICY_VERSION,
        "Statement": [
            {
                "Sid": "AgentAssumesRoleAsOneUser",
                "Effect": "Allow",
                "Principal": principal,
                "Action": "sts:AssumeRole",
                "Condition": {"StringLike": {request_tag: "?*"}},
            },
            {
                "Sid": "AgentTagsSessionWithTheUser",
                "Effect": "Allow",
                "Principal": principal,
                "Action": "sts:TagSession",
                "Condition": {
                    "StringLike": {request_tag: "?*"},
                    "ForAllValues:StringEquals": {"aws:TagKeys": [tag]},
                },
            },
            {
                "Sid": "DenyInvalidUserIds",
                "Effect": "Deny",
                "Principal": principal,
                "Action": ["sts:AssumeRole", "sts:TagSession"],
                "Condition": {"StringLike": {request_tag: list(_INVALID_USER_ID_PATTERNS)}},
            },
            {
                "Sid": "DenyReservedUserIds",
                "Effect": "Deny",
                "Principal": principal,
                "Action": ["sts:AssumeRole", "sts:TagSession"],
                "Condition": {"StringEqualsIgnoreCase": {request_tag: RESERVED_SEGMENT}},
            },
            *reserved_statements,
        ],
    }


def agent_role_policy(*, memory_role_arn: str) -> dict[str, Any]:
    """The agent (function) role's only memory permission: assume the memory role, tagged."""
    _arn(memory_role_arn, _ROLE_ARN_RE, "memory_role_arn")
    return {
        "Version": POLICY_VERSION,
        "Statement": [
            {
                "Sid": "AssumeMemoryRoleAsTheUser",
                "Effect": "Allow",
                "Action": ["sts:AssumeRole", "sts:TagSession"],
                "Resource": memory_role_arn,
            }
        ],
    }


# --- the bucket -----------------------------------------------------------------------


def lifecycle_configuration(
    *,
    prefix: str = "",
    noncurrent_days: int = 30,
    access_marker_days: int = 400,
    abort_multipart_days: int = 7,
) -> dict[str, Any]:
    """``LifecycleConfiguration`` for ``s3.put_bucket_lifecycle_configuration`` (versioned bucket).

    Under ``prefix``: noncurrent versions expire after ``noncurrent_days`` (30, as the
    managed memory stores keep them: what ``history``, ``read_version`` and ``restore`` can
    reach; a bucket writer can replay an old version until then: see SECURITY.md), delete
    markers left alone are removed, unfinished multipart uploads are aborted. Access markers
    (objects tagged ``s3memory=access``) expire ``access_marker_days`` after their last write.
    Give ``rotate_tenant_key`` the same ``noncurrent_days``: it keeps a former tenant key
    until the versions under it have expired (it checks before dropping one, so a longer
    retention only keeps keys longer).

    Raises:
        ConfigurationError: a prefix or a number of days (a positive whole number) that is not valid.
    """
    prefix = validate_prefix(prefix)
    noncurrent_days = _days(noncurrent_days, "noncurrent_days")
    access_marker_days = _days(access_marker_days, "access_marker_days")
    abort_multipart_days = _days(abort_multipart_days, "abort_multipart_days")
    tag = dict(ACCESS_MARKER_TAG)
    marker_filter: dict[str, Any] = {"And": {"Prefix": prefix, "Tags": [tag]}} if prefix else {"Tag": tag}
    return {
        "Rules": [
            {
                "ID": "s3memory-old-versions",
                "Status": "Enabled",
                "Filter": {"Prefix": prefix},
                "NoncurrentVersionExpiration": {"NoncurrentDays": noncurrent_days},
                "Expiration": {"ExpiredObjectDeleteMarker": True},
                "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": abort_multipart_days},
            },
            {
                "ID": "s3memory-access-markers",
                "Status": "Enabled",
                "Filter": marker_filter,
                "Expiration": {"Days": access_marker_days},
            },
        ]
    }


# --- everything at once -----------------------------------------------------------------


def deployment_documents(
    *,
    bucket: str,
    memory_role_arn: str,
    agent_role_arn: str,
    prefix: str = "",
    kms_key_arn: str | None = None,
    use_kms: bool = True,
    key_mode: str = "tenant",
    admin_principal_arn: str | None = None,
    tag: str = DEFAULT_TAG,
    allow_erase: bool = False,
    noncurrent_days: int = 30,
    access_marker_days: int = 400,
    read_only_mounts: Iterable[str] = (),
) -> dict[str, dict[str, Any]]:
    """Every document of a deployment with one memory role shared by all users, by name.

    - ``memory-role-policy``: :func:`iam_policy` with ``${aws:PrincipalTag/<tag>}``;
    - ``memory-role-trust-policy``: :func:`trust_policy` for the agent role;
    - ``agent-role-policy``: :func:`agent_role_policy` (add it to the function's role);
    - ``kms-key-policy``: :func:`kms_key_policy` (unless ``use_kms`` is false: a local
      master key);
    - ``bucket-lifecycle``: :func:`lifecycle_configuration`.

    The account and partition are those of ``memory_role_arn``. ``kms_key_arn`` adds the
    KMS statement to the role policy as well (the key policy alone already grants it).
    ``read_only_mounts`` (literal user ids of stores mounted read-only by any user of the
    deployment) go to the role policy and the key policy as ``read_only_tenants`` and to
    the trust policy as ``reserved_tenants``.

    Raises:
        ConfigurationError: for any invalid name, ARN, prefix or number.
    """
    match = _arn(memory_role_arn, _ROLE_ARN_RE, "memory_role_arn")
    partition, account_id = match.group(1), match.group(2)
    agent_partition = _arn(agent_role_arn, _ROLE_ARN_RE, "agent_role_arn").group(1)
    if agent_partition != partition:
        raise ConfigurationError("agent_role_arn and memory_role_arn must be in the same partition")
    if agent_role_arn == memory_role_arn:
        raise ConfigurationError("the agent role and the memory role must be different roles")
    if kms_key_arn is not None and not use_kms:
        raise ConfigurationError("kms_key_arn was given with use_kms=False")
    tenant = principal_tag(tag)
    read_only = _read_only_tenants(read_only_mounts, what="read_only_mounts")
    documents = {
        "memory-role-policy": iam_policy(
            bucket=bucket,
            prefix=prefix,
            kms_key_arn=kms_key_arn,
            tenant=tenant,
            key_mode=key_mode,
            allow_erase=allow_erase,
            partition=partition,
            read_only_tenants=read_only,
        ),
        "memory-role-trust-policy": trust_policy(agent_role_arn=agent_role_arn, tag=tag, reserved_tenants=read_only),
        "agent-role-policy": agent_role_policy(memory_role_arn=memory_role_arn),
    }
    if use_kms:
        documents["kms-key-policy"] = kms_key_policy(
            account_id=account_id,
            user_role_arn=memory_role_arn,
            admin_principal_arn=admin_principal_arn,
            tenant=tenant,
            key_mode=key_mode,
            prefix=prefix,
            read_only_tenants=read_only,
        )
    documents["bucket-lifecycle"] = lifecycle_configuration(
        prefix=prefix, noncurrent_days=noncurrent_days, access_marker_days=access_marker_days
    )
    return documents
