"""Benchmark: s3memory against the obvious approach, the SDK's local tool and the embedded default.

    python bench/run.py                   # in process, 20 ms round trips, a 1,000-file directory
    python bench/run.py --http            # the same over real HTTP, to a fake in another process
    python bench/run.py --docs            # --http, plus 10,000-file scale rows; into docs/design/performance.md
    python bench/run.py --scale 10000,100000 --no-table --no-cold-start
    python bench/run.py --check-moto      # also cross-check request counts against moto

One workload (view root, view a file warm and cold, create, str_replace, insert, rename
a file, view a directory, rename and delete a directory of N files, delete a file) runs
on each of:

- s3memory, tenant-key mode (the tenant key wrapped by KMS) and KMS-per-object mode, on
  the S3 client s3memory builds for itself (``default_s3_client``);
- the obvious approach: the official S3 Encryption Client with a KMS keyring, check then
  act, one request at a time (``baseline.py``);
- the SDK's ``BetaLocalFilesystemMemoryTool`` on local disk: the latency floor;
- the embedded default: s3memory on a ``LocalDirStore`` with a master key, on the same disk.

Two network modes. In process (default): ``fakeaws.py`` answers from a botocore event
handler, after sleeping the round trip there. ``--http``: the same fake behind a real
HTTP/1.1 keep-alive server in another process (``httpfake.py``), which sleeps the round
trip, so botocore's HTTP stack, signing and parsing cost what they cost against AWS. Either
way requests are counted at the client: by operation, KMS calls, and sequential round
trips (the longest chain of requests that did not overlap). Per command: latency, client
CPU (``time.process_time``: all threads of this process), and for the local ones the calls
that make writes durable (fsync, fdatasync, syncfs: ``measure.FsyncCounter``).

Then: a 200-command agent workload on both local backends (their ratio is an issue-29
target), optional scale runs (``scale.py``), the cold start (imports, and the first
command in a fresh process against the HTTP fake), the CLI's rename in a new
process, the Lambda example's cold start, an endpoint that never answers, and a table of
the issue-29 targets (``targets.py``).
Results go to bench/results/ as Markdown and CSV, and a chart if matplotlib is installed.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).parent))

from measure import (
    BUCKET,
    KMS_KEY,
    MASTER_KEY,
    REGION,
    FakeS3Store,
    FsyncCounter,
    Sample,
    body_of,
    client_kind,
    counting_fsyncs,
    http_memory,
    library_s3_client,
    measure,
    plain_clients,
)
from targets import ms, targets

# The table lives in the docs' performance page, between these two markers.
PERFORMANCE_PAGE = Path(__file__).parent.parent / "docs" / "design" / "performance.md"
TABLE_START, TABLE_END = "<!-- bench:start -->", "<!-- bench:end -->"
NOTE = "Dear diary,\nthe user prefers green tea and short answers.\nTimezone: UTC+1\n"
TENANT = "s3memory (tenant key)"
KMS_MODE = "s3memory (KMS per object)"
OBVIOUS = "obvious (S3EC + KMS, sequential)"
SDK = "SDK local filesystem (floor)"
EMBEDDED = "embedded default (LocalDirStore)"


@dataclass
class Row:
    backend: str
    command: str
    sample: Sample
    server_cpu: float | None = None  # the HTTP fake's CPU during the command


def _seed(target: Any, files: int, parallel: bool) -> None:
    def create(i: int) -> None:
        target.create(f"/memories/big/note-{i:04d}.md", body_of(i))

    if not parallel or files < 2:
        for i in range(files):
            create(i)
        return
    create(0)  # the first write creates the tenant key: once, not raced
    # Over HTTP, client and server CPU overlap on two processes.
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(1, files)))


class S3MemoryBackend:
    def __init__(
        self,
        name: str,
        mode: Literal["tenant", "kms"],
        s3: Any,
        kms: Any,
        user: str,
        workers: int | None,
        fake: Any = None,
        key_id: str = KMS_KEY,
    ) -> None:
        from s3memory import KeyCache, Limits, open_memory

        self.name, self.mode, self.user, self.kms, self.fake, self.key_id = name, mode, user, kms, fake, key_id
        self.s3, self.key_cache = s3, KeyCache()

        def build(key_cache: KeyCache | None = None) -> Any:
            return open_memory(
                user_id=user,
                bucket=BUCKET,
                s3_client=s3,
                kms_key_id=key_id,
                kms_client=kms,
                key_mode=mode,
                key_cache=key_cache or KeyCache(),
                limits=Limits(max_workers=workers) if workers else None,
            )

        self.build = build
        self.memory = build(self.key_cache)
        self.opened = [self.memory]

    def cold(self) -> Any:
        self.opened.append(self.build())
        return self.opened[-1]

    def seed(self, files: int, parallel: bool) -> None:
        if self.fake is None:
            _seed(self.memory, files, parallel)
            return
        from s3memory import S3Store, open_memory

        # In process, s3memory seeds the fake's bucket directly: the same sealed files,
        # without paying botocore for 1,000 creates per backend. Under the S3 store's
        # identity and with the measured memory's key cache, it leaves that cache as
        # seeding through the memory itself would (KMS mode caches each new data key).
        seeding = open_memory(
            user_id=self.user,
            store=FakeS3Store(self.fake, BUCKET, identity=S3Store(BUCKET, self.s3).identity),
            kms_key_id=self.key_id,
            kms_client=self.kms,
            key_mode=self.mode,
            key_cache=self.key_cache,
        )
        try:
            for i in range(files - 1):
                seeding.create(f"/memories/big/note-{i:04d}.md", body_of(i))
        finally:
            seeding.close()
        # The last file through the measured memory: its caches (bucket versioning, the
        # history key) are then as warm as after seeding it all through itself.
        self.memory.create(f"/memories/big/note-{files - 1:04d}.md", body_of(files - 1))

    def close(self) -> None:
        for memory in self.opened:
            memory.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.memory, name)


class ObviousBackend:
    def __init__(self, s3: Any, wrapped: Any, kms: Any, user: str) -> None:
        from baseline import ObviousMemory

        self.name = OBVIOUS
        self.memory = ObviousMemory(
            bucket=BUCKET, user_id=user, s3_client=s3, s3_client_to_wrap=wrapped, kms_client=kms, kms_key_id=KMS_KEY
        )

    def cold(self) -> Any:
        return self.memory  # it caches nothing: every read is a KMS call

    def seed(self, files: int, parallel: bool) -> None:
        _seed(self.memory, files, parallel)

    def close(self) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self.memory, name)


class LocalBackend:
    def __init__(self, directory: str) -> None:
        from anthropic.tools.memory import BetaLocalFilesystemMemoryTool

        self.name = SDK
        self.tool = BetaLocalFilesystemMemoryTool(base_path=directory)

    def cold(self) -> Any:
        return self

    def seed(self, files: int, parallel: bool) -> None:
        _seed(self, files, False)

    def close(self) -> None:
        pass

    def view(self, path: str) -> str:
        return str(self.tool.call({"command": "view", "path": path}))

    def create(self, path: str, text: str) -> str:
        return str(self.tool.call({"command": "create", "path": path, "file_text": text}))

    def str_replace(self, path: str, old: str, new: str) -> str:
        return str(self.tool.call({"command": "str_replace", "path": path, "old_str": old, "new_str": new}))

    def insert(self, path: str, line: int, text: str) -> str:
        return str(self.tool.call({"command": "insert", "path": path, "insert_line": line, "insert_text": text}))

    def delete(self, path: str) -> str:
        return str(self.tool.call({"command": "delete", "path": path}))

    def rename(self, old: str, new: str) -> str:
        return str(self.tool.call({"command": "rename", "old_path": old, "new_path": new}))


class EmbeddedBackend:
    """What ``s3memory`` gives with no AWS at all: a local directory and a master key."""

    def __init__(self, directory: str) -> None:
        self.name = EMBEDDED
        self.directory = directory
        self.opened: list[Any] = []
        self.memory = self.cold()

    def cold(self) -> Any:
        from s3memory import KeyCache, LocalDirStore, open_memory

        # A fresh process: a new store object and key cache (the tenant key is read again).
        memory = open_memory(
            user_id="embedded-user", store=LocalDirStore(self.directory), master_key=MASTER_KEY, key_cache=KeyCache()
        )
        self.opened.append(memory)
        return memory

    def seed(self, files: int, parallel: bool) -> None:
        _seed(self.memory, files, False)

    def close(self) -> None:
        for memory in self.opened:
            memory.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.memory, name)


def workload(files: int) -> list[tuple[str, Callable[[Any], Any]]]:
    big = f"rename dir ({files} files)"
    return [
        ("view root", lambda b: b.view("/memories")),
        ("create", lambda b: b.create("/memories/notes/diary.md", NOTE)),
        ("view file", lambda b: b.view("/memories/notes/diary.md")),
        ("view file, cold process", lambda b: b.cold().view("/memories/notes/diary.md")),
        ("str_replace", lambda b: b.str_replace("/memories/notes/diary.md", "green tea", "jasmine tea")),
        ("insert", lambda b: b.insert("/memories/notes/diary.md", 1, "Name: Ada")),
        ("rename file", lambda b: b.rename("/memories/notes/diary.md", "/memories/notes/journal.md")),
        ("view directory", lambda b: b.view("/memories/notes")),
        (big, lambda b: b.rename("/memories/big", "/memories/archive")),
        ("delete file", lambda b: b.delete("/memories/notes/journal.md")),
        (f"delete dir ({files} files)", lambda b: b.delete("/memories/archive")),
    ]


def run_backend(
    backend: Any, network: Any, files: int, fsyncs: FsyncCounter | None = None, server: Any = None, rtt: float = 0.0
) -> list[Row]:
    network.enabled = False
    if server is not None:
        server.set_rtt(0)  # seeding is not what is measured
    try:
        backend.seed(files, parallel=server is not None)
        backend.view("/memories")  # warm: clients connected, tenant key cached
    finally:
        if server is not None:
            server.set_rtt(rtt)
    network.enabled = True
    rows = []
    for command, step in workload(files):
        before = server.cpu_seconds() if server is not None else None
        sample = measure(partial(step, backend), network, fsyncs)
        after = server.cpu_seconds() if server is not None else None
        server_cpu = after - before if before is not None and after is not None else None
        rows.append(Row(backend.name, command, sample, server_cpu))
    return rows


def run_table(
    files: int, rtt: float, workers: int | None, fsyncs: FsyncCounter, server: Any = None
) -> tuple[list[Row], str]:
    """The per-command rows, and what sent s3memory's hot S3 requests (as observed)."""
    from fakeaws import FakeKMS, FakeS3, Network

    fake = None if server is not None else FakeS3()
    if server is not None:
        network, endpoint = Network(rtt=0.0, http=True), server.endpoint
    else:
        network, endpoint = Network(rtt=rtt, s3=fake, kms=FakeKMS()), None
    s3 = network.attach(library_s3_client(endpoint))
    print(f"s3memory's S3 client: {client_kind(s3)}", file=sys.stderr)
    plain, wrapped, kms = (network.attach(client) for client in plain_clients(endpoint))
    network.enabled = False
    plain.create_bucket(Bucket=BUCKET)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as directory:
        for make in (
            lambda: S3MemoryBackend(TENANT, "tenant", s3, kms, "tenant-user", workers, fake),
            lambda: S3MemoryBackend(KMS_MODE, "kms", s3, kms, "kms-user", workers, fake),
            lambda: ObviousBackend(plain, wrapped, kms, "obvious-user"),
            lambda: LocalBackend(f"{directory}/sdk"),
            lambda: EmbeddedBackend(f"{directory}/store"),
        ):
            backend = make()
            print(f"running {backend.name} ...", file=sys.stderr)
            try:
                rows += run_backend(backend, network, files, fsyncs, server, rtt)
            finally:
                backend.close()
    kind = client_kind(s3)
    if kind == "awscrt" and network.observed == 0:  # e.g. a hook made it leave them all to botocore
        kind = "botocore (the awscrt client left every request to it)"
    return rows, kind


