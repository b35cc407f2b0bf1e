"""The Lambda example's cold start: ``import handler``, a first answer and a warm one, from
the package its Makefile builds.

    python bench/lambda_start.py               # builds the package (about a minute), then measures
    python bench/lambda_start.py --build DIR   # measures a package built already (an ARTIFACTS_DIR)

The package is built by ``examples/lambda/Makefile`` as ``sam build`` runs it, but for this
machine (LAMBDA_PYTHON: the running Python, LAMBDA_PLATFORM: manylinux2014_<machine>,
LAMBDA_COMPILER: this interpreter), so that this interpreter can import it; Lambda's is
CPython 3.12 on arm64. Each run is a fresh ``python -I -S -B`` that sees only the package:
``-B`` writes no bytecode beside it, as on Lambda's read-only /var/task, so a package without
its own bytecode compiles what it imports on every run, as it would on every cold start.

A turn: the function's own credentials (no MEMORY_ROLE_ARN, so no STS), S3 and KMS on
``httpfake.py`` (real HTTP, no added round trip) and a fake Messages API in this process,
which asks for a memory ``create`` and then answers text: two Messages requests, the tenant
key's GET and KMS Decrypt, the file's write. One unmeasured run first makes the tenant key
(and fills the OS's file cache); then each of ``runs`` processes imports the handler,
answers once (cold) and again (warm); a refusal (401, no token) runs in processes of its
own. One more run of each under ``-X importtime`` gives the Anthropic SDK's share, its
import's time (inflated by importtime as the rest is) over the run's.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MAKEFILE = HERE.parent / "examples" / "lambda" / "Makefile"
BUCKET = "bench-bucket"
KMS_KEY = "arn:aws:kms:us-east-1:111122223333:key/bench"
CLI_ONLY = ("click", "rich", "pygments", "markdown_it", "mdurl")  # the command line's (and rich's)

_PRELUDE = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
class Context:
    function_name, memory_limit_in_mb, aws_request_id = "bench", 1024, "r"
    invoked_function_arn = "arn:aws:lambda:us-east-1:111122223333:function:bench"
    def get_remaining_time_in_millis(self):
        return 30000
def event(claims):
    context = {"requestId": "r", "http": {"method": "POST", "path": "/chat"}}
    if claims:
        context["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
    body = json.dumps({"prompt": "I prefer green tea, remember it"})
    return {"version": "2.0", "rawPath": "/chat", "requestContext": context, "body": body, "isBase64Encoded": False}
def mark(name):  # splits -X importtime's lines (stderr) by phase
    print("MARK " + name, file=sys.stderr, flush=True)
def loaded():
    return sorted({"anthropic", "boto3", "botocore", "awscrt"} & {name.split(".")[0] for name in sys.modules})
"""

_TURN = (
    _PRELUDE
    + """
started = time.perf_counter()
import handler
imported = time.perf_counter()
after_import = loaded()
mark("first")
first = handler.handler(event({"sub": "bench-user", "iss": "https://issuer.example/"}), Context())
answered = time.perf_counter()
mark("warm")
warm = handler.handler(event({"sub": "bench-user", "iss": "https://issuer.example/"}), Context())
done = time.perf_counter()
import s3memory
kind, why = s3memory.describe_s3_client(handler.own_clients()[0])
print("RESULT " + json.dumps({
    "import": imported - started, "first": answered - imported, "warm": done - answered,
    "statuses": [first["statusCode"], warm["statusCode"]], "client": [kind, why], "after_import": after_import,
}))
"""
)

_REFUSAL = (
    _PRELUDE
    + """
started = time.perf_counter()
import handler
imported = time.perf_counter()
mark("refusal")
refused = handler.handler(event(None), Context())
done = time.perf_counter()
print("RESULT " + json.dumps({
    "import": imported - started, "refusal": done - imported, "total": done - started,
    "statuses": [refused["statusCode"]], "loaded": loaded(),
}))
"""
)


