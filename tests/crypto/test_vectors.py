"""Frozen test vectors of every stored format: the formats are locked before any refactor.

``tests/vectors/vectors.json`` holds, per case, fixed inputs and the exact output that the
code produced from them when the file was written (by ``tests/vectors/make_vectors.py``,
once; ``tests/vectors/README.md`` lists every frozen vector file). Each test here recomputes
a case from its inputs and compares with the JSON, or opens what the JSON froze and compares
with the plaintext or key it froze. A refactor that moves the code writing and reading these
formats must leave every test passing *without regenerating the JSON*: a vector that no
longer matches is a change of format (or a bug), not a fixture to refresh.

Covered, one JSON section each (the section's ``what`` strings say more):

- ``binding_contexts``: ``binding_context`` v1 (no deployment) and v2, dict and canonical JSON.
- ``key_document_contexts``: the context a master key wraps a key document's key under.
- ``tenant_key_documents`` / ``names_key_documents``: the documents as written (body text,
  object key, metadata, conditions, KMS requests) for local and KMS master keys, version 1
  documents as s3memory 0.1 wrote them, rotated documents (retired keys), a version 3 document
  (kept keys, for the versions written before a rotation); each opens to its keys.
- ``envelopes``: V3 body and metadata for ``x-amz-w`` ``02`` (data key wrapped under the tenant
  key) and ``12`` (KMS, ``x-amz-t``), binding v1 and v2; each opens to its plaintext.
- ``layouts``: object keys of files, directory prefixes, internal prefix, key document keys,
  access marker keys and rename intent keys, with and without encrypted names (sealed
  segments of ASCII, unicode, nested, 15/16-byte and 159-byte names, and path tags).
- ``scenarios``: every write (PUT with body, metadata, tags and conditions; COPY; DELETE) and
  every KMS Encrypt/GenerateDataKey request that ``create``, ``str_replace``, ``rename`` (its
  sealed intent record, opened to its JSON text), ``delete``, ``view`` with access tracking (the
  marker), ``rotate_tenant_key`` and ``rewrap_tenant_key`` make, and the files the store holds after
  each step; the provenance each version carries (``x-amz-meta-s3memory-p``, opened to its record)
  and the history records of deletes and renames (opened like intent records). Provenance came
  with history: the scenarios were regenerated then, and every write, body and KMS request they
  froze before was unchanged but for the new metadata entry and the new record objects.

Objects written by an earlier version (s3memory 0.1, commit fa4c510) are frozen in
``tests/vectors/format_v1.json`` and opened, edited, renamed and rotated by
``tests/core/test_hostile_inputs.py::test_objects_and_key_documents_of_format_v1_still_open`` (and the
tests next to it); not duplicated here. The envelope's key derivation has its own vectors in
``tests/vectors/envelope.json``, checked by ``tests/crypto/test_envelope.py``.

Determinism. Pure functions (``binding_context``, ``key_document_context``, ``seal`` with its
``message_id``, ``TenantKeys.document``, layouts, sealed names, path tags) take explicit
inputs. The rest is random by design and takes no seed: data keys, GCM nonces of key
wrapping, key ids, tenant and names keys, message ids of the memory commands. For those,
``fixed_randomness`` replaces ``os.urandom`` for the duration of one call with a source that
hands out the case's listed draws (``"draws"``: label and hex) by size, in order within a
size, and fails on any draw the case did not list and on any listed draw left unused. It
patches ``os.urandom`` itself, not ``s3memory._crypto.keyring.os``: the refactor moves the code between
modules, and the vectors must hold wherever the call ends up. Draws of different sizes may
come in any order; key documents are created on their own (kid 8, key 32 or 64, nonce 12
bytes) and seeded before the commands that use them, so most steps draw each size once.
Where a step draws two values of one size, the vector depends on their order: a rename
(the intent record's wrap before the copy's re-wrap: the protocol), a rotation (the new
document before the objects), the rotation of a version-1 document (its retired key
re-wrapped before the new key is wrapped) and a master re-wrap (documents in key order,
``names-key`` before ``tenant-key``). A refactor that reorders those draws fails here
without changing the format: reorder the draws in the JSON then, never the outputs.
KMS is ``FakeKms`` of ``tests/helpers/fakekms.py`` (deterministic under the patched ``os.urandom``),
recorded: what s3memory sends to KMS is frozen, the blob it gets back is stored as is.
Rotation stamps ``retired_at`` with ``time.time()``, so a rotation step also fixes
``time.time`` (``"now"``). Commands run with ``max_workers=1``, so
copies happen in a fixed order.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import itertools
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pytest
from helpers import VECTORS_DIR
from helpers.fakekms import FakeKms

from s3memory import (
    EncryptedMemory,
    InMemoryStore,
    KeyCache,
    Limits,
    PathNotFoundError,
    binding_context,
    open_memory,
    parse_path,
    rewrap_tenant_key,
    rotate_tenant_key,
)
from s3memory._core.access import access_marker_key
from s3memory._crypto import envelope
from s3memory._crypto.keydocs import key_document_context
from s3memory._crypto.keyring import TenantKeyring, TenantKeys
from s3memory._crypto.master import LocalMasterKey
from s3memory._crypto.provenance import PROVENANCE_METADATA, open_provenance
from s3memory._layout import NAMES_KEY as NAMES_KEY_OBJECT
from s3memory.stores import StoredObject
from s3memory.stores._delegating import DelegatingStore

VECTORS_PATH = VECTORS_DIR / "vectors.json"
SECTIONS = (
    "binding_contexts",
    "key_document_contexts",
    "tenant_key_documents",
    "names_key_documents",
    "envelopes",
    "layouts",
    "scenarios",
)
# How internal records are named in their binding: "s3memory-internal:" and the key below
# the tenant's internal prefix (see EncryptedMemory._intent_name). Part of the format.
INTERNAL_RECORD_NAME = "s3memory-internal:"

Vectors = dict[str, Any]
Case = dict[str, Any]


# --- fixed randomness --------------------------------------------------------------------------


class FixedRandom:
    """Stands in for ``os.urandom``: the listed draws, by size, in order within a size."""

    def __init__(self, draws: Sequence[Mapping[str, str]]) -> None:
        self._left: dict[int, list[tuple[str, bytes]]] = {}
        for draw in draws:
            raw = bytes.fromhex(draw["hex"])
            self._left.setdefault(len(raw), []).append((draw["what"], raw))
        self._lock = threading.Lock()

    def __call__(self, size: int) -> bytes:
        with self._lock:
            queue = self._left.get(size)
            if not queue:
                raise AssertionError(f"os.urandom({size}) was called, but the vector lists no (more) draws of {size}")
            return queue.pop(0)[1]

    def unused(self) -> list[str]:
        return [what for queue in self._left.values() for what, _ in queue]


@contextlib.contextmanager
def fixed_randomness(draws: Sequence[Mapping[str, str]], *, now: float | None = None) -> Iterator[None]:
    """``os.urandom`` (and, given ``now``, ``time.time``) fixed for the ``with`` block only."""
    source = FixedRandom(draws)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "urandom", source)
        if now is not None:
            patch.setattr(time, "time", lambda: now)
        yield
    assert source.unused() == [], f"draws listed but never made: {source.unused()}"


# --- recording the wire ------------------------------------------------------------------------


def body_field(body: bytes) -> dict[str, str]:
    """A body as the JSON shows it: key documents (JSON) and empty markers as text, else base64."""
    if body.startswith(b"{"):
        with contextlib.suppress(ValueError):
            json.loads(body)
            return {"body_text": body.decode("utf-8")}
    if body == b"":
        return {"body_text": ""}
    return {"body_b64": base64.b64encode(body).decode("ascii")}


def body_of(write: Mapping[str, Any]) -> bytes:
    if "body_text" in write:
        return str(write["body_text"]).encode("utf-8")
    return base64.b64decode(write["body_b64"])


_STORE_NUMBERS = itertools.count()


class RecordingStore(DelegatingStore):
    """An in-memory store that records every write request as the vectors show it."""

    def __init__(self) -> None:
        super().__init__(InMemoryStore())
        self.writes: list[dict[str, Any]] = []
        self.gets: list[str] = []
        # Unique per instance (InMemoryStore's identity is id(), which can be reused): caches and
        # the once-a-day access log never take one test's store for another's.
        self._identity = f"vectors-store-{next(_STORE_NUMBERS)}"

    @property
    def identity(self) -> str:
        return self._identity

    def get(self, key: str, *, max_bytes: int | None = None) -> StoredObject | None:
        self.gets.append(key)
        return super().get(key, max_bytes=max_bytes)

    def put(
        self,
        key: str,
        body: bytes,
        metadata: Mapping[str, str],
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> str:
        self.writes.append(
            {
                "verb": "put",
                "key": key,
                **body_field(bytes(body)),
                "metadata": dict(metadata),
                "tags": None if tags is None else dict(tags),
                "if_none_match": if_none_match,
                "if_match": if_match,
            }
        )
        return super().put(key, body, metadata, if_none_match=if_none_match, if_match=if_match, tags=tags)

    def copy(
        self,
        source: str,
        destination: str,
        *,
        metadata: Mapping[str, str],
        if_match: str | None = None,
        if_none_match: bool = False,
    ) -> str:
        self.writes.append(
            {
                "verb": "copy",
                "source": source,
                "destination": destination,
                "metadata": dict(metadata),
                "if_match": if_match,
                "if_none_match": if_none_match,
            }
        )
        return super().copy(source, destination, metadata=metadata, if_match=if_match, if_none_match=if_none_match)

    def delete(self, keys: Sequence[str], *, if_match: Mapping[str, str] | None = None) -> None:
        self.writes.append(
            {"verb": "delete", "keys": list(keys), "if_match": None if if_match is None else dict(if_match)}
        )
        super().delete(keys, if_match=if_match)

    def replay(self, writes: Sequence[Mapping[str, Any]]) -> None:
        """Apply frozen writes unconditionally, without recording them."""
        inner = self.inner
        for write in writes:
            if write["verb"] == "put":
                inner.put(write["key"], body_of(write), write["metadata"])
            elif write["verb"] == "copy":
                inner.copy(write["source"], write["destination"], metadata=write["metadata"])
            else:
                inner.delete(write["keys"])


class RecordingKms(FakeKms):
    """FakeKms (its blobs are deterministic under ``fixed_randomness``), recording the requests
    that decide what is stored: GenerateDataKey and Encrypt, with their encryption context."""

    def __init__(self, seed: str) -> None:
        super().__init__(seed.encode())
        self.requests: list[dict[str, Any]] = []

    def generate_data_key(self, *, KeyId: str, KeySpec: str, EncryptionContext: dict[str, str]) -> dict[str, Any]:
        self.requests.append(
            {"op": "GenerateDataKey", "KeyId": KeyId, "KeySpec": KeySpec, "EncryptionContext": dict(EncryptionContext)}
        )
        return super().generate_data_key(KeyId=KeyId, KeySpec=KeySpec, EncryptionContext=EncryptionContext)

    def encrypt(self, *, KeyId: str, Plaintext: bytes, EncryptionContext: dict[str, str]) -> dict[str, Any]:
        self.requests.append(
            {
                "op": "Encrypt",
                "KeyId": KeyId,
                "Plaintext_hex": bytes(Plaintext).hex(),
                "EncryptionContext": dict(EncryptionContext),
            }
        )
        return super().encrypt(KeyId=KeyId, Plaintext=Plaintext, EncryptionContext=EncryptionContext)


# --- building memories -------------------------------------------------------------------------


class World:
    """A store and a KMS for one case, and memories over them as the case's options say."""

    def __init__(self, vectors: Vectors, options: Mapping[str, Any], seed: Sequence[Sequence[str]] = ()) -> None:
        self.vectors = vectors
        self.options = options
        self.store = RecordingStore()
        self.kms = RecordingKms(vectors["fake_kms_seed"])
        for section, case_id in seed:
            self.store.replay(seed_writes(vectors, section, case_id))

    def memory(self, *, master_key_hex: str | None = None, track_access: bool | None = None) -> EncryptedMemory:
        options = self.options
        kwargs: dict[str, Any] = {
            "user_id": options["user_id"],
            "prefix": options.get("prefix", ""),
            "store": self.store,
            "key_cache": KeyCache(),
            "encrypt_names": options.get("encrypt_names", False),
            "track_access": options.get("track_access", False) if track_access is None else track_access,
            "limits": Limits(max_workers=1),
        }
        if options.get("key_mode") == "kms":
            kwargs.update(key_mode="kms", kms_client=self.kms, kms_key_id=self.vectors["kms_key_id"])
        elif options.get("master") == "kms":
            kwargs.update(kms_client=self.kms, kms_key_id=self.vectors["kms_key_id"])
        else:
            kwargs["master_key"] = bytes.fromhex(master_key_hex or self.vectors["master_key_hex"])
        return open_memory(**kwargs)


