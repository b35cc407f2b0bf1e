"""The S3 store (boto3). Every botocore error is mapped through ``_aws_errors``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .._aws_errors import map_aws_error
from .._errors import ObjectTooLargeError, PreconditionFailedError, StorageAccessDeniedError, StorageError
from ._base import ObjectInfo, ObjectStore, StoredObject, check_purge_prefix, check_size

DELETE_BATCH = 1000  # DeleteObjects takes at most 1,000 keys


def default_s3_client(
    *, endpoint_url: str | None = None, region_name: str | None = None, timeout: float | None = None
) -> Any:
    """A boto3 S3 client with timeouts and retries chosen on purpose (see ``s3memory._aws``):
    ``timeout`` seconds (5 by default) to connect and per read, the standard retry mode with
    three attempts, in the region ``resolve_region`` finds.

    Raises:
        ConfigurationError: no AWS region, or a missing AWS profile.
    """
    from .._aws import new_client

    return new_client("s3", region_name=region_name, endpoint_url=endpoint_url, timeout=timeout)


def _is_missing(exc: Exception) -> bool:
    response = getattr(exc, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code in ("NoSuchKey", "404", "NotFound") or (status == 404 and code != "NoSuchBucket")


class S3Store(ObjectStore):
    """Objects in ``bucket`` through a boto3 S3 client (taken as given, never wrapped)."""

    def __init__(self, bucket: str, client: Any | None = None) -> None:
        if not isinstance(bucket, str) or not bucket:
            from .._errors import ConfigurationError

            raise ConfigurationError("bucket must be a non-empty string")
        self.bucket = bucket
        self.client = client if client is not None else default_s3_client()

    @property
    def identity(self) -> str:
        return f"s3:{getattr(self.client.meta, 'endpoint_url', '')}/{self.bucket}"

    def _call(self, operation: str, **kwargs: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return getattr(self.client, operation)(Bucket=self.bucket, **kwargs)
        except (ClientError, BotoCoreError) as exc:
            raise map_aws_error(exc, operation, self.client) from exc

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
        stream = response["Body"]
        try:
            # The announced length first; then never more than one byte past the bound, in
            # case the length was absent or wrong.
            check_size(key, int(response.get("ContentLength") or 0), max_bytes)
            body = stream.read() if max_bytes is None else stream.read(max_bytes + 1)
        except ObjectTooLargeError:
            stream.close()  # do not drain a huge body to reuse the connection
            raise
        except Exception as exc:  # a broken stream is a transient storage failure
            raise map_aws_error(exc, "get_object", self.client) from exc
        check_size(key, len(body), max_bytes)
        return StoredObject(body, response["ETag"], dict(response.get("Metadata", {})))

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
            return str(self._call("put_object", **kwargs)["ETag"])
        except StorageError as exc:
            # If-Match on a key that is gone answers 404 on S3: the same lost race.
            if if_match is not None and isinstance(exc.__cause__, Exception) and _is_missing(exc.__cause__):
                raise PreconditionFailedError("Error: the object changed concurrently") from exc
            raise

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
        return str(response.get("CopyObjectResult", {}).get("ETag", ""))

    def list(self, prefix: str, *, limit: int | None = None) -> Iterator[ObjectInfo]:
        kwargs: dict[str, Any] = {"Prefix": prefix}
        if limit is not None:
            kwargs["MaxKeys"] = min(limit, 1000)
        yielded = 0
        while True:
            response = self._call("list_objects_v2", **kwargs)
            for item in response.get("Contents", []):
                modified = item["LastModified"].timestamp() if "LastModified" in item else 0.0
                yield ObjectInfo(item["Key"], item["Size"], item.get("ETag", ""), last_modified=modified)
                yielded += 1
                if limit is not None and yielded >= limit:
                    return
            if not response.get("IsTruncated"):
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
        conditions = if_match or {}
        changed = 0
        for start in range(0, len(keys), DELETE_BATCH):
            batch = keys[start : start + DELETE_BATCH]
            objects = [{"Key": k, "ETag": conditions[k]} if k in conditions else {"Key": k} for k in batch]
            response = self._call("delete_objects", Delete={"Objects": objects, "Quiet": True})
            errors = [e for e in response.get("Errors", []) if e.get("Code") != "NoSuchKey"]
            lost_race = [e for e in errors if e.get("Code") in ("PreconditionFailed", "412")]
            changed += len(lost_race)
            errors = [e for e in errors if e not in lost_race]
            if errors:
                raise StorageError(
                    f"Error: Memory storage failed during delete_objects: "
                    f"{len(errors)} of {len(batch)} objects could not be deleted ({errors[0].get('Code')})."
                )
        if changed:
            raise PreconditionFailedError(f"Error: {changed} objects changed and were not deleted")
