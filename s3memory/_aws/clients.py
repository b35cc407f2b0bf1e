"""The AWS clients s3memory builds itself: one region rule, one timeout and retry policy.

An application that passes its own clients keeps its own configuration; these apply only to
the clients built when it does not (and to the command line and the MCP server). botocore is
imported on first use, so the local default never pays for it; boto3 is never imported
(its import, with s3transfer's, was a third of the first command's cold start): the clients
are botocore's, which is what ``boto3.client`` returns too.

They are also tuned for CPU per request (measured with ``bench/run.py``): timestamps are
parsed without ``dateutil`` (a LIST of 1,000 keys spent three quarters of its CPU there), and
checksums are computed only where S3 requires one (every body is authenticated by the
envelope's AES-GCM already). A client the application passes is never changed.
"""

from __future__ import annotations

import functools
import os
import re
import threading
from datetime import datetime
from typing import Any

from .._errors import ConfigurationError

#: Seconds to connect, and to wait for each read, per attempt. botocore's 60 s, times its
#: attempts, left a hung endpoint three minutes to fail: longer than a Lambda invocation.
DEFAULT_TIMEOUT_SECONDS = 5.0
#: Attempts per request (the first and two retries) unless AWS_MAX_ATTEMPTS says otherwise.
DEFAULT_MAX_ATTEMPTS = 3
#: As many as ``Limits.max_workers``: each worker's request has a connection of its own.
MAX_POOL_CONNECTIONS = 64
#: The signing region for a custom endpoint when none is set (see ``region_for``).
CUSTOM_ENDPOINT_REGION = "us-east-1"
#: The checksum settings for the clients s3memory builds, unless the environment sets them.
CHECKSUM_SETTINGS = {
    "request_checksum_calculation": "AWS_REQUEST_CHECKSUM_CALCULATION",
    "response_checksum_validation": "AWS_RESPONSE_CHECKSUM_VALIDATION",
}


def check_timeout(timeout: object, *, name: str = "timeout") -> float:
    """``timeout`` as seconds: a positive finite number (a string is parsed), at most an hour."""
    try:
        seconds = float(timeout)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigurationError(f"{name} must be a number of seconds, not {timeout!r}") from None
    if not 0 < seconds <= 3600:  # also refuses nan and inf
        raise ConfigurationError(f"{name} must be more than 0 and at most 3600 seconds, not {timeout!r}")
    return seconds


def client_config(timeout: float | None = None, *, connect_timeout: float | None = None) -> Any:
    """A botocore ``Config``: ``timeout`` seconds per read and to connect (``connect_timeout``,
    if given, to connect), the standard retry mode (jittered backoff on throttling and
    transient errors) with three attempts. The variables ``AWS_RETRY_MODE`` and
    ``AWS_MAX_ATTEMPTS`` still apply: an explicit value in ``Config`` would override them."""
    from botocore.config import Config

    seconds = DEFAULT_TIMEOUT_SECONDS if timeout is None else check_timeout(timeout)
    connect = seconds if connect_timeout is None else check_timeout(connect_timeout, name="connect_timeout")
    retries: dict[str, Any] = {}
    if not os.environ.get("AWS_RETRY_MODE"):
        retries["mode"] = "standard"
    if not os.environ.get("AWS_MAX_ATTEMPTS"):
        retries["total_max_attempts"] = DEFAULT_MAX_ATTEMPTS
    # "when_required": no CRC32 (and no aws-chunked body) on PutObject, no CRC check of
    # GetObject bodies; DeleteObjects still gets its required checksum. The envelope's
    # AES-GCM authenticates every body end to end, which a transport checksum does not add to.
    # botocore before 1.36 has neither option (nor its default checksums).
    checksums = {
        option: "when_required"
        for option, variable in CHECKSUM_SETTINGS.items()
        if option in Config.OPTION_DEFAULTS and not os.environ.get(variable)
    }
    return Config(
        connect_timeout=connect,
        read_timeout=seconds,
        retries=retries,
        max_pool_connections=MAX_POOL_CONNECTIONS,
        **checksums,
    )


