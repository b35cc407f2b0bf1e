"""Scale: view, rename and delete of a directory of N files, for N up to 100,000.

    python bench/run.py --scale 10000,100000 --no-cold-start

On the in-process fake S3 (tenant-key mode, the same simulated round trip as the main
table) and on the embedded default (``LocalDirStore``) beside the SDK's local tool. Per
command: latency, client CPU, requests and sequential round trips, syncs (fsync, fdatasync, syncfs), and the peak
RSS of the process so far (``ru_maxrss``; ``--memory`` adds each command's own
``tracemalloc`` peak, and slows everything down).

The S3 files are created by s3memory itself through ``FakeS3Store`` (the fake's bucket, no
botocore), so each is sealed for its own path as a rename needs. The local stores are
seeded through their own commands, which costs about 2 ms a file on the embedded default:
``--scale-local-max`` (10,000 by default) bounds the local runs.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from fakeaws import FakeKMS, FakeS3, Network
from measure import (
    BUCKET,
    KMS_KEY,
    MASTER_KEY,
    FakeS3Store,
    FsyncCounter,
    Sample,
    body_of,
    library_s3_client,
    measure,
    plain_clients,
)

USER = "scale-user"


@dataclass
class ScaleRow:
    store: str
    files: int
    command: str
    sample: Sample


def _commands(files: int, only: set[str] | None) -> list[tuple[str, Callable[[Any], Any]]]:
    """view, rename, delete (``only``: a subset, by the words before the parenthesis)."""
    renamed = only is None or "rename dir" in only
    where = "/memories/archive" if renamed else "/memories/big"
    commands = [
        (f"view /memories ({files:,} files)", lambda m: m.view("/memories")),
        # Again, as an agent views its memory: the first view after a change lists every file
        # (the embedded default then writes its listing index); this one reads the index.
        (f"view /memories again ({files:,} files)", lambda m: m.view("/memories")),
        (f"rename dir ({files:,} files)", lambda m: m.rename("/memories/big", "/memories/archive")),
        (f"delete dir ({files:,} files)", lambda m: m.delete(where)),
    ]
    return [
        (name, step) for name, step in commands if only is None or name.split(" (")[0].removesuffix(" again") in only
    ]


def run_s3(
    files: int, rtt: float, workers: int | None, trace: bool, commands: set[str] | None = None
) -> list[ScaleRow]:
    """The in-process fake S3 with ``files`` files in /memories/big (``commands``: the
    command names' first words to run, all by default)."""
    from s3memory import KeyCache, Limits, S3Store, open_memory

    fake = FakeS3()
    network = Network(rtt=rtt, s3=fake, kms=FakeKMS(), enabled=False)
    s3 = network.attach(library_s3_client(None))
    kms = network.attach(plain_clients(None)[2])
    s3.create_bucket(Bucket=BUCKET)
    cache = KeyCache()
    store = FakeS3Store(fake, BUCKET, identity=S3Store(BUCKET, s3).identity)
    seeding = open_memory(user_id=USER, store=store, kms_key_id=KMS_KEY, kms_client=kms, key_cache=cache)
    for i in range(files - 1):
        seeding.create(f"/memories/big/note-{i:06d}.md", body_of(i))
    seeding.close()
    memory = open_memory(
        user_id=USER,
        bucket=BUCKET,
        s3_client=s3,
        kms_key_id=KMS_KEY,
        kms_client=kms,
        key_cache=cache,
        limits=Limits(max_workers=workers) if workers else None,
    )
    rows = []
    try:
        # The last file through the memory itself: warm as after seeding it all that way.
        memory.create(f"/memories/big/note-{files - 1:06d}.md", body_of(files - 1))
        network.enabled = True
        for command, step in _commands(files, commands):
            rows.append(ScaleRow("in-process S3", files, command, measure(partial(step, memory), network, None, trace)))
    finally:
        memory.close()
    return rows


def run_local(
    files: int, fsyncs: FsyncCounter, trace: bool, commands: set[str] | None = None, sdk: bool = True
) -> list[ScaleRow]:
    """The embedded default and (``sdk``) the SDK's local tool, each on a fresh directory."""
    from anthropic.tools.memory import BetaLocalFilesystemMemoryTool

    from s3memory import KeyCache, open_memory
    from s3memory.stores import LocalDirStore

    rows = []
    with tempfile.TemporaryDirectory() as directory:
        memory = open_memory(
            user_id=USER, store=LocalDirStore(f"{directory}/store"), master_key=MASTER_KEY, key_cache=KeyCache()
        )
        tool = BetaLocalFilesystemMemoryTool(base_path=f"{directory}/sdk")
        targets: list[tuple[str, Any]] = [("embedded default", memory)]
        if sdk:
            targets.append(("SDK local", _SdkTool(tool)))
        try:
            for name, target in targets:
                for i in range(files):
                    target.create(f"/memories/big/note-{i:06d}.md", body_of(i))
                for command, step in _commands(files, commands):
                    sample = measure(partial(step, target), None, fsyncs, trace)
                    rows.append(ScaleRow(name, files, command, sample))
        finally:
            memory.close()
    return rows


class _SdkTool:
    def __init__(self, tool: Any) -> None:
        self.tool = tool

    def create(self, path: str, text: str) -> None:
        self.tool.call({"command": "create", "path": path, "file_text": text})

    def view(self, path: str) -> None:
        self.tool.call({"command": "view", "path": path})

    def rename(self, old: str, new: str) -> None:
        self.tool.call({"command": "rename", "old_path": old, "new_path": new})

    def delete(self, path: str) -> None:
        self.tool.call({"command": "delete", "path": path})


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms" if seconds >= 0.0995 else f"{seconds * 1000:.1f} ms"


def render(rows: list[ScaleRow], rtt_ms: float) -> list[str]:
    if not rows:
        return []
    traced = any(r.sample.peak_mb is not None for r in rows)
    lines = [
        f"Scale (S3: in process, {rtt_ms:g} ms per request; local: same disk). "
        "Peak RSS is the process's high-water mark after the command: seeding and, on S3, the "
        "in-process fake's copy of every object included.",
        "",
        "| store | command | requests / RT | latency | per file | client CPU | syncs | peak RSS |"
        + (" traced peak |" if traced else ""),
        "| --- | --- | --- | --- | --- | --- | --- | --- |" + (" --- |" if traced else ""),
    ]
    for r in rows:
        s = r.sample
        requests = f"{s.s3_text} / {s.round_trips} RT" if s.calls else "-"
        cells = [
            r.store,
            r.command,
            requests,
            _ms(s.seconds),
            f"{s.seconds * 1e6 / r.files:,.1f} µs",
            _ms(s.cpu),
            str(s.fsyncs),
            f"{s.rss_mb:,.0f} MB",
        ]
        if traced:
            cells.append(f"{s.peak_mb:,.1f} MB" if s.peak_mb is not None else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return lines
