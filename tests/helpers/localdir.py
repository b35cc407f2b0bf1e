"""What the local store's tests (``tests/stores/localdir/``) share: object files as the local
store writes them, a format-1 file as an earlier s3memory wrote it, and a snapshot of a tree
(taken without following links) to show that nothing outside a store changed."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
from pathlib import Path

__all__ = ["BODY", "ETAG", "META", "V1_FILE", "object_file", "snapshot"]

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
