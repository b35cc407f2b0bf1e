"""``s3memory``: the memory from a shell, on the embedded default or on S3.

Built with click (options, environment variables, help) and rich (tables, progress bars).
Neither is imported by the core: only this module and the console script load them.
The six tool commands print exactly what the model would see, so scripts can rely on it;
``ls``, ``cat``, ``import``, ``export`` and ``info`` are conveniences for people.

Everything printed that did not come from this module (names, file text, error messages) goes
through :func:`printable` first: the model, whoever writes to the bucket and the files of an
imported folder choose it, and a terminal obeys control sequences; rich output takes it only as
``Text``, never as markup. ``--json`` output is ``json.dumps`` with ``ensure_ascii``: every
control and non-ASCII character is a ``\\u`` escape, so it is inert too.

The settings are global options, accepted before the command and after it (the later wins),
and passed to :meth:`Settings.from_environment` as the strings given: Settings checks them, so
a bad value is a configuration error (exit 3) naming its flag and variable, not a usage error.
They are read only by the commands that use them.
"""

from __future__ import annotations

import errno
import functools
import json
import logging
import os
import re
import secrets
import stat
import sys
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed, wait
from contextlib import contextmanager, suppress
from pathlib import Path, PurePosixPath
from typing import Any, NoReturn, TextIO, TypeVar, cast

import click

from ._config import ENVIRONMENT, Settings, in_setting_names
from ._errors import (
    ConfigurationError,
    IntegrityError,
    PathExistsError,
    S3MemoryError,
    StorageError,
)
from ._memory import EncryptedMemory, FileEntry
from ._render import format_size

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

# Exit statuses, also listed in --help and the README.
EXIT_REFUSED = 1  # the memory refused the command: no such path, exists, invalid input, too large
EXIT_USAGE = 2  # bad command line (click's own)
EXIT_CONFIGURATION = 3  # bad settings: user id, master key, missing optional package
EXIT_STORAGE = 4  # S3/KMS unreachable or refusing, or a stored object failed its integrity check
EXIT_UNEXPECTED = 5  # anything else: a bug or an environment s3memory does not know how to explain
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT): what was started finished, nothing else was
EXIT_PIPE_CLOSED = 141  # the output was closed early (`| head`): 128 + SIGPIPE, as if killed by it

ROOT = "/memories"

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
  s3memory mcp
  s3memory demo --scripted

\b
Options: the options above (settings, --json, --quiet, --verbose, --debug)
may also follow the command, e.g. s3memory info --user bob; given twice, the
later one wins. A setting's bad value is a configuration error (exit 3).

\b
Output: the six tool commands and cat print the text exactly, except that
control characters other than newline and tab, and invisible format characters
(bidi overrides, zero-width spaces), are shown as escapes such as \\x1b or \\u202e;
error messages are one line, escaped the same way. Names (ls, import, export,
expire, rotate-key, info) also escape the backslash and every other unprintable
character. Nothing printed is ever read as markup. Progress bars are drawn on
stderr only when it is a terminal (and not with --quiet or --json). --json
(ls, info, init, import, export, expire, rotate-key) prints one JSON object on
stdout, described in each command's --help; errors stay one line on stderr.

\b
Exit status: 0 success, 1 the command was refused (message on stderr),
2 bad usage, 3 bad configuration, 4 storage or integrity failure,
5 an unexpected failure, 130 interrupted (Ctrl-C), 141 the output was closed
early (e.g. piped into head).

\b
Shell completion (bash; zsh and fish alike with zsh_source, fish_source):
  eval "$(_S3MEMORY_COMPLETE=bash_source s3memory)"
