"""Quarantine: writes that read like instructions to a future session, flagged or held for review.

Beside the sensitive-data guard, every text the model writes may pass the instruction
screen (``_instructions``), under the memory's ``instruction_policy``:

* ``"allow"``: no screen (no cost).
* ``"flag"`` (the default): the write happens as asked; what the screen found (kinds and
  lines, never the matched text) is the write's *finding*, recorded with its provenance,
  and logged (kinds only). The model's answers, and the requests, are as without it.
* ``"quarantine"``: a write with a finding is not applied. It is stored sealed as a pending
  write and the model is told, with :class:`WriteHeldError`, that it is held for review;
  :meth:`EncryptedMemory.pending` lists what waits, ``approve`` applies it, ``reject``
  drops it (``s3memory review``, ``approve``, ``reject``).

Why ``flag`` by default: the model sees nothing different and no request is added, and a
poisoned memory found later can be traced in history to the write that brought it in. The
cost is CPU: the screen's patterns are compiled on the first write of a process (about
0.1 to 0.2 s), after which a note of a few kilobytes takes well under a millisecond and a
100 KiB file about 30 ms. ``"allow"`` turns it off.

What is screened is what the write *adds*: a new file's text; for an edit, the findings of
the file it would leave that the file before did not hold (compared as the guard compares
secrets, :func:`s3memory._screening.secrets.SecretGuard.screen_edit`), so an order completed across two
edits is found, and an old one the file already held does not hold every later edit.
Writes are screened after the guard (a held write holds no secret the guard would refuse or
redact) and after the command's own checks (an existing path, a file as an ancestor, the
size and the quota answer as without the screen), just before the file would be written.

A pending write is one object, ``{prefix}{tenant}/.s3memory/pending/{id}`` (``id``: 16 random
hex digits), sealed like a file (an envelope, a fresh data key, bound to the tenant, the
deployment and the name ``s3memory-internal:pending/{id}``, which no memory path can be:
moved to another id or tenant, or a memory file moved onto it, it does not open)::

    {"v": 1, "id", "path", "op": "create" | "edit", "at" (µs), "by" (the actor),
     "base": SHA-256 of the file it edits (hex) or null, "text": the file as it would be,
     "line", "removed", "added": the region the write changes (for review),
     "findings": [[kind, start, end, line], ...] (spans in "text")}

The model's six commands never see pending writes: they are outside ``/memories``, and the
model has no command that reads, lists, approves or rejects them (nor has the MCP server:
its tools are the model's too). ``approve`` writes the held file through the same path as
the model's own writes (the secret guard, the quota, compare-and-swap, provenance), as the
approver's actor, with a finding saying it was approved and who wrote it; it applies only
to the file the write was held against: an edit if the file's text is still the one it was
made to (its hash; then written with ``If-Match``), a create if nothing is at the path yet.
Otherwise it is a clear error and nothing is written. At most :data:`MAX_PENDING` writes
wait per user: beyond that a held write is refused, so a model cannot grow the store
without bound through the queue. A pending object that does not open (tampered with,
planted, moved) is never applied: ``pending`` leaves it out, ``approve`` refuses it,
``reject`` deletes it.
"""

from __future__ import annotations

import copy
import datetime
import hashlib
import json
import logging
import os
import threading
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .._crypto import envelope
from .._crypto.files import SealedFiles
from .._errors import (
    ConfigurationError,
    EditError,
    ForeignObjectError,
    IntegrityError,
    InvalidCommandError,
    LimitExceededError,
    ObjectTooLargeError,
    PathExistsError,
    PathNotFoundError,
    S3MemoryError,
    TenantKeyError,
)
from .._layout import PENDING_ID
from .._paths import MemoryPath, parse_path
from .._render import short_repr
from .._screening import findings as _findings
from .._screening.findings import Finding
from ..stores import ObjectVersion
from . import writes
from .gate import Gate
from .name_screen import NAME_LINE, name_findings

