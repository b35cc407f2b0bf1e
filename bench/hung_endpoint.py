"""How long a request to an endpoint that accepts connections and never answers takes to
fail, with botocore's client and with s3memory's awscrt client (the ``fast`` extra).

    python bench/hung_endpoint.py [--timeout SECONDS]

A local TCP server accepts every connection, reads what is sent and never answers; one
``head_object`` is timed through each client, built by ``s3memory._aws.clients.new_client``
with ``timeout`` seconds to connect and per read (dummy credentials), and the server counts
the connections and requests each made. Both should fail after about attempts x timeout plus
the retries' backoff. ``measure()`` is what ``bench/run.py`` calls.
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from s3memory._aws.clients import new_client


class SilentServer:
    """Accepts connections on 127.0.0.1, reads requests, never answers; counts both."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port = self._listener.getsockname()[1]
        self.connections = 0
        self.requests = 0
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:  # closed by stop()
                return
            with self._lock:
                if self._stopped:
                    connection.close()
                    return
                self.connections += 1
                self._open.append(connection)
            threading.Thread(target=self._read, args=(connection,), daemon=True).start()

    def _read(self, connection: socket.socket) -> None:
        pending = b""
        while True:
            try:
                data = connection.recv(65536)
            except OSError:
                return
            if not data:
                return
            pending += data
            # A request's head ends with a blank line; these bodiless HEADs have nothing after.
            while b"\r\n\r\n" in pending:
                _, _, pending = pending.partition(b"\r\n\r\n")
                with self._lock:
                    self.requests += 1

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            connections, self._open = self._open, []
        self._listener.close()
        for connection in connections:
            connection.close()


def _time_one_head(client: Any, server: SilentServer) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        client.head_object(Bucket="bench", Key="hung")
        error = "none (answered?)"
    except Exception as exc:
        error = type(exc).__name__
    return {
        "seconds": round(time.perf_counter() - started, 3),
        "requests": server.requests,
        "connections": server.connections,
        "error": error,
    }


def _attempts(client: Any) -> int:
    retries = client.meta.config.retries or {}
    if "total_max_attempts" in retries:
        return int(retries["total_max_attempts"])
    return int(retries.get("max_attempts", 4)) + 1  # botocore's legacy default: 4 retries


def measure(timeout: float = 1.0) -> dict[str, Any]:
    """Seconds, requests and connections of one HEAD to a silent endpoint through botocore
    and through awscrt (None when the ``fast`` extra is not installed), with the bound both
    should keep to."""
    out: dict[str, Any] = {"timeout": timeout}
    for name in ("botocore", "awscrt"):
        server = SilentServer()
        try:
            client = new_client(
                "s3",
                endpoint_url=f"http://127.0.0.1:{server.port}",
                region_name="us-east-1",
                timeout=timeout,
                aws_access_key_id="bench",
                aws_secret_access_key="bench",
            )
            out["attempts"] = _attempts(client)
            if name == "awscrt":
                from s3memory._aws.crt import CrtS3Client, fast_client

                client = fast_client(client)
                if not isinstance(client, CrtS3Client):
                    out[name] = None
                    continue
            out[name] = _time_one_head(client, server)
        finally:
            server.stop()
    out["bound"] = f"{out['attempts']} x {timeout:g} s + backoff = {out['attempts'] * timeout:g} s + backoff"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=1.0, help="seconds to connect and per read (default 1)")
    result = measure(parser.parse_args().timeout)
    print(f"endpoint that never answers, timeout {result['timeout']:g} s; bound {result['bound']}")
    for name in ("botocore", "awscrt"):
        found = result[name]
        if found is None:
            print(f"  {name:8}  not installed (pip install -e '.[fast]')")
            continue
        print(
            f"  {name:8}  {found['seconds']:6.2f} s  {found['requests']} requests on "
            f"{found['connections']} connections  ({found['error']})"
        )


if __name__ == "__main__":
    main()
