"""History records: one per change, listable, so history reads a thousand in one request.

Every change leaves a record about each path it touches, at
``TenantLayout.history_record_key``: the path's tag (a hash of the path, keyed with encrypted
names, so the key shows nothing the bucket does not already show), then the inverted time,
so a listing returns the newest first, then the record itself::

    {"v": 2, "op", "at", "by", "path", ...}

- A new version (``created``, ``modified``, ``restored``) says which, by the version's ETag
  (the MD5 of the ciphertext, which S3 lists): ``etag``, ``file``, ``rev``, ``prev``: the
  same provenance its own metadata carries (``_provenance``).
- A rename lists each file moved: ``files: [{"path", "to", "etag", "file", "rev", "prev"}]``
  (the copy keeps the source's body, so its ETag), and serves as the provenance of each copy.
- A deletion lists each file removed by path and ETag (``files``), so that history matches it
  to the delete marker that follows exactly that version.
- A redaction says which version, and keeps that version's own provenance (``original``).

**Sealed in its name.** A record is an empty object whose key ends ``s`` + unpadded lowercase
base32 of ``nonce (12) || AES-256-GCM(history key, nonce, record, aad = "s3memory record v2"
|| tag || inverted time)``, in segments of at most 200 characters (a local file name holds
255 bytes; base32 because a local directory on a case-insensitive file system escapes every
capital letter, which would make a segment too long),
under the tenant's history key (``_historykey``). A LIST returns the records themselves;
opening them is local. A record moved to another path's folder or another time does not open.
A record too long for a key name (a directory's deletion, a long path) is stored as a body
instead, sealed like a file (an envelope, a fresh data key, bound to a name no memory path
can have and that includes the record's key), at ``{time}-{16 hex digits}``: the form every
record of version 1 has, still read. Reading those costs a GET each.

A record goes out beside the change it records, in the same round trip: it is written even
if the change then loses a race, and history pairs a version's record with the version by
ETag, so a record of a write that did not happen pairs with nothing. A version no record
pairs with (written before records were listable; a bucket whose ETags are not MD5s, as with
SSE-KMS; a record that could not be written) is read as before, with a HEAD.
"""

from __future__ import annotations

import binascii
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._crypto import envelope
from .._crypto.files import SealedFiles
from .._crypto.provenance import OPERATIONS, Provenance
from .._errors import ForeignObjectError, IntegrityError, ObjectTooLargeError, S3MemoryError, StorageError
from .._layout import MAX_TIME_US
from .._paths import MAX_S3_KEY_BYTES, MemoryPath
from .._roundtrip import Pending, RoundTrip
from ..stores import ObjectInfo

log = logging.getLogger("s3memory")

RECORD_VERSION = 2
RECORD_VERSIONS = (1, 2)  # version 1: deletions, renames and redactions, as bodies
RECORD_OPERATIONS = ("deleted", "renamed", "redacted")
MAX_RECORD_BYTES = 8 * 1024 * 1024  # a record of a directory's deletion lists every file
NAME_MARK = "s"  # the first character of a record's own part of the key: sealed in the name
NAME_SEGMENT = 200  # characters of base64url per key segment (a local file name holds 255 bytes)
NONCE_BYTES = 12
_GCM_TAG_BYTES = 16
_RECORD_NAME = "s3memory-internal:history/"  # not a memory path: every memory path starts with /memories
_TAG_PREFIX = b"s3memory history tag\x00"
_NAME_AAD = b"s3memory record v2\x00"
_BODY_RECORD = re.compile(r"[0-9]{16}-[0-9a-f]{16}")
_NAME_RECORD = re.compile(r"([0-9]{16}-)s([a-z2-7]+(?:/[a-z2-7]+)*)")


def bare_etag(etag: str) -> str:
    return etag.strip('"')


def body_etag(body: bytes) -> str:
    """The ETag S3 gives a body written in one PUT (without SSE-KMS): its MD5."""
    return hashlib.md5(body, usedforsecurity=False).hexdigest()


def path_tag(files: SealedFiles, shown: str) -> str:
    """What names the records about a path (see the module docstring)."""
    return hashlib.sha256(_TAG_PREFIX + files.path_name(shown).encode("utf-8")).hexdigest()[:32]


def record_name(files: SealedFiles, key: str) -> str:
    """The name a record stored as a body at ``key`` is sealed for."""
    return _RECORD_NAME + key[len(files.layout.history_prefix) :]


