"""The sensitive-data guard: every text the model asks to write is screened for secrets.

A :class:`SecretGuard` runs a list of :class:`Detector` s over what the model asks to write
before anything is written: a new file's text (:meth:`SecretGuard.apply`), or the file an
edit would leave, judged against the file before the edit so that only what the edit adds
counts (:meth:`SecretGuard.screen_edit`). It applies a policy to what they find:

* ``"refuse"`` (the default) raises :class:`SensitiveDataError`, an
  :class:`~s3memory.InvalidCommandError` whose message names the kinds of secret and their
  line numbers, never the secret itself (not even a prefix of it);
* ``"redact"`` replaces each finding with ``[REDACTED: <kind>]`` and keeps the rest of the
  text byte for byte;
* ``"allow"`` returns the text unchanged without scanning it.

The default detectors (:data:`DEFAULT_DETECTORS`) look for private-key blocks, cloud and
API credentials with a recognisable shape, JWTs, bearer and basic credentials, passwords in
URLs and assignments (``password:``, ``DB_PASSWORD=``, ``PGPASSWORD=``, ``adminPassword:``),
and payment card numbers (Luhn-valid, with a known issuer prefix; digits grouped by spaces,
no-break and other Unicode spaces, or hyphens and dashes).
They aim at few false positives on ordinary notes (hashes, UUIDs, ARNs, phone and order
numbers, "sk-learn", "I reset my password"): a shape alone is rarely enough, most patterns
need a distinctive prefix, a keyword, or a check on the value (checksum, entropy, decoding).

Every default pattern is linear in the length of the text: no nested quantifiers that can
split one run of characters in several ways, each run after a prefix ends where its
character class ends, and every search that could fail late is bounded. The patterns are
compiled on first use, so importing this module costs next to nothing.

Every text gets an answer: with the default detectors the guard returns text or raises
:class:`SensitiveDataError`, never another exception, whatever the text (a JWT-shaped token
whose header is nested past the JSON parser's depth or holds a 5,000-digit number, invalid
base64 or UTF-8, lone surrogates). A default validator that cannot decode its candidate
answers "not a secret". A custom ``validate`` that raises is a bug in that detector, and
its exception propagates.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from ._errors import ConfigurationError, InvalidCommandError

log = logging.getLogger("s3memory")

__all__ = [
    "DEFAULT_DETECTORS",
    "POLICIES",
    "Detector",
    "Finding",
    "Policy",
    "SecretGuard",
    "SensitiveDataError",
    "default_detectors",
    "luhn_valid",
    "shannon_entropy",
]

Policy = Literal["refuse", "redact", "allow"]
POLICIES: tuple[Policy, ...] = ("refuse", "redact", "allow")

DEFAULT_DETECTORS: tuple[Detector, ...]  # built on first access, see __getattr__ at the end


@dataclass(frozen=True)
class Detector:
    """One kind of secret.

    Attributes:
        kind: what it is, for people and the model ("AWS access key"); shown in messages
            and redaction marks, so it must not contain anything secret.
        pattern: where the secret is. If the pattern has a group named ``secret``, the
            finding is that group (``password: (?P<secret>...)`` keeps the keyword);
            otherwise the whole match.
        validate: called with the secret's text; a match is a finding only if it returns
            true (a Luhn check, an entropy check, a decoding).
    """

    kind: str
    pattern: re.Pattern[str]
    validate: Callable[[str], bool] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or not self.kind.strip():
            raise ConfigurationError("Detector.kind must be a non-empty string")
        if not isinstance(self.pattern, re.Pattern) or not isinstance(self.pattern.pattern, str):
            raise ConfigurationError("Detector.pattern must be a compiled str pattern (re.compile(...))")
        if self.validate is not None and not callable(self.validate):
            raise ConfigurationError("Detector.validate must be callable or None")


@dataclass(frozen=True)
class Finding:
    """Where a secret is: ``text[start:end]``, on 1-based ``line``. Holds no part of the secret."""

    kind: str
    start: int
    end: int
    line: int


class SensitiveDataError(InvalidCommandError):
    """The text to write holds what looks like a secret; nothing was written.

    ``str(error)`` names the kinds and lines, never the secret. ``findings`` says where.
    """

    def __init__(self, message: str, findings: Sequence[Finding] = ()) -> None:
        super().__init__(message)
        self.findings: tuple[Finding, ...] = tuple(findings)

    @property
    def kinds(self) -> tuple[str, ...]:
        """Each kind found, once, in order of first appearance."""
        return tuple(dict.fromkeys(f.kind for f in self.findings))


class SecretGuard:
    """Screens text for secrets and applies a policy: ``refuse``, ``redact`` or ``allow``.

    The guard itself (callable, as :meth:`apply`) is what :class:`~s3memory.EncryptedMemory`
    takes as ``screen_text``: pass the guard, not ``guard.apply``, so that edits are screened
    with :meth:`screen_edit` (a bound method has no ``screen_edit``).
    """

    __slots__ = ("_detectors", "_policy")

    def __init__(self, policy: Policy = "refuse", detectors: Sequence[Detector] | None = None) -> None:
        """``detectors`` defaults to :data:`DEFAULT_DETECTORS`; pass a list to add or replace some."""
        if not isinstance(policy, str) or policy not in POLICIES:
            raise ConfigurationError(f"the sensitive-data policy must be one of {', '.join(POLICIES)}, not {policy!r}")
        if detectors is None:
            chosen = default_detectors()
        elif isinstance(detectors, (str, bytes)) or not isinstance(detectors, Sequence):
            raise ConfigurationError("detectors must be a sequence of Detector")
        else:
            chosen = tuple(detectors)
            for detector in chosen:
                if not isinstance(detector, Detector):
                    raise ConfigurationError(f"detectors must be Detector instances, not {type(detector).__name__}")
        self._policy: Policy = policy
        self._detectors: tuple[Detector, ...] = chosen

    @property
    def policy(self) -> Policy:
        return self._policy

    @property
    def detectors(self) -> tuple[Detector, ...]:
        return self._detectors

    def __repr__(self) -> str:
        return f"SecretGuard(policy={self._policy!r}, detectors=<{len(self._detectors)}>)"

    def find(self, text: str) -> list[Finding]:
        """Every finding in ``text``, by position (whatever the policy).

        Two detectors that find exactly the same span give one finding, the first
        detector's (the default list puts specific kinds before generic ones).
        """
        spans: list[tuple[int, int, int, str]] = []
        seen: set[tuple[int, int]] = set()
        for order, detector in enumerate(self._detectors):
            secret_group = "secret" in detector.pattern.groupindex
            for match in detector.pattern.finditer(text):
                if secret_group and match.start("secret") >= 0:
                    start, end = match.span("secret")
                else:
                    start, end = match.span()
                if start >= end or (start, end) in seen:
                    continue
                if detector.validate is not None and not detector.validate(text[start:end]):
                    continue
                seen.add((start, end))
                spans.append((start, end, order, detector.kind))
        spans.sort(key=lambda s: (s[0], -s[1], s[2]))
        findings: list[Finding] = []
        line, counted = 1, 0
        for start, end, _, kind in spans:
            line += text.count("\n", counted, start)
            counted = start
            findings.append(Finding(kind, start, end, line))
        return findings

    def redact(self, text: str, findings: Sequence[Finding] | None = None) -> str:
        """``text`` with each finding (overlaps merged) replaced by ``[REDACTED: <kind>]``."""
        if findings is None:
            findings = self.find(text)
        if not findings:
            return text
        pieces: list[str] = []
        position = 0
        group_start, group_end, kinds = -1, -1, list[str]()
        for finding in sorted(findings, key=lambda f: (f.start, -f.end)):
            if finding.start < group_end:  # overlaps the current group: extend it
                group_end = max(group_end, finding.end)
                if finding.kind not in kinds:
                    kinds.append(finding.kind)
                continue
            if group_end >= 0:
                pieces.append(text[position:group_start])
                pieces.append(f"[REDACTED: {', '.join(kinds)}]")
                position = group_end
            group_start, group_end, kinds = finding.start, finding.end, [finding.kind]
        pieces.append(text[position:group_start])
        pieces.append(f"[REDACTED: {', '.join(kinds)}]")
        pieces.append(text[group_end:])
        return "".join(pieces)

    def apply(self, text: str) -> str:
        """The text to write, by the policy: unchanged, redacted, or refused (raises)."""
        if self._policy == "allow":
            return text
        findings = self.find(text)
        if not findings:
            return text
        _log_findings(self._policy, findings)
        if self._policy == "redact":
            return self.redact(text, findings)
        raise SensitiveDataError(_refusal_message(findings), findings)

    __call__ = apply

    def screen_edit(self, before: str, after: str) -> str:
        """The file ``after`` an edit, to write by the policy; only what the edit adds counts.

        ``before`` is the whole file before the edit, ``after`` the whole file it would leave.
        A finding in ``after`` is *new* unless ``before`` held the same finding: findings are
        compared as a multiset of (kind, matched text), so moving a secret the file already
        held is not new, a second copy of it is. Occurrences the edit did not touch are paired
        with the old findings first, so the new one is the copy the edit wrote.

        * ``"refuse"``: raises :class:`SensitiveDataError` for the new findings only (their
          lines are lines of ``after``); returns ``after`` itself when there are none.
        * ``"redact"``: ``after`` with the new findings redacted, and only them.
        * ``"allow"``: ``after``, not scanned.

        Screening the resulting file, not only the inserted text, catches a secret completed
        across edits (``AKIA`` and half a key id, then the other half) and one the edit turns
        into a finding by adding its context (``Bearer`` before a token); an unrelated edit to
        a file that already held a secret passes. That old secret is left as it was, also
        when redacting: it was stored before this edit (a file written before the guard was
        on, under ``"allow"``, or by other means), refusing would block every later edit of
        the file, and rewriting text the model did not write would change the file behind
        its back (its next ``str_replace`` of that text would no longer match). Redacting
        changes exactly what refusing would have refused.

        The rule for the memory: ``create`` screens ``file_text`` with the guard (:meth:`apply`).
        ``str_replace`` and ``insert`` screen the whole file they would leave with
        ``screen_edit(file before, file after)`` when the configured guard has a ``screen_edit``
        (a :class:`SecretGuard`, or any callable object that defines one with these
        semantics); any other ``Callable[[str], str]`` screens only the inserted text
        (``new_str``, ``insert_text``), as before. A subclass that overrides :meth:`apply`
        should override this method too: it uses :meth:`find` and :meth:`redact`, not
        :meth:`apply`.
        """
        if self._policy == "allow":
            return after
        findings = self.find(after)
        if not findings:
            return after
        new = _new_findings(findings, after, self.find(before), before)
        if not new:
            return after
        _log_findings(self._policy, new)
        if self._policy == "redact":
            return self.redact(after, new)
        raise SensitiveDataError(_refusal_message(new, "The edited file would contain"), new)


def _log_findings(policy: str, findings: Sequence[Finding]) -> None:
    """The kinds and count only: never the secret, nor the file it was in."""
    kinds = ", ".join(sorted({finding.kind for finding in findings}))
    log.info(
        "%s a write holding %d secrets (%s)", "redacted" if policy == "redact" else "refused", len(findings), kinds
    )


def _new_findings(findings: Sequence[Finding], after: str, old: Sequence[Finding], before: str) -> list[Finding]:
    """The ``findings`` of ``after`` that are not ``old`` findings of ``before``, as a multiset
    of (kind, text); findings outside the region the edit changed are paired first."""
    remaining = Counter((f.kind, before[f.start : f.end]) for f in old)
    prefix = _common_prefix(before, after)
    suffix = _common_suffix(before, after, min(len(before), len(after)) - prefix)
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


def _common_prefix(a: str, b: str) -> int:
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


def _common_suffix(a: str, b: str, limit: int) -> int:
    """The length of the longest common suffix of ``a`` and ``b``, at most ``limit``."""
    low, high = 0, max(0, limit)
    while low < high:
        middle = (low + high + 1) // 2
        if a[len(a) - middle : len(a) - low] == b[len(b) - middle : len(b) - low]:
            low = middle
        else:
            high = middle - 1
    return low


def _refusal_message(findings: Sequence[Finding], subject: str = "The text contains") -> str:
    """The message of a refusal: kinds and line numbers only."""
    lines_by_kind: dict[str, list[int]] = {}
    for finding in findings:
        lines = lines_by_kind.setdefault(finding.kind, [])
        if finding.line not in lines:
            lines.append(finding.line)
    parts = []
    for kind, lines in lines_by_kind.items():
        shown = [str(n) for n in lines[:5]] + (["..."] if len(lines) > 5 else [])
        where = f"line {shown[0]}" if len(shown) == 1 else f"lines {', '.join(shown)}"
        parts.append(f"{_article(kind)} {kind} ({where})")
    return (
        f"Error: {subject} what looks like {_join(parts)}; memory files must not hold secrets. "
        "Nothing was written. Remove the secret or describe it without its value."
    )


def _join(parts: Sequence[str]) -> str:
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def _article(kind: str) -> str:
    """ "an AWS access key", "a JWT", "an npm token", "a payment card number"."""
    word = kind.split()[0]
    if len(word) > 1 and (word.isupper() or not any(c in "aeiouAEIOU" for c in word)):  # spelled out
        return "an" if word[0].upper() in "AEFHILMNORSX" else "a"
    return "an" if word[0] in "aeiouAEIOU" else "a"


# -- validators --------------------------------------------------------------------------


def shannon_entropy(value: str) -> float:
    """Shannon entropy of the characters of ``value``, in bits per character."""
    if not value:
        return 0.0
    counts: dict[str, int] = {}
    for char in value:
        counts[char] = counts.get(char, 0) + 1
    size = len(value)
    return -sum(n / size * math.log2(n / size) for n in counts.values())


def _classes(value: str) -> tuple[bool, bool, bool]:
    """Whether ``value`` has an ASCII lowercase letter, an uppercase letter, a digit."""
    lower = upper = digit = False
    for char in value:
        if "a" <= char <= "z":
            lower = True
        elif "A" <= char <= "Z":
            upper = True
        elif "0" <= char <= "9":
            digit = True
    return lower, upper, digit


def _random_token(min_length: int, min_entropy: float) -> Callable[[str], bool]:
    """A token with lower and upper case letters and digits, long and varied enough."""

    def check(value: str) -> bool:
        lower, upper, digit = _classes(value)
        return lower and upper and digit and len(value) >= min_length and shannon_entropy(value) >= min_entropy

    return check


_RANDOM_32 = _random_token(32, 3.5)


def _mixed_token(value: str) -> bool:
    """Letters and digits, not one repeated pattern: a credential, not a placeholder."""
    lower, upper, digit = _classes(value)
    return (lower or upper) and digit and shannon_entropy(value) >= 3.0


def _sk_key(value: str) -> bool:
    """An ``sk-`` key whose random part mixes case and digits, or is a long hex string."""
    value = value[3:]
    for kind in ("proj-", "svcacct-", "admin-"):
        value = value.removeprefix(kind)
    if len(value) >= 32 and all(c in "0123456789abcdef" for c in value):
        return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
    return _RANDOM_32(value)


def _mixed_case(value: str) -> bool:
    lower, upper, _ = _classes(value)
    return lower and upper


def _aws_secret(value: str) -> bool:
    lower, upper, digit = _classes(value)
    return lower and upper and (digit or "/" in value or "+" in value) and shannon_entropy(value) >= 3.5


def _has_key_material(block: str) -> bool:
    """A private-key block with a body: a long base64 run mixing case and digits."""
    return any(all(_classes(run.group())) for run in re.finditer(r"[A-Za-z0-9+/]{40,}", block))


def luhn_valid(digits: str) -> bool:
    """Whether a string of ASCII digits passes the Luhn check (card numbers, IMEIs)."""
    if not digits.isascii() or not digits.isdigit():
        return False
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


# (first digits, inclusive range of the prefix of that many digits, allowed lengths)
_CARD_RANGES: tuple[tuple[int, int, int, frozenset[int]], ...] = (
    (1, 4, 4, frozenset({13, 16, 19})),  # Visa
    (2, 51, 55, frozenset({16})),  # Mastercard
    (4, 2221, 2720, frozenset({16})),  # Mastercard 2-series
    (2, 34, 34, frozenset({15})),  # American Express
    (2, 37, 37, frozenset({15})),
    (4, 6011, 6011, frozenset({16, 17, 18, 19})),  # Discover
    (3, 644, 649, frozenset({16, 17, 18, 19})),
    (2, 65, 65, frozenset({16, 17, 18, 19})),
    (4, 3528, 3589, frozenset({16, 17, 18, 19})),  # JCB
    (3, 300, 305, frozenset({14, 15, 16, 17, 18, 19})),  # Diners Club
    (4, 3095, 3095, frozenset({14, 15, 16, 17, 18, 19})),
    (2, 36, 36, frozenset({14, 15, 16, 17, 18, 19})),
    (2, 38, 39, frozenset({16, 17, 18, 19})),
    (2, 62, 62, frozenset({16, 17, 18, 19})),  # UnionPay
    (4, 2200, 2204, frozenset({16, 17, 18, 19})),  # Mir
    (4, 5018, 5018, frozenset({13, 15, 16, 17, 18, 19})),  # Maestro
    (4, 5020, 5020, frozenset({13, 15, 16, 17, 18, 19})),
    (4, 5038, 5038, frozenset({13, 15, 16, 17, 18, 19})),
    (4, 5893, 5893, frozenset({13, 15, 16, 17, 18, 19})),
    (4, 6304, 6304, frozenset({13, 15, 16, 17, 18, 19})),
    (4, 6759, 6759, frozenset({13, 15, 16, 17, 18, 19})),
    (4, 6761, 6763, frozenset({13, 15, 16, 17, 18, 19})),
)


def _card_number(value: str) -> bool:
    """Luhn-valid, with the length and prefix of a card network (ASCII digits and separators)."""
    digits = "".join(c for c in value if "0" <= c <= "9")
    if not 13 <= len(digits) <= 19 or any(not "0" <= c <= "9" and c not in _CARD_SEPARATORS for c in value):
        return False
    if not any(
        low <= int(digits[:width]) <= high and len(digits) in lengths for width, low, high, lengths in _CARD_RANGES
    ):
        return False
    return luhn_valid(digits)


def _jwt(value: str) -> bool:
    """The header of a JWT is base64url JSON with an ``alg``.

    Never raises. Numbers are kept as text (a 5,000-digit integer is still JSON; ``int()``
    would refuse it). A header that is not base64url, UTF-8 or JSON, or that is nested
    deeper than the parser goes (RecursionError: no issuer writes such a header and no
    library reads one), is not a JWT header.
    """
    import base64
    import binascii
    import json

    header = value.split(".", 1)[0]
    try:
        raw = base64.urlsafe_b64decode(header + "=" * (-len(header) % 4))
        decoded = json.loads(raw, parse_int=str, parse_float=str, parse_constant=str)
    except (binascii.Error, ValueError, RecursionError):  # UnicodeError and JSONDecodeError are ValueErrors
        return False
    return isinstance(decoded, dict) and "alg" in decoded


def _basic_credentials(value: str) -> bool:
    """``Authorization: Basic`` carries base64 of ``user:password``."""
    import base64
    import binascii

    try:
        decoded = base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    _user, colon, password = decoded.partition(":")
    return bool(colon and password) and decoded.isprintable()


_PLACEHOLDERS = frozenset(
    {"password", "passwd", "pass", "secret", "changeme", "example", "redacted", "hidden", "xxxxxx", "none", "null"}
)
_REFERENCE_PREFIXES = ("env:", "vault:", "ssm:", "arn:", "secret:", "file:", "op:", "http:", "https:", "ref:")


def _is_placeholder(value: str) -> bool:
    bare = "".join(c for c in value.lower() if c.isalnum())
    return (
        not bare
        or bare in _PLACEHOLDERS
        or bare.rstrip("0123456789") in _PLACEHOLDERS
        or len(set(bare)) <= 2
        or value.lower().startswith(_REFERENCE_PREFIXES)
    )


_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"  # compiled on first use (re's cache)


def _password_value(value: str) -> bool:
    """A literal password, not code (``password=args.password``), a type or a placeholder."""
    if len(value) < 6 or value[0] in "/~.-*#&!|\\" or any(c in "()[]{}<>$%" for c in value):
        return False  # too short, a path, a flag, a YAML tag, code, a template or a variable
    if "://" in value or _is_placeholder(value):
        return False
    if re.fullmatch(_IDENTIFIER, value) and ("_" in value or "." in value):  # a variable or attribute
        return False
    lower, upper, digit = _classes(value)
    symbol = any(not c.isalnum() for c in value)
    return (lower or upper) and (digit or symbol)


def _url_password(value: str) -> bool:
    if value.isdigit() and len(value) <= 5:  # host:port@ is not a password
        return False
    return not (value.startswith(("<", "$", "{", "%", "*")) or _is_placeholder(value))


# -- the default detectors ---------------------------------------------------------------
#
# Speed: a pattern that starts with a literal (or a character class) lets ``re`` skip ahead
# to where it could match, so the boundary checks come *after* the prefix, as look-behinds
# that span it: ``AIza(?<![A-Za-z0-9_-].{4})`` is "AIza, not preceded by a token character".
# Linearity: every run after a prefix ends where its character class ends (the following
# look-ahead excludes that class), so a failed attempt never re-splits a run.

_PEM_LABEL = r"(?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?"
_PEM_LINE_BREAK = r"(?:\r?\n|\\r\\n|\\n)"  # real, or escaped as in JSON strings and .env files
_B64 = r"A-Za-z0-9/+"  # a token of standard base64, without padding
# What may separate groups of card digits, as a character class body: the space, the
# no-break and every other Unicode space separator (Zs), and the hyphen-minus with the
# Unicode hyphens, dashes and minus signs. _CARD_SEPARATORS is the same set, for validation.
_SPACES = r" \u00a0\u1680\u2000-\u200a\u202f\u205f\u3000"
_DASHES = r"\-\u2010-\u2015\u2212\ufe58\ufe63\uff0d"
_CARD_SEPARATORS = frozenset(
    " \u00a0\u1680\u202f\u205f\u3000"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + "-\u2212\ufe58\ufe63\uff0d"
    + "".join(map(chr, range(0x2010, 0x2016)))
)
_CARD_SEP = rf"[{_SPACES}{_DASHES}]"
_URLSAFE = r"A-Za-z0-9_-"

# (kind, pattern, validate). Specific kinds come before generic ones: when two detectors
# find the same span, the first one names it.
_SPECS: tuple[tuple[str, str, Callable[[str], bool] | None], ...] = (
    (
        "private key",
        # A block up to its END line (any body without '-----'), or, when there is no END,
        # the header and the lines of base64 or armor headers ("Proc-Type: ...") after it.
        rf"-----BEGIN {_PEM_LABEL}-----"
        rf"(?:[^-]*(?:-(?!----)[^-]*)*-----END {_PEM_LABEL}-----"
        rf"|(?:(?:[ \t]*{_PEM_LINE_BREAK})+[ \t]*(?:[A-Za-z][A-Za-z0-9-]{{0,30}}:[^\r\n\\]*|[A-Za-z0-9+/=]+)"
        r"(?=[ \t]*(?:[\r\n]|\\[rn]|\Z)))*)",
        _has_key_material,
    ),
    (
        "AWS access key",
        r"A(?:KIA|SIA|BIA|CCA)(?<![A-Za-z0-9].{4})[A-Z0-9]{16}(?![A-Za-z0-9])",
        None,
    ),
    (
        "AWS secret access key",
        # 40 characters of base64 within five words after "aws", "secret" or an access key
        # id, on the same line: aws_secret_access_key = ..., "SecretAccessKey": "...".
        rf"[AaSs](?<![{_B64}].)"
        r"(?:(?<=[Aa])[Ww][Ss]|(?<=A)[KS]IA[A-Z0-9]{16}|(?<=[Ss])[Ee][Cc][Rr][Ee][Tt])"
        rf"[{_B64}]*(?:[^{_B64}\r\n]+[{_B64}]+){{0,5}}?[^{_B64}\r\n]+"
        rf"(?P<secret>[{_B64}]{{40}})(?![{_B64}=])",
        _aws_secret,
    ),
    ("Anthropic API key", rf"sk-ant-(?<![{_URLSAFE}].{{7}})[{_URLSAFE}]{{24,}}", _RANDOM_32),
    (
        # OpenAI's shape, also used by other providers (some with 32 lowercase hex digits)
        "OpenAI-style API key",
        rf"sk-(?<![{_URLSAFE}]...)(?!ant-)(?:(?:proj|svcacct|admin)-)?[{_URLSAFE}]{{20,}}",
        _sk_key,
    ),
    (
        "GitHub token",
        r"g(?:h[pousr]_(?<![A-Za-z0-9_].{4})[A-Za-z0-9]{36,}|ithub_pat_(?<![A-Za-z0-9_].{11})[A-Za-z0-9_]{50,})"
        r"(?![A-Za-z0-9_])",
        None,
    ),
    ("GitLab token", rf"glpat-(?<![{_URLSAFE}].{{6}})[{_URLSAFE}]{{20,}}", None),
    ("Slack token", r"x(?:ox[abposr]|app)-(?<![A-Za-z0-9-].{5})[A-Za-z0-9-]{10,}", _mixed_token),
    ("Slack webhook URL", r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{20,}", None),
    ("Stripe secret key", r"[rs]k_(?:live|test)_(?<![A-Za-z0-9_].{8})[A-Za-z0-9]{20,}", None),
    ("Google API key", rf"AIza(?<![{_URLSAFE}].{{4}})[{_URLSAFE}]{{35}}(?![{_URLSAFE}])", None),
    ("Google OAuth client secret", rf"GOCSPX-(?<![{_URLSAFE}].{{7}})[{_URLSAFE}]{{28}}(?![{_URLSAFE}])", None),
    ("npm token", r"npm_(?<![A-Za-z0-9_].{4})[A-Za-z0-9]{36}(?![A-Za-z0-9_])", None),
    ("PyPI token", rf"pypi-AgEIcHlwaS5vcmc[{_URLSAFE}]{{50,}}", None),
    ("Hugging Face token", r"hf_(?<![A-Za-z0-9_].{3})[A-Za-z]{34}(?![A-Za-z0-9_])", _mixed_case),
    (
        "SendGrid API key",
        rf"SG\.(?<![{_URLSAFE}].{{3}})[{_URLSAFE}]{{22}}\.[{_URLSAFE}]{{43}}(?![{_URLSAFE}])",
        None,
    ),
    ("Azure storage account key", rf"AccountKey=(?P<secret>[{_B64}]{{86}}==)", None),
    ("JWT", rf"eyJ(?<![{_URLSAFE}]...)[{_URLSAFE}]{{8,}}\.[{_URLSAFE}]{{8,}}\.[{_URLSAFE}]*", _jwt),
    (
        "bearer token",
        r"[Bb](?<![A-Za-z0-9_].)(?:earer|EARER)[ \t]+(?P<secret>[A-Za-z0-9._~+/=-]{20,})",
        _mixed_token,
    ),
    (
        "basic-auth credential",
        r"[Aa](?:uthorization|UTHORIZATION)[\"']?[ \t]*[:=][ \t]*[\"']?[Bb](?:asic|ASIC)[ \t]+"
        rf"(?P<secret>[{_B64}]{{4,}}={{0,2}})",
        _basic_credentials,
    ),
    (
        "password in a URL",
        # scheme://user:password@host, unless the password is the user name (postgres:postgres)
        r"://(?P<user>[^\s:/?#@]{1,64}):(?!(?P=user)@)(?P<secret>[^\s:/?#@]{1,128})@",
        _url_password,
    ),
    (
        "password",
        # password: ..., PASSWORD=..., "password": "...", passwd => ..., and the keyword ending
        # an identifier: PGPASSWORD=..., DB_PASSWORD=..., adminPassword: ..., dbPassword := ...;
        # not passwords, password_hash, passwordless, password_policy (the keyword must end it)
        r"[Pp][Aa][Ss][Ss](?:[Ww](?:[Oo][Rr])?[Dd]|[Pp][Hh][Rr][Aa][Ss][Ee])"
        r"[\"']?[ \t]*(?:=>|:=|[:=])[ \t]*[\"']?(?P<secret>[^\s\"'`,;]+)",
        _password_value,
    ),
    (
        "payment card number",
        # 13-19 digits, or 4-4-4-4(-3) groups, or 4-6-5 (American Express), with one kind of
        # separator (a space, a no-break or other Unicode space, a hyphen or dash); not part
        # of a longer run of digits, words or decimals.
        rf"[0-9](?<![\w./+{_DASHES}][0-9])(?<![0-9]{_CARD_SEP}[0-9])"
        rf"(?:[0-9]{{12,18}}|[0-9]{{3}}({_CARD_SEP})[0-9]{{4}}\1[0-9]{{4}}\1[0-9]{{1,4}}(?:\1[0-9]{{3}}(?![0-9]))?"
        rf"|[0-9]{{3}}({_CARD_SEP})[0-9]{{6}}\2[0-9]{{4,5}})"
        rf"(?![\w{_DASHES}]|\.[0-9])",
        _card_number,
    ),
)

_LOCK = threading.Lock()
_DEFAULTS: tuple[Detector, ...] | None = None


def default_detectors() -> tuple[Detector, ...]:
    """:data:`DEFAULT_DETECTORS`, compiled on the first call."""
    global _DEFAULTS
    if _DEFAULTS is None:
        with _LOCK:
            if _DEFAULTS is None:
                _DEFAULTS = tuple(Detector(kind, re.compile(pattern), check) for kind, pattern, check in _SPECS)
    return _DEFAULTS


def __getattr__(name: str) -> tuple[Detector, ...]:
    if name == "DEFAULT_DETECTORS":
        return default_detectors()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
