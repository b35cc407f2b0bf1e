"""The bulk commands, ``import`` and ``export``, and their local-file safety.

Both run one job per file concurrently (:func:`_bulk`) and report each file's failure and a
summary (:func:`_report`). Local files are reached only through descriptors, one path segment
at a time with ``O_NOFOLLOW`` (:func:`_open_folder`): a symlink swapped in while they run is
refused, never followed. ``cli`` registers :data:`COMMANDS` on its group.
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

from ._cli_output import (
    EXIT_CONFIGURATION,
    EXIT_REFUSED,
    ROOT,
    _command,
    _die,
    _Interrupted,
    _memory,
    _print_json,
    _progress,
    _state,
    _status,
    printable,
)
from ._errors import PathExistsError, S3MemoryError


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


COMMANDS = (import_, export)
