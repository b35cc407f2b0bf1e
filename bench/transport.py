"""Client CPU per S3 request of each HTTP stack s3memory can use, against the HTTP fake.

    python bench/transport.py                 # 2,000 HEADs: one at a time at 0 ms, 64 at a time at 20 ms

The same HEAD through botocore and through the awscrt client of the ``fast`` extra
(``s3memory._aws.crt``, when awscrt is installed): what a request costs the client's CPU
(``time.process_time``, every thread of this process) apart from s3memory's own work, which
``run.py``'s rename row adds to it.
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from measure import BUCKET, REGION


def _heads(head: Any, requests: int, threads: int) -> tuple[float, float]:
    """Wall and CPU seconds per request of ``requests`` calls of ``head``, ``threads`` at a time."""
    head()  # connected
    started, cpu = time.perf_counter(), time.process_time()
    if threads == 1:
        for _ in range(requests):
            head()
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda _: head(), range(requests)))
    return (time.perf_counter() - started) / requests, (time.process_time() - cpu) / requests


def measure(server: Any, requests: int = 2000) -> list[dict[str, Any]]:
    """A row per stack and load: one request at a time at no delay, 64 at a time at 20 ms."""
    from s3memory._aws.clients import new_client
    from s3memory._aws.crt import fast_client

    boto = new_client("s3", region_name=REGION, endpoint_url=server.endpoint)
    server.set_rtt(0)
    boto.create_bucket(Bucket=BUCKET)
    boto.put_object(Bucket=BUCKET, Key="t/k", Body=b"x" * 200, Metadata={"m": "v"})
    clients = {"botocore": boto}
    fast = fast_client(new_client("s3", region_name=REGION, endpoint_url=server.endpoint))
    if fast is not boto and type(fast).__name__ == "CrtS3Client":
        clients["awscrt"] = fast
    rows = []
    for threads, rtt in ((1, 0.0), (64, 0.020)):
        server.set_rtt(rtt)
        for name, client in clients.items():
            wall, cpu = _heads(lambda c=client: c.head_object(Bucket=BUCKET, Key="t/k"), requests, threads)
            rows.append({"client": name, "threads": threads, "rtt": rtt, "wall": wall, "cpu": cpu})
    return rows


def main() -> None:
    for name, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}.items():
        os.environ.setdefault(name, value)
    from httpfake import serve

    with serve(0.0) as server:
        rows = measure(server)
    for row in rows:
        print(
            f"{row['client']:9s} {row['threads']:2d} at a time, {row['rtt'] * 1000:.0f} ms: "
            f"CPU {row['cpu'] * 1000:.3f} ms per request (wall {row['wall'] * 1000:.3f} ms)"
        )


if __name__ == "__main__":
    main()
