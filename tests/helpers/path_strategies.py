"""Hypothesis strategies for the path fuzzers: tenant ids, bucket prefixes and layouts; paths
from safe, hostile and long pieces in every Unicode form; keys near a layout's prefixes."""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable

from hypothesis import strategies as st

from s3memory import MemoryPath, TenantLayout

# --- strategies: layouts --------------------------------------------------------------

ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
TENANT_CHARS = ALNUM + "._@+=-"
PREFIX_CHARS = ALNUM + "._=+-"

tenant_ids = st.one_of(
    st.sampled_from(["alice", "alice2", "ali", "a", "A", "bob", "0", "memories", "s3memory", "a" * 128]),
    st.builds(lambda first, rest: first + rest, st.sampled_from(ALNUM), st.text(TENANT_CHARS, max_size=20)),
    st.builds(lambda first, rest: first + rest, st.sampled_from(ALNUM), st.text(TENANT_CHARS, max_size=127)),
)
prefix_segments = st.builds(
    lambda first, rest: first + rest, st.sampled_from(ALNUM), st.text(PREFIX_CHARS, max_size=30)
)
prefixes = st.one_of(
    st.just(""),
    st.lists(prefix_segments, min_size=1, max_size=4).map(lambda parts: "".join(p + "/" for p in parts)),
    st.sampled_from(["app/", "memories/", "memories/app/", "alice/", "a" * 255 + "/", "/".join(["x" * 62] * 4) + "/"]),
).filter(lambda p: len(p) <= 256 and "memories" not in (part.lower() for part in p.split("/")[1:-1]))


# "memories" (in any case) is reserved as a tenant id and as a prefix segment after the
# first (validate_tenant, validate_prefix).
layouts = st.builds(TenantLayout, tenant_ids.filter(lambda t: t.lower() != "memories"), prefixes)

# --- strategies: paths ----------------------------------------------------------------

