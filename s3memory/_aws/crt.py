"""A boto3 S3 client whose hot verbs go through awscrt: :func:`fast_client`.

Why: botocore spends 0.75-0.85 ms of client CPU per S3 request even tuned (its HTTP stack,
signing, endpoint rules and parsing, measured with ``bench/run.py``); awscrt signs and speaks
HTTP in C. Requests go on keep-alive connections of awscrt's own (:mod:`.crt_http`), not
through awscrt's ``S3Client``, whose machinery for large transfers cost twice the CPU a
small request needs. A 1,000-file rename is about 2,000 requests, so that is most of its
CPU. Only the six verbs ``S3Store`` calls per file go
through awscrt (HEAD, GET, PUT, COPY, ListObjectsV2, DeleteObjects), and each answers the
dict botocore would, or raises the ``ClientError`` (or connection error) botocore would, so
``S3Store`` and ``map_aws_error`` work unchanged. Everything else (versions, purge's
listing, bucket calls, ``meta``) and any argument those six are not written for goes to the
wrapped boto3 client, which also keeps supplying the credentials (refreshed by botocore:
profiles, SSO, AssumeRole), the region, and the URL of a bucket (its endpoint rules decide
virtual-hosted or path style once per bucket). Retries are botocore's standard mode's, made
here (``crt_retry``); answers are parsed as botocore parses them (``crt_answers``).

awscrt is imported here only, when a client is wrapped: never by ``import s3memory``.
"""

from __future__ import annotations

import base64
import concurrent.futures
import hashlib
import importlib
import io
import os
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple
from urllib.parse import quote, urlsplit
from xml.sax.saxutils import escape

from .crt_answers import (
    META,
    Exchange,
    base_fields,
    copy_headers,
    copy_result,
    error_response,
    header_value,
    listing,
    local_name,
    object_fields,
)
from .crt_http import ConnectionPools
from .crt_retry import TIMED_OUT, Retries, attempt_seconds, transport_error

__all__ = ["CrtS3Client", "fast_client"]

#: The part of an object one GET reads (``Range: bytes=0-…``). A larger object is read by
#: the wrapped boto3 client instead, whose body is a stream ``S3Store`` stops reading past
#: its bound: awscrt buffers a whole response, so a huge object planted in the bucket must
#: not be fetched whole into memory. 8 MiB is more than any memory file.
GET_PART_BYTES = 8 * 1024 * 1024
#: Kept of an answer's body beyond a GET's part. S3's largest answer to the other verbs (a
#: listing of 1,000 keys of 1,024 bytes, URL-encoded) is under a part too.
_ANSWER_SLACK_BYTES = 64 * 1024
_XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"
_PROBE_KEY = "s3memory-crt-probe"
_SEND_EVENT = "before-send.s3.HeadObject"
# The arguments each verb handles itself; a call with any other goes to boto3.
_HEAD_ARGS = frozenset({"Bucket", "Key"})
_GET_ARGS = _HEAD_ARGS
_PUT_ARGS = frozenset({"Bucket", "Key", "Body", "Metadata", "IfMatch", "IfNoneMatch", "Tagging"})
_COPY_ARGS = frozenset(
    {"Bucket", "Key", "CopySource", "Metadata", "MetadataDirective", "CopySourceIfMatch", "IfNoneMatch"}
)
_LIST_ARGS = frozenset({"Bucket", "Prefix", "MaxKeys", "ContinuationToken", "StartAfter", "Delimiter"})
_DELETE_ARGS = frozenset({"Bucket", "Delete"})
_DELETE_OBJECT_FIELDS = frozenset({"Key", "VersionId", "ETag"})
# S3 sends these to a client on the wrong region or endpoint; botocore follows them.
_REDIRECT_CODES = frozenset({"PermanentRedirect", "TemporaryRedirect", "AuthorizationHeaderMalformed"})

Observer = Callable[[str, float, float], None]
# awscrt's AwsSigningConfig's arguments, but the date and the body's hash.
_SIGNING_FIELDS = (
    "algorithm",
    "signature_type",
    "credentials_provider",
    "region",
    "service",
    "should_sign_header",
    "use_double_uri_encode",
    "should_normalize_uri_path",
    "signed_body_header_type",
    "expiration_in_seconds",
    "omit_session_token",
)


class _UseBoto3(Exception):
    """This call is one for the wrapped boto3 client (e.g. a bucket in another region)."""


