"""OpenTelemetry spans for the memory commands and the management calls, if installed.

With ``opentelemetry-api`` importable, each of the six commands (and ``search``,
``read_text``, ``list_files``, ``clear_all``, history, and :class:`~s3memory.MemoryAdmin`'s
calls) is one span, named and attributed as the GenAI memory conventions say
(``gen_ai.memory.client``, open-telemetry/semantic-conventions-genai,
``model/gen-ai/spans.yaml`` and ``registry.yaml``): the span's name is its
``gen_ai.operation.name``; its kind ``CLIENT`` (``INTERNAL`` over a local store, which runs
in this process); ``gen_ai.memory.store.id`` names the tenant's store; ``error.type`` the
exception's class. Beside them, under ``s3memory.``: which call it was, and what it cost
(S3 requests, round trips, body bytes, retries the client made).

Over a ``MountedMemory`` too, one span a call, never two: a call routed into one store is
that store's span (its store id, a mount's own); ``search`` and ``view`` and ``list_files``
of ``/memories``, which read every store at once, are one span of the tree's, named by the
user's own store and counting every store's requests (the stores' calls bound to it by
:func:`fork`, one round trip), or by the mount's store when ``path_prefix`` is inside one.

Operations: ``create`` and ``MemoryAdmin.write(precondition=NotExists())`` are
``create_memory``; ``str_replace``, ``insert``, ``rename`` (the conventions have no move),
``restore``, ``redact`` and ``write(precondition=Sha256(...))`` are ``update_memory``; a
``write`` without a precondition, which creates or replaces, ``upsert_memory``; ``delete``,
``clear_all`` and ``MemoryAdmin.delete`` ``delete_memory``; every read (``view``, ``search``,
``read_text``, ``list_files``, ``history``, ``read_version``, ``changes``, ``MemoryAdmin.read``
and ``list``) ``search_memory``, the conventions having no get; ``MemoryAdmin.reindex``
``s3memory.reindex`` (none of theirs fits). ``s3memory.command`` tells the calls apart.

Never a path, a file name, a user id or content: no ``gen_ai.memory.record.id`` (a path),
no ``gen_ai.memory.query.text`` or ``gen_ai.memory.records`` (content), no exception message
or event (messages name paths), no ``server.address`` (the bucket). The store id is an
HMAC of the deployment's prefix and the tenant, under a key the user id does not give
(:func:`store_id`).

Without the package, the decorator returns the method itself: no cost at all. With it but
not imported by the application, nothing is imported and no span made. With it and no SDK
configured, a span is a non-recording one and nothing is counted.

Counting: a command's requests run on its thread and on a round trip's worker threads, to
which a context variable does not pass by itself; :func:`fork` binds each call of a round trip
to a lane of the command's count in a copy of the context (which carries the current span
too, so an instrumented botocore's spans nest under the command's). ``S3Store`` counts its
requests: KMS calls are not counted, nor retries of awscrt (the ``fast`` extra), unseen.
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import hmac
import importlib.util
import logging
import os
import sys
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")

log = logging.getLogger("s3memory")


def _installed() -> bool:
    # find_spec of a top-level name reads the path only: importing s3memory never imports
    # opentelemetry, so a Lambda without it pays nothing at a cold start.
    try:
        return importlib.util.find_spec("opentelemetry") is not None
    except (ImportError, ValueError):
        return False


INSTALLED = _installed()
#: True once a recording span has started: until then the store hooks return at once.
ACTIVE = False

# The GenAI memory conventions' names (see the module docstring).
OPERATION = "gen_ai.operation.name"
STORE_ID = "gen_ai.memory.store.id"
RECORD_COUNT = "gen_ai.memory.record.count"
ERROR_TYPE = "error.type"
# s3memory's own, namespaced as the conventions ask of names they do not define.
COMMAND = "s3memory.command"
REQUESTS = "s3memory.request.count"
ROUND_TRIPS = "s3memory.round_trip.count"
RETRIES = "s3memory.retry.count"
BYTES_SENT = "s3memory.request.body.size"
BYTES_RECEIVED = "s3memory.response.body.size"

# The conventions' operations (which call is which: the module docstring).
SEARCH = "search_memory"  # also a read: the conventions have no get
CREATE = "create_memory"  # the caller asks for a new record: fails if one is there
UPDATE = "update_memory"  # a known existing record changes (a rename too: it has no move)
UPSERT = "upsert_memory"  # creates or updates, the caller not choosing which
DELETE = "delete_memory"

#: A per-deployment secret for store ids (at least 16 characters); see :func:`store_id`.
KEY_VARIABLE = "S3MEMORY_TELEMETRY_KEY"
_MIN_KEY_CHARS = 16
_KEY_CONTEXT = b"s3memory telemetry store-id key v1"
_ID_CONTEXT = b"s3memory store id v1\x00"


# -- counting --------------------------------------------------------------------------
class _Usage:
    """What one command cost, added to from several threads."""

    __slots__ = ("_lock", "received", "requests", "retries", "sent")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests = self.retries = self.sent = self.received = 0

    def add(self, requests: int, retries: int, sent: int, received: int) -> None:
        with self._lock:
            self.requests += requests
            self.retries += retries
            self.sent += sent
            self.received += received


class _Lane:
    """One chain of requests made one after another; ``depth`` is how many round trips long
    it is. Only its own thread touches ``depth``."""

    __slots__ = ("depth", "span", "usage")

    def __init__(self, usage: _Usage, span: Any = None) -> None:
        self.usage = usage
        self.depth = 0
        self.span = span


_LANE: contextvars.ContextVar[_Lane | None] = contextvars.ContextVar("s3memory_telemetry_lane", default=None)


def count_request(operation: str, body: object, response: Mapping[str, Any] | None) -> None:
    """One S3 request of the current command (a hook of ``S3Store``): its retries
    (``ResponseMetadata.RetryAttempts``, counted by the awscrt client too), the object
    bytes it sent (a PUT's body) and received (a GET's)."""
    lane = _LANE.get()
    if lane is None:
        return
    lane.depth += 1
    retries = received = 0
    if response:
        metadata = response.get("ResponseMetadata") or {}
        retries = int(metadata.get("RetryAttempts") or 0)
        if operation == "get_object":
            received = int(response.get("ContentLength") or 0)
    sent = len(body) if isinstance(body, (bytes, bytearray, memoryview)) else 0
    lane.usage.add(1, retries, sent, received)


class Fork:
    """Calls sent together: each runs on a lane of its own; :meth:`join` adds the longest
    lane to the caller's, so a round trip counts as one however many requests it holds."""

    def __init__(self, lane: _Lane) -> None:
        self._lane = lane
        self._lanes: list[_Lane] = []

    def bind(self, call: Callable[[], T]) -> Callable[[], T]:
        lane = _Lane(self._lane.usage)
        self._lanes.append(lane)
        # A copy per call: one context cannot be entered by two threads at once.
        return functools.partial(contextvars.copy_context().run, _run_on, lane, call)

    def join(self) -> None:
        self._lane.depth += max((lane.depth for lane in self._lanes), default=0)


