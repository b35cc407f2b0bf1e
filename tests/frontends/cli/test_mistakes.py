"""Every ordinary mistake gets one clear line and its documented exit status.

Each row runs ``python -m s3memory`` in a subprocess, as a user would: a clean environment, a
throwaway HOME and AWS configuration, no credentials unless the row gives some. The rows run
concurrently (each ~0.1-2 s). For every row: the exit status is the documented one (0
success, 1 refused, 2 usage, 3 configuration, 4 storage, 141 output closed early; 5,
"unexpected", for none), stderr is exactly one line (none on success or a closed pipe), never
a traceback, and the line names the flag, variable or thing at fault.
"""

from __future__ import annotations

import json
import os
import pty
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # subprocesses of the CLI, with 30 s bounds for a hung command

OK, REFUSED, USAGE, CONFIGURATION, STORAGE, PIPE_CLOSED = 0, 1, 2, 3, 4, 141


@dataclass
class Row:
    id: str
    argv: list[str]
    status: int
    message: str = ""  # a regular expression searched in stderr (stdout when status is 0)
    env: dict[str, str] = field(default_factory=dict)
    setup: Callable[[Path], object] | None = None
    stdin: str | None = None
    tty_stdin: bool = False
    stdout_closed: bool = False
    per_file: bool = False  # the line names the file first: 'PATH: Error: ...'


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


PORT = closed_port()
UNREACHABLE = f"http://127.0.0.1:{PORT}"
FAKE_AWS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


def base_env(d: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(d / "home"),
        "LANG": "C.UTF-8",
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},  # the s3memory under test
        "AWS_CONFIG_FILE": str(d / "aws" / "config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(d / "aws" / "credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def s3memory(d: Path, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the CLI in the row's directory (for setups)."""
    return subprocess.run(
        [sys.executable, "-m", "s3memory", *argv],
        env={**base_env(d), **(env or {})},
        cwd=d,
        capture_output=True,
        text=True,
        timeout=60,
    )


# -- setups -----------------------------------------------------------------------------------
def key_file(d: Path, content: str = "", mode: int = 0o600, uid: int | None = None) -> Path:
    path = d / "keys" / "master.key"
    path.parent.mkdir(mode=0o700, exist_ok=True)
    path.write_text(content or s3memory_key())
    path.chmod(mode)
    if uid is not None:
        os.chown(path, uid, -1)
    return path


def s3memory_key() -> str:
    import base64

    return base64.b64encode(os.urandom(32)).decode() + "\n"


def linked_key(d: Path) -> None:
    key_file(d)
    (d / "keys" / "link.key").symlink_to(d / "keys" / "master.key")


def a_file(d: Path) -> None:
    (d / "file.txt").write_text("not a folder\n")


def a_memory_file(d: Path) -> None:
    assert s3memory(d, "create", "/memories/a.md", "one line").returncode == 0


def tampered(d: Path) -> None:
    a_memory_file(d)
    store = d / "home" / ".local" / "share" / "s3memory" / "store"
    (stored,) = [p for p in store.rglob("*") if p.is_file() and "a.md" in p.name and "meta" not in p.name]
    data = bytearray(stored.read_bytes())
    data[-1] ^= 1
    stored.write_bytes(bytes(data))


def a_folder(d: Path, binary: bool = False) -> None:
    (d / "notes" / "sub").mkdir(parents=True)
    (d / "notes" / "a.md").write_text("alpha\n")
    (d / "notes" / "sub" / "b.md").write_text("beta\n")
    if binary:
        (d / "notes" / "blob.bin").write_bytes(b"\xff\xfe\x00")


def imported_once(d: Path) -> None:
    a_folder(d)
    assert s3memory(d, "import", "notes").returncode == 0


def open_home(d: Path, mode: int = 0o777, uid: int | None = None) -> None:
    home = d / "h"
    home.mkdir()
    home.chmod(mode)
    if uid is not None:
        os.chown(home, uid, -1)


NOBODY = 65534
ROOT = os.geteuid() == 0


# -- the fake Anthropic API: 401 for any key, 404 for the model "no-such-model" ----------------
class _Anthropic(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])) or b"{}")
        if body.get("model") == "no-such-model":
            status, kind, message = 404, "not_found_error", "model: no-such-model"
        else:
            status, kind, message = 401, "authentication_error", "invalid x-api-key"
        payload = json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def anthropic_url() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Anthropic)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