def new_client(
    service: str,
    *,
    region_name: str | None = None,
    endpoint_url: str | None = None,
    timeout: float | None = None,
    connect_timeout: float | None = None,
    **credentials: Any,
) -> Any:
    """A client of ``service`` (as boto3 makes it) from :func:`tuned_session`, with :func:`client_config`,
    in ``region_name`` or the region :func:`region_for` finds.

    Raises:
        ConfigurationError: no region, an invalid one, or a missing AWS profile.
    """
    from botocore.exceptions import BotoCoreError, ProfileNotFound

    region = region_name or region_for(endpoint_url=endpoint_url, what=service.upper())
    try:
        session = tuned_session()
        with _session_lock:  # a session is not thread-safe; its clients are
            return session.create_client(
                service,
                region_name=region,
                endpoint_url=endpoint_url,
                config=client_config(timeout, connect_timeout=connect_timeout),
                **credentials,
            )
    except ProfileNotFound:
        raise missing_profile(aws_session()) from None
    except (BotoCoreError, ValueError) as exc:  # e.g. an endpoint URL that is not a URL
        raise ConfigurationError(f"the {service.upper()} client cannot be created: {exc}") from None


def aws_environment() -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_")))


_session_lock = threading.Lock()
_session: tuple[tuple[tuple[str, str], ...], Any] | None = None  # (the AWS_* environment, session)


def tuned_session() -> Any:
    """A botocore ``Session`` of s3memory's own whose clients parse timestamps with
    :func:`parse_timestamp` (see :func:`tune_session`).

    One per process, as boto3's default session (so its clients share one credential
    resolution, e.g. one AssumeRole), made anew when an ``AWS_*`` variable changed (a
    profile, a configuration file, credentials), so it reads the environment as
    :func:`region_for` does. boto3's default session is left as it is.
    """
    global _session
    environment = aws_environment()
    with _session_lock:
        if _session is None or _session[0] != environment:
            import botocore.session

            core = botocore.session.Session()
            tune_session(core)
            _session = environment, core
        return _session[1]


def tune_session(session: Any) -> None:
    """Make every client ``session`` (a botocore or boto3 session) creates from now on parse
    timestamps with :func:`parse_timestamp`: botocore's public ``response_parser_factory``
    component, for an application that wants the same tuning on clients of its own."""
    from botocore.parsers import ResponseParserFactory

    core = getattr(session, "_session", session)  # a boto3.Session's botocore session
    factory = ResponseParserFactory()
    factory.set_parser_defaults(timestamp_parser=parse_timestamp)
    core.register_component("response_parser_factory", factory)


_MONTHS = {name: number for number, name in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}


@functools.cache
def _s3_forms() -> tuple[re.Pattern[str], re.Pattern[str], Any]:
    """What S3 sends: ISO 8601 in UTC in XML bodies (LastModified of LIST and COPY), the
    IMF-fixdate of RFC 7231 in headers (Last-Modified of HEAD and GET); and botocore's UTC,
    dateutil's ``tzutc()``. Made on first use, not at ``import s3memory``."""
    from dateutil.tz import UTC  # type: ignore[import-untyped]

    iso = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?Z", re.ASCII)
    http = re.compile(
        r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d\d) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (\d{4}) "
        r"(\d\d):(\d\d):(\d\d) GMT",
        re.ASCII,
    )
    return iso, http, UTC


