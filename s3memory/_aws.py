"""The boto3 clients s3memory builds itself: one region rule, one timeout and retry policy.

An application that passes its own clients keeps its own configuration; these apply only to
the clients built when it does not (and to the command line and the MCP server). botocore is
imported on first use, so the local default never pays for it.
"""

from __future__ import annotations

import os
from typing import Any

from ._errors import ConfigurationError

#: Seconds to connect, and to wait for each read, per attempt. botocore's 60 s, times its
#: attempts, left a hung endpoint three minutes to fail: longer than a Lambda invocation.
DEFAULT_TIMEOUT_SECONDS = 5.0
#: Attempts per request (the first and two retries) unless AWS_MAX_ATTEMPTS says otherwise.
DEFAULT_MAX_ATTEMPTS = 3
MAX_POOL_CONNECTIONS = 32
#: The signing region for a custom endpoint when none is set (see ``region_for``).
CUSTOM_ENDPOINT_REGION = "us-east-1"


def check_timeout(timeout: object, *, name: str = "timeout") -> float:
    """``timeout`` as seconds: a positive finite number (a string is parsed), at most an hour."""
    try:
        seconds = float(timeout)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigurationError(f"{name} must be a number of seconds, not {timeout!r}") from None
    if not 0 < seconds <= 3600:  # also refuses nan and inf
        raise ConfigurationError(f"{name} must be more than 0 and at most 3600 seconds, not {timeout!r}")
    return seconds


def client_config(timeout: float | None = None) -> Any:
    """A botocore ``Config``: ``timeout`` seconds to connect and per read, the standard retry
    mode (jittered backoff on throttling and transient errors) with three attempts. The
    variables ``AWS_RETRY_MODE`` and ``AWS_MAX_ATTEMPTS`` still apply: an explicit value in
    ``Config`` would override them."""
    from botocore.config import Config

    seconds = DEFAULT_TIMEOUT_SECONDS if timeout is None else check_timeout(timeout)
    retries: dict[str, Any] = {}
    if not os.environ.get("AWS_RETRY_MODE"):
        retries["mode"] = "standard"
    if not os.environ.get("AWS_MAX_ATTEMPTS"):
        retries["total_max_attempts"] = DEFAULT_MAX_ATTEMPTS
    return Config(
        connect_timeout=seconds,
        read_timeout=seconds,
        retries=retries,
        max_pool_connections=MAX_POOL_CONNECTIONS,
    )


def new_client(
    service: str,
    *,
    region_name: str | None = None,
    endpoint_url: str | None = None,
    timeout: float | None = None,
    **credentials: Any,
) -> Any:
    """A boto3 client of ``service`` with :func:`client_config`, in ``region_name`` or the
    region :func:`region_for` finds.

    Raises:
        ConfigurationError: no region, an invalid one, or a missing AWS profile.
    """
    import boto3
    from botocore.exceptions import BotoCoreError, ProfileNotFound

    region = region_name or region_for(endpoint_url=endpoint_url, what=service.upper())
    try:
        return boto3.client(
            service,
            region_name=region,
            endpoint_url=endpoint_url,
            config=client_config(timeout),
            **credentials,
        )
    except ProfileNotFound:
        raise missing_profile(aws_session()) from None
    except (BotoCoreError, ValueError) as exc:  # e.g. an endpoint URL that is not a URL
        raise ConfigurationError(f"the {service.upper()} client cannot be created: {exc}") from None


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