API = "{anthropic}"  # replaced by the fake API's URL

ROWS = [
    # -- usage (2): click's own checks -------------------------------------------------------
    Row("unknown command", ["frobnicate"], USAGE, r"No such command 'frobnicate'"),
    Row(
        "unknown global option",
        ["--frobnicate", "view"],
        USAGE,
        r"No such option '--frobnicate'.*view --help|No such option '--frobnicate'.*s3memory --help",
    ),
    Row(
        "unknown option after the command",
        ["view", "--frobnicate"],
        USAGE,
        r"No such option '--frobnicate'.*view --help|No such option '--frobnicate'.*s3memory --help",
    ),
    Row("range needs two numbers", ["view", "/memories", "--range", "1"], USAGE, r"--range"),
    Row("range of words", ["view", "/memories/a.md", "--range", "a", "b"], USAGE, r"--range.*'a' is not a valid"),
    Row("line not a number", ["insert", "/memories/x", "one", "text"], USAGE, r"'one' is not a valid integer"),
    Row("import without a folder", ["import"], USAGE, r"Missing argument 'DIRECTORY'"),
    Row("import of a missing folder", ["import", "missing"], USAGE, r"'missing' does not exist"),
    Row("import of a file", ["import", "file.txt"], USAGE, r"'file.txt' is a file", setup=a_file),
    Row("export to a file", ["export", "file.txt"], USAGE, r"'file.txt' is a file", setup=a_file),
    Row("export with 0 workers", ["export", "out", "--workers", "0"], USAGE, r"--workers"),
    Row("expire without days", ["expire"], USAGE, r"Missing option '--days'"),
    Row("expire with negative days", ["expire", "--days", "-1"], USAGE, r"--days"),
    Row("expire some day", ["expire", "--days", "soon"], USAGE, r"--days.*'soon'"),
    Row("rotate-key with negative wait", ["rotate-key", "--retire-after", "-5"], USAGE, r"--retire-after"),
    Row("erase-user without --yes", ["erase-user"], USAGE, r"cannot be undone; add --yes"),
    Row("policy without roles", ["--bucket", "my-bucket", "policy"], USAGE, r"Missing option '--memory-role-arn'"),
    Row("create waiting on a terminal", ["create", "/memories/a.md"], USAGE, r"give TEXT", tty_stdin=True),
    Row("--json where there is none", ["--json", "view"], USAGE, r"--json"),
    Row("--json after such a command", ["cat", "/memories/a.md", "--json"], USAGE, r"--json"),
    # -- configuration (3): each setting's bad value, named by its flag or variable -----------
    Row("key mode", ["--key-mode", "plain", "view"], CONFIGURATION, r"--key-mode \(S3MEMORY_KEY_MODE\).*'plain'"),
    Row("key mode variable", ["view"], CONFIGURATION, r"S3MEMORY_KEY_MODE", env={"S3MEMORY_KEY_MODE": "plain"}),
    Row("key mode after the command", ["info", "--key-mode", "plain"], CONFIGURATION, r"--key-mode"),
    Row("sensitive data", ["--sensitive-data", "maybe", "view"], CONFIGURATION, r"--sensitive-data.*'maybe'"),
    Row(
        "sensitive data variable",
        ["ls"],
        CONFIGURATION,
        r"S3MEMORY_SENSITIVE_DATA",
        env={"S3MEMORY_SENSITIVE_DATA": "x"},
    ),
    Row(
        "track access variable", ["view"], CONFIGURATION, r"S3MEMORY_TRACK_ACCESS", env={"S3MEMORY_TRACK_ACCESS": "on?"}
    ),
    Row(
        "encrypt names variable",
        ["view"],
        CONFIGURATION,
        r"S3MEMORY_ENCRYPT_NAMES",
        env={"S3MEMORY_ENCRYPT_NAMES": "2"},
    ),
    Row("timeout not a number", ["--timeout", "abc", "view"], CONFIGURATION, r"--timeout.*'abc'"),
    Row("timeout zero", ["view"], CONFIGURATION, r"--timeout \(S3MEMORY_TIMEOUT\)", env={"S3MEMORY_TIMEOUT": "0"}),
    Row("user traversal", ["--user", "../evil", "view"], CONFIGURATION, r"--user.*'\.\./evil' is not allowed"),
    Row("user after the command", ["view", "--user", "../evil"], CONFIGURATION, r"--user.*'\.\./evil'"),
    Row("user reserved", ["--user", "Memories", "view"], CONFIGURATION, r"--user.*'Memories' is reserved"),
    Row("user empty", ["--user", "", "view"], CONFIGURATION, r"--user.*non-empty"),
    Row("user too long", ["--user", "u" * 200, "view"], CONFIGURATION, r"--user.*longer than 128"),
    Row(
        "key file mistyped",
        ["--master-key-file", "typo.key", "view"],
        CONFIGURATION,
        r"typo\.key.*does not exist.*init",
    ),
    Row(
        "key file variable mistyped",
        ["view"],
        CONFIGURATION,
        r"S3MEMORY_MASTER_KEY_FILE.*does not exist",
        env={"S3MEMORY_MASTER_KEY_FILE": "typo.key"},
    ),
    Row("key file is a folder", ["--master-key-file", "/tmp", "view"], CONFIGURATION, r"/tmp is not a regular file"),
    Row("key file in no folder", ["--master-key-file", "/dev/null/k", "view"], CONFIGURATION, r"/dev/null/k"),
    Row(
        "key file others may read",
        ["--master-key-file", "keys/master.key", "view"],
        CONFIGURATION,
        r"readable or writable by other users; run: chmod 600",
        setup=lambda d: key_file(d, mode=0o644),
    ),
    Row(
        "key file is a link",
        ["--master-key-file", "keys/link.key", "view"],
        CONFIGURATION,
        r"link\.key is a symbolic link",
        setup=linked_key,
    ),
    Row(
        "key file not base64",
        ["--master-key-file", "keys/master.key", "view"],
        CONFIGURATION,
        r"master\.key is not base64",
        setup=lambda d: key_file(d, "not base64!!\n"),
    ),
    Row(
        "key file too short",
        ["--master-key-file", "keys/master.key", "view"],
        CONFIGURATION,
        r"master\.key must hold 32 bytes",
        setup=lambda d: key_file(d, "c2hvcnQ=\n"),
    ),
    Row(
        "key file of one repeated byte",
        ["--master-key-file", "keys/master.key", "view"],
        CONFIGURATION,
        r"--master-key-file.*repeated byte",
        setup=lambda d: key_file(d, "A" * 43 + "=\n"),
    ),
    Row("home in no folder", ["--home", "/dev/null/h", "view"], CONFIGURATION, r"--home.*/dev/null/h"),
    Row("home is a file", ["--home", "file.txt", "view"], CONFIGURATION, r"file\.txt is not a directory", setup=a_file),
    Row(
        "home others may write",
        ["--home", "h", "view"],
        CONFIGURATION,
        r"writable by other users; run: chmod go-w",
        setup=open_home,
    ),
    Row("store dir is a file", ["--store-dir", "file.txt", "view"], CONFIGURATION, r"file\.txt", setup=a_file),
    Row("prefix without bucket", ["--prefix", "app/", "view"], CONFIGURATION, r"--prefix.*--bucket"),
    Row("KMS key without bucket", ["--kms-key-id", "alias/m", "view"], CONFIGURATION, r"--kms-key-id.*--bucket"),
    Row(
        "key mode kms without a KMS key",
        ["--bucket", "my-bucket", "--key-mode", "kms", "view"],
        CONFIGURATION,
        r"--key-mode kms needs --kms-key-id",
    ),
    Row(
        "bucket as a URL",
        ["--bucket", "s3://my-bucket/app/", "view"],
        CONFIGURATION,
        r"--bucket.*not a URL.*try --bucket my-bucket --prefix app/",
    ),
    Row("bucket too short", ["--bucket", "ab", "view"], CONFIGURATION, r"--bucket.*'ab' is not a bucket name"),
    Row("bucket with a space", ["view", "--bucket", "my bucket"], CONFIGURATION, r"--bucket.*not a bucket name"),
    Row(
        "bad prefix",
        ["--bucket", "my-bucket", "--region", "us-east-1", "--prefix", "../x/", "view"],
        CONFIGURATION,
        r"--prefix.*'\.\./x/'",
        env=FAKE_AWS,
    ),
    Row("no region", ["--bucket", "my-bucket", "view"], CONFIGURATION, r"no AWS region.*--region"),
    Row("bad region", ["--bucket", "my-bucket", "--region", "us east", "view"], CONFIGURATION, r"'us east'.*region"),
    Row(
        "missing profile",
        ["--bucket", "my-bucket", "view"],
        CONFIGURATION,
        r"AWS profile 'nope'.*AWS_PROFILE",
        env={"AWS_PROFILE": "nope"},
    ),
    Row(
        "missing profile with a region",
        ["--bucket", "my-bucket", "--region", "eu-west-1", "view"],
        CONFIGURATION,
        r"AWS profile 'nope'",
        env={"AWS_PROFILE": "nope"},
    ),
    Row(
        "endpoint not a URL",
        ["--bucket", "my-bucket", "--endpoint-url", "not a url", "view"],
        CONFIGURATION,
        r"not a url",
        env=FAKE_AWS,
    ),
    Row(
        "policy without bucket",
        ["policy", "--memory-role-arn", "a", "--agent-role-arn", "b"],
        CONFIGURATION,
        "--bucket",
    ),
    Row(
        "policy with a bad ARN",
        ["--bucket", "my-bucket", "policy", "--memory-role-arn", "nope", "--agent-role-arn", "nope2"],
        CONFIGURATION,
        r"'nope'.*not a valid ARN",
    ),
    Row("init of a mistyped folder", ["--master-key-file", "no/such/k", "init"], CONFIGURATION, r"no/such"),
    # -- refused (1) --------------------------------------------------------------------------
    Row("no such file", ["view", "/memories/none"], REFUSED, r"/memories/none does not exist"),
    Row("traversal", ["cat", "/memories/../etc/passwd"], REFUSED, r"would escape /memories"),
    Row("range past the end", ["view", "/memories/a.md", "--range", "5", "9"], REFUSED, r"5", setup=a_memory_file),
    Row("create over a file", ["create", "/memories/a.md", "x"], REFUSED, r"already exists", setup=a_memory_file),
    Row("rename a missing file", ["rename", "/memories/x", "/memories/y"], REFUSED, r"/memories/x"),
    Row("export below a file", ["export", "file.txt/out"], REFUSED, r"cannot export to file\.txt/out", setup=a_file),
    Row(
        "import of a binary file",
        ["import", "notes"],
        REFUSED,
        r"^/memories/blob\.bin: Error: not UTF-8",
        setup=lambda d: a_folder(d, binary=True),
        per_file=True,
    ),
    # -- storage (4) --------------------------------------------------------------------------
    Row("tampered file", ["cat", "/memories/a.md"], STORAGE, r"integrity", setup=tampered),
    Row(
        "unreachable endpoint",
        ["--bucket", "my-bucket", "--endpoint-url", UNREACHABLE, "--timeout", "1", "view"],
        STORAGE,
        r"could not be reached",
        env=FAKE_AWS,
    ),
    Row(
        "no credentials",
        ["--bucket", "my-bucket", "--region", "us-east-1", "--endpoint-url", UNREACHABLE, "view"],
        STORAGE,
        r"no AWS credentials",
    ),
    # -- the demo ---------------------------------------------------------------------------------
    Row(
        "demo, API unreachable",
        ["demo"],
        STORAGE,
        r"Anthropic API.*could not be reached.*--scripted",
        env={"ANTHROPIC_API_KEY": "sk-bad", "ANTHROPIC_BASE_URL": UNREACHABLE},
    ),
    Row(
        "demo, key refused",
        ["demo"],
        CONFIGURATION,
        r"refused ANTHROPIC_API_KEY \(401.*--scripted",
        env={"ANTHROPIC_API_KEY": "sk-bad", "ANTHROPIC_BASE_URL": API},
    ),
    Row(
        "demo, no such model",
        ["demo"],
        CONFIGURATION,
        r"ANTHROPIC_MODEL.*no-such-model.*--scripted",
        env={"ANTHROPIC_API_KEY": "sk-bad", "ANTHROPIC_BASE_URL": API, "ANTHROPIC_MODEL": "no-such-model"},
    ),
    Row(
        "demo --scripted with a bad key",
        ["demo", "--scripted"],
        OK,
        r"a SCRIPTED model",
        env={"ANTHROPIC_API_KEY": "sk-bad", "ANTHROPIC_BASE_URL": UNREACHABLE},
    ),
    # -- output closed early (demo | head -1): silent, 141 as if killed by SIGPIPE ----------
    Row("demo into a closed pipe", ["demo", "--scripted"], PIPE_CLOSED, stdout_closed=True),
    Row("view into a closed pipe", ["view"], PIPE_CLOSED, stdout_closed=True),
    Row("ls into a closed pipe", ["ls"], PIPE_CLOSED, stdout_closed=True),
    Row("help into a closed pipe", ["--help"], PIPE_CLOSED, stdout_closed=True),
    # -- what used to be mistakes and now works ---------------------------------------------------
    Row("options after the command", ["info", "--user", "bob"], OK, r"user\s+bob"),
    Row("the later option wins", ["--user", "alice", "info", "--user", "bob"], OK, r"user\s+bob"),
    Row("home after the command", ["info", "--home", "h2"], OK, r"h2/master\.key"),
    Row("re-import skips what exists", ["import", "notes"], OK, r"2 already existed", setup=imported_once),
    Row("settings a command does not use", ["--version"], OK, r"version", env={"S3MEMORY_KEY_MODE": "plain"}),
]
if ROOT:  # only root can give a file away
    ROWS += [
        Row(
            "key file of another user",
            ["--master-key-file", "keys/master.key", "view"],
            CONFIGURATION,
            r"owned by another user",
            setup=lambda d: key_file(d, uid=NOBODY),
        ),
        Row(
            "home of another user",
            ["--home", "h", "view"],
            CONFIGURATION,
            r"owned by another user",
            setup=lambda d: open_home(d, 0o700, NOBODY),
        ),
    ]


