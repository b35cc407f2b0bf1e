"""History as text: a time, a version on one line, a file's history, as the MCP server shows
them to the model and the command line to a person. Pure: no store, no request."""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from .._errors import InvalidCommandError, PathNotFoundError
from .._render import never_raw
from .entries import MemoryVersion


def clock_time(moment: datetime.datetime) -> str:
    """``moment`` in UTC to the second, for people: ``2026-05-01 09:30:00``."""
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def parse_time(text: str, name: str | None = None) -> datetime.datetime:
    """An ISO-8601 time, aware: a date alone is midnight UTC, a time without a zone is UTC
    (``Z`` is UTC too). Raises InvalidCommandError (a ValueError) naming ``name``."""
    raw = text.strip()
    try:
        moment = datetime.datetime.fromisoformat(raw[:-1] + "+00:00" if raw[-1:] in ("Z", "z") else raw)
    except ValueError:
        shown = repr(raw if len(raw) <= 40 else raw[:40] + "...")
        raise InvalidCommandError(
            (f"{name}: " if name else "") + f"{shown} is not an ISO-8601 time such as 2026-05-01, "
            "2026-05-01T09:30 or 2026-05-01T09:30:00+02:00 (without a zone: UTC)"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=datetime.timezone.utc)


def iso_time(moment: datetime.datetime) -> str:
    """``moment`` in ISO 8601, UTC, to the microsecond: ``2026-05-01T09:30:00.000000Z``."""
    return moment.astimezone(datetime.timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def one_line(text: object) -> str:
    """Stored text (a path, an actor, a note) kept on one line: controls, format characters,
    separators and the backslash escaped, so one version is always one line."""
    return "".join(
        char.encode("unicode_escape").decode("ascii") if char == "\\" or never_raw(char) else char for char in str(text)
    )


def version_line(entry: MemoryVersion, *, with_path: bool = False) -> str:
    """One version (or change) on one line, for the model."""
    parts = [iso_time(entry.at), entry.operation]
    if with_path:
        parts.append(entry.path)
    parts.append(f"by {entry.actor if entry.actor is not None else 'unknown'}")
    line = " ".join(one_line(part) for part in parts)
    details = [f"{entry.size} bytes" if entry.size is not None else "no content"]
    details.append(f"version {one_line(entry.version)}")
    if entry.current:
        details.append("current")
    verified = "verified" if entry.verified else "NOT verified"
    details.append(f"{verified}: {one_line(entry.note)}" if entry.note else verified)
    return f"{line}; " + "; ".join(details)


def history_text(path: str, entries: Sequence[MemoryVersion]) -> str:
    if not entries:
        raise PathNotFoundError(f"Error: The path {path} has no history: nothing was ever written there.")
    lines = [version_line(e, with_path=any(e.path != path for e in entries)) for e in entries]
    return f"History of {one_line(path)}, newest first ({len(entries)} version(s)):\n" + "\n".join(lines)
