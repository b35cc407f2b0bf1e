"""How a write lands: a create with ``If-None-Match``, an edit as compare-and-swap, each
with the record of who wrote it beside it, and the text operations of the edit commands.

Both start from the store's :class:`~s3memory._core.gate.Gate` (the path, read-only, the
screens, the quota, the instruction policy) and seal with a fresh data key per version, so
that no two versions of a file share a key. A 412 is not always a lost race: a client that
re-sends a conditional PUT whose answer was lost gets 412 for its own write, which
:func:`landed` tells apart by the data key.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from .. import _render as render
from .._crypto import envelope
from .._crypto.files import SealedFiles
from .._errors import (
    EditError,
    InvalidCommandError,
    NotADirectoryConflict,
    PathExistsError,
    PreconditionFailedError,
    S3MemoryError,
)
from .._history import records as _records
from .._paths import MemoryPath
from .gate import Gate

T = TypeVar("T")
R = TypeVar("R")


def create(files: SealedFiles, gate: Gate, path: str, file_text: object) -> str:
    """The ``create`` command (``EncryptedMemory.create`` says what it raises)."""
    parsed = gate.parse(path)
    gate.writable("create", path)
    if not isinstance(file_text, str):
        raise InvalidCommandError("Error: `file_text` must be a string.")
    if parsed.is_root:
        raise PathExistsError(f"Error: File {path} already exists")
    text = gate.screen_new_file(parsed, file_text)
    data = files.encode(text, path)
    files.names_ready(create=True)  # the one command that may create the names key
    key = files.layout.key_for(parsed)
    # Round trip 1, concurrently: is it a directory? a file? is an ancestor a file? a data
    # key, the history key (cached once made), and the user's usage if a quota is set.
    rt = files.round_trip()
    is_dir = rt.submit(files.has_objects_under, parsed)
    # A file already there is found now, so that the record beside the write (round
    # trip 2) is left only by a creator that loses a race, never by a plain refusal.
    existing = rt.submit(files.store.head, key)
    new_key = rt.submit(files.keyring.generate, files.binding(parsed))
    usage = rt.submit(gate.tenant_usage)
    rt.submit(files.check_names_choice)  # once per process: no request when warm
    records = rt.submit(_records.sealer, files, [parsed])
    ancestor_heads = files.head_ancestors(rt, parsed)
    rt.wait()
    if is_dir.result() or existing.result() is not None:
        raise PathExistsError(f"Error: File {path} already exists")
    gate.check_quota(usage.result(), path, files=1, grow=len(data))
    for ancestor, head in zip(parsed.ancestors(), ancestor_heads, strict=True):
        if head.result() is not None:
            raise NotADirectoryConflict(
                f"Error: Cannot create {path}: {files.shown(ancestor)} is a file, not a directory"
            )
    finding = gate.instruction_verdict(parsed, path, None, text)  # a held write raises WriteHeldError
    data_key, wrapped = new_key.result()
    body, metadata = envelope.seal(data, data_key, wrapped)
    metadata, provenance = files.stamped(metadata, key, "created", data_key, finding=finding)
    # Round trip 2: the conditional write (of concurrent creators exactly one wins), and
    # beside it the record of who wrote it (one of a loser pairs with no version).
    rt = files.round_trip()
    rt.submit(files.store.put, key, body, metadata, if_none_match=True)
    rt.submit(records.result().write_beside, _records.version_record(parsed, provenance, body))
    try:
        rt.wait()
    except PreconditionFailedError:
        if not landed(files, parsed, path, data_key):
            raise PathExistsError(f"Error: File {path} already exists") from None
    return f"File created successfully at: {path}"


def landed(files: SealedFiles, parsed: MemoryPath, path: str, data_key: bytes) -> bool:
    """After a 412: whether the file at ``path`` is the version this call just wrote. A
    client that re-sends a conditional PUT whose answer was lost (a connection reset
    after S3 applied it) gets 412 for its own write, which must not count as a lost
    race. Each version has a fresh data key, so the key tells whose version it is."""
    try:
        current = files.read(parsed, path)
    except S3MemoryError:
        return False
    return current is not None and current.data_key == data_key


def edit(
    files: SealedFiles,
    gate: Gate,
    path: str,
    missing_message: str,
    apply: Callable[[str], tuple[str, T]],
    answer: Callable[[str, T], R],
) -> R:
    """Read, apply, screen, write back with If-Match; on a lost race re-read and re-apply.

    ``apply`` turns the file's text into the new text and what the answer needs;
    ``answer`` words the result from the text as written (after any redaction).
    """
    parsed = gate.parse(path)
    gate.writable("edit", path)
    if parsed.is_root or not files.names_ready():
        raise files.not_found(missing_message)
    limits, keyring, store = gate.limits, files.keyring, files.store
    binding = files.binding(parsed)
    written: tuple[bytes, R] | None = None  # the last attempt's data key and answer
    for attempt in range(limits.edit_attempts):
        # In the read's round trip: the quota's listing (edits add no file, so only a
        # byte quota needs it), and a KMS data key (a request).
        rt = files.round_trip()
        stored = files.fetch(rt, parsed, path)
        usage = rt.submit(gate.tenant_usage) if limits.max_tenant_bytes is not None else None
        fresh_key = rt.submit(keyring.generate, binding) if keyring.generates_remotely else None
        records = rt.submit(_records.sealer, files, [parsed])
        rt.wait()
        file = files.opened(parsed, path, stored.result())
        if written is not None and file is not None and file.data_key == written[0]:
            return written[1]  # the "lost" race was our own write, re-sent (see landed)
        if file is None:
            raise files.not_found(missing_message)
        new_text, detail = apply(file.text)
        if gate.screen_edit is not None:
            new_text = gate.screen_edit(file.text, new_text)
        data = files.encode(new_text, path)
        grow = len(data) - len(file.text.encode())
        gate.check_quota(None if usage is None else usage.result(), path, files=0, grow=grow)
        finding = gate.instruction_verdict(parsed, path, file.text, new_text)  # held: WriteHeldError
        # A fresh data key for every version (a local one in tenant-key mode): no two
        # versions of a file share a key, so none can be spliced onto another's metadata.
        data_key, wrapped = keyring.generate(binding) if fresh_key is None else fresh_key.result()
        body, metadata = envelope.seal(data, data_key, wrapped)
        key = files.layout.key_for(parsed)
        follows = files.provenance_in(file.metadata, key, file.data_key)
        metadata, provenance = files.stamped(metadata, key, "modified", data_key, follows=follows, finding=finding)
        rt = files.round_trip()
        rt.submit(store.put, key, body, metadata, if_match=file.etag)
        rt.submit(records.result().write_beside, _records.version_record(parsed, provenance, body))
        try:
            rt.wait()
            return answer(new_text, detail)
        except PreconditionFailedError:
            written = (data_key, answer(new_text, detail))
            time.sleep(random.uniform(0, 0.02 * 2**attempt))
    if written is not None and landed(files, parsed, path, written[0]):
        return written[1]
    # Contention, not unavailability: the store answered every request.
    raise PreconditionFailedError(
        f"Error: {path} is being changed by others at the same time; the edit was not applied. Try again."
    )


# -- the edit commands' text operations (pure) ------------------------------------------------
def check_replacement(old_str: object, new_str: object) -> tuple[str, str]:
    """``old_str`` and ``new_str`` of ``str_replace`` (or ``replace_all``), checked."""
    if not isinstance(old_str, str) or not isinstance(new_str, str):
        raise InvalidCommandError("Error: `old_str` and `new_str` must be strings.")
    if old_str == "":
        raise EditError("Error: `old_str` must not be empty.")
    return old_str, new_str


def replace_once(content: str, old_str: str, replacement: str, path: str, max_chars: int) -> tuple[str, int]:
    """``content`` with its one occurrence of ``old_str`` replaced, and the changed line (0-based)."""
    count = content.count(old_str)  # non-overlapping, as the reference counts
    if count == 0:
        raise _not_verbatim(old_str, path)
    if count > 1:
        raise EditError(render.multiple_occurrences(old_str, content, count, max_chars))
    position = content.find(old_str)
    changed_line = content.count("\n", 0, position)
    return content[:position] + replacement + content[position + len(old_str) :], changed_line


def replace_every(content: str, old_str: str, replacement: str, path: str) -> tuple[str, int]:
    """``content`` with every occurrence of ``old_str`` replaced, and how many there were."""
    count = content.count(old_str)
    if count == 0:
        raise _not_verbatim(old_str, path)
    return content.replace(old_str, replacement), count


def check_insertion(insert_line: object, insert_text: object) -> tuple[int, str]:
    """``insert_line`` and ``insert_text`` of ``insert``, checked."""
    if isinstance(insert_line, bool) or not isinstance(insert_line, int):
        raise InvalidCommandError("Error: `insert_line` must be an integer.")
    if not isinstance(insert_text, str):
        raise InvalidCommandError("Error: `insert_text` must be a string.")
    return insert_line, insert_text


def insert_after(content: str, insert_line: int, inserted: str) -> str:
    """``content`` with ``inserted`` after line ``insert_line`` (0: at the top)."""
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()
    if not 0 <= insert_line <= len(lines):
        raise EditError(
            f"Error: Invalid `insert_line` parameter: {render.short_repr(insert_line)}. It should be within "
            f"the range of lines of the file: [0, {len(lines)}]"
        )
    lines.insert(insert_line, inserted.rstrip("\n"))
    new_content = "\n".join(lines)
    if not new_content.endswith("\n"):
        new_content += "\n"
    return new_content


def _not_verbatim(old_str: str, path: str) -> EditError:
    return EditError(
        f"No replacement was performed, old_str `{render.excerpt(old_str)}` did not appear verbatim in {path}."
    )
