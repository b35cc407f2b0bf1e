"""The history commands: ``history``, ``show``, ``restore``, ``redact``, ``log``.

Who changed a memory file, how and when, from the store's versions and the provenance sealed
into each (``EncryptedMemory.history``, ``read_version``, ``restore``, ``redact`` and
``changes``; the work is ``_history`` and ``_versions``). On a store that keeps no versions
each of them is a configuration error (exit 3) saying so. Paths, actors, notes and version ids
come from the bucket: whoever can write to it chooses them, so they are printed as names
(:func:`printable` with ``name``), in rich ``Text``, never as markup. Times are read by
:func:`s3memory._history.text.parse_time` (the MCP server's ``memory_log`` reads them alike) and
printed in UTC. ``cli`` registers :data:`COMMANDS` on its group.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

import click

from .._crypto.provenance import OPERATIONS
from .._errors import ConfigurationError, PathNotFoundError, VersionNotFoundError
from .._history.entries import MemoryVersion
from .._history.text import clock_time, iso_time, parse_time
from .._render import format_size
from .output import (
    EXIT_REFUSED,
    EXIT_USAGE,
    ROOT,
    command,
    die,
    invocation,
    own_memory,
    print_json,
    printable,
    rich_console,
)


def _name(text: object) -> str:
    return printable(text, name=True)


def _as_json(entry: MemoryVersion) -> dict[str, Any]:
    return {
        "path": entry.path,
        "version": entry.version,
        "operation": entry.operation,
        "actor": entry.actor,
        "at": iso_time(entry.at),
        "bytes": entry.size,
        "file_id": entry.file_id,
        "current": entry.current,
        "verified": entry.verified,
        "note": entry.note,
        "finding": entry.finding,
    }


def _verified(entry: MemoryVersion) -> str:
    """✓ (verified) or ✗ (not), then what else there is to know: current, the note."""
    finding = f"[{_name(entry.finding)}]" if entry.finding else ""
    said = [word for word in ("current" if entry.current else "", _name(entry.note), finding) if word]
    return " ".join(["✓" if entry.verified else "✗", *said])


def _print_entries(entries: Sequence[MemoryVersion], *, with_path: bool, summary: str) -> None:
    """A table of ``entries`` as given (newest first), then ``summary`` (dim; not with -q)."""
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, show_header=True, pad_edge=False)
    table.add_column("when (UTC)", no_wrap=True)
    table.add_column("operation")
    table.add_column("actor", overflow="fold")
    if with_path:
        table.add_column("path", overflow="fold")
    table.add_column("size", justify="right")
    table.add_column("version", overflow="fold")  # whole: it is what show, restore and redact take
    table.add_column("verified", overflow="fold")
    for entry in entries:
        actor = "-" if entry.actor is None else _name(entry.actor)
        size = "-" if entry.size is None else format_size(entry.size)
        cells = [clock_time(entry.at), _name(entry.operation), actor, *([_name(entry.path)] if with_path else [])]
        table.add_row(*(Text(cell) for cell in [*cells, size, _name(entry.version), _verified(entry)]))
    console = rich_console()
    console.print(table)
    if not invocation().quiet:
        console.print(Text(summary, style="dim"))


# -- one file ------------------------------------------------------------------------------
@command(json_output=True)
@click.argument("path")
@click.pass_context
def history(ctx: click.Context, path: str) -> None:
    """Every version of a file, newest first, and who made it.

    Each row: when (UTC), what was done, by whom (the actor: cli, mcp, or what the
    application names), its size, its version id (for show, restore and redact), and
    whether its record is verified (✓) or why not (✗ and the reason). Follows the file
    back through renames; a deleted file's history stays.

    \b
    --json: [{"path": ..., "version": ..., "operation": ..., "actor": ... or null,
              "at": ISO 8601 UTC, "bytes": N or null, "file_id": ... or null,
              "current": bool, "verified": bool, "note": ...,
              "finding": what the instruction screen found, or null}, ...]
    """
    with own_memory(ctx) as memory:
        entries = memory.history(path)
        if not entries:
            raise PathNotFoundError(f"Error: The path {path} has no history: nothing was ever written there.")
    if invocation(ctx).json:
        print_json([_as_json(entry) for entry in entries])
        return
    with_path = any(entry.path != path for entry in entries)  # the file had other names
    _print_entries(entries, with_path=with_path, summary=f"{len(entries)} version(s)")


@command(json_output=True)
@click.argument("path")
@click.option("--version", "version", required=True, metavar="VERSION", help="the version id, from `history`")
@click.pass_context
def show(ctx: click.Context, path: str, version: str) -> None:
    """Print one version of a file, as cat does (no line numbers).

    \b
    --json: {"path": PATH, "version": VERSION, "text": ...}
    """
    with own_memory(ctx) as memory:
        text = memory.read_version(path, version)
    if invocation(ctx).json:
        print_json({"path": path, "version": version, "text": text})
        return
    click.echo(printable(text, lines=True), nl=False)


@command()
@click.argument("path")
@click.argument("version")
@click.pass_context
def restore(ctx: click.Context, path: str, version: str) -> None:
    """Write VERSION of a file back as its newest version.

    A deleted file comes back. The versions after it are kept: a restore can be undone by
    another."""
    with own_memory(ctx) as memory:
        answer = memory.restore(path, version)
    if not invocation(ctx).quiet:
        click.echo(printable(answer, lines=True))


@command()
@click.argument("path")
@click.argument("version")
@click.option("--yes", is_flag=True, help="confirm: the version's text is destroyed for good, wherever it is stored")
@click.pass_context
def redact(ctx: click.Context, path: str, version: str, yes: bool) -> None:
    """Destroy an earlier version's text for good (with --yes), wherever it is stored.

    For a leaked secret or personal data: every stored version with the same text (a
    rename's copy, a restore), the writes held for review made on it and the search index go
    with it; who made each and when stay in history. Never a text that is some file's current
    content: edit or delete that file first. Without --yes, says what would be destroyed and
    does nothing."""
    with own_memory(ctx) as memory:
        if not yes:
            entries = memory.history(path)
            memory.read_version(path, version)  # the library's refusal if it is gone, or no content
            entry = next((e for e in entries if e.version == version), None)
            if entry is None:
                raise VersionNotFoundError(f"Error: {path} has no version {version!r}.")
            shown = f"version {_name(version)} of {_name(entry.path)}"
            if entry.current:
                die(f"{shown} is its current content: edit or delete the file first, then redact it", EXIT_REFUSED)
            size = "?" if entry.size is None else format_size(entry.size)
            made = f"{_name(entry.operation)} by {_name(entry.actor or 'unknown')} at {clock_time(entry.at)} UTC"
            die(
                f"redact destroys the text of {shown} ({made}, {size}) for good, with every stored copy "
                "of it; its history entries stay. Add --yes to redact it",
                EXIT_USAGE,
            )
        try:
            answer = memory.redact(path, version)
        except ConfigurationError as error:
            if memory.store.keeps_versions():  # the current version: refused, not misconfigured
                die(str(error), EXIT_REFUSED)
            raise
    if not invocation(ctx).quiet:
        click.echo(printable(answer, lines=True))


# -- the store-wide feed -------------------------------------------------------------------
def _time(ctx: click.Context, param: click.Parameter, value: str | None) -> datetime.datetime | None:
    """An option's ISO-8601 time: a date alone is midnight UTC, a time without a zone is UTC."""
    if value is None:
        return None
    try:
        return parse_time(value)
    except ValueError as error:
        raise click.BadParameter(str(error), ctx, param) from None


@command(json_output=True)
@click.option(
    "--path-prefix", default=ROOT, show_default=True, metavar="PATH", help="only changes under this directory"
)
@click.option("--operation", type=click.Choice(OPERATIONS), help="only changes of this kind")
@click.option("--actor", help="only changes made by this actor (cli, mcp, session:abc, ...)")
@click.option("--since", callback=_time, metavar="TIME", help="only changes at or after TIME (ISO 8601)")
@click.option("--until", callback=_time, metavar="TIME", help="only changes at or before TIME (ISO 8601)")
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="only the newest N changes")
@click.pass_context
def log(ctx: click.Context, /, path_prefix: str, limit: int | None, **filters: Any) -> None:
    """Every change under --path-prefix, newest first, filtered.

    Each row: when (UTC), what was done, by whom, to which file, its size, its version id,
    and whether its record is verified.

    TIME is ISO 8601: 2026-05-01 (its midnight, UTC), 2026-05-01T09:30 (UTC),
    2026-05-01T09:30:00+02:00 or ...Z.

    \b
    --json: a list of the changes, each as history --json shows a version
    """
    since, until = filters["since"], filters["until"]
    if since is not None and until is not None and since > until:
        raise click.UsageError(
            f"--since {since.isoformat()} is after --until {until.isoformat()}: nothing can match", ctx
        )
    with own_memory(ctx) as memory:
        entries = memory.changes(path_prefix, **filters)
    shown = entries if limit is None else entries[:limit]
    if invocation(ctx).json:
        print_json([_as_json(entry) for entry in shown])
        return
    summary = f"{len(entries)} change(s)" + (f", the newest {len(shown)} shown" if len(shown) < len(entries) else "")
    _print_entries(shown, with_path=True, summary=summary)


COMMANDS = (history, show, restore, redact, log)
