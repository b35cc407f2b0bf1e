"""Key wrapping, once per keyring: the contract the three moto flavours share.

The memory semantics run in the default tier on one moto flavour (``s3-tenant-local``); the
other two (``s3-tenant-kms``, ``s3-kms``) differ from it only in how a file's data key is
wrapped, and run the semantics in the slow tier. This file is what each keyring must do,
in the default tier:

- ``tenant-local``: the data key wrapped (AES-GCM, ``x-amz-w`` "02") by a tenant key whose
  document is sealed by a local master key;
- ``tenant-kms``: the same, the tenant key's document sealed by KMS;
- ``kms``: a KMS data key per object (``x-amz-w`` "12"), the binding as its encryption context.

For each: a file created, edited, renamed (its key re-wrapped for the new path, the body
untouched), restored (an old version written back, also from before a rename), read by a
cold process (a fresh ``KeyCache``), and refused when moved to another path or tenant, or
when its wrapped key is altered; and, for the two tenant-key keyrings, a rotation of the
tenant key re-wraps every file.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

import pytest
from helpers import BUCKET

from s3memory import EncryptedMemory, IntegrityError, binding_context, parse_path, rotate_tenant_key

MakeMemory = Callable[..., EncryptedMemory]
Metadata = dict[str, str]

# keyring -> (flavour of conftest's make_memory, x-amz-w, metadata field holding the binding)
KEYRINGS = {
    "tenant-local": ("s3-tenant-local", "02", "x-amz-m"),
    "tenant-kms": ("s3-tenant-kms", "02", "x-amz-m"),
    "kms": ("s3-kms", "12", "x-amz-t"),
}
OPAQUE = "failed its integrity check and cannot be read"


@pytest.fixture(params=list(KEYRINGS))
def keyring(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Keyring:
    """Memories of one keyring on one versioned moto bucket, and the KMS calls they make."""

    def __init__(self, name: str, make_memory: MakeMemory, request: pytest.FixtureRequest) -> None:
        self.flavour, self.wrap_algorithm, self.binding_field = KEYRINGS[name]
        self.uses_kms = name != "tenant-local"
        self._make = make_memory
        s3 = request.getfixturevalue("s3_client")  # the one make_memory uses
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        self.kms_calls: list[str] = []
        if self.uses_kms:
            kms = request.getfixturevalue("kms_client")  # the one make_memory uses
            kms.meta.events.register("before-call.kms", lambda model, **_: self.kms_calls.append(model.name))

    def memory(self, user_id: str = "alice") -> EncryptedMemory:
        """A memory of a cold process: a key cache of its own."""
        return self._make(self.flavour, user_id=user_id)


@pytest.fixture
def ring(keyring: str, make_memory: MakeMemory, request: pytest.FixtureRequest) -> Keyring:
    return Keyring(keyring, make_memory, request)


def key_of(memory: EncryptedMemory, path: str) -> str:
    return memory.layout.key_for(parse_path(path))


def raw(memory: EncryptedMemory, path: str) -> tuple[bytes, Metadata]:
    stored = memory.store.get(key_of(memory, path))
    assert stored is not None
    return bytes(stored.body), dict(stored.metadata)


def plant(memory: EncryptedMemory, path: str, body: bytes, metadata: Metadata) -> None:
    memory.store.put(key_of(memory, path), body, metadata)


def bound_to(ring: Keyring, metadata: Metadata, path: str, tenant: str = "alice") -> bool:
    recorded = json.loads(metadata[ring.binding_field])
    return binding_context(tenant, path).items() <= recorded.items()


def assert_refused(memories: list[EncryptedMemory], path: str) -> None:
    for memory in memories:
        with pytest.raises(IntegrityError) as info:
            memory.read_text(path)
        assert OPAQUE in str(info.value)


def test_a_file_is_wrapped_for_its_path_and_a_cold_process_reads_it(ring: Keyring) -> None:
    writer = ring.memory()
    writer.create("/memories/a.md", "one\n")
    _, metadata = raw(writer, "/memories/a.md")
    assert metadata["x-amz-w"] == ring.wrap_algorithm
    assert bound_to(ring, metadata, "/memories/a.md")
    assert not bound_to(ring, metadata, "/memories/b.md")
    ring.kms_calls.clear()
    assert ring.memory().read_text("/memories/a.md") == "one\n"
    # A cold process unwraps through KMS when the keyring is KMS's, never otherwise.
    assert ("Decrypt" in ring.kms_calls) is ring.uses_kms


def test_an_edit_wraps_a_fresh_data_key(ring: Keyring) -> None:
    writer = ring.memory()
    writer.create("/memories/a.md", "one\n")
    _, before = raw(writer, "/memories/a.md")
    writer.str_replace("/memories/a.md", "one", "two")
    writer.insert("/memories/a.md", 0, "zero\n")
    _, after = raw(writer, "/memories/a.md")
    assert after["x-amz-3"] != before["x-amz-3"] and after["x-amz-i"] != before["x-amz-i"]
    assert bound_to(ring, after, "/memories/a.md")
    assert ring.memory().read_text("/memories/a.md") == "zero\ntwo\n"


def test_a_rename_rewraps_the_key_for_the_new_path(ring: Keyring) -> None:
    writer = ring.memory()
    writer.create("/memories/a.md", "one\n")
    old_body, old_metadata = raw(writer, "/memories/a.md")
    writer.rename("/memories/a.md", "/memories/b.md")
    new_body, new_metadata = raw(writer, "/memories/b.md")
    assert new_body == old_body  # the content is not re-encrypted: only its key is re-wrapped
    assert new_metadata["x-amz-3"] != old_metadata["x-amz-3"]
    assert bound_to(ring, new_metadata, "/memories/b.md") and not bound_to(ring, new_metadata, "/memories/a.md")
    assert ring.memory().read_text("/memories/b.md") == "one\n"
    # The object as it was before the rename does not open at the new path, nor the renamed one at the old.
    plant(writer, "/memories/b.md", old_body, old_metadata)
    plant(writer, "/memories/a.md", new_body, new_metadata)
    assert_refused([writer, ring.memory()], "/memories/b.md")
    assert_refused([writer, ring.memory()], "/memories/a.md")


def test_a_directory_rename_rewraps_every_file(ring: Keyring) -> None:
    writer = ring.memory()
    for n in range(3):
        writer.create(f"/memories/dir/f{n}.md", f"file {n}\n")
    writer.rename("/memories/dir", "/memories/moved")
    cold = ring.memory()
    for n in range(3):
        assert cold.read_text(f"/memories/moved/f{n}.md") == f"file {n}\n"
        assert bound_to(ring, raw(cold, f"/memories/moved/f{n}.md")[1], f"/memories/moved/f{n}.md")


def test_a_restored_version_is_wrapped_for_where_it_is_restored(ring: Keyring) -> None:
    writer = ring.memory()
    writer.create("/memories/a.md", "one\n")
    writer.str_replace("/memories/a.md", "one", "two")
    first = writer.history("/memories/a.md")[-1].version
    writer.restore("/memories/a.md", first)
    assert ring.memory().read_text("/memories/a.md") == "one\n"
    # A version from before a rename, restored at the new path: re-wrapped for that path.
    writer.str_replace("/memories/a.md", "one", "three")
    writer.rename("/memories/a.md", "/memories/b.md")
    writer.restore("/memories/b.md", first)
    cold = ring.memory()
    assert cold.read_text("/memories/b.md") == "one\n"
    assert bound_to(ring, raw(cold, "/memories/b.md")[1], "/memories/b.md")
    assert all(entry.verified for entry in cold.history("/memories/b.md"))


def test_an_object_moved_to_another_path_or_tenant_is_refused(ring: Keyring) -> None:
    alice = ring.memory()
    bob = ring.memory(user_id="bob")
    alice.create("/memories/a.md", "alice's secret\n")
    alice.create("/memories/b.md", "harmless\n")
    bob.create("/memories/a.md", "bob's diary\n")
    plant(alice, "/memories/b.md", *raw(alice, "/memories/a.md"))  # another path, same tenant
    assert_refused([alice, ring.memory()], "/memories/b.md")
    plant(alice, "/memories/a.md", *raw(bob, "/memories/a.md"))  # the same path, another tenant
    assert_refused([alice, ring.memory()], "/memories/a.md")
    assert ring.memory(user_id="bob").read_text("/memories/a.md") == "bob's diary\n"


def test_an_altered_wrapped_key_is_refused(ring: Keyring) -> None:
    writer = ring.memory()
    writer.create("/memories/a.md", "one\n")
    body, metadata = raw(writer, "/memories/a.md")
    wrapped = bytearray(base64.b64decode(metadata["x-amz-3"]))
    wrapped[-1] ^= 0x01
    plant(writer, "/memories/a.md", body, {**metadata, "x-amz-3": base64.b64encode(bytes(wrapped)).decode()})
    assert_refused([writer, ring.memory()], "/memories/a.md")


@pytest.mark.parametrize("keyring", ["tenant-local", "tenant-kms"])
def test_a_tenant_key_rotation_rewraps_every_file(ring: Keyring) -> None:
    writer = ring.memory()
    paths = ["/memories/a.md", "/memories/dir/b.md"]
    for path in paths:
        writer.create(path, f"{path}\n")
    before = {path: raw(writer, path) for path in paths}
    ring.kms_calls.clear()
    report = rotate_tenant_key(writer, retire_after=0)
    assert report.complete and report.rewrapped == len(paths)
    # The new tenant key's document is sealed by the keyring's master key: KMS's or the local one.
    assert ("Encrypt" in ring.kms_calls) is ring.uses_kms
    cold = ring.memory()
    for path in paths:
        body, metadata = raw(cold, path)
        assert body == before[path][0] and metadata["x-amz-3"] != before[path][1]["x-amz-3"]
        assert bound_to(ring, metadata, path)
        assert cold.read_text(path) == f"{path}\n"