ROOTS = [
    "/memories/",
    "/memories",
    "",
    "/",
    "memories/",
    "/memories//",
    "/memoriesX/",
    "/Memories/",
    "/MEMORIES/",
    "/memories\\",
    "\\memories\\",
    "\uff0fmemories\uff0f",
    "/memories\uff0f",
    "/memories%2f",
    "/memories%2F",
    "//memories/",
    " /memories/",
    "/memories /",
    "/memories/./",
    "/memories/../",
    "/memories/%2e%2e/",
    "/memories\u200b/",
    "/memorie\u0301s/",
    "../memories/",
    "/memories\x00/",
]
SAFE_TOKENS = [
    "a",
    "b",
    "ab",
    "notes",
    "x.md",
    "-",
    "_",
    " ",
    "~",
    "@",
    "...",
    ".h",
    "a..",
    "..a",
    "50%",
    "%",
    "%41",
    "%zz",
    "%%",
    "100%25",
    "\u00e9",  # e-acute, precomposed (NFC)
    "e\u0301",  # e + combining acute (NFD)
    "\u0301",  # a lone combining mark
    "\u0338",  # combining long solidus overlay
    "\u00c5",  # A-ring
    "\u212b",  # ANGSTROM SIGN: NFC turns it into A-ring
    "A\u030a",  # A + combining ring: NFC makes A-ring
    "\u1e9b\u0323",  # composes differently under NFC and NFKC
    "\ufb01",  # fi ligature (changes only under NFKC)
    "\u00df",
    "\u0130",
    "\u65e5\u672c",
    "\U0001f600",
    "\U0001f469\u200d\U0001f4bb",  # an emoji ZWJ sequence (ZWJ is Cf: refused)
    "\u30ce",  # KATAKANA LETTER NO: a look-alike of "/", but a letter (refused only next to dots)
    "\u3002",  # IDEOGRAPHIC FULL STOP: likewise for "."
    "\u0660",  # ARABIC-INDIC DIGIT ZERO: likewise
    "\u0627\u0644",  # Arabic letters
    "\u05d0",  # Hebrew alef
    "\u3000",  # ideographic space (Zs)
    "\u00a0",  # no-break space (Zs)
]
HOSTILE_TOKENS = [
    "..",
    ".",
    "%2e",
    "%2E",
    "%2e%2e",
    "%2E%2e",
    ".%2e",
    "%2f",
    "%2F",
    "%5c",
    "%5C",
    "%25",
    "%252e%252e",
    "%252f",
    "%25252e%25252e",
    "%00",
    "%0a",
    "%e2%80%ae",  # an encoded RLO
    "%c0%ae",  # overlong UTF-8 for '.'
    "\\",
    "\x00",
    "\x01",
    "\x1b",
    "\x1f",
    "\x7f",
    "\x85",
    "\x9f",
    "\t",
    "\n",
    "\r",
    "\u200b",  # ZERO WIDTH SPACE
    "\u200c",
    "\u200d",
    "\u200e",  # LEFT-TO-RIGHT MARK
    "\u200f",  # RIGHT-TO-LEFT MARK
    "\u202a",
    "\u202e",  # RIGHT-TO-LEFT OVERRIDE
    "\u2066",
    "\u2069",
    "\u061c",  # ARABIC LETTER MARK
    "\u2060",  # WORD JOINER
    "\ufeff",  # BOM
    "\u00ad",  # SOFT HYPHEN
    "\u2028",
    "\u2029",
    "\ud800",
    "\udfff",
    "\U000e0041",  # a tag character
    "\ue000",  # private use
    "\U000f0000",  # private use, plane 15
    "\u0378",  # unassigned
    "\ufffe",
    "\uffff",
    # look-alikes of "/", "\\" and "."
    "\uff0e",  # FULLWIDTH FULL STOP
    "\uff0e\uff0e",
    "\uff0f",  # FULLWIDTH SOLIDUS
    "\uff3c",  # FULLWIDTH REVERSE SOLIDUS
    "\ufe68",  # SMALL REVERSE SOLIDUS
    "\u2215",  # DIVISION SLASH
    "\u2216",  # SET MINUS
    "\u2044",  # FRACTION SLASH
    "\u29f8",  # BIG SOLIDUS
    "\u2f03",  # KANGXI RADICAL SLASH
    "\u2024",  # ONE DOT LEADER
    "\u2025",  # TWO DOT LEADER
    "\u2026",  # HORIZONTAL ELLIPSIS
    "\ufe52",  # SMALL FULL STOP
    "\u2488",  # DIGIT ONE FULL STOP
    "\u3002\u3002",  # two IDEOGRAPHIC FULL STOPs: ".." under IDNA's mapping
    "\uff61",  # HALFWIDTH IDEOGRAPHIC FULL STOP
    "\u0660\u0660",
    "%ef%bc%8e",  # FULLWIDTH FULL STOP, percent-encoded
    "%e2%88%95",  # DIVISION SLASH, percent-encoded
]
SEPARATORS = ["/", "/", "/", "//", "\\", "%2f", "\uff0f", "/./", "/../"]
TRAILERS = ["", "", "/", "//", "\\", "/.", "\uff0f"]
FORMS: dict[str, Callable[[str], str]] = {
    "as-is": lambda s: s,
    "NFC": functools.partial(unicodedata.normalize, "NFC"),
    "NFD": functools.partial(unicodedata.normalize, "NFD"),
    "NFKC": functools.partial(unicodedata.normalize, "NFKC"),
    "NFKD": functools.partial(unicodedata.normalize, "NFKD"),
}

# Precomputed long pieces around the 255-byte segment limit (ASCII, 2-, 3- and 4-byte UTF-8).
LONG_TOKENS = [
    ch * n
    for ch, sizes in [
        ("a", (100, 255, 256)),
        ("\u00e9", (127, 128)),
        ("\u65e5", (85, 86)),
        ("\U0001f600", (63, 64)),
        (".", (3, 100)),
        ("%2e", (2, 40)),
    ]
    for n in sizes
]
# Flat pools (one draw per token is what keeps thousands of examples fast); safe pieces
# are listed twice so that a good share of the adversarial paths is accepted.
ANY_TOKENS = [*SAFE_TOKENS, *SAFE_TOKENS, *ALNUM[:26], *HOSTILE_TOKENS, *LONG_TOKENS]
VALID_LEANING_TOKENS = [*SAFE_TOKENS, *SAFE_TOKENS, *ALNUM, *HOSTILE_TOKENS[:6], *LONG_TOKENS[:2]]
any_segment = st.lists(st.sampled_from(ANY_TOKENS), max_size=4).map("".join)
valid_leaning_segment = st.lists(st.sampled_from(VALID_LEANING_TOKENS), min_size=1, max_size=3).map("".join)
FORM_NAMES = sorted(FORMS)


