"""Delete: a file, or a directory with everything under it, page by page, with the record
of who deleted what beside the last deletes; and the clearing of a whole memory."""

from __future__ import annotations

import logging
from typing import Any

from .._crypto.files import SealedFiles
from .._errors import InvalidCommandError
from .._history import records as _records
from .._paths import MemoryPath
from .._roundtrip import Pending
from ..stores import ObjectInfo
from .gate import Gate

log = logging.getLogger("s3memory")


def delete(files: SealedFiles, gate: Gate, path: str) -> str:
    """The ``delete`` command (``EncryptedMemory.delete`` says what it raises and costs)."""
    parsed = gate.parse(path)
    gate.writable("delete", path)
    if parsed.is_root:
        raise InvalidCommandError(f"Error: Cannot delete the {files.shown_root} directory itself")
    if not files.names_ready():
        raise files.not_found(f"Error: The path {path} does not exist")
    store, layout = files.store, files.layout
    key = layout.key_for(parsed)
    pages = store.list_pages(layout.dir_prefix(parsed))

    def next_page() -> tuple[list[ObjectInfo], bool]:
        return next(pages, ([], False))

    rt = files.round_trip()
    head, first = rt.submit(store.head, key), rt.submit(next_page)
    # The history key too (cached after the first use), so no round trip waits on it.
    records = rt.submit(_records.sealer, files, [parsed])
    rt.wait()
    (page, more), found = first.result(), head.result()
    if found is None and not page:
        raise files.not_found(f"Error: The path {path} does not exist")
    deleted: list[ObjectInfo] = []
    while more:  # this page's deletes beside the next page's LIST
        rt = files.round_trip()
        gone = rt.submit(store.delete, [info.key for info in page])
        following = rt.submit(next_page)
        try:
            rt.wait()
        except Exception:
            # Recorded: the pages whose deletes were done (a failed one may be partly
            # gone; history then reads those versions' own provenance).
            deleted += page if _succeeded(gone) else []
            if deleted:
                records.result().write_beside(_deleted_record(files, parsed, deleted))
            raise
        deleted += page
        page, more = following.result()
    # The last deletes, and beside them the record of who deleted what.
    last = [*page, *([found] if found is not None else [])]
    deleted += last
    rt = files.round_trip()
    rt.submit(store.delete, [info.key for info in last])
    rt.submit(records.result().write_beside, _deleted_record(files, parsed, deleted))
    rt.wait()
    log.info("deleted %d objects", len(deleted))
    return f"Successfully deleted {path}"


def clear_all(files: SealedFiles, gate: Gate) -> str:
    """Every memory file of the user deleted (``EncryptedMemory.clear_all``)."""
    gate.writable("clear", files.shown_root)
    store, layout = files.store, files.layout
    infos = list(store.list(layout.memory_prefix))
    keys = [info.key for info in infos]
    if keys:
        # With them, the search index, which holds their text (rebuilt by the next search).
        store.delete([*keys, layout.index_key])
        from .._search import index as _index

        _index.forget(store, layout)
        # Who cleared it, for history: one record about the whole memory (the root).
        record = {"op": "deleted", "path": "/memories", "files": _records.listed_files(files, infos)}
        _records.sealer(files, [MemoryPath("")]).write_beside(record)
    log.info("cleared the memory of one tenant: %d objects deleted", len(keys))
    return "All memory cleared"


def _deleted_record(files: SealedFiles, parsed: MemoryPath, deleted: list[ObjectInfo]) -> dict[str, object]:
    return {"op": "deleted", "path": parsed.display, "files": _records.listed_files(files, deleted)}


def _succeeded(pending: Pending[Any]) -> bool:
    try:
        pending.result()
    except Exception:
        return False
    return True
