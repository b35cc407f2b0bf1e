"""The rename protocol: copy-then-delete, with an encrypted intent record to resume by.

``EncryptedMemory.rename`` parses the paths and delegates to :func:`rename`. The protocol,
in round trips:

1. Concurrently: HEAD and LIST of the old path, HEAD and LIST of the new path, the HEADs of
   the new path's ancestors, and a GET of the intent record of this very rename (left by an
   attempt that failed part-way). The checks: the source exists; nothing is at the
   destination but our own copies (:func:`only_our_copies`); no ancestor of the new path is
   a file; no target path would be too long (:func:`plan_moves`).
2. A directory, unless resuming: the intent record, PUT with ``If-None-Match: *``. It
   lists the ETags of the files being moved, sealed for a name no memory path can have.
   Beside it, the HEAD of every file below the old path (a listing carries no metadata,
   and each copy needs its source's data key). A single file needs neither: the survey
   HEADed it, and a copy of one file identifies itself (:func:`renamed_from`).
3. Every copy, concurrently: server-side, ``If-Match`` the source's ETag and ``If-None-Match:
   *`` on the target, the data key re-wrapped for the new path (:func:`copy_rewrapped`).
4. One DeleteObjects: the sources, each only if unchanged since its copy, and the record;
   beside it the history record (``_records``) about each path, which names each copy's
   provenance.

So a file moves in 3 round trips and a directory in 4. A failure part-way leaves each file
at its old path, its new path or both, and a directory's record; issuing the rename again
finishes the job: a directory's by its record, a file's because the copy at the
destination is of the very version at the source. ``tests/contract/test_stateful.py`` models the
protocol; ``tests/crypto/test_vectors.py`` freezes the record's key and format.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from .._crypto import envelope
from .._crypto.files import SealedFiles
from .._crypto.provenance import Provenance
from .._errors import (
    ForeignObjectError,
    IntegrityError,
    InvalidCommandError,
    InvalidPathError,
    NotADirectoryConflict,
    ObjectTooLargeError,
    PathExistsError,
    PreconditionFailedError,
)
from .._history import records as _records
from .._paths import MAX_S3_KEY_BYTES, MemoryPath
from .._roundtrip import reporting
from ..stores import ObjectInfo

T = TypeVar("T")

log = logging.getLogger("s3memory")

# Internal records are sealed for names no memory path can have (every memory path starts
# with /memories), so a memory file moved onto a record's key never opens as a record.
INTERNAL_RECORD_NAME = "s3memory-internal:"
MAX_INTENT_BYTES = 16 * 1024 * 1024  # a rename's record lists one ETag per file moved
RUNNING_ELSEWHERE = "Error: The same rename is already running elsewhere; try again in a moment."

Intent = dict[str, Any]


@dataclass(frozen=True)
class Move:
    """One copy of a rename. ``source``/``target`` are None for keys no valid path maps to."""

    source_key: str
    target_key: str
    source: MemoryPath | None
    target: MemoryPath | None
    head: ObjectInfo | None


def _bare(etag: str) -> str:
    """An ETag without its quotes (radosgw returns copy ETags unquoted)."""
    return etag.strip('"')


# -- the intent record ---------------------------------------------------------------------
def intent_key(files: SealedFiles, old: MemoryPath, new: MemoryPath) -> str:
    """Where the record of a rename of ``old`` to ``new`` lives: under the tenant's internal
    prefix, named by a hash of both paths (keyed, with encrypted names)."""
    tag = hashlib.sha256(files.path_name(f"{old.display}\n{new.display}").encode()).hexdigest()
    return files.layout.rename_intent_key(tag)


def intent_name(key: str) -> str:
    """The name an intent record is sealed for: not a memory path, so no file the model
    writes (``/memories/.s3memory/rename-...`` included) opens as a record when moved here."""
    return INTERNAL_RECORD_NAME + "intents/" + key.rsplit("/", 1)[1]


def write_intent(files: SealedFiles, key: str, record: Intent) -> None:
    """Seal and PUT ``record`` at ``key``, only if nothing is there."""
    data_key, wrapped = files.keyring.generate(files.binding_of_name(intent_name(key)))
    body, metadata = envelope.seal(json.dumps({"v": 1, **record}).encode(), data_key, wrapped)
    try:
        files.store.put(key, body, metadata, if_none_match=True)
    except PreconditionFailedError:
        raise PreconditionFailedError(RUNNING_ELSEWHERE) from None


def read_intent(files: SealedFiles, key: str) -> tuple[Intent | None, str | None]:
    """(the record of an unfinished rename, None), or (None, the ETag of an object at the
    record's key that is no record), or (None, None). An unreadable object (sealed by an
    older version, tampered with, planted) grants nothing: the rename behaves as if
    fresh, and replaces it."""
    try:
        stored = files.store.get(key, max_bytes=MAX_INTENT_BYTES)
    except ObjectTooLargeError:
        head = files.store.head(key)
        return None, None if head is None else head.etag
    if stored is None:
        return None, None
    try:
        plaintext = files.decrypt(intent_name(key), key, stored.body, stored.metadata)
        record = json.loads(plaintext)
    except (IntegrityError, ForeignObjectError, ValueError, RecursionError):
        return None, stored.etag
    if isinstance(record, dict) and isinstance(record.get("etags"), list):
        return record, None
    return None, stored.etag


def remove_stale_intent(files: SealedFiles, key: str, etag: str) -> None:
    """Delete the object at a record's key that is no record, only if it is still that one."""
    try:
        files.store.delete([key], if_match={key: etag})
    except PreconditionFailedError:
        raise PreconditionFailedError(RUNNING_ELSEWHERE) from None


