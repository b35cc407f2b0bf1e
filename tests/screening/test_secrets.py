"""The sensitive-data guard: each default detector, the three policies, the refusal message,
custom detectors, false positives on ordinary notes, and speed on adversarial input.

Every secret below is fake and built at run time (by concatenation or from a seeded random
generator), so this file holds nothing that a secret scanner would flag.
"""

from __future__ import annotations

import base64
import functools
import json
import random
import re
import string
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest
from helpers import DATA_DIR, examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from s3memory import ConfigurationError, InvalidCommandError, S3MemoryError
from s3memory._screening.secrets import (
    DEFAULT_DETECTORS,
    Detector,
    Finding,
    SecretGuard,
    SensitiveDataError,
    default_detectors,
    luhn_valid,
    shannon_entropy,
)

CORPUS = DATA_DIR / "prose_notes.md"
DIGITS = string.digits
UPPER = string.ascii_uppercase
LETTERS = string.ascii_letters
ALNUM = LETTERS + DIGITS
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"


# -- fake secrets ------------------------------------------------------------------------


def token(length: int, seed: int, alphabet: str = ALNUM) -> str:
    """Seeded random characters, with a lowercase letter, an uppercase letter and a digit
    whenever the alphabet has them (as real random credentials of that length do)."""
    rng = random.Random(seed)
    wanted = [group for group in (string.ascii_lowercase, UPPER, DIGITS) if set(group) & set(alphabet)]
    while True:
        value = "".join(rng.choice(alphabet) for _ in range(length))
        if all(any(c in group for c in value) for group in wanted):
            return value


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def make_jwt(header: dict[str, str], payload: dict[str, object], seed: int) -> str:
    parts = [b64url(json.dumps(header).encode()), b64url(json.dumps(payload).encode())]
    return ".".join([*parts, token(43, seed, URLSAFE)])


def luhn_ok(number: str) -> bool:
    """An implementation independent of the module's."""
    digits = [int(c) for c in number][::-1]
    return (sum(digits[0::2]) + sum(sum(divmod(2 * d, 10)) for d in digits[1::2])) % 10 == 0


def make_card(prefix: str, length: int, seed: int) -> str:
    rng = random.Random(seed)
    body = prefix + "".join(rng.choice(DIGITS) for _ in range(length - len(prefix) - 1))
    return next(body + d for d in DIGITS if luhn_ok(body + d))


def grouped(number: str, sizes: tuple[int, ...], sep: str = " ") -> str:
    out, position = [], 0
    for size in sizes:
        out.append(number[position : position + size])
        position += size
    return sep.join(out)


AWS_KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"  # AWS's documented example
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
BEGIN, END = "-----" + "BEGIN ", "-----" + "END "
VISA = "4111" + "1111" + "1111" + "1111"


@functools.cache
def private_keys() -> dict[str, str]:
    """Real, freshly generated keys in each PEM flavour (without the final newline)."""
    from cryptography.hazmat.primitives import serialization as ser
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    ed_key = ed25519.Ed25519PrivateKey.generate()
    none, pem = ser.NoEncryption(), ser.Encoding.PEM
    password = ser.BestAvailableEncryption(b"not-a-real-passphrase")
    keys = {
        "rsa": rsa_key.private_bytes(pem, ser.PrivateFormat.TraditionalOpenSSL, none),
        "ec": ec_key.private_bytes(pem, ser.PrivateFormat.TraditionalOpenSSL, none),
        "pkcs8": ec_key.private_bytes(pem, ser.PrivateFormat.PKCS8, none),
        "pkcs8-encrypted": rsa_key.private_bytes(pem, ser.PrivateFormat.PKCS8, password),
        "rsa-encrypted": rsa_key.private_bytes(pem, ser.PrivateFormat.TraditionalOpenSSL, password),
        "openssh": ed_key.private_bytes(pem, ser.PrivateFormat.OpenSSH, none),
    }
    result = {name: data.decode().rstrip("\n") for name, data in keys.items()}
    rng = random.Random(7)
    body = base64.b64encode(bytes(rng.randrange(256) for _ in range(600))).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    label = "PGP PRIVATE KEY BLOCK-----"
    result["pgp"] = "\n".join([BEGIN + label, "Version: GnuPG v2", "", *lines, "=" + token(4, 8), END + label])
    return result


@dataclass(frozen=True)
class Example:
    name: str
    kind: str
    text: str  # holds ``secret`` exactly once
    secret: str  # what the finding covers, and what must never be shown or kept


def ex(name: str, kind: str, before: str, secret: str, after: str = "") -> Example:
    return Example(name, kind, before + secret + after, secret)


