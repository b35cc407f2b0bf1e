"""Fuzzing the envelope: object metadata and bodies come from whoever can write to the
bucket, and reading them must end in the plaintext, the integrity error or "not written by
s3memory"; never another exception, never plaintext garbage.

``tests/crypto/test_envelope.py`` holds the fixed examples and the first properties (the
header parser alone). This file feeds random and mutated metadata and bodies through
``parse_header`` + ``open_body`` directly, and through the real read path
(``EncryptedMemory.view`` and ``rename`` over an ``InMemoryStore``, in tenant-key and
KMS-per-object mode).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from typing import Any

import pytest
from helpers.fuzzing import (
    ENVELOPE_MEMORY_EXAMPLES,
    ENVELOPE_PARSER_EXAMPLES,
    ENVELOPE_RENAME_EXAMPLES,
    FILE,
    JSON_BOMBS,
    SIZED_B64,
    Rig,
    Sealed,
    b64,
    fuzz,
    json_values,
    mutated_string,
    rig_for,
)
from hypothesis import event, given
from hypothesis import strategies as st

from s3memory import EncryptedMemory, ForeignObjectError, IntegrityError, PathNotFoundError, parse_path
from s3memory._crypto import envelope

pytestmark = pytest.mark.slow  # heavy hypothesis: 3,400 examples

# --- fuzzed metadata and bodies -------------------------------------------------------

DATA_KEY = hashlib.sha256(b"s3memory fuzz data key").digest()
PLAINTEXT = ("line one\nline two, with some length to it\n" * 4).encode()
_BINDING = {"s3memory:tenant": "alice", "s3memory:path": "ab" * 32}
_TENANT_WRAPPED = envelope.WrappedKey("02", bytes(range(60)), {**_BINDING, "s3memory:kid": "0011223344556677"})
_KMS_WRAPPED = envelope.WrappedKey("12", b"\xaa" * 48, {**_BINDING, "aws:x-amz-cek-alg": "115"})


ORIGINALS = [
    Sealed(*envelope.seal(PLAINTEXT, DATA_KEY, _TENANT_WRAPPED), PLAINTEXT),
    Sealed(*envelope.seal(b"", DATA_KEY, _KMS_WRAPPED), b""),
    Sealed(*envelope.seal(b"x", DATA_KEY, _TENANT_WRAPPED), b"x"),
]

ENVELOPE_FIELDS = ["x-amz-c", "x-amz-3", "x-amz-w", "x-amz-t", "x-amz-m", "x-amz-d", "x-amz-i"]
OTHER_FIELDS = [
    "x-amz-key",
    "x-amz-key-v2",
    "x-amz-iv",
    "x-amz-cek-alg",
    "x-amz-wrap-alg",
    "x-amz-matdesc",
    "X-Amz-C",
    "x-amz-3 ",
    "s3memory",
    "content-type",
    "",
]


@st.composite
def context_values(draw: st.DrawFn, original: str | None) -> str:
    """A context field: a random JSON document, or the real one with one entry changed."""
    base: dict[str, Any] = json.loads(original) if original else dict(_BINDING)
    kind = draw(st.sampled_from(["random", "change", "add", "drop", "retype"]))
    if kind == "random":
        return json.dumps(draw(json_values))
    if not base or kind == "add":
        base[draw(st.text(max_size=12))] = draw(st.text(max_size=12))
    elif kind == "change":
        base[draw(st.sampled_from(sorted(base)))] = draw(st.text(max_size=70))
    elif kind == "drop":
        base.pop(draw(st.sampled_from(sorted(base))))
    else:
        base[draw(st.sampled_from(sorted(base)))] = draw(json_values)
    return json.dumps(base, ensure_ascii=draw(st.booleans()))


STATIC_VALUES = st.one_of(
    st.text(max_size=60),
    st.sampled_from(["115", "114", "0115", "02", "12", "2", "kms", "kms+context", "AES/GCM/NoPadding", ""]),
    st.binary(max_size=64).map(b64),
    st.sampled_from(JSON_BOMBS),
    st.builds(lambda n: "A" * (4 * n), st.integers(2_500, 40_000)),  # up to 160 KB of valid base64
    st.builds(lambda n: "\u00e9" * n, st.integers(1, 20_000)),
    st.sampled_from(sorted({v for o in ORIGINALS for v in o.metadata.values()})),
    st.sampled_from([None, 115, b"115", ["115"], {"a": "b"}, 1.5]),  # never from S3, possible from a JSON store
)


CONTEXT_FIELDS = ("x-amz-m", "x-amz-t")
BINARY_FIELDS = ("x-amz-3", "x-amz-d", "x-amz-i")
# The fields a header is made of are drawn more often than the rest.
FIELD_CHOICES = [*ENVELOPE_FIELDS, *ENVELOPE_FIELDS, *CONTEXT_FIELDS, *OTHER_FIELDS]


@st.composite
def field_values(draw: st.DrawFn, original: Sealed | None, field: str) -> object:
    """A value for ``field``: anything, a near miss of the real value, or what the field's
    decoder finds hardest (nesting bombs and bad JSON for contexts, odd sizes for base64)."""
    current = original.metadata.get(field) if original is not None else None
    options: list[st.SearchStrategy[object]] = [STATIC_VALUES]
    if current is not None:
        options.append(mutated_string(current))
    if field in CONTEXT_FIELDS:
        options += [context_values(current), st.sampled_from(JSON_BOMBS)]
    if field in BINARY_FIELDS:
        options.append(SIZED_B64)
    return draw(draw(st.sampled_from(options)))


@st.composite
def fuzzed_metadata(draw: st.DrawFn) -> tuple[Sealed | None, dict[str, object]]:
    original = draw(st.sampled_from([*ORIGINALS, None]))
    metadata: dict[str, object] = dict(original.metadata) if original is not None else {}
    if original is None:
        for field in draw(st.lists(st.sampled_from(FIELD_CHOICES), max_size=7)):
            metadata[field] = draw(field_values(None, field))
    for _ in range(draw(st.integers(0, 3))):
        field = draw(st.sampled_from([*FIELD_CHOICES, draw(st.text(max_size=10))]))
        operation = draw(st.sampled_from(["set", "set", "set", "drop", "swap"]))
        if operation == "set":
            metadata[field] = draw(field_values(original, field))
        elif operation == "drop":
            metadata.pop(field, None)
        elif metadata:  # swap two fields' values, or move a value to another field
            other = draw(st.sampled_from(sorted(metadata)))
            if field in metadata:
                metadata[field], metadata[other] = metadata[other], metadata[field]
            else:
                metadata[field] = metadata.pop(other)
    return original, metadata


@st.composite
def fuzzed_bodies(draw: st.DrawFn, original: bytes) -> bytes:
    kind = draw(
        st.sampled_from(["same", "same", "truncate", "flip", "flip", "append", "splice", "random", "other", "tail"])
    )
    if kind == "same":
        return original
    if kind == "truncate":
        return original[: draw(st.integers(0, max(0, len(original) - 1)))]
    if kind == "flip" and original:
        body = bytearray(original)
        for index in draw(st.lists(st.integers(0, len(body) - 1), min_size=1, max_size=3)):
            body[index] ^= 1 << draw(st.integers(0, 7))
        return bytes(body)
    if kind == "append":
        return original + draw(st.binary(min_size=1, max_size=32))
    if kind == "splice" and original:
        start = draw(st.integers(0, len(original)))
        end = draw(st.integers(start, len(original)))
        return original[:start] + draw(st.binary(max_size=16)) + original[end:]
    if kind == "other":
        return draw(st.sampled_from([o.body for o in ORIGINALS]))
    if kind == "tail":
        return original[-16:]
    return draw(st.binary(max_size=300))


LEGACY_FIELDS = ("x-amz-key", "x-amz-key-v2", "x-amz-iv", "x-amz-cek-alg", "x-amz-wrap-alg")


def _b64_field(metadata: Mapping[str, object], field: str) -> bytes | None:
    value = metadata.get(field)
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:  # binascii.Error, or a non-ASCII str
        return None


def _same_header(metadata: Mapping[str, object], original: Mapping[str, str]) -> bool:
    """Whether ``metadata`` still describes ``original``'s header, decided without
    ``_envelope``: the same suite and wrap algorithm, the same bytes in every base64 field,
    the same map in the context field, and no V2 field nor a context of the other kind.
    (Spelling may differ: unused base64 bits, JSON whitespace and key order, extra fields.)"""
    context_field = "x-amz-t" if original["x-amz-w"] == "12" else "x-amz-m"
    if any(field in metadata for field in LEGACY_FIELDS) or any(
        field in metadata for field in CONTEXT_FIELDS if field != context_field
    ):
        return False
    if any(metadata.get(field) != original[field] for field in ("x-amz-c", "x-amz-w")):
        return False
    if any(_b64_field(metadata, field) != _b64_field(original, field) for field in BINARY_FIELDS):
        return False
    context = metadata.get(context_field)
    if not isinstance(context, str):
        return False
    try:
        return bool(json.loads(context) == json.loads(original[context_field]))
    except (ValueError, RecursionError):
        return False


@fuzz(ENVELOPE_PARSER_EXAMPLES, slow=True)
@given(case=fuzzed_metadata(), data=st.data(), data_key=st.one_of(st.just(DATA_KEY), st.binary(max_size=40)))
def test_fuzz_envelope_parser_fails_only_with_integrity_or_foreign(
    case: tuple[Sealed | None, dict[str, object]], data: st.DataObject, data_key: bytes
) -> None:
    original, metadata = case
    body = data.draw(fuzzed_bodies(original.body if original is not None else ORIGINALS[0].body))
    claims_v3 = "x-amz-c" in metadata or "x-amz-3" in metadata
    well_formed = original is not None and _same_header(metadata, original.metadata)
    try:
        header = envelope.parse_header(metadata)  # type: ignore[arg-type]
    except ForeignObjectError as error:
        event("foreign")
        assert type(error) is ForeignObjectError and not claims_v3
        return
    except IntegrityError as error:
        event("refused header")
        assert type(error) is IntegrityError and claims_v3 and not well_formed
        return
    assert claims_v3
    # A parsed header is type-checked: what the keyring and open_body receive has the V3 shape.
    assert header.wrapped_key.algorithm in ("02", "12") and type(header.wrapped_key.ciphertext) is bytes
    assert all(type(k) is str and type(v) is str for k, v in header.wrapped_key.context.items())
    assert len(header.message_id) == len(header.commitment) == 28
    # It opens exactly when the key, the body, the message id and the commitment are an original's.
    ids = (_b64_field(metadata, "x-amz-i"), _b64_field(metadata, "x-amz-d"))
    sources = [o for o in ORIGINALS if o.body == body and ids == (o.message_id, o.commitment)]
    try:
        plaintext = envelope.open_body(body, data_key, header)
    except IntegrityError as error:
        event("refused body")
        assert type(error) is IntegrityError
        assert data_key != DATA_KEY or not sources
        return
    event("opened")
    assert data_key == DATA_KEY and sources, metadata
    assert plaintext == sources[0].plaintext


# --- through the real read path -------------------------------------------------------

RENAMED = "/memories/archive/today.md"


def opaque(shown_path: str) -> str:
    return (
        f"Error: The file {shown_path} failed its integrity check and cannot be read "
        "(it was modified, truncated, moved, or not written for this user)."
    )


def foreign(shown_path: str) -> str:
    return f"Error: The file {shown_path} was not written by s3memory (it is not encrypted) and cannot be read."


@st.composite
def rig_objects(draw: st.DrawFn) -> tuple[Rig, bytes, dict[str, object]]:
    """A rig, and the object to put at its file's key: its own metadata and body mutated, or
    metadata fuzzed from scratch (or taken from the parser fuzz's objects)."""
    rig = rig_for(draw(st.sampled_from(["tenant", "kms"])))
    original = rig.original
    if draw(st.integers(0, 3)):
        metadata: dict[str, object] = dict(original.metadata)
        for _ in range(draw(st.integers(0, 3))):
            field = draw(st.sampled_from(FIELD_CHOICES))
            operation = draw(st.sampled_from(["set", "set", "drop"]))
            if operation == "set":
                metadata[field] = draw(field_values(original, field))
            else:
                metadata.pop(field, None)
    else:
        metadata = draw(fuzzed_metadata())[1]
    return rig, draw(fuzzed_bodies(original.body)), metadata


def _read_outcome(tool: EncryptedMemory, path: str) -> str:
    """'ok', 'integrity' or 'foreign': view must end in one of these, with the exact message."""
    try:
        answer = tool.view(path)
    except ForeignObjectError as error:
        assert type(error) is ForeignObjectError and str(error) == foreign(path)
        return "foreign"
    except IntegrityError as error:
        assert type(error) is IntegrityError and str(error) == opaque(path)
        return "integrity"
    assert "remember the milk" in answer
    return "ok"


@fuzz(ENVELOPE_MEMORY_EXAMPLES, slow=True)
@given(case=rig_objects(), cold=st.booleans())
def test_fuzz_tampered_objects_through_view(case: tuple[Rig, bytes, dict[str, object]], cold: bool) -> None:
    rig, body, metadata = case
    key = rig.writer.layout.key_for(parse_path(FILE))
    rig.store.put(key, body, metadata)  # type: ignore[arg-type]
    tool = rig.open() if cold else rig.writer  # cold: keys fetched (tenant key or KMS) on this read
    try:
        outcome = _read_outcome(tool, FILE)
        event(f"{rig.mode}: {outcome}")
        expected_foreign = "x-amz-c" not in metadata and "x-amz-3" not in metadata
        assert (outcome == "foreign") == expected_foreign
        assert (outcome == "ok") == (body == rig.original.body and _same_header(metadata, rig.original.metadata))
        # A listing never decrypts: a tampered file is listed, and nothing else breaks.
        assert "today.md" in tool.view("/memories/notes")
    finally:
        if cold:
            tool.close()
        rig.store.put(key, rig.original.body, rig.original.metadata)


@fuzz(ENVELOPE_RENAME_EXAMPLES, slow=True)
@given(case=rig_objects())
def test_fuzz_tampered_objects_through_rename(case: tuple[Rig, bytes, dict[str, object]]) -> None:
    """rename re-wraps a readable data key and moves anything else unchanged: it must never
    fail on the object, and the moved object reads exactly as well as the original did."""
    rig, body, metadata = case
    key = rig.writer.layout.key_for(parse_path(FILE))
    rig.store.put(key, body, metadata)  # type: ignore[arg-type]
    try:
        before = _read_outcome(rig.writer, FILE)
        assert rig.writer.rename("/memories/notes", "/memories/archive") == (
            "Successfully renamed /memories/notes to /memories/archive"
        )
        with pytest.raises(PathNotFoundError):
            rig.writer.view(FILE)
        after = _read_outcome(rig.writer, RENAMED)
        event(f"{rig.mode}: {before} -> {after}")
        assert after == before
    finally:
        rig.reset()
        rig.store.put(key, rig.original.body, rig.original.metadata)


def test_rigs_read_their_own_file() -> None:
    """The fuzz targets above (and ``test_key_documents``') start from objects that open
    (else every outcome is a failure)."""
    for mode in ("tenant", "kms"):
        rig = rig_for(mode)
        assert rig.original.metadata["x-amz-w"] == ("02" if mode == "tenant" else "12")
        fresh = rig.open()
        try:
            assert _read_outcome(fresh, FILE) == "ok"
        finally:
            fresh.close()
