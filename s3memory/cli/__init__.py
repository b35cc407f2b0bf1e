"""``s3memory``: the memory from a shell, on the embedded default or on S3.

Built with click (options, environment variables, help) and rich (tables, progress bars).
Neither is imported by the core: only the CLI's modules and the console script load them.
The six tool commands print exactly what the model would see, so scripts can rely on it;
``ls``, ``cat``, ``import``, ``export`` and ``info`` are conveniences for people.

This module is the entry point: the group :data:`cli` and its global options, the memory
commands (the six tool commands, ``ls``, ``cat``), ``demo``, ``mcp`` and :func:`main`; the
group also gets the commands of ``bulk`` (import, export), ``admin`` (info, init, expire,
rotate-key, erase-user, policy), ``history`` (history, show, restore, redact, log) and
``review`` (review, approve, reject). ``output`` holds what they all share (options, state,
exit statuses) and says how untrusted text is printed and settings are read.
"""

from __future__ import annotations

import errno
import logging
import os
import sys
from collections.abc import Callable
from contextlib import suppress
from typing import Any, TextIO, cast

import click

from .._config import Settings, in_setting_names
from .._core.memory import FileEntry
from .._core.protocol import Memory
from .._errors import ConfigurationError, S3MemoryError
from .._render import format_size
from . import admin, bulk, history, review, serve
from .output import (
    EXIT_CONFIGURATION,
    EXIT_INTERRUPTED,
    EXIT_PIPE_CLOSED,
    EXIT_REFUSED,
    EXIT_STORAGE,
    EXIT_UNEXPECTED,
    EXIT_USAGE,
    LOG_HANDLER,
    ROOT,
    PipeClosed,
    PrintableStream,
    command,
    die,
    fail,
    global_options,
    invocation,
    memory_tree,
    print_json,
    printable,
    progress_bar,
    rich_console,
)
from .output import Invocation as Invocation  # tests reach it here

__all__ = [
    "EXIT_CONFIGURATION",
    "EXIT_INTERRUPTED",
    "EXIT_PIPE_CLOSED",
    "EXIT_REFUSED",
    "EXIT_STORAGE",
    "EXIT_UNEXPECTED",
    "EXIT_USAGE",
    "cli",
    "main",
    "printable",
]

EPILOG = """\b
Examples:
  s3memory init
  s3memory create /memories/notes.md "Prefers short answers."
  s3memory view /memories
  s3memory view /memories/notes.md --range 1 5
  s3memory str-replace /memories/notes.md short concise
  s3memory insert /memories/notes.md 0 "# Notes"
  s3memory rename /memories/notes.md /memories/profile/notes.md
  s3memory ls -r --json
  s3memory cat /memories/profile/notes.md
  s3memory import ./notes --to /memories/notes
  s3memory export ./backup
  s3memory --bucket my-bucket --user alice --kms-key-id alias/memory info
  s3memory info --user alice
  s3memory history /memories/profile/notes.md
  s3memory show /memories/profile/notes.md --version VERSION
  s3memory restore /memories/profile/notes.md VERSION
  s3memory log --actor mcp --since 2026-05-01 --limit 20
  s3memory review
  s3memory approve ID
  s3memory mcp
  s3memory demo --scripted

\b
Options: the options above (settings, --json, --quiet, --verbose, --debug)
may also follow the command, e.g. s3memory info --user bob; given twice, the
later one wins. A setting's bad value is a configuration error (exit 3).

\b
Output: the six tool commands, cat and search print the text exactly, except that
control characters other than newline and tab, and invisible format characters
(bidi overrides, zero-width spaces), are shown as escapes such as \\x1b or \\u202e;
error messages are one line, escaped the same way. Names (ls, import, export,
expire, rotate-key, info, history, log) also escape the backslash and every other
unprintable character. Nothing printed is ever read as markup. Progress bars are
drawn on stderr only when it is a terminal (and not with --quiet or --json).
--json (ls, info, init, import, export, expire, rotate-key, history, show, log,
review, search) prints one JSON document on stdout (history, log and review: a list),
described in each command's --help; errors stay one line on stderr.

\b
Exit status: 0 success, 1 the command was refused (message on stderr),
2 bad usage, 3 bad configuration, 4 storage or integrity failure,
5 an unexpected failure, 130 interrupted (Ctrl-C), 141 the output was closed
early (e.g. piped into head).

\b
Shell completion (bash; zsh and fish alike with zsh_source, fish_source):
  eval "$(_S3MEMORY_COMPLETE=bash_source s3memory)"
"""