def discard_stale_intent(files: SealedFiles, key: str, etag: str) -> None:
    """Delete the object at a record's key that is no record, if it is still that one; one
    that changed meanwhile is another rename's business."""
    try:
        remove_stale_intent(files, key, etag)
    except PreconditionFailedError:
        log.info("left an object at a rename record's key: it changed meanwhile")


# -- the resume rules ----------------------------------------------------------------------
def only_our_copies(
    intent: Intent | None,
    old_head: ObjectInfo | None,
    old_under: Sequence[ObjectInfo],
    new_head: ObjectInfo | None,
    new_under: Sequence[ObjectInfo],
    *,
    copy_of_source: bool = False,
) -> bool:
    """Whether everything at the destination is our own copy, in the shape this rename makes.

    Our own copies are the only thing allowed at the destination: when resuming, copies of
    the files the record lists (``intent["etags"]``) or of the sources as they are now (a
    copy keeps its source's ETag); with no record, the file at the destination if it is
    ``copy_of_source`` (see :func:`renamed_from`: a rename of one file writes no record),
    and nothing at all for a directory.

    And in the shape this rename makes: a file where a file goes (a file is moved: nothing
    below the new path), files below the new path where a directory goes (a directory is
    moved: no file at the new path itself). A copy left by an abandoned attempt at moving a
    directory must not end up below a file, nor the other way round.

    True when the destination is empty (and the shape holds, trivially).
    """
    at_destination = [*new_under, *([new_head] if new_head is not None else [])]
    ours: set[str] = set()
    if intent is not None:  # copies of the recorded versions, or of the sources as they are now
        ours = {_bare(etag) for etag in intent.get("etags", [])}
        ours |= {_bare(info.etag) for info in ([old_head] if old_head is not None else []) + list(old_under)}
    elif copy_of_source and old_head is not None and not old_under:
        ours = {_bare(old_head.etag)}
    if not all(_bare(info.etag) in ours for info in at_destination):
        return False
    return not ((old_head is not None and new_under) or (old_head is None and new_head is not None))


def provenance_at(files: SealedFiles, path: MemoryPath, info: ObjectInfo) -> Provenance | None:
    """The provenance sealed in the object ``info`` (a HEAD), if it opens for ``path``."""
    header = envelope.parse_header(info.metadata)
    data_key = files.keyring.unwrap(header.wrapped_key, files.stored_binding(path.display, header))
    return files.provenance_in(info.metadata, info.key, data_key)


