"""Unit tests of ``s3memory._crypto.envelope``: the S3 Encryption Client V3 object format.

Frozen test vectors (``tests/vectors/envelope.json``) pin the exact bytes we write (any
change of format fails here), an independent HKDF computation pins the key derivation, and
every malformed or tampered input must fail with :class:`IntegrityError` (or
:class:`ForeignObjectError` for an object that does not claim to be ours) and never with
another exception.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA512
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from helpers import VECTORS_DIR, examples
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from s3memory import ForeignObjectError, IntegrityError, binding_context
from s3memory._crypto import envelope

# Frozen vectors (tests/vectors/envelope.json), computed once from the implementation and
# checked independently below.
VECTORS = json.loads((VECTORS_DIR / "envelope.json").read_text(encoding="utf-8"))
_TENANT, _KMS = (next(case for case in VECTORS["seals"] if case["id"] == id_) for id_ in ("tenant", "kms-empty"))


def _wrapped_key(case: dict[str, Any]) -> envelope.WrappedKey:
    wrapped = case["input"]["wrapped_key"]
    return envelope.WrappedKey(wrapped["algorithm"], bytes.fromhex(wrapped["ciphertext_hex"]), dict(wrapped["context"]))


DATA_KEY = bytes.fromhex(VECTORS["input"]["data_key_hex"])
MESSAGE_ID = bytes.fromhex(VECTORS["input"]["message_id_hex"])
PLAINTEXT = _TENANT["input"]["plaintext"].encode("utf-8")
KMS_PLAINTEXT = _KMS["input"]["plaintext"].encode("utf-8")

TENANT_WRAPPED = _wrapped_key(_TENANT)
KMS_WRAPPED = _wrapped_key(_KMS)

EXPECTED_CONTENT_KEY_HEX: str = VECTORS["derive_keys"]["content_key_hex"]
EXPECTED_COMMITMENT_HEX: str = VECTORS["derive_keys"]["commitment_hex"]
EXPECTED_COMMITMENT_B64: str = VECTORS["derive_keys"]["commitment_b64"]
EXPECTED_MESSAGE_ID_B64: str = VECTORS["derive_keys"]["message_id_b64"]

EXPECTED_TENANT_BODY_B64: str = _TENANT["expected"]["body_b64"]
EXPECTED_TENANT_METADATA: dict[str, str] = _TENANT["expected"]["metadata"]

EXPECTED_KMS_EMPTY_BODY_B64: str = _KMS["expected"]["body_b64"]
EXPECTED_KMS_METADATA: dict[str, str] = _KMS["expected"]["metadata"]

OPEN_FAILURES = (IntegrityError, ForeignObjectError)


def _sealed(
    plaintext: bytes = PLAINTEXT, wrapped: envelope.WrappedKey = TENANT_WRAPPED
) -> tuple[bytes, dict[str, str]]:
    return envelope.seal(plaintext, DATA_KEY, wrapped, message_id=MESSAGE_ID)


def _open(body: bytes, metadata: dict[str, object], data_key: bytes = DATA_KEY) -> bytes:
    header = envelope.parse_header(metadata)  # type: ignore[arg-type]
    return envelope.open_body(body, data_key, header)


def _assert_integrity_error(call: Callable[[], object]) -> None:
    """The call fails with exactly IntegrityError (not a subclass of something else)."""
    with pytest.raises(IntegrityError) as info:
        call()
    assert type(info.value) is IntegrityError


def _independent_keys(data_key: bytes, message_id: bytes) -> tuple[bytes, bytes]:
    """HKDF-SHA512 (RFC 5869 extract-and-expand) computed by cryptography's HKDF."""
    content_key = HKDF(algorithm=SHA512(), length=32, salt=message_id, info=b"\x00\x73DERIVEKEY").derive(data_key)
    commitment = HKDF(algorithm=SHA512(), length=28, salt=message_id, info=b"\x00\x73COMMITKEY").derive(data_key)
    return content_key, commitment


# --- frozen vectors -------------------------------------------------------------------


def test_the_vector_file_is_consistent() -> None:
    """What the file states twice agrees: the base64 forms are the hex ones, and both sealed
    objects carry the derived commitment and the message id."""
    assert base64.b64decode(EXPECTED_COMMITMENT_B64) == bytes.fromhex(EXPECTED_COMMITMENT_HEX)
    assert base64.b64decode(EXPECTED_MESSAGE_ID_B64) == MESSAGE_ID
    for metadata in (EXPECTED_TENANT_METADATA, EXPECTED_KMS_METADATA):
        assert (metadata["x-amz-d"], metadata["x-amz-i"]) == (EXPECTED_COMMITMENT_B64, EXPECTED_MESSAGE_ID_B64)


