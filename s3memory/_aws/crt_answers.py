"""botocore's answers from what awscrt received: the dicts :class:`~s3memory._aws.crt.CrtS3Client`
returns and the ``ClientError`` responses it raises, field for field as botocore parses S3's
(``tests/stores/s3/test_crt_client.py`` compares them with botocore's own, and
``tests/stores/s3/test_listing_parity.py`` the listing for any keys and times)."""

from __future__ import annotations

import functools
import http.client
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote_plus
from xml.sax.saxutils import unescape

from .clients import parse_timestamp

__all__ = [
    "META",
    "Exchange",
    "base_fields",
    "copy_headers",
    "copy_result",
    "error_response",
    "header_value",
    "listing",
    "local_name",
    "object_fields",
    "xml_root",
]

META = "x-amz-meta-"
_COPY_FIELDS = re.compile(r"<(ETag|LastModified|Checksum[A-Za-z0-9]*)>([^<]+)</\1>")
_ENTITIES = {"&quot;": '"', "&apos;": "'"}  # beyond the three unescape() knows


class Exchange:
    """One request's answer, filled in by awscrt's callbacks on its own threads."""

    __slots__ = ("body", "headers", "retry", "status")

    def __init__(self) -> None:
        self.status = 0
        self.retry: dict[str, Any] | None = None  # ResponseMetadata of its retries, if any
        self.headers: list[tuple[str, str]] = []
        self.body: list[bytes] = []

    def on_headers(self, status_code: int, headers: list[tuple[str, str]], **_: Any) -> None:
        self.status, self.headers = status_code, headers

    def on_body(self, chunk: bytes, **_: Any) -> None:
        self.body.append(chunk)


def header_value(headers: Sequence[tuple[str, str]], name: str) -> str:
    for header, value in headers:
        if header.lower() == name:
            return value
    return ""


def base_fields(answer: Exchange) -> dict[str, Any]:
    """``ResponseMetadata`` as botocore builds it."""
    headers = {name.lower(): value for name, value in answer.headers}
    metadata: dict[str, Any] = {}
    if "x-amz-request-id" in headers:
        metadata["RequestId"] = headers["x-amz-request-id"]
        metadata["HostId"] = headers.get("x-amz-id-2", "")
    elif "x-amzn-requestid" in headers:
        metadata["RequestId"] = headers["x-amzn-requestid"]
    metadata.update(HTTPStatusCode=answer.status, HTTPHeaders=headers, RetryAttempts=0)
    if answer.retry:
        metadata.update(answer.retry)
    return {"ResponseMetadata": metadata}


_OBJECT_HEADERS = (
    ("accept-ranges", "AcceptRanges"),
    ("etag", "ETag"),
    ("content-type", "ContentType"),
    ("cache-control", "CacheControl"),
    ("content-encoding", "ContentEncoding"),
    ("content-disposition", "ContentDisposition"),
    ("content-language", "ContentLanguage"),
    ("x-amz-version-id", "VersionId"),
    ("x-amz-storage-class", "StorageClass"),
    ("x-amz-server-side-encryption", "ServerSideEncryption"),
)


def object_fields(answer: Exchange, *, with_length: bool) -> dict[str, Any]:
    """The fields of a HEAD or GET answer, from its headers, as botocore parses them."""
    response = base_fields(answer)
    headers = response["ResponseMetadata"]["HTTPHeaders"]
    for header, field in _OBJECT_HEADERS:
        if header in headers:
            response[field] = headers[header]
    if with_length and "content-length" in headers:
        response["ContentLength"] = int(headers["content-length"])
    if "last-modified" in headers:
        response["LastModified"] = parse_timestamp(headers["last-modified"])
    if headers.get("x-amz-delete-marker") == "true":
        response["DeleteMarker"] = True
    # Named as sent (botocore keeps the name's case after the prefix).
    response["Metadata"] = {name[len(META) :]: value for name, value in answer.headers if name.lower().startswith(META)}
    return response


def copy_headers(response: dict[str, Any], fields: Sequence[tuple[str, str]]) -> None:
    """Copy the headers named in ``fields`` into ``response`` under botocore's names."""
    headers = response["ResponseMetadata"]["HTTPHeaders"]
    for header, field in fields:
        if header in headers:
            response[field] = headers[header]


def copy_result(data: bytes) -> dict[str, Any]:
    """A ``CopyObjectResult`` as botocore parses it. S3's usual one, flat, its text with
    no character references or CDATA, is read with a regular expression: building an
    element tree for it was the larger part of a COPY's own CPU."""
    result: dict[str, Any] = {}
    if b"<CopyObjectResult" in data and b"<!" not in data and b"&#" not in data:
        for tag, text in _COPY_FIELDS.findall(data.decode()):
            if "&" in text:
                text = unescape(text, _ENTITIES)
            result[tag] = parse_timestamp(text) if tag == "LastModified" else text
        if "ETag" in result:  # else something this does not read (a prefix, attributes)
            return result
        result = {}
    for child in xml_root([data]):
        tag = local_name(child.tag)
        if tag == "LastModified" and child.text:
            result[tag] = parse_timestamp(child.text)
        elif tag in ("ETag", "ChecksumType") or tag.startswith("Checksum"):
            result[tag] = child.text
    return result


