"""OpenTelemetry (``s3memory._telemetry``): a span per call, named and attributed as the GenAI
memory conventions say, counting what the call cost; never a path, a name, a user id or
content; nothing at all without ``opentelemetry-api``. And the CloudWatch EMF example."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import subprocess
import sys
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, Literal

import pytest
from helpers import BUCKET, MASTER_KEY, REPO
from helpers.meter import Meter

from s3memory import EncryptedMemory, InMemoryStore, KeyCache, MemoryAdmin, Mount, S3MemoryError, open_memory
from s3memory._admin.manage import NotExists, Sha256

EXAMPLE = REPO / "examples" / "cloudwatch_emf.py"


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)


# -- without opentelemetry: nothing ------------------------------------------------------
@pytest.mark.slow  # a subprocess
def test_importing_s3memory_imports_no_opentelemetry() -> None:
    done = run_python(
        "import sys, s3memory, s3memory.stores, s3memory._admin.manage\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] == 'opentelemetry']\n"
        "assert not loaded, loaded\n"
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.slow  # a subprocess
def test_an_application_that_does_not_trace_pays_no_import() -> None:
    """opentelemetry-api comes with anthropic; until the application imports it (to set a
    provider) a command imports nothing of it (20 ms of a cold start) and makes no span."""
    code = (
        "import sys, os; from s3memory import InMemoryStore, open_memory; "
        "m = open_memory(user_id='u', store=InMemoryStore(), master_key=os.urandom(32)); "
        "m.create('/memories/a.md', 'x'); m.view('/memories/a.md'); "
        "print(sorted(n for n in sys.modules if n.startswith('opentelemetry')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.slow  # a subprocess
def test_without_opentelemetry_the_commands_are_not_wrapped() -> None:
    done = run_python(
        "import sys\n"
        "sys.modules['opentelemetry'] = None  # as if not installed\n"
        "from s3memory import EncryptedMemory, InMemoryStore, MemoryAdmin, open_memory, _telemetry\n"
        "assert not _telemetry.INSTALLED\n"
        "for method in (EncryptedMemory.view, EncryptedMemory.create, MemoryAdmin.write):\n"
        "    assert not hasattr(method, '__wrapped__'), method\n"
        "memory = open_memory(user_id='alice', store=InMemoryStore(), master_key=bytes(range(32)))\n"
        "memory.create('/memories/a.md', 'x')\n"
        "assert '1\\tx' in memory.view('/memories/a.md')\n"
    )
    assert done.returncode == 0, done.stderr


# -- with the SDK ------------------------------------------------------------------------
@pytest.fixture
def spans() -> Iterator[Any]:
    """The spans s3memory makes in this test (a provider of its own: the global one can be
    set once a process)."""
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from s3memory import _telemetry

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _telemetry.use_tracer_provider(provider)
    yield exporter
    _telemetry.use_tracer_provider(None)
    provider.shutdown()


def only(exporter: Any) -> Any:
    (span,) = exporter.get_finished_spans()
    exporter.clear()
    return span


def s3_memory(s3_client: Any, user_id: str = "alice", **options: Any) -> EncryptedMemory:
    options.setdefault("key_cache", KeyCache())
    memory: EncryptedMemory = open_memory(
        user_id=user_id, bucket=BUCKET, s3_client=s3_client, master_key=MASTER_KEY, **options
    )
    return memory


def test_a_command_is_one_client_span_named_by_its_operation(spans: Any, s3_client: Any) -> None:
    from opentelemetry.trace import SpanKind, StatusCode

    memory = s3_memory(s3_client)
    memory.create("/memories/warm.md", "x")
    spans.clear()
    meter = Meter(s3_client)
    memory.create("/memories/d/a.md", "hello\n")
    span = only(spans)
    assert span.name == "create_memory"  # the conventions: `{gen_ai.operation.name}`
    assert span.kind == SpanKind.CLIENT
    assert span.status.status_code == StatusCode.UNSET
    attributes = dict(span.attributes)
    assert attributes["gen_ai.operation.name"] == "create_memory"
    assert attributes["s3memory.command"] == "create"
    assert attributes["gen_ai.memory.record.count"] == 1
    assert attributes["gen_ai.memory.store.id"].startswith("ms_")
    # A directory check, a HEAD of the path and of the ancestor, on worker threads; then the
    # PUT: counted on the command's span however many threads made them.
    assert attributes["s3memory.request.count"] == meter.take_total() == 4
    assert attributes["s3memory.round_trip.count"] == 2
    assert attributes["s3memory.request.body.size"] >= len("hello\n")
    assert attributes["s3memory.response.body.size"] == 0
    assert attributes["s3memory.retry.count"] == 0

    memory.view("/memories/d/a.md")
    span = only(spans)
    assert (span.name, span.attributes["s3memory.command"]) == ("search_memory", "view")
    assert span.attributes["s3memory.request.count"] == meter.take_total() == 1
    assert span.attributes["s3memory.round_trip.count"] == 1
    assert span.attributes["s3memory.response.body.size"] > len("hello\n")  # sealed: tag and all


def test_each_call_maps_to_an_operation_of_the_conventions(spans: Any) -> None:
    memory = open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())
    admin = MemoryAdmin(memory)
    memory.create("/memories/a.md", "one\n")
    memory.str_replace("/memories/a.md", "one", "two")
    memory.insert("/memories/a.md", 0, "zero")
    memory.view("/memories")
    memory.rename("/memories/a.md", "/memories/b.md")
    memory.search("two")
    memory.delete("/memories/b.md")
    admin.write("/memories/c.md", "x", precondition=NotExists())
    admin.write("/memories/c.md", "y")
    _text, info = admin.read("/memories/c.md")
    admin.write("/memories/c.md", "z", precondition=Sha256(info.sha256))
    admin.list("/memories/")
    admin.delete("/memories/c.md")
    memory.clear_all()
    called = [(s.attributes["s3memory.command"], s.name) for s in spans.get_finished_spans()]
    assert called == [
        ("create", "create_memory"),
        ("str_replace", "update_memory"),
        ("insert", "update_memory"),
        ("view", "search_memory"),
        ("rename", "update_memory"),
        ("search", "search_memory"),
        ("delete", "delete_memory"),
        ("admin.write", "create_memory"),
        ("admin.write", "upsert_memory"),
        ("admin.read", "search_memory"),
        ("admin.write", "update_memory"),
        ("admin.list", "search_memory"),
        ("admin.delete", "delete_memory"),
        ("clear_all", "delete_memory"),
    ]
    from opentelemetry.trace import SpanKind

    assert {s.kind for s in spans.get_finished_spans()} == {SpanKind.INTERNAL}  # a store in this process
    # A local store makes no requests: no counts rather than zeros.
    assert not any("s3memory.request.count" in s.attributes for s in spans.get_finished_spans())


def test_a_failure_is_its_error_type_only(spans: Any) -> None:
    from opentelemetry.trace import StatusCode

    memory = open_memory(user_id="alice", store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())
    with pytest.raises(S3MemoryError):
        memory.view("/memories/missing.md")
    span = only(spans)
    assert span.attributes["error.type"] == "PathNotFoundError"
    assert span.status.status_code == StatusCode.ERROR
    assert span.status.description is None
    assert not span.events  # no exception event: its message names the path


def test_the_store_id_is_keyed_stable_and_per_tenant(monkeypatch: pytest.MonkeyPatch, spans: Any) -> None:
    from s3memory import _telemetry

    store = InMemoryStore()

    def store_id(user_id: str = "alice", master_key: bytes = MASTER_KEY, prefix: str = "") -> str:
        memory = open_memory(user_id=user_id, store=store, master_key=master_key, prefix=prefix, key_cache=KeyCache())
        found = _telemetry.store_id(memory.files)
        assert found is not None
        return found

    alice = store_id()
    assert alice == store_id()  # another process opens it alike: nothing random
    assert alice != store_id("bob")
    assert alice != store_id(prefix="other/")
    assert alice != store_id(master_key=bytes(reversed(MASTER_KEY)))  # keyed by the deployment's secret
    assert "alice" not in alice and len(alice) == 3 + 32
    monkeypatch.setenv(_telemetry.KEY_VARIABLE, "a deployment's own telemetry secret")
    keyed = store_id()
    assert keyed not in (alice, store_id("bob"))
    assert keyed == store_id(master_key=bytes(reversed(MASTER_KEY)))  # the setting, not the master key
    monkeypatch.setenv(_telemetry.KEY_VARIABLE, "too short")
    memory = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    assert _telemetry.store_id(memory.files) is None  # no weak id: none
    memory.view("/memories")
    assert "gen_ai.memory.store.id" not in only(spans).attributes


def test_a_kms_deployment_has_store_ids_too(s3_client: Any, kms_client: Any, kms_key_id: str) -> None:
    from s3memory import _telemetry

    def store_id(user_id: str, key_mode: Literal["tenant", "kms"]) -> str | None:
        memory = open_memory(
            user_id=user_id,
            bucket=BUCKET,
            s3_client=s3_client,
            kms_key_id=kms_key_id,
            kms_client=kms_client,
            key_mode=key_mode,
            key_cache=KeyCache(),
        )
        return _telemetry.store_id(memory.files)

    modes: tuple[Literal["tenant", "kms"], ...] = ("tenant", "kms")
    for mode in modes:
        assert store_id("alice", mode) == store_id("alice", mode) != store_id("bob", mode)


def test_a_mounted_store_is_named_by_its_own_id(spans: Any) -> None:
    from s3memory import _telemetry

    store = InMemoryStore()
    shared = open_memory(user_id="team", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    shared.create("/memories/guide.md", "x")
    tree = open_memory(
        user_id="alice",
        store=store,
        master_key=MASTER_KEY,
        key_cache=KeyCache(),
        mounts=[Mount(name="team", user_id="team")],
    )
    spans.clear()
    MemoryAdmin(tree).read("/memories/team/guide.md")
    span = only(spans)
    assert span.attributes["gen_ai.memory.store.id"] == _telemetry.store_id(shared.files)
    assert span.attributes["gen_ai.memory.store.id"] != _telemetry.store_id(tree.own.files)


def test_a_mounted_trees_reads_are_one_span_each(spans: Any, s3_client: Any) -> None:
    """Search and the root's view and listing over a mounted tree are one span each, as over
    one store (none before), counting every store's requests; a read inside a mount is that
    store's one span, never two."""
    from s3memory import _telemetry

    shared = s3_memory(s3_client, "team")
    shared.create("/memories/guide.md", "tabs\n")
    tree = open_memory(
        user_id="alice",
        bucket=BUCKET,
        s3_client=s3_client,
        master_key=MASTER_KEY,
        key_cache=KeyCache(),
        mounts=[Mount(name="team", user_id="team")],
    )
    tree.create("/memories/me.md", "tabs too\n")
    tree.search("warm")
    spans.clear()
    meter = Meter(s3_client)
    calls: list[tuple[Callable[[], object], str, str]] = [
        (lambda: tree.view("/memories"), "view", "own"),
        (lambda: tree.list_files(), "list_files", "own"),
        (lambda: tree.search("tabs"), "search", "own"),
        (lambda: tree.search_answer("tabs"), "search", "own"),
        (lambda: tree.search("tabs", path_prefix="/memories/team"), "search", "team"),
        (lambda: tree.view("/memories/team/guide.md"), "view", "team"),
    ]
    for call, command, where in calls:
        call()
        span = only(spans)
        assert (span.name, span.attributes["s3memory.command"]) == ("search_memory", command)
        owner = tree.own if where == "own" else shared
        assert span.attributes["gen_ai.memory.store.id"] == _telemetry.store_id(owner.files)
        assert span.attributes["s3memory.request.count"] == meter.take_total() > 0
    tree.view("/memories")
    assert only(spans).attributes["s3memory.round_trip.count"] == 1  # both stores listed at once