def test_constants_match_the_v3_format() -> None:
    assert envelope.SUITE_ID == 115 == 0x0073
    assert envelope.SUITE_ID_BYTES == b"\x00\x73"
    assert envelope.CONTENT_IV == b"\x01" * 12
    assert (envelope.MESSAGE_ID_BYTES, envelope.COMMITMENT_BYTES, envelope.TAG_BYTES) == (28, 28, 16)


def test_derive_keys_frozen_vector() -> None:
    content_key, commitment = envelope.derive_keys(DATA_KEY, MESSAGE_ID)
    assert content_key.hex() == EXPECTED_CONTENT_KEY_HEX
    assert commitment.hex() == EXPECTED_COMMITMENT_HEX


@given(data_key=st.binary(min_size=32, max_size=32), message_id=st.binary(min_size=28, max_size=28))
@example(data_key=DATA_KEY, message_id=MESSAGE_ID)
def test_derive_keys_matches_independent_hkdf(data_key: bytes, message_id: bytes) -> None:
    assert envelope.derive_keys(data_key, message_id) == _independent_keys(data_key, message_id)


def test_derive_keys_matches_the_official_client() -> None:
    from s3_encryption import key_derivation
    from s3_encryption.materials.materials import AlgorithmSuite

    suite = AlgorithmSuite.ALG_AES_256_GCM_HKDF_SHA512_COMMIT_KEY
    official = key_derivation.derive_keys(DATA_KEY, MESSAGE_ID, suite)
    assert envelope.derive_keys(DATA_KEY, MESSAGE_ID) == (bytes(official[0]), bytes(official[1]))


def test_seal_frozen_vector_tenant_mode() -> None:
    body, metadata = _sealed()
    assert base64.b64encode(body).decode() == EXPECTED_TENANT_BODY_B64
    assert metadata == EXPECTED_TENANT_METADATA
    assert len(body) == len(PLAINTEXT) + 16


def test_seal_frozen_vector_kms_mode_empty_plaintext() -> None:
    body, metadata = _sealed(KMS_PLAINTEXT, KMS_WRAPPED)
    assert base64.b64encode(body).decode() == EXPECTED_KMS_EMPTY_BODY_B64
    assert metadata == EXPECTED_KMS_METADATA
    assert len(body) == 16


def test_frozen_vector_decrypts_independently() -> None:
    """The body is AES-256-GCM(content key, IV 01*12, AAD 00 73) of the plaintext."""
    content_key, commitment = _independent_keys(DATA_KEY, MESSAGE_ID)
    body = base64.b64decode(EXPECTED_TENANT_BODY_B64)
    assert AESGCM(content_key).decrypt(b"\x01" * 12, body, b"\x00\x73") == PLAINTEXT
    assert base64.b64decode(EXPECTED_TENANT_METADATA["x-amz-d"]) == commitment
    assert base64.b64decode(EXPECTED_TENANT_METADATA["x-amz-i"]) == MESSAGE_ID


@pytest.mark.parametrize(
    ("body_b64", "metadata", "plaintext"),
    [
        (EXPECTED_TENANT_BODY_B64, EXPECTED_TENANT_METADATA, PLAINTEXT),
        (EXPECTED_KMS_EMPTY_BODY_B64, EXPECTED_KMS_METADATA, KMS_PLAINTEXT),
    ],
)
def test_frozen_vectors_open(body_b64: str, metadata: dict[str, str], plaintext: bytes) -> None:
    header = envelope.parse_header(metadata)
    assert header.message_id == MESSAGE_ID
    assert header.commitment.hex() == EXPECTED_COMMITMENT_HEX
    assert envelope.open_body(base64.b64decode(body_b64), DATA_KEY, header) == plaintext


def test_parse_header_returns_the_wrapped_key() -> None:
    assert envelope.parse_header(EXPECTED_TENANT_METADATA).wrapped_key == TENANT_WRAPPED
    assert envelope.parse_header(EXPECTED_KMS_METADATA).wrapped_key == KMS_WRAPPED


