"""Who may assume the memory role, and tagged as which user: the memory role's trust policy
and the agent role's policy, judged by the policy evaluator of ``helpers.iam`` against the
``sts.assume_role`` requests s3memory makes (assume_role_request). The tag is the session's
user: among ASCII values the trust policy accepts exactly the valid user ids, as s3memory's
code does; IAM conditions have no character classes, so some non-ASCII values pass the
trust policy and only the code refuses them (none reaches outside its own tenant prefix)."""

from __future__ import annotations

import re
import string

import pytest
from helpers import examples
from helpers.iam import (
    AGENT_ROLE,
    KEY_ARN,
    MEMORY_ROLE,
    OTHER_ROLE,
    Request,
    allowed,
    code_accepts,
    decide,
    may_assume,
    obj,
    sts_requests,
    tagged,
)
from hypothesis import example, given, settings
from hypothesis import strategies as st

from s3memory import ConfigurationError
from s3memory._admin.policy import DEFAULT_TAG, agent_role_policy, assume_role_request, trust_policy
from s3memory._paths import RESERVED_SEGMENT, validate_tenant


def test_only_the_agent_role_may_assume_the_memory_role_and_only_tagging_one_user() -> None:
    """sts:AssumeRole itself needs the tag, so no session of the memory role is without a user
    (nor takes it from a tag on the role)."""
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


@pytest.mark.slow  # heavy hypothesis
@settings(max_examples=examples(1500), deadline=None)
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
    """``memories``, in any case, is no user id (validate_tenant): a tenant of a deployment
    with prefix "app/" named so would own the files of user ``app`` of the deployment with
    prefix "". So no session may carry it."""
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