def renamed_from(
    files: SealedFiles, old: MemoryPath, new: MemoryPath, old_head: ObjectInfo, new_head: ObjectInfo
) -> bool:
    """Whether the file at ``new`` is a rename's copy of the very version at ``old``: the same
    body (ETag), and its provenance, which opens only for ``new``, says "renamed" from the
    source's revision of the same file. A rename of one file writes no record, so this is
    how it knows its own copy when issued again. An equal ETag alone is not enough: the copy
    of a rename running the other way (b to a while a to b) has one too, and so does an
    object a bucket writer copied there whole. Costs a key unwrap of each (a KMS Decrypt in
    KMS mode unless cached), only when a file at the destination has the source's ETag."""
    if _bare(old_head.etag) != _bare(new_head.etag):
        return False
    try:
        source, copy = provenance_at(files, old, old_head), provenance_at(files, new, new_head)
    except (IntegrityError, ForeignObjectError):
        return False
    if source is None or copy is None:
        return False  # a file from before provenance: refused, as any file at the destination
    return copy.op == "renamed" and copy.prev == source.rev and copy.file == source.file


def leftover_in_the_way(targets: set[str], at_destination: Sequence[ObjectInfo]) -> bool:
    """Whether a copy left at the destination by an abandoned attempt, at a key this rename
    does not write, is in the way of one it does: below a file it writes, or a file above one.

    That happens when the source changed shape since the attempt (a directory became a file
    of the same name). Resuming would leave a file and a directory of one name; refusing
    (the destination exists) loses nothing, and the leftover can be looked at and deleted.
    """
    above_targets = {target[:index] for target in targets for index, char in enumerate(target) if char == "/"}
    for info in at_destination:
        if info.key in targets:
            continue
        if info.key in above_targets:
            return True  # a file where this rename needs a directory
        parts = info.key.split("/")
        if any("/".join(parts[:n]) in targets for n in range(1, len(parts))):
            return True  # below a file this rename writes
    return False


# -- the plan and the copies ---------------------------------------------------------------
def plan_moves(
    files: SealedFiles,
    old: MemoryPath,
    new: MemoryPath,
    old_head: ObjectInfo | None,
    old_under: Sequence[ObjectInfo],
    *,
    max_path_bytes: int,
    shown: tuple[str, str],
) -> list[Move]:
    """Every copy a rename makes; fails before any write if a target path would be too long.

    ``shown`` is (old path, new path) as the model wrote them, for the error.
    """
    layout = files.layout
    moves = []
    if old_head is not None:
        moves.append(Move(layout.key_for(old), layout.key_for(new), old, new, old_head))
    old_prefix, new_prefix = layout.dir_prefix(old), layout.dir_prefix(new)
    for info in old_under:
        suffix = info.key[len(old_prefix) :]
        source_path = layout.path_for_key(info.key)
        target_path = None
        if source_path is not None:
            target_path = new.child(source_path.relative[len(old.relative) + 1 :])
            too_long = len(target_path.relative.encode("utf-8")) > max_path_bytes
            if too_long or len(layout.key_for_unchecked(target_path).encode("utf-8")) > MAX_S3_KEY_BYTES:
                raise InvalidPathError(
                    f"Error: Cannot rename {shown[0]} to {shown[1]}: {files.shown(target_path)} would be "
                    "too long. Nothing was changed."
                )
        # The layout's key, not new_prefix + suffix: with encrypted names a key's segments
        # depend on their parent path, so every key below a renamed directory changes.
        target_key = new_prefix + suffix if target_path is None else layout.key_for_unchecked(target_path)
        moves.append(Move(info.key, target_key, source_path, target_path, None))
    return moves


