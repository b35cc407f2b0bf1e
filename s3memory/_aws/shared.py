"""The clients users are told to share: :func:`s3_client` and :func:`kms_client`, made once per
process for each setting and kept, so that every memory opened with them (every invocation
of a warm Lambda function) shares their connections, and :func:`describe_s3_client`, which
says which HTTP stack sends a client's object requests (``s3memory info``, ``--debug``).

Apart from ``clients`` because it also wraps (``crt.fast_client``), which needs ``clients``.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

from .clients import DEFAULT_TIMEOUT_SECONDS, aws_environment, check_timeout, new_client


def s3_client(
    *,
    region_name: str | None = None,
    endpoint_url: str | None = None,
    timeout: float | None = None,
    connect_timeout: float | None = None,
    **credentials: Any,
) -> Any:
    """The S3 client to hand to ``open_memory(s3_client=...)``: botocore's, configured as
    :func:`client_config` says, with the six verbs s3memory sends per file going through
    awscrt when the ``fast`` extra is installed (:func:`describe_s3_client` says which).

    Without explicit credentials it is made once per process for each (region, endpoint,
    timeouts, ``AWS_*`` environment) and shared: every memory opened with it, in every
    invocation of a warm Lambda function, shares its connections (and awscrt's). With
    ``aws_access_key_id=...`` (an assumed role's session), a new client each call: keep it
    while its credentials last.

    Raises:
        ConfigurationError: no region, an invalid one or timeout, or a missing AWS profile.
    """
    return _client("s3", region_name, endpoint_url, timeout, connect_timeout, credentials)


def kms_client(
    *,
    region_name: str | None = None,
    endpoint_url: str | None = None,
    timeout: float | None = None,
    connect_timeout: float | None = None,
    **credentials: Any,
) -> Any:
    """The KMS client to hand to ``open_memory(kms_client=...)``, made and shared as
    :func:`s3_client` is (KMS requests always go through botocore).

    Raises:
        ConfigurationError: no region, an invalid one or timeout, or a missing AWS profile.
    """
    return _client("kms", region_name, endpoint_url, timeout, connect_timeout, credentials)


_shared_lock = threading.Lock()
# The shared clients of the current AWS_* environment: (environment, {settings: client}).
_shared: tuple[tuple[tuple[str, str], ...], dict[tuple[Any, ...], Any]] = ((), {})


def _client(
    service: str,
    region_name: str | None,
    endpoint_url: str | None,
    timeout: float | None,
    connect_timeout: float | None,
    credentials: dict[str, Any],
) -> Any:
    def make() -> Any:
        client = new_client(
            service,
            region_name=region_name,
            endpoint_url=endpoint_url,
            timeout=timeout,
            connect_timeout=connect_timeout,
            **credentials,
        )
        if service == "s3":
            from .crt import fast_client

            client = fast_client(client)
        return client

    if credentials:
        return make()
    global _shared
    seconds = DEFAULT_TIMEOUT_SECONDS if timeout is None else check_timeout(timeout)
    connect = seconds if connect_timeout is None else check_timeout(connect_timeout, name="connect_timeout")
    settings = (service, region_name or "", endpoint_url or "", seconds, connect)
    environment = aws_environment()
    with _shared_lock:  # held while making: one client per settings, never two
        if _shared[0] != environment:  # credentials or profile changed: the old ones are stale
            _shared = environment, {}
        found = _shared[1].get(settings)
        if found is None:
            found = _shared[1][settings] = make()
        return found


def describe_s3_client(client: Any) -> tuple[str, str]:
    """Which HTTP stack sends ``client``'s requests for object data, and why:
    ``("awscrt", ...)`` or ``("botocore", ...)``, or ``("other", ...)`` for an object that is
    neither (a test's stand-in)."""
    from .crt import CrtS3Client

    if isinstance(client, CrtS3Client):
        return "awscrt", "the fast extra: HEAD, GET, PUT, COPY, LIST and DELETE of objects go through awscrt"
    from botocore.client import BaseClient

    if not isinstance(client, BaseClient):
        return "other", f"a client of the application's ({type(client).__name__})"
    try:
        importlib.import_module("awscrt.http")
    except ImportError:
        return "botocore", "awscrt is not installed (the fast extra: pip install 's3memory[fast]')"
    return "botocore", (
        "a client the application made, or one awscrt cannot stand in for "
        "(no credentials, unsigned, a proxy, a client certificate, or a mock intercepting its requests)"
    )
