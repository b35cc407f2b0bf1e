"""Layer 1: parse_path, validate_tenant, validate_prefix and TenantLayout (pure, no I/O).

The refusal lists below are the memory tool documentation's MUST (directory traversal,
``..\\``, URL-encoded ``%2e%2e%2f``...) plus our own rules from DESIGN.md (NFC, no control
or invisible characters, no empty / ``.`` / ``..`` segments, bounded bytes) and these: no
look-alikes of ``/``, ``\\`` and ``.`` (checked against an extract of Unicode's confusables.txt
below), refusals in the SDK reference's words, and no tenant or prefix that puts one
deployment inside another's namespace. The hypothesis tests state what *any* accepted path
must look like once it becomes a key.

Example budget of the property tests (hypothesis ``max_examples``):
random text 2,000 + "/memories"-prefixed text 1,500 (two paths each) + traversal
alphabet 2,500 + hostile alphabet 2,500 + percent-encoding tokens 1,000 + safe names 600 +
look-alike names 800 + tenants 500 + tenant pairs 500 + prefixes 300 + two deployments
1,500 = 13,700 examples.
"""

from __future__ import annotations

import posixpath
import unicodedata
from urllib.parse import quote, unquote

import pytest
from helpers import examples
from helpers.path_rules import (
    BAD_CATEGORIES,
    CONFUSABLES,
    PERCENT_SIGNS,
    REFUSED_PATHS,
    displays_as_dot_segment,
    nfkc_adds_structure,
    refused_as_look_alike,
)
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from s3memory import ConfigurationError, InvalidPathError, MemoryPath, TenantLayout, parse_path, validate_tenant
from s3memory._paths import _LOOKALIKES_ANYWHERE, _LOOKALIKES_IN_DOT_SEGMENTS, validate_prefix

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
    # Letters and digits that confusables.txt lists as look-alikes are ordinary text in
    # their scripts: accepted inside a name (only "." and ".." spelled with them are refused).
    ("/memories/\u30ce\u30fc\u30c8.md", "\u30ce\u30fc\u30c8.md"),  # "note" in katakana
    ("/memories/\u4f1a\u8b70\u3002\u30e1\u30e2.md", "\u4f1a\u8b70\u3002\u30e1\u30e2.md"),  # ideographic full stop
    ("/memories/\u0662\u0660\u0662\u0664", "\u0662\u0660\u0662\u0664"),  # 2024 in Arabic-Indic digits
    ("/memories/a\u0338b", "a\u0338b"),  # a combining overlay marks a letter, it separates nothing
]


# Where the documentation is silent, the reference's words
# (``anthropic.tools.memory.BetaLocalFilesystemMemoryTool._validate_path``, no "Error: "),
# then which rule was broken. Everything else: "Error: ...".
OUTSIDE = "Path must start with /memories, got: {} (a path is /memories or starts with /memories/)"
ESCAPES = "Path {} would escape /memories directory: '..' segments (directory traversal) are not allowed"


def _assert_clean_refusal(error: BaseException) -> None:
    message = str(error)
    assert message.startswith(("Error: ", "Path must start with /memories, got: ", "Path ")), message
    if message.startswith("Path ") and not message.startswith("Path must start"):
        assert " would escape /memories directory: '..' segments (directory traversal)" in message, message
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


def test_refusal_echoes_a_printable_path_as_given() -> None:
    # As the reference does (f"...{path}"): no quotes, no escapes, non-ASCII kept.
    with pytest.raises(InvalidPathError) as caught:
        parse_path("/memories/caf\u00e9//x")
    assert str(caught.value) == "Error: Invalid path /memories/caf\u00e9//x: empty path segments ('//') are not allowed"
    # Anything unprintable (a control, a bidi override, a no-break space): the whole path as repr().
    for raw in ("/memories/a\x1b]0;x\x07", "/memories/\u202etxt.md", "/etc/\u00a0x", "/memories/../\x00"):
        with pytest.raises(InvalidPathError) as caught:
            parse_path(raw)
        assert repr(raw) in str(caught.value)
        _assert_clean_refusal(caught.value)


# -- refusals in the reference's words -------------------------------------------------


@pytest.mark.parametrize(
    "raw", ["/etc/passwd", "../", "", "/", "memories/a", "/memoriesX", "/memoriesX/a", "/Memories/a"]
)
def test_outside_memories_refused_in_the_reference_words(raw: str) -> None:
    with pytest.raises(InvalidPathError) as caught:
        parse_path(raw)
    assert str(caught.value) == OUTSIDE.format(raw)


