"""What the fuzzers in ``tests/fuzz/`` share: the example budget and the ``fuzz()`` settings,
the oracles for a clear refusal, strategies for malformed JSON and base64 values, and a
tenant's store holding one file written by s3memory (in tenant-key and KMS-per-object mode),
which the envelope and tenant-key fuzzers tamper with.

Example budget per run (hypothesis ``max_examples``; ``test_example_budget`` in
``tests/fuzz/test_paths.py`` checks the sums): paths and user ids (``test_paths``,
``test_tenants``) 3,000 + 2,000 + 1,500 + 1,800 + 1,200 + 800 = 10,300; envelope and key
documents (``test_envelope``, ``test_key_documents``) 2,000 + 1,000 + 400 + 600 = 4,000;
14,300 in all.
"""

from __future__ import annotations

import base64
import functools
import json
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from helpers import MASTER_KEY, examples
from helpers.fakekms import FakeKms
from helpers.path_rules import BAD_CATEGORIES
from s3memory import (
    EncryptedMemory,
    InMemoryStore,
    InvalidPathError,
    KeyCache,
    MemoryPath,
    S3MemoryError,
    open_memory,
    parse_path,
)

__all__ = [
    "B64_ALPHABET",
    "ENVELOPE_EXAMPLES",
    "ENVELOPE_MEMORY_EXAMPLES",
    "ENVELOPE_PARSER_EXAMPLES",
    "ENVELOPE_RENAME_EXAMPLES",
    "FILE",
    "FILE_TEXT",
    "JSON_BOMBS",
    "KEY_EXAMPLES",
    "PATH_ACCEPTED_LAYOUT_EXAMPLES",
    "PATH_AND_USER_ID_EXAMPLES",
    "PATH_ANY_INPUT_EXAMPLES",
    "PATH_PAIR_EXAMPLES",
    "SIZED_B64",
    "TENANT_KEY_OBJECT_EXAMPLES",
    "TENANT_PAIR_EXAMPLES",
    "USER_ID_EXAMPLES",
    "Rig",
    "Sealed",
    "assert_clear_error",
    "b64",
    "fuzz",
    "json_values",
    "mutated_string",
    "parse_or_none",
    "rig_for",
]

# --- budget ---------------------------------------------------------------------------

PATH_ANY_INPUT_EXAMPLES = 3_000
PATH_ACCEPTED_LAYOUT_EXAMPLES = 2_000
PATH_PAIR_EXAMPLES = 1_500
KEY_EXAMPLES = 1_800
USER_ID_EXAMPLES = 1_200
TENANT_PAIR_EXAMPLES = 800
PATH_AND_USER_ID_EXAMPLES = (
    PATH_ANY_INPUT_EXAMPLES
    + PATH_ACCEPTED_LAYOUT_EXAMPLES
    + PATH_PAIR_EXAMPLES
    + KEY_EXAMPLES
    + USER_ID_EXAMPLES
    + TENANT_PAIR_EXAMPLES
)

ENVELOPE_PARSER_EXAMPLES = 2_000
ENVELOPE_MEMORY_EXAMPLES = 1_000  # half tenant-key mode, half KMS-per-object mode (drawn)
ENVELOPE_RENAME_EXAMPLES = 400
TENANT_KEY_OBJECT_EXAMPLES = 600
ENVELOPE_EXAMPLES = (
    ENVELOPE_PARSER_EXAMPLES + ENVELOPE_MEMORY_EXAMPLES + ENVELOPE_RENAME_EXAMPLES + TENANT_KEY_OBJECT_EXAMPLES
)


def fuzz(max_examples: int, *, slow: bool = False) -> Any:
    """Settings of every fuzz target. ``slow``: the strategy builds huge values (nesting
    bombs, 100 KB base64) on purpose, so generation is allowed to be slow."""
    return settings(
        max_examples=examples(max_examples),
        deadline=None,
        derandomize=False,
        suppress_health_check=[HealthCheck.too_slow] if slow else [],
    )


# --- oracles --------------------------------------------------------------------------


def assert_clear_error(error: BaseException, names: str | None) -> None:
    """A refusal the model can read: "Error: ..." (or, for a path outside /memories or a
    ".." segment, the SDK reference's sentence), naming the input, with nothing raw."""
    assert isinstance(error, S3MemoryError)
    message = str(error)
    if isinstance(error, InvalidPathError) and message.startswith("Path "):
        assert message.startswith("Path must start with /memories, got: ") or (
            " would escape /memories directory: '..' segments (directory traversal) are not allowed" in message
        ), message
    else:
        assert message.startswith("Error: "), message
    if names is not None:
        assert names in message, (names, message)
    assert not any(unicodedata.category(ch) in BAD_CATEGORIES for ch in message), repr(message)
    message.encode("utf-8")  # no lone surrogates: the message survives JSON/UTF-8