def find_case(vectors: Vectors, section: str, case_id: str) -> Case:
    matches = [case for case in vectors[section] if case["id"] == case_id]
    assert len(matches) == 1, f"{section}/{case_id}"
    return matches[0]


def seed_writes(vectors: Vectors, section: str, case_id: str) -> list[dict[str, Any]]:
    return list(find_case(vectors, section, case_id)["expected"]["writes"])


def tenant_keyring(memory: EncryptedMemory) -> TenantKeyring:
    assert isinstance(memory.keyring, TenantKeyring)
    return memory.keyring


def _no_retired_keys(_entry: object, _version: int) -> bytes:
    raise AssertionError("a version-1 vector has no retired keys")


# --- computing each section's output from its input --------------------------------------------


def compute_binding_context(vectors: Vectors, given: Case) -> dict[str, Any]:
    if given["prefix"] is None:  # the frozen input of a version-1 case names no deployment
        context = binding_context(given["tenant"], given["path"], version=1)
    else:
        context = binding_context(given["tenant"], given["path"], prefix=given["prefix"])
    return {"context": context, "canonical_json": envelope.canonical_json(context)}


def compute_key_document_context(vectors: Vectors, given: Case) -> dict[str, Any]:
    context = key_document_context(
        given["tenant"], given["purpose"], given["kid"], prefix=given["prefix"], version=given["version"]
    )
    return {"context": context, "canonical_json": envelope.canonical_json(context)}


