"""What the sensitive-data guard looks for: the default detectors' patterns and validators.

:mod:`s3memory._screening.secrets` screens text with :class:`~s3memory._screening.secrets.Detector` s and applies a
policy; this module says what a secret looks like. ``SPECS`` holds the default detectors
as (kind, pattern, validator); :func:`~s3memory._screening.secrets.default_detectors` imports this
module and compiles them on first use, so ``import s3memory`` loads none of it. The
validators check a candidate's value (checksum, entropy, decoding).

The detectors aim at few false positives on ordinary notes (hashes, UUIDs, ARNs, phone and
order numbers, "sk-learn", "I reset my password"): a shape alone is rarely enough, most
patterns need a distinctive prefix, a keyword, or a check on the value.

Every default pattern is linear in the length of the text: no nested quantifiers that can
split one run of characters in several ways, each run after a prefix ends where its
character class ends, and every search that could fail late is bounded.

A default validator never raises, whatever the text (a JWT-shaped token whose header is
nested past the JSON parser's depth or holds a 5,000-digit number, invalid base64 or UTF-8,
lone surrogates): a candidate it cannot decode is "not a secret".
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

__all__ = ["luhn_valid", "shannon_entropy"]

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
SPECS: tuple[tuple[str, str, Callable[[str], bool] | None], ...] = (
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
