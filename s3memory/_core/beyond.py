"""What a memory offers beyond the six commands, which never see it: history, search and the
review of held writes, as the methods :class:`~s3memory.EncryptedMemory` inherits.

Each group is a small base class over the store's sealed files and gate (``files``,
``gate``); the work is done in its own room (``_history``, ``_search``, ``quarantine``),
so these methods check the path and say, in their docstrings, what the caller may meet.
"""

from __future__ import annotations

import datetime
from typing import Protocol, cast

from .. import _telemetry
from .._crypto.files import SealedFiles
from .._errors import VersionNotFoundError
from .._history import listing as _history
from .._history import versions as _versions
from .._history.entries import MemoryVersion
from .._paths import ROOT
from .._search.query import DEFAULT_LIMIT, SearchResult, check_limit, parse_query, render_results, search_texts
from . import quarantine as _quarantine
from .gate import Gate
from .limits import Limits
from .quarantine import PendingWrite


class _OneStore:
    """What the methods below need of the memory they are part of."""

    files: SealedFiles
    gate: Gate
    limits: Limits


class HistoryMethods(_OneStore):
    """History: every version of a file, what changed under a directory, restore, redact."""

    @_telemetry.traced("history", _telemetry.SEARCH, records=len)
    def history(self, path: str) -> list[MemoryVersion]:
        """Every version of the file at ``path``, newest first: also of a deleted file, and
        from before it was renamed here. One round of requests (listings, whose record names
        hold the provenance), one more per rename followed, and a second round (at most
        ``Limits.max_workers`` requests at once) only for versions no record tells, a HEAD
        each (see ``_history``).

        Raises:
            InvalidPathError: ``path`` is not a valid file path under ``/memories``.
            ConfigurationError: the store keeps no versions (bucket versioning is off).
        """
        parsed = self.gate.file_path(path)
        if not self.files.names_ready():
            return []
        return _history.history(self.files, parsed)

    @_telemetry.traced("read_version", _telemetry.SEARCH, records=1)
    def read_version(self, path: str, version: str) -> str:
        """The text of one version of ``path`` (an id from :meth:`history`).

        Raises:
            VersionNotFoundError: ``path`` has no such version, or it was redacted.
            InvalidPathError, ConfigurationError: as for :meth:`history`.
            IntegrityError: the version fails its integrity check.
        """
        parsed = self.gate.file_path(path)
        if not self.files.names_ready():
            raise VersionNotFoundError(f"Error: {self.files.shown(parsed)} has no version {version!r}.")
        return _versions.read_version(self.files, parsed, version)

    @_telemetry.traced("restore", _telemetry.UPDATE, records=1)
    def restore(self, path: str, version: str) -> str:
        """Write ``version`` of ``path`` back as its newest version (compare-and-swap:
        ``PreconditionFailedError`` if the file changes meanwhile); a deleted file comes back.

        Raises:
            VersionNotFoundError, InvalidPathError, ConfigurationError, IntegrityError: as
                for :meth:`read_version`.
            PathExistsError: a directory is at ``path`` now.
            NotADirectoryConflict: an ancestor of ``path`` is a file now.
            PreconditionFailedError: the file changed while it was being restored.
        """
        parsed = self.gate.file_path(path)
        self.gate.writable("restore", path)
        if not self.files.names_ready():
            raise VersionNotFoundError(f"Error: {self.files.shown(parsed)} has no version {version!r}.")
        return _versions.restore(self.files, parsed, version)

    @_telemetry.traced("redact", _telemetry.UPDATE, records=1)
    def redact(self, path: str, version: str) -> str:
        """Delete the text of one earlier version of ``path`` for good (leaked secrets,
        personal data, deletion requests), wherever the user's memory stores it: every
        version with the same text at any path, the writes held for review made on it and the
        search index. History entries stay, saying who made each and when, and who redacted it.

        Raises:
            VersionNotFoundError, InvalidPathError: as for :meth:`read_version`.
            ConfigurationError: the text is the current content of a file (this one or
                another: edit or delete it first), or the store keeps no versions.
        """
        parsed = self.gate.file_path(path)
        self.gate.writable("redact", path)
        if not self.files.names_ready():
            raise VersionNotFoundError(f"Error: {self.files.shown(parsed)} has no version {version!r}.")
        return _versions.redact(self.files, parsed, version, held_writes=_quarantine)

    @_telemetry.traced("changes", _telemetry.SEARCH, records=len)
    def changes(
        self,
        path_prefix: str = "/memories",
        *,
        operation: str | None = None,
        actor: str | None = None,
        since: datetime.datetime | None = None,
        until: datetime.datetime | None = None,
    ) -> list[MemoryVersion]:
        """Every change under ``path_prefix`` (a directory), newest first, optionally only of
        one ``operation`` (created, modified, renamed, restored, deleted, redacted), by one
        ``actor``, or between ``since`` and ``until`` (aware datetimes). Round trips as
        :meth:`history`, with every record listed in 16 parts at once.

        Raises:
            InvalidPathError: ``path_prefix`` is not a valid path under ``/memories``.
            ConfigurationError: a bad ``operation``, or the store keeps no versions.
        """
        parsed = self.gate.parse(path_prefix)
        if not self.files.names_ready():
            return []
        return _history.changes(
            self.files, directory=parsed, operation=operation, actor=actor, since=since, until=until
        )


