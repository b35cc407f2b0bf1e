"""Fuzzing (issue 5, item 7): every input an attacker controls, thrown at the parsers.

Paths come from the model, user ids from the application, and object keys, metadata and
bodies from whoever can write to the bucket. For all of them the only outcomes are a value
of the documented shape or the documented error; never another exception, and never a key
outside the tenant's prefix.

``tests/core/test_paths.py`` and ``tests/crypto/test_envelope.py`` hold the fixed examples and the first
properties (one tenant, no bucket prefix, the header parser alone). This file adds:

- paths built from adversarial pieces (traversal, encodings, look-alike separators and
  dots, controls, bidi and zero-width characters, NFC/NFD/NFKC spellings, long segments,
  non-str inputs), checked against an independent statement of the rules (refused
  exactly when a rule says so, accepted as exactly the NFC spelling; the look-alike rule
  is ``test_paths``' statement of it, from Unicode's confusables.txt), under random
  tenants, bucket prefixes and path limits;
- pairs of paths: keys are injective, and a directory's prefix covers exactly its
  descendants (``a`` never covers ``ab``);
- ``path_for_key`` on arbitrary keys, including other tenants' and internal keys;
- arbitrary user ids and pairs of tenants under a shared bucket prefix;
- random metadata and bodies through the real read path (``EncryptedMemory.view`` and
  ``rename`` over an ``InMemoryStore``, in tenant-key and KMS-per-object mode), through
  ``parse_header`` + ``open_body`` directly, and random tenant-key objects.

Example budget per run (hypothesis ``max_examples``; ``test_example_budget`` checks the
sum): paths and user ids 3,000 + 2,000 + 1,500 + 1,800 + 1,200 + 800 = 10,300;
envelope and key objects 2,000 + 1,000 + 400 + 600 = 4,000.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pytest
from helpers import MASTER_KEY
from helpers.fakekms import FakeKms
from helpers.path_rules import refused_as_look_alike, shown
from helpers.path_strategies import (
    TENANT_CHARS,
    PathString,
    adversarial_paths,
    any_path_input,
    layout_and_key,
    layouts,
    near_the_key_limit,
    prefixes,
    tenant_ids,
    valid_leaning_paths,
)
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from s3memory import (
    ConfigurationError,
    EncryptedMemory,
    ForeignObjectError,
    InMemoryStore,
    IntegrityError,
    InvalidPathError,
    KeyCache,
    MemoryPath,
    PathNotFoundError,
    S3MemoryError,
    TenantKeyError,
    TenantLayout,
    open_memory,
    parse_path,
    validate_tenant,
)
from s3memory._crypto import envelope

pytestmark = pytest.mark.slow  # heavy hypothesis: about 14,000 examples

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
    """Settings of every property here. ``slow``: the strategy builds huge values (nesting
    bombs, 100 KB base64) on purpose, so generation is allowed to be slow."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=False,
        suppress_health_check=[HealthCheck.too_slow] if slow else [],
    )


def test_example_budget() -> None:
    assert PATH_AND_USER_ID_EXAMPLES >= 10_000
    assert ENVELOPE_EXAMPLES >= 2_000


# --- shared oracles -------------------------------------------------------------------

# Never allowed in a path, nor raw in an error message (independent of _paths' own list).
FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Cn", "Co", "Zl", "Zp"})
SHOWN_CATEGORIES_NEVER_RAW = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def _has_forbidden(text: str) -> bool:
    return any(unicodedata.category(ch) in FORBIDDEN_CATEGORIES for ch in text)


def _decoded(segment: str) -> str:
    """Percent-decoding repeated as far as parse_path promises to look (4 levels)."""
    for _ in range(4):
        step = unquote(segment)
        if step == segment:
            break
        segment = step
    return segment


