"""The embedded default from Python: a local directory store and a local master key."""

from __future__ import annotations

import tempfile

from s3memory import LocalDirStore, generate_master_key, open_memory


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        memory = open_memory(user_id="alice", store=LocalDirStore(directory), master_key=generate_master_key())
        print(memory.create("/memories/todo.md", "- write the README\n"))
        print(memory.insert("/memories/todo.md", 1, "- run the tests"))
        print(memory.view("/memories"))
        print(memory.view("/memories/todo.md"))
        memory.close()


if __name__ == "__main__":
    main()
