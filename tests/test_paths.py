"""Layer 1: parse_path, validate_tenant, validate_prefix and TenantLayout (pure, no I/O).

The refusal lists below are the memory tool documentation's MUST (directory traversal,
``..\\``, URL-encoded ``%2e%2e%2f``...) plus our own rules from DESIGN.md (NFC, no control
or invisible characters, no empty / ``.`` / ``..`` segments, bounded bytes). The
hypothesis tests state what *any* accepted path must look like once it becomes a key.

Example budget of the property tests (hypothesis ``max_examples``):
random text 2,000 + "/memories"-prefixed text 1,500 (two paths each) + traversal
alphabet 2,500 + hostile alphabet 2,500 + percent-encoding tokens 1,000 + safe names 600 +
tenants 500 + tenant pairs 500 + prefixes 300 = 11,400 examples.
"""

from __future__ import annotations

import posixpath
import unicodedata
from urllib.parse import unquote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from s3memory import ConfigurationError, InvalidPathError, MemoryPath, TenantLayout, parse_path, validate_tenant
from s3memory._paths import validate_prefix

# Characters that must never appear raw in a key or in an error message shown to the model.
BAD_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})

REFUSED_PATHS: list[object] = [
    "../",
    "/memories/../x",
    "/memories/a/../../x",
    "/memories/..\\x",
    "/memories/a\\b",
    "/memories/%2e%2e%2fsecret",
    "/memories/%2e%2e",
    "/memories/%2E%2E",
    "/memories/%252e%252e%252f",  # double-encoded ../
    "/memories/a%2fb",  # an encoded separator
    "/memories/a%5cb",  # an encoded backslash
    "/memoriesX/a",
    "/memoriesX",
    "memories/a",
    "/etc/passwd",
    "",
    "/",
    "/memories//a",
    "/memories/a//",
    "/memories/./a",
    "/memories/a/.",
    "/memories/..",
    "/memories/a\x00",
    "/memories/a\nb",
    "/memories/a\tb",
    "/memories/a\rb",
    "/memories/a\x7fb",
    "/memories/\u202etxt.exe",  # bidi override
    "/memories/a\u200bb",  # zero-width space
    "/memories/a\u2028b",  # line separator
    "/memories/" + "a" * 256,  # one segment of 256 bytes
    "/memories/" + "é" * 128,  # 128 characters, 256 bytes
    "/memories/" + "/".join(["a" * 100] * 6),  # 605 bytes
    "/memories/a\ud800",  # lone surrogate
    None,
    5,
    b"/memories/a",
    ["/memories/a"],
]

ACCEPTED: list[tuple[str, str]] = [
    # (input, relative path under /memories)
    ("/memories", ""),
    ("/memories/", ""),
    ("/memories/a", "a"),
    ("/memories/a/", "a"),
    ("/memories/a b/c-d_e.txt", "a b/c-d_e.txt"),
    ("/memories/café/日本.md", "café/日本.md"),
    ("/memories/100%25 done", "100%25 done"),  # decodes to "100% done": harmless, kept verbatim
    ("/memories/50%", "50%"),
    ("/memories/.h", ".h"),
    ("/memories/a/.hidden/b", "a/.hidden/b"),
    ("/memories/...", "..."),
    ("/memories/..a", "..a"),
    ("/memories/a..", "a.."),
    ("/memories/" + "a" * 255, "a" * 255),  # the longest segment
    ("/memories/" + "é" * 127 + "a", "é" * 127 + "a"),  # 255 bytes
]


def _assert_clean_refusal(error: BaseException) -> None:
    message = str(error)
    assert message.startswith("Error: "), message
    assert not any(unicodedata.category(ch) in BAD_CATEGORIES for ch in message), repr(message)
    message.encode("utf-8")  # no lone surrogates: the message must survive JSON/UTF-8


def _fully_decoded(segment: str) -> str:
    for _ in range(10):
        step = unquote(segment)
        if step == segment:
            break
        segment = step
    return segment


LAYOUT = TenantLayout("alice")


