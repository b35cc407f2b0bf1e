"""Layer 2: one object sealed in the AWS S3 Encryption Client's V3 format.

Content encryption is algorithm suite 115 (ALG_AES_256_GCM_HKDF_SHA512_COMMIT_KEY):

- a fresh 28-byte message id per write; HKDF-SHA512 (salt = message id, ikm = data key)
  expands to a 32-byte content key (info = suite id || "DERIVEKEY") and a 28-byte key
  commitment (info = suite id || "COMMITKEY");
- AES-256-GCM with the fixed IV of twelve 0x01 bytes (safe: the content key is fresh per
  message) and the suite id ``00 73`` as AAD; body = ciphertext || 16-byte tag, so the
  plaintext size is the object size minus 16;
- metadata: ``x-amz-c`` = "115", ``x-amz-3`` wrapped data key, ``x-amz-w`` wrap algorithm,
  ``x-amz-t`` (KMS encryption context) or ``x-amz-m`` (material description),
  ``x-amz-d`` commitment, ``x-amz-i`` message id (binary values base64).

The commitment is checked before any decryption. Every failure to open raises the same
:class:`IntegrityError`, whatever check failed. Key wrapping lives in ``_keys``; this module
only sees the plaintext data key and an opaque :class:`WrappedKey`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

from .._errors import ForeignObjectError, IntegrityError

SUITE_ID = 115
SUITE_ID_BYTES = b"\x00\x73"
DATA_KEY_BYTES = 32
MESSAGE_ID_BYTES = 28
COMMITMENT_BYTES = 28
TAG_BYTES = 16
CONTENT_IV = b"\x01" * 12

WRAP_AES_GCM = "02"  # data key wrapped locally (tenant-key mode); context in x-amz-m
WRAP_KMS_CONTEXT = "12"  # data key wrapped by KMS with an encryption context in x-amz-t
KMS_RESERVED_CONTEXT_KEY = "aws:x-amz-cek-alg"

META_CIPHER = "x-amz-c"
META_WRAPPED_KEY = "x-amz-3"
META_WRAP_ALGORITHM = "x-amz-w"
META_KMS_CONTEXT = "x-amz-t"
META_MATERIAL_DESCRIPTION = "x-amz-m"
META_COMMITMENT = "x-amz-d"
META_MESSAGE_ID = "x-amz-i"
_LEGACY_KEYS = ("x-amz-key", "x-amz-key-v2", "x-amz-iv", "x-amz-cek-alg", "x-amz-wrap-alg")

CONTEXT_TENANT = "s3memory:tenant"
CONTEXT_PATH = "s3memory:path"
CONTEXT_PREFIX = "s3memory:prefix"


def deployment_name(prefix: str) -> str:
    """How a binding names its deployment: the key prefix, the empty one written as ``/``
    (which no valid prefix is, and an encryption-context value must not be empty)."""
    return prefix or "/"


def binding_context(tenant: str, virtual_path: str, *, prefix: str = "", version: int = 2) -> dict[str, str]:
    """The encryption context that binds an object to its deployment, tenant and virtual path.

    Binding version 2 (the default, what s3memory writes): ``{s3memory:tenant,
    s3memory:prefix, s3memory:path}``, where ``prefix`` is the deployment's key prefix
    (``""`` unless the memory was opened with one), so an object copied between two
    deployments sharing a bucket and a key fails to open. ``version=1``: ``{s3memory:tenant,
    s3memory:path}``, what s3memory 0.1 wrote; still read (see :func:`is_unbound_legacy`).
    The path is hashed (SHA-256, hex) to keep metadata small and ASCII whatever the file
    name. Pass this as ``EncryptionContext`` to the official S3 Encryption Client to read a
    KMS-per-object s3memory object.

    Raises:
        ValueError: ``version`` is neither 1 nor 2.
    """
    if version not in (1, 2):
        raise ValueError(f"binding version {version!r} does not exist (1 or 2)")
    digest = hashlib.sha256(virtual_path.encode("utf-8")).hexdigest()
    if version == 1:
        return {CONTEXT_TENANT: tenant, CONTEXT_PATH: digest}
    return {CONTEXT_TENANT: tenant, CONTEXT_PREFIX: deployment_name(prefix), CONTEXT_PATH: digest}


def is_unbound_legacy(context: Mapping[str, str]) -> bool:
    """True for a stored context of binding version 1 (no deployment in it)."""
    return CONTEXT_PREFIX not in context


def canonical_json(mapping: Mapping[str, str]) -> str:
    return json.dumps(dict(mapping), sort_keys=True, separators=(",", ":"), ensure_ascii=True)


@dataclass(frozen=True)
class WrappedKey:
    """A data key as stored: wrap algorithm, wrapped bytes, and its context map."""

    algorithm: str
    ciphertext: bytes
    context: dict[str, str]


@dataclass(frozen=True)
class EnvelopeHeader:
    """The parsed, type-checked metadata of a V3 object (not yet authenticated)."""

    wrapped_key: WrappedKey
    message_id: bytes
    commitment: bytes


def derive_keys(data_key: bytes, message_id: bytes) -> tuple[bytes, bytes]:
    """HKDF-SHA512 extract-and-expand: (content key, key commitment)."""
    from cryptography.hazmat.primitives.hashes import SHA512
    from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

    prk = hmac.new(message_id, data_key, hashlib.sha512).digest()
    content_key = HKDFExpand(SHA512(), DATA_KEY_BYTES, SUITE_ID_BYTES + b"DERIVEKEY").derive(prk)
    commitment = HKDFExpand(SHA512(), COMMITMENT_BYTES, SUITE_ID_BYTES + b"COMMITKEY").derive(prk)
    return content_key, commitment


def metadata_for(wrapped: WrappedKey, message_id: bytes, commitment: bytes) -> dict[str, str]:
    context_field = META_KMS_CONTEXT if wrapped.algorithm == WRAP_KMS_CONTEXT else META_MATERIAL_DESCRIPTION
    return {
        META_CIPHER: str(SUITE_ID),
        META_WRAPPED_KEY: base64.b64encode(wrapped.ciphertext).decode("ascii"),
        META_WRAP_ALGORITHM: wrapped.algorithm,
        context_field: canonical_json(wrapped.context),
        META_COMMITMENT: base64.b64encode(commitment).decode("ascii"),
        META_MESSAGE_ID: base64.b64encode(message_id).decode("ascii"),
    }


def seal(
    plaintext: bytes, data_key: bytes, wrapped: WrappedKey, *, message_id: bytes | None = None
) -> tuple[bytes, dict[str, str]]:
    """Encrypt ``plaintext`` under ``data_key``; return (body, metadata).

    ``message_id`` is for test vectors only; leave it ``None`` so every write gets a fresh
    one (the content key is derived from it, which is what makes the fixed IV safe).
    """
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    if len(data_key) != DATA_KEY_BYTES:
        raise ValueError("data key must be 32 bytes")
    message_id = os.urandom(MESSAGE_ID_BYTES) if message_id is None else message_id
    if len(message_id) != MESSAGE_ID_BYTES:
        raise ValueError("message id must be 28 bytes")
    content_key, commitment = derive_keys(data_key, message_id)
    body = AESGCM(content_key).encrypt(CONTENT_IV, plaintext, SUITE_ID_BYTES)
    return body, metadata_for(wrapped, message_id, commitment)


def _b64(value: object, expected_length: int | None = None) -> bytes:
    if not isinstance(value, str):
        raise IntegrityError()
    try:
        raw = base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise IntegrityError() from None
    if expected_length is not None and len(raw) != expected_length:
        raise IntegrityError()
    return raw


def _context(value: object) -> dict[str, str]:
    if not isinstance(value, str):
        raise IntegrityError()
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        raise IntegrityError() from None
    if not isinstance(parsed, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in parsed.items()):
        raise IntegrityError()
    return parsed


def is_envelope(metadata: Mapping[str, str]) -> bool:
    """True if the metadata claims to be a V3 envelope (it may still fail to open)."""
    return META_CIPHER in metadata or META_WRAPPED_KEY in metadata


def parse_header(metadata: Mapping[str, str]) -> EnvelopeHeader:
    """Check the metadata's shape. Raises ForeignObjectError for an object that does not
    claim to be ours at all, IntegrityError for one that claims to be but is malformed."""
    if not is_envelope(metadata):
        raise ForeignObjectError()
    if any(key in metadata for key in _LEGACY_KEYS):
        raise IntegrityError()  # mixed V2/V3 keys: a downgrade attempt
    if metadata.get(META_CIPHER) != str(SUITE_ID):
        raise IntegrityError()
    algorithm = metadata.get(META_WRAP_ALGORITHM)
    if algorithm == WRAP_KMS_CONTEXT:
        context = _context(metadata.get(META_KMS_CONTEXT))
        if META_MATERIAL_DESCRIPTION in metadata:
            raise IntegrityError()
    elif algorithm == WRAP_AES_GCM:
        context = _context(metadata.get(META_MATERIAL_DESCRIPTION))
        if META_KMS_CONTEXT in metadata:
            raise IntegrityError()
    else:
        raise IntegrityError()
    return EnvelopeHeader(
        wrapped_key=WrappedKey(algorithm, _b64(metadata.get(META_WRAPPED_KEY)), context),
        message_id=_b64(metadata.get(META_MESSAGE_ID), MESSAGE_ID_BYTES),
        commitment=_b64(metadata.get(META_COMMITMENT), COMMITMENT_BYTES),
    )


def open_body(body: bytes, data_key: bytes, header: EnvelopeHeader) -> bytes:
    """Verify the key commitment, then authenticate and decrypt ``body``."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    if len(data_key) != DATA_KEY_BYTES or len(body) < TAG_BYTES:
        raise IntegrityError()
    content_key, commitment = derive_keys(data_key, header.message_id)
    if not hmac.compare_digest(commitment, header.commitment):
        raise IntegrityError()
    try:
        return AESGCM(content_key).decrypt(CONTENT_IV, body, SUITE_ID_BYTES)
    except InvalidTag:
        raise IntegrityError() from None