class _Route(NamedTuple):
    """Where a bucket's objects are: the Host header and the path before the key."""

    host: str
    path: str


def fast_client(client: Any) -> Any:
    """``client`` with its hot S3 verbs sent through awscrt (:class:`CrtS3Client`) when
    awscrt is installed (the ``fast`` extra: ``pip install -e '.[fast]'`` in the checkout) and ``client`` is a boto3 S3
    client it can stand in for; otherwise ``client`` itself.

    It cannot for a client without credentials, an unsigned one, one behind a proxy or with
    a client certificate: this client supports none of these as botocore does.
    """
    if isinstance(client, CrtS3Client):
        return client
    try:
        importlib.import_module("awscrt.http")
    except ImportError:
        return client
    try:
        from botocore.client import BaseClient
    except ImportError:  # pragma: no cover - boto3 is a dependency
        return client
    if not isinstance(client, BaseClient) or client.meta.service_model.service_name != "s3":
        return client
    if _sends_are_intercepted(client):
        return client
    try:
        return CrtS3Client(client)
    except Exception:  # _Unsupported, or e.g. a CA bundle that is not there: botocore reports it
        return client


def _sends_are_intercepted(client: Any) -> bool:
    """Whether something is registered to see or answer the client's requests as they are
    sent (botocore registers nothing there): a mock such as moto's, which answers requests
    in process, or an application's hook. awscrt's requests would go past it, to the network.
    A handler that says it is not ``enabled`` (moto's, outside a mock) does not count."""
    try:
        emitter = client.meta.events._emitter  # botocore's HierarchicalEmitter
        # Its own cache of handlers per event, emptied whenever one is (un)registered; a
        # search of its handlers is most of this check's cost, and it runs per request.
        found = emitter._lookup_cache.get(_SEND_EVENT)
        if found is None:
            found = emitter._handlers.prefix_search(_SEND_EVENT)
            emitter._lookup_cache[_SEND_EVENT] = found
    except AttributeError:  # another botocore's internals: nothing to go by
        return False
    return any(getattr(handler, "enabled", True) is not False and not isinstance(handler, _Probe) for handler in found)


class _Unsupported(Exception):
    """awscrt cannot send this client's requests as botocore would."""


class _Credentials:
    """awscrt's credentials callback: botocore's resolved credentials, frozen per request.

    Kept apart from :class:`CrtS3Client` (awscrt holds it natively, out of reach of Python's
    cycle collector), and remembers the last failure, which awscrt reports only by name.
    """

    def __init__(self, credentials: Any, make: Callable[..., Any]) -> None:
        self._credentials = credentials
        self._make = make
        self.failure: BaseException | None = None

    def __call__(self) -> Any:
        try:
            frozen = self._credentials.get_frozen_credentials()
        except BaseException as exc:  # e.g. an SSO token expired: botocore's own error
            self.failure = exc
            raise
        return self._make(frozen.access_key, frozen.secret_key, frozen.token)

    def failed(self) -> Exception:
        """What botocore raises for the last failure to get credentials, which awscrt
        reported by name only."""
        failure, self.failure = self.failure, None
        if isinstance(failure, Exception):
            return failure
        from botocore.exceptions import NoCredentialsError

        error: Exception = NoCredentialsError()
        return error


class _Probe:
    """A ``before-send`` handler of the boto3 client: in a thread probing a bucket's URL, it
    keeps the request's URL and answers it (an empty 200), so nothing is sent. Kept apart
    from :class:`CrtS3Client`, which the boto3 client's events need not keep alive."""

    def __init__(self) -> None:
        self.local = threading.local()

    def __call__(self, request: Any, **_: Any) -> Any:
        if not getattr(self.local, "active", False):
            return None
        from botocore.awsrequest import AWSResponse

        self.local.url = request.url
        authorization = request.headers.get("Authorization") or ""
        self.local.authorization = authorization.decode() if isinstance(authorization, bytes) else str(authorization)
        self.local.session_token = "x-amz-s3session-token" in request.headers
        return AWSResponse(request.url, 200, {"Content-Length": "0"}, _NoBody())

    def route(self, client: Any, bucket: str, region: str, scheme: str) -> _Route | None:
        """Where ``client`` sends ``bucket``'s objects: the URL botocore's own endpoint rules
        give (virtual-hosted or path style, the regional endpoint, FIPS, dual-stack...), from
        a HEAD built and signed by ``client``, taken at ``before-send`` and answered there,
        never sent. None for a bucket botocore signs otherwise than awscrt would (SigV4 for
        "s3" in ``region``): an Object Lambda or Outposts ARN, SigV4A, S3 Express sessions."""
        self.local.url = ""
        self.local.active = True
        try:
            client.head_object(Bucket=bucket, Key=_PROBE_KEY)
            url = urlsplit(self.local.url)
            signed_as_ours = self.local.authorization.startswith("AWS4-HMAC-SHA256 ") and (
                f"/{region}/s3/aws4_request," in self.local.authorization
            )
            if (
                url.scheme == scheme
                and url.path.endswith("/" + _PROBE_KEY)
                and signed_as_ours
                and not self.local.session_token
            ):
                return _Route(url.netloc, url.path[: -len(_PROBE_KEY)])
        except Exception:  # botocore will report it, on its own request
            pass
        finally:
            self.local.active = False
        return None


