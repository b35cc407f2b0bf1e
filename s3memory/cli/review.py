"""The review commands: ``review``, ``approve``, ``reject``.

Writes the model made that read like instructions to a future session, held for review under
``--instruction-policy quarantine`` (``EncryptedMemory.pending``, ``approve``, ``reject``; the
work is ``_quarantine``). ``review`` lists them, or shows one (what it changes and what was
found); ``approve ID`` writes it, ``reject ID`` drops it. Paths, actors and texts come from
the model or the bucket, so they are printed through :func:`printable` (names with ``name``),
in rich ``Text``, never as markup. ``cli`` registers :data:`COMMANDS` on its group.
"""

from __future__ import annotations

from typing import Any

import click

from .._core.quarantine import PendingWrite
from .._errors import PathNotFoundError
from .._history.text import clock_time, iso_time
from .._render import format_size, short_repr
from .output import command, fail, invocation, own_memory, print_json, printable, rich_console


def _name(text: object) -> str:
    return printable(text, name=True)


def _as_json(write: PendingWrite) -> dict[str, Any]:
    at = iso_time(write.at)
    return {
        "id": write.id,
        "path": write.path,
        "operation": write.operation,
        "actor": write.actor,
        "at": at,
        "bytes": write.size,
        "findings": [{"kind": f.kind, "line": f.line, "start": f.start, "end": f.end} for f in write.findings],
        "summary": write.summary,
        "line": write.line,
        "removed": write.removed,
        "added": write.added,
        "text": write.text,
    }


def _print_list(writes: list[PendingWrite]) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, show_header=True, pad_edge=False)
    table.add_column("id", no_wrap=True)  # whole: it is what approve and reject take
    table.add_column("held (UTC)", no_wrap=True)
    table.add_column("operation")
    table.add_column("path", overflow="fold")
    table.add_column("actor", overflow="fold")
    table.add_column("size", justify="right")
    table.add_column("found", overflow="fold")
    for write in writes:
        cells = [write.id, clock_time(write.at), write.operation, _name(write.path), _name(write.actor)]
        table.add_row(*(Text(cell) for cell in [*cells, format_size(write.size), _name(write.summary)]))
    console = rich_console()
    console.print(table)
    if not invocation().quiet:
        console.print(Text(f"{len(writes)} write(s) waiting: `s3memory review ID` shows one", style="dim"))


def _print_one(write: PendingWrite) -> None:
    where = "a new file" if write.operation == "create" else f"from line {write.line}"
    click.echo(f"pending write {write.id}: {write.operation} of {_name(write.path)} ({where})")
    click.echo(f"  by {_name(write.actor)} at {clock_time(write.at)} UTC; {format_size(write.size)} as it would be")
    click.echo(f"  found: {_name(write.summary)}")
    if write.removed:
        click.echo("--- removed")
        click.echo(printable(write.removed, lines=True))
    click.echo("+++ added")
    click.echo(printable(write.added, lines=True))


@command(json_output=True)
@click.argument("pending_id", metavar="[ID]", required=False)
@click.pass_context
def review(ctx: click.Context, pending_id: str | None) -> None:
    """List the writes held for review, or show the one with ID.

    A write is held (not applied) under --instruction-policy quarantine when what the model
    wrote reads like instructions to a future session. Each row: its id (for approve and
    reject), when it was held, create or edit, the file, who wrote it (the actor), the
    file's size as it would be, and what the screen found (kinds and lines). With ID: what
    it would remove and add.

    \b
    --json: [{"id": ..., "path": ..., "operation": "create" or "edit", "actor": ...,
              "at": ISO 8601 UTC, "bytes": N, "findings": [{"kind", "line", "start", "end"}],
              "summary": ..., "line": N, "removed": ..., "added": ..., "text": ...}, ...]
             (with ID: that one object)
    """
    with own_memory(ctx) as memory:
        writes = memory.pending()
    if pending_id is not None:
        chosen = next((w for w in writes if w.id == pending_id), None)
        if chosen is None:
            fail(PathNotFoundError(f"Error: There is no pending write {short_repr(pending_id)}."))
        if invocation(ctx).json:
            print_json(_as_json(chosen))
        else:
            _print_one(chosen)
        return
    if invocation(ctx).json:
        print_json([_as_json(write) for write in writes])
    elif not writes:
        if not invocation(ctx).quiet:
            click.echo("No writes are waiting for review.")
    else:
        _print_list(writes)


@command()
@click.argument("pending_id", metavar="ID")
@click.pass_context
def approve(ctx: click.Context, pending_id: str) -> None:
    """Write the held write ID, as the model asked, as the file's newest version.

    Only onto the file it was held against: if the file changed since (or, for a new file,
    one was created), nothing is written and the command fails (exit 1)."""
    with own_memory(ctx) as memory:
        answer = memory.approve(pending_id)
    if not invocation(ctx).quiet:
        click.echo(printable(answer))


@command()
@click.argument("pending_id", metavar="ID")
@click.pass_context
def reject(ctx: click.Context, pending_id: str) -> None:
    """Drop the held write ID without applying it."""
    with own_memory(ctx) as memory:
        answer = memory.reject(pending_id)
    if not invocation(ctx).quiet:
        click.echo(printable(answer))


COMMANDS = (review, approve, reject)
