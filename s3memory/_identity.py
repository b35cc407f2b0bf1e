"""From an identity provider's subject to an s3memory user id.

A user id is one key segment (see ``validate_tenant``): ASCII letters, digits and
``. _ @ + = -``, at most 128 characters, never ``memories``. Subjects of identity providers
are often none of that: ``auth0|abc123``, ``google-oauth2|1234``, emails with ``+``,
``urn:...`` ids, long opaque strings. :func:`user_id_for_subject` maps every (issuer, subject)
pair to a valid id that is stable and, for distinct pairs, distinct: ``u-`` and 32
lowercase base32 characters of a 160-bit hash (finding two pairs with one id would take
about 2**80 hashes).

Pure standard library, so it costs a Lambda cold start nothing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from ._errors import ConfigurationError

__all__ = ["user_id_for_subject"]

# Domain separation: these bytes never hash to an id of any other purpose.
_CONTEXT = b"s3memory subject v1\x00"
_DIGEST_BYTES = 20  # 160 bits: 32 base32 characters, no padding
_MIN_KEY_BYTES = 16
_PREFIX = "u-"


def _utf8(text: str) -> bytes:
    # "surrogatepass": a subject decoded from JSON may hold a lone surrogate (a "\\ud800"
    # escape). It still maps, and distinct strings still give distinct bytes.
    return text.encode("utf-8", "surrogatepass")


def user_id_for_subject(subject: str, *, issuer: str = "", key: bytes | None = None) -> str:
    """The s3memory user id of ``subject`` as named by ``issuer``.

    The id is ``"u-"`` followed by 32 characters of ``a-z`` and ``2-7``: the first 160 bits of
    SHA-256 (or, with ``key``, HMAC-SHA256) over the issuer and the subject, encoded so
    that no (issuer, subject) pair can pass for another (the issuer's length comes first).
    Pass the token's ``iss`` claim as ``issuer``, so that two identity providers' users
    never share a memory even if their subjects coincide.

    Without ``key``, anyone who can list the bucket (where user ids are key prefixes) can
    check a guessed subject, such as an email address, by hashing it. With a secret ``key``
    they cannot, and the ids reveal nothing about the subjects. The key (at least 16 random
    bytes; 32 recommended) must never change and must never be lost: under another key every
    user gets a new id, and with it an empty memory (their objects stay under the old ids).
    Choose once, keyed or not, before the first user writes a memory.

    Args:
        subject: the identity provider's subject (the ``sub`` claim), any non-empty string.
        issuer: the identity provider (the ``iss`` claim), exactly as the token spells it.
        key: optional secret bytes for HMAC-SHA256.

    Raises:
        ConfigurationError: ``subject`` is not a non-empty string, ``issuer`` is not a
            string, or ``key`` is not bytes of at least 16 bytes.
    """
    if not isinstance(subject, str) or not subject:
        raise ConfigurationError("subject must be a non-empty string")
    if not isinstance(issuer, str):
        raise ConfigurationError("issuer must be a string")
    issuer_bytes = _utf8(issuer)
    message = _CONTEXT + len(issuer_bytes).to_bytes(8, "big") + issuer_bytes + _utf8(subject)
    if key is None:
        digest = hashlib.sha256(message).digest()
    else:
        if not isinstance(key, (bytes, bytearray, memoryview)):
            raise ConfigurationError("key must be bytes")
        key = bytes(key)
        if len(key) < _MIN_KEY_BYTES:
            raise ConfigurationError(f"key must be at least {_MIN_KEY_BYTES} bytes (32 random bytes recommended)")
        digest = hmac.new(key, message, hashlib.sha256).digest()
    return _PREFIX + base64.b32encode(digest[:_DIGEST_BYTES]).decode("ascii").lower()