def _check_accepted(raw: str, path: MemoryPath) -> None:
    """Everything an accepted path must satisfy, whatever the input was."""
    assert isinstance(path, MemoryPath)
    assert path.display == "/memories" or path.display.startswith("/memories/")
    # canonical and stable: parsing the canonical form gives the same path, once or twice.
    assert parse_path(path.display) == path
    assert parse_path(parse_path(path.display).display) == path
    assert parse_path(path.display + "/") == path
    assert unicodedata.is_normalized("NFC", path.relative)
    assert parse_path(unicodedata.normalize("NFC", raw)) == path
    if path.is_root:
        assert LAYOUT.dir_prefix(path) == "alice/memories/"
        with pytest.raises(InvalidPathError):
            LAYOUT.key_for(path)
        return
    key = LAYOUT.key_for(path)
    assert key.startswith("alice/memories/")
    assert key == "alice/memories/" + path.relative
    assert "//" not in key
    assert "\\" not in key
    assert not key.endswith("/")
    assert len(path.relative.encode("utf-8")) <= 512
    for segment in key.split("/"):
        assert segment not in ("", ".", "..")
        assert len(segment.encode("utf-8")) <= 255
        decoded = _fully_decoded(segment)
        assert decoded not in (".", "..")
        assert "/" not in decoded and "\\" not in decoded
    assert not any(unicodedata.category(ch) in BAD_CATEGORIES for ch in key), repr(key)
    # The key resolves to itself inside any directory it is mapped into (LocalDirStore).
    assert posixpath.normpath("/root/" + key) == "/root/" + key
    # Round trip: the listing maps the key back to exactly this path.
    assert LAYOUT.path_for_key(key) == path
    assert LAYOUT.dir_prefix(path) == key + "/"
    # Another tenant's layout never claims the key.
    assert TenantLayout("alice2").path_for_key(key) is None
    assert TenantLayout("ali").path_for_key(key) is None


def _check(raw: object) -> None:
    try:
        path = parse_path(raw)
    except InvalidPathError as error:
        _assert_clean_refusal(error)
        return
    assert isinstance(raw, str)
    _check_accepted(raw, path)


# -- fixed examples -------------------------------------------------------------------


@pytest.mark.parametrize("raw", REFUSED_PATHS, ids=repr)
def test_refused_paths(raw: object) -> None:
    with pytest.raises(InvalidPathError) as caught:
        parse_path(raw)
    _assert_clean_refusal(caught.value)


@pytest.mark.parametrize("raw", [p for p in REFUSED_PATHS if isinstance(p, str) and p.startswith("/memories/")])
def test_refused_with_trailing_slash_too(raw: str) -> None:
    with pytest.raises(InvalidPathError):
        parse_path(raw + "/")


def test_refusal_echoes_control_characters_escaped() -> None:
    with pytest.raises(InvalidPathError) as caught:
        parse_path("/memories/a\x00\n\x1b[31m\u202e")
    message = str(caught.value)
    assert "\\x00" in message and "\\n" in message and "\\x1b" in message and "\\u202e" in message


@pytest.mark.parametrize(("raw", "relative"), ACCEPTED, ids=repr)
def test_accepted_paths(raw: str, relative: str) -> None:
    path = parse_path(raw)
    assert path == MemoryPath(relative)
    assert path.relative == relative
    assert path.display == ("/memories/" + relative if relative else "/memories")
    _check_accepted(raw, path)


def test_path_length_bound_is_in_utf8_bytes() -> None:
    exactly = "/".join(["a" * 200, "a" * 200, "a" * 110])  # 512 bytes
    assert len(exactly.encode()) == 512
    assert parse_path("/memories/" + exactly).relative == exactly
    with pytest.raises(InvalidPathError):
        parse_path("/memories/" + exactly + "b")
    multibyte = "/".join(["é" * 100, "é" * 100, "é" * 55])  # 257 characters, 512 bytes
    assert parse_path("/memories/" + multibyte).relative == multibyte
    with pytest.raises(InvalidPathError):
        parse_path("/memories/" + multibyte + "é")  # 258 characters, 514 bytes
    with pytest.raises(InvalidPathError):
        parse_path("/memories/abcdefghij/abcdefghij", max_path_bytes=20)
    assert parse_path("/memories/" + "é" * 10, max_path_bytes=20).relative == "é" * 10
    with pytest.raises(InvalidPathError):
        parse_path("/memories/" + "é" * 11, max_path_bytes=20)


def test_nfc_normalization() -> None:
    decomposed = parse_path("/memories/cafe\u0301/e\u0301.md")
    assert decomposed.relative == "caf\u00e9/\u00e9.md"
    assert decomposed == parse_path("/memories/café/é.md")
    assert LAYOUT.key_for(decomposed) == "alice/memories/caf\u00e9/\u00e9.md"
    # A key spelled in a non-NFC form is not a key any valid path maps to.
    assert LAYOUT.path_for_key("alice/memories/cafe\u0301") is None


def test_memory_path_helpers() -> None:
    path = parse_path("/memories/a/b/c.txt")
    assert path.parts == ("a", "b", "c.txt")
    assert path.ancestors() == [MemoryPath("a"), MemoryPath("a/b")]
    assert path.is_within(MemoryPath("a"))
    assert path.is_within(MemoryPath(""))
    assert not MemoryPath("ab/c").is_within(MemoryPath("a"))  # siblings sharing a prefix
    assert MemoryPath("").child("x") == MemoryPath("x")
    assert str(path) == "/memories/a/b/c.txt"


