"""The S3 store (boto3). Every botocore error is mapped through ``_aws_errors``.

Versions are the bucket's: ``keeps_versions`` is its versioning status (``Enabled``),
``list_versions`` is ``ListObjectVersions``, and one version is read, HEADed or deleted with
its ``VersionId``. S3 says on every write whether the bucket keeps versions (a ``PutObject``
or ``CopyObject`` answer has a ``VersionId`` only then): each write's answer updates what the
store knows (a ``CopyObject`` answer only when it names a version: radosgw 16 never sends
one for a copy, even in a versioned bucket), so versioning turned on while a process runs is
seen by its next write, with no request of its own; ``GetBucketVersioning`` is asked only by
a store that has not written yet (once). What a write answered is also remembered with the
S3 client it went through (not process-wide), so that a store made per request on a
long-lived client (a Lambda function) does not ask again.
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from weakref import WeakKeyDictionary

from .. import _telemetry
from .._aws.errors import map_aws_error
from .._errors import ObjectTooLargeError, PreconditionFailedError, StorageAccessDeniedError, StorageError
from ._base import NULL_VERSION, ObjectInfo, ObjectStore, ObjectVersion, StoredObject, check_purge_prefix, check_size
from ._s3_versions import list_versions, modified_seconds

DELETE_BATCH = 1000  # DeleteObjects takes at most 1,000 keys
#: DeleteObjects requests in flight at once: botocore's default connection pool, so a
#: client passed in with default settings reuses its connections.
DELETE_WORKERS = 10

_Infos = list[ObjectInfo]

# Whether the last write through a client to a bucket answered with a version id, per client
# object (gone with it): what a new store on that client starts from instead of asking.
_WRITTEN: WeakKeyDictionary[Any, dict[str, bool]] = WeakKeyDictionary()
_WRITTEN_LOCK = threading.Lock()


def _answered_versioned(response: Mapping[str, Any]) -> bool:
    """Whether a ``PutObject``/``CopyObject`` answer comes from a bucket that keeps versions:
    it has a ``VersionId`` then (a suspended bucket answers ``null``, or none)."""
    version_id = response.get("VersionId")
    return isinstance(version_id, str) and bool(version_id) and version_id != NULL_VERSION


def default_s3_client(
    *, endpoint_url: str | None = None, region_name: str | None = None, timeout: float | None = None
) -> Any:
    """The S3 client of a store given none: the process's shared one for these settings
    (``s3memory._aws.shared.s3_client``): timeouts and retries chosen on purpose, its hot
    verbs through awscrt with the ``fast`` extra, its connections shared by every memory
    opened without a client.

    Raises:
        ConfigurationError: no AWS region, or a missing AWS profile.
    """
    from .._aws.shared import s3_client

    return s3_client(region_name=region_name, endpoint_url=endpoint_url, timeout=timeout)


def _written(client: Any) -> dict[str, bool]:
    """What writes through ``client`` answered of each bucket's versioning (empty for a client
    that cannot be weakly referenced)."""
    try:
        with _WRITTEN_LOCK:
            return _WRITTEN.setdefault(client, {})
    except TypeError:
        return {}


class _BucketVersioning:
    """What an :class:`S3Store` knows of its bucket's versioning (see the module docstring):
    the latest write's answer, else ``GetBucketVersioning`` (``ask``), asked once, only before
    the store's first write."""

    def __init__(self, client: Any, bucket: str, ask: Callable[[], Mapping[str, Any]]) -> None:
        self._client, self._bucket, self._ask = client, bucket, ask
        self._status: str | None = None  # GetBucketVersioning's status, once asked
        # Whether the latest write's answer said the bucket keeps versions (None: no write yet).
        self._written: bool | None = _written(client).get(bucket)

    def keeps_versions(self) -> bool:
        if self._written is not None:
            return self._written
        return self.status() == "Enabled"

    def learn(self, response: Mapping[str, Any], *, copy: bool = False) -> None:
        """Remember what a write's answer says of the bucket's versioning. A copy's answer
        without a ``VersionId`` says nothing (radosgw 16 omits it for every copy): taken as
        "unversioned", the copies of a rename, answered in any order beside its PUTs, would
        flip what the store believes from one request to the next."""
        if copy and "VersionId" not in response:
            return
        versioned = _answered_versioned(response)
        self._written = versioned
        _written(self._client)[self._bucket] = versioned
        if versioned:
            self._status = "Enabled"
        elif self._status == "Enabled":
            self._status = "Suspended"  # it kept versions: it may still hold some

    def status(self) -> str:
        """``Enabled``, ``Suspended``, or ``""`` for a bucket whose versioning was never
        enabled (asked once, unless a write's answer told first)."""
        if self._status is None:
            self._status = "Enabled" if self._written else str(self._ask().get("Status") or "")
        return self._status