# A row that has not ended after this long is hung (one row takes about a second alone). The
# rows run in as many processes as the machine has cores, twice over: more only makes each
# slower on a small machine (8 at once on 2 cores took rows past 30 s under load).
HANG = 60
WORKERS = 2 * (os.cpu_count() or 1)


def run_row(row: Row, d: Path, anthropic: str) -> str | None:
    """Run ``row`` in ``d``; None if it behaved, else what went wrong."""
    d.mkdir()
    (d / "home").mkdir(mode=0o700)
    if row.setup:
        row.setup(d)
    env = {**base_env(d), **{k: v.replace(API, anthropic) for k, v in row.env.items()}}
    stdin: int | None = None
    stdout: int = subprocess.PIPE
    closers: list[int] = []
    if row.tty_stdin:
        primary, secondary = pty.openpty()
        stdin, closers = secondary, [primary, secondary]
    if row.stdout_closed:
        read_end, write_end = os.pipe()
        os.close(read_end)  # what `| head -1` does once it has its line
        stdout, closers = write_end, [write_end]
    try:
        result = subprocess.run(
            [sys.executable, "-m", "s3memory", *row.argv],
            env=env,
            cwd=d,
            stdin=stdin if stdin is not None else subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.PIPE,
            input=None,
            timeout=HANG,
        )
    except subprocess.TimeoutExpired:
        return f"{row.id}: hung for {HANG} s\n    argv: {row.argv}"
    finally:
        for fd in closers:
            os.close(fd)
    out = (result.stdout or b"").decode(errors="replace")
    err = result.stderr.decode(errors="replace")
    problems = []
    if result.returncode != row.status:
        problems.append(f"exit {result.returncode}, not {row.status}")
    lines = err.splitlines()
    expected_lines = 1 if row.status not in (OK, PIPE_CLOSED) else 0
    if len(lines) != expected_lines:
        problems.append(f"{len(lines)} line(s) on stderr, not {expected_lines}")
    if "Traceback" in err + out:
        problems.append("a traceback")
    if expected_lines and not row.per_file and not err.startswith("Error: "):
        problems.append("the line does not start with 'Error: '")
    if row.message and not re.search(row.message, err if row.status != OK else out):
        problems.append(f"no match for {row.message!r}")
    if problems:
        return f"{row.id}: {'; '.join(problems)}\n    argv: {row.argv}\n    stderr: {err!r}\n    stdout: {out[:300]!r}"
    return None


def test_rows_are_many_and_distinct() -> None:
    assert len(ROWS) >= 60
    assert len({row.id for row in ROWS}) == len(ROWS)


def test_every_ordinary_mistake_is_one_clear_line(tmp_path: Path, anthropic_url: str) -> None:
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        results = list(pool.map(lambda ir: run_row(ir[1], tmp_path / f"row{ir[0]}", anthropic_url), enumerate(ROWS)))
    failures = [result for result in results if result]
    assert not failures, f"{len(failures)} of {len(ROWS)} rows failed:\n" + "\n".join(failures)
