"""``docs/FORMAT.md`` is true, and enough: the stored formats are published, and a reader in
another language can follow them.

Three kinds of test, over the JSON vectors FORMAT.md lists (every ``tests/vectors/**/*.json``;
``tests/vectors/README.md`` says what each freezes):

1. **An independent reader.** The section "independent reader" below is written from
   FORMAT.md alone, with the standard library and ``cryptography`` only (no s3memory code):
   it unwraps key documents under the master key, opens envelopes after checking their
   binding, opens encrypted names, path tags, provenance, history records (sealed in their
   names and as bodies), rename intent records, the search index, pending writes and a
   local store file, and compares everything with the vectors. That it passes shows the
   document suffices for a reader in another language. KMS is the algorithm of ``FakeKms``
   (``tests/helpers/fakekms.py``, FORMAT.md section 15), which stands in for AWS KMS in the
   vectors.
2. **The library reads them back.** Each bucket of ``tests/vectors/buckets`` goes into an
   ``InMemoryStore`` and is opened with ``open_memory``: files, old versions, history,
   search and held writes come back as the vectors say; and replaying the vector's steps
   with s3memory (``os.urandom`` and the clock fixed per step) writes exactly its bucket.
3. **The document stays true.** Every metadata key, context key, label, version number and
   object name the code uses (read from the modules) is named in FORMAT.md, and every
   vector file is listed there.

``tests/vectors/buckets/*.json`` were written once, when FORMAT.md was published, by a script
that ran :func:`replay` with a source that returned fresh ``os.urandom`` bytes and recorded
each draw, then described every object; that script was not committed. A new bucket is made
the same way. Never regenerate one to make a test pass: the replay test fails on any drift,
and drift is a change of format.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime
import hashlib
import hmac
import inspect
import itertools
import json
import os
import re
import struct
import sys
import threading
import time
import types
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, AESSIV
from cryptography.hazmat.primitives.hashes import SHA256, SHA512
from cryptography.hazmat.primitives.kdf.hkdf import HKDF, HKDFExpand
from helpers import REPO, VECTORS_DIR

from s3memory import InMemoryStore, KeyCache, Limits, WriteHeldError, open_memory

FORMAT_MD = REPO / "docs" / "FORMAT.md"
BUCKETS_DIR = VECTORS_DIR / "buckets"
BUCKETS = sorted(BUCKETS_DIR.glob("*.json"))
BUCKET_IDS = [path.stem for path in BUCKETS]


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


# =============================================================================================
# 1. An independent reader: FORMAT.md in code, with the standard library and cryptography only
# =============================================================================================


class Refused(Exception):
    """What the reader raises for anything FORMAT.md says to refuse."""


SUITE = b"\x00\x73"
ENVELOPE_KEYS = {"x-amz-c", "x-amz-3", "x-amz-w", "x-amz-m", "x-amz-t", "x-amz-d", "x-amz-i"}
LEGACY_KEYS = {"x-amz-key", "x-amz-key-v2", "x-amz-iv", "x-amz-cek-alg", "x-amz-wrap-alg"}
MAX_TIME_US = 9999999999999999


def canonical_json(mapping: Mapping[str, str]) -> bytes:
    return json.dumps(dict(mapping), sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("utf-8")


def b64(text: object, size: int | None = None) -> bytes:
    if not isinstance(text, str):
        raise Refused("not base64")
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise Refused("not base64") from None
    if size is not None and len(raw) != size:
        raise Refused("wrong length")
    return raw


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64url_encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def gcm_open(key: bytes, sealed: bytes, aad: bytes) -> bytes:
    try:
        return AESGCM(key).decrypt(sealed[:12], sealed[12:], aad)
    except (InvalidTag, ValueError):
        raise Refused("AES-GCM") from None


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def deployment(prefix: str) -> str:
    return prefix or "/"


# -- section 5: the binding --------------------------------------------------------------------
def binding(tenant: str, prefix: str | None, name: str, names_key: bytes | None = None) -> dict[str, str]:
    """Binding version 2 (``prefix`` a string) or 1 (``prefix`` None) of ``name``."""
    shown = name if names_key is None else path_tag(names_key, name)
    context = {"s3memory:tenant": tenant, "s3memory:path": sha256_hex(shown.encode("utf-8"))}
    if prefix is not None:
        context["s3memory:prefix"] = deployment(prefix)
    return context


# -- section 7: key documents ------------------------------------------------------------------
Kms = Callable[[bytes, Mapping[str, str]], bytes]


def key_document_context(tenant: str, prefix: str, purpose: str, kid: str, version: int) -> dict[str, str]:
    context = {"s3memory:tenant": tenant, "s3memory:purpose": purpose, "s3memory:kid": kid}
    if version >= 2:
        context["s3memory:prefix"] = deployment(prefix)
    return context


def open_key_document(
    body: bytes,
    *,
    tenant: str,
    prefix: str,
    purpose: str,
    master: bytes | None = None,
    kms: Kms | None = None,
    size: int,
) -> dict[str, Any]:
    """``{"v", "kid", "keys": {kid: key}, "retired": [...], "kept": [...]}``: the current key
    first in ``keys``, every retired and kept key unwrapped too."""
    try:
        document = json.loads(body)
        version, kid, wrapper = document["v"], document["kid"], document["wrapper"]
        wrapped = b64(document["wrapped"])
        retired, kept = document.get("retired", []), document.get("kept", [])
    except (ValueError, KeyError, TypeError):
        raise Refused("key document") from None
    if type(version) is not int or version not in (1, 2, 3):
        raise Refused("key document version")
    if not isinstance(kid, str) or not isinstance(retired, list) or not isinstance(kept, list):
        raise Refused("key document")
    if (version == 3) != bool(kept) or len(retired) > 16 or len(kept) > 64:
        raise Refused("kept or retired keys")
    entries = [(kid, wrapped)] + [(e["kid"], b64(e["wrapped"])) for e in (*retired, *kept)]
    if len({k for k, _ in entries}) != len(entries):
        raise Refused("duplicate kid")

    def unwrap(entry_kid: str, blob: bytes) -> bytes:
        context = key_document_context(tenant, prefix, purpose, entry_kid, version)
        if wrapper == "local":
            assert master is not None, "a local master key is needed"
            key = gcm_open(master, blob, canonical_json(context))
        else:
            assert wrapper == "kms" and kms is not None, "a KMS is needed"
            key = kms(blob, context)
        if len(key) != size:
            raise Refused("key size")
        return key

    return {
        "v": version,
        "kid": kid,
        "keys": {entry_kid: unwrap(entry_kid, blob) for entry_kid, blob in entries},
        "retired": [e["kid"] for e in retired],
        "kept": [e["kid"] for e in kept],
    }


def fake_kms(seed: str) -> Kms:
    """AWS KMS ``Decrypt`` as the vectors' KMS stand-in does it (FORMAT.md section 15)."""
    key = hashlib.sha256(seed.encode("utf-8")).digest()
    return lambda blob, context: gcm_open(key, blob, canonical_json(context))