def test_a_sampled_out_call_counts_nothing(s3_client: Any) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    from s3memory import _telemetry

    _telemetry.use_tracer_provider(TracerProvider(sampler=ALWAYS_OFF))
    try:
        memory = s3_memory(s3_client)
        memory.create("/memories/a.md", "x")
        assert "1\tx" in memory.view("/memories/a.md")
    finally:
        _telemetry.use_tracer_provider(None)


def test_retries_are_botocores_retry_attempts(spans: Any, s3_client: Any) -> None:
    from botocore.awsrequest import AWSResponse

    memory = s3_memory(s3_client)
    memory.create("/memories/a.md", "x")
    spans.clear()
    failures = [1]

    class Raw:
        def stream(self, **_: Any) -> Iterator[bytes]:
            yield b"<Error><Code>InternalError</Code><Message>try again</Message></Error>"

    def fail_once(request: Any, **_: Any) -> AWSResponse | None:
        if failures and request.method == "GET":
            failures.pop()
            return AWSResponse(request.url, 500, {}, Raw())
        return None

    s3_client.meta.events.register_first("before-send.s3.GetObject", fail_once)
    memory.view("/memories/a.md")
    span = only(spans)
    assert span.attributes["s3memory.retry.count"] == 1
    assert span.attributes["s3memory.request.count"] == 1  # one call of the client, retried inside


