"""The system-prompt block that tells the model which memory stores it has.

The memory tool's schema is fixed (``memory_20250818``): nothing in it can say that
``/memories/standards/`` is a read-only store of coding standards. Managed Agents give each
attached store's name, description and per-session ``prompt`` to the model; an application
using s3memory does the same by putting :func:`memory_stores_prompt` in its system prompt.

Every field is escaped, so no description can close the block or fake a tag or attribute:
``html.escape`` with quotes, and every control and format character (C0 and C1 controls other
than newline and tab, bidi overrides, zero-width characters, line and paragraph separators) is
shown as a ``\\uXXXX`` escape, the CLI's policy for untrusted text. This keeps the block
well-formed; it is no defence against an application that writes hostile instructions itself.
Given mounts, pure: no request, no SDK. Given a ``MountedMemory``, one round trip (a LIST of
at most one key per mount) to say which mounts hide files of the user's own store.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable

from .._errors import ConfigurationError
from .._render import never_raw
from .mounts import Mount, notice_shadowing

__all__ = ["memory_stores_prompt"]

INTRODUCTION = (
    "Your memory directory /memories holds these memory stores. A store's files are under its path; "
    "files anywhere else under /memories are in your own store. "
    "Files in a read_only store cannot be created, edited, deleted or renamed."
)

_MAY_NEED_ESCAPE = re.compile(r"[^\n\t -~]")  # printable ASCII, newline and tab never do


def _visible(char: str) -> str:
    if not never_raw(char):
        return char
    code = ord(char)
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escape(text: str) -> str:
    """``text`` safe inside the block: no markup, and no invisible or reordering character."""
    return _MAY_NEED_ESCAPE.sub(lambda match: _visible(match.group()), html.escape(text, quote=True))


def _store(attributes: dict[str, str], description: str, instructions: str, note: str = "") -> list[str]:
    shown = " ".join(f'{key}="{escape(value)}"' for key, value in attributes.items())
    lines = [f"<memory_store {shown}>"]
    if description:
        lines.append(f"<description>{escape(description)}</description>")
    if instructions:
        lines.append(f"<instructions>{escape(instructions)}</instructions>")
    if note:
        lines.append(f"<note>{escape(note)}</note>")
    lines.append("</memory_store>")
    return lines


def shadowing_note(mount: Mount) -> str:
    """What the block says of a mount that hides files of the user's own store."""
    return (
        f"Your own store also has files under {mount.path}; they are hidden while this store is "
        "mounted there, and cannot be read or changed through /memories."
    )


def _mounts_of(memory: object) -> tuple[Mount, ...]:
    source = getattr(memory, "mounts", memory)
    if isinstance(source, (str, bytes)) or not isinstance(source, Iterable):
        raise ConfigurationError("memory_stores_prompt takes a list of s3memory.Mount or a memory with mounts")
    mounts = tuple(source)
    for mount in mounts:
        if not isinstance(mount, Mount):
            raise ConfigurationError("memory_stores_prompt takes a list of s3memory.Mount or a memory with mounts")
    return mounts


def memory_stores_prompt(mounts: object, *, own_description: str | None = None) -> str:
    """A system-prompt block naming each memory store the model sees under ``/memories``.

    Args:
        mounts: the mounted stores: a sequence of :class:`~s3memory.Mount`, or a memory with
            a ``mounts`` attribute (a :class:`~s3memory.MountedMemory`). Given the memory, a
            mount under whose name the user's own store has files (hidden while it is
            mounted) gets a ``<note>`` saying so: one round trip, a LIST of at most one key
            per mount (a failed one is logged and taken as no such files).
        own_description: what the user's own store at ``/memories/`` holds, if worth saying.

    Returns:
        ``<memory_stores>`` … ``</memory_stores>`` (no final newline): a short introduction,
        then the user's own store (``read_write``) and each mount with its path, access,
        name, description and per-session instructions, in the order given. With no mounts
        and no ``own_description`` there is nothing to say: ``""``.

    Raises:
        ConfigurationError: ``mounts`` is neither of the above, or ``own_description`` is not
            a string.
    """
    stores = _mounts_of(mounts)
    if own_description is not None and not isinstance(own_description, str):
        raise ConfigurationError("own_description must be a string")
    if not stores and not own_description:
        return ""
    shadowing = {mount.name for mount in notice_shadowing(mounts)} if stores else set()
    lines = ["<memory_stores>", INTRODUCTION]
    lines += _store({"path": "/memories/", "access": "read_write"}, own_description or "", "")
    for mount in stores:
        attributes = {"path": mount.path, "access": mount.access, "name": mount.name}
        note = shadowing_note(mount) if mount.name in shadowing else ""
        lines += _store(attributes, mount.description, mount.instructions, note)
    lines.append("</memory_stores>")
    return "\n".join(lines)