def compute_tenant_key_document(vectors: Vectors, given: Case) -> dict[str, Any]:
    world = World(vectors, given["options"], given.get("seed", ()))
    keyring = tenant_keyring(world.memory())
    if given["how"] == "create":  # what the first write of a new tenant stores
        with fixed_randomness(given["draws"]):
            keyring.keys(create=True)
        return {"writes": world.store.writes, "kms_requests": world.kms.requests}
    if given["how"] == "v1":  # as s3memory 0.1 stored it: version 1, no deployment in the context
        key = bytes.fromhex(given["key_hex"])
        context = key_document_context(
            keyring.tenant, "tenant-key", given["kid"], prefix=given["options"].get("prefix", ""), version=1
        )
        master = LocalMasterKey(bytes.fromhex(vectors["master_key_hex"]))
        with fixed_randomness(given["draws"]):
            wrapped = master.wrap(key, context)
        keys = TenantKeys(
            kid=given["kid"], key=key, wrapped=wrapped, wrapper="local", unwrap_retired=_no_retired_keys, version=1
        )
        put = {"verb": "put", "key": keyring.object_key, **body_field(keys.document())}
        return {"writes": [{**put, "metadata": {"s3memory": "tenant-key"}}]}
    if given["how"] == "kept":  # version 3: a rotation completed where old versions use the old key
        with fixed_randomness(given["draws"]):
            rotated = keyring.rotated(keyring.keys(create=False), now=given["retired_at"])
        kept = [dataclasses.replace(r, kept_since=given["now"]) for r in rotated.retired]
        return {"document_text": rotated.evolve(retired=(), kept=kept).document().decode("utf-8")}
    assert given["how"] == "rotated"  # the document a rotation starts with: a new key, the old one retired
    with fixed_randomness(given["draws"]):
        rotated = keyring.rotated(keyring.keys(create=False), now=given["now"])
    return {"document_text": rotated.document().decode("utf-8")}


