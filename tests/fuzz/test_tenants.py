"""Fuzzing user ids and pairs of tenants: user ids come from the application, and every one
is either refused with a clear configuration error or becomes a single safe key segment;
two different tenants under a shared bucket prefix never reach each other's keys (nor their
internal ones), whatever the ids and the path.
"""

from __future__ import annotations

import unicodedata

import pytest
from helpers import MASTER_KEY
from helpers.fuzzing import TENANT_PAIR_EXAMPLES, USER_ID_EXAMPLES, fuzz, parse_or_none
from helpers.path_rules import BAD_CATEGORIES
from helpers.path_strategies import TENANT_CHARS, PathString, prefixes, tenant_ids, valid_leaning_paths
from hypothesis import event, given
from hypothesis import strategies as st

from s3memory import (
    ConfigurationError,
    InMemoryStore,
    KeyCache,
    MemoryPath,
    TenantLayout,
    open_memory,
    validate_tenant,
)

pytestmark = pytest.mark.slow  # heavy hypothesis: 2,000 examples

# --- user ids -------------------------------------------------------------------------

user_id_inputs = st.one_of(
    tenant_ids,
    st.text(max_size=140),
    st.text(TENANT_CHARS + "/\\ .:*?\x00\t\u00e9\u200b\uff0f\uff0e", max_size=140),
    st.builds(
        lambda tenant, index, bad: tenant[:index] + bad + tenant[index:],
        tenant_ids,
        st.integers(0, 128),
        st.sampled_from(["/", "\\", "..", "\x00", "\n", " ", "\u00e9", "\u200b", "\uff0f", "%2f", "*", ":"]),
    ),
    st.sampled_from(
        [
            "",
            ".",
            "..",
            "/",
            "a/",
            "/a",
            "a/../b",
            "alice/memories",
            "alice/.s3memory",
            ".s3memory",
            "%2e%2e",
            "\uff0e\uff0e",
            "\uff41lice",  # fullwidth a
            "alice\n",
            " alice",
            "alice ",
            "-alice",
            "_alice",
            "@alice",
            "a" * 128,
            "a" * 129,
            "1" * 200,
        ]
    ),
    st.binary(max_size=20),
    st.just(b"alice"),
    st.none(),
    st.integers(),
    st.booleans(),
    st.floats(),
    st.lists(tenant_ids, max_size=2),
    tenant_ids.map(PathString),
)


@fuzz(USER_ID_EXAMPLES)
@given(user_id=user_id_inputs, prefix=prefixes)
def test_fuzz_user_ids_are_safe_key_segments_or_refused(user_id: object, prefix: str) -> None:
    try:
        accepted = validate_tenant(user_id)
    except ConfigurationError as error:
        event("refused")
        assert type(error) is ConfigurationError and isinstance(error, ValueError)
        _assert_clear_error_config(error)
        with pytest.raises(ConfigurationError):
            TenantLayout(user_id, prefix)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError):
            open_memory(user_id=user_id, store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache())  # type: ignore[arg-type]
        return
    event("accepted")
    assert accepted == user_id and isinstance(user_id, str)
    assert 1 <= len(user_id) <= 128
    assert user_id not in (".", "..") and not user_id.startswith(".")
    assert user_id.lower() != "memories"  # reserved, in any case
    assert "/" not in user_id and "\\" not in user_id and "%" not in user_id
    assert user_id.isascii() and user_id.isprintable() and not any(ch.isspace() for ch in user_id)
    layout = TenantLayout(user_id, prefix)
    assert layout.tenant_prefix == f"{prefix}{user_id}/"
    assert layout.memory_prefix == f"{prefix}{user_id}/memories/"
    assert layout.internal_prefix == f"{prefix}{user_id}/.s3memory/"
    assert not layout.memory_prefix.startswith(layout.internal_prefix)
    assert not layout.internal_prefix.startswith(layout.memory_prefix)
    memory = open_memory(
        user_id=user_id, prefix=prefix, store=InMemoryStore(), master_key=MASTER_KEY, key_cache=KeyCache()
    )
    assert memory.layout == layout


def _assert_clear_error_config(error: ConfigurationError) -> None:
    """A refusal of a user id: it names ``user_id``, with nothing raw."""
    message = str(error)
    assert "user_id" in message, message
    assert not any(unicodedata.category(ch) in BAD_CATEGORIES for ch in message), repr(message)
    message.encode("utf-8")


# --- pairs of tenants -----------------------------------------------------------------


@st.composite
def tenant_pairs(draw: st.DrawFn) -> tuple[str, str]:
    first = draw(tenant_ids)
    second = draw(
        st.one_of(
            tenant_ids,
            st.sampled_from(["2", "-x", ".", "@", "_", "=", "+", "a", ".s3memory", "/memories"]).map(
                lambda s: first + s
            ),
            st.integers(1, 128).map(lambda n: first[:n]),
            st.just(first.swapcase()),
            st.just(first),
        )
    )
    return first, second


@fuzz(TENANT_PAIR_EXAMPLES)
@given(pair=tenant_pairs(), prefix=prefixes, raw_path=valid_leaning_paths())
def test_fuzz_tenants_never_reach_each_others_keys(pair: tuple[str, str], prefix: str, raw_path: str) -> None:
    first, second = pair
    try:
        a, b = TenantLayout(first, prefix), TenantLayout(second, prefix)
    except ConfigurationError:
        event("second id refused")
        return
    if first == second:
        event("same tenant")
        assert a == b and a.tenant_prefix == b.tenant_prefix
        return
    event("different tenants")
    path = parse_or_none(raw_path)
    for x, y in ((a, b), (b, a)):
        assert not x.tenant_prefix.startswith(y.tenant_prefix), (x.tenant_prefix, y.tenant_prefix)
        keys = [
            x.tenant_prefix,
            x.memory_prefix,
            x.internal_prefix,
            x.internal_prefix + "tenant-key",
            x.internal_prefix + "intents/rename-0123",
            x.key_for(MemoryPath("notes.txt")),
        ]
        if path is not None and not path.is_root:
            keys += [x.key_for(path), x.dir_prefix(path)]
        for key in keys:
            assert not key.startswith(y.tenant_prefix), (key, y.tenant_prefix)
            assert y.path_for_key(key) is None
        # an internal key of one tenant is never a memory key of any tenant, its own included
        assert x.path_for_key(x.internal_prefix + "tenant-key") is None