if TYPE_CHECKING:
    from .._screening.instructions import InstructionScreen

log = logging.getLogger("s3memory")

InstructionPolicy = Literal["allow", "flag", "quarantine"]
INSTRUCTION_POLICIES: tuple[InstructionPolicy, ...] = ("allow", "flag", "quarantine")
DEFAULT_INSTRUCTION_POLICY: InstructionPolicy = "flag"
PENDING_VERSION = 1
PENDING_OPERATIONS = ("create", "edit")
#: Writes waiting for review per user; a write held beyond them is refused.
MAX_PENDING = 100
#: The longest finding recorded with a version (it rides in the version's metadata).
MAX_FINDING_CHARS = 200
_PENDING_NAME = "s3memory-internal:pending/"  # not a memory path: every memory path starts with /memories
_HELD = (
    "Error: The write to {path} was held for review and not applied: it reads like instructions to a "
    "future session. A person will approve or reject it; do not retry it or write it in other words."
)
_RENAME_REFUSED = (
    "Error: The rename to {path} was not applied: the new name reads like instructions to a future "
    "session. A person may make it after review; do not retry it or name it in other words."
)
_TOO_MANY = (
    "Error: The write to {path} was not applied: it reads like instructions to a future session, and "
    "too many writes are already waiting for review."
)


class WriteHeldError(InvalidCommandError):
    """The write reads like instructions to a future session and was held for review; nothing
    was written to the memory. ``str(error)`` says so, without saying what was found."""


def check_policy(policy: object) -> InstructionPolicy:
    """``policy`` if it is one of :data:`INSTRUCTION_POLICIES`."""
    known = {name: name for name in INSTRUCTION_POLICIES}
    if isinstance(policy, str) and policy in known:
        return known[policy]
    raise ConfigurationError(f'instruction_policy must be "allow", "flag" or "quarantine", not {short_repr(policy)}')


@dataclass(frozen=True)
class PendingWrite:
    """A write held for review (see :meth:`s3memory.EncryptedMemory.pending`).

    Attributes:
        id: what ``approve`` and ``reject`` take.
        path: the file it writes.
        operation: ``"create"`` (a new file) or ``"edit"`` (``str_replace``, ``insert``).
        actor: who made the write (the memory's actor then, never the model).
        at: when it was held (UTC).
        findings: what the screen found, as spans of :attr:`text` (kind and line).
        size: the file's size as it would be, in UTF-8 bytes.
        text: the whole file as approving it would write it.
        line, removed, added: what the write changes: from ``line`` (1-based), the text
            ``removed`` is replaced by ``added`` (a create adds the whole text at line 1).
    """

    id: str
    path: str
    operation: str
    actor: str
    at: datetime.datetime
    findings: tuple[Finding, ...]
    size: int
    text: str = field(repr=False)
    line: int = 1
    removed: str = field(default="", repr=False)
    added: str = field(default="", repr=False)

    @property
    def summary(self) -> str:
        """What was found, for people: ``"override (line 3), directive (lines 5, 9)"``."""
        return describe(self.findings)


def describe(findings: Sequence[Finding]) -> str:
    """The kinds found and their lines, bounded by :data:`MAX_FINDING_CHARS`; never the text."""
    lines: dict[str, list[int]] = defaultdict(list)
    for finding in findings:
        if finding.line not in lines[finding.kind]:
            lines[finding.kind].append(finding.line)
    parts = []
    for kind, numbers in lines.items():
        where = ["the name"] if NAME_LINE in numbers else []
        numbers = [n for n in numbers if n != NAME_LINE]
        if numbers:
            shown = ", ".join(map(str, numbers[:5])) + (", ..." if len(numbers) > 5 else "")
            where.append(f"line{'s' if len(numbers) > 1 else ''} {shown}")
        parts.append(f"{kind} ({', '.join(where)})")
    return _bounded(", ".join(parts))


