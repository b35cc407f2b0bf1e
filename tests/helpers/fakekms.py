"""A deterministic stand-in for the KMS client, for tests that need KMS-mode objects to
survive between runs (stored vectors) or thousands of calls (fuzzing): data keys are
sealed under a fixed local key with the encryption context as AAD, and a blob that does
not open under the given context is refused the way KMS refuses it."""

from __future__ import annotations

import hashlib
import os
from typing import Any

from s3memory._crypto.envelope import canonical_json


class FakeKms:
    def __init__(self, seed: bytes = b"s3memory fuzz fake kms") -> None:
        self._key = hashlib.sha256(seed).digest()
        self.calls: list[str] = []

    def _seal(self, plaintext: bytes, context: dict[str, str]) -> bytes:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        nonce = os.urandom(12)
        return nonce + AESGCM(self._key).encrypt(nonce, plaintext, canonical_json(context).encode())

    def generate_data_key(self, *, KeyId: str, KeySpec: str, EncryptionContext: dict[str, str]) -> dict[str, Any]:
        self.calls.append("GenerateDataKey")
        key = os.urandom(32)
        return {"KeyId": KeyId, "Plaintext": key, "CiphertextBlob": self._seal(key, EncryptionContext)}

    def encrypt(self, *, KeyId: str, Plaintext: bytes, EncryptionContext: dict[str, str]) -> dict[str, Any]:
        self.calls.append("Encrypt")
        return {"KeyId": KeyId, "CiphertextBlob": self._seal(Plaintext, EncryptionContext)}

    def decrypt(self, *, KeyId: str, CiphertextBlob: bytes, EncryptionContext: dict[str, str]) -> dict[str, Any]:
        from botocore.exceptions import ClientError
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self.calls.append("Decrypt")
        try:
            aad = canonical_json(EncryptionContext).encode()
            plaintext = AESGCM(self._key).decrypt(CiphertextBlob[:12], CiphertextBlob[12:], aad)
        except (InvalidTag, ValueError):
            error = {"Code": "InvalidCiphertextException", "Message": "The ciphertext is invalid."}
            raise ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}, "Decrypt") from None
        return {"KeyId": KeyId, "Plaintext": plaintext}
