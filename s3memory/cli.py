"""``s3memory``: the memory from a shell, on the embedded default or on S3.

Built with click (options, environment variables, help) and rich (tables, progress bars).
Neither is imported by the core: only this module and the console script load them.
The six tool commands print exactly what the model would see, so scripts can rely on it;
``ls``, ``cat``, ``import``, ``export`` and ``info`` are conveniences for people.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any, NoReturn, TypeVar

import click

from ._config import ENVIRONMENT, Settings
from ._errors import (
    ConfigurationError,
    IntegrityError,
    InvalidCommandError,
    InvalidPathError,
    PathExistsError,
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
Exit status: 0 success, 1 the command was refused (message on stderr),
2 bad usage, 3 bad configuration, 4 storage or integrity failure.
"""


def _fail(error: S3MemoryError) -> NoReturn:
    message = str(error)
    click.echo(message if message.startswith("Error") else f"Error: {message}", err=True)
    if isinstance(error, ConfigurationError):
        sys.exit(EXIT_CONFIGURATION)
    if isinstance(error, (StorageError, IntegrityError)):
        sys.exit(EXIT_STORAGE)
    sys.exit(EXIT_REFUSED)


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
        click.echo(command(memory))


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

    with _memory(ctx) as memory:
        entries = memory.list_files(path)
    rows = [(e.path, e.size) for e in entries] if recursive else _children(entries, path)
    table = Table(box=None, show_header=True, pad_edge=False)
    table.add_column("size", justify="right")
    table.add_column("bytes", justify="right", style="dim")
    table.add_column("path")
    for name, size in rows:
        table.add_row(format_size(size), str(size), name)
    console = _console()
    console.print(table)
    console.print(f"{len(entries)} file(s), {format_size(sum(e.size for e in entries))}", style="dim")


@cli.command()
@click.argument("path")
@click.pass_context
def cat(ctx: click.Context, path: str) -> None:
    """Print a file's text as stored, without line numbers."""
    with _memory(ctx) as memory:
        text = memory.read_text(path)
    click.echo(text, nl=False)


