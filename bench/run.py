"""Benchmark: s3memory against the obvious approach and the local-disk floor, side by side.

    python bench/run.py                   # 20 ms round trips, a 1,000-file directory
    python bench/run.py --rtt-ms 30 --files 200
    python bench/run.py --check-moto      # also cross-check request counts against moto

One workload (view root, view a file warm and cold, create, str_replace, insert, rename
a file, view a directory, rename and delete a directory of N files, delete a file) runs
on each of:

- s3memory, tenant-key mode (the tenant key wrapped by KMS) and KMS-per-object mode;
- the obvious approach: the official S3 Encryption Client with a KMS keyring, check then
  act, one request at a time (``baseline.py``);
- the SDK's ``BetaLocalFilesystemMemoryTool`` on local disk: the latency floor.

S3 and KMS are simulated in process (``fakeaws.py``: why not moto is explained there), with
a fixed delay per request that overlaps across threads like a network. Per command it
reports S3 requests by operation, KMS calls, sequential round trips (the longest chain of
requests that did not overlap) and wall-clock latency. Results go to bench/results/ as
Markdown and CSV, and a chart if matplotlib is installed (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

BUCKET = "bench-bucket"
REGION = "us-east-1"
KMS_KEY = "arn:aws:kms:us-east-1:111122223333:key/bench"
SHORT = {
    "GetObject": "GET",
    "PutObject": "PUT",
    "HeadObject": "HEAD",
    "ListObjectsV2": "LIST",
    "CopyObject": "COPY",
    "DeleteObjects": "DELETE-MANY",
    "DeleteObject": "DELETE",
}
README_START, README_END = "<!-- bench:start -->", "<!-- bench:end -->"
NOTE = "Dear diary,\nthe user prefers green tea and short answers.\nTimezone: UTC+1\n"


@dataclass
class Row:
    backend: str
    command: str
    s3: Counter[str]
    kms: int
    round_trips: int
    seconds: float

    @property
    def s3_text(self) -> str:
        return ", ".join(f"{SHORT.get(op, op)} {n}" for op, n in sorted(self.s3.items())) or "-"


def _clients(network: Any) -> tuple[Any, Any, Any]:
    import boto3
    from botocore.config import Config

    config = Config(s3={"addressing_style": "path"}, retries={"mode": "standard"}, max_pool_connections=64)
    s3 = network.attach(boto3.client("s3", region_name=REGION, config=config))
    wrapped = network.attach(boto3.client("s3", region_name=REGION, config=config))
    kms = network.attach(boto3.client("kms", region_name=REGION))
    return s3, wrapped, kms


class S3MemoryBackend:
    def __init__(self, name: str, mode: str, s3: Any, kms: Any, user: str, key_id: str = KMS_KEY) -> None:
        from s3memory import KeyCache, Limits, open_memory

        self.name = name

        def build() -> Any:
            return open_memory(
                user_id=user,
                bucket=BUCKET,
                s3_client=s3,
                kms_key_id=key_id,
                kms_client=kms,
                key_mode=mode,  # type: ignore[arg-type]
                key_cache=KeyCache(),
                limits=Limits(max_workers=64),
            )

        self.build = build
        self.memory = build()

    def cold(self) -> Any:
        return self.build()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.memory, name)


class ObviousBackend:
    def __init__(self, s3: Any, wrapped: Any, kms: Any, user: str) -> None:
        from baseline import ObviousMemory

        self.name = "obvious (S3EC + KMS, sequential)"
        self.memory = ObviousMemory(
            bucket=BUCKET, user_id=user, s3_client=s3, s3_client_to_wrap=wrapped, kms_client=kms, kms_key_id=KMS_KEY
        )

    def cold(self) -> Any:
        return self.memory  # it caches nothing: every read is a KMS call

    def __getattr__(self, name: str) -> Any:
        return getattr(self.memory, name)


class LocalBackend:
    def __init__(self, directory: str) -> None:
        from anthropic.tools.memory import BetaLocalFilesystemMemoryTool

        self.name = "SDK local filesystem (floor)"
        self.tool = BetaLocalFilesystemMemoryTool(base_path=directory)

    def cold(self) -> Any:
        return self

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


def seed(backend: Any, files: int) -> None:
    for i in range(files):
        backend.create(f"/memories/big/note-{i:04d}.md", f"memory {i}: " + "x" * 200 + "\n")


def run_backend(backend: Any, network: Any, files: int) -> list[Row]:
    network.enabled = False
    seed(backend, files)
    backend.view("/memories")  # warm: clients connected, tenant key cached
    network.enabled = True
    network.take()
    rows = []
    for command, step in workload(files):
        started = time.perf_counter()
        step(backend)
        seconds = time.perf_counter() - started
        calls, round_trips = network.take()
        s3 = Counter({k.split(":", 1)[1]: n for k, n in calls.items() if k.startswith("s3:")})
        kms = sum(n for k, n in calls.items() if k.startswith("kms:"))
        rows.append(Row(backend.name, command, s3, kms, round_trips, seconds))
    return rows


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


def cross_check_moto(files: int) -> str:
    """Run the s3memory workload on moto and on the fake; the request counts must agree."""
    from contextlib import nullcontext

    from fakeaws import FakeKMS, FakeS3, Network
    from moto import mock_aws

    counts = []
    for use_moto in (False, True):
        with mock_aws() if use_moto else nullcontext():
            network = Network(rtt=0.0, s3=None if use_moto else FakeS3(), kms=None if use_moto else FakeKMS())
            s3, _, kms = _clients(network)
            s3.create_bucket(Bucket=BUCKET)
            key_id = kms.create_key()["KeyMetadata"]["Arn"] if use_moto else KMS_KEY
            backend = S3MemoryBackend("check", "tenant", s3, kms, "checker", key_id)
            counts.append([(r.command, dict(r.s3), r.kms) for r in run_backend(backend, network, files)])
    if counts[0] != counts[1]:
        raise SystemExit(f"moto cross-check FAILED:\nfake: {counts[0]}\nmoto: {counts[1]}")
    return f"moto cross-check: identical S3 request and KMS call counts on all {len(counts[0])} commands"


def render(rows: list[Row], rtt_ms: float, files: int, starts: dict[str, float]) -> str:
    backends = list(dict.fromkeys(r.backend for r in rows))
    commands = list(dict.fromkeys(r.command for r in rows))
    table = {(r.backend, r.command): r for r in rows}
    ours, obvious = backends[0], backends[2]
    lines = [
        f"Simulated network: {rtt_ms:g} ms per request (overlapping across threads); "
        f"directory of {files} files. Each cell: S3 requests / KMS calls / sequential round trips / latency.",
        "",
        "| command | " + " | ".join(backends) + f" | {obvious.split(' (')[0]} ÷ s3memory |",
        "| --- | " + " | ".join("---" for _ in backends) + " | --- |",
    ]
    for command in commands:
        cells = []
        for backend in backends:
            r = table[(backend, command)]
            if r.s3 or r.kms:
                cells.append(f"{r.s3_text} / {r.kms} KMS / {r.round_trips} RT / {r.seconds * 1000:.0f} ms")
            else:
                cells.append(f"{r.seconds * 1000:.1f} ms")
        ratio = table[(obvious, command)].seconds / max(table[(ours, command)].seconds, 1e-9)
        lines.append(f"| {command} | " + " | ".join(cells) + f" | {ratio:.1f}x |")
    lines += ["", "Cold start (best of 5 fresh interpreters):", ""]
    lines += [f"- {label}: {seconds * 1000:.0f} ms" for label, seconds in starts.items()]
    return "\n".join(lines) + "\n"


def write_outputs(rows: list[Row], report: str, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "latest.md", out / "latest.csv"]
    (out / "latest.md").write_text(report)
    with open(out / "latest.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["backend", "command", "s3_requests", "s3_detail", "kms_calls", "round_trips", "latency_ms"])
        for r in rows:
            writer.writerow(
                [r.backend, r.command, sum(r.s3.values()), r.s3_text, r.kms, r.round_trips, f"{r.seconds * 1000:.2f}"]
            )
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
        values = [next(r.seconds * 1000 for r in rows if r.backend == backend and r.command == c) for c in commands]
        axis.bar([x + i * width for x in range(len(commands))], values, width, label=backend)
    axis.set_yscale("log")
    axis.set_ylabel("latency (ms, log scale)")
    axis.set_xticks(
        [x + width * (len(backends) - 1) / 2 for x in range(len(commands))], commands, rotation=30, ha="right"
    )
    axis.legend()
    figure.tight_layout()
    figure.savefig(out / "latency.png", dpi=100)
    written.append(out / "latency.png")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rtt-ms", type=float, default=20.0, help="simulated round trip per request (default 20)")
    parser.add_argument("--files", type=int, default=1000, help="files in the renamed/deleted directory (default 1000)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results", help="where to write results")
    parser.add_argument("--check-moto", action="store_true", help="cross-check request counts against moto")
    parser.add_argument("--no-cold-start", action="store_true", help="skip the import-time measurements")
    parser.add_argument("--readme", action="store_true", help="also put the table into README.md")
    args = parser.parse_args(argv)
    for name, value in {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        os.environ.setdefault(name, value)

    from fakeaws import FakeKMS, FakeS3, Network

    started = time.perf_counter()
    network = Network(rtt=args.rtt_ms / 1000, s3=FakeS3(), kms=FakeKMS())
    s3, wrapped, kms = _clients(network)
    s3.create_bucket(Bucket=BUCKET)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as directory:
        for backend in (
            S3MemoryBackend("s3memory (tenant key)", "tenant", s3, kms, "tenant-user"),
            S3MemoryBackend("s3memory (KMS per object)", "kms", s3, kms, "kms-user"),
            ObviousBackend(s3, wrapped, kms, "obvious-user"),
            LocalBackend(directory),
        ):
            print(f"running {backend.name} ...", file=sys.stderr)
            rows += run_backend(backend, network, args.files)
    report = render(rows, args.rtt_ms, args.files, {} if args.no_cold_start else cold_start())
    print(report)
    if args.check_moto:
        print(cross_check_moto(min(args.files, 25)))
    for path in write_outputs(rows, report, args.out):
        print(f"wrote {path}")
    if args.readme:
        readme = Path(__file__).parent.parent / "README.md"
        text = readme.read_text()
        start, end = text.index(README_START) + len(README_START), text.index(README_END)
        readme.write_text(text[:start] + "\n" + report + text[end:])
        print(f"updated {readme}")
    print(f"total {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