def _examples() -> list[Example]:
    keys = private_keys()
    jwt_hs = make_jwt({"alg": "HS256", "typ": "JWT"}, {"sub": "1234567890", "name": "Sam", "iat": 1718042400}, 40)
    jwt_rs = make_jwt({"typ": "JWT", "alg": "RS256", "kid": "2024-06"}, {"scope": "notes:read", "exp": 1718046000}, 41)
    pkcs8_json = json.dumps({"type": "service_account", "private_key": keys["pkcs8"] + "\n", "client_id": "1234"})
    pkcs8_escaped = json.dumps(keys["pkcs8"])[1:-1]
    json_before, json_after = pkcs8_json.split(pkcs8_escaped)
    truncated = "\n".join(keys["rsa"].splitlines()[:5])
    slack_ids = "T" + token(8, 19, UPPER + DIGITS) + "/B" + token(10, 20, UPPER + DIGITS) + "/" + token(24, 21)
    card = "payment card number"
    return [
        *(ex(f"pem-{name}", "private key", "The key:\n", pem, "\nKeep it safe.") for name, pem in keys.items()),
        ex("pem-json", "private key", json_before, pkcs8_escaped, json_after),
        ex("pem-truncated", "private key", "", truncated, "\n\n(the rest was cut off)"),
        ex("aws-key-id", "AWS access key", "aws_access_key_id = ", AWS_KEY_ID),
        ex("aws-temp-key-id", "AWS access key", "id ", "ASIA" + token(16, 1, UPPER + DIGITS), "."),
        ex("aws-secret-ini", "AWS secret access key", "aws_secret_access_key = ", AWS_SECRET),
        ex("aws-secret-env", "AWS secret access key", "export AWS_SECRET_ACCESS_KEY=", AWS_SECRET),
        ex("aws-secret-json", "AWS secret access key", '"SecretAccessKey": "', token(40, 2, B64), '",'),
        ex("aws-secret-prose", "AWS secret access key", "the aws secret is ", token(40, 3, B64), " ok"),
        ex("anthropic", "Anthropic API key", "ANTHROPIC_API_KEY=", "sk-" + "ant-api03-" + token(93, 4, URLSAFE) + "AA"),
        ex("openai-project", "OpenAI-style API key", "key: ", "sk-" + "proj-" + token(156, 5, URLSAFE)),
        ex("openai-legacy", "OpenAI-style API key", "", "sk-" + token(20, 6) + "T3Blbk" + "FJ" + token(20, 7)),
        ex("sk-hex", "OpenAI-style API key", "DEEPSEEK_API_KEY=", "sk-" + token(32, 8, HEX)),
        ex("github-classic", "GitHub token", "token ", "ghp_" + token(36, 9)),
        ex("github-oauth", "GitHub token", "", "gho_" + token(36, 10)),
        ex("github-fine-grained", "GitHub token", "", "github_" + "pat_" + token(22, 11) + "_" + token(59, 12)),
        ex("gitlab", "GitLab token", "GITLAB_TOKEN=", "glpat-" + token(20, 13, URLSAFE)),
        ex(
            "slack-bot",
            "Slack token",
            "",
            "xoxb-" + token(12, 14, DIGITS) + "-" + token(13, 15, DIGITS) + "-" + token(24, 16),
        ),
        ex("slack-app", "Slack token", "", "xapp-1-A0" + token(9, 17, UPPER + DIGITS) + "-" + token(13, 18, DIGITS)),
        ex("slack-webhook", "Slack webhook URL", "post to ", "https://hooks.slack.com/services/" + slack_ids),
        ex("stripe-live", "Stripe secret key", "STRIPE_KEY=", "sk_" + "live_" + token(24, 30)),
        ex("stripe-restricted", "Stripe secret key", "", "rk_" + "live_" + token(99, 31)),
        ex("stripe-test", "Stripe secret key", "", "sk_" + "test_" + token(24, 32)),
        ex("google-api", "Google API key", "maps key ", "AIza" + token(35, 33, URLSAFE)),
        ex("google-oauth", "Google OAuth client secret", '"client_secret": "', "GOCSPX-" + token(28, 34, URLSAFE), '"'),
        ex("npm", "npm token", "//registry.npmjs.org/:_authToken=", "npm_" + token(36, 35)),
        ex("pypi", "PyPI token", "password = ", "pypi-" + "AgEIcHlwaS5vcmc" + token(120, 36, URLSAFE)),
        ex("huggingface", "Hugging Face token", "HF_TOKEN=", "hf_" + token(34, 37, LETTERS)),
        ex("sendgrid", "SendGrid API key", "", "SG." + token(22, 38, URLSAFE) + "." + token(43, 39, URLSAFE)),
        ex(
            "azure-storage",
            "Azure storage account key",
            "DefaultEndpointsProtocol=https;AccountName=acmenotes;AccountKey=",
            base64.b64encode(random.Random(43).randbytes(64)).decode(),
            ";EndpointSuffix=core.windows.net",
        ),
        ex("jwt-hs256", "JWT", "id_token: ", jwt_hs),
        ex("jwt-bearer", "JWT", "Authorization: Bearer ", jwt_rs),
        ex("bearer", "bearer token", "curl -H 'Authorization: Bearer ", token(40, 44, URLSAFE + ".~"), "' https://x"),
        ex(
            "basic",
            "basic-auth credential",
            "Authorization: Basic ",
            base64.b64encode(b"deploy:" + token(16, 42).encode()).decode(),
        ),
        ex("url-password", "password in a URL", "DATABASE_URL=postgres://notes_app:", token(20, 45), "@db:5432/notes"),
        ex("password-yaml", "password", "password: ", "hunter2"),
        ex("password-env", "password", 'DB_PASSWORD="', token(16, 46, ALNUM + "!#&*"), '"'),
        ex("password-json", "password", '{"user": "deploy", "password": "', "c0rrect-h0rse-battery", '"}'),
        ex("passphrase", "password", "passphrase => ", "Tr0ub4dor&3"),
        # "password" ending an UPPER or camelCase identifier
        ex("password-pgpassword", "password", "PGPASSWORD=", token(14, 47), " psql -h db -U app"),
        ex("password-camel-yaml", "password", "adminPassword: ", token(12, 48, ALNUM + "#!"), "\n"),
        ex("password-camel-assign", "password", "dbPassword = '", "s3cr3t-Sauce", "'"),
        ex("password-camel-long", "password", "  mysqlRootPassword: ", "r00tPa55w0rd"),
        ex("password-go-assign", "password", 'dbPassword := "', "Go-Pher-2024!", '"'),
        ex("card-visa", card, "Card on file: ", VISA, ", expires 12/27."),
        ex("card-visa-spaced", card, "card ", grouped(VISA, (4, 4, 4, 4)), " 12/27"),
        ex("card-visa-dashed", card, "card ", grouped(VISA, (4, 4, 4, 4), "-"), "."),
        ex("card-visa-13", card, "old card ", make_card("4", 13, 50)),
        ex("card-visa-19", card, "card ", make_card("4", 19, 51)),
        ex("card-mastercard", card, "MC ", "5555" + "5555" + "5555" + "4444"),
        ex("card-mastercard-2", card, "MC ", grouped(make_card("2221", 16, 52), (4, 4, 4, 4))),
        ex("card-amex", card, "Amex ", "3782 822463 " + "10005"),
        ex("card-discover", card, "Discover ", "6011" + "1111" + "1111" + "1117"),
        ex("card-jcb", card, "JCB ", "3530" + "1113" + "3330" + "0000"),
        ex("card-diners", card, "Diners ", grouped("3056" + "9309" + "0259" + "04", (4, 6, 4))),
        ex("card-unionpay", card, "UnionPay ", make_card("62", 19, 53)),
        # groups separated by Unicode spaces and hyphens, as word processors and web pages write them
        ex("card-nbsp", card, "card ", grouped(VISA, (4, 4, 4, 4), "\u00a0"), " 12/27"),
        ex("card-narrow-nbsp", card, "carte ", grouped(make_card("5", 16, 54), (4, 4, 4, 4), "\u202f"), "."),
        ex("card-figure-space", card, "card\u00a0", grouped(make_card("4", 16, 55), (4, 4, 4, 4), "\u2007")),
        ex("card-thin-space", card, "(", grouped(make_card("6011", 16, 56), (4, 4, 4, 4), "\u2009"), ")"),
        ex("card-ideographic-space", card, "card ", grouped(make_card("3530", 16, 57), (4, 4, 4, 4), "\u3000")),
        ex("card-nb-hyphen", card, "card ", grouped(make_card("51", 16, 58), (4, 4, 4, 4), "\u2011"), " ok"),
        ex("card-en-dash", card, "card ", grouped(make_card("4", 16, 59), (4, 4, 4, 4), "\u2013")),
        ex("card-fullwidth-hyphen", card, "card ", grouped(make_card("4", 19, 60), (4, 4, 4, 4, 3), "\uff0d")),
        ex("card-amex-nbsp", card, "Amex ", grouped("3782" + "822463" + "10005", (4, 6, 5), "\u00a0")),
    ]


