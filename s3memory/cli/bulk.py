"""The bulk commands, ``import`` and ``export``, and their local-file safety.

Both run one job per file concurrently (:func:`_bulk`) and report each file's failure and a
summary (:func:`_report`). Local files are reached only through descriptors, one path segment
at a time with ``O_NOFOLLOW`` (:func:`_open_folder`): a symlink swapped in while they run is
refused, never followed. ``cli`` registers :data:`COMMANDS` on its group.

Each reads and writes two formats (``--format``): a folder of text files, and a Managed Agents
memory store export (JSON Lines, parsed and written by the pure ``_admin.interchange``;
imported through the management API, ``_admin.manage``). Both formats share the commands,
the concurrent runner, the report and the 0600 file writer.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed, wait
from contextlib import suppress
from pathlib import Path, PurePosixPath
from typing import Any

import click

from .._admin.interchange import ManagedMemory, format_managed, read_managed
from .._admin.manage import MemoryAdmin, NotExists
from .._errors import InvalidPathError, PathExistsError, PreconditionFailedError, S3MemoryError
from .._paths import parse_path
from .output import (
    EXIT_CONFIGURATION,
    EXIT_REFUSED,
    ROOT,
    Interrupted,
    command,
    die,
    exit_status,
    invocation,
    memory_tree,
    print_json,
    printable,
    progress_bar,
)

FORMATS = ("folder", "managed")  # import and export --format


class _Skipped(Exception):
    """A file ``import`` or ``export`` leaves out (the message says why); the others go on."""


class _NotText(_Skipped):
    """A file ``import`` leaves out because it is not UTF-8 text."""


def _bulk(
    ctx: click.Context, title: str, verb: str, jobs: list[tuple[str, Callable[[], object]]], workers: int
) -> list[tuple[str, Exception]]:
    """Run ``jobs`` concurrently (a progress bar on a terminal); return the failures (name, error)
    by name. On Ctrl-C the jobs not yet started are cancelled and those running finish (so no
    file is left half-written); then :class:`Interrupted` says how many were done."""
    failures: list[tuple[str, Exception]] = []
    with progress_bar(ctx, title) as progress:
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
            raise Interrupted(f"{verb} {finished} of {len(jobs)} file(s); the others were not started") from None
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    return sorted(failures, key=lambda failure: failure[0])


def _explain(error: Exception) -> tuple[str, int]:
    """One file's failure: the message and the exit status it calls for."""
    if isinstance(error, S3MemoryError):
        return str(error), exit_status(error)
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
    unit: str = "file(s)",
    skipped: Sequence[str] = (),
    skipped_label: str = "",
    failed_entry: Callable[[str, str, int], dict[str, Any]] | None = None,
    summary_on_stderr: bool = False,
) -> None:
    """Print what a bulk command did: each failure (stderr) and a summary (stdout), or the JSON
    ``document`` with ``failed``; exit with the worst failure's status (storage outranks refusal).
    ``kept`` and ``skipped`` are counted, not failures (``kept`` is named with --verbose); the
    summary goes to stderr where stdout carries the export itself."""
    state = invocation(ctx)
    explained = [(name, *_explain(error)) for name, error in failures]
    if state.json:
        entry = failed_entry or (lambda name, message, status: {"path": name, "error": message, "status": status})
        document["failed"] = [entry(name, message, status) for name, message, status in explained]
        print_json(document)
    else:
        if state.verbose:
            for name in kept:
                click.echo(f"{printable(name, name=True)}: {kept_label}", err=True)
        for name, message, _ in explained:
            click.echo(f"{printable(name, name=True)}: {printable(message)}", err=True)
        if not state.quiet:
            done = total - len(failures) - len(kept) - len(skipped)
            not_text = sum(isinstance(error, _NotText) for _, error in failures)
            parts = [f"{summary}: {done} of {total} {unit}"]
            if kept:
                parts.append(f"{len(kept)} {kept_label}")
            if skipped:
                parts.append(f"{len(skipped)} {skipped_label}")
            if not_text:
                parts.append(f"{not_text} not UTF-8 text (skipped)")
            if len(failures) > not_text:
                parts.append(f"{len(failures) - not_text} failed")
            click.echo(", ".join(parts), err=summary_on_stderr)
    if explained:
        sys.exit(max(status for _, _, status in explained))