@pytest.mark.parametrize(
    "key",
    [
        "alice/memories/",
        "alice/memories/a/",
        "alice/memories/a//b",
        "alice/memories/../x",
        "alice/memories/./x",
        "alice/memories/a\\b",
        "alice/memories/%2e%2e",
        "alice/memories/a\x00",
        "alice/memoriesX/a",
        "alice/.s3memory/tenant-key",
        "alice2/memories/a",
        "alic/memories/a",
        "memories/a",
    ],
)
def test_path_for_key_ignores_keys_no_valid_path_maps_to(key: str) -> None:
    assert LAYOUT.path_for_key(key) is None


def test_root_with_double_slash_refused() -> None:
    with pytest.raises(InvalidPathError):
        parse_path("/memories//")


# -- property tests -------------------------------------------------------------------

# Lots of traversal-ish material: dots, separators, percent escapes of '.', '/', '\\' and
# '%', combining marks, look-alike dots, controls, invisible and bidi characters,
# surrogates, non-ASCII. Repeated characters are drawn more often.
TRAVERSAL_CHARS = [*"..../////\\%%%225eEfFcCa", "é", "\u0301", "日", "\uff0e", "\u2024", "\U0001f600"]
HOSTILE_CHARS = [
    *TRAVERSAL_CHARS,
    *" ~:",
    *"\x00\n\t\r\x1b\x7f\x85",
    *"\u202e\u200b\u200d\ufeff\u2028",
    "\ud800",
]


def _under_memories(alphabet: list[str]) -> st.SearchStrategy[str]:
    return st.builds(
        lambda body, trailing: "/memories/" + body + ("/" if trailing else ""),
        st.text(st.sampled_from(alphabet), max_size=40),
        st.booleans(),
    )


traversal_paths = _under_memories(TRAVERSAL_CHARS)
hostile_paths = _under_memories(HOSTILE_CHARS)

PERCENT_TOKENS = ["%2e", "%2E", "%2f", "%2F", "%5c", "%5C", "%25", "%252e", "%252f", ".", "..", "a", "%", "2e"]
percent_paths = st.builds(
    lambda parts: "/memories/" + "/".join(parts),
    st.lists(st.lists(st.sampled_from(PERCENT_TOKENS), min_size=1, max_size=5).map("".join), min_size=1, max_size=4),
)

SAFE_CHARS = st.characters(categories=["Lu", "Ll", "Lo", "Nd", "Mn"], exclude_characters="/\\%") | st.sampled_from(
    list(" -_.~@+=,;:!()[]")
)
safe_segment = st.text(SAFE_CHARS, min_size=1, max_size=12).filter(
    lambda s: unicodedata.normalize("NFC", s).strip(".") != ""
)

PROPERTY_SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}


@settings(max_examples=2000, **PROPERTY_SETTINGS)
@given(st.text())
def test_property_random_text(raw: str) -> None:
    _check(raw)


@settings(max_examples=1500, **PROPERTY_SETTINGS)
@given(st.text(max_size=40))
def test_property_random_text_under_memories(tail: str) -> None:
    _check("/memories" + tail)
    _check("/memories/" + tail)


def _check_structured(raw: str) -> None:
    _check(raw)
    # Whatever else is decided, these inputs are always refused.
    parts = raw[len("/memories/") :].rstrip("/").split("/")
    if (
        "\\" in raw
        or any(p in (".", "..") for p in parts)
        or any(unicodedata.category(ch) in BAD_CATEGORIES for ch in raw)
    ):
        with pytest.raises(InvalidPathError):
            parse_path(raw)


@settings(max_examples=2500, **PROPERTY_SETTINGS)
@given(traversal_paths)
def test_property_traversal_alphabet(raw: str) -> None:
    _check_structured(raw)


@settings(max_examples=2500, **PROPERTY_SETTINGS)
@given(hostile_paths)
def test_property_hostile_alphabet(raw: str) -> None:
    _check_structured(raw)


@settings(max_examples=1000, **PROPERTY_SETTINGS)
@given(percent_paths)
def test_property_percent_encoding(raw: str) -> None:
    _check(raw)
    decoded_segments = [_fully_decoded(p) for p in raw[len("/memories/") :].split("/")]
    if any(d in (".", "..") or "/" in d or "\\" in d for d in decoded_segments):
        with pytest.raises(InvalidPathError):
            parse_path(raw)


@settings(max_examples=600, **PROPERTY_SETTINGS)
@given(st.lists(safe_segment, min_size=1, max_size=5))
def test_property_safe_names_are_accepted(parts: list[str]) -> None:
    raw = "/memories/" + "/".join(parts)
    path = parse_path(raw)  # must not be refused
    assert path.relative == unicodedata.normalize("NFC", "/".join(parts))
    _check_accepted(raw, path)