EXAMPLES = _examples()
IDS = [e.name for e in EXAMPLES]


def test_every_default_detector_has_examples() -> None:
    assert {e.kind for e in EXAMPLES} == {d.kind for d in DEFAULT_DETECTORS}


def test_the_examples_hold_their_secret_once() -> None:
    for example in EXAMPLES:
        assert len(example.secret) >= 7, example.name
        assert example.text.count(example.secret) == 1, example.name


# -- each detector -----------------------------------------------------------------------


def line_of(text: str, secret: str) -> int:
    return text[: text.index(secret)].count("\n") + 1


def substrings(secret: str, size: int = 6) -> set[str]:
    return {secret[i : i + size] for i in range(len(secret) - size + 1)}


@pytest.mark.parametrize("example", EXAMPLES, ids=IDS)
def test_detector_finds_the_secret(example: Example) -> None:
    text = f"# notes\n\nSome context first.\n{example.text}\nMore prose after.\n"
    findings = SecretGuard().find(text)
    assert [(f.kind, text[f.start : f.end]) for f in findings] == [(example.kind, example.secret)]
    assert findings[0].line == line_of(text, example.secret)


@pytest.mark.parametrize("example", EXAMPLES, ids=IDS)
def test_refuse_names_the_kind_and_never_the_secret(example: Example) -> None:
    text = f"first line\n{example.text}\n"
    with pytest.raises(SensitiveDataError) as caught:
        SecretGuard("refuse").apply(text)
    error = caught.value
    message = str(error)
    assert isinstance(error, InvalidCommandError) and isinstance(error, S3MemoryError) and isinstance(error, ValueError)
    assert message.startswith("Error: The text contains what looks like ")
    assert f" {example.kind} (line {line_of(text, example.secret)})" in message
    assert "Nothing was written." in message
    assert error.kinds == (example.kind,)
    assert error.findings == (Finding(example.kind, *_span(text, example.secret), line_of(text, example.secret)),)
    leaked = [piece for piece in substrings(example.secret) if piece in message]
    assert not leaked, f"the message shows part of the secret: {leaked}"
    assert example.secret not in repr(error.findings)


def _span(text: str, secret: str) -> tuple[int, int]:
    start = text.index(secret)
    return start, start + len(secret)


@pytest.mark.parametrize("example", EXAMPLES, ids=IDS)
def test_redact_replaces_only_the_secret(example: Example) -> None:
    before, after = "Keep this line.\n  indented: yes\n", "\r\ntrailing text; unchanged\t\n"
    text = before + example.text + after
    redacted = SecretGuard("redact").apply(text)
    assert redacted == text.replace(example.secret, f"[REDACTED: {example.kind}]")
    assert redacted.startswith(before) and redacted.endswith(after)
    assert SecretGuard().find(redacted) == []  # a second pass finds nothing left


@pytest.mark.parametrize("example", EXAMPLES, ids=IDS)
def test_allow_passes_everything_through(example: Example) -> None:
    assert SecretGuard("allow").apply(example.text) is example.text


def test_an_access_key_pair_is_two_findings() -> None:
    text = f"creds {AWS_KEY_ID}:{AWS_SECRET}\n"
    findings = SecretGuard().find(text)
    assert [(f.kind, text[f.start : f.end]) for f in findings] == [
        ("AWS access key", AWS_KEY_ID),
        ("AWS secret access key", AWS_SECRET),
    ]
    assert SecretGuard("redact").apply(text) == "creds [REDACTED: AWS access key]:[REDACTED: AWS secret access key]\n"