def _error_of(exc: object) -> tuple[str, object]:
    """The error code and HTTP status of a botocore ``ClientError`` (``("", None)`` otherwise)."""
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", "")), response.get("ResponseMetadata", {}).get("HTTPStatusCode")


def _is_missing(exc: Exception) -> bool:
    code, status = _error_of(exc)
    return code in ("NoSuchKey", "404", "NotFound") or (status == 404 and code != "NoSuchBucket")


def _is_no_such_version(exc: object) -> bool:
    """Whether S3 refused a request with a ``VersionId`` because there is no such version:
    404 (``NoSuchVersion``, or ``NoSuchKey`` on radosgw), 405 ``MethodNotAllowed`` (the
    version is a delete marker), or 400 ``InvalidArgument`` (not a version id S3 makes)."""
    code, status = _error_of(exc)
    if code == "NoSuchBucket":
        return False
    return (
        status in (404, 405)
        or code in ("NoSuchVersion", "NoSuchKey", "NotFound", "MethodNotAllowed", "404", "405")
        or (status == 400 and code in ("InvalidArgument", "400"))
    )


def _listed(item: Mapping[str, Any]) -> ObjectInfo:
    """One entry of ``Contents`` of a ``ListObjectsV2`` answer."""
    return ObjectInfo(item["Key"], item["Size"], item.get("ETag", ""), last_modified=modified_seconds(item))