def _agent_workload(target: Any, directory: str, files: int) -> None:
    for i in range(files):
        path = f"/memories/{directory}/note-{i}.md"
        target.create(path, "a\nb\n")
        target.view(path)
        target.str_replace(path, "a", "c")
        target.insert(path, 1, "z")


def run_agent_workload(files: int, repeat: int, fsyncs: FsyncCounter) -> dict[str, Sample]:
    """``4 * files`` commands on each local backend, best of ``repeat`` (interleaved)."""
    best: dict[str, Sample] = {}
    with tempfile.TemporaryDirectory() as directory:
        backends: list[Any] = [LocalBackend(f"{directory}/sdk"), EmbeddedBackend(f"{directory}/store")]
        try:
            for backend in backends:
                backend.create("/memories/warm.md", "warm\n")  # the store and tenant key exist
            for run in range(repeat):
                for backend in backends:
                    sample = measure(partial(_agent_workload, backend, f"run{run}", files), None, fsyncs)
                    if backend.name not in best or sample.seconds < best[backend.name].seconds:
                        best[backend.name] = sample
        finally:
            for backend in backends:
                backend.close()
    return best


def cold_start() -> dict[str, float]:
    """Best of five fresh interpreters: import time of each module, and of building a tool."""
    client = "s3 = boto3.client('s3', region_name='us-east-1')"
    snippets = {
        "import s3memory": "import s3memory",
        "import boto3": "import boto3",
        "import boto3, s3memory": "import boto3, s3memory",
        "import boto3 + an S3 client": f"import boto3; {client}",
        "import boto3, s3memory + an S3 client + a tool": (
            f"import boto3, s3memory; {client}; "
            "s3memory.open_memory(user_id='u', bucket='b', s3_client=s3, master_key=bytes(range(1, 33)))"
        ),
        "import anthropic (what the core does not load)": "import anthropic",
    }
    results = {}
    for label, code in snippets.items():
        timer = f"import time; t = time.perf_counter(); {code}; print(time.perf_counter() - t)"
        runs = [
            float(subprocess.run([sys.executable, "-c", timer], capture_output=True, text=True, check=True).stdout)
            for _ in range(5)
        ]
        results[label] = min(runs)
    return results