# -- never a path, a name, a user id or content --------------------------------------------
USER = "Tenant-Zq7user"
API_KEY = "sk-ant-api03-" + base64.urlsafe_b64encode(hashlib.sha512(b"telemetry").digest()).decode().rstrip("=")
SECRET_WORDS = ("Qx9DirName", "Wv4FileName", "Jk2ContentWord", "Pm5OldWord", "Rt8NewWord", "Ln3Inserted")


def forbidden() -> list[str]:
    words = [USER, *SECRET_WORDS, "Hz6Missing", "Bq1Query", "Yw0Renamed", "Gf5Admin", API_KEY[14:40]]
    # as written, URL-encoded and in the other case: a key, a URL or a lowered message
    return [form for word in words for form in {word, word.lower(), urllib.parse.quote(f"/{word}/", safe="")}]


def everything_in(span: Any) -> str:
    """Every string a span exports, its resource aside (the process's, not s3memory's)."""
    parts = [span.name, repr(span.status.description), repr(dict(span.attributes or {}))]
    parts += [f"{e.name} {dict(e.attributes or {})}" for e in span.events]
    parts += [repr(dict(link.attributes or {})) for link in span.links]
    return "\n".join(parts)


def exercise(memory: EncryptedMemory) -> None:
    """Every command and management call, succeeding and failing, on telling names."""
    d, f = f"/memories/{SECRET_WORDS[0]}", f"/memories/{SECRET_WORDS[0]}/{SECRET_WORDS[1]}.md"
    admin = MemoryAdmin(memory)
    attempts: list[Callable[[], object]] = [
        lambda: memory.create(f, f"{SECRET_WORDS[2]} {SECRET_WORDS[3]}\n"),
        lambda: memory.create(f, "again"),  # PathExistsError
        lambda: memory.view(f),
        lambda: memory.view(d),
        lambda: memory.view("/memories/Hz6Missing.md"),  # PathNotFoundError
        lambda: memory.view("/memories/../Hz6Missing"),  # InvalidPathError
        lambda: memory.str_replace(f, SECRET_WORDS[3], SECRET_WORDS[4]),
        lambda: memory.str_replace(f, "Hz6Missing", "x"),  # EditError quoting old_str
        lambda: memory.insert(f, 1, SECRET_WORDS[5]),
        lambda: memory.insert(f, 99, SECRET_WORDS[5]),  # EditError
        lambda: memory.read_text(f),
        lambda: memory.list_files(d),
        lambda: memory.search("Bq1Query"),
        lambda: memory.search_answer(SECRET_WORDS[2]),
        lambda: memory.history(f),
        lambda: memory.changes(d),
        lambda: memory.rename(f, f"{d}/Yw0Renamed.md"),
        lambda: memory.rename("/memories/Hz6Missing", "/memories/Yw0Renamed"),  # PathNotFoundError
        lambda: admin.write("/memories/Gf5Admin.md", SECRET_WORDS[2], precondition=NotExists()),
        lambda: admin.write("/memories/Gf5Admin.md", SECRET_WORDS[2], precondition=NotExists()),  # precondition
        lambda: admin.write("/memories/Gf5Admin.md", "x", precondition=Sha256("0" * 64)),  # precondition
        lambda: admin.write("/memories/Gf5Admin.md", SECRET_WORDS[4]),
        lambda: admin.read("/memories/Gf5Admin.md"),
        lambda: admin.read("/memories/Hz6Missing.md"),
        lambda: admin.list(f"{d}/"),
        lambda: admin.delete("/memories/Gf5Admin.md", expected_sha256="0" * 64),  # precondition
        lambda: admin.delete("/memories/Gf5Admin.md"),
        lambda: admin.reindex(),
        lambda: memory.delete(d),
        lambda: memory.delete(d),  # PathNotFoundError
        lambda: memory.create(f, f"{SECRET_WORDS[2]} {API_KEY}"),  # a secret: refused, SensitiveDataError
        lambda: memory.clear_all(),
    ]
    for attempt in attempts:
        try:
            attempt()
        except (S3MemoryError, ValueError):
            pass


