"""When :class:`~s3memory._aws.crt.CrtS3Client` retries a request: as botocore's standard
retry mode does, decided by botocore's own classes (``botocore.retries.standard``).

awscrt's HTTP connections neither retry nor time out a read (awscrt's ``S3Client``, used
before, held a request to a server that never answered for 33 s where botocore gives up
after 15 s, and retried no 429 or ``Throttling`` answer). Each attempt is bounded
here (:func:`attempt_seconds`), and what is retried (throttling, 5xx, ``RequestTimeout``,
failures to connect or to read), how long to back off (full jitter, at most 20 s) and when
to stop (the attempts, the client's retry quota) is what the installed botocore decides.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CONNECT_SLACK_SECONDS", "TIMED_OUT", "Retries", "attempt_seconds", "transport_error"]

#: Seconds an attempt's bound leaves beyond the connect timeout, so that a connection
#: that cannot be made fails with awscrt's own connect timeout (botocore's
#: ``ConnectTimeoutError``), not with the attempt's.
CONNECT_SLACK_SECONDS = 0.1
#: The failure of an attempt that had no answer within :func:`attempt_seconds`.
TIMED_OUT = "s3memory: no answer within the attempt's timeout"


def attempt_seconds(connect: float, read: float) -> float:
    """How long one attempt may wait for its whole answer.

    awscrt delivers an answer only once it has all of it, so nothing tells a request still
    connecting from one waiting for its first byte. botocore's attempt takes up to
    ``connect`` to connect, then up to ``read`` per read: ``connect + read`` would give a
    server that accepts and never answers twice botocore's time (30 s to fail instead of
    15 s with the defaults), the case this bound exists for. So the larger of the two: an
    unreachable endpoint fails as awscrt's connect timeout, a silent one after ``read`` as
    with botocore (after ``connect`` if that is longer). Not covered: an answer whose
    connection took long and whose first byte came late too, or a large one arriving slowly
    for longer than the bound (botocore's bound is per read); S3's answers to these six
    verbs are small (a GET reads 8 MiB at most)."""
    return max(read, connect + CONNECT_SLACK_SECONDS)


class _Answer:
    """The part of botocore's ``AWSResponse`` its retry classes read."""

    __slots__ = ("headers", "status_code")

    def __init__(self, status_code: int, headers: Any) -> None:
        self.status_code = status_code
        self.headers = headers


_SUCCESS = _Answer(200, {})
_NO_STATE: dict[str, Any] = {}  # a request that was never retried (only read)


class Retries:
    """One client's retry policy and retry quota (botocore's are per client too), for
    ``attempts`` attempts per request."""

    def __init__(self, service_model: Any, attempts: int) -> None:
        from botocore.retries import quota, standard

        self.attempts = attempts
        self._model = service_model
        self._context = standard.RetryContext
        self._conditions = standard.StandardRetryConditions(max_attempts=attempts)
        detector = standard.ThrottlingErrorDetector(standard.RetryEventAdapter())
        try:  # a newer botocore's: a shorter backoff for errors that are not throttling
            self._backoff = standard.ExponentialBackoff(service_name="s3", throttling_detector=detector)
        except TypeError:
            self._backoff = standard.ExponentialBackoff()
        try:  # and a cheaper retry of throttling, out of the quota
            self._quota = standard.RetryQuotaChecker(quota.RetryQuota(), detector)
        except TypeError:
            self._quota = standard.RetryQuotaChecker(quota.RetryQuota())

    def delay(self, operation: str, attempt: int, error: BaseException, request: dict[str, Any]) -> float | None:
        """Seconds to wait before attempt ``attempt + 1`` of a request that failed with
        ``error`` (a ``ClientError`` or a botocore connection error), or None: no retry, and
        ``error``'s ``ResponseMetadata`` says so as botocore's would (``RetryAttempts``,
        ``MaxAttemptsReached``, ``RetryQuotaReached``). ``request`` is the request's own
        state across attempts (the quota it holds)."""
        response = getattr(error, "response", None)
        metadata = response.get("ResponseMetadata") if isinstance(response, dict) else None
        answer = None
        if metadata is not None:
            answer = _Answer(int(metadata.get("HTTPStatusCode") or 0), metadata.get("HTTPHeaders") or {})
        context = self._context(
            attempt_number=attempt,
            operation_model=self._model.operation_model(operation),
            parsed_response=response if metadata is not None else None,
            http_response=answer,
            caught_exception=None if metadata is not None else error,
            request_context=request,
        )
        if self._conditions.is_retryable(context) and self._quota.acquire_retry_quota(context):
            return float(self._backoff.delay_amount(context))
        if metadata is not None:
            metadata.update(context.get_retry_metadata(), RetryAttempts=attempt - 1)
        return None

    def answered(self, attempt: int, request: dict[str, Any] | None) -> dict[str, Any] | None:
        """A request answered on attempt ``attempt``: its quota back, and what its
        ``ResponseMetadata`` says of its retries where botocore's would differ from
        ``RetryAttempts: 0`` (``MaxAttemptsReached`` on the last attempt, even a success)."""
        self._quota.release_retry_quota(request or _NO_STATE, _SUCCESS)
        if attempt == 1 and self.attempts > 1:
            return None
        metadata: dict[str, Any] = {"RetryAttempts": attempt - 1}
        if attempt >= self.attempts:
            metadata["MaxAttemptsReached"] = True
        return metadata


def transport_error(name: str, exc: BaseException | None, endpoint: str) -> Exception:
    """What botocore raises for awscrt's failure ``name`` (``exc``) to connect, for a
    timeout or a broken connection, naming ``endpoint`` (``map_aws_error`` turns them into
    ``StorageUnavailableError``); botocore's standard mode retries each of them."""
    from botocore import exceptions as errors

    kwargs: dict[str, Any] = {"endpoint_url": endpoint}
    if name == TIMED_OUT or ("TIMEOUT" in name and name != "AWS_IO_SOCKET_TIMEOUT"):
        cls = errors.ReadTimeoutError
    elif name == "AWS_IO_SOCKET_TIMEOUT":  # connecting timed out
        cls = errors.ConnectTimeoutError
    elif "TLS" in name or "SSL" in name:
        cls, kwargs["error"] = errors.SSLError, exc
    elif "DNS" in name or any(word in name for word in ("REFUSED", "NO_ROUTE", "NETWORK_DOWN", "UNREACHABLE")):
        cls = errors.EndpointConnectionError
    elif "CONNECTION" in name or "CLOSED" in name or name.startswith("AWS_IO_SOCKET"):
        cls = errors.ConnectionClosedError
    else:
        cls, kwargs = errors.HTTPClientError, {"error": exc}
    error: Exception = cls(**kwargs)
    return error
