"""Many users, one bucket: each gets an isolated, separately keyed memory.

Runs offline on the embedded default (a local directory store); swap the store for
``bucket=..., s3_client=...`` in production. The user id comes from your authentication,
never from the model.
"""

from __future__ import annotations

import tempfile

from s3memory import KeyCache, LocalDirStore, S3MemoryError, generate_master_key, open_memory


def main() -> None:
    master_key = generate_master_key()
    keys = KeyCache()  # one cache for the process, shared by every user's memory
    with tempfile.TemporaryDirectory() as directory:
        store = LocalDirStore(directory)
        alice = open_memory(user_id="alice", store=store, master_key=master_key, key_cache=keys)
        bob = open_memory(user_id="bob", store=store, master_key=master_key, key_cache=keys)
        print(alice.create("/memories/notes.md", "alice's secret plan\n"))
        print(bob.create("/memories/notes.md", "bob's shopping list\n"))
        print(bob.view("/memories/notes.md"))
        try:  # bob cannot reach alice's files, not even by path tricks
            bob.view("/memories/../../alice/memories/notes.md")
        except S3MemoryError as error:
            print(error)
        print(sorted(info.key for info in store.list("")))
        alice.close()
        bob.close()


if __name__ == "__main__":
    main()
