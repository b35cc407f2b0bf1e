"""Keep-alive HTTP/1.1 connections made by awscrt, for :class:`~s3memory._aws.crt.CrtS3Client`.

Why not awscrt's ``S3Client``: it is built for large transfers (a meta request per call,
split into parts, with its own scheduling), and that machinery is most of its client CPU for
the small requests s3memory makes: 0.67-0.71 ms of client CPU a HEAD against 0.35-0.43 ms through
a connection of this pool, signed by awscrt too, with 64 at a time at 20 ms a request
(``bench/transport.py``, measured when the pool replaced it). What the pool adds to awscrt's
``HttpClientConnection`` is what urllib3's pool gives botocore: idle connections kept per
host and reused, a dropped one never reused, at most ``max_idle`` kept.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["ConnectionPools"]


class ConnectionPools:
    """Idle connections per ``host[:port]``, made on demand; thread-safe.

    ``tls`` makes the TLS options of a new connection to a host name (None: plain HTTP).
    """

    def __init__(self, *, tls: Callable[[str], Any] | None, connect_timeout: float, max_idle: int) -> None:
        self._http = importlib.import_module("awscrt.http")
        crt_io = importlib.import_module("awscrt.io")
        self._bootstrap = crt_io.ClientBootstrap.get_or_create_static_default()
        self._socket = crt_io.SocketOptions()
        self._socket.connect_timeout_ms = max(int(connect_timeout * 1000), 1)
        self._connect_wait = connect_timeout + 1.0  # awscrt's own timeout fires first
        self._tls = tls
        self._max_idle = max(max_idle, 1)
        self._idle: dict[str, list[Any]] = {}
        self._lock = threading.Lock()

    def take(self, host: str) -> Any:
        """An open connection to ``host``: the most recently used idle one, or a new one.

        Raises:
            awscrt.exceptions.AwsCrtError: the connection could not be made (refused,
                timed out, TLS refused, the name not found).
        """
        with self._lock:
            idle = self._idle.get(host)
            while idle:
                connection = idle.pop()
                if connection.is_open():
                    return connection
        name, _, port = host.rpartition(":") if host.rpartition(":")[2].isdigit() else (host, "", "")
        name = name.strip("[]")  # an IPv6 address, as a URL writes it
        options = self._tls(name) if self._tls is not None else None
        future = self._http.HttpClientConnection.new(
            host_name=name,
            port=int(port) if port else (443 if options is not None else 80),
            bootstrap=self._bootstrap,
            socket_options=self._socket,
            tls_connection_options=options,
        )
        return future.result(self._connect_wait)

    def give_back(self, host: str, connection: Any) -> None:
        """Keep ``connection`` for the next request to ``host``, if it is still open and
        fewer than ``max_idle`` are kept; otherwise close it."""
        if connection.is_open():
            with self._lock:
                idle = self._idle.setdefault(host, [])
                if len(idle) < self._max_idle:
                    idle.append(connection)
                    return
        connection.close()
