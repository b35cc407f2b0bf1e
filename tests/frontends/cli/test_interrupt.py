"""Ctrl-C during a bulk command stops it promptly, exit 130, and leaves nothing half-written.

The CLI runs in a real process and gets a real SIGINT once the first files have landed. Each
file's write is slowed a little (in that process only) so that the interrupt reliably comes
while most of the work is still queued: the point is what happens to the queue.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # subprocesses interrupted, timed by the wall clock

SLOW = """
import signal, sys, time
# As in an interactive shell: a background job (a CI runner's) inherits SIGINT ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
import s3memory._core.memory as m
for name in {names!r}:
    original = getattr(m.EncryptedMemory, name)
    def slow(self, *args, _original=original, **kwargs):
        time.sleep(0.05)
        return _original(self, *args, **kwargs)
    setattr(m.EncryptedMemory, name, slow)
from s3memory.cli import main
sys.exit(main(sys.argv[1:]))
"""

FILES = 400


def env(tmp_path: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path / "home"),
        "LANG": "C.UTF-8",
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},  # the s3memory under test
        "S3MEMORY_HOME": str(tmp_path / "s3home"),
    }


def cli(tmp_path: Path, *argv: str, slow: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", SLOW.format(names=list(slow)), *argv],
        env=env(tmp_path),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def stored_files(tmp_path: Path) -> int:
    store = tmp_path / "s3home" / "store"
    return sum(1 for p in store.rglob("*.md*") if p.is_file()) if store.exists() else 0


def interrupt_when(process: subprocess.Popen[bytes], ready: callable) -> tuple[int, float, str]:  # type: ignore[valid-type]
    deadline = time.monotonic() + 30
    while not ready():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the command never started its work"
        time.sleep(0.005)
    process.send_signal(signal.SIGINT)
    sent = time.monotonic()
    try:
        _, err = process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail("still running 10 s after Ctrl-C")
    return process.returncode, time.monotonic() - sent, err.decode()


@pytest.fixture
def source(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    for index in range(FILES):
        (folder / f"n{index:04}.md").write_text(f"note {index}\n" * (1 + index % 50))
    return folder


def test_ctrl_c_stops_an_import_promptly_and_leaves_only_whole_files(tmp_path: Path, source: Path) -> None:
    process = cli(tmp_path, "import", str(source), "--workers", "4", slow=("create",))
    status, waited, err = interrupt_when(process, lambda: stored_files(tmp_path) >= 8)
    assert status == 130, err
    assert waited < 2, f"took {waited:.1f} s to stop"
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith("Interrupted: imported ") and f"of {FILES} file(s); the others were not started" in err
    imported = int(err.split()[2])
    # What is stored is exactly what the message says, and each file is whole and equals its source.
    out = tmp_path / "out"
    exported = subprocess.run(
        [sys.executable, "-m", "s3memory", "export", str(out)], env=env(tmp_path), capture_output=True, text=True
    )
    assert exported.returncode == 0, exported.stderr
    files = sorted(out.iterdir())
    assert 8 <= len(files) == imported < FILES  # the queue was dropped, not drained
    for file in files:
        assert file.read_bytes() == (source / file.name).read_bytes()


def test_ctrl_c_stops_an_export_promptly_and_leaves_only_whole_files(tmp_path: Path, source: Path) -> None:
    imported = subprocess.run(
        [sys.executable, "-m", "s3memory", "import", str(source)], env=env(tmp_path), capture_output=True
    )
    assert imported.returncode == 0, imported.stderr
    out = tmp_path / "out"
    process = cli(tmp_path, "export", str(out), "--workers", "4", slow=("read_text",))
    status, waited, err = interrupt_when(process, lambda: out.exists() and len(os.listdir(out)) >= 8)
    assert status == 130, err
    assert waited < 2, f"took {waited:.1f} s to stop"
    assert err.startswith("Interrupted: exported ") and err.count("\n") == 1, err
    files = sorted(out.iterdir())
    assert 8 <= len(files) == int(err.split()[2]) < FILES
    for file in files:  # no temporary file, no partial file
        assert file.read_bytes() == (source / file.name).read_bytes()


SLOW_TOOL = """
import sys, time
import s3memory.integrations.anthropic as t
original = t.S3MemoryTool.call
def slow(self, input, _original=original):
    time.sleep(0.3)  # the reader goes away while the tool runner is inside this call
    return _original(self, input)
t.S3MemoryTool.call = slow
from s3memory.cli import main
sys.exit(main(["demo", "--scripted"]))
"""


@pytest.mark.parametrize("lines", [2, 6])
def test_demo_piped_into_head_stops_quietly(tmp_path: Path, lines: int) -> None:
    """`s3memory demo | head -N`: the pipe closes while the SDK's tool runner is calling the
    memory tool, which turns any Exception into a tool error and logs its traceback; the demo
    must stop with 141 and nothing on stderr instead."""
    unbuffered = {**env(tmp_path), "PYTHONUNBUFFERED": "1"}  # each line reaches the pipe when printed
    process = subprocess.Popen(
        [sys.executable, "-c", SLOW_TOOL], env=unbuffered, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None and process.stderr is not None
    for _ in range(lines):
        assert process.stdout.readline()
    process.stdout.close()  # what `head` does once it has its lines
    status = process.wait(timeout=30)
    with process.stderr:
        assert (status, process.stderr.read()) == (141, b"")