def local_name(tag: str) -> str:
    return tag.rpartition("}")[2]


def xml_root(body: list[bytes]) -> ET.Element:
    """The root of an XML answer (an empty element for an empty body)."""
    data = b"".join(body)
    if not data.strip():
        return ET.Element("")
    try:
        return ET.fromstring(data)
    except ET.ParseError as exc:
        from botocore.parsers import ResponseParserError

        raise ResponseParserError(f"Unable to parse response ({exc}), invalid XML received") from None


_LISTED_TEXT = frozenset({"Key", "ETag", "StorageClass", "ChecksumType"})  # an entry's fields read as text
_LISTING_TEXT = frozenset(
    {"Name", "Prefix", "Delimiter", "EncodingType", "ContinuationToken", "NextContinuationToken", "StartAfter"}
)
#: A listing's ``LastModified``, parsed once per text: a view lists the same objects again,
#: and parsing 1,000 timestamps was the larger part of a listing's own CPU.
_listed_time = functools.lru_cache(maxsize=8192)(parse_timestamp)


def listing(root: ET.Element) -> dict[str, Any]:
    """A ``ListBucketResult`` as botocore's ``list_objects_v2`` answers it (keys decoded
    from ``encoding-type=url``). A view's CPU is mostly this and the XML's parsing, so each
    tag's local name is found once per answer, not once per element."""
    names: dict[str, str] = {}
    out: dict[str, Any] = {}
    contents: list[dict[str, Any]] = []
    prefixes: list[dict[str, Any]] = []
    for child in root:
        tag = names.get(child.tag) or names.setdefault(child.tag, local_name(child.tag))
        if tag == "Contents":
            item: dict[str, Any] = {}
            for field in child:
                name = names.get(field.tag) or names.setdefault(field.tag, local_name(field.tag))
                text = field.text or ""
                if name in _LISTED_TEXT:
                    item[name] = text
                elif name == "Size":
                    item[name] = int(text)
                elif name == "LastModified":
                    item[name] = _listed_time(text)
                elif name == "ChecksumAlgorithm":
                    item.setdefault(name, []).append(text)
            contents.append(item)
        elif tag == "CommonPrefixes":
            prefixes.append({local_name(field.tag): field.text or "" for field in child})
        elif tag in _LISTING_TEXT:
            out[tag] = child.text or ""
        elif tag in ("MaxKeys", "KeyCount"):
            out[tag] = int(child.text or 0)
        elif tag == "IsTruncated":
            out[tag] = child.text == "true"
    if out.get("EncodingType") == "url":
        for name in ("Delimiter", "Prefix", "StartAfter"):
            if name in out:
                out[name] = unquote_plus(out[name])
        for item in contents:
            key = item["Key"]
            if "%" in key or "+" in key:
                item["Key"] = unquote_plus(key)
        for item in prefixes:
            if "Prefix" in item:
                item["Prefix"] = unquote_plus(item["Prefix"])
    if contents:
        out["Contents"] = contents
    if prefixes:
        out["CommonPrefixes"] = prefixes
    return out


def error_response(status: int, headers: list[tuple[str, str]], body: bytes | None) -> dict[str, Any]:
    """The ``response`` of botocore's ``ClientError`` for an S3 refusal: the ``<Error>``
    element of the body, or, without one (a HEAD), the status as the code."""
    lowered = {name.lower(): value for name, value in headers}
    metadata: dict[str, Any] = {}
    error: dict[str, Any] | None = None
    if body:
        try:
            root = ET.fromstring(body)
        except ET.ParseError:
            root = None
        if root is not None and local_name(root.tag) == "Error":
            error = {local_name(child.tag): child.text for child in root}
            error.pop("RequestId", None)
            error.pop("HostId", None)
            if "x-amzn-requestid" in lowered:
                metadata["RequestId"] = lowered["x-amzn-requestid"]
            elif "x-amz-request-id" in lowered:
                metadata["RequestId"] = lowered["x-amz-request-id"]
                metadata["HostId"] = lowered.get("x-amz-id-2", "")
    if error is None:
        error = {"Code": str(status), "Message": http.client.responses.get(status, "")}
        metadata = {"RequestId": lowered.get("x-amz-request-id", ""), "HostId": lowered.get("x-amz-id-2", "")}
    metadata.update(HTTPStatusCode=status, HTTPHeaders=lowered, RetryAttempts=0)
    return {"Error": error, "ResponseMetadata": metadata}
