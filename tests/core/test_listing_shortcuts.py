"""The listing's shortcuts answer exactly as the slow ways they stand in for.

A directory ``view`` turns every listed key back into a path, and renders the two-level
listing; the faster ways of doing both must never decide otherwise than the plain ones:

- ``is_plain_canonical``: whatever it accepts, ``parse_path`` accepts unchanged (on hostile
  text too: ``..``, NUL, controls, percent-escapes, look-alikes, NFD, over-long names);
- ``path_for_key`` and ``path_reader`` against the parser alone, on arbitrary keys of
  arbitrary layouts (other tenants', internal, non-canonical, near the key limit);
- opening sealed names with the memo of paths against opening each segment from the left
  (an independent AES-SIV opener written from the format in ``_names``), on sealed keys and
  tampered, moved, foreign and deeply nested ones, with the memo cleared often;
- ``directory_view`` against the plain two-level tree it replaced, on random trees in random
  order (hidden names, ``node_modules``, one name both a file and a directory, tiny budgets).

Example budget (hypothesis ``max_examples``): 1,500 + 600 + 300 + 150 + 600 = 3,150.
"""

from __future__ import annotations

import base64
import binascii
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESSIV
from helpers import MASTER_KEY, examples
from helpers.path_strategies import layout_and_key, layouts
from hypothesis import example, given, settings
from hypothesis import strategies as st

import s3memory._crypto.names as names_module
from s3memory import (
    ConfigurationError,
    InMemoryStore,
    InvalidPathError,
    KeyCache,
    MemoryPath,
    TenantLayout,
    open_memory,
    parse_path,
)
from s3memory._paths import MAX_S3_KEY_BYTES, ROOT, is_plain_canonical
from s3memory._render import directory_view, format_size

# --- the fast check of a relative path ------------------------------------------------------

# What the parser refuses or rewrites, mixed with what it accepts.
HOSTILE_PIECES = [
    "a", "b.md", "notes", "x y", "~", "-", "_", "=", ".", "..", "...", ".hidden", "/", "//", "%", "%2e", "%2E%2e",
    "%252e", "%2f", "\\", "\x00", "\t", "\n", "\x7f", "\x1b", "é", "e\u0301", "\u00c5", "A\u030a", "\uff0e",
    "\u2215", "\u200b", "\u202e", "\ufeff", "\u3002", "\ud800", "\U0001f600", "\u0660", "memories", "k" * 255,
]  # fmt: skip
relatives = st.one_of(
    st.lists(st.sampled_from(HOSTILE_PIECES), max_size=8).map("".join),
    st.text(max_size=40),
    st.text("ab./%\\ \x00é", max_size=30),
    st.tuples(st.integers(250, 260), st.integers(0, 3)).map(lambda n: "/".join(["k" * n[0]] * (n[1] + 1))),
)
limits = st.one_of(st.just(MAX_S3_KEY_BYTES - len("alice/memories/")), st.integers(0, 1100))


def _parsed(relative: str, limit: int) -> MemoryPath | None:
    try:
        return parse_path(f"{ROOT}/{relative}", max_path_bytes=limit)
    except InvalidPathError:
        return None


@pytest.mark.slow  # heavy hypothesis
@settings(max_examples=examples(1_500), deadline=None)
@given(relative=relatives, limit=limits)
@example(relative="..", limit=100)
@example(relative="a/./b", limit=100)
@example(relative="a/..", limit=100)
@example(relative="./a", limit=100)
@example(relative="a/", limit=100)
@example(relative="/a", limit=100)
@example(relative="a//b", limit=100)
@example(relative="k" * 256, limit=1000)
@example(relative="k" * 255, limit=254)
@example(relative="a\x00b", limit=100)
@example(relative="%2e%2e", limit=100)
@example(relative="", limit=100)
def test_a_plain_canonical_path_is_one_the_parser_accepts_unchanged(relative: str, limit: int) -> None:
    parsed = _parsed(relative, limit)
    if is_plain_canonical(relative, limit):
        assert parsed == MemoryPath(relative)
    elif relative and parsed is not None and parsed.relative == relative:
        # Left to the parser, which accepts it: only what the shortcut does not look at.
        assert not (relative.isascii() and relative.isprintable()) or "%" in relative or "\\" in relative