NOT_SECRETS = [
    "Access key IDs start with AKIA (long-term) or ASIA (temporary).",
    "short: " + AWS_KEY_ID[:-1],
    "inside a word: X" + AWS_KEY_ID,
    "the secret rotation landed in commit " + token(40, 60, HEX),
    "aws secret: " + "ThisIsAVeryLongCamelCaseIdentifierNameXy",  # no digit, no / or +
    "aws uses " + token(41, 61, B64) + " here",  # 41 characters, not 40
    "I use sk-learn-compatible-estimators-and-transformers daily",
    "sk-learn, task-runner-for-nightly-feature-backfills, desk-" + token(40, 62),
    "GitHub PATs start with ghp_ and fine-grained ones with github_pat_.",
    "ghp_" + token(30, 63),
    "Slack bot tokens begin with xoxb- and user tokens with xoxp-.",
    "Bearer tokens expire after one hour; the bearer of a revoked token gets 401.",
    "Authorization: Bearer <access token>",
    'curl -H "Authorization: Bearer ${TOKEN}" https://api.example.com',
    "Authorization: Bearer YOUR_ACCESS_TOKEN_GOES_HERE",
    '"token_type": "Bearer", "expires_in": 3600',
    "Authorization: Basic auth is disabled on every endpoint",
    "eyJ" + token(20, 64, URLSAFE) + "." + token(20, 65, URLSAFE) + "." + token(20, 66, URLSAFE),  # header not JSON
    "A JWT starts with eyJ because the header is base64url of '{\"'.",
    BEGIN + "RSA PRIVATE KEY----- starts the file, " + END + "RSA PRIVATE KEY----- ends it.",
    BEGIN + "OPENSSH PRIVATE KEY-----\n...\n" + END + "OPENSSH PRIVATE KEY-----",
    BEGIN + "PUBLIC KEY-----\n" + token(64, 67, B64) + "\n" + token(24, 68, B64) + "==\n" + END + "PUBLIC KEY-----",
    BEGIN + "CERTIFICATE-----\n" + token(64, 69, B64) + "\n" + END + "CERTIFICATE-----",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + token(43, 70, B64) + " backup@nas",
    "password: str",
    "def connect(host: str, user: str, password: str | None = None):",
    "password: Optional[str] = None",
    'password = os.environ["PGPASSWORD"]',
    'password = getpass.getpass("Password: ")',
    "DbConfig(host=args.host, password=args.password)",
    "connect(cfg.host, password=cfg.db.password, timeout=2)",
    "PASSWORD=${DB_PASSWORD}",
    "password: '{{ vault_db_password }}'",
    "password: !vault |",
    "password: <redacted>",
    "password: ********",
    "password: changeme",
    "password: see the team vault",
    "I reset my password yesterday; the password policy wants 14 characters.",
    "password_hash = bcrypt.hashpw(password.encode(), bcrypt.gensalt())",
    "docker login --username AWS --password-stdin 123456789012.dkr.ecr.eu-west-1.amazonaws.com",
    "postgres://postgres:postgres@localhost:5432/dev",
    "postgres://user:password@localhost/db",
    "postgresql://app:${PGPASSWORD}@db:5432/app",
    "ssh://git@gitlab.example.com:2222/group/project.git and git@github.com:acme/notes.git",
    "http://localhost:8080/path?x=1 and redis://localhost:6379/0",
    grouped(VISA[:-1] + "2", (4, 4, 4, 4)),  # one digit off: fails Luhn
    "ISBN 9780134685991 and 978-0-13-468599-1",
    "Luhn-valid but no card network: " + make_card("9", 16, 71),
    "Visa prefix, wrong length: " + make_card("4", 15, 72),
    "Wikipedia's Luhn example 79927398713",
    "UPS 1Z 999 AA1 01 2345 6784, USPS 9400 1000 0000 0000 0000 00",
    "2**64 = 18446744073709551616, pi = 3.14159265358979323846",
    "E.164: +14155550132 and +4915123456789",
    "a card inside a longer number: 12" + VISA,
    "uuid 3f2504e0-4f89-41d3-9a0c-0305e82c3301, sha256 " + token(64, 73, HEX),
    # "password" inside an identifier that names something else, or a value that is not one
    "password_policy: strict",
    "passwordless login: enabled for every staff account",
    "PASSWORD_MIN_LENGTH = 12",
    "passwordMinLength: 12",
    "adminPasswordFile: /run/secrets/admin-password",
    "PGPASSFILE=~/.pgpass",
    "resetPassword: true",
    "requirePassword: enabled",
    'adminPassword: ""',
    "mysqlRootPassword: ${MYSQL_ROOT_PASSWORD}",
    "dbPassword = config.dbPassword",
    "const dbPassword = process.env.DB_PASSWORD;",
    'dbPassword := os.Getenv("DB_PASSWORD")',
    "userPassword: {SSHA}" + token(32, 74, B64),  # LDAP's salted hash, not the password
    'let password = rpassword::prompt_password("Password: ")?;',
    # Unicode separators: still one kind of separator, Luhn and the issuer prefix
    grouped(VISA[:-1] + "2", (4, 4, 4, 4), "\u00a0"),
    grouped(make_card("9", 16, 75), (4, 4, 4, 4), "\u202f"),
    "call +1\u00a0415\u00a0555\u00a00132 or 030\u20111234\u20115678",
    "a card inside a longer number: 12\u00a0" + grouped(VISA, (4, 4, 4, 4), "\u00a0"),
]


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_near_misses_are_not_findings(text: str) -> None:
    assert SecretGuard().find(text) == []


# -- payment cards -----------------------------------------------------------------------


def test_luhn() -> None:
    assert luhn_valid(VISA) and luhn_valid("79927398713") and luhn_valid("0")
    assert not luhn_valid("79927398710") and not luhn_valid("") and not luhn_valid("4111-1111")
    assert not luhn_valid("\u0664\u0661\u0661\u0661")  # Arabic-Indic digits are not card digits


def test_every_unicode_space_separator_and_the_usual_dashes_group_card_digits() -> None:
    import unicodedata

    spaces = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Zs"]
    dashes = ["-", "\u2010", "\u2011", "\u2012", "\u2013", "\u2014", "\u2015", "\u2212", "\ufe58", "\ufe63", "\uff0d"]
    assert len(spaces) == 17
    for separator in spaces + dashes:
        for number, sizes in ((VISA, (4, 4, 4, 4)), ("3782" + "822463" + "10005", (4, 6, 5))):
            text = f"card {grouped(number, sizes, separator)} ok"
            assert [f.kind for f in SecretGuard().find(text)] == ["payment card number"], hex(ord(separator))
    for other in ("\t", "\n", "\u200b", ".", "_", "/", "\u2e3a"):  # not within a card number
        assert SecretGuard().find(f"card {grouped(VISA, (4, 4, 4, 4), other)} ok") == [], hex(ord(other))


@pytest.mark.parametrize("number", [VISA, "3782" + "822463" + "10005", make_card("5", 16, 80), make_card("35", 16, 81)])
def test_changing_any_one_digit_of_a_card_clears_it(number: str) -> None:
    guard = SecretGuard()
    assert [f.kind for f in guard.find(f"card {number} ok")] == ["payment card number"]
    for position, original in enumerate(number):
        for digit in DIGITS:
            if digit != original:
                changed = number[:position] + digit + number[position + 1 :]
                assert guard.find(f"card {changed} ok") == [], (position, digit)


@given(st.sampled_from(["4", "51", "2720", "34", "6011", "65", "3528", "36", "62"]), st.integers(), st.data())
def test_every_luhn_valid_card_of_a_network_is_found(prefix: str, seed: int, data: st.DataObject) -> None:
    lengths = {"34": [15], "36": [14, 16, 19], "4": [13, 16, 19], "51": [16], "2720": [16]}.get(prefix, [16, 19])
    number = make_card(prefix, data.draw(st.sampled_from(lengths)), seed)
    text = f"paid with {number} on Monday"
    assert [text[f.start : f.end] for f in SecretGuard().find(text)] == [number]