def _bulk(title: str, jobs: list[tuple[str, Callable[[], object]]], workers: int) -> list[tuple[str, str]]:
    """Run ``jobs`` concurrently behind a progress bar (on stderr); return the failures."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    failures: list[tuple[str, str]] = []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=_console(stderr=True), transient=False) as progress:
        task = progress.add_task(title, total=len(jobs))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="s3memory-bulk") as pool:
            futures = {pool.submit(job): name for name, job in jobs}
            for future in as_completed(futures):
                try:
                    future.result()
                except S3MemoryError as error:
                    failures.append((futures[future], str(error)))
                progress.advance(task)
    return sorted(failures)


def _report(done: str, total: int, failures: list[tuple[str, str]]) -> None:
    for name, message in failures:
        click.echo(f"{name}: {message}", err=True)
    failed = f", {len(failures)} failed" if failures else ""
    click.echo(f"{done}: {total - len(failures)} of {total} file(s){failed}")
    if failures:
        sys.exit(EXIT_REFUSED)


def _local_files(directory: Path) -> Iterator[Path]:
    """Regular files below ``directory``, symlinks not followed, hidden entries skipped."""
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not Path(root, d).is_symlink())
        for name in sorted(files):
            candidate = Path(root, name)
            if not name.startswith(".") and candidate.is_file() and not candidate.is_symlink():
                yield candidate


@cli.command("import")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--to", "target", default=ROOT, show_default=True, help="memory directory to import into")
@click.option("--workers", default=16, show_default=True, type=click.IntRange(1, 64), help="concurrent requests")
@click.pass_context
def import_(ctx: click.Context, directory: Path, target: str, workers: int) -> None:
    """Create a memory file for every text file in DIRECTORY (hidden files and symlinks skipped).

    Existing memory files are never overwritten: they are reported and the exit status is 1.
    """
    sources = list(_local_files(directory))
    base = target.rstrip("/")

    def create(source: Path, path: str) -> Callable[[], object]:
        def job() -> object:
            try:
                text = source.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                raise InvalidCommandError("Error: not UTF-8 text; skipped") from None
            return memory.create(path, text)

        return job

    with _memory(ctx) as memory:
        jobs = [(p, create(s, p)) for s in sources for p in [f"{base}/{s.relative_to(directory).as_posix()}"]]
        failures = _bulk(f"importing into {base}", jobs, workers)
    _report("imported", len(jobs), failures)


@cli.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--from", "source", default=ROOT, show_default=True, help="memory directory to export")
@click.option("--force", is_flag=True, help="overwrite local files that already exist")
@click.option("--workers", default=16, show_default=True, type=click.IntRange(1, 64), help="concurrent requests")
@click.pass_context
def export(ctx: click.Context, directory: Path, source: str, force: bool, workers: int) -> None:
    """Decrypt every memory file below --from into DIRECTORY, keeping the tree."""
    base = source.rstrip("/")
    root = directory.resolve()

    def write(path: str) -> Callable[[], object]:
        def job() -> object:
            relative = path[len(base) + 1 :] if path.startswith(base + "/") else PurePosixPath(path).name
            local = (root / relative).resolve()
            if not local.is_relative_to(root):  # paths were validated; this is the belt to those braces
                raise InvalidPathError("Error: the path would leave the export directory; skipped")
            if local.exists() and not force:
                raise PathExistsError(f"Error: {local} exists (use --force to overwrite)")
            text = memory.read_text(path)
            local.parent.mkdir(parents=True, exist_ok=True)
            return local.write_text(text, encoding="utf-8")

        return job

    with _memory(ctx) as memory:
        entries = memory.list_files(source)
        failures = _bulk(f"exporting {base}", [(e.path, write(e.path)) for e in entries], workers)
    _report(f"exported to {directory}", len(entries), failures)


@cli.command()
@click.pass_context
def info(ctx: click.Context) -> None:
    """Show the tenant, where its memory is, how it is keyed, and its file count and size."""
    from rich.table import Table

    settings: Settings = ctx.obj
    with _memory(ctx) as memory:
        entries = memory.list_files(ROOT)
        tenant = memory.layout.tenant
        prefix = memory.layout.memory_prefix
    if settings.key_mode == "kms":
        keying = f"kms: one KMS data key per object, under {settings.kms_key_id}"
    elif settings.kms_key_id:
        keying = f"tenant: one key per user, wrapped by KMS key {settings.kms_key_id}"
    else:
        master = settings.master_key_file or settings.data_home / "master.key"
        keying = f"tenant: one key per user, wrapped by the local master key {master}"
    directories = {str(PurePosixPath(e.path).parent) for e in entries} - {ROOT}
    total = sum(e.size for e in entries)
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    for label, value in (
        ("user", tenant),
        ("store", settings.location),
        ("key prefix", prefix),
        ("key mode", keying),
        ("files", str(len(entries))),
        ("directories", str(len(directories))),
        ("size", f"{format_size(total)} ({total:,} bytes of plaintext)"),
    ):
        table.add_row(label, value)
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
        click.echo(f"{when}\t{format_size(stale.size)}\t{stale.path}")
    for path in report.kept_changed:
        click.echo(f"{path}: written meanwhile; kept", err=True)
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
    click.echo(
        f"tenant key {report.kid}: {report.rewrapped} file(s) re-wrapped, {report.already_current} already current"
        + (f", {report.raced} changed meanwhile (run again)" if report.raced else "")
    )
    for key in report.unreadable:
        click.echo(f"{key}: does not unwrap (tampered with, or under a key no longer held)", err=True)
    if report.complete:
        click.echo("rotation complete: no retired key left")
    else:
        click.echo(f"old key(s) {', '.join(report.retired)} kept for processes that cached them; run again later")


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
        message = f"Error: erasing user {settings.user!r} at {settings.location} cannot be undone; add --yes"
        click.echo(message, err=True)
        sys.exit(EXIT_USAGE)
    with _memory(ctx) as memory:
        report = erase_tenant(memory)
    how = "keys destroyed (crypto-shredded)" if report.shredded else "no per-user key to destroy (KMS mode)"
    click.echo(f"erased {report.tenant}: {how}; {report.versions_deleted} object version(s) deleted")


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
    {prefix}${aws:PrincipalTag/s3memory-user}/* and use the KMS key only under its own
    encryption context. See SECURITY.md, "Deployment".
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
    out.mkdir(parents=True, exist_ok=True)
    for name, document in documents.items():
        (out / f"{name}.json").write_text(json.dumps(document, indent=2) + "\n")
        click.echo(out / f"{name}.json")


# -- programs -----------------------------------------------------------------------------
@cli.command()
def demo() -> None:
    """An agent remembering across two sessions (scripted offline; Claude with ANTHROPIC_API_KEY)."""
    from ._demo import run_demo

    run_demo(sys.stdout, api_key=os.environ.get("ANTHROPIC_API_KEY"))


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
    return 0


if __name__ == "__main__":
    sys.exit(main())