# --- keys to paths ----------------------------------------------------------------------------


def reference_path_for_key(layout: TenantLayout, key: str) -> MemoryPath | None:
    """``path_for_key`` with names in clear, by the parser alone (as before the shortcut)."""
    if not key.startswith(layout.memory_prefix) or key == layout.memory_prefix:
        return None
    relative = key[len(layout.memory_prefix) :]
    parsed = _parsed(relative, MAX_S3_KEY_BYTES - len(layout.memory_prefix))
    return parsed if parsed is not None and parsed.relative == relative else None


@pytest.mark.slow  # heavy hypothesis
@settings(max_examples=examples(600), deadline=None)
@given(case=layout_and_key(), more=st.lists(relatives, max_size=5))
def test_path_for_key_is_the_parser_on_any_key(case: tuple[TenantLayout, str], more: list[str]) -> None:
    layout, key = case
    keys = [key, *(layout.memory_prefix + relative for relative in more), *more]
    expected = [reference_path_for_key(layout, k) for k in keys]
    assert [layout.path_for_key(k) for k in keys] == expected
    path_of = layout.path_reader()
    assert [path_of(k) for k in keys] == expected


@pytest.mark.slow  # heavy hypothesis
@given(layout=layouts, other=layouts)
@settings(max_examples=examples(300), deadline=None)
def test_no_key_of_one_tenant_is_a_path_of_another(layout: TenantLayout, other: TenantLayout) -> None:
    for relative in ("a.md", "notes/b.md", ".hidden/c", "x y/z~"):
        key = other.memory_prefix + relative
        if not key.startswith(layout.memory_prefix):
            assert layout.path_for_key(key) is None
        for internal in (other.internal_prefix + relative, other.key_document("tenant-key")):
            if not internal.startswith(layout.memory_prefix):
                assert layout.path_for_key(internal) is None


# --- sealed names -----------------------------------------------------------------------------


def reference_open(key: bytes, tenant: str, sealed: str) -> str | None:
    """Sealed segments opened one by one from the left, from the format ``_names`` documents
    (base64url unpadded of AES-SIV(pad(name), AD = [tenant, parent])), with no memo."""
    siv, parent, opened = AESSIV(key), ROOT, []
    for segment in sealed.split("/"):
        if not 43 <= len(segment) <= 255:
            return None
        try:
            raw = base64.b64decode(segment + "=" * (-len(segment) % 4), altchars=b"-_", validate=True)
        except (binascii.Error, ValueError):
            return None
        if len(raw) % 16 or base64.urlsafe_b64encode(raw).rstrip(b"=").decode() != segment:
            return None
        try:
            padded = siv.decrypt(raw, [tenant.encode(), parent.encode()])
        except (InvalidTag, ValueError):
            return None
        unpadded = padded.rstrip(b"\x00")
        if not unpadded.endswith(b"\x80") or len(padded) != 16 * ((len(unpadded) - 1) // 16 + 1):
            return None
        try:
            name = unpadded[:-1].decode()
        except UnicodeDecodeError:
            return None
        if not name or "/" in name:
            return None
        opened.append(name)
        parent = f"{parent}/{name}"
    return "/".join(opened)


@dataclass
class Sealed:
    """One tenant with encrypted names, another beside it, and the sealed keys of a tree."""

    memory: object
    key: bytes
    keys: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)


TREE = ["a.md", "dir/b.md", "dir/sub/c.md", "dir/sub/deeper/d.md", "other/e.md", "café/日本.md", ".h/x"]


@pytest.fixture(scope="module")
def sealed() -> Sealed:
    store, cache = InMemoryStore(), KeyCache()
    alice = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, encrypt_names=True, key_cache=cache)
    bob = open_memory(user_id="bob", store=store, master_key=MASTER_KEY, encrypt_names=True, key_cache=cache)
    for memory in (alice, bob):
        for path in TREE:
            memory.create(f"/memories/{path}", "x")
    prefix = alice.layout.memory_prefix
    keys = [info.key[len(prefix) :] for info in store.list(prefix)]
    foreign = [info.key[len(bob.layout.memory_prefix) :] for info in store.list(bob.layout.memory_prefix)]
    assert alice.layout.names is not None
    return Sealed(alice, alice.layout.names.names_key(), keys, foreign)  # type: ignore[attr-defined]