def _must_refuse(raw: str, max_path_bytes: int) -> str | None:
    """Why ``raw`` must be refused, or None if it must be accepted: parse_path's rules
    restated independently of ``_paths`` (which must agree in both directions)."""
    if raw != "/memories" and not raw.startswith("/memories/"):
        return "outside /memories"
    rest = raw[len("/memories/") :]
    if rest.endswith("/"):
        rest = rest[:-1]
        if rest == "":
            return "//"
    if rest == "":
        return None
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in rest):
        return "surrogate"
    rest = unicodedata.normalize("NFC", rest)
    if len(rest.encode("utf-8")) > max_path_bytes:
        return "too long"
    for segment in rest.split("/"):
        decoded = _decoded(segment)
        if segment == "" or segment in (".", "..") or decoded in (".", ".."):
            return "empty, . or .. segment"
        if "\\" in segment or "\\" in decoded or "/" in decoded:
            return "separator"
        if _has_forbidden(segment) or _has_forbidden(decoded):
            return "control or invisible"
        if refused_as_look_alike(segment) or refused_as_look_alike(decoded):
            return "a look-alike of '/', '\\' or '.'"
        if len(segment.encode("utf-8")) > 255:
            return "long segment"
    return None


def _canonical(raw: str) -> str:
    """What an accepted ``raw`` must become: exactly its NFC form below /memories, with one
    trailing slash dropped (nothing decoded, folded, trimmed or collapsed)."""
    rest = "" if raw == "/memories" else raw[len("/memories/") :]
    return unicodedata.normalize("NFC", rest[:-1] if rest.endswith("/") else rest)


def _assert_clear_error(error: BaseException, names: str | None) -> None:
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
    assert not any(unicodedata.category(ch) in SHOWN_CATEGORIES_NEVER_RAW for ch in message), repr(message)
    message.encode("utf-8")  # no lone surrogates: the message survives JSON/UTF-8


def _parse_or_none(raw: str, max_path_bytes: int = 512) -> MemoryPath | None:
    try:
        return parse_path(raw, max_path_bytes=max_path_bytes)
    except InvalidPathError:
        return None


# --- paths: any input -----------------------------------------------------------------


@fuzz(PATH_ANY_INPUT_EXAMPLES)
@given(raw=any_path_input, layout=layouts)
@example(raw="/memories/\uff0e\uff0e/\uff0fetc", layout=TenantLayout("alice"))
@example(raw="/memories/a\u200f/b\u202e", layout=TenantLayout("alice"))
@example(raw="/memories/%c0%ae%c0%ae/x", layout=TenantLayout("alice"))
@example(raw=None, layout=TenantLayout("alice"))
def test_fuzz_parse_path_accepts_canonically_or_refuses_clearly(raw: object, layout: TenantLayout) -> None:
    try:
        path = parse_path(raw)
    except InvalidPathError as error:
        event("refused")
        assert type(error) is InvalidPathError
        _assert_clear_error(error, shown(raw) if isinstance(raw, str) else type(raw).__name__)
        if isinstance(raw, str):
            # Never refused without a reason (the oracle agrees both ways), whatever the spelling.
            assert _must_refuse(raw, 512) is not None, raw
            assert _parse_or_none(unicodedata.normalize("NFD", raw)) is None
        return
    event("accepted")
    assert isinstance(raw, str)
    assert _must_refuse(raw, 512) is None, (_must_refuse(raw, 512), raw)
    assert type(path) is MemoryPath and type(path.relative) is str
    assert path.relative == _canonical(raw)
    # The spelling does not matter beyond NFC: NFD, NFC and the canonical form agree.
    assert parse_path(unicodedata.normalize("NFD", raw)) == path
    assert parse_path(unicodedata.normalize("NFC", raw)) == path
    _check_accepted_under(layout, path, 512)