def parse_timestamp(value: Any) -> datetime:
    """botocore's ``parse_timestamp``, about 30 times faster on the two forms S3 sends
    (``2026-01-01T00:00:00.000Z``, ``Thu, 01 Jan 2026 00:00:00 GMT``), with an equal result,
    an aware datetime in UTC. Anything else (epoch numbers, other offsets, more than 6
    fractional digits, an invalid date) goes to botocore's own. Parsed field by field, not
    with ``datetime.fromisoformat``, which on Python 3.10 takes neither ``Z`` nor fractions
    of other than 3 or 6 digits."""
    if type(value) is str:
        iso, http, utc = _s3_forms()
        try:
            found = iso.fullmatch(value)
            if found is not None:
                y, mo, d, h, mi, s, fraction = found.groups()
                microsecond = int(fraction.ljust(6, "0")) if fraction else 0
                return datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), microsecond, utc)
            found = http.fullmatch(value)
            if found is not None:
                d, month, y, h, mi, s = found.groups()
                return datetime(int(y), _MONTHS[month], int(d), int(h), int(mi), int(s), 0, utc)
        except ValueError:  # e.g. 2026-02-30: botocore's own error
            pass
    from botocore.utils import parse_timestamp as parse_any

    return parse_any(value)  # type: ignore[no-any-return]


def region_for(region: str | None = None, *, endpoint_url: str | None = None, what: str = "the S3 bucket") -> str:
    """The region of a client: see :func:`resolve_region`; with a custom endpoint and no
    region, ``us-east-1``.

    Raises:
        ConfigurationError: no region is set (and no endpoint), the region is not a valid
            name, or the AWS profile does not exist.
    """
    found = resolve_region(region)
    if found is not None:
        return found[0]
    if endpoint_url:
        # An S3-compatible server (radosgw, MinIO, LocalStack) needs a region only to sign
        # requests, and takes us-east-1: botocore's own default for S3 without a region.
        return CUSTOM_ENDPOINT_REGION
    raise no_region(what)


def no_region(what: str) -> ConfigurationError:
    session = aws_session()
    return ConfigurationError(
        f"no AWS region for {what}: set one with --region or S3MEMORY_REGION, AWS_REGION, "
        f"AWS_DEFAULT_REGION, or region = ... in the AWS profile {session.profile or 'default'!r} "
        f"of {session.get_config_variable('config_file')}"
    )


def resolve_region(region: str | None = None) -> tuple[str, str] | None:
    """The AWS region and where it was found, the first of: ``region`` (the setting,
    ``--region`` or ``S3MEMORY_REGION``), ``AWS_REGION`` (which botocore ignores; AWS Lambda
    and many shells set it), ``AWS_DEFAULT_REGION``, the region of the AWS profile
    (``AWS_PROFILE``, else ``default``) in the AWS config file. None if none is set; an empty
    value is no value.

    Raises:
        ConfigurationError: the region is not a valid region name, or the AWS profile
            (needed only if no variable gives a region) does not exist or cannot be read.
    """
    from botocore.exceptions import BotoCoreError, InvalidRegionError, ProfileNotFound
    from botocore.utils import validate_region_name

    found: tuple[str, str] | None = None
    if region:
        found = region, "--region or S3MEMORY_REGION"
    else:
        for variable in ("AWS_REGION", "AWS_DEFAULT_REGION"):
            if os.environ.get(variable):
                found = os.environ[variable], variable
                break
        else:
            session = aws_session()
            try:
                value = session.get_scoped_config().get("region")
            except ProfileNotFound:
                raise missing_profile(session) from None
            except BotoCoreError as exc:  # a configuration file that cannot be parsed
                raise ConfigurationError(f"the AWS configuration cannot be read: {exc}") from None
            if isinstance(value, str) and value:
                found = value, f"the AWS profile {session.profile or 'default'!r}"
    if found is not None:
        try:
            validate_region_name(found[0])
        except InvalidRegionError:
            raise ConfigurationError(
                f"the AWS region {found[0]!r} (from {found[1]}) is not a valid region name"
            ) from None
    return found


def aws_session() -> Any:
    """A botocore session on the current environment and AWS configuration files."""
    import botocore.session

    return botocore.session.Session()


def missing_profile(session: Any) -> ConfigurationError:
    return ConfigurationError(
        f"the AWS profile {session.profile!r} (AWS_PROFILE) is in neither "
        f"{session.get_config_variable('config_file')} nor {session.get_config_variable('credentials_file')}"
    )