# -- the refusal message -----------------------------------------------------------------


def test_refusal_message_in_full() -> None:
    jwt = make_jwt({"alg": "HS256"}, {"sub": "x"}, 90)
    text = f"notes\nkey {AWS_KEY_ID}\ntoken {jwt}\n"
    with pytest.raises(SensitiveDataError) as caught:
        SecretGuard().apply(text)
    assert str(caught.value) == (
        "Error: The text contains what looks like an AWS access key (line 2) and a JWT (line 3); "
        "memory files must not hold secrets. Nothing was written. "
        "Remove the secret or describe it without its value."
    )


def test_each_kind_is_reported_once_with_its_lines() -> None:
    second = "AKIA" + token(16, 91, UPPER + DIGITS)
    text = "\n".join([AWS_KEY_ID, "x", f"{second} and {AWS_KEY_ID}", "password: hunter2", "npm_" + token(36, 92)])
    with pytest.raises(SensitiveDataError) as caught:
        SecretGuard().apply(text)
    message = str(caught.value)
    assert message.count("AWS access key") == 1
    assert "an AWS access key (lines 1, 3), a password (line 4) and an npm token (line 5);" in message
    assert caught.value.kinds == ("AWS access key", "password", "npm token")
    assert len(caught.value.findings) == 5


def test_many_lines_are_abbreviated() -> None:
    text = "\n".join(f"key {AWS_KEY_ID}" for _ in range(8))
    with pytest.raises(SensitiveDataError, match=r"\(lines 1, 2, 3, 4, 5, \.\.\.\)"):
        SecretGuard().apply(text)


# -- custom detectors, overlaps ----------------------------------------------------------

EMPLOYEE = Detector("employee id", re.compile(r"\bEMP-(?P<secret>[0-9]{6})\b"), validate=lambda s: s != "000000")


def test_custom_detector_added_to_the_defaults() -> None:
    guard = SecretGuard("redact", detectors=[*DEFAULT_DETECTORS, EMPLOYEE])
    text = f"EMP-123456 and EMP-000000 and {AWS_KEY_ID}"
    assert guard.apply(text) == "EMP-[REDACTED: employee id] and EMP-000000 and [REDACTED: AWS access key]"
    with pytest.raises(SensitiveDataError, match=r"like an employee id \(line 1\) and an AWS access key"):
        SecretGuard(detectors=[*DEFAULT_DETECTORS, EMPLOYEE]).apply(text)


def test_custom_detectors_replace_the_defaults() -> None:
    guard = SecretGuard(detectors=[EMPLOYEE])
    assert guard.apply(f"{AWS_KEY_ID} EMP-000000") == f"{AWS_KEY_ID} EMP-000000"
    assert [f.kind for f in guard.find("EMP-654321")] == ["employee id"]
    assert SecretGuard(detectors=[]).apply(AWS_KEY_ID) == AWS_KEY_ID


def test_overlapping_findings_are_redacted_as_their_union() -> None:
    left = Detector("left thing", re.compile(r"abc[0-9]+"))
    right = Detector("right thing", re.compile(r"[0-9]+xyz"))
    guard = SecretGuard("redact", detectors=[left, right])
    text = "before abc123xyz after abc9 and 7xyz"
    assert [(f.kind, f.start, f.end) for f in guard.find(text)] == [
        ("left thing", 7, 13),
        ("right thing", 10, 16),
        ("left thing", 23, 27),
        ("right thing", 32, 36),
    ]
    assert guard.apply(text) == (
        "before [REDACTED: left thing, right thing] after [REDACTED: left thing] and [REDACTED: right thing]"
    )
    with pytest.raises(SensitiveDataError) as caught:
        SecretGuard(detectors=[left, right]).apply(text)
    assert "a left thing (line 1) and a right thing (line 1);" in str(caught.value)


def test_same_span_found_twice_is_one_finding_of_the_first_detector() -> None:
    jwt = make_jwt({"alg": "RS256"}, {"sub": "y"}, 93)
    assert [f.kind for f in SecretGuard().find(f"Authorization: Bearer {jwt}")] == ["JWT"]
    both = [Detector("first", re.compile("abc")), Detector("second", re.compile("abc"))]
    assert [f.kind for f in SecretGuard(detectors=both).find("abc")] == ["first"]


def test_allow_does_not_scan() -> None:
    def explode(_: str) -> bool:
        raise AssertionError("scanned")

    tripwire = Detector("tripwire", re.compile("."), validate=explode)
    assert SecretGuard("allow", detectors=[tripwire]).apply("anything") == "anything"
    with pytest.raises(AssertionError):
        SecretGuard("refuse", detectors=[tripwire]).apply("anything")


def test_guard_is_callable_as_screen_text() -> None:
    guard = SecretGuard("redact")
    assert guard(f"k {AWS_KEY_ID}") == guard.apply(f"k {AWS_KEY_ID}") == "k [REDACTED: AWS access key]"
    assert guard.policy == "redact" and guard.detectors == default_detectors()
    assert "redact" in repr(guard)


@pytest.mark.parametrize("policy", ["block", "REFUSE", "", None, 1, "redact "])
def test_bad_policy_is_a_configuration_error(policy: object) -> None:
    with pytest.raises(ConfigurationError, match="policy"):
        SecretGuard(policy)  # type: ignore[arg-type]


@pytest.mark.parametrize("detectors", ["abc", 5, [object()], [EMPLOYEE, "x"]])
def test_bad_detectors_are_a_configuration_error(detectors: object) -> None:
    with pytest.raises(ConfigurationError):
        SecretGuard("refuse", detectors)  # type: ignore[arg-type]


def test_bad_detector_fields_are_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError):
        Detector("", re.compile("x"))
    with pytest.raises(ConfigurationError):
        Detector("x", "x")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        Detector("x", re.compile(b"x"))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        Detector("x", re.compile("x"), validate="yes")  # type: ignore[arg-type]


def test_shannon_entropy() -> None:
    assert shannon_entropy("") == 0.0 and shannon_entropy("aaaa") == 0.0
    assert shannon_entropy("ab") == pytest.approx(1.0) and shannon_entropy("abcd") == pytest.approx(2.0)