def rewrapped_metadata(
    files: SealedFiles, info: ObjectInfo, move: Move, at_us: int, finding: str | None = None
) -> tuple[Mapping[str, str], Provenance | None]:
    """``info``'s metadata with its data key re-wrapped for ``target`` (the body, sealed under
    that data key, is copied as is) and the provenance of a renamed version of the same file
    (returned too, for the rename's record); unchanged if the object cannot be opened here,
    so a move never loses it."""
    assert move.source is not None and move.target is not None
    try:
        header = envelope.parse_header(info.metadata)
        data_key = files.keyring.unwrap(header.wrapped_key, files.stored_binding(move.source.display, header))
        rewrapped = files.keyring.wrap(data_key, files.binding(move.target))
    except (IntegrityError, ForeignObjectError):
        return info.metadata, None
    metadata = envelope.metadata_for(rewrapped, header.message_id, header.commitment)
    follows = files.provenance_in(info.metadata, move.source_key, data_key)
    return files.stamped(metadata, move.target_key, "renamed", data_key, follows=follows, at_us=at_us, finding=finding)


def copy_rewrapped(
    files: SealedFiles, move: Move, info: ObjectInfo | None, ours: str | None, at_us: int, finding: str | None = None
) -> tuple[str, str | None, Provenance | None]:
    """Copy one source (``info``: its HEAD) to its target; return (source key, the source
    ETag copied, the copy's provenance if this copy made it).

    ``ours``: the ETag of a copy an interrupted attempt at this rename left at the target,
    as the survey saw it. It is kept if it is a copy of this very version, else replaced by
    it, but only if it is still that copy: a file written there since is someone's edit.
    """
    store = files.store
    if info is None:
        return move.source_key, None, None  # deleted concurrently: nothing to move
    target_exists = False
    if ours is not None:
        existing = store.head(move.target_key)
        if existing is not None and _bare(existing.etag) == _bare(info.etag):
            return move.source_key, info.etag, None  # an earlier attempt's copy: history HEADs it
        if existing is not None and _bare(existing.etag) != _bare(ours):
            raise PreconditionFailedError(f"Error: {move.target_key} changed during the rename")
        target_exists = existing is not None
    metadata: Mapping[str, str] = info.metadata
    provenance = None
    if move.source is not None and move.target is not None:
        metadata, provenance = rewrapped_metadata(files, info, move, at_us, finding)
    store.copy(move.source_key, move.target_key, metadata=metadata, if_match=info.etag, if_none_match=not target_exists)
    return move.source_key, info.etag, provenance


# -- the protocol --------------------------------------------------------------------------
@dataclass(frozen=True)
class Survey:
    """What round trip 1 found: both sides, the record of an earlier attempt, the ancestors."""

    old_head: ObjectInfo | None  # a file at the old path
    old_under: list[ObjectInfo]  # objects below it
    new_head: ObjectInfo | None
    new_under: list[ObjectInfo]
    intent: Intent | None  # the record of an unfinished attempt at this very rename
    stale_intent: str | None  # the ETag of an object at the record's key that is no record
    ancestor_heads: list[ObjectInfo | None]  # of the new path's ancestors, nearest last

    @property
    def sources(self) -> list[ObjectInfo]:
        return ([self.old_head] if self.old_head is not None else []) + self.old_under

    @property
    def at_destination(self) -> list[ObjectInfo]:
        return self.new_under + ([self.new_head] if self.new_head is not None else [])


def survey(files: SealedFiles, old: MemoryPath, new: MemoryPath, record_key: str) -> Survey:
    """Round trip 1, concurrently: both sides, the new path's ancestors, and a record of an
    unfinished earlier attempt at this very rename."""
    store, layout = files.store, files.layout
    rt = files.round_trip()
    old_head, old_under = rt.submit(store.head, layout.key_for(old)), rt.submit(files.listed, old)
    new_head, new_under = rt.submit(store.head, layout.key_for(new)), rt.submit(files.listed, new)
    recorded = rt.submit(read_intent, files, record_key)
    ancestor_heads = files.head_ancestors(rt, new)
    rt.wait()
    intent, stale_intent = recorded.result()
    return Survey(
        old_head.result(),
        old_under.result(),
        new_head.result(),
        new_under.result(),
        intent,
        stale_intent,
        [head.result() for head in ancestor_heads],
    )