@st.composite
def adversarial_paths(draw: st.DrawFn) -> str:
    root = draw(st.one_of(st.just("/memories/"), st.sampled_from(ROOTS)))
    parts = draw(st.lists(st.tuples(st.sampled_from(SEPARATORS), any_segment), max_size=4))
    body = "".join(separator + part for separator, part in parts)[len(parts[0][0]) if parts else 0 :]
    raw = root + body + draw(st.sampled_from(TRAILERS))
    return FORMS[draw(st.sampled_from(FORM_NAMES))](raw)


class PathString(str):
    """A str subclass (what some JSON decoders or frameworks hand over)."""


non_str_inputs = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.binary(max_size=20),
    st.just(b"/memories/a"),
    st.just(bytearray(b"/memories/a")),
    st.just(memoryview(b"/memories/a")),
    st.lists(st.text(max_size=5), max_size=3),
    st.just(["/memories/a"]),
    st.just(("/memories", "a")),
    st.just({"path": "/memories/a"}),
    st.just(MemoryPath("a")),
)
any_path_input = st.one_of(
    adversarial_paths(),
    adversarial_paths(),
    st.text(),
    st.text(max_size=30).map(lambda s: "/memories/" + s),
    adversarial_paths().map(PathString),
    non_str_inputs,
)


@st.composite
def valid_leaning_paths(draw: st.DrawFn) -> str:
    """Mostly acceptable paths: safe pieces, with the odd hostile one, under "/memories/"."""
    parts = draw(st.lists(valid_leaning_segment, max_size=5))
    raw = "/memories" + "".join("/" + p for p in parts) + draw(st.sampled_from(["", "", "/"]))
    return FORMS[draw(st.sampled_from(["as-is", "as-is", "NFC", "NFD"]))](raw)


def near_the_key_limit(size: int) -> str:
    """A valid relative path of ``size`` bytes (segments of 250), for keys around 1,024 bytes."""
    return ("k" * 250 + "/") * (size // 251) + "k" * max(1, size % 251)


valid_rest = valid_leaning_paths().map(lambda s: s[len("/memories/") :])
adversarial_rest = adversarial_paths().map(lambda s: s.split("/", 2)[-1])
near_limit_rest = st.integers(900, 1030).map(near_the_key_limit)


@st.composite
def layout_and_key(draw: st.DrawFn) -> tuple[TenantLayout, str]:
    """A listed key: mostly under the layout's memory prefix, else anywhere near it."""
    layout = draw(layouts)
    if draw(st.booleans()):
        base = layout.memory_prefix
    else:
        other = draw(layouts)
        base = draw(
            st.sampled_from(
                [
                    layout.internal_prefix,
                    layout.internal_prefix + "intents/",
                    layout.tenant_prefix,
                    layout.prefix,
                    "",
                    other.memory_prefix,
                    other.internal_prefix,
                    layout.memory_prefix[:-1],
                    layout.memory_prefix.upper(),
                    layout.tenant_prefix + "memories//",
                    layout.tenant_prefix + "Memories/",
                    layout.tenant_prefix + "memories\\",
                    layout.tenant_prefix + "memories\uff0f",
                    layout.prefix + layout.tenant + "2/memories/",
                    layout.prefix + layout.tenant[:-1] + "/memories/",
                ]
            )
        )
    rest = draw(st.one_of(valid_rest, valid_rest, adversarial_rest, near_limit_rest, st.text(max_size=20)))
    form = draw(st.sampled_from(["as-is", "as-is", "as-is", "NFD", "trailing slash"]))
    key = base + rest + "/" if form == "trailing slash" else FORMS[form](base + rest)
    return layout, key