@click.group(epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@global_options
@click.version_option(package_name="s3memory")
@click.pass_context
def cli(ctx: click.Context, /, **options: Any) -> None:
    """Claude's memory tool on an encrypted store: the local embedded default, or S3.

    Without --bucket the memory lives in a local directory, encrypted under a master key
    file: `s3memory init` creates it (mode 0600), and so does the first use of the default
    one; a --master-key-file that does not exist is an error, never a new key.
    """
    invocation(ctx).merge(options)  # the settings are read by the commands that use them


# -- the six tool commands ----------------------------------------------------------------
def _run(ctx: click.Context, tool_command: Callable[[Memory], str], *, confirmation: bool = True) -> None:
    """Run a tool command on the tree (the user's memory and its mounts); print its answer
    (a ``confirmation`` of a change is left out with --quiet)."""
    with memory_tree(ctx) as memory:
        answer = tool_command(memory)
    if not (confirmation and invocation(ctx).quiet):
        click.echo(printable(answer, lines=True))


@command()
@click.argument("path", default=ROOT)
@click.option(
    "--range", "view_range", nargs=2, type=int, metavar="START END", help="lines START..END (END -1: to the end)"
)
@click.pass_context
def view(ctx: click.Context, path: str, view_range: tuple[int, int] | None) -> None:
    """List a directory (two levels, sizes) or show a file with line numbers."""
    _run(ctx, lambda m: m.view(path, list(view_range) if view_range else None), confirmation=False)


@command()
@click.argument("path")
@click.argument("text", required=False)
@click.pass_context
def create(ctx: click.Context, path: str, text: str | None) -> None:
    """Create a file from TEXT, or from standard input if TEXT is omitted (and it is not a
    terminal). Never overwrites."""
    if text is None and sys.stdin.isatty():
        raise click.UsageError("give TEXT, or pipe the text on standard input: s3memory create PATH < FILE", ctx)
    content = sys.stdin.read() if text is None else text
    _run(ctx, lambda m: m.create(path, content))


@command("str-replace")
@click.argument("path")
@click.argument("old")
@click.argument("new")
@click.pass_context
def str_replace(ctx: click.Context, path: str, old: str, new: str) -> None:
    """Replace the one occurrence of OLD in the file by NEW."""
    _run(ctx, lambda m: m.str_replace(path, old, new))


@command()
@click.argument("path")
@click.argument("line", type=int)
@click.argument("text")
@click.pass_context
def insert(ctx: click.Context, path: str, line: int, text: str) -> None:
    """Insert TEXT after line LINE (0: at the top)."""
    _run(ctx, lambda m: m.insert(path, line, text))


@command()
@click.argument("path")
@click.pass_context
def delete(ctx: click.Context, path: str) -> None:
    """Delete a file, or a directory with everything under it."""
    _run(ctx, lambda m: m.delete(path))


@command()
@click.argument("old_path")
@click.argument("new_path")
@click.pass_context
def rename(ctx: click.Context, old_path: str, new_path: str) -> None:
    """Rename or move a file or a directory. Never overwrites. A progress bar on a terminal."""

    def move(memory: Memory) -> str:
        with progress_bar(ctx, f"renaming {old_path}", transient=True) as progress:
            return memory.rename(old_path, new_path, progress=progress)

    _run(ctx, move)


# -- conveniences -------------------------------------------------------------------------
def _children(entries: list[FileEntry], directory: str) -> list[tuple[str, int]]:
    """The immediate children of ``directory``: files, and directories with their total size."""
    sizes: dict[str, int] = {}
    base = directory.rstrip("/") + "/"
    for entry in entries:
        if entry.path.startswith(base):
            rest = entry.path[len(base) :]
            name = base + rest.split("/", 1)[0] + ("/" if "/" in rest else "")
        else:  # ``directory`` is the file itself
            name = entry.path
        sizes[name] = sizes.get(name, 0) + entry.size
    return sorted(sizes.items())


@command(json_output=True)
@click.argument("path", default=ROOT)
@click.option("-r", "--recursive", is_flag=True, help="every file below PATH, not only its children")
@click.pass_context
def ls(ctx: click.Context, path: str, recursive: bool) -> None:
    """List files with their sizes (hidden files included).

    \b
    --json: {"path": PATH, "recursive": bool, "files": N, "bytes": N,
             "entries": [{"path": ..., "type": "file" or "directory", "bytes": N}]}
    (a directory's bytes: the total of the files below it).
    """
    with memory_tree(ctx) as memory:
        entries = memory.list_files(path)
    rows = [(e.path, e.size) for e in entries] if recursive else _children(entries, path)
    total = sum(e.size for e in entries)
    if invocation(ctx).json:
        listed = [
            {"path": name.rstrip("/"), "type": "directory" if name.endswith("/") else "file", "bytes": size}
            for name, size in rows
        ]
        print_json({"path": path, "recursive": recursive, "files": len(entries), "bytes": total, "entries": listed})
        return
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, show_header=True, pad_edge=False)
    table.add_column("size", justify="right")
    table.add_column("bytes", justify="right", style="dim")
    table.add_column("path", overflow="fold")  # a name cut short could pass for another
    for name, size in rows:
        table.add_row(format_size(size), str(size), Text(printable(name, name=True)))
    console = rich_console()
    console.print(table)
    console.print(Text(f"{len(entries)} file(s), {format_size(total)}", style="dim"))