@pytest.mark.parametrize("where", ["inmemory", "s3"])
def test_no_span_holds_a_path_a_name_a_user_id_or_content(spans: Any, where: str, request: Any) -> None:
    if where == "s3":
        s3_client = request.getfixturevalue("s3_client")
        s3_client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        memory = s3_memory(s3_client, USER)
    else:
        memory = open_memory(user_id=USER, store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())
    exercise(memory)
    exported = spans.get_finished_spans()
    assert len(exported) == 32  # one span per call, none nested
    errors = Counter(s.attributes.get("error.type") for s in exported)
    assert errors["PathNotFoundError"] >= 3 and errors["PreconditionFailedError"] == 3
    assert errors["InvalidPathError"] == errors["SensitiveDataError"] == errors["PathExistsError"] == 1
    for span in exported:
        text = everything_in(span)
        leaked = [word for word in forbidden() if word in text]
        assert not leaked, (leaked, text)
        assert span.attributes["gen_ai.memory.store.id"].startswith("ms_")


# -- the CloudWatch EMF example ----------------------------------------------------------
@pytest.mark.slow  # a subprocess
def test_the_emf_example_prints_cloudwatch_metrics() -> None:
    pytest.importorskip("opentelemetry.sdk")
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=120, check=True, cwd=EXAMPLE.parent
    )
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["Operation"], r["Outcome"]) for r in records] == [
        ("create", "ok"),
        ("view", "ok"),
        ("view", "PathNotFoundError"),
    ]
    for record in records:
        check_emf(record, namespace="s3memory/example")


