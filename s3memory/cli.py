"""``s3memory``: the memory from a shell, on the embedded default or on S3.

Built with click (options, environment variables, help) and rich (tables, progress bars).
Neither is imported by the core: only this module and the console script load them.
The six tool commands print exactly what the model would see, so scripts can rely on it;
``ls``, ``cat``, ``import``, ``export`` and ``info`` are conveniences for people.

Everything printed that did not come from this module (names, file text, error messages) goes
through :func:`printable` first: the model, whoever writes to the bucket and the files of an
imported folder choose it, and a terminal obeys control sequences; rich output takes it only as
``Text``, never as markup.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
import sys
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager, suppress
from pathlib import Path, PurePosixPath
from typing import Any, NoReturn, TextIO, TypeVar, cast

import click

from ._config import ENVIRONMENT, Settings
from ._errors import (
    ConfigurationError,
    IntegrityError,
    S3MemoryError,
    StorageError,
)
from ._memory import EncryptedMemory, FileEntry, format_size

T = TypeVar("T")

# Exit statuses, also listed in --help and the README.
EXIT_REFUSED = 1  # the memory refused the command: no such path, exists, invalid input, too large
EXIT_USAGE = 2  # bad command line (click's own)
EXIT_CONFIGURATION = 3  # bad settings: user id, master key, missing optional package
EXIT_STORAGE = 4  # S3/KMS unreachable or refusing, or a stored object failed its integrity check
EXIT_UNEXPECTED = 5  # anything else: a bug or an environment s3memory does not know how to explain

ROOT = "/memories"

EPILOG = """\b
Examples:
  s3memory create /memories/notes.md "Prefers short answers."
  s3memory view /memories
  s3memory view /memories/notes.md --range 1 5
  s3memory str-replace /memories/notes.md short concise
  s3memory insert /memories/notes.md 0 "# Notes"
  s3memory rename /memories/notes.md /memories/profile/notes.md
  s3memory ls -r
  s3memory cat /memories/profile/notes.md
  s3memory import ./notes --to /memories/notes
  s3memory export ./backup
  s3memory --bucket my-bucket --user alice --kms-key-id alias/memory info
  s3memory mcp
  s3memory demo

\b
Output: the six tool commands and cat print the text exactly, except that
control characters other than newline and tab, and invisible format characters
(bidi overrides, zero-width spaces), are shown as escapes such as \\x1b or \\u202e;
error messages are one line, escaped the same way. Names (ls, import, export,
expire, rotate-key, info) also escape the backslash and every other unprintable
character. Nothing printed is ever read as markup.

\b
Exit status: 0 success, 1 the command was refused (message on stderr),
2 bad usage, 3 bad configuration, 4 storage or integrity failure,
5 an unexpected failure.
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
    _die(str(error), _status(error))


@contextmanager
def _memory(ctx: click.Context) -> Iterator[EncryptedMemory]:
    """The configured memory; any s3memory error becomes a message and an exit status."""
    try:
        memory = ctx.find_object(Settings).open()  # type: ignore[union-attr]
        try:
            yield memory
        finally:
            memory.close()
    except S3MemoryError as error:
        _fail(error)


def _run(ctx: click.Context, command: Callable[[EncryptedMemory], str]) -> None:
    with _memory(ctx) as memory:
        click.echo(printable(command(memory), lines=True))


