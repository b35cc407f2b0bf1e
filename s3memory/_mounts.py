"""Memory stores mounted beside the user's own: one tree under ``/memories`` for the model.

A mount is another tenant's store (its own tenant id, keys and history) shown at
``/memories/{name}/``, ``read_only`` or ``read_write``: shared reference material beside
each user's own learnings, as Managed Agents memory stores attach up to 8 stores to a
session. Nothing about a mount is written into the bucket: the mounted store reads the same
whether it is mounted or opened directly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ._errors import ConfigurationError
from ._paths import validate_tenant

Access = Literal["read_only", "read_write"]
ACCESS_MODES: tuple[Access, ...] = ("read_only", "read_write")
MAX_MOUNTS = 8
MAX_DESCRIPTION_CHARS = 1_024
MAX_INSTRUCTIONS_CHARS = 4_096  # the managed stores' per-session ``prompt``
_MOUNT_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


@dataclass(frozen=True)
class Mount:
    """One memory store mounted at ``/memories/{name}/``.

    Attributes:
        name: the mount point's directory name: lowercase ASCII letters, digits, ``. _ -``,
            starting with a letter or digit, at most 64 characters.
        user_id: the mounted store's tenant id (its own keys, history and quota).
        access: ``"read_only"`` (the default: a shared store is reference material) or
            ``"read_write"``. Read-only is checked here before any request, and enforced by
            AWS with the statements of ``s3memory policy --read-only-mount``.
        description: what the store holds, for the model (at most 1,024 characters).
        instructions: how to use it this session (at most 4,096 characters, as the managed
            stores' ``prompt``); see :func:`s3memory.memory_stores_prompt`.
        encrypt_names: whether the mounted store seals its names; ``None``: as the user's own.
    """

    name: str
    user_id: str
    access: Access = "read_only"
    description: str = ""
    instructions: str = ""
    encrypt_names: bool | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _MOUNT_NAME.fullmatch(self.name):
            raise ConfigurationError(
                f"mount name {self.name!r} must be 1-64 lowercase ASCII letters, digits, '.', '_' or '-', "
                "starting with a letter or digit"
            )
        validate_tenant(self.user_id)
        if self.access not in ACCESS_MODES:
            raise ConfigurationError(f"mount {self.name}: access must be 'read_only' or 'read_write'")
        for field, limit in (("description", MAX_DESCRIPTION_CHARS), ("instructions", MAX_INSTRUCTIONS_CHARS)):
            value = getattr(self, field)
            if not isinstance(value, str):
                raise ConfigurationError(f"mount {self.name}: {field} must be a string")
            if len(value) > limit:
                raise ConfigurationError(f"mount {self.name}: {field} is over {limit:,} characters")
        if self.encrypt_names is not None and not isinstance(self.encrypt_names, bool):
            raise ConfigurationError(f"mount {self.name}: encrypt_names must be True, False or None")

    @property
    def read_only(self) -> bool:
        return self.access == "read_only"

    @property
    def path(self) -> str:
        """The mount point as the model sees it, with the trailing slash."""
        return f"/memories/{self.name}/"


def check_mounts(mounts: object, own_user_id: str) -> tuple[Mount, ...]:
    """The mounts, validated together: at most 8, distinct names and tenants, never the
    user's own tenant (mounting it read-only would be a read-only view of a writable store).

    Raises:
        ConfigurationError: any of the above, or an item that is not a :class:`Mount`.
    """
    if isinstance(mounts, (str, bytes)) or not hasattr(mounts, "__iter__"):
        raise ConfigurationError("mounts must be a list of s3memory.Mount")
    checked = tuple(mounts)
    for mount in checked:
        if not isinstance(mount, Mount):
            raise ConfigurationError("mounts must be a list of s3memory.Mount")
    if len(checked) > MAX_MOUNTS:
        raise ConfigurationError(f"at most {MAX_MOUNTS} memory stores can be mounted, not {len(checked)}")
    names, tenants = [m.name for m in checked], [m.user_id for m in checked]
    if len(set(names)) != len(names):
        raise ConfigurationError("two mounts have the same name")
    if len(set(tenants)) != len(tenants):
        raise ConfigurationError("two mounts show the same user_id's store")
    if own_user_id in tenants:
        raise ConfigurationError("the user's own store cannot also be mounted")
    return checked