def _tampered(draw: st.DrawFn, keys: list[str], foreign: list[str]) -> str:
    base = draw(st.sampled_from(keys + foreign))
    segments = base.split("/")
    how = draw(st.sampled_from(["as-is", "char", "cut", "grow", "swap", "move", "splice", "tiny", "deep", "foreign"]))
    at = draw(st.integers(0, len(segments) - 1))
    if how == "char":
        segment = segments[at]
        i = draw(st.integers(0, len(segment) - 1))
        segments[at] = segment[:i] + draw(st.sampled_from("A-_+=/é\x00. ")) + segment[i + 1 :]
    elif how == "cut":
        segments[at] = segments[at][: draw(st.integers(0, len(segments[at]) - 1))]
    elif how == "grow":
        segments[at] += draw(st.sampled_from(["A", "AA", "AAAA", "=", "=="]))
    elif how == "swap":
        segments.reverse()
    elif how == "move":  # a leaf under another directory's sealed path
        other = draw(st.sampled_from(keys)).split("/")
        segments = [*other[:-1], segments[-1]]
    elif how == "splice":
        segments.insert(at, draw(st.sampled_from(["", ".", "..", segments[at]])))
    elif how == "tiny":
        return "/".join(["a"] * draw(st.integers(1, 3_000)))
    elif how == "deep":
        return "/".join([segments[0]] * draw(st.integers(2, 40)))
    elif how == "foreign":
        segments = draw(st.sampled_from(foreign)).split("/")
    return "/".join(segments)


@pytest.mark.slow  # heavy hypothesis
@settings(max_examples=examples(150), deadline=None)
@given(data=st.data(), memo=st.sampled_from([1, 2, 3, 5, 8192]))
def test_opening_sealed_names_agrees_with_opening_each_segment(sealed: Sealed, data: st.DataObject, memo: int) -> None:
    cipher = sealed.memory.layout.names  # type: ignore[attr-defined]
    drawn = data.draw(
        st.lists(st.one_of(st.sampled_from(sealed.keys), st.composite(_tampered)(sealed.keys, sealed.foreign)))
    )
    saved, names_module._MEMO_ENTRIES = names_module._MEMO_ENTRIES, memo  # a memo cleared often
    try:
        opener = cipher.opener()
        for key in drawn * 2:  # twice: from the memo the second time, or after it was cleared
            expected = reference_open(sealed.key, "alice", key)
            assert cipher.open(key) == expected, key
            assert opener(key) == expected, key
    finally:
        names_module._MEMO_ENTRIES = saved


def test_a_listing_of_sealed_names_maps_every_key_back(sealed: Sealed) -> None:
    layout: TenantLayout = sealed.memory.layout  # type: ignore[attr-defined]
    path_of = layout.path_reader()
    opened = sorted(path.relative for key in sealed.keys if (path := path_of(layout.memory_prefix + key)))
    assert opened == sorted(unicodedata.normalize("NFC", p) for p in TREE)
    # Another tenant's keys, even moved under this tenant's prefix, are no path of it.
    assert [path_of(layout.memory_prefix + key) for key in sealed.foreign] == [None] * len(sealed.foreign)
    # Thousands of segments: refused at the first, without recursing through them.
    assert path_of(layout.memory_prefix + "/".join(["A" * 43] * 5_000)) is None


def test_one_name_in_clear_is_enough_not_to_suspect_encrypted_names() -> None:
    """A plain memory asks whether it should have been opened with encrypted names only
    when every listed name looks sealed (one sealed-looking name among others is a name)."""
    store = InMemoryStore()
    sealed = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, encrypt_names=True, key_cache=KeyCache())
    sealed.create("/memories/a.md", "x")
    plain = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    [info] = [i for i in store.list(plain.layout.memory_prefix)]
    store.put(plain.layout.memory_prefix + "zz-in-clear.md", store.get(info.key).body, {})  # type: ignore[union-attr]
    assert "/memories/zz-in-clear.md" in plain.view("/memories").split("\t")[-1]
    store.delete([plain.layout.memory_prefix + "zz-in-clear.md"])
    with pytest.raises(ConfigurationError):
        plain.view("/memories")


