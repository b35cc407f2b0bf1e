"""Interoperability with the official AWS S3 Encryption Client (the test-only oracle).

KMS-per-object objects written by s3memory must be readable by the official client given
the binding context, and objects the official client writes with that context must be
readable by s3memory. A mismatched context or a tampered object fails on both sides.

The official client registers hooks on the boto3 client it wraps (every put and get
through it is encrypted or decrypted afterwards), so it always gets its own S3 and KMS
clients here, never the shared ``s3_client`` / ``kms_client`` fixtures.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest
from helpers import BUCKET, REGION, sampled
from s3_encryption import S3EncryptionClient, S3EncryptionClientConfig
from s3_encryption.exceptions import S3EncryptionClientError, S3EncryptionClientSecurityError
from s3_encryption.materials.kms_keyring import KmsKeyring

from s3memory import EncryptedMemory, IntegrityError, binding_context

MakeMemory = Callable[..., EncryptedMemory]
OFFICIAL_ERRORS = (S3EncryptionClientError, S3EncryptionClientSecurityError)

FILES = {
    "/memories/a.txt": "hello\n",
    "/memories/empty.txt": "",
    "/memories/dir/sub/n\u00f6t-ascii \u2713.md": "h\u00e9llo w\u00f6rld \u2713\nline 2\n",
    "/memories/big.txt": "".join(f"line {i}: {'x' * 60}\n" for i in range(1200)),
}


def opaque(shown_path: str) -> str:
    return (
        f"Error: The file {shown_path} failed its integrity check and cannot be read "
        "(it was modified, truncated, moved, or not written for this user)."
    )


def key(path: str, user: str = "alice") -> str:
    return f"{user}/memories/{path.removeprefix('/memories/')}"


@pytest.fixture
def official(s3_client: Any, kms_key_id: str) -> Any:
    """The official client over its own boto3 clients (inside the same moto mock)."""
    import boto3

    own_s3 = boto3.client("s3", region_name=REGION)
    own_kms = boto3.client("kms", region_name=REGION)
    assert own_s3 is not s3_client
    config = S3EncryptionClientConfig(keyring=KmsKeyring(kms_client=own_kms, kms_key_id=kms_key_id))
    return S3EncryptionClient(wrapped_s3_client=own_s3, config=config)


def official_read(official: Any, path: str, context: dict[str, str] | None = None, user: str = "alice") -> bytes:
    response = official.get_object(
        Bucket=BUCKET,
        Key=key(path, user),
        EncryptionContext=binding_context(user, path, prefix="") if context is None else context,
    )
    return bytes(response["Body"].read())


def official_write(official: Any, path: str, text: str, context: dict[str, str] | None = None) -> None:
    official.put_object(
        Bucket=BUCKET,
        Key=key(path),
        Body=text.encode("utf-8"),
        EncryptionContext=binding_context("alice", path, prefix="") if context is None else context,
    )


def view_text(memory: EncryptedMemory, path: str) -> str:
    """The file's text as ``view`` shows it (the first page) and as ``read_text`` returns it."""
    shown = memory.view(path)
    header, _, numbered = shown.partition("\n")
    assert header == f"Here's the content of {path} with line numbers:"
    text = memory.read_text(path)
    first_page = [line.split("\t", 1)[1] for line in numbered.split("\n") if not line.startswith("[Output truncated")]
    assert text.split("\n")[: len(first_page)] == first_page
    return text


# --- ours -> theirs -------------------------------------------------------------------


def test_official_client_reads_our_objects(make_memory: MakeMemory, official: Any) -> None:
    memory = make_memory("s3-kms")
    for path, text in FILES.items():
        memory.create(path, text)
    for path, text in FILES.items():
        assert official_read(official, path) == text.encode("utf-8")