def _bounded(text: str) -> str:
    return text if len(text) <= MAX_FINDING_CHARS else text[: MAX_FINDING_CHARS - 3] + "..."


# -- the screen, and the policy -------------------------------------------------------------
_SCREEN_LOCK = threading.Lock()
_DEFAULT_SCREEN: list[InstructionScreen] = []  # compiled once per process, on first use


def _default_screen() -> InstructionScreen:
    with _SCREEN_LOCK:
        if not _DEFAULT_SCREEN:
            from .._screening.instructions import InstructionScreen

            _DEFAULT_SCREEN.append(InstructionScreen())
        return _DEFAULT_SCREEN[0]


def new_findings(screen: InstructionScreen, before: str | None, after: str) -> list[Finding]:
    """The findings of ``after`` that ``before`` (the file before an edit) did not hold."""
    findings = screen.findings(after)
    if not findings or before is None:
        return findings
    return _findings.new_findings(findings, after, screen.findings(before), before)


class InstructionCheck:
    """What a memory asks before each write (``EncryptedMemory.instructions``): the policy
    (``"flag"`` or ``"quarantine"``; ``"allow"`` is no check at all) and the screen, by
    default :class:`~s3memory._screening.instructions.InstructionScreen` with its default detectors."""

    def __init__(self, policy: InstructionPolicy, *, screen: InstructionScreen | None = None) -> None:
        checked = check_policy(policy)
        if checked == "allow":
            raise ConfigurationError('instruction_policy "allow" screens nothing: use no InstructionCheck')
        self.policy = checked
        self._screen = screen

    @property
    def screen(self) -> InstructionScreen:
        return self._screen if self._screen is not None else _default_screen()

    def verdict(self, files: SealedFiles, path: MemoryPath, shown: str, before: str | None, after: str) -> str | None:
        """None to write ``after`` as it is; the finding to record with it (``flag``); or,
        under ``quarantine``, the write stored for review and :class:`WriteHeldError` raised.
        A new file (``before`` None) brings its name too, screened as ``_name_screen`` says."""
        findings = new_findings(self.screen, before, after)
        if before is None:
            findings = name_findings(self.screen.findings, path) + findings
        if not findings:
            return None
        kinds = ", ".join(sorted({f.kind for f in findings}))
        if self.policy == "flag":
            log.info("flagged a write that reads like instructions to a future session (%s)", kinds)
            return describe(findings)
        hold(files, path, shown, before, after, findings)
        log.info("held a write for review: it reads like instructions to a future session (%s)", kinds)
        raise WriteHeldError(_HELD.format(path=shown))

    def rename_verdict(self, new: MemoryPath, shown: str) -> str | None:
        """The finding to record with a rename to ``new`` (``flag``), or None; under
        ``quarantine`` a name that reads like instructions refuses the rename (there is no
        held rename: a held write is a file's text)."""
        findings = name_findings(self.screen.findings, new)
        if not findings:
            return None
        kinds = ", ".join(sorted({f.kind for f in findings}))
        if self.policy == "flag":
            log.info("flagged a rename whose name reads like instructions to a future session (%s)", kinds)
            return describe(findings)
        log.info("refused a rename whose name reads like instructions to a future session (%s)", kinds)
        raise InvalidCommandError(_RENAME_REFUSED.format(path=shown))


def policy_check(policy: object) -> InstructionCheck | None:
    """The check for ``policy`` (an :data:`InstructionPolicy`), or None for ``"allow"``."""
    checked = check_policy(policy)
    return None if checked == "allow" else InstructionCheck(checked)


# -- pending writes: stored, listed, opened -------------------------------------------------
def _name(pending_id: str) -> str:
    return _PENDING_NAME + pending_id


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _changed(before: str, after: str) -> tuple[int, str, str]:
    """(line, removed, added): the region of ``after`` an edit changed, and what it replaced."""
    prefix = _findings.common_prefix(before, after)
    suffix = _findings.common_suffix(before, after, min(len(before), len(after)) - prefix)
    return after.count("\n", 0, prefix) + 1, before[prefix : len(before) - suffix], after[prefix : len(after) - suffix]


