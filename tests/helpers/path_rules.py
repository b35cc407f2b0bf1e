"""The path rules restated independently of ``s3memory._paths``: the oracles the path tests
and the fuzzers check the parser against (what must be refused, how a refusal shows a path,
which characters look like "/", "\\" or "." per Unicode's confusables.txt)."""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "BAD_CATEGORIES",
    "CONFUSABLES",
    "DISPLAYED",
    "PERCENT_SIGNS",
    "REFUSED_PATHS",
    "STRUCTURAL",
    "displays_as_dot_segment",
    "nfkc_adds_structure",
    "refused_as_look_alike",
    "shown",
]

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


def shown(raw: str) -> str:
    """How a refusal echoes a path: as given if printable (as the reference does), else
    repr(); a path over 1,100 characters is cut there, saying how much was left out."""
    head = raw[:1100]
    text = head if head.isprintable() else repr(head)
    return text if len(raw) <= 1100 else f"{text}... [{len(raw) - 1100:,} more characters]"


# The entries of Unicode's confusables.txt (UTS #39, version 17.0.0, 2025-07-22) whose
# target is or contains U+002F SOLIDUS, U+005C REVERSE SOLIDUS or U+002E FULL STOP:
# source ; target ; name. Every one must be handled by _paths (see
# test_every_confusable_of_a_separator_or_dot_is_handled).
CONFUSABLES_17 = """
1D16D ; 002E ; MUSICAL SYMBOL COMBINING AUGMENTATION DOT
2024 ; 002E ; ONE DOT LEADER
0701 ; 002E ; SYRIAC SUPRALINEAR FULL STOP
0702 ; 002E ; SYRIAC SUBLINEAR FULL STOP
A60E ; 002E ; VAI FULL STOP
10A50 ; 002E ; KHAROSHTHI PUNCTUATION DOT
0660 ; 002E ; ARABIC-INDIC DIGIT ZERO
06F0 ; 002E ; EXTENDED ARABIC-INDIC DIGIT ZERO
A4F8 ; 002E ; LISU LETTER TONE MYA TI
2025 ; 002E 002E ; TWO DOT LEADER
A4FA ; 002E 002E ; LISU LETTER TONE MYA CYA
2026 ; 002E 002E 002E ; HORIZONTAL ELLIPSIS
A4FE ; 002D 002E ; LISU PUNCTUATION COMMA
A4FB ; 002E 002C ; LISU LETTER TONE MYA BO
2488 ; 006C 002E ; DIGIT ONE FULL STOP
2489 ; 0032 002E ; DIGIT TWO FULL STOP
248A ; 0033 002E ; DIGIT THREE FULL STOP
248B ; 0034 002E ; DIGIT FOUR FULL STOP
248C ; 0035 002E ; DIGIT FIVE FULL STOP
248D ; 0036 002E ; DIGIT SIX FULL STOP
248E ; 0037 002E ; DIGIT SEVEN FULL STOP
248F ; 0038 002E ; DIGIT EIGHT FULL STOP
2490 ; 0039 002E ; DIGIT NINE FULL STOP
2491 ; 006C 004F 002E ; NUMBER TEN FULL STOP
2492 ; 006C 006C 002E ; NUMBER ELEVEN FULL STOP
2493 ; 006C 0032 002E ; NUMBER TWELVE FULL STOP
2494 ; 006C 0033 002E ; NUMBER THIRTEEN FULL STOP
2495 ; 006C 0034 002E ; NUMBER FOURTEEN FULL STOP
2496 ; 006C 0035 002E ; NUMBER FIFTEEN FULL STOP
2497 ; 006C 0036 002E ; NUMBER SIXTEEN FULL STOP
2498 ; 006C 0037 002E ; NUMBER SEVENTEEN FULL STOP
2499 ; 006C 0038 002E ; NUMBER EIGHTEEN FULL STOP
249A ; 006C 0039 002E ; NUMBER NINETEEN FULL STOP
249B ; 0032 004F 002E ; NUMBER TWENTY FULL STOP
1F100 ; 004F 002E ; DIGIT ZERO FULL STOP
1735 ; 002F ; PHILIPPINE SINGLE PUNCTUATION
2041 ; 002F ; CARET INSERTION POINT
2215 ; 002F ; DIVISION SLASH
2044 ; 002F ; FRACTION SLASH
2571 ; 002F ; BOX DRAWINGS LIGHT DIAGONAL UPPER RIGHT TO LOWER LEFT
27CB ; 002F ; MATHEMATICAL RISING DIAGONAL
29F8 ; 002F ; BIG SOLIDUS
1D23A ; 002F ; GREEK INSTRUMENTAL NOTATION SYMBOL-47
31D3 ; 002F ; CJK STROKE SP
3033 ; 002F ; VERTICAL KANA REPEAT MARK UPPER HALF
2CC7 ; 002F ; COPTIC SMALL LETTER OLD COPTIC ESH
2CC6 ; 002F ; COPTIC CAPITAL LETTER OLD COPTIC ESH
30CE ; 002F ; KATAKANA LETTER NO
4E3F ; 002F ; CJK UNIFIED IDEOGRAPH-4E3F
2F03 ; 002F ; KANGXI RADICAL SLASH
29F6 ; 002F 0304 ; SOLIDUS WITH OVERBAR
2AFD ; 002F 002F ; DOUBLE SOLIDUS OPERATOR
2AFB ; 002F 002F 002F ; TRIPLE SOLIDUS BINARY RELATION
27C9 ; 1450 002F ; SUPERSET PRECEDING SOLIDUS
2100 ; 0061 002F 0063 ; ACCOUNT OF
2101 ; 0061 002F 0073 ; ADDRESSED TO THE SUBJECT
2105 ; 0063 002F 006F ; CARE OF
2106 ; 0063 002F 0075 ; CADA UNA
0025 ; 00BA 002F 2080 ; PERCENT SIGN
066A ; 00BA 002F 2080 ; ARABIC PERCENT SIGN
2052 ; 00BA 002F 2080 ; COMMERCIAL MINUS SIGN
2030 ; 00BA 002F 2080 2080 ; PER MILLE SIGN
0609 ; 00BA 002F 2080 2080 ; ARABIC-INDIC PER MILLE SIGN
2031 ; 00BA 002F 2080 2080 2080 ; PER TEN THOUSAND SIGN
060A ; 00BA 002F 2080 2080 2080 ; ARABIC-INDIC PER TEN THOUSAND SIGN
FF3C ; 005C ; FULLWIDTH REVERSE SOLIDUS
FE68 ; 005C ; SMALL REVERSE SOLIDUS
2216 ; 005C ; SET MINUS
27CD ; 005C ; MATHEMATICAL FALLING DIAGONAL
29F5 ; 005C ; REVERSE SOLIDUS OPERATOR
29F9 ; 005C ; BIG REVERSE SOLIDUS
1D20F ; 005C ; GREEK VOCAL NOTATION SYMBOL-16
1D23B ; 005C ; GREEK INSTRUMENTAL NOTATION SYMBOL-48
31D4 ; 005C ; CJK STROKE D
4E36 ; 005C ; CJK UNIFIED IDEOGRAPH-4E36
2F02 ; 005C ; KANGXI RADICAL DOT
2CF9 ; 005C 005C ; COPTIC OLD NUBIAN FULL STOP
244A ; 005C 005C ; OCR DOUBLE BACKSLASH
27C8 ; 005C 1455 ; REVERSE SOLIDUS PRECEDING SUBSET
"""