def _option(name: str, **kwargs: Any) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A global option read from its ``S3MEMORY_*`` variable too (shown in --help)."""
    variable, help_text = ENVIRONMENT[name]
    flag = "--" + name.replace("_", "-")
    return click.option(flag, name, envvar=variable, show_envvar=True, help=help_text, **kwargs)


@click.group(epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@_option("home", type=click.Path(path_type=Path))
@_option("store_dir", type=click.Path(path_type=Path))
@_option("master_key_file", type=click.Path(path_type=Path))
@_option("user")
@_option("bucket")
@_option("prefix")
@_option("kms_key_id")
@_option("key_mode", type=click.Choice(["tenant", "kms"]))
@_option("endpoint_url")
@_option("region")
@_option("sensitive_data", type=click.Choice(["refuse", "redact", "allow"]))
@_option("track_access", is_flag=True, default=None)
@_option("encrypt_names", is_flag=True, default=None)
@click.version_option(package_name="s3memory")
@click.pass_context
def cli(ctx: click.Context, /, **options: Any) -> None:
    """Claude's memory tool on an encrypted store: the local embedded default, or S3.

    Without --bucket the memory lives in a local directory, encrypted under a master key
    file created (mode 0600) on first use: no AWS account needed.
    """
    try:
        ctx.obj = Settings.from_environment({}, **options)  # click already applied the environment
    except S3MemoryError as error:
        _fail(error)


# -- the six tool commands ----------------------------------------------------------------
@cli.command()
@click.argument("path", default=ROOT)
@click.option(
    "--range", "view_range", nargs=2, type=int, metavar="START END", help="lines START..END (END -1: to the end)"
)
@click.pass_context
def view(ctx: click.Context, path: str, view_range: tuple[int, int] | None) -> None:
    """List a directory (two levels, sizes) or show a file with line numbers."""
    _run(ctx, lambda m: m.view(path, list(view_range) if view_range else None))


@cli.command()
@click.argument("path")
@click.argument("text", required=False)
@click.pass_context
def create(ctx: click.Context, path: str, text: str | None) -> None:
    """Create a file from TEXT, or from standard input if TEXT is omitted. Never overwrites."""
    content = sys.stdin.read() if text is None else text
    _run(ctx, lambda m: m.create(path, content))


@cli.command("str-replace")
@click.argument("path")
@click.argument("old")
@click.argument("new")
@click.pass_context
def str_replace(ctx: click.Context, path: str, old: str, new: str) -> None:
    """Replace the one occurrence of OLD in the file by NEW."""
    _run(ctx, lambda m: m.str_replace(path, old, new))


@cli.command()
@click.argument("path")
@click.argument("line", type=int)
@click.argument("text")
@click.pass_context
def insert(ctx: click.Context, path: str, line: int, text: str) -> None:
    """Insert TEXT after line LINE (0: at the top)."""
    _run(ctx, lambda m: m.insert(path, line, text))


@cli.command()
@click.argument("path")
@click.pass_context
def delete(ctx: click.Context, path: str) -> None:
    """Delete a file, or a directory with everything under it."""
    _run(ctx, lambda m: m.delete(path))


@cli.command()
@click.argument("old_path")
@click.argument("new_path")
@click.pass_context
def rename(ctx: click.Context, old_path: str, new_path: str) -> None:
    """Rename or move a file or a directory. Never overwrites."""
    _run(ctx, lambda m: m.rename(old_path, new_path))


# -- conveniences -------------------------------------------------------------------------
def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    # Piped output is for scripts: never wrap or truncate a path to fit 80 columns.
    width = None if stream.isatty() else 1_000
    return Console(file=stream, width=width, highlight=False, soft_wrap=True)


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


@cli.command()
@click.argument("path", default=ROOT)
@click.option("-r", "--recursive", is_flag=True, help="every file below PATH, not only its children")
@click.pass_context
def ls(ctx: click.Context, path: str, recursive: bool) -> None:
    """List files with their sizes (hidden files included)."""
    from rich.table import Table
    from rich.text import Text

    with _memory(ctx) as memory:
        entries = memory.list_files(path)
    rows = [(e.path, e.size) for e in entries] if recursive else _children(entries, path)
    table = Table(box=None, show_header=True, pad_edge=False)
    table.add_column("size", justify="right")
    table.add_column("bytes", justify="right", style="dim")
    table.add_column("path", overflow="fold")  # a name cut short could pass for another
    for name, size in rows:
        table.add_row(format_size(size), str(size), Text(printable(name, name=True)))
    console = _console()
    console.print(table)
    console.print(Text(f"{len(entries)} file(s), {format_size(sum(e.size for e in entries))}", style="dim"))


@cli.command()
@click.argument("path")
@click.pass_context
def cat(ctx: click.Context, path: str) -> None:
    """Print a file's text as stored, without line numbers (terminal controls escaped: see --help)."""
    with _memory(ctx) as memory:
        text = memory.read_text(path)
    click.echo(printable(text, lines=True), nl=False)


class _Skipped(Exception):
    """A file ``import`` or ``export`` leaves out (the message says why); the others go on."""


