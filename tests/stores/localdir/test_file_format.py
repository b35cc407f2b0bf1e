"""The local store's object files, and reads bounded by their headers.

- format 2 as written: magic, metadata length, body size and MD5 in a fixed header, then the
  metadata and the body; the ETag is the body's MD5, as S3 would say;
- format-1 files (a stored fixture of what an earlier s3memory wrote) still read, list, match
  preconditions and copy (the copy and any overwrite written as format 2);
- ``get(max_bytes=...)`` refuses from the header before reading the body (a planted sparse
  file claiming 8 GiB included);
- listings and ``head`` read the headers only.
"""

from __future__ import annotations

import os
import struct
from unittest import mock

import pytest
from helpers.localdir import BODY, ETAG, META, V1_FILE, object_file

from s3memory import LocalDirStore, ObjectTooLargeError, PreconditionFailedError


def test_format_2_header_records_size_and_md5(store: LocalDirStore) -> None:
    etag = store.put("alice/memories/notes.md", BODY, META)
    assert etag == ETAG
    raw = (store.root / "alice" / "memories" / "notes.md").read_bytes()
    assert raw == object_file(BODY, META)
    magic, _, size, digest = struct.unpack(">5sIQ16s", raw[:33])
    assert (magic, size, '"' + digest.hex() + '"') == (b"S3MO\x02", len(BODY), ETAG)


def test_format_1_files_still_read(store: LocalDirStore) -> None:
    path = store.root / "alice" / "memories" / "notes.md"
    path.parent.mkdir(parents=True, mode=0o700)
    path.write_bytes(V1_FILE)
    got = store.get("alice/memories/notes.md")
    assert got is not None and (got.body, got.etag, dict(got.metadata)) == (BODY, ETAG, META)
    head = store.head("alice/memories/notes.md")
    assert head is not None and (head.size, head.etag, dict(head.metadata)) == (len(BODY), ETAG, META)
    (listed,) = store.list("alice/")
    assert (listed.key, listed.size, listed.etag) == ("alice/memories/notes.md", len(BODY), ETAG)
    with pytest.raises(ObjectTooLargeError):
        store.get("alice/memories/notes.md", max_bytes=len(BODY) - 1)
    # Preconditions compare the same ETag, and a copy keeps it (written as format 2).
    assert store.copy("alice/memories/notes.md", "alice/memories/copy", metadata={}, if_match=ETAG) == ETAG
    assert (store.root / "alice" / "memories" / "copy").read_bytes() == object_file(BODY)
    with pytest.raises(PreconditionFailedError):
        store.delete(["alice/memories/notes.md"], if_match={"alice/memories/notes.md": '"' + "0" * 32 + '"'})
    assert store.put("alice/memories/notes.md", b"new", {}, if_match=ETAG) != ETAG
    assert path.read_bytes()[:5] == b"S3MO\x02"


def test_max_bytes_refuses_before_reading(store: LocalDirStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.put("t/small", b"x" * 100, {})
    got = store.get("t/small", max_bytes=100)
    assert got is not None and got.body == b"x" * 100
    with pytest.raises(ObjectTooLargeError) as info:
        store.get("t/small", max_bytes=99)
    assert info.value.size == 100 and str(info.value).startswith("Error: ")
    # A planted sparse file claiming 8 GiB: refused from the header, no body byte read.
    huge = 8 << 30
    path = store.root / "t" / "huge"
    with open(path, "wb") as f:
        f.write(struct.pack(">5sIQ16s", b"S3MO\x02", 2, huge, b"\x00" * 16) + b"{}")
        f.truncate(33 + 2 + huge)
    read: list[int] = []
    real_pread = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, offset: read.append(n) or real_pread(fd, n, offset))
    with pytest.raises(ObjectTooLargeError) as info:
        store.get("t/huge", max_bytes=1 << 20)
    assert info.value.size == huge and sum(read) <= 64
    assert [(i.key, i.size) for i in store.list("t/")] == [("t/huge", huge), ("t/small", 100)]


def test_listings_and_head_read_headers_only(store: LocalDirStore, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(20):
        store.put(f"t/memories/{i:02d}", os.urandom(100_000), META)
    read: list[int] = []
    real_pread, real_read = os.pread, os.read
    with (
        mock.patch.object(os, "pread", lambda fd, n, offset: read.append(n) or real_pread(fd, n, offset)),
        mock.patch.object(os, "read", lambda fd, n: read.append(n) or real_read(fd, n)),
        mock.patch("builtins.open", None),  # every read is counted: none goes through open()
    ):
        listed = list(store.list("t/"))
        head = store.head("t/memories/00")
    assert [i.size for i in listed] == [100_000] * 20 and head is not None and head.size == 100_000
    assert sum(read) <= 21 * (33 + 64)  # the fixed header and the metadata length each