_FIRST_COMMAND = """
import sys, time
started = time.perf_counter()
import s3memory
imported = time.perf_counter()
loaded = sorted({"boto3", "botocore", "anthropic"} & {name.split(".")[0] for name in sys.modules})
memory = s3memory.open_memory(user_id="cold-user", bucket=%r, kms_key_id=%r)
opened = time.perf_counter()
memory.view("/memories/notes/diary.md")
done = time.perf_counter()
print(imported - started, opened - imported, done - opened, done - started, ",".join(loaded) or "-")
"""


def first_command(server: Any) -> dict[str, Any]:
    """A fresh interpreter that imports s3memory, opens memory with the clients s3memory
    builds itself (``AWS_ENDPOINT_URL`` points them at the HTTP fake) and views one file:
    the tenant key's GET and KMS Decrypt, then the file's GET. Best of three by total."""
    memory = http_memory(server.endpoint, "cold-user")
    try:
        memory.create("/memories/notes/diary.md", NOTE)
    finally:
        memory.close()
    environment = {**os.environ, "AWS_ENDPOINT_URL": server.endpoint}
    runs = []
    for _ in range(3):
        out = subprocess.run(
            [sys.executable, "-c", _FIRST_COMMAND % (BUCKET, KMS_KEY)],
            env=environment,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        runs.append(out)
    best = min(runs, key=lambda out: float(out[3]))
    return {
        "import s3memory": float(best[0]),
        "open_memory (builds the boto3 clients)": float(best[1]),
        "first view of a file (tenant key GET + KMS Decrypt + GET)": float(best[2]),
        "total": float(best[3]),
        "loaded by import s3memory": best[4],
    }


def import_check() -> tuple[float, list[str]]:
    """``python -X importtime -c "import s3memory"``, best of three: the cumulative import
    time of s3memory, and which of boto3, botocore and anthropic it imported (none, we hope)."""
    best, loaded = float("inf"), set()
    for _ in range(3):
        err = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import s3memory"], capture_output=True, text=True, check=True
        ).stderr
        for line in err.splitlines():
            parts = line.split("|")
            if len(parts) != 3 or not parts[1].strip().isdigit():
                continue
            name = parts[2].strip()
            loaded.add(name.split(".")[0])
            if name == "s3memory":
                best = min(best, int(parts[1]) / 1e6)
    return best, sorted(loaded & {"boto3", "botocore", "anthropic"})