def _run_on(lane: _Lane, call: Callable[[], T]) -> T:
    _LANE.set(lane)
    return call()


def fork() -> Fork | None:
    """A :class:`Fork` of the current command's lane, or None when nothing is counted."""
    if not ACTIVE:
        return None
    lane = _LANE.get()
    return None if lane is None else Fork(lane)


# -- the store id ----------------------------------------------------------------------
_STORE_IDS: weakref.WeakKeyDictionary[Any, str | None] = weakref.WeakKeyDictionary()
_STORE_IDS_LOCK = threading.Lock()


def _id_key(keyring: Any, store: Any) -> bytes | None:
    """The HMAC key of store ids: see :func:`store_id`. None: no id (a bad setting)."""
    secret = os.environ.get(KEY_VARIABLE)
    if secret is not None:
        if len(secret) < _MIN_KEY_CHARS:
            log.warning("%s is shorter than %d characters: spans carry no store id", KEY_VARIABLE, _MIN_KEY_CHARS)
            return None
        return hmac.new(secret.encode("utf-8"), _KEY_CONTEXT, hashlib.sha256).digest()
    # LocalMasterKey keeps its bytes private; a one-way derivation of them is what makes the
    # id unguessable without a setting, and this module imports no other (no cycle).
    master = getattr(keyring, "master", None)
    raw = getattr(master, "_key", None)
    if isinstance(raw, bytes) and len(raw) >= _MIN_KEY_CHARS:
        return hmac.new(raw, _KEY_CONTEXT, hashlib.sha256).digest()
    # KMS: no secret is held here. The key ARN and the store still make the id this
    # deployment's own; set S3MEMORY_TELEMETRY_KEY so that knowing them does not let a
    # guessed user id be checked.
    identity = getattr(master, "fingerprint", None) or getattr(keyring, "key_id", None) or ""
    where = getattr(store, "identity", "")
    return hashlib.sha256(_KEY_CONTEXT + b"\x00" + f"{identity}\x00{where}".encode()).digest()