# -- sections 4 and 6: the envelope and its wrapped data key -------------------------------------
def derive(data_key: bytes, message_id: bytes) -> tuple[bytes, bytes]:
    prk = hmac.new(message_id, data_key, hashlib.sha512).digest()
    content = HKDFExpand(SHA512(), 32, SUITE + b"DERIVEKEY").derive(prk)
    commitment = HKDFExpand(SHA512(), 28, SUITE + b"COMMITKEY").derive(prk)
    return content, commitment


def is_envelope(metadata: Mapping[str, str]) -> bool:
    return "x-amz-c" in metadata or "x-amz-3" in metadata


def stored_context(metadata: Mapping[str, str]) -> dict[str, str]:
    if LEGACY_KEYS & set(metadata) or metadata.get("x-amz-c") != "115":
        raise Refused("not suite 115 in V3")
    field, other = {"02": ("x-amz-m", "x-amz-t"), "12": ("x-amz-t", "x-amz-m")}.get(
        metadata.get("x-amz-w", ""), ("", "")
    )
    if not field or other in metadata:
        raise Refused("wrap algorithm")
    try:
        context = json.loads(metadata[field])
    except (KeyError, ValueError):
        raise Refused("context") from None
    if not isinstance(context, dict) or not all(isinstance(v, str) for v in context.values()):
        raise Refused("context")
    return context


def expected_binding(
    metadata: Mapping[str, str], tenant: str, prefix: str, name: str, names_key: bytes | None = None
) -> dict[str, str]:
    """The binding a stored object must have: version 1 if its context has no deployment."""
    legacy = "s3memory:prefix" not in stored_context(metadata)
    return binding(tenant, None if legacy else prefix, name, names_key)


def unwrap_data_key(
    metadata: Mapping[str, str],
    bound: Mapping[str, str],
    *,
    tenant_keys: Mapping[str, bytes] | None = None,
    kms: Kms | None = None,
) -> bytes:
    context = stored_context(metadata)
    wrapped = b64(metadata.get("x-amz-3"))
    if metadata["x-amz-w"] == "02":
        kid = context.get("s3memory:kid", "")
        description = {**bound, "s3memory:kid": kid}
        if context != description or tenant_keys is None or kid not in tenant_keys:
            raise Refused("binding")
        aad = b"AES/GCM/NoPadding\n" + canonical_json(description)
        return gcm_open(tenant_keys[kid], wrapped, aad)
    expected = {**bound, "aws:x-amz-cek-alg": "115"}
    if context != expected or kms is None:
        raise Refused("binding")
    return kms(wrapped, expected)


def open_body(body: bytes, metadata: Mapping[str, str], data_key: bytes) -> bytes:
    message_id, commitment = b64(metadata.get("x-amz-i"), 28), b64(metadata.get("x-amz-d"), 28)
    content, derived = derive(data_key, message_id)
    if not hmac.compare_digest(derived, commitment) or len(body) < 16:
        raise Refused("commitment")
    try:
        return AESGCM(content).decrypt(b"\x01" * 12, body, SUITE)
    except InvalidTag:
        raise Refused("tag") from None


def open_envelope(
    body: bytes,
    metadata: Mapping[str, str],
    bound: Mapping[str, str],
    *,
    tenant_keys: Mapping[str, bytes] | None = None,
    kms: Kms | None = None,
) -> tuple[bytes, bytes]:
    """(plaintext, data key) of an envelope that must be bound to ``bound``."""
    if not is_envelope(metadata):
        raise Refused("not an envelope")
    data_key = unwrap_data_key(metadata, bound, tenant_keys=tenant_keys, kms=kms)
    return open_body(body, metadata, data_key), data_key


# -- section 8: encrypted names and path tags ---------------------------------------------------
def path_tag(names_key: bytes, name: str) -> str:
    return hmac.new(names_key, b"s3memory path tag\x00" + name.encode("utf-8"), hashlib.sha256).hexdigest()


def seal_segment(names_key: bytes, tenant: str, parent: str, name: str) -> str:
    raw = name.encode("utf-8")
    padded = raw + b"\x80" + b"\x00" * (15 - len(raw) % 16)
    return b64url_encode(AESSIV(names_key).encrypt(padded, [tenant.encode("utf-8"), parent.encode("utf-8")]))