def head_sources_and_record(
    files: SealedFiles, moves: Sequence[Move], record: tuple[str, Intent] | None
) -> list[ObjectInfo | None]:
    """Round trip 2: the HEAD of every source the survey did not HEAD (S3 lists no metadata,
    and each copy must carry its source's data key re-wrapped), and beside them ``record``
    (its key and content), the intent record of a fresh rename of a directory. The HEADs
    are reads, so they need not wait for the record; the copies do."""
    rt = files.round_trip()
    heads = [None if move.head is not None else rt.submit(files.store.head, move.source_key) for move in moves]
    if record is not None:
        rt.submit(write_intent, files, *record)
    if record is not None or any(head is not None for head in heads):
        rt.wait()
    return [move.head if head is None else head.result() for move, head in zip(moves, heads, strict=True)]


def copy_all(
    files: SealedFiles,
    moves: Sequence[Move],
    heads: Sequence[ObjectInfo | None],
    ours: Mapping[str, str],
    progress: Callable[[int, int], None] | None,
    records_about: Sequence[MemoryPath],
    finding: str | None = None,
) -> tuple[dict[str, tuple[str, Provenance | None]], list[_records.Sealer]]:
    """Round trip 3: every copy, concurrently; the source ETag copied and the copy's
    provenance, by source key (a source deleted meanwhile is left out). ``ours``: the ETags
    of the copies of an earlier attempt, by target key. Beside them, what the history record about each of
    ``records_about`` needs (the history key, cached after its first use)."""
    at_us = int(time.time() * 1_000_000)  # the rename's one time, in its copies and its record
    if not files.store.concurrent and not ours and progress is None:
        return _copy_all_at_once(files, moves, heads, records_about, at_us, finding)
    copies = [
        functools.partial(copy_rewrapped, files, move, head, ours.get(move.target_key), at_us, finding)
        for move, head in zip(moves, heads, strict=True)
    ]
    rt = files.round_trip()
    copied = [rt.submit(copy) for copy in (reporting(copies, progress) if progress is not None else copies)]
    sealers = [rt.submit(_records.sealer, files, [about], at_us=at_us) for about in records_about]
    rt.wait()
    done = {source: (etag, provenance) for source, etag, provenance in (c.result() for c in copied) if etag is not None}
    return done, [pending.result() for pending in sealers]


def _copy_all_at_once(
    files: SealedFiles,
    moves: Sequence[Move],
    heads: Sequence[ObjectInfo | None],
    records_about: Sequence[MemoryPath],
    at_us: int,
    finding: str | None,
) -> tuple[dict[str, tuple[str, Provenance | None]], list[_records.Sealer]]:
    """:func:`copy_all` for a local store (not ``concurrent``) and a fresh destination: every
    copy's metadata first, then one ``copy_many`` (one lock, one sync of all the files
    instead of one per file). The first error is raised, as from a round trip."""
    made, asked = [], []
    for move, info in zip(moves, heads, strict=True):
        if info is None:
            continue  # deleted concurrently: nothing to move
        metadata, provenance = info.metadata, None
        if move.source is not None and move.target is not None:
            metadata, provenance = rewrapped_metadata(files, info, move, at_us, finding)
        made.append((move.source_key, info.etag, provenance))
        asked.append((move.source_key, move.target_key, metadata, info.etag, True))
    rt = files.round_trip()
    copied = rt.submit(files.store.copy_many, asked)
    sealers = [rt.submit(_records.sealer, files, [about], at_us=at_us) for about in records_about]
    rt.wait()
    failed = [result for result in copied.result() if isinstance(result, Exception)]
    if failed:
        raise failed[0]
    return {source: (etag, provenance) for source, etag, provenance in made}, [p.result() for p in sealers]