class _NoBody:
    """The raw body of :class:`_Probe`'s answer."""

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield b""

    def read(self, *_: Any) -> bytes:
        return b""


class _Body(io.BytesIO):
    """A GET's body, read in full already, where botocore gives a ``StreamingBody``."""

    def iter_chunks(self, chunk_size: int = 1024) -> Iterator[bytes]:
        while chunk := self.read(chunk_size):
            yield chunk


class CrtS3Client:
    """A boto3 S3 client (``client``) whose hot verbs go through awscrt: a drop-in for it
    where ``S3Store`` uses it (see the module's docstring). Any other attribute is
    ``client``'s.

    Raises:
        _Unsupported: awscrt cannot send ``client``'s requests as botocore would.
    """

    def __init__(self, client: Any) -> None:
        self._client = client
        self._crt_http = importlib.import_module("awscrt.http")
        self._crt_errors = importlib.import_module("awscrt.exceptions")
        crt_auth = importlib.import_module("awscrt.auth")
        meta, config = client.meta, client.meta.config
        credentials = _credentials_of(client)
        if credentials is None or str(getattr(config, "signature_version", "") or "") not in ("", "s3v4"):
            raise _Unsupported("no credentials, or not SigV4")
        if getattr(config, "proxies", None) or getattr(config, "client_cert", None):
            raise _Unsupported("a proxy or a client certificate")
        self._endpoint = str(meta.endpoint_url)
        parts = urlsplit(self._endpoint)
        if _proxied(parts.scheme, parts.hostname or ""):
            raise _Unsupported("a proxy from the environment")
        self._region = str(meta.region_name or "us-east-1")
        self._routes: dict[str, _Route | None] = {}
        self._observers: list[Observer] = []
        self._lock = threading.Lock()
        connect = float(getattr(config, "connect_timeout", None) or 60)
        read = float(getattr(config, "read_timeout", None) or 60)
        self._retries = Retries(meta.service_model, _attempts(config))
        self._attempt_seconds = attempt_seconds(connect, read)
        self._sleep = time.sleep  # between attempts (a test's to replace)
        self._credentials = _Credentials(credentials, crt_auth.AwsCredentials)
        provider = crt_auth.AwsCredentialsProvider.new_delegate(self._credentials)
        signing = crt_auth.AwsSigningConfig(  # awscrt.s3's default S3 signing, without importing it
            algorithm=crt_auth.AwsSigningAlgorithm.V4,
            signature_type=crt_auth.AwsSignatureType.HTTP_REQUEST_HEADERS,
            credentials_provider=provider,
            region=self._region,
            service="s3",
            signed_body_header_type=crt_auth.AwsSignedBodyHeaderType.X_AMZ_CONTENT_SHA_256,
            signed_body_value=crt_auth.AwsSignedBodyValue.UNSIGNED_PAYLOAD,
            use_double_uri_encode=False,
            should_normalize_uri_path=False,
        )
        tls: Callable[[str], Any] | None = None
        if parts.scheme != "http":
            context = _tls_context(client)

            def tls(host: str) -> Any:
                options = context.new_connection_options()
                options.set_server_name(host)
                return options

        pool_size = int(getattr(config, "max_pool_connections", None) or 10)
        self._pools = ConnectionPools(tls=tls, connect_timeout=connect, max_idle=pool_size)
        self._sign = crt_auth.aws_sign_request
        self._pid = os.getpid()  # awscrt's threads do not survive a fork: a child uses botocore
        # Under TLS the body is not signed (UNSIGNED-PAYLOAD, as botocore over HTTPS). Over
        # plain HTTP each body is, as botocore does: a config per body (made from these
        # fields: awscrt's replace() costs three times as much); the empty body's kept.
        self._signing = signing
        if parts.scheme == "http":
            self._signing = signing.replace(signed_body_value=hashlib.sha256(b"").hexdigest())
            self._signing_fields = {name: getattr(signing, name) for name in _SIGNING_FIELDS}
            self._signing_config = crt_auth.AwsSigningConfig
            self._body_signed = True
        else:
            self._body_signed = False
        self._probe = _Probe()
        meta.events.register_first("before-send.s3.HeadObject", self._probe, unique_id=f"s3memory-crt-{id(self)}")

    def __getattr__(self, name: str) -> Any:
        if name == "_client":  # not set yet (e.g. while copied): no recursion
            raise AttributeError(name)
        return getattr(self._client, name)

    def __repr__(self) -> str:
        return f"CrtS3Client({self._client!r})"

    def add_request_observer(self, observer: Observer) -> None:
        """Call ``observer(operation, started, ended)`` (``time.perf_counter`` seconds) after
        each request sent through awscrt, failed ones too, once however many attempts it
        took (as botocore's ``before-call``): a hook for counting requests, which botocore's
        events on ``meta.events`` no longer see for these verbs."""
        with self._lock:
            self._observers = [*self._observers, observer]

    # -- the verbs -------------------------------------------------------------------------
    def head_object(self, **kwargs: Any) -> dict[str, Any]:
        route = self._route_for(kwargs, _HEAD_ARGS)
        if route is None:
            return self._client.head_object(**kwargs)  # type: ignore[no-any-return]
        try:
            answer = self._send("HeadObject", "HEAD", route, kwargs["Key"], "", [], None)
        except _UseBoto3:
            return self._redirected("head_object", kwargs)
        return object_fields(answer, with_length=True)

    def get_object(self, **kwargs: Any) -> dict[str, Any]:
        route = self._route_for(kwargs, _GET_ARGS)
        if route is None:
            return self._client.get_object(**kwargs)  # type: ignore[no-any-return]
        key = kwargs["Key"]
        try:
            answer = self._send("GetObject", "GET", route, key, "", [("Range", f"bytes=0-{GET_PART_BYTES - 1}")])
        except (_EmptyObject, _Oversized):  # S3 refuses a range of an empty object (416), or
            # the server ignored the range: botocore's GET, whose body S3Store bounds (the
            # object may have grown since)
            return self._client.get_object(**kwargs)  # type: ignore[no-any-return]
        except _UseBoto3:
            return self._redirected("get_object", kwargs)
        response = object_fields(answer, with_length=answer.status != 206)
        if answer.status == 206:  # the object's first part: its size is after the slash
            try:
                total = int(header_value(answer.headers, "content-range").rpartition("/")[2])
            except ValueError:  # no size ("*"): botocore reads it
                total = GET_PART_BYTES + 1
            if total > GET_PART_BYTES:
                return self._client.get_object(**kwargs)  # type: ignore[no-any-return]
            response["ContentLength"] = total
            response["ResponseMetadata"]["HTTPStatusCode"] = 200
        response["Body"] = _Body(b"".join(answer.body))
        return response

    def put_object(self, **kwargs: Any) -> dict[str, Any]:
        body = kwargs.get("Body", b"")
        route = self._route_for(kwargs, _PUT_ARGS) if isinstance(body, (bytes, bytearray)) else None
        if route is None:
            return self._client.put_object(**kwargs)  # type: ignore[no-any-return]
        headers = _metadata_headers(kwargs.get("Metadata"))
        for argument, header in (
            ("IfMatch", "If-Match"),
            ("IfNoneMatch", "If-None-Match"),
            ("Tagging", "x-amz-tagging"),
        ):
            if argument in kwargs:
                headers.append((header, str(kwargs[argument])))
        try:
            answer = self._send("PutObject", "PUT", route, kwargs["Key"], "", headers, bytes(body))
        except _UseBoto3:
            return self._redirected("put_object", kwargs)
        response = base_fields(answer)
        copy_headers(response, (("etag", "ETag"), ("x-amz-version-id", "VersionId")))
        return response

    def copy_object(self, **kwargs: Any) -> dict[str, Any]:
        source = kwargs.get("CopySource")
        simple = isinstance(source, Mapping) and set(source) == {"Bucket", "Key"}
        route = self._route_for(kwargs, _COPY_ARGS) if simple else None
        if route is None or not isinstance(source, Mapping):
            return self._client.copy_object(**kwargs)  # type: ignore[no-any-return]
        # As botocore quotes it: the bucket and key, with "/" kept.
        headers = [("x-amz-copy-source", quote(f"{source['Bucket']}/{source['Key']}", safe="-._~/"))]
        headers += _metadata_headers(kwargs.get("Metadata"))
        for argument, header in (
            ("MetadataDirective", "x-amz-metadata-directive"),
            ("CopySourceIfMatch", "x-amz-copy-source-if-match"),
            ("IfNoneMatch", "If-None-Match"),
        ):
            if argument in kwargs:
                headers.append((header, str(kwargs[argument])))
        try:
            answer = self._send("CopyObject", "PUT", route, kwargs["Key"], "", headers, b"", xml=True)
        except _UseBoto3:
            return self._redirected("copy_object", kwargs)
        response = base_fields(answer)
        copy_headers(
            response, (("x-amz-version-id", "VersionId"), ("x-amz-copy-source-version-id", "CopySourceVersionId"))
        )
        response["CopyObjectResult"] = copy_result(b"".join(answer.body))
        return response

    def list_objects_v2(self, **kwargs: Any) -> dict[str, Any]:
        route = self._route_for(kwargs, _LIST_ARGS)
        if route is None:
            return self._client.list_objects_v2(**kwargs)  # type: ignore[no-any-return]
        # botocore's order and encoding; encoding-type=url keeps any key legal in XML.
        query = "?list-type=2"
        for argument, name in (
            ("ContinuationToken", "continuation-token"),
            ("Delimiter", "delimiter"),
            ("MaxKeys", "max-keys"),
            ("Prefix", "prefix"),
            ("StartAfter", "start-after"),
        ):
            if argument in kwargs:
                query += f"&{name}={quote(str(kwargs[argument]), safe='-._~')}"
        query += "&encoding-type=url"
        try:
            answer = self._send("ListObjectsV2", "GET", route, "", query, [], xml=True)
        except _UseBoto3:
            return self._redirected("list_objects_v2", kwargs)
        response = base_fields(answer)
        response.update(listing(answer.root))
        return response

    def delete_objects(self, **kwargs: Any) -> dict[str, Any]:
        delete = kwargs.get("Delete")
        route = self._route_for(kwargs, _DELETE_ARGS) if _simple_delete(delete) else None
        if route is None or not isinstance(delete, Mapping):
            return self._client.delete_objects(**kwargs)  # type: ignore[no-any-return]
        parts = [f'<Delete xmlns="{_XMLNS}">']
        for item in delete["Objects"]:
            parts.append(f"<Object><Key>{escape(item['Key'])}</Key>")
            if "VersionId" in item:
                parts.append(f"<VersionId>{escape(item['VersionId'])}</VersionId>")
            if "ETag" in item:
                parts.append(f"<ETag>{escape(item['ETag'])}</ETag>")
            parts.append("</Object>")
        if "Quiet" in delete:
            parts.append(f"<Quiet>{'true' if delete['Quiet'] else 'false'}</Quiet>")
        parts.append("</Delete>")
        body = "".join(parts).encode()
        try:  # S3 requires a checksum of the body; botocore 1.36+ sends a CRC32, older an MD5
            headers = [("Content-MD5", base64.b64encode(hashlib.md5(body, usedforsecurity=False).digest()).decode())]
        except ValueError:  # a FIPS build without MD5
            headers = [("x-amz-checksum-crc32", _crc32(body))]
        try:
            answer = self._send("DeleteObjects", "POST", route, "", "?delete", headers, body, xml=True)
        except _UseBoto3:
            return self._redirected("delete_objects", kwargs)
        response = base_fields(answer)
        deleted: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        for child in answer.root:
            tag = local_name(child.tag)
            if tag in ("Deleted", "Error"):
                entry: dict[str, Any] = {local_name(field.tag): field.text for field in child}
                if "DeleteMarker" in entry:
                    entry["DeleteMarker"] = entry["DeleteMarker"] == "true"
                (deleted if tag == "Deleted" else errors).append(entry)
        if deleted:
            response["Deleted"] = deleted
        if errors:
            response["Errors"] = errors
        return response

    # -- requests --------------------------------------------------------------------------
    def _redirected(self, verb: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """S3 sent this bucket's call elsewhere: botocore follows the redirect, for this call
        and every later one of the bucket."""
        self._routes[kwargs["Bucket"]] = None
        return getattr(self._client, verb)(**kwargs)  # type: ignore[no-any-return]

    def _route_for(self, kwargs: Mapping[str, Any], handled: frozenset[str]) -> _Route | None:
        """Where ``kwargs``'s bucket is, or None when the call is for boto3: an argument
        this client does not handle or would not check as botocore does (an empty key, which
        would make a request on the bucket itself; metadata that is not ASCII), a bucket
        whose URL it could not learn, a forked child (awscrt's threads stayed in the
        parent), or a client whose requests something now intercepts (a mock started after
        the client was wrapped: the request must not go past it to the network)."""
        if not kwargs.keys() <= handled:
            return None
        bucket = kwargs.get("Bucket")
        if not isinstance(bucket, str) or not bucket:
            return None
        if "Key" in handled and not (isinstance(kwargs.get("Key"), str) and kwargs["Key"]):
            return None
        if "Metadata" in kwargs and not _ascii_metadata(kwargs["Metadata"]):
            return None
        if os.getpid() != self._pid or _sends_are_intercepted(self._client):
            return None
        try:
            return self._routes[bucket]
        except KeyError:
            pass
        route = self._probe.route(self._client, bucket, self._region, urlsplit(self._endpoint).scheme)
        self._routes[bucket] = route
        return route

    def _send(
        self,
        operation: str,
        method: str,
        route: _Route,
        key: str,
        query: str,
        headers: list[tuple[str, str]],
        body: bytes | None = None,
        *,
        xml: bool = False,
    ) -> _Answer:
        """Send one request and wait for its whole answer, attempt after attempt as botocore's
        standard retry mode would (see :mod:`.crt_retry`). A failure raises what botocore
        would raise for it."""
        headers = [("Host", route.host), *headers]
        if body is not None:
            headers.append(("Content-Length", str(len(body))))
        # The key quoted as botocore quotes it (only "/" and "~" kept); awscrt signs it as is.
        # A request on the bucket is "/bucket?..." (path style) or "/?..." as botocore's.
        path = (route.path + quote(key, safe="/~") if key else (route.path[:-1] or "/")) + query
        signing = self._signing
        if self._body_signed and body:
            signing = self._signing_config(**self._signing_fields, signed_body_value=hashlib.sha256(body).hexdigest())
        started = time.perf_counter()
        state: dict[str, Any] | None = None  # the request's retry quota, once it is retried
        attempt = 1
        try:
            while True:
                try:
                    exchange = self._attempt(operation, method, route.host, path, headers, body, signing, xml)
                    break
                except _Retryable as failure:
                    state = {} if state is None else state
                    delay = self._retries.delay(operation, attempt, failure.error, state)
                    if delay is None:
                        raise failure.error from None
                self._sleep(delay)
                attempt += 1
        finally:
            for observer in self._observers:
                observer(operation, started, time.perf_counter())
        exchange.retry = self._retries.answered(attempt, state)
        return exchange

    def _attempt(
        self,
        operation: str,
        method: str,
        host: str,
        path: str,
        headers: list[tuple[str, str]],
        body: bytes | None,
        signing: Any,
        xml: bool,
    ) -> _Answer:
        """One attempt of a request on a pooled connection; a failure worth another is
        raised as ``_Retryable``. With ``xml``, the answer's body is parsed (``root``)."""
        crt_http, errors = self._crt_http, self._crt_errors
        # A request of its own each time: awscrt signs it in place and reads its body.
        request = crt_http.HttpRequest(method, path, crt_http.HttpHeaders(headers), io.BytesIO(body) if body else None)
        try:
            self._sign(request, signing).result()
        except (errors.AwsCrtError, RuntimeError):  # awscrt raises either when the credentials fail:
            # botocore's error, not retried
            raise self._credentials.failed() from None
        exchange = _Answer(GET_PART_BYTES + _ANSWER_SLACK_BYTES)
        try:
            connection = self._pools.take(host)
        except errors.AwsCrtError as exc:
            raise _Retryable(transport_error(exc.name, exc, self._endpoint)) from None
        except concurrent.futures.TimeoutError:
            raise _Retryable(transport_error("AWS_IO_SOCKET_TIMEOUT", None, self._endpoint)) from None
        try:
            stream = connection.request(request, on_response=exchange.on_headers, on_body=exchange.on_body)
            stream.activate()
            stream.completion_future.result(self._attempt_seconds)
        except concurrent.futures.TimeoutError:  # awscrt has no read timeout: this is it
            connection.close()
            raise _Retryable(transport_error(TIMED_OUT, None, self._endpoint)) from None
        except errors.AwsCrtError as exc:
            connection.close()
            if exchange.cut:
                raise _oversized(operation) from None
            raise _Retryable(transport_error(exc.name, exc, self._endpoint)) from None
        if exchange.cut:  # finished before the close took effect
            raise _oversized(operation)
        self._pools.give_back(host, connection)
        if exchange.status >= 300:
            body = b"".join(exchange.body)
            raise _Retryable(
                _client_error(self._client, self._region, operation, exchange.status, exchange.headers, body)
            )
        if xml and exchange.body:
            exchange.root = self._xml_of(operation, exchange)
        return exchange

    def _xml_of(self, operation: str, answer: _Answer) -> ET.Element:
        """The root of a 200's XML body, read as botocore reads it: an ``<Error>``, or XML
        cut short, is a 500, retried. S3's usual answer to a COPY is left to
        ``copy_result``, which reads it without a parser."""
        data = b"".join(answer.body)
        if operation == "CopyObject" and b"<CopyObjectResult" in data:
            return _NO_XML
        try:
            root = ET.fromstring(data)
        except ET.ParseError:
            root = ET.Element("Error")
        if local_name(root.tag) == "Error":
            raise _Retryable(_client_error(self._client, self._region, operation, 500, answer.headers, data))
        return root


class _Answer(Exchange):
    """An answer, and the root of its XML body when the verb reads one.

    A body is kept up to ``limit`` bytes: past it, the connection is closed and the answer
    is ``cut`` (a server that ignores a GET's ``Range`` must not fill the memory)."""

    __slots__ = ("cut", "limit", "received", "root")

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.root = _NO_XML
        self.limit, self.received, self.cut = limit, 0, False

    def on_body(self, chunk: bytes, **kwargs: Any) -> None:
        self.received += len(chunk)
        if self.received <= self.limit:
            self.body.append(chunk)
        elif not self.cut:
            self.cut = True
            self.body.clear()
            kwargs["http_stream"].connection.close()


_NO_XML = ET.Element("")


class _Oversized(Exception):
    """An answer's body was longer than this client keeps (see :class:`_Answer`)."""


class _EmptyObject(Exception):
    """S3 refused the range of a GET: the object is empty (416)."""


class _Retryable(Exception):
    """An attempt's failure, ``error``, which botocore's retry policy may retry."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


# -- helpers -------------------------------------------------------------------------------
def _client_error(
    client: Any, region: str, operation: str, status: int, headers: list[tuple[str, str]], body: bytes | None
) -> Exception:
    """The ``ClientError`` botocore's ``client`` raises for S3's refusal (its modeled
    subclass, e.g. ``NoSuchKey``, where botocore has one); ``_UseBoto3`` for a redirect, which
    botocore follows to the bucket's region (``region`` is the client's)."""
    from botocore.exceptions import ClientError

    response = error_response(status, headers, body if operation != "HeadObject" else None)
    code = str(response["Error"].get("Code") or "")
    named = header_value(headers, "x-amz-bucket-region")
    # As botocore's redirector: a 400 naming another region is one too (S3's answer to a
    # HEAD signed for the wrong region, which has no body to name the error).
    if 300 <= status < 400 or code in _REDIRECT_CODES or (status == 400 and named and named != region):
        raise _UseBoto3(code)
    if status == 416 and operation == "GetObject":
        raise _EmptyObject
    try:
        cls = client.exceptions.from_code(code)
    except Exception:  # any other client: the plain class
        cls = ClientError
    error: Exception = cls(response, operation)
    return error


def _oversized(operation: str) -> Exception:
    """A body longer than :class:`_Answer` keeps: a GET is then read through botocore; any
    other verb's answer is not S3's."""
    if operation == "GetObject":
        return _Oversized()
    from botocore.exceptions import HTTPClientError

    error: Exception = HTTPClientError(error=f"the answer to {operation} is larger than any S3 sends")
    return error


def _credentials_of(client: Any) -> Any:
    """The boto3 client's resolved, refreshable credentials (botocore's own private
    accessor, as boto3's CRT transfer manager reads them), or None."""
    getter = getattr(client, "_get_credentials", None)
    if callable(getter):
        return getter()
    return getattr(getattr(client, "_request_signer", None), "_credentials", None)


