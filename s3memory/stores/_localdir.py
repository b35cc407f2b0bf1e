"""A store in a local directory: the embedded default, no AWS account needed.

Each object is one file at ``{root}/{key}`` holding a small header (magic, metadata JSON)
and then the body, written to a temporary file and renamed into place, so a reader sees
the old or the new object, never half of one. Writers take an exclusive ``flock`` on
``{root}/.lock``, which makes the preconditions hold across threads and processes on one
machine. Files are created 0600 and directories 0700.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import struct
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from .._errors import PreconditionFailedError, StorageError
from ._base import ObjectInfo, ObjectStore, StoredObject, check_purge_prefix

_MAGIC = b"S3MO\x01"  # format version 1
_HEADER = struct.Struct(">5sI")


def _etag(body: bytes) -> str:
    return '"' + hashlib.md5(body, usedforsecurity=False).hexdigest() + '"'


class LocalDirStore(ObjectStore):
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser().resolve()
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        (self.root / ".tmp").mkdir(exist_ok=True, mode=0o700)

    @property
    def identity(self) -> str:
        return f"local:{self.root}"

    # -- key <-> file ---------------------------------------------------------------
    def _file(self, key: str) -> Path:
        parts = key.split("/")
        if not key or "\x00" in key or key.startswith(".") or any(p in ("", ".", "..") for p in parts):
            raise StorageError(f"Error: the key {key!r} cannot be stored in a local directory")
        return self.root.joinpath(*parts)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self.root / ".lock", os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    @staticmethod
    def _read(path: Path) -> tuple[dict[str, str], bytes]:
        with open(path, "rb") as f:
            header = f.read(_HEADER.size)
            if len(header) != _HEADER.size:
                raise StorageError(f"Error: the local object file {path.name!r} is corrupt")
            magic, meta_len = _HEADER.unpack(header)
            if magic != _MAGIC:
                raise StorageError(f"Error: the local object file {path.name!r} is corrupt")
            try:
                metadata = json.loads(f.read(meta_len))
            except ValueError:
                raise StorageError(f"Error: the local object file {path.name!r} is corrupt") from None
            return metadata, f.read()

    def _write(self, path: Path, body: bytes, metadata: Mapping[str, str]) -> None:
        meta = json.dumps(dict(metadata), separators=(",", ":")).encode()
        tmp = self.root / ".tmp" / uuid.uuid4().hex
        try:
            # Create missing parents; an existing *file* on the way is a conflict.
            parent = path.parent
            for ancestor in reversed([parent, *parent.parents]):
                if ancestor == self.root or not ancestor.is_relative_to(self.root):
                    continue
                if ancestor.is_file():
                    raise StorageError("Error: a file is in the way of this key in the local store")
                ancestor.mkdir(mode=0o700, exist_ok=True)
            if path.is_dir():
                try:
                    path.rmdir()  # an empty directory left behind is not an object
                except OSError:
                    raise StorageError("Error: a directory is in the way of this key in the local store") from None
            fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(_HEADER.pack(_MAGIC, len(meta)) + meta + body)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            if isinstance(exc, StorageError):
                raise
            raise StorageError(f"Error: the local store could not write: {exc.strerror}") from exc
        finally:
            tmp.unlink(missing_ok=True)

    def _prune(self, path: Path) -> None:
        for parent in path.parents:
            if parent == self.root or not parent.is_relative_to(self.root):
                return
            try:
                parent.rmdir()
            except OSError:
                return

    # -- the interface --------------------------------------------------------------
    def get(self, key: str) -> StoredObject | None:
        path = self._file(key)
        if not path.is_file():
            return None
        try:
            metadata, body = self._read(path)
            modified = path.stat().st_mtime
        except FileNotFoundError:
            return None
        return StoredObject(body, _etag(body), metadata, modified)

    def head(self, key: str) -> ObjectInfo | None:
        obj = self.get(key)
        return None if obj is None else ObjectInfo(key, len(obj.body), obj.etag, obj.metadata)

    def put(
        self,
        key: str,
        body: bytes,
        metadata: Mapping[str, str],
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> str:
        path = self._file(key)
        with self._locked():
            if if_none_match and path.is_file():
                raise PreconditionFailedError("Error: the object already exists")
            if if_match is not None:
                current = self.get(key)
                if current is None or current.etag != if_match:
                    raise PreconditionFailedError("Error: the object changed concurrently")
            self._write(path, body, metadata)
        return _etag(body)

    def copy(
        self,
        source: str,
        destination: str,
        *,
        metadata: Mapping[str, str],
        if_match: str | None = None,
        if_none_match: bool = False,
    ) -> str:
        with self._locked():
            current = self.get(source)
            if current is None or (if_match is not None and current.etag != if_match):
                raise PreconditionFailedError("Error: the source object changed concurrently")
            if if_none_match and self._file(destination).is_file():
                raise PreconditionFailedError("Error: the destination object already exists")
            self._write(self._file(destination), current.body, metadata)
        return current.etag

    def _keys_with_prefix(self, prefix: str) -> list[str]:
        """Every stored key starting with ``prefix``, sorted (readable or not)."""
        keys: list[str] = []
        # Walk only the deepest directory the prefix fully names.
        base_parts = prefix.split("/")[:-1]
        base = self.root.joinpath(*base_parts) if base_parts else self.root
        if not base.is_dir():
            return keys
        for dirpath, dirnames, filenames in os.walk(base):
            rel_dir = Path(dirpath).relative_to(self.root).as_posix()
            if rel_dir == ".":
                dirnames[:] = [d for d in dirnames if not d.startswith(".")]
                filenames = [f for f in filenames if not f.startswith(".")]
                rel_dir = ""
            for name in filenames:
                key = f"{rel_dir}/{name}" if rel_dir else name
                if key.startswith(prefix):
                    keys.append(key)
        keys.sort()
        return keys

    def list(self, prefix: str, *, limit: int | None = None) -> Iterator[ObjectInfo]:
        keys = self._keys_with_prefix(prefix)
        for key in keys[:limit]:
            try:
                obj = self.get(key)
            except StorageError:
                continue  # a corrupt file must not break the listing
            if obj is not None:
                yield ObjectInfo(key, len(obj.body), obj.etag, last_modified=obj.last_modified)

    def purge(self, prefix: str, *, suffix: str = "") -> int:
        """No versions here: every matching file is removed, corrupt ones included."""
        check_purge_prefix(prefix)
        removed = 0
        with self._locked():
            for key in self._keys_with_prefix(prefix):
                if not key.endswith(suffix):
                    continue
                path = self._file(key)
                try:
                    path.unlink()
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    raise StorageError(f"Error: the local store could not delete: {exc.strerror}") from exc
                removed += 1
                self._prune(path)
        return removed

    def delete(self, keys: Sequence[str], *, if_match: Mapping[str, str] | None = None) -> None:
        changed = []
        with self._locked():
            for key in keys:
                path = self._file(key)
                if if_match and key in if_match:
                    current = self.get(key)
                    if current is not None and current.etag != if_match[key]:
                        changed.append(key)
                        continue
                try:
                    path.unlink()
                except (FileNotFoundError, IsADirectoryError):
                    continue
                self._prune(path)
        if changed:
            raise PreconditionFailedError(f"Error: {len(changed)} objects changed and were not deleted")
