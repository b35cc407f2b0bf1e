"""The CLI's rename of a 1,000-file directory in a new process, against the HTTP fake.

    python bench/cli_rename.py            # best of 3, 20 ms per request

What a user running ``s3memory rename`` pays: the interpreter, the CLI's imports, the clients
s3memory builds (``AWS_ENDPOINT_URL`` points them at the fake), the tenant key (GET and KMS
Decrypt) and the rename itself. ``run.py --http`` calls :func:`measure` with its server.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from measure import BUCKET, KMS_KEY, REGION, http_memory

USER = "cli-user"


def _seed(server: Any, files: int) -> None:
    memory = http_memory(server.endpoint, USER)
    try:
        memory.create("/memories/big/note-0000.md", "x\n")  # the tenant key, once
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: memory.create(f"/memories/big/note-{i:04d}.md", f"note {i}\n"), range(1, files)))
    finally:
        memory.close()


def measure(server: Any, rtt: float, files: int = 1000, runs: int = 3) -> dict[str, Any]:
    """Seed ``files`` files at no delay, then time ``s3memory rename`` of their directory
    (back and forth) in fresh processes at ``rtt`` seconds per request; best of ``runs``.
    Returns wall seconds and the child's CPU seconds (user + system) of the best run."""
    server.set_rtt(0)
    try:
        _seed(server, files)
    finally:
        server.set_rtt(rtt)
    environment = {
        **os.environ,
        "AWS_ENDPOINT_URL": server.endpoint,
        "S3MEMORY_BUCKET": BUCKET,
        "S3MEMORY_KMS_KEY_ID": KMS_KEY,
        "S3MEMORY_USER": USER,
    }
    best: tuple[float, float] | None = None
    paths = ["/memories/big", "/memories/archive"]
    for run in range(runs):
        source, target = paths[run % 2], paths[1 - run % 2]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "s3memory", "rename", source, target],
            env=environment,
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise RuntimeError(f"s3memory rename failed: {done.stderr.strip()}")
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if best is None or seconds < best[0]:
            best = (seconds, cpu)
    assert best is not None
    return {"seconds": best[0], "cpu": best[1], "files": files}


def main() -> None:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        os.environ.setdefault(name, value)
    from httpfake import serve

    with serve(0.020) as server:
        result = measure(server, 0.020)
    seconds, cpu = result["seconds"], result["cpu"]
    print(f"s3memory rename of {result['files']:,} files in a new process: {seconds:.2f} s, CPU {cpu:.2f} s")


if __name__ == "__main__":
    main()