def cross_check_moto(files: int) -> str:
    """Run the s3memory workload on moto and on the fake; the request counts must agree."""
    from fakeaws import FakeKMS, FakeS3, Network
    from moto import mock_aws

    counts = []
    for use_moto in (False, True):
        with mock_aws() if use_moto else nullcontext():
            network = Network(rtt=0.0, s3=None if use_moto else FakeS3(), kms=None if use_moto else FakeKMS())
            s3 = network.attach(library_s3_client(None))
            kms = network.attach(plain_clients(None)[2])
            s3.create_bucket(Bucket=BUCKET)
            key_id = kms.create_key()["KeyMetadata"]["Arn"] if use_moto else KMS_KEY
            backend = S3MemoryBackend("check", "tenant", s3, kms, "checker", None, key_id=key_id)
            try:
                rows = run_backend(backend, network, files)
            finally:
                backend.close()
            counts.append([(r.command, dict(r.sample.s3), r.sample.kms) for r in rows])
    if counts[0] != counts[1]:
        raise SystemExit(f"moto cross-check FAILED:\nfake: {counts[0]}\nmoto: {counts[1]}")
    return f"moto cross-check: identical S3 request and KMS call counts on all {len(counts[0])} commands"


@dataclass
class Results:
    rtt: float
    files: int
    http: bool
    workers: int
    rows: list[Row] = field(default_factory=list)
    agent: dict[str, Sample] = field(default_factory=dict)
    agent_files: int = 50
    scale: list[Any] = field(default_factory=list)
    starts: dict[str, float] = field(default_factory=dict)
    first: dict[str, Any] = field(default_factory=dict)
    imports: tuple[float, list[str]] | None = None
    machine: str = ""
    client: str = "botocore"  # what sends s3memory's hot S3 requests in the table
    server_cpu: dict[str, float] = field(default_factory=dict)  # the HTTP fake's, per command (tenant key)
    cli_rename: dict[str, Any] | None = None
    lambda_start: dict[str, Any] | None = None
    hung: dict[str, Any] | None = None

    def row(self, backend: str, command: str) -> Sample | None:
        return next((r.sample for r in self.rows if r.backend == backend and r.command == command), None)

    def scaled(self, store: str, files: int, command: str) -> Sample | None:
        return next(
            (r.sample for r in self.scale if r.store == store and r.files == files and r.command.startswith(command)),
            None,
        )