def listed_files(files: SealedFiles, infos: Iterable[ObjectInfo]) -> list[dict[str, str]]:
    """What a record says of the files a command removes: each path and ETag."""
    listed = []
    for info in infos:
        path = files.layout.path_for_key(info.key)
        if path is not None:
            listed.append({"path": path.display, "etag": bare_etag(info.etag)})
    return listed


def provenance_fields(provenance: Provenance) -> dict[str, Any]:
    fields = {"file": provenance.file, "rev": provenance.rev, "prev": provenance.prev}
    return fields if provenance.finding is None else {**fields, "finding": provenance.finding}


# -- sealing a record into a key name ------------------------------------------------------
def _aad(stem: str) -> bytes:
    """What a record's name is bound to: its path's tag and its time (``tag/time-``)."""
    return _NAME_AAD + stem.encode("ascii")


def _sealed_key(stem_key: str, stem: str, history_key: bytes, plaintext: bytes) -> str:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = os.urandom(NONCE_BYTES)
    sealed = AESGCM(history_key).encrypt(nonce, plaintext, _aad(stem))
    text = _b32encode(nonce + sealed)
    segments = "/".join(text[i : i + NAME_SEGMENT] for i in range(0, len(text), NAME_SEGMENT))
    return f"{stem_key}{NAME_MARK}{segments}"


