"""The bounds a memory enforces before anything is written (:class:`Limits`)."""

from __future__ import annotations

from dataclasses import dataclass

from .._errors import ConfigurationError
from .._paths import DEFAULT_MAX_PATH_BYTES


@dataclass(frozen=True)
class Limits:
    """Bounds enforced before anything is written.

    Attributes:
        max_file_bytes: largest file, in UTF-8 bytes (the managed memory stores use 100 KB).
        max_path_bytes: longest path under ``/memories``, in UTF-8 bytes.
        edit_attempts: how often an edit that lost a race is re-read and re-applied.
        max_workers: concurrent requests one command may issue; 64, the connection pool
            of the clients s3memory builds (a client of yours with a smaller pool opens
            connections beyond it and closes them after each request). A 1,000-file rename
            is about 2,000 requests: 32 round trips at 64, 63 at 32.
        max_view_chars: longest ``view`` answer, in characters; a longer file is cut at a
            line boundary with a notice telling Claude to page with ``view_range``.
        max_tenant_bytes, max_tenant_files: the user's quota (plaintext bytes, files), or
            ``None`` for none. Checked before anything is written, from a listing of the
            user's files made alongside the command's other first requests; concurrent
            writers can together overshoot it by their own writes.
    """

    max_file_bytes: int = 100 * 1024
    max_path_bytes: int = DEFAULT_MAX_PATH_BYTES
    edit_attempts: int = 6
    max_workers: int = 64
    max_view_chars: int = 16_000
    max_tenant_bytes: int | None = None
    max_tenant_files: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_file_bytes", "max_path_bytes", "edit_attempts", "max_workers", "max_view_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"Limits.{name} must be a positive integer")
        for name in ("max_tenant_bytes", "max_tenant_files"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigurationError(f"Limits.{name} must be a positive integer or None")

    @property
    def has_quota(self) -> bool:
        return self.max_tenant_bytes is not None or self.max_tenant_files is not None