"""

# -- showing untrusted text -----------------------------------------------------------------
_SHORT_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_MAY_NEED_ESCAPE = re.compile(r"[^ -~]")  # printable ASCII never does
_NAME_MAY_NEED_ESCAPE = re.compile(r"[^ -\[\]-~]")  # in a name, the backslash too
# Controls (C0, DEL, C1), format characters (bidi overrides, zero-width, tags), line and
# paragraph separators, lone surrogates: what can move the cursor, reorder or hide text.
_NEVER_RAW = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def _escape(char: str) -> str:
    """``char`` as Python writes it in a ``repr``: ``\\x1b``, ``\\u202e``, ``\\U000e0041``."""
    code = ord(char)
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: object, *, name: bool = False, lines: bool = False) -> str:
    """Untrusted text (a stored name, a file's text, an error message) made safe to print.

    Every control character (C0, DEL, C1), format character (bidi overrides, zero-width
    characters), line or paragraph separator and lone surrogate is shown as Python escapes
    it (``\\x1b``, ``\\u202e``); anything else is kept, so text with nothing to escape is
    printed exactly. ``lines`` keeps newlines and tabs (a tool answer, a file's text);
    without it the result is one line (an error message). ``name`` escapes the backslash
    and every character :meth:`str.isprintable` rejects too (spaces other than " ",
    unassigned code points), so two different names are never printed the same and each
    can be read back. Print the result with click, or as a rich ``Text``: never as markup.
    """

    def replace(match: re.Match[str]) -> str:
        char = match.group()
        if name:
            return char if char.isprintable() and char != "\\" else _escape(char)
        if lines and char in "\n\t":
            return char
        return _escape(char) if unicodedata.category(char) in _NEVER_RAW else char

    return (_NAME_MAY_NEED_ESCAPE if name else _MAY_NEED_ESCAPE).sub(replace, str(text))


class _PrintableStream:
    """Writes to ``stream`` what :func:`printable` makes of it (the demo prints the model's words)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(printable(text, lines=True))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()


def _status(error: S3MemoryError) -> int:
    if isinstance(error, ConfigurationError):
        return EXIT_CONFIGURATION
    if isinstance(error, (StorageError, IntegrityError)):
        return EXIT_STORAGE
    return EXIT_REFUSED


def _die(message: str, status: int) -> NoReturn:
    message = printable(message)  # messages quote paths and the store's own words
    click.echo(message if message.startswith("Error") else f"Error: {message}", err=True)
    sys.exit(status)


def _fail(error: S3MemoryError) -> NoReturn:
    message = in_setting_names(str(error)) if isinstance(error, ConfigurationError) else str(error)
    _die(message, _status(error))


# -- global options ---------------------------------------------------------------------------
_FLAGS = ("track_access", "encrypt_names")  # settings that are on/off flags
_METAVARS = {
    "home": "PATH",
    "store_dir": "PATH",
    "master_key_file": "PATH",
    "key_mode": "[tenant|kms]",
    "sensitive_data": "[refuse|redact|allow]",
    "timeout": "SECONDS",
    "endpoint_url": "URL",
    "kms_key_id": "KEY",
}
_OUTPUT = ("json_output", "quiet", "verbose", "debug")
_JSON_COMMANDS = ("ls", "info", "init", "import", "export", "expire", "rotate-key", "policy")


def _option(name: str, *, after_command: bool = False) -> Callable[[F], F]:
    """The global option of setting ``name``: a string given to Settings as it is (Settings
    checks it), read from its ``S3MEMORY_*`` variable too (shown in --help). On a command
    (``after_command``) the same option, hidden: the group's --help lists it once."""
    variable, help_text = ENVIRONMENT[name]
    flag = "--" + name.replace("_", "-")
    if name in _FLAGS:  # click would parse the variable as a bool (exit 2): Settings reads it
        return click.option(
            f"{flag}/--no-{flag[2:]}",
            name,
            default=None,
            hidden=after_command,
            help=f"{help_text} [env var: {variable}]",
        )
    return click.option(
        flag,
        name,
        metavar=_METAVARS.get(name, name.upper()),
        envvar=None if after_command else variable,
        show_envvar=not after_command,
        hidden=after_command,
        help=help_text,
    )


def _output_options(*, after_command: bool = False, json_shown: bool = True) -> list[Callable[[F], F]]:
    hide = after_command
    return [
        click.option(
            "--json",
            "json_output",
            is_flag=True,
            hidden=hide and not json_shown,
            help="print one JSON object on stdout"
            + (" (its shape: above)" if hide else " (ls, info, init, import, export, expire, rotate-key)"),
        ),
        click.option(
            "-q",
            "--quiet",
            is_flag=True,
            hidden=hide,
            help="no progress bars, confirmations or summaries (errors and requested output still shown)",
        ),
        click.option("-v", "--verbose", is_flag=True, hidden=hide, help="log what s3memory does to stderr (INFO)"),
        click.option("--debug", is_flag=True, hidden=hide, help="log in detail to stderr (DEBUG); tracebacks of bugs"),
    ]


class _LogHandler(logging.Handler):
    """The library's log records on the current stderr, one escaped line each."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            click.echo(printable(f"s3memory: {record.levelname.lower()}: {self.format(record)}"), err=True)
        except Exception:  # pragma: no cover - logging must never break a command
            self.handleError(record)


_LOG_HANDLER = _LogHandler()


class _State:
    """What the group and the command were given: the settings as strings, the output options."""

    def __init__(self) -> None:
        self.options: dict[str, Any] = {}
        self.json = self.quiet = self.verbose = self.debug = False
        self._settings: Settings | None = None

    def merge(self, values: dict[str, Any]) -> None:
        for name, value in values.items():
            if name in _OUTPUT:
                if value:
                    setattr(self, "json" if name == "json_output" else name, True)
            elif value is not None:
                self.options[name] = value  # the command's, after the group's: the later wins
        self._settings = None

    def settings(self) -> Settings:
        """The settings (cached). Raises ConfigurationError, in the library's words."""
        if self._settings is None:
            self._settings = Settings.from_environment(None, **self.options)
        return self._settings

    @property
    def progress(self) -> bool:
        """Whether to draw progress bars: on a terminal, and neither --quiet nor --json."""
        return not (self.quiet or self.json) and sys.stderr.isatty()

    def configure_logging(self) -> None:
        logger = logging.getLogger("s3memory")
        if self.debug or self.verbose:
            logger.setLevel(logging.DEBUG if self.debug else logging.INFO)
            if _LOG_HANDLER not in logger.handlers:
                logger.addHandler(_LOG_HANDLER)
        elif _LOG_HANDLER in logger.handlers:  # an earlier run in this process (tests)
            logger.removeHandler(_LOG_HANDLER)
            logger.setLevel(logging.NOTSET)


def _state(ctx: click.Context | None = None) -> _State:
    return (ctx or click.get_current_context()).ensure_object(_State)


def _settings(ctx: click.Context) -> Settings:
    """The settings, or exit 3 with the message naming the setting at fault."""
    try:
        return _state(ctx).settings()
    except S3MemoryError as error:
        _fail(error)


class _Interrupted(Exception):
    """Ctrl-C, after what was started finished: ``str()`` says what was done."""


class _PipeClosed(Exception):
    """stdout's reader is gone (``| head``). Not an OSError: click would exit 1 on one."""


def _interrupted(message: str) -> NoReturn:
    newline = "\n" if sys.stderr.isatty() else ""  # after the terminal's ^C
    click.echo(f"{newline}Interrupted: {printable(message)}", err=True)
    sys.exit(EXIT_INTERRUPTED)


def _command(name: str | None = None, *, json_output: bool = False, **attrs: Any) -> Callable[[F], click.Command]:
    """``cli.command``, with the global options accepted after the command too; --json only
    where ``json_output``; Ctrl-C ends it with exit 130."""

    def decorator(function: F) -> click.Command:
        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> Any:
            ctx = click.get_current_context()
            state = _state(ctx)
            state.merge({key: kwargs.pop(key) for key in [*ENVIRONMENT, *_OUTPUT] if key in kwargs})
            state.configure_logging()
            if state.json and not json_output:
                raise click.UsageError(
                    f"--json is not supported by {ctx.info_name}; only by: {', '.join(_JSON_COMMANDS)}", ctx
                )
            try:
                return function(*args, **kwargs)
            except _Interrupted as done:
                _interrupted(str(done))
            except KeyboardInterrupt:
                _interrupted(f"{ctx.info_name} stopped")
            except BrokenPipeError:
                raise _PipeClosed from None

        for option in [*_output_options(after_command=True, json_shown=json_output)]:
            run = option(run)
        for setting in ENVIRONMENT:
            run = _option(setting, after_command=True)(run)
        return cli.command(name, **attrs)(run)

    return decorator


@contextmanager
def _memory(ctx: click.Context) -> Iterator[EncryptedMemory]:
    """The configured memory; any s3memory error becomes a message and an exit status."""
    settings = _settings(ctx)
    try:
        memory = settings.open()
        try:
            yield memory
        finally:
            memory.close()
    except S3MemoryError as error:
        _fail(error)


def _run(ctx: click.Context, command: Callable[[EncryptedMemory], str], *, confirmation: bool = True) -> None:
    """Run a tool command; print its answer (a ``confirmation`` of a change is left out with --quiet)."""
    with _memory(ctx) as memory:
        answer = command(memory)
    if not (confirmation and _state(ctx).quiet):
        click.echo(printable(answer, lines=True))


def _print_json(document: object) -> None:
    click.echo(json.dumps(document, indent=2, ensure_ascii=True))


@contextmanager
def _progress(
    ctx: click.Context, title: str, *, transient: bool = False
) -> Iterator[Callable[[int, int], None] | None]:
    """A ``progress(done, total)`` callback drawing a bar on stderr; None where bars are not drawn
    (see :attr:`_State.progress`). A ``transient`` bar is erased when done."""
    if not _state(ctx).progress:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=_console(stderr=True), transient=transient) as bar:
        task = bar.add_task(printable(title), total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


@click.group(epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@_option("home")
@_option("store_dir")
@_option("master_key_file")
@_option("user")
@_option("bucket")
@_option("prefix")
@_option("kms_key_id")
@_option("key_mode")
@_option("endpoint_url")
@_option("region")
@_option("timeout")
@_option("sensitive_data")
@_option("track_access")
@_option("encrypt_names")
@_output_options()[0]
@_output_options()[1]
@_output_options()[2]
@_output_options()[3]
@click.version_option(package_name="s3memory")
@click.pass_context
def cli(ctx: click.Context, /, **options: Any) -> None:
    """Claude's memory tool on an encrypted store: the local embedded default, or S3.

    Without --bucket the memory lives in a local directory, encrypted under a master key
    file: `s3memory init` creates it (mode 0600), and so does the first use of the default
    one; a --master-key-file that does not exist is an error, never a new key.
    """
    _state(ctx).merge(options)  # the settings are read by the commands that use them


# -- the six tool commands ----------------------------------------------------------------
@_command()
@click.argument("path", default=ROOT)
@click.option(
    "--range", "view_range", nargs=2, type=int, metavar="START END", help="lines START..END (END -1: to the end)"
)
@click.pass_context
def view(ctx: click.Context, path: str, view_range: tuple[int, int] | None) -> None:
    """List a directory (two levels, sizes) or show a file with line numbers."""
    _run(ctx, lambda m: m.view(path, list(view_range) if view_range else None), confirmation=False)


@_command()
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


@_command("str-replace")
@click.argument("path")
@click.argument("old")
@click.argument("new")
@click.pass_context
def str_replace(ctx: click.Context, path: str, old: str, new: str) -> None:
    """Replace the one occurrence of OLD in the file by NEW."""
    _run(ctx, lambda m: m.str_replace(path, old, new))


@_command()
@click.argument("path")
@click.argument("line", type=int)
@click.argument("text")
@click.pass_context
def insert(ctx: click.Context, path: str, line: int, text: str) -> None:
    """Insert TEXT after line LINE (0: at the top)."""
    _run(ctx, lambda m: m.insert(path, line, text))


@_command()
@click.argument("path")
@click.pass_context
def delete(ctx: click.Context, path: str) -> None:
    """Delete a file, or a directory with everything under it."""
    _run(ctx, lambda m: m.delete(path))


@_command()
@click.argument("old_path")
@click.argument("new_path")
@click.pass_context
def rename(ctx: click.Context, old_path: str, new_path: str) -> None:
    """Rename or move a file or a directory. Never overwrites. A progress bar on a terminal."""

    def move(memory: EncryptedMemory) -> str:
        with _progress(ctx, f"renaming {old_path}", transient=True) as progress:
            return memory.rename(old_path, new_path, progress=progress)

    _run(ctx, move)


# -- conveniences -------------------------------------------------------------------------
def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:  # rich would exit 1: let main() say 141
            self.quiet = True
            raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    stream = sys.stderr if stderr else sys.stdout
    # Piped output is for scripts: never wrap or truncate a path to fit 80 columns.
    width = None if stream.isatty() else 1_000
    return _Console(file=stream, width=width, highlight=False, soft_wrap=True)


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


@_command(json_output=True)
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
    with _memory(ctx) as memory:
        entries = memory.list_files(path)
    rows = [(e.path, e.size) for e in entries] if recursive else _children(entries, path)
    total = sum(e.size for e in entries)
    if _state(ctx).json:
        listed = [
            {"path": name.rstrip("/"), "type": "directory" if name.endswith("/") else "file", "bytes": size}
            for name, size in rows
        ]
        _print_json({"path": path, "recursive": recursive, "files": len(entries), "bytes": total, "entries": listed})
        return
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, show_header=True, pad_edge=False)
    table.add_column("size", justify="right")
    table.add_column("bytes", justify="right", style="dim")
    table.add_column("path", overflow="fold")  # a name cut short could pass for another
    for name, size in rows:
        table.add_row(format_size(size), str(size), Text(printable(name, name=True)))
    console = _console()
    console.print(table)
    console.print(Text(f"{len(entries)} file(s), {format_size(total)}", style="dim"))


@_command()
@click.argument("path")
@click.pass_context
def cat(ctx: click.Context, path: str) -> None:
    """Print a file's text as stored, without line numbers (terminal controls escaped: see --help)."""
    with _memory(ctx) as memory:
        text = memory.read_text(path)
    click.echo(printable(text, lines=True), nl=False)


class _Skipped(Exception):
    """A file ``import`` or ``export`` leaves out (the message says why); the others go on."""


class _NotText(_Skipped):
    """A file ``import`` leaves out because it is not UTF-8 text."""


def _bulk(
    ctx: click.Context, title: str, verb: str, jobs: list[tuple[str, Callable[[], object]]], workers: int
) -> list[tuple[str, Exception]]:
    """Run ``jobs`` concurrently (a progress bar on a terminal); return the failures (name, error)
    by name. On Ctrl-C the jobs not yet started are cancelled and those running finish (so no
    file is left half-written); then :class:`_Interrupted` says how many were done."""
    failures: list[tuple[str, Exception]] = []
    with _progress(ctx, title) as progress:
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="s3memory-bulk")
        futures: dict[Future[object], str] = {}
        try:
            futures.update((pool.submit(job), name) for name, job in jobs)
            for done, future in enumerate(as_completed(futures), 1):
                error = future.exception()
                if isinstance(error, (S3MemoryError, _Skipped, OSError)):  # one file's failure
                    failures.append((futures[future], error))
                elif error is not None:
                    raise error  # a bug: the last resort reports it
                if progress is not None:
                    progress(done, len(jobs))
        except KeyboardInterrupt:
            pool.shutdown(wait=False, cancel_futures=True)
            # Those already running finish. (wait() would never see the cancelled ones as done:
            # only a worker marks a cancelled future "notified", and none will pick them up.)
            wait([future for future in futures if not future.cancelled()])
            finished = sum(1 for f in futures if not f.cancelled() and f.exception() is None)
            raise _Interrupted(f"{verb} {finished} of {len(jobs)} file(s); the others were not started") from None
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    return sorted(failures, key=lambda failure: failure[0])


def _explain(error: Exception) -> tuple[str, int]:
    """One file's failure: the message and the exit status it calls for."""
    if isinstance(error, S3MemoryError):
        return str(error), _status(error)
    if isinstance(error, OSError):  # what _local_error did not foresee: still one file's failure
        return f"Error: {error.strerror or error}", EXIT_REFUSED
    return str(error), EXIT_REFUSED  # _Skipped


def _report(
    ctx: click.Context,
    summary: str,
    total: int,
    failures: list[tuple[str, Exception]],
    document: dict[str, Any],
    *,
    kept: Sequence[str] = (),
    kept_label: str = "",
) -> None:
    """Print what a bulk command did: each failure (stderr) and a summary (stdout), or the JSON
    ``document`` with ``failed``; exit with the worst failure's status (storage outranks refusal)."""
    state = _state(ctx)
    explained = [(name, *_explain(error)) for name, error in failures]
    if state.json:
        document["failed"] = [{"path": name, "error": message, "status": status} for name, message, status in explained]
        _print_json(document)
    else:
        if state.verbose:
            for name in kept:
                click.echo(f"{printable(name, name=True)}: {kept_label}", err=True)
        for name, message, _ in explained:
            click.echo(f"{printable(name, name=True)}: {printable(message)}", err=True)
        if not state.quiet:
            done = total - len(failures) - len(kept)
            not_text = sum(isinstance(error, _NotText) for _, error in failures)
            parts = [f"{summary}: {done} of {total} file(s)"]
            if kept:
                parts.append(f"{len(kept)} {kept_label}")
            if not_text:
                parts.append(f"{not_text} not UTF-8 text (skipped)")
            if len(failures) > not_text:
                parts.append(f"{len(failures) - not_text} failed")
            click.echo(", ".join(parts))
    if explained:
        sys.exit(max(status for _, _, status in explained))


# Local files are opened one path segment at a time, each relative to its folder's descriptor
# and with O_NOFOLLOW: a symlink put in place of a file or folder after the walk (or planted in
# an export's destination) is refused, never followed. POSIX only.
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_FOLDER = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW


def _check_local_files_supported() -> None:
    if not (hasattr(os, "O_NOFOLLOW") and hasattr(os, "fwalk") and os.open in os.supports_dir_fd):
        _die("import and export need O_NOFOLLOW and directory descriptors (a POSIX system)", EXIT_CONFIGURATION)


def _local_error(error: OSError, shown: str, folder: int | None = None, name: str = "") -> _Skipped:
    """What to say about the local file or folder ``shown`` (``name`` in ``folder``) that failed."""
    symlink = error.errno in (errno.ELOOP, errno.EMLINK)  # O_NOFOLLOW met one (EMLINK: FreeBSD)
    if error.errno == errno.ENOTDIR and folder is not None:  # O_DIRECTORY | O_NOFOLLOW met one, on Linux
        with suppress(OSError):
            symlink = stat.S_ISLNK(os.lstat(name, dir_fd=folder).st_mode)
    if symlink:
        return _Skipped(f"Error: {shown} is a symlink, not followed; skipped")
    if error.errno == errno.ENOTDIR:
        return _Skipped(f"Error: {shown} is a file, not a folder; skipped")
    if error.errno == errno.EISDIR:
        return _Skipped(f"Error: {shown} is a folder; skipped")
    return _Skipped(f"Error: {shown}: {error.strerror or error}; skipped")


def _open_folder(top: int, shown: str, parts: Sequence[str], *, create: bool = False) -> int:
    """A new descriptor of the folder ``parts`` below the folder ``top`` (``shown`` in messages),
    never through a symlink. With ``create``, missing folders are made, mode 0700 whatever the umask.
    """
    fd = os.dup(top)
    for depth, part in enumerate(parts, 1):
        try:
            created = False
            if create:
                with suppress(FileExistsError):
                    os.mkdir(part, 0o700, dir_fd=fd)
                    created = True
            child = os.open(part, _FOLDER, dir_fd=fd)
            try:
                if created:
                    os.fchmod(child, 0o700)
            except OSError:
                os.close(child)
                raise
        except OSError as error:
            skipped = _local_error(error, "/".join([shown, *parts[:depth]]), fd, part)
            os.close(fd)
            raise skipped from None
        os.close(fd)
        fd = child
    return fd


def _read_local_file(top: int, shown: str, parts: Sequence[str], limit: int) -> bytes:
    """The file ``parts`` below the folder ``top``: a regular file of at most ``limit`` bytes, of
    which at most ``limit + 1`` are ever read (a sparse file can claim terabytes)."""
    folder = _open_folder(top, shown, parts[:-1])
    try:
        # O_NONBLOCK: a FIFO must not hang the import (it is refused just below).
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW, dir_fd=folder)
    except OSError as error:
        raise _local_error(error, "/".join([shown, *parts])) from None
    finally:
        os.close(folder)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _Skipped("Error: not a regular file; skipped")
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0 and info.st_size <= limit:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        if info.st_size > limit or left <= 0:  # the size fstat gave, or what it grew to meanwhile
            raise _Skipped(f"Error: larger than the {limit:,}-byte limit; skipped")
        return b"".join(chunks)
    except OSError as error:
        raise _local_error(error, "/".join([shown, *parts])) from None
    finally:
        os.close(fd)


def _local_files(top: int) -> Iterator[tuple[str, ...]]:
    """What may be files below the folder ``top``, as path segments: hidden entries and symlinks
    skipped, symlinked folders never entered. Whether each is a regular file is checked when it
    is opened (it may be swapped meanwhile)."""
    for root, dirs, files, folder in os.fwalk(".", dir_fd=top, follow_symlinks=False):
        base = PurePosixPath(root).parts  # "." is ()

        def visible(name: str, folder: int = folder) -> bool:
            try:
                return not name.startswith(".") and not stat.S_ISLNK(os.lstat(name, dir_fd=folder).st_mode)
            except OSError:  # gone since the folder was read
                return False

        dirs[:] = sorted(filter(visible, dirs))
        yield from ((*base, name) for name in sorted(filter(visible, files)))


@_command("import", json_output=True)
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--to", "target", default=ROOT, show_default=True, help="memory directory to import into")
@click.option("--workers", default=16, show_default=True, type=click.IntRange(1, 64), help="concurrent requests")
@click.pass_context
def import_(ctx: click.Context, directory: Path, target: str, workers: int) -> None:
    """Create a memory file for every text file in DIRECTORY (hidden files and symlinks skipped).

    Symlinks are never followed, even one swapped in while the import runs. A memory file that
    already exists is kept, never overwritten, and only counted (listed with --verbose), so an
    import can be run again. A file that is not UTF-8 text, is over the memory's size limit or
    is not a regular file is reported and skipped; any such failure makes the exit status
    non-zero. Ctrl-C stops it (exit 130): files being written finish, the others are not started.

    \b
    --json: {"directory": ..., "to": ..., "files": N, "imported": N,
             "already_existed": [path, ...], "not_text": [path, ...],
             "failed": [{"path": ..., "error": ..., "status": exit status}]}
    ("failed" lists the files of "not_text" too).
    """
    _check_local_files_supported()
    base = target.rstrip("/")
    try:
        top = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        _die(f"cannot read {directory}: {error.strerror or error}", EXIT_REFUSED)
    try:
        sources = list(_local_files(top))

        def create(parts: tuple[str, ...], path: str) -> Callable[[], object]:
            def job() -> object:
                data = _read_local_file(top, str(directory), parts, memory.limits.max_file_bytes)
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    raise _NotText("Error: not UTF-8 text; skipped") from None
                return memory.create(path, text)

            return job

        with _memory(ctx) as memory:
            jobs = [(path, create(parts, path)) for parts in sources for path in [f"{base}/{'/'.join(parts)}"]]
            failures = _bulk(ctx, f"importing into {base}", "imported", jobs, workers)
    finally:
        os.close(top)
    existing = [name for name, error in failures if isinstance(error, PathExistsError)]
    failures = [(name, error) for name, error in failures if not isinstance(error, PathExistsError)]
    document = {
        "directory": str(directory),
        "to": base or ROOT,
        "files": len(jobs),
        "imported": len(jobs) - len(existing) - len(failures),
        "already_existed": existing,
        "not_text": [name for name, error in failures if isinstance(error, _NotText)],
    }
    _report(ctx, "imported", len(jobs), failures, document, kept=existing, kept_label="already existed (kept)")


def _write_local_file(folder: int, name: str, data: bytes, *, replace: bool, shown: str) -> None:
    """Write ``data`` to ``name`` in ``folder`` as a new file, mode 0600 whatever the umask.

    Without ``replace`` an existing entry (a symlink included) is an error; with it, the data goes
    to a temporary file renamed over the entry, which replaces a symlink, never writes through it.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
    written = f".s3memory-{secrets.token_hex(8)}.tmp" if replace else name
    try:
        fd = os.open(written, flags, 0o600, dir_fd=folder)
    except FileExistsError:
        try:
            is_folder = stat.S_ISDIR(os.lstat(name, dir_fd=folder).st_mode)
        except OSError:
            is_folder = False
        why = "is a folder; skipped" if is_folder else "exists (use --force to overwrite)"
        raise _Skipped(f"Error: {shown} {why}") from None
    except OSError as error:
        raise _local_error(error, shown) from None
    try:
        try:
            os.fchmod(fd, 0o600)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if replace:
                os.fsync(fd)  # the old file is only replaced by a complete new one
        finally:
            os.close(fd)
        if replace:
            os.rename(written, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException as error:
        with suppress(OSError):
            os.unlink(written, dir_fd=folder)
        if isinstance(error, OSError):
            raise _local_error(error, shown) from None
        raise


@_command(json_output=True)
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--from", "source", default=ROOT, show_default=True, help="memory directory to export")
@click.option("--force", is_flag=True, help="replace local files that already exist")
@click.option("--workers", default=16, show_default=True, type=click.IntRange(1, 64), help="concurrent requests")
@click.pass_context
def export(ctx: click.Context, directory: Path, source: str, force: bool, workers: int) -> None:
    """Decrypt every memory file below --from into DIRECTORY, keeping the tree.

    Files are written mode 0600 and folders made mode 0700, whatever the umask. Symlinks inside
    DIRECTORY are never followed. An existing file is kept unless --force, which replaces it
    atomically. A file that cannot be written is reported and the others go on; any failure
    makes the exit status non-zero. Ctrl-C stops it (exit 130): files being written finish,
    the others are not started.

    \b
    --json: {"directory": ..., "from": ..., "files": N, "exported": N,
             "failed": [{"path": ..., "error": ..., "status": exit status}]}
    """
    _check_local_files_supported()
    base = source.rstrip("/")

    def write(path: str) -> Callable[[], object]:
        def job() -> object:
            relative = path[len(base) + 1 :] if path.startswith(base + "/") else PurePosixPath(path).name
            parts = relative.split("/")
            if any(part in ("", ".", "..") or "\0" in part for part in parts):  # paths were validated: belt and braces
                raise _Skipped("Error: the path would leave the export directory; skipped")
            data = memory.read_text(path).encode("utf-8")
            folder = _open_folder(top, str(directory), parts[:-1], create=True)
            try:
                _write_local_file(folder, parts[-1], data, replace=force, shown=f"{directory}/{relative}")
            finally:
                os.close(folder)
            return None

        return job

    with _memory(ctx) as memory:
        entries = memory.list_files(source)
        top = _open_destination(directory)
        try:
            jobs = [(e.path, write(e.path)) for e in entries]
            failures = _bulk(ctx, f"exporting {base}", "exported", jobs, workers)
        finally:
            os.close(top)
    document = {
        "directory": str(directory),
        "from": base or ROOT,
        "files": len(entries),
        "exported": len(entries) - len(failures),
    }
    _report(ctx, f"exported to {printable(directory, name=True)}", len(entries), failures, document)


def _open_destination(directory: Path) -> int:
    """``directory``, made mode 0700 if it does not exist (followed if it is a symlink: the user named it)."""
    try:
        try:
            directory.mkdir(mode=0o700, parents=True)
            created = True
        except FileExistsError:
            created = False
        top = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
        if created:
            os.fchmod(top, 0o700)
    except OSError as error:
        _die(f"cannot export to {directory}: {error.strerror or error}", EXIT_REFUSED)
    return top


@_command(json_output=True)
@click.pass_context
def info(ctx: click.Context) -> None:
    """Show the tenant, where its memory is, how it is keyed, and its file count and size.

    \b
    --json: {"user": ..., "store": ..., "key_prefix": ..., "key_mode": "tenant" or "kms",
             "kms_key_id": ... or null, "master_key_file": ... or null,
             "files": N, "directories": N, "bytes": N}
    """
    settings = _settings(ctx)
    with _memory(ctx) as memory:
        entries = memory.list_files(ROOT)
        tenant = memory.layout.tenant
        prefix = memory.layout.memory_prefix
    directories = {str(PurePosixPath(e.path).parent) for e in entries} - {ROOT}
    total = sum(e.size for e in entries)
    local_key = settings.key_mode == "tenant" and not settings.kms_key_id
    if _state(ctx).json:
        _print_json(
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
    ):
        table.add_row(label, Text(value))
    _console().print(table)


@_command(json_output=True)
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

    settings = _settings(ctx)
    state = _state(ctx)
    if settings.kms_key_id:
        if state.json:
            _print_json({"master_key_file": None, "created": False, "kms_key_id": settings.kms_key_id})
        elif not state.quiet:
            kms_key = printable(settings.kms_key_id, name=True)
            click.echo(f"nothing to create: the KMS key {kms_key} wraps the keys at {printable(settings.location)}")
        return
    path = settings.master_key_path
    try:
        created = settings.create_master_key()
    except S3MemoryError as error:
        _fail(error)
    shown = printable(path, name=True)
    if state.json:
        _print_json({"master_key_file": str(path), "created": created, "kms_key_id": None})
    elif not state.quiet:
        if created:
            click.echo(f"created the master key file {shown} (mode 0600); back it up: without it nothing decrypts")
        else:
            click.echo(f"the master key file {shown} already exists; kept")


# -- governance ---------------------------------------------------------------------------
@_command(json_output=True)
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

    from ._expiry import expire_memories

    with _memory(ctx) as memory:
        report = expire_memories(memory, older_than_days=days, delete=delete)

    def when(stale: Any, spec: str) -> str:
        return datetime.datetime.fromtimestamp(stale.last_access, datetime.timezone.utc).strftime(spec)

    state = _state(ctx)
    if state.json:
        stale = [{"path": s.path, "bytes": s.size, "last_access": when(s, "%Y-%m-%dT%H:%M:%SZ")} for s in report.stale]
        _print_json({"days": days, "stale": stale, "deleted": report.deleted, "kept_changed": report.kept_changed})
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


@_command("rotate-key", json_output=True)
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
             "unreadable": [object key, ...], "retired": [key id, ...], "complete": bool}
    """
    from ._lifecycle import rotate_tenant_key

    with _memory(ctx) as memory, _progress(ctx, "re-wrapping data keys") as progress:
        report = rotate_tenant_key(memory, retire_after=retire_after, progress=progress)
    state = _state(ctx)
    if state.json:
        _print_json(
            {
                "user": report.tenant,
                "kid": report.kid,
                "rewrapped": report.rewrapped,
                "already_current": report.already_current,
                "raced": report.raced,
                "unreadable": list(report.unreadable),
                "retired": list(report.retired),
                "complete": report.complete,
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
        click.echo("rotation complete: no retired key left")
    else:
        retired = ", ".join(printable(kid, name=True) for kid in report.retired)
        click.echo(f"old key(s) {retired} kept for processes that cached them; run again later")


@_command("erase-user")
@click.option("--yes", is_flag=True, help="confirm: this destroys the user's memory for good")
@click.pass_context
def erase_user(ctx: click.Context, yes: bool) -> None:
    """Erase the user: destroy their keys (every version) first, then every object.

    After the first step nothing of theirs decrypts, even from old versions or backups.
    """
    from ._lifecycle import erase_tenant

    settings = _settings(ctx)
    if not yes:
        _die(f"Error: erasing user {settings.user!r} at {settings.location} cannot be undone; add --yes", EXIT_USAGE)
    with _memory(ctx) as memory:
        report = erase_tenant(memory)
    if not _state(ctx).quiet:
        how = "keys destroyed (crypto-shredded)" if report.shredded else "no per-user key to destroy (KMS mode)"
        click.echo(
            f"erased {printable(report.tenant, name=True)}: {how}; {report.versions_deleted} object version(s) deleted"
        )


@_command(json_output=True)
@click.option("--memory-role-arn", required=True, help="the role whose sessions are tagged with the user")
@click.option("--agent-role-arn", required=True, help="the function's own role, which assumes the memory role")
@click.option("--kms-key-arn", help="the KMS key (also named in the role policy)")
@click.option("--no-kms", is_flag=True, help="a local master key: no KMS documents")
@click.option("--admin-arn", help="who administers the KMS key [the account root]")
@click.option("--tag", default="s3memory-user", show_default=True, help="the session tag naming the user")
@click.option("--allow-erase", is_flag=True, help="also allow deleting object versions (for erase-user)")
@click.option("--noncurrent-days", default=30, show_default=True, type=click.IntRange(1), help="keep old versions")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), help="write one JSON file per document")
@click.pass_context
def policy(ctx: click.Context, /, **options: Any) -> None:
    """Print the IAM, KMS and lifecycle documents that make AWS enforce tenant isolation.

    Uses --bucket, --prefix and --key-mode. Each user's session may touch only
    {prefix}${aws:PrincipalTag/s3memory-user}/memories/ and /.s3memory/, and use the KMS
    key only under its own tenant's and this deployment's encryption context. See
    SECURITY.md, "Isolation that AWS enforces". The output is JSON, with or without --json.
    """
    from ._policy import deployment_documents

    settings = _settings(ctx)
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
        )
    except S3MemoryError as error:
        _fail(error)
    if out is None:
        click.echo(json.dumps(documents, indent=2))
        return
    for name, document in documents.items():
        try:
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{name}.json").write_text(json.dumps(document, indent=2) + "\n")
        except OSError as error:
            _die(f"cannot write {out / name}.json: {error.strerror or error}", EXIT_REFUSED)
        click.echo(printable(out / f"{name}.json", name=True))