# Local files are opened one path segment at a time, each relative to its folder's descriptor
# and with O_NOFOLLOW: a symlink put in place of a file or folder after the walk (or planted in
# an export's destination) is refused, never followed. POSIX only.
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_FOLDER = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW


def _check_local_files_supported() -> None:
    if not (hasattr(os, "O_NOFOLLOW") and hasattr(os, "fwalk") and os.open in os.supports_dir_fd):
        die("import and export need O_NOFOLLOW and directory descriptors (a POSIX system)", EXIT_CONFIGURATION)


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


@command("import", json_output=True)
@click.argument("source", metavar="DIRECTORY|FILE", required=False, type=click.Path())
@click.option(
    "--format",
    "format_",
    type=click.Choice(FORMATS),
    default="folder",
    show_default=True,
    help="folder: DIRECTORY of text files; managed: FILE (- for standard input), a Managed Agents "
    'memory store export: JSON Lines, a JSON array or a {"data": [...]} page',
)
@click.option("--to", "target", default=ROOT, show_default=True, help="memory directory to import into")
@click.option("--replace", is_flag=True, help="--format managed: overwrite memory files that exist")
@click.option("--workers", default=16, show_default=True, type=click.IntRange(1, 64), help="concurrent requests")
@click.pass_context
def import_(ctx: click.Context, source: str | None, format_: str, target: str, replace: bool, workers: int) -> None:
    """Create a memory file for every text file in DIRECTORY (hidden files and symlinks skipped),
    or with --format managed for every memory in FILE.

    Symlinks are never followed, even one swapped in while the import runs. A memory file that
    already exists is kept, never overwritten, and only counted (listed with --verbose), so an
    import can be run again. A file that is not UTF-8 text, is over the memory's size limit or
    is not a regular file is reported and skipped; any such failure makes the exit status
    non-zero. Ctrl-C stops it (exit 130): files being written finish, the others are not started.

    With --format managed, a memory's path is rooted at the store: /x.md becomes --to/x.md.
    content_sha256 and size_bytes are checked when present, other fields are ignored, and a
    memory whose content is null (redacted) is counted and skipped. Each memory refused (bad
    JSON, a mismatch, a path refused, a duplicate, a secret the guard refuses...) is reported
    by its line (or item) number, the others are imported, and the exit status is non-zero.
    --replace overwrites memory files that exist.

    \b
    --json: {"directory": ..., "to": ..., "files": N, "imported": N,
             "already_existed": [path, ...], "not_text": [path, ...],
             "failed": [{"path": ..., "error": ..., "status": exit status}]}
    ("failed" lists the files of "not_text" too).
    --format managed --json: {"file": ..., "format": "managed", "to": ..., "memories": N,
             "imported": N, "already_existed": [path, ...], "redacted": [where, ...],
             "failed": [{"at": "line N", "path": ..., "error": ..., "status": exit status}]}
    """
    if format_ == "managed":
        _import_managed(ctx, _managed_file(ctx, source, reading=True), target, replace=replace, workers=workers)
        return
    if replace:
        raise click.UsageError("--replace is for --format managed; a folder import never overwrites", ctx)
    directory = _folder(ctx, source, exists=True)
    _check_local_files_supported()
    base = target.rstrip("/")
    try:
        top = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        die(f"cannot read {directory}: {error.strerror or error}", EXIT_REFUSED)
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

        with memory_tree(ctx) as memory:
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