def open_segment(names_key: bytes, tenant: str, parent: str, segment: str) -> str:
    if not 43 <= len(segment) <= 255 or not re.fullmatch(r"[A-Za-z0-9_-]+", segment):
        raise Refused("segment")
    try:
        raw = b64url_decode(segment)
    except (binascii.Error, ValueError):
        raise Refused("segment") from None
    if b64url_encode(raw) != segment or len(raw) % 16:
        raise Refused("segment")
    try:
        padded = AESSIV(names_key).decrypt(raw, [tenant.encode("utf-8"), parent.encode("utf-8")])
    except (InvalidTag, ValueError):
        raise Refused("segment") from None
    unpadded = padded.rstrip(b"\x00")
    if not unpadded.endswith(b"\x80") or len(padded) != 16 * ((len(unpadded) - 1) // 16 + 1):
        raise Refused("padding")
    name = unpadded[:-1].decode("utf-8")
    if not name or "/" in name:
        raise Refused("name")
    return name


def open_sealed_path(names_key: bytes, tenant: str, sealed: str) -> str:
    """The display path of a key's sealed part (below ``memories/``)."""
    path = "/memories"
    for segment in sealed.split("/"):
        path = f"{path}/{open_segment(names_key, tenant, path, segment)}"
    return path


def memory_path(key: str, memory_prefix: str, tenant: str, names_key: bytes | None) -> str:
    """The display path of a memory file's key (section 3), or Refused."""
    if not key.startswith(memory_prefix):
        raise Refused("not a memory file")
    relative = key[len(memory_prefix) :]
    if names_key is not None:
        return open_sealed_path(names_key, tenant, relative)
    segments = relative.split("/")
    if any(s in ("", ".", "..") for s in segments) or unicodedata.normalize("NFC", relative) != relative:
        raise Refused("not a canonical path")
    return f"/memories/{relative}"


# -- section 9: provenance ----------------------------------------------------------------------
def open_provenance(data_key: bytes, metadata: Mapping[str, str], object_key: str) -> dict[str, Any]:
    salt = metadata["x-amz-i"].encode("ascii")
    key = HKDF(SHA256(), 32, salt=salt, info=b"s3memory provenance v1").derive(data_key)
    record = json.loads(gcm_open(key, b64url_decode(metadata["s3memory-p"]), object_key.encode("utf-8")))
    if not isinstance(record, dict) or record.get("v") != 1:
        raise Refused("provenance version")
    if record["op"] not in ("created", "modified", "renamed", "restored"):
        raise Refused("provenance op")
    return record


# -- section 10: history records ----------------------------------------------------------------
def record_tag(name: str, names_key: bytes | None) -> str:
    shown = name if names_key is None else path_tag(names_key, name)
    return hashlib.sha256(b"s3memory history tag\x00" + shown.encode("utf-8")).hexdigest()[:32]


def b32decode(text: str) -> bytes:
    if not re.fullmatch(r"[a-z2-7]+", text):
        raise Refused("base32")
    raw = base64.b32decode(text.upper() + "=" * (-len(text) % 8))
    if base64.b32encode(raw).decode("ascii").rstrip("=").lower() != text:
        raise Refused("not canonical base32")
    return raw


def open_name_record(history_key: bytes, below_history: str) -> dict[str, Any]:
    """A record sealed in its name; ``below_history`` is its key below ``.s3memory/history/``."""
    match = re.fullmatch(r"([0-9a-f]{32}/[0-9]{16}-)s([a-z2-7/]+)", below_history)
    if match is None:
        raise Refused("not a record sealed in its name")
    stem, text = match.groups()
    record = json.loads(
        gcm_open(history_key, b32decode(text.replace("/", "")), b"s3memory record v2\x00" + stem.encode())
    )
    if not isinstance(record, dict) or record.get("v") not in (1, 2):
        raise Refused("record version")
    return record


# -- section 13: the local directory store --------------------------------------------------------
def parse_local_file(data: bytes) -> tuple[dict[str, str], bytes, str]:
    """(metadata, body, ETag) of a local store file of format 1 or 2."""
    if data[:5] == b"S3MO\x02":
        meta_len, size, digest = struct.unpack(">IQ16s", data[5:33])
        metadata, body = json.loads(data[33 : 33 + meta_len]), data[33 + meta_len :]
        if len(body) != size or hashlib.md5(body, usedforsecurity=False).digest() != digest:
            raise Refused("local file")
    elif data[:5] == b"S3MO\x01":
        (meta_len,) = struct.unpack(">I", data[5:9])
        metadata, body = json.loads(data[9 : 9 + meta_len]), data[9 + meta_len :]
    else:
        raise Refused("not a local store file")
    return metadata, body, '"' + hashlib.md5(body, usedforsecurity=False).hexdigest() + '"'


# -- the reader over a bucket of tests/vectors/buckets ------------------------------------------------
class BucketReader:
    """Reads one tenant's objects as FORMAT.md says, given the master key."""

    def __init__(self, master: bytes, tenant: str, prefix: str, objects: Mapping[str, bytes]) -> None:
        self.master, self.tenant, self.prefix = master, tenant, prefix
        self.internal = f"{prefix}{tenant}/.s3memory/"
        self.memory_prefix = f"{prefix}{tenant}/memories/"
        self.documents = {
            purpose: open_key_document(
                objects[self.internal + purpose],
                tenant=tenant,
                prefix=prefix,
                purpose=purpose,
                master=master,
                size={"names-key": 64}.get(purpose, 32),
            )
            for purpose in ("tenant-key", "names-key", "history-key")
            if self.internal + purpose in objects
        }

    def key(self, purpose: str) -> bytes | None:
        document = self.documents.get(purpose)
        return None if document is None else bytes(document["keys"][document["kid"]])

    def internal_name(self, key: str) -> str:
        return "s3memory-internal:" + key[len(self.internal) :]

    def open_internal(self, key: str, body: bytes, metadata: Mapping[str, str]) -> tuple[str, bytes, bytes]:
        """(name sealed for, plaintext, data key) of an internal object with an envelope."""
        name = self.internal_name(key)
        bound = expected_binding(metadata, self.tenant, self.prefix, name, self.key("names-key"))
        plaintext, data_key = open_envelope(body, metadata, bound, tenant_keys=self.documents["tenant-key"]["keys"])
        return name, plaintext, data_key

    def open_file(self, key: str, body: bytes, metadata: Mapping[str, str]) -> dict[str, Any]:
        names_key = self.key("names-key")
        path = memory_path(key, self.memory_prefix, self.tenant, names_key)
        bound = expected_binding(metadata, self.tenant, self.prefix, path, names_key)
        plaintext, data_key = open_envelope(body, metadata, bound, tenant_keys=self.documents["tenant-key"]["keys"])
        opened = {
            "kind": "file",
            "path": path,
            "binding": bound,
            "data_key_hex": data_key.hex(),
            "plaintext": plaintext.decode("utf-8"),
            "provenance": open_provenance(data_key, metadata, key),
        }
        if names_key is not None:
            opened["path_tag"] = path_tag(names_key, path)
        return opened

    def open(self, key: str, body: bytes, metadata: Mapping[str, str]) -> dict[str, Any]:
        """What one object opens to, in the shape of a vector's ``opens_to``."""
        names_key = self.key("names-key")
        if key.startswith(self.memory_prefix):
            return self.open_file(key, body, metadata)
        assert key.startswith(self.internal), key
        below = key[len(self.internal) :]
        if below.endswith("-key") and "/" not in below:
            document = self.documents[below]
            return {
                "kind": "key-document",
                "purpose": below,
                "version": document["v"],
                "kid": document["kid"],
                "context": key_document_context(self.tenant, self.prefix, below, document["kid"], document["v"]),
                "key_hex": document["keys"][document["kid"]].hex(),
            }
        if below.startswith("history/"):
            tag, _, own = below[len("history/") :].partition("/")
            if own[17:18] == "s":
                history_key = self.key("history-key")
                assert history_key is not None and body == b"" and not metadata
                record = open_name_record(history_key, below[len("history/") :])
                opened: dict[str, Any] = {"kind": "history-record", "sealed_in": "name", "record": record}
            else:
                name, plaintext, data_key = self.open_internal(key, body, metadata)
                record = json.loads(plaintext)
                bound = binding(self.tenant, self.prefix, name, names_key)
                opened = {"kind": "history-record", "sealed_in": "body", "sealed_for": name, "binding": bound}
                opened.update(data_key_hex=data_key.hex(), record=record)
            # Filed under its path's tag (a rename's record under the old path's and the new one's).
            assert tag in {record_tag(record["path"], names_key), record_tag(record.get("to", ""), names_key)}
            assert record["v"] in (1, 2)
            assert record["op"] in ("created", "modified", "renamed", "restored", "deleted", "redacted")
            return opened
        name, plaintext, data_key = self.open_internal(key, body, metadata)
        opened = {"sealed_for": name, "binding": binding(self.tenant, self.prefix, name, names_key)}
        opened["data_key_hex"] = data_key.hex()
        if below.startswith("intents/rename-"):
            record = json.loads(plaintext)
            pair = f"{record['old']}\n{record['new']}"
            assert (
                below
                == "intents/rename-"
                + sha256_hex((pair if names_key is None else path_tag(names_key, pair)).encode())[:40]
            )
            assert record["v"] == 1 and isinstance(record["etags"], list)
            return {"kind": "rename-intent", **opened, "plaintext": plaintext.decode("utf-8")}
        if below == "index/v1":
            record = json.loads(plaintext)
            assert record["v"] == 1
            return {"kind": "search-index", **opened, "record": record}
        assert below.startswith("pending/"), key
        record = json.loads(plaintext)
        assert record["v"] == 1 and record["id"] == below[len("pending/") :]
        return {"kind": "pending-write", **opened, "record": record}


def bucket_objects(vector: Mapping[str, Any]) -> Iterator[tuple[str, bytes, dict[str, str], dict[str, Any]]]:
    """(key, body, metadata, opens_to) of every version of every object (delete markers left out)."""
    for obj in vector["objects"]:
        for version in obj["versions"]:
            if not version.get("delete_marker"):
                yield obj["key"], base64.b64decode(version["body_b64"]), version["metadata"], version["opens_to"]


def bucket_reader(vector: Mapping[str, Any]) -> BucketReader:
    """A reader of the vector's bucket, given its master key and the current key documents."""
    given = vector["input"]
    documents = {
        o["key"]: base64.b64decode(o["versions"][-1]["body_b64"])
        for o in vector["objects"]
        if o["key"].endswith("-key")
    }
    options = given["options"]
    return BucketReader(bytes.fromhex(given["master_key_hex"]), options["user_id"], options["prefix"], documents)


@pytest.mark.parametrize("path", BUCKETS, ids=BUCKET_IDS)
def test_an_independent_reader_opens_every_object_of_the_buckets(path: Path) -> None:
    vector = load(path)
    reader = bucket_reader(vector)
    keys = {p: {"kid": d["kid"], "key_hex": d["keys"][d["kid"]].hex()} for p, d in reader.documents.items()}
    assert keys == vector["keys"]
    names_key = reader.key("names-key")
    kinds = set()
    for key, body, metadata, opens_to in bucket_objects(vector):
        opened = reader.open(key, body, metadata)
        assert opened == opens_to, key
        kinds.add((opened["kind"], opened.get("sealed_in")))
        if opened["kind"] == "file":  # bound to its path: under another name it does not open
            elsewhere = binding(reader.tenant, reader.prefix, opened["path"] + ".moved", names_key)
            with pytest.raises(Refused):
                open_envelope(body, metadata, elsewhere, tenant_keys=reader.documents["tenant-key"]["keys"])
    current = {}
    for obj in vector["objects"]:
        last = obj["versions"][-1]
        if not last.get("delete_marker") and obj["key"].startswith(reader.memory_prefix):
            opened = reader.open(obj["key"], base64.b64decode(last["body_b64"]), last["metadata"])
            current[opened["path"]] = opened["plaintext"]
    assert current == vector["files"]
    assert {("file", None), ("key-document", None), ("history-record", "name"), ("rename-intent", None)} <= kinds


def test_an_independent_reader_refuses_what_format_md_says_to_refuse() -> None:
    vector = load(BUCKETS_DIR / "tenant-local.json")
    reader = bucket_reader(vector)
    key, body, metadata, _ = next(item for item in bucket_objects(vector) if item[3]["kind"] == "file")
    reader.open_file(key, body, metadata)
    spoilt: list[tuple[str, bytes, dict[str, str]]] = [
        (key, body, {**metadata, "x-amz-key-v2": "x"}),  # a V2 key beside V3: a downgrade
        (key, body, {**metadata, "x-amz-c": "114"}),
        (key, body, {**metadata, "x-amz-w": "12"}),
        (key, body, {**metadata, "x-amz-t": "{}"}),
        (key, body, {**metadata, "x-amz-d": metadata["x-amz-d"][:-4]}),
        (key, body, {**metadata, "x-amz-i": metadata["x-amz-d"]}),  # another message id: commitment fails
        (key, body[:-1] + bytes([body[-1] ^ 1]), metadata),
        (key, body, {**metadata, "x-amz-m": metadata["x-amz-m"].replace('"app/"', '"other/"')}),
        (key.replace("/alice/", "/mallory/"), body, metadata),
    ]
    for spoilt_key, spoilt_body, spoilt_metadata in spoilt:
        with pytest.raises(Refused):
            reader.open_file(spoilt_key, spoilt_body, spoilt_metadata)
    tenant_document = next(o for o in vector["objects"] if o["key"].endswith("/tenant-key"))
    document = json.loads(base64.b64decode(tenant_document["versions"][-1]["body_b64"]))
    for bad in ({**document, "v": 2.0}, {**document, "v": 4}, {**document, "v": 3}, {**document, "kid": "0" * 16}):
        with pytest.raises(Refused):
            open_key_document(json.dumps(bad).encode(), tenant="alice", prefix="app/", purpose="tenant-key",
                              master=reader.master, size=32)  # fmt: skip


# -- the other frozen vectors of tests/vectors, read by the same reader ------------------------------
VECTORS = load(VECTORS_DIR / "vectors.json")
MASTER = bytes.fromhex(VECTORS["master_key_hex"])
KMS = fake_kms(VECTORS["fake_kms_seed"])


def find(section: str, case_id: str) -> dict[str, Any]:
    return next(case for case in VECTORS[section] if case["id"] == case_id)


def document_body(case: Mapping[str, Any]) -> bytes:
    expected = case["expected"]
    if "document_text" in expected:
        return str(expected["document_text"]).encode("utf-8")
    return str(expected["writes"][0]["body_text"]).encode("utf-8")


def test_the_reader_computes_binding_and_key_document_contexts() -> None:
    for case in VECTORS["binding_contexts"]:
        given = case["input"]
        context = binding(given["tenant"], given["prefix"], given["path"])
        assert context == case["expected"]["context"]
        assert canonical_json(context).decode() == case["expected"]["canonical_json"]
    for case in VECTORS["key_document_contexts"]:
        given = case["input"]
        context = key_document_context(
            given["tenant"], given["prefix"], given["purpose"], given["kid"], given["version"]
        )
        assert context == case["expected"]["context"]
        assert canonical_json(context).decode() == case["expected"]["canonical_json"]


@pytest.mark.parametrize("section", ["tenant_key_documents", "names_key_documents"])
def test_the_reader_opens_the_frozen_key_documents(section: str) -> None:
    for case in VECTORS[section]:
        options = case["input"]["options"]
        purpose = "tenant-key" if section == "tenant_key_documents" else "names-key"
        document = open_key_document(
            document_body(case),
            tenant=options["user_id"],
            prefix=options.get("prefix", ""),
            purpose=purpose,
            master=MASTER,
            kms=KMS,
            size=32 if purpose == "tenant-key" else 64,
        )
        opens_to = case["input"]["opens_to"]
        assert document["keys"][document["kid"]].hex() == opens_to["key_hex"], case["id"]
        if purpose == "tenant-key":
            assert (document["v"], document["kid"]) == (opens_to["version"], opens_to["kid"])
            for field in ("retired", "kept"):
                assert {k: document["keys"][k].hex() for k in document[field]} == opens_to.get(field, {}), case["id"]


def test_the_reader_opens_the_frozen_envelopes() -> None:
    for case in VECTORS["envelopes"]:
        given, expected = case["input"], case["expected"]
        options = given["options"]
        prefix = None if given["binding_version"] == 1 else options.get("prefix", "")
        bound = binding(options["user_id"], prefix, given["path"])
        assert bound == expected["binding"]
        tenant_keys: dict[str, bytes] = {}
        for section, seed_id in given["seed"]:
            seed = find(section, seed_id)
            document = open_key_document(document_body(seed), tenant=options["user_id"],
                                         prefix=options.get("prefix", ""), purpose="tenant-key", master=MASTER,
                                         kms=KMS, size=32)  # fmt: skip
            tenant_keys.update(document["keys"])
        metadata, body = expected["metadata"], base64.b64decode(expected["body_b64"])
        assert expected_binding(metadata, options["user_id"], options.get("prefix", ""), given["path"]) == bound
        plaintext, data_key = open_envelope(body, metadata, bound, tenant_keys=tenant_keys, kms=KMS)
        assert (plaintext.decode("utf-8"), data_key.hex()) == (given["plaintext"], given["data_key_hex"]), case["id"]


def test_the_reader_derives_keys_and_opens_bodies_as_the_envelope_vectors() -> None:
    envelopes = load(VECTORS_DIR / "envelope.json")
    data_key = bytes.fromhex(envelopes["input"]["data_key_hex"])
    message_id = bytes.fromhex(envelopes["input"]["message_id_hex"])
    derived = envelopes["derive_keys"]
    assert derive(data_key, message_id) == (
        bytes.fromhex(derived["content_key_hex"]),
        bytes.fromhex(derived["commitment_hex"]),
    )
    for case in envelopes["seals"]:
        expected = case["expected"]
        stored_context(expected["metadata"])  # suite 115 in V3, a known wrap algorithm, a context
        plaintext = open_body(base64.b64decode(expected["body_b64"]), expected["metadata"], data_key)
        assert plaintext.decode("utf-8") == case["input"]["plaintext"], case["id"]


def test_the_reader_seals_names_and_computes_keys_as_the_frozen_layouts() -> None:
    for case in VECTORS["layouts"]:
        options, expected = case["input"]["options"], case["expected"]
        tenant, prefix = options["user_id"], options.get("prefix", "")
        names_key = None
        if options.get("encrypt_names"):
            (section, seed_id), *_ = case["input"]["seed"]
            names_key = bytes.fromhex(find(section, seed_id)["input"]["opens_to"]["key_hex"])
        memory_prefix = f"{prefix}{tenant}/memories/"
        assert expected["memory_prefix"] == memory_prefix
        assert expected["internal_prefix"] == f"{prefix}{tenant}/.s3memory/"
        for path, entry in expected["files"].items():
            if names_key is None:
                key = memory_prefix + path[len("/memories/") :]
            else:
                parent, sealed = "/memories", []
                for name in path[len("/memories/") :].split("/"):
                    sealed.append(seal_segment(names_key, tenant, parent, name))
                    parent = f"{parent}/{name}"
                key = memory_prefix + "/".join(sealed)
                assert path_tag(names_key, path) == entry["path_tag"]
                assert memory_path(key, memory_prefix, tenant, names_key) == path
            assert key == entry["key"], path
            assert entry["access_marker"] == f"{prefix}{tenant}/.s3memory/access/" + sha256_hex(key.encode())[:32]
        for intent in expected["rename_intents"]:
            pair = f"{intent['old']}\n{intent['new']}"
            tag = sha256_hex((pair if names_key is None else path_tag(names_key, pair)).encode())[:40]
            assert intent["key"] == f"{prefix}{tenant}/.s3memory/intents/rename-{tag}"


def test_the_reader_opens_what_s3memory_0_1_wrote() -> None:
    fixture = load(VECTORS_DIR / "format_v1.json")
    master = base64.b64decode(fixture["master_key_b64"])
    kms = fake_kms(fixture["fake_kms_seed"])
    for scenario in fixture["scenarios"].values():
        objects = {key: (base64.b64decode(o["body_b64"]), o["metadata"]) for key, o in scenario["objects"].items()}
        documents = {
            purpose: open_key_document(
                objects[f"app/alice/.s3memory/{purpose}"][0],
                tenant="alice",
                prefix="app/",
                purpose=purpose,
                master=master,
                kms=kms,
                size=size,
            )
            for purpose, size in (("tenant-key", 32), ("names-key", 64))
            if f"app/alice/.s3memory/{purpose}" in objects
        }
        assert all(d["v"] == 1 for d in documents.values())
        names = documents.get("names-key")
        names_key = None if names is None else bytes(names["keys"][names["kid"]])
        files = {}
        for key, (body, metadata) in objects.items():
            if not key.startswith("app/alice/memories/"):
                continue
            path = memory_path(key, "app/alice/memories/", "alice", names_key)
            bound = expected_binding(metadata, "alice", "app/", path, names_key)
            assert "s3memory:prefix" not in bound  # binding version 1
            tenant_keys = documents["tenant-key"]["keys"] if "tenant-key" in documents else None
            files[path] = open_envelope(body, metadata, bound, tenant_keys=tenant_keys, kms=kms)[0].decode("utf-8")
        assert files == scenario["files"]


def test_the_reader_opens_version_1_history_records_stored_as_bodies() -> None:
    frozen = load(VECTORS_DIR / "history_records_v1.json")["case"]
    tenant_keys = open_key_document(document_body(find("tenant_key_documents", "v2-local-app-alice")),
                                    tenant="alice", prefix="app/", purpose="tenant-key", master=MASTER,
                                    size=32)["keys"]  # fmt: skip
    opened = 0
    for step in frozen["expected"]["steps"]:
        bodies = {w["key"]: w for w in step["writes"] if w["verb"] == "put"}
        for record in step["records"]:
            write = bodies[record["key"]]
            name = "s3memory-internal:" + record["key"][len("app/alice/.s3memory/") :]
            assert name == record["sealed_for"]
            bound = binding("alice", "app/", name)
            assert bound == record["binding"]
            plaintext, _ = open_envelope(base64.b64decode(write["body_b64"]), write["metadata"], bound,
                                         tenant_keys=tenant_keys)  # fmt: skip
            assert plaintext.decode("utf-8") == record["plaintext"]
            opened += json.loads(plaintext).get("v") == 1
    assert opened >= 3


def test_the_reader_parses_a_local_store_file(tmp_path: Path) -> None:
    from s3memory.stores import LocalDirStore

    vector = load(BUCKETS_DIR / "tenant-local.json")
    key, body, metadata, _ = next(item for item in bucket_objects(vector) if item[3]["kind"] == "file")
    root = tmp_path / "store"
    root.mkdir(mode=0o700)
    store = LocalDirStore(root)
    etag = store.put(key, body, metadata)
    escaped = (root / ".keys").exists() and (root / ".keys").read_text().strip() == "escaped"
    names = key.split("/")
    if escaped:
        names = [
            "".join(chr(b) if chr(b) in "abcdefghijklmnopqrstuvwxyz0123456789._-" else f"%{b:02x}" for b in n.encode())
            for n in names
        ]
    assert parse_local_file(root.joinpath(*names).read_bytes()) == (metadata, body, etag)


# =============================================================================================
# 2. The library reads them back (and writes exactly them)
# =============================================================================================

_STORE_NUMBERS = itertools.count()


class VectorStore(InMemoryStore):
    """An in-memory store with an identity of its own (process caches never mix two)."""

    def __init__(self) -> None:
        super().__init__()
        self._identity = f"format-doc-store-{next(_STORE_NUMBERS)}"

    @property
    def identity(self) -> str:
        return self._identity


class Draws:
    """Stands in for ``os.urandom``: the step's recorded draws, by size, in order within a size."""

    def __init__(self, draws: Sequence[Mapping[str, Any]]) -> None:
        self._left: dict[int, list[bytes]] = {}
        for draw in draws:
            self._left.setdefault(int(draw["n"]), []).append(bytes.fromhex(draw["hex"]))
        self._lock = threading.Lock()

    def __call__(self, size: int) -> bytes:
        with self._lock:
            queue = self._left.get(size)
            if not queue:
                raise AssertionError(f"os.urandom({size}) was called, but the vector lists no (more) draws of {size}")
            return queue.pop(0)

    def unused(self) -> int:
        return sum(len(queue) for queue in self._left.values())


@contextlib.contextmanager
def patched(urandom: Callable[[int], bytes], now: float) -> Iterator[None]:
    """``os.urandom`` and the clock fixed for one step. The clock: ``time.time``, and the
    ``datetime.datetime.now`` that a held write's record reads (``_quarantine``)."""
    from s3memory._core import quarantine as _quarantine

    class FrozenDatetime(datetime.datetime):
        @classmethod
        def now(cls, tz: datetime.tzinfo | None = None) -> FrozenDatetime:
            return cls.fromtimestamp(now, tz)

    frozen = types.SimpleNamespace(datetime=FrozenDatetime, timezone=datetime.timezone)
    real = os.urandom

    def urandom_of_s3memory(size: int) -> bytes:
        # Only s3memory's own draws are the vector's: a library it imports lazily (say, one
        # that makes a uuid4 at import) draws from the real source.
        caller = sys._getframe(1).f_globals.get("__name__", "")
        return urandom(size) if caller.startswith("s3memory") else real(size)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "urandom", urandom_of_s3memory)
        patch.setattr(time, "time", lambda: now)
        patch.setattr(_quarantine, "datetime", frozen)
        yield


