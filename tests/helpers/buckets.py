"""Cleaning up real buckets (radosgw) after a test."""

from __future__ import annotations

from typing import Any

__all__ = ["remove_every_version"]


def remove_every_version(client: Any, bucket: str) -> None:
    """Delete every version and delete marker in ``bucket``, so that it can be removed."""
    doomed = [
        {"Key": item["Key"], "VersionId": item["VersionId"]}
        for page in client.get_paginator("list_object_versions").paginate(Bucket=bucket)
        for item in [*page.get("Versions", []), *page.get("DeleteMarkers", [])]
    ]
    for start in range(0, len(doomed), 1000):
        client.delete_objects(Bucket=bucket, Delete={"Objects": doomed[start : start + 1000], "Quiet": True})
