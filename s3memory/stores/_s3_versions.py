"""``ListObjectVersions`` read back into S3's one order, for :class:`~s3memory.stores.S3Store`.

S3 answers a page's versions and delete markers as two arrays; they are merged back into
S3's order: keys in order, and within a key the latest first, then by ``LastModified``. Where
a version and a delete marker of one key have the same ``LastModified`` (the same
millisecond on S3, the same second on moto), S3's order is asked for with listings of that
key alone, a few entries long (a binary search over how many of the tied versions come
before the marker).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ._base import NULL_VERSION, ObjectVersion

__all__ = ["list_versions", "modified_seconds"]

#: ``S3Store._call``: one S3 operation by its boto3 name, errors mapped.
Call = Callable[..., Any]
_Versions = list[ObjectVersion]


def modified_seconds(item: Mapping[str, Any]) -> float:
    """A listing entry's ``LastModified`` in seconds since the epoch (0 if it has none)."""
    modified = item.get("LastModified")
    return modified.timestamp() if modified is not None else 0.0


def list_versions(call: Call, prefix: str, limit: int | None) -> Iterator[ObjectVersion]:
    """Every version and delete marker under ``prefix`` in S3's order, at most ``limit``,
    page by page (``KeyMarker`` and ``VersionIdMarker``)."""
    if limit is not None and limit <= 0:
        return
    kwargs: dict[str, Any] = {"Prefix": prefix}
    yielded = 0
    previous: ObjectVersion | None = None  # the last entry listed: where a page goes on from
    while True:
        if limit is not None:
            kwargs["MaxKeys"] = min(limit - yielded, 1000)
        response = call("list_object_versions", **kwargs)
        for entry in _in_order(call, response, previous):
            yield entry
            previous = entry
            yielded += 1
            if limit is not None and yielded >= limit:
                return
        if not response.get("IsTruncated"):
            return
        kwargs["KeyMarker"] = response.get("NextKeyMarker", "")
        kwargs["VersionIdMarker"] = response.get("NextVersionIdMarker", "")


def _version_of(item: Mapping[str, Any], *, marker: bool) -> ObjectVersion:
    """One entry of ``Versions`` or ``DeleteMarkers`` of a ``ListObjectVersions`` answer."""
    return ObjectVersion(
        item["Key"],
        str(item.get("VersionId") or NULL_VERSION),
        "" if marker else str(item.get("ETag", "")),
        0 if marker else int(item.get("Size", 0)),
        modified_seconds(item),
        is_latest=bool(item.get("IsLatest")),
        is_delete_marker=marker,
    )


def _in_order(call: Call, response: Mapping[str, Any], previous: ObjectVersion | None) -> _Versions:
    """One page's versions and delete markers in S3's order (see :func:`list_versions`)."""
    by_key: dict[str, tuple[_Versions, _Versions]] = {}
    for item in response.get("Versions", []):
        by_key.setdefault(item["Key"], ([], []))[0].append(_version_of(item, marker=False))
    for item in response.get("DeleteMarkers", []):
        by_key.setdefault(item["Key"], ([], []))[1].append(_version_of(item, marker=True))
    ordered: _Versions = []
    for key in sorted(by_key):  # code point order: the UTF-8 byte order S3 lists keys in
        versions, markers = by_key[key]
        before = previous if previous is not None and previous.key == key else None
        i = j = 0
        while i < len(versions) and j < len(markers):
            version, marker = versions[i], markers[j]
            if version.is_latest or marker.is_latest or version.last_modified != marker.last_modified:
                version_first = version.is_latest or (
                    not marker.is_latest and version.last_modified > marker.last_modified
                )
            else:  # a tie: S3 tells how many of the versions of that time come before the marker
                tied = 1
                while i + tied < len(versions) and versions[i + tied].last_modified == marker.last_modified:
                    tied += 1
                count = _versions_before(call, marker, before, tied)
                ordered += versions[i : i + count]
                i += count
                version_first = False
            if version_first:
                ordered.append(version)
                i += 1
            else:
                ordered.append(marker)
                j += 1
            before = ordered[-1]
        ordered += versions[i:] + markers[j:]
    return ordered


def _versions_before(call: Call, marker: ObjectVersion, after: ObjectVersion | None, most: int) -> int:
    """How many versions of ``marker``'s key S3 lists between ``after`` (or the key's
    start) and ``marker``, knowing it is at most ``most``: a binary search with listings
    of that key, each asking whether ``marker`` is among the next few entries."""
    low, high = 0, most
    while low < high:
        middle = (low + high) // 2
        kwargs: dict[str, Any] = {"Prefix": marker.key, "MaxKeys": middle + 1}
        if after is not None:
            kwargs["KeyMarker"], kwargs["VersionIdMarker"] = after.key, after.version_id
        response = call("list_object_versions", **kwargs)
        listed = {str(item.get("VersionId")) for item in response.get("DeleteMarkers", []) if item["Key"] == marker.key}
        if marker.version_id in listed:
            high = middle
        else:
            low = middle + 1
    return low
