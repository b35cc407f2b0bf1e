"""The memory tool's semantics: the commands, rename, quarantine, mounts, access markers."""