_ms = ms


def _cell(sample: Sample, remote: bool, command: str) -> str:
    if remote:
        text = (
            f"{sample.s3_text} / {sample.kms} KMS / {sample.round_trips} RT / {_ms(sample.seconds)} / "
            f"CPU {_ms(sample.cpu)}"
        )
        if command.startswith("rename dir") and sample.requests:
            text += f" ({sample.cpu * 1000 / sample.requests:.2f} ms/req)"
        return text
    return f"{_ms(sample.seconds)} / CPU {_ms(sample.cpu)} / {sample.fsyncs} syncs"


def render(results: Results) -> str:
    lines = [
        f"Simulated network: {results.rtt * 1000:g} ms per request, "
        + (
            "over real HTTP/1.1 (keep-alive) to a fake S3 and KMS in another process"
            if results.http
            else "in process (the fake answers inside botocore)"
        )
        + f"; directory of {results.files} files; s3memory's worker pool: {results.workers}; "
        + f"its S3 client: {results.client}"
        + (" (the `fast` extra)" if results.client == "awscrt" else "")
        + ". "
        f"Measured {results.machine}.",
        "",
    ]
    if results.rows:
        backends = list(dict.fromkeys(r.backend for r in results.rows))
        commands = list(dict.fromkeys(r.command for r in results.rows))
        table = {(r.backend, r.command): r.sample for r in results.rows}
        lines += [
            "Each cell: S3 requests / KMS calls / sequential round trips / latency / client CPU "
            "(local backends: latency / CPU / fsync, fdatasync and syncfs calls).",
            "",
            "| command | " + " | ".join(backends) + " | obvious ÷ s3memory | embedded ÷ SDK local |",
            "| --- | " + " | ".join("---" for _ in backends) + " | --- | --- |",
        ]

        def ratio(a: float, b: float) -> str:
            return f"{a / max(b, 1e-9):.1f}x"

        for command in commands:
            cells = [_cell(table[(b, command)], b not in (SDK, EMBEDDED), command) for b in backends]
            ratios = [
                ratio(table[(OBVIOUS, command)].seconds, table[(TENANT, command)].seconds),
                ratio(table[(EMBEDDED, command)].seconds, table[(SDK, command)].seconds),
            ]
            lines.append(f"| {command} | " + " | ".join(cells + ratios) + " |")
        totals = {b: sum(table[(b, c)].seconds for c in commands) for b in backends}
        cpus = {b: sum(table[(b, c)].cpu for c in commands) for b in backends}
        lines.append(
            f"| all {len(commands)} commands | "
            + " | ".join(f"{_ms(totals[b])} / CPU {_ms(cpus[b])}" for b in backends)
            + f" | {ratio(totals[OBVIOUS], totals[TENANT])} | {ratio(totals[EMBEDDED], totals[SDK])} |"
        )
        lines.append("")
    if results.agent:
        lines += [
            f"Agent workload on the same disk: {results.agent_files}x (create, view, str_replace, insert) = "
            f"{4 * results.agent_files} commands, best of the runs:",
            "",
            "| backend | wall | client CPU | syncs (fsync, fdatasync, syncfs) |",
            "| --- | --- | --- | --- |",
        ]
        for name, sample in results.agent.items():
            lines.append(f"| {name} | {_ms(sample.seconds)} | {_ms(sample.cpu)} | {sample.fsyncs} |")
        if EMBEDDED in results.agent and SDK in results.agent:
            ratio_text = results.agent[EMBEDDED].seconds / max(results.agent[SDK].seconds, 1e-9)
            lines.append(f"| embedded ÷ SDK local | {ratio_text:.2f}x | | |")
        lines.append("")
    if results.scale:
        from scale import render as render_scale

        lines += [*render_scale(results.scale, results.rtt * 1000), ""]
    lines += ["Issue 29 targets:", "", "| what | measured | target | met |", "| --- | --- | --- | --- |"]
    for target in targets(results, TENANT, EMBEDDED, SDK):
        met = "-" if target.met is None else ("met" if target.met else "**not met**")
        lines.append(f"| {target.what} | {target.measured} | {target.target} | {met} |")
    lines.append("")
    if results.starts:
        lines += ["Cold start (best of 5 fresh interpreters):", ""]
        lines += [f"- {label}: {seconds * 1000:.0f} ms" for label, seconds in results.starts.items()]
        lines.append("")
    if results.first:
        lines += [
            "First command in a fresh process, against the HTTP fake (clients built by s3memory; best of 3):",
            "",
        ]
        lines += [
            f"- {label}: {value * 1000:.0f} ms" if isinstance(value, float) else f"- {label}: {value}"
            for label, value in results.first.items()
        ]
        lines.append("")
    if results.imports is not None:
        seconds, loaded = results.imports
        lines.append(
            f"`python -X importtime -c 'import s3memory'`: {seconds * 1000:.0f} ms cumulative (budget 100 ms); "
            f"boto3, botocore, anthropic imported: {', '.join(loaded) or 'none'}."
        )
    return "\n".join(lines).rstrip() + "\n"


