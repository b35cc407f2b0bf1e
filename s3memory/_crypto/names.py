"""Encrypted file names (opt-in, ``open_memory(encrypt_names=True)``).

Each segment of a memory path becomes one key segment sealed with AES-SIV (RFC 5297,
AES-256, deterministic authenticated encryption), so the bucket's keys show no file
names while a directory is still a key prefix::

    {prefix}{tenant}/memories/{seal(a)}/{seal(b)}/{seal(c.md)}     for /memories/a/b/c.md

``seal(name)`` = base64url, unpadded, of ``AES-SIV(names key, pad(name), AD = [tenant,
parent])``, where ``parent`` is the plaintext path of the directory holding the name
(``/memories``, ``/memories/a``, ``/memories/a/b``) and ``pad`` appends ``0x80`` and then
zero bytes up to a multiple of 16 (ISO/IEC 7816-4). Listing ``dir_prefix(/memories/a)``
returns exactly the subtree of ``/memories/a``: a directory's key prefix is its own
sealed path plus ``/``; segments never contain ``/``; under one parent, sealing is
injective. A key is turned back into a path by opening its segments from the left, each
with the plaintext path opened so far as its parent; a segment that does not open (a
foreign or tampered key, or one moved to another directory or tenant) makes the whole
key unknown, so it is skipped like any key no valid path maps to.

The names key is a random 512-bit AES-SIV key per tenant, separate from the tenant key
(rotating the tenant key must not rename every object), stored at
``{prefix}{tenant}/.s3memory/names-key`` as ``{"v": 2, "kid", "wrapper", "wrapped"}``,
wrapped by the master key (local or KMS; in ``key_mode="kms"`` by the same KMS key, with
``Encrypt``) under the context ``{s3memory:tenant, s3memory:purpose=names-key,
s3memory:kid, s3memory:prefix}`` (documents of version 1, written by s3memory 0.1, have
no ``s3memory:prefix`` and are still read). It is loaded on first use (one GET, then cached in the :class:`KeyCache`)
and created only by :meth:`NameCipher.create_key`, which the first command that writes a
new file calls (``create``), with ``If-None-Match: *`` so concurrent first writers agree;
computing a key never creates it (a read in a tenant without one answers "does not
exist"). It is never created over existing files: finding no names key, the loader lists
the tenant's memory prefix, and if anything is there (files written without
``encrypt_names``, or a names key that was deleted) it refuses with
:class:`TenantKeyError` rather than start a new key that would hide them.

Encoding: base64url (``A-Z a-z 0-9 - _``), not base32: S3 keys are case-sensitive and
base64url is 17% shorter, which matters within S3's 1,024-byte key limit. On a
case-insensitive local file system two segments of one directory would collide only if
their 43 or more pseudo-random characters agreed up to case (probability below 2**-120
per pair).

Limits. A name of ``n`` UTF-8 bytes becomes ``ceil(4 * (16 + 16 * (n // 16 + 1)) / 3)``
characters: 43 for names of up to 15 bytes, 64 up to 31, 86 up to 47, 235 at most. Names
are limited to 159 bytes (instead of 255) so that every sealed segment is at most 255
bytes, a legal file name for the local directory store. The whole key must still fit in
1,024 bytes; with the key prefix ``alice/memories/`` that leaves 1,009 bytes: 22 levels of
short names, 15 levels of 16-31-byte names, or four 159-byte names. A longer path is
refused with :class:`InvalidPathError` ("too long for an object key once its names are
encrypted") before any request; so is a rename that would make a descendant's key too
long.

What the bucket still shows (trade-offs of deterministic encryption):

- the tree's shape: how many directories and files, which files share a directory, the
  depth of each file; and each name's length to 16 bytes (``n // 16``);
- equality: one name under one parent always seals to the same segment (each file has
  exactly one key), so a name deleted and created again reappears as the same key, and
  two tenants' or two directories' equal names do not look equal;
- a rename shows as objects disappearing under one key and appearing under another; a
  renamed directory re-seals (copies) every key below it, as its parent path changed;
- listings arrive in ciphertext order; s3memory sorts every listing by plaintext name
  after opening the keys, so the tool's answers are unchanged;
- beyond the keys: each object's metadata (``x-amz-m``, or ``x-amz-t`` in KMS mode)
  holds the binding context, whose ``s3memory:path`` is then a keyed tag of the plaintext
  path (:meth:`NameCipher.path_tag`, HMAC-SHA256 under the names key, not a plain hash),
  and a rename's intent record is named by such a tag of both paths, so metadata does not
  confirm a guessed name either. Sizes and times of writes show, as without encrypted names.

Cost: no request once the names key is cached; sealing and opening are local CPU (about
2 µs a segment, with memos: a listing opens each directory once, and a key it opened
before not at all). A cold process fetches the names key with one GET, alongside the
tenant key in tenant mode (plus a KMS ``Decrypt`` with a KMS master, also alongside); the
first create of a new tenant adds a LIST and a conditional PUT (and a KMS
``Encrypt``).

The names key is never rotated (a new key would re-seal every key); deleting it loses
every file name (not the contents: they stay readable to whoever holds the tenant key,
which finds each object's binding in its metadata). A memory written without ``encrypt_names`` cannot be opened with
it (the loader refuses); one written with it, opened without it, lists its sealed
segments as names and fails the integrity check on every read: choose once per tenant.
"""