def build_package(dest: Path) -> None:
    """``make build-AgentFunction`` for this interpreter and machine, into ``dest``."""
    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "LAMBDA_PYTHON": f"{sys.version_info.major}.{sys.version_info.minor}",
        "LAMBDA_PLATFORM": f"manylinux2014_{platform.machine()}",
        "LAMBDA_COMPILER": sys.executable,
    }
    command = ["make", "--silent", "--makefile", str(MAKEFILE), "build-AgentFunction", f"ARTIFACTS_DIR={dest}"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:  # pip's warnings are shown only then
        raise RuntimeError(f"the build failed ({done.returncode}): {done.stderr[-3000:]}")


def package_facts(build: Path) -> dict[str, Any]:
    files = [path for path in build.rglob("*") if path.is_file()]
    sources = [path for path in files if path.suffix == ".py"]
    compiled = [path for path in files if path.suffix == ".pyc"]
    return {
        "megabytes": sum(path.stat().st_size for path in files) / 2**20,
        "modules": len(sources),
        "bytecode": len(compiled),
        "bytecode_tags": sorted({path.name.split(".")[-2] for path in compiled}),
        "cli_packages": [name for name in CLI_ONLY if (build / name).exists()],
        "s3memory_cli": (build / "s3memory" / "cli").exists(),
        "awscrt": (build / "awscrt").exists(),
    }


class _Messages(BaseHTTPRequestHandler):
    """The Messages API: a memory ``create`` for a new conversation, text once the tool answered."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else each answer waits for the client's delayed ACK (about 40 ms)
    counter = itertools.count()

    def log_message(self, *_: Any) -> None:
        pass

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        last = request["messages"][-1]["content"]
        if isinstance(last, list) and any(block.get("type") == "tool_result" for block in last):
            content: list[dict[str, Any]] = [{"type": "text", "text": "Saved."}]
            stop = "end_turn"
        else:
            path = f"/memories/bench-{next(self.counter)}.md"
            command = {"command": "create", "path": path, "file_text": "green tea\n"}
            content, stop = [{"type": "tool_use", "id": "t1", "name": "memory", "input": command}], "tool_use"
        body = json.dumps(
            {
                "id": "msg",
                "type": "message",
                "role": "assistant",
                "model": "bench",
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def _fakes() -> Iterator[dict[str, str]]:
    """The fake S3 and KMS (another process) and Messages API (a thread): the environment
    that points a handler at them, with credentials that reach nothing else."""
    import http.client

    sys.path.insert(0, str(HERE))
    from httpfake import serve

    messages = ThreadingHTTPServer(("127.0.0.1", 0), _Messages)
    messages.daemon_threads = True
    threading.Thread(target=messages.serve_forever, daemon=True).start()
    try:
        with serve(0.0) as aws:
            connection = http.client.HTTPConnection("127.0.0.1", aws.port, timeout=10)
            connection.request("PUT", f"/{BUCKET}")  # CreateBucket
            connection.getresponse().read()
            connection.close()
            yield {
                "PATH": os.environ.get("PATH", ""),
                "AWS_ACCESS_KEY_ID": "bench",
                "AWS_SECRET_ACCESS_KEY": "bench",
                "AWS_REGION": "us-east-1",
                "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_ENDPOINT_URL": aws.endpoint,
                "AWS_CONFIG_FILE": os.devnull,
                "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                "AWS_EC2_METADATA_DISABLED": "true",
                "MEMORY_BUCKET": BUCKET,
                "MEMORY_KMS_KEY_ID": KMS_KEY,
                "ANTHROPIC_API_KEY": "bench",
                "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{messages.server_address[1]}",
                "POWERTOOLS_METRICS_NAMESPACE": "bench",
            }
    finally:
        messages.shutdown()
        messages.server_close()


def _run(script: str, build: Path, env: dict[str, str], importtime: bool = False) -> tuple[dict[str, Any], str]:
    """One fresh interpreter: its RESULT line, and its stderr."""
    flags = ["-X", "importtime"] if importtime else []
    command = [sys.executable, "-I", "-S", "-B", *flags, "-c", script, str(build)]
    done = subprocess.run(command, env=env, cwd=build, capture_output=True, text=True, timeout=120)
    results = [line[len("RESULT ") :] for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not results:
        raise RuntimeError(f"the handler's process failed ({done.returncode}): {done.stderr[-3000:]}")
    return json.loads(results[-1]), done.stderr


def sdk_import_seconds(stderr: str) -> dict[str, float]:
    """Per phase (``import``, then each ``MARK`` name), the seconds ``-X importtime`` gives
    the Anthropic SDK's imports: each ``anthropic`` or ``anthropic.*`` import not inside
    another one (its cumulative time holds what it imported: pydantic, httpx2, ...)."""
    phases: dict[str, list[tuple[int, str, int]]] = {"import": []}
    phase = "import"
    for line in stderr.splitlines():
        if line.startswith("MARK "):
            phase = line.split()[1]
            phases[phase] = []
        elif line.startswith("import time:") and "|" in line and "[us]" not in line:
            _, cumulative, name = line.split("|", 2)
            depth = (len(name) - len(name.lstrip()) - 1) // 2
            phases[phase].append((depth, name.strip(), int(cumulative)))
    totals = {}
    for phase, lines in phases.items():
        microseconds, ancestors = 0, []  # importtime prints a module after those it imported
        for depth, name, cumulative in reversed(lines):
            del ancestors[depth:]
            is_sdk = name == "anthropic" or name.startswith("anthropic.")
            if is_sdk and not any(a == "anthropic" or a.startswith("anthropic.") for a in ancestors):
                microseconds += cumulative
            ancestors.append(name)
        totals[phase] = microseconds / 1e6
    return totals


def _spread(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values)}


def measure(build: Path | None = None, runs: int = 3) -> dict[str, Any]:
    """Build the package (unless ``build`` is one), then time it. Durations are seconds as
    ``{"min", "median"}`` over ``runs`` processes: ``cold_import`` (``import handler``),
    ``cold_answer`` (the first invocation, after the import), ``cold_import_and_answer``,
    ``warm_answer`` (the second invocation) and ``cold_refusal`` (import and a 401). The
    SDK's import, in seconds and as a share, from one importtime run: ``sdk_import_*``.
    ``cli_packages``: the command line's packages found in the function's package."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    with tempfile.TemporaryDirectory() as scratch:
        if build is None:
            build = Path(scratch) / "package"
            build_package(build)
        facts = package_facts(build)
        with _fakes() as env:
            warmup, _ = _run(_TURN, build, env)
            turns = [_run(_TURN, build, env)[0] for _ in range(runs)]
            refusals = [_run(_REFUSAL, build, env)[0] for _ in range(runs)]
            traced_turn, turn_stderr = _run(_TURN, build, env, importtime=True)
            traced_refusal, refusal_stderr = _run(_REFUSAL, build, env, importtime=True)
    for result in [warmup, *turns, traced_turn]:
        if result["statuses"] != [200, 200]:
            raise RuntimeError(f"a turn did not answer 200 twice: {result['statuses']}")
    for result in [*refusals, traced_refusal]:
        if result["statuses"] != [401]:
            raise RuntimeError(f"a request without identity was not refused: {result['statuses']}")
    sdk_turn, sdk_refusal = sdk_import_seconds(turn_stderr), sdk_import_seconds(refusal_stderr)
    sdk_in_refusal = sdk_refusal["import"] + sdk_refusal["refusal"]
    return {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": f"{platform.system()} {platform.machine()}",
            "date": datetime.date.today().isoformat(),
            "load": load,
        },
        "runs": runs,
        "package": facts,
        "cli_packages": facts["cli_packages"],
        "client": turns[0]["client"],
        "loaded_after_import": turns[0]["after_import"],
        "loaded_after_refusal": refusals[0]["loaded"],
        "cold_import": _spread([t["import"] for t in turns]),
        "cold_answer": _spread([t["first"] for t in turns]),
        "cold_import_and_answer": _spread([t["import"] + t["first"] for t in turns]),
        "warm_answer": _spread([t["warm"] for t in turns]),
        "cold_refusal": _spread([r["total"] for r in refusals]),
        "sdk_import_at_import": sdk_turn["import"],
        "sdk_import_share_at_import": sdk_turn["import"] / traced_turn["import"],
        "sdk_import_in_first_answer": sdk_turn["first"],
        "sdk_import_share_of_first_answer": sdk_turn["first"] / traced_turn["first"],
        "sdk_import_in_refusal": sdk_in_refusal,
        "sdk_import_share_of_refusal": sdk_in_refusal / traced_refusal["total"],
        "traced": {"import": traced_turn["import"], "answer": traced_turn["first"], "refusal": traced_refusal["total"]},
    }


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms"


