"""The MCP server's environment in tests."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["server_environment"]


def server_environment(home: Path, user: str = "alice") -> dict[str, str]:
    """This process's environment without any S3MEMORY_* setting, on the local store in ``home``."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("S3MEMORY_")}
    env.update(S3MEMORY_HOME=str(home), S3MEMORY_USER=user)
    return env