def test_binding_context_hashes_the_path() -> None:
    assert binding_context("alice", "/memories/a.txt", version=1) == {
        "s3memory:tenant": "alice",
        "s3memory:path": "1f6bb525b93d30d2e464b09c2ea43a45b07d1e9872a349be9638a1853b368314",
    }


def test_binding_context_defaults_to_the_binding_s3memory_writes() -> None:
    """Without ``prefix`` the context is version 2 of a deployment with no prefix, what
    ``open_memory`` writes by default; version 1 only when asked for."""
    assert binding_context("alice", "/memories/a.txt") == {
        "s3memory:tenant": "alice",
        "s3memory:prefix": "/",
        "s3memory:path": "1f6bb525b93d30d2e464b09c2ea43a45b07d1e9872a349be9638a1853b368314",
    }
    assert binding_context("alice", "/memories/a.txt") == binding_context("alice", "/memories/a.txt", prefix="")
    with pytest.raises(ValueError, match="binding version 3"):
        binding_context("alice", "/memories/a.txt", version=3)


def test_fresh_message_id_per_seal() -> None:
    first = envelope.seal(PLAINTEXT, DATA_KEY, TENANT_WRAPPED)
    second = envelope.seal(PLAINTEXT, DATA_KEY, TENANT_WRAPPED)
    assert first[1]["x-amz-i"] != second[1]["x-amz-i"]
    assert first[0] != second[0]


@pytest.mark.parametrize(("data_key", "message_id"), [(bytes(31), MESSAGE_ID), (DATA_KEY, bytes(27))])
def test_seal_refuses_wrong_lengths(data_key: bytes, message_id: bytes) -> None:
    with pytest.raises(ValueError):
        envelope.seal(PLAINTEXT, data_key, TENANT_WRAPPED, message_id=message_id)


# --- round trip -----------------------------------------------------------------------


@given(plaintext=st.binary(max_size=4096), data_key=st.binary(min_size=32, max_size=32))
@example(plaintext=b"", data_key=DATA_KEY)
def test_round_trip(plaintext: bytes, data_key: bytes) -> None:
    for wrapped in (TENANT_WRAPPED, KMS_WRAPPED):
        body, metadata = envelope.seal(plaintext, data_key, wrapped)
        assert len(body) == len(plaintext) + envelope.TAG_BYTES
        assert all(isinstance(v, str) and v.isascii() for v in metadata.values())
        header = envelope.parse_header(metadata)
        assert header.wrapped_key == wrapped
        assert envelope.open_body(body, data_key, header) == plaintext


# --- failures: every one is IntegrityError --------------------------------------------


def test_every_flipped_body_bit_fails() -> None:
    body, metadata = _sealed()
    for index in range(len(body)):
        for bit in range(8):
            tampered = bytearray(body)
            tampered[index] ^= 1 << bit
            _assert_integrity_error(lambda t=bytes(tampered): _open(t, metadata))


def test_every_truncation_fails() -> None:
    body, metadata = _sealed()
    for length in range(len(body)):  # includes 0 (empty) and every length below 16
        _assert_integrity_error(lambda n=length: _open(body[:n], metadata))


def test_extended_body_fails() -> None:
    body, metadata = _sealed()
    _assert_integrity_error(lambda: _open(body + b"\x00", metadata))


def test_empty_plaintext_truncated_fails() -> None:
    body, metadata = _sealed(b"")
    for length in range(16):
        _assert_integrity_error(lambda n=length: _open(body[:n], metadata))


def test_every_flipped_commitment_bit_fails() -> None:
    body, metadata = _sealed()
    commitment = base64.b64decode(metadata["x-amz-d"])
    for index in range(len(commitment)):
        for bit in range(8):
            tampered = bytearray(commitment)
            tampered[index] ^= 1 << bit
            bad = {**metadata, "x-amz-d": base64.b64encode(bytes(tampered)).decode()}
            _assert_integrity_error(lambda m=bad: _open(body, m))


def test_wrong_message_id_fails() -> None:
    body, metadata = _sealed()
    for other in (bytes(28), bytes(range(1, 29)), MESSAGE_ID[:-1] + b"\x00"):
        bad = {**metadata, "x-amz-i": base64.b64encode(other).decode()}
        _assert_integrity_error(lambda m=bad: _open(body, m))


