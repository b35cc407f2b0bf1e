"""The memory-store API's routes: who is asking, which store, which endpoint.

Framework-free: :meth:`MemoryStoreAPI.handle` takes an ``http.Request`` and answers an
``http.Response``; the ASGI face (``app``) and any other carry them. Every answer has a
``request-id`` header; every error the API's error body, and ``x-should-retry: false`` on a
4xx (the SDK would retry a 409).

**Keys.** A request names its key as ``x-api-key`` or ``Authorization: Bearer`` (the SDK 2.14
sends the second). The server's own key, ``S3MEMORY_SERVE_KEY`` (at least 32 characters),
has full access to every store; it is compared in constant time and never stored; its id is
``apikey_`` and 16 hex digits of a SHA-256 of the key. The keys ``s3memory serve-key``
makes (``keys``) are stored as hashes, scoped to stores and to reading or writing. Every
version records the id of the key that wrote it as its actor (it names the key, not the
secret). A store outside a key's scope is answered as one that does not exist (404).
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import hmac
import logging
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from .. import _telemetry
from .._core.memory import EncryptedMemory
from .._errors import ConfigurationError, PathNotFoundError, S3MemoryError, StorageError
from .http import ApiError, Request, Response, error_response, new_request_id, not_found
from .keys import KeyRing, Principal
from .memories import Memories
from .registry import StoreRegistry, is_store_id
from .versions import Versions

log = logging.getLogger("s3memory.serve")
T = TypeVar("T")

MIN_KEY_CHARS = 32
_STORES = re.compile(r"/v1/memory_stores/?")
_STORE = re.compile(r"/v1/memory_stores/([^/]+)")
_ARCHIVE = re.compile(r"/v1/memory_stores/([^/]+)/archive")
_MEMORIES = re.compile(r"/v1/memory_stores/([^/]+)/memories/?")
_MEMORY = re.compile(r"/v1/memory_stores/([^/]+)/memories/([^/]+)")
_VERSIONS = re.compile(r"/v1/memory_stores/([^/]+)/memory_versions/?")
_VERSION = re.compile(r"/v1/memory_stores/([^/]+)/memory_versions/([^/]+)")
_REDACT = re.compile(r"/v1/memory_stores/([^/]+)/memory_versions/([^/]+)/redact")


#: Each route's template, as spans name it (never an id).
_ROUTES = (
    (_STORES, "/v1/memory_stores"),
    (_ARCHIVE, "/v1/memory_stores/{memory_store_id}/archive"),
    (_MEMORIES, "/v1/memory_stores/{memory_store_id}/memories"),
    (_MEMORY, "/v1/memory_stores/{memory_store_id}/memories/{memory_id}"),
    (_VERSIONS, "/v1/memory_stores/{memory_store_id}/memory_versions"),
    (_REDACT, "/v1/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}/redact"),
    (_VERSION, "/v1/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}"),
    (_STORE, "/v1/memory_stores/{memory_store_id}"),
)


_BESIDE_LOCK = threading.Lock()
_BESIDE: ThreadPoolExecutor | None = None


def _beside() -> ThreadPoolExecutor:
    """The threads that read a store's record beside a read of its memories (made on first use)."""
    global _BESIDE
    with _BESIDE_LOCK:
        if _BESIDE is None:
            _BESIDE = ThreadPoolExecutor(8, thread_name_prefix="s3memory-serve")
        return _BESIDE


def route_of(path: str) -> str:
    """The template of the route ``path`` takes (``"unknown"`` for none)."""
    return next((template for pattern, template in _ROUTES if pattern.fullmatch(path)), "unknown")


def _status(response: Response) -> int:
    return response.status


def key_id(key: str) -> str:
    """The id of a key: what versions record as their actor."""
    return "apikey_" + hashlib.sha256(b"s3memory serve key\0" + key.encode()).hexdigest()[:16]