# --- the two-level listing --------------------------------------------------------------------


@dataclass
class _Node:
    size: int = 0
    children: dict[tuple[str, bool], _Node] = field(default_factory=dict)


def reference_directory_view(
    directory: MemoryPath,
    files: Iterable[tuple[MemoryPath, int]],
    max_view_chars: int,
    *,
    shown_as: str | None = None,
    extra_dirs: Iterable[str] = (),
) -> str:
    """The listing as a tree of nodes, every line formatted, then cut: the slow way the
    shortcuts stand in for."""

    def hidden(name: str) -> bool:
        return name.startswith(".") or name == "node_modules"

    root, depth = _Node(), len(directory.parts)
    for path, size in files:
        root.size += size
        names = path.parts[depth:]
        node = root
        for level, name in enumerate(names[:2]):
            node = node.children.setdefault((name, level < len(names) - 1), _Node())
            node.size += size
    for name in extra_dirs:
        root.children.setdefault((name, True), _Node())
    shown = directory.display if shown_as is None else shown_as
    lines = [f"{format_size(root.size)}\t{shown}"]
    for (name, is_dir), node in sorted(root.children.items()):
        if hidden(name):
            continue
        lines.append(f"{format_size(node.size)}\t{shown}/{name}{'/' if is_dir else ''}")
        for (child, child_is_dir), grandchild in sorted(node.children.items()):
            if not hidden(child):
                lines.append(f"{format_size(grandchild.size)}\t{shown}/{name}/{child}{'/' if child_is_dir else ''}")
    header = (
        f"Here're the files and directories up to 2 levels deep in {shown}, excluding hidden items and node_modules:"
    )
    budget, kept, used = max_view_chars - len(header) - 200, 0, 0
    while kept < len(lines) and used + len(lines[kept]) + 1 <= budget:
        used += len(lines[kept]) + 1
        kept += 1
    if kept < len(lines):
        lines = [
            *lines[:kept],
            f"[Listing truncated: {len(lines) - kept} more entries. View a subdirectory to see them.]",
        ]
    return header + "\n" + "\n".join(lines)


NAMES = ["a", "b", "a.md", ".h", "node_modules", "é", "x y", "Z", "a-b", "a0"]
trees = st.lists(
    st.tuples(st.lists(st.sampled_from(NAMES), min_size=0, max_size=5).map("/".join), st.integers(0, 5_000)),
    max_size=60,
)


@pytest.mark.slow  # heavy hypothesis
@settings(max_examples=examples(600), deadline=None)
@given(
    files=trees,
    where=st.lists(st.sampled_from(NAMES[:3]), max_size=2).map("/".join),
    budget=st.sampled_from([0, 150, 300, 400, 600, 1_000, 16_000]),
    extra=st.lists(st.sampled_from(NAMES), max_size=3),
    shown_as=st.sampled_from([None, "/memories/team"]),
    ordered=st.booleans(),
)
def test_the_listing_is_the_two_level_tree(
    files: list[tuple[str, int]], where: str, budget: int, extra: list[str], shown_as: str | None, ordered: bool
) -> None:
    listed = [(MemoryPath(relative), size) for relative, size in (sorted(files) if ordered else files)]
    directory = MemoryPath(where)
    expected = reference_directory_view(directory, listed, budget, shown_as=shown_as, extra_dirs=extra)
    assert directory_view(directory, listed, budget, shown_as=shown_as, extra_dirs=extra) == expected


@pytest.mark.slow  # thousands of keys
@pytest.mark.parametrize("budget", [16_000, 2_000, 400])
def test_a_long_listing_is_cut_as_the_tree_is(budget: int) -> None:
    flat = [(MemoryPath(f"big/note-{i:05d}.md"), i) for i in range(5_000)]
    deep = [(MemoryPath(f"d{i % 7}/s{i % 13}/f{i}.md"), i) for i in range(3_000)]
    mixed = [*flat, *deep, *[(MemoryPath(f"top-{i}.md"), i) for i in range(300)]]
    for files in (flat, deep, mixed, mixed[::-1]):
        for directory in (MemoryPath(""), MemoryPath("big"), MemoryPath("d1")):
            expected = reference_directory_view(directory, files, budget)
            assert directory_view(directory, files, budget) == expected