@command(json_output=True)
@click.argument("destination", metavar="DIRECTORY|FILE", required=False, type=click.Path())
@click.option(
    "--format",
    "format_",
    type=click.Choice(FORMATS),
    default="folder",
    show_default=True,
    help="folder: a file in DIRECTORY for each memory file; managed: FILE (- or none for standard "
    "output), a Managed Agents memory store export in JSON Lines",
)
@click.option("--from", "source", default=ROOT, show_default=True, help="memory directory to export")
@click.option("--force", is_flag=True, help="replace local files that already exist")
@click.option("--workers", default=16, show_default=True, type=click.IntRange(1, 64), help="concurrent requests")
@click.pass_context
def export(ctx: click.Context, destination: str | None, format_: str, source: str, force: bool, workers: int) -> None:
    """Decrypt every memory file below --from into DIRECTORY, keeping the tree, or with
    --format managed into FILE.

    Files are written mode 0600 and folders made mode 0700, whatever the umask. Symlinks inside
    DIRECTORY are never followed. An existing file is kept unless --force, which replaces it
    atomically. A file that cannot be written is reported and the others go on; any failure
    makes the exit status non-zero. Ctrl-C stops it (exit 130): files being written finish,
    the others are not started.

    With --format managed, FILE holds one memory a line, sorted by path, as
    {"path": "/x.md", "content": ..., "content_sha256": ..., "size_bytes": N}, the path rooted
    at --from; s3memory import --format managed reads it back. A managed store takes memories
    of up to 102,400 bytes: the size limit of every s3memory file, so each one fits.

    \b
    --json: {"directory": ..., "from": ..., "files": N, "exported": N,
             "failed": [{"path": ..., "error": ..., "status": exit status}]}
    --format managed --json (FILE only): {"file": ..., "format": "managed", "from": ...,
             "memories": N, "exported": N,
             "failed": [{"path": ..., "error": ..., "status": exit status}]}
    """
    if format_ == "managed":
        _export_managed(ctx, _managed_file(ctx, destination, reading=False), source, force=force, workers=workers)
        return
    directory = _folder(ctx, destination, exists=False)
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

    with memory_tree(ctx) as memory:
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
        die(f"cannot export to {directory}: {error.strerror or error}", EXIT_REFUSED)
    return top


# -- the command line's DIRECTORY|FILE ---------------------------------------------------------
def _argument(ctx: click.Context) -> click.Parameter:
    return next(param for param in ctx.command.params if isinstance(param, click.Argument))


def _folder(ctx: click.Context, value: str | None, *, exists: bool) -> Path:
    """The DIRECTORY argument, checked as click checks a folder (a usage error, exit 2)."""
    param = _argument(ctx)
    if value is None:
        raise click.MissingParameter(ctx=ctx, param=param, param_hint="'DIRECTORY'")
    try:
        click.Path(exists=exists, file_okay=False).convert(value, param, ctx)
    except click.BadParameter as error:
        error.param_hint = "'DIRECTORY'"
        raise
    return Path(value)


def _managed_file(ctx: click.Context, value: str | None, *, reading: bool) -> str:
    """The FILE argument of --format managed: ``-`` (or none, for export) is standard input or output."""
    param = _argument(ctx)
    if value is None and reading:
        raise click.MissingParameter(ctx=ctx, param=param, param_hint="'FILE'")
    if value is None or value == "-":
        if reading and sys.stdin.isatty():
            raise click.UsageError(
                "give FILE, or pipe the export on standard input: s3memory import --format managed - < FILE", ctx
            )
        return "-"
    try:
        click.Path(exists=reading, dir_okay=False).convert(value, param, ctx)
    except click.BadParameter as error:
        error.param_hint = "'FILE'"
        raise
    return value


def _memory_directory(path: str) -> str:
    """``--to`` or ``--from`` of --format managed, checked once (not once per memory)."""
    try:
        return parse_path(path).display
    except InvalidPathError as error:
        die(str(error), EXIT_REFUSED)


# -- --format managed ---------------------------------------------------------------------------
def _line_number(where: str) -> int:
    return int(where.rsplit(" ", 1)[-1])