def _attempts(config: Any) -> int:
    """Attempts per request as botocore counts them: the configured total, else
    ``AWS_MAX_ATTEMPTS``, else the retry mode's default (3 standard, 5 legacy)."""
    retries = getattr(config, "retries", None) or {}
    if "total_max_attempts" in retries:
        return max(int(retries["total_max_attempts"]), 1)
    if "max_attempts" in retries:
        return max(int(retries["max_attempts"]) + 1, 1)
    try:
        return max(int(os.environ["AWS_MAX_ATTEMPTS"]), 1)
    except (KeyError, ValueError):
        pass
    mode = retries.get("mode") or os.environ.get("AWS_RETRY_MODE") or "legacy"
    return 5 if mode == "legacy" else 3


def _ascii_metadata(metadata: object) -> bool:
    """Whether ``metadata`` is what this client sends as botocore would: str to str, ASCII
    (botocore refuses anything else before sending; s3memory's own is base64 and JSON)."""
    if not isinstance(metadata, Mapping):
        return False
    for name, value in metadata.items():
        if not (isinstance(name, str) and isinstance(value, str) and name.isascii() and value.isascii()):
            return False
    return True


def _proxied(scheme: str, host: str) -> bool:
    """Whether botocore would send requests to ``host`` through a proxy from the environment."""
    import urllib.request

    proxies = urllib.request.getproxies_environment()
    bypass = getattr(urllib.request, "proxy_bypass_environment", None)  # not in typeshed
    return scheme in proxies and not (callable(bypass) and bypass(host, proxies))