def _check_accepted_under(layout: TenantLayout, path: MemoryPath, max_path_bytes: int) -> None:
    """Everything an accepted path must satisfy once it meets a tenant's layout."""
    relative = path.relative
    assert unicodedata.is_normalized("NFC", relative)
    assert len(relative.encode("utf-8")) <= max_path_bytes
    # canonical and stable: parsing the display form gives the same path, again and again
    assert parse_path(path.display, max_path_bytes=max_path_bytes) == path
    assert parse_path(path.display + "/", max_path_bytes=max_path_bytes) == path
    for part in path.parts:
        assert part not in ("", ".", "..") and _decoded(part) not in (".", "..")
        assert "\\" not in part and "/" not in _decoded(part)
        assert not _has_forbidden(part)
        assert len(part.encode("utf-8")) <= 255
    assert layout.tenant_prefix == f"{layout.prefix}{layout.tenant}/"
    assert layout.memory_prefix == layout.tenant_prefix + "memories/"
    directory = layout.dir_prefix(path)
    assert directory.endswith("/") and directory.startswith(layout.memory_prefix)
    assert not directory.startswith(layout.internal_prefix)
    if path.is_root:
        assert directory == layout.memory_prefix
        with pytest.raises(InvalidPathError) as caught:
            layout.key_for(path)
        _assert_clear_error(caught.value, "/memories")
        return
    if len(layout.key_for_unchecked(path).encode("utf-8")) > 1024:
        with pytest.raises(InvalidPathError) as caught:
            layout.key_for(path)
        _assert_clear_error(caught.value, shown(path.display))
        return
    key = layout.key_for(path)
    # deterministic: the same key from the same layout, from an equal layout, and from a re-parse
    assert (
        key
        == layout.key_for(path)
        == TenantLayout(layout.tenant, layout.prefix).key_for(parse_path(path.display, max_path_bytes=max_path_bytes))
    )
    assert key.startswith(layout.memory_prefix) and key.startswith(layout.tenant_prefix)
    assert key[len(layout.memory_prefix) :] == relative
    assert len(key.encode("utf-8")) <= 1024
    assert "//" not in key and not key.endswith("/")
    assert all(segment not in ("", ".", "..") for segment in key.split("/"))
    assert not _has_forbidden(key)
    assert layout.path_for_key(key) == path  # the listing maps the key back to this path
    assert directory == key + "/"
    # A directory's prefix covers its children, not siblings that merely share a string prefix.
    for name in ("x", "-x", ".x", "x/y"):
        sibling = _parse_or_none(f"{path.display}{name}", max_path_bytes)
        if sibling is not None and sibling != path:
            sibling_key = layout.key_for_unchecked(sibling)
            assert not sibling_key.startswith(directory), (sibling_key, directory)
            assert not layout.dir_prefix(sibling).startswith(directory)
        child = _parse_or_none(f"{path.display}/{name}", max_path_bytes)
        if child is not None:
            assert layout.key_for_unchecked(child).startswith(directory)


# --- paths: accepted ones under random layouts and limits ------------------------------

path_limits = st.one_of(st.just(512), st.sampled_from([1, 20, 255, 256, 1024, 2048]), st.integers(1, 4096))


@fuzz(PATH_ACCEPTED_LAYOUT_EXAMPLES)
@given(raw=st.one_of(valid_leaning_paths(), adversarial_paths()), layout=layouts, max_path_bytes=path_limits)
@example(raw="/memories/" + "/".join(["\u00e9" * 127] * 7), layout=TenantLayout("a" * 128, "p/"), max_path_bytes=2048)
def test_fuzz_accepted_paths_map_inside_the_tenant(raw: str, layout: TenantLayout, max_path_bytes: int) -> None:
    reason = _must_refuse(raw, max_path_bytes)
    try:
        path = parse_path(raw, max_path_bytes=max_path_bytes)
    except InvalidPathError as error:
        event("refused")
        assert type(error) is InvalidPathError
        _assert_clear_error(error, shown(raw))
        assert reason is not None, raw
        return
    event("accepted")
    assert reason is None, (reason, raw)
    assert path.relative == _canonical(raw)
    _check_accepted_under(layout, path, max_path_bytes)


# --- paths: pairs ---------------------------------------------------------------------


@st.composite
def path_pairs(draw: st.DrawFn) -> tuple[str, str]:
    first = draw(valid_leaning_paths())
    derive: list[Callable[[str], str]] = [
        lambda s: s,
        lambda s: s + draw(st.sampled_from(["x", "-", ".", " ", "\u0301", "0", "/x", "/a/b", "%2e"])),
        lambda s: s[:-1] if len(s) > len("/memories/") else s,
        lambda s: s.rsplit("/", 1)[0],
        lambda s: unicodedata.normalize("NFD", s),
        lambda s: unicodedata.normalize("NFKC", s),
        lambda s: s.swapcase().replace("/MEMORIES", "/memories"),
        lambda s: s + "/",
        lambda s: s.replace("/", "/" + draw(st.sampled_from(["a", "ab", "."])), 2),
    ]
    second = draw(st.one_of(valid_leaning_paths(), st.sampled_from(derive).map(lambda f: f(first))))
    return first, second