def test_our_metadata_is_the_v3_kms_format(make_memory: MakeMemory, s3_client: Any) -> None:
    memory = make_memory("s3-kms")
    memory.create("/memories/a.txt", "hello\n")
    head = s3_client.head_object(Bucket=BUCKET, Key=key("/memories/a.txt"))
    metadata = head["Metadata"]
    # The V3 format's entries, and s3memory's sealed provenance beside them (which the
    # official client ignores: see the tests below).
    assert set(metadata) == {"x-amz-c", "x-amz-3", "x-amz-w", "x-amz-t", "x-amz-d", "x-amz-i", "s3memory-p"}
    assert metadata["x-amz-c"] == "115"
    assert metadata["x-amz-w"] == "12"
    assert head["ContentLength"] == len(b"hello\n") + 16
    assert len(base64.b64decode(metadata["x-amz-d"])) == 28
    assert len(base64.b64decode(metadata["x-amz-i"])) == 28


def test_official_client_reads_our_edits(make_memory: MakeMemory, official: Any) -> None:
    memory = make_memory("s3-kms")
    memory.create("/memories/a.txt", "one\ntwo\nthree\n")
    memory.str_replace("/memories/a.txt", "two", "TWO")
    assert official_read(official, "/memories/a.txt") == b"one\nTWO\nthree\n"
    memory.insert("/memories/a.txt", 0, "zero")
    assert official_read(official, "/memories/a.txt") == b"zero\none\nTWO\nthree\n"
    # a fresh tool's edit (no cached data key) too
    make_memory("s3-kms").str_replace("/memories/a.txt", "zero", "0")
    assert official_read(official, "/memories/a.txt") == b"0\none\nTWO\nthree\n"


def test_official_client_reads_renamed_file(make_memory: MakeMemory, official: Any, s3_client: Any) -> None:
    memory = make_memory("s3-kms")
    memory.create("/memories/a.txt", "moved content\n")
    memory.rename("/memories/a.txt", "/memories/archive/b.txt")
    assert official_read(official, "/memories/archive/b.txt") == b"moved content\n"
    assert s3_client.list_objects_v2(Bucket=BUCKET, Prefix=key("/memories/a.txt")).get("KeyCount") == 0
    # the old path's context no longer opens it
    with pytest.raises(OFFICIAL_ERRORS):
        official_read(official, "/memories/archive/b.txt", binding_context("alice", "/memories/a.txt", prefix=""))


def test_official_client_reads_renamed_directory(make_memory: MakeMemory, official: Any) -> None:
    memory = make_memory("s3-kms")
    for path, text in FILES.items():
        memory.create(path.replace("/memories/", "/memories/old/", 1), text)
    memory.rename("/memories/old", "/memories/new")
    for path, text in FILES.items():
        assert official_read(official, path.replace("/memories/", "/memories/new/", 1)) == text.encode("utf-8")


# --- theirs -> ours -------------------------------------------------------------------


def test_we_read_official_objects(make_memory: MakeMemory, official: Any) -> None:
    for path, text in FILES.items():
        official_write(official, path, text)
    memory = make_memory("s3-kms")
    for path, text in FILES.items():
        assert view_text(memory, path) == text
    listing = memory.view("/memories")
    assert "6B\t/memories/a.txt" in listing
    assert "0B\t/memories/empty.txt" in listing


def test_the_official_client_reads_what_we_write_with_the_documented_context(
    make_memory: MakeMemory, official: Any
) -> None:
    """``binding_context(user, path)``, as its docstring says to call it, is the context of
    what s3memory writes today (no prefix given: the deployment with none)."""
    make_memory("s3-kms").create("/memories/a.txt", "written today\n")
    assert official_read(official, "/memories/a.txt", binding_context("alice", "/memories/a.txt")) == b"written today\n"