def confusables_of(table: str) -> list[tuple[str, str]]:
    entries = []
    for line in table.strip().splitlines():
        source, target, name = (field.strip() for field in line.split(";"))
        char = chr(int(source, 16))
        assert unicodedata.name(char) == name, line
        entries.append((char, "".join(chr(int(cp, 16)) for cp in target.split())))
    return entries


CONFUSABLES = confusables_of(CONFUSABLES_17)
# Look-alikes of "%" and "‰" ("º/₀"): they contain a slash glyph but look like a percent sign.
PERCENT_SIGNS = {"%", "\u066a", "\u2052", "\u2030", "\u0609", "\u2031", "\u060a"}
STRUCTURAL = "./\\"


def nfkc_adds_structure(ch: str) -> bool:
    return ch not in STRUCTURAL and any(c in unicodedata.normalize("NFKC", ch) for c in STRUCTURAL)


# What a name displays as, per the confusables.txt extract above (and IDNA's ideographic
# full stop): the oracle for the look-alike rule, independent of _paths' tables.
DISPLAYED = str.maketrans({char: target for char, target in CONFUSABLES if char not in PERCENT_SIGNS} | {"\u3002": "."})


def displays_as_dot_segment(segment: str) -> bool:
    """True if ``segment`` shows as "." or "..", alone or between (look-alike) separators."""
    shown_parts = re.split(r"[/\\]", unicodedata.normalize("NFKC", segment).translate(DISPLAYED))
    return any(part in (".", "..") for part in shown_parts)


def refused_as_look_alike(segment: str) -> bool:
    """The look-alike rule restated: a character that NFKC turns into one containing "/",
    "\\" or ".", or a listed confusable that is not a letter or digit, anywhere; or a
    segment that displays as "." or ".."."""
    for char in segment:
        if nfkc_adds_structure(char):
            return True
        listed = ord(char) in DISPLAYED and char not in PERCENT_SIGNS and char != "\u3002"
        if listed and unicodedata.category(char)[0] not in "LN":
            return True
    return displays_as_dot_segment(segment)