@fuzz(PATH_PAIR_EXAMPLES)
@given(pair=path_pairs(), layout=layouts)
def test_fuzz_keys_are_injective_and_directories_nest_exactly(pair: tuple[str, str], layout: TenantLayout) -> None:
    raw_a, raw_b = pair
    a, b = _parse_or_none(raw_a), _parse_or_none(raw_b)
    if a is None or b is None:
        event("a path of the pair was refused")
        return
    event("same path" if a == b else "different paths")
    # Two spellings name one path exactly when their canonical forms agree.
    assert (a == b) == (_canonical(raw_a) == _canonical(raw_b))
    if not a.is_root and not b.is_root:
        assert (layout.key_for(a) == layout.key_for(b)) == (a == b)
    for x, y in ((a, b), (b, a)):
        # y's objects are listed under x's directory prefix exactly when y lies strictly below x.
        below = y != x and y.is_within(x)
        assert below == (y.relative.startswith(x.relative + "/") or (x.is_root and not y.is_root))
        if not y.is_root:
            assert layout.key_for(y).startswith(layout.dir_prefix(x)) == below
        assert layout.dir_prefix(y).startswith(layout.dir_prefix(x)) == y.is_within(x)


# --- path_for_key on arbitrary keys ---------------------------------------------------


@fuzz(KEY_EXAMPLES)
@given(case=layout_and_key())
@example(case=(TenantLayout("alice"), "alice/.s3memory/tenant-key"))
@example(case=(TenantLayout("alice"), "alice/memories/" + near_the_key_limit(1009)))  # a 1,024-byte key
@example(case=(TenantLayout("alice", "app/"), "app/alice/memories/" + near_the_key_limit(1014)))  # 1,033 bytes
def test_fuzz_path_for_key_never_raises_and_round_trips(case: tuple[TenantLayout, str]) -> None:
    layout, key = case
    path = layout.path_for_key(key)
    if path is None:
        event("not a memory key")
        return
    event("memory key")
    assert type(path) is MemoryPath and not path.is_root
    assert key.startswith(layout.memory_prefix)
    assert not key.startswith(layout.internal_prefix)
    # Only the exact canonical spelling of a valid path is recognised.
    assert layout.key_for_unchecked(path) == key
    assert unicodedata.is_normalized("NFC", path.relative)
    assert parse_path(path.display, max_path_bytes=1024) == path
    if len(path.relative.encode("utf-8")) <= 512:
        assert parse_path(path.display) == path
    assert layout.key_for(path) == key


# --- user ids -------------------------------------------------------------------------

user_id_inputs = st.one_of(
    tenant_ids,
    st.text(max_size=140),
    st.text(TENANT_CHARS + "/\\ .:*?\x00\t\u00e9\u200b\uff0f\uff0e", max_size=140),
    st.builds(
        lambda tenant, index, bad: tenant[:index] + bad + tenant[index:],
        tenant_ids,
        st.integers(0, 128),
        st.sampled_from(["/", "\\", "..", "\x00", "\n", " ", "\u00e9", "\u200b", "\uff0f", "%2f", "*", ":"]),
    ),
    st.sampled_from(
        [
            "",
            ".",
            "..",
            "/",
            "a/",
            "/a",
            "a/../b",
            "alice/memories",
            "alice/.s3memory",
            ".s3memory",
            "%2e%2e",
            "\uff0e\uff0e",
            "\uff41lice",  # fullwidth a
            "alice\n",
            " alice",
            "alice ",
            "-alice",
            "_alice",
            "@alice",
            "a" * 128,
            "a" * 129,
            "1" * 200,
        ]
    ),
    st.binary(max_size=20),
    st.just(b"alice"),
    st.none(),
    st.integers(),
    st.booleans(),
    st.floats(),
    st.lists(tenant_ids, max_size=2),
    tenant_ids.map(PathString),
)