def compute_names_key_document(vectors: Vectors, given: Case) -> dict[str, Any]:
    world = World(vectors, given["options"])
    memory = world.memory()
    names = memory.layout.names
    assert names is not None
    if given["how"] == "create":
        with fixed_randomness(given["draws"]):
            names.key_exists(create=True)
        return {"writes": world.store.writes, "kms_requests": world.kms.requests}
    assert given["how"] == "v1"  # as s3memory 0.1 stored it (today's code writes no version 1 document)
    context = key_document_context(
        given["options"]["user_id"], "names-key", given["kid"], prefix=given["options"].get("prefix", ""), version=1
    )
    master = LocalMasterKey(bytes.fromhex(vectors["master_key_hex"]))
    with fixed_randomness(given["draws"]):
        wrapped = master.wrap(bytes.fromhex(given["key_hex"]), context)
    document = {"v": 1, "kid": given["kid"], "wrapper": "local", "wrapped": base64.b64encode(wrapped).decode()}
    body = json.dumps(document, sort_keys=True).encode()
    key = memory.layout.internal_prefix + NAMES_KEY_OBJECT
    return {"writes": [{"verb": "put", "key": key, **body_field(body), "metadata": {"s3memory": "names-key"}}]}


def envelope_binding(given: Case) -> dict[str, str]:
    prefix = given["options"].get("prefix", "")
    return binding_context(given["options"]["user_id"], given["path"], prefix=prefix, version=given["binding_version"])