def write_outputs(rows: list[Row], report: str, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "latest.md", out / "latest.csv"]
    (out / "latest.md").write_text(report)
    with open(out / "latest.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            [
                "backend",
                "command",
                "s3_requests",
                "s3_detail",
                "kms_calls",
                "round_trips",
                "latency_ms",
                "cpu_ms",
                "syncs",
            ]
        )
        for r in rows:
            s = r.sample
            writer.writerow(
                [
                    r.backend,
                    r.command,
                    s.requests,
                    s.s3_text,
                    s.kms,
                    s.round_trips,
                    f"{s.seconds * 1000:.2f}",
                    f"{s.cpu * 1000:.2f}",
                    s.fsyncs,
                ]
            )
    if not rows:
        return written
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return written
    backends = list(dict.fromkeys(r.backend for r in rows))
    commands = list(dict.fromkeys(r.command for r in rows))
    figure, axis = plt.subplots(figsize=(12, 5))
    width = 0.8 / len(backends)
    for i, backend in enumerate(backends):
        values = [
            next(r.sample.seconds * 1000 for r in rows if r.backend == backend and r.command == c) for c in commands
        ]
        axis.bar([x + i * width for x in range(len(commands))], values, width, label=backend)
    axis.set_yscale("log")
    axis.set_ylabel("latency (ms, log scale)")
    axis.set_xticks(
        [x + width * (len(backends) - 1) / 2 for x in range(len(commands))], commands, rotation=30, ha="right"
    )
    axis.legend()
    figure.tight_layout()
    figure.savefig(out / "latency.png", dpi=100)
    plt.close(figure)
    written.append(out / "latency.png")
    return written