def test_wrong_message_id_with_matching_commitment_still_fails() -> None:
    """An attacker who recomputes the commitment still lacks the content key."""
    body, metadata = _sealed()
    other_id = bytes(28)
    other_key = bytes(range(1, 33))
    _, forged_commitment = envelope.derive_keys(other_key, other_id)
    bad = {
        **metadata,
        "x-amz-i": base64.b64encode(other_id).decode(),
        "x-amz-d": base64.b64encode(forged_commitment).decode(),
    }
    _assert_integrity_error(lambda: _open(body, bad))
    _assert_integrity_error(lambda: _open(body, bad, other_key))


@pytest.mark.parametrize(
    "data_key",
    [bytes(32), bytes(range(1, 33)), DATA_KEY[:-1] + b"\xff", DATA_KEY[:31], DATA_KEY + b"\x00", b""],
)
def test_wrong_data_key_fails(data_key: bytes) -> None:
    body, metadata = _sealed()
    _assert_integrity_error(lambda: _open(body, metadata, data_key))


def test_swapped_bodies_fail() -> None:
    """A body sealed under one message id does not open under another's metadata."""
    body_a, metadata_a = _sealed(b"first")
    body_b, metadata_b = envelope.seal(b"second", DATA_KEY, TENANT_WRAPPED)
    _assert_integrity_error(lambda: _open(body_a, metadata_b))
    _assert_integrity_error(lambda: _open(body_b, metadata_a))


@pytest.mark.parametrize("suite", ["114", "116", "0x73", "0073", " 115", "115 ", "", "AES/GCM/NoPadding", None, 115])
def test_wrong_suite_fails(suite: object) -> None:
    body, metadata = _sealed()
    bad: dict[str, object] = {**metadata, "x-amz-c": suite}
    _assert_integrity_error(lambda: _open(body, bad))


def test_missing_suite_with_wrapped_key_fails() -> None:
    body, metadata = _sealed()
    bad = {k: v for k, v in metadata.items() if k != "x-amz-c"}
    _assert_integrity_error(lambda: _open(body, bad))


@pytest.mark.parametrize(
    "wrap", ["", "01", "2", "11", "13", "12 ", "kms", "kms+context", "AES/GCM", "RSA-OAEP-SHA1", None]
)
def test_unknown_wrap_algorithm_fails(wrap: object) -> None:
    body, metadata = _sealed()
    bad: dict[str, object] = {**metadata, "x-amz-w": wrap}
    _assert_integrity_error(lambda: _open(body, bad))


def test_missing_wrap_algorithm_fails() -> None:
    body, metadata = _sealed()
    bad = {k: v for k, v in metadata.items() if k != "x-amz-w"}
    _assert_integrity_error(lambda: _open(body, bad))


def test_wrap_algorithm_and_context_field_must_agree() -> None:
    body, metadata = _sealed()  # "02" with x-amz-m
    context = metadata["x-amz-m"]
    # "12" needs x-amz-t; "02" must not carry x-amz-t; "12" must not carry x-amz-m.
    _assert_integrity_error(lambda: _open(body, {**metadata, "x-amz-w": "12"}))
    _assert_integrity_error(lambda: _open(body, {**metadata, "x-amz-t": context}))
    kms_body, kms_metadata = _sealed(wrapped=KMS_WRAPPED)
    _assert_integrity_error(lambda: _open(kms_body, {**kms_metadata, "x-amz-m": kms_metadata["x-amz-t"]}))
    _assert_integrity_error(lambda: _open(kms_body, {**kms_metadata, "x-amz-w": "02"}))
    without_context = {k: v for k, v in metadata.items() if k != "x-amz-m"}
    _assert_integrity_error(lambda: _open(body, without_context))


MALFORMED_BASE64 = ["!!!!", "abc", "YWJj\n", " YWJj", "YW Jj", "YW==Jj", "é", "\x00", "-_-_", None, 42, b"YWJj"]


@pytest.mark.parametrize("field", ["x-amz-3", "x-amz-d", "x-amz-i"])
@pytest.mark.parametrize("value", MALFORMED_BASE64)
def test_malformed_base64_fails(field: str, value: object) -> None:
    body, metadata = _sealed()
    bad: dict[str, object] = {**metadata, field: value}
    _assert_integrity_error(lambda: _open(body, bad))


@pytest.mark.parametrize("field", ["x-amz-3", "x-amz-d", "x-amz-i"])
def test_missing_binary_field_fails(field: str) -> None:
    body, metadata = _sealed()
    bad = {k: v for k, v in metadata.items() if k != field}
    _assert_integrity_error(lambda: _open(body, bad))