def open_vector_memory(given: Mapping[str, Any], store: InMemoryStore) -> Any:
    options = given["options"]
    return open_memory(
        user_id=options["user_id"],
        prefix=options["prefix"],
        store=store,
        master_key=bytes.fromhex(given["master_key_hex"]),
        encrypt_names=options["encrypt_names"],
        instruction_policy=options["instruction_policy"],
        key_cache=KeyCache(),
        limits=Limits(max_workers=1),
    )


def replay(given: Mapping[str, Any], source: Callable[[Mapping[str, Any]], Callable[[int], bytes]]) -> VectorStore:
    """Run a vector's steps with s3memory on a fresh store, ``os.urandom`` and the clock fixed
    per step (``source(step)`` gives the step's ``os.urandom``); the store after."""
    store = VectorStore()
    memory = open_vector_memory(given, store)
    for step in given["steps"]:
        with patched(source(step), step["now"]):
            call = getattr(memory, step["op"])
            if step.get("held"):
                with pytest.raises(WriteHeldError):
                    call(*step["args"])
            else:
                call(*step["args"])
    return store


def dump(store: InMemoryStore) -> list[dict[str, Any]]:
    """Every object of ``store`` with every version, oldest first, as the vectors show them."""
    by_key: dict[str, list[dict[str, Any]]] = {}
    for version in store.list_versions(""):  # newest first within a key
        entry: dict[str, Any]
        if version.is_delete_marker:
            entry = {"delete_marker": True}
        else:
            stored = store.get_version(version.key, version.version_id)
            assert stored is not None
            entry = {
                "body_b64": base64.b64encode(bytes(stored.body)).decode("ascii"),
                "metadata": dict(stored.metadata),
            }
        by_key.setdefault(version.key, []).insert(0, entry)
    return [{"key": key, "versions": versions} for key, versions in by_key.items()]