def _bulk(title: str, jobs: list[tuple[str, Callable[[], object]]], workers: int) -> list[tuple[str, str, int]]:
    """Run ``jobs`` concurrently behind a progress bar (on stderr); return the failures
    (name, message, exit status)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    failures: list[tuple[str, str, int]] = []
    columns = (TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=_console(stderr=True), transient=False) as progress:
        task = progress.add_task(printable(title), total=len(jobs))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="s3memory-bulk") as pool:
            futures = {pool.submit(job): name for name, job in jobs}
            for future in as_completed(futures):
                try:
                    future.result()
                except S3MemoryError as error:
                    failures.append((futures[future], str(error), _status(error)))
                except _Skipped as skipped:
                    failures.append((futures[future], str(skipped), EXIT_REFUSED))
                except OSError as error:  # what _local_error did not foresee: still one file's failure
                    failures.append((futures[future], f"Error: {error.strerror or error}", EXIT_REFUSED))
                progress.advance(task)
    return sorted(failures)


def _report(done: str, total: int, failures: list[tuple[str, str, int]]) -> None:
    for name, message, _ in failures:
        click.echo(f"{printable(name, name=True)}: {printable(message)}", err=True)
    failed = f", {len(failures)} failed" if failures else ""
    click.echo(f"{done}: {total - len(failures)} of {total} file(s){failed}")
    if failures:
        sys.exit(max(status for _, _, status in failures))  # a storage or integrity failure outranks a refusal


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


@cli.command("import")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--to", "target", default=ROOT, show_default=True, help="memory directory to import into")
@click.option("--workers", default=16, show_default=True, type=click.IntRange(1, 64), help="concurrent requests")
@click.pass_context
def import_(ctx: click.Context, directory: Path, target: str, workers: int) -> None:
    """Create a memory file for every text file in DIRECTORY (hidden files and symlinks skipped).

    Symlinks are never followed, even one swapped in while the import runs. A file that is not
    UTF-8, over the memory's size limit or not a regular file is reported and skipped, as is an
    existing memory file: none is ever overwritten. Any failure makes the exit status non-zero.
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
                    raise _Skipped("Error: not UTF-8 text; skipped") from None
                return memory.create(path, text)

            return job

        with _memory(ctx) as memory:
            jobs = [(path, create(parts, path)) for parts in sources for path in [f"{base}/{'/'.join(parts)}"]]
            failures = _bulk(f"importing into {base}", jobs, workers)
    finally:
        os.close(top)
    _report("imported", len(jobs), failures)


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


@cli.command()
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
    makes the exit status non-zero.
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
            failures = _bulk(f"exporting {base}", [(e.path, write(e.path)) for e in entries], workers)
        finally:
            os.close(top)
    _report(f"exported to {printable(directory, name=True)}", len(entries), failures)


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


@cli.command()
@click.pass_context
def info(ctx: click.Context) -> None:
    """Show the tenant, where its memory is, how it is keyed, and its file count and size."""
    from rich.table import Table
    from rich.text import Text

    settings: Settings = ctx.obj
    with _memory(ctx) as memory:
        entries = memory.list_files(ROOT)
        tenant = memory.layout.tenant
        prefix = memory.layout.memory_prefix
    kms_key = printable(settings.kms_key_id, name=True)
    if settings.key_mode == "kms":
        keying = f"kms: one KMS data key per object, under {kms_key}"
    elif settings.kms_key_id:
        keying = f"tenant: one key per user, wrapped by KMS key {kms_key}"
    else:
        master = printable(settings.master_key_file or settings.data_home / "master.key", name=True)
        keying = f"tenant: one key per user, wrapped by the local master key {master}"
    directories = {str(PurePosixPath(e.path).parent) for e in entries} - {ROOT}
    total = sum(e.size for e in entries)
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


# -- governance ---------------------------------------------------------------------------
@cli.command()
@click.option("--days", type=click.FloatRange(min=0), required=True, help="not read or written for this many days")
@click.option("--delete", is_flag=True, help="delete them (default: only list them for review)")
@click.pass_context
def expire(ctx: click.Context, days: float, delete: bool) -> None:
    """List (or --delete) memories nobody has read or written for --days days.

    Reads count only where the memory is used with access tracking on
    (S3MEMORY_TRACK_ACCESS=1); otherwise only writes do.
    """
    import datetime

    from ._expiry import expire_memories

    with _memory(ctx) as memory:
        report = expire_memories(memory, older_than_days=days, delete=delete)
    for stale in report.stale:
        when = datetime.datetime.fromtimestamp(stale.last_access, datetime.timezone.utc).strftime("%Y-%m-%d")
        click.echo(f"{when}\t{format_size(stale.size)}\t{printable(stale.path, name=True)}")
    for path in report.kept_changed:
        click.echo(f"{printable(path, name=True)}: written meanwhile; kept", err=True)
    verb = f"deleted {len(report.deleted)} of" if delete else "found"
    click.echo(f"{verb} {len(report.stale)} memory file(s) not accessed for {days:g} day(s)", err=True)