@pytest.mark.parametrize(
    ("raw", "detail"),
    [
        ("/memories/..", ""),
        ("/memories/../x", ""),
        ("/memories/a/../../x", ""),
        ("/memories/a/..", ""),  # stays inside, but '..' is refused in every position
        ("/memories/..\\x", ", also between backslashes"),
        ("/memories/a\\..\\b", ", also between backslashes"),
        ("/memories/%2e%2e", ", percent-encoded or not"),
        ("/memories/%2e%2e%2fsecret", ", percent-encoded or not"),
        ("/memories/%252e%252e%252f", ", percent-encoded or not"),
        ("/memories/\uff0e\uff0e/x", ", nor look-alikes of '.', '/' and '\\' that spell them"),
        ("/memories/\u2025", ", nor look-alikes of '.', '/' and '\\' that spell them"),
        ("/memories/a\u2215..\u2215b", ", nor look-alikes of '.', '/' and '\\' that spell them"),
        ("/memories/\u3002\u3002", ", nor look-alikes of '.', '/' and '\\' that spell them"),
        ("/memories/\u0660\u0660", ", nor look-alikes of '.', '/' and '\\' that spell them"),
    ],
)
def test_traversal_refused_in_the_reference_words(raw: str, detail: str) -> None:
    with pytest.raises(InvalidPathError) as caught:
        parse_path(raw)
    assert str(caught.value) == ESCAPES.format(raw) + detail


def test_other_refusals_keep_their_own_words() -> None:
    for raw, why in [
        ("/memories/./a", "'.' segments are not allowed"),
        ("/memories/%2e", "'.' segments are not allowed, percent-encoded or not"),
        ("/memories/a\\b", "backslashes and encoded separators are not allowed"),
        ("/memories/a%2fb", "backslashes and encoded separators are not allowed"),
    ]:
        with pytest.raises(InvalidPathError) as caught:
            parse_path(raw)
        assert str(caught.value) == f"Error: Invalid path {raw}: {why}"


def test_every_confusable_of_a_separator_or_dot_is_handled() -> None:
    listed = {char for char, _ in CONFUSABLES}
    for char, target in CONFUSABLES:
        if char in PERCENT_SIGNS:
            assert char not in _LOOKALIKES_ANYWHERE and char not in _LOOKALIKES_IN_DOT_SEGMENTS
        elif nfkc_adds_structure(char):
            # Covered by the NFKC rule: refused anywhere.
            with pytest.raises(InvalidPathError, match="look-alikes"):
                parse_path(f"/memories/a{char}b")
        elif unicodedata.category(char)[0] in "LN":
            # A letter or digit: ordinary text in its script, refused only where it spells "." or "..".
            assert _LOOKALIKES_IN_DOT_SEGMENTS[char] == target
            assert parse_path(f"/memories/a{char}b").relative == f"a{char}b"
        else:
            # Symbols and punctuation: refused anywhere in a name.
            assert _LOOKALIKES_ANYWHERE[char] == target
            with pytest.raises(InvalidPathError) as caught:
                parse_path(f"/memories/a{char}b")
            assert str(caught.value) == (
                f"Error: Invalid path /memories/a{char}b: U+{ord(char):04X} {unicodedata.name(char)} "
                f"looks like '{target}'; look-alikes of '/', '\\' and '.' are not allowed"
            )
    # The tables hold nothing else, but the ideographic full stop (IDNA's other ".").
    assert set(_LOOKALIKES_ANYWHERE) | set(_LOOKALIKES_IN_DOT_SEGMENTS) == (
        listed - PERCENT_SIGNS - {c for c in listed if nfkc_adds_structure(c)}
    ) | {"\u3002"}


def test_every_character_whose_nfkc_form_adds_a_separator_or_dot_is_refused() -> None:
    found = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF and nfkc_adds_structure(chr(cp))]
    assert {"\uff0f", "\uff0e", "\uff3c", "\ufe68", "\ufe52", "\u2024", "\u2025", "\u2026", "\u2105"} <= set(found)
    for char in found:
        with pytest.raises(InvalidPathError):
            parse_path(f"/memories/a{char}b")
        with pytest.raises(InvalidPathError):
            parse_path("/memories/" + quote(f"a{char}b", safe=""))  # percent-encoded