def loaded(vector: Mapping[str, Any]) -> VectorStore:
    """A store holding every version of the vector's bucket, in order."""
    store = VectorStore()
    for obj in vector["objects"]:
        for version in obj["versions"]:
            if version.get("delete_marker"):
                store.delete([obj["key"]])
            else:
                store.put(obj["key"], base64.b64decode(version["body_b64"]), version["metadata"])
    return store


@pytest.mark.parametrize("path", BUCKETS, ids=BUCKET_IDS)
def test_s3memory_writes_exactly_the_bucket_of_the_vector(path: Path) -> None:
    vector = load(path)
    sources: list[Draws] = []

    def source(step: Mapping[str, Any]) -> Draws:
        sources.append(Draws(step["draws"]))
        return sources[-1]

    written = dump(replay(vector["input"], source))
    assert all(s.unused() == 0 for s in sources)
    frozen = [
        {
            "key": o["key"],
            "versions": [{k: v for k, v in version.items() if k != "opens_to"} for version in o["versions"]],
        }
        for o in vector["objects"]
    ]
    assert written == frozen


@pytest.mark.parametrize("path", BUCKETS, ids=BUCKET_IDS)
def test_s3memory_reads_the_bucket_of_the_vector(path: Path) -> None:
    from s3memory._core import rename as _rename

    vector = load(path)
    memory = open_vector_memory(vector["input"], loaded(vector))
    assert {entry.path for entry in memory.list_files()} == set(vector["files"])
    for file_path, text in vector["files"].items():
        assert memory.read_text(file_path) == text
        entries = memory.history(file_path)
        assert entries and entries[0].current and all(e.verified for e in entries if e.operation != "deleted")
        # Every earlier version opens to what the vector says it holds.
        texts = {memory.read_version(file_path, e.version) for e in entries if e.operation != "deleted"}
        assert text in texts
    for key, body, metadata, opens_to in bucket_objects(vector):
        if opens_to["kind"] == "rename-intent":
            name = _rename.intent_name(key)
            assert memory.files.decrypt(name, key, body, metadata).decode("utf-8") == opens_to["plaintext"]
        if opens_to["kind"] == "file":
            assert memory.files.decrypt(opens_to["path"], key, body, metadata).decode("utf-8") == opens_to["plaintext"]
        if opens_to["kind"] == "pending-write":
            assert [p.id for p in memory.pending()] == [opens_to["record"]["id"]]
    changes = memory.changes()
    operations = {c.operation for c in changes}
    assert {"created", "renamed", "deleted"} <= operations
    if any(o["kind"] == "search-index" for *_, o in bucket_objects(vector)):
        assert [r.path for r in memory.search("tea")] == ["/memories/notes.md"]


