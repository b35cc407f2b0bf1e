"""One table from AWS (S3 and KMS) error codes to s3memory errors, applied in one place.

Imported only by the AWS-backed store and key sources, so the local default never pays for
botocore. The original botocore exception is always kept as ``__cause__``.
"""

from __future__ import annotations

from typing import Any

from .._errors import (
    BucketNotFoundError,
    IntegrityError,
    PreconditionFailedError,
    S3MemoryError,
    StorageAccessDeniedError,
    StorageError,
    StorageUnavailableError,
)

# error code -> (exception class, message for the model). Codes not listed fall back to
# StorageError with the code named, so nothing raw ever reaches the model.
ERROR_TABLE: dict[str, tuple[type[S3MemoryError], str]] = {
    # conditional requests
    "PreconditionFailed": (PreconditionFailedError, "a concurrent change won the race"),
    "ConditionalRequestConflict": (PreconditionFailedError, "a concurrent change won the race"),
    "412": (PreconditionFailedError, "a concurrent change won the race"),
    # permissions
    "AccessDenied": (StorageAccessDeniedError, "access to the memory store was denied"),
    "AccessDeniedException": (StorageAccessDeniedError, "access to the encryption key was denied"),
    "AllAccessDisabled": (StorageAccessDeniedError, "access to the memory store was denied"),
    "InvalidAccessKeyId": (StorageAccessDeniedError, "the AWS credentials are not valid"),
    "SignatureDoesNotMatch": (StorageAccessDeniedError, "the AWS credentials are not valid"),
    "ExpiredToken": (StorageAccessDeniedError, "the AWS credentials have expired"),
    "UnrecognizedClientException": (StorageAccessDeniedError, "the AWS credentials are not valid"),
    # missing resources
    "NoSuchBucket": (BucketNotFoundError, "the memory bucket does not exist"),
    "NotFoundException": (StorageError, "the KMS key does not exist"),
    "DisabledException": (StorageError, "the KMS key is disabled"),
    "KMSInvalidStateException": (StorageError, "the KMS key is not usable in its current state"),
    # a ciphertext KMS will not open under the given context: treat as tampering
    "InvalidCiphertextException": (IntegrityError, "a stored key failed its integrity check"),
    "IncorrectKeyException": (IntegrityError, "a stored key failed its integrity check"),
    # transient, after botocore's own retries gave up
    "SlowDown": (StorageUnavailableError, "the memory store is throttling requests; try again shortly"),
    "Throttling": (StorageUnavailableError, "requests are being throttled; try again shortly"),
    "ThrottlingException": (StorageUnavailableError, "requests are being throttled; try again shortly"),
    "RequestLimitExceeded": (StorageUnavailableError, "requests are being throttled; try again shortly"),
    "ServiceUnavailable": (StorageUnavailableError, "the memory store is unavailable; try again shortly"),
    "InternalError": (StorageUnavailableError, "the memory store had an internal error; try again"),
    "KMSInternalException": (StorageUnavailableError, "KMS had an internal error; try again"),
    "RequestTimeout": (StorageUnavailableError, "the request timed out; try again"),
    # bad requests that indicate a deployment problem
    "EntityTooLarge": (StorageError, "the object is too large for the memory store"),
    "MetadataTooLarge": (StorageError, "the object metadata is too large for the memory store"),
    "KeyTooLongError": (StorageError, "the object key is too long for the memory store"),
    "InvalidBucketName": (BucketNotFoundError, "the memory bucket name is not valid"),
}


def map_aws_error(exc: BaseException, operation: str, client: Any = None) -> S3MemoryError:
    """Translate a botocore exception into an s3memory error (to be raised ``from exc``).

    A network failure names the endpoint (scheme and host of ``client``'s endpoint, never a
    request's path, which holds the tenant and file name) and, for a timeout, how long each
    attempt waited.
    """
    from botocore.exceptions import (
        ClientError,
        ConnectionError,
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        ReadTimeoutError,
    )

    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        cls, text = (
            ERROR_TABLE.get(code)
            or ERROR_TABLE.get(str(status))
            or (
                StorageError,
                f"the request failed ({code or status})",
            )
        )
        return cls(f"Error: Memory storage failed during {operation}: {text}.")
    if isinstance(exc, NoCredentialsError):
        return StorageAccessDeniedError(f"Error: Memory storage failed during {operation}: no AWS credentials.")
    if isinstance(exc, (ConnectTimeoutError, ReadTimeoutError)):
        waited = _timeout_of(client, "connect" if isinstance(exc, ConnectTimeoutError) else "read")
        within = f" within {waited:g} s" if waited else ""
        what = "could not connect to" if isinstance(exc, ConnectTimeoutError) else "had no answer from"
        return StorageUnavailableError(
            f"Error: Memory storage failed during {operation}: {what} {_endpoint(client, exc)}{within}"
            f"{_attempts(client)}; try again."
        )
    if isinstance(exc, (EndpointConnectionError, ConnectionError)):
        return StorageUnavailableError(
            f"Error: Memory storage failed during {operation}: {_endpoint(client, exc)} could not be reached; "
            "try again."
        )
    return StorageError(f"Error: Memory storage failed during {operation}: {type(exc).__name__}.")


def _endpoint(client: Any, exc: BaseException) -> str:
    """The endpoint's scheme and host, for people: the client's, else the failed request's."""
    from urllib.parse import urlsplit

    url = getattr(getattr(client, "meta", None), "endpoint_url", None) or getattr(exc, "kwargs", {}).get(
        "endpoint_url", ""
    )
    parts = urlsplit(str(url))
    try:
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is not a number
        host, port = None, None
    if not parts.scheme or not host:
        return "the store"
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}" + (f":{port}" if port else "")  # never user:password@


def _timeout_of(client: Any, which: str) -> float | None:
    value = getattr(getattr(getattr(client, "meta", None), "config", None), f"{which}_timeout", None)
    return float(value) if isinstance(value, (int, float)) else None


def _attempts(client: Any) -> str:
    """The words " after N attempts", when the client's configuration (or AWS_MAX_ATTEMPTS) says N."""
    import os

    retries = getattr(getattr(getattr(client, "meta", None), "config", None), "retries", None)
    attempts = retries.get("total_max_attempts") if isinstance(retries, dict) else None
    if attempts is None and client is not None:
        attempts = os.environ.get("AWS_MAX_ATTEMPTS")
    try:
        count = int(attempts)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""
    return f" after {count} attempt{'s' if count != 1 else ''}"
