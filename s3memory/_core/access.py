"""Access tracking: the markers that record a read, and the log that keeps them to one a day.

A write is visible in an object's own LastModified; a read is not. With ``track_access``,
the first read of a file per day and :class:`AccessLog` also PUTs an empty marker object,
``{tenant}/.s3memory/access/{sha256(key)[:32]}``, tagged :data:`ACCESS_MARKER_TAGS` so a
bucket lifecycle rule can expire markers (``_policy``); ``_expiry`` reads them back.

The log is injectable (``open_memory(..., access_log=AccessLog())``); by default every memory of the
process shares :data:`PROCESS_ACCESS_LOG`, so a file costs one PUT a day per process however
many memories are opened on it.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from .._errors import S3MemoryError
from .._layout import ACCESS_MARKERS_FOLDER, TenantLayout

if TYPE_CHECKING:  # for the annotation only: the policy documents import this module without the stores
    from ..stores import ObjectStore

log = logging.getLogger("s3memory")

ACCESS_MARKERS = ACCESS_MARKERS_FOLDER  # under the tenant's internal prefix
ACCESS_MARKER_TAGS = {"s3memory": "access"}  # a bucket lifecycle rule expires markers by this tag


def access_marker_key(layout: TenantLayout, key: str) -> str:
    """Where a read of ``key`` is recorded: an empty object whose LastModified is the day
    of the last read (``TenantLayout.access_marker_key``)."""
    return layout.access_marker_key(key)


class AccessLog:
    """Which markers were already written today, so a file costs one PUT a day.

    Thread-safe. Forgets everything at midnight UTC, and when it holds ``max_entries``.
    """

    def __init__(self, max_entries: int = 100_000) -> None:
        self._day = ""
        self._seen: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._max_entries = max_entries

    def first_today(self, store: str, marker: str) -> bool:
        """Whether ``marker`` in ``store`` (its identity) is new today; it is not, after this."""
        today = time.strftime("%Y-%m-%d", time.gmtime())
        with self._lock:
            if today != self._day or len(self._seen) >= self._max_entries:
                self._day, self._seen = today, set()
            if (store, marker) in self._seen:
                return False
            self._seen.add((store, marker))
            return True

    def forget(self, store: str, marker: str) -> None:
        """Undo :meth:`first_today` for a marker that could not be written."""
        with self._lock:
            self._seen.discard((store, marker))


PROCESS_ACCESS_LOG = AccessLog()  # the default: one per process


def record_access(store: ObjectStore, layout: TenantLayout, access_log: AccessLog, key: str) -> None:
    """Record a read of ``key`` today, unless ``access_log`` says it already was.

    Never raises a store error: bookkeeping must never fail a read (a marker that could not
    be written is logged, and tried again on the next read).
    """
    marker = access_marker_key(layout, key)
    if not access_log.first_today(store.identity, marker):
        return
    try:
        store.put(marker, b"", {}, tags=ACCESS_MARKER_TAGS)
    except S3MemoryError as exc:
        access_log.forget(store.identity, marker)
        # Not the exception itself: its cause is botocore's, whose text has the request's URL,
        # and with it the tenant and the file name.
        log.warning("could not record an access to a file (expiry may count it unread): %s", type(exc).__name__)