def _sealed_key_bytes(stem_key: str, plaintext_bytes: int) -> int:
    """The length in bytes of the key :func:`_sealed_key` makes from a record of
    ``plaintext_bytes``, known before sealing: the nonce and GCM tag add 28 bytes, unpadded
    base32 spells 5 bits a character, and each segment after the first adds a "/"."""
    characters = -(-(NONCE_BYTES + plaintext_bytes + _GCM_TAG_BYTES) * 8 // 5)
    segments = -(-characters // NAME_SEGMENT)
    return len(stem_key.encode("utf-8")) + len(NAME_MARK) + characters + segments - 1


_B32_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"
_B32_DIGITS = str.maketrans(_B32_ALPHABET, "0123456789abcdefghijklmnopqrstuv")
_NOT_B32 = str.maketrans("", "", _B32_ALPHABET)  # deletes the alphabet: what is left is not base32


_B32_PAIRS = [_B32_ALPHABET[i >> 5] + _B32_ALPHABET[i & 31] for i in range(1024)]  # 10 bits: 2 characters


def _b32encode(raw: bytes) -> str:
    """Unpadded lowercase base32: what ``base64.b32encode`` spells (then unpadded and
    lowered), twice as fast (it is pure Python; a change writes a record name or more)."""
    size = len(raw)
    padded = raw + bytes(-size % 5)
    pairs, from_bytes = _B32_PAIRS, int.from_bytes
    parts = []
    for i in range(0, len(padded), 5):
        n = from_bytes(padded[i : i + 5], "big")
        parts.append(pairs[n >> 30] + pairs[(n >> 20) & 1023] + pairs[(n >> 10) & 1023] + pairs[n & 1023])
    return "".join(parts)[: -(-size * 8 // 5)]


def _b32decode(text: str) -> bytes:
    """Unpadded lowercase base32 (RFC 4648 alphabet), decoded by ``int(…, 32)``: what
    ``base64.b32decode`` does, 20 times faster (it is pure Python, and history opens a
    thousand names at once). ``ValueError`` for a character outside the alphabet."""
    if not text or text.translate(_NOT_B32) or len(text) % 8 in (1, 3, 6):
        raise ValueError("not unpadded base32")
    size, spare_bits = divmod(5 * len(text), 8)
    value = int(text.translate(_B32_DIGITS), 32)
    if value & ((1 << spare_bits) - 1):
        raise ValueError("not canonical base32")
    return (value >> spare_bits).to_bytes(size, "big")


def _open_sealed(history_key: bytes, stem: str, text: str) -> dict[str, Any] | None:
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    try:
        raw = _b32decode(text)
        plaintext = AESGCM(history_key).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], _aad(stem))
        record = json.loads(plaintext)
    except (binascii.Error, InvalidTag, ValueError, RecursionError):
        return None
    return record if _valid(record) else None


def _valid(record: object) -> bool:
    return isinstance(record, dict) and record.get("v") in RECORD_VERSIONS and record.get("op") in OPERATIONS


# -- writing -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Place:
    """Where a record about one path goes, made at ``at_us``."""

    tag: str
    at_us: int


@dataclass
class Sealer:
    """What a change needs to leave records, got in its first round trip: whether to (not
    when the store keeps no versions), and the history key (None: records go as bodies)."""

    files: SealedFiles
    wanted: bool
    history_key: bytes | None
    places: list[Place] = field(default_factory=list)

    def write(self, record: Mapping[str, Any]) -> None:
        """Store ``record`` (with who and when) at each place."""
        if not self.wanted:
            return
        for place in self.places:
            _write_one(self.files, self.history_key, place, record)

    def about(self, path: MemoryPath) -> Sealer:
        """This sealer (its key, its time) for a record about ``path`` alone: a change that
        leaves a different record about each path it touches (a redaction's copies)."""
        at = self.places[0].at_us if self.places else int(time.time() * 1_000_000)
        return Sealer(self.files, self.wanted, self.history_key, [Place(path_tag(self.files, path.display), at)])

    def write_beside(self, record: Mapping[str, Any]) -> None:
        """:meth:`write`, beside the change it records: if the record fails, the change stands
        and is not reported as failed (issued again, it would find nothing to do, or write
        twice); history then reads that version's own provenance. Logged."""
        try:
            self.write(record)
        except S3MemoryError as exc:
            log.warning(
                "a history record could not be written (%s); the change it records was made", type(exc).__name__
            )


def history_key_for_records(files: SealedFiles) -> tuple[bool, bytes | None]:
    """Whether a change's records are worth writing (the store keeps versions), and the key
    they are sealed in their names under, created on a tenant's first write. (True, None)
    when that key cannot be had (no history key here, or it cannot be read or made: logged):
    records are then written as bodies, which history reads with a GET each."""
    try:
        versioned = files.store.keeps_versions() if files.history_key is None else files.history_key.versioned()
    except S3MemoryError as exc:  # e.g. a role without s3:GetBucketVersioning: history cannot work either
        log.warning("no history record for this change: the store's versioning is unknown (%s)", type(exc).__name__)
        return False, None
    if not versioned or files.history_key is None:
        return versioned, None
    try:
        # Made now but stored only by the first record sealed under it (_write_one): a command
        # refused after this round trip leaves no key document.
        return True, files.history_key.key(create=True, defer=True)
    except S3MemoryError as exc:
        log.warning("history records of this change are written without the history key: %s", type(exc).__name__)
        return True, None


def history_key_for_reading(files: SealedFiles) -> bytes | None:
    """The key records were sealed under, if the tenant has one (never creates it)."""
    if files.history_key is None:
        return None
    try:
        return files.history_key.key(create=False)
    except S3MemoryError as exc:
        log.warning("history records cannot be opened (%s): reading each version instead", type(exc).__name__)
        return None


def sealer(files: SealedFiles, about: Sequence[MemoryPath], *, at_us: int | None = None) -> Sealer:
    """A round trip's task: the history key (cached after the first use; on the first write
    of a tenant, created) and a place for a record about each of ``about``."""
    at = int(time.time() * 1_000_000) if at_us is None else at_us
    wanted, key = history_key_for_records(files)
    return Sealer(files, wanted, key, [Place(path_tag(files, path.display), at) for path in about])


def _write_one(files: SealedFiles, history_key: bytes | None, place: Place, record: Mapping[str, Any]) -> None:
    full = {"v": RECORD_VERSION, "at": place.at_us, "by": files.actor, **record}
    layout = files.layout
    stem_key = f"{layout.history_records_prefix(place.tag)}{MAX_TIME_US - place.at_us:016d}-"
    if history_key is not None and files.history_key is not None:
        try:  # a new key's document is stored before the first record sealed under it
            history_key = files.history_key.committed(history_key)
        except S3MemoryError as exc:
            log.info("a history record went as a body: the history key could not be stored (%s)", type(exc).__name__)
            history_key = None
    plaintext = json.dumps(full, separators=(",", ":")).encode()
    # Too long for a name is known from the length alone: a record of a large rename or
    # deletion (hundreds of KB) is never sealed and base32-spelt only to be thrown away.
    if history_key is not None and _sealed_key_bytes(stem_key, len(plaintext)) <= MAX_S3_KEY_BYTES:
        key = _sealed_key(stem_key, stem_key[len(layout.history_prefix) :], history_key, plaintext)
        try:
            files.store.put_unique(key, b"", {})
            return
        except StorageError as exc:  # e.g. a name the store cannot hold: then as a body
            log.info("a history record went as a body: %s", type(exc).__name__)
    elif history_key is not None:
        # The nonce a name would have had is drawn all the same: the frozen buckets
        # (tests/vectors/buckets) replay recorded os.urandom draws in this order.
        os.urandom(NONCE_BYTES)
    # No history key, or too long for a name: a body, sealed like a file (its own data key:
    # a KMS request in KMS mode).
    key = stem_key + os.urandom(8).hex()
    data_key, wrapped = files.keyring.generate(files.binding_of_name(record_name(files, key)))
    body, metadata = envelope.seal(plaintext, data_key, wrapped)
    files.store.put_unique(key, body, metadata)


def version_record(path: MemoryPath, provenance: Provenance, body: bytes) -> dict[str, Any]:
    """The record of a new version of ``path``, paired with it by ``body``'s ETag."""
    return {
        "op": provenance.op,
        "at": provenance.at_us,
        "path": path.display,
        "etag": body_etag(body),
        **provenance_fields(provenance),
    }


def rename_record(
    old: MemoryPath,
    new: MemoryPath,
    moved: Sequence[tuple[MemoryPath | None, MemoryPath | None, str, Provenance | None]],
) -> dict[str, Any]:
    """The record of a rename. ``moved``: (source, target, the source's ETag, the copy's
    provenance) of each file copied (keys no valid path maps to have no path, and no history)."""
    files_moved = [
        {"path": s.display, "to": t.display, "etag": bare_etag(etag), **({} if p is None else provenance_fields(p))}
        for s, t, etag, p in moved
        if s is not None and t is not None
    ]
    return {"op": "renamed", "path": old.display, "to": new.display, "files": files_moved}


# -- reading -------------------------------------------------------------------------------
def listed(files: SealedFiles, prefix: str) -> list[tuple[str, str]]:
    """(key, version id) of every record under ``prefix``: every version, so that a record
    deleted or overwritten since (by whoever may write the bucket but not delete versions)
    is still read."""
    return [(v.key, v.version_id) for v in files.store.list_versions(prefix) if not v.is_delete_marker]


def list_everywhere(files: SealedFiles, rt: RoundTrip) -> list[Pending[list[tuple[str, str]]]]:
    """Submit to ``rt`` the listing of every record of the tenant, in 16 parts (a tag starts
    with a hex digit): 16,000 records take one round trip, not 16 pages one after another."""
    return [rt.submit(listed, files, f"{files.layout.history_prefix}{digit}") for digit in "0123456789abcdef"]


@dataclass(frozen=True)
class Found:
    """Records listed: those opened from their names, and where the others' bodies are."""

    records: list[dict[str, Any]]
    bodies: list[tuple[str, str]]


def opened_names(files: SealedFiles, history_key: bytes | None, refs: Sequence[tuple[str, str]]) -> Found:
    """The records among ``refs`` sealed in their names, opened (local CPU); the rest, to GET."""
    records: list[dict[str, Any]] = []
    bodies: list[tuple[str, str]] = []
    seen: set[str] = set()
    prefix_length = len(files.layout.history_prefix)
    for key, version_id in refs:
        rest = key[prefix_length:]
        tag, _, own = rest.partition("/")
        if _BODY_RECORD.fullmatch(own):
            bodies.append((key, version_id))
            continue
        match = _NAME_RECORD.fullmatch(own)
        if match is None or history_key is None or key in seen:
            continue  # not a record (or a copy of one already read): it grants nothing
        seen.add(key)
        record = _open_sealed(history_key, f"{tag}/{match.group(1)}", match.group(2).replace("/", ""))
        if record is not None:
            records.append(record)
    return Found(records, bodies)


def read_one(files: SealedFiles, key: str, version_id: str) -> dict[str, Any] | None:
    try:
        stored = files.store.get_version(key, version_id, max_bytes=MAX_RECORD_BYTES)
    except ObjectTooLargeError:
        return None
    if stored is None:
        return None
    try:
        record = json.loads(files.decrypt(record_name(files, key), key, bytes(stored.body), stored.metadata))
    except (IntegrityError, ForeignObjectError, ValueError, RecursionError):
        return None  # tampered with, planted, or moved here: it grants nothing
    return record if _valid(record) else None


def unique(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each event once, however many copies of its record."""
    found: dict[str, dict[str, Any]] = {}
    for record in records:
        found.setdefault(json.dumps(record, sort_keys=True), record)
    return list(found.values())