ROWS = {
    "cold_import": "cold `import handler`",
    "cold_answer": "cold first answer (the first invocation)",
    "cold_import_and_answer": "cold `import handler` and first answer",
    "warm_answer": "warm answer (a second invocation)",
    "cold_refusal": "cold refusal (`import handler` and a 401)",
}


def render(results: dict[str, Any]) -> str:
    machine, package = results["machine"], results["package"]
    compiled = ", ".join(package["bytecode_tags"]) or "no bytecode"
    lines = [
        f"Lambda cold start (examples/lambda), {machine['date']} on {machine['cpus']} CPUs ({machine['platform']}), "
        f"Python {machine['python']}, load average {machine['load']:.1f} at the start",
        f"package: {package['megabytes']:.0f} MB unzipped, {package['modules']:,} modules, "
        f"{package['bytecode']:,} compiled ({compiled}); s3memory/cli: {'yes' if package['s3memory_cli'] else 'no'}; "
        f"awscrt: {'yes' if package['awscrt'] else 'no'}",
        f"the command line's packages ({', '.join(CLI_ONLY)}) in it: {', '.join(results['cli_packages']) or 'none'}",
        f"S3 client: {results['client'][0]} ({results['client'][1]})",
        "loaded of anthropic, boto3, botocore, awscrt: "
        f"by import handler {', '.join(results['loaded_after_import']) or 'none'}; "
        f"by a refusal {', '.join(results['loaded_after_refusal']) or 'none'}",
        "",
        f"| fresh interpreter, {results['runs']} runs | min | median |",
        "| --- | ---: | ---: |",
    ]
    for key, label in ROWS.items():
        lines.append(f"| {label} | {_ms(results[key]['min'])} | {_ms(results[key]['median'])} |")
    traced = results["traced"]
    lines += [
        "",
        "The Anthropic SDK's import (one -X importtime run):",
        f"- in `import handler`: {_ms(results['sdk_import_at_import'])} of {_ms(traced['import'])} "
        f"({results['sdk_import_share_at_import']:.0%})",
        f"- in the first answer: {_ms(results['sdk_import_in_first_answer'])} of {_ms(traced['answer'])} "
        f"({results['sdk_import_share_of_first_answer']:.0%})",
        f"- in a cold refusal: {_ms(results['sdk_import_in_refusal'])} of {_ms(traced['refusal'])} "
        f"({results['sdk_import_share_of_refusal']:.0%})",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=Path, help="a package built already (skips the build)")
    parser.add_argument("--runs", type=int, default=3, help="processes per measurement (default 3)")
    args = parser.parse_args(argv)
    if args.build is None and shutil.which("make") is None:
        parser.error("the build runs make: install make, or pass --build")
    print(render(measure(args.build.resolve() if args.build else None, args.runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