def compute_envelope(vectors: Vectors, given: Case) -> dict[str, Any]:
    world = World(vectors, given["options"], given.get("seed", ()))
    keyring = world.memory().keyring
    binding = envelope_binding(given)
    data_key = bytes.fromhex(given["data_key_hex"])
    with fixed_randomness(given["draws"]):
        wrapped = keyring.wrap(data_key, binding)
    body, metadata = envelope.seal(
        given["plaintext"].encode("utf-8"), data_key, wrapped, message_id=bytes.fromhex(given["message_id_hex"])
    )
    return {
        "binding": binding,
        "body_b64": base64.b64encode(body).decode("ascii"),
        "metadata": metadata,
        "kms_requests": world.kms.requests,
    }


def compute_layout(vectors: Vectors, given: Case) -> dict[str, Any]:
    world = World(vectors, given["options"], given.get("seed", ()))
    memory = world.memory()
    layout = memory.layout
    if layout.names is not None:
        layout.names.key_exists(create=True)  # loaded now, so the renames below read nothing but their records
    files: dict[str, Any] = {}
    for path in given["files"]:
        key = layout.key_for(parse_path(path))
        entry: dict[str, Any] = {"key": key, "access_marker": access_marker_key(layout, key)}
        if layout.names is not None:
            entry["path_tag"] = layout.names.path_tag(path)
        files[path] = entry
    intents = []
    for old, new in given["renames"]:
        # The intent key is computed inside rename: observe where it looks (a rename of a missing
        # file reads the record of an unfinished attempt, then answers "does not exist").
        world.store.gets.clear()
        with pytest.raises(PathNotFoundError):
            memory.rename(old, new)
        assert len(world.store.gets) == 1, world.store.gets
        intents.append({"old": old, "new": new, "key": world.store.gets[0]})
    return {
        "tenant_prefix": layout.tenant_prefix,
        "memory_prefix": layout.memory_prefix,
        "internal_prefix": layout.internal_prefix,
        "owned_prefixes": list(layout.owned_prefixes),
        "tenant_key_object": memory.keyring.object_key if isinstance(memory.keyring, TenantKeyring) else None,
        "names_key_object": layout.internal_prefix + NAMES_KEY_OBJECT,
        "files": files,
        "dirs": {path: layout.dir_prefix(parse_path(path)) for path in given["dirs"]},
        "rename_intents": intents,
    }


