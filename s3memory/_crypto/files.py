"""Sealed files of one tenant: bind, encode, read and open, list; and typed round trips.

:class:`SealedFiles` is what both the commands (``_memory``) and the rename protocol
(``_rename``) need below the memory tool's rules: the store, the layout and the keyring of
one tenant, what a file is bound to, how a stored file is fetched (bounded) and opened (one
opaque integrity error), and which files lie below a directory. It knows no command.

Its round trips are ``_roundtrip``'s, on one worker pool per tenant.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

from .._errors import (
    ConfigurationError,
    ForeignObjectError,
    IntegrityError,
    InvalidCommandError,
    LimitExceededError,
    ObjectTooLargeError,
    PathNotFoundError,
    TenantKeyError,
)
from .._layout import NAMES_KEY, TenantLayout
from .._paths import ROOT, MemoryPath
from .._roundtrip import Pending, RoundTrip
from ..stores import ObjectInfo, ObjectStore, StoredObject
from . import envelope
from .cache import process_key_cache
from .historykey import HistoryKey
from .keyring import Keyring
from .names import looks_sealed
from .provenance import (
    DEFAULT_ACTOR,
    KEY_DOES_NOT_UNWRAP,
    NO_PROVENANCE,
    PROVENANCE_FAILED,
    PROVENANCE_METADATA,
    Provenance,
    new_file_id,
    new_rev,
    open_provenance,
    with_provenance,
)

T = TypeVar("T")
P = ParamSpec("P")

ENCRYPTED_NAMES_EXPECTED = (
    "Error: This memory was written with encrypted names, so its files cannot be listed or read without "
    "them: open it with encrypt_names=True (the CLI's --encrypt-names, S3MEMORY_ENCRYPT_NAMES=1)."
)


def plaintext_size(info: ObjectInfo) -> int:
    """A stored file's plaintext size: a V3 body is the plaintext plus a 16-byte GCM tag."""
    size = info.size - envelope.TAG_BYTES
    return size if size > 0 else 0


@dataclass
class TextFile:
    """A decrypted file, with the ETag an edit writes it back against, and its metadata and
    data key (which open its provenance)."""

    text: str
    etag: str
    metadata: Mapping[str, str] = field(default_factory=dict)
    data_key: bytes = field(default=b"", repr=False)