# =============================================================================================
# 3. The document stays true
# =============================================================================================
DOCUMENT = FORMAT_MD.read_text(encoding="utf-8")


def named(value: object) -> bool:
    """Whether FORMAT.md names ``value`` (a string, or a number as written)."""
    text = value.decode("latin-1") if isinstance(value, bytes) else str(value)
    return text.rstrip("\x00\n") in DOCUMENT


def mentioned(value: object) -> bool:
    """Whether FORMAT.md names ``value`` as code (`value`) or as a JSON string ("value")."""
    return f"`{value}`" in DOCUMENT or f'"{value}"' in DOCUMENT


def test_every_metadata_and_context_key_the_code_uses_is_in_the_document() -> None:
    from s3memory._crypto import envelope as _envelope
    from s3memory._crypto import keydocs as _keydocs
    from s3memory._crypto import provenance as _provenance

    constants = {name: getattr(_envelope, name) for name in dir(_envelope) if name.startswith(("META_", "CONTEXT_"))}
    constants.update(
        KMS_RESERVED_CONTEXT_KEY=_envelope.KMS_RESERVED_CONTEXT_KEY,
        WRAP_AES_GCM=_envelope.WRAP_AES_GCM,
        WRAP_KMS_CONTEXT=_envelope.WRAP_KMS_CONTEXT,
        SUITE_ID=_envelope.SUITE_ID,
        CONTEXT_KEY_ID=_keydocs.CONTEXT_KEY_ID,
        CONTEXT_PURPOSE=_keydocs.CONTEXT_PURPOSE,
        PROVENANCE_METADATA=_provenance.PROVENANCE_METADATA,
    )
    assert len(constants) >= 15
    for legacy in _envelope._LEGACY_KEYS:
        constants[f"legacy {legacy}"] = legacy
    missing = {
        name: value
        for name, value in constants.items()
        if f"`{value}`" not in DOCUMENT and f'"{value}"' not in DOCUMENT
    }
    assert not missing, f"FORMAT.md does not name: {missing}"
    # And every metadata key the vectors' objects carry.
    for path in BUCKETS:
        for *_, metadata, _ in bucket_objects(load(path)):
            assert all(mentioned(key) for key in metadata), metadata.keys()


