"""``crt_answers.listing``, how the awscrt client reads a ``ListObjectsV2`` answer, against
botocore's own ``list_objects_v2`` reading the same body (a plain botocore client, answered
through its ``before-send`` event: no server). S3's bodies as it sends them, and any keys,
prefixes, sizes and times."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote_plus
from xml.sax.saxutils import escape

import pytest
from helpers import REGION, examples, use_fake_aws_credentials
from hypothesis import given, settings
from hypothesis import strategies as st

from s3memory._aws.crt_answers import listing

_NS = ' xmlns="http://s3.amazonaws.com/doc/2006-03-01/"'

Read = Callable[[bytes], dict[str, Any]]


class _Raw:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.data


@pytest.fixture(scope="module")
def botocore_reads() -> Read:
    """What a plain botocore client's ``list_objects_v2`` answers for a body."""
    import botocore.session
    from botocore.awsrequest import AWSResponse

    with pytest.MonkeyPatch.context() as patch:
        use_fake_aws_credentials(patch)
        client = botocore.session.get_session().create_client("s3", region_name=REGION)
    body: list[bytes] = []
    client.meta.events.register(
        "before-send.s3.ListObjectsV2", lambda request, **_: AWSResponse(request.url, 200, {}, _Raw(body[0]))
    )

    def read(data: bytes) -> dict[str, Any]:
        body[:] = [data]
        answer = dict(client.list_objects_v2(Bucket="bucket"))
        answer.pop("ResponseMetadata")
        return answer

    return read


def _ours(data: bytes) -> dict[str, Any]:
    return listing(ET.fromstring(data))


_S3_PAGE = (
    f"<?xml version='1.0' encoding='UTF-8'?><ListBucketResult{_NS}><Name>bucket</Name>"
    "<Prefix>t%2Fa+b%2F</Prefix><StartAfter>t%2F%C3%BC</StartAfter><ContinuationToken>1a/b+c=</ContinuationToken>"
    "<NextContinuationToken>2x/y+z=</NextContinuationToken><KeyCount>4</KeyCount><MaxKeys>4</MaxKeys>"
    "<Delimiter>%2F</Delimiter><EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>"
    "<Contents><Key>t%2Fa+b%2F100%25</Key><LastModified>2026-11-28T07:48:28.123Z</LastModified>"
    "<ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag><ChecksumAlgorithm>CRC32</ChecksumAlgorithm>"
    "<ChecksumAlgorithm>CRC64NVME</ChecksumAlgorithm><ChecksumType>FULL_OBJECT</ChecksumType>"
    "<Size>227</Size><StorageClass>STANDARD</StorageClass></Contents>"
    "<Contents><Key>t%2Fa%2Bb%2F%C3%BC%F0%9F%98%80</Key><LastModified>2026-11-28T07:48:28.123Z</LastModified>"
    "<ETag>&quot;0aa1ea9a5a04b78d4581dd6d17742627-2&quot;</ETag><Size>0</Size>"
    "<StorageClass>INTELLIGENT_TIERING</StorageClass></Contents>"
    "<Contents><Key>t%2F%26%3C%3E%22%27</Key><LastModified>2026-11-28T07:48:29.000Z</LastModified>"
    "<ETag>&quot;e&quot;</ETag><Size>5368709120</Size><StorageClass>STANDARD</StorageClass></Contents>"
    "<Contents><Key>t/a+b</Key><LastModified>2026-11-28T07:48:29.000Z</LastModified>"
    "<ETag>&quot;f&quot;</ETag><Size>1</Size><StorageClass>STANDARD</StorageClass></Contents>"
    "<CommonPrefixes><Prefix>t%2Fa+b%2Fdir%2F</Prefix></CommonPrefixes>"
    "<CommonPrefixes><Prefix>t%2Fa%2Bb%2F</Prefix></CommonPrefixes></ListBucketResult>"
)
# Pretty-printed, without a namespace or url encoding, seconds only (as other servers answer).
_PLAIN_PAGE = """<ListBucketResult>
  <Name>bucket</Name>
  <Prefix>t/</Prefix>
  <KeyCount>2</KeyCount>
  <MaxKeys>1000</MaxKeys>
  <IsTruncated>false</IsTruncated>
  <Contents>
    <Key>t/a &amp; b%20c+d</Key>
    <LastModified>2026-01-01T00:00:00Z</LastModified>
    <ETag>"e1"</ETag>
    <Size>7</Size>
    <StorageClass>STANDARD</StorageClass>
  </Contents>
  <Contents>
    <Key><![CDATA[t/<cdata>]]></Key>
    <LastModified>2026-01-01T00:00:00.000001Z</LastModified>
    <ETag>"e2"</ETag>
    <Size>8</Size>
  </Contents>
</ListBucketResult>"""
_EMPTY_PAGE = (
    f"<ListBucketResult{_NS}><Name>bucket</Name><Prefix>t%2F</Prefix><KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys>"
    "<EncodingType>url</EncodingType><IsTruncated>false</IsTruncated></ListBucketResult>"
)


@pytest.mark.parametrize("page", [_S3_PAGE, _PLAIN_PAGE, _EMPTY_PAGE], ids=["s3", "plain", "empty"])
def test_an_answer_reads_as_botocore_reads_it(botocore_reads: Read, page: str) -> None:
    data = page.encode()
    assert _ours(data) == botocore_reads(data)


