"""Issue 29's targets, row by row: what one run of ``run.py`` measured against each.

Each row is met, not met, or not measured (with the flag that measures it). Nothing here
measures; ``run.py`` gathers the figures into its ``Results`` and renders these rows under
the tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Target:
    what: str
    measured: str
    target: str
    met: bool | None  # None: not measured in this run


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms" if seconds >= 0.0995 else f"{seconds * 1000:.1f} ms"


def targets(results: Any, tenant: str, embedded: str, sdk: str) -> list[Target]:
    """The rows of issue 29 from ``results`` (``run.Results``); ``tenant``, ``embedded`` and
    ``sdk`` name the backends' rows."""
    out: list[Target] = []
    n, http = results.files, results.http
    rename = results.row(tenant, f"rename dir ({n} files)")
    what = f"rename of a 1,000-file directory, real HTTP, {results.client}"
    if rename is not None and http and n == 1000:
        per_request = rename.cpu / max(rename.requests, 1)
        server = results.server_cpu.get(f"rename dir ({n} files)")
        beside = f"; the fake server's own CPU {ms(server)}" if server is not None else ""
        out.append(
            Target(what + ": wall", f"{ms(rename.seconds)} ({rename.round_trips} RT)", "≤ 1.2 s", rename.seconds <= 1.2)
        )
        out.append(
            Target(
                what + ": client CPU per request",
                f"{per_request * 1000:.2f} ms ({ms(rename.cpu)} / {rename.requests} requests{beside})",
                "≤ 0.4 ms",
                per_request <= 0.0004,
            )
        )
    else:
        out.append(Target(what, "not measured (needs --http --files 1000)", "≤ 1.2 s, ≤ 0.4 ms CPU/request", None))
    view = results.row(tenant, "view root")
    what = f"view /memories with 1,000 files, real HTTP, {results.client}"
    if view is not None and http and n == 1000:
        text = f"{ms(view.seconds)} ({view.round_trips} RT, CPU {ms(view.cpu)})"
        out.append(Target(what, text, "≤ 40 ms", view.seconds <= 0.040))
    else:
        out.append(Target(what, "not measured (needs --http --files 1000)", "≤ 40 ms", None))
    cli = results.cli_rename
    what = "`s3memory rename` of a 1,000-file directory in a new process, real HTTP"
    if cli and cli["files"] == 1000:
        text = f"{cli['seconds']:.2f} s (the process's CPU {cli['cpu']:.2f} s)"
        out.append(Target(what, text, "≤ 1.8 s", cli["seconds"] <= 1.8))
    else:
        out.append(Target(what, "not measured (needs --http, without --no-extras)", "≤ 1.8 s", None))
    out += _lambda_rows(results.lambda_start)
    out += _hung_rows(results.hung)
    ours, theirs = results.agent.get(embedded), results.agent.get(sdk)
    what = f"embedded default, {4 * results.agent_files}-command agent workload ÷ SDK local"
    if ours is not None and theirs is not None:
        ratio = ours.seconds / max(theirs.seconds, 1e-9)
        text = f"{ratio:.2f}x ({ms(ours.seconds)} against {ms(theirs.seconds)}"
        text += f"; syncs {ours.fsyncs} against {theirs.fsyncs})"
        out.append(Target(what, text, "≤ 2x", ratio <= 2.0))
    else:
        out.append(Target(what, "not measured (without --no-table)", "≤ 2x", None))
    first = results.scaled("embedded default", 5000, "view /memories (")
    local = results.scaled("embedded default", 5000, "view /memories again")
    theirs_view = results.scaled("SDK local", 5000, "view /memories again")
    what = "embedded default, view /memories with 5,000 files (again; the first after a change)"
    if local is not None:
        text = ms(local.seconds) + (f" (the first {ms(first.seconds)})" if first is not None else "")
        text += f"; SDK local {ms(theirs_view.seconds)}" if theirs_view is not None else ""
        out.append(Target(what, text, "≤ 20 ms", local.seconds <= 0.020))
    else:
        out.append(Target(what, "not measured (needs --scale 5000)", "≤ 20 ms", None))
    return out


def _lambda_rows(measured: dict[str, Any] | None) -> list[Target]:
    what = "Lambda example"
    if not measured:
        return [Target(what, "not measured (without --no-extras; builds the package)", "-", None)]
    out = []
    for key, label in (
        ("cold_import", "cold `import handler`"),
        ("cold_refusal", "cold 401 (no token)"),
        ("cold_answer", "cold first answer"),
        ("warm_answer", "warm answer"),
    ):
        if key in measured:
            out.append(Target(f"{what}: {label}", ms(measured[key]["min"]), "reported", None))
    share = measured.get("sdk_import_share_at_import")
    if share is not None:
        out.append(
            Target(
                f"{what}: the Anthropic SDK's share of `import handler`",
                f"{share * 100:.0f}%",
                "0% (imported on the first model call)",
                share == 0,
            )
        )
    first = measured.get("sdk_import_in_first_answer")
    if first is not None:
        out.append(Target(f"{what}: the SDK's import within the cold first answer", ms(first), "reported", None))
    cli = measured.get("cli_packages")
    if cli is not None:
        text = ", ".join(cli) or "none"
        out.append(Target(f"{what}: the CLI's packages in the function", text, "none", not cli))
    return out


def _hung_rows(measured: dict[str, Any] | None) -> list[Target]:
    what = "an endpoint that never answers"
    if not measured:
        return [Target(what, "not measured (without --no-extras)", "the same bound with either client", None)]
    botocore, crt = measured.get("botocore"), measured.get("awscrt")
    if not botocore or not crt:
        return [Target(what, f"not measured ({measured.get('skipped', 'awscrt is not installed')})", "-", None)]
    text = (
        f"botocore {botocore['seconds']:.1f} s, awscrt {crt['seconds']:.1f} s "
        f"({measured['timeout']:g} s timeouts, bound {measured.get('bound', '?')})"
    )
    slack = 1.0 + measured["timeout"]  # one attempt's timeout, and the jitter of the back-off
    return [Target(what, text, "the same bound with either client", crt["seconds"] <= botocore["seconds"] + slack)]