@pytest.mark.parametrize(
    "raw",
    [
        "/memories/projects\u2215plan.md",  # DIVISION SLASH: shows as projects/plan.md
        "/memories/projects\uff0fplan.md",  # FULLWIDTH SOLIDUS
        "/memories/projects\u2044plan.md",  # FRACTION SLASH
        "/memories/projects\u29f8plan.md",  # BIG SOLIDUS
        "/memories/projects\u1735plan.md",  # PHILIPPINE SINGLE PUNCTUATION
        "/memories/projects\u2f03plan.md",  # KANGXI RADICAL SLASH
        "/memories/a\uff3cb",  # FULLWIDTH REVERSE SOLIDUS
        "/memories/a\u2216b",  # SET MINUS
        "/memories/a\u29f5b",  # REVERSE SOLIDUS OPERATOR
        "/memories/a\ufe68b",  # SMALL REVERSE SOLIDUS
        "/memories/notes\uff0emd",  # FULLWIDTH FULL STOP: shows as notes.md, another file
        "/memories/notes\u2024md",  # ONE DOT LEADER
        "/memories/notes\ufe52md",  # SMALL FULL STOP
        "/memories/\uff0eenv",  # shows as a hidden name, and is not one
        "/memories/a\u2026",  # HORIZONTAL ELLIPSIS: write "..." instead
        "/memories/\u2488txt",  # DIGIT ONE FULL STOP: shows as 1.txt
        "/memories/\u3002",  # IDEOGRAPHIC FULL STOP alone: a "." segment under IDNA's mapping
        "/memories/\uff61",  # HALFWIDTH IDEOGRAPHIC FULL STOP
        "/memories/\u0660",  # ARABIC-INDIC DIGIT ZERO alone: shows as "."
        "/memories/..\u30cex",  # "..", then KATAKANA LETTER NO: shows as ../x
        "/memories/%E2%88%95",  # DIVISION SLASH, percent-encoded
        "/memories/%EF%BC%8E%EF%BC%8E",  # two FULLWIDTH FULL STOPs, percent-encoded
    ],
)
def test_look_alikes_of_separators_and_dots_are_refused(raw: str) -> None:
    with pytest.raises(InvalidPathError) as caught:
        parse_path(raw)
    _assert_clean_refusal(caught.value)
    # Nor does a key holding one (written before this rule) show as a file.
    relative = raw[len("/memories/") :]
    assert LAYOUT.path_for_key("alice/memories/" + relative) is None


def test_look_alike_refusal_names_the_character() -> None:
    with pytest.raises(InvalidPathError) as caught:
        parse_path("/memories/projects\u2215plan.md")
    assert str(caught.value) == (
        "Error: Invalid path /memories/projects\u2215plan.md: U+2215 DIVISION SLASH looks like '/'; "
        "look-alikes of '/', '\\' and '.' are not allowed"
    )


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
    lambda s: unicodedata.normalize("NFC", s).strip(".") != "" and not displays_as_dot_segment(s)
)

PROPERTY_SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}


@pytest.mark.slow  # heavy hypothesis
@settings(max_examples=examples(2000), **PROPERTY_SETTINGS)
@given(st.text())
def test_property_random_text(raw: str) -> None:
    _check(raw)


@settings(max_examples=examples(1500), **PROPERTY_SETTINGS)
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


@pytest.mark.slow  # heavy hypothesis
@settings(max_examples=examples(2500), **PROPERTY_SETTINGS)
@given(traversal_paths)
def test_property_traversal_alphabet(raw: str) -> None:
    _check_structured(raw)


@pytest.mark.slow  # heavy hypothesis
@settings(max_examples=examples(2500), **PROPERTY_SETTINGS)
@given(hostile_paths)
def test_property_hostile_alphabet(raw: str) -> None:
    _check_structured(raw)


@pytest.mark.slow  # heavy hypothesis
@settings(max_examples=examples(1000), **PROPERTY_SETTINGS)
@given(percent_paths)
def test_property_percent_encoding(raw: str) -> None:
    _check(raw)
    decoded_segments = [_fully_decoded(p) for p in raw[len("/memories/") :].split("/")]
    if any(d in (".", "..") or "/" in d or "\\" in d for d in decoded_segments):
        with pytest.raises(InvalidPathError):
            parse_path(raw)


@pytest.mark.slow  # heavy hypothesis
@settings(max_examples=examples(600), **PROPERTY_SETTINGS)
@given(st.lists(safe_segment, min_size=1, max_size=5))
def test_property_safe_names_are_accepted(parts: list[str]) -> None:
    raw = "/memories/" + "/".join(parts)
    path = parse_path(raw)  # must not be refused
    assert path.relative == unicodedata.normalize("NFC", "/".join(parts))
    _check_accepted(raw, path)


# Names from safe characters, dots, and every confusable of "/", "\\" and ".".
LOOKALIKE_NAME_CHARS = st.one_of(
    st.sampled_from(["\u3002", "\uff61", "\uff0e", "\u2215", *(char for char, _ in CONFUSABLES if char != "%")]),
    st.sampled_from([*"..ab-_ ", "\u00e9", "\u65e5"]),
    SAFE_CHARS,
)