def test_we_read_and_rebind_official_objects_of_binding_version_1(make_memory: MakeMemory, official: Any) -> None:
    """Objects bound as s3memory 0.1 bound them (no deployment in the context) still open;
    an edit writes them back bound to this deployment, which the official client reads."""
    official_write(
        official, "/memories/x.txt", "written unbound\n", binding_context("alice", "/memories/x.txt", version=1)
    )
    memory = make_memory("s3-kms")
    assert view_text(memory, "/memories/x.txt") == "written unbound\n"
    memory.str_replace("/memories/x.txt", "unbound", "bound")
    assert official_read(official, "/memories/x.txt") == b"written bound\n"
    with pytest.raises(OFFICIAL_ERRORS):
        official_read(official, "/memories/x.txt", binding_context("alice", "/memories/x.txt", version=1))


def test_we_edit_and_rename_official_objects(make_memory: MakeMemory, official: Any) -> None:
    official_write(official, "/memories/x.txt", "from the official client\n")
    memory = make_memory("s3-kms")
    memory.str_replace("/memories/x.txt", "official client", "official client, edited")
    assert official_read(official, "/memories/x.txt") == b"from the official client, edited\n"
    memory.rename("/memories/x.txt", "/memories/y.txt")
    assert official_read(official, "/memories/y.txt") == b"from the official client, edited\n"
    assert view_text(make_memory("s3-kms"), "/memories/y.txt") == "from the official client, edited\n"
    assert memory.delete("/memories/y.txt") == "Successfully deleted /memories/y.txt"


# Each row is a request to the official client (the oracle): a sample in the default tier.
@pytest.mark.parametrize(
    "context",
    sampled(
        [
            binding_context("alice", "/memories/other.txt", prefix=""),
            binding_context("bob", "/memories/x.txt", prefix=""),
            {"s3memory:tenant": "alice"},
            {**binding_context("alice", "/memories/x.txt", prefix=""), "extra": "entry"},
            {},
            binding_context("alice", "/memories/x.txt", prefix="other/"),
        ],
        ["other-path", "other-tenant", "path-missing", "extra-entry", "empty", "other-deployment"],
        by_default={"other-tenant", "other-deployment"},
    ),
)
def test_we_reject_official_objects_with_another_binding(
    make_memory: MakeMemory, official: Any, context: dict[str, str]
) -> None:
    official_write(official, "/memories/x.txt", "secret\n", context)
    memory = make_memory("s3-kms")
    with pytest.raises(IntegrityError) as info:
        memory.view("/memories/x.txt")
    assert str(info.value) == opaque("/memories/x.txt")


# --- mismatches and tampering ---------------------------------------------------------


@pytest.mark.parametrize(
    "context",
    sampled(
        [
            binding_context("alice", "/memories/b.txt", prefix=""),
            binding_context("alice", "/memories/a.txt/", prefix=""),
            binding_context("bob", "/memories/a.txt", prefix=""),
            binding_context("alice2", "/memories/a.txt", prefix=""),
            {"s3memory:tenant": "alice"},
            {"s3memory:path": binding_context("alice", "/memories/a.txt", prefix="")["s3memory:path"]},
            {**binding_context("alice", "/memories/a.txt", prefix=""), "extra": "entry"},
            {},
            binding_context("alice", "/memories/a.txt", prefix="app/"),
            binding_context("alice", "/memories/a.txt", version=1),
        ],
        [
            "other-path",
            "trailing-slash",
            "bob",
            "alice2",
            "path-missing",
            "tenant-missing",
            "extra",
            "empty",
            "other-deployment",
            "unbound-v1",
        ],
        by_default={"other-path", "bob", "unbound-v1"},
    ),
)
def test_official_client_rejects_a_mismatched_context(
    make_memory: MakeMemory, official: Any, context: dict[str, str]
) -> None:
    make_memory("s3-kms").create("/memories/a.txt", "secret\n")
    with pytest.raises(OFFICIAL_ERRORS):
        official_read(official, "/memories/a.txt", context)


