"""Provenance: who changed a memory file, how and when, sealed so the bucket can neither read nor forge it.

Every version s3memory writes carries its provenance in its own metadata, in the same
request (``x-amz-meta-s3memory-p``), sealed under the version's own data key::

    base64url( nonce (12 bytes) || AES-256-GCM(k, nonce, record, aad = object key) )
    k      = HKDF-SHA256(data key, salt = message id (x-amz-i), info = "s3memory provenance v1")
    record = {"v": 1, "op", "at", "by", "file", "rev", "prev"[, "born"][, "finding"]}  (compact JSON)

``op`` is ``created``, ``modified``, ``renamed`` or ``restored``; ``at`` the client's time in
microseconds; ``by`` the actor the application named when it opened the memory (never the
model); ``file`` a random 128-bit id the file keeps across edits and renames; ``rev`` a
random 96-bit id of this version and ``prev`` the ``rev`` of the version it replaced (null
for a new file), so history can tell a replayed old version from the one it claims to
follow; ``born``, the ``at`` of the file's first version, kept across edits and renames as
``file`` is (absent where that first version predates it: a reader then knows no birth);
``finding``, only when there is one, what the instruction screen found in the write
(``instruction_policy="flag"``) or that a reviewer approved it (``_quarantine``): kinds and
lines, never the text.

Why the data key: every version has its own (``_keys``), unwrapped only by whoever holds the
tenant key or may use the KMS key under the tenant's context, and the envelope already binds
it to the tenant, the deployment and the path. So no new key, no new object, nothing more
to rotate or to destroy: crypto-shredding a tenant shreds its provenance too. Provenance
moved onto another version (another data key) or another key (the additional data) fails
to open; a re-wrap (key rotation, and a rename, which re-wraps the same data key for the
new path) keeps the data key and the message id, so the record stays valid (a rename seals
a new one for the new key). The cost: reading a version's provenance unwraps its data key,
which is local in tenant-key mode and one KMS ``Decrypt`` per version in KMS mode.

Events that leave no version of their own (a delete, the old side of a rename, a
redaction) are sealed records (``_records``).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._errors import ConfigurationError, IntegrityError

#: The metadata entry that holds a version's sealed provenance.
PROVENANCE_METADATA = "s3memory-p"
PROVENANCE_VERSION = 1
#: Operations a version's own provenance names; records name the others.
VERSION_OPERATIONS = ("created", "modified", "renamed", "restored")
OPERATIONS = ("created", "modified", "renamed", "restored", "deleted", "redacted")
NONCE_BYTES = 12
MAX_ACTOR_CHARS = 128
MAX_FINDING_CHARS = 200
DEFAULT_ACTOR = "api"
_INFO = b"s3memory provenance v1"
_CORRUPT = "Error: A version's provenance failed its integrity check."
#: Why a version has no provenance to show (history's notes).
NO_PROVENANCE = "no provenance (written before history was kept, or outside s3memory)"
KEY_DOES_NOT_UNWRAP = "provenance cannot be opened: the version's data key does not unwrap here"
PROVENANCE_FAILED = "provenance failed its integrity check (forged, or moved here)"


def validate_actor(actor: object) -> str:
    """``actor`` if it can name who writes: 1 to 128 printable characters."""
    if not isinstance(actor, str) or not actor or len(actor) > MAX_ACTOR_CHARS or not actor.isprintable():
        raise ConfigurationError(
            f"actor must be 1 to {MAX_ACTOR_CHARS} printable characters (who writes, e.g. 'session:abc'), "
            f"not {actor!r}"[:300]
        )
    return actor


def new_file_id() -> str:
    return os.urandom(16).hex()


def new_rev() -> str:
    return os.urandom(12).hex()


@dataclass(frozen=True)
class Provenance:
    """The provenance of one version (see the module docstring)."""

    op: str
    at_us: int
    actor: str
    file: str
    rev: str
    prev: str | None
    finding: str | None = None
    born_us: int | None = None

    def record(self) -> dict[str, Any]:
        record = {
            "v": PROVENANCE_VERSION,
            "op": self.op,
            "at": self.at_us,
            "by": self.actor,
            "file": self.file,
            "rev": self.rev,
            "prev": self.prev,
        }
        if self.born_us is not None:
            record["born"] = self.born_us
        return record if self.finding is None else {**record, "finding": self.finding}

    @classmethod
    def from_record(cls, record: object) -> Provenance:
        """Raises ``ValueError`` if ``record`` is not a provenance record of a known version."""
        if not isinstance(record, dict) or record.get("v") != PROVENANCE_VERSION:
            raise ValueError("not a provenance record")
        op, at, by, file, rev, prev = (record.get(k) for k in ("op", "at", "by", "file", "rev", "prev"))
        if op not in VERSION_OPERATIONS or not isinstance(at, int) or isinstance(at, bool):
            raise ValueError("not a provenance record")
        if not (isinstance(by, str) and isinstance(file, str) and isinstance(rev, str)):
            raise ValueError("not a provenance record")
        if not (prev is None or isinstance(prev, str)):
            raise ValueError("not a provenance record")
        finding = record.get("finding")
        if not (finding is None or (isinstance(finding, str) and len(finding) <= MAX_FINDING_CHARS)):
            raise ValueError("not a provenance record")
        born = record.get("born")
        if not (born is None or (isinstance(born, int) and not isinstance(born, bool))):
            raise ValueError("not a provenance record")
        return cls(str(op), at, by, file, rev, prev, finding, born)


def _key(data_key: bytes, message_id: str) -> bytes:
    from cryptography.hazmat.primitives.hashes import SHA256
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return HKDF(SHA256(), 32, salt=message_id.encode("ascii", "replace"), info=_INFO).derive(data_key)


def seal_provenance(provenance: Provenance, data_key: bytes, metadata: Mapping[str, str], object_key: str) -> str:
    """The metadata value for ``provenance`` of the version at ``object_key`` sealed under
    ``data_key`` with envelope ``metadata`` (whose message id, ``x-amz-i``, it binds)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    plaintext = json.dumps(provenance.record(), separators=(",", ":")).encode()
    nonce = os.urandom(NONCE_BYTES)
    sealed = AESGCM(_key(data_key, metadata.get("x-amz-i", ""))).encrypt(nonce, plaintext, object_key.encode())
    return base64.urlsafe_b64encode(nonce + sealed).rstrip(b"=").decode("ascii")


def open_provenance(data_key: bytes, metadata: Mapping[str, str], object_key: str) -> Provenance:
    """The provenance in a version's ``metadata``, opened with its data key. ``LookupError``
    if it holds none; :class:`IntegrityError` if it does not open for this version and key."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    sealed = metadata.get(PROVENANCE_METADATA)
    if sealed is None:
        raise LookupError("no provenance")
    try:
        raw = base64.urlsafe_b64decode(sealed + "=" * (-len(sealed) % 4))
        key = _key(data_key, metadata.get("x-amz-i", ""))
        plaintext = AESGCM(key).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], object_key.encode())
        return Provenance.from_record(json.loads(plaintext))
    except (binascii.Error, InvalidTag, ValueError):
        raise IntegrityError(_CORRUPT) from None


def with_provenance(
    metadata: Mapping[str, str], provenance: Provenance, data_key: bytes, object_key: str
) -> dict[str, str]:
    """``metadata`` (an envelope's) with ``provenance`` sealed into it."""
    return {**metadata, PROVENANCE_METADATA: seal_provenance(provenance, data_key, metadata, object_key)}
