"""Where a tenant's objects live: every object key s3memory reads or writes comes from here.

One tenant owns two key prefixes, and nothing outside them::

    {prefix}{tenant}/memories/{path}                  memory files (path sealed with encrypted names)
    {prefix}{tenant}/.s3memory/tenant-key             key documents (``_crypto.keydocs``): the tenant key,
    {prefix}{tenant}/.s3memory/names-key                with encrypted names the names key,
    {prefix}{tenant}/.s3memory/history-key              and the key of listable records (``_crypto.historykey``)
    {prefix}{tenant}/.s3memory/intents/rename-{tag}   a rename's intent record (``_rename``)
    {prefix}{tenant}/.s3memory/access/{hash}          a read's marker (``_access``, ``_expiry``)
    {prefix}{tenant}/.s3memory/history/{tag}/{time}-{id}  a change's record (``_records``)
    {prefix}{tenant}/.s3memory/index/v1               the sealed search index (``_index``)

The internal families are disjoint: a key document's name is one segment ending ``-key``
directly under ``.s3memory/``; every other family is a folder whose names never end so
(``tests/core/test_layout.py``). Mounting another store is another :class:`TenantLayout` (its own
tenant id and keys), not a new family.

Computing a key makes no request of its own, except that with encrypted names the tenant's
names key is loaded on first use (one GET, then cached). It never creates an object: the
names key is created only by :meth:`s3memory._crypto.names.NameCipher.create_key`, which the
commands that write a new file call first (``SealedFiles.names_ready``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

from ._errors import InvalidPathError
from ._paths import (
    MAX_S3_KEY_BYTES,
    RESERVED_SEGMENT,
    ROOT,
    MemoryPath,
    is_plain_canonical,
    parse_path,
    refuse_path,
    validate_prefix,
    validate_tenant,
)

#: The folder of memory files in a tenant's namespace (never a tenant id: ``validate_tenant``).
MEMORY_FOLDER = f"{RESERVED_SEGMENT}/"
#: The folder of internal objects (neither a tenant id nor a prefix segment starts with ".").
INTERNAL_FOLDER = ".s3memory/"
#: The purposes of key documents, which are also their object names under the internal
#: folder and the ``s3memory:purpose`` of the context their keys are wrapped under.
TENANT_KEY = "tenant-key"
NAMES_KEY = "names-key"
HISTORY_KEY = "history-key"
KEY_DOCUMENT_PURPOSES = (TENANT_KEY, NAMES_KEY, HISTORY_KEY)
#: Every internal object whose name ends so holds keys (what erasure destroys first).
KEY_DOCUMENT_SUFFIX = "-key"
#: The internal folders (each name ends in "/", none in "-key/").
INTENTS_FOLDER = "intents/"
ACCESS_MARKERS_FOLDER = "access/"
HISTORY_FOLDER = "history/"
INDEX_FOLDER = "index/"
PENDING_FOLDER = "pending/"
#: The search index's object under the index folder (a later format takes another name).
INDEX_OBJECT = "v1"
INTERNAL_FOLDERS = (INTENTS_FOLDER, ACCESS_MARKERS_FOLDER, HISTORY_FOLDER, INDEX_FOLDER, PENDING_FOLDER)
#: A pending write's id: random, lowercase hex (what ``pending_key`` accepts, so no id escapes its folder).
PENDING_ID = re.compile(r"[0-9a-f]{16}")
MAX_TIME_US = 10**16 - 1  # microseconds since the epoch, until the year 2286
# A record's key below the history folder: its path's tag, the inverted time, then 16 hex
# digits (a record sealed as a body) or "s" and the record sealed in base32 segments.
_HISTORY_RECORD = re.compile(r"[0-9a-f]{32}/[0-9]{16}-(?:[0-9a-f]{16}|s[a-z2-7]+(?:/[a-z2-7]+)*)")


class NameSealing(Protocol):
    """What the layout needs of encrypted names (``s3memory._crypto.names.NameCipher``).

    ``seal``, ``open`` and ``path_tag`` may load the tenant's names key (a GET) and never
    create it (``seal`` raises :class:`~s3memory.TenantKeyError` if the tenant has none
    yet); only ``key_exists(create=True)`` does.
    """

    max_name_bytes: int

    def seal(self, path: MemoryPath) -> str:
        """The sealed segments of ``path`` joined by ``/`` (``""`` for the root)."""
        ...

    def open(self, sealed: str) -> str | None:
        """The plaintext relative path of sealed segments, or ``None`` if any does not open."""
        ...

    def too_long_name(self, path: MemoryPath) -> str | None:
        """The first name of ``path`` too long to seal, if any."""
        ...

    # What the file layer (``_files``) needs beside the layout's own three:
    def path_tag(self, shown: str) -> str:
        """A keyed stand-in for a path, where metadata and record names would show it."""
        ...

    def key_exists(self, *, create: bool = False) -> bool:
        """Whether the tenant has a names key (created first if ``create``)."""
        ...


@dataclass(frozen=True)
class TenantLayout:
    """Where one tenant's objects live in the bucket (see the module docstring).

    Invariant: the namespaces of two different (prefix, tenant) pairs, in one deployment or
    in two sharing a bucket, are disjoint. No key under one pair's :attr:`memory_prefix` or
    :attr:`internal_prefix` starts with the other pair's :attr:`memory_prefix` or
    :attr:`internal_prefix`. It holds because prefixes and tenant ids are whole segments,
    ``.s3memory`` can be neither (they never start with ``.``), and ``memories`` is neither
    a tenant id nor a prefix segment after the first (:func:`validate_tenant`,
    :func:`validate_prefix`): otherwise tenant ``app`` with no prefix would own
    ``app/memories/...``, where a deployment with prefix ``app/`` keeps user ``memories``,
    and one with prefix ``app/memories/`` keeps everything. (The :attr:`tenant_prefix`
    ``{prefix}{tenant}/`` itself is not disjoint: ``app/`` holds another deployment's prefix
    ``app/``. Never list or delete by it.)

    With ``names`` (``open_memory(encrypt_names=True)``), each segment of the path under
    ``memories/`` is sealed by it (a :class:`NameSealing`, see ``_names``) instead of
    written in clear; the methods keep their meaning.
    """

    tenant: str
    prefix: str = ""
    names: NameSealing | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        validate_tenant(self.tenant)
        validate_prefix(self.prefix)

    # -- the two prefixes a tenant owns ---------------------------------------------------
    # Cached: a listing asks for the memory prefix once per key (the fields are frozen).
    @cached_property
    def tenant_prefix(self) -> str:
        return f"{self.prefix}{self.tenant}/"

    @cached_property
    def memory_prefix(self) -> str:
        return self.tenant_prefix + MEMORY_FOLDER

    @cached_property
    def internal_prefix(self) -> str:
        return self.tenant_prefix + INTERNAL_FOLDER

    @property
    def owned_prefixes(self) -> tuple[str, str]:
        """Everything the tenant owns: what listing all of it, erasure and the IAM policy cover."""
        return self.memory_prefix, self.internal_prefix

    # -- internal objects -----------------------------------------------------------------
    def key_document(self, purpose: str) -> str:
        """The key of the key document for ``purpose`` (one of :data:`KEY_DOCUMENT_PURPOSES`)."""
        if purpose not in KEY_DOCUMENT_PURPOSES:
            raise ValueError(f"unknown key document purpose {purpose!r}")
        return self.internal_prefix + purpose

    def key_document_purpose(self, key: str) -> str | None:
        """The purpose named by a key document's key (any ``*-key`` directly under the
        internal folder, also one a later version of s3memory writes), else ``None``."""
        if not key.startswith(self.internal_prefix) or not key.endswith(KEY_DOCUMENT_SUFFIX):
            return None
        name = key[len(self.internal_prefix) :]
        return name if "/" not in name else None

    @property
    def intents_prefix(self) -> str:
        return self.internal_prefix + INTENTS_FOLDER

    def rename_intent_key(self, tag: str) -> str:
        """Where the intent record of one rename lives, ``tag`` naming the pair of paths
        (a hash, keyed with encrypted names: ``_rename.intent_key``)."""
        return f"{self.intents_prefix}rename-{tag[:40]}"

    @property
    def access_markers_prefix(self) -> str:
        return self.internal_prefix + ACCESS_MARKERS_FOLDER

    def access_marker_key(self, file_key: str) -> str:
        """Where a read of the file at ``file_key`` is recorded: named by a hash of the
        object key, which the bucket already shows."""
        return self.access_markers_prefix + hashlib.sha256(file_key.encode()).hexdigest()[:32]

    @property
    def history_prefix(self) -> str:
        """Where history records live (``_records``): one folder per path tag."""
        return self.internal_prefix + HISTORY_FOLDER

    def history_records_prefix(self, path_tag: str) -> str:
        """The records about the path whose keyed tag is ``path_tag``, newest first."""
        return f"{self.history_prefix}{path_tag}/"

    def history_record_key(self, path_tag: str, at_us: int, record_id: str) -> str:
        """A record about the path tagged ``path_tag``, made at ``at_us``: the inverted time
        first, so that a listing returns the newest record first."""
        return f"{self.history_records_prefix(path_tag)}{MAX_TIME_US - at_us:016d}-{record_id}"

    @property
    def pending_prefix(self) -> str:
        """Where writes held for review wait (``_quarantine``): one object per write."""
        return self.internal_prefix + PENDING_FOLDER

    def pending_key(self, pending_id: str) -> str:
        """The held write ``pending_id`` (:data:`PENDING_ID`; anything else is refused)."""
        if not isinstance(pending_id, str) or not PENDING_ID.fullmatch(pending_id):
            raise ValueError("a pending write's id is 16 lowercase hex digits")
        return self.pending_prefix + pending_id

    def is_history_record(self, key: str) -> bool:
        """Whether ``key`` is where a history record is (``_records``): sealed as a body, or
        sealed in its name (an empty object, which carries no envelope to re-wrap)."""
        return (
            key.startswith(self.history_prefix)
            and _HISTORY_RECORD.fullmatch(key[len(self.history_prefix) :]) is not None
        )

    def is_sealed_name_record(self, key: str) -> bool:
        return self.is_history_record(key) and key[len(self.history_prefix) + 50 : len(self.history_prefix) + 51] == "s"

    @property
    def index_prefix(self) -> str:
        """The folder of the sealed search index (``_index``): what redaction purges."""
        return self.internal_prefix + INDEX_FOLDER

    @property
    def index_key(self) -> str:
        """The sealed search index of the tenant's files (``_index``): one object, every
        file's text under one data key of its own, bound to a name no memory path can have."""
        return self.index_prefix + INDEX_OBJECT

    # -- memory files ---------------------------------------------------------------------
    def key_for(self, path: MemoryPath) -> str:
        """The object key of a file at ``path`` (never the root)."""
        if path.is_root:
            raise InvalidPathError("Error: /memories is a directory, not a file")
        if self.names is not None:
            return self._sealed_key(path)
        key = self.key_for_unchecked(path)
        if len(key.encode("utf-8")) > MAX_S3_KEY_BYTES:
            raise refuse_path(path.display, "the path is too long for an object key")
        return key

    def key_for_unchecked(self, path: MemoryPath) -> str:
        if self.names is not None:
            return self.memory_prefix + self.names.seal(path)
        return self.memory_prefix + path.relative

    def dir_prefix(self, path: MemoryPath) -> str:
        """The key prefix of everything below the directory ``path``."""
        if self.names is not None and not path.is_root:
            # A directory whose own key would be too long can hold nothing: refused like a file.
            return self._sealed_key(path) + "/"
        return self.memory_prefix + (path.relative + "/" if path.relative else "")

    def _sealed_key(self, path: MemoryPath) -> str:
        assert self.names is not None
        if self.names.too_long_name(path) is not None:
            limit = self.names.max_name_bytes
            raise refuse_path(
                path.display, f"a path segment is longer than {limit} bytes, the most an encrypted name holds"
            )
        key = self.key_for_unchecked(path)
        size = len(key.encode("utf-8"))
        if size > MAX_S3_KEY_BYTES:
            raise refuse_path(
                path.display,
                f"the path is too long for an object key once its names are encrypted "
                f"({size:,} bytes, at most {MAX_S3_KEY_BYTES:,})",
            )
        return key

    def path_for_key(self, key: str) -> MemoryPath | None:
        """The memory path a listed key stands for, or ``None`` if no valid path maps to it."""
        return self.path_reader()(key)

    def path_reader(self) -> Callable[[str], MemoryPath | None]:
        """:meth:`path_for_key` for the keys of one listing: the same answers, with what does
        not depend on the key worked out once (with encrypted names, the names key is loaded
        at the first key below the memory prefix, as :meth:`path_for_key` would)."""
        prefix = self.memory_prefix
        start = len(prefix)
        limit = MAX_S3_KEY_BYTES - start
        names = self.names
        open_names: Callable[[str], str | None] | None = None

        def path_of(key: str) -> MemoryPath | None:
            nonlocal open_names
            if not key.startswith(prefix):
                return None
            relative = key[start:]
            if not relative:
                return None
            if names is not None:
                if open_names is None:
                    # An optional fast path (``NameCipher`` has it): :meth:`open` for the many
                    # keys of one listing, the names key loaded once, now.
                    opener = getattr(names, "opener", None)
                    open_names = opener() if opener is not None else names.open
                opened = open_names(relative)
                if opened is None:
                    return None  # a foreign, tampered or moved key
                relative = opened
            if is_plain_canonical(relative, limit):
                return MemoryPath(relative)  # what parse_path would return (see is_plain_canonical)
            try:
                parsed = parse_path(f"{ROOT}/{relative}", max_path_bytes=limit)
            except InvalidPathError:
                return None
            # Only the exact canonical spelling counts: "a/" or a non-NFC key is not ours.
            return parsed if parsed.relative == relative else None

        return path_of