def _import_managed(ctx: click.Context, file: str, target: str, *, replace: bool, workers: int) -> None:
    """Write every memory of ``file`` below ``target`` through the management API."""
    base = _memory_directory(target)
    try:
        if file == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(file, "rb") as stream:
                data = stream.read()
    except OSError as error:
        die(f"cannot read {file}: {error.strerror or error}", EXIT_REFUSED)
    with memory_tree(ctx) as memory:
        found = read_managed(data, base=base, max_path_bytes=memory.limits.max_path_bytes)
        admin = MemoryAdmin(memory)
        precondition = None if replace else NotExists()

        def write(path: str, text: str) -> Callable[[], object]:
            return lambda: admin.write(path, text, precondition=precondition)

        jobs = [(item.where, write(item.path, item.content)) for item in found.memories]
        written = _bulk(ctx, f"importing into {base}", "imported", jobs, workers)
    paths = {item.where: item.path for item in found.memories}
    paths.update((refusal.where, refusal.path) for refusal in found.refused if refusal.path)
    existing = [w for w, error in written if isinstance(error, PreconditionFailedError) and not replace]
    failures = [(w, error) for w, error in written if w not in existing]
    failures += [(refusal.where, _Skipped(refusal.message)) for refusal in found.refused]
    failures.sort(key=lambda failure: _line_number(failure[0]))
    document = {
        "file": file,
        "format": "managed",
        "to": base,
        "memories": found.records,
        "imported": len(found.memories) - len(written),
        "already_existed": [paths[w] for w in existing],
        "redacted": found.redacted,
    }
    _report(
        ctx,
        "imported",
        found.records,
        failures,
        document,
        kept=[paths[w] for w in existing],
        kept_label="already existed (kept)",
        unit="memories",
        skipped=found.redacted,
        skipped_label="redacted (skipped)",
        failed_entry=lambda w, message, status: {"at": w, "path": paths.get(w), "error": message, "status": status},
    )


def _export_managed(ctx: click.Context, file: str, source: str, *, force: bool, workers: int) -> None:
    """Write every memory file below ``source`` to ``file`` (``-``: standard output) as JSON Lines."""
    to_stdout = file == "-"
    if to_stdout and invocation(ctx).json:
        raise click.UsageError("--json needs a FILE: the export itself goes to standard output", ctx)
    base = _memory_directory(source)
    folder, name = os.path.split(file)
    if not to_stdout and name in ("", ".", ".."):
        raise click.BadParameter(f"{file!r} names no file", ctx, param_hint="'FILE'")
    if not to_stdout and not force and os.path.lexists(file):  # before reading every memory
        die(f"{file} exists (use --force to overwrite)", EXIT_REFUSED)
    texts: dict[str, str] = {}

    def read(path: str) -> Callable[[], object]:
        def job() -> object:
            texts[path] = memory.read_text(path)
            return None

        return job

    with memory_tree(ctx) as memory:
        entries = memory.list_files(source)
        failures = _bulk(ctx, f"exporting {base}", "exported", [(e.path, read(e.path)) for e in entries], workers)
    memories = [
        ManagedMemory(path[len(base) :] if path.startswith(base + "/") else "/" + PurePosixPath(path).name, text)
        for path, text in texts.items()
    ]
    data = format_managed(memories)
    if to_stdout:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        try:
            top = os.open(folder or ".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError as error:
            die(f"cannot export to {file}: {error.strerror or error}", EXIT_REFUSED)
        try:
            _write_local_file(top, name, data, replace=force, shown=file)
        except _Skipped as error:
            die(str(error), EXIT_REFUSED)
        finally:
            os.close(top)
    document = {
        "file": file,
        "format": "managed",
        "from": base,
        "memories": len(entries),
        "exported": len(memories),
    }
    shown = "exported" if to_stdout else f"exported to {printable(file, name=True)}"
    _report(ctx, shown, len(entries), failures, document, unit="memories", summary_on_stderr=to_stdout)


COMMANDS = (import_, export)