@fuzz(USER_ID_EXAMPLES)
@given(user_id=user_id_inputs, prefix=prefixes)
def test_fuzz_user_ids_are_safe_key_segments_or_refused(user_id: object, prefix: str) -> None:
    try:
        accepted = validate_tenant(user_id)
    except ConfigurationError as error:
        event("refused")
        assert type(error) is ConfigurationError and isinstance(error, ValueError)
        _assert_clear_error_config(error)
        with pytest.raises(ConfigurationError):
            TenantLayout(user_id, prefix)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError):
            open_memory(user_id=user_id, store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())  # type: ignore[arg-type]
        return
    event("accepted")
    assert accepted == user_id and isinstance(user_id, str)
    assert 1 <= len(user_id) <= 128
    assert user_id not in (".", "..") and not user_id.startswith(".")
    assert user_id.lower() != "memories"  # reserved (issue 11, item 4)
    assert "/" not in user_id and "\\" not in user_id and "%" not in user_id
    assert user_id.isascii() and user_id.isprintable() and not any(ch.isspace() for ch in user_id)
    layout = TenantLayout(user_id, prefix)
    assert layout.tenant_prefix == f"{prefix}{user_id}/"
    assert layout.memory_prefix == f"{prefix}{user_id}/memories/"
    assert layout.internal_prefix == f"{prefix}{user_id}/.s3memory/"
    assert not layout.memory_prefix.startswith(layout.internal_prefix)
    assert not layout.internal_prefix.startswith(layout.memory_prefix)
    memory = open_memory(
        user_id=user_id, prefix=prefix, store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache()
    )
    assert memory.layout == layout


def _assert_clear_error_config(error: ConfigurationError) -> None:
    message = str(error)
    assert "user_id" in message, message
    assert not any(unicodedata.category(ch) in SHOWN_CATEGORIES_NEVER_RAW for ch in message), repr(message)
    message.encode("utf-8")


@st.composite
def tenant_pairs(draw: st.DrawFn) -> tuple[str, str]:
    first = draw(tenant_ids)
    second = draw(
        st.one_of(
            tenant_ids,
            st.sampled_from(["2", "-x", ".", "@", "_", "=", "+", "a", ".s3memory", "/memories"]).map(
                lambda s: first + s
            ),
            st.integers(1, 128).map(lambda n: first[:n]),
            st.just(first.swapcase()),
            st.just(first),
        )
    )
    return first, second


@fuzz(TENANT_PAIR_EXAMPLES)
@given(pair=tenant_pairs(), prefix=prefixes, raw_path=valid_leaning_paths())
def test_fuzz_tenants_never_reach_each_others_keys(pair: tuple[str, str], prefix: str, raw_path: str) -> None:
    first, second = pair
    try:
        a, b = TenantLayout(first, prefix), TenantLayout(second, prefix)
    except ConfigurationError:
        event("second id refused")
        return
    if first == second:
        event("same tenant")
        assert a == b and a.tenant_prefix == b.tenant_prefix
        return
    event("different tenants")
    path = _parse_or_none(raw_path)
    for x, y in ((a, b), (b, a)):
        assert not x.tenant_prefix.startswith(y.tenant_prefix), (x.tenant_prefix, y.tenant_prefix)
        keys = [
            x.tenant_prefix,
            x.memory_prefix,
            x.internal_prefix,
            x.internal_prefix + "tenant-key",
            x.internal_prefix + "intents/rename-0123",
            x.key_for(MemoryPath("notes.txt")),
        ]
        if path is not None and not path.is_root:
            keys += [x.key_for(path), x.dir_prefix(path)]
        for key in keys:
            assert not key.startswith(y.tenant_prefix), (key, y.tenant_prefix)
            assert y.path_for_key(key) is None
        # an internal key of one tenant is never a memory key of any tenant, its own included
        assert x.path_for_key(x.internal_prefix + "tenant-key") is None


# --- envelope: fuzzed metadata and bodies ---------------------------------------------

DATA_KEY = hashlib.sha256(b"s3memory fuzz data key").digest()
PLAINTEXT = ("line one\nline two, with some length to it\n" * 4).encode()
_BINDING = {"s3memory:tenant": "alice", "s3memory:path": "ab" * 32}
_TENANT_WRAPPED = envelope.WrappedKey("02", bytes(range(60)), {**_BINDING, "s3memory:kid": "0011223344556677"})
_KMS_WRAPPED = envelope.WrappedKey("12", b"\xaa" * 48, {**_BINDING, "aws:x-amz-cek-alg": "115"})


