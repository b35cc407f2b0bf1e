"""The command line's options, state and output, shared by its command modules.

Here: :func:`printable` and the exit statuses; the global options (:func:`setting_option`,
:func:`output_options`), what a run was given (:class:`Invocation`), the command decorator
(:func:`command`) and the error, JSON, console and progress-bar printing every command uses.
The commands are in ``cli`` (the group, the memory commands, ``main``), ``cli.bulk``
(import, export), ``cli.admin`` (info, init, expire, rotate-key, erase-user, policy),
``cli.history`` (history, show, restore, redact, log) and ``cli.review`` (review, approve,
reject); this module imports none of them. The global options are made of the settings'
table (``SETTINGS``, in ``_config``): a setting added there is an option here.

Everything printed that did not come from the command line (names, file text, error messages)
goes through :func:`printable` first: the model, whoever writes to the bucket and the files of
an imported folder choose it, and a terminal obeys control sequences; rich output takes it only
as ``Text``, never as markup. ``--json`` output is ``json.dumps`` with ``ensure_ascii``: every
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
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, NoReturn, TextIO, TypeVar

import click

from .._config import SETTINGS, Settings, in_setting_names
from .._core.memory import EncryptedMemory
from .._core.mounts import MountedMemory, notice_shadowing
from .._core.protocol import Memory
from .._errors import ConfigurationError, IntegrityError, S3MemoryError, StorageError
from .._render import never_raw

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


# -- showing untrusted text -----------------------------------------------------------------
_SHORT_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_MAY_NEED_ESCAPE = re.compile(r"[^ -~]")  # printable ASCII never does
_NAME_MAY_NEED_ESCAPE = re.compile(r"[^ -\[\]-~]")  # in a name, the backslash too


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
        return _escape(char) if never_raw(char) else char

    return (_NAME_MAY_NEED_ESCAPE if name else _MAY_NEED_ESCAPE).sub(replace, str(text))


class PrintableStream:
    """Writes to ``stream`` what :func:`printable` makes of it (the demo prints the model's words)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(printable(text, lines=True))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()


def exit_status(error: S3MemoryError) -> int:
    if isinstance(error, ConfigurationError):
        return EXIT_CONFIGURATION
    if isinstance(error, (StorageError, IntegrityError)):
        return EXIT_STORAGE
    return EXIT_REFUSED


def die(message: str, status: int) -> NoReturn:
    message = printable(message)  # messages quote paths and the store's own words
    click.echo(message if message.startswith("Error") else f"Error: {message}", err=True)
    sys.exit(status)


def fail(error: S3MemoryError) -> NoReturn:
    message = in_setting_names(str(error)) if isinstance(error, ConfigurationError) else str(error)
    die(message, exit_status(error))


# -- global options ---------------------------------------------------------------------------
_OUTPUT = ("json_output", "quiet", "verbose", "debug")
_JSON_COMMANDS = (
    "ls",
    "search",
    "info",
    "init",
    "import",
    "export",
    "expire",
    "rotate-key",
    "policy",
    "history",
    "show",
    "log",
    "review",
)


def setting_option(name: str, *, after_command: bool = False) -> Callable[[F], F]:
    """The global option of setting ``name`` (see ``SETTINGS``): a string given to Settings as it
    is (Settings checks it), read from its ``S3MEMORY_*`` variable too (shown in --help). On a
    command (``after_command``) the same option, hidden: the group's --help lists it once."""
    setting = SETTINGS[name]
    if setting.switch:  # click would parse the variable as a bool (exit 2): Settings reads it
        return click.option(
            f"{setting.flag}/--no-{setting.flag[2:]}",
            name,
            default=None,
            hidden=after_command,
            help=f"{setting.help} [env var: {setting.variable}]",
        )
    return click.option(
        setting.flag,
        name,
        metavar=setting.metavar,
        envvar=None if after_command else setting.variable,
        show_envvar=not after_command,
        hidden=after_command,
        help=setting.help,
    )


def global_options(function: F) -> F:
    """``function`` (the group) with the global options: each setting, in the order of
    ``SETTINGS``, then the output options."""
    for option in reversed([*(setting_option(name) for name in SETTINGS), *output_options()]):
        function = option(function)
    return function


def output_options(*, after_command: bool = False, json_shown: bool = True) -> list[Callable[[F], F]]:
    hide = after_command
    return [
        click.option(
            "--json",
            "json_output",
            is_flag=True,
            hidden=hide and not json_shown,
            help="print one JSON document on stdout"
            + (
                " (its shape: above)"
                if hide
                else " (ls, search, info, init, import, export, expire, rotate-key, history, show, log, review)"
            ),
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


LOG_HANDLER = _LogHandler()


class Invocation:
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
            if LOG_HANDLER not in logger.handlers:
                logger.addHandler(LOG_HANDLER)
        elif LOG_HANDLER in logger.handlers:  # an earlier run in this process (tests)
            logger.removeHandler(LOG_HANDLER)
            logger.setLevel(logging.NOTSET)


def invocation(ctx: click.Context | None = None) -> Invocation:
    return (ctx or click.get_current_context()).ensure_object(Invocation)


def settings_or_exit(ctx: click.Context) -> Settings:
    """The settings, or exit 3 with the message naming the setting at fault."""
    try:
        return invocation(ctx).settings()
    except S3MemoryError as error:
        fail(error)


# -- running a command, and what it prints ------------------------------------------------
class Interrupted(Exception):
    """Ctrl-C, after what was started finished: ``str()`` says what was done."""


class PipeClosed(Exception):
    """stdout's reader is gone (``| head``). Not an OSError: click would exit 1 on one."""


def _interrupted(message: str) -> NoReturn:
    newline = "\n" if sys.stderr.isatty() else ""  # after the terminal's ^C
    click.echo(f"{newline}Interrupted: {printable(message)}", err=True)
    sys.exit(EXIT_INTERRUPTED)


def command(name: str | None = None, *, json_output: bool = False, **attrs: Any) -> Callable[[F], click.Command]:
    """A command, with the global options accepted after the command too; --json only where
    ``json_output``; Ctrl-C ends it with exit 130. ``cli`` registers it on the group."""

    def decorator(function: F) -> click.Command:
        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> Any:
            ctx = click.get_current_context()
            state = invocation(ctx)
            state.merge({key: kwargs.pop(key) for key in [*SETTINGS, *_OUTPUT] if key in kwargs})
            state.configure_logging()
            if state.json and not json_output:
                raise click.UsageError(
                    f"--json is not supported by {ctx.info_name}; only by: {', '.join(_JSON_COMMANDS)}", ctx
                )
            try:
                return function(*args, **kwargs)
            except Interrupted as done:
                _interrupted(str(done))
            except KeyboardInterrupt:
                _interrupted(f"{ctx.info_name} stopped")
            except BrokenPipeError:
                raise PipeClosed from None

        for option in [*output_options(after_command=True, json_shown=json_output)]:
            run = option(run)
        for setting in SETTINGS:
            run = setting_option(setting, after_command=True)(run)
        return click.command(name, cls=click.Command, **attrs)(run)

    return decorator


M = TypeVar("M", bound="Memory")


@contextmanager
def _opened(open_memory: Callable[[], M]) -> Iterator[M]:
    """``open_memory()``, closed after use; any s3memory error becomes a message and an exit status."""
    try:
        memory = open_memory()
        try:
            yield memory
        finally:
            memory.close()
    except S3MemoryError as error:
        fail(error)


def own_memory(ctx: click.Context) -> AbstractContextManager[EncryptedMemory]:
    """The configured user's own memory (history, review, governance)."""
    return _opened(settings_or_exit(ctx).open)


@contextmanager
def memory_tree(ctx: click.Context) -> Iterator[EncryptedMemory | MountedMemory]:
    """The tree the model sees: the configured memory with ``--mounts`` below it, if any.
    With mounts, a warning on stderr for each mount that hides files of the user's own store
    (:meth:`MountedMemory.shadowing_mounts`: one round trip, a LIST of at most one key per mount)."""
    with _opened(settings_or_exit(ctx).open_tree) as memory:
        for mount in notice_shadowing(memory):
            click.echo(
                f"s3memory: warning: files of your own store under {mount.path} are hidden by the memory store "
                f"mounted there; run without --mounts ({SETTINGS['mounts'].variable}) to see them",
                err=True,
            )
        yield memory


def print_json(document: object) -> None:
    click.echo(json.dumps(document, indent=2, ensure_ascii=True))


@contextmanager
def progress_bar(
    ctx: click.Context, title: str, *, transient: bool = False
) -> Iterator[Callable[[int, int], None] | None]:
    """A ``progress(done, total)`` callback drawing a bar on stderr; None where bars are not drawn
    (see :attr:`Invocation.progress`). A ``transient`` bar is erased when done."""
    if not invocation(ctx).progress:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=rich_console(stderr=True), transient=transient) as bar:
        task = bar.add_task(printable(title), total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def rich_console(stderr: bool = False) -> Any:
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:  # rich would exit 1: let main() say 141
            self.quiet = True
            raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    stream = sys.stderr if stderr else sys.stdout
    # Piped output is for scripts: never wrap or truncate a path to fit 80 columns.
    width = None if stream.isatty() else 1_000
    return _Console(file=stream, width=width, highlight=False, soft_wrap=True)