def test_every_format_version_the_code_knows_is_in_the_document() -> None:
    from s3memory._core import quarantine as _quarantine
    from s3memory._core import rename as _rename
    from s3memory._crypto import keydocs as _keydocs
    from s3memory._crypto import provenance as _provenance
    from s3memory._history import records as _records
    from s3memory._search import index as _index
    from s3memory.stores._localdir import format as _localformat

    table = {
        "Key document": _keydocs.KEY_DOCUMENT_VERSIONS,
        "History record": _records.RECORD_VERSIONS,
        "Provenance record": (_provenance.PROVENANCE_VERSION,),
        "Search index": (_index.INDEX_VERSION,),
        "Pending write": (_quarantine.PENDING_VERSION,),
    }
    intent_versions = {
        int(v) for v in re.findall(r'\{"v": (\d+), \*\*record\}', inspect.getsource(_rename.write_intent))
    }
    assert intent_versions
    table["Rename intent record"] = tuple(intent_versions)
    rows = {line.split("|")[1].strip(): line for line in DOCUMENT.splitlines() if line.startswith("| ")}
    for label, versions in table.items():
        row = next(line for name, line in rows.items() if name.startswith(label))
        for version in versions:
            assert re.search(rf"\b{version}\b", row), (label, version, row)
    assert named(_keydocs.KEY_DOCUMENT_VERSION) and named(_keydocs.KEPT_KEYS_VERSION)
    for magic in (_localformat._MAGIC_V1, _localformat._MAGIC_V2):
        assert f'"S3MO" 0{magic[4]}' in DOCUMENT and f"`S3MO\\x0{magic[4]}`" in DOCUMENT


