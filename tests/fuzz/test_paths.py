"""Fuzzing the path parser: paths come from the model, and for every one the only outcomes
are a canonical path whose key lies inside its tenant's prefix, or a clear error; never
another exception, and never a key outside the tenant's prefix.

``tests/core/test_paths.py`` holds the fixed examples and the first properties (one tenant,
no bucket prefix). This file adds:

- paths built from adversarial pieces (traversal, encodings, look-alike separators and
  dots, controls, bidi and zero-width characters, NFC/NFD/NFKC spellings, long segments,
  non-str inputs), checked against an independent statement of the rules (refused
  exactly when a rule says so, accepted as exactly the NFC spelling; the look-alike rule
  is ``helpers.path_rules``' statement of it, from Unicode's confusables.txt), under random
  tenants, bucket prefixes and path limits;
- pairs of paths: keys are injective, and a directory's prefix covers exactly its
  descendants (``a`` never covers ``ab``);
- ``path_for_key`` on arbitrary keys, including other tenants' and internal keys.

The example budget of every fuzz file is in ``helpers.fuzzing``; ``test_example_budget``
below checks its sums.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from urllib.parse import unquote

import pytest
from helpers.fuzzing import (
    ENVELOPE_EXAMPLES,
    KEY_EXAMPLES,
    PATH_ACCEPTED_LAYOUT_EXAMPLES,
    PATH_AND_USER_ID_EXAMPLES,
    PATH_ANY_INPUT_EXAMPLES,
    PATH_PAIR_EXAMPLES,
    assert_clear_error,
    fuzz,
    parse_or_none,
)
from helpers.path_rules import refused_as_look_alike, shown
from helpers.path_strategies import (
    adversarial_paths,
    any_path_input,
    layout_and_key,
    layouts,
    near_the_key_limit,
    valid_leaning_paths,
)
from hypothesis import event, example, given
from hypothesis import strategies as st

from s3memory import InvalidPathError, MemoryPath, TenantLayout, parse_path

pytestmark = pytest.mark.slow  # heavy hypothesis: 8,300 examples


def test_example_budget() -> None:
    """The fuzz files' budgets add up as ``helpers.fuzzing`` states: 10,300 paths and user
    ids (over 10,000, as SECURITY.md says) and 4,000 envelopes and key documents."""
    assert PATH_AND_USER_ID_EXAMPLES == 10_300
    assert ENVELOPE_EXAMPLES == 4_000


# --- oracles --------------------------------------------------------------------------

# Never allowed in a path (independent of _paths' own list).
FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Cn", "Co", "Zl", "Zp"})


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
        assert_clear_error(error, shown(raw) if isinstance(raw, str) else type(raw).__name__)
        if isinstance(raw, str):
            # Never refused without a reason (the oracle agrees both ways), whatever the spelling.
            assert _must_refuse(raw, 512) is not None, raw
            assert parse_or_none(unicodedata.normalize("NFD", raw)) is None
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
        assert_clear_error(caught.value, "/memories")
        return
    if len(layout.key_for_unchecked(path).encode("utf-8")) > 1024:
        with pytest.raises(InvalidPathError) as caught:
            layout.key_for(path)
        assert_clear_error(caught.value, shown(path.display))
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
        sibling = parse_or_none(f"{path.display}{name}", max_path_bytes)
        if sibling is not None and sibling != path:
            sibling_key = layout.key_for_unchecked(sibling)
            assert not sibling_key.startswith(directory), (sibling_key, directory)
            assert not layout.dir_prefix(sibling).startswith(directory)
        child = parse_or_none(f"{path.display}/{name}", max_path_bytes)
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
        assert_clear_error(error, shown(raw))
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
    a, b = parse_or_none(raw_a), parse_or_none(raw_b)
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