@pytest.mark.parametrize("field", ["x-amz-d", "x-amz-i"])
@pytest.mark.parametrize("length", [0, 1, 16, 27, 29, 32, 64])
def test_wrong_length_fields_fail(field: str, length: int) -> None:
    _, metadata = _sealed()
    original = base64.b64decode(metadata[field])
    value = (original * 3)[:length]
    bad = {**metadata, field: base64.b64encode(value).decode()}
    with pytest.raises(IntegrityError) as info:
        envelope.parse_header(bad)
    assert type(info.value) is IntegrityError


NOT_A_CONTEXT = [
    "",
    "not json",
    "{",
    "[]",
    '["a", "b"]',
    '"a string"',
    "null",
    "115",
    "true",
    '{"a": 1}',
    '{"a": null}',
    '{"a": ["b"]}',
    '{"a": {"b": "c"}}',
    '{"a": 1e999999}',
    "NaN",
    "1" * 5000,
    "[" * 100_000 + "]" * 100_000,
    '{"a":' * 50_000 + '"b"' + "}" * 50_000,
    None,
    42,
    b'{"a": "b"}',
]


@pytest.mark.parametrize("value", NOT_A_CONTEXT, ids=lambda v: repr(v)[:30])
@pytest.mark.parametrize("wrapped", [TENANT_WRAPPED, KMS_WRAPPED], ids=["x-amz-m", "x-amz-t"])
def test_non_object_context_fails(value: object, wrapped: envelope.WrappedKey) -> None:
    body, metadata = _sealed(wrapped=wrapped)
    field = "x-amz-t" if wrapped.algorithm == "12" else "x-amz-m"
    bad: dict[str, object] = {**metadata, field: value}
    _assert_integrity_error(lambda: _open(body, bad))


def test_empty_json_object_is_a_well_formed_context() -> None:
    """Shape only: an empty context parses (the keyring, not the envelope, judges it)."""
    _, metadata = _sealed()
    header = envelope.parse_header({**metadata, "x-amz-m": "{}"})
    assert header.wrapped_key.context == {}


@pytest.mark.parametrize("legacy", ["x-amz-key", "x-amz-key-v2", "x-amz-iv", "x-amz-cek-alg", "x-amz-wrap-alg"])
def test_legacy_v2_keys_mixed_in_fail(legacy: str) -> None:
    body, metadata = _sealed()
    values = {
        "x-amz-key": metadata["x-amz-3"],
        "x-amz-key-v2": metadata["x-amz-3"],
        "x-amz-iv": base64.b64encode(b"\x01" * 12).decode(),
        "x-amz-cek-alg": "AES/GCM/NoPadding",
        "x-amz-wrap-alg": "kms+context",
    }
    _assert_integrity_error(lambda: _open(body, {**metadata, legacy: values[legacy]}))


def test_v2_object_with_v3_suite_fails() -> None:
    body, metadata = _sealed()
    v2_like = {
        "x-amz-c": "115",
        "x-amz-key-v2": metadata["x-amz-3"],
        "x-amz-iv": base64.b64encode(b"\x01" * 12).decode(),
        "x-amz-cek-alg": "AES/GCM/NoPadding",
        "x-amz-wrap-alg": "kms+context",
        "x-amz-matdesc": "{}",
    }
    _assert_integrity_error(lambda: _open(body, v2_like))


@pytest.mark.parametrize(
    "metadata",
    [
        {},
        {"content-type": "text/plain"},
        {"x-amz-d": EXPECTED_COMMITMENT_B64, "x-amz-i": EXPECTED_MESSAGE_ID_B64, "x-amz-w": "02"},
        {"x-amz-m": "{}", "x-amz-t": "{}"},
        # a V2 object of the official client: not ours in the V3 sense
        {
            "x-amz-key-v2": "AAAA",
            "x-amz-iv": "AAAAAAAAAAAAAAAA",
            "x-amz-cek-alg": "AES/GCM/NoPadding",
            "x-amz-wrap-alg": "kms+context",
            "x-amz-matdesc": "{}",
        },
        {"s3memory": "tenant-key"},
    ],
)
def test_metadata_without_suite_and_wrapped_key_is_foreign(metadata: dict[str, str]) -> None:
    assert not envelope.is_envelope(metadata)
    with pytest.raises(ForeignObjectError):
        envelope.parse_header(metadata)


