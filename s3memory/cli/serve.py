"""``s3memory serve``: Anthropic's memory-store API over the configured stores, on HTTP.

The key comes from ``S3MEMORY_SERVE_KEY`` only: a flag's value shows in ``ps`` and in the
shell's history. The API (``serve.api``) and the server (``serve.app``, the ``serve``
extra) are imported when the command runs, so the rest of the CLI never loads them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

import click

from .._errors import S3MemoryError
from .output import EXIT_CONFIGURATION, LOG_HANDLER, command, die, fail, invocation

__all__ = ["COMMANDS", "KEY_VARIABLE", "MIN_KEY_CHARS", "serve"]

KEY_VARIABLE = "S3MEMORY_SERVE_KEY"
MIN_KEY_CHARS = 32


@command()
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    envvar="S3MEMORY_SERVE_HOST",
    show_envvar=True,
    help="the address to listen on (0.0.0.0: every interface)",
)
@click.option(
    "--port",
    default=8000,
    show_default=True,
    type=click.IntRange(0, 65535),
    envvar="S3MEMORY_SERVE_PORT",
    show_envvar=True,
    help="the port to listen on (0: any free port)",
)
@click.pass_context
def serve(ctx: click.Context, host: str, port: int) -> None:
    """Serve Anthropic's memory-store API (/v1/memory_stores) on HTTP (needs the serve extra).

    For the Anthropic SDK's own client, unmodified: point its base_url at this server and
    give it the key. The key is read from S3MEMORY_SERVE_KEY only (never a flag: it would
    show in ps), at least 32 characters; it has full access to every store. One line per
    request is logged on stderr (method, path, status, time; never content, query or
    headers); --quiet leaves them out. Ctrl-C or SIGTERM stops it once the requests in
    flight are answered.

    \b
    Example:
      export S3MEMORY_SERVE_KEY="$(python -c 'import secrets; print(secrets.token_urlsafe(32))')"
      s3memory serve --port 8000
      # client = anthropic.Anthropic(base_url="http://127.0.0.1:8000", api_key=KEY)
    """
    key = os.environ.get(KEY_VARIABLE, "")
    if len(key) < MIN_KEY_CHARS:
        state = "is not set" if not key else f"has {len(key)} characters"
        die(
            f"{KEY_VARIABLE} {state}: set it to a secret of at least {MIN_KEY_CHARS} characters, "
            "e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'",
            EXIT_CONFIGURATION,
        )
    try:
        settings = invocation(ctx).settings()
        # Imported here, not above: the API and its framework load only for this command.
        from ..serve.api import build_api
        from ..serve.app import serve as serve_http

        api = build_api(settings, serve_key=key)
        try:
            with _request_lines(shown=not invocation(ctx).quiet):
                serve_http(api, host=host, port=port)
        finally:
            close = getattr(api, "close", None)
            if callable(close):
                close()
    except S3MemoryError as error:  # a bad setting, an address in use, a missing extra: one line
        fail(error)


@contextmanager
def _request_lines(*, shown: bool) -> Iterator[None]:
    """The server's lines (its address, one per request) on stderr at INFO, as ``--verbose``
    shows the library's: a server's operator expects them without asking. With --verbose
    or --debug they already are (on the parent logger, which the server's propagates to)."""
    logger = logging.getLogger("s3memory.serve")
    if not shown or LOG_HANDLER in logging.getLogger("s3memory").handlers:
        yield
        return
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(LOG_HANDLER)
    try:
        yield
    finally:
        logger.removeHandler(LOG_HANDLER)
        logger.setLevel(level)


COMMANDS = (serve,)