def _machine() -> str:
    import botocore

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{datetime.date.today().isoformat()} on {os.cpu_count()} cores ({platform.system()} {platform.release()}, "
        f"{platform.machine()}), Python {platform.python_version()}, botocore {botocore.__version__}, "
        f"load average {load:.1f} at the start"
    )


@contextmanager
def _http_server(rtt: float, wanted: bool) -> Iterator[Any]:
    if not wanted:
        yield None
        return
    from httpfake import serve

    with serve(rtt) as server:
        yield server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rtt-ms", type=float, default=20.0, help="simulated round trip per request (default 20)")
    parser.add_argument("--files", type=int, default=1000, help="files in the renamed/deleted directory (default 1000)")
    parser.add_argument("--http", action="store_true", help="real HTTP to the fake in another process")
    parser.add_argument("--workers", type=int, help="s3memory's max_workers (default: the library's)")
    parser.add_argument("--agent-files", type=int, default=50, help="agent workload: 4 commands per file (50)")
    parser.add_argument("--repeat", type=int, default=3, help="agent workload runs; the best is kept (3)")
    parser.add_argument("--scale", default="", help="comma-separated file counts for scale runs, e.g. 10000,100000")
    parser.add_argument(
        "--scale-commands", default="view,rename,delete", help="which scale commands (default view,rename,delete)"
    )
    parser.add_argument("--scale-local-max", type=int, default=10_000, help="largest local scale run (10000)")
    parser.add_argument("--memory", action="store_true", help="trace each scale command's peak (slow)")
    parser.add_argument("--no-table", action="store_true", help="skip the per-command table and agent workload")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results", help="where to write results")
    parser.add_argument("--check-moto", action="store_true", help="cross-check request counts against moto")
    parser.add_argument("--no-cold-start", action="store_true", help="skip the import and first-command timings")
    parser.add_argument("--botocore", action="store_true", help="over HTTP, s3memory's client without awscrt")
    parser.add_argument(
        "--no-extras",
        action="store_true",
        help="skip the CLI's rename in a new process, the Lambda cold start (builds the package) and the hung endpoint",
    )
    parser.add_argument(
        "--docs",
        "--readme",  # its former name, from when the table was in README.md
        dest="docs",
        action="store_true",
        help="--http, and view/delete at --scale 10000 unless given; into docs/design/performance.md",
    )
    args = parser.parse_args(argv)
    if args.docs:
        args.http = True
        if not args.scale:
            # The targets' 5,000-file local view; a 10,000-file rename (30 s) is left to --scale.
            args.scale, args.scale_commands = "5000", "view,delete"
    names = {"view": "view /memories", "rename": "rename dir", "delete": "delete dir"}
    scale_commands = {names[word.strip()] for word in args.scale_commands.split(",") if word.strip()}
    for name, value in {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        os.environ.setdefault(name, value)
    import measure as measure_module

    from s3memory import Limits

    measure_module.FAST_CLIENT = not args.botocore
    started = time.perf_counter()
    rtt = args.rtt_ms / 1000
    results = Results(rtt, args.files, args.http, args.workers or Limits().max_workers, machine=_machine())
    results.agent_files = args.agent_files
    with (
        counting_fsyncs() as fsyncs,
        _http_server(rtt, args.http or not args.no_cold_start) as server,
    ):
        if not args.no_table:
            results.rows, results.client = run_table(
                args.files, rtt, args.workers, fsyncs, server if args.http else None
            )
            results.server_cpu = {
                row.command: row.server_cpu
                for row in results.rows
                if row.backend == TENANT and row.server_cpu is not None
            }
            print("running the agent workload ...", file=sys.stderr)
            results.agent = run_agent_workload(args.agent_files, args.repeat, fsyncs)
        sizes = [int(size) for size in args.scale.split(",") if size.strip()]
        for size in sizes:
            import scale

            print(f"scale: {size:,} files on S3 (in process) ...", file=sys.stderr)
            results.scale += scale.run_s3(size, rtt, args.workers, args.memory, scale_commands)
            if size <= args.scale_local_max:
                print(f"scale: {size:,} files on the local stores ...", file=sys.stderr)
                results.scale += scale.run_local(size, fsyncs, args.memory, scale_commands)
        if not args.no_extras:
            import hung_endpoint
            import lambda_start

            if args.http:
                import cli_rename

                print("the CLI's rename in a new process ...", file=sys.stderr)
                results.cli_rename = cli_rename.measure(server, rtt, files=args.files)
            print("the Lambda example's cold start (builds the package) ...", file=sys.stderr)
            results.lambda_start = lambda_start.measure()
            print("an endpoint that never answers ...", file=sys.stderr)
            results.hung = hung_endpoint.measure()
        if not args.no_cold_start:
            print("cold start ...", file=sys.stderr)
            results.starts = cold_start()
            results.first = first_command(server)
            results.imports = import_check()
    report = render(results)
    print(report)
    if args.check_moto:
        print(cross_check_moto(min(args.files, 25)))
    for path in write_outputs(results.rows, report, args.out):
        print(f"wrote {path}")
    if args.docs:
        text = PERFORMANCE_PAGE.read_text()
        start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
        PERFORMANCE_PAGE.write_text(text[:start] + "\n" + report + text[end:])
        print(f"updated {PERFORMANCE_PAGE}")
    print(f"total {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