@command()
@click.argument("path")
@click.pass_context
def cat(ctx: click.Context, path: str) -> None:
    """Print a file's text as stored, without line numbers (terminal controls escaped: see --help)."""
    with memory_tree(ctx) as memory:
        text = memory.read_text(path)
    click.echo(printable(text, lines=True), nl=False)


@command(json_output=True)
@click.argument("query")
@click.option("--path", "path_prefix", metavar="DIR", help="only files in this directory [/memories]")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 100), help="at most this many files")
@click.pass_context
def search(ctx: click.Context, query: str, path_prefix: str | None, limit: int) -> None:
    """Find files containing every word of QUERY (case-insensitive; "quoted phrase" as
    written), in the memory and its mounts, best first, with up to three matching lines each.
    Client-side: the store sees a listing and the sealed index, never the query.

    \b
    --json: {"query": QUERY, "path": DIR, "results": [{"path": ..., "lines":
             [{"line": N, "text": ...}]}]}
    """
    with memory_tree(ctx) as memory:
        if not invocation(ctx).json:
            answer = memory.search_answer(query, path_prefix, limit)
        else:
            results = memory.search(query, path_prefix, limit)
    if not invocation(ctx).json:
        click.echo(printable(answer, lines=True))
        return
    found = [{"path": r.path, "lines": [{"line": n, "text": text} for n, text in r.lines]} for r in results]
    print_json({"query": query, "path": path_prefix or ROOT, "results": found})


# -- programs -----------------------------------------------------------------------------
@command()
@click.option("--scripted", is_flag=True, help="the scripted model, even with ANTHROPIC_API_KEY set (no network)")
def demo(scripted: bool) -> None:
    """An agent remembering across two sessions, in a throwaway local memory.

    Without ANTHROPIC_API_KEY (or with --scripted) a scripted model answers, offline; with
    it, Claude does (ANTHROPIC_MODEL picks the model, ANTHROPIC_BASE_URL the endpoint).
    If the API refuses the key or the model: one line, exit 3; if it cannot be reached or
    fails: one line, exit 4. Either way --scripted still runs.
    """
    from .demo import DemoAPIError, OutputClosed, run_demo

    api_key = None if scripted else os.environ.get("ANTHROPIC_API_KEY") or None
    # The model's words and the memory's contents go to the terminal: escape what could control it.
    try:
        run_demo(cast(TextIO, PrintableStream(sys.stdout)), api_key=api_key)
    except DemoAPIError as error:
        die(str(error), EXIT_CONFIGURATION if error.configuration else EXIT_STORAGE)
    except OutputClosed:
        raise PipeClosed from None