def parse_or_none(raw: str, max_path_bytes: int = 512) -> MemoryPath | None:
    """``parse_path(raw)``, or None where it refuses ``raw``."""
    try:
        return parse_path(raw, max_path_bytes=max_path_bytes)
    except InvalidPathError:
        return None


# --- malformed values -----------------------------------------------------------------

JSON_BOMBS = [
    "[" * 100_000,
    "[" * 100_000 + "]" * 100_000,
    '{"a":' * 50_000 + '"b"' + "}" * 50_000,
    '{"a":' + "1" * 5_000 + "}",
    '{"a": 1e999999}',
    '{"a": NaN}',
    "NaN",
    "-0",
    '{"a": "\\ud800"}',
    '{"\\udfff": "a"}',
    '{"a":"b","a":"c"}',
    '{"a": "b"',
    "\ufeff{}",
    "{}",
    "[]",
    "null",
    '"x"',
]
B64_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8,
)

# Base64 of sizes around those of nonces, message ids, commitments and wrapped keys.
SIZED_B64 = st.one_of([st.binary(min_size=n, max_size=n).map(b64) for n in (0, 4, 7, 12, 27, 28, 29, 32, 60)])


@st.composite
def mutated_string(draw: st.DrawFn, original: str) -> str:
    """One small edit of a valid value: replace, drop or insert one character, or reformat."""
    if not original:
        return draw(st.text(max_size=3))
    index = draw(st.integers(0, len(original) - 1))
    junk = draw(st.sampled_from([*B64_ALPHABET, " ", "\n", "-", "_", "\u00e9", "\x00", '"', "{", "}"]))
    kind = draw(st.sampled_from(["replace", "drop", "insert", "strip-padding", "urlsafe", "pretty-json", "upper"]))
    if kind == "replace":
        return original[:index] + junk + original[index + 1 :]
    if kind == "drop":
        return original[:index] + original[index + 1 :]
    if kind == "insert":
        return original[:index] + junk + original[index:]
    if kind == "strip-padding":
        return original.rstrip("=")
    if kind == "urlsafe":
        return original.replace("+", "-").replace("/", "_")
    if kind == "pretty-json":
        try:
            return json.dumps(json.loads(original), indent=draw(st.integers(0, 2)))
        except ValueError:
            return original + " "
    return original.upper()


# --- a tenant's store with one file written by s3memory ---------------------------------

FILE = "/memories/notes/today.md"
FILE_TEXT = "# today\n" + "remember the milk\n" * 6


@dataclass(frozen=True)
class Sealed:
    """An object s3memory wrote (body and metadata), and the plaintext it opens to."""

    body: bytes
    metadata: dict[str, str]
    plaintext: bytes

    @property
    def message_id(self) -> bytes:
        return base64.b64decode(self.metadata["x-amz-i"])

    @property
    def commitment(self) -> bytes:
        return base64.b64decode(self.metadata["x-amz-d"])


@dataclass
class Rig:
    """One tenant's store with one file written by s3memory, and how to open more tools on it."""

    mode: str
    store: InMemoryStore
    open: Callable[[], EncryptedMemory]
    writer: EncryptedMemory
    original: Sealed

    def reset(self) -> None:
        """Back to just the file and the tenant key (a rename may have moved or left objects)."""
        layout = self.writer.layout
        keep = layout.internal_prefix + "tenant-key"
        stale = [info.key for info in self.store.list(layout.tenant_prefix) if info.key != keep]
        if stale:
            self.store.delete(stale)


@functools.cache
def rig_for(mode: str) -> Rig:
    """The rig of ``mode``: "tenant" (tenant-key mode, a local master key) or "kms"
    (KMS-per-object mode, a fake KMS); one per run, which fuzz targets put back as they found it."""
    store = InMemoryStore()
    kms = FakeKms()
    if mode == "tenant":
        options: dict[str, Any] = {"master_key": MASTER_KEY}
    else:
        options = {"kms_key_id": "fuzz-key", "kms_client": kms, "key_mode": "kms"}

    def open_tool() -> EncryptedMemory:
        return open_memory(user_id="alice", store=store, key_cache=KeyCache(), **options)

    writer = open_tool()
    writer.create(FILE, FILE_TEXT)
    stored = store.get(writer.layout.key_for(parse_path(FILE)))
    assert stored is not None
    return Rig(mode, store, open_tool, writer, Sealed(stored.body, dict(stored.metadata), FILE_TEXT.encode()))