def rename(
    files: SealedFiles,
    old: MemoryPath,
    new: MemoryPath,
    shown: tuple[str, str],
    *,
    max_path_bytes: int,
    progress: Callable[[int, int], None] | None = None,
    finding: str | None = None,
) -> str:
    """Move ``old`` to ``new`` (see the module docstring); ``shown`` is (old path, new path) as
    the model wrote them; ``finding``, the instruction screen's on the new name, goes into
    every copy's provenance. Raises as ``EncryptedMemory.rename`` documents."""
    old_path, new_path = shown
    if old.is_root:
        raise InvalidCommandError("Error: Cannot rename the /memories directory itself")
    if new.is_root or new == old:
        raise PathExistsError(f"Error: The destination {new_path} already exists")
    if new.is_within(old):
        raise InvalidCommandError(f"Error: Cannot move {old_path} into itself ({new_path})")
    if not files.names_ready():
        raise files.not_found(f"Error: The path {old_path} does not exist")
    record_key = intent_key(files, old, new)
    seen = survey(files, old, new, record_key)
    copy_of_source = (
        seen.intent is None
        and seen.old_head is not None
        and seen.new_head is not None
        and not seen.old_under
        and not seen.new_under
        and renamed_from(files, old, new, seen.old_head, seen.new_head)
    )
    only_ours = only_our_copies(
        seen.intent, seen.old_head, seen.old_under, seen.new_head, seen.new_under, copy_of_source=copy_of_source
    )
    if not seen.sources:
        if seen.stale_intent is not None:
            remove_stale_intent(files, record_key, seen.stale_intent)
        if seen.intent is not None:
            files.store.delete([record_key])
            if seen.at_destination and only_ours:  # finished earlier; only the record was left
                return f"Successfully renamed {old_path} to {new_path}"
        raise files.not_found(f"Error: The path {old_path} does not exist")
    if not only_ours:
        raise PathExistsError(f"Error: The destination {new_path} already exists")
    for ancestor, head in zip(new.ancestors(), seen.ancestor_heads, strict=True):
        if head is not None:
            raise NotADirectoryConflict(
                f"Error: Cannot rename to {new_path}: {files.shown(ancestor)} is a file, not a directory"
            )
    moves = plan_moves(files, old, new, seen.old_head, seen.old_under, max_path_bytes=max_path_bytes, shown=shown)
    if seen.intent is not None and leftover_in_the_way({move.target_key for move in moves}, seen.at_destination):
        raise PathExistsError(f"Error: The destination {new_path} already exists")

    # A rename of one file writes no record: its copy identifies itself (only_our_copies).
    new_record: tuple[str, Intent] | None = None
    if seen.intent is None and seen.old_under:
        if seen.stale_intent is not None:
            remove_stale_intent(files, record_key, seen.stale_intent)
        etags = sorted({_bare(info.etag) for info in seen.sources})
        new_record = (record_key, {"op": "rename", "old": old.display, "new": new.display, "etags": etags})
    heads = head_sources_and_record(files, moves, new_record)
    try:
        ours = {info.key: info.etag for info in seen.at_destination}  # all ours, as checked
        copied, sealers = copy_all(files, moves, heads, ours, progress, [old, new], finding)
    except PreconditionFailedError:
        raise PreconditionFailedError(
            f"Error: {old_path} or {new_path} changed while it was being renamed; nothing was lost. "
            "Issue the same rename again to finish it."
        ) from None
    try:  # round trip 4: the sources (each only if unchanged since its copy) and, with them, the
        # intent record; beside them, the history record of who moved what
        rt = files.round_trip()
        copied_etags = {source: etag for source, (etag, _) in copied.items()}
        recorded = [record_key] if seen.intent is not None or new_record is not None else []
        rt.submit(files.store.delete, [*copied_etags, *recorded], if_match=copied_etags)
        if not recorded and seen.stale_intent is not None:  # what a directory's rename removes first
            rt.submit(discard_stale_intent, files, record_key, seen.stale_intent)
        moved = [(m.source, m.target, *copied[m.source_key]) for m in moves if m.source_key in copied]
        record = _records.rename_record(old, new, moved)
        for sealer in sealers:  # concurrently, beside the delete
            rt.submit(sealer.write_beside, record)
        rt.wait()
    except PreconditionFailedError:
        raise PreconditionFailedError(
            f"Error: Some files under {old_path} were edited while being renamed. Their newer versions "
            f"were left at {old_path} and older copies are at {new_path}; nothing was lost."
        ) from None
    log.info("renamed: %d files moved%s", len(moves), " (an unfinished rename resumed)" if seen.intent else "")
    return f"Successfully renamed {old_path} to {new_path}"