def _max_bytes(files: SealedFiles) -> int:
    # The file, and its changed region, each at most max_file_bytes, escaped by JSON at most 6x.
    return 12 * files.max_file_bytes + 65_536 + envelope.TAG_BYTES


def hold(
    files: SealedFiles, path: MemoryPath, shown: str, before: str | None, after: str, findings: Sequence[Finding]
) -> str:
    """Store the write that would leave ``after`` at ``path`` as a pending write; its id.
    Two round trips: how many wait beside a data key, then the PUT.

    Raises:
        LimitExceededError: :data:`MAX_PENDING` writes are already waiting.
    """
    pending_id = os.urandom(8).hex()
    key = files.layout.pending_key(pending_id)
    rt = files.round_trip()
    waiting = rt.submit(lambda: sum(1 for _ in files.store.list(files.layout.pending_prefix, limit=MAX_PENDING)))
    new_key = rt.submit(files.keyring.generate, files.binding_of_name(_name(pending_id)))
    # (A create has already looked for a file at the path, in its first round trip: the model
    # hears "already exists" rather than "held" for a write that could not be made.)
    rt.wait()
    if waiting.result() >= MAX_PENDING:
        log.warning("refused a write: %d writes already wait for review", waiting.result())
        raise LimitExceededError(_TOO_MANY.format(path=shown))
    line, removed, added = (1, "", after) if before is None else _changed(before, after)
    record = {
        "v": PENDING_VERSION,
        "id": pending_id,
        "path": path.display,
        "op": "create" if before is None else "edit",
        "at": int(datetime.datetime.now(datetime.timezone.utc).timestamp() * 1_000_000),
        "by": files.actor,
        "base": None if before is None else _sha256(before),
        "text": after,
        "line": line,
        "removed": removed,
        "added": added,
        "findings": [[f.kind, f.start, f.end, f.line] for f in findings],
    }
    data = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    body, metadata = envelope.seal(data, *new_key.result())
    files.store.put(key, body, metadata, if_none_match=True)
    return pending_id


@dataclass(frozen=True)
class _Held:
    write: PendingWrite
    base: str | None


def _parsed(record: Any, pending_id: str) -> _Held | None:
    """The pending write of an opened record, or None if it is not one (of this id)."""
    if not isinstance(record, dict) or record.get("v") != PENDING_VERSION or record.get("id") != pending_id:
        return None
    path, op, at, by, base, text = (record.get(k) for k in ("path", "op", "at", "by", "base", "text"))
    line, removed, added, findings = (record.get(k) for k in ("line", "removed", "added", "findings"))
    if op not in PENDING_OPERATIONS or not all(isinstance(v, str) for v in (path, by, text, removed, added)):
        return None
    if not (isinstance(at, int) and isinstance(line, int)) or isinstance(at, bool) or isinstance(line, bool):
        return None
    if (base is None) != (op == "create") or not (base is None or isinstance(base, str)):
        return None
    if not isinstance(findings, list) or not all(_is_finding(f) for f in findings):
        return None
    try:
        parsed = parse_path(path)
        at_time = datetime.datetime.fromtimestamp(at / 1_000_000, datetime.timezone.utc)
    except (InvalidCommandError, ValueError, OverflowError, OSError):
        return None
    if parsed.is_root or parsed.display != path:
        return None
    write = PendingWrite(
        id=pending_id,
        path=path,
        operation=str(op),
        actor=str(by),
        at=at_time,
        findings=tuple(Finding(*f) for f in findings),
        size=len(str(text).encode("utf-8", "surrogatepass")),
        text=str(text),
        line=line,
        removed=str(removed),
        added=str(added),
    )
    return _Held(write, None if base is None else str(base))


