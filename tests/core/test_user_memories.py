"""``UserMemories``: one set of options, the memory of whichever user a run names."""

from __future__ import annotations

import os
from typing import Any

import pytest
from helpers import BUCKET

from s3memory import (
    ConfigurationError,
    EncryptedMemory,
    InMemoryStore,
    Mount,
    MountedMemory,
    NoUserError,
    PathNotFoundError,
    UserMemories,
    open_memory,
)
from s3memory.integrations._common import memory_of_run, memory_or_users

KEY = bytes(range(32))


def test_each_user_gets_an_isolated_memory() -> None:
    store = InMemoryStore()
    memories = UserMemories(store=store, master_key=KEY)
    memories.open("alice").create("/memories/a.md", "alice's\n")
    with pytest.raises(PathNotFoundError):
        memories.open("bob").read_text("/memories/a.md")
    assert memories.open("alice").read_text("/memories/a.md") == "alice's\n"
    # The same bytes as a memory opened directly: UserMemories adds no format of its own.
    assert open_memory(user_id="alice", store=store, master_key=KEY).read_text("/memories/a.md") == "alice's\n"


def test_the_bucket_store_is_made_once_and_shared(s3_client: Any) -> None:
    memories = UserMemories(bucket=BUCKET, master_key=KEY)
    alice, bob = memories.open("alice"), memories.open("bob")
    assert isinstance(alice, EncryptedMemory) and isinstance(bob, EncryptedMemory)
    assert alice.store is bob.store  # one client, one connection pool


def test_options_are_checked_at_construction() -> None:
    with pytest.raises(ConfigurationError):
        UserMemories(store=InMemoryStore(), master_key=b"short")
    with pytest.raises(TypeError, match="without user_id"):
        UserMemories(store=InMemoryStore(), master_key=KEY, user_id="alice")
    with pytest.raises(TypeError, match="unexpected keyword"):
        UserMemories(store=InMemoryStore(), master_key=KEY, colour="red")  # type: ignore[call-arg]


@pytest.mark.parametrize("user_id", ["../bob", "alice/x", "memories", "", 7])
def test_a_user_id_is_validated(user_id: object) -> None:
    memories = UserMemories(store=InMemoryStore(), master_key=KEY)
    with pytest.raises(ConfigurationError):
        memories.open(user_id)  # type: ignore[arg-type]


def test_mounts_are_opened_for_every_user() -> None:
    store = InMemoryStore()
    open_memory(user_id="team", store=store, master_key=KEY).create("/memories/rules.md", "be kind\n")
    memories = UserMemories(store=store, master_key=KEY, mounts=[Mount("shared", "team")])
    for user in ("alice", "bob"):
        memory = memories.open(user)
        assert isinstance(memory, MountedMemory)
        assert memory.read_text("/memories/shared/rules.md") == "be kind\n"


def test_an_opener_varies_the_options_per_user() -> None:
    store = InMemoryStore()
    memories = UserMemories(lambda user: open_memory(user_id=user, store=store, master_key=KEY, actor=f"user:{user}"))
    memory = memories.open("alice")
    memory.create("/memories/a.md", "x\n")
    assert [version.actor for version in memory.history("/memories/a.md")] == ["user:alice"]
    with pytest.raises(TypeError):
        UserMemories(lambda user: memory, store=store)


def test_adapters_take_one_memory_or_the_users_memories() -> None:
    store = InMemoryStore()
    one = memory_or_users(None, {"user_id": "alice", "store": store, "master_key": KEY})
    assert isinstance(one, EncryptedMemory)
    assert memory_of_run(one, None, "unused") is one  # one memory: the run's user is not asked
    many = memory_or_users(None, {"store": store, "master_key": KEY})
    assert isinstance(many, UserMemories)
    assert memory_or_users(many, {}) is many
    with pytest.raises(TypeError):
        memory_or_users(many, {"store": store})
    with pytest.raises(NoUserError, match="pass context"):
        memory_of_run(many, None, "pass context=...")
    with pytest.raises(NoUserError):
        memory_of_run(many, "", "pass context=...")
    assert issubclass(NoUserError, ConfigurationError)
    bob = memory_of_run(many, "bob", "unused")
    assert isinstance(bob, EncryptedMemory) and bob.layout.tenant == "bob"


def test_nothing_is_left_between_users_in_the_process() -> None:
    """Two UserMemories with different master keys over one store: neither reads the other's."""
    store = InMemoryStore()
    UserMemories(store=store, master_key=KEY).open("alice").create("/memories/a.md", "x\n")
    other = UserMemories(store=store, master_key=os.urandom(32)).open("alice")
    with pytest.raises(Exception) as caught:
        other.read_text("/memories/a.md")
    assert "a.md" not in type(caught.value).__name__


def test_a_sample_memory_shows_what_every_user_shares() -> None:
    store = InMemoryStore()
    memories = UserMemories(store=store, master_key=KEY, mounts=[Mount("shared", "team")])
    sample = memories.sample()
    assert isinstance(sample, MountedMemory) and [mount.name for mount in sample.mounts] == ["shared"]
    assert list(store.list("")) == []  # nothing written