def store_id(files: Any) -> str | None:
    """``gen_ai.memory.store.id`` of a tenant's store: ``ms_`` and 32 hex digits of
    HMAC-SHA256 over the deployment's key prefix and the tenant, keyed by (first found)
    ``S3MEMORY_TELEMETRY_KEY``, a derivation of the local master key, or (KMS, no local
    secret) a hash of the KMS key's ARN and the store. Stable across processes while that
    key is; the same tenant in two deployments has two ids; never the user id."""
    try:
        return _STORE_IDS[files]
    except KeyError:
        pass
    except TypeError:  # not weakly referable: computed every time
        return _store_id_of(files)
    found = _store_id_of(files)
    with _STORE_IDS_LOCK:
        _STORE_IDS[files] = found
    return found


def _store_id_of(files: Any) -> str | None:
    layout = getattr(files, "layout", None)
    if layout is None:
        return None
    key = _id_key(getattr(files, "keyring", None), getattr(files, "store", None))
    if key is None:
        return None
    prefix, tenant = layout.prefix.encode("utf-8"), layout.tenant.encode("utf-8")
    message = _ID_CONTEXT + len(prefix).to_bytes(4, "big") + prefix + tenant
    return "ms_" + hmac.new(key, message, hashlib.sha256).hexdigest()[:32]


def _files_of(owner: object) -> Any:
    """The tenant files a traced object works on: an ``EncryptedMemory``'s, or the (own)
    store's of a ``MemoryAdmin`` or a mounted tree."""
    for _ in range(3):
        files = getattr(owner, "files", None)
        if files is not None:
            return files
        owner = getattr(owner, "memory", None) or getattr(owner, "own", None)
    return None


def note_store(memory: object) -> None:
    """The current call turned out to be on ``memory``'s store (a mount's): say so."""
    if not ACTIVE:
        return
    lane = _LANE.get()
    if lane is not None and lane.span is not None:
        found = store_id(_files_of(memory))
        if found is not None:
            lane.span.set_attribute(STORE_ID, found)


# -- spans -----------------------------------------------------------------------------
class _Api:
    """What is used of ``opentelemetry``, imported once, at the first traced call."""

    def __init__(self) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        self.trace = trace
        self.client, self.internal, self.server = SpanKind.CLIENT, SpanKind.INTERNAL, SpanKind.SERVER
        self.error = Status(StatusCode.ERROR)  # no description: it would be the message


_api: _Api | None = None
_tracer: Any = None
_unavailable = False


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("s3memory")
    except PackageNotFoundError:
        return "0"


def _get_tracer() -> Any:
    """The tracer, made once (a proxy until the application sets its provider), or None if
    ``opentelemetry`` does not import after all, or if nothing in the process has imported
    ``opentelemetry.trace`` yet: an application that traces has (to set its provider), and
    one that does not would only get non-recording spans, for the 20 ms of the import on
    its first command (the API comes installed with ``anthropic``)."""
    global _api, _tracer, _unavailable
    if _tracer is None and not _unavailable:
        if "opentelemetry.trace" not in sys.modules:
            return None
        try:
            _api = _Api()
        except ImportError:
            _unavailable = True
            return None
        _tracer = _api.trace.get_tracer("s3memory", _version())
    return _tracer