def test_every_label_name_and_size_the_code_uses_is_in_the_document() -> None:
    from s3memory import _layout
    from s3memory._core import quarantine as _quarantine
    from s3memory._core import rename as _rename
    from s3memory._crypto import (
        envelope as _envelope,
    )
    from s3memory._crypto import (
        historykey as _historykey,
    )
    from s3memory._crypto import (
        keydocs as _keydocs,
    )
    from s3memory._crypto import (
        keyring as _keys,
    )
    from s3memory._crypto import (
        names as _names,
    )
    from s3memory._crypto import (
        provenance as _provenance,
    )
    from s3memory._history import records as _records
    from s3memory._search import index as _index

    labels = {
        "wrap aad": _keys._WRAP_AAD_PREFIX,
        "provenance info": _provenance._INFO,
        "record aad": _records._NAME_AAD,
        "record tag": _records._TAG_PREFIX,
        "record name": _records._RECORD_NAME,
        "intent name": _rename.INTERNAL_RECORD_NAME + "intents/rename-",
        "index name": _index.INDEX_NAME,
        "pending name": _quarantine._PENDING_NAME,
        "names tag": re.search(r'b"(s3memory path tag)\\x00"', inspect.getsource(_names.NameCipher.path_tag)),
        "derive": b"DERIVEKEY",
        "commit": b"COMMITKEY",
    }
    for label, value in labels.items():
        if isinstance(value, re.Match):
            value = value.group(1)
        assert value is not None and named(value), label
    for purpose in _layout.KEY_DOCUMENT_PURPOSES:
        assert f"{_layout.INTERNAL_FOLDER}{purpose}" in DOCUMENT
    for folder in _layout.INTERNAL_FOLDERS:
        assert f"`{folder}`" in DOCUMENT, folder
    assert f"index/{_layout.INDEX_OBJECT}" in DOCUMENT and f"{_layout.MEMORY_FOLDER}" in DOCUMENT
    numbers = {
        "max time": (str(_layout.MAX_TIME_US), None),
        "record segment": (f"{_records.NAME_SEGMENT} characters", None),
        "retired": (f"at most {_keys.MAX_RETIRED_KEYS}", None),
        "kept": (f"at most {_keys.MAX_KEPT_KEYS}", None),
        "document size": (f"at most {_keydocs.MAX_KEY_DOCUMENT_BYTES // 1024} KiB", None),
        "names key": (f"{_names.NAMES_KEY_BYTES} bytes (AES-SIV)", None),
        "history key": (f"{_historykey.HISTORY_KEY_BYTES} bytes (AES-GCM)", None),
        "name bytes": (f"limited to {_names.MAX_NAME_BYTES} bytes", None),
        "message id": (f"{_envelope.MESSAGE_ID_BYTES}-byte message id", None),
        "commitment": (f"{_envelope.COMMITMENT_BYTES}-byte key commitment", None),
        "index size": (f"at most {_index.MAX_INDEX_BYTES // 2**20} MiB", None),
    }
    for label, (text, _) in numbers.items():
        assert text in DOCUMENT, label
    assert _envelope.CONTENT_IV == bytes([1] * 12) and "01 01 01 01 01 01 01 01 01 01 01 01" in DOCUMENT
    assert _envelope.SUITE_ID_BYTES.hex(" ") in DOCUMENT


def test_every_vector_file_is_listed_in_the_document() -> None:
    for path in sorted(VECTORS_DIR.rglob("*.json")):
        assert str(path.relative_to(REPO)) in DOCUMENT, path
    assert len(BUCKETS) >= 2
    for path in BUCKETS:
        vector = load(path)
        assert vector["input"]["master_key_hex"] == bytes(range(1, 33)).hex()  # "the master key (bytes 1..32)"