# -- tenants --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tenant",
    ["", "/", "a/b", ".", "..", ".hidden", "-a", "a\x00", "a\n", "a ", "é", "a" * 129, None, 5, b"alice"],
    ids=repr,
)
def test_validate_tenant_refuses(tenant: object) -> None:
    with pytest.raises(ConfigurationError) as caught:
        validate_tenant(tenant)
    assert "user_id" in str(caught.value)
    with pytest.raises(ConfigurationError):
        TenantLayout(tenant)  # type: ignore[arg-type]


@pytest.mark.parametrize("tenant", ["alice", "user-1", "a.b@example.com", "A_Z=+", "0", "a" * 128])
def test_validate_tenant_accepts(tenant: str) -> None:
    assert validate_tenant(tenant) == tenant
    layout = TenantLayout(tenant)
    assert layout.tenant_prefix == f"{tenant}/"
    assert layout.memory_prefix == f"{tenant}/memories/"
    assert layout.internal_prefix == f"{tenant}/.s3memory/"
    assert TenantLayout(tenant, "app/").memory_prefix == f"app/{tenant}/memories/"


tenant_ids = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._@+=-]{0,127}", fullmatch=True)


@settings(max_examples=500, **PROPERTY_SETTINGS)
@given(st.one_of(st.text(max_size=140), tenant_ids))
def test_property_tenant_ids(tenant: str) -> None:
    try:
        validate_tenant(tenant)
    except ConfigurationError:
        return
    assert 1 <= len(tenant) <= 128
    assert tenant not in (".", "..")
    assert "/" not in tenant and "\\" not in tenant
    assert tenant.isascii() and tenant.isprintable()
    layout = TenantLayout(tenant)
    assert layout.memory_prefix == f"{tenant}/memories/"
    assert layout.tenant_prefix == f"{tenant}/"


@settings(max_examples=500, **PROPERTY_SETTINGS)
@given(
    tenant_ids, st.one_of(tenant_ids, st.builds(lambda t, s: t + s, tenant_ids, st.sampled_from(["2", "-x", ".", "@"])))
)
def test_property_tenant_prefixes_never_nest(first: str, second: str) -> None:
    try:
        validate_tenant(second)
    except ConfigurationError:
        return  # e.g. over 128 characters after the suffix
    a, b = TenantLayout(first), TenantLayout(second)
    if first == second:
        assert a.memory_prefix == b.memory_prefix
        return
    for x, y in ((a, b), (b, a)):
        for mine in (x.tenant_prefix, x.memory_prefix, x.internal_prefix):
            for theirs in (y.tenant_prefix, y.memory_prefix, y.internal_prefix):
                assert not theirs.startswith(mine), (mine, theirs)
        assert y.path_for_key(x.key_for(MemoryPath("notes.txt"))) is None


# -- the bucket-wide prefix -----------------------------------------------------------


@pytest.mark.parametrize("prefix", ["", "app/", "a/b/", "app.v1/memory-store/", "a" * 255 + "/"])
def test_validate_prefix_accepts(prefix: str) -> None:
    assert validate_prefix(prefix) == prefix
    assert TenantLayout("alice", prefix).memory_prefix == f"{prefix}alice/memories/"


@pytest.mark.parametrize(
    "prefix",
    ["app", "/app/", "a//", "../", "a/../", "./", "a/./", "/", "a\\b/", "a b/", "a\x00/", "a" * 256 + "/", None, 5],
    ids=repr,
)
def test_validate_prefix_refuses(prefix: object) -> None:
    with pytest.raises(ConfigurationError) as caught:
        validate_prefix(prefix)
    assert "prefix" in str(caught.value)
    with pytest.raises(ConfigurationError):
        TenantLayout("alice", prefix)  # type: ignore[arg-type]


@settings(max_examples=300, **PROPERTY_SETTINGS)
@given(st.one_of(st.text(max_size=30), st.lists(tenant_ids, max_size=3).map(lambda s: "".join(p + "/" for p in s))))
def test_property_prefixes(prefix: str) -> None:
    try:
        validate_prefix(prefix)
    except ConfigurationError:
        return
    assert prefix == "" or prefix.endswith("/")
    assert len(prefix) <= 256
    for segment in prefix.split("/")[:-1]:
        assert segment not in ("", ".", "..")
        assert segment.isascii() and segment.isprintable() and "\\" not in segment
    layout = TenantLayout("alice", prefix)
    key = layout.key_for(MemoryPath("x"))
    assert key == f"{prefix}alice/memories/x"
    assert posixpath.normpath("/root/" + key) == "/root/" + key