class SealedFiles:
    """The encrypted files of one tenant in one store (see the module docstring).

    ``max_file_bytes`` bounds what is written and what is read (a larger stored object is
    refused, not read into memory); ``max_workers`` bounds the requests of one round trip.
    """

    def __init__(
        self,
        store: ObjectStore,
        layout: TenantLayout,
        keyring: Keyring,
        *,
        max_file_bytes: int,
        max_workers: int,
        actor: str = DEFAULT_ACTOR,
        history_key: HistoryKey | None = None,
        shown_root: str = ROOT,
    ) -> None:
        self.store = store
        self.history_key = history_key
        self.shown_root = shown_root
        self.layout = layout
        self.keyring = keyring
        self.actor = actor
        self.max_file_bytes = max_file_bytes
        self.max_workers = max_workers
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def shown(self, path: MemoryPath) -> str:
        """``path`` of this store as the model sees it: below the mount point when the store
        is mounted (``/memories/team/a.md`` for the store's ``/memories/a.md``). Stored names,
        bindings and records always use the store's own ``path.display``."""
        if self.shown_root == ROOT:
            return path.display
        return f"{self.shown_root}/{path.relative}" if path.relative else self.shown_root

    # -- plumbing ------------------------------------------------------------------------
    def round_trip(self) -> RoundTrip:
        """A new round trip over this tenant's worker threads; for a store that is not
        ``concurrent`` (a local one), its calls run on the calling thread, in one batch."""
        if not self.store.concurrent:
            return RoundTrip(self._executor, inline=self.store.batch)
        return RoundTrip(self._executor)

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            with self._pool_lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix="s3memory")
        return self._pool

    def close(self) -> None:
        """Stop the worker threads (they are also stopped at interpreter exit)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    # -- provenance ----------------------------------------------------------------------
    def data_key_of(self, name: str, metadata: Mapping[str, str]) -> bytes:
        """The data key of a stored version written for ``name`` (a path's display form):
        local in tenant-key mode, one KMS ``Decrypt`` in KMS mode. ``IntegrityError`` (and
        ``ForeignObjectError``) as for :meth:`decrypt`."""
        header = envelope.parse_header(metadata)
        return self.keyring.unwrap(header.wrapped_key, self.stored_binding(name, header))

    def provenance_of(self, name: str, object_key: str, metadata: Mapping[str, str]) -> tuple[Provenance | None, str]:
        """The provenance of a stored version written for ``name`` at ``object_key``, opened
        with its data key (unwrapped here: a KMS ``Decrypt`` in KMS mode); or None and why."""
        if PROVENANCE_METADATA not in metadata:
            return None, NO_PROVENANCE
        try:
            data_key = self.data_key_of(name, metadata)
        except (IntegrityError, ForeignObjectError):
            return None, KEY_DOES_NOT_UNWRAP
        try:
            return open_provenance(data_key, metadata, object_key), ""
        except (LookupError, IntegrityError):
            return None, PROVENANCE_FAILED

    def provenance_in(self, metadata: Mapping[str, str], object_key: str, data_key: bytes) -> Provenance | None:
        """The provenance of a version whose data key is known; None if it has none that
        opens (written before history was kept, or tampered with: history says which)."""
        try:
            return open_provenance(data_key, metadata, object_key)
        except (LookupError, IntegrityError):
            return None

    def stamped(
        self,
        metadata: Mapping[str, str],
        object_key: str,
        op: str,
        data_key: bytes,
        *,
        follows: Provenance | None = None,
        at_us: int | None = None,
        finding: str | None = None,
    ) -> tuple[dict[str, str], Provenance]:
        """``metadata`` with the provenance of this write sealed in under its ``data_key``, and
        that provenance (which the write's record repeats):
        a new file unless it ``follows`` an earlier version (whose file id and birth it keeps); made
        now, or at ``at_us`` (a rename gives its copies and its record one time).

        A history key made for this write and not stored yet is stored now: the write is
        about to land, past every refusal, and its key document lands before it."""
        if self.history_key is not None:
            self.history_key.commit_pending()
        at = int(time.time() * 1_000_000) if at_us is None else at_us
        provenance = Provenance(
            op,
            at,
            self.actor,
            new_file_id() if follows is None else follows.file,
            new_rev(),
            None if follows is None else follows.rev,
            finding,
            at if follows is None else follows.born_us,
        )
        return with_provenance(metadata, provenance, data_key, object_key), provenance

    # -- binding -------------------------------------------------------------------------
    def path_name(self, shown: str) -> str:
        """What binding contexts hash for a path: the path itself, or with encrypted names a
        keyed tag of it (an unkeyed hash in the metadata would confirm guessed names)."""
        return shown if self.layout.names is None else self.layout.names.path_tag(shown)

    def names_ready(self, *, create: bool = False) -> bool:
        """Whether paths have keys yet: always with names in clear; with encrypted names,
        once the tenant's names key exists (loaded; with ``create``, created first if the
        tenant has none: only a command writing a new file asks). Every command asks before
        it computes a key, and a path without one does not exist."""
        return self.layout.names is None or self.layout.names.key_exists(create=create)

    def binding(self, path: MemoryPath) -> dict[str, str]:
        """What a file written now at ``path`` is bound to (binding version 2)."""
        return self.binding_of_name(path.display)

    def binding_of_name(self, name: str, *, legacy: bool = False) -> dict[str, str]:
        version = 1 if legacy else 2
        return envelope.binding_context(
            self.layout.tenant, self.path_name(name), prefix=self.layout.prefix, version=version
        )

    def stored_binding(self, name: str, header: envelope.EnvelopeHeader) -> dict[str, str]:
        """What a stored object at ``name`` must be bound to, by the version its header
        claims: an object written before deployments were bound (s3memory 0.1) is still read."""
        return self.binding_of_name(name, legacy=envelope.is_unbound_legacy(header.wrapped_key.context))

    # -- encode and open -----------------------------------------------------------------
    def encode(self, text: str, shown_path: str) -> bytes:
        """``text`` as UTF-8, refused over ``max_file_bytes``."""
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidCommandError("Error: The text is not valid Unicode (it has lone surrogates)") from None
        if len(data) > self.max_file_bytes:
            raise LimitExceededError(
                f"Error: File {shown_path} would be {len(data):,} bytes, over the limit of "
                f"{self.max_file_bytes:,} bytes. Nothing was written; keep memory files "
                "small and split large content across several files."
            )
        return data

    def decrypt(self, name: str, shown_path: str, body: bytes, metadata: Mapping[str, str]) -> bytes:
        """Open an object stored for ``name`` (a path's display form, or an internal record's name)."""
        return self.decrypt_with_key(name, shown_path, body, metadata)[0]

    def decrypt_with_key(
        self, name: str, shown_path: str, body: bytes, metadata: Mapping[str, str]
    ) -> tuple[bytes, bytes]:
        """(plaintext, data key) of an object stored for ``name``; raises as :meth:`decrypt`."""
        try:
            data_key = self.data_key_of(name, metadata)
            return envelope.open_body(body, data_key, envelope.parse_header(metadata)), data_key
        except ForeignObjectError:
            raise ForeignObjectError(
                f"Error: The file {shown_path} was not written by s3memory (it is not encrypted) and cannot be read."
            ) from None
        except TenantKeyError:
            raise  # says what is wrong with the tenant key, which is not about this file
        except IntegrityError:
            # Opened without encrypted names, a file written with them fails its binding.
            self.check_names_choice()
            # Whatever failed (commitment, tag, context, KMS refusing the key): one message.
            raise IntegrityError(
                f"Error: The file {shown_path} failed its integrity check and cannot be read "
                "(it was modified, truncated, moved, or not written for this user)."
            ) from None

    # -- reading -------------------------------------------------------------------------
    def fetch(self, rt: RoundTrip, path: MemoryPath, shown_path: str) -> Pending[StoredObject | None]:
        """Submit the GET of a file (not the root) to ``rt``, and on a cold process the
        tenant key's fetch alongside it."""
        stored = rt.submit(self._get_file, self.layout.key_for(path), shown_path)
        if not self.keyring.is_warm():
            rt.submit(self.keyring.prepare)
        return stored

    def opened(self, path: MemoryPath, shown_path: str, stored: StoredObject | None) -> TextFile | None:
        """The text of a file fetched by :meth:`fetch`, or None if there was none."""
        if stored is None:
            return None
        plaintext, data_key = self.decrypt_with_key(path.display, shown_path, stored.body, stored.metadata)
        try:
            text = plaintext.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidCommandError(f"Error: The file {shown_path} is not UTF-8 text and cannot be shown.") from None
        return TextFile(text, stored.etag, stored.metadata, data_key)

    def read(self, path: MemoryPath, shown_path: str) -> TextFile | None:
        """Fetch and decrypt a file, in one round trip; None if there is none (or it is the root)."""
        if path.is_root:
            return None
        rt = self.round_trip()
        stored = self.fetch(rt, path, shown_path)
        rt.wait()
        return self.opened(path, shown_path, stored.result())

    def _get_file(self, key: str, shown_path: str) -> StoredObject | None:
        # Bounded: a planted multi-gigabyte object is refused, not read into memory.
        try:
            return self.store.get(key, max_bytes=self.max_file_bytes + envelope.TAG_BYTES)
        except ObjectTooLargeError as exc:
            size = "" if exc.size is None else f" ({exc.size - envelope.TAG_BYTES:,} bytes)"
            raise ObjectTooLargeError(
                f"Error: The file {shown_path} is larger{size} than the limit of {self.max_file_bytes:,} "
                "bytes and was not read (raise Limits.max_file_bytes to read it).",
                size=exc.size,
            ) from None

    # -- listing -------------------------------------------------------------------------
    def files_under(self, directory: MemoryPath) -> list[tuple[MemoryPath, ObjectInfo]]:
        """Every valid file below ``directory``; keys no valid path maps to are skipped."""
        path_of = self.layout.path_reader()
        listing = self.store.list(self.layout.dir_prefix(directory))
        found = [(path, info) for info in listing if (path := path_of(info.key)) is not None]
        # Every name looking like a sealed one: written with encrypted names? (One name that
        # does not settles it, so a listing looks at no more than its first few.)
        if found and self.layout.names is None and all(looks_sealed(path.relative) for path, _ in found):
            self.check_names_choice()
        return found

    def sizes_under(self, directory: MemoryPath) -> list[tuple[MemoryPath, int]]:
        """:meth:`files_under`, each file with its plaintext size (what a directory's view
        shows), from the store's ``list_sizes``: no ``ObjectInfo`` a file where it spares one."""
        path_of = self.layout.path_reader()
        tag = envelope.TAG_BYTES
        listing = self.store.list_sizes(self.layout.dir_prefix(directory))
        found = [(path, size - tag if size > tag else 0) for key, size in listing if (path := path_of(key)) is not None]
        if found and self.layout.names is None and all(looks_sealed(path.relative) for path, _ in found):
            self.check_names_choice()
        return found

    def listed(self, directory: MemoryPath) -> list[ObjectInfo]:
        """Every object below ``directory`` (keys no valid path maps to included)."""
        return list(self.store.list(self.layout.dir_prefix(directory)))

    def has_objects_under(self, directory: MemoryPath) -> bool:
        return any(True for _ in self.store.list(self.layout.dir_prefix(directory), limit=1))

    def head_ancestors(self, rt: RoundTrip, path: MemoryPath) -> list[Pending[ObjectInfo | None]]:
        """Submit to ``rt`` a HEAD of each ancestor of ``path`` (a file there is a conflict)."""
        return [rt.submit(self.store.head, self.layout.key_for(a)) for a in path.ancestors()]

    # -- what is missing -----------------------------------------------------------------
    def not_found(self, message: str) -> PathNotFoundError:
        """The error for a missing path; but a memory opened without the encrypted names it
        was written with misses every path, and that is the error to report."""
        self.check_names_choice()
        return PathNotFoundError(message)

    def check_names_choice(self) -> None:
        """Refuse, with the fix, to use without encrypted names a memory written with them
        (its tenant has a names key): its files would show as sealed names, fail every read,
        and new files would be invisible to the memory opened as it should be. One HEAD per key
        cache lifetime and tenant; the other way round, the names key loader refuses."""
        if self.layout.names is not None:
            return
        # Remembered in the key cache, as long as a key would be (15 minutes by default).
        cache = self.keyring.key_cache or process_key_cache()
        names_key = self.layout.key_document(NAMES_KEY)
        marker = ("no names key", self.store.identity, names_key)
        if cache.get(marker):
            return
        if self.store.head(names_key) is not None:
            raise ConfigurationError(ENCRYPTED_NAMES_EXPECTED)
        cache.put(marker, True)