@pytest.mark.slow  # a subprocess
def test_import_is_cheap_and_detectors_are_compiled_on_first_use() -> None:
    code = (
        "import s3memory._screening.secrets as g\n"
        "assert g._DEFAULTS is None\n"
        "assert len(g.DEFAULT_DETECTORS) == len(g._SPECS) and g._DEFAULTS is g.DEFAULT_DETECTORS\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- property: a secret anywhere is refused and never survives redaction -----------------

PROPERTY_EXAMPLES = [e for e in EXAMPLES if e.kind != "private key"] + [
    e for e in EXAMPLES if e.name in ("pem-rsa", "pem-openssh", "pem-json", "pem-truncated")
]


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(), data=st.data())
def test_property_secret_inserted_anywhere(text: str, data: st.DataObject) -> None:
    example = data.draw(st.sampled_from(PROPERTY_EXAMPLES), label="example")
    position = data.draw(st.integers(0, len(text)), label="position")
    full = text[:position] + "\n" + example.text + "\n" + text[position:]
    with pytest.raises(SensitiveDataError) as caught:
        SecretGuard().apply(full)
    assert example.kind in caught.value.kinds
    assert not [piece for piece in substrings(example.secret) if piece in str(caught.value)]
    assert example.secret not in SecretGuard("redact").apply(full)


# -- every input gets an answer, never an exception --------------------------------------


def b64url_of(text: str) -> str:
    return b64url(text.encode())


def jwt_with_header(header_json: str, seed: int = 94) -> str:
    return ".".join([b64url_of(header_json), b64url_of('{"sub":"x"}'), token(43, seed, URLSAFE)])


DEEP = 30_000  # far past Python's recursion limit


@pytest.mark.parametrize(
    "header",
    [
        '{"alg":"HS256","x5c":' + "[" * DEEP + "]" * DEEP + "}",
        '{"alg":"HS256","jwk":' + '{"k":' * DEEP + "1" + "}" * DEEP + "}",
        "[" * DEEP,  # never closed
        '{"alg":' * DEEP,
    ],
    ids=["deep-arrays", "deep-objects", "unclosed-arrays", "unclosed-objects"],
)
def test_a_jwt_with_a_deeply_nested_header_is_an_answer(header: str) -> None:
    jwt = jwt_with_header(header)
    text = f"token {jwt}\nkey {AWS_KEY_ID}\n"
    # No issuer writes such a header and no library parses it: not a JWT. The rest is still screened.
    assert [f.kind for f in SecretGuard().find(text)] == ["AWS access key"]
    with pytest.raises(SensitiveDataError) as caught:
        SecretGuard().apply(text)
    assert caught.value.kinds == ("AWS access key",)
    assert SecretGuard("redact").apply(text) == f"token {jwt}\nkey [REDACTED: AWS access key]\n"
    assert SecretGuard().screen_edit(f"key {AWS_KEY_ID}\n", text) is text  # the JWT is not new either


def test_a_jwt_whose_header_holds_huge_numbers_is_still_a_jwt() -> None:
    # Over the 4,300 digits int() accepts, and a float that overflows: still JSON with an alg.
    jwt = jwt_with_header('{"alg":"HS256","n":' + "7" * 5000 + ',"f":1e999999,"m":-' + "9" * 5000 + "}")
    text = f"id_token: {jwt}\n"
    assert [(f.kind, text[f.start : f.end]) for f in SecretGuard().find(text)] == [("JWT", jwt)]


HOSTILE = [
    "",
    "=",
    "====",
    "a",
    "eyJ",
    "eyJ.",
    "eyJhbGciOiJIUzI1NiJ9",
    "eyJ" + "A" * 4001,  # base64 with one character too many
    "eyJ\ud800.x.y",
    b64url(b"\xff\xfe\x00{") + ".a.b",  # not UTF-8, a UTF-16 byte order mark
    b64url(b'{"alg":"x","a":' + b"[" * 5000) + ".a.b",
    "\ud800\udfff\x00",
    "\ufeff" * 10,
    "9" * 100_000,
    "4" + "\u00a0" * 50 + "1",
    "sk-" + "\ud800" * 40,
    "-----BEGIN RSA PRIVATE KEY-----" + "\n" * 1000,
]


@pytest.mark.parametrize("detector", [d for d in DEFAULT_DETECTORS if d.validate], ids=lambda d: d.kind)
def test_every_default_validator_answers_hostile_strings(detector: Detector) -> None:
    assert detector.validate is not None
    for value in HOSTILE:
        assert detector.validate(value) in (True, False), value[:20]


@pytest.mark.parametrize("detector", [d for d in DEFAULT_DETECTORS if d.validate], ids=lambda d: d.kind)
@settings(max_examples=examples(150), deadline=None)
@given(value=st.text(st.characters(exclude_categories=())))
def test_every_default_validator_answers_any_string(detector: Detector, value: str) -> None:
    assert detector.validate is not None
    assert detector.validate(value) in (True, False)


def test_luhn_on_a_huge_digit_run_answers() -> None:
    run = "0" * 1_000_000
    assert luhn_valid(run) is True and luhn_valid(run + "1") is False
    assert SecretGuard().find(f"total {run} and {run[:-1]}9\n") == []  # no card has a million digits