@dataclass(frozen=True)
class Sealed:
    body: bytes
    metadata: dict[str, str]
    plaintext: bytes

    @property
    def message_id(self) -> bytes:
        return base64.b64decode(self.metadata["x-amz-i"])

    @property
    def commitment(self) -> bytes:
        return base64.b64decode(self.metadata["x-amz-d"])


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


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8,
)


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
    st.binary(max_size=64).map(_b64),
    st.sampled_from(JSON_BOMBS),
    st.builds(lambda n: "A" * (4 * n), st.integers(2_500, 40_000)),  # up to 160 KB of valid base64
    st.builds(lambda n: "\u00e9" * n, st.integers(1, 20_000)),
    st.sampled_from(sorted({v for o in ORIGINALS for v in o.metadata.values()})),
    st.sampled_from([None, 115, b"115", ["115"], {"a": "b"}, 1.5]),  # never from S3, possible from a JSON store
)


SIZED_B64 = st.one_of([st.binary(min_size=n, max_size=n).map(_b64) for n in (0, 4, 7, 12, 27, 28, 29, 32, 60)])
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


# --- envelope: through the real read path ---------------------------------------------


FILE = "/memories/notes/today.md"
FILE_TEXT = "# today\n" + "remember the milk\n" * 6
RENAMED = "/memories/archive/today.md"


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
def _rig(mode: str) -> Rig:
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
    rig = _rig(draw(st.sampled_from(["tenant", "kms"])))
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


# --- the tenant key object ------------------------------------------------------------


# Values for the fields of a "retired" entry (a former key kept during a rotation).
RETIRED_FIELD_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "kid": st.one_of(st.text(max_size=16), json_values),
    "wrapped": st.one_of(SIZED_B64, st.text(max_size=10), json_values),
    "retired_at": st.one_of(
        st.floats(),
        st.integers(),
        st.builds(lambda n: 10**n, st.integers(309, 4_000)),  # JSON integers too large for a float
        st.builds(lambda n: -(10**n), st.integers(309, 4_000)),
        json_values,
    ),
}


@st.composite
def retired_lists(draw: st.DrawFn, current: dict[str, Any]) -> object:
    """A "retired" list: well-formed entries with one field at a time made wrong, or a
    list that is wrong as a whole (too long, not a list, the current key listed again)."""
    kind = draw(st.sampled_from(["entries", "entries", "entries", "too many", "current again", "anything"]))
    if kind == "too many":
        return [{"kid": f"k{i}", "wrapped": "", "retired_at": 0} for i in range(draw(st.integers(15, 18)))]
    if kind == "current again":
        return [{"kid": current.get("kid"), "wrapped": current.get("wrapped"), "retired_at": 0}]
    if kind == "anything":
        return draw(json_values)
    entries: list[Any] = []
    for index in range(draw(st.integers(1, 3))):
        entry: dict[str, Any] = {"kid": f"old{index}", "wrapped": draw(SIZED_B64), "retired_at": 1.7e9 + index}
        for _ in range(draw(st.integers(0, 2))):
            field = draw(st.sampled_from(sorted(RETIRED_FIELD_VALUES)))
            if draw(st.integers(0, 3)) == 0:
                entry.pop(field, None)
            else:
                entry[field] = draw(RETIRED_FIELD_VALUES[field])
        entries.append(entry if draw(st.integers(0, 5)) else draw(json_values))
    return entries