def test_integrity_errors_are_opaque() -> None:
    """The envelope says nothing about which check failed."""
    body, metadata = _sealed()
    messages = set()
    for call in (
        lambda: _open(body[:-1], metadata),
        lambda: _open(body, metadata, bytes(32)),
        lambda: _open(body, {**metadata, "x-amz-c": "114"}),
        lambda: _open(body, {**metadata, "x-amz-d": "AAAA"}),
        lambda: _open(body, {**metadata, "x-amz-m": "[]"}),
    ):
        with pytest.raises(IntegrityError) as info:
            call()
        messages.add(str(info.value))
        assert info.value.__cause__ is None
        assert info.value.__suppress_context__ or info.value.__context__ is None
    assert messages == {""}


# --- fuzz -----------------------------------------------------------------------------

_VALID_BODY, _VALID_METADATA = _sealed()
_KMS_BODY, _KMS_METADATA = _sealed(wrapped=KMS_WRAPPED)
_FIELDS = [
    "x-amz-c",
    "x-amz-3",
    "x-amz-w",
    "x-amz-t",
    "x-amz-m",
    "x-amz-d",
    "x-amz-i",
    "x-amz-key",
    "x-amz-key-v2",
    "x-amz-iv",
    "x-amz-cek-alg",
    "x-amz-wrap-alg",
    "x-amz-matdesc",
]


def _b64_text(size: int | None = None) -> st.SearchStrategy[str]:
    binary = st.binary(min_size=size, max_size=size) if size is not None else st.binary(max_size=64)
    return binary.map(lambda b: base64.b64encode(b).decode())


_VALUE = st.one_of(
    st.sampled_from(sorted({*_VALID_METADATA.values(), *_KMS_METADATA.values()})),
    st.sampled_from(["115", "02", "12", "{}", "[]", "", "null", "kms+context"]),
    _b64_text(),
    _b64_text(28),
    st.text(max_size=40),
    st.dictionaries(st.text(max_size=8), st.one_of(st.text(max_size=8), st.integers()), max_size=3).map(json.dumps),
)


@st.composite
def _metadata(draw: st.DrawFn) -> dict[str, str]:
    base = draw(st.sampled_from([_VALID_METADATA, _KMS_METADATA, {}]))
    metadata = dict(base)
    for field in draw(st.lists(st.sampled_from(_FIELDS), max_size=6)):
        if draw(st.booleans()):
            metadata[field] = draw(_VALUE)
        else:
            metadata.pop(field, None)
    for _ in range(draw(st.integers(0, 2))):
        metadata[draw(st.text(max_size=12))] = draw(st.text(max_size=12))
    return metadata


_BODY = st.one_of(
    st.sampled_from([_VALID_BODY, _KMS_BODY, b"", _VALID_BODY[:-1], _VALID_BODY[:15]]),
    st.binary(max_size=80),
    # an XOR mask over the valid body (all-zero masks leave it intact)
    st.binary(max_size=len(_VALID_BODY)).map(
        lambda mask: bytes(x ^ y for x, y in zip(_VALID_BODY, mask.ljust(len(_VALID_BODY), b"\0"), strict=True))
    ),
)


@settings(max_examples=examples(400), suppress_health_check=[HealthCheck.too_slow])
@given(metadata=_metadata(), body=_BODY, data_key=st.one_of(st.just(DATA_KEY), st.binary(max_size=40)))
@example(metadata=dict(_VALID_METADATA), body=_VALID_BODY, data_key=DATA_KEY)
def test_fuzz_only_integrity_or_foreign_errors(metadata: dict[str, str], body: bytes, data_key: bytes) -> None:
    try:
        plaintext = _open(body, metadata, data_key)
    except OPEN_FAILURES:
        return
    # Opening succeeded: then the authenticated parts must be exactly an original object's.
    # (The context maps are not authenticated here: the keyring binds them.)
    assert data_key == DATA_KEY
    assert metadata.get("x-amz-c") == "115"
    assert base64.b64decode(metadata["x-amz-i"]) == MESSAGE_ID
    assert base64.b64decode(metadata["x-amz-d"]) == bytes.fromhex(EXPECTED_COMMITMENT_HEX)
    assert (body, plaintext) in ((_VALID_BODY, PLAINTEXT), (_KMS_BODY, PLAINTEXT))