def test_the_pages_read_as_s3_wrote_them() -> None:
    """Checked here as well as against botocore: a body botocore misread would pass the test above."""
    answer = _ours(_S3_PAGE.encode())
    assert [item["Key"] for item in answer["Contents"]] == ["t/a b/100%", "t/a+b/ü😀", "t/&<>\"'", "t/a b"]
    assert [item["Size"] for item in answer["Contents"]] == [227, 0, 5368709120, 1]
    assert answer["Contents"][0]["ChecksumAlgorithm"] == ["CRC32", "CRC64NVME"]
    assert answer["Contents"][0]["LastModified"] == datetime(2026, 11, 28, 7, 48, 28, 123000, timezone.utc)
    assert answer["Contents"][1]["ETag"] == '"0aa1ea9a5a04b78d4581dd6d17742627-2"'
    assert answer["CommonPrefixes"] == [{"Prefix": "t/a b/dir/"}, {"Prefix": "t/a+b/"}]
    assert (answer["Prefix"], answer["StartAfter"], answer["Delimiter"]) == ("t/a b/", "t/ü", "/")
    assert answer["NextContinuationToken"] == "2x/y+z=" and answer["IsTruncated"] is True
    plain = _ours(_PLAIN_PAGE.encode())
    assert [item["Key"] for item in plain["Contents"]] == ["t/a & b%20c+d", "t/<cdata>"]  # not url-encoded
    assert "CommonPrefixes" not in plain and "Contents" not in _ours(_EMPTY_PAGE.encode())


def test_each_answer_is_its_own() -> None:
    """Timestamps are parsed once per process; the entries are new for every answer."""
    first, second = _ours(_S3_PAGE.encode()), _ours(_S3_PAGE.encode())
    first["Contents"][0]["Key"] = "changed"
    first["Contents"].pop()
    assert second == _ours(_S3_PAGE.encode()) and second["Contents"][0]["Key"] == "t/a b/100%"


# Text XML 1.0 can carry (no control characters but tab and newline, no surrogates).
_TEXT = st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\ufffe\uffff") | st.sampled_from("\t\n+% /"),
    max_size=12,
)
_TIMES = st.datetimes(datetime(1970, 1, 1), datetime(2200, 1, 1)).map(lambda t: t.replace(tzinfo=timezone.utc))


def _stamp(moment: datetime, form: int) -> str:
    base = moment.strftime("%Y-%m-%dT%H:%M:%S")
    return [f"{base}Z", f"{base}.{moment.microsecond // 1000:03d}Z", f"{base}.{moment.microsecond:06d}Z"][form]


_ENTRY = st.tuples(
    _TEXT,
    st.integers(0, 5 * 2**40),
    _TIMES,
    st.integers(0, 2),
    st.lists(st.sampled_from(["CRC32", "CRC32C", "SHA1", "SHA256", "CRC64NVME"]), max_size=2),
    st.sampled_from(["", "STANDARD", "GLACIER"]),
)


@settings(max_examples=examples(200), deadline=None)
@given(
    entries=st.lists(_ENTRY, max_size=6),
    prefixes=st.lists(_TEXT, max_size=3),
    prefix=_TEXT,
    url=st.booleans(),
    namespaced=st.booleans(),
    truncated=st.booleans(),
    shared_time=st.booleans(),
)
def test_any_listing_reads_as_botocore_reads_it(
    botocore_reads: Read,
    entries: list[tuple[str, int, datetime, int, list[str], str]],
    prefixes: list[str],
    prefix: str,
    url: bool,
    namespaced: bool,
    truncated: bool,
    shared_time: bool,
) -> None:
    def text(value: str) -> str:
        return quote_plus(value, safe="/") if url else escape(value)

    parts = [f"<ListBucketResult{_NS if namespaced else ''}><Name>bucket</Name><Prefix>{text(prefix)}</Prefix>"]
    if url:
        parts.append("<EncodingType>url</EncodingType>")
    parts.append(f"<KeyCount>{len(entries)}</KeyCount><IsTruncated>{str(truncated).lower()}</IsTruncated>")
    for index, (key, size, moment, form, checksums, storage) in enumerate(entries):
        if shared_time:  # many objects of one moment, as a bulk write makes them
            moment = entries[0][2] + timedelta(milliseconds=index % 2)
        parts.append(f"<Contents><Key>{text(key)}</Key><LastModified>{_stamp(moment, form)}</LastModified>")
        parts.append(f"<ETag>&quot;{size:032x}&quot;</ETag>")
        parts.extend(f"<ChecksumAlgorithm>{name}</ChecksumAlgorithm>" for name in checksums)
        parts.append(f"<Size>{size}</Size>")
        parts.append(f"<StorageClass>{storage}</StorageClass></Contents>" if storage else "</Contents>")
    parts.extend(f"<CommonPrefixes><Prefix>{text(p)}</Prefix></CommonPrefixes>" for p in prefixes)
    parts.append("</ListBucketResult>")
    data = "".join(parts).encode()
    ours = _ours(data)
    assert ours == botocore_reads(data)
    assert [item["Key"] for item in ours.get("Contents", [])] == [key for key, *_ in entries]
