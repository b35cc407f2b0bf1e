"""What the list and retrieve endpoints read from a query string, and their page tokens."""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import re
from collections.abc import Mapping, Sequence

from .http import invalid

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
MAX_FULL_PAGE_SIZE = 20  # with view=full, a page holds at most 20 items
#: Sent by some clients beside the documented parameters; never an error.
_IGNORED = frozenset({"beta"})


def parameters(query: Sequence[tuple[str, str]], allowed: frozenset[str]) -> dict[str, str]:
    """The query's parameters, each at most once and each one ``allowed`` (400 otherwise)."""
    found: dict[str, str] = {}
    for name, value in query:
        if name in _IGNORED:
            continue
        if name not in allowed:
            raise invalid(f"{name}: unknown query parameter; known: {', '.join(sorted(allowed))}.")
        if name in found:
            raise invalid(f"{name}: given more than once.")
        found[name] = value
    return found


def full_view(given: Mapping[str, str], default: str) -> bool:
    """True for ``view=full`` (``default`` when absent)."""
    view = given.get("view", default)
    if view not in ("basic", "full"):
        raise invalid("view: must be 'basic' or 'full'")
    return view == "full"


def integer(given: Mapping[str, str], name: str, default: int, least: int, most: int) -> int:
    if name not in given:
        return default
    text = given[name]
    if not re.fullmatch(r"-?\d{1,6}", text):
        raise invalid(f"{name}: must be an integer")
    value = int(text)
    if not least <= value <= most:
        raise invalid(f"{name}: must be between {least} and {most}")
    return value


def page_size(given: Mapping[str, str], full: bool) -> int:
    """``limit`` (1 to 100, default 20), at most 20 with ``view=full``."""
    limit = integer(given, "limit", DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE)
    return min(limit, MAX_FULL_PAGE_SIZE) if full else limit


def moment(field: str, text: str | None) -> datetime.datetime | None:
    """An RFC 3339 time of a list's ``created_at`` bound, in UTC (a time without an offset is
    taken as UTC); None if absent; 400 naming ``field`` if it is not one."""
    if text is None:
        return None
    try:
        # Python 3.10's fromisoformat does not read a trailing "Z" (3.11's does).
        parsed = datetime.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=datetime.timezone.utc)
        return parsed.astimezone(datetime.timezone.utc)
    except (ValueError, OverflowError):  # OverflowError: an offset that moves it past year 1 or 9999
        raise invalid(f"{field}: must be an RFC 3339 date-time, not {text[:40]!r}.") from None


def encode_page(after: str) -> str:
    """A page token: the last item's sort key (opaque to clients, not secret)."""
    return base64.urlsafe_b64encode(json.dumps({"after": after}).encode()).decode().rstrip("=")


def decode_page(text: str) -> str:
    try:
        document = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (binascii.Error, ValueError, RecursionError):
        raise invalid("page: not a page token this server gave") from None
    if not isinstance(document, dict) or not isinstance(document.get("after"), str):
        raise invalid("page: not a page token this server gave")
    return str(document["after"])