def open_record(memory: EncryptedMemory, key: str, body: bytes, metadata: Mapping[str, str]) -> dict[str, Any]:
    """An internal record (a rename's intent), opened: what it is sealed for, and its plaintext."""
    layout = memory.layout
    assert key.startswith(layout.internal_prefix)
    sealed_for = INTERNAL_RECORD_NAME + key[len(layout.internal_prefix) :]
    name = sealed_for if layout.names is None else layout.names.path_tag(sealed_for)
    binding = binding_context(layout.tenant, name, prefix=layout.prefix)
    header = envelope.parse_header(metadata)
    data_key = memory.keyring.unwrap(header.wrapped_key, binding)
    plaintext = envelope.open_body(body, data_key, header).decode("utf-8")
    return {"key": key, "sealed_for": sealed_for, "binding": binding, "plaintext": plaintext}


def opened_provenance(memory: EncryptedMemory, key: str, metadata: Mapping[str, str]) -> dict[str, Any]:
    """A version's provenance (``s3memory._crypto.provenance``), opened with its data key."""
    path = memory.layout.path_for_key(key)
    assert path is not None
    data_key = memory.files.data_key_of(path.display, metadata)
    return {"key": key, "record": open_provenance(data_key, metadata, key).record()}


def run_step(world: World, memory: EncryptedMemory, step: Mapping[str, Any]) -> None:
    op = step["op"]
    if op == "create":
        memory.create(step["path"], step["text"])
    elif op == "str_replace":
        memory.str_replace(step["path"], step["old"], step["new"])
    elif op == "rename":
        memory.rename(step["old"], step["new"])
    elif op == "view":
        memory.view(step["path"])
    elif op == "delete":
        memory.delete(step["path"])
    elif op == "rotate":
        assert rotate_tenant_key(memory, workers=1, retire_after=0).complete
    elif op == "rewrap_master":
        rewrap_tenant_key(memory, bytes.fromhex(world.vectors["new_master_key_hex"]))
    else:
        raise AssertionError(op)


def files_of(memory: EncryptedMemory) -> dict[str, str]:
    return {entry.path: memory.read_text(entry.path) for entry in memory.list_files()}


def reading_master(vectors: Vectors, steps_so_far: Sequence[Mapping[str, Any]]) -> str | None:
    """The master key that reads a scenario's store after these steps (a re-wrap changes it)."""
    rewrapped = any(step["op"] == "rewrap_master" for step in steps_so_far)
    return vectors["new_master_key_hex"] if rewrapped else None