def check_key(key: object) -> str:
    """``key`` if it can be the server's key: a string of at least 32 characters, printable."""
    if not isinstance(key, str) or len(key) < MIN_KEY_CHARS or not key.isprintable() or key != key.strip():
        raise ConfigurationError(
            f"S3MEMORY_SERVE_KEY must be a secret of at least {MIN_KEY_CHARS} printable characters "
            "(e.g. python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return key


def _method_not_allowed(request: Request) -> ApiError:
    return ApiError(405, "invalid_request_error", f"{request.method} is not allowed on {request.path}.")


class MemoryStoreAPI:
    """The API over ``open_tenant(user_id, actor)``, a function giving a tenant's memory with
    its changes made as ``actor`` (``UserMemories.open``). ``key`` is the server's own key,
    with full access; the keys of ``keys`` (``s3memory serve-key``) are scoped."""

    def __init__(self, open_tenant: Callable[[str, str], EncryptedMemory], *, key: str) -> None:
        self._key = check_key(key).encode()
        self._full = Principal.full(key_id(key))
        self._open = open_tenant
        self.registry = StoreRegistry(lambda user_id: open_tenant(user_id, self._full.key_id))
        self.keys = KeyRing(lambda user_id: open_tenant(user_id, self._full.key_id))
        self.memories = Memories()
        self.versions = Versions()

    def handle(self, request: Request, *, principal: Principal | None = None) -> Response:
        """The answer to ``request``, in a ``SERVER`` span when OpenTelemetry is on.

        ``principal``: the caller as a face that authenticated it vouches for it (the Lambda
        function behind its JWT authorizer); without it, the request's key decides."""
        method = request.method.upper()
        answer = functools.partial(self._answer, request, principal)
        return _telemetry.serve_request(method, route_of(request.path), answer, _status)

    def _answer(self, request: Request, principal: Principal | None) -> Response:
        request_id = new_request_id()
        try:
            caller = principal if principal is not None else self._authenticate(request)
            response = self._route(request, caller)
        except ApiError as error:
            response = error.response(request_id)
            if error.status >= 500 and error.status != 501:
                del response.headers["x-should-retry"]  # the SDK may retry a 5xx (not "not implemented")
        except StorageError as error:
            # Never the error's text: it may name keys of the bucket.
            log.warning("storage failed (%s) for %s %s", type(error).__name__, request.method, request.path)
            response = error_response(503, "overloaded_error", "The storage behind this server failed.", request_id)
            del response.headers["x-should-retry"]
        except S3MemoryError as error:
            log.error("could not answer %s %s (%s)", request.method, request.path, type(error).__name__)
            response = error_response(500, "api_error", "The server could not answer this request.", request_id)
            del response.headers["x-should-retry"]
        response.headers["request-id"] = request_id
        return response

    def _authenticate(self, request: Request) -> Principal:
        given = request.headers.get("x-api-key")
        if given is None:
            scheme, _, token = request.headers.get("authorization", "").partition(" ")
            given = token.strip() if scheme.lower() == "bearer" else None
        if given is not None:
            if hmac.compare_digest(given.encode("utf-8", "surrogateescape"), self._key):
                return self._full
            found = self.keys.authenticate(given)
            if found is not None:
                return found
        raise ApiError(401, "authentication_error", "invalid x-api-key")

    def _tenant(
        self, store_id: str, caller: Principal, *, writable: bool, archived_too: bool = True
    ) -> EncryptedMemory:
        """A store's memory opened as the caller, after its scope (404 outside it: nothing is
        told of stores it may not see) and the store's state (an archived one refuses changes
        unless ``archived_too``: its memories may still be deleted and its versions redacted)."""
        if writable:
            caller.require_write(store_id)
        else:
            caller.require_read(store_id)
        self.registry.require(store_id, writable=not archived_too)
        return self._open(store_id, caller.key_id)

    def _reading(self, store_id: str, caller: Principal, read: Callable[[EncryptedMemory], T]) -> T:
        """``read`` of a store's memory, with the store's record read beside it rather than
        before (a round trip less): an unknown store is 404 whatever the read found, and a
        read of a tenant that does not exist writes nothing."""
        caller.require_read(store_id)
        if not is_store_id(store_id):
            self.registry.require(store_id, writable=False)  # 404, with no request
        memory = self._open(store_id, caller.key_id)
        known = _beside().submit(contextvars.copy_context().run, self.registry.require, store_id, writable=False)
        try:
            result = read(memory)
        except BaseException:
            known.result()  # the store's 404 first: its id may not be probed through its memories
            raise
        known.result()
        return result

    def _route(self, request: Request, caller: Principal) -> Response:
        method, path = request.method.upper(), request.path
        if _STORES.fullmatch(path):
            if method == "GET":
                return Response(200, self.registry.list(request.query, only=caller.stores))
            if method == "POST":
                caller.require_manage()
                return Response(200, self.registry.create(request.json()))
            raise _method_not_allowed(request)
        if match := _ARCHIVE.fullmatch(path):
            if method != "POST":
                raise _method_not_allowed(request)
            caller.require_read(match[1])
            caller.require_manage()
            return Response(200, self.registry.archive(match[1]))
        if match := _MEMORIES.fullmatch(path):
            return self._memories(request, caller, method, match[1], None)
        if match := _MEMORY.fullmatch(path):
            return self._memories(request, caller, method, match[1], match[2])
        if match := _VERSIONS.fullmatch(path):
            if method != "GET":
                raise _method_not_allowed(request)
            store_id = match[1]
            return Response(
                200, self._reading(store_id, caller, lambda m: self.versions.list(store_id, m, request.query))
            )
        if match := _REDACT.fullmatch(path):
            if method != "POST":
                raise _method_not_allowed(request)
            memory = self._tenant(match[1], caller, writable=True)  # allowed on an archived store
            return Response(200, self.versions.redact(match[1], memory, match[2]))
        if match := _VERSION.fullmatch(path):
            if method != "GET":
                raise _method_not_allowed(request)
            store_id, version = match[1], match[2]
            return Response(
                200,
                self._reading(store_id, caller, lambda m: self.versions.retrieve(store_id, m, version, request.query)),
            )
        if match := _STORE.fullmatch(path):
            caller.require_read(match[1])
            if method == "GET":
                return Response(200, self.registry.retrieve(match[1]))
            if method not in ("POST", "DELETE"):
                raise _method_not_allowed(request)
            caller.require_manage()
            if method == "POST":
                return Response(200, self.registry.update(match[1], request.json()))
            return Response(200, self.registry.delete(match[1]))
        raise not_found(f"No route for {method} {path[:200]}.")

    def _memories(
        self, request: Request, caller: Principal, method: str, store_id: str, memory_id: str | None
    ) -> Response:
        if method not in (("GET", "POST") if memory_id is None else ("GET", "POST", "DELETE")):
            raise _method_not_allowed(request)
        query = request.query
        if method == "GET":
            if memory_id is None:
                return Response(200, self._reading(store_id, caller, lambda m: self.memories.list(store_id, m, query)))
            found = self._reading(store_id, caller, lambda m: self.memories.retrieve(store_id, m, memory_id, query))
            return Response(200, found)
        # Deleting a memory of an archived store is allowed (the API's rule); changing one is not.
        memory = self._tenant(store_id, caller, writable=True, archived_too=method == "DELETE")
        try:
            if memory_id is None:
                return Response(200, self.memories.create(store_id, memory, request.json(), query))
            if method == "POST":
                body = request.json()
                return Response(200, self.memories.update(store_id, memory, memory_id, body, query))
            return Response(200, self.memories.delete(store_id, memory, memory_id, query))
        except PathNotFoundError:
            raise not_found(f"No memory with id {memory_id}.") from None


def build_api(settings: Any, *, serve_key: str) -> MemoryStoreAPI:
    """The API over the stores these ``Settings`` say where to keep (the embedded default
    without a bucket): one S3 client, KMS client and key cache for every store."""
    from .._factory import UserMemories

    check_key(serve_key)
    memories = UserMemories(**settings.memory_options())

    def open_tenant(user_id: str, actor: str) -> EncryptedMemory:
        memory = memories.open(user_id, actor=actor)
        if not isinstance(memory, EncryptedMemory):  # mounts are not served
            raise ConfigurationError("s3memory serve does not serve mounts")
        return memory

    if settings.mounts:
        raise ConfigurationError("s3memory serve does not serve mounts: unset S3MEMORY_MOUNTS")
    return MemoryStoreAPI(open_tenant, key=serve_key)