# -- programs -----------------------------------------------------------------------------
@_command()
@click.option("--scripted", is_flag=True, help="the scripted model, even with ANTHROPIC_API_KEY set (no network)")
def demo(scripted: bool) -> None:
    """An agent remembering across two sessions, in a throwaway local memory.

    Without ANTHROPIC_API_KEY (or with --scripted) a scripted model answers, offline; with
    it, Claude does (ANTHROPIC_MODEL picks the model, ANTHROPIC_BASE_URL the endpoint).
    If the API refuses the key or the model: one line, exit 3; if it cannot be reached or
    fails: one line, exit 4. Either way --scripted still runs.
    """
    from ._demo import DemoAPIError, OutputClosed, run_demo

    api_key = None if scripted else os.environ.get("ANTHROPIC_API_KEY") or None
    # The model's words and the memory's contents go to the terminal: escape what could control it.
    try:
        run_demo(cast(TextIO, _PrintableStream(sys.stdout)), api_key=api_key)
    except DemoAPIError as error:
        _die(str(error), EXIT_CONFIGURATION if error.configuration else EXIT_STORAGE)
    except OutputClosed:
        raise _PipeClosed from None


@_command()
@click.pass_context
def mcp(ctx: click.Context) -> None:
    """Serve this user's memory to MCP clients over stdio (needs: pip install 's3memory[mcp]').

    A bad setting does not stop the server: it starts, and answers every tool call with the
    error, so the client shows it.

    \b
    Claude Code: claude mcp add memory -e S3MEMORY_USER=alice -- s3memory mcp
    """
    from .mcp_server import serve_stdio

    try:
        settings: Settings | None = _state(ctx).settings()
        problem: ConfigurationError | None = None
    except ConfigurationError as error:
        settings, problem = None, ConfigurationError(in_setting_names(str(error)))
    try:
        serve_stdio(settings, configuration_error=problem)
    except S3MemoryError as error:
        _fail(error)


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
    except (_PipeClosed, BrokenPipeError):
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
        and _LOG_HANDLER in logging.getLogger("s3memory").handlers
    ):
        import traceback

        traceback.print_exception(error)  # --debug: a bug's traceback, for its report
    detail = f": {error}" if str(error) else ""
    message = printable(f"Error: s3memory failed unexpectedly ({type(error).__name__}{detail})")
    click.echo(message, err=True)
    return EXIT_UNEXPECTED


if __name__ == "__main__":
    sys.exit(main())
