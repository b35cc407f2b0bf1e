"""The exception tree of s3memory.

Every error s3memory raises is an ``S3MemoryError``. Its message is the text the model
sees (the memory tool contract's strings where the contract gives one), so the SDK
adapters can hand ``str(error)`` to ``ToolError`` unchanged. Each subclass also
inherits the Python built-in that a caller would naturally catch::

    S3MemoryError
    ├── ConfigurationError (ValueError)       bad user id, master key, options
    │   └── NoUserError                       a run of a many-user adapter named no user
    │       └── ThreadUserError               a run named another user than its thread's
    ├── InvalidCommandError (ValueError)      malformed command input from the model
    │   ├── InvalidPathError                  traversal, bad characters, look-alikes, too long
    │   ├── EditError                         old_str not found / not unique, bad line
    │   ├── SensitiveDataError                a secret in text to write (in _screening.secrets)
    │   ├── ReadOnlyMountError                a write to a store mounted read-only
    │   └── WriteHeldError                    a write held for review (in _core.quarantine)
    ├── LimitExceededError (ValueError)       file too large
    ├── PathNotFoundError (FileNotFoundError)
    │   └── VersionNotFoundError              no such version of the path (or it was redacted)
    ├── PathExistsError (FileExistsError)
    ├── NotADirectoryConflict (NotADirectoryError)  a file where a directory is needed
    ├── IntegrityError                        one opaque error for every failed decryption
    │   └── TenantKeyError                    the tenant key is missing, tampered or unwrappable
    ├── ForeignObjectError                    an object that s3memory did not write
    └── StorageError (OSError)                the object store or KMS failed
        ├── PreconditionFailedError           a conditional request lost a race
        ├── StorageAccessDeniedError (PermissionError)
        ├── BucketNotFoundError
        ├── StorageUnavailableError           throttling, timeouts, network
        └── ObjectTooLargeError               a stored object over the reader's size bound
"""

from __future__ import annotations

import logging
from collections.abc import Callable


class S3MemoryError(Exception):
    """Root of every error raised by s3memory. ``str(error)`` is safe to show the model."""


class ConfigurationError(S3MemoryError, ValueError):
    """The tool was built with invalid options (user id, master key, bucket...)."""


class NoUserError(ConfigurationError):
    """An adapter that serves many users was run without the run naming its user (in the
    framework's per-run context). Raised to the application, never answered to the model."""


class ThreadUserError(NoUserError):
    """A run of a many-user agent named a user other than the one its conversation thread
    (a LangGraph ``thread_id`` with a checkpointer) was started by: the thread's state (its
    messages, tool results, a loaded ``AGENTS.md``) is that user's, so the run is refused
    before any model call. Raised to the application, never answered to the model."""


class InvalidCommandError(S3MemoryError, ValueError):
    """The model sent a command that is malformed (missing or mistyped field)."""


class InvalidPathError(InvalidCommandError):
    """A path that is not a safe, canonical path under ``/memories``."""


class ReadOnlyMountError(InvalidCommandError):
    """A create, edit, delete or rename touching a memory store mounted ``read_only``;
    nothing was requested of the store."""


class EditError(InvalidCommandError):
    """An edit that cannot be applied: ``old_str`` absent or repeated, bad line number."""


class LimitExceededError(S3MemoryError, ValueError):
    """A write that would exceed a configured limit; nothing was written."""


class PathNotFoundError(S3MemoryError, FileNotFoundError):
    """The path names no file (or, where a directory would do, no directory)."""


class VersionNotFoundError(PathNotFoundError):
    """The path has no version by that id, or its content was redacted."""


class PathExistsError(S3MemoryError, FileExistsError):
    """The path is already taken by a file or a directory."""


class NotADirectoryConflict(S3MemoryError, NotADirectoryError):
    """A path would need a file to be a directory (``/memories/a.txt/b``)."""


class IntegrityError(S3MemoryError):
    """A stored object failed authentication.

    Deliberately uninformative: tampered body or metadata, truncation, an object moved
    from another path or tenant, and a wrong key all look the same to the caller.
    """


class TenantKeyError(IntegrityError):
    """The tenant's key object is missing, tampered with, or not unwrappable by this master key."""


class ForeignObjectError(S3MemoryError):
    """An object under the tenant's prefix that s3memory did not write (not encrypted)."""


class StorageError(S3MemoryError, OSError):
    """The object store (or KMS) failed. The original exception is the ``__cause__``."""


class PreconditionFailedError(StorageError):
    """A conditional request (If-Match / If-None-Match) did not hold, or a precondition of
    the management API (``NotExists``, ``Sha256``) did not. ``path`` names the file when
    known; ``expected`` is the content SHA-256 the caller required and ``actual`` the one
    found (``None`` for a missing file), when the precondition was on content."""

    def __init__(
        self,
        message: str = "Error: a precondition failed",
        *,
        path: str | None = None,
        expected: str | None = None,
        actual: str | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.expected = expected
        self.actual = actual


class StorageAccessDeniedError(StorageError, PermissionError):
    """The credentials in use may not perform the request."""


class BucketNotFoundError(StorageError):
    """The configured bucket does not exist."""


class StorageUnavailableError(StorageError):
    """Throttling, a timeout or a network failure that outlasted the retries."""


class ObjectTooLargeError(StorageError):
    """A stored object is larger than the reader allows; it was not read (a planted
    multi-gigabyte object must not exhaust memory). ``size`` is what the store reported,
    or ``None`` if it could not tell before reading."""

    def __init__(
        self, message: str = "Error: a stored object is too large to read", *, size: int | None = None
    ) -> None:
        super().__init__(message)
        self.size = size


def answer_for_model(call: Callable[[], str]) -> tuple[str, bool]:
    """Run one memory call for a model: ``(text, is_error)``. s3memory's own errors answer
    with their contract strings; anything unexpected with a generic message and a log
    entry, never a traceback (which could carry a path or a stored byte)."""
    try:
        return call(), False
    except S3MemoryError as exc:
        return str(exc), True
    except Exception as exc:
        return unexpected_error_text(exc), True


def unexpected_error_text(exc: Exception) -> str:
    """What a model may see of an error s3memory did not expect: its class name only. The
    error is logged with its traceback (call this in the ``except`` block that caught it)."""
    logging.getLogger("s3memory").error("unexpected error in the s3memory backend", exc_info=exc)
    return f"Error: The memory backend failed unexpectedly ({type(exc).__name__})."
