"""``s3memory serve``: Anthropic's memory-store API over the configured stores, on HTTP;
``s3memory serve-key create|list|revoke``: the server's scoped API keys.

The key comes from ``S3MEMORY_SERVE_KEY`` only: a flag's value shows in ``ps`` and in the
shell's history. The API (``serve.api``), the server (``serve.app``, the ``serve`` extra)
and the keys (``serve.keys``) are imported when a command runs, so the rest of the CLI
never loads them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from .._errors import ConfigurationError, S3MemoryError
from .output import (
    EXIT_CONFIGURATION,
    LOG_HANDLER,
    command,
    die,
    fail,
    invocation,
    print_json,
    printable,
    settings_or_exit,
)

if TYPE_CHECKING:
    from ..serve.keys import Access, KeyRing

__all__ = ["COMMANDS", "KEY_VARIABLE", "MIN_KEY_CHARS", "serve", "serve_key"]

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


# -- serve-key ---------------------------------------------------------------------------------
@click.group("serve-key")
def serve_key() -> None:
    """Create, list and revoke the API keys of s3memory serve (stored only as hashes).

    A key is scoped to every store or to some (--store), to reading and writing or to
    reading only (--read-only); it is the actor recorded by every version it writes. Keys
    live, encrypted, in the store the settings name (the embedded default without a bucket),
    beside the memory stores' records. A revoked key is refused at once by this process and
    within 30 seconds by a running server.

    \b
    Examples:
      s3memory serve-key create ci-bot --read-only --store memstore_...
      s3memory serve-key list
      s3memory serve-key revoke apikey_0123456789abcdef
    """


@contextmanager
def _key_ring(ctx: click.Context) -> Iterator[KeyRing]:
    """The keys in the store the settings name; errors as one line and an exit status."""
    settings = settings_or_exit(ctx)
    from .._core.memory import EncryptedMemory
    from .._factory import UserMemories
    from ..serve.keys import KeyRing

    opened: list[Any] = []
    try:
        memories = UserMemories(**settings.memory_options())

        def open_tenant(user_id: str) -> EncryptedMemory:
            memory = memories.open(user_id, actor="cli")
            opened.append(memory)
            if not isinstance(memory, EncryptedMemory):  # pragma: no cover - no mounts are given
                raise TypeError("the registry tenant opened as a mounted tree")
            return memory

        try:
            yield KeyRing(open_tenant)
        finally:
            for memory in opened:
                memory.close()
    except S3MemoryError as error:
        fail(error)


def _checked(check: Callable[[Any], Any]) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A click callback of a ``serve.keys`` check: a bad argument is a usage error (exit 2)."""

    def callback(ctx: click.Context, parameter: click.Parameter, value: Any) -> Any:
        if value is None or value == ():
            return None
        try:
            check(value)
        except ConfigurationError as error:
            raise click.BadParameter(printable(str(error)), ctx, parameter) from None
        return value

    return callback


def _check_name(value: str) -> str:
    from ..serve.keys import check_name

    return check_name(value)


def _check_stores(value: tuple[str, ...]) -> list[str] | None:
    from ..serve.keys import check_stores

    return check_stores(value)


def _check_key_id(value: str) -> str:
    from ..serve.keys import kid_of

    return kid_of(value)


def _reach(stores: list[str] | None) -> str:
    return "every store" if stores is None else ",".join(stores)


@command("create", json_output=True)
@click.argument("name", callback=_checked(_check_name))
@click.option("--read-only", is_flag=True, help="read only: no create, change, delete or redact")
@click.option(
    "--store",
    "stores",
    multiple=True,
    metavar="MEMSTORE_ID",
    callback=_checked(_check_stores),
    help="a store the key may reach (repeat for more) [default: every store]",
)
@click.pass_context
def create_key(ctx: click.Context, name: str, read_only: bool, stores: tuple[str, ...] | None) -> None:
    """Create an API key NAME and print it, once: only its hash is stored.

    The key is printed alone on stdout; keep it in a secret store and give it to the
    client as its api_key. Without --store the key reaches every store, and a read-write
    one may also create, update, archive and delete stores.

    \b
    --json: {"key": "s3m_...", "id": "apikey_...", "name": ..., "access": "read_write" or
             "read_only", "stores": null or [id, ...], "created_at": ..., "revoked_at": null}
    """
    access: Access = "read_only" if read_only else "read_write"
    with _key_ring(ctx) as ring:
        record, key = ring.create(name, access=access, stores=stores or None)
    state = invocation(ctx)
    if state.json:
        print_json({"key": key, **record})
        return
    if not state.quiet:
        click.echo(
            f"created {record['id']} ({printable(record['name'], name=True)}): {record['access']}, "
            f"{_reach(record['stores'])}; the key, shown only now (only its hash is kept):",
            err=True,
        )
    click.echo(key)


@command("list", json_output=True)
@click.pass_context
def list_keys(ctx: click.Context) -> None:
    """List the API keys, revoked ones too, oldest first (never a secret or a hash).

    \b
    One line each: ID  ACCESS  CREATED  REVOKED (or "active")  STORES  NAME
    --json: {"keys": [{"id", "name", "access", "stores", "created_at", "revoked_at"}, ...]}
    """
    with _key_ring(ctx) as ring:
        keys = ring.list()
    if invocation(ctx).json:
        print_json({"keys": keys})
        return
    if not keys and not invocation(ctx).quiet:
        click.echo("no API keys; create one with: s3memory serve-key create NAME", err=True)
    for key in keys:
        revoked = "active" if key["revoked_at"] is None else key["revoked_at"]
        click.echo(
            f"{key['id']}  {key['access']:<10}  {printable(key['created_at'], name=True)}  "
            f"{printable(revoked, name=True):<27}  {_reach(key['stores'])}  {printable(key['name'], name=True)}"
        )


@command("revoke", json_output=True)
@click.argument("key_id", metavar="KEY_ID", callback=_checked(_check_key_id))
@click.pass_context
def revoke_key(ctx: click.Context, key_id: str) -> None:
    """Revoke the API key KEY_ID (apikey_...) for good; revoking it again changes nothing.

    A server refuses it within 30 seconds (it keeps a key it checked for at most that long).

    \b
    --json: {"id", "name", "access", "stores", "created_at", "revoked_at"}
    """
    with _key_ring(ctx) as ring:
        record = ring.revoke(key_id)
    if invocation(ctx).json:
        print_json(record)
        return
    if not invocation(ctx).quiet:
        click.echo(
            f"revoked {record['id']} ({printable(record['name'], name=True)}) at "
            f"{printable(record['revoked_at'], name=True)}; a running server refuses it within 30 seconds"
        )


for _subcommand in (create_key, list_keys, revoke_key):
    serve_key.add_command(_subcommand)

COMMANDS = (serve, serve_key)