class SearchMethods(_OneStore):
    """Search (the optional ``memory_search`` tool), client-side over the sealed index."""

    def search_corpus(self, path_prefix: str | None = None) -> list[tuple[str, str]]:
        """(path as shown, text) of every file at or below ``path_prefix`` (the whole store by
        default), from the sealed search index (``_index``): one round trip when nothing
        changed since this process last looked, at most three otherwise. A read-only store's
        index is refreshed in this process only, never written back.

        Raises:
            InvalidPathError: ``path_prefix`` is not a valid path under ``/memories``.
        """
        directory = self.gate.parse(self.files.shown_root if path_prefix is None else path_prefix)
        if not self.files.names_ready():
            return []
        from .._search import index as _index

        indexed = _index.current_files(self.files, write_back=not self.gate.read_only)
        return [(self.files.shown(f.path), f.text) for f in indexed if f.path.is_within(directory)]

    @_telemetry.traced("search", _telemetry.SEARCH, records=len)
    def search(
        self, query: object, path_prefix: str | None = None, limit: object = DEFAULT_LIMIT
    ) -> list[SearchResult]:
        """The files under ``path_prefix`` whose text contains every word (or ``"quoted
        phrase"``) of ``query``, case-insensitively, best first, at most ``limit`` (1 to 100),
        each with up to three matching lines (number, snippet); see ``_search``. Client-side:
        the store sees a listing and the sealed index object, never the query or the hits.

        Raises:
            InvalidCommandError: the query is empty or over 1,000 characters, or a bad ``limit``.
            InvalidPathError: ``path_prefix`` is not a valid path under ``/memories``.
        """
        return search(self, query, path_prefix, limit)[0]

    @_telemetry.traced("search", _telemetry.SEARCH)
    def search_answer(self, query: object, path_prefix: str | None = None, limit: object = DEFAULT_LIMIT) -> str:
        """:meth:`search` as the ``memory_search`` tool answers it: the matching files, their
        lines numbered as ``view`` numbers them, or ``No matches for "query" under /memories.``"""
        return search_answer(self, query, path_prefix, limit)


class ReviewMethods(_OneStore):
    """The review of writes held by the instruction policy (``quarantine``)."""

    def pending(self) -> list[PendingWrite]:
        """The writes held for review (``instruction_policy="quarantine"``), oldest first. A
        pending object that does not open (tampered with, planted, moved) is left out."""
        return _quarantine.pending(self.files)

    def approve(self, pending_id: str) -> str:
        """Apply a held write as the file's newest version, then remove it from the queue;
        only onto the file it was held against (compare-and-swap), as this memory's actor.

        Raises:
            PathNotFoundError: no pending write has this id, or the file it edits is gone.
            IntegrityError: the pending write does not open; it is never applied.
            EditError, PathExistsError: the file changed (or was created) since; nothing was written.
            SensitiveDataError, LimitExceededError, NotADirectoryConflict: as for :meth:`create`.
        """
        self.gate.writable("approve", pending_id)
        return _quarantine.approve(cast("_quarantine.Reviewable", self), pending_id)

    def reject(self, pending_id: str) -> str:
        """Remove a held write without applying it (also one that does not open).

        Raises:
            PathNotFoundError: no pending write has this id.
        """
        self.gate.writable("reject", pending_id)
        return _quarantine.reject(self.files, pending_id)


# -- search over any memory that offers its corpus (one store, or a mounted tree) ----------
class SearchCorpus(Protocol):
    """What search reads: every file's (path as shown, text) at or below a path."""

    limits: Limits

    def search_corpus(self, path_prefix: str | None = None) -> list[tuple[str, str]]: ...


def search(
    memory: SearchCorpus, query: object, path_prefix: str | None, limit: object
) -> tuple[list[SearchResult], int]:
    """The best matches of ``query`` under ``path_prefix`` and how many files were searched;
    the query and the limit are checked before any request."""
    parsed_query, checked_limit = parse_query(query), check_limit(limit)
    corpus = memory.search_corpus(path_prefix)
    return search_texts(corpus, parsed_query, limit=checked_limit), len(corpus)


def search_answer(memory: SearchCorpus, query: object, path_prefix: str | None, limit: object) -> str:
    """The ``memory_search`` tool's answer (``_search.render_results``)."""
    results, searched = search(memory, query, path_prefix, limit)
    shown_prefix = ROOT if path_prefix is None else path_prefix
    return render_results(
        str(query), results, searched=searched, path_prefix=shown_prefix, max_chars=memory.limits.max_view_chars
    )