_tls_lock = threading.Lock()
_tls_contexts: dict[tuple[Any, ...], Any] = {}


def _tls_context(client: Any) -> Any:
    """awscrt's TLS options matching botocore's ``verify``: a CA bundle of the client's,
    or no verification if the client was built with ``verify=False``.

    One ``ClientTlsContext`` per ``verify`` for the process: making one loads the trust
    store, most of what wrapping a client costs. A CA path's key has its file's size and
    time, so a bundle replaced on disk is read again, as a new botocore client would."""
    crt_io = importlib.import_module("awscrt.io")
    verify = getattr(getattr(getattr(client, "_endpoint", None), "http_session", None), "_verify", True)
    key: tuple[Any, ...]
    if verify is False:
        key = (False,)
    elif isinstance(verify, str) and verify:
        found = os.stat(verify)  # a missing bundle fails here, as botocore's would
        key = (verify, found.st_mtime_ns, found.st_size)
    else:
        key = (True,)
    with _tls_lock:
        context = _tls_contexts.get(key)
        if context is None:
            options = crt_io.TlsContextOptions()
            if verify is False:
                options.verify_peer = False
            elif key[0] is not True:
                if os.path.isdir(verify):
                    options.override_default_trust_store_from_path(ca_dirpath=verify)
                else:
                    options.override_default_trust_store_from_path(ca_filepath=verify)
            context = crt_io.ClientTlsContext(options)
            for stale in [k for k in _tls_contexts if k[0] == key[0]]:  # the bundle's former version
                del _tls_contexts[stale]
            _tls_contexts[key] = context
    return context


def _simple_delete(delete: object) -> bool:
    """Whether a ``Delete`` argument has only what :meth:`CrtS3Client.delete_objects` writes."""
    if not isinstance(delete, Mapping) or not set(delete) <= {"Objects", "Quiet"}:
        return False
    objects = delete.get("Objects")
    return isinstance(objects, Sequence) and all(
        isinstance(item, Mapping) and "Key" in item and item.keys() <= _DELETE_OBJECT_FIELDS for item in objects
    )


def _crc32(body: bytes) -> str:
    import zlib

    return base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()


def _metadata_headers(metadata: Mapping[str, str] | None) -> list[tuple[str, str]]:
    return [(META + name, value) for name, value in (metadata or {}).items()]
