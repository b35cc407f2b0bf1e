"""Master keys: what wraps a tenant's key documents (a local 32-byte key, or a KMS key), and
the one place s3memory calls KMS for them (:func:`kms_call`)."""

from __future__ import annotations

import hashlib
import os
from abc import ABC, abstractmethod
from typing import Any

from .._errors import ConfigurationError, IntegrityError
from .envelope import canonical_json

GCM_NONCE_BYTES = 12


class MasterKey(ABC):
    """Wraps the per-tenant key. ``kind`` is recorded in the tenant key object."""

    kind: str

    @property
    @abstractmethod
    def fingerprint(self) -> str:
        """A non-secret identity, so caches never mix keys of different masters."""

    @abstractmethod
    def wrap(self, key: bytes, context: dict[str, str]) -> bytes: ...

    @abstractmethod
    def unwrap(self, wrapped: bytes, context: dict[str, str]) -> bytes: ...


def generate_master_key() -> bytes:
    """A new random 32-byte master key. Keep it secret; losing it loses every memory."""
    return os.urandom(32)


class LocalMasterKey(MasterKey):
    """A 32-byte secret held by the application (AES-256-GCM key wrap)."""

    kind = "local"

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, (bytes, bytearray)) or len(key) != 32:
            raise ConfigurationError("master_key must be exactly 32 bytes (use s3memory.generate_master_key())")
        if len(set(key)) == 1:
            raise ConfigurationError("master_key must be random bytes, not a repeated byte")
        self._key = bytes(key)

    @property
    def fingerprint(self) -> str:
        return "local:" + hashlib.sha256(b"s3memory master key id\n" + self._key).hexdigest()[:32]

    def wrap(self, key: bytes, context: dict[str, str]) -> bytes:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        nonce = os.urandom(GCM_NONCE_BYTES)
        return nonce + AESGCM(self._key).encrypt(nonce, key, canonical_json(context).encode())

    def unwrap(self, wrapped: bytes, context: dict[str, str]) -> bytes:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        try:
            nonce, ciphertext = wrapped[:GCM_NONCE_BYTES], wrapped[GCM_NONCE_BYTES:]
            return AESGCM(self._key).decrypt(nonce, ciphertext, canonical_json(context).encode())
        except (InvalidTag, ValueError):
            raise IntegrityError() from None


class KmsMasterKey(MasterKey):
    """An AWS KMS key wraps the tenant key (``Encrypt``/``Decrypt`` with the tenant as context)."""

    kind = "kms"

    def __init__(self, kms_client: Any, key_id: str) -> None:
        if not isinstance(key_id, str) or not key_id:
            raise ConfigurationError("kms_key_id must be a non-empty string")
        self._kms = kms_client
        self.key_id = key_id

    @property
    def fingerprint(self) -> str:
        return "kms:" + self.key_id

    def wrap(self, key: bytes, context: dict[str, str]) -> bytes:
        response = kms_call(self._kms, "encrypt", KeyId=self.key_id, Plaintext=key, EncryptionContext=context)
        return bytes(response["CiphertextBlob"])

    def unwrap(self, wrapped: bytes, context: dict[str, str]) -> bytes:
        response = kms_call(self._kms, "decrypt", KeyId=self.key_id, CiphertextBlob=wrapped, EncryptionContext=context)
        return bytes(response["Plaintext"])


def kms_call(client: Any, operation: str, **kwargs: Any) -> Any:
    from botocore.exceptions import BotoCoreError, ClientError

    from .._aws.errors import map_aws_error

    try:
        return getattr(client, operation)(**kwargs)
    except (ClientError, BotoCoreError) as exc:
        raise map_aws_error(exc, f"kms:{operation}", client) from exc