@pytest.mark.slow  # heavy hypothesis
@settings(max_examples=examples(800), **PROPERTY_SETTINGS)
@given(st.lists(st.lists(LOOKALIKE_NAME_CHARS, min_size=1, max_size=8).map("".join), min_size=1, max_size=3))
def test_property_look_alike_names(parts: list[str]) -> None:
    nfc = [unicodedata.normalize("NFC", part) for part in parts]
    if any(part.strip(".") == "" for part in nfc):
        return  # ".", ".." and "...": the ASCII rules, tested above
    raw = "/memories/" + "/".join(parts)
    refused = any(refused_as_look_alike(part) for part in nfc)
    try:
        path = parse_path(raw)
    except InvalidPathError as error:
        assert refused, (raw, str(error))
        _assert_clean_refusal(error)
        event("refused")
        return
    assert not refused, raw
    event("accepted")
    _check_accepted(raw, path)


# -- tenants --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tenant",
    [
        *["", "/", "a/b", ".", "..", ".hidden", "-a", "a\x00", "a\n", "a ", "é", "a" * 129, None, 5, b"alice"],
        *["memories", "Memories", "MEMORIES"],  # reserved
    ],
    ids=repr,
)
def test_validate_tenant_refuses(tenant: object) -> None:
    with pytest.raises(ConfigurationError) as caught:
        validate_tenant(tenant)
    assert "user_id" in str(caught.value)
    with pytest.raises(ConfigurationError):
        TenantLayout(tenant)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "tenant", ["alice", "user-1", "a.b@example.com", "A_Z=+", "0", "a" * 128, "memories2", "my-memories", "memory"]
)
def test_validate_tenant_accepts(tenant: str) -> None:
    assert validate_tenant(tenant) == tenant
    layout = TenantLayout(tenant)
    assert layout.tenant_prefix == f"{tenant}/"
    assert layout.memory_prefix == f"{tenant}/memories/"
    assert layout.internal_prefix == f"{tenant}/.s3memory/"
    assert TenantLayout(tenant, "app/").memory_prefix == f"app/{tenant}/memories/"


tenant_ids = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._@+=-]{0,127}", fullmatch=True)


@settings(max_examples=examples(500), **PROPERTY_SETTINGS)
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


@settings(max_examples=examples(500), **PROPERTY_SETTINGS)
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


@pytest.mark.parametrize(
    "prefix", ["", "app/", "a/b/", "app.v1/memory-store/", "a" * 255 + "/", "memories/", "memories/app/", "app/memory/"]
)
def test_validate_prefix_accepts(prefix: str) -> None:
    assert validate_prefix(prefix) == prefix
    assert TenantLayout("alice", prefix).memory_prefix == f"{prefix}alice/memories/"


@pytest.mark.parametrize(
    "prefix",
    [
        *[
            "app",
            "/app/",
            "a//",
            "../",
            "a/../",
            "./",
            "a/./",
            "/",
            "a\\b/",
            "a b/",
            "a\x00/",
            "a" * 256 + "/",
            None,
            5,
        ],
        *["app/memories/", "a/b/Memories/", "memories/memories/", "app/MEMORIES/x/"],  # a reserved segment
    ],
    ids=repr,
)
def test_validate_prefix_refuses(prefix: object) -> None:
    with pytest.raises(ConfigurationError) as caught:
        validate_prefix(prefix)
    assert "prefix" in str(caught.value)
    with pytest.raises(ConfigurationError):
        TenantLayout("alice", prefix)  # type: ignore[arg-type]


@settings(max_examples=examples(300), **PROPERTY_SETTINGS)
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


# -- deployments sharing a bucket -----------------------------------------------------


def test_reserved_tenant_and_prefix_segment_are_refused_clearly() -> None:
    with pytest.raises(ConfigurationError) as caught:
        validate_tenant("memories")
    assert str(caught.value) == (
        "user_id 'memories' is reserved: under a prefix such as 'app/', its objects would lie inside the "
        "memory files of user 'app' of a deployment with no prefix; choose another user_id"
    )
    with pytest.raises(ConfigurationError) as caught:
        validate_prefix("team/app/memories/")
    assert str(caught.value) == (
        "prefix 'team/app/memories/' is not allowed: its segment 'memories' would put this deployment inside "
        "the memory files of user 'app' of a deployment with prefix 'team/'; a segment named 'memories' "
        "(in any case) may only come first"
    )


