"""What the local store's tests (``tests/stores/localdir/``) share: object files as the local
store writes them, a format-1 file as an earlier s3memory wrote it, a snapshot of a tree
(taken without following links) to show that nothing outside a store changed, and recorders
of the store's syncs and of the names it opens."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self
from unittest import mock

from s3memory.stores._localdir import batch as _localbatch

__all__ = ["BODY", "ETAG", "META", "V1_FILE", "RecordedOpens", "RecordedSyncs", "object_file", "snapshot"]

META = {"x-amz-c": "115", "x-amz-w": "02"}
BODY = b"\x00body\xff"
ETAG = '"b7102b8490a8da9161d2149dfe88295f"'  # md5 of BODY, as S3 would say

# A format-1 object file exactly as s3memory wrote it before format 2 (captured from that
# code: magic, big-endian metadata length, compact metadata JSON, body).
V1_FILE = b'S3MO\x01\x00\x00\x00 {"x-amz-c":"115","x-amz-w":"02"}\x00body\xff'


def snapshot(top: Path) -> dict[str, object]:
    """Every entry under ``top`` without following links: type, mode, content or target."""
    seen: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            relative = str(path.relative_to(top))
            if stat.S_ISLNK(st.st_mode):
                seen[relative] = ("link", os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                seen[relative] = ("file", stat.S_IMODE(st.st_mode), path.read_bytes())
            else:
                seen[relative] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode))
    return seen


def object_file(body: bytes, metadata: dict[str, str] | None = None) -> bytes:
    """A well-formed format-2 object file."""
    meta = json.dumps(metadata or {}, separators=(",", ":")).encode()
    digest = hashlib.md5(body).digest()
    return struct.pack(">5sIQ16s", b"S3MO\x02", len(meta), len(body), digest) + meta + body


class _Patching:
    """Starts ``_patches`` when entered and stops them on the way out."""

    _patches: list[Any]

    def __enter__(self) -> Self:
        for patch in self._patches:
            patch.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for patch in self._patches:
            patch.stop()


class RecordedSyncs(_Patching):
    """Records, while entered, each ``os.fsync`` (``"file"`` for a regular file, else
    ``"dir"``) and each of the store's ``syncfs`` (``"syncfs"``, or ``"no syncfs"`` where it
    could not sync), in ``calls``; the real calls are made."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self._fsync, self._syncfs = os.fsync, _localbatch._syncfs
        self._patches = [
            mock.patch.object(os, "fsync", self._recorded_fsync),
            mock.patch.object(_localbatch, "_syncfs", self._recorded_syncfs),
        ]

    def _recorded_fsync(self, fd: int) -> None:
        self.calls.append("file" if os.path.isfile(f"/proc/self/fd/{fd}") else "dir")
        self._fsync(fd)

    def _recorded_syncfs(self, fd: int) -> bool:
        done = self._syncfs(fd)
        self.calls.append("syncfs" if done else "no syncfs")
        return done


class RecordedOpens(_Patching):
    """Records, while entered, the names the store opens: ``os.open``'s path, or the names
    a directory opened in one call (``open_dir_beneath``) joined by "/" (in ``names``, and
    those in ``at_once`` as well); the real calls are made."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.at_once: list[str] = []
        real_open, real_beneath = os.open, _localbatch.open_dir_beneath

        def opening(path: Any, *args: Any, **kwargs: Any) -> int:
            self.names.append(str(path))
            return real_open(path, *args, **kwargs)

        def beneath(fd: int, names: Sequence[str]) -> int | None:
            self.names.append("/".join(names))
            self.at_once.append("/".join(names))
            return real_beneath(fd, names)

        self._patches = [
            mock.patch.object(os, "open", opening),
            mock.patch.object(_localbatch, "open_dir_beneath", beneath),
        ]