def test_official_client_rejects_our_object_at_another_key(
    make_memory: MakeMemory, official: Any, s3_client: Any
) -> None:
    """Copied to another path, the object is bound to its original path only."""
    make_memory("s3-kms").create("/memories/a.txt", "secret\n")
    s3_client.copy_object(
        Bucket=BUCKET, Key=key("/memories/b.txt"), CopySource={"Bucket": BUCKET, "Key": key("/memories/a.txt")}
    )
    with pytest.raises(OFFICIAL_ERRORS):
        official_read(official, "/memories/b.txt")
    with pytest.raises(IntegrityError) as info:
        make_memory("s3-kms").view("/memories/b.txt")
    assert str(info.value) == opaque("/memories/b.txt")


def _replace_metadata(s3_client: Any, object_key: str, change: Callable[[dict[str, str]], None]) -> None:
    metadata = dict(s3_client.head_object(Bucket=BUCKET, Key=object_key)["Metadata"])
    change(metadata)
    s3_client.copy_object(
        Bucket=BUCKET,
        Key=object_key,
        CopySource={"Bucket": BUCKET, "Key": object_key},
        Metadata=metadata,
        MetadataDirective="REPLACE",
    )


def _flip_commitment(metadata: dict[str, str]) -> None:
    commitment = bytearray(base64.b64decode(metadata["x-amz-d"]))
    commitment[0] ^= 0x01
    metadata["x-amz-d"] = base64.b64encode(bytes(commitment)).decode()


@pytest.mark.parametrize("writer", ["ours", "theirs"])
def test_flipped_commitment_fails_on_both_sides(
    make_memory: MakeMemory, official: Any, s3_client: Any, writer: str
) -> None:
    memory = make_memory("s3-kms")
    if writer == "ours":
        memory.create("/memories/a.txt", "secret\n")
    else:
        official_write(official, "/memories/a.txt", "secret\n")
    assert official_read(official, "/memories/a.txt") == b"secret\n"
    _replace_metadata(s3_client, key("/memories/a.txt"), _flip_commitment)
    for tool in (memory, make_memory("s3-kms")):
        with pytest.raises(IntegrityError) as info:
            tool.view("/memories/a.txt")
        assert str(info.value) == opaque("/memories/a.txt")
    with pytest.raises(OFFICIAL_ERRORS) as official_info:
        official_read(official, "/memories/a.txt")
    assert "secret" not in str(official_info.value)


def test_flipped_body_fails_on_both_sides(make_memory: MakeMemory, official: Any, s3_client: Any) -> None:
    memory = make_memory("s3-kms")
    memory.create("/memories/a.txt", "secret\n")
    original = s3_client.get_object(Bucket=BUCKET, Key=key("/memories/a.txt"))
    body = bytearray(original["Body"].read())
    body[0] ^= 0x01
    s3_client.put_object(Bucket=BUCKET, Key=key("/memories/a.txt"), Body=bytes(body), Metadata=original["Metadata"])
    with pytest.raises(IntegrityError) as info:
        make_memory("s3-kms").view("/memories/a.txt")
    assert str(info.value) == opaque("/memories/a.txt")
    with pytest.raises(OFFICIAL_ERRORS):
        official_read(official, "/memories/a.txt")


def test_shared_client_is_not_hooked(official: Any, s3_client: Any) -> None:
    """Building the official client leaves the shared raw client raw."""
    official_write(official, "/memories/x.txt", "through the official client\n")
    s3_client.put_object(Bucket=BUCKET, Key="plain.txt", Body=b"plain")
    head = s3_client.head_object(Bucket=BUCKET, Key="plain.txt")
    assert head["Metadata"] == {}
    assert s3_client.get_object(Bucket=BUCKET, Key="plain.txt")["Body"].read() == b"plain"
    raw = s3_client.get_object(Bucket=BUCKET, Key=key("/memories/x.txt"))
    assert raw["Metadata"]["x-amz-c"] == "115"
    assert b"official" not in raw["Body"].read()
