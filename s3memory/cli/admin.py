"""The governance commands: ``info``, ``init``, ``expire``, ``rotate-key``, ``erase-user``, ``policy``.

What a person administering a memory runs, rather than what the model does: how it is keyed
and how big it is, the master key file, expiry, key rotation, erasure (crypto-shredding) and
the IAM, KMS and lifecycle documents of a deployment. The library modules doing the work of
the last four are imported only when they run, so the CLI's import stays light. ``cli``
registers :data:`COMMANDS` on its group.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path, PurePosixPath
from typing import Any

import click

from .._core.mounts import shadowed_by
from .._errors import ConfigurationError, S3MemoryError
from .._render import format_size
from .output import (
    EXIT_REFUSED,
    EXIT_USAGE,
    ROOT,
    command,
    die,
    fail,
    invocation,
    own_memory,
    print_json,
    printable,
    progress_bar,
    rich_console,
    settings_or_exit,
)


# -- the store and its key ----------------------------------------------------------------
@command(json_output=True)
@click.pass_context
def info(ctx: click.Context) -> None:
    """Show the tenant, where its memory is, how it is keyed, and its file count and size;
    with --mounts, how many of its files each mount hides (their first directory is the
    mount's name, or reads as it).

    \b
    --json: {"user": ..., "store": ..., "key_prefix": ..., "key_mode": "tenant" or "kms",
             "kms_key_id": ... or null, "master_key_file": ... or null,
             "files": N, "directories": N, "bytes": N, "hidden_by_mounts": {MOUNT: N},
             "s3_client": {"kind": "awscrt" or "botocore", "why": ...} or null}
    """
    settings = settings_or_exit(ctx)
    with own_memory(ctx) as memory:
        entries = memory.list_files(ROOT)
        tenant = memory.layout.tenant
        prefix = memory.layout.memory_prefix
        client = _s3_client_of(memory)
    directories = {str(PurePosixPath(e.path).parent) for e in entries} - {ROOT}
    total = sum(e.size for e in entries)
    hidden = {name: len(paths) for name, paths in shadowed_by((e.path for e in entries), settings.mounts).items()}
    local_key = settings.key_mode == "tenant" and not settings.kms_key_id
    if invocation(ctx).json:
        print_json(
            {
                "user": tenant,
                "store": settings.location,
                "key_prefix": prefix,
                "key_mode": settings.key_mode,
                "kms_key_id": settings.kms_key_id,
                "master_key_file": str(settings.master_key_path) if local_key else None,
                "files": len(entries),
                "directories": len(directories),
                "bytes": total,
                "hidden_by_mounts": hidden,
                "s3_client": None if client is None else {"kind": client[0], "why": client[1]},
            }
        )
        return
    from rich.table import Table
    from rich.text import Text

    kms_key = printable(settings.kms_key_id, name=True)
    if settings.key_mode == "kms":
        keying = f"kms: one KMS data key per object, under {kms_key}"
    elif settings.kms_key_id:
        keying = f"tenant: one key per user, wrapped by KMS key {kms_key}"
    else:
        master = printable(settings.master_key_path, name=True)
        keying = f"tenant: one key per user, wrapped by the local master key {master}"
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    for label, value in (
        ("user", printable(tenant, name=True)),
        ("store", printable(settings.location, name=True)),
        ("key prefix", printable(prefix, name=True)),
        ("key mode", keying),
        ("files", str(len(entries))),
        ("directories", str(len(directories))),
        ("size", f"{format_size(total)} ({total:,} bytes of plaintext)"),
        *((("S3 client", f"{client[0]}: {client[1]}"),) if client is not None else ()),
        *(
            ("hidden", f"{count:,} file(s) under /memories/{name}/ or a name reading as it, by that mount")
            for name, count in sorted(hidden.items())
        ),
    ):
        table.add_row(label, Text(value))
    rich_console().print(table)


def _s3_client_of(memory: Any) -> tuple[str, str] | None:
    """Which HTTP stack the memory's S3 client sends object requests with, and why (None
    for a store that is not S3)."""
    from .._aws.shared import describe_s3_client
    from ..stores import S3Store

    store = memory.store
    while not isinstance(store, S3Store) and hasattr(store, "inner"):
        store = store.inner
    return describe_s3_client(store.client) if isinstance(store, S3Store) else None


@command(json_output=True)
@click.pass_context
def init(ctx: click.Context) -> None:
    """Create the local master key file (mode 0600) where the settings put it:
    --master-key-file, else master.key in --home. An existing key is kept, never replaced
    (an unusable one is an error). With --kms-key-id there is nothing to create: KMS wraps
    the keys.

    Back the key file up: without it, nothing it wraps can be decrypted.

    \b
    --json: {"master_key_file": ... or null, "created": bool, "kms_key_id": ... or null}
    """

    settings = settings_or_exit(ctx)
    state = invocation(ctx)
    if settings.kms_key_id:
        if state.json:
            print_json({"master_key_file": None, "created": False, "kms_key_id": settings.kms_key_id})
        elif not state.quiet:
            kms_key = printable(settings.kms_key_id, name=True)
            click.echo(f"nothing to create: the KMS key {kms_key} wraps the keys at {printable(settings.location)}")
        return
    path = settings.master_key_path
    try:
        created = settings.create_master_key()
    except S3MemoryError as error:
        fail(error)
    shown = printable(path, name=True)
    if state.json:
        print_json({"master_key_file": str(path), "created": created, "kms_key_id": None})
    elif not state.quiet:
        if created:
            click.echo(f"created the master key file {shown} (mode 0600); back it up: without it nothing decrypts")
        else:
            click.echo(f"the master key file {shown} already exists; kept")


# -- expiry, key rotation, erasure, IAM documents -----------------------------------------
@command(json_output=True)
@click.option("--days", type=click.FloatRange(min=0), required=True, help="not read or written for this many days")
@click.option("--delete", is_flag=True, help="delete them (default: only list them for review)")
@click.pass_context
def expire(ctx: click.Context, days: float, delete: bool) -> None:
    """List (or --delete) memories nobody has read or written for --days days.

    Reads count only where the memory is used with access tracking on
    (S3MEMORY_TRACK_ACCESS=1); otherwise only writes do.

    \b
    --json: {"days": N, "stale": [{"path": ..., "bytes": N, "last_access": ISO 8601 UTC}],
             "deleted": [path, ...], "kept_changed": [path, ...]}
    """
    import datetime

    from .._admin.expiry import expire_memories

    with own_memory(ctx) as memory:
        report = expire_memories(memory, older_than_days=days, delete=delete)

    def when(stale: Any, spec: str) -> str:
        return datetime.datetime.fromtimestamp(stale.last_access, datetime.timezone.utc).strftime(spec)

    state = invocation(ctx)
    if state.json:
        stale = [{"path": s.path, "bytes": s.size, "last_access": when(s, "%Y-%m-%dT%H:%M:%SZ")} for s in report.stale]
        print_json({"days": days, "stale": stale, "deleted": report.deleted, "kept_changed": report.kept_changed})
        return
    for stale_memory in report.stale:
        click.echo(
            f"{when(stale_memory, '%Y-%m-%d')}\t{format_size(stale_memory.size)}\t"
            f"{printable(stale_memory.path, name=True)}"
        )
    for path in report.kept_changed:
        click.echo(f"{printable(path, name=True)}: written meanwhile; kept", err=True)
    if not state.quiet:
        verb = f"deleted {len(report.deleted)} of" if delete else "found"
        click.echo(f"{verb} {len(report.stale)} memory file(s) not accessed for {days:g} day(s)", err=True)


@command("rotate-key", json_output=True)
@click.option(
    "--retire-after",
    type=click.FloatRange(min=0),
    help="seconds before the old key may be dropped [the key cache lifetime, 900]; 0 if no other process runs",
)
@click.pass_context
def rotate_key(ctx: click.Context, retire_after: float | None) -> None:
    """Rotate the user's tenant key: re-wrap every data key (metadata-only copies), resumably.

    Run it again after --retire-after seconds to drop the old key once nothing uses it.
    A progress bar on a terminal.

    \b
    --json: {"user": ..., "kid": ..., "rewrapped": N, "already_current": N, "raced": N,
             "unreadable": [object key, ...], "retired": [key id, ...], "complete": bool,
             "kept": [{"kid": ..., "kept_since": ISO 8601, "until": ISO 8601 or null}, ...]}
    """
    from .._admin.lifecycle import rotate_tenant_key

    with own_memory(ctx) as memory, progress_bar(ctx, "re-wrapping data keys") as progress:
        report = rotate_tenant_key(memory, retire_after=retire_after, progress=progress)
    state = invocation(ctx)
    if state.json:
        print_json(
            {
                "user": report.tenant,
                "kid": report.kid,
                "rewrapped": report.rewrapped,
                "already_current": report.already_current,
                "raced": report.raced,
                "unreadable": list(report.unreadable),
                "retired": list(report.retired),
                "complete": report.complete,
                "kept": [
                    {"kid": kept.kid, "kept_since": _iso(kept.kept_since), "until": _iso(kept.until)}
                    for kept in report.kept
                ],
            }
        )
        return
    for key in report.unreadable:
        click.echo(
            f"{printable(key, name=True)}: does not unwrap (tampered with, or under a key no longer held)", err=True
        )
    if state.quiet:
        return
    # Key ids and object keys come from the bucket: whoever can write to it chooses them.
    click.echo(
        f"tenant key {printable(report.kid, name=True)}: {report.rewrapped} file(s) re-wrapped, "
        f"{report.already_current} already current"
        + (f", {report.raced} changed meanwhile (run again)" if report.raced else "")
    )
    if report.complete:
        click.echo("rotation complete: every current file is under the new key")
        for kept in report.kept:  # older versions may still be wrapped under it
            until = "until deleted" if kept.until is None else f"until about {_iso(kept.until)}"
            click.echo(f"former key {printable(kept.kid, name=True)} kept for older versions, {until}")
    else:
        retired = ", ".join(printable(kid, name=True) for kid in report.retired)
        click.echo(f"old key(s) {retired} kept for processes that cached them; run again later")


def _iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@command("erase-user")
@click.option("--yes", is_flag=True, help="confirm: this destroys the user's memory for good")
@click.pass_context
def erase_user(ctx: click.Context, yes: bool) -> None:
    """Erase the user: destroy their keys (every version) first, then every object.

    After the first step nothing of theirs decrypts, even from old versions or backups.
    """
    from .._admin.lifecycle import erase_tenant

    settings = settings_or_exit(ctx)
    if not yes:
        die(f"Error: erasing user {settings.user!r} at {settings.location} cannot be undone; add --yes", EXIT_USAGE)
    with own_memory(ctx) as memory:
        report = erase_tenant(memory)
    if not invocation(ctx).quiet:
        how = "keys destroyed (crypto-shredded)" if report.shredded else "no per-user key to destroy (KMS mode)"
        click.echo(
            f"erased {printable(report.tenant, name=True)}: {how}; {report.versions_deleted} object version(s) deleted"
        )


@command(json_output=True)
@click.option("--memory-role-arn", required=True, help="the role whose sessions are tagged with the user")
@click.option("--agent-role-arn", required=True, help="the function's own role, which assumes the memory role")
@click.option("--kms-key-arn", help="the KMS key (also named in the role policy)")
@click.option("--no-kms", is_flag=True, help="a local master key: no KMS documents")
@click.option("--admin-arn", help="who administers the KMS key [the account root]")
@click.option("--tag", default="s3memory-user", show_default=True, help="the session tag naming the user")
@click.option("--allow-erase", is_flag=True, help="also allow deleting object versions (for erase-user and redact)")
@click.option("--noncurrent-days", default=30, show_default=True, type=click.IntRange(1), help="keep old versions")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), help="write one JSON file per document")
@click.option(
    "--read-only-mount",
    "read_only_mounts",
    multiple=True,
    metavar="USER",
    help="the user id of a store mounted read-only: every session may read it, none write it (repeatable)",
)
@click.pass_context
def policy(ctx: click.Context, /, **options: Any) -> None:
    """Print the IAM, KMS and lifecycle documents that make AWS enforce tenant isolation.

    Uses --bucket, --prefix and --key-mode. Each user's session may touch only
    {prefix}${aws:PrincipalTag/s3memory-user}/memories/ and /.s3memory/, and use the KMS
    key only under its own tenant's and this deployment's encryption context. Each
    --read-only-mount store may be read by every session and written by none (nor may a
    session be tagged as it): its own writer needs another role. See SECURITY.md,
    "Isolation that AWS enforces". The output is JSON, with or without --json.
    """
    from .._admin.policy import deployment_documents

    settings = settings_or_exit(ctx)
    out: Path | None = options.pop("out")
    try:
        if not settings.bucket:
            raise ConfigurationError("give the bucket: --bucket or S3MEMORY_BUCKET")
        documents = deployment_documents(
            bucket=settings.bucket,
            prefix=settings.prefix,
            key_mode=settings.key_mode,
            memory_role_arn=options["memory_role_arn"],
            agent_role_arn=options["agent_role_arn"],
            kms_key_arn=options["kms_key_arn"],
            use_kms=not options["no_kms"],
            admin_principal_arn=options["admin_arn"],
            tag=options["tag"],
            allow_erase=options["allow_erase"],
            noncurrent_days=options["noncurrent_days"],
            read_only_mounts=options["read_only_mounts"],
        )
    except S3MemoryError as error:
        fail(error)
    if out is None:
        click.echo(json.dumps(documents, indent=2))
        return
    for name, document in documents.items():
        try:
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{name}.json").write_text(json.dumps(document, indent=2) + "\n")
        except OSError as error:
            die(f"cannot write {out / name}.json: {error.strerror or error}", EXIT_REFUSED)
        click.echo(printable(out / f"{name}.json", name=True))


COMMANDS = (info, init, expire, rotate_key, erase_user, policy)