def compute_scenario(vectors: Vectors, given: Case) -> dict[str, Any]:
    world = World(vectors, given["options"], given.get("seed", ()))
    memory = world.memory()
    steps = []
    for index, step in enumerate(given["steps"]):
        world.store.writes.clear()
        world.kms.requests.clear()
        with fixed_randomness(step.get("draws", ()), now=step.get("now")):
            run_step(world, memory, step)
        writes = list(world.store.writes)
        records = [
            open_record(memory, w["key"], body_of(w), w["metadata"])
            for w in writes
            if w["verb"] == "put"
            and w["key"].startswith(memory.layout.internal_prefix)
            and envelope.is_envelope(w["metadata"])
        ]
        # What a fresh process reads afterwards (every version of a file gets read back).
        reader = world.memory(master_key_hex=reading_master(vectors, given["steps"][: index + 1]), track_access=False)
        provenance = [
            opened_provenance(reader, w.get("key") or w["destination"], w["metadata"])
            for w in writes
            if PROVENANCE_METADATA in w.get("metadata", {})
        ]
        steps.append(
            {
                "writes": writes,
                "kms_requests": list(world.kms.requests),
                "records": records,
                "provenance": provenance,
                "files_after": files_of(reader),
            }
        )
    return {"steps": steps}


COMPUTE: dict[str, Callable[[Vectors, Case], dict[str, Any]]] = {
    "binding_contexts": compute_binding_context,
    "key_document_contexts": compute_key_document_context,
    "tenant_key_documents": compute_tenant_key_document,
    "names_key_documents": compute_names_key_document,
    "envelopes": compute_envelope,
    "layouts": compute_layout,
    "scenarios": compute_scenario,
}


# --- the tests ----------------------------------------------------------------------------------