from __future__ import annotations

import binascii
import contextlib
import logging
import os
import re
import threading
from collections.abc import Callable

from .._errors import TenantKeyError
from .._layout import NAMES_KEY
from .._paths import ROOT, MemoryPath
from ..stores import ObjectStore
from .cache import KeyCache
from .keydocs import (
    KEY_DOCUMENT_VERSION,
    KeyDocumentSlot,
    key_document_body,
    key_found_beside_files,
    parse_key_document,
)
from .master import MasterKey

log = logging.getLogger("s3memory")

NAMES_KEY_BYTES = 64  # AES-SIV with AES-256: a MAC key and an encryption key
PAD_BLOCK = 16
SIV_TAG_BYTES = 16
MAX_SEALED_SEGMENT_BYTES = 255  # a file name on the local directory store's file systems
_MEMO_ENTRIES = 8192  # per tenant and direction; a full memo is simply cleared
_UNKNOWN = "/"  # not in the memo of opened paths: never an opened path (its names hold no "/")


def padded_length(name_bytes: int) -> int:
    """Bytes of a name after padding (0x80, then zeros to a multiple of 16)."""
    return PAD_BLOCK * (name_bytes // PAD_BLOCK + 1)


def sealed_segment_length(name_bytes: int) -> int:
    """Characters of the key segment a name of ``name_bytes`` UTF-8 bytes becomes."""
    return -(-4 * (SIV_TAG_BYTES + padded_length(name_bytes)) // 3)


def looks_sealed(relative: str) -> bool:
    """True if every segment of ``relative`` could be a sealed name (base64url of a length
    sealing gives): a hint that a memory was written with encrypted names."""
    return all(_SEALED_LENGTHS.get(len(segment)) and _BASE64URL.fullmatch(segment) for segment in relative.split("/"))


# The longest name whose sealed segment is still a legal file name: 159 bytes.
MAX_NAME_BYTES = max(n for n in range(256) if sealed_segment_length(n) <= MAX_SEALED_SEGMENT_BYTES)
_MIN_SEALED_SEGMENT = sealed_segment_length(0)
_SEALED_LENGTHS = {sealed_segment_length(n): True for n in range(MAX_NAME_BYTES + 1)}
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+")
_TO_STANDARD_BASE64 = bytes.maketrans(b"-_", b"+/")
_PADDING = (b"", b"===", b"==", b"=")  # by length modulo 4
_TO_URLSAFE = bytes.maketrans(b"+/", b"-_")


def _b64(raw: bytes) -> str:
    """base64url, unpadded (what ``base64.urlsafe_b64encode`` makes, less its wrappers)."""
    return binascii.b2a_base64(raw, newline=False).rstrip(b"=").translate(_TO_URLSAFE).decode("ascii")


def _pad(name: bytes) -> bytes:
    return name + b"\x80" + b"\x00" * (padded_length(len(name)) - len(name) - 1)


class _Sealer:
    """AES-SIV under one names key, with bounded memos of the segments already sealed and
    the keys already opened (a listing opens each directory's segments once, not once per
    file below it; a repeated listing opens nothing)."""

    def __init__(self, key: bytes, tenant_ad: bytes) -> None:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESSIV

        self.key = key
        self._siv = AESSIV(key)
        self._invalid_tag = InvalidTag
        self._tenant_ad = tenant_ad
        self._sealed: dict[tuple[str, str], str] = {}
        self._opened: dict[str, str | None] = {}  # sealed relative path -> plaintext one

    def seal(self, parent: str, name: str) -> str:
        sealed = self._sealed.get((parent, name))
        if sealed is None:
            ad = [self._tenant_ad, parent.encode("utf-8")]
            sealed = _b64(self._siv.encrypt(_pad(name.encode("utf-8")), ad))
            if len(self._sealed) >= _MEMO_ENTRIES:
                self._sealed.clear()
            self._sealed[(parent, name)] = sealed
        return sealed

    def open_path(self, sealed: str) -> str | None:
        """The plaintext relative path of ``sealed`` segments, or None if any does not open:
        the segments opened from the left, each with the plaintext path before it as parent,
        up to the first that does not open."""
        opened = self._opened.get(sealed, _UNKNOWN)
        if opened != _UNKNOWN:
            return opened
        # Most often a new file in a directory already opened: one segment to open.
        head, slash, segment = sealed.rpartition("/")
        opened_head = self._opened.get(head, _UNKNOWN) if slash else _UNKNOWN
        if opened_head == _UNKNOWN:
            return self._open_from_left(sealed)
        name = None if opened_head is None else self._open(f"{ROOT}/{opened_head}", segment)
        opened = None if name is None else f"{opened_head}/{name}"
        self._remember(sealed, opened)
        return opened

    def _open_from_left(self, sealed: str) -> str | None:
        opened: str | None = ""  # the root's: nothing opened yet
        end = -1
        while opened is not None:
            start = end + 1
            end = sealed.find("/", start)
            prefix = sealed if end < 0 else sealed[:end]
            known = self._opened.get(prefix, _UNKNOWN)
            if known == _UNKNOWN:
                name = self._open(f"{ROOT}/{opened}" if opened else ROOT, prefix[start:])
                known = None if name is None else f"{opened}/{name}" if opened else name
                self._remember(prefix, known)
            opened = known
            if end < 0:
                break
        return opened

    def _remember(self, sealed: str, opened: str | None) -> None:
        if len(self._opened) >= _MEMO_ENTRIES:
            self._opened.clear()
        self._opened[sealed] = opened

    def _open(self, parent: str, segment: str) -> str | None:
        if not _MIN_SEALED_SEGMENT <= len(segment) <= MAX_SEALED_SEGMENT_BYTES:
            return None
        # Only the exact spelling we write, which only its own bytes encode to: whatever the
        # lenient decoder makes of anything else (it skips stray characters), encoding that
        # back does not give the segment.
        try:
            raw = binascii.a2b_base64(
                segment.encode("ascii").translate(_TO_STANDARD_BASE64) + _PADDING[len(segment) % 4]
            )
        except ValueError:  # not ASCII, or a length no encoding has
            return None
        if len(raw) % PAD_BLOCK or _b64(raw) != segment:
            return None
        try:
            padded = self._siv.decrypt(raw, [self._tenant_ad, parent.encode("utf-8")])
        except (self._invalid_tag, ValueError):
            return None
        unpadded = padded.rstrip(b"\x00")
        if not unpadded.endswith(b"\x80") or len(padded) != padded_length(len(unpadded) - 1):
            return None
        try:
            name = unpadded[:-1].decode("utf-8")
        except UnicodeDecodeError:
            return None
        return name if name and "/" not in name else None


_MISSING = (
    "Error: This memory has files but no names key, so their names cannot be decrypted: were they "
    "written without encrypted names? Then open it without encrypt_names (the CLI's --encrypt-names, "
    "S3MEMORY_ENCRYPT_NAMES). Or was the names key deleted?"
)


class NoNamesKeyYet(TenantKeyError):
    """The tenant has no names key and no files: no path has a key yet, so nothing is at
    any path. Commands ask :meth:`NameCipher.key_exists` first and answer "does not exist";
    reaching this otherwise is a command that forgot to."""


class NameCipher:
    """Seals and opens the path segments of one tenant's keys (see the module docstring).

    ``prefetch`` (optional) runs alongside the first load of the names key, in another
    thread: the factory passes the tenant keyring's ``prepare``, so a cold process fetches
    both keys in one round trip. ``files_prefix`` is the tenant's memory prefix, listed once
    before a names key is created.
    """

    max_name_bytes = MAX_NAME_BYTES

    def __init__(
        self,
        *,
        store: ObjectStore,
        tenant: str,
        key_object: str,
        files_prefix: str,
        master: MasterKey,
        cache: KeyCache,
        store_identity: str,
        prefetch: Callable[[], None] | None = None,
        prefix: str = "",
    ) -> None:
        self.document = KeyDocumentSlot(
            store=store,
            tenant=tenant,
            purpose=NAMES_KEY,
            object_key=key_object,
            master=master,
            cache=cache,
            store_identity=store_identity,
            prefix=prefix,
        )
        self._tenant_ad = tenant.encode("utf-8")
        self._files_prefix = files_prefix
        self._prefetch = prefetch
        self._current: _Sealer | None = None

    # -- sealing ------------------------------------------------------------------------
    def seal(self, path: MemoryPath) -> str:
        """The sealed segments of ``path`` joined by ``/`` (``""`` for the root).

        Loads the names key on first use; never creates it (:meth:`create_key` does):
        :class:`NoNamesKeyYet` if the tenant has none. Names longer than
        :data:`MAX_NAME_BYTES` are sealed all the same: the caller (``TenantLayout``)
        refuses them, with :meth:`too_long_name`.
        """
        if path.is_root:
            return ""
        sealer = self._sealer(prefetch=True)
        parent, sealed = ROOT, []
        for name in path.parts:
            sealed.append(sealer.seal(parent, name))
            parent = f"{parent}/{name}"
        return "/".join(sealed)

    def open(self, sealed: str) -> str | None:
        """The plaintext relative path of sealed segments, or ``None`` if any does not open.

        The result is not yet validated as a path: ``TenantLayout.path_for_key`` does that.
        """
        # The key first, even for a key that cannot be ours: files without a names key (names
        # in clear) are refused, not silently hidden.
        return self._sealer(prefetch=False).open_path(sealed)

    def opener(self) -> Callable[[str], str | None]:
        """:meth:`open` for the many keys of one listing: the names key is loaded (and checked
        for expiry in the cache) once, now, rather than once per key."""
        return self._sealer(prefetch=False).open_path

    def _sealer(self, *, prefetch: bool) -> _Sealer:
        key = self.names_key(prefetch=prefetch)
        sealer = self._current
        if sealer is None or sealer.key is not key:  # a new cache entry: start new memos
            sealer = self._current = _Sealer(key, self._tenant_ad)
        return sealer

    def path_tag(self, shown: str) -> str:
        """A keyed stand-in for a path in binding contexts and record names.

        Metadata binds each object to ``sha256(path)``; unkeyed, that would let anyone who
        can read metadata confirm a guessed name. HMAC-SHA256 under the names key does not.
        """
        import hashlib
        import hmac

        key = self.names_key(prefetch=True)
        return hmac.new(key, b"s3memory path tag\x00" + shown.encode("utf-8"), hashlib.sha256).hexdigest()

    @staticmethod
    def too_long_name(path: MemoryPath) -> str | None:
        """The first name of ``path`` longer than :data:`MAX_NAME_BYTES` bytes, if any."""
        return next((name for name in path.parts if len(name.encode("utf-8")) > MAX_NAME_BYTES), None)

    # -- the names key ------------------------------------------------------------------
    def key_exists(self, *, create: bool = False) -> bool:
        """Whether the tenant has a names key, loading it on first use (one GET, the tenant
        key fetched alongside); with ``create``, creating it first if the tenant has none
        and no files (only a command that writes a new file asks for that).

        Raises:
            TenantKeyError: the tenant has files but no names key (files written without
                encrypted names, or a deleted names key), or its names key is corrupt.
        """
        try:
            self.names_key(prefetch=True, create=create)
        except NoNamesKeyYet:
            return False
        return True

    def create_key(self) -> None:
        """Create the tenant's names key unless it has one (``If-None-Match: *``, so
        concurrent first writers agree); refused beside existing files."""
        self.names_key(prefetch=True, create=True)

    def names_key(self, *, prefetch: bool = False, create: bool = False) -> bytes:
        """The tenant's names key, from the cache or the store; with ``create``, created if
        the tenant has none and no files yet. :class:`NoNamesKeyYet` if it has none (and
        not ``create``); :class:`TenantKeyError` if it has files but no names key."""

        def load() -> bytes:
            helper = None
            if prefetch and self._prefetch is not None:
                helper = threading.Thread(target=self._run_prefetch, name="s3memory-prefetch", daemon=True)
                helper.start()
            try:
                return self._load_or_create() if create else self._load_existing()
            finally:
                if helper is not None:
                    helper.join()

        return self.document.cached(load)

    def _run_prefetch(self) -> None:
        assert self._prefetch is not None
        # Only a warm-up: whatever fails here fails again, and is reported, where it is needed.
        with contextlib.suppress(Exception):
            self._prefetch()

    def _load_existing(self) -> bytes:
        key = self._load()
        if key is None:
            key = key_found_beside_files(self.document.store, self._files_prefix, self._load, _MISSING)
        if key is None:
            raise NoNamesKeyYet("Error: This memory has no names key yet, so it has no files.")
        return key

    def _load_or_create(self) -> bytes:
        key = self._load()
        if key is not None:
            return key
        key_id, key = os.urandom(8).hex(), os.urandom(NAMES_KEY_BYTES)
        master = self.document.master

        def body() -> bytes:
            wrapped = master.wrap(key, self.document.context(key_id, KEY_DOCUMENT_VERSION))
            return key_document_body(kid=key_id, wrapper=master.kind, wrapped=wrapped, version=KEY_DOCUMENT_VERSION)

        found, _ = self.document.create(body, self._load, files_prefix=self._files_prefix, missing=_MISSING)
        if found is not None:
            return found
        log.info("created a names key (kid %s, wrapped by %s)", key_id, master.kind)
        return key

    def _load(self) -> bytes | None:
        stored = self.document.read()
        if stored is None:
            return None
        parsed = parse_key_document(stored.body, what="names key")
        return self.document.unwrap(parsed, parsed.wrapped, parsed.kid, size=NAMES_KEY_BYTES)
