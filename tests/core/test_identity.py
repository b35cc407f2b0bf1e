"""user_id_for_subject: any identity provider's subject becomes a valid, stable, distinct user id."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from s3memory import ConfigurationError, TenantLayout, assume_role_request, validate_tenant
from s3memory._identity import user_id_for_subject

ISSUER = "https://example.auth0.com/"
KEY = bytes(range(32))
USER_ID = re.compile(r"u-[a-z2-7]{32}")
# Any text a JSON claim can hold, lone surrogates included.
SUBJECTS = st.text(st.characters(codec=None, exclude_categories=()), min_size=1)
ISSUERS = st.text(st.characters(codec=None, exclude_categories=()))

# Frozen: a change here changes every deployed user's id, and so loses every user's memory.
VECTORS = [
    ("auth0|abc123", ISSUER, None, "u-wq6vyerbmcchjsehn2ps4oorfi3yo53y"),
    ("auth0|abc123", ISSUER, KEY, "u-z7vjuatfvccvp73ojvda4gzkaa75sqfk"),
    ("alice", "", None, "u-56efzln7m3kts6ebuk7rvzmi4k6rg24x"),
]


@pytest.mark.parametrize(("subject", "issuer", "key", "expected"), VECTORS)
def test_frozen_vectors(subject: str, issuer: str, key: bytes | None, expected: str) -> None:
    assert user_id_for_subject(subject, issuer=issuer, key=key) == expected


@pytest.mark.parametrize(("subject", "issuer", "key", "expected"), VECTORS)
def test_vectors_follow_the_documented_construction(
    subject: str, issuer: str, key: bytes | None, expected: str
) -> None:
    """'u-' + base32 of the first 160 bits of SHA-256 / HMAC-SHA256 over a context, the
    issuer's length (8 bytes, big-endian), the issuer and the subject."""
    message = b"s3memory subject v1\x00" + len(issuer.encode()).to_bytes(8, "big") + issuer.encode() + subject.encode()
    digest = hashlib.sha256(message).digest() if key is None else hmac.new(key, message, hashlib.sha256).digest()
    assert expected == "u-" + base64.b32encode(digest[:20]).decode().lower()


@pytest.mark.parametrize(
    "subject",
    [
        "auth0|abc123",
        "google-oauth2|112233445566778899",
        "alice+work@example.com",
        "urn:example:user:42",
        "memories",
        "MEMORIES",
        "../bob",
        ".hidden",
        "-x",
        "a" * 10_000,
        "ü",
        "\x00",
        " ",
        "\ud800",
    ],
)
def test_hostile_subjects_map_to_valid_user_ids(subject: str) -> None:
    for key in (None, KEY):
        user_id = user_id_for_subject(subject, issuer=ISSUER, key=key)
        assert USER_ID.fullmatch(user_id)
        assert validate_tenant(user_id) == user_id
        TenantLayout(user_id)
        # and the memory role accepts it as a session tag and session name
        request = assume_role_request(role_arn="arn:aws:iam::123456789012:role/m", user_id=user_id)
        assert request["Tags"] == [{"Key": "s3memory-user", "Value": user_id}]


@given(subject=SUBJECTS, issuer=ISSUERS, keyed=st.booleans())
def test_every_subject_maps_to_a_valid_stable_id(subject: str, issuer: str, keyed: bool) -> None:
    key = KEY if keyed else None
    user_id = user_id_for_subject(subject, issuer=issuer, key=key)
    assert USER_ID.fullmatch(user_id) and validate_tenant(user_id) == user_id
    assert user_id_for_subject(subject, issuer=issuer, key=key) == user_id


@given(a=st.tuples(ISSUERS, SUBJECTS), b=st.tuples(ISSUERS, SUBJECTS))
def test_distinct_pairs_get_distinct_ids(a: tuple[str, str], b: tuple[str, str]) -> None:
    if a != b:
        assert user_id_for_subject(a[1], issuer=a[0]) != user_id_for_subject(b[1], issuer=b[0])
        assert user_id_for_subject(a[1], issuer=a[0], key=KEY) != user_id_for_subject(b[1], issuer=b[0], key=KEY)


def test_issuer_and_subject_cannot_trade_characters() -> None:
    """A separator could be forged ("a\\0" + "b" vs "a" + "\\0b"); a length prefix cannot."""
    pairs = [("a\x00", "b"), ("a", "\x00b"), ("ab", "c"), ("a", "bc"), ("", "abc")]
    assert len({user_id_for_subject(s, issuer=i) for i, s in pairs}) == len(pairs)


def test_issuers_and_keys_separate_users() -> None:
    ids = {
        user_id_for_subject("123", issuer="https://a.example/"),
        user_id_for_subject("123", issuer="https://b.example/"),
        user_id_for_subject("123", issuer="https://a.example"),  # a trailing slash is another issuer
        user_id_for_subject("123"),
        user_id_for_subject("123", issuer="https://a.example/", key=KEY),
        user_id_for_subject("123", issuer="https://a.example/", key=KEY[::-1]),
    }
    assert len(ids) == 6


def test_key_may_be_any_bytes_like() -> None:
    expected = user_id_for_subject("s", key=KEY)
    assert user_id_for_subject("s", key=bytearray(KEY)) == expected
    assert user_id_for_subject("s", key=memoryview(KEY)) == expected


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"subject": ""}, "subject must be a non-empty string"),
        ({"subject": None}, "subject must be a non-empty string"),
        ({"subject": b"auth0|x"}, "subject must be a non-empty string"),
        ({"subject": 42}, "subject must be a non-empty string"),
        ({"subject": "x", "issuer": None}, "issuer must be a string"),
        ({"subject": "x", "issuer": b"https://a/"}, "issuer must be a string"),
        ({"subject": "x", "key": "a string key of more than 16 chars"}, "key must be bytes"),
        ({"subject": "x", "key": b"short"}, "key must be at least 16 bytes"),
        ({"subject": "x", "key": b""}, "key must be at least 16 bytes"),
    ],
)
def test_bad_arguments_are_configuration_errors(kwargs: dict[str, object], message: str) -> None:
    subject = kwargs.pop("subject")
    with pytest.raises(ConfigurationError, match=message) as caught:
        user_id_for_subject(subject, **kwargs)  # type: ignore[arg-type]
    assert isinstance(caught.value, ValueError)
    assert "auth0" not in str(caught.value)  # a refused subject is never echoed


@pytest.mark.slow  # a subprocess
def test_import_is_light() -> None:
    """The module needs only the standard library (and s3memory's error types)."""
    heavy = "('boto3', 'botocore', 'anthropic', 'cryptography')"
    code = f"import sys, s3memory._identity; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
