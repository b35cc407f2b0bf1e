"""What the two screens share: a finding, which findings an edit adds, and how kinds are named.

Both the sensitive-data guard (``secrets``) and the instruction screen (``instructions``)
report :class:`Finding` s, judge an edit by the findings it adds to the file
(:func:`new_findings`), and name kinds in messages the same way (:func:`with_article`,
:func:`join_words`). Pure: text in, findings out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    """Where a secret is: ``text[start:end]``, on 1-based ``line``. Holds no part of the secret."""

    kind: str
    start: int
    end: int
    line: int


def new_findings(findings: Sequence[Finding], after: str, old: Sequence[Finding], before: str) -> list[Finding]:
    """The ``findings`` of ``after`` that are not ``old`` findings of ``before``, as a multiset
    of (kind, text); findings outside the region the edit changed are paired first."""
    remaining = Counter((f.kind, before[f.start : f.end]) for f in old)
    prefix = common_prefix(before, after)
    suffix = common_suffix(before, after, min(len(before), len(after)) - prefix)
    changed_start, changed_end = prefix, len(after) - suffix

    def touched(index: int) -> bool:  # overlaps the changed region, or straddles an insertion point
        finding = findings[index]
        return finding.start < changed_end and finding.end > changed_start

    new: list[int] = []
    for index in sorted(range(len(findings)), key=touched):  # stable: untouched ones first, in order
        key = (findings[index].kind, after[findings[index].start : findings[index].end])
        if remaining[key] > 0:
            remaining[key] -= 1
        else:
            new.append(index)
    return [findings[index] for index in sorted(new)]


def common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b``.

    A binary search whose comparisons run in C and halve each time: linear, without a
    Python loop over every character.
    """
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def common_suffix(a: str, b: str, limit: int) -> int:
    """The length of the longest common suffix of ``a`` and ``b``, at most ``limit``."""
    low, high = 0, max(0, limit)
    while low < high:
        middle = (low + high + 1) // 2
        if a[len(a) - middle : len(a) - low] == b[len(b) - middle : len(b) - low]:
            low = middle
        else:
            high = middle - 1
    return low


def join_words(parts: Sequence[str]) -> str:
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def with_article(kind: str) -> str:
    """ "an AWS access key", "a JWT", "an npm token", "a payment card number"."""
    word = kind.split()[0]
    if len(word) > 1 and (word.isupper() or not any(c in "aeiouAEIOU" for c in word)):  # spelled out
        article = "an" if word[0].upper() in "AEFHILMNORSX" else "a"
    else:
        article = "an" if word[0] in "aeiouAEIOU" else "a"
    return f"{article} {kind}"