class S3Store(ObjectStore):
    """Objects in ``bucket`` through a boto3 S3 client (taken as given, never wrapped)."""

    def __init__(self, bucket: str, client: Any | None = None) -> None:
        if not isinstance(bucket, str) or not bucket:
            from .._errors import ConfigurationError

            raise ConfigurationError("bucket must be a non-empty string")
        self.bucket = bucket
        self.client = client if client is not None else default_s3_client()
        self._versioning = _BucketVersioning(self.client, bucket, lambda: self._call("get_bucket_versioning"))

    @property
    def identity(self) -> str:
        return f"s3:{getattr(self.client.meta, 'endpoint_url', '')}/{self.bucket}"

    def _call(self, operation: str, **kwargs: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            response = getattr(self.client, operation)(Bucket=self.bucket, **kwargs)
        except (ClientError, BotoCoreError) as exc:
            if _telemetry.ACTIVE:
                _telemetry.count_request(operation, kwargs.get("Body"), getattr(exc, "response", None))
            raise map_aws_error(exc, operation, self.client) from exc
        if _telemetry.ACTIVE:
            _telemetry.count_request(operation, kwargs.get("Body"), response)
        return response

    def _missing_or_raise(self, exc: StorageError, key: str) -> None:
        """Return if ``exc`` means the key does not exist; raise it otherwise.

        S3 answers 403, not 404, for a missing key unless the caller may list the bucket
        unconditionally; a tenant-scoped role may list only its own prefix. So a refusal is
        checked with a LIST of the key itself, which such a role may make: an absent key is
        missing, a present one is a real refusal (one extra request, on this path only).
        """
        if isinstance(exc.__cause__, Exception) and _is_missing(exc.__cause__):
            return
        if isinstance(exc, StorageAccessDeniedError):
            try:
                response = self._call("list_objects_v2", Prefix=key, MaxKeys=1)
            except StorageError:
                raise exc from exc.__cause__  # the original refusal
            if not any(item.get("Key") == key for item in response.get("Contents", [])):
                return
        raise exc

    def get(self, key: str, *, max_bytes: int | None = None) -> StoredObject | None:
        try:
            response = self._call("get_object", Key=key)
        except StorageError as exc:
            self._missing_or_raise(exc, key)
            return None
        body = self._body(response, key, max_bytes)
        return StoredObject(body, response["ETag"], dict(response.get("Metadata", {})), modified_seconds(response))

    def _body(self, response: Mapping[str, Any], key: str, max_bytes: int | None) -> bytes:
        """The body of a ``GetObject`` answer, read at most one byte past ``max_bytes``."""
        stream = response["Body"]
        try:
            # The announced length first; then never more than one byte past the bound, in
            # case the length was absent or wrong.
            check_size(key, int(response.get("ContentLength") or 0), max_bytes)
            body: bytes = stream.read() if max_bytes is None else stream.read(max_bytes + 1)
        except ObjectTooLargeError:
            stream.close()  # do not drain a huge body to reuse the connection
            raise
        except Exception as exc:  # a broken stream is a transient storage failure
            raise map_aws_error(exc, "get_object", self.client) from exc
        check_size(key, len(body), max_bytes)
        return body

    def head(self, key: str) -> ObjectInfo | None:
        try:
            response = self._call("head_object", Key=key)
        except StorageError as exc:
            self._missing_or_raise(exc, key)
            return None
        return ObjectInfo(key, response["ContentLength"], response["ETag"], dict(response.get("Metadata", {})))

    def put(
        self,
        key: str,
        body: bytes,
        metadata: Mapping[str, str],
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> str:
        kwargs: dict[str, Any] = {"Key": key, "Body": body, "Metadata": dict(metadata)}
        if if_none_match:
            kwargs["IfNoneMatch"] = "*"
        if if_match is not None:
            # Unquoted: S3 and moto accept either form, Ceph radosgw only the bare ETag.
            kwargs["IfMatch"] = if_match.strip('"')
        if tags:
            from urllib.parse import urlencode

            kwargs["Tagging"] = urlencode(dict(tags))
        try:
            response = self._call("put_object", **kwargs)
        except StorageError as exc:
            # If-Match on a key that is gone answers 404 on S3: the same lost race.
            if if_match is not None and isinstance(exc.__cause__, Exception) and _is_missing(exc.__cause__):
                raise PreconditionFailedError("Error: the object changed concurrently") from exc
            raise
        self._versioning.learn(response)
        return str(response["ETag"])

    def copy(
        self,
        source: str,
        destination: str,
        *,
        metadata: Mapping[str, str],
        if_match: str | None = None,
        if_none_match: bool = False,
    ) -> str:
        kwargs: dict[str, Any] = {
            "Key": destination,
            "CopySource": {"Bucket": self.bucket, "Key": source},
            "MetadataDirective": "REPLACE",
            "Metadata": dict(metadata),
        }
        if if_match is not None:
            kwargs["CopySourceIfMatch"] = if_match
        if if_none_match:
            kwargs["IfNoneMatch"] = "*"
        try:
            response = self._call("copy_object", **kwargs)
        except StorageError as exc:
            if isinstance(exc.__cause__, Exception) and _is_missing(exc.__cause__):
                raise PreconditionFailedError("Error: the source object is gone") from exc
            raise
        self._versioning.learn(response, copy=True)
        return str(response.get("CopyObjectResult", {}).get("ETag", ""))

    def list(self, prefix: str, *, limit: int | None = None) -> Iterator[ObjectInfo]:
        entries = self._entries(prefix, None if limit is None else min(limit, 1000))
        yield from map(_listed, entries if limit is None else itertools.islice(entries, limit))

    def list_sizes(self, prefix: str) -> Iterator[tuple[str, int]]:
        """:meth:`list`'s keys and sizes, without an ``ObjectInfo`` (and its time) each."""
        yield from ((item["Key"], item["Size"]) for item in self._entries(prefix))

    def _entries(self, prefix: str, max_keys: int | None = None) -> Iterator[Mapping[str, Any]]:
        """The ``Contents`` entries of ``ListObjectsV2`` pages, a page asked for once needed."""
        kwargs: dict[str, Any] = {"Prefix": prefix, **({} if max_keys is None else {"MaxKeys": max_keys})}
        while True:
            response = self._call("list_objects_v2", **kwargs)
            yield from response.get("Contents", [])
            if not response.get("IsTruncated"):
                return
            kwargs["ContinuationToken"] = response["NextContinuationToken"]

    def list_pages(self, prefix: str) -> Iterator[tuple[_Infos, bool]]:
        """Each ``ListObjectsV2`` answer as a page; ``IsTruncated`` says whether one follows."""
        kwargs: dict[str, Any] = {"Prefix": prefix}
        while True:
            response = self._call("list_objects_v2", **kwargs)
            page = [_listed(item) for item in response.get("Contents", [])]
            more = bool(response.get("IsTruncated"))
            yield page, more
            if not more:
                return
            kwargs["ContinuationToken"] = response["NextContinuationToken"]

    def purge(self, prefix: str, *, suffix: str = "") -> int:
        """``ListObjectVersions`` under ``prefix`` (every version and delete marker, so a
        versioned bucket keeps nothing), then ``DeleteObjects`` with each ``VersionId``, 1,000
        at a time. On an unversioned bucket each key has one version, ``null``. Needs
        ``s3:ListBucketVersions`` and ``s3:DeleteObjectVersion``."""
        check_purge_prefix(prefix)
        doomed: list[dict[str, str]] = []
        kwargs: dict[str, Any] = {"Prefix": prefix}
        while True:
            response = self._call("list_object_versions", **kwargs)
            for item in [*response.get("Versions", []), *response.get("DeleteMarkers", [])]:
                if item["Key"].startswith(prefix) and item["Key"].endswith(suffix):
                    doomed.append({"Key": item["Key"], "VersionId": item.get("VersionId") or "null"})
            if not response.get("IsTruncated"):
                break
            kwargs["KeyMarker"] = response.get("NextKeyMarker", "")
            kwargs["VersionIdMarker"] = response.get("NextVersionIdMarker", "")
        for start in range(0, len(doomed), DELETE_BATCH):
            batch = doomed[start : start + DELETE_BATCH]
            response = self._call("delete_objects", Delete={"Objects": batch, "Quiet": True})
            errors = [e for e in response.get("Errors", []) if e.get("Code") not in ("NoSuchKey", "NoSuchVersion")]
            if errors:
                raise StorageError(
                    f"Error: Memory storage failed during delete_objects: "
                    f"{len(errors)} of {len(batch)} object versions could not be deleted ({errors[0].get('Code')})."
                )
        return len(doomed)

    def delete(self, keys: Sequence[str], *, if_match: Mapping[str, str] | None = None) -> None:
        """``DeleteObjects``, 1,000 keys a request, the requests sent together (10,000 keys
        are one round trip, not 10). Every batch runs even if another fails; the first
        failure in the order of ``keys`` is raised, then ``PreconditionFailedError`` if an
        ``if_match`` condition failed."""
        conditions = if_match or {}
        batches = [keys[start : start + DELETE_BATCH] for start in range(0, len(keys), DELETE_BATCH)]
        if len(batches) <= 1:
            changed = sum(self._delete_batch(batch, conditions) for batch in batches)
        else:
            # A pool of this call's own: nothing to close, no thread outlives the call. Not
            # pool.map: its first error cancels the batches not yet started.
            workers = min(len(batches), DELETE_WORKERS)
            calls: list[Callable[[], int]] = [
                functools.partial(self._delete_batch, batch, conditions) for batch in batches
            ]
            counted = _telemetry.fork()  # the batches are one round trip of the command's
            calls = calls if counted is None else [counted.bind(call) for call in calls]
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="s3memory-delete") as pool:
                sent = [pool.submit(call) for call in calls]
            if counted is not None:
                counted.join()
            changed = sum(future.result() for future in sent)  # every batch is done here
        if changed:
            raise PreconditionFailedError(f"Error: {changed} objects changed and were not deleted")

    def _delete_batch(self, batch: Sequence[str], conditions: Mapping[str, str]) -> int:
        """One ``DeleteObjects``: how many keys were kept because their ETag condition failed.
        A missing key is deleted already; any other refusal raises ``StorageError``."""
        objects = [{"Key": k, "ETag": conditions[k]} if k in conditions else {"Key": k} for k in batch]
        response = self._call("delete_objects", Delete={"Objects": objects, "Quiet": True})
        errors = [e for e in response.get("Errors", []) if e.get("Code") != "NoSuchKey"]
        lost_race = [e for e in errors if e.get("Code") in ("PreconditionFailed", "412")]
        errors = [e for e in errors if e not in lost_race]
        if errors:
            raise StorageError(
                f"Error: Memory storage failed during delete_objects: "
                f"{len(errors)} of {len(batch)} objects could not be deleted ({errors[0].get('Code')})."
            )
        return len(lost_race)

    # -- versions ------------------------------------------------------------------------
    def keeps_versions(self) -> bool:
        """Whether the bucket's versioning is ``Enabled``: as the latest write's answer said
        (a ``VersionId``), else as ``GetBucketVersioning`` says (asked once per store, only
        before its first write; ``Suspended`` or never enabled is False). Needs
        ``s3:GetBucketVersioning`` until a write has answered."""
        return self._versioning.keeps_versions()

    def list_versions(self, prefix: str, *, limit: int | None = None) -> Iterator[ObjectVersion]:
        """``ListObjectVersions`` under ``prefix``, page by page, merged back into S3's one
        order (:mod:`._s3_versions`). Needs ``s3:ListBucketVersions`` (with ``s3:prefix``
        ``prefix`` and the keys below it)."""
        return list_versions(self._call, prefix, limit)

    def get_version(self, key: str, version_id: str, *, max_bytes: int | None = None) -> StoredObject | None:
        """``GetObject`` with ``VersionId``; ``None`` for a missing version, a delete marker
        or a malformed id. Needs ``s3:GetObjectVersion``. In a bucket whose versioning was
        never enabled (``s3:GetBucketVersioning``, asked once), the one version is ``null``,
        the current object, read with ``GetObject``."""
        if not isinstance(version_id, str) or not version_id:
            return None  # an empty VersionId would read the current version
        if not self._versioning.status():  # a bucket never versioned: "null" is the current object
            return self.get(key, max_bytes=max_bytes) if version_id == NULL_VERSION else None
        try:
            response = self._call("get_object", Key=key, VersionId=version_id)
        except StorageError as exc:
            self._no_version_or_raise(exc, key, version_id)
            return None
        body = self._body(response, key, max_bytes)
        return StoredObject(body, response["ETag"], dict(response.get("Metadata", {})), modified_seconds(response))

    def head_version(self, key: str, version_id: str) -> ObjectInfo | None:
        """``HeadObject`` with ``VersionId`` (as :meth:`get_version`)."""
        if not isinstance(version_id, str) or not version_id:
            return None
        if not self._versioning.status():
            return self.head(key) if version_id == NULL_VERSION else None
        try:
            response = self._call("head_object", Key=key, VersionId=version_id)
        except StorageError as exc:
            self._no_version_or_raise(exc, key, version_id)
            return None
        metadata = dict(response.get("Metadata", {}))
        return ObjectInfo(key, response["ContentLength"], response["ETag"], metadata, modified_seconds(response))

    def delete_version(self, key: str, version_id: str) -> None:
        """``DeleteObject`` with ``VersionId`` (a missing version, or a malformed id, is not
        an error). Needs ``s3:DeleteObjectVersion``. In a bucket never versioned (as
        :meth:`get_version`), ``null`` is the current object, deleted with ``DeleteObjects``."""
        if not isinstance(version_id, str) or not version_id:
            return  # without a VersionId, DeleteObject would add a delete marker
        if not self._versioning.status():  # a bucket never versioned: "null" is the current object
            if version_id == NULL_VERSION:
                self.delete([key])
            return  # and it has no other version (moto would delete "null" for any id)
        try:
            self._call("delete_object", Key=key, VersionId=version_id)
        except StorageError as exc:
            if not _is_no_such_version(exc.__cause__):
                raise

    def _listed_version(self, key: str, version_id: str) -> ObjectVersion | None:
        """The version ``version_id`` of ``key`` as ``ListObjectVersions`` lists it, or None."""
        for version in self.list_versions(key):
            if version.key != key:
                return None  # the key's own versions come first, before longer keys
            if version.version_id == version_id:
                return version
        return None

    def _no_version_or_raise(self, exc: StorageError, key: str, version_id: str) -> None:
        """Return if ``exc`` means there is no such version (or it is a delete marker);
        raise it otherwise. A refusal (403) is checked as :meth:`_missing_or_raise` does,
        with a listing of the key's versions, which a tenant-scoped role may make."""
        if _is_no_such_version(exc.__cause__):
            return
        if isinstance(exc, StorageAccessDeniedError):
            try:
                found = self._listed_version(key, version_id)
            except StorageError:
                raise exc from exc.__cause__  # the original refusal
            if found is None or found.is_delete_marker:
                return
        raise exc