# Pieces of every pattern, to let the fuzzer build near-secrets, plus whole secrets.
FRAGMENTS = [
    *("eyJ", ".", "AKIA", "ASIA", "aws", "secret", "Secret", "sk-", "sk-ant-", "proj-", "ghp_", "github_pat_"),
    *("glpat-", "xoxb-", "xapp-", "https://hooks.slack.com/services/", "sk_live_", "AIza", "GOCSPX-", "npm_"),
    *("pypi-AgEIcHlwaS5vcmc", "hf_", "SG.", "AccountKey=", "Bearer ", "Authorization: Basic ", "://", "@", ":"),
    *("password", "Password", "PGPASSWORD", "dbPassword", "passphrase", ": ", "=", ":=", "=>", '"', "'", " "),
    *("-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "-----", "\n", "\r\n", "\\n", "\t"),
    *("4111", "1111", "3782", "822463", "10005", "-", "\u00a0", "\u202f", "\u2011", "\uff0d", "0", "9"),
    *("{", "}", "[", "]", '"alg"', "==", "\ud800", "\x00", "\u200b", "\u0664", "é", "\U0001d7d8"),
    *(token(40, 95, B64), token(36, 96), token(24, 97, URLSAFE), b64url_of('{"alg":"none"}'), "[" * 2000),
    *(AWS_KEY_ID, AWS_SECRET, VISA, jwt_with_header('{"alg":' + "[" * 3000), make_jwt({"alg": "HS256"}, {}, 98)),
]
FUZZ_TEXT = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(st.characters(exclude_categories=()), max_size=12)), max_size=40
).map("".join)


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=FUZZ_TEXT)
def test_fuzz_the_guard_answers_with_text_or_a_refusal(text: str) -> None:
    findings = SecretGuard().find(text)
    assert all(0 <= f.start < f.end <= len(text) and f.line == text.count("\n", 0, f.start) + 1 for f in findings)
    try:
        assert SecretGuard("refuse").apply(text) is text
        assert findings == []
    except SensitiveDataError as refused:
        assert refused.findings == tuple(findings) != ()
        assert str(refused).startswith("Error: The text contains what looks like ")
    redacted = SecretGuard("redact").apply(text)
    assert isinstance(redacted, str) and (redacted is text) == (findings == [])
    assert SecretGuard("allow").apply(text) is text


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=FUZZ_TEXT, inserted=FUZZ_TEXT, data=st.data())
def test_fuzz_screen_edit_answers_with_text_or_a_refusal(before: str, inserted: str, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(before)), label="start")
    end = data.draw(st.integers(start, len(before)), label="end")
    after = before[:start] + inserted + before[end:]
    guard = SecretGuard()
    assert guard.screen_edit(before, before) is before  # nothing new in an unchanged file
    try:
        assert guard.screen_edit(before, after) is after
    except SensitiveDataError as refused:
        assert refused.findings and set(refused.findings) <= set(guard.find(after))
    result = SecretGuard("redact").screen_edit(before, after)
    assert isinstance(result, str)
    assert SecretGuard("allow").screen_edit(before, after) is after


# -- screening an edit: only what the edit adds ------------------------------------------

HALF = len(AWS_KEY_ID) // 2


def test_a_secret_split_across_two_edits_is_refused() -> None:
    guard = SecretGuard()
    first = guard.screen_edit("# keys\n", "# keys\nid " + AWS_KEY_ID[:HALF] + "\n")  # half: nothing to see
    assert first == "# keys\nid " + AWS_KEY_ID[:HALF] + "\n"
    after = first.replace(AWS_KEY_ID[:HALF], AWS_KEY_ID)
    assert guard.apply(AWS_KEY_ID[HALF:]) == AWS_KEY_ID[HALF:]  # the inserted text alone passes
    with pytest.raises(SensitiveDataError) as caught:
        guard.screen_edit(first, after)
    assert caught.value.findings == (Finding("AWS access key", *_span(after, AWS_KEY_ID), 2),)
    assert str(caught.value) == (
        "Error: The edited file would contain what looks like an AWS access key (line 2); "
        "memory files must not hold secrets. Nothing was written. "
        "Remove the secret or describe it without its value."
    )
    assert not [piece for piece in substrings(AWS_KEY_ID, 4) if piece in str(caught.value)]
    assert SecretGuard("redact").screen_edit(first, after) == "# keys\nid [REDACTED: AWS access key]\n"


@pytest.mark.parametrize("example", PROPERTY_EXAMPLES, ids=lambda e: e.name)
def test_every_kind_completed_by_a_second_edit_is_refused(example: Example) -> None:
    cut = len(example.secret) // 2
    position = example.text.index(example.secret) + cut
    before = "notes\n" + example.text[:position] + example.text[position + len(example.secret) - cut :] + "\n"
    after = "notes\n" + example.text + "\n"
    with pytest.raises(SensitiveDataError) as caught:
        SecretGuard().screen_edit(before, after)
    assert example.kind in caught.value.kinds
    assert example.secret not in SecretGuard("redact").screen_edit(before, after)


def test_an_unrelated_edit_beside_an_old_secret_passes_and_keeps_it() -> None:
    before = f"# legacy notes, written before the guard\ndeploy key {AWS_KEY_ID}\npassword: hunter2\n"
    after = before.replace("# legacy notes", "# Legacy notes (reviewed)") + "- new item\n"
    for policy in ("refuse", "redact", "allow"):
        assert SecretGuard(policy).screen_edit(before, after) is after
    with pytest.raises(SensitiveDataError):
        SecretGuard().apply(after)  # the whole file, screened as new text, would be refused


def test_moving_an_old_secret_is_not_new() -> None:
    before = f"a\nb\nkey {AWS_KEY_ID}\nc\n"
    after = f"key {AWS_KEY_ID}\na\nb\nc\n"
    assert SecretGuard().screen_edit(before, after) is after
    assert SecretGuard("redact").screen_edit(before, after) is after


@pytest.mark.parametrize("where", ["after", "before"])
def test_a_second_copy_of_an_old_secret_is_new(where: str) -> None:
    old = f"first\nkey {AWS_KEY_ID}\nlast\n"
    after = old + f"copy {AWS_KEY_ID}\n" if where == "after" else f"copy {AWS_KEY_ID}\n" + old
    with pytest.raises(SensitiveDataError) as caught:
        SecretGuard().screen_edit(old, after)
    assert [f.line for f in caught.value.findings] == [4 if where == "after" else 1]
    # redact touches the copy the edit wrote, and leaves the old one as it was
    redacted = "copy [REDACTED: AWS access key]\n"
    assert SecretGuard("redact").screen_edit(old, after) == (old + redacted if where == "after" else redacted + old)


def test_only_the_new_kinds_are_reported_and_redacted() -> None:
    before = f"key {AWS_KEY_ID}\n"
    npm = "npm_" + token(36, 99)
    after = f"key {AWS_KEY_ID}\nnpm {npm}\n"
    with pytest.raises(SensitiveDataError) as caught:
        SecretGuard().screen_edit(before, after)
    assert caught.value.kinds == ("npm token",) and "AWS" not in str(caught.value)
    assert SecretGuard("redact").screen_edit(before, after) == f"key {AWS_KEY_ID}\nnpm [REDACTED: npm token]\n"