@st.composite
def tenant_key_documents(draw: st.DrawFn) -> bytes:
    stored = _rig("tenant").store.get("alice/.s3memory/tenant-key")
    assert stored is not None
    document: Any = json.loads(stored.body)
    kind = draw(st.sampled_from(["edit", "edit", "retired", "retired", "json", "bytes", "bomb"]))
    if kind == "json":
        return json.dumps(draw(json_values)).encode()
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "bomb":
        return draw(st.sampled_from(JSON_BOMBS)).encode("utf-8", "surrogatepass")
    if kind == "retired":  # the current key intact, the retired ones fuzzed
        document["retired"] = draw(retired_lists(document))
        return json.dumps(document).encode()
    for _ in range(draw(st.integers(1, 3))):
        field = draw(st.sampled_from(["v", "kid", "wrapper", "wrapped", "wrapped", "extra"]))
        if draw(st.integers(0, 4)) == 0:
            document.pop(field, None)
            continue
        options: list[st.SearchStrategy[Any]] = [
            st.sampled_from([1, 2, 0, True, 1.0, "1", None, [], {}, "local", "kms", "", "\ud800"]),
            json_values,
        ]
        if isinstance(document.get(field), str):
            options.append(mutated_string(document[field]))
        if field == "wrapped":
            options.append(SIZED_B64)  # under 8 bytes, the nonce is too short for AES-GCM
        document[field] = draw(draw(st.sampled_from(options)))
    return json.dumps(document, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")


@fuzz(TENANT_KEY_OBJECT_EXAMPLES, slow=True)
@given(document=tenant_key_documents(), metadata=st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=2))
def test_fuzz_tenant_key_object(document: bytes, metadata: dict[str, str]) -> None:
    rig = _rig("tenant")
    original = rig.store.get("alice/.s3memory/tenant-key")
    assert original is not None
    store = InMemoryStore()
    store.put("alice/.s3memory/tenant-key", document, metadata)
    file_key = rig.writer.layout.key_for(parse_path(FILE))
    store.put(file_key, rig.original.body, rig.original.metadata)
    tool = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    try:
        answer = tool.view(FILE)
    except TenantKeyError as error:
        event("tenant key refused")
        assert type(error) is TenantKeyError
        _assert_clear_error(error, None)
        return
    except ConfigurationError as error:
        event("wrong kind of master key")
        parsed = json.loads(document)
        assert isinstance(parsed, dict) and parsed.get("wrapper") != "local"
        _assert_clear_error(error, None)
        return
    finally:
        tool.close()
    event("read")
    assert "remember the milk" in answer
    parsed, expected = json.loads(document), json.loads(original.body)
    assert (parsed["v"], parsed["kid"], parsed["wrapper"]) == (expected["v"], expected["kid"], expected["wrapper"])
    assert base64.b64decode(parsed["wrapped"]) == base64.b64decode(expected["wrapped"])


def test_tenant_key_document_with_a_huge_retired_at_is_refused_as_corrupt() -> None:
    """Found by test_fuzz_tenant_key_object: a JSON integer too large for a float in a
    retired key's ``retired_at`` must be a corrupt document (TenantKeyError), not an
    OverflowError escaping ``float()``."""
    rig = _rig("tenant")
    stored = rig.store.get("alice/.s3memory/tenant-key")
    assert stored is not None
    document = json.loads(stored.body)
    document["retired"] = [{"kid": "old", "wrapped": "", "retired_at": 10**400}]
    store = InMemoryStore()
    store.put("alice/.s3memory/tenant-key", json.dumps(document).encode(), {})
    store.put(rig.writer.layout.key_for(parse_path(FILE)), rig.original.body, rig.original.metadata)
    tool = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    try:
        with pytest.raises(TenantKeyError):
            tool.view(FILE)
    finally:
        tool.close()


@pytest.mark.parametrize("version", [2.0, 3.0, 3, True], ids=["2.0", "3.0", "3-without-kept-keys", "true"])
def test_tenant_key_document_with_a_version_it_was_not_written_as_is_refused(version: object) -> None:
    """Found by test_fuzz_tenant_key_object: a float (or a bool) equals a version number in
    Python, and version 3 is only written with kept keys. Each is a document s3memory never
    wrote, so it is corrupt, not read as another version."""
    rig = _rig("tenant")
    stored = rig.store.get("alice/.s3memory/tenant-key")
    assert stored is not None
    document = json.loads(stored.body)
    assert document["v"] == 2 and not document.get("kept")
    document["v"] = version
    store = InMemoryStore()
    store.put("alice/.s3memory/tenant-key", json.dumps(document).encode(), {})
    store.put(rig.writer.layout.key_for(parse_path(FILE)), rig.original.body, rig.original.metadata)
    tool = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    try:
        with pytest.raises(TenantKeyError):
            tool.view(FILE)
    finally:
        tool.close()


def test_rigs_read_their_own_file() -> None:
    """The fuzz targets above start from objects that open (else every outcome is a failure)."""
    for mode in ("tenant", "kms"):
        rig = _rig(mode)
        assert rig.original.metadata["x-amz-w"] == ("02" if mode == "tenant" else "12")
        fresh = rig.open()
        try:
            assert _read_outcome(fresh, FILE) == "ok"
        finally:
            fresh.close()