def load_vectors() -> Vectors:
    return json.loads(VECTORS_PATH.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


VECTORS = load_vectors() if VECTORS_PATH.exists() else {section: [] for section in SECTIONS}


def cases(*sections: str) -> list[Any]:
    return [
        pytest.param(section, case, id=f"{section}/{case['id']}") for section in sections for case in VECTORS[section]
    ]


def test_every_section_has_vectors() -> None:
    assert set(SECTIONS) <= set(VECTORS)
    for section in SECTIONS:
        assert VECTORS[section], section
        ids = [case["id"] for case in VECTORS[section]]
        assert len(ids) == len(set(ids)), section
        assert all(case["what"] for case in VECTORS[section]), section


@pytest.mark.parametrize(("section", "case"), cases(*SECTIONS))
def test_the_code_writes_exactly_the_frozen_vector(section: str, case: Case) -> None:
    """Recomputed from the case's fixed inputs, the output is byte for byte the frozen one."""
    assert COMPUTE[section](VECTORS, case["input"]) == case["expected"]


# Reading: what the JSON froze opens, with the fixed keys, to what it froze (never recomputed).


@pytest.mark.parametrize(("section", "case"), cases("tenant_key_documents"))
def test_frozen_tenant_key_documents_open_to_their_keys(section: str, case: Case) -> None:
    given, expected = case["input"], case["expected"]
    world = World(VECTORS, given["options"], given.get("seed", ()))
    if "document_text" in expected:  # a rotated document: written over the seed
        key = tenant_keyring(world.memory()).object_key
        world.store.replay([{"verb": "put", "key": key, "body_text": expected["document_text"], "metadata": {}}])
    else:
        world.store.replay(expected["writes"])
    keys = tenant_keyring(world.memory()).keys(create=False)
    opened = {"version": keys.version, "kid": keys.kid, "key_hex": keys.key.hex()}
    retired = {r.kid: (keys.key_for(r.kid) or b"").hex() for r in keys.retired}
    if "kept" in given["opens_to"]:  # version 3: kept keys (old versions' keys) as well
        opened["kept"] = {r.kid: (keys.key_for(r.kid) or b"").hex() for r in keys.kept}
    assert {**opened, "retired": retired} == given["opens_to"]


@pytest.mark.parametrize(("section", "case"), cases("names_key_documents"))
def test_frozen_names_key_documents_open_to_their_keys(section: str, case: Case) -> None:
    given = case["input"]
    world = World(VECTORS, given["options"])
    world.store.replay(case["expected"]["writes"])
    names = world.memory().layout.names
    assert names is not None
    assert names.names_key().hex() == given["opens_to"]["key_hex"]


@pytest.mark.parametrize(("section", "case"), cases("envelopes"))
def test_frozen_envelopes_open_to_their_plaintext(section: str, case: Case) -> None:
    given, expected = case["input"], case["expected"]
    world = World(VECTORS, given["options"], given.get("seed", ()))
    header = envelope.parse_header(expected["metadata"])
    assert header.message_id.hex() == given["message_id_hex"]
    data_key = world.memory().keyring.unwrap(header.wrapped_key, envelope_binding(given))
    assert data_key.hex() == given["data_key_hex"]
    plaintext = envelope.open_body(base64.b64decode(expected["body_b64"]), data_key, header)
    assert plaintext.decode("utf-8") == given["plaintext"]


@pytest.mark.parametrize(("section", "case"), cases("layouts"))
def test_frozen_keys_map_back_to_their_paths(section: str, case: Case) -> None:
    given, expected = case["input"], case["expected"]
    layout = World(VECTORS, given["options"], given.get("seed", ())).memory().layout
    for path, entry in expected["files"].items():
        found = layout.path_for_key(entry["key"])
        assert found is not None and found.display == path


@pytest.mark.parametrize(("section", "case"), cases("scenarios"))
def test_frozen_scenarios_read_back(section: str, case: Case) -> None:
    """The frozen writes, replayed step by step into an empty store (with the seed), hold the
    frozen files after each step; every frozen intent record opens to its frozen JSON text."""
    given, expected = case["input"], case["expected"]
    world = World(VECTORS, given["options"], given.get("seed", ()))
    for index, step in enumerate(expected["steps"]):
        world.store.replay(step["writes"])
        master = reading_master(VECTORS, given["steps"][: index + 1])
        memory = world.memory(master_key_hex=master, track_access=False)
        assert files_of(memory) == step["files_after"]
        for record in step["records"]:
            (put,) = (w for w in step["writes"] if w["verb"] == "put" and w["key"] == record["key"])
            assert open_record(memory, record["key"], body_of(put), put["metadata"]) == record
            assert json.loads(record["plaintext"])["v"] == 1


def test_a_draw_the_vector_does_not_list_fails() -> None:
    """The fixed source refuses what a case did not foresee, so a new draw cannot pass unnoticed."""
    with pytest.raises(AssertionError, match="no \\(more\\) draws"), fixed_randomness([]):
        os.urandom(12)
    with pytest.raises(AssertionError, match="never made"), fixed_randomness([{"what": "x", "hex": "00" * 12}]):
        pass


def test_history_reads_the_records_of_version_1() -> None:
    """What s3memory wrote before records were sealed in their names (version-1 records, stored
    as bodies; provenance only in each version's metadata) still reads as the same history:
    each version's provenance by a HEAD, each record by a GET."""
    frozen = json.loads((VECTORS_DIR / "history_records_v1.json").read_text(encoding="utf-8"))["case"]
    given, expected = frozen["input"], frozen["expected"]
    world = World(VECTORS, given["options"], given.get("seed", ()))
    for step in expected["steps"]:
        world.store.replay(step["writes"])
    memory = world.memory(master_key_hex=reading_master(VECTORS, given["steps"]), track_access=False)
    entries = memory.history("/memories/archive/notes.md")
    assert [(e.path, e.operation, e.actor, e.verified) for e in entries] == [
        ("/memories/archive/notes.md", "deleted", "api", True),
        ("/memories/archive/notes.md", "renamed", "api", True),
        ("/memories/notes.md", "modified", "api", True),
        ("/memories/notes.md", "created", "api", True),
    ]
    assert entries[1].note == "renamed from /memories/notes.md"
    assert memory.read_version("/memories/notes.md", entries[3].version) == given["steps"][0]["text"]