def _is_finding(item: object) -> bool:
    return (
        isinstance(item, list)
        and len(item) == 4
        and isinstance(item[0], str)
        and all(isinstance(n, int) and not isinstance(n, bool) for n in item[1:])
    )


def _read(files: SealedFiles, pending_id: str) -> tuple[bool, _Held | None]:
    """(whether an object is there, its pending write if it opens as one)."""
    key = files.layout.pending_key(pending_id)
    try:
        stored = files.store.get(key, max_bytes=_max_bytes(files))
    except ObjectTooLargeError:
        return True, None
    if stored is None:
        return False, None
    try:
        data = files.decrypt(_name(pending_id), key, bytes(stored.body), stored.metadata)
        return True, _parsed(json.loads(data.decode("utf-8", "surrogatepass")), pending_id)
    except TenantKeyError:
        raise  # about the tenant's key, not this object
    except (IntegrityError, ForeignObjectError, ValueError, RecursionError):
        return True, None  # tampered with, planted, or moved here: it grants nothing


def _id_of(files: SealedFiles, key: str) -> str | None:
    name = key[len(files.layout.pending_prefix) :]
    return name if key.startswith(files.layout.pending_prefix) and PENDING_ID.fullmatch(name) else None


def pending(files: SealedFiles) -> list[PendingWrite]:
    """Every write waiting for review, oldest first; objects that do not open are left out
    (and logged). One LIST per 1,000 writes, then one round trip of GETs."""
    ids = [i for i in (_id_of(files, info.key) for info in files.store.list(files.layout.pending_prefix)) if i]
    if not ids:
        return []
    rt = files.round_trip()
    reads = [rt.submit(_read, files, pending_id) for pending_id in ids]
    rt.wait()
    found = [held.write for there, held in (r.result() for r in reads) if there and held is not None]
    unreadable = sum(1 for there, held in (r.result() for r in reads) if there and held is None)
    if unreadable:
        log.warning("%d pending objects did not open (tampered with, or not written here): ignored", unreadable)
    return sorted(found, key=lambda w: (w.at, w.id))


def held_versions(files: SealedFiles) -> list[ObjectVersion]:
    """Every stored version of every pending object: a versioned store keeps those of writes
    rejected or approved since, each still holding its text (what redaction must reach)."""
    listed = files.store.list_versions(files.layout.pending_prefix)
    return [v for v in listed if not v.is_delete_marker and _id_of(files, v.key) is not None]


def holds_text(files: SealedFiles, version: ObjectVersion, digest: str) -> bool:
    """Whether one of :func:`held_versions` holds the text whose SHA-256 is ``digest``: a
    write made on that text (its ``base``), or one that would leave it. One GET; a version
    that does not open shows nothing (``pending`` and ``approve`` never open it either)."""
    pending_id = _id_of(files, version.key)
    try:
        stored = files.store.get_version(version.key, version.version_id, max_bytes=_max_bytes(files))
    except ObjectTooLargeError:
        return False
    if stored is None or pending_id is None:
        return False
    try:
        data = files.decrypt(_name(pending_id), version.key, bytes(stored.body), stored.metadata)
        record = json.loads(data.decode("utf-8", "surrogatepass"))
    except TenantKeyError:
        raise  # about the tenant's key, not this object
    except (IntegrityError, ForeignObjectError, ValueError, RecursionError):
        return False
    if not isinstance(record, dict):
        return False
    text = record.get("text")
    return record.get("base") == digest or (isinstance(text, str) and _sha256(text) == digest)


def _no_such(pending_id: object) -> PathNotFoundError:
    return PathNotFoundError(f"Error: There is no pending write {short_repr(pending_id)}.")


def _open(files: SealedFiles, pending_id: object) -> _Held:
    if not isinstance(pending_id, str) or not PENDING_ID.fullmatch(pending_id):
        raise _no_such(pending_id)
    there, held = _read(files, pending_id)
    if not there:
        raise _no_such(pending_id)
    if held is None:
        raise IntegrityError(
            f"Error: The pending write {pending_id} failed its integrity check (it was modified, moved, or not "
            "written by s3memory for this user) and was not applied; reject it to remove it."
        )
    return held