def use_tracer_provider(provider: Any) -> None:
    """Trace with ``provider`` instead of the global one (None: the global one again);
    the global provider can be set only once a process, tests need their own."""
    global _tracer
    _get_tracer()
    _tracer = None if provider is None else provider.get_tracer("s3memory", _version())


Operation = str | Callable[..., str]
Records = int | Callable[[Any], int] | None


def traced(
    command: str, operation: Operation, *, records: Records = None
) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """A method as one span: ``operation`` is the conventions' operation name (or a function
    of the method's arguments giving it), ``records`` the ``gen_ai.memory.record.count``
    (or a function of the result giving it), ``command`` the method's fixed name."""

    def decorate(method: Callable[P, T]) -> Callable[P, T]:
        if not INSTALLED:
            return method

        @functools.wraps(method)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
            tracer = _get_tracer()
            if tracer is None:
                return method(*args, **kwargs)
            name = operation if isinstance(operation, str) else operation(*args, **kwargs)
            return _in_span(tracer, command, name, records, method, args, kwargs)

        return wrapper

    return decorate


def _in_span(
    tracer: Any,
    command: str,
    name: str,
    records: Records,
    method: Callable[..., T],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> T:
    global ACTIVE
    assert _api is not None
    files = _files_of(args[0]) if args else None
    local = not getattr(getattr(files, "store", None), "concurrent", True)
    span = tracer.start_span(
        name,
        kind=_api.internal if local else _api.client,
        attributes={OPERATION: name, COMMAND: command},
    )
    if not span.is_recording():
        if not span.get_span_context().is_valid:  # no SDK: nothing to pass on, so no context
            return method(*args, **kwargs)
        with _api.trace.use_span(span, end_on_exit=False, record_exception=False):  # sampled out: children follow
            return method(*args, **kwargs)
    # Never record_exception: an exception's message names the path.
    activated = _api.trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False)
    found = store_id(files) if files is not None else None
    if found is not None:
        span.set_attribute(STORE_ID, found)
    ACTIVE = True
    outer = _LANE.get()
    lane = _Lane(_Usage(), span)
    token = _LANE.set(lane)
    try:
        with activated:
            result = method(*args, **kwargs)
    except BaseException as exc:
        span.set_attribute(ERROR_TYPE, type(exc).__name__)
        span.set_status(_api.error)
        raise
    else:
        count = records(result) if callable(records) else records
        if count is not None:
            span.set_attribute(RECORD_COUNT, count)
        return result
    finally:
        _LANE.reset(token)
        usage = lane.usage
        if not local:  # S3Store counts; a local store's calls are no requests
            span.set_attributes(
                {
                    REQUESTS: usage.requests,
                    ROUND_TRIPS: lane.depth,
                    RETRIES: usage.retries,
                    BYTES_SENT: usage.sent,
                    BYTES_RECEIVED: usage.received,
                }
            )
        if outer is not None:  # a call inside another: the outer one made these requests too
            outer.usage.add(usage.requests, usage.retries, usage.sent, usage.received)
            outer.depth += lane.depth
        span.end()


def serve_request(method: str, route: str, answer: Callable[[], T], status_of: Callable[[T], int]) -> T:
    """``answer()`` as one ``SERVER`` span of the memory-store API (``s3memory serve``), as
    the HTTP conventions name one: ``{method} {route}``, ``http.request.method``,
    ``http.route`` (the template, never an id), ``http.response.status_code``, and
    ``error.type`` (the status) for a 5xx. The memory calls it makes are its children."""
    tracer = _get_tracer() if INSTALLED else None
    if tracer is None:
        return answer()
    assert _api is not None
    span = tracer.start_span(
        f"{method} {route}",
        kind=_api.server,
        attributes={"http.request.method": method, "http.route": route},
    )
    with _api.trace.use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False):
        try:
            result = answer()
        except BaseException as exc:
            span.set_attribute(ERROR_TYPE, type(exc).__name__)
            span.set_status(_api.error)
            raise
        status = status_of(result)
        span.set_attribute("http.response.status_code", status)
        if status >= 500:
            span.set_attribute(ERROR_TYPE, str(status))
            span.set_status(_api.error)
        return result