@command()
@click.option(
    "--allow-restore/--no-allow-restore",
    default=None,
    help="also offer the memory_restore tool [off; env var: S3MEMORY_MCP_ALLOW_RESTORE, 1 or 0]",
)
@click.pass_context
def mcp(ctx: click.Context, allow_restore: bool | None) -> None:
    """Serve this user's memory to MCP clients over stdio (needs the mcp extra).

    The six memory tools, and history, read-only: memory_history, memory_show_version and
    memory_log; memory_restore only with --allow-restore. A bad setting does not stop the
    server: it starts, and answers every tool call with the error, so the client shows it.

    \b
    Claude Code: claude mcp add memory -e S3MEMORY_USER=alice -- s3memory mcp
    """
    from ..mcp_server import serve_stdio

    try:
        settings: Settings | None = invocation(ctx).settings()
        problem: ConfigurationError | None = None
    except ConfigurationError as error:
        settings, problem = None, ConfigurationError(in_setting_names(str(error)))
    # Without the flag, the server reads S3MEMORY_MCP_ALLOW_RESTORE itself.
    restore = {} if allow_restore is None else {"allow_restore": allow_restore}
    try:
        serve_stdio(settings, configuration_error=problem, **restore)
    except S3MemoryError as error:
        fail(error)


# -- the group's commands: these, and those of the bulk and governance modules ------------
for _registered in (view, create, str_replace, insert, delete, rename, ls, cat, search, demo, mcp):
    cli.add_command(_registered)
for _registered in (*bulk.COMMANDS, *admin.COMMANDS, *history.COMMANDS, *review.COMMANDS, *serve.COMMANDS):
    cli.add_command(_registered)


def _no_more_output() -> int:
    """The reader of stdout is gone (``| head``): say nothing more, anywhere, and exit 141."""
    with suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's last flush fails silently
    return EXIT_PIPE_CLOSED


def main(argv: list[str] | None = None) -> int:
    """The console script; returns the exit status instead of raising SystemExit.

    Every failure is one line on stderr: click's usage errors too (with where to get help).
    """
    stdout = sys.stdout
    try:
        try:
            status = cli.main(args=argv, prog_name="s3memory", standalone_mode=False)
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
            return status if isinstance(status, int) else 0
        except click.UsageError as error:
            where = f" (see: {error.ctx.command_path} --help)" if error.ctx is not None else ""
            click.echo(printable(f"Error: {error.format_message()}{where}"), err=True)
            return error.exit_code
        except click.ClickException as error:
            click.echo(printable(f"Error: {error.format_message()}"), err=True)
            return error.exit_code
        except (click.exceptions.Abort, KeyboardInterrupt):
            newline = "\n" if sys.stderr.isatty() else ""
            click.echo(f"{newline}Interrupted", err=True)
            return EXIT_INTERRUPTED
        except SystemExit as exit_:
            if sys.stdout is not stdout:  # click met a closed pipe (printing --help) and exits 1
                sys.stdout = stdout
                return _no_more_output()
            sys.stdout.flush()
            return exit_.code if isinstance(exit_.code, int) else EXIT_REFUSED
    except (PipeClosed, BrokenPipeError):
        return _no_more_output()
    except OSError as error:
        if error.errno != errno.EPIPE:
            return _unexpected(error)
        return _no_more_output()
    except Exception as error:  # the last resort: still one line, never a traceback
        return _unexpected(error)


def _unexpected(error: BaseException) -> int:
    if (
        logging.getLogger("s3memory").isEnabledFor(logging.DEBUG)
        and LOG_HANDLER in logging.getLogger("s3memory").handlers
    ):
        import traceback

        traceback.print_exception(error)  # --debug: a bug's traceback, for its report
    detail = f": {error}" if str(error) else ""
    message = printable(f"Error: s3memory failed unexpectedly ({type(error).__name__}{detail})")
    click.echo(message, err=True)
    return EXIT_UNEXPECTED


if __name__ == "__main__":
    sys.exit(main())