def reject(files: SealedFiles, pending_id: str) -> str:
    """Delete a pending write, also one that does not open (one GET, one DELETE)."""
    if not isinstance(pending_id, str) or not PENDING_ID.fullmatch(pending_id):
        raise _no_such(pending_id)
    there, held = _read(files, pending_id)
    if not there:
        raise _no_such(pending_id)
    files.store.delete([files.layout.pending_key(pending_id)])
    log.info("rejected a pending write")
    if held is None:
        return f"Rejected {pending_id} (it did not open as a pending write, and was removed)."
    return f"Rejected {pending_id}: the {held.write.operation} of {held.write.path} was not applied."


# -- approving ------------------------------------------------------------------------------
class Reviewable(Protocol):
    """What :func:`approve` needs of the memory (``EncryptedMemory``, which it cannot import)."""

    files: SealedFiles
    gate: Gate

    def create(self, path: str, file_text: object) -> str: ...

    def read_text(self, path: str) -> str: ...


class _Approval(InstructionCheck):
    """The check of the memory that writes an approved write: no screen, the approval's finding."""

    def __init__(self, held: _Held) -> None:
        self.policy = "flag"
        self._screen = None
        self.held = held

    def verdict(self, files: SealedFiles, path: MemoryPath, shown: str, before: str | None, after: str) -> str | None:
        write = self.held.write
        if path.display != write.path or after != write.text:  # nothing but the held write is written
            raise InvalidCommandError("Error: an approval writes only the write it approves")
        return _bounded(f"approved in review: {write.summary}; written by {write.actor}")


class _AlreadyApplied(Exception):
    """The file already holds the text the write would leave."""


def approve(memory: Reviewable, pending_id: str) -> str:
    """Apply a pending write (see the module docstring), then delete it."""
    files = memory.files
    held = _open(files, pending_id)
    write = held.write
    reviewer = copy.copy(memory)
    reviewer.gate = memory.gate.with_instructions(_Approval(held))
    changed = (
        f"Error: {write.path} has changed since write {pending_id} was held; approving it would undo those "
        "changes, so nothing was written. Reject it, and make the change again if it is still wanted."
    )
    try:
        if write.operation == "create":
            try:
                reviewer.create(write.path, write.text)
            except PathExistsError:
                if _current_text(memory, write.path) == write.text:
                    raise _AlreadyApplied from None
                raise PathExistsError(changed.replace("has changed", "was created")) from None
        else:

            def apply(content: str) -> tuple[str, None]:
                if content == write.text:
                    raise _AlreadyApplied
                if _sha256(content) != held.base:
                    raise EditError(changed)
                return write.text, None

            missing = (
                f"Error: {write.path} no longer exists (deleted or renamed since write {pending_id} was held), "
                "so nothing was written. Reject it, and make the change again if it is still wanted."
            )
            writes.edit(reviewer.files, reviewer.gate, write.path, missing, apply, lambda _written, _: "")
    except _AlreadyApplied:
        done = f"{write.path} already holds what write {pending_id} would write; nothing was written"
    else:
        done = f"Approved {pending_id}: {write.path} {'created' if write.operation == 'create' else 'edited'}"
    try:
        files.store.delete([files.layout.pending_key(pending_id)])
    except S3MemoryError as exc:  # the write stands: approving again finds it applied, and removes it
        log.warning("an approved pending write could not be removed (%s)", type(exc).__name__)
        return f"{done}; the pending write could not be removed (approve or reject it again to remove it)."
    log.info("approved a pending write")
    return done + "."


def _current_text(memory: Reviewable, path: str) -> str | None:
    try:
        return memory.read_text(path)
    except (PathNotFoundError, InvalidCommandError, IntegrityError, ForeignObjectError, ObjectTooLargeError):
        return None
