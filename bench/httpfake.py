"""The fake S3 and KMS of ``fakeaws.py`` behind a real HTTP/1.1 server, in another process.

    python bench/httpfake.py --rtt-ms 20      # prints "ready PORT", serves until stdin closes

``run.py --http`` starts it with :func:`serve` and points its boto3 clients at it, so that
botocore's HTTP stack (urllib3, http.client, sockets), signing and parsing are paid as on
AWS, while the server's own CPU is spent in another process. The server sleeps the round
trip on its handler thread, so concurrent requests overlap as over a network; the client
must not sleep as well. A request with an ``X-Amz-Target: TrentService...`` header is KMS,
any other is S3 (path-style). ``POST /__bench/rtt?ms=N`` changes the round trip (the bench
seeds files at 0). It binds 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import http.client
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class _Request:
    """What ``FakeS3.respond``/``FakeKMS.respond`` read of a botocore request."""

    url: str
    method: str
    headers: dict[str, str]
    body: bytes


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as botocore's pool expects
    # Without it a response written in two segments waits for the client's delayed ACK
    # (Nagle): about 40 ms per request, more than the round trip being simulated.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, *_: Any) -> None:
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while size := int(self.rfile.readline().split(b";")[0], 16):
                out += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()
            return bytes(out)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _any(self) -> None:
        body = self._body()
        if self.path.startswith("/__bench/rtt"):
            self.server.rtt = float(parse_qs(urlsplit(self.path).query)["ms"][0]) / 1000
            self._reply(204, {}, b"")
            return
        if self.server.rtt:
            time.sleep(self.server.rtt)
        headers = dict(self.headers.items())
        request = _Request(f"http://{self.headers.get('Host', 'fake')}{self.path}", self.command, headers, body)
        target = next((v for k, v in headers.items() if k.lower() == "x-amz-target"), "")
        fake = self.server.kms if target.startswith("TrentService") else self.server.s3
        response = fake.respond(request)
        self._reply(response.status_code, dict(response.headers.items()), response.raw.read())

    def _reply(self, status: int, headers: dict[str, str], data: bytes) -> None:
        self.send_response(status)
        length = str(len(data))
        for name, value in headers.items():
            if name.lower() == "content-length":
                length = value if self.command == "HEAD" else length  # a HEAD tells the object's size
            else:
                self.send_header(name, value)
        self.send_header("Content-Length", length)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # a pool of 64 connections opens them all at once

    def __init__(self, rtt: float) -> None:
        from fakeaws import FakeKMS, FakeS3

        super().__init__(("127.0.0.1", 0), _Handler)
        self.rtt = rtt
        self.s3 = FakeS3()
        self.kms = FakeKMS()


def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rtt-ms", type=float, default=20.0)
    args = parser.parse_args()
    server = _Server(args.rtt_ms / 1000)

    def orphaned() -> None:
        sys.stdin.read()  # the parent holds our stdin: EOF means it is gone, however it died
        os._exit(0)

    threading.Thread(target=orphaned, daemon=True).start()
    print(f"ready {server.server_address[1]}", flush=True)
    server.serve_forever()


@dataclass
class FakeServer:
    """A running ``httpfake.py``, from the parent's side."""

    port: int
    process: subprocess.Popen[str]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float | None:
        """The server process's CPU so far (user + system, from /proc; None elsewhere): on a
        machine with few cores it competes with the client's."""
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def set_rtt(self, seconds: float) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            connection.request("POST", f"/__bench/rtt?ms={seconds * 1000:g}")
            connection.getresponse().read()
        finally:
            connection.close()


@contextmanager
def serve(rtt: float) -> Iterator[FakeServer]:
    """Start the server with ``rtt`` seconds per request; kill it on the way out."""
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--rtt-ms", str(rtt * 1000)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("ready "):
            raise RuntimeError(f"httpfake.py did not start: {line!r}")
        yield FakeServer(int(line.split()[1]), process)
    finally:
        process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    _main()