@cli.command("rotate-key")
@click.option(
    "--retire-after",
    type=click.FloatRange(min=0),
    help="seconds before the old key may be dropped [the key cache lifetime, 900]; 0 if no other process runs",
)
@click.pass_context
def rotate_key(ctx: click.Context, retire_after: float | None) -> None:
    """Rotate the user's tenant key: re-wrap every data key (metadata-only copies), resumably.

    Run it again after --retire-after seconds to drop the old key once nothing uses it.
    """
    from ._lifecycle import rotate_tenant_key

    with _memory(ctx) as memory:
        report = rotate_tenant_key(memory, retire_after=retire_after)
    # Key ids and object keys come from the bucket: whoever can write to it chooses them.
    click.echo(
        f"tenant key {printable(report.kid, name=True)}: {report.rewrapped} file(s) re-wrapped, "
        f"{report.already_current} already current"
        + (f", {report.raced} changed meanwhile (run again)" if report.raced else "")
    )
    for key in report.unreadable:
        click.echo(
            f"{printable(key, name=True)}: does not unwrap (tampered with, or under a key no longer held)", err=True
        )
    if report.complete:
        click.echo("rotation complete: no retired key left")
    else:
        retired = ", ".join(printable(kid, name=True) for kid in report.retired)
        click.echo(f"old key(s) {retired} kept for processes that cached them; run again later")


@cli.command("erase-user")
@click.option("--yes", is_flag=True, help="confirm: this destroys the user's memory for good")
@click.pass_context
def erase_user(ctx: click.Context, yes: bool) -> None:
    """Erase the user: destroy their keys (every version) first, then every object.

    After the first step nothing of theirs decrypts, even from old versions or backups.
    """
    from ._lifecycle import erase_tenant

    settings: Settings = ctx.obj
    if not yes:
        _die(f"Error: erasing user {settings.user!r} at {settings.location} cannot be undone; add --yes", EXIT_USAGE)
    with _memory(ctx) as memory:
        report = erase_tenant(memory)
    how = "keys destroyed (crypto-shredded)" if report.shredded else "no per-user key to destroy (KMS mode)"
    click.echo(
        f"erased {printable(report.tenant, name=True)}: {how}; {report.versions_deleted} object version(s) deleted"
    )


@cli.command()
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
    SECURITY.md, "Isolation that AWS enforces".
    """
    import json

    from ._policy import deployment_documents

    settings: Settings = ctx.obj
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
@cli.command()
def demo() -> None:
    """An agent remembering across two sessions (scripted offline; Claude with ANTHROPIC_API_KEY)."""
    from ._demo import run_demo

    # The model's words and the memory's contents go to the terminal: escape what could control it.
    run_demo(cast(TextIO, _PrintableStream(sys.stdout)), api_key=os.environ.get("ANTHROPIC_API_KEY"))


@cli.command()
@click.pass_context
def mcp(ctx: click.Context) -> None:
    """Serve this user's memory to MCP clients over stdio (needs: pip install 's3memory[mcp]').

    \b
    Claude Code: claude mcp add memory -e S3MEMORY_USER=alice -- s3memory mcp
    """
    from .mcp_server import serve_stdio

    try:
        serve_stdio(ctx.obj)
    except S3MemoryError as error:
        _fail(error)


def main(argv: list[str] | None = None) -> int:
    """The console script; returns the exit status instead of raising SystemExit."""
    try:
        cli.main(args=argv, prog_name="s3memory", standalone_mode=True)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else EXIT_REFUSED
    except Exception as error:  # the last resort: still one line, never a traceback
        detail = f": {error}" if str(error) else ""
        message = printable(f"Error: s3memory failed unexpectedly ({type(error).__name__}{detail})")
        click.echo(message, err=True)
        return EXIT_UNEXPECTED
    return 0


if __name__ == "__main__":
    sys.exit(main())