def test_an_edit_that_makes_old_text_a_secret_is_refused() -> None:
    value = token(40, 100, URLSAFE + ".~")
    before = f"curl -H 'X: {value}'\n"
    after = f"curl -H 'Authorization: Bearer {value}'\n"
    assert SecretGuard().screen_edit("", before) is before  # a random string alone is not a finding
    with pytest.raises(SensitiveDataError, match="bearer token"):
        SecretGuard().screen_edit(before, after)


def test_removing_a_secret_passes() -> None:
    before = f"a\nkey {AWS_KEY_ID}\nb\n"
    assert SecretGuard().screen_edit(before, "a\nb\n") == "a\nb\n"
    assert SecretGuard().screen_edit(before, "") == ""


def test_screen_edit_from_nothing_is_apply() -> None:
    text = f"a\nkey {AWS_KEY_ID}\npassword: hunter2\n"
    with pytest.raises(SensitiveDataError) as edit:
        SecretGuard().screen_edit("", text)
    with pytest.raises(SensitiveDataError) as whole:
        SecretGuard().apply(text)
    assert edit.value.findings == whole.value.findings
    assert SecretGuard("redact").screen_edit("", text) == SecretGuard("redact").apply(text)


def test_screen_edit_uses_custom_detectors_and_allow_does_not_scan() -> None:
    guard = SecretGuard(detectors=[EMPLOYEE])
    assert guard.screen_edit("", AWS_KEY_ID) is AWS_KEY_ID
    with pytest.raises(SensitiveDataError, match="employee id"):
        guard.screen_edit("EMP-12", "EMP-123456")

    def explode(_: str) -> bool:
        raise AssertionError("scanned")

    tripwire = Detector("tripwire", re.compile("."), validate=explode)
    assert SecretGuard("allow", detectors=[tripwire]).screen_edit("a", "b") == "b"


# -- no false positives on ordinary notes ------------------------------------------------


def test_prose_corpus_has_no_findings() -> None:
    text = CORPUS.read_text(encoding="utf-8")
    lines = text.splitlines()
    findings = SecretGuard().find(text)
    print(f"prose corpus: {len(lines)} lines, {len(text.encode())} bytes, {len(findings)} findings")
    assert len(lines) >= 300 and len(text.encode()) >= 25_000
    assert findings == [], [(f.kind, f.line, lines[f.line - 1]) for f in findings]


# -- speed on adversarial input ----------------------------------------------------------

SIZE = 100 * 1024


def _fill(unit: str) -> str:
    return (unit * (SIZE // len(unit) + 1))[:SIZE]


def _adversarial() -> dict[str, str]:
    rng = random.Random(5)
    header = BEGIN + "RSA PRIVATE KEY-----"
    return {
        "digits": "1" * SIZE,
        "spaced digits": _fill("1 "),
        "dashed groups": _fill("4111-"),
        "begin headers": _fill(header),
        "begin header then base64": header + "\n" + token(SIZE, 1, B64),
        "begin header then lines": header + _fill("\nAb0+"),
        "begin header then blank lines": header + "\n" * SIZE + "x",
        "dashes": "-" * SIZE,
        "almost END": header + _fill("a-b--c----d"),
        "base64 run": token(SIZE, 2, B64),
        "aws keywords": _fill("aws "),
        "secret keywords": _fill("secret="),
        "aws words then long token": _fill("aws x y z w v u ") + token(SIZE // 2, 3, B64),
        "key id prefixes": _fill("AKIA"),
        "sk prefixes": _fill("sk-"),
        "sk-ant prefixes": _fill("sk-ant-"),
        "jwt starts": _fill("eyJ."),
        "jwt segments": _fill("eyJ" + "a" * 30 + "."),
        "bearer": _fill("Bearer "),
        "passwords": _fill("password: "),
        "url userinfo": _fill("://a:"),
        "url userinfo long": _fill("://" + "a" * 70 + ":" + "b" * 130),
        "escaped newlines": header + _fill("\\n"),
        "random base64ish": "".join(rng.choice("ABCabc0123+/=-_. \n") for _ in range(SIZE)),
        "random digits": "".join(rng.choice("0123456789 -") for _ in range(SIZE)),
        "random printable": "".join(rng.choice(string.printable) for _ in range(SIZE)),
        "keyword-ending identifiers": _fill("dbPassword: "),
        "keywords run together": _fill("PGPASSWORD"),
        "walrus assignments": _fill("xPassword:="),
        "no-break spaced digits": _fill("4111\u00a0"),
        "unicode-dashed digits": _fill("4111\u2011"),
        "random digits and unicode separators": "".join(
            rng.choice("0123456789 -\u00a0\u202f\u2011\u2013") for _ in range(SIZE)
        ),
        "jwt deep header": jwt_with_header('{"alg":' + "[" * ((SIZE - 100) * 3 // 4)),
        "jwt huge number": jwt_with_header('{"alg":' + "7" * ((SIZE - 100) * 3 // 4) + "}"),
    }


@pytest.mark.slow  # wall clock
def test_adversarial_input_is_linear_time() -> None:
    timings = {}
    for policy in ("refuse", "redact"):
        guard = SecretGuard(policy)
        for name, text in _adversarial().items():
            started = time.perf_counter()
            try:
                guard.apply(text)
            except SensitiveDataError:
                pass
            timings[f"{policy}: {name}"] = time.perf_counter() - started
    worst = max(timings, key=timings.__getitem__)
    print(f"worst of {len(timings)} adversarial 100 KiB inputs: {worst} in {timings[worst] * 1000:.0f} ms")
    assert timings[worst] < 2.0, timings  # measured well under 0.1 s; generous for slow CI machines


def test_screen_edit_answers_on_adversarial_files() -> None:
    timings = {}
    for policy in ("refuse", "redact"):
        guard = SecretGuard(policy)
        for name, before in _adversarial().items():
            middle = len(before) // 2
            after = before[:middle] + "x" + before[middle + 1 :]
            started = time.perf_counter()
            try:
                assert isinstance(guard.screen_edit(before, after), str)
            except SensitiveDataError:
                pass
            timings[f"{policy}: {name}"] = time.perf_counter() - started
    worst = max(timings, key=timings.__getitem__)
    print(f"screen_edit, worst of {len(timings)} adversarial 100 KiB files: {worst} in {timings[worst] * 1000:.0f} ms")