def check_emf(record: dict[str, Any], *, namespace: str) -> None:
    """The EMF specification's shape: the directive under ``_aws``, every dimension and
    metric it names a member of the root, and the dimensions only Operation and Outcome."""
    directive = record["_aws"]
    assert isinstance(directive["Timestamp"], int)
    (metrics,) = directive["CloudWatchMetrics"]
    assert metrics["Namespace"] == namespace
    assert metrics["Dimensions"] == [["Operation", "Outcome"]]
    assert all(isinstance(record[name], str) for name in ("Operation", "Outcome"))
    names = [m["Name"] for m in metrics["Metrics"]]
    assert "Latency" in names
    for metric in metrics["Metrics"]:
        assert metric["Unit"] in ("Milliseconds", "Count", "Bytes")
        assert isinstance(record[metric["Name"]], (int, float)) and record[metric["Name"]] >= 0
    assert set(record) == {"_aws", "Operation", "Outcome", *names}


def test_the_emf_processor_reports_the_requests_of_an_s3_command(s3_client: Any) -> None:
    pytest.importorskip("opentelemetry.sdk")
    import io

    from opentelemetry.sdk.trace import TracerProvider

    from s3memory import _telemetry

    spec = importlib.util.spec_from_file_location("cloudwatch_emf", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    out = io.StringIO()
    provider = TracerProvider()
    provider.add_span_processor(example.EmfSpanProcessor(namespace="Agent/Memory", stream=out))
    _telemetry.use_tracer_provider(provider)
    try:
        memory = s3_memory(s3_client)
        memory.create("/memories/a.md", "x")
        memory.view("/memories/a.md")
    finally:
        _telemetry.use_tracer_provider(None)
    create, view = (json.loads(line) for line in out.getvalue().splitlines())
    for record in (create, view):
        check_emf(record, namespace="Agent/Memory")
    assert (view["Operation"], view["Outcome"], view["Requests"], view["RoundTrips"]) == ("view", "ok", 1, 1)
    assert view["BytesReceived"] > 0 and view["Retries"] == 0
    assert create["Requests"] > view["Requests"]
