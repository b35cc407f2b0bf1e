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
no-break and other Unicode spaces, or hyphens and dashes). Their patterns and validators,
and the rules they keep (few false positives, time linear in the text), are in
:mod:`s3memory._screening.secret_patterns`, which this module loads and compiles on first use (as do
:func:`luhn_valid` and :func:`shannon_entropy`, from there), so importing it costs next to
nothing.

Every text gets an answer: with the default detectors the guard returns text or raises
:class:`SensitiveDataError`, never another exception, whatever the text (a JWT-shaped token
whose header is nested past the JSON parser's depth or holds a 5,000-digit number, invalid
base64 or UTF-8, lone surrogates). A default validator that cannot decode its candidate
answers "not a secret". A custom ``validate`` that raises is a bug in that detector, and
its exception propagates.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .._errors import ConfigurationError, InvalidCommandError
from .findings import Finding, join_words, new_findings, with_article

if TYPE_CHECKING:
    from .secret_patterns import luhn_valid, shannon_entropy

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
        new = new_findings(findings, after, self.find(before), before)
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
        parts.append(f"{with_article(kind)} ({where})")
    return (
        f"Error: {subject} what looks like {join_words(parts)}; memory files must not hold secrets. "
        "Nothing was written. Remove the secret or describe it without its value."
    )


_LOCK = threading.Lock()
_DEFAULTS: tuple[Detector, ...] | None = None


def default_detectors() -> tuple[Detector, ...]:
    """:data:`DEFAULT_DETECTORS`, compiled on the first call."""
    global _DEFAULTS
    if _DEFAULTS is None:
        with _LOCK:
            if _DEFAULTS is None:
                from .secret_patterns import SPECS

                _DEFAULTS = tuple(Detector(kind, re.compile(pattern), check) for kind, pattern, check in SPECS)
    return _DEFAULTS


def __getattr__(name: str) -> object:
    if name == "DEFAULT_DETECTORS":
        return default_detectors()
    if name in ("luhn_valid", "shannon_entropy", "SPECS", "_SPECS"):  # loaded on first use
        from . import secret_patterns

        return getattr(secret_patterns, name.lstrip("_"))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
