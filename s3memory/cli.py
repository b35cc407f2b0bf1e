"""``s3memory``: the memory commands from a shell, on the embedded default or on S3.

The embedded default needs no AWS account: a local directory store and a local master key
file, created 0600 on first use. ``--bucket`` switches to S3 (with ``--kms-key-id`` the
tenant key is wrapped by KMS instead of the local master key).

Environment variables (each overridden by its flag):
    S3MEMORY_HOME             data directory (default: $XDG_DATA_HOME/s3memory or ~/.local/share/s3memory)
    S3MEMORY_STORE_DIR        local store directory (default: $S3MEMORY_HOME/store)
    S3MEMORY_MASTER_KEY_FILE  master key file (default: $S3MEMORY_HOME/master.key)
    S3MEMORY_USER             user id / tenant (default: "local")
    S3MEMORY_BUCKET           S3 bucket (unset: the local store)
    S3MEMORY_PREFIX           key prefix in the bucket
    S3MEMORY_KMS_KEY_ID       KMS key for the tenant key (or for every object with --key-mode kms)
    S3MEMORY_ENDPOINT_URL     S3/KMS endpoint (e.g. a local S3-compatible server)

Exit status: 0 success, 1 the command failed (message on stderr), 2 bad usage.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import os
import sys
from pathlib import Path
from typing import Any

from ._errors import ConfigurationError, S3MemoryError
from ._factory import open_memory
from ._keys import generate_master_key
from ._memory import EncryptedMemory

EXAMPLES = """\
examples:
  s3memory create /memories/notes.md "Prefers short answers."
  s3memory view /memories
  s3memory view /memories/notes.md --range 1 5
  s3memory str-replace /memories/notes.md "short" "concise"
  s3memory insert /memories/notes.md 0 "# Notes"
  s3memory rename /memories/notes.md /memories/profile/notes.md
  s3memory delete /memories/profile
  s3memory --bucket my-bucket --user alice --kms-key-id alias/memory view /memories
  s3memory demo
"""


def default_home() -> Path:
    if os.environ.get("S3MEMORY_HOME"):
        return Path(os.environ["S3MEMORY_HOME"]).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "s3memory"


def load_or_create_master_key(path: Path) -> bytes:
    """Read the base64 master key at ``path``, creating it (mode 0600) if it is missing."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w") as f:
            f.write(base64.b64encode(generate_master_key()).decode() + "\n")
    if path.stat().st_mode & 0o077:
        print(f"s3memory: warning: {path} is readable by other users; chmod 600 it", file=sys.stderr)
    try:
        key = base64.b64decode(path.read_text().strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigurationError(f"the master key file {path} is not base64") from None
    if len(key) != 32:
        raise ConfigurationError(f"the master key file {path} must hold 32 bytes (base64)")
    return key


def build_parser() -> argparse.ArgumentParser:
    env = os.environ.get
    parser = argparse.ArgumentParser(
        prog="s3memory",
        description="Run Claude memory tool commands on an encrypted memory (local by default, or S3).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--home", type=Path, default=None, help="data directory [S3MEMORY_HOME]")
    parser.add_argument("--store-dir", type=Path, default=env("S3MEMORY_STORE_DIR"), help="local store directory")
    parser.add_argument("--master-key-file", type=Path, default=env("S3MEMORY_MASTER_KEY_FILE"), help="master key file")
    parser.add_argument("--user", default=env("S3MEMORY_USER", "local"), help="user id (tenant) [S3MEMORY_USER]")
    parser.add_argument("--bucket", default=env("S3MEMORY_BUCKET"), help="use this S3 bucket [S3MEMORY_BUCKET]")
    parser.add_argument("--prefix", default=env("S3MEMORY_PREFIX", ""), help="key prefix in the bucket, ending in /")
    parser.add_argument("--kms-key-id", default=env("S3MEMORY_KMS_KEY_ID"), help="KMS key id, ARN or alias")
    parser.add_argument(
        "--key-mode", choices=["tenant", "kms"], default="tenant", help="tenant key (default) or KMS per object"
    )
    parser.add_argument("--endpoint-url", default=env("S3MEMORY_ENDPOINT_URL"), help="S3/KMS endpoint URL")
    parser.add_argument("--region", default=None, help="AWS region")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    view = commands.add_parser("view", help="list a directory or show a file")
    view.add_argument("path")
    view.add_argument(
        "--range", nargs=2, type=int, metavar=("START", "END"), help="lines START..END (END -1: to the end)"
    )
    create = commands.add_parser("create", help="create a file (TEXT, or standard input if omitted)")
    create.add_argument("path")
    create.add_argument("text", nargs="?")
    replace = commands.add_parser("str-replace", help="replace the one occurrence of OLD by NEW")
    replace.add_argument("path")
    replace.add_argument("old")
    replace.add_argument("new")
    insert = commands.add_parser("insert", help="insert TEXT after line LINE (0: at the top)")
    insert.add_argument("path")
    insert.add_argument("line", type=int)
    insert.add_argument("text")
    delete = commands.add_parser("delete", help="delete a file or a directory")
    delete.add_argument("path")
    rename = commands.add_parser("rename", help="rename or move a file or a directory")
    rename.add_argument("old_path")
    rename.add_argument("new_path")
    commands.add_parser(
        "demo", help="an agent remembering across two sessions (scripted offline; Claude with ANTHROPIC_API_KEY)"
    )
    return parser


def open_from_args(args: argparse.Namespace) -> EncryptedMemory:
    home = args.home or default_home()
    if args.bucket:
        import boto3

        from .stores._s3 import default_s3_client

        s3 = default_s3_client(endpoint_url=args.endpoint_url, region_name=args.region)
        options: dict[str, Any] = {"bucket": args.bucket, "s3_client": s3, "prefix": args.prefix}
        if args.kms_key_id:
            options["kms_key_id"] = args.kms_key_id
            options["kms_client"] = boto3.client("kms", endpoint_url=args.endpoint_url, region_name=args.region)
    else:
        from .stores import LocalDirStore

        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        options = {"store": LocalDirStore(args.store_dir or home / "store")}
        if args.kms_key_id:
            raise ConfigurationError("--kms-key-id needs --bucket (the local store uses the local master key)")
    if args.key_mode == "tenant" and "kms_key_id" not in options:
        options["master_key"] = load_or_create_master_key(args.master_key_file or home / "master.key")
    return open_memory(user_id=args.user, key_mode=args.key_mode, **options)


def run_command(memory: EncryptedMemory, args: argparse.Namespace) -> str:
    if args.command == "view":
        return memory.view(args.path, list(args.range) if args.range else None)
    if args.command == "create":
        text = sys.stdin.read() if args.text is None else args.text
        return memory.create(args.path, text)
    if args.command == "str-replace":
        return memory.str_replace(args.path, args.old, args.new)
    if args.command == "insert":
        return memory.insert(args.path, args.line, args.text)
    if args.command == "delete":
        return memory.delete(args.path)
    return memory.rename(args.old_path, args.new_path)


def demo(out: Any = None) -> None:
    """An agent in two sessions through the SDK's tool runner (scripted unless
    ANTHROPIC_API_KEY is set), then a stored object raw and decrypted."""
    from ._demo import run_demo

    run_demo(out or sys.stdout, api_key=os.environ.get("ANTHROPIC_API_KEY"))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "demo":
            demo()
            return 0
        memory = open_from_args(args)
        try:
            print(run_command(memory, args))
        finally:
            memory.close()
    except S3MemoryError as error:
        message = str(error)
        print(message if message.startswith("Error") else f"Error: {message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
