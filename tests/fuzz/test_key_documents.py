"""Fuzzing the tenant key document: in tenant-key mode a user's data keys are wrapped under
a key kept in a JSON document in the bucket (``<tenant>/.s3memory/tenant-key``), which whoever
can write to the bucket can replace. Random and mutated documents (edited fields, fuzzed
lists of retired keys, arbitrary JSON and bytes, nesting bombs) must end in the file read
with the genuine key or in a clear error (``TenantKeyError``, or ``ConfigurationError`` for
a document of another kind of master key); never another exception. Below the fuzz target,
the documents it found that once escaped as other exceptions or were read as another version.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from helpers import MASTER_KEY
from helpers.fuzzing import (
    FILE,
    JSON_BOMBS,
    SIZED_B64,
    TENANT_KEY_OBJECT_EXAMPLES,
    assert_clear_error,
    fuzz,
    json_values,
    mutated_string,
    rig_for,
)
from hypothesis import event, given
from hypothesis import strategies as st

from s3memory import ConfigurationError, InMemoryStore, KeyCache, TenantKeyError, open_memory, parse_path

pytestmark = pytest.mark.slow  # heavy hypothesis: 600 examples

TENANT_KEY = "alice/.s3memory/tenant-key"  # where the rigs' tenant keeps its key document

# Values for the fields of a "retired" entry (a former key kept during a rotation).
RETIRED_FIELD_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "kid": st.one_of(st.text(max_size=16), json_values),
    "wrapped": st.one_of(SIZED_B64, st.text(max_size=10), json_values),
    "retired_at": st.one_of(
        st.floats(),
        st.integers(),
        st.builds(lambda n: 10**n, st.integers(309, 4_000)),  # JSON integers too large for a float
        st.builds(lambda n: -(10**n), st.integers(309, 4_000)),
        json_values,
    ),
}


@st.composite
def retired_lists(draw: st.DrawFn, current: dict[str, Any]) -> object:
    """A "retired" list: well-formed entries with one field at a time made wrong, or a
    list that is wrong as a whole (too long, not a list, the current key listed again)."""
    kind = draw(st.sampled_from(["entries", "entries", "entries", "too many", "current again", "anything"]))
    if kind == "too many":
        return [{"kid": f"k{i}", "wrapped": "", "retired_at": 0} for i in range(draw(st.integers(15, 18)))]
    if kind == "current again":
        return [{"kid": current.get("kid"), "wrapped": current.get("wrapped"), "retired_at": 0}]
    if kind == "anything":
        return draw(json_values)
    entries: list[Any] = []
    for index in range(draw(st.integers(1, 3))):
        entry: dict[str, Any] = {"kid": f"old{index}", "wrapped": draw(SIZED_B64), "retired_at": 1.7e9 + index}
        for _ in range(draw(st.integers(0, 2))):
            field = draw(st.sampled_from(sorted(RETIRED_FIELD_VALUES)))
            if draw(st.integers(0, 3)) == 0:
                entry.pop(field, None)
            else:
                entry[field] = draw(RETIRED_FIELD_VALUES[field])
        entries.append(entry if draw(st.integers(0, 5)) else draw(json_values))
    return entries


@st.composite
def tenant_key_documents(draw: st.DrawFn) -> bytes:
    stored = rig_for("tenant").store.get(TENANT_KEY)
    assert stored is not None
    document: Any = json.loads(stored.body)
    kind = draw(st.sampled_from(["edit", "edit", "retired", "retired", "json", "bytes", "bomb"]))
    if kind == "json":
        return json.dumps(draw(json_values)).encode()
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "bomb":
        return draw(st.sampled_from(JSON_BOMBS)).encode("utf-8", "surrogatepass")
    if kind == "retired":  # the current key intact, the retired ones fuzzed
        document["retired"] = draw(retired_lists(document))
        return json.dumps(document).encode()
    for _ in range(draw(st.integers(1, 3))):
        field = draw(st.sampled_from(["v", "kid", "wrapper", "wrapped", "wrapped", "extra"]))
        if draw(st.integers(0, 4)) == 0:
            document.pop(field, None)
            continue
        options: list[st.SearchStrategy[Any]] = [
            st.sampled_from([1, 2, 0, True, 1.0, "1", None, [], {}, "local", "kms", "", "\ud800"]),
            json_values,
        ]
        if isinstance(document.get(field), str):
            options.append(mutated_string(document[field]))
        if field == "wrapped":
            options.append(SIZED_B64)  # under 8 bytes, the nonce is too short for AES-GCM
        document[field] = draw(draw(st.sampled_from(options)))
    return json.dumps(document, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")


@fuzz(TENANT_KEY_OBJECT_EXAMPLES, slow=True)
@given(document=tenant_key_documents(), metadata=st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=2))
def test_fuzz_tenant_key_object(document: bytes, metadata: dict[str, str]) -> None:
    rig = rig_for("tenant")
    original = rig.store.get(TENANT_KEY)
    assert original is not None
    store = InMemoryStore()
    store.put(TENANT_KEY, document, metadata)
    file_key = rig.writer.layout.key_for(parse_path(FILE))
    store.put(file_key, rig.original.body, rig.original.metadata)
    tool = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    try:
        answer = tool.view(FILE)
    except TenantKeyError as error:
        event("tenant key refused")
        assert type(error) is TenantKeyError
        assert_clear_error(error, None)
        return
    except ConfigurationError as error:
        event("wrong kind of master key")
        parsed = json.loads(document)
        assert isinstance(parsed, dict) and parsed.get("wrapper") != "local"
        assert_clear_error(error, None)
        return
    finally:
        tool.close()
    event("read")
    assert "remember the milk" in answer
    parsed, expected = json.loads(document), json.loads(original.body)
    assert (parsed["v"], parsed["kid"], parsed["wrapper"]) == (expected["v"], expected["kid"], expected["wrapper"])
    assert base64.b64decode(parsed["wrapped"]) == base64.b64decode(expected["wrapped"])


def test_tenant_key_document_with_a_huge_retired_at_is_refused_as_corrupt() -> None:
    """Found by test_fuzz_tenant_key_object: a JSON integer too large for a float in a
    retired key's ``retired_at`` must be a corrupt document (TenantKeyError), not an
    OverflowError escaping ``float()``."""
    rig = rig_for("tenant")
    stored = rig.store.get(TENANT_KEY)
    assert stored is not None
    document = json.loads(stored.body)
    document["retired"] = [{"kid": "old", "wrapped": "", "retired_at": 10**400}]
    store = InMemoryStore()
    store.put(TENANT_KEY, json.dumps(document).encode(), {})
    store.put(rig.writer.layout.key_for(parse_path(FILE)), rig.original.body, rig.original.metadata)
    tool = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    try:
        with pytest.raises(TenantKeyError):
            tool.view(FILE)
    finally:
        tool.close()


@pytest.mark.parametrize("version", [2.0, 3.0, 3, True], ids=["2.0", "3.0", "3-without-kept-keys", "true"])
def test_tenant_key_document_with_a_version_it_was_not_written_as_is_refused(version: object) -> None:
    """Found by test_fuzz_tenant_key_object: a float (or a bool) equals a version number in
    Python, and version 3 is only written with kept keys. Each is a document s3memory never
    wrote, so it is corrupt, not read as another version."""
    rig = rig_for("tenant")
    stored = rig.store.get(TENANT_KEY)
    assert stored is not None
    document = json.loads(stored.body)
    assert document["v"] == 2 and not document.get("kept")
    document["v"] = version
    store = InMemoryStore()
    store.put(TENANT_KEY, json.dumps(document).encode(), {})
    store.put(rig.writer.layout.key_for(parse_path(FILE)), rig.original.body, rig.original.metadata)
    tool = open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())
    try:
        with pytest.raises(TenantKeyError):
            tool.view(FILE)
    finally:
        tool.close()