def test_why_memories_is_reserved() -> None:
    # Without the rule, these two deployments would overlap: tenant "app" with no prefix
    # owns "app/memories/...", where prefix "app/" would keep tenant "memories", and where
    # prefix "app/memories/" would keep every tenant.
    app = TenantLayout("app")
    assert "app/" + "memories/" + "memories/" + "notes.md" == app.key_for(MemoryPath("memories/notes.md"))
    assert ("app/memories/" + "alice/memories/x").startswith(app.memory_prefix)
    with pytest.raises(ConfigurationError):
        TenantLayout("memories", "app/")
    with pytest.raises(ConfigurationError):
        TenantLayout("alice", "app/memories/")
    # A first segment "memories" is fine: no tenant comes before it.
    first = TenantLayout("alice", "memories/")
    assert not first.memory_prefix.startswith(TenantLayout("memories2").memory_prefix)


DEPLOYMENT_SEGMENTS = ["app", "memories", "Memories", "alice", "a", "x", "s3memory", "app2", "memories2"]
deployment_segments = st.one_of(st.sampled_from(DEPLOYMENT_SEGMENTS), tenant_ids.filter(lambda t: len(t) <= 20))
deployment_prefixes = st.lists(deployment_segments, max_size=3).map(lambda parts: "".join(p + "/" for p in parts))
deployment_path_segments = st.sampled_from(["memories", ".s3memory", "app", "alice", "notes.md", "a", "x.md"])
INTERNAL_NAMES = ["tenant-key", "names-key", "access/0123abcd", "intents/rename-0123", "rotation/next-key", ""]


@st.composite
def two_deployments(draw: st.DrawFn) -> tuple[tuple[str, str], tuple[str, str]]:
    """(prefix, tenant) twice, the second often built on the first so that they nest."""
    prefix, tenant = draw(deployment_prefixes), draw(deployment_segments)
    parts = [*prefix.split("/")[:-1], tenant]
    cut = draw(st.integers(0, len(parts) - 1))
    other = draw(
        st.sampled_from(
            [
                (draw(deployment_prefixes), draw(deployment_segments)),  # independent
                ("".join(p + "/" for p in parts[:cut]), parts[cut]),  # a shorter prefix, same keys
                (prefix + tenant + "/", draw(deployment_segments)),  # built on the first tenant
                (prefix + tenant + "/memories/", draw(deployment_segments)),
                (prefix, draw(deployment_segments)),  # same prefix, another tenant
                (draw(deployment_prefixes), tenant),  # same tenant, another prefix
            ]
        )
    )
    return (prefix, tenant), other


def _keys_of(layout: TenantLayout, paths: list[MemoryPath]) -> list[str]:
    keys = [layout.memory_prefix, layout.internal_prefix]
    keys += [layout.internal_prefix + name for name in INTERNAL_NAMES]
    keys += [layout.key_for(path) for path in paths] + [layout.dir_prefix(path) for path in paths]
    return keys


@pytest.mark.slow  # heavy hypothesis
@settings(max_examples=examples(1500), **PROPERTY_SETTINGS)
@given(two_deployments(), st.lists(st.lists(deployment_path_segments, min_size=1, max_size=4), max_size=3))
def test_property_two_deployments_never_overlap(
    pairs: tuple[tuple[str, str], tuple[str, str]], raw_paths: list[list[str]]
) -> None:
    """TenantLayout's invariant: for two different (prefix, tenant) pairs, accepted by the
    validators, no key of one starts with the other's memory or internal prefix."""
    layouts = []
    for prefix, tenant in pairs:
        try:
            layouts.append(TenantLayout(tenant, prefix))
        except ConfigurationError:
            # Refused, and only for the reserved name or a tenant id's "@", which no prefix may hold.
            reserved = [tenant, *prefix.split("/")[1:-1]]  # the tenant, and prefix segments after the first
            assert "memories" in (s.lower() for s in reserved) or "@" in prefix, (prefix, tenant)
            event("a deployment refused")
            return
    a, b = layouts
    if (a.prefix, a.tenant) == (b.prefix, b.tenant):
        event("the same deployment")
        return
    event(
        "nested prefixes" if a.memory_prefix.startswith(b.prefix) or b.memory_prefix.startswith(a.prefix) else "apart"
    )
    paths = [MemoryPath("/".join(parts)) for parts in raw_paths]
    for x, y in ((a, b), (b, a)):
        for key in _keys_of(x, paths):
            assert not key.startswith(y.memory_prefix), (key, y.memory_prefix)
            assert not key.startswith(y.internal_prefix), (key, y.internal_prefix)
            assert y.path_for_key(key) is None
